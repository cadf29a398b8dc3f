"""End-to-end tests of the fmmkit command: results against a numpy direct sum, the .npy reader's
rejections, exit statuses, and the bench and demo subcommands.

FMMKIT_CLI names the executable (ctest sets it); without it the tests look in ../../build.
"""
import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
CLI = os.environ.get("FMMKIT_CLI") or str(HERE.parents[1] / "build" / "cli" / "fmmkit")

KERNELS = ["laplace", "plummer", "regularized", "log2d", "cauchy2d"]
DIM = {"laplace": 3, "plummer": 3, "regularized": 3, "log2d": 2, "cauchy2d": 2}
SOFTENING = 0.05


def run(*args, timeout=120):
    if not os.path.exists(CLI):
        pytest.fail(f"fmmkit executable not found at {CLI}; set FMMKIT_CLI")
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def direct(kernel, x, q, y=None, s=SOFTENING):
    """phi and grad_y phi by brute force, as fmmkit.h defines them; y None: the self sum."""
    self_sum = y is None
    y = x if self_sum else y
    d = y[:, None, :] - x[None, :, :]                 # (M, N, dim): y_i - x_j
    r2 = (d * d).sum(-1)
    keep = np.ones_like(r2, dtype=bool)
    if self_sum:
        np.fill_diagonal(keep, False)
    if kernel in ("laplace", "log2d", "cauchy2d"):    # coincident points contribute nothing
        keep &= r2 > 0
    safe = np.where(keep, r2, 1.0)
    if kernel == "laplace":
        inv = np.where(keep, safe ** -0.5, 0.0)
        return inv @ q, -(d * (q * inv ** 3)[..., None]).sum(1)
    if kernel == "plummer":
        u = np.where(keep, r2 + s * s, np.inf)
        return (u ** -0.5) @ q, -(d * (q * u ** -1.5)[..., None]).sum(1)
    if kernel == "regularized":
        u = np.where(keep, r2 + s * s, np.inf)
        pot = ((r2 + 1.5 * s * s) * u ** -1.5) @ q
        return pot, -(d * (q * (u ** -1.5 + 1.5 * s * s * u ** -2.5))[..., None]).sum(1)
    if kernel == "log2d":
        pot = np.where(keep, 0.5 * np.log(safe), 0.0) @ q
        return pot, (d * np.where(keep, q / safe, 0.0)[..., None]).sum(1)
    z = y[:, 0] + 1j * y[:, 1]
    zj = x[:, 0] + 1j * x[:, 1]
    diff = np.where(keep, zj[None, :] - z[:, None], 1.0)
    inv = np.where(keep, 1.0 / diff, 0.0)
    return inv @ q, (inv * inv) @ q


def rel_err(a, b):
    a, b = np.asarray(a), np.asarray(b)
    den = np.linalg.norm(b)
    return np.linalg.norm(a - b) / (den if den > 0 else 1.0)


def points(rng, n, dim):
    return rng.random((n, dim))


def charges(rng, n, kernel):
    q = rng.uniform(-1, 1, n)
    if kernel == "cauchy2d":
        q = q + 1j * rng.uniform(-1, 1, n)
    return q


def eval_args(tmp, kernel, *extra):
    args = ["eval", "--sources", tmp / "S.npy", "--charges", tmp / "Q.npy",
            "--out-pot", tmp / "P.npy", "--out-grad", tmp / "G.npy", "--kernel", kernel]
    if kernel in ("plummer", "regularized"):
        args += ["--softening", SOFTENING]
    return args + list(extra)


def files(tmp):
    return sorted(p.name for p in Path(tmp).iterdir())


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("with_targets", [False, True])
def test_round_trip_matches_numpy(tmp_path, kernel, with_targets):
    rng = np.random.default_rng(7)
    dim = DIM[kernel]
    x = points(rng, 60, dim)
    q = charges(rng, 60, kernel)
    np.save(tmp_path / "S.npy", x)
    np.save(tmp_path / "Q.npy", q)
    extra = []
    y = None
    if with_targets:
        y = points(rng, 37, dim)
        np.save(tmp_path / "T.npy", y)
        extra = ["--targets", tmp_path / "T.npy"]
    r = run(*eval_args(tmp_path, kernel, *extra))
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    pot, grad = np.load(tmp_path / "P.npy"), np.load(tmp_path / "G.npy")
    m = 60 if y is None else 37
    if kernel == "cauchy2d":
        assert pot.dtype == np.complex128 and pot.shape == (m,)
        assert grad.dtype == np.complex128 and grad.shape == (m,)
    else:
        assert pot.dtype == np.float64 and pot.shape == (m,)
        assert grad.dtype == np.float64 and grad.shape == (m, dim)
    ref_pot, ref_grad = direct(kernel, x, q, y)
    assert rel_err(pot, ref_pot) < 1e-12
    assert rel_err(grad, ref_grad) < 1e-12
    assert files(tmp_path) == sorted(["S.npy", "Q.npy", "P.npy", "G.npy"] +
                                     (["T.npy"] if with_targets else []))


