"""The fmmkit command of the package runs the compiled fmmkit program."""
import os
import subprocess
import sys

import pytest

from fmmkit import _cli
from conftest import REPO


def run(*args, **env):
    full = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), **env)
    return subprocess.run([sys.executable, "-m", "fmmkit", *args], env=full, capture_output=True,
                          text=True, timeout=60)


def test_runs_the_program():
    if _cli.program_path() is None:
        pytest.skip("the fmmkit program is not built")
    out = run("--help")
    assert out.returncode == 0, out.stderr
    assert "eval" in out.stdout + out.stderr


def test_passes_arguments_and_exit_status(tmp_path):
    program = tmp_path / "fake-fmmkit"
    program.write_text("#!/bin/sh\necho \"args: $*\"\nexit 3\n")
    program.chmod(0o755)
    out = run("eval", "--n", "5", FMMKIT_CLI=str(program))
    assert out.returncode == 3 and out.stdout == "args: eval --n 5\n"


def test_missing_program_says_so():
    out = run("--help", FMMKIT_CLI="/nonexistent/fmmkit")
    assert out.returncode == 127
    assert "FMMKIT_CLI=/nonexistent/fmmkit is not an executable file" in out.stderr
