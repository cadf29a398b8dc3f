"""`fmmkit eval` with .npz archives and HDF5 datasets (docs/cli.md, "File formats"): round trips
in every format, converted inputs (int64, Fortran order, float32), archives of several arrays,
nested groups, outputs added to existing files, and the errors (status 2, one message).

Run like test_cli.py: FMMKIT_CLI names the executable. The HDF5 tests need h5py (skipped
without it); a build without libzip or libhdf5 is told by its refusal and skips those tests.
"""
import numpy as np
import pytest

from test_cli import direct, files, run

try:
    import h5py
except ImportError:  # pragma: no cover - h5py is optional
    h5py = None

rng = np.random.default_rng(38)
X = rng.random((40, 3))
Q = rng.uniform(-1, 1, 40)
Y = rng.random((7, 3))


def built_with(tmp, fmt):
    """Skips unless this fmmkit reads fmt ('npz' or 'h5')."""
    probe = tmp / f"probe.{fmt}"
    r = run("eval", "--sources", f"{probe}:x", "--charges", f"{probe}:q", "--out-pot",
            tmp / "probe_out.npy")
    if "built without" in r.stderr:
        pytest.skip(f"this fmmkit was built without {fmt} support")


def needs_h5py():
    if h5py is None:
        pytest.skip("h5py is not installed")


def save(tmp, fmt, arrays, name="in"):
    """arrays {name: array} into one file of fmt; returns {name: the command-line spec}."""
    if fmt == "npy":
        for k, a in arrays.items():
            np.save(tmp / f"{name}_{k}.npy", a)
        return {k: tmp / f"{name}_{k}.npy" for k in arrays}
    if fmt in ("npz", "npz_compressed"):
        (np.savez if fmt == "npz" else np.savez_compressed)(tmp / f"{name}.npz", **arrays)
        return {k: f"{tmp / name}.npz:{k}" for k in arrays}
    with h5py.File(tmp / f"{name}.h5", "a") as f:
        for k, a in arrays.items():
            f[f"inputs/deep/{k}"] = a
    return {k: f"{tmp / name}.h5:/inputs/deep/{k}" for k in arrays}


def load(spec):
    """The array an output spec names."""
    spec = str(spec)
    if ".npz:" in spec:
        path, member = spec.split(".npz:")
        with np.load(path + ".npz") as z:
            return z[member]
    if ".h5:" in spec:
        path, member = spec.split(".h5:")
        with h5py.File(path + ".h5", "r") as f:
            return f[member][()]
    return np.load(spec)


def one_message(r):
    lines = [line for line in r.stderr.splitlines() if line.startswith("fmmkit eval:")]
    assert len(lines) == 1, r.stderr
    return lines[0]


def prepare(tmp, fmt):
    if fmt == "h5":
        needs_h5py()
    if fmt != "npy":
        built_with(tmp, "h5" if fmt == "h5" else "npz")


@pytest.mark.parametrize("out_fmt", ["npy", "npz", "h5"])
@pytest.mark.parametrize("in_fmt", ["npy", "npz", "npz_compressed", "h5"])
def test_round_trip(tmp_path, in_fmt, out_fmt):
    prepare(tmp_path, in_fmt)
    prepare(tmp_path, out_fmt)
    spec = save(tmp_path, in_fmt, {"x": X, "q": Q, "y": Y})
    outs = {"npy": (tmp_path / "P.npy", tmp_path / "G.npy"),
            "npz": (f"{tmp_path}/R.npz:pot", f"{tmp_path}/R.npz:grad"),
            "h5": (f"{tmp_path}/R.h5:/results/run1/pot", f"{tmp_path}/R.h5:/results/run1/grad")}
    pot, grad = outs[out_fmt]
    r = run("eval", "--sources", spec["x"], "--charges", spec["q"], "--targets", spec["y"],
            "--out-pot", pot, "--out-grad", grad, "--method", "direct")
    assert r.returncode == 0, r.stderr
    want_pot, want_grad = direct("laplace", X, Q, Y)
    assert np.allclose(load(pot), want_pot, rtol=1e-13, atol=0)
    assert np.allclose(load(grad), want_grad, rtol=1e-13, atol=0)
    assert load(pot).dtype == np.float64 and load(grad).shape == (7, 3)
    assert not [n for n in files(tmp_path) if ".tmp." in n]