@pytest.mark.parametrize("kernel", ["laplace", "plummer"])
@pytest.mark.parametrize("walk", ["auto", "group", "stackless"])
@pytest.mark.parametrize("with_targets", [False, True])
def test_eval_method_tree(tmp_path, kernel, walk, with_targets):
    rng = np.random.default_rng(8)
    x, q = points(rng, 3000, 3), charges(rng, 3000, kernel)
    np.save(tmp_path / "S.npy", x)
    np.save(tmp_path / "Q.npy", q)
    extra, y = [], None
    if with_targets:
        y = points(rng, 500, 3)
        np.save(tmp_path / "T.npy", y)
        extra = ["--targets", tmp_path / "T.npy"]
    r = run(*eval_args(tmp_path, kernel, "--method", "tree", "--backend", "cpu", "--theta", "0.4",
                       "--order", "2", "--walk", walk, *extra))
    assert r.returncode == 0, r.stderr
    pot, grad = np.load(tmp_path / "P.npy"), np.load(tmp_path / "G.npy")
    ref_pot, ref_grad = direct(kernel, x, q, y)
    assert 0 < rel_err(pot, ref_pot) < 1e-2
    assert 0 < rel_err(grad, ref_grad) < 1e-2


def test_eval_method_tree_refuses_other_kernels(tmp_path):
    good_inputs(tmp_path, kernel="regularized")
    r = run(*eval_args(tmp_path, "regularized", "--method", "tree", "--backend", "cpu"))
    assert r.returncode == 2 and "laplace and plummer" in r.stderr
    r = run(*eval_args(tmp_path, "regularized", "--method", "tree", "--order", "3"))
    assert r.returncode == 2


def test_only_one_output(tmp_path):
    rng = np.random.default_rng(1)
    x, q = points(rng, 20, 3), charges(rng, 20, "laplace")
    np.save(tmp_path / "S.npy", x)
    np.save(tmp_path / "Q.npy", q)
    r = run("eval", "--sources", tmp_path / "S.npy", "--charges", tmp_path / "Q.npy",
            "--out-grad", tmp_path / "G.npy")
    assert r.returncode == 0, r.stderr
    assert files(tmp_path) == ["G.npy", "Q.npy", "S.npy"]
    assert rel_err(np.load(tmp_path / "G.npy"), direct("laplace", x, q)[1]) < 1e-12


def test_float32_input_is_converted(tmp_path):
    rng = np.random.default_rng(2)
    x = points(rng, 40, 3).astype(np.float32)
    y = points(rng, 25, 3).astype(np.float32)
    q = charges(rng, 40, "laplace").astype(np.float32)
    for name, a in (("S", x), ("T", y), ("Q", q)):
        np.save(tmp_path / f"{name}.npy", a)
    r = run(*eval_args(tmp_path, "laplace", "--targets", tmp_path / "T.npy"))
    assert r.returncode == 0, r.stderr
    pot = np.load(tmp_path / "P.npy")
    assert pot.dtype == np.float64
    ref = direct("laplace", x.astype(np.float64), q.astype(np.float64), y.astype(np.float64))
    assert rel_err(pot, ref[0]) < 1e-12
    assert rel_err(np.load(tmp_path / "G.npy"), ref[1]) < 1e-12


def test_complex64_charges_for_cauchy2d(tmp_path):
    rng = np.random.default_rng(3)
    x = points(rng, 30, 2)
    q = charges(rng, 30, "cauchy2d").astype(np.complex64)
    np.save(tmp_path / "S.npy", x)
    np.save(tmp_path / "Q.npy", q)
    r = run(*eval_args(tmp_path, "cauchy2d"))
    assert r.returncode == 0, r.stderr
    ref = direct("cauchy2d", x, q.astype(np.complex128))
    assert rel_err(np.load(tmp_path / "P.npy"), ref[0]) < 1e-12
    assert rel_err(np.load(tmp_path / "G.npy"), ref[1]) < 1e-12


