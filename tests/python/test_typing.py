"""The package is marked typed (PEP 561): py.typed sits beside __init__.py, and wheels carry it
(pyproject.toml's wheel.packages copies every file of python/fmmkit). The type check itself is
the CTest python_mypy."""
import os

import fmmkit


def test_py_typed_marker():
    assert os.path.isfile(os.path.join(os.path.dirname(fmmkit.__file__), "py.typed"))
