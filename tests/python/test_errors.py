"""Every error path: exception class, status, message; nothing printed, nothing half-done."""
import os
import subprocess
import sys

import numpy as np
import pytest

import fmmkit
from fmmkit import (FmkError, FmkStateError, FmkTypeError, FmkUnavailableError, FmkValueError,
                    Status)
from conftest import REPO, random_problem


@pytest.fixture(autouse=True)
def _silent(no_output):
    yield


def raises(cls, status, *fragments):
    """Context manager: the block raises exactly cls with status and a message holding every
    fragment."""
    class Check:
        def __enter__(self):
            self.ctx = pytest.raises(cls)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.ctx.__exit__(*exc)
            e = self.info.value
            assert type(e) is cls, repr(e)
            assert e.status == status and isinstance(e.status, Status), repr(e)
            for f in fragments:
                assert f in e.message, (f, e.message)
            assert e.status_name in str(e) and e.message in str(e)
            return handled
    return Check()


ARG, STATE, NONFINITE, UNAVAILABLE = (Status.ERR_ARG, Status.ERR_STATE, Status.ERR_NONFINITE,
                                      Status.ERR_UNAVAILABLE)


# -- the classes ------------------------------------------------------------------------------

def test_class_hierarchy():
    assert issubclass(FmkValueError, ValueError) and issubclass(FmkValueError, FmkError)
    assert issubclass(FmkTypeError, TypeError) and issubclass(FmkTypeError, ValueError)
    assert issubclass(FmkStateError, RuntimeError) and not issubclass(FmkStateError, ValueError)
    assert issubclass(fmmkit.FmkMemoryError, MemoryError)
    assert issubclass(FmkUnavailableError, RuntimeError)
    from fmmkit._errors import error_for
    classes = {Status.ERR_NULL: FmkValueError, Status.ERR_ARG: FmkValueError,
               Status.ERR_STATE: FmkStateError, Status.ERR_NONFINITE: FmkValueError,
               Status.ERR_NOMEM: fmmkit.FmkMemoryError,
               Status.ERR_DEVICE_NOMEM: fmmkit.FmkMemoryError,
               Status.ERR_DEVICE: fmmkit.FmkDeviceError, Status.ERR_UNAVAILABLE: FmkUnavailableError,
               Status.ERR_INTERNAL: fmmkit.FmkInternalError,
               Status.ERR_ACCURACY: fmmkit.FmkAccuracyError}
    for status, cls in classes.items():
        e = error_for(int(status), "m")
        assert type(e) is cls and e.status is status and e.status_name == "FMK_" + status.name
    e = error_for(42, "from the future")
    assert type(e) is FmkError and e.status == 42 and "42" in str(e)
    e = error_for(2, "eps = 2")
    assert str(e) == "eps = 2 (FMK_ERR_ARG)" and int(e.status) == 2 and e.status.name == "ERR_ARG"
    assert "FMK_ERR_ARG" in repr(e)


def test_status_strings_match_the_library():
    lib = fmmkit._lib.lib()
    assert lib.fmk_status_string(int(Status.ERR_ARG)) == b"invalid argument"
    for s in Status:
        assert lib.fmk_status_string(int(s)) != b"unknown status"


# -- plan creation ----------------------------------------------------------------------------

def test_unknown_names():
    with raises(FmkValueError, ARG, "unknown kernel 'coulomb'"):
        fmmkit.Plan(kernel="coulomb")
    with raises(FmkValueError, ARG, "unknown method 'fast'"):
        fmmkit.Plan(method="fast")
    with raises(FmkValueError, ARG, "unknown backend 'gpu'"):
        fmmkit.Plan(backend="gpu")
    with raises(FmkValueError, ARG, "unknown precision 'fp16'"):
        fmmkit.Plan(precision="fp16")
    with raises(FmkTypeError, ARG, "kernel must be a name"):
        fmmkit.Plan(kernel=1)


