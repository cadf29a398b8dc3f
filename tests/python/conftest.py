"""Shared helpers: numpy direct sums of every kernel (the reference), relative l2 error."""
import os
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The package of this checkout (ctest also puts it on PYTHONPATH), unless the tests run against
# an installed fmmkit (FMMKIT_TEST_INSTALLED=1: tools/wheel.sh, the wheel in a fresh venv).
if not os.environ.get("FMMKIT_TEST_INSTALLED") and os.path.join(REPO, "python") not in sys.path:
    sys.path.insert(0, os.path.join(REPO, "python"))

# test_mpi_plan.py and test_mpi_sim.py run under mpirun (ctest mpi_python_ranks_*,
# mpi_python_sim_ranks_*), not in the pytest process.
collect_ignore = ["test_mpi_plan.py", "test_mpi_sim.py"]

DIM = {"laplace": 3, "plummer": 3, "regularized": 3, "log2d": 2, "cauchy2d": 2}
SMOOTH = ("plummer", "regularized")


def direct(kernel, x, q, y=None, s=0.0):
    """(pot, grad) by the definitions in include/fmmkit.h, in float64 (complex for cauchy2d).
    y None: targets are the sources and the term j = i is left out; coincident points contribute
    nothing for the singular kernels."""
    self_eval = y is None
    y = x if self_eval else y
    d = y[:, None, :] - x[None, :, :]           # y_i - x_j, shape (m, n, dim)
    r2 = np.einsum("mnk,mnk->mn", d, d)
    skip = np.zeros(r2.shape, dtype=bool)
    if self_eval:
        np.fill_diagonal(skip, True)
    if kernel not in SMOOTH:
        skip |= r2 == 0
    r2s = np.where(skip, 1.0, r2)
    if kernel == "laplace":
        g = 1 / np.sqrt(r2s)
        dg = -g ** 3                             # dG/dr divided by r
    elif kernel == "plummer":
        u = r2s + s * s
        g = u ** -0.5
        dg = -u ** -1.5
    elif kernel == "regularized":
        u = r2s + s * s
        g = (r2s + 1.5 * s * s) * u ** -1.5
        dg = -(u ** -1.5 + 1.5 * s * s * u ** -2.5)
    elif kernel == "log2d":
        g = 0.5 * np.log(r2s)
        dg = 1 / r2s
    elif kernel == "cauchy2d":
        zx = x[:, 0] + 1j * x[:, 1]
        zy = y[:, 0] + 1j * y[:, 1]
        w = zx[None, :] - zy[:, None]            # z_j - z
        w = np.where(skip, 1.0, w)
        k1 = np.where(skip, 0, 1 / w)
        k2 = np.where(skip, 0, 1 / w ** 2)
        return k1 @ q, k2 @ q
    g = np.where(skip, 0.0, g)
    dg = np.where(skip, 0.0, dg)
    pot = g @ q
    grad = np.einsum("mn,mnk,n->mk", dg, d, q)
    return pot, grad


def rel_l2(a, b):
    a, b = np.asarray(a), np.asarray(b)
    scale = np.linalg.norm(b.ravel())
    return np.linalg.norm((a - b).ravel()) / (scale if scale > 0 else 1.0)


def random_problem(kernel, n=200, m=150, seed=0):
    """Sources, charges, targets for a kernel (complex charges for cauchy2d)."""
    rng = np.random.default_rng(seed)
    dim = DIM[kernel]
    x = rng.random((n, dim))
    y = rng.random((m, dim)) * 1.5 - 0.25
    q = rng.standard_normal(n)
    if kernel == "cauchy2d":
        q = q + 1j * rng.standard_normal(n)
    return x, q, y


def lattice_problem(kernel, seed=0):
    """Sources on a jittered lattice and targets on the lattice shifted by half a cell: no two
    points closer than 0.6 cells, so fp32 rounding of the coordinates stays near its 1e-7."""
    rng = np.random.default_rng(seed)
    dim = DIM[kernel]
    k = 6 if dim == 3 else 14
    cells = np.stack(np.meshgrid(*[np.arange(k)] * dim, indexing="ij"), -1).reshape(-1, dim)
    x = (cells + 0.2 * (rng.random(cells.shape) - 0.5)) / k
    y = (cells[: len(cells) * 2 // 3] + 0.5 + 0.2 * (rng.random((len(cells) * 2 // 3, dim)) - 0.5)) / k
    q = rng.standard_normal(len(x))
    if kernel == "cauchy2d":
        q = q + 1j * rng.standard_normal(len(x))
    return x, q, y


@pytest.fixture
def no_output(capfd):
    """Asserts that the test printed nothing (the library and package never print)."""
    yield
    out, err = capfd.readouterr()
    assert out == "" and err == "", (out, err)