@pytest.mark.parametrize("kernel", ["laplace", "cauchy2d"])
def test_no_sources_gives_zeros(tmp_path, kernel):
    dim = DIM[kernel]
    np.save(tmp_path / "S.npy", np.zeros((0, dim)))
    np.save(tmp_path / "Q.npy", np.zeros(0, dtype=np.complex128 if kernel == "cauchy2d" else float))
    np.save(tmp_path / "T.npy", np.random.default_rng(4).random((5, dim)))
    r = run(*eval_args(tmp_path, kernel, "--targets", tmp_path / "T.npy"))
    assert r.returncode == 0, r.stderr
    pot, grad = np.load(tmp_path / "P.npy"), np.load(tmp_path / "G.npy")
    assert pot.shape == (5,) and not pot.any()
    assert grad.shape == ((5,) if kernel == "cauchy2d" else (5, dim)) and not grad.any()


def test_no_targets_gives_empty_outputs(tmp_path):
    rng = np.random.default_rng(5)
    np.save(tmp_path / "S.npy", points(rng, 10, 3))
    np.save(tmp_path / "Q.npy", charges(rng, 10, "laplace"))
    np.save(tmp_path / "T.npy", np.zeros((0, 3)))
    r = run(*eval_args(tmp_path, "laplace", "--targets", tmp_path / "T.npy"))
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "P.npy").shape == (0,)
    assert np.load(tmp_path / "G.npy").shape == (0, 3)


def test_nothing_at_all(tmp_path):
    np.save(tmp_path / "S.npy", np.zeros((0, 2)))
    np.save(tmp_path / "Q.npy", np.zeros(0))
    r = run(*eval_args(tmp_path, "log2d"))
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "P.npy").shape == (0,)
    assert np.load(tmp_path / "G.npy").shape == (0, 2)


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npy_versions_accepted(tmp_path, version):
    rng = np.random.default_rng(6)
    x, q = points(rng, 12, 3), charges(rng, 12, "laplace")
    for name, a in (("S", x), ("Q", q)):
        with open(tmp_path / f"{name}.npy", "wb") as f:
            np.lib.format.write_array(f, a, version=version)
    r = run(*eval_args(tmp_path, "laplace"))
    assert r.returncode == 0, r.stderr
    assert rel_err(np.load(tmp_path / "P.npy"), direct("laplace", x, q)[0]) < 1e-12


def raw_npy(path, header, data=b"", version=(1, 0), header_len=None):
    """A .npy file written by hand: header is the dict text (padding is added here)."""
    text = header.encode("latin1")
    prefix = 10 if version[0] == 1 else 12
    text += b" " * ((-(prefix + len(text) + 1)) % 64) + b"\n"
    n = len(text) if header_len is None else header_len
    size = struct.pack("<H", n) if version[0] == 1 else struct.pack("<I", n)
    Path(path).write_bytes(b"\x93NUMPY" + bytes(version) + size + text + data)


@pytest.mark.parametrize("header", [
    "{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (4, 3)}",
    "{'shape': (4, 3), 'fortran_order': False, 'descr': '<f8'}",
    "{ 'descr' : '<f8' , 'fortran_order' : False , 'shape' : ( 4 , 3 , ) , }",
])
def test_header_spellings_accepted(tmp_path, header):
    x = np.random.default_rng(8).random((4, 3))
    raw_npy(tmp_path / "S.npy", header, x.tobytes())
    np.save(tmp_path / "Q.npy", np.ones(4))
    r = run(*eval_args(tmp_path, "laplace"))
    assert r.returncode == 0, r.stderr
    assert rel_err(np.load(tmp_path / "P.npy"), direct("laplace", x, np.ones(4))[0]) < 1e-12


def test_existing_output_is_replaced(tmp_path):
    rng = np.random.default_rng(9)
    x, q = points(rng, 8, 3), charges(rng, 8, "laplace")
    np.save(tmp_path / "S.npy", x)
    np.save(tmp_path / "Q.npy", q)
    np.save(tmp_path / "P.npy", np.arange(3.0))
    r = run(*eval_args(tmp_path, "laplace"))
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "P.npy").shape == (8,)
    mode = (tmp_path / "G.npy").stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask


# --------------------------------------------------------------------------------------------
# Rejections: exit 2, a message naming the file, no output left behind
# --------------------------------------------------------------------------------------------
def good_inputs(tmp, n=6, kernel="laplace"):
    rng = np.random.default_rng(10)
    x = points(rng, n, DIM[kernel])
    q = charges(rng, n, kernel)
    np.save(tmp / "S.npy", x)
    np.save(tmp / "Q.npy", q)
    return x, q


def truncate(path, nbytes):
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:-nbytes])