def test_dimension_and_accuracy():
    with raises(FmkValueError, ARG, "kernel laplace is 3D but dim = 2"):
        fmmkit.Plan(2, "laplace")
    with raises(FmkValueError, ARG, "dim = 4"):
        fmmkit.Plan(4, "laplace")
    for eps in (0, 1, -1e-3, float("nan")):
        with raises(FmkValueError, ARG, "eps = ", "(0, 1)"):
            fmmkit.Plan(eps=eps)
    with raises(FmkTypeError, ARG, "eps must be a number"):
        fmmkit.Plan(eps="small")
    with raises(FmkTypeError, ARG, "dim must be an integer"):
        fmmkit.Plan(dim=3.0)


def test_options():
    with raises(FmkValueError, ARG, "plummer needs a softening length"):
        fmmkit.Plan(kernel="plummer")
    with raises(FmkValueError, ARG, "opts.softening = -1"):
        fmmkit.Plan(kernel="regularized", softening=-1)
    with raises(FmkValueError, ARG, "opts.threads = -2"):
        fmmkit.Plan(threads=-2)
    with raises(FmkTypeError, ARG, "threads must be an integer"):
        fmmkit.Plan(threads=1.5)
    with raises(FmkValueError, ARG, "opts.device = -1"):
        fmmkit.Plan(device=-1)
    with raises(FmkValueError, ARG, "opts.order = 99"):
        fmmkit.Plan(order=99)
    with raises(FmkValueError, ARG, "opts.theta = 3"):
        fmmkit.Plan(theta=3)
    with raises(FmkValueError, ARG, "opts.leaf_size = -5"):
        fmmkit.Plan(leaf_size=-5)
    with raises(FmkValueError, ARG, "threads = 4294967296 is out of range"):
        fmmkit.Plan(threads=2**32)


@pytest.mark.parametrize("name,value,bits", [
    ("leaf_size", 2**70, 64), ("leaf_size", 2**63, 64), ("leaf_size", -2**64, 64),
    ("threads", 2**64 + 1, 32), ("device", 2**32, 32), ("order", -2**31 - 1, 32),
    ("dim", 2**64 + 3, 32)])
def test_integers_too_large_for_c_are_refused(name, value, bits):
    """ctypes wraps integers silently (leaf_size=2**70 became 0, dim=2**64+3 became 3); every
    integer bound for C is range-checked first."""
    with raises(FmkValueError, ARG, f"{name} = {value} is out of range",
                f"fit in a {bits}-bit C integer"):
        fmmkit.Plan(method="tree", backend="cpu", **{name: value})


def test_sizes_too_large_for_c_are_refused():
    with fmmkit.Plan(backend="cpu") as plan:
        for args, name in (((2**64 + 5,), "n_sources"), ((5, 2**64 + 5), "n_targets"),
                           ((-2**70,), "n_sources"), ((2**63,), "n_sources")):
            with raises(FmkValueError, ARG, f"{name} = ", "is out of range"):
                plan.memory(*args)
        assert plan.memory(5) == plan.memory(5, None)
    with raises(FmkValueError, ARG, "softening = ", "out of range"):
        fmmkit.Plan(kernel="plummer", softening=10**400)


def test_unavailable_method_and_backend():
    with raises(FmkUnavailableError, UNAVAILABLE, "method tree is not available in 2D"):
        fmmkit.Plan(2, "log2d", method="tree", backend="cpu")
    if fmmkit.cuda_device_count() == 0:
        with raises(FmkUnavailableError, UNAVAILABLE, "CUDA", "backend cpu"):
            fmmkit.Plan(backend="cuda")


def test_one_shot_errors():
    x, q, _ = random_problem("laplace", n=10)
    with pytest.raises(TypeError, match="softening"):
        fmmkit.plummer3d(x, q)  # a required keyword: Python's own TypeError
    with raises(FmkValueError, ARG, "softening 1e-30 is below"):
        fmmkit.plummer3d(x, q, softening=1e-30)
    with raises(FmkValueError, ARG, "eps = 0"):
        fmmkit.laplace3d(x, q, eps=0)
    with raises(FmkValueError, NONFINITE, "charges[4] is nan"):
        fmmkit.laplace3d(x, np.where(np.arange(10) == 4, np.nan, q))


