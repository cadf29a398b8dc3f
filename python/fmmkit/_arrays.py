"""Arrays in and out: numpy on the host, CuPy / PyTorch / JAX arrays on a CUDA device.

Host arrays: anything numpy.asarray accepts, of a real dtype (float64, float32, integers), or
complex where complex values are meant (cauchy2d charges; 2D points given as x + iy). They are
copied only when they are not already C-contiguous float64 (complex128).

Device arrays: objects whose __dlpack_device__ says CUDA, or that expose
__cuda_array_interface__. They are used in place (converted on the device only when the dtype or
layout is not the one fmmkit needs), and results are allocated on the same device with the same
library: CuPy for CuPy, PyTorch for PyTorch, and for JAX (or any other producer) CuPy (else
PyTorch), handed back to JAX through DLPack (JAX keeps them float64 only with jax_enable_x64).
CuPy and PyTorch are imported only when such an array is seen. fmmkit works on the default CUDA
stream: the caller's current stream is synchronised before a call reads its arrays, and the
results are complete when the call returns.
"""
from __future__ import annotations

import ctypes
from typing import Any, Optional, Sequence, Tuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._errors import FmkTypeError, FmkUnavailableError, FmkValueError, Status
from ._lib import double_p

_ARG = Status.ERR_ARG

# DLPack device types (dlpack.h): host memory, CUDA memory, pinned host, managed memory.
_KDL_CPU, _KDL_CUDA, _KDL_CUDA_HOST, _KDL_CUDA_MANAGED = 1, 2, 3, 13

# The types of the public API. An argument array is anything numpy.asarray takes, or a CUDA
# array (CuPy, PyTorch and JAX arrays also have __array__, so they are ArrayLike too). A result
# array is a numpy.ndarray for host inputs and an array of the inputs' library for CUDA ones:
# typed Any, as fmmkit depends on neither CuPy nor PyTorch.
Array = Any
Shape = Tuple[int, ...]


def _shape_error(name: str, want: object, got: Sequence[int]) -> FmkValueError:
    return FmkValueError(_ARG, f"{name} must have shape {want}; got {tuple(got)}")


# ---------------------------------------------------------------------------------------------
# Host arrays
# ---------------------------------------------------------------------------------------------

def _kind_check(name: str, a: np.ndarray, complex_ok: bool) -> None:
    kind = a.dtype.kind
    if kind in "fiu":
        return
    if kind == "c" and not complex_ok:
        raise FmkTypeError(_ARG, f"{name} has complex dtype {a.dtype}; this takes real numbers "
                                 f"(complex values are for cauchy2d charges and 2D points)")
    if kind == "c":
        return
    raise FmkTypeError(_ARG, f"{name} has dtype {a.dtype}; use float64 or float32"
                             + (" (or complex128)" if complex_ok else ""))


def host_points(x: ArrayLike, dim: int, name: str) -> NDArray[np.float64]:
    """(n, dim) C-contiguous float64 points; for dim 2 also a complex (n,) array of x + iy."""
    try:
        a = np.asarray(x)
    except Exception as e:  # ragged lists and the like
        raise FmkTypeError(_ARG, f"{name} is not an array of numbers ({e})") from None
    if dim == 2 and a.dtype.kind == "c" and a.ndim == 1:
        z = np.ascontiguousarray(a, dtype=np.complex128)
        return z.view(np.float64).reshape(-1, 2)
    _kind_check(name, a, complex_ok=False)
    if a.ndim != 2 or a.shape[1] != dim:
        hint = ""
        if a.ndim == 2 and a.shape[0] == dim:
            hint = " (the transpose was given?)"
        if dim == 2:
            hint += " or a complex array of shape (n,)"
        raise FmkValueError(_ARG, f"{name} must have shape (n, {dim}){hint}; got {a.shape}")
    return np.ascontiguousarray(a, dtype=np.float64)


def host_charges(q: ArrayLike, shape: Shape, is_complex: bool,
                 name: str = "charges") -> NDArray[Any]:
    """Charges of the given shape as C-contiguous float64 (complex128 when is_complex)."""
    try:
        a = np.asarray(q)
    except Exception as e:
        raise FmkTypeError(_ARG, f"{name} is not an array of numbers ({e})") from None
    _kind_check(name, a, complex_ok=is_complex)
    if a.shape != tuple(shape):
        raise _shape_error(name, tuple(shape), a.shape)
    return np.ascontiguousarray(a, dtype=np.complex128 if is_complex else np.float64)


def ptr(a: Optional[np.ndarray]) -> Any:
    """A numpy array (or None) as the double * argument of a C call."""
    return None if a is None else a.ctypes.data_as(double_p)


# ---------------------------------------------------------------------------------------------
# Device arrays
# ---------------------------------------------------------------------------------------------

def _library_of(x: object) -> str:
    return type(x).__module__.split(".")[0]


def on_device(x: object, name: str) -> bool:
    """True for a CUDA device array, False for anything to be read on the host."""
    if x is None or isinstance(x, (np.ndarray, list, tuple, int, float, complex)):
        return False
    where = getattr(x, "__dlpack_device__", None)
    if where is not None:
        try:
            dev_type = int(where()[0])
        except Exception:
            dev_type = None
        if dev_type in (_KDL_CUDA, _KDL_CUDA_MANAGED):
            return True
        if dev_type in (_KDL_CPU, _KDL_CUDA_HOST):
            return False
        if dev_type is not None:
            raise FmkTypeError(_ARG, f"{name} lives on DLPack device type {dev_type}; fmmkit "
                                     f"takes host arrays and CUDA device arrays")
    try:
        return getattr(x, "__cuda_array_interface__") is not None
    except Exception:  # no such attribute, or an object that refuses (a CPU torch tensor)
        return False