@pytest.mark.parametrize("fmt", ["npz", "h5"])
def test_complex_round_trip(tmp_path, fmt):
    prepare(tmp_path, fmt)
    x = rng.random((12, 2))
    q = rng.uniform(-1, 1, 12) + 1j * rng.uniform(-1, 1, 12)
    spec = save(tmp_path, fmt, {"x": x, "q": q})
    out = f"{tmp_path}/R.{fmt}:" + ("/c/pot" if fmt == "h5" else "pot")
    r = run("eval", "--sources", spec["x"], "--charges", spec["q"], "--out-pot", out,
            "--kernel", "cauchy2d", "--method", "direct")
    assert r.returncode == 0, r.stderr
    got = load(out)
    assert got.dtype == np.complex128
    assert np.allclose(got, direct("cauchy2d", x, q)[0], rtol=1e-12, atol=0)


@pytest.mark.parametrize("fmt", ["npz", "npz_compressed", "h5"])
@pytest.mark.parametrize("case", ["int64", "fortran", "float32"])
def test_converted_inputs(tmp_path, fmt, case):
    prepare(tmp_path, fmt)
    if case == "int64":
        x, q = (X * 1000).astype(np.int64), np.arange(-20, 20).astype(np.int64)
    elif case == "fortran":
        x, q = np.asfortranarray(X), Q
        assert not x.flags.c_contiguous
    else:
        x, q = X.astype(np.float32), Q.astype(np.float32)
    spec = save(tmp_path, fmt, {"x": x, "q": q})
    r = run("eval", "--sources", spec["x"], "--charges", spec["q"], "--out-pot",
            tmp_path / "P.npy", "--method", "direct")
    assert r.returncode == 0, r.stderr
    want = direct("laplace", x.astype(float), q.astype(float))[0]
    assert np.allclose(np.load(tmp_path / "P.npy"), want, rtol=1e-13, atol=0)


def test_npz_with_several_arrays(tmp_path):
    prepare(tmp_path, "npz")
    np.savez(tmp_path / "A.npz", x=X, q=Q, other=np.zeros(3))
    np.savez(tmp_path / "one.npz", X)
    r = run("eval", "--sources", tmp_path / "one.npz", "--charges", f"{tmp_path}/A.npz:q",
            "--out-pot", tmp_path / "P.npy", "--method", "direct")
    assert r.returncode == 0, r.stderr   # the only array of one.npz
    # the .npy suffix of a member may be given too
    r = run("eval", "--sources", f"{tmp_path}/A.npz:x.npy", "--charges", f"{tmp_path}/A.npz:q",
            "--out-pot", tmp_path / "P.npy", "--method", "direct")
    assert r.returncode == 0, r.stderr
    r = run("eval", "--sources", tmp_path / "A.npz", "--charges", f"{tmp_path}/A.npz:q",
            "--out-pot", tmp_path / "P2.npy")
    assert r.returncode == 2
    msg = one_message(r)
    assert "holds 3 arrays (x, q, other)" in msg
    r = run("eval", "--sources", f"{tmp_path}/A.npz:nope", "--charges", f"{tmp_path}/A.npz:q",
            "--out-pot", tmp_path / "P2.npy")
    assert r.returncode == 2 and "no array 'nope' (it holds: x, q, other)" in one_message(r)
    assert not (tmp_path / "P2.npy").exists()