# -- points -----------------------------------------------------------------------------------

@pytest.fixture
def plan():
    with fmmkit.Plan(kernel="laplace", backend="cpu") as p:
        yield p


def test_point_shapes(plan):
    with raises(FmkValueError, ARG, "sources must have shape (n, 3); got (5, 2)"):
        plan.set_points(np.zeros((5, 2)))
    with raises(FmkValueError, ARG, "sources must have shape (n, 3); got (15,)"):
        plan.set_points(np.zeros(15))
    with raises(FmkValueError, ARG, "(the transpose was given?)"):
        plan.set_points(np.zeros((3, 5)))
    with raises(FmkValueError, ARG, "targets must have shape (n, 3); got (4, 3, 1)"):
        plan.set_points(np.zeros((5, 3)), np.zeros((4, 3, 1)))
    with raises(FmkValueError, ARG, "or a complex array of shape (n,)"):
        fmmkit.log2d(np.zeros((4, 3)), np.zeros(4))


def test_point_dtypes(plan):
    with raises(FmkTypeError, ARG, "sources has complex dtype complex128"):
        plan.set_points(np.zeros((5, 3), dtype=complex))
    with raises(FmkTypeError, ARG, "sources has dtype <U1; use float64 or float32"):
        plan.set_points(np.full((5, 3), "a"))
    with raises(FmkTypeError, ARG, "targets has dtype bool"):
        plan.set_points(np.zeros((5, 3)), np.zeros((5, 3), dtype=bool))
    with raises(FmkTypeError, ARG, "sources has dtype object"):
        plan.set_points(np.zeros((2, 3), dtype=object))
    with raises(FmkTypeError, ARG, "sources is not an array of numbers"):
        plan.set_points([[0.0, 0.0, 0.0], [1.0, 2.0]])


def test_nonfinite_points_and_state_kept(plan):
    x, q, y = random_problem("laplace", n=8, m=6)
    plan.set_points(x, y)
    before = plan.eval(q).pot
    bad = x.copy()
    bad[1, 2] = np.nan
    with raises(FmkValueError, NONFINITE, "sources[1][2] is nan; points must be finite"):
        plan.set_points(bad)
    bad = y.copy()
    bad[5, 0] = -np.inf
    with raises(FmkValueError, NONFINITE, "targets[5][0] is -inf"):
        plan.set_points(x, bad)
    with raises(FmkValueError, ARG, "sources must have shape"):
        plan.set_points(np.zeros(3))
    assert np.array_equal(plan.eval(q).pot, before)  # the plan kept its points


def test_points_the_method_cannot_resolve():
    # a far outlier widens the frame until the unit cube's points are resolved to 1e-4 of
    # their spacing: the fast methods refuse them (the resolution guard), the plan takes other
    # points afterwards, and the direct method takes these
    x, q, _ = random_problem("laplace", n=400)
    far = x.copy()
    far[7] = (1e12, -5e11, 3e11)
    with fmmkit.Plan(kernel="laplace", eps=1e-6, method="fmm", backend="cpu") as p:
        with raises(fmmkit.FmkAccuracyError, Status.ERR_ACCURACY, "cannot reach a relative "
                    "accuracy of 1e-06", "method direct"):
            p.set_points(far)
        p.set_points(x)
        assert np.all(np.isfinite(p.eval(q).pot))
    with pytest.raises(ValueError):  # FmkAccuracyError is a ValueError
        fmmkit.laplace3d(far, q, eps=1e-3, method="tree", backend="cpu")
    assert np.all(np.isfinite(fmmkit.laplace3d(far, q, method="direct", backend="cpu").pot))


# -- evaluation -------------------------------------------------------------------------------

def test_eval_before_set_points(plan):
    with raises(FmkStateError, STATE, "eval: no points yet; call set_points first"):
        plan.eval(np.ones(3))
    with raises(FmkStateError, STATE, "eval_many: no points yet"):
        plan.eval_many(np.ones((2, 3)))


