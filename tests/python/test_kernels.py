"""Every one-shot function against a numpy direct sum; input conversions."""
import numpy as np
import pytest

import fmmkit
from conftest import DIM, direct, lattice_problem, random_problem, rel_l2

FUNCTIONS = {
    "laplace": fmmkit.laplace3d,
    "plummer": fmmkit.plummer3d,
    "regularized": fmmkit.regularized3d,
    "log2d": fmmkit.log2d,
    "cauchy2d": fmmkit.cauchy2d,
}
SOFTENING = {"plummer": 0.05, "regularized": 0.05}
TOLERANCE = {"fp64": 1e-12, "fp32": 1e-5}


def call(kernel, *args, **kw):
    if kernel in SOFTENING:
        kw.setdefault("softening", SOFTENING[kernel])
    return FUNCTIONS[kernel](*args, **kw)


@pytest.mark.parametrize("precision", ["fp64", "fp32"])
@pytest.mark.parametrize("self_eval", [True, False], ids=["self", "targets"])
@pytest.mark.parametrize("kernel", list(FUNCTIONS))
def test_against_direct_sum(kernel, self_eval, precision, no_output):
    x, q, y = lattice_problem(kernel)
    targets = None if self_eval else y
    r = call(kernel, x, q, targets, precision=precision, backend="cpu")
    pot, grad = direct(kernel, x, q, targets, SOFTENING.get(kernel, 0.0))
    assert rel_l2(r.pot, pot) <= TOLERANCE[precision]
    assert rel_l2(r.grad, grad) <= TOLERANCE[precision]
    m = len(x) if self_eval else len(y)
    complex_ = kernel == "cauchy2d"
    assert r.pot.shape == (m,) and r.pot.dtype == (np.complex128 if complex_ else np.float64)
    assert r.grad.shape == ((m,) if complex_ else (m, DIM[kernel]))
    assert r.info.kernel == kernel and r.info.precision == precision
    assert r.info.n_sources == len(x) and r.info.n_targets == m
    assert r.info.method == "direct" and r.info.backend == "cpu"


@pytest.mark.parametrize("kernel", list(FUNCTIONS))
def test_grad_false_gives_none(kernel):
    x, q, y = random_problem(kernel, n=30, m=20)
    r = call(kernel, x, q, y, grad=False)
    assert r.grad is None
    assert rel_l2(r.pot, direct(kernel, x, q, y, SOFTENING.get(kernel, 0.0))[0]) <= 1e-12


def test_coincident_points_contribute_nothing_for_singular_kernels():
    x = np.array([[0.0, 0, 0], [1, 0, 0]])
    r = fmmkit.laplace3d(x, [1.0, 2.0], targets=[[0.0, 0, 0]])
    assert r.pot[0] == pytest.approx(2.0, rel=1e-15)
    r = fmmkit.plummer3d(x, [1.0, 2.0], targets=[[0.0, 0, 0]], softening=1.0)
    assert r.pot[0] == pytest.approx(1.0 + 2 / np.sqrt(2), rel=1e-14)


def test_result_info_and_repr():
    x, q, _ = random_problem("laplace", n=20)
    r = fmmkit.laplace3d(x, q, threads=1, backend="cpu")
    i = r.info
    assert i.dim == 3 and i.eps == 1e-6 and i.order == 0 and i.levels == 0
    assert i.device_name == "cpu (1 thread)"
    assert set(i.times) >= {"setup", "upload", "p2p", "download"}
    assert all(t >= 0 for t in i.times.values()) and i.times["p2p"] > 0
    assert i.bytes_host > 0 and i.bytes_device == 0
    assert "pot=(20,)" in repr(r)


def test_inputs_are_converted_not_required_exact():
    x, q, y = random_problem("laplace", n=40, m=30)
    ref = fmmkit.laplace3d(x, q, y)
    # float32 arrays, nested lists, Fortran order, strided views, integer charges
    x32 = x.astype(np.float32)
    r = fmmkit.laplace3d(x32, q, y)
    assert rel_l2(r.pot, fmmkit.laplace3d(x32.astype(np.float64), q, y).pot) == 0
    r = fmmkit.laplace3d(x.tolist(), list(q), y.tolist())
    assert np.array_equal(r.pot, ref.pot)
    r = fmmkit.laplace3d(np.asfortranarray(x), q, np.asfortranarray(y))
    assert np.array_equal(r.pot, ref.pot)
    big = np.zeros((80, 6))
    big[::2, ::2] = x
    r = fmmkit.laplace3d(big[::2, ::2], q, y)
    assert np.array_equal(r.pot, ref.pot)
    qi = np.arange(40) - 20
    r = fmmkit.laplace3d(x, qi, y)
    assert np.array_equal(r.pot, fmmkit.laplace3d(x, qi.astype(float), y).pot)


def test_contiguous_float64_is_not_copied():
    from fmmkit import _arrays
    x = np.random.default_rng(0).random((10, 3))
    assert _arrays.host_points(x, 3, "sources") is x
    q = np.ones(10)
    assert _arrays.host_charges(q, (10,), False) is q
    z = np.ones(10, dtype=np.complex128)
    assert _arrays.host_charges(z, (10,), True) is z


def test_cauchy2d_takes_complex_points_and_real_charges():
    x, q, y = random_problem("cauchy2d", n=50, m=40)
    ref = fmmkit.cauchy2d(x, q, y)
    zx, zy = x[:, 0] + 1j * x[:, 1], y[:, 0] + 1j * y[:, 1]
    r = fmmkit.cauchy2d(zx, q, zy)
    assert np.array_equal(r.pot, ref.pot) and np.array_equal(r.grad, ref.grad)
    r = fmmkit.cauchy2d(x, q.real, y)
    pot, grad = direct("cauchy2d", x, q.real.astype(complex), y)
    assert rel_l2(r.pot, pot) <= 1e-12 and rel_l2(r.grad, grad) <= 1e-12
    r = fmmkit.log2d(zx, q.real, zy)  # complex points work for every 2D kernel
    assert rel_l2(r.pot, direct("log2d", x, q.real, y)[0]) <= 1e-12


def test_empty_sources_and_targets():
    r = fmmkit.laplace3d(np.zeros((0, 3)), np.zeros(0), targets=np.ones((4, 3)))
    assert np.array_equal(r.pot, np.zeros(4)) and np.array_equal(r.grad, np.zeros((4, 3)))
    r = fmmkit.laplace3d(np.ones((4, 3)), np.ones(4), targets=np.zeros((0, 3)))
    assert r.pot.shape == (0,) and r.grad.shape == (0, 3)
    r = fmmkit.cauchy2d(np.zeros((0, 2)), np.zeros(0, complex), targets=np.ones((3, 2)))
    assert r.pot.dtype == np.complex128 and np.array_equal(r.pot, np.zeros(3))


def test_large_offset_costs_no_accuracy():
    x, q, y = random_problem("laplace", n=60, m=40)
    ref = fmmkit.laplace3d(x, q, y).pot
    r = fmmkit.laplace3d(x + 1e6, q, y + 1e6, precision="fp32").pot
    assert rel_l2(r, ref) <= 1e-5
