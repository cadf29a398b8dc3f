"""The simulation driver's HDF5 files as other programs see them (h5py): the GADGET-4 layout of
snapshots and restart files written by fmmkit (names, attribute and dataset types, shapes,
values bit for bit), and files written the way GADGET-4 writes them, read by fmmkit.

The C side is tests/unit/sim_io_tool (FMMKIT_SIM_IO_TOOL, set by ctest). Skipped without h5py
or without the tool; the tool exits 77 in a build without HDF5."""
import os
import subprocess

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

N = 100


def tool(*args):
    path = os.environ.get("FMMKIT_SIM_IO_TOOL")
    if not path or not os.path.exists(path):
        pytest.skip("FMMKIT_SIM_IO_TOOL is not set (ctest sets it to tests/unit/sim_io_tool)")
    run = subprocess.run([path, *map(str, args)], capture_output=True, text=True, timeout=60)
    if run.returncode == 77:
        pytest.skip("fmmkit was built without HDF5")
    return run


def attr(group, name):
    """(value, dtype, shape) of an attribute as stored."""
    a = group.attrs.get_id(name)
    return group.attrs[name], a.dtype, a.shape


def expected():
    """The particles sim_io_tool writes (exact binary fractions)."""
    j = np.arange(3 * N, dtype=np.float64)
    i = np.arange(N, dtype=np.float64)
    return dict(pos=(j / 8 - 20).reshape(N, 3), vel=(1 - j / 16).reshape(N, 3),
                mass=(i + 1) / 64, soft=(i % 4 + 1) / 128, ids=1000 + np.arange(N, dtype=np.uint64),
                acc=(j / 32).reshape(N, 3), pot=-i / 4)


def test_snapshot_layout(tmp_path):
    path = tmp_path / "snapshot_000.hdf5"
    run = tool("write", path)
    assert run.returncode == 0, run.stderr
    assert sorted(os.listdir(tmp_path)) == ["snapshot_000.hdf5", "snapshot_000.hdf5.restart"]
    want = expected()
    with h5py.File(path, "r") as f:
        assert set(f.keys()) == {"Header", "PartType1"}
        h = f["Header"]
        # GADGET-4's types (src/io/snap_io.cc): 6 x uint64 counts, 6 doubles, scalar doubles,
        # an int32 file count.
        for name in ("NumPart_ThisFile", "NumPart_Total"):
            value, dtype, shape = attr(h, name)
            assert dtype == np.uint64 and shape == (6,)
            assert list(value) == [0, N, 0, 0, 0, 0]
        value, dtype, shape = attr(h, "MassTable")
        assert dtype == np.float64 and shape == (6,) and not value.any()
        for name, v in (("Time", 1.5), ("Redshift", 0.0), ("BoxSize", 0.0),
                        ("UnitLength_in_cm", 3.085678e21), ("UnitMass_in_g", 1.989e43),
                        ("UnitVelocity_in_cm_per_s", 1e5)):
            value, dtype, shape = attr(h, name)
            assert dtype == np.float64 and shape == () and value == v, name
        value, dtype, shape = attr(h, "NumFilesPerSnapshot")
        assert dtype == np.int32 and shape == () and value == 1
        p = f["PartType1"]
        assert set(p.keys()) == {"Coordinates", "Velocities", "ParticleIDs", "Masses", "Softenings"}
        for name, dtype, shape, key in (("Coordinates", np.float64, (N, 3), "pos"),
                                        ("Velocities", np.float64, (N, 3), "vel"),
                                        ("ParticleIDs", np.uint64, (N,), "ids"),
                                        ("Masses", np.float64, (N,), "mass"),
                                        ("Softenings", np.float64, (N,), "soft")):
            d = p[name]
            assert d.dtype == dtype and d.shape == shape, name
            assert np.array_equal(d[...], want[key]), name


