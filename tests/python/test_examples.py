"""Every Python example runs and prints."""
import glob
import os
import subprocess
import sys

import pytest

from conftest import REPO

EXAMPLES = sorted(glob.glob(os.path.join(REPO, "examples", "python", "*.py")))


def test_there_is_an_example_per_function():
    names = {os.path.basename(p)[:-3] for p in EXAMPLES}
    assert names >= {"laplace3d", "plummer3d", "regularized3d", "log2d", "cauchy2d",
                     "plan_reuse"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: os.path.basename(p))
def test_example_runs(path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(REPO, "python")] + [p for p in [env.get("PYTHONPATH")] if p])
    out = subprocess.run([sys.executable, path], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() and out.stderr == ""