def test_charges(plan):
    plan.set_points(np.random.default_rng(0).random((5, 3)))
    with raises(FmkValueError, ARG, "charges must have shape (5,); got (4,)"):
        plan.eval(np.ones(4))
    with raises(FmkValueError, ARG, "charges must have shape (5,); got (1, 5)"):
        plan.eval(np.ones((1, 5)))
    with raises(FmkTypeError, ARG, "charges has complex dtype"):
        plan.eval(np.ones(5, dtype=complex))
    with raises(FmkValueError, NONFINITE, "charges[2] is inf; charges must be finite"):
        plan.eval(np.array([1, 1, np.inf, 1, 1]))
    with raises(FmkValueError, ARG, "pot=False and grad=False"):
        plan.eval(np.ones(5), grad=False, pot=False)
    with raises(FmkValueError, ARG, "charges must have shape (k, 5); got (5,)"):
        plan.eval_many(np.ones(5))
    with raises(FmkValueError, ARG, "charges must have shape (3, 5); got (3, 4)"):
        plan.eval_many(np.ones((3, 4)))
    q = np.ones((3, 5))
    q[2, 1] = np.nan
    with raises(FmkValueError, NONFINITE, "charge vector 2: charges[1] is nan"):
        plan.eval_many(q)


def test_closed_plan():
    p = fmmkit.Plan()
    p.set_points(np.zeros((2, 3)))
    p.close()
    for call in (lambda: p.eval(np.ones(2)), lambda: p.set_points(np.zeros((2, 3))),
                 lambda: p.info, lambda: p.memory(10), lambda: p.eval_many(np.ones((1, 2)))):
        with raises(FmkStateError, STATE, "the plan is closed"):
            call()


def test_memory_arguments(plan):
    with raises(FmkValueError, ARG, "fmk_plan_memory: n_sources = -1"):
        plan.memory(-1)
    with raises(FmkTypeError, ARG, "n_sources must be an integer"):
        plan.memory(1e3)


# -- device arrays without a device -------------------------------------------------------------

class FakeCudaArray:
    """Claims to be a CUDA float64 array (its memory is never touched in these tests)."""
    __module__ = "somelib.core"

    def __init__(self, shape):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f8", "data": (8, False),
                                         "strides": None, "version": 3}


class FakeRocmArray:
    def __dlpack_device__(self):
        return (10, 0)


def _have(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def test_device_arrays_need_the_cuda_backend():
    if fmmkit.cuda_device_count() > 0:
        pytest.skip("this build has a GPU")
    with raises(FmkUnavailableError, UNAVAILABLE, "CUDA"):
        fmmkit.laplace3d(FakeCudaArray((4, 3)), np.ones(4))


def test_device_arrays_need_cupy_or_torch(plan):
    if _have("cupy") or _have("torch"):
        pytest.skip("CuPy or PyTorch is installed")
    with raises(FmkUnavailableError, UNAVAILABLE, "needs CuPy or PyTorch"):
        plan.set_points(FakeCudaArray((4, 3)))


def test_host_and_device_points_do_not_mix(plan):
    with raises(FmkValueError, ARG, "both be host arrays or both be CUDA arrays"):
        plan.set_points(np.zeros((4, 3)), FakeCudaArray((4, 3)))


def test_other_dlpack_devices_are_refused(plan):
    with raises(FmkTypeError, ARG, "sources lives on DLPack device type 10"):
        plan.set_points(FakeRocmArray())


# -- the library itself -----------------------------------------------------------------------

def test_missing_library_is_a_clear_import_error():
    code = ("import fmmkit\n"
            "try:\n    fmmkit.laplace3d([[0, 0, 0]], [1])\n"
            "except ImportError as e:\n    print(e)\n")
    env = dict(os.environ, FMMKIT_LIBRARY="/nonexistent/libfmmkit.so",
               PYTHONPATH=os.path.join(REPO, "python"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stderr == ""
    assert "/nonexistent/libfmmkit.so (not found)" in out.stdout
    assert "FMMKIT_LIBRARY" in out.stdout