def test_restart_layout(tmp_path):
    path = tmp_path / "snap.hdf5"
    assert tool("write", path).returncode == 0
    want = expected()
    with h5py.File(str(path) + ".restart", "r") as f:
        assert set(f.keys()) == {"Header", "PartType1", "Restart"}
        r = f["Restart"]
        assert set(r.keys()) == {"Accelerations", "Potential", "State"}
        assert r["Accelerations"].dtype == np.float64 and r["Accelerations"].shape == (N, 3)
        assert np.array_equal(r["Accelerations"][...], want["acc"])
        assert r["Potential"].dtype == np.float64 and np.array_equal(r["Potential"][...], want["pot"])
        assert r["State"].dtype == np.uint8 and r["State"].shape == (256,)
        assert np.array_equal(r["State"][...], np.arange(256, dtype=np.uint8))
        assert np.array_equal(f["PartType1/Coordinates"][...], want["pos"])


def write_gadget4(path, coords, masses=None, mass_table=0.25):
    """A snapshot the way GADGET-4 writes one by default: float32 coordinates and velocities,
    uint32 IDs, masses in MassTable, units in /Parameters, /Config present."""
    n = len(coords)
    with h5py.File(path, "w") as f:
        h = f.create_group("Header")
        counts = np.array([0, n, 0, 0, 0, 0], dtype=np.uint64)
        h.attrs["NumPart_ThisFile"] = counts
        h.attrs["NumPart_Total"] = counts
        h.attrs["MassTable"] = np.array([0, mass_table, 0, 0, 0, 0], dtype=np.float64)
        h.attrs["Time"] = np.float64(0.5)
        h.attrs["Redshift"] = np.float64(1.0)
        h.attrs["BoxSize"] = np.float64(50.0)
        h.attrs["NumFilesPerSnapshot"] = np.int32(1)
        par = f.create_group("Parameters")
        par.attrs["UnitLength_in_cm"] = 3.085678e24
        par.attrs["UnitMass_in_g"] = 1.989e43
        par.attrs["UnitVelocity_in_cm_per_s"] = 1e5
        f.create_group("Config")
        p = f.create_group("PartType1")
        p["Coordinates"] = coords.astype(np.float32)
        p["Velocities"] = (-coords).astype(np.float32)
        p["ParticleIDs"] = np.arange(7, 7 + n, dtype=np.uint32)
        if masses is not None:
            p["Masses"] = masses.astype(np.float32)


def parse(stdout):
    return dict(line.split("=", 1) for line in stdout.split())


def test_reads_gadget4_file(tmp_path):
    path = tmp_path / "ics.hdf5"
    coords = np.random.default_rng(1).random((64, 3)) * 50
    write_gadget4(path, coords)
    run = tool("read", path)
    assert run.returncode == 0, run.stderr
    got = parse(run.stdout)
    c32 = coords.astype(np.float32).astype(np.float64)
    assert int(got["n"]) == 64
    assert [float(v) for v in got["pos_first"].split(",")] == list(c32[0])
    assert [float(v) for v in got["pos_last"].split(",")] == list(c32[-1])
    assert [float(v) for v in got["vel_first"].split(",")] == list(-c32[0])
    assert float(got["mass_first"]) == 0.25 and float(got["mass_last"]) == 0.25
    assert int(got["id_first"]) == 7 and int(got["id_last"]) == 70 and got["soft"] == "no"
    assert float(got["time"]) == 0.5 and float(got["redshift"]) == 1.0
    assert float(got["box_size"]) == 50.0
    assert float(got["unit_length_cm"]) == 3.085678e24 and float(got["unit_velocity_cm_per_s"]) == 1e5


def test_refuses_bad_files(tmp_path):
    coords = np.ones((8, 3))
    nan = coords.copy()
    nan[3, 1] = np.nan
    write_gadget4(tmp_path / "nan.hdf5", nan)
    write_gadget4(tmp_path / "negative.hdf5", coords, masses=-np.ones(8))
    write_gadget4(tmp_path / "nomass.hdf5", coords, mass_table=0.0)
    for name, words in (("nan.hdf5", ["Coordinates[10]", "NaN"]),
                        ("negative.hdf5", ["Masses[0]", ">= 0"]),
                        ("nomass.hdf5", ["Masses", "no masses"])):
        run = tool("read", tmp_path / name)
        assert run.returncode == 1 and run.stdout == "", name
        assert all(w in run.stderr for w in words), run.stderr
        assert name in run.stderr
