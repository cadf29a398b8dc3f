"""Threads and processes: one Plan shared by many threads, fork after use, the thread count's cap."""
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import fmmkit
from fmmkit import FmkValueError, Status
from conftest import REPO, direct, rel_l2


def test_one_plan_hammered_by_threads():
    """Threads share one plan, some calling set_points with point sets of very different sizes,
    others eval / eval_many / info / memory. Each evaluation must come back sized and valued for
    the points current when it ran: the lock covers sizing, the C call and the result (before, a
    set_points between sizing and the call made the library write past the outputs)."""
    rng = np.random.default_rng(7)
    sizes = (7, 900, 40, 1500)
    points = [rng.random((n, 3)) for n in sizes]
    charges = [rng.standard_normal(n) for n in sizes]
    refs = [direct("laplace", x, q) for x, q in zip(points, charges)]
    by_size = {n: k for k, n in enumerate(sizes)}
    plan = fmmkit.Plan(kernel="laplace", method="direct", backend="cpu", threads=1)
    plan.set_points(points[0])
    errors, checked = [], [0]
    stop = threading.Event()

    def setter(seed):
        r = np.random.default_rng(seed)
        while not stop.is_set():
            plan.set_points(points[r.integers(len(sizes))])

    def evaluator(seed):
        r = np.random.default_rng(seed)
        try:
            for it in range(150):
                k = int(r.integers(len(sizes)))
                many = it % 3 == 0
                try:
                    if many:
                        res = plan.eval_many(np.stack([charges[k], -charges[k]]))
                    else:
                        res = plan.eval(charges[k])
                except FmkValueError as e:  # the points changed to another size first
                    assert "charges must have shape" in e.message, e.message
                    continue
                pot = res.pot[0] if many else res.pot
                grad = res.grad[0] if many else res.grad
                assert by_size[len(pot)] == k and grad.shape == (sizes[k], 3)
                assert rel_l2(pot, refs[k][0]) < 1e-12 and rel_l2(grad, refs[k][1]) < 1e-12
                if many:
                    assert np.array_equal(res.pot[1], -res.pot[0])
                assert res.info.n_sources == sizes[k]
                plan.memory(sizes[k])
                checked[0] += 1
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    setters = [threading.Thread(target=setter, args=(s,)) for s in (1, 2)]
    evaluators = [threading.Thread(target=evaluator, args=(s,)) for s in (3, 4, 5, 6)]
    for t in setters + evaluators:
        t.start()
    for t in evaluators:
        t.join()
    stop.set()
    for t in setters:
        t.join()
    plan.close()
    assert not errors, errors[0]
    assert checked[0] > 0


# The fork scenario runs in its own interpreter under a timeout, so that a hang (libgomp's
# thread pool does not survive fork; the library must notice it runs in a forked child and
# use one thread there) fails the test instead of stalling the suite.
FORK_SCENARIO = textwrap.dedent("""
    import multiprocessing, os, signal, sys
    import numpy as np
    import fmmkit

    rng = np.random.default_rng(3)
    x, q = rng.random((3000, 3)), rng.standard_normal(3000)
    z, c = rng.random((3000, 2)), rng.standard_normal(3000) + 1j * rng.standard_normal(3000)
    plans = [fmmkit.Plan(method=m, backend="cpu", threads=2, eps=1e-2).set_points(x)
             for m in ("direct", "tree", "fmm")]
    plans.append(fmmkit.Plan(kernel="cauchy2d", method="fmm", backend="cpu",
                             threads=2).set_points(z))
    charges = [q, q, q, c]
    refs = [p.eval(qq).pot for p, qq in zip(plans, charges)]   # the parent's pool is running

    def rel(a, b):
        return float(np.linalg.norm(a - b) / np.linalg.norm(b))

    def work(i):
        out = plans[i].eval(charges[i]).pot
        fresh = fmmkit.laplace3d(x, q, method="fmm", backend="cpu", threads=2, eps=1e-2).pot
        return rel(out, refs[i]), rel(fresh, refs[2]), plans[i].info.device_name

    pid = os.fork()
    if pid == 0:
        signal.alarm(60)
        errs = [work(i) for i in range(len(plans))]
        ok = all(a < 1e-12 and b < 1e-12 and d == "cpu (1 thread)" for a, b, d in errs)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    print("fork", status)

    with multiprocessing.get_context("fork").Pool(2) as pool:
        errs = pool.map_async(work, range(len(plans))).get(timeout=60)
    print("pool", all(a < 1e-12 and b < 1e-12 for a, b, _ in errs))
    print("parent", plans[2].eval(q).pot.tolist() == refs[2].tolist(), plans[2].info.device_name)
""")


def test_fork_after_use():
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    try:
        out = subprocess.run([sys.executable, "-c", FORK_SCENARIO], env=env, capture_output=True,
                             text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("evaluating in a forked child hung")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["fork 0", "pool True", "parent True cpu (2 threads)"], \
        (out.stdout, out.stderr)


@pytest.mark.parametrize("threads", [4097, 40000, 65536, 2**31 - 1])
def test_threads_above_the_cap_are_refused(threads):
    """opts.threads above FMK_THREADS_MAX (4096) is FMK_ERR_ARG at plan creation, before any
    thread starts (65536 and more crashed the process, 40000 made libgomp exit it)."""
    with pytest.raises(FmkValueError) as e:
        fmmkit.Plan(backend="cpu", threads=threads)
    assert e.value.status == Status.ERR_ARG
    assert f"opts.threads = {threads}" in e.value.message
    assert "FMK_THREADS_MAX" in e.value.message
    x = np.random.default_rng(0).random((10, 3))
    with pytest.raises(FmkValueError, match="FMK_THREADS_MAX"):
        fmmkit.laplace3d(x, np.ones(10), backend="cpu", threads=threads)


def test_omp_num_threads_above_the_cap_is_clamped():
    code = ("import numpy as np, fmmkit; p = fmmkit.Plan(backend='cpu'); print(p.info.device_name)")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), OMP_NUM_THREADS="100000")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "cpu (4096 threads)"
