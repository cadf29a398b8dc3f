"""`fmmkit sim` comoving runs end to end (docs/cosmology.md, "Comoving integration"): --ic cosmo
with a small sphere writing snapshots at listed redshifts whose GADGET headers h5py reads
(Time = a, Redshift, Omega0, OmegaLambda, HubbleParam, the units, also in /Parameters;
velocities p / a^1.5), the diagnostics' columns and the Layzer-Irvine error, a restart
continued bit for bit, a snapshot read back as initial conditions, and bad options.

FMMKIT_CLI names the executable (ctest sets it); h5py is optional (its checks skip without it).
"""
import csv
import json

import numpy as np
import pytest

from test_sim import h5py_or_skip, no_hdf5, run

COSMO = ["--ic", "cosmo", "--n", 2000, "--radius", 12, "--z-start", 49, "--method", "tree",
         "--theta", 0.6, "--softening", 0.1, "--quiet"]


def test_cosmo_run(tmp_path):
    out = tmp_path / "run"
    r = run(*COSMO, "--z-end", 0, "--steps", 48, "--snap-z", "3,1,0", "--diag-every", 1,
            "--out", out, "--png", "--png-extent", 30, "--json")
    if no_hdf5(r):
        pytest.skip("built without HDF5")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["a"] == 1 and abs(res["z"]) < 1e-15 and not res["interrupted"]
    assert abs(res["layzer_irvine_error"]) < 0.05
    rows = list(csv.DictReader(open(out / "diagnostics.csv")))
    assert float(rows[0]["a"]) == 0.02 and float(rows[-1]["a"]) == 1
    assert {"a", "z", "kinetic", "potential", "layzer_irvine", "li_error",
            "interactions_total"} <= set(rows[0])
    h5py = h5py_or_skip()
    # snapshot 0 at the start (a listed time is only the three redshifts), then z = 3, 1, 0
    names = sorted(p.name for p in out.glob("snapshot_*.hdf5"))
    assert names == ["snapshot_000.hdf5", "snapshot_001.hdf5", "snapshot_002.hdf5"]
    assert (out / "snapshot_000.png").exists()
    for name, z in zip(names, (3, 1, 0)):
        with h5py.File(out / name, "r") as f:
            h = f["Header"].attrs
            assert h["Time"] == pytest.approx(1 / (1 + z), rel=1e-15)
            assert h["Redshift"] == pytest.approx(z, abs=1e-12)
            assert h["Omega0"] == 0.3 and h["OmegaLambda"] == 0.7 and h["HubbleParam"] == 0.7
            assert h["UnitLength_in_cm"] == pytest.approx(3.085678e24)
            assert h["UnitVelocity_in_cm_per_s"] == 1e5
            assert f["Parameters"].attrs["ComovingIntegrationOn"] == 1
            assert f["Parameters"].attrs["Omega0"] == 0.3
            assert f["PartType1/Coordinates"].shape == f["PartType1/Velocities"].shape


def test_cosmo_defaults(tmp_path):
    """--ic cosmo alone: fp32 forces, the treecode from --theta, a diagnostics row every step
    (interactions counted), so --out DIR needs no other output option."""
    out = tmp_path / "run"
    args = [a for a in COSMO if a not in ("--method", "tree")]
    r = run(*args, "--z-end", 40, "--steps", 4, "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["method"] == "tree" and res["precision"] == "fp32"
    rows = list(csv.DictReader(open(out / "diagnostics.csv")))
    assert [int(x["step"]) for x in rows] == [0, 1, 2, 3, 4]
    assert all(int(x["interactions"]) > 2000 for x in rows)


def test_cosmo_restart_and_snapshot_ic(tmp_path):
    full, part = tmp_path / "full", tmp_path / "part"
    args = [*COSMO, "--spacing", "loga", "--dt", np.log(50) / 20, "--snap-every", 20]
    a = run(*args, "--steps", 20, "--out", full)
    if no_hdf5(a):
        pytest.skip("built without HDF5")
    assert a.returncode == 0, a.stderr
    # 8 steps with a restart file, then 12 from it: the same snapshot at step 20, bit for bit
    b = run(*args, "--steps", 8, "--restart-every", 8, "--out", part)
    assert b.returncode == 0, b.stderr
    c = run("--restart", part / "restart.h5", "--steps", 12, "--snap-every", 20, "--out", part,
            "--quiet")
    assert c.returncode == 0, c.stderr
    h5py = h5py_or_skip()
    with h5py.File(full / "snapshot_001.hdf5", "r") as f, \
            h5py.File(part / "snapshot_001.hdf5", "r") as g:
        assert f["Header"].attrs["Time"] == g["Header"].attrs["Time"]
        for d in ("Coordinates", "Velocities"):
            assert np.array_equal(f["PartType1/" + d][...], g["PartType1/" + d][...])
    # a snapshot as initial conditions: Time is the start, velocities back to momenta
    d = run("--ic", full / "snapshot_000.hdf5", "--comoving", "--z-end", 0, "--steps", 20,
            "--spacing", "loga", "--method", "tree", "--theta", 0.6, "--softening", 0.1,
            "--quiet", "--json")
    assert d.returncode == 0, d.stderr
    res = json.loads(d.stdout)
    assert res["a"] == 1 and res["time_start"] == 0.02


@pytest.mark.parametrize("args, message", [
    (["--ic", "cosmo", "--steps", 10, "--z-end", 0, "--spacing", "z"], "--spacing"),
    (["--ic", "cosmo", "--steps", 10, "--z-end", 0, "--cosmology", "nope"], "--cosmology"),
    (["--ic", "cosmo", "--steps", 10], "--z-end"),
    (["--ic", "cosmo", "--steps", 10, "--z-end", 60], "z_start > z_end"),
    (["--ic", "cosmo", "--steps", 10, "--z-end", 0, "--hubble", -0.7], "h"),
    (["--ic", "cosmo", "--steps", 10, "--z-end", 0, "--adaptive", "--softening", 0.1],
     "adaptive"),
    (["--ic", "plummer", "--steps", 10, "--dt", 0.1, "--omega-m", 0.3], "comoving"),
])
def test_bad_cosmo_options(args, message):
    r = run(*args, "--n", 500, "--quiet")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr, r.stderr