BAD_SOURCES = {
    "uint64 dtype": (lambda p, x: np.save(p, (x * 10).astype(np.uint64)), "dtype '<u8'"),
    "int beyond 2^53": (lambda p, x: np.save(p, np.full((6, 3), 2**53 + 1)),
                        "element [0, 0] is 9007199254740993; integers beyond 2^53"),
    "directory": (lambda p, x: (p.unlink(), p.mkdir()), "it is a directory"),
    "float16 dtype": (lambda p, x: np.save(p, x.astype(np.float16)), "dtype '<f2'"),
    "big-endian": (lambda p, x: np.save(p, x.astype(">f8")), "big-endian"),
    "complex points": (lambda p, x: np.save(p, x.astype(np.complex128)), "must be real"),
    "wrong width": (lambda p, x: np.save(p, x[:, :2]), "shape (N, 3)"),
    "one-dimensional": (lambda p, x: np.save(p, x.ravel()), "shape (N, 3)"),
    "three-dimensional": (lambda p, x: np.save(p, x[None]), "shape (N, 3)"),
    "truncated data": (lambda p, x: (np.save(p, x), truncate(p, 8)), "truncated"),
    "truncated header": (lambda p, x: (np.save(p, x), truncate(p, len(Path(p).read_bytes()) - 20)),
                         "truncated header"),
    "trailing bytes": (lambda p, x: Path(p).write_bytes(Path(p).read_bytes() + b"\0" * 8)
                       if np.save(p, x) is None else None, "after the array data"),
    "not npy": (lambda p, x: Path(p).write_text("1 2 3\n4 5 6\n"), "not a .npy file"),
    "empty file": (lambda p, x: Path(p).write_bytes(b""), "not a .npy file"),
    "version 4.0": (lambda p, x: raw_npy(p, "{'descr': '<f8', 'fortran_order': False, "
                                            "'shape': (6, 3), }", x.tobytes(), version=(4, 0)),
                    "version 4.0"),
    "version 1.1": (lambda p, x: raw_npy(p, "{'descr': '<f8', 'fortran_order': False, "
                                            "'shape': (6, 3), }", x.tobytes(), version=(1, 1)),
                    "version 1.1"),
    "garbage header": (lambda p, x: raw_npy(p, "{'descr': '<f8', 'fortran_order': False, "
                                               "'shape': (6, 3), 'x", x.tobytes()),
                       "malformed header"),
    "header not a dict": (lambda p, x: raw_npy(p, "hello world", x.tobytes()), "malformed header"),
    "missing key": (lambda p, x: raw_npy(p, "{'descr': '<f8', 'shape': (6, 3)}", x.tobytes()),
                    "lacks 'fortran_order'"),
    "unknown key": (lambda p, x: raw_npy(p, "{'descr': '<f8', 'fortran_order': False, "
                                            "'shape': (6, 3), 'extra': 1}", x.tobytes()),
                    "unexpected key"),
    "duplicate key": (lambda p, x: raw_npy(p, "{'descr': '<f8', 'fortran_order': False, "
                                              "'shape': (6, 3), 'shape': (6, 3)}", x.tobytes()),
                      "twice"),
    "shape not a tuple": (lambda p, x: raw_npy(p, "{'descr': '<f8', 'fortran_order': False, "
                                                  "'shape': (18)}", x.tobytes()),
                          "not a tuple"),
    "negative dimension": (lambda p, x: raw_npy(p, "{'descr': '<f8', 'fortran_order': False, "
                                                   "'shape': (-6, 3)}", x.tobytes()),
                           "negative"),
    "bad fortran_order": (lambda p, x: raw_npy(p, "{'descr': '<f8', 'fortran_order': 0, "
                                                  "'shape': (6, 3)}", x.tobytes()),
                          "True or False"),
    "structured dtype": (lambda p, x: raw_npy(p, "{'descr': [('a', '<f8')], 'fortran_order': "
                                                 "False, 'shape': (6, 3)}", x.tobytes()),
                         "structured"),
    "huge dimension": (lambda p, x: raw_npy(p, "{'descr': '<f8', 'fortran_order': False, "
                                               "'shape': (99999999999999999999, 3)}", x.tobytes()),
                       "too large"),
    "count overflow": (lambda p, x: raw_npy(p, "{'descr': '<f8', 'fortran_order': False, "
                                               "'shape': (4611686018427387904, 3)}", x.tobytes()),
                       "overflows"),
    "size overflow": (lambda p, x: raw_npy(p, "{'descr': '<f8', 'fortran_order': False, "
                                              "'shape': (1152921504606846976, 3)}", x.tobytes()),
                      "too large"),
    "claims too much data": (lambda p, x: raw_npy(p, "{'descr': '<f8', 'fortran_order': False, "
                                                     "'shape': (1000000000000, 3)}", x.tobytes()),
                             "truncated"),
    "huge header length": (lambda p, x: raw_npy(p, "{'descr': '<f8', 'fortran_order': False, "
                                                   "'shape': (6, 3)}", x.tobytes(), version=(2, 0),
                                                header_len=0xFFFFFFFF),
                           "header length"),
    "header with NUL": (lambda p, x: raw_npy(p, "{'descr': '<f8',\0 'fortran_order': False, "
                                                "'shape': (6, 3)}", x.tobytes()),
                        "NUL"),
}


