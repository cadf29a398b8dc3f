"""The grid Poisson solver (include/fmmkit_poisson.h, docs/poisson.md): the streamfunction of a
vorticity field on a uniform or block-structured grid with free-space boundaries,
lap Psi = -omega, and on request the velocity u = curl Psi, by the regularized kernel of van Rees
et al. (smoothing h_min)."""
from __future__ import annotations

import ctypes
import threading
import weakref
from typing import (TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Sequence, Tuple, TypeVar,
                    cast)

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from ._arrays import Array, adopt, device_address, device_empty, device_result, on_device
from ._errors import FmkStateError, FmkTypeError, FmkValueError, Status, error_for
from ._lib import fmk_poisson_info, fmk_poisson_opts, grid_p, lib, poisson_p
from ._plan import _integer, _lookup, _number, _Signals, _text

_ARG = Status.ERR_ARG
METHODS = {"auto": 0, "direct": 1, "fmm": 2, "fft": 3, "treecode": 4}
_METHOD_NAMES = {v: k for k, v in METHODS.items()}
_BACKEND_NAMES = {0: "auto", 1: "cpu", 2: "cuda"}
_dp = ctypes.POINTER(ctypes.c_double)
_Self = TypeVar("_Self", bound="_Owned")
if TYPE_CHECKING:  # generic for the type checker only
    _Finalizer = weakref.finalize[..., Any]
else:
    _Finalizer = weakref.finalize


def _check(status: int, handle: Any = None) -> None:
    if status != 0:
        raise error_for(status, _text(lib().fmk_poisson_last_error(handle)))


class PoissonInfo(NamedTuple):
    """What a solver is and what its last calls cost (fmk_poisson_info; the treecode's fields
    are 0 for the other methods)."""
    method: str        # the method used: "direct", "fmm", "fft" or "treecode"
    eps: float         # the accuracy asked of methods fmm and treecode
    smoothing: float   # the kernel's smoothing length (length units)
    shape: Tuple[int, int, int]  # (nx, ny, nz) of a uniform grid; (0, 0, 0) for a block grid
    h: float           # the finest spacing, as h_min
    components: int    # of the last solve
    n_sources: int     # grid points with nonzero omega in the last solve
    bytes_host: int
    setup_time: float  # seconds of the last set_grid / set_blocks
    solve_time: float  # seconds of the last solve
    threads: int
    backend: str = "cpu"       # the backend used: "cpu" or "cuda"
    n_points: int = 0          # grid points (the destinations)
    n_blocks: int = 0          # blocks (1 for a uniform grid)
    h_min: float = 0.0         # the finest spacing
    order: int = 0             # treecode: the multipoles' order p
    theta: float = 0.0         # treecode: the opening parameter
    leaf_size: int = 0         # treecode: sources per leaf at most
    n_bricks: int = 0          # treecode: destination bricks
    n_nodes: int = 0           # treecode: nodes of the source tree
    direct_pairs: float = 0.0  # treecode: point-source pairs summed directly (last solve)
    far_pairs: float = 0.0     # treecode: point-multipole evaluations (last solve)
    time_tree: float = 0.0     # treecode, seconds of the last solve: sorting and the tree,
    time_plans: float = 0.0    #   the logical plans (0 when reused),
    time_expand: float = 0.0   #   the multipoles,
    time_direct: float = 0.0   #   the direct part,
    time_far: float = 0.0      #   the multipole evaluations;
    time_cpu_part: float = 0.0  # hybrid: wall seconds of the CPU's part
    time_gpu_part: float = 0.0  # and of the GPU's
    bytes_device: int = 0
    n_targets: int = 0         # blocks chosen by set_targets (0: every point)
    n_target_points: int = 0   # points the results hold


