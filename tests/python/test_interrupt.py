"""Ctrl-C stops a long evaluation: a child process starts a direct sum of 3e5 points on the
CPU (about a minute of work on two cores), receives SIGINT one second in, and must end with
KeyboardInterrupt within a few seconds; a Plan used after such an interrupt gives right
answers. Every child is bounded by a timeout, so a call that ignores SIGINT fails the test
instead of hanging it."""
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

N = 300_000

# The child prints "ready" just before the long call, then runs it.
def setup(n):
    return f"""
import sys, time
import numpy as np
import fmmkit
rng = np.random.default_rng(1)
x = rng.random(({n}, 3))
q = rng.standard_normal({n})
"""


SETUP = setup(N)

ONE_SHOT = SETUP + """
print("ready", flush=True)
fmmkit.laplace3d(x, q, method="direct", backend="cpu", threads=2)
print("finished", flush=True)
"""


def plan_code(backend, n, threads=""):
    """A child that interrupts a plan's direct sum, then checks the same plan on new points."""
    return setup(n) + f"""
plan = fmmkit.Plan(kernel="laplace", method="direct", backend="{backend}"{threads})
plan.set_points(x)
print("ready", flush=True)
try:
    plan.eval(q)
    print("finished", flush=True)
    sys.exit(1)
except KeyboardInterrupt:
    print("interrupted", flush=True)
# the same plan, new points: exact against numpy
m = 500
y, c = x[:m], q[:m]
r = plan.set_points(y).eval(c)
d = y[:, None, :] - y[None, :, :]
dist = np.sqrt((d ** 2).sum(-1))
np.fill_diagonal(dist, np.inf)
ref = (c[None, :] / dist).sum(1)
err = np.linalg.norm(r.pot - ref) / np.linalg.norm(ref)
print("error", err, flush=True)
sys.exit(0 if err < 1e-12 else 1)
"""


PLAN = plan_code("cpu", N, ", threads=2")


def run_interrupted(code, timeout=30):
    """Runs code in a child, sends SIGINT one second after it says ready; returns (returncode,
    stdout, stderr, seconds from SIGINT to exit)."""
    env = dict(os.environ, OMP_NUM_THREADS="2")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = child.stdout.readline()
        assert line.strip() == "ready", (line, child.stderr.read() if child.poll() else "")
        time.sleep(1.0)
        child.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        out, err = child.communicate(timeout=timeout)
        return child.returncode, out, err, time.monotonic() - t0
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()


def test_ctrl_c_stops_a_one_shot_direct_sum():
    code, out, err, seconds = run_interrupted(ONE_SHOT)
    assert "finished" not in out
    assert "KeyboardInterrupt" in err, err
    assert code != 0
    assert seconds < 5, f"the child took {seconds:.1f} s to stop after SIGINT"


def test_plan_after_ctrl_c_gives_right_answers():
    code, out, err, seconds = run_interrupted(PLAN)
    assert "interrupted" in out, (out, err)
    assert code == 0, (out, err)
    assert seconds < 10, f"the child took {seconds:.1f} s after SIGINT"


# The GPU direct sum (2^21 points in fp64: about 6 s on an H100) is cut into launches of about
# 0.1 s, between which the host checks for Ctrl-C.
GPU_PLAN = plan_code("cuda", 1 << 21)


@pytest.mark.gpu
def test_ctrl_c_stops_a_gpu_direct_sum():
    import fmmkit
    if fmmkit.cuda_device_count() == 0:
        pytest.skip("no CUDA device (or a CPU-only build of libfmmkit)")
    code, out, err, seconds = run_interrupted(GPU_PLAN, timeout=60)
    assert "interrupted" in out, (out, err)
    assert code == 0, (out, err)
    assert seconds < 2, f"the child took {seconds:.1f} s after SIGINT"


def test_a_call_leaves_the_unraisable_hook_as_it_was():
    """The plan keeps a signal handler's exception through sys.unraisablehook only while a call
    runs; everything else goes to the hook that was there."""
    import numpy as np
    import fmmkit
    before = sys.unraisablehook
    with fmmkit.Plan(kernel="laplace", method="direct", backend="cpu", threads=1) as plan:
        x = np.random.default_rng(2).random((50, 3))
        plan.set_points(x).eval(np.ones(50))
    assert sys.unraisablehook is before