@pytest.mark.parametrize("case", sorted(BAD_SOURCES))
def test_bad_sources_rejected(tmp_path, case):
    x, _ = good_inputs(tmp_path)
    make, needle = BAD_SOURCES[case]
    make(tmp_path / "S.npy", x)
    before = files(tmp_path)
    r = run(*eval_args(tmp_path, "laplace"))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "S.npy" in r.stderr and needle in r.stderr, r.stderr
    assert r.stderr.startswith("fmmkit eval: ") and r.stderr.count("\n") == 1
    assert files(tmp_path) == before


@pytest.mark.parametrize("case,kernel,make,needle", [
    ("mismatched N", "laplace", lambda q: q[:-1], "5 charges for 6 sources"),
    ("2-D charges", "laplace", lambda q: q[:, None], "shape (N,)"),
    ("complex for laplace", "laplace", lambda q: q.astype(np.complex128), "real charges"),
    ("real for cauchy2d", "cauchy2d", lambda q: q.real.copy(), "complex charges"),
    ("int charges for cauchy2d", "cauchy2d", lambda q: np.arange(6), "not int64"),
    ("int beyond 2^53", "laplace", lambda q: np.array([0, 1, 2, -2**53 - 1, 4, 5]),
     "element [3] is -9007199254740993"),
])
def test_bad_charges_rejected(tmp_path, case, kernel, make, needle):
    _, q = good_inputs(tmp_path, kernel=kernel)
    np.save(tmp_path / "Q.npy", make(q))
    before = files(tmp_path)
    r = run(*eval_args(tmp_path, kernel))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Q.npy" in r.stderr and needle in r.stderr, r.stderr
    assert files(tmp_path) == before


def test_bad_targets_rejected(tmp_path):
    good_inputs(tmp_path)
    np.save(tmp_path / "T.npy", np.zeros((4, 2)))
    before = files(tmp_path)
    r = run(*eval_args(tmp_path, "laplace", "--targets", tmp_path / "T.npy"))
    assert r.returncode == 2 and "T.npy" in r.stderr and "targets" in r.stderr, r.stderr
    assert files(tmp_path) == before


def test_missing_file(tmp_path):
    good_inputs(tmp_path)
    (tmp_path / "S.npy").unlink()
    before = files(tmp_path)
    r = run(*eval_args(tmp_path, "laplace"))
    assert r.returncode == 2 and "S.npy" in r.stderr and "cannot open" in r.stderr
    assert files(tmp_path) == before


@pytest.mark.parametrize("which", ["S", "Q", "T"])
def test_nan_rejected(tmp_path, which):
    x, q = good_inputs(tmp_path)
    np.save(tmp_path / "T.npy", x[:3])
    a = {"S": x, "Q": q, "T": x[:3]}[which].copy()
    a.flat[1] = np.nan
    np.save(tmp_path / f"{which}.npy", a)
    before = files(tmp_path)
    r = run(*eval_args(tmp_path, "laplace", "--targets", tmp_path / "T.npy"))
    assert r.returncode == 2 and f"{which}.npy: element [" in r.stderr, r.stderr
    assert "is nan; values must be finite" in r.stderr
    assert files(tmp_path) == before


def test_failure_keeps_an_existing_output(tmp_path):
    x, q = good_inputs(tmp_path)
    np.save(tmp_path / "P.npy", np.arange(3.0))
    q[0] = np.inf
    np.save(tmp_path / "Q.npy", q)
    r = run(*eval_args(tmp_path, "laplace"))
    assert r.returncode == 2
    assert np.array_equal(np.load(tmp_path / "P.npy"), np.arange(3.0))
    assert files(tmp_path) == ["P.npy", "Q.npy", "S.npy"]