class _Owned:
    """A C object held by a Python one (self._lock, self._finalizer): close() frees it, also at
    the end of a with block or by garbage collection."""
    _lock: threading.Lock
    _finalizer: _Finalizer

    def close(self) -> None:
        """Frees the C object now (a solver given a grid keeps its own copy of it)."""
        with self._lock:
            self._finalizer()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BlockGrid(_Owned):
    """A block-structured grid (fmk_grid; docs/poisson.md, "The grid"): non-overlapping cubes of
    block_size^3 cell-centred points. A block of level l has spacing h_l = h0 / 2^l and block
    index B (3 integers >= 0); it covers anchor + block_size h_l (B + [0, 1)^3), and its point
    (i, j, m) is at anchor + h_l (block_size B + (i, j, m) + 1/2). Fields on the grid are
    arrays of shape (n_points,) or (n_points, 3): block after block in the order they were added,
    x fastest inside a block (points() gives the positions in that order).

        with fmmkit.BlockGrid(block_size=8, h0=1 / 16) as g:
            g.add_blocks(0, index=[[1, 0, 0], [0, 1, 0]])        # two level-0 blocks
            g.add_blocks(1, index=[[0, 0, 0], [1, 0, 0]])        # two of level 1 beside them
            with fmmkit.Poisson(grid=g, method="direct") as s:
                r = s.solve(omega_at(g.points()), velocity=True)  # r.psi, r.u (n_points, 3)

    block_size: even, 4..64. h0 > 0. anchor: the lattice's origin (3 numbers)."""

    def __init__(self, block_size: int = 16, h0: float = 1.0,
                 anchor: ArrayLike = (0.0, 0.0, 0.0)) -> None:
        a = _vector3("anchor", anchor)
        handle = grid_p()
        _check(lib().fmk_grid_create(ctypes.byref(handle), _integer("block_size", block_size, 32),
                                     _number("h0", h0, float), a.ctypes.data_as(_dp)))
        self._adopt(handle)

    def _adopt(self, handle: Any) -> None:
        self._handle = handle
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, lib().fmk_grid_destroy, handle)

    @classmethod
    def rings(cls, resolution: int, block_size: int = 16, refine: float = 1e-4) -> BlockGrid:
        """The two-level grid of the test problem (fmk_poisson_rings_grid): the unit cube at
        effective resolution `resolution` (spacing 1 / resolution where refined, twice that
        elsewhere), refined where the coarse level's interpolation detail of the rings' omega
        exceeds refine * max |omega| (1e-4: every point of nonzero omega is a fine one)."""
        handle = grid_p()
        _check(lib().fmk_poisson_rings_grid(ctypes.byref(handle),
                                            _integer("resolution", resolution, 32),
                                            _integer("block_size", block_size, 32),
                                            _number("refine", refine, float)))
        g = cls.__new__(cls)
        g._adopt(handle)
        return g

    def _live(self) -> Any:
        if not self._finalizer.alive:
            raise FmkStateError(Status.ERR_STATE, "the grid is closed")
        return self._handle

    def add_blocks(self, levels: ArrayLike, corners: Optional[ArrayLike] = None,
                   index: Optional[ArrayLike] = None) -> BlockGrid:
        """Adds n blocks, given by their lower corners (n, 3) (each anchor + block_size h_l B)
        or their block indices B (n, 3) integers; levels: one int for all, or n ints. The blocks
        must not overlap each other or the grid's; all or nothing (FmkValueError names the
        first offender). Returns self."""
        if (corners is None) == (index is None):
            raise FmkValueError(_ARG, "add_blocks: give corners or index (one of them)")
        if corners is not None:
            c = _rows3("corners", corners, np.float64)
        else:
            c = _rows3("index", cast(ArrayLike, index), np.int64)
        n = c.shape[0]
        lv = np.asarray(levels)
        if lv.ndim == 0:
            lv = np.full(n, _integer("levels", levels, 32))
        elif lv.dtype.kind not in "iu":
            raise FmkTypeError(_ARG, f"levels must be integers; got dtype {lv.dtype}")
        if lv.shape != (n,):
            raise FmkValueError(_ARG, f"levels must be one int or {n} ints (one per block); "
                                      f"got shape {lv.shape}")
        if n and (lv.min() < -2**31 or lv.max() >= 2**31):
            raise FmkValueError(_ARG, "levels out of the range of int32")
        lv = np.ascontiguousarray(lv, dtype=np.int32)
        L = lib()
        with self._lock:
            h = self._live()
            if corners is not None:
                _check(L.fmk_grid_add_blocks(h, n, lv.ctypes.data_as(ctypes.POINTER(
                    ctypes.c_int32)), c.ctypes.data_as(_dp)))
            else:
                _check(L.fmk_grid_add_blocks_index(h, n, lv.ctypes.data_as(ctypes.POINTER(
                    ctypes.c_int32)), c.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))))
        return self

    def _get(self) -> Tuple[int, int, int, float, Tuple[float, ...], int]:
        nb, np_, b, fl = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int32(), ctypes.c_int32()
        h0, anchor = ctypes.c_double(), (ctypes.c_double * 3)()
        with self._lock:
            _check(lib().fmk_grid_get(self._live(), ctypes.byref(nb), ctypes.byref(np_),
                                      ctypes.byref(b), ctypes.byref(h0), anchor,
                                      ctypes.byref(fl)))
        return nb.value, np_.value, b.value, h0.value, tuple(anchor), fl.value

    @property
    def n_blocks(self) -> int:
        """blocks"""
        return self._get()[0]

    @property
    def n_points(self) -> int:
        """points: n_blocks block_size^3"""
        return self._get()[1]

    @property
    def block_size(self) -> int:
        """points per block side"""
        return self._get()[2]

    @property
    def h0(self) -> float:
        """the spacing of level 0"""
        return self._get()[3]

    @property
    def anchor(self) -> Tuple[float, ...]:
        """the block lattice's origin"""
        return self._get()[4]

    @property
    def finest_level(self) -> int:
        """the finest level (0 when empty)"""
        return self._get()[5]

    def points(self) -> NDArray[np.float64]:
        """The grid's points, (n_points, 3), in the field layout."""
        x = np.empty((self.n_points, 3))
        with self._lock:
            _check(lib().fmk_grid_points(self._live(), x.ctypes.data_as(_dp), None))
        return x

    def spacing(self) -> NDArray[np.float64]:
        """Each point's spacing h_l, (n_points,)."""
        h = np.empty(self.n_points)
        with self._lock:
            _check(lib().fmk_grid_points(self._live(), None, h.ctypes.data_as(_dp)))
        return h

    def blocks(self) -> Tuple[NDArray[np.int32], NDArray[np.int64]]:
        """(levels (n_blocks,) int32, index (n_blocks, 3) int64), in the order added."""
        n = self.n_blocks
        levels, index = np.empty(n, dtype=np.int32), np.empty((n, 3), dtype=np.int64)
        lv, ix = ctypes.c_int32(), (ctypes.c_int64 * 3)()
        with self._lock:
            h = self._live()
            for k in range(n):
                _check(lib().fmk_grid_block(h, k, ctypes.byref(lv), ix))
                levels[k], index[k] = lv.value, tuple(ix)
        return levels, index

    def __repr__(self) -> str:
        if not self._finalizer.alive:
            return "<fmmkit.BlockGrid (closed)>"
        nb, np_, b, h0, _, fl = self._get()
        return (f"<fmmkit.BlockGrid {nb} blocks of {b}^3, {np_} points, h0={h0:g}, "
                f"levels 0..{fl}>")


