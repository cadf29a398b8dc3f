"""The public API's types as a caller sees them: checked by mypy (the test python_mypy, with
examples/python/*.py), never run. Each assert_type fails the check when an annotation of the
package changes what a caller gets; the calls themselves check the argument types."""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np
from numpy.typing import NDArray
from typing_extensions import assert_type

import fmmkit


def sums(x: NDArray[np.float64], q: NDArray[np.float64]) -> None:
    r = fmmkit.laplace3d(x, q, eps=1e-8, method="fmm", threads=2)
    assert_type(r, fmmkit.Result)
    assert_type(r.info, fmmkit.Info)
    assert_type(r.info.times, dict[str, float])
    assert_type(r.info.method, str)
    fmmkit.plummer3d(x.tolist(), q.tolist(), x[:10], softening=0.01, grad=False)
    fmmkit.regularized3d(x, q, softening=0.1, precision="fp32")
    fmmkit.log2d(x[:, :2], q, pot=False)
    fmmkit.cauchy2d(x[:, 0] + 1j * x[:, 1], 1j * q)
    with fmmkit.Plan(3, "laplace", 1e-6, method="tree", theta=0.5, walk="group") as plan:
        assert_type(plan, fmmkit.Plan)
        assert_type(plan.set_points(x), fmmkit.Plan)
        assert_type(plan.eval(q, grad=False), fmmkit.Result)
        assert_type(plan.eval_many(np.stack([q, q])), fmmkit.Result)
        assert_type(plan.memory(len(x)), fmmkit.Memory)
        assert_type(plan.memory(len(x)).host, int)
        assert_type(plan.mpi_info, Optional[dict[str, Any]])
        assert_type(plan.closed, bool)
    assert_type(fmmkit.method_available("fmm", 3), bool)
    assert_type(fmmkit.library_version(), str)
    assert_type(fmmkit.cuda_device_count(), int)


def errors() -> None:
    try:
        fmmkit.laplace3d([[0.0, 0.0, 0.0]], [1.0], eps=2.0)
    except fmmkit.FmkValueError as e:
        assert_type(e.message, str)
        assert_type(e.status_name, str)
        assert_type(e.status == fmmkit.Status.ERR_ARG, bool)


def grids(omega: NDArray[np.float64]) -> None:
    r = fmmkit.poisson3d(omega, 1 / 32, velocity=True, method="fft")
    assert_type(r, fmmkit.PoissonResult)
    assert_type(r.info.shape, Tuple[int, int, int])
    with fmmkit.BlockGrid(block_size=8, h0=1 / 16) as g:
        assert_type(g, fmmkit.BlockGrid)
        g.add_blocks(0, index=[[1, 0, 0], [0, 1, 0]]).add_blocks(1, corners=[[0.0, 0.0, 0.0]])
        assert_type(g.n_points, int)
        assert_type(g.points(), NDArray[np.float64])
        levels, index = g.blocks()
        assert_type(levels, NDArray[np.int32])
        w, psi, u = fmmkit.vortex_rings(g.points())
        assert_type(w, NDArray[np.float64])
        with fmmkit.Poisson(1e-6, grid=g, method="treecode") as s:
            assert_type(s.set_targets([0]).solve(w), fmmkit.PoissonResult)
            assert_type(s.info, fmmkit.PoissonInfo)
    with fmmkit.BlockGrid.rings(64) as rings:
        assert_type(rings, fmmkit.BlockGrid)


def simulations(tmp: str) -> None:
    c = fmmkit.cosmology("planck18", sigma_8=0.8)
    assert_type(c, fmmkit.Cosmology)
    assert_type(c.comoving_dt(0.5, 1.0, 100, "loga"), float)
    ic = fmmkit.cosmo_ic(1000, radius=20.0, cosmology=c, seed=3)
    assert_type(ic, fmmkit.CosmoIC)
    assert_type(ic.pos, NDArray[np.float64])
    with fmmkit.Simulation.plummer(256, dt=1 / 64, softening=0.01) as sim:
        assert_type(sim, fmmkit.Simulation)
        assert_type(sim.run(steps=2).set_output(tmp, snap_every=1), fmmkit.Simulation)
        assert_type(sim.info, fmmkit.SimInfo)
        assert_type(sim.info.momentum, Tuple[float, float, float])
        assert_type(sim.a, Optional[float])
        assert_type(sim.energy().total, float)
        assert_type(sim.state(), fmmkit.State)
    cosmo = fmmkit.Simulation.cosmo(2000, z_end=1.0, steps=8, cosmology=c, theta=0.6)
    assert_type(cosmo, fmmkit.Simulation)
    fmmkit.Simulation(ic.mass, ic.pos, ic.vel, dt=0.01, comoving=True, a_start=0.02).close()