def test_output_directory_missing(tmp_path):
    good_inputs(tmp_path)
    r = run("eval", "--sources", tmp_path / "S.npy", "--charges", tmp_path / "Q.npy",
            "--out-pot", tmp_path / "P.npy", "--out-grad", tmp_path / "nowhere" / "G.npy")
    assert r.returncode == 2 and "nowhere" in r.stderr, r.stderr
    assert files(tmp_path) == ["Q.npy", "S.npy"]


@pytest.mark.parametrize("args,needle", [
    (["--kernel", "helmholtz"], "unknown kernel 'helmholtz'"),
    (["--method", "magic"], "unknown method 'magic'"),
    (["--backend", "tpu"], "unknown backend 'tpu'"),
    (["--precision", "fp16"], "unknown precision 'fp16'"),
    (["--eps", "abc"], "'abc' is not a finite number"),
    (["--eps", "nan"], "not a finite number"),
    (["--threads", "-1"], "out of range"),
    (["--threads", "2x"], "not an integer"),
    (["--frobnicate"], "unknown option '--frobnicate'"),
    (["stray"], "unexpected argument 'stray'"),
    (["--eps"], "--eps needs a value"),
])
def test_eval_usage_errors(tmp_path, args, needle):
    good_inputs(tmp_path)
    r = run(*eval_args(tmp_path, "laplace"), *args)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and needle in lines[0] and lines[1] == "Try 'fmmkit eval --help'."
    assert files(tmp_path) == ["Q.npy", "S.npy"]


@pytest.mark.parametrize("args,needle", [
    ([], "--sources is required"),
    (["--sources", "S.npy"], "--charges is required"),
    (["--sources", "S.npy", "--charges", "Q.npy"], "nothing to write"),
    (["--sources", "S.npy", "--charges", "Q.npy", "--out-pot", "X.npy", "--out-grad", "X.npy"],
     "same file"),
    (["--sources", "S.npy", "--charges", "Q.npy", "--out-pot", "X.npy", "--kernel", "plummer"],
     "--softening"),
])
def test_eval_missing_arguments(tmp_path, args, needle):
    r = run("eval", *args)
    assert r.returncode == 2 and needle in r.stderr, r.stderr


def test_library_argument_errors_exit_2(tmp_path):
    good_inputs(tmp_path)
    r = run(*eval_args(tmp_path, "laplace", "--eps", "2"))
    assert r.returncode == 2 and "eps" in r.stderr, r.stderr
    assert files(tmp_path) == ["Q.npy", "S.npy"]


@pytest.mark.parametrize("method", ["fmm"])
def test_method_not_available_yet(tmp_path, method):
    # method fmm exists for laplace on the CPU; the smooth kernels come later
    good_inputs(tmp_path)
    r = run(*eval_args(tmp_path, "plummer", "--method", method, "--backend", "cpu"))
    if r.returncode == 0:
        pytest.skip(f"method {method} is available for plummer in this build")
    assert r.returncode == 2
    assert f"method {method} is not available yet" in r.stderr
    assert files(tmp_path) == ["Q.npy", "S.npy"]


def test_cuda_backend_without_gpu(tmp_path):
    good_inputs(tmp_path)
    r = run(*eval_args(tmp_path, "laplace", "--backend", "cuda"))
    if r.returncode == 0:
        pytest.skip("a GPU is present")
    assert r.returncode == 2 and "cuda" in r.stderr.lower(), r.stderr
    assert files(tmp_path) == ["Q.npy", "S.npy"]


# --------------------------------------------------------------------------------------------
# Help, version, dispatch
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [["--help"], ["-h"], ["eval", "--help"], ["bench", "--help"],
                                  ["demo", "--help"], ["eval", "-h"]])
def test_help(args):
    r = run(*args)
    assert r.returncode == 0 and r.stdout.startswith("Usage: fmmkit") and r.stderr == ""


def test_version():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("fmmkit 0.")


@pytest.mark.parametrize("args,needle", [
    ([], "Usage: fmmkit"),
    (["frobnicate"], "unknown command 'frobnicate'"),
    (["--frobnicate"], "unknown option '--frobnicate'"),
])
def test_dispatch_errors(args, needle):
    r = run(*args)
    assert r.returncode == 2 and needle in r.stderr