def _vector3(name: str, value: ArrayLike) -> NDArray[np.float64]:
    try:
        a = np.ascontiguousarray(np.asarray(value, dtype=np.float64).reshape(-1))
    except (TypeError, ValueError):
        raise FmkTypeError(_ARG, f"{name} must be 3 numbers; got {value!r}") from None
    if a.shape != (3,):
        raise FmkValueError(_ARG, f"{name} must have 3 values; got {value!r}")
    return a


def _rows3(name: str, value: ArrayLike, dtype: DTypeLike) -> NDArray[Any]:
    """value as a C-ordered (n, 3) array of dtype; integers only for an integer dtype."""
    a = np.asarray(value)
    if np.issubdtype(dtype, np.integer):
        if a.dtype.kind not in "iu":
            raise FmkTypeError(_ARG, f"{name} must be integers; got dtype {a.dtype}")
        if a.dtype == np.uint64 and a.size and a.max() >= 2**63:
            raise FmkValueError(_ARG, f"{name} out of the range of int64")
    elif a.dtype.kind not in "biuf":
        raise FmkTypeError(_ARG, f"{name} must be real numbers; got dtype {a.dtype}")
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if a.ndim != 2 or a.shape[1] != 3 or a.shape[0] == 0:
        raise FmkValueError(_ARG, f"{name} must have shape (n, 3), n >= 1; got "
                                  f"{np.shape(value)}")
    return np.ascontiguousarray(a, dtype=dtype)


