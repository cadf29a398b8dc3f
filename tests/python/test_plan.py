"""Plan: reuse, eval_many, memory, info, life cycle, threads and the GIL."""
import gc
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import fmmkit
from conftest import REPO, direct, random_problem, rel_l2


def test_plan_reused_with_several_charge_vectors(no_output):
    x, _, y = random_problem("laplace", n=120, m=80)
    rng = np.random.default_rng(3)
    with fmmkit.Plan(3, "laplace", 1e-6, backend="cpu") as plan:
        assert plan.set_points(x, y) is plan
        for _ in range(4):
            q = rng.standard_normal(len(x))
            r = plan.eval(q)
            pot, grad = direct("laplace", x, q, y)
            assert rel_l2(r.pot, pot) <= 1e-12 and rel_l2(r.grad, grad) <= 1e-12
        r = plan.eval(q, grad=False)
        assert r.grad is None and rel_l2(r.pot, pot) <= 1e-12
        r = plan.eval(q, pot=False)
        assert r.pot is None and rel_l2(r.grad, grad) <= 1e-12
        # new points replace the old ones; targets = sources again
        plan.set_points(y)
        q = rng.standard_normal(len(y))
        assert rel_l2(plan.eval(q).pot, direct("laplace", y, q)[0]) <= 1e-12
        assert plan.info.n_sources == plan.info.n_targets == len(y)


@pytest.mark.parametrize("kernel", ["plummer", "cauchy2d"])
def test_eval_many_matches_eval(kernel):
    x, _, y = random_problem(kernel, n=60, m=50)
    rng = np.random.default_rng(5)
    q = rng.standard_normal((4, len(x)))
    if kernel == "cauchy2d":
        q = q + 1j * rng.standard_normal(q.shape)
    with fmmkit.Plan(kernel=kernel, softening=0.1 if kernel == "plummer" else None) as plan:
        plan.set_points(x, y)
        many = plan.eval_many(q)
        assert many.pot.shape == (4, len(y))
        assert many.grad.shape == ((4, len(y)) if kernel == "cauchy2d" else (4, len(y), 3))
        for v in range(4):
            one = plan.eval(q[v])
            assert np.array_equal(many.pot[v], one.pot)
            assert np.array_equal(many.grad[v], one.grad)
        none = plan.eval_many(q[:0])
        assert none.pot.shape == (0, len(y))
        assert plan.eval_many(q, grad=False).grad is None


@pytest.mark.parametrize("n_vectors", [1, 3])
def test_fmm_several_vectors_in_one_pass(n_vectors):
    """The FMM's eval_many carries the vectors through one pass: the same results as one
    evaluation per vector to rounding, for the one-shot functions' (nd, n) charges too."""
    rng = np.random.default_rng(8)
    x = rng.random((3000, 3))
    q = rng.standard_normal((5, len(x)))
    with fmmkit.Plan(kernel="laplace", eps=1e-6, method="fmm", backend="cpu",
                     n_vectors=n_vectors) as plan:
        plan.set_points(x)
        many = plan.eval_many(q)
        for v in range(5):
            one = plan.eval(q[v])
            assert rel_l2(many.pot[v], one.pot) <= 1e-14
            assert rel_l2(many.grad[v], one.grad) <= 1e-14
    shot = fmmkit.laplace3d(x, q[:2], method="fmm", backend="cpu", eps=1e-6, pot=False)
    assert shot.pot is None and shot.grad.shape == (2, len(x), 3)
    # the one-shot plan is tuned for 2 vectors (its own leaves): equal within eps
    assert rel_l2(shot.grad[1], many.grad[1]) <= 1e-5


def test_n_vectors_is_checked():
    for bad in (-1, 1025):
        with pytest.raises(fmmkit.FmkValueError):
            fmmkit.Plan(kernel="laplace", n_vectors=bad)


def test_memory_and_info():
    with fmmkit.Plan(kernel="laplace", backend="cpu", threads=2) as plan:
        m = plan.memory(1000)
        assert isinstance(m, fmmkit.Memory) and m.host >= 1000 * 3 * 8 and m.device == 0
        assert plan.memory(1000, 500).host >= 1500 * 3 * 8
        info = plan.info
        assert info.n_sources == 0 and info.device_name == "cpu (2 threads)"
        assert (info.kernel, info.method, info.backend, info.precision) == \
            ("laplace", "direct", "cpu", "fp64")
        x, q, _ = random_problem("laplace", n=100)
        plan.set_points(x)
        assert plan.info.bytes_host >= 100 * 3 * 8
        assert plan.info.times["setup"] > 0
        r = plan.eval(q)
        assert r.info.times["p2p"] > 0 and r.info == plan.info
        assert plan.dim == 3 and plan.kernel == "laplace"
        assert "laplace" in repr(plan) and "n_sources=100" in repr(plan)