def test_outputs_added_to_existing_files(tmp_path):
    prepare(tmp_path, "npz")
    prepare(tmp_path, "h5")
    np.save(tmp_path / "S.npy", X)
    np.save(tmp_path / "Q.npy", Q)
    np.savez(tmp_path / "R.npz", keep=np.arange(3.0), pot=np.zeros(1))
    with h5py.File(tmp_path / "R.h5", "w") as f:
        f["keep/this"] = np.arange(4)
        f["out/pot"] = np.zeros(2)
    base = ["eval", "--sources", tmp_path / "S.npy", "--charges", tmp_path / "Q.npy",
            "--method", "direct"]
    r = run(*base, "--out-pot", f"{tmp_path}/R.npz:pot", "--out-grad", tmp_path / "R.npz")
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "R.npz") as z:
        assert sorted(z.files) == ["grad", "keep", "pot"]
        assert np.array_equal(z["keep"], np.arange(3.0)) and z["pot"].shape == (40,)
    r = run(*base, "--out-pot", f"{tmp_path}/R.h5:out/pot", "--out-grad", tmp_path / "R.h5")
    assert r.returncode == 0, r.stderr
    with h5py.File(tmp_path / "R.h5", "r") as f:
        assert np.array_equal(f["keep/this"][()], np.arange(4))
        assert f["out/pot"].shape == (40,) and f["grad"].shape == (40, 3)
        assert np.allclose(f["out/pot"][()], direct("laplace", X, Q)[0], rtol=1e-13, atol=0)


def test_inputs_and_outputs_in_one_hdf5_file(tmp_path):
    prepare(tmp_path, "h5")
    spec = save(tmp_path, "h5", {"x": X, "q": Q}, name="data")
    out = f"{tmp_path}/data.h5:/inputs/deep/pot"
    r = run("eval", "--sources", spec["x"], "--charges", spec["q"], "--out-pot", out)
    assert r.returncode == 0, r.stderr
    with h5py.File(tmp_path / "data.h5", "r") as f:
        assert sorted(f["inputs/deep"]) == ["pot", "q", "x"]
    # but not over an input dataset
    r = run("eval", "--sources", spec["x"], "--charges", spec["q"], "--out-pot", spec["q"])
    assert r.returncode == 2 and "is the input file" in one_message(r)
    with h5py.File(tmp_path / "data.h5", "r") as f:
        assert np.array_equal(f["inputs/deep/q"][()], Q)


def test_failed_run_leaves_existing_container_as_it_was(tmp_path):
    prepare(tmp_path, "h5")
    np.save(tmp_path / "S.npy", X)
    q = np.zeros(40)
    q[:2] = 1e308    # the potential overflows: nothing may be written
    np.save(tmp_path / "Q.npy", q)
    with h5py.File(tmp_path / "R.h5", "w") as f:
        f["old"] = np.arange(3.0)
    before = (tmp_path / "R.h5").read_bytes()
    r = run("eval", "--sources", tmp_path / "S.npy", "--charges", tmp_path / "Q.npy",
            "--out-pot", f"{tmp_path}/R.h5:/pot", "--method", "direct")
    assert r.returncode == 2 and "overflows" in one_message(r)
    assert (tmp_path / "R.h5").read_bytes() == before
    assert files(tmp_path) == ["Q.npy", "R.h5", "S.npy"]


def h5_error_cases(tmp):
    with h5py.File(tmp / "E.h5", "w") as f:
        f["x"] = X
        f["q"] = Q
        f["wide"] = np.zeros((40, 4))
        f["huge"] = np.array([1, 2, 2**60] + [0] * 37, dtype=np.int64)
        f["flags"] = np.zeros(40, dtype=bool)
        f.create_group("grp")
    e = f"{tmp}/E.h5"
    return {
        "missing dataset": ([f"{e}:/x", f"{e}:/nothere"], "no dataset /nothere"),
        "missing group": ([f"{e}:/a/x", f"{e}:/q"], "no group /a"),
        "a group": ([f"{e}:/grp", f"{e}:/q"], "/grp is a group, not a dataset"),
        "wrong shape": ([f"{e}:/wide", f"{e}:/q"], "shape (N, 3)"),
        "huge int64": ([f"{e}:/x", f"{e}:/huge"], "element [2] is 1152921504606846976"),
        "bool": ([f"{e}:/x", f"{e}:/flags"], "use float64, float32, int64 or int32"),
        "no dataset named": ([e, f"{e}:/q"], "name the dataset"),
        "not hdf5": ([f"{tmp}/S.h5:/x", f"{e}:/q"], "not an HDF5 file"),
    }


