"""CUDA arrays (CuPy, PyTorch, JAX) in place on the GPU: points, charges and results stay on the
device. Run on a GPU machine with a CUDA build of libfmmkit:

    FMMKIT_LIBRARY=build-gpu/libfmmkit.so python3 -m pytest tests/python -m gpu

Every test skips when its array library, a GPU or the CUDA backend is missing."""
import numpy as np
import pytest

import fmmkit
from conftest import direct, random_problem, rel_l2

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu():
    if fmmkit.cuda_device_count() == 0:
        pytest.skip("no CUDA device (or a CPU-only build of libfmmkit)")


def _cupy():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception:
        pytest.skip("CuPy finds no GPU")
    return cupy


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch finds no GPU")
    return torch


class CupyLib:
    name = "cupy"

    def __init__(self):
        self.m = _cupy()

    def put(self, a):
        return self.m.asarray(a)

    def get(self, a):
        return self.m.asnumpy(a)

    def is_native(self, a):
        return isinstance(a, self.m.ndarray)


class TorchLib:
    name = "torch"

    def __init__(self):
        self.m = _torch()

    def put(self, a):
        return self.m.as_tensor(np.asarray(a), device="cuda")

    def get(self, a):
        return a.cpu().numpy()

    def is_native(self, a):
        return isinstance(a, self.m.Tensor) and a.is_cuda


@pytest.fixture(params=["cupy", "torch"])
def xp(request, gpu):
    return CupyLib() if request.param == "cupy" else TorchLib()


KERNELS = {"laplace": (fmmkit.laplace3d, {}), "plummer": (fmmkit.plummer3d, {"softening": 0.05}),
           "regularized": (fmmkit.regularized3d, {"softening": 0.05}),
           "log2d": (fmmkit.log2d, {}), "cauchy2d": (fmmkit.cauchy2d, {})}


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_one_shot_on_device_arrays(xp, kernel):
    fn, kw = KERNELS[kernel]
    x, q, y = random_problem(kernel, n=300, m=200)
    r = fn(xp.put(x), xp.put(q), xp.put(y), **kw)
    assert r.info.backend == "cuda" and r.info.n_sources == 300
    assert xp.is_native(r.pot) and xp.is_native(r.grad)
    pot, grad = direct(kernel, x, q, y, kw.get("softening", 0.0))
    assert rel_l2(xp.get(r.pot), pot) <= 1e-12
    assert rel_l2(xp.get(r.grad), grad) <= 1e-12
    host = fn(x, q, y, backend="cpu", **kw)
    assert rel_l2(xp.get(r.pot), host.pot) <= 1e-12


def test_plan_with_device_points_and_charges(xp):
    x, _, _ = random_problem("laplace", n=400)
    rng = np.random.default_rng(2)
    with fmmkit.Plan(kernel="laplace", backend="cuda") as plan:
        plan.set_points(xp.put(x))
        assert plan.info.n_sources == plan.info.n_targets == 400
        for _ in range(3):
            q = rng.standard_normal(400)
            r = plan.eval(xp.put(q))
            assert xp.is_native(r.pot)
            pot, grad = direct("laplace", x, q)
            assert rel_l2(xp.get(r.pot), pot) <= 1e-12 and rel_l2(xp.get(r.grad), grad) <= 1e-12
        # host charges on a plan whose points came from the device: numpy results
        r = plan.eval(q, grad=False)
        assert isinstance(r.pot, np.ndarray) and rel_l2(r.pot, pot) <= 1e-12
        qs = rng.standard_normal((3, 400))
        many = plan.eval_many(xp.put(qs))
        assert tuple(many.pot.shape) == (3, 400) and tuple(many.grad.shape) == (3, 400, 3)
        for v in range(3):
            assert rel_l2(xp.get(many.pot[v]), direct("laplace", x, qs[v])[0]) <= 1e-12


def test_device_conversions(xp):
    """float32 and non-contiguous device inputs are converted on the device."""
    x, q, y = random_problem("laplace", n=100, m=50)
    x32 = x.astype(np.float32)
    r = fmmkit.laplace3d(xp.put(x32), xp.put(q.astype(np.float32)), xp.put(y))
    ref = fmmkit.laplace3d(x32.astype(float), q.astype(np.float32).astype(float), y,
                           backend="cpu")
    assert rel_l2(xp.get(r.pot), ref.pot) <= 1e-12
    wide = xp.put(np.concatenate([x, x], axis=1))
    strided = wide[:, ::2]
    r = fmmkit.laplace3d(strided, xp.put(q), xp.put(y))
    ref = fmmkit.laplace3d(np.concatenate([x, x], axis=1)[:, ::2], q, y, backend="cpu")
    assert rel_l2(xp.get(r.pot), ref.pot) <= 1e-12


