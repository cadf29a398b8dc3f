"""The grid Poisson solver (include/fmmkit_poisson.h, docs/poisson.md): the streamfunction of a
vorticity field on a uniform grid with free-space boundaries, lap Psi = -omega, and on request
the velocity u = curl Psi, by the regularized kernel of van Rees et al. (smoothing h)."""
import ctypes
import threading
import weakref
from typing import NamedTuple

import numpy as np

from ._errors import FmkStateError, FmkTypeError, FmkValueError, Status, error_for
from ._lib import fmk_poisson_info, fmk_poisson_opts, lib, poisson_p
from ._plan import _integer, _number, _Signals, _text

_ARG = Status.ERR_ARG
METHODS = {"auto": 0, "direct": 1, "fmm": 2, "fft": 3}
_METHOD_NAMES = {v: k for k, v in METHODS.items()}


def _check(status, handle=None):
    if status != 0:
        raise error_for(status, _text(lib().fmk_poisson_last_error(handle)))


class PoissonInfo(NamedTuple):
    """What a solver is and what its last calls cost (fmk_poisson_info)."""
    method: str        # the method used: "direct", "fmm" or "fft"
    eps: float         # the accuracy asked of method fmm
    smoothing: float   # the kernel's smoothing length (length units)
    shape: tuple       # (nx, ny, nz)
    h: float
    components: int    # of the last solve
    n_sources: int     # grid points with nonzero omega in the last solve
    bytes_host: int
    setup_time: float  # seconds of the last set_grid
    solve_time: float  # seconds of the last solve
    threads: int


class PoissonResult(NamedTuple):
    """psi: the shape of omega, or None; u: (nx, ny, nz, 3), or None; info: PoissonInfo."""
    psi: object
    u: object
    info: PoissonInfo


