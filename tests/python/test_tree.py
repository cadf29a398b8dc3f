"""The treecode (method="tree") from Python: against a numpy direct sum, error falling with
theta, both walks, and its settings reported back in info."""
import numpy as np
import pytest

import fmmkit


def direct(x, q, eps2=0.0):
    d = x[:, None, :] - x[None, :, :]
    r2 = (d * d).sum(-1) + eps2
    np.fill_diagonal(r2, np.inf)
    rinv = 1.0 / np.sqrt(r2)
    pot = rinv @ q
    grad = -(d * (q[None, :] * rinv**3)[:, :, None]).sum(1)
    return pot, grad


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.fixture(scope="module")
def cloud():
    rng = np.random.default_rng(7)
    x = rng.random((3000, 3))
    q = rng.random(3000) + 0.5          # masses: one sign
    return x, q, direct(x, q)


def test_error_falls_with_theta(cloud):
    x, q, (pot, grad) = cloud
    errs = []
    for theta in (0.9, 0.6, 0.3):
        r = fmmkit.laplace3d(x, q, method="tree", backend="cpu", theta=theta)
        assert r.info.method == "tree" and r.info.theta == theta and r.info.order == 2
        errs.append((rel(r.pot, pot), rel(r.grad, grad)))
    assert errs[0][0] > errs[1][0] > errs[2][0]
    assert errs[0][1] > errs[1][1] > errs[2][1]
    assert errs[1][1] < 1e-2 and errs[2][1] < 1e-3


@pytest.mark.parametrize("walk", ["group", "stackless"])
def test_walks_and_plummer(cloud, walk):
    x, q, _ = cloud
    s = 0.01
    pot, grad = direct(x, q, s * s)
    r = fmmkit.plummer3d(x, q, softening=s, method="tree", backend="cpu", walk=walk, theta=0.5)
    assert r.info.walk == walk
    assert rel(r.pot, pot) < 1e-3 and rel(r.grad, grad) < 1e-2


def test_bad_walk_and_order():
    with pytest.raises(fmmkit.FmkError):
        fmmkit.Plan(method="tree", walk="spiral")
    with pytest.raises(ValueError):
        fmmkit.Plan(method="tree", order=3)


def test_generated_local_terms_are_current():
    """src/treecode/bh_local.h is what tools/bh_local.py writes (edit the generator, not the header)."""
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "tools" / "bh_local.py")], check=True,
                         capture_output=True, text=True).stdout
    assert out == (root / "src" / "treecode" / "bh_local.h").read_text()
