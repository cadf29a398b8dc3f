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


def block_reference(x, hs, w, e):
    """Psi and u on a block grid by the sums written out: weights h_j^3, smoothing e."""
    d = x[:, None, :] - x[None, :, :]
    r2 = (d ** 2).sum(-1)
    e2 = e * e
    vol = hs ** 3
    g = (r2 + 1.5 * e2) / (r2 + e2) ** 1.5 / (4 * np.pi) * vol[None, :]
    gg = -(r2 + 2.5 * e2) / (r2 + e2) ** 2.5 / (4 * np.pi) * vol[None, :]
    gradg = gg[:, :, None] * d
    u = np.cross(gradg, np.broadcast_to(w[None, :, :], gradg.shape)).sum(1)
    return g @ w, u


def two_levels():
    """b = 4, h0 = 1/8: the cube [0, 1)^3 + anchor as 7 level-0 blocks and, in its corner
    region, 8 level-1 blocks (960 points)."""
    g = fmmkit.BlockGrid(block_size=4, h0=1 / 8, anchor=(0.2, -0.1, 0.3))
    corner = np.array([[c & 1, c >> 1 & 1, c >> 2 & 1] for c in range(8)])
    g.add_blocks(0, index=corner[1:])
    g.add_blocks(np.ones(8, dtype=np.int64), corners=np.array(g.anchor) + corner * 4 / 16)
    return g


def test_block_grid_api():
    with two_levels() as g:
        assert (g.n_blocks, g.n_points, g.block_size, g.finest_level) == (15, 960, 4, 1)
        assert g.h0 == 1 / 8 and g.anchor == (0.2, -0.1, 0.3)
        levels, index = g.blocks()
        assert levels.tolist() == [0] * 7 + [1] * 8 and index.shape == (15, 3)
        assert index[7:].tolist() == [[c & 1, c >> 1 & 1, c >> 2 & 1] for c in range(8)]
        x, h = g.points(), g.spacing()
        assert x.shape == (960, 3) and h.shape == (960,)
        # point (i, j, m) of block k at anchor + h_l (b B + (i, j, m) + 1/2), x fastest
        k, i, j, m = 9, 1, 2, 3
        p = 64 * k + i + 4 * (j + 4 * m)
        want = np.array(g.anchor) + (1 / 16) * (4 * index[k] + [i, j, m] + 0.5)
        assert np.allclose(x[p], want, rtol=0, atol=1e-15) and h[p] == 1 / 16
        assert h[0] == 1 / 8
        with pytest.raises(fmmkit.FmkValueError, match="overlap"):
            g.add_blocks(1, index=[[5, 5, 5], [1, 1, 1]])
        with pytest.raises(fmmkit.FmkValueError, match="not aligned"):
            g.add_blocks(0, corners=[0.2 + 0.25, -0.1, 2.3])
        with pytest.raises(fmmkit.FmkValueError, match="levels"):
            g.add_blocks(17, index=[9, 9, 9])
        with pytest.raises(fmmkit.FmkValueError):
            g.add_blocks(0)  # neither corners nor index
        with pytest.raises(fmmkit.FmkTypeError):
            g.add_blocks(0, index=[[1.5, 0, 0]])
        with pytest.raises(fmmkit.FmkValueError):
            g.add_blocks([0, 0], index=[[4, 0, 0]])  # two levels, one block
        assert g.n_blocks == 15  # all or nothing
        assert "15 blocks" in repr(g)
    with pytest.raises(fmmkit.FmkStateError):
        g.points()
    for bad in ({"block_size": 5}, {"block_size": 2}, {"h0": 0.0}, {"h0": float("nan")}):
        with pytest.raises(fmmkit.FmkValueError):
            fmmkit.BlockGrid(**bad)
    with pytest.raises(fmmkit.FmkValueError, match="anchor"):
        fmmkit.BlockGrid(anchor=(0, float("nan"), 0))
    with fmmkit.BlockGrid.rings(64) as r:  # docs/poisson.md: 22 blocks, 90112 points
        assert (r.n_blocks, r.n_points, r.finest_level, r.h0) == (22, 90112, 1, 1 / 32)
    with pytest.raises(fmmkit.FmkValueError, match="resolution"):
        fmmkit.BlockGrid.rings(48)


