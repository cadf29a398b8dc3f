"""`fmmkit eval` and its files: the inputs it converts (Fortran order, integers), the rule for
outputs (all or nothing, links followed, FIFOs and devices written in place, refusals before any
work), signals and resource limits while writing, and results that overflow.

Run like test_cli.py: FMMKIT_CLI names the executable.
"""
import os
import resource
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from test_cli import CLI, direct, files, good_inputs, rel_err, run

SANITIZED = bool(os.environ.get("FMMKIT_SANITIZED"))


def eval_cmd(tmp, pot="P.npy", grad="G.npy", sources="S.npy", charges="Q.npy", *extra):
    args = ["eval", "--sources", tmp / sources, "--charges", tmp / charges]
    if pot:
        args += ["--out-pot", tmp / pot if isinstance(pot, str) else pot]
    if grad:
        args += ["--out-grad", tmp / grad if isinstance(grad, str) else grad]
    return args + list(extra)


def old_outputs(tmp):
    """P.npy and G.npy from an earlier run, which a failed run must leave as they are."""
    np.save(tmp / "P.npy", np.arange(3.0))
    np.save(tmp / "G.npy", np.arange(6.0).reshape(2, 3))


def assert_old_outputs(tmp):
    assert np.array_equal(np.load(tmp / "P.npy"), np.arange(3.0))
    assert np.array_equal(np.load(tmp / "G.npy"), np.arange(6.0).reshape(2, 3))
    assert not [name for name in files(tmp) if ".tmp." in name], files(tmp)


# --------------------------------------------------------------------------------------------
# Inputs numpy writes that the reader converts
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["fortran f8", "fortran f4", "int64", "int32", "fortran int64",
                                  "2^53"])
def test_converted_inputs_accepted(tmp_path, case):
    rng = np.random.default_rng(20)
    x = rng.random((9, 3))
    y = rng.random((5, 3))
    q = rng.uniform(-1, 1, 9)
    if case.startswith("fortran"):
        dtype = {"f8": np.float64, "f4": np.float32, "int64": np.int64}[case.split()[1]]
        x = np.asfortranarray(x * 100).astype(dtype, order="F")
        y = np.asfortranarray(y * 100).astype(dtype, order="F")
        assert x.flags.f_contiguous and not x.flags.c_contiguous
    elif case in ("int64", "int32"):
        x, y = (x * 100).astype(case), (y * 100).astype(case)
        q = np.arange(-4, 5).astype(case)
    else:
        q = np.array([2**53, -2**53, 1, 2, 3, 4, 5, 6, 7], dtype=np.int64)
    np.save(tmp_path / "S.npy", x)
    np.save(tmp_path / "T.npy", y)
    np.save(tmp_path / "Q.npy", q)
    r = run(*eval_cmd(tmp_path), "--targets", tmp_path / "T.npy")
    assert r.returncode == 0, r.stderr
    pot, grad = direct("laplace", x.astype(float), q.astype(float), y.astype(float))
    assert rel_err(np.load(tmp_path / "P.npy"), pot) < 1e-12
    assert rel_err(np.load(tmp_path / "G.npy"), grad) < 1e-12


def test_int_beyond_2_53_in_fortran_order_named_by_its_index(tmp_path):
    good_inputs(tmp_path)
    x = np.asfortranarray(np.zeros((6, 3), dtype=np.int64))
    x[4, 1] = 2**62
    np.save(tmp_path / "S.npy", x)
    r = run(*eval_cmd(tmp_path))
    assert r.returncode == 2 and "S.npy: element [4, 1] is 4611686018427387904" in r.stderr
    assert files(tmp_path) == ["Q.npy", "S.npy"]


