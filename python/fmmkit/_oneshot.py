"""One-shot evaluations: a Plan made, used once and closed, behind one function per kernel."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
from numpy.typing import ArrayLike

from . import _arrays
from ._plan import Plan, Result


def _run(kernel: str, sources: ArrayLike, charges: Any, targets: Optional[ArrayLike],
         eps: Optional[float], grad: bool, method: str, backend: str, precision: str,
         threads: Optional[int], device: Optional[int], softening: Optional[float] = None,
         pot: bool = True, **expert: Any) -> Result:
    gpu = [a for a in (sources, targets, charges) if _arrays.on_device(a, "an argument")]
    if gpu and backend == "auto":
        backend = "cuda"  # CUDA arrays need the CUDA backend: say so if this build lacks it
    if device is None:
        device = 0
        if gpu:
            ordinal = getattr(getattr(gpu[0], "device", None), "index", None)  # torch
            if ordinal is None:
                ordinal = getattr(getattr(gpu[0], "device", None), "id", None)  # cupy
            if isinstance(ordinal, int):
                device = ordinal
    many = getattr(charges, "ndim", None) == 2 or (not gpu and np.ndim(charges) == 2)
    nd = len(charges) if many else 1  # nd vectors, shape (nd, n): the plan tuned for them
    with Plan(kernel=kernel, eps=eps, method=method, backend=backend, precision=precision,
              softening=softening, threads=threads, device=device, n_vectors=max(1, min(nd, 1024)),
              **expert) as plan:
        plan.set_points(sources, targets)
        if many:
            return plan.eval_many(charges, grad=grad, pot=pot)
        return plan.eval(charges, grad=grad, pot=pot)


def laplace3d(sources: ArrayLike, charges: ArrayLike, targets: Optional[ArrayLike] = None, *,
              eps: Optional[float] = None, grad: bool = True, pot: bool = True,
              method: str = "auto", backend: str = "auto", precision: str = "fp64",
              threads: Optional[int] = None, device: Optional[int] = None,
              theta: Optional[float] = None, order: Optional[int] = None,
              leaf_size: Optional[int] = None, walk: Optional[str] = None) -> Result:
    """phi(y_i) = sum_j q_j / |y_i - x_j| and its gradient in 3D.

    sources (n, 3), charges (n,), targets (m, 3) or None for the sources (self term left out).
    Returns a Result: .pot (m,), .grad (m, 3) or None, .info. Coincident points contribute 0.
    Several charge vectors at once: charges (nd, n) give .pot (nd, m), .grad (nd, m, 3) (one
    plan, Plan.eval_many). grad=False or pot=False leaves that output out (None).
    theta, order, leaf_size, walk: expert settings of method="tree" (see Plan)."""
    return _run("laplace", sources, charges, targets, eps, grad, method, backend, precision,
                threads, device, pot=pot, theta=theta, order=order, leaf_size=leaf_size,
                walk=walk)


def plummer3d(sources: ArrayLike, charges: ArrayLike, targets: Optional[ArrayLike] = None, *,
              softening: float, eps: Optional[float] = None, grad: bool = True,
              pot: bool = True, method: str = "auto", backend: str = "auto",
              precision: str = "fp64", threads: Optional[int] = None,
              device: Optional[int] = None, theta: Optional[float] = None,
              order: Optional[int] = None, leaf_size: Optional[int] = None,
              walk: Optional[str] = None) -> Result:
    """phi(y_i) = sum_j q_j / sqrt(|y_i - x_j|^2 + s^2) (softened gravity), s = softening > 0.

    Shapes as laplace3d; theta, order, leaf_size, walk as there."""
    return _run("plummer", sources, charges, targets, eps, grad, method, backend, precision,
                threads, device, softening, pot=pot, theta=theta, order=order,
                leaf_size=leaf_size, walk=walk)


def regularized3d(sources: ArrayLike, charges: ArrayLike, targets: Optional[ArrayLike] = None,
                  *, softening: float, eps: Optional[float] = None, grad: bool = True,
                  pot: bool = True, method: str = "auto", backend: str = "auto",
                  precision: str = "fp64", threads: Optional[int] = None,
                  device: Optional[int] = None) -> Result:
    """phi(y_i) = sum_j q_j (r^2 + 1.5 s^2) / (r^2 + s^2)^(3/2), r = |y_i - x_j|, s = softening.

    Shapes as laplace3d."""
    return _run("regularized", sources, charges, targets, eps, grad, method, backend, precision,
                threads, device, softening, pot=pot)


def log2d(sources: ArrayLike, charges: ArrayLike, targets: Optional[ArrayLike] = None, *,
          eps: Optional[float] = None, grad: bool = True, pot: bool = True,
          method: str = "auto", backend: str = "auto", precision: str = "fp64",
          threads: Optional[int] = None, device: Optional[int] = None) -> Result:
    """phi(y_i) = sum_j q_j log |y_i - x_j| and its gradient in 2D.

    sources (n, 2) (or complex (n,)), charges (n,), targets (m, 2) or None.
    Returns a Result: .pot (m,), .grad (m, 2) or None, .info."""
    return _run("log2d", sources, charges, targets, eps, grad, method, backend, precision,
                threads, device, pot=pot)


def cauchy2d(sources: ArrayLike, charges: ArrayLike, targets: Optional[ArrayLike] = None, *,
             eps: Optional[float] = None, grad: bool = True, pot: bool = True,
             method: str = "auto", backend: str = "auto", precision: str = "fp64",
             threads: Optional[int] = None, device: Optional[int] = None) -> Result:
    """phi(z) = sum_j Gamma_j / (z_j - z) with complex Gamma_j; "grad" is dphi/dz =
    sum_j Gamma_j / (z_j - z)^2.

    sources (n, 2) or complex (n,), charges complex (n,), targets likewise or None.
    Returns a Result: .pot complex (m,), .grad complex (m,) or None, .info."""
    return _run("cauchy2d", sources, charges, targets, eps, grad, method, backend, precision,
                threads, device, pot=pot)