class PoissonResult(NamedTuple):
    """psi: the shape of omega, or None; u: (nx, ny, nz, 3) on a uniform grid, (n_points, 3) on
    a block grid, or None; info: PoissonInfo."""
    psi: Array
    u: Array
    info: PoissonInfo


class Poisson(_Owned):
    """A solver: made once, given a grid, then solved as often as needed (the grid's work, the
    FFT of the kernel or the points of the sums, is done once per grid).

        with fmmkit.Poisson(eps=1e-6) as s:
            s.set_grid((64, 64, 64), h=1 / 64)
            r = s.solve(omega, velocity=True)     # omega (64, 64, 64, 3): r.psi, r.u

        with fmmkit.BlockGrid.rings(128) as g, fmmkit.Poisson(1e-6, grid=g, method="fmm") as s:
            r = s.solve(omega)                    # omega (g.n_points, 3) in the grid's layout

    method: "auto" (fft on a uniform grid where the build has FFTW, else treecode), "fft"
    (Hockney-Eastwood, uniform grids, exact to rounding), "direct" (the sum, exact to rounding,
    O(N^2)), "fmm" (the sum within eps), "treecode" (van Rees et al.'s multipole algorithm,
    within eps). backend: "auto", "cpu" or "cuda". smoothing: the kernel's smoothing length
    (None: h_min). threads: OpenMP threads. Treecode experts: order (p), theta, leaf_size,
    hybrid (multipoles on the CPU while the GPU sums the direct part), device (CUDA).
    grid: a BlockGrid to solve on (as set_blocks). Ctrl-C stops a long call
    (KeyboardInterrupt); the solver stays usable."""

    def __init__(self, eps: float = 1e-6, *, method: str = "auto",
                 smoothing: Optional[float] = None, threads: Optional[int] = None,
                 backend: str = "auto", order: Optional[int] = None,
                 theta: Optional[float] = None, leaf_size: Optional[int] = None,
                 hybrid: bool = False, device: Optional[int] = None,
                 grid: Optional[BlockGrid] = None) -> None:
        L = lib()
        if method not in METHODS:
            raise FmkValueError(_ARG, f"unknown method {method!r} (auto, direct, fmm, fft, "
                                      f"treecode)")
        opts = fmk_poisson_opts()
        L.fmk_poisson_opts_default(ctypes.byref(opts))
        opts.method = METHODS[method]
        opts.backend = _lookup("backend", backend)
        if smoothing is not None:
            opts.smoothing = _number("smoothing", smoothing, float)
        if threads is not None:
            opts.threads = _integer("threads", threads, 32)
        if order is not None:
            opts.order = _integer("order", order, 32)
        if theta is not None:
            opts.theta = _number("theta", theta, float)
        if leaf_size is not None:
            opts.leaf_size = _integer("leaf_size", leaf_size, 32)
        if device is not None:
            opts.device = _integer("device", device, 32)
        opts.hybrid = 1 if hybrid else 0
        handle = poisson_p()
        _check(L.fmk_poisson_create(ctypes.byref(handle), _number("eps", eps, float),
                                    ctypes.byref(opts)))
        self._handle = handle
        self._lock = threading.Lock()
        self._shape: Optional[Tuple[int, int, int]] = None  # (nx, ny, nz) of a uniform grid
        self._n_points: Optional[int] = None  # the points of a block grid
        self._finalizer = weakref.finalize(self, L.fmk_poisson_destroy, handle)
        self._signals = _Signals()
        _check(L.fmk_poisson_set_interrupt(handle, self._signals.fn, None), handle)
        if grid is not None:
            self.set_blocks(grid)

    def _live(self) -> Any:
        if not self._finalizer.alive:
            raise FmkStateError(Status.ERR_STATE, "the solver is closed")
        return self._handle

    def _run(self, fn: Callable[..., int], *args: Any) -> None:
        status = self._signals.call(fn, self._handle, *args)
        self._signals.raise_pending(status)
        _check(status, self._handle)

    def set_grid(self, shape: Sequence[int], h: float,
                 origin: ArrayLike = (0.0, 0.0, 0.0)) -> Poisson:
        """The uniform grid of shape (nx, ny, nz): points origin + h (i, j, k). Returns self."""
        if len(tuple(shape)) != 3:
            raise FmkValueError(_ARG, f"shape must be (nx, ny, nz); got {shape!r}")
        nx, ny, nz = (_integer("shape", n) for n in shape)
        o = _vector3("origin", origin)
        with self._lock:
            self._live()
            self._shape = self._n_points = None
            self._run(lib().fmk_poisson_set_grid, nx, ny, nz, _number("h", h, float),
                      o.ctypes.data_as(_dp))
            self._shape = (nx, ny, nz)
        return self

    def set_blocks(self, grid: BlockGrid) -> Poisson:
        """The block grid `grid` (a BlockGrid, copied: it may be closed afterwards); fields are
        then (n_points,) or (n_points, 3) in its layout. Returns self."""
        if not isinstance(grid, BlockGrid):
            raise FmkTypeError(_ARG, f"grid must be a fmmkit.BlockGrid; got {type(grid)!r}")
        with self._lock, grid._lock:
            self._live()
            self._shape = self._n_points = None
            self._run(lib().fmk_poisson_set_blocks, grid._live())
            self._n_points = self._info_locked().n_points
        return self

    def set_targets(self, blocks: Optional[ArrayLike] = None) -> Poisson:
        """Results at the chosen blocks of the block grid only (fmk_poisson_set_targets): the
        solves then return Psi and u at those blocks' points, block after block in the order
        given ((len(blocks) b^3,) or (len(blocks) b^3, 3)); omega is still the whole grid's.
        None or [] chooses every point again. Returns self."""
        b = np.ascontiguousarray(np.asarray([] if blocks is None else blocks), dtype=np.int64)
        if b.ndim != 1:
            raise FmkValueError(_ARG, f"blocks must be a list of block numbers; got shape {b.shape}")
        with self._lock:
            self._live()
            self._run(lib().fmk_poisson_set_targets, b.size,
                      b.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)) if b.size else None)
        return self

    def _solve_device(self, omega: Any, velocity: bool, psi: bool) -> PoissonResult:
        """solve() for a CUDA array (CuPy, PyTorch, or through DLPack): fmk_poisson_solve_device,
        the results CUDA arrays of omega's library."""
        d = adopt(omega, False, "omega")
        x = d.array
        torch = d.lib == "torch"

        def ordered(a: Any, axes: Tuple[int, ...]) -> Any:
            if torch:
                return a.permute(*axes).contiguous()
            import cupy
            return cupy.ascontiguousarray(a.transpose(axes))

        with self._lock:
            self._live()
            if self._shape is None and self._n_points is None:
                raise FmkStateError(Status.ERR_STATE, "solve: no grid yet; call set_grid or "
                                                      "set_blocks first")
            shape = tuple(d.shape)
            if self._shape is not None:
                nx, ny, nz = self._shape
                if shape not in ((nx, ny, nz), (nx, ny, nz, 1), (nx, ny, nz, 3)):
                    raise FmkValueError(_ARG, f"omega must have shape ({nx}, {ny}, {nz}) or "
                                              f"({nx}, {ny}, {nz}, 3); got {shape}")
                c = 1 if len(shape) == 3 else shape[3]
                w = ordered(x.reshape(nx, ny, nz, c), (2, 1, 0, 3))
            else:
                n = self._n_points
                if shape not in ((n,), (n, 1), (n, 3)):
                    raise FmkValueError(_ARG, f"omega must have shape ({n},) or ({n}, 3) on "
                                              f"this block grid; got {shape}")
                c = 1 if len(shape) == 1 else shape[1]
                w = x.reshape(n, c)
            m = self._info_locked().n_target_points
            lead = (nz, ny, nx) if self._shape is not None else (m,)
            p = device_empty(d, lead + (c,), False) if psi else None
            u = device_empty(d, lead + (3,), False) if velocity else None

            def dp(a: Any) -> Any:
                if a is None:
                    return None
                return ctypes.cast(ctypes.c_void_p(device_address(a)), _dp)
            self._run(lib().fmk_poisson_solve_device, c, dp(w), dp(p), dp(u))
            info = self._info_locked()
        if self._shape is not None:
            p = ordered(p, (2, 1, 0, 3)) if p is not None else None
            u = ordered(u, (2, 1, 0, 3)) if u is not None else None
        if p is not None and self._shape is not None:
            p = p.reshape(shape)
        elif p is not None and len(shape) == 1:
            p = p.reshape(p.shape[0])
        return PoissonResult(device_result(p, d.origin), device_result(u, d.origin), info)

    def solve(self, omega: ArrayLike, *, velocity: bool = False, psi: bool = True) -> PoissonResult:
        """Psi (the shape of omega) and, with velocity=True, u = curl Psi for the vorticity
        omega: on a uniform grid (nx, ny, nz) (one component) or (nx, ny, nz, 3), indexed
        [i, j, k(, a)] with i along x, u (nx, ny, nz, 3); on a block grid (n_points,) or
        (n_points, 3) in the grid's layout, u (n_points, 3) (at the chosen blocks after
        set_targets: (n_target_points, ...)). velocity needs three components. A CUDA array
        omega (CuPy, PyTorch, DLPack; backend "cuda") is solved on the GPU without a host round
        trip, the results CUDA arrays of its library."""
        if not psi and not velocity:
            raise FmkValueError(_ARG, "psi=False and velocity=False: ask for at least one")
        if on_device(omega, "omega"):
            return self._solve_device(omega, velocity, psi)
        a = np.asarray(omega)
        if a.dtype.kind not in "biuf":
            raise FmkTypeError(_ARG, f"omega must be real numbers; got dtype {a.dtype}")
        with self._lock:
            self._live()
            if self._shape is None and self._n_points is None:
                raise FmkStateError(Status.ERR_STATE, "solve: no grid yet; call set_grid or "
                                                      "set_blocks first")
            if self._shape is not None:
                nx, ny, nz = self._shape
                if a.shape not in ((nx, ny, nz), (nx, ny, nz, 1), (nx, ny, nz, 3)):
                    raise FmkValueError(_ARG, f"omega must have shape ({nx}, {ny}, {nz}) or "
                                              f"({nx}, {ny}, {nz}, 3); got {a.shape}")
                c = 1 if a.ndim == 3 else a.shape[-1]  # shape[3]
                # the C layout: x fastest, components interleaved: (nz, ny, nx, c) in C order
                w = np.ascontiguousarray(a.reshape(nx, ny, nz, c).transpose(2, 1, 0, 3),
                                         dtype=np.float64)
                lead: Tuple[int, ...] = (nz, ny, nx)
            else:
                n = cast(int, self._n_points)  # one of the two is set
                if a.shape not in ((n,), (n, 1), (n, 3)):
                    raise FmkValueError(_ARG, f"omega must have shape ({n},) or ({n}, 3) on "
                                              f"this block grid; got {a.shape}")
                c = 1 if a.ndim == 1 else a.shape[-1]  # shape[1]
                w = np.ascontiguousarray(a.reshape(n, c), dtype=np.float64)
                lead = (self._info_locked().n_target_points,)
            p = np.empty(lead + (c,)) if psi else None
            u = np.empty(lead + (3,)) if velocity else None
            self._run(lib().fmk_poisson_solve, c, w.ctypes.data_as(_dp),
                      p.ctypes.data_as(_dp) if p is not None else None,
                      u.ctypes.data_as(_dp) if u is not None else None)
            info = self._info_locked()
        if self._shape is not None:
            if p is not None:
                p = np.ascontiguousarray(p.transpose(2, 1, 0, 3))
            if u is not None:
                u = np.ascontiguousarray(u.transpose(2, 1, 0, 3))
        if p is not None and self._shape is not None:
            p = p.reshape(a.shape)
        elif p is not None and a.ndim == 1:
            p = p.reshape(p.shape[0])
        return PoissonResult(p, u, info)

    def _info_locked(self) -> PoissonInfo:
        c = fmk_poisson_info()
        _check(lib().fmk_poisson_get_info(self._live(), ctypes.byref(c)), self._handle)
        return PoissonInfo(_METHOD_NAMES.get(c.method, str(c.method)), c.eps, c.smoothing,
                           (c.nx, c.ny, c.nz), c.h, c.components, c.n_sources, c.bytes_host,
                           c.setup_time, c.solve_time, c.threads,
                           _BACKEND_NAMES.get(c.backend, str(c.backend)), c.n_points,
                           c.n_blocks, c.h_min, c.order, c.theta, c.leaf_size, c.n_bricks,
                           c.n_nodes, c.direct_pairs, c.far_pairs, c.time_tree, c.time_plans,
                           c.time_expand, c.time_direct, c.time_far, c.time_cpu_part,
                           c.time_gpu_part, c.bytes_device, c.n_targets, c.n_target_points)

    @property
    def info(self) -> PoissonInfo:
        with self._lock:
            return self._info_locked()



