"""fmmkit: fast N-body summation (potentials and gradients) on GPUs and CPUs.

    import numpy as np, fmmkit
    x = np.random.rand(1000, 3); q = np.random.rand(1000)
    r = fmmkit.laplace3d(x, q)          # r.pot (1000,), r.grad (1000, 3), r.info

One-shot functions: laplace3d, plummer3d, regularized3d (3D), log2d, cauchy2d (2D). For many
evaluations on the same points, a Plan. Vorticity on a grid to streamfunction and velocity:
poisson3d, or a Poisson solver for many solves, on uniform grids or a BlockGrid (vortex_rings:
the test problem). N-body simulations (docs/simulation.md): Simulation; cosmological ones
(docs/cosmology.md): cosmology, cosmo_ic and Simulation.cosmo. Failures raise FmkError
subclasses (bad input: FmkValueError, a ValueError). The kernels are defined exactly in
docs/kernels.md and include/fmmkit.h; this package is a thin ctypes layer over libfmmkit (see fmmkit._lib for where
the library is found; FMMKIT_LIBRARY names it explicitly).

Threads: calls into the C library release the GIL. The CPU backend uses OpenMP threads:
threads= on a call or Plan, else OMP_NUM_THREADS as read when the library is first loaded, else
every core.

GPU arrays: with the CUDA backend, CuPy, PyTorch and JAX arrays (anything exposing DLPack or
__cuda_array_interface__) are read in place on the GPU and results come back as arrays of the
same library, with no trip through host memory.

The package is typed (py.typed): argument arrays are numpy.typing.ArrayLike, result arrays
numpy arrays (Any, as CUDA results are arrays of the caller's library).
"""
from __future__ import annotations

from ._errors import (FmkAccuracyError, FmkDeviceError, FmkError, FmkInternalError,
                      FmkMemoryError, FmkStateError, FmkTypeError, FmkUnavailableError,
                      FmkValueError, Status)
from ._lib import library_path, lib as _load
from ._oneshot import cauchy2d, laplace3d, log2d, plummer3d, regularized3d
from ._plan import Info, Memory, Plan, Result
from ._poisson import BlockGrid, Poisson, PoissonInfo, PoissonResult, poisson3d, vortex_rings
from ._sim import Energy, Simulation, SimInfo, State
from ._cosmo import CosmoIC, Cosmology, cosmo_ic, cosmology

__version__ = "0.1.0"

__all__ = [
    "laplace3d", "plummer3d", "regularized3d", "log2d", "cauchy2d",
    "Plan", "Result", "Info", "Memory",
    "poisson3d", "Poisson", "PoissonResult", "PoissonInfo", "BlockGrid", "vortex_rings",
    "Simulation", "SimInfo", "Energy", "State", "cosmology", "Cosmology", "cosmo_ic", "CosmoIC",
    "FmkError", "FmkValueError", "FmkTypeError", "FmkStateError", "FmkMemoryError",
    "FmkDeviceError", "FmkUnavailableError", "FmkInternalError", "FmkAccuracyError", "Status",
    "library_version", "library_path", "cuda_device_count", "method_available",
]


def library_version() -> str:
    """The version of the loaded libfmmkit, "major.minor.patch"."""
    return _load().fmk_version().decode()


def cuda_device_count() -> int:
    """CUDA devices usable by the loaded library (0 in a CPU-only build or without a GPU)."""
    return _load().fmk_cuda_device_count()


def method_available(method: str, dim: int, backend: str = "auto") -> bool:
    """True if a method ("auto", "direct", "tree", "fmm") runs in dim on backend in this build."""
    from ._plan import _lookup
    return bool(_load().fmk_method_available(_lookup("method", method), int(dim),
                                             _lookup("backend", backend)))