def test_block_grid_matches_the_sum():
    rng = np.random.default_rng(2)
    with two_levels() as g:
        x, h = g.points(), g.spacing()
        w = rng.standard_normal((g.n_points, 3))
        w[rng.random(g.n_points) < 0.3] = 0
        psi, u = block_reference(x, h, w, 1 / 16)
        with fmmkit.Poisson(method="direct", grid=g) as s:
            r = s.solve(w, velocity=True)
            assert r.psi.shape == (960, 3) and r.u.shape == (960, 3)
            assert rel(r.psi, psi) <= 1e-13 and rel(r.u, u) <= 1e-13
            i = r.info
            assert (i.method, i.backend, i.n_points, i.n_blocks, i.shape) == (
                "direct", "cpu", 960, 15, (0, 0, 0))
            assert i.h_min == 1 / 16 and i.smoothing == 1 / 16
            assert i.n_sources == int((w != 0).any(1).sum())
            one = s.solve(w[:, 2])
            assert one.psi.shape == (960,) and rel(one.psi, psi[:, 2]) <= 1e-13
        with fmmkit.Poisson(1e-6, method="fmm") as s:
            r = s.set_blocks(g).solve(w, velocity=True)
            assert rel(r.psi, psi) <= 1e-6 and rel(r.u, u) <= 1e-6


def test_block_grid_errors():
    with two_levels() as g:
        with pytest.raises(fmmkit.FmkUnavailableError):
            fmmkit.Poisson(method="fft", grid=g)  # uniform grids only (or no FFTW)
        with fmmkit.Poisson(method="direct", grid=g) as s:
            w = np.zeros((960, 3))
            w[64 * 3 + 5, 1] = np.nan
            with pytest.raises(fmmkit.FmkValueError, match=r"\(1, 1, 0\) of block 3"):
                s.solve(w)
            with pytest.raises(fmmkit.FmkValueError, match="960"):
                s.solve(np.zeros((961, 3)))
            with pytest.raises(fmmkit.FmkValueError):
                s.solve(np.zeros(960), velocity=True)  # u needs 3 components
            with pytest.raises(fmmkit.FmkTypeError):
                s.set_blocks("grid")
            with fmmkit.BlockGrid(4, 0.1) as empty:
                with pytest.raises(fmmkit.FmkValueError, match="no blocks"):
                    s.set_blocks(empty)
            s.set_grid((2, 2, 2), 0.5)  # a uniform grid after the blocks
            assert s.solve(np.ones((2, 2, 2))).psi.shape == (2, 2, 2)
    for bad in ({"order": -1}, {"theta": 1.5}, {"leaf_size": -2},
                {"hybrid": True, "backend": "cpu"}, {"device": -1}):
        with pytest.raises(fmmkit.FmkValueError):
            fmmkit.Poisson(method="treecode", **bad)
    with pytest.raises(fmmkit.FmkValueError):
        fmmkit.Poisson(backend="tpu")


def test_results_at_chosen_blocks():
    rng = np.random.default_rng(5)
    with two_levels() as g:
        w = rng.standard_normal((g.n_points, 3))
        for method in ("direct", "treecode"):
            with fmmkit.Poisson(1e-6, method=method, backend="cpu", grid=g) as s:
                full = s.solve(w, velocity=True)
                chosen = [12, 0, 7]
                r = s.set_targets(chosen).solve(w, velocity=True)
                b3 = 64
                assert r.info.n_targets == 3 and r.info.n_target_points == 3 * b3
                assert r.psi.shape == (3 * b3, 3) and r.u.shape == (3 * b3, 3)
                for t, k in enumerate(chosen):
                    assert np.array_equal(r.psi[t * b3:(t + 1) * b3], full.psi[k * b3:(k + 1) * b3])
                    assert np.array_equal(r.u[t * b3:(t + 1) * b3], full.u[k * b3:(k + 1) * b3])
                assert s.solve(w[:, 0]).psi.shape == (3 * b3,)
                assert np.array_equal(s.set_targets(None).solve(w).psi, full.psi)
                with pytest.raises(fmmkit.FmkValueError, match="repeated"):
                    s.set_targets([1, 1])
                with pytest.raises(fmmkit.FmkValueError, match="out of range"):
                    s.set_targets([15])
    with fmmkit.Poisson(method="direct") as s:
        s.set_grid((4, 4, 4), 0.25)
        with pytest.raises(fmmkit.FmkValueError, match="uniform grid"):
            s.set_targets([0])
