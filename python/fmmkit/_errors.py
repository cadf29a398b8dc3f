"""Statuses and exceptions.

Every failure raises an FmkError carrying .status (a Status, an int with a name, the C library's
fmk_status) and .message (the sentence from fmk_plan_last_error, or the Python front end's own
for shapes and dtypes). The subclass says what kind of failure it is, and each also derives from
the matching built-in exception so ordinary except clauses work:

    status                         class                  also a
    ERR_NULL, ERR_ARG, ERR_NONFINITE  FmkValueError       ValueError
      (wrong dtype)                FmkTypeError           ValueError and TypeError
    ERR_STATE                      FmkStateError          RuntimeError
    ERR_NOMEM, ERR_DEVICE_NOMEM    FmkMemoryError         MemoryError
    ERR_DEVICE                     FmkDeviceError         RuntimeError
    ERR_UNAVAILABLE                FmkUnavailableError    RuntimeError
    ERR_INTERNAL                   FmkInternalError       RuntimeError
    ERR_ACCURACY                   FmkAccuracyError       ValueError
    ERR_INTERRUPTED                (none: a call stopped by Ctrl-C raises KeyboardInterrupt,
                                    or whatever the signal's Python handler raised)

Nothing is ever printed.
"""
from __future__ import annotations

import enum
from typing import Dict, Type, Union


class Status(enum.IntEnum):
    """fmk_status, the C library's status codes (numbers are never reused)."""
    OK = 0
    ERR_NULL = 1
    ERR_ARG = 2
    ERR_STATE = 3
    ERR_NONFINITE = 4
    ERR_NOMEM = 5
    ERR_DEVICE_NOMEM = 6
    ERR_DEVICE = 7
    ERR_UNAVAILABLE = 8
    ERR_INTERNAL = 9
    ERR_INTERRUPTED = 10
    ERR_ACCURACY = 11


class FmkError(Exception):
    """A failed fmmkit call: .status (Status), .status_name ("FMK_ERR_ARG"), .message."""

    status: Union[Status, int]
    message: str

    def __init__(self, status: int, message: str) -> None:
        code: Union[Status, int]
        try:
            code = Status(status)
        except ValueError:  # a status appended after this package was written
            code = int(status)
        self.status = code
        self.message = message
        super().__init__(code, message)

    @property
    def status_name(self) -> str:
        if isinstance(self.status, Status):
            return "FMK_" + self.status.name
        return f"fmk_status {self.status}"

    def __str__(self) -> str:
        return f"{self.message} ({self.status_name})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status_name}, {self.message!r})"


class FmkValueError(FmkError, ValueError):
    """Bad input: an argument out of range, a wrong shape, NaN or Inf, a missing array."""


class FmkTypeError(FmkValueError, TypeError):
    """Input of the wrong type or dtype (status ERR_ARG)."""


class FmkStateError(FmkError, RuntimeError):
    """A call out of order: eval before set_points, a closed plan, a device call on a CPU plan."""


class FmkMemoryError(FmkError, MemoryError):
    """Host or GPU memory ran out."""


class FmkDeviceError(FmkError, RuntimeError):
    """A CUDA call failed."""


class FmkUnavailableError(FmkError, RuntimeError):
    """The method or backend is not in this build, or no GPU is present."""


class FmkInternalError(FmkError, RuntimeError):
    """A bug in fmmkit; please report it with the message."""


class FmkAccuracyError(FmkError, ValueError):
    """The method cannot meet eps on these points in this precision: they lie closer together
    than its coordinates resolve (a far outlier, clusters nested deep, fp32). The message says
    what to do: precision fp64, method direct, or removing the outlier."""


_CLASS: Dict[int, Type[FmkError]] = {
    Status.ERR_NULL: FmkValueError,
    Status.ERR_ARG: FmkValueError,
    Status.ERR_NONFINITE: FmkValueError,
    Status.ERR_STATE: FmkStateError,
    Status.ERR_NOMEM: FmkMemoryError,
    Status.ERR_DEVICE_NOMEM: FmkMemoryError,
    Status.ERR_DEVICE: FmkDeviceError,
    Status.ERR_UNAVAILABLE: FmkUnavailableError,
    Status.ERR_INTERNAL: FmkInternalError,
    Status.ERR_ACCURACY: FmkAccuracyError,
}


def error_for(status: int, message: str) -> FmkError:
    """The exception for a status (FmkError itself for a status it does not know)."""
    return _CLASS.get(status, FmkError)(status, message)