def npz_error_cases(tmp):
    np.savez(tmp / "E.npz", x=X, q=Q, wide=np.zeros((40, 4)), flags=np.zeros(40, dtype=bool),
             huge=np.array([2**60] + [0] * 39, dtype=np.int64))
    e = f"{tmp}/E.npz"
    return {
        "wrong shape": ([f"{e}:wide", f"{e}:q"], "shape (N, 3)"),
        "huge int64": ([f"{e}:x", f"{e}:huge"], "element [0] is 1152921504606846976"),
        "bool": ([f"{e}:x", f"{e}:flags"], "dtype '|b1' is not supported"),
        "not a zip": ([f"{tmp}/S.npz:x", f"{e}:q"], "cannot read it as a .npz"),
        "unknown extension": ([f"{tmp}/S.dat", f"{e}:q"], "unknown file type"),
    }


@pytest.mark.parametrize("fmt", ["npz", "h5"])
def test_input_errors(tmp_path, fmt):
    prepare(tmp_path, fmt)
    (tmp_path / "S.npz").write_bytes(b"not a zip at all")
    (tmp_path / "S.h5").write_bytes(b"not hdf5 either")
    np.save(tmp_path / "S.npy", X)
    (tmp_path / "S.dat").write_bytes((tmp_path / "S.npy").read_bytes())
    cases = (h5_error_cases if fmt == "h5" else npz_error_cases)(tmp_path)
    before = files(tmp_path)
    for name, ((src, q), want) in cases.items():
        r = run("eval", "--sources", src, "--charges", q, "--out-pot", tmp_path / "P.npy")
        assert r.returncode == 2, (name, r.returncode, r.stderr)
        assert want in one_message(r), (name, r.stderr)
        assert files(tmp_path) == before, name


def test_output_errors(tmp_path):
    prepare(tmp_path, "npz")
    prepare(tmp_path, "h5")
    np.save(tmp_path / "S.npy", X)
    np.save(tmp_path / "Q.npy", Q)
    (tmp_path / "bad.npz").write_bytes(b"junk")
    (tmp_path / "bad.h5").write_bytes(b"junk")
    with h5py.File(tmp_path / "R.h5", "w") as f:
        f["data"] = np.zeros(2)
        f.create_group("grp/pot")
    cases = {
        "unknown extension": ("P.txt", "unknown file type"),
        "not a zip": ("bad.npz:pot", "not a .npz"),
        "not hdf5": ("bad.h5:/pot", "not an HDF5 file"),
        "through a dataset": ("R.h5:/data/pot", "/data is not a group"),
        "onto a group": ("R.h5:/grp/pot", "is a group, not a dataset"),
    }
    before = {n: (tmp_path / n).read_bytes() for n in files(tmp_path)}
    for name, (out, want) in cases.items():
        r = run("eval", "--sources", tmp_path / "S.npy", "--charges", tmp_path / "Q.npy",
                "--out-pot", f"{tmp_path}/{out}")
        assert r.returncode == 2, (name, r.returncode, r.stderr)
        assert want in one_message(r), (name, r.stderr)
        assert {n: (tmp_path / n).read_bytes() for n in files(tmp_path)} == before, name
    # one member named twice
    r = run("eval", "--sources", tmp_path / "S.npy", "--charges", tmp_path / "Q.npy",
            "--out-pot", f"{tmp_path}/N.npz:a", "--out-grad", f"{tmp_path}/N.npz:a")
    assert r.returncode == 2 and "name the same file" in one_message(r)
