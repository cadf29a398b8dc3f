"""`fmmkit sim` end to end: a Kepler orbit's energy error, the files of a Plummer run and their
HDF5 layout, a restart continued bit for bit, Ctrl-C after a whole step, and bad options.

FMMKIT_CLI names the executable (ctest sets it); h5py is optional (its checks skip without it).
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
CLI = os.environ.get("FMMKIT_CLI") or str(HERE.parents[1] / "build" / "cli" / "fmmkit")
SLOW = 3 if os.environ.get("FMMKIT_SANITIZED") else 1


def run(*args, timeout=120):
    if not os.path.exists(CLI):
        pytest.fail(f"fmmkit executable not found at {CLI}; set FMMKIT_CLI")
    return subprocess.run([CLI, "sim", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout * SLOW)


def h5py_or_skip():
    return pytest.importorskip("h5py")


def no_hdf5(r):
    return r.returncode == 2 and "HDF5" in r.stderr


PLUMMER = ["--ic", "plummer", "--n", 256, "--dt", 0.01, "--softening", 0.05, "--quiet"]


def test_kepler_energy_error():
    # e = 0.5, 2 periods at 1000 steps a period, direct: the leapfrog keeps E to ~1e-13
    period = 2 * np.pi  # a = 1, M = 1, G = 1
    r = run("--ic", "kepler", "--e", 0.5, "--steps", 2000, "--dt", period / 1000,
            "--method", "direct", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["n"] == 2 and out["steps"] == 2000 and out["method"] == "direct"
    assert out["backend"] == "cpu" and out["interrupted"] is False
    assert abs(out["time"] - 2 * period) < 1e-9
    assert abs(out["energy_start"] + 0.125) < 1e-12  # E = -G m1 m2 / (2a)
    assert abs(out["energy_error"]) < 1e-9
    assert out["steps_per_s"] > 0
    table = run("--ic", "kepler", "--steps", 100, "--dt", 0.01, "--method", "direct")
    assert table.returncode == 0, table.stderr
    line = next(s for s in table.stdout.splitlines() if "energy error" in s)
    assert abs(float(line.split()[2])) < 1e-6
    assert "method direct on cpu" in table.stdout


def test_plummer_files(tmp_path):
    out = tmp_path / "run"
    r = run(*PLUMMER, "--steps", 10, "--method", "tree", "--theta", 0.5, "--snap-every", 5,
            "--png", "--diag-every", 5, "--out", out)
    if no_hdf5(r):
        pytest.skip("built without HDF5")
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in out.iterdir())
    want = ["diagnostics.csv"] + [f"snapshot_{k:03d}.{x}" for k in range(3)
                                  for x in ("hdf5", "png")]
    if "libpng" in r.stderr:
        want = [w for w in want if not w.endswith(".png")]
    assert names == sorted(want)
    rows = (out / "diagnostics.csv").read_text().splitlines()
    assert rows[0].startswith("step,time,dt,kinetic,potential,total")
    assert [int(s.split(",")[0]) for s in rows[1:]] == [0, 5, 10]
    assert (out / "snapshot_000.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    h5py = h5py_or_skip()
    with h5py.File(out / "snapshot_002.hdf5", "r") as f:
        h = f["Header"].attrs
        assert list(h["NumPart_ThisFile"]) == [0, 256, 0, 0, 0, 0]
        assert list(h["NumPart_Total"]) == [0, 256, 0, 0, 0, 0]
        assert abs(float(h["Time"]) - 0.1) < 1e-12
        assert int(h["NumFilesPerSnapshot"]) == 1
        g = f["PartType1"]
        assert g["Coordinates"].shape == (256, 3) and g["Coordinates"].dtype == np.float64
        assert g["Velocities"].shape == (256, 3)
        assert g["Masses"].shape == (256,) and abs(g["Masses"][()].sum() - 1) < 1e-12
        assert sorted(g["ParticleIDs"][()]) == list(range(1, 257))


def test_restart_bit_for_bit(tmp_path):
    h5py = h5py_or_skip()
    common = [*PLUMMER, "--method", "tree", "--theta", 0.5, "--snap-every", 10,
              "--restart-every", 10]
    r = run(*common, "--steps", 20, "--out", tmp_path / "full")
    if no_hdf5(r):
        pytest.skip("built without HDF5")
    assert r.returncode == 0, r.stderr
    r = run(*common, "--steps", 10, "--out", tmp_path / "half")  # restart.h5 at step 10
    assert r.returncode == 0, r.stderr
    r = run("--restart", tmp_path / "half" / "restart.h5", "--steps", 10, "--snap-every", 10,
            "--out", tmp_path / "cont", "--quiet", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["step"] == 20
    assert sorted(p.name for p in (tmp_path / "cont").iterdir()) == ["snapshot_002.hdf5"]
    with h5py.File(tmp_path / "full" / "snapshot_002.hdf5", "r") as a, \
            h5py.File(tmp_path / "cont" / "snapshot_002.hdf5", "r") as b:
        for name in ("Coordinates", "Velocities", "Masses", "ParticleIDs"):
            x, y = a["PartType1"][name][()], b["PartType1"][name][()]
            assert x.tobytes() == y.tobytes(), name
        assert a["Header"].attrs["Time"] == b["Header"].attrs["Time"]


def test_ic_from_snapshot(tmp_path):
    r = run(*PLUMMER, "--steps", 0, "--snap-every", 1, "--out", tmp_path)
    if no_hdf5(r):
        pytest.skip("built without HDF5")
    assert r.returncode == 0, r.stderr
    r = run("--ic", tmp_path / "snapshot_000.hdf5", "--steps", 3, "--dt", 0.01,
            "--softening", 0.05, "--method", "direct", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["n"] == 256 and out["step"] == 3


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_stops_after_a_whole_step():
    p = subprocess.Popen([CLI, "sim", "--ic", "kepler", "--steps", str(10**9), "--dt", "1e-3",
                          "--quiet", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30 * SLOW)
    assert p.returncode == -signal.SIGINT, err
    assert "interrupted: stopped after step" in err
    summary = json.loads(out)
    assert summary["interrupted"] is True and 0 < summary["steps"] < 10**9


@pytest.mark.parametrize("args, message", [
    ([], "--ic is required"),
    (["--ic", "plummer", "--dt", 0.1], "--steps is required"),
    (["--ic", "plummer", "--steps", 1], "--dt is required"),
    (["--ic", "plummer", "--steps", 1, "--dt", -1], "the step must be > 0"),
    (["--ic", "plummer", "--steps", -1, "--dt", 1], "out of range"),
    (["--ic", "plummer", "--steps", 1, "--dt", "nan"], "not a finite number"),
    (["--ic", "plummer", "--n", 0, "--steps", 1, "--dt", 1], "out of range"),
    (["--ic", "galaxy", "--steps", 1, "--dt", 1], "neither plummer, cold nor kepler"),
    (["--ic", "kepler", "--e", 1.0, "--steps", 1, "--dt", 1], "eccentricity"),
    (["--ic", "kepler", "--n", 5, "--steps", 1, "--dt", 1], "--n and --seed"),
    (["--ic", "cold", "--e", 0.1, "--steps", 1, "--dt", 1], "--e is for --ic kepler"),
    (["--ic", "cold", "--steps", 1, "--dt", 1, "--method", "magic"], "unknown method"),
    (["--ic", "cold", "--steps", 1, "--dt", 1, "--backend", "tpu"], "unknown backend"),
    (["--ic", "cold", "--steps", 1, "--dt", 1, "--precision", "fp16"], "unknown precision"),
    (["--ic", "cold", "--steps", 1, "--dt", 1, "--theta", 1.5], "--theta"),
    (["--ic", "cold", "--steps", 1, "--dt", 1, "--eps", 0], "--eps"),
    (["--ic", "cold", "--steps", 1, "--dt", 1, "--softening", -1], "--softening"),
    (["--ic", "cold", "--steps", 1, "--dt", 1, "--spline"], "--spline needs"),
    (["--ic", "cold", "--steps", 1, "--adaptive"], "--adaptive needs"),
    (["--ic", "cold", "--steps", 1, "--dt", 1, "--eta", 0.1], "--eta is for --adaptive"),
    (["--ic", "cold", "--steps", 1, "--dt", 1, "--png"], "--snap-every"),
    (["--ic", "cold", "--steps", 1, "--dt", 1, "--out", "x"], "nothing to write"),
    (["--ic", "cold", "--steps", 1, "--dt", 1, "--frobnicate"], "unknown option"),
    (["--restart", "r.h5", "--steps", 1, "--dt", 1], "options stored in"),
    (["--restart", "r.h5", "--ic", "cold", "--steps", 1], "exclude each other"),
])
def test_bad_options(args, message):
    r = run(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr
    assert r.stderr.startswith("fmmkit sim: ")
    assert r.stdout == ""


def test_bad_files(tmp_path):
    r = run("--restart", tmp_path / "missing.h5", "--steps", 1)
    assert r.returncode == 2 and r.stderr.startswith("fmmkit sim: "), r.stderr
    bad = tmp_path / "bad.hdf5"
    bad.write_bytes(b"not an HDF5 file")
    r = run("--ic", bad, "--steps", 1, "--dt", 0.1)
    assert r.returncode == 2 and r.stderr.startswith("fmmkit sim: "), r.stderr


def test_help():
    r = run("--help")
    assert r.returncode == 0 and "--snap-every" in r.stdout and "--restart FILE" in r.stdout