def poisson3d(omega: ArrayLike, h: float, origin: ArrayLike = (0.0, 0.0, 0.0), *,
              eps: float = 1e-6, velocity: bool = False, psi: bool = True, method: str = "auto",
              smoothing: Optional[float] = None, threads: Optional[int] = None,
              **options: Any) -> PoissonResult:
    """Psi with lap Psi = -omega in free space, and on request u = curl Psi, for the vorticity
    omega on the uniform grid origin + h (i, j, k): omega (nx, ny, nz) or (nx, ny, nz, 3).
    Returns a PoissonResult (.psi the shape of omega, .u (nx, ny, nz, 3) or None, .info).
    The sum of van Rees et al. (eqs. 2, 7): Psi(x) = 1/(4 pi) sum_j h^3 omega_j G_eps(x - x_j),
    smoothing eps = h unless given; eps is the accuracy of methods "fmm" and "treecode";
    options: Poisson's backend, order, theta, leaf_size, hybrid, device."""
    a = np.asarray(omega)
    if a.ndim not in (3, 4):
        raise FmkValueError(_ARG, f"omega must have shape (nx, ny, nz) or (nx, ny, nz, 3); "
                                  f"got {a.shape}")
    with Poisson(eps, method=method, smoothing=smoothing, threads=threads, **options) as s:
        s.set_grid(a.shape[:3], h, origin)
        return s.solve(a, velocity=velocity, psi=psi)


def vortex_rings(points: ArrayLike) -> Tuple[NDArray[np.float64], NDArray[np.float64],
                                             NDArray[np.float64]]:
    """The test problem of van Rees et al. (section 5.1; docs/poisson.md) at points (n, 3):
    the exact omega, Psi and u = curl Psi, each (n, 3)."""
    x = np.ascontiguousarray(np.asarray(points, dtype=np.float64))
    if x.ndim != 2 or x.shape[1] != 3:
        raise FmkValueError(_ARG, f"points must have shape (n, 3); got {x.shape}")
    n = x.shape[0]
    out = [np.empty((n, 3)) for _ in range(3)]
    ptr = ctypes.POINTER(ctypes.c_double)
    _check(lib().fmk_poisson_rings(n, x.ctypes.data_as(ptr), *(o.ctypes.data_as(ptr) for o in out)))
    return out[0], out[1], out[2]
