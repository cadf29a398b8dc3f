"""The 2D FMM (method fmm, dim 2) through the Python package: log2d and cauchy2d against the
direct method, at the sources and at separate targets, with the plan's info."""
import numpy as np
import pytest

import fmmkit


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("kernel", ["log2d", "cauchy2d"])
@pytest.mark.parametrize("self_eval", [True, False], ids=["self", "targets"])
def test_fmm2d_against_direct(kernel, self_eval):
    rng = np.random.default_rng(3)
    n = 3000
    x = rng.random((n, 2))
    q = rng.uniform(-1, 1, n)
    if kernel == "cauchy2d":
        q = q + 1j * rng.uniform(-1, 1, n)
    y = None if self_eval else rng.random((700, 2))
    fn = getattr(fmmkit, kernel)
    eps = 1e-8
    fmm = fn(x, q, y, eps=eps, method="fmm", backend="cpu")
    ref = fn(x, q, y, method="direct", backend="cpu")
    assert rel(fmm.pot, ref.pot) < eps
    assert rel(fmm.grad, ref.grad) < eps
    assert fmm.info.order > 0 and fmm.info.levels > 1 and fmm.info.leaf_size > 0