# --------------------------------------------------------------------------------------------
# bench and demo
# --------------------------------------------------------------------------------------------
def bench_json(*args):
    r = run("bench", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("targets", [[], ["--m", "700"]])
def test_bench_direct_fp64_is_exact(kernel, targets):
    rep = bench_json("--kernel", kernel, "--method", "direct", "--backend", "cpu",
                     "--n", "1500", "--repeats", "1", "--sample", "300", *targets)
    assert rep["method"] == "direct" and rep["backend"] == "cpu" and rep["precision"] == "fp64"
    assert rep["kernel"] == kernel
    assert rep["n_sources"] == 1500 and rep["n_targets"] == (700 if targets else 1500)
    assert rep["sample"] == 300
    assert rep["error_pot"] < 1e-12 and rep["error_grad"] < 1e-12
    assert rep["eval_time"] > 0 and rep["phase_time"]["p2p"] > 0
    assert rep["interactions_per_second"] > 0


def test_bench_fp32():
    rep = bench_json("--method", "direct", "--precision", "fp32", "--n", "2000", "--repeats", "1",
                     "--dist", "uniform")
    assert rep["precision"] == "fp32"
    assert 0 < rep["error_pot"] < 1e-4 and 0 < rep["error_grad"] < 1e-4


@pytest.mark.parametrize("dist,kernel", [
    ("uniform", "laplace"), ("plummer", "plummer"), ("sphere", "laplace"),
    ("clustered", "regularized"), ("corner", "laplace"), ("normal2d", "log2d"),
    ("layer2d", "cauchy2d"), ("uniform2d", "log2d"),
])
def test_bench_distributions(dist, kernel):
    rep = bench_json("--dist", dist, "--kernel", kernel, "--method", "direct", "--n", "800",
                     "--repeats", "1", "--sample", "100", "--seed", "3")
    assert rep["dist"] == dist
    assert rep["error_pot"] < 1e-12 and rep["error_grad"] < 1e-12


def test_bench_is_deterministic():
    a = bench_json("--n", "500", "--repeats", "1", "--seed", "11", "--method", "direct",
                   "--precision", "fp32")
    b = bench_json("--n", "500", "--repeats", "1", "--seed", "11", "--method", "direct",
                   "--precision", "fp32")
    assert a["error_pot"] == b["error_pot"] and a["error_grad"] == b["error_grad"]


def test_bench_equals_form():
    rep = bench_json("--n=300", "--repeats=1", "--sample=50", "--kernel=log2d", "--method=direct")
    assert rep["n_sources"] == 300 and rep["kernel"] == "log2d" and rep["sample"] == 50


def test_bench_table():
    r = run("bench", "--n", "1000", "--repeats", "2", "--method", "direct")
    assert r.returncode == 0, r.stderr
    for word in ("method", "backend", "device", "precision", "p2p", "eval total",
                 "interactions/s", "potential", "gradient"):
        assert word in r.stdout


@pytest.mark.parametrize("args,needle", [
    (["--n", "-5"], "--n: -5 is out of range"),
    (["--n", "0"], "--n: 0 is out of range"),
    (["--n", "1e3"], "not an integer"),
    (["--repeats", "0"], "out of range"),
    (["--dist", "galaxy"], "unknown distribution 'galaxy'"),
    (["--dist", "normal2d"], "2D but kernel laplace is 3D"),
    (["--json=yes"], "takes no value"),
    (["--eps", "abc"], "'abc' is not a finite number"),
])
def test_bench_usage_errors(args, needle):
    r = run("bench", *args)
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and needle in lines[0] and lines[1] == "Try 'fmmkit bench --help'."


def test_bench_method_not_available_yet():
    r = run("bench", "--method", "fmm", "--kernel", "plummer", "--backend", "cpu", "--n", "100")
    if r.returncode == 0:
        pytest.skip("method fmm is available for plummer in this build")
    assert r.returncode == 2 and "method fmm is not available yet" in r.stderr


def test_bench_tree():
    r = run("bench", "--method", "tree", "--backend", "cpu", "--n", "3000", "--dist", "uniform",
            "--order", "2", "--walk", "stackless", "--leaf-size", "16", "--theta", "0.6", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["method"] == "tree" and out["walk"] == "stackless" and out["order"] == 2
    assert out["leaf_size"] == 16 and out["levels"] >= 2 and out["theta"] == 0.6
    assert out["error_pot"] < 0.05 and out["error_grad"] < 0.02
    assert out["phase_time"]["tree"] > 0 and out["phase_time"]["walk"] > 0


def test_bench_theta_sweep():
    r = run("bench", "--method", "tree", "--backend", "cpu", "--n", "2000", "--dist", "plummer",
            "--theta-sweep", "--repeats", "1", "--sample", "200")
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()
            if line.strip() and line.split()[0].replace(".", "").isdigit()]
    assert [float(row[0]) for row in rows] == pytest.approx([0.2 + 0.1 * k for k in range(9)])
    err_grad = [float(row[6]) for row in rows]
    assert err_grad[0] < err_grad[-1]
    r = run("bench", "--method", "tree", "--theta-sweep", "--theta", "0.5")
    assert r.returncode == 2 and "exclude" in r.stderr
    r = run("bench", "--theta-sweep")
    assert r.returncode == 2 and "--method tree" in r.stderr


@pytest.mark.parametrize("args, needle", [
    (["--walk", "zigzag"], "unknown walk 'zigzag'"),
    (["--order", "-2"], "out of range"),
    (["--leaf-size", "-1"], "out of range"),
])
def test_bench_tree_usage_errors(args, needle):
    r = run("bench", "--method", "tree", *args)
    assert r.returncode == 2 and needle in r.stderr, r.stderr


def test_demo():
    # Under the sanitizers the program runs 5-20x slower: the same demo on fewer points.
    small = ("--n", "5000") if os.environ.get("FMMKIT_SANITIZED") else ()
    r = run("demo", *small, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.rstrip().endswith("OK")
    assert "Plummer" in r.stdout and "interactions/s" in r.stdout


def test_demo_usage_error():
    r = run("demo", "--n", "-5")
    assert r.returncode == 2 and "Try 'fmmkit demo --help'." in r.stderr


def test_poisson_rings():
    """fmmkit poisson: the vortex-rings case, its errors against the analytic solution (the
    fft and direct sums agree to rounding), and its usage errors."""
    r = run("poisson", "--resolution", 16, "--velocity", "--json", "--method", "direct")
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)
    assert a["method"] == "direct" and a["points"] == 16 ** 3 and a["sources"] > 0
    r = run("poisson", "--resolution", 16, "--velocity", "--json")
    assert r.returncode == 0, r.stderr
    b = json.loads(r.stdout)
    assert abs(a["psi_l2"] - b["psi_l2"]) <= 1e-9 * a["psi_l2"]
    assert abs(a["u_l2"] - b["u_l2"]) <= 1e-9 * a["u_l2"]
    r = run("poisson", "--resolution", 32)
    assert r.returncode == 0 and "relative l2 3.7" in r.stdout, r.stdout  # docs/poisson.md
    for bad in (["--case", "hill"], ["--method", "spectral"], ["--resolution", 1],
                ["--multires", "--resolution", 48], ["--multires", "--refine", 1],
                ["--refine", "1e-3"], ["--eps", "nan"], ["--backend", "tpu"],
                ["--order", 31], ["--theta", 1.5], ["--hybrid", "--backend", "cpu"]):
        r = run("poisson", *bad)
        assert r.returncode == 2, (bad, r.stdout, r.stderr)
        assert r.stderr.startswith("fmmkit poisson:"), r.stderr


def test_poisson_multires():
    """fmmkit poisson --multires: the rings' two-level grid (counts of docs/poisson.md), its
    errors against the analytic solution (at 32, the fine blocks cover the rings: within 1% of
    the uniform 32^3 grid's), every field of --json."""
    r = run("poisson", "--multires", "--resolution", 32, "--block-size", 8, "--method", "direct",
            "--velocity", "--json")
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)
    assert a["grid"] == "multires" and a["refine"] == 1e-4 and a["block_size"] == 8
    assert a["method"] == "direct" and a["backend"] == "cpu" and a["h_min"] == 1 / 32
    assert a["points"] == 25600 and a["blocks"] == 50  # 6 of 8 regions refined
    assert a["sources_y"] == a["sources_z"] and a["sources_x"] == a["sources"] > 0
    assert a["paper_points"] == 3.6e6 and a["paper_sources_y"] == 8.7e5
    u = json.loads(run("poisson", "--resolution", 32, "--method", "direct", "--velocity",
                       "--json").stdout)
    for key in ("psi_l2", "psi_max", "u_l2", "u_max"):
        assert abs(a[key] - u[key]) <= 1e-2 * u[key], key
    for key in ("grid_s", "set_grid_s", "solve_s", "solve_again_s", "order", "theta",
                "leaf_size", "bricks", "nodes", "direct_pairs", "far_pairs", "time_tree",
                "time_plans", "time_expand", "time_direct", "time_far", "time_cpu_part",
                "time_gpu_part", "bytes_host", "bytes_device", "threads", "eps"):
        assert key in a, key
    r = run("poisson", "--multires", "--resolution", 64, "--method", "fmm", "--eps", "1e-3")
    assert r.returncode == 0, r.stderr
    assert "blocks                   22" in r.stdout and "90112" in r.stdout, r.stdout
    assert "y 9832" in r.stdout and "3.6e6" in r.stdout and "8.7e5" in r.stdout