def test_dim_defaults_to_the_kernels():
    with fmmkit.Plan(kernel="log2d") as plan:
        assert plan.dim == 2
    with fmmkit.Plan(2, "cauchy2d", 1e-3, precision="fp32") as plan:
        assert plan.info.precision == "fp32" and plan.info.eps == 1e-3


def test_close_context_manager_and_gc():
    plan = fmmkit.Plan()
    assert not plan.closed
    plan.close()
    plan.close()  # twice is fine
    assert plan.closed and "closed" in repr(plan)
    with fmmkit.Plan() as plan:
        pass
    assert plan.closed
    plan = fmmkit.Plan()
    finalizer = plan._finalizer
    del plan
    gc.collect()
    assert not finalizer.alive  # fmk_plan_destroy ran


def _run_python(code, **env):
    full = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), **env)
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_threads_follow_omp_num_threads_and_keyword():
    code = "import fmmkit; print(fmmkit.Plan(backend='cpu').info.device_name)"
    assert _run_python(code, OMP_NUM_THREADS="1") == "cpu (1 thread)"
    assert _run_python(code, OMP_NUM_THREADS="3") == "cpu (3 threads)"
    code = "import fmmkit; print(fmmkit.Plan(backend='cpu', threads=2).info.device_name)"
    assert _run_python(code, OMP_NUM_THREADS="1") == "cpu (2 threads)"


def test_eval_releases_the_gil():
    """While one thread is inside a long evaluation, another Python thread keeps running: the
    longest pause it sees is far shorter than the evaluation."""
    rng = np.random.default_rng(0)
    n = 2000
    while True:
        x, q = rng.random((n, 3)), rng.standard_normal(n)
        plan = fmmkit.Plan(backend="cpu", threads=1).set_points(x)
        t0 = time.perf_counter()
        plan.eval(q)
        if time.perf_counter() - t0 > 0.15 or n > 64000:
            break
        n *= 2
    stop, gaps = False, [0.0]

    def ticker():
        last = time.perf_counter()
        while not stop:
            now = time.perf_counter()
            gaps[0] = max(gaps[0], now - last)
            last = now

    th = threading.Thread(target=ticker)
    th.start()
    try:
        time.sleep(0.01)
        t0 = time.perf_counter()
        plan.eval(q)
        duration = time.perf_counter() - t0
    finally:
        stop = True
        th.join()
    plan.close()
    assert gaps[0] < 0.5 * duration, (gaps[0], duration)


def test_plans_in_threads_are_independent():
    x, _, _ = random_problem("laplace", n=300)
    rng = np.random.default_rng(1)
    qs = [rng.standard_normal(len(x)) for _ in range(4)]
    ref = [fmmkit.laplace3d(x, q).pot for q in qs]
    shared = fmmkit.Plan().set_points(x)  # one plan used from several threads: serialised
    results = {}

    def work(i):
        results[i] = (fmmkit.laplace3d(x, qs[i], threads=1).pot, shared.eval(qs[i]).pot)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        assert rel_l2(results[i][0], ref[i]) <= 1e-14 and np.array_equal(results[i][1], ref[i])


def test_one_shot_several_charge_vectors_and_outputs():
    """charges of shape (nd, n) in the one-shot functions: one plan, every vector's results
    (Plan.eval_many); pot=False / grad=False leave that output out."""
    rng = np.random.default_rng(12)
    x = rng.random((300, 3))
    qs = rng.standard_normal((3, 300))
    many = fmmkit.laplace3d(x, qs, method="direct", backend="cpu")
    assert many.pot.shape == (3, 300) and many.grad.shape == (3, 300, 3)
    for v in range(3):
        one = fmmkit.laplace3d(x, qs[v], method="direct", backend="cpu")
        np.testing.assert_allclose(many.pot[v], one.pot, rtol=0, atol=1e-12)
        np.testing.assert_allclose(many.grad[v], one.grad, rtol=0, atol=1e-12)
    r = fmmkit.laplace3d(x, qs[0], pot=False, backend="cpu")
    assert r.pot is None and r.grad.shape == (300, 3)
    r = fmmkit.laplace3d(x, qs, grad=False, backend="cpu")
    assert r.grad is None and r.pot.shape == (3, 300)
    z = rng.random((200, 2))
    c = rng.standard_normal((2, 200)) + 1j * rng.standard_normal((2, 200))
    r = fmmkit.cauchy2d(z, c, backend="cpu")
    assert r.pot.shape == (2, 200) and r.pot.dtype == np.complex128
