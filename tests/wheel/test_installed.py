"""The installed wheel, run from a fresh venv by tools/wheel.sh (not by `make test`'s pytest): the
package, its library and its program come from the venv, the versions agree, the CPU backend
works and asks for no GPU, and what the wheel was built with (FMMKIT_WHEEL_HAS: HDF5, PNG,
FFTW) works from the libraries inside it (FMMKIT_WHEEL_REPAIRED=1: auditwheel copied them in)."""
import importlib.metadata
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import fmmkit

HAS = os.environ.get("FMMKIT_WHEEL_HAS", "").split()
pytestmark = pytest.mark.skipif(not os.environ.get("FMMKIT_TEST_INSTALLED"),
                                reason="run by tools/wheel.sh against an installed wheel")


def inside(path, folder):
    return os.path.commonpath([os.path.realpath(path), os.path.realpath(folder)]) == \
        os.path.realpath(folder)


def test_everything_comes_from_the_venv():
    package = os.path.dirname(fmmkit.__file__)
    assert inside(package, sys.prefix) and sys.prefix != sys.base_prefix
    assert inside(fmmkit.library_path(), os.path.join(package, "lib"))
    program = shutil.which("fmmkit")
    assert program and inside(program, sys.prefix)
    assert "FMMKIT_LIBRARY" not in os.environ and "PYTHONPATH" not in os.environ


def test_versions_agree():
    assert fmmkit.__version__ == fmmkit.library_version() == importlib.metadata.version("fmmkit")
    out = subprocess.run(["fmmkit", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"fmmkit {fmmkit.__version__} ")


def test_no_gpu_needed():
    n = fmmkit.cuda_device_count()
    assert isinstance(n, int) and n >= 0
    if os.environ.get("FMMKIT_WHEEL_CPU_ONLY"):
        assert n == 0 and not fmmkit.method_available("direct", 3, "cuda")
    r = fmmkit.laplace3d(np.random.default_rng(1).random((300, 3)), np.ones(300),
                         method="fmm", backend="cpu", eps=1e-8)
    assert r.info.backend == "cpu" and np.all(np.isfinite(r.pot))


def test_the_program_runs():
    out = subprocess.run(["fmmkit", "demo"], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, OMP_NUM_THREADS="2"))
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.skipif("HDF5" not in HAS, reason="the wheel was built without HDF5")
def test_hdf5_snapshot(tmp_path):
    with fmmkit.Simulation.plummer(64, seed=1, dt=0.01, softening=0.05, method="direct") as sim:
        sim.snapshot(tmp_path / "s.hdf5")
        with fmmkit.Simulation.from_file(tmp_path / "s.hdf5", dt=0.01, softening=0.05) as back:
            assert np.array_equal(back.state().pos, sim.state().pos)


@pytest.mark.skipif("PNG" not in HAS, reason="the wheel was built without libpng")
def test_png(tmp_path):
    with fmmkit.Simulation.plummer(64, seed=1, dt=0.01, softening=0.05, method="direct") as sim:
        sim.png(tmp_path / "p.png", axis=2, width=32)
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.skipif("FFTW" not in HAS, reason="the wheel was built without FFTW")
def test_fftw():
    omega = np.random.default_rng(2).standard_normal((6, 5, 4))
    r = fmmkit.poisson3d(omega, 0.1, (0, 0, 0), method="fft")
    assert r.info.method == "fft" and np.all(np.isfinite(r.psi))


@pytest.mark.skipif(not os.environ.get("FMMKIT_WHEEL_REPAIRED"), reason="no auditwheel repair")
def test_libraries_come_from_the_wheel():
    """Every shared library loaded for fmmkit beyond glibc's lives in the venv."""
    fmmkit.library_version()
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if ".so" in line.split()[-1]}
    names = ("libgomp", "libhdf5", "libfftw3", "libpng", "libsz", "libaec", "libz", "libcurl")
    ours = [p for p in paths if os.path.basename(p).startswith(names)]
    assert any(os.path.basename(p).startswith("libgomp") for p in ours)
    package = os.path.dirname(os.path.dirname(fmmkit.__file__))
    outside = [p for p in ours if not inside(p, package)]
    # numpy's own copies (numpy.libs/) and the interpreter's libz may be loaded as well
    outside = [p for p in outside if "numpy" not in p and not os.path.basename(p).startswith(
        ("libz.", "libz-"))]
    assert not outside, f"loaded from outside the wheel: {outside}"