def test_device_errors(xp):
    x, q, _ = random_problem("laplace", n=50)
    with fmmkit.Plan(kernel="laplace", backend="cuda") as plan:
        with pytest.raises(fmmkit.FmkValueError, match=r"sources must have shape \(n, 3\)"):
            plan.set_points(xp.put(x[:, :2]))
        with pytest.raises(fmmkit.FmkValueError, match="both be host arrays or both be CUDA"):
            plan.set_points(xp.put(x), x)
        plan.set_points(xp.put(x))
        with pytest.raises(fmmkit.FmkValueError, match=r"charges must have shape \(50,\)"):
            plan.eval(xp.put(q[:10]))
        bad = q.copy()
        bad[7] = np.nan
        with pytest.raises(fmmkit.FmkValueError) as e:
            plan.eval(xp.put(bad))
        assert e.value.status == fmmkit.Status.ERR_NONFINITE
        with pytest.raises(fmmkit.FmkTypeError, match="complex"):
            plan.eval(xp.put(q.astype(complex)))
    with fmmkit.Plan(kernel="laplace", backend="cpu") as plan:
        with pytest.raises(fmmkit.FmkStateError, match="backend cuda"):
            plan.set_points(xp.put(x))


def test_cauchy2d_complex_on_device(xp):
    x, q, y = random_problem("cauchy2d", n=200, m=100)
    r = fmmkit.cauchy2d(xp.put(x), xp.put(q), xp.put(y))
    pot, grad = direct("cauchy2d", x, q, y)
    assert "complex" in str(r.pot.dtype)
    assert rel_l2(xp.get(r.pot), pot) <= 1e-12 and rel_l2(xp.get(r.grad), grad) <= 1e-12


def test_torch_stream_and_grad_tensors(gpu):
    torch = _torch()
    x, q, _ = random_problem("laplace", n=200)
    xs = torch.as_tensor(x, device="cuda").requires_grad_(True)  # read as data, not traced
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        qs = torch.as_tensor(q, device="cuda") * 2  # written on a side stream
        r = fmmkit.laplace3d(xs, qs)
    assert rel_l2(r.pot.cpu().numpy(), direct("laplace", x, 2 * q)[0]) <= 1e-12


def test_jax_arrays(gpu):
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX finds no GPU")
    if not (_have("cupy") or _have("torch")):
        pytest.skip("fmmkit takes JAX arrays through CuPy or PyTorch; neither is installed")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    x, q, _ = random_problem("laplace", n=200)
    r = fmmkit.laplace3d(jnp.asarray(x), jnp.asarray(q))
    assert isinstance(r.pot, jax.Array)
    assert rel_l2(np.asarray(r.pot), direct("laplace", x, q)[0]) <= 1e-12


def _have(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def test_poisson_on_device_arrays(xp):
    """fmmkit.Poisson.solve with a CUDA omega: the host solve's results, as device arrays, on a
    uniform grid (the (nx, ny, nz, 3) layout) and at chosen blocks of a block grid."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((12, 10, 8, 3))
    with fmmkit.Poisson(1e-6, method="treecode", backend="cuda") as s:
        s.set_grid((12, 10, 8), 0.1)
        host = s.solve(w, velocity=True)
        dev = s.solve(xp.put(w), velocity=True)
        assert xp.is_native(dev.psi) and xp.is_native(dev.u)
        assert dev.psi.shape == (12, 10, 8, 3) and dev.u.shape == (12, 10, 8, 3)
        assert np.array_equal(xp.get(dev.psi), host.psi) and np.array_equal(xp.get(dev.u), host.u)
    with fmmkit.BlockGrid.rings(32, 8) as g, fmmkit.Poisson(1e-4, method="treecode",
                                                             backend="cuda", grid=g) as s:
        om = rng.standard_normal((g.n_points, 3))
        host = s.set_targets([3, 1]).solve(om)
        dev = s.solve(xp.put(om))
        assert dev.psi.shape == (2 * 512, 3)
        assert np.array_equal(xp.get(dev.psi), host.psi)
