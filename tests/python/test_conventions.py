"""The conventions table of docs/kernels.md, checked against the packages themselves.

Each test runs only where its package imports (fmm3dpy, fmm2dpy, pytreegrav, rebound; tools/deps.sh
installs the ones that install quickly) and compares fmmkit's direct sum, converted as the table
says, with the package's own result on small random inputs. Verified here with fmm3dpy 2.1.0,
fmm2dpy 0.0.5 (under numpy 1.26: its wheel does not load with numpy 2), pytreegrav 1.5.0 and
rebound 5.2.2.
"""
import numpy as np
import pytest

import fmmkit
from conftest import rel_l2

def need(name):
    """The module, or a skip when it is absent or does not load (fmm2dpy's wheel, built against
    numpy 1, raises ImportError under numpy 2)."""
    try:
        return __import__(name)
    except ImportError as e:
        pytest.skip(f"{name} does not import: {e}")


TOL = 1e-10  # the packages' own eps is 1e-12 or exact; fmmkit's direct sum is exact to rounding


def problem(dim, n=300, m=60, seed=5):
    rng = np.random.default_rng(seed)
    return rng.random((n, dim)), rng.standard_normal(n), rng.random((m, dim)) * 1.4 - 0.2


def test_fmm3d_lfmm3d():
    fmm3dpy = need("fmm3dpy")
    x, q, y = problem(3)
    r = fmmkit.laplace3d(x, q, y, method="direct")
    out = fmm3dpy.lfmm3d(eps=1e-12, sources=x.T.copy(), charges=q, targets=y.T.copy(), pgt=2)
    # FMM3D sums q / (4 pi r); its gradient is with respect to the target, as fmmkit's
    assert rel_l2(out.pottarg, r.pot / (4 * np.pi)) < TOL
    assert rel_l2(out.gradtarg.T, r.grad / (4 * np.pi)) < TOL
    # targets = sources: both leave the self term out
    s = fmmkit.laplace3d(x, q, method="direct")
    out = fmm3dpy.lfmm3d(eps=1e-12, sources=x.T.copy(), charges=q, pg=2)
    assert rel_l2(out.pot, s.pot / (4 * np.pi)) < TOL
    assert rel_l2(out.grad.T, s.grad / (4 * np.pi)) < TOL


def test_fmm2d_rfmm2d_and_cfmm2d():
    fmm2dpy = need("fmm2dpy")
    x, q, y = problem(2)
    g = q + 1j * np.random.default_rng(6).standard_normal(len(q))
    # rfmm2d: sum c log r, gradient with respect to the target: log2d itself
    r = fmmkit.log2d(x, q, y, method="direct")
    out = fmm2dpy.rfmm2d(eps=1e-12, sources=x.T.copy(), charges=q, targets=y.T.copy(), pgt=2)
    assert rel_l2(out.pottarg, r.pot) < TOL
    assert rel_l2(out.gradtarg.T, r.grad) < TOL
    s = fmmkit.log2d(x, q, method="direct")     # targets = sources: both leave j = i out
    out = fmm2dpy.rfmm2d(eps=1e-12, sources=x.T.copy(), charges=q, pg=2)
    assert rel_l2(out.pot, s.pot) < TOL
    assert rel_l2(out.grad.T, s.grad) < TOL
    # cfmm2d's dipoles: sum d / (z - z_j) = cauchy2d with Gamma = -d; its gradient d/dz as ours
    c = fmmkit.cauchy2d(x, -g, y, method="direct")
    out = fmm2dpy.cfmm2d(eps=1e-12, sources=x.T.copy(), dipstr=g, targets=y.T.copy(), pgt=2)
    assert rel_l2(out.pottarg, c.pot) < TOL
    assert rel_l2(out.gradtarg, c.grad) < TOL
    # cfmm2d's charges: sum c log(z - z_j) (complex log); its real part is log2d, its d/dz is
    # sum c / (z - z_j), which is cauchy2d's potential with Gamma = -c
    out = fmm2dpy.cfmm2d(eps=1e-12, sources=x.T.copy(), charges=q.astype(complex),
                         targets=y.T.copy(), pgt=2)
    assert rel_l2(out.pottarg.real, r.pot) < TOL
    c = fmmkit.cauchy2d(x, -q.astype(complex), y, method="direct")
    assert rel_l2(out.gradtarg, c.pot) < TOL


def test_pytreegrav():
    pytreegrav = need("pytreegrav")
    x, m, y = problem(3, n=200, m=40)
    m = np.abs(m)
    G = 0.7
    r = fmmkit.laplace3d(x, m, method="direct")
    pot = pytreegrav.Potential(x, m, G=G, method="bruteforce")
    acc = pytreegrav.Accel(x, m, G=G, method="bruteforce")
    assert rel_l2(pot, -G * r.pot) < TOL          # the potential is negative
    assert rel_l2(acc, G * r.grad) < TOL          # the acceleration is +G grad
    t = fmmkit.laplace3d(x, m, y, method="direct")
    assert rel_l2(pytreegrav.PotentialTarget(y, x, m, G=G, method="bruteforce"), -G * t.pot) < TOL
    assert rel_l2(pytreegrav.AccelTarget(y, x, m, G=G, method="bruteforce"), G * t.grad) < TOL
    # softening: pytreegrav's is the support radius h of the M4 cubic spline, fmmkit's
    # simulation driver's spline takes s = h / 2.8 (GADGET's convention)
    h = 0.15
    soft = np.full(len(m), h)
    pot = pytreegrav.Potential(x, m, softening=soft, G=G, method="bruteforce")
    acc = pytreegrav.Accel(x, m, softening=soft, G=G, method="bruteforce")
    sim = fmmkit.Simulation(m, x, np.zeros_like(x), G=G, softening=h / 2.8, spline=True,
                            dt=0.01, method="direct")
    st = sim.state()
    assert rel_l2(pot, -st.pot) < TOL
    assert rel_l2(acc, st.acc) < TOL


def _rebound_sim(rebound, x, m, G, soft):
    sim = rebound.Simulation()
    sim.G, sim.softening = G, soft
    sim.integrator, sim.dt, sim.gravity = "leapfrog", 1e-12, "basic"
    for xi, mi in zip(x, m):
        sim.add(m=mi, x=xi[0], y=xi[1], z=xi[2])
    return sim


@pytest.mark.parametrize("soft", [0.0, 0.05])
def test_rebound(soft):
    rebound = need("rebound")
    x, m, _ = problem(3, n=40)
    m = np.abs(m)
    G = 0.7
    sim = _rebound_sim(rebound, x, m, G, soft)
    # energy() at rest is the potential energy -G sum_{i<j} m_i m_j / r_ij, never softened
    W = -0.5 * G * np.dot(m, fmmkit.laplace3d(x, m, method="direct").pot)
    assert abs(sim.energy() - W) < TOL * abs(W)
    # one leapfrog step of 1e-12 from rest: the accelerations at the (unmoved) positions;
    # REBOUND's softening is Plummer's, 1 / sqrt(r^2 + b^2)
    sim.steps(1)
    acc = np.array([[p.ax, p.ay, p.az] for p in sim.particles])
    if soft:
        r = fmmkit.plummer3d(x, m, softening=soft, method="direct")
    else:
        r = fmmkit.laplace3d(x, m, method="direct")
    assert rel_l2(acc, G * r.grad) < 1e-9