class Poisson:
    """A solver: made once, given a grid, then solved as often as needed (the grid's work, the
    FFT of the kernel or the points of the sums, is done once per grid).

        with fmmkit.Poisson(eps=1e-6) as s:
            s.set_grid((64, 64, 64), h=1 / 64)
            r = s.solve(omega, velocity=True)     # omega (64, 64, 64, 3): r.psi, r.u

    method: "auto" (fft where the build has FFTW, else fmm), "fft" (Hockney-Eastwood, exact
    to rounding), "direct" (the sum, exact to rounding, O(N^2)), "fmm" (the sum within eps).
    smoothing: the kernel's smoothing length (None: h). threads: OpenMP threads. Ctrl-C stops
    a long call (KeyboardInterrupt); the solver stays usable."""

    def __init__(self, eps=1e-6, *, method="auto", smoothing=None, threads=None):
        L = lib()
        if method not in METHODS:
            raise FmkValueError(_ARG, f"unknown method {method!r} (auto, direct, fmm, fft)")
        opts = fmk_poisson_opts()
        L.fmk_poisson_opts_default(ctypes.byref(opts))
        opts.method = METHODS[method]
        if smoothing is not None:
            opts.smoothing = _number("smoothing", smoothing, float)
        if threads is not None:
            opts.threads = _integer("threads", threads, 32)
        handle = poisson_p()
        _check(L.fmk_poisson_create(ctypes.byref(handle), _number("eps", eps, float),
                                    ctypes.byref(opts)))
        self._handle = handle
        self._lock = threading.Lock()
        self._shape = None
        self._finalizer = weakref.finalize(self, L.fmk_poisson_destroy, handle)
        self._signals = _Signals()
        _check(L.fmk_poisson_set_interrupt(handle, self._signals.fn, None), handle)

    def _live(self):
        if not self._finalizer.alive:
            raise FmkStateError(Status.ERR_STATE, "the solver is closed")
        return self._handle

    def _run(self, fn, *args):
        status = self._signals.call(fn, self._handle, *args)
        self._signals.raise_pending(status)
        _check(status, self._handle)

    def set_grid(self, shape, h, origin=(0.0, 0.0, 0.0)):
        """The uniform grid of shape (nx, ny, nz): points origin + h (i, j, k). Returns self."""
        if len(tuple(shape)) != 3:
            raise FmkValueError(_ARG, f"shape must be (nx, ny, nz); got {shape!r}")
        nx, ny, nz = (_integer("shape", n) for n in shape)
        o = np.ascontiguousarray(np.asarray(origin, dtype=np.float64).reshape(-1))
        if o.shape != (3,):
            raise FmkValueError(_ARG, f"origin must have 3 values; got {origin!r}")
        with self._lock:
            self._live()
            self._shape = None
            self._run(lib().fmk_poisson_set_grid, nx, ny, nz, _number("h", h, float),
                      o.ctypes.data_as(ctypes.POINTER(ctypes.c_double)))
            self._shape = (nx, ny, nz)
        return self

    def solve(self, omega, *, velocity=False, psi=True):
        """Psi (the shape of omega) and, with velocity=True, u = curl Psi (nx, ny, nz, 3) for the
        vorticity omega of shape (nx, ny, nz) (one component) or (nx, ny, nz, 3), indexed
        [i, j, k(, a)] with i along x. velocity needs three components."""
        if not psi and not velocity:
            raise FmkValueError(_ARG, "psi=False and velocity=False: ask for at least one")
        a = np.asarray(omega)
        if a.dtype.kind not in "biuf":
            raise FmkTypeError(_ARG, f"omega must be real numbers; got dtype {a.dtype}")
        with self._lock:
            self._live()
            if self._shape is None:
                raise FmkStateError(Status.ERR_STATE, "solve: no grid yet; call set_grid first")
            nx, ny, nz = self._shape
            if a.shape not in ((nx, ny, nz), (nx, ny, nz, 1), (nx, ny, nz, 3)):
                raise FmkValueError(_ARG, f"omega must have shape ({nx}, {ny}, {nz}) or "
                                          f"({nx}, {ny}, {nz}, 3); got {a.shape}")
            c = 1 if a.ndim == 3 else a.shape[3]
            # the C layout: x fastest, components interleaved, i.e. (nz, ny, nx, c) in C order
            w = np.ascontiguousarray(a.reshape(nx, ny, nz, c).transpose(2, 1, 0, 3),
                                     dtype=np.float64)
            p = np.empty((nz, ny, nx, c)) if psi else None
            u = np.empty((nz, ny, nx, 3)) if velocity else None
            ptr = ctypes.POINTER(ctypes.c_double)
            self._run(lib().fmk_poisson_solve, c, w.ctypes.data_as(ptr),
                      p.ctypes.data_as(ptr) if p is not None else None,
                      u.ctypes.data_as(ptr) if u is not None else None)
            info = self._info_locked()
        if p is not None:
            p = np.ascontiguousarray(p.transpose(2, 1, 0, 3)).reshape(a.shape)
        if u is not None:
            u = np.ascontiguousarray(u.transpose(2, 1, 0, 3))
        return PoissonResult(p, u, info)

    def _info_locked(self):
        c = fmk_poisson_info()
        _check(lib().fmk_poisson_get_info(self._live(), ctypes.byref(c)), self._handle)
        return PoissonInfo(_METHOD_NAMES.get(c.method, str(c.method)), c.eps, c.smoothing,
                           (c.nx, c.ny, c.nz), c.h, c.components, c.n_sources, c.bytes_host,
                           c.setup_time, c.solve_time, c.threads)

    @property
    def info(self):
        with self._lock:
            return self._info_locked()

    def close(self):
        """Frees the solver (also done at the end of a with block or by garbage collection)."""
        with self._lock:
            self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def poisson3d(omega, h, origin=(0.0, 0.0, 0.0), *, eps=1e-6, velocity=False, psi=True,
              method="auto", smoothing=None, threads=None):
    """Psi with lap Psi = -omega in free space, and on request u = curl Psi, for the vorticity
    omega on the uniform grid origin + h (i, j, k): omega (nx, ny, nz) or (nx, ny, nz, 3).
    Returns a PoissonResult (.psi the shape of omega, .u (nx, ny, nz, 3) or None, .info).
    The sum of van Rees et al. (eqs. 2, 7): Psi(x) = 1/(4 pi) sum_j h^3 omega_j G_eps(x - x_j),
    smoothing eps = h unless given; eps is the accuracy of method "fmm" (see Poisson)."""
    a = np.asarray(omega)
    if a.ndim not in (3, 4):
        raise FmkValueError(_ARG, f"omega must have shape (nx, ny, nz) or (nx, ny, nz, 3); "
                                  f"got {a.shape}")
    with Poisson(eps, method=method, smoothing=smoothing, threads=threads) as s:
        s.set_grid(a.shape[:3], h, origin)
        return s.solve(a, velocity=velocity, psi=psi)


def vortex_rings(points):
    """The test problem of van Rees et al. (section 5.1; docs/poisson.md) at points (n, 3):
    the exact omega, Psi and u = curl Psi, each (n, 3)."""
    x = np.ascontiguousarray(np.asarray(points, dtype=np.float64))
    if x.ndim != 2 or x.shape[1] != 3:
        raise FmkValueError(_ARG, f"points must have shape (n, 3); got {x.shape}")
    n = x.shape[0]
    out = [np.empty((n, 3)) for _ in range(3)]
    ptr = ctypes.POINTER(ctypes.c_double)
    _check(lib().fmk_poisson_rings(n, x.ctypes.data_as(ptr), *(o.ctypes.data_as(ptr) for o in out)))
    return tuple(out)