class DeviceArray:
    """A device array adopted for a C call: .array (CuPy or torch), .lib ("cupy" or "torch"),
    .origin (the caller's library), .device (ordinal), .shape, .address (int)."""
    __slots__ = ("array", "lib", "origin", "device", "shape", "address")
    array: Any
    lib: str
    origin: str
    device: int
    shape: Shape
    address: int

    def pointer(self, offset_bytes: int = 0) -> Any:
        if self.address == 0:
            return None
        return ctypes.cast(ctypes.c_void_p(self.address + offset_bytes), double_p)


def _import_cupy() -> Any:
    try:
        import cupy
        return cupy
    except ImportError:
        return None


def _import_torch() -> Any:
    try:
        import torch
        return torch
    except ImportError:
        return None


def _adopt_torch(torch: Any, t: Any, is_complex: bool, name: str, origin: str) -> DeviceArray:
    if t.dtype == torch.bool:  # other non-float dtypes are integers, converted exactly
        raise FmkTypeError(_ARG, f"{name} has dtype {t.dtype}; use float64 or float32")
    if t.dtype.is_complex and not is_complex:
        raise FmkTypeError(_ARG, f"{name} has complex dtype {t.dtype}; this takes real numbers")
    t = t.detach().to(torch.complex128 if is_complex else torch.float64).contiguous()
    # fmmkit runs on the default stream: let the caller's stream finish writing the input.
    torch.cuda.current_stream(t.device).synchronize()
    d = DeviceArray()
    d.array, d.lib, d.origin = t, "torch", origin
    d.device, d.shape, d.address = t.device.index or 0, tuple(t.shape), t.data_ptr()
    return d


def _adopt_cupy(cupy: Any, a: Any, is_complex: bool, name: str, origin: str) -> DeviceArray:
    kind = a.dtype.kind
    if kind not in "fiuc":
        raise FmkTypeError(_ARG, f"{name} has dtype {a.dtype}; use float64 or float32")
    if kind == "c" and not is_complex:
        raise FmkTypeError(_ARG, f"{name} has complex dtype {a.dtype}; this takes real numbers")
    with cupy.cuda.Device(a.device.id):
        a = cupy.ascontiguousarray(a, dtype=cupy.complex128 if is_complex else cupy.float64)
        cupy.cuda.get_current_stream().synchronize()
    d = DeviceArray()
    d.array, d.lib, d.origin = a, "cupy", origin
    d.device, d.shape, d.address = a.device.id, tuple(a.shape), a.data.ptr
    return d


def adopt(x: Any, is_complex: bool, name: str) -> DeviceArray:
    """A CUDA array (see on_device) as float64 (complex128) C-contiguous memory on its device,
    without a host round trip."""
    origin = _library_of(x)
    if origin == "torch":
        return _adopt_torch(_import_torch(), x, is_complex, name, origin)
    if origin in ("jax", "jaxlib"):
        ready = getattr(x, "block_until_ready", None)
        if ready is not None:
            ready()
    cupy = _import_cupy()
    if cupy is not None:
        if origin == "cupy":
            a = x
        elif hasattr(x, "__dlpack__"):
            a = cupy.from_dlpack(x)
        else:
            a = cupy.asarray(x)  # through __cuda_array_interface__, no copy
        return _adopt_cupy(cupy, a, is_complex, name, origin)
    torch = _import_torch()
    if torch is not None:
        if hasattr(x, "__dlpack__"):
            t = torch.from_dlpack(x)
        else:
            t = torch.as_tensor(x, device="cuda")  # through __cuda_array_interface__
        return _adopt_torch(torch, t, is_complex, name, origin)
    raise FmkUnavailableError(Status.ERR_UNAVAILABLE,
                              f"{name} is a CUDA array from {origin}; fmmkit needs CuPy or PyTorch "
                              f"installed to take CUDA arrays from it")


def device_points(x: Any, dim: int, name: str) -> DeviceArray:
    d = adopt(x, False, name)
    if len(d.shape) != 2 or d.shape[1] != dim:
        raise _shape_error(name, f"(n, {dim})", d.shape)
    return d


def device_charges(x: Any, shape: Shape, is_complex: bool,
                   name: str = "charges") -> DeviceArray:
    d = adopt(x, is_complex, name)
    if d.shape != tuple(shape):
        raise _shape_error(name, tuple(shape), d.shape)
    return d


def device_empty(like: DeviceArray, shape: Shape, is_complex: bool) -> Any:
    """Uninitialised output on like's device, allocated by like's library."""
    if like.lib == "torch":
        import torch
        return torch.empty(shape, dtype=torch.complex128 if is_complex else torch.float64,
                           device=like.array.device)
    import cupy
    with cupy.cuda.Device(like.device):
        return cupy.empty(shape, dtype=cupy.complex128 if is_complex else cupy.float64)


def device_address(a: Any) -> int:
    if a is None:
        return 0
    return a.data_ptr() if hasattr(a, "data_ptr") else a.data.ptr


def device_result(out: Any, origin: str) -> Any:
    """A result array as the caller's library sees it (JAX gets its own array through DLPack)."""
    if out is None or origin not in ("jax", "jaxlib"):
        return out
    import jax.dlpack
    return jax.dlpack.from_dlpack(out)