@pytest.mark.skipif(SANITIZED, reason="the sanitizers reserve more address space than the limit")
def test_out_of_memory_reading_exits_1(tmp_path):
    good_inputs(tmp_path)
    # a sparse file holding the data it claims (960 MB), read under a 512 MB address-space limit
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (40000000, 3), }"
    text = header.encode() + b" " * ((-(10 + len(header) + 1)) % 64) + b"\n"
    with open(tmp_path / "S.npy", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text)
        f.truncate(f.tell() + 40000000 * 3 * 8)
    limit = 512 << 20
    r = subprocess.run([CLI, *map(str, eval_cmd(tmp_path))], capture_output=True, text=True,
                       timeout=120,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "S.npy: out of memory" in r.stderr
    assert files(tmp_path) == ["Q.npy", "S.npy"]


# --------------------------------------------------------------------------------------------
# Outputs refused before any work
# --------------------------------------------------------------------------------------------
def test_directory_as_output_keeps_old_outputs(tmp_path):
    good_inputs(tmp_path)
    old_outputs(tmp_path)
    (tmp_path / "D").mkdir()
    r = run(*eval_cmd(tmp_path, grad="D"))
    assert r.returncode == 2 and "--out-grad: " in r.stderr and "is a directory" in r.stderr
    assert_old_outputs(tmp_path)
    assert files(tmp_path) == ["D", "G.npy", "P.npy", "Q.npy", "S.npy"]
    # checked before the inputs are read: a missing input is not what is reported
    (tmp_path / "S.npy").unlink()
    r = run(*eval_cmd(tmp_path, pot="D"))
    assert r.returncode == 2 and "is a directory" in r.stderr and "S.npy" not in r.stderr


@pytest.mark.parametrize("how", ["same name", "other spelling", "symlink", "hard link"])
@pytest.mark.parametrize("which", ["S.npy", "Q.npy", "T.npy"])
def test_output_that_is_an_input_refused(tmp_path, how, which):
    good_inputs(tmp_path)
    np.save(tmp_path / "T.npy", np.zeros((2, 3)))
    before = (tmp_path / which).read_bytes()
    out = {"same name": tmp_path / which, "other spelling": tmp_path / "." / which,
           "symlink": tmp_path / "L.npy", "hard link": tmp_path / "H.npy"}[how]
    if how == "symlink":
        os.symlink(which, out)
    if how == "hard link":
        os.link(tmp_path / which, out)
    r = run(*eval_cmd(tmp_path, pot=None, grad=out), "--targets", tmp_path / "T.npy")
    assert r.returncode == 2 and "is the input file" in r.stderr, r.stderr
    assert (tmp_path / which).read_bytes() == before


def test_outputs_naming_one_file_differently_refused(tmp_path):
    good_inputs(tmp_path)
    r = run(*eval_cmd(tmp_path, pot="P.npy", grad=tmp_path / "." / "P.npy"))
    assert r.returncode == 2 and "name the same file" in r.stderr
    np.save(tmp_path / "P.npy", np.zeros(1))
    os.symlink("P.npy", tmp_path / "L.npy")
    r = run(*eval_cmd(tmp_path, pot="P.npy", grad="L.npy"))
    assert r.returncode == 2 and "name the same file" in r.stderr


def test_dangling_symlink_refused(tmp_path):
    good_inputs(tmp_path)
    os.symlink("nowhere.npy", tmp_path / "L.npy")
    r = run(*eval_cmd(tmp_path, grad="L.npy"))
    assert r.returncode == 2 and "symbolic link to a file that does not exist" in r.stderr
    assert files(tmp_path) == ["L.npy", "Q.npy", "S.npy"]


def mknod_or_skip(path, kind, major, minor):
    try:
        os.mknod(path, kind | 0o666, os.makedev(major, minor))
    except (PermissionError, OSError) as e:
        pytest.skip(f"cannot make a device node here: {e}")


def test_block_device_refused(tmp_path):
    good_inputs(tmp_path)
    mknod_or_skip(tmp_path / "B", stat.S_IFBLK, 7, 0)
    r = run(*eval_cmd(tmp_path, grad="B"))
    assert r.returncode == 2 and "block device" in r.stderr
    assert stat.S_ISBLK(os.lstat(tmp_path / "B").st_mode)


# --------------------------------------------------------------------------------------------
# Outputs that are not plain files
# --------------------------------------------------------------------------------------------
def test_symlink_output_followed(tmp_path):
    x, q = good_inputs(tmp_path)
    (tmp_path / "out").mkdir()
    np.save(tmp_path / "out" / "real.npy", np.zeros(1))
    os.symlink("out/real.npy", tmp_path / "P.npy")
    r = run(*eval_cmd(tmp_path, grad=None))
    assert r.returncode == 0, r.stderr
    assert os.readlink(tmp_path / "P.npy") == "out/real.npy"
    assert rel_err(np.load(tmp_path / "out" / "real.npy"), direct("laplace", x, q)[0]) < 1e-12
    assert files(tmp_path / "out") == ["real.npy"]


def read_fifo(path, into):
    with open(path, "rb") as f:
        into.append(f.read())


def test_fifo_output_written_in_place(tmp_path):
    x, q = good_inputs(tmp_path)
    os.mkfifo(tmp_path / "F")
    got = []
    reader = threading.Thread(target=read_fifo, args=(tmp_path / "F", got))
    reader.start()
    r = run(*eval_cmd(tmp_path, grad="F"))
    reader.join(30)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(os.lstat(tmp_path / "F").st_mode)
    path = tmp_path / "from_fifo.npy"
    path.write_bytes(got[0])
    assert rel_err(np.load(path), direct("laplace", x, q)[1]) < 1e-12
    assert rel_err(np.load(tmp_path / "P.npy"), direct("laplace", x, q)[0]) < 1e-12


def test_character_device_output_written_in_place(tmp_path):
    good_inputs(tmp_path)
    mknod_or_skip(tmp_path / "null", stat.S_IFCHR, 1, 3)   # a /dev/null of our own
    r = run(*eval_cmd(tmp_path, grad="null"))
    assert r.returncode == 0, r.stderr
    assert stat.S_ISCHR(os.lstat(tmp_path / "null").st_mode)
    assert files(tmp_path) == ["P.npy", "Q.npy", "S.npy", "null"]


def test_full_device_fails_and_keeps_old_outputs(tmp_path):
    good_inputs(tmp_path)
    old_outputs(tmp_path)
    mknod_or_skip(tmp_path / "full", stat.S_IFCHR, 1, 7)   # a /dev/full of our own
    r = run(*eval_cmd(tmp_path, pot="P.npy", grad="full"))
    assert r.returncode == 1 and "full: write failed" in r.stderr
    assert stat.S_ISCHR(os.lstat(tmp_path / "full").st_mode)
    assert_old_outputs(tmp_path)


# --------------------------------------------------------------------------------------------
# Signals and limits while writing
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGINT])
def test_signal_while_writing_leaves_old_outputs(tmp_path, signo):
    good_inputs(tmp_path)
    old_outputs(tmp_path)
    os.mkfifo(tmp_path / "F")
    # P.npy's temporary is written, then opening the FIFO waits for a reader that never comes
    p = subprocess.Popen([CLI, *map(str, eval_cmd(tmp_path, pot="P.npy", grad="F"))],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not [n for n in files(tmp_path) if n.startswith("P.npy.tmp.")]:
        assert time.time() < deadline and p.poll() is None
        time.sleep(0.02)
    time.sleep(0.1)
    p.send_signal(signo)
    _, err = p.communicate(timeout=60)
    assert p.returncode == -signo, (p.returncode, err)
    assert "interrupted" in err
    assert_old_outputs(tmp_path)
    assert stat.S_ISFIFO(os.lstat(tmp_path / "F").st_mode)


def test_file_size_limit_leaves_old_outputs(tmp_path):
    rng = np.random.default_rng(21)
    np.save(tmp_path / "S.npy", rng.random((500, 3)))
    np.save(tmp_path / "Q.npy", rng.random(500))
    old_outputs(tmp_path)

    def limit():   # P.npy (4 kB) fits, G.npy (12 kB) does not; SIGXFSZ as a shell leaves it
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    r = subprocess.run([CLI, *map(str, eval_cmd(tmp_path))], capture_output=True, text=True,
                       timeout=120, preexec_fn=limit)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "G.npy: write failed" in r.stderr
    assert_old_outputs(tmp_path)


# --------------------------------------------------------------------------------------------
# Results out of range
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("want", ["pot", "grad"])
def test_overflowing_results_refused(tmp_path, want):
    good_inputs(tmp_path)
    old_outputs(tmp_path)
    q = np.zeros(6)
    q[:2] = 1e308
    np.save(tmp_path / "Q.npy", q)
    r = run(*eval_cmd(tmp_path, pot="P.npy" if want == "pot" else None,
                      grad="G.npy" if want == "grad" else None))
    assert r.returncode == 2, (r.returncode, r.stderr)
    what = "potential" if want == "pot" else "gradient"
    assert f"the {what} at target" in r.stderr and "overflows" in r.stderr
    assert_old_outputs(tmp_path)


def test_pipe_input_cannot_make_the_reader_allocate_what_the_header_promises(tmp_path):
    # a header promising 2^40 float64 values followed by 16 bytes, read from a pipe (a stream
    # of unknown length): the reader must say the data is truncated, not allocate 8 TB
    good_inputs(tmp_path)
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    blob = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()
    blob += np.zeros(2).tobytes()
    r = subprocess.run([CLI, *map(str, eval_cmd(tmp_path, "P.npy", None, "S.npy", "/dev/stdin"))],
                       input=blob, capture_output=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert b"truncated" in r.stderr, r.stderr
    assert not (tmp_path / "P.npy").exists()
    # and a good file through a pipe still works
    q = (tmp_path / "Q.npy").read_bytes()
    r = subprocess.run([CLI, *map(str, eval_cmd(tmp_path, "P.npy", None, "S.npy", "/dev/stdin"))],
                       input=q, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "P.npy").exists()
