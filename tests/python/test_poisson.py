"""The grid Poisson solver from Python: poisson3d and Poisson against the direct sum of the
regularized kernel written here, the (nx, ny, nz[, 3]) layout, the test problem, bad input."""
import numpy as np
import pytest

import fmmkit


def reference(omega, h, origin, smoothing):
    """Psi and u by the sum of van Rees et al. eqs. 2 and 7, straight from the definition."""
    nx, ny, nz = omega.shape[:3]
    w = omega.reshape(nx, ny, nz, -1)
    idx = np.stack(np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij"), -1)
    x = np.asarray(origin) + h * idx.reshape(-1, 3)
    q = w.reshape(-1, w.shape[3])
    d = x[:, None, :] - x[None, :, :]
    r2 = (d ** 2).sum(-1)
    e2 = smoothing ** 2
    g = (r2 + 1.5 * e2) / (r2 + e2) ** 1.5 / (4 * np.pi)
    psi = h ** 3 * g @ q
    u = None
    if q.shape[1] == 3:  # u = sum h^3 grad G x omega, grad G = -d (r^2 + 2.5 e2) / (r^2 + e2)^2.5
        gg = -(r2 + 2.5 * e2) / (r2 + e2) ** 2.5 / (4 * np.pi)
        gradg = h ** 3 * gg[:, :, None] * d
        u = np.cross(gradg, np.broadcast_to(q[None, :, :], gradg.shape)).sum(1)
    return psi.reshape(omega.shape), None if u is None else u.reshape(nx, ny, nz, 3)


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("method", ["direct", "fmm", "fft"])
def test_poisson3d_matches_the_sum(method):
    rng = np.random.default_rng(4)
    shape, h, origin = (7, 5, 6), 0.1, (0.3, -1.0, 2.0)
    omega = rng.standard_normal(shape + (3,))
    try:
        r = fmmkit.poisson3d(omega, h, origin, velocity=True, method=method, eps=1e-8)
    except fmmkit.FmkUnavailableError:
        pytest.skip("method fft needs FFTW at build time")
    psi, u = reference(omega, h, origin, h)
    assert r.psi.shape == omega.shape and r.u.shape == shape + (3,)
    assert rel(r.psi, psi) <= 1e-7 and rel(r.u, u) <= 1e-7
    assert r.info.method == method and r.info.shape == shape and r.info.components == 3
    one = fmmkit.poisson3d(omega[..., 1], h, origin, method=method, eps=1e-8)
    assert one.psi.shape == shape and one.u is None
    assert rel(one.psi, psi[..., 1]) <= 1e-7


def test_solver_reused_and_rings():
    n = 32
    h = 1.0 / n
    idx = np.stack(np.meshgrid(*(np.arange(n),) * 3, indexing="ij"), -1).reshape(-1, 3)
    x = (idx + 0.5) * h
    omega, psi, u = fmmkit.vortex_rings(x)
    assert omega.shape == psi.shape == u.shape == (n ** 3, 3)
    with fmmkit.Poisson(eps=1e-6) as s:
        s.set_grid((n, n, n), h, (h / 2,) * 3)
        w = omega.reshape(n, n, n, 3)
        a = s.solve(w, velocity=True)
        b = s.solve(2 * w, psi=False, velocity=True)
        assert a.psi.shape == (n, n, n, 3) and b.psi is None
        assert np.allclose(b.u, 2 * a.u, rtol=1e-12, atol=0)
        # 32^3, smoothing h: the smoothing error of the barely resolved ring cores (C tests:
        # 0.378; docs/poisson.md)
        assert rel(a.psi.reshape(-1, 3), psi) < 0.45
        assert s.info.n_sources > 0
    with pytest.raises(fmmkit.FmkStateError):
        s.solve(w)


def test_bad_input():
    with pytest.raises(fmmkit.FmkValueError):
        fmmkit.poisson3d(np.zeros((4, 4)), 0.1)
    with pytest.raises(fmmkit.FmkValueError):
        fmmkit.poisson3d(np.zeros((4, 4, 4)), -1.0)
    w = np.zeros((4, 4, 4, 3))
    w[1, 2, 3, 0] = np.nan
    with pytest.raises(fmmkit.FmkValueError):
        fmmkit.poisson3d(w, 0.1)
    with pytest.raises(fmmkit.FmkValueError):
        fmmkit.poisson3d(np.ones((4, 4, 4)), 0.1, velocity=True)  # u needs 3 components
    with pytest.raises(fmmkit.FmkValueError):
        fmmkit.Poisson(method="spectral")
    with fmmkit.Poisson() as s:
        with pytest.raises(fmmkit.FmkStateError):
            s.solve(np.ones((2, 2, 2)))
        s.set_grid((2, 2, 2), 1.0)
        with pytest.raises(fmmkit.FmkValueError):
            s.solve(np.ones((3, 2, 2)))
