"""Plan: the fmk_plan life cycle from Python (create, set_points, eval many times, close)."""
from __future__ import annotations

import ctypes
import operator
import sys
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple, TypeVar, cast

import numpy as np
from numpy.typing import ArrayLike

from . import _arrays, _repr
from ._arrays import Array, DeviceArray
from ._errors import (FmkError, FmkStateError, FmkTypeError, FmkUnavailableError, FmkValueError,
                      Status, error_for)
from ._lib import (FMK_PHASE_COUNT, PRECISION_NAMES, fmk_info, fmk_interrupt_fn, fmk_opts, lib,
                   mpi_lib, plan_p)

_ARG = Status.ERR_ARG
_T = TypeVar("_T")


def _text(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b is not None else ""


def check(status: int, handle: Any = None) -> None:
    """Raises the FmkError of a failed call; the message is read from the plan (or, for a NULL
    plan, from the calling thread, which is the thread that made the call)."""
    if status != 0:
        raise error_for(status, _text(lib().fmk_plan_last_error(handle)))


def _lookup(kind: str, name: object) -> int:
    """A kernel, method or backend name to its enum value (the C library knows the names)."""
    if not isinstance(name, str):
        raise FmkTypeError(_ARG, f"{kind} must be a name (str); got {name!r}")
    value = ctypes.c_int()
    check(getattr(lib(), f"fmk_{kind}_from_name")(name.encode(), ctypes.byref(value)))
    return value.value


def _number(name: str, value: Any, cast: Callable[[Any], _T]) -> _T:
    try:
        return cast(value)
    except (TypeError, ValueError):
        raise FmkTypeError(_ARG, f"{name} must be a number; got {value!r}") from None
    except OverflowError:  # an int beyond a double's range
        raise FmkValueError(_ARG, f"{name} = {value} is out of range (too large for a "
                                  f"double)") from None


def _integer(name: str, value: Any, bits: int = 64) -> int:
    """value as a Python int that fits the C argument it becomes (int32_t / int for bits=32,
    int64_t for 64): ctypes would wrap a larger one silently (2**70 to 0), so it is refused."""
    try:
        v = operator.index(value)
    except TypeError:
        raise FmkTypeError(_ARG, f"{name} must be an integer; got {value!r}") from None
    lo, hi = -2**(bits - 1), 2**(bits - 1) - 1
    if not lo <= v <= hi:
        raise FmkValueError(_ARG, f"{name} = {v} is out of range; it must fit in a {bits}-bit "
                                  f"C integer ({lo} .. {hi})")
    return v


class _Signals:
    """Ctrl-C during a long C call: the check a Plan gives fmk_plan_set_interrupt.

    The library calls it from the thread that made the call, every 10 ms or so of work; ctypes
    takes the GIL for it. It runs Python's pending signal handlers (PyErr_CheckSignals, which
    does nothing outside the main thread); when one raises (KeyboardInterrupt for Ctrl-C), the
    exception is kept and the check says stop, the call returns FMK_ERR_INTERRUPTED, and
    raise_pending raises the exception in the caller's frame.

    The interpreter may also run the handlers as the check is entered, before any line of it,
    and ctypes would then report the exception as unraisable and drop it: while a call runs in
    the main thread, a sys.unraisablehook that hands on everything else keeps it instead (the
    next check, 10 ms on, says stop)."""
    __slots__ = ("_raised", "_poll", "fn")

    def __init__(self) -> None:
        raised: List[Optional[BaseException]] = [None]
        self._raised = raised  # the check's only reference: no cycle through it
        run_handlers = _check_signals()

        def poll(user: Any) -> int:
            if raised[0] is not None:
                return 1
            try:
                run_handlers()
            except BaseException as e:  # KeyboardInterrupt, or a handler's own exception
                raised[0] = e
                return 1
            return 0
        self._poll = poll
        self.fn = fmk_interrupt_fn(poll)

    def call(self, fn: Callable[..., int], *args: Any) -> int:
        """fn(*args) with no exception kept from an earlier call; returns its status."""
        self._raised[0] = None
        if threading.current_thread() is not threading.main_thread():
            return fn(*args)  # Python runs signal handlers in the main thread only
        previous = sys.unraisablehook
        raised, poll = self._raised, self._poll

        def keep(unraisable: Any) -> None:
            if unraisable.object is poll and unraisable.exc_value is not None:
                if raised[0] is None:
                    raised[0] = unraisable.exc_value
            else:
                previous(unraisable)
        sys.unraisablehook = keep
        try:
            return fn(*args)
        finally:
            sys.unraisablehook = previous

    def raise_pending(self, status: int) -> None:
        """After call: raises what a signal handler raised during it, or KeyboardInterrupt for a
        call stopped otherwise (fmk_plan_interrupt)."""
        raised, self._raised[0] = self._raised[0], None
        if raised is not None:
            raise raised
        if status == Status.ERR_INTERRUPTED:
            raise KeyboardInterrupt


def _check_signals() -> Callable[[], int]:
    """PyErr_CheckSignals through ctypes.pythonapi (which raises what it set), or a no-op where
    the interpreter has no C API to call (PyPy)."""
    try:
        fn = ctypes.pythonapi.PyErr_CheckSignals
    except AttributeError:
        return lambda: 0
    fn.restype = ctypes.c_int
    fn.argtypes = ()
    return fn


def _comm_handle(comm: Any) -> Tuple[int, ctypes.CDLL]:
    """The Fortran handle (MPI_Fint) of an mpi4py communicator, for fmk_plan_create_mpi_f, and
    libfmmkit_mpi; FmkUnavailableError when mpi4py or libfmmkit_mpi is missing."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise FmkUnavailableError(Status.ERR_UNAVAILABLE, f"Plan(comm=...) needs mpi4py "
                                  f"(pip install mpi4py): {e}") from None
    if not isinstance(comm, MPI.Intracomm):
        raise FmkTypeError(_ARG, f"comm must be an mpi4py intracommunicator (MPI.COMM_WORLD or "
                                 f"one made by Split); got {comm!r}")
    try:
        L = mpi_lib()
    except ImportError as e:
        raise FmkUnavailableError(Status.ERR_UNAVAILABLE, f"Plan(comm=...): {e}") from None
    return comm.py2f(), L


WALK_NAMES: Dict[int, str] = {0: "auto", 1: "group", 2: "stackless"}


def _walk(value: object) -> int:
    for code, name in WALK_NAMES.items():
        if value == name:
            return code
    raise FmkValueError(_ARG, f"unknown walk {value!r} (auto, group, stackless)")


def _precision(value: object) -> int:
    for code, name in PRECISION_NAMES.items():
        if value == name:
            return code
    raise FmkValueError(_ARG, f"unknown precision {value!r} (fp64, fp32)")


@dataclass(frozen=True)
class Info:
    """What a plan is and what its last calls cost (struct fmk_info).

    times: seconds per phase ("setup" is the last set_points; the others the last eval), keyed by
    phase name, phases that did not run are 0. bytes_host, bytes_device: memory the plan holds.
    interactions_p2p, interactions_far: the last evaluation's work as interaction counts, per
    charge vector (pairs summed directly; far-field terms), 0 before the first evaluation of the
    points; what each method counts is written above struct fmk_info in include/fmmkit.h.
    """
    dim: int
    kernel: str
    method: str
    backend: str
    precision: str
    order: int
    levels: int
    walk: str
    leaf_size: int
    n_sources: int
    n_targets: int
    bytes_host: int
    bytes_device: int
    eps: float
    theta: float
    times: Dict[str, float]
    device_name: str
    interactions_p2p: int = 0
    interactions_far: int = 0

    @classmethod
    def from_c(cls, c: Any) -> Info:
        L = lib()
        times: Dict[str, float] = {}
        for k in range(FMK_PHASE_COUNT):
            name = L.fmk_phase_name(k)
            if name is not None:
                times[_text(name)] = c.phase_time[k]
        return cls(dim=c.dim, kernel=_text(L.fmk_kernel_name(c.kernel)),
                   method=_text(L.fmk_method_name(c.method)),
                   backend=_text(L.fmk_backend_name(c.backend)),
                   precision=PRECISION_NAMES.get(c.precision, str(c.precision)),
                   order=c.order, levels=c.levels, walk=WALK_NAMES.get(c.walk, str(c.walk)),
                   leaf_size=c.leaf_size,
                   n_sources=c.n_sources, n_targets=c.n_targets, bytes_host=c.bytes_host,
                   bytes_device=c.bytes_device, eps=c.eps, theta=c.theta, times=times,
                   device_name=_text(c.device_name),
                   interactions_p2p=c.interactions_p2p, interactions_far=c.interactions_far)

    def __repr__(self) -> str:
        return _repr.info_line(self)

    def _repr_html_(self) -> str:
        """Jupyter: a table of method, backend, sizes, eps, chosen settings, phase times."""
        return _repr.info_html(self)


class Result:
    """What an evaluation returns.

    pot:  potential at the targets, shape (m,) (complex for cauchy2d); None if not requested.
    grad: gradient, shape (m, dim), or for cauchy2d the complex dphi/dz, shape (m,); None if not
          requested. eval_many adds a leading axis (k,) to both.
    info: the plan's Info after the evaluation.
    Arrays are numpy for host charges, and arrays of the charges' library for CUDA charges.
    """
    __slots__ = ("pot", "grad", "info")
    pot: Array     # numpy.ndarray (host charges), the charges' library's array, or None
    grad: Array
    info: Info

    def __init__(self, pot: Array, grad: Array, info: Info) -> None:
        self.pot, self.grad, self.info = pot, grad, info

    def __repr__(self) -> str:
        def shape(a: Array) -> Optional[Tuple[int, ...]]:
            return None if a is None else tuple(a.shape)
        return (f"Result(pot={shape(self.pot)}, grad={shape(self.grad)}, "
                f"kernel={self.info.kernel!r}, backend={self.info.backend!r})")

    def _repr_html_(self) -> str:
        """Jupyter: the arrays' shapes and the Info table."""
        return _repr.result_html(self)


class Memory(NamedTuple):
    """Bytes a plan would hold (fmk_plan_memory)."""
    host: int
    device: int


class Plan:
    """A reusable evaluation plan: points once, then as many charge vectors as you like.

        with fmmkit.Plan(kernel="laplace", eps=1e-6) as plan:
            plan.set_points(x)                  # targets = sources (self term left out)
            r1 = plan.eval(q1)
            r2 = plan.eval(q2, grad=False)

    dim: 2 or 3; None (default) takes the kernel's dimension. kernel: "laplace", "plummer",
    "regularized" (3D), "log2d", "cauchy2d" (2D). eps: relative accuracy in (0, 1); None
    (default): 1e-6 in fp64, 1e-4 in fp32 (fmk_eps_default). method:
    "auto", "direct", "tree", "fmm". backend: "auto" (CUDA if built and a GPU is present, else
    the CPU), "cpu", "cuda". precision: "fp64" or "fp32" arithmetic (inputs and outputs stay
    double). softening: length s > 0, required by plummer and regularized. threads: OpenMP threads,
    at most 4096 (None: OMP_NUM_THREADS, read when the library starts, or all cores; in a
    process forked after fmmkit ran, 1). device: CUDA ordinal.
    order, leaf_size, theta: expert overrides (None: chosen by the method; tree: theta from eps,
    order 2). walk: the treecode's walk, "auto", "group" or "stackless" (Nakasato's).
    n_vectors: the charge vectors an evaluation mostly carries (eval_many's k; default 1), a
    hint by which the FMMs choose their leaves; any k may be evaluated.

    comm: an mpi4py communicator (MPI.COMM_WORLD, or one made by Split) makes a distributed plan
    (libfmmkit_mpi, include/fmmkit_mpi.h, docs/distributed.md): every call is then collective,
    every rank of comm making the same calls in the same order (Plan, set_points, eval,
    eval_many, close), with the same dim, kernel, eps and options (threads and device may
    differ). Each rank gives its own sources, targets and charges (any counts, zero included)
    and gets the results at its own targets; the sum runs over every rank's sources, as a
    one-rank plan on all of them in rank order would (bit for bit for method="direct" in fp64).
    A failure on one rank (a NaN, a bad shape) raises on every rank: the same error class
    where the C library finds it, and FmkValueError on the others where Python does; the
    message names the failing rank. GPU arrays are refused (FmkUnavailableError). Needs mpi4py
    and libfmmkit_mpi (built beside libfmmkit when CMake finds MPI; found beside it, or named
    by FMMKIT_MPI_LIBRARY); FmkUnavailableError otherwise.

    Calls into C release the GIL; a lock makes one Python thread at a time use a plan. The plan
    is freed by close(), at the end of a with block, or when it is garbage collected.
    Ctrl-C (any signal whose handler raises) stops a long set_points or eval within a fraction
    of a second on the CPU (on the GPU at the end of the launch running, of about 0.1 s in long
    sums) and raises KeyboardInterrupt; the plan stays usable (an interrupted eval keeps the
    points, an interrupted set_points leaves none, as any failed one).
    """

    def __init__(self, dim: Optional[int] = None, kernel: str = "laplace",
                 eps: Optional[float] = None, *, method: str = "auto", backend: str = "auto",
                 precision: str = "fp64", softening: Optional[float] = None,
                 threads: Optional[int] = None, device: int = 0, order: Optional[int] = None,
                 leaf_size: Optional[int] = None, theta: Optional[float] = None,
                 walk: Optional[str] = None, n_vectors: Optional[int] = None,
                 comm: Any = None) -> None:
        L = lib()
        mpi = None if comm is None else _comm_handle(comm)
        try:
            self._kernel = _lookup("kernel", kernel)
            if dim is None:
                dim = L.fmk_kernel_dim(self._kernel)
            self._dim = _integer("dim", dim, 32)
            self._complex = bool(L.fmk_kernel_is_complex(self._kernel))
            opts = fmk_opts()
            L.fmk_opts_default(ctypes.byref(opts))
            opts.method = _lookup("method", method)
            opts.backend = _lookup("backend", backend)
            opts.precision = _precision(precision)
            eps = L.fmk_eps_default(opts.precision) if eps is None else _number("eps", eps, float)
            if softening is not None:
                opts.softening = _number("softening", softening, float)
            if threads is not None:
                opts.threads = _integer("threads", threads, 32)
            opts.device = _integer("device", device, 32)
            if order is not None:
                opts.order = _integer("order", order, 32)
            if leaf_size is not None:
                opts.leaf_size = _integer("leaf_size", leaf_size)
            if theta is not None:
                opts.theta = _number("theta", theta, float)
            if walk is not None:
                opts.walk = _walk(walk)
            if n_vectors is not None:
                opts.n_vectors = _integer("n_vectors", n_vectors, 32)
        except Exception:
            if mpi is not None:
                # the other ranks are in the collective create: take part with an argument the
                # library refuses (dim 0), so that every rank fails instead of waiting
                mpi[1].fmk_plan_create_mpi_f(ctypes.byref(plan_p()), mpi[0], 0, 0, 1e-6, None)
            raise

        handle = plan_p()
        if mpi is None:
            check(L.fmk_plan_create(ctypes.byref(handle), self._dim, self._kernel, eps,
                                    ctypes.byref(opts)))
        else:  # collective: every rank of comm gets the same status
            check(mpi[1].fmk_plan_create_mpi_f(ctypes.byref(handle), mpi[0], self._dim,
                                               self._kernel, eps, ctypes.byref(opts)))
        self._mpi = mpi is not None
        self._handle = handle
        self._lock = threading.Lock()
        self._device = opts.device
        self._n_sources: Optional[int] = None   # None: no points yet
        self._n_targets: Optional[int] = None
        self._finalizer = weakref.finalize(self, L.fmk_plan_destroy, handle)
        self._signals = _Signals()  # kept as long as the plan: the C plan calls its check
        check(L.fmk_plan_set_interrupt(handle, self._signals.fn, None), handle)

    # -- life cycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Frees the plan now; later calls raise FmkStateError. Closing twice is fine."""
        with self._lock:
            self._finalizer()
            self._n_sources = self._n_targets = None

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def __enter__(self) -> Plan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _live(self, what: str) -> Any:
        """The C handle; the caller holds self._lock."""
        if not self._finalizer.alive:
            raise FmkStateError(Status.ERR_STATE, f"{what}: the plan is closed")
        return self._handle

    def _info_locked(self, h: Any) -> Info:
        c = fmk_info()
        check(lib().fmk_plan_info(h, ctypes.byref(c)), h)
        return Info.from_c(c)

    # -- properties -----------------------------------------------------------------------------

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def distributed(self) -> bool:
        """True for a distributed plan (made with comm=)."""
        return self._mpi

    @property
    def mpi_info(self) -> Optional[Dict[str, Any]]:
        """For a distributed plan, this rank's share of the work and where its time went
        (struct fmk_mpi_info, include/fmmkit_mpi.h) as a dict; None for an ordinary plan."""
        if not self._mpi:
            return None
        from ._lib import fmk_mpi_info
        mi = fmk_mpi_info()
        with self._lock:
            handle = self._live("mpi_info")
            check(mpi_lib().fmk_plan_mpi_info(handle, ctypes.byref(mi)), handle)
        return {name: getattr(mi, name) for name, _ in fmk_mpi_info._fields_}

    @property
    def kernel(self) -> str:
        return _text(lib().fmk_kernel_name(self._kernel))

    @property
    def info(self) -> Info:
        """Info: what the plan is and what its last set_points and eval cost."""
        with self._lock:
            return self._info_locked(self._live("info"))

    def __repr__(self) -> str:
        with self._lock:
            if self.closed:
                return f"<fmmkit.Plan {self.kernel} (closed)>"
            i = self._info_locked(self._handle)
            ns, nt = self._n_sources, self._n_targets
        return (f"<fmmkit.Plan {i.kernel} {i.dim}D eps={i.eps:g} {i.method}/{i.backend} "
                f"{i.precision} n_sources={ns} n_targets={nt}>")

    def _repr_html_(self) -> str:
        """Jupyter: the Info table of the plan (its last set_points and eval)."""
        with self._lock:
            if self.closed:
                return _repr.plan_html(self, None, None)
            return _repr.plan_html(self, self._info_locked(self._handle), self._n_sources)

    def memory(self, n_sources: int, n_targets: Optional[int] = None) -> Memory:
        """Memory(host, device): bytes the plan would hold for these sizes (n_targets None:
        targets are the sources), computed before anything is allocated."""
        h, d = ctypes.c_int64(), ctypes.c_int64()
        ns = _integer("n_sources", n_sources)
        nt = -1 if n_targets is None else _integer("n_targets", n_targets)
        with self._lock:
            handle = self._live("memory")
            check(lib().fmk_plan_memory(handle, ns, nt, ctypes.byref(h), ctypes.byref(d)),
                  handle)
        return Memory(h.value, d.value)

    # -- points ---------------------------------------------------------------------------------

    def set_points(self, sources: ArrayLike, targets: Optional[ArrayLike] = None) -> Plan:
        """Gives the plan its sources, shape (n, dim), and targets, shape (m, dim) (None: the
        sources, leaving out the self term). Both are copied (numpy) or read in place on the GPU
        (CuPy, PyTorch, JAX arrays; both must then be on the GPU and the backend cuda)."""
        if self._mpi:
            return self._collective(self._set_points_mpi, sources, targets)
        dev_s = _arrays.on_device(sources, "sources")
        dev_t = targets is not None and _arrays.on_device(targets, "targets")
        if targets is not None and dev_s != dev_t:
            raise FmkValueError(_ARG, "sources and targets must both be host arrays or both be "
                                      "CUDA arrays")
        L = lib()
        if dev_s:
            s = _arrays.device_points(sources, self._dim, "sources")
            t = None if targets is None else _arrays.device_points(targets, self._dim, "targets")
            for name, d in (("sources", s), ("targets", t)):
                if d is not None:
                    self._check_device(name, d)
            ns, nt = s.shape[0], 0 if t is None else t.shape[0]
            fn, args = L.fmk_plan_set_points_device, (ns, s.pointer(), nt,
                                                      None if t is None else t.pointer())
        else:
            hs = _arrays.host_points(sources, self._dim, "sources")
            ht = None if targets is None else _arrays.host_points(targets, self._dim, "targets")
            ns, nt = hs.shape[0], 0 if ht is None else ht.shape[0]
            fn, args = L.fmk_plan_set_points, (ns, _arrays.ptr(hs), nt, _arrays.ptr(ht))
        # The C call and the sizes eval reads change together, under the lock.
        with self._lock:
            h = self._live("set_points")
            self._points_set(h, self._signals.call(fn, h, *args), ns,
                             ns if targets is None else nt)
        return self

    def _points_set(self, h: Any, status: int, ns: int, nt: int) -> None:
        """The sizes after a set_points call that returned status; raises its error. The caller
        holds self._lock."""
        if status == Status.OK:
            self._n_sources, self._n_targets = ns, nt
        elif status not in (Status.ERR_ARG, Status.ERR_NULL, Status.ERR_NONFINITE,
                            Status.ERR_STATE):
            # A validation failure leaves the plan as it was; any later failure (an interrupt
            # too) leaves it without points.
            self._n_sources = self._n_targets = None
        self._signals.raise_pending(status)
        check(status, h)

    # -- distributed plans ----------------------------------------------------------------------
    # Every C call of a distributed plan is collective. What Python refuses on one rank (a bad
    # shape or dtype, a GPU array) must not leave the others waiting in C: that rank still makes
    # the C call, with arguments C refuses (a negative count, NULL arrays), so that every rank
    # fails; then it raises its own error, and the others the C library's ("rank R: ...").

    def _collective(self, step: Callable[..., Callable[[], _T]], *args: Any) -> _T:
        with self._lock:
            h = self._live(step.__name__.strip("_").replace("_mpi", ""))
            try:
                prepared = step(h, *args)
            except FmkError as e:
                if e.status == Status.ERR_STATE:
                    raise  # the plan is closed or has no points: so on every rank
                L = lib()
                if step == self._set_points_mpi:
                    status = L.fmk_plan_set_points(h, -1, None, 0, None)
                    if status not in (Status.OK, Status.ERR_ARG, Status.ERR_NULL,
                                      Status.ERR_NONFINITE, Status.ERR_STATE):
                        self._n_sources = self._n_targets = None
                elif args[1]:  # eval_many: the k the others pass, if it can be read
                    shape: Tuple[int, ...] = np.shape(args[0]) if hasattr(args[0], "shape") else ()
                    L.fmk_plan_eval_many(h, shape[0] if len(shape) == 2 else -1, None, None, None)
                else:  # NULL charges and outputs: refused, and this rank is named
                    L.fmk_plan_eval(h, None, None, None)
                raise
            return prepared()

    def _refuse_device(self, what: str, *arrays: Tuple[str, object]) -> None:
        for name, a in arrays:
            if a is not None and _arrays.on_device(a, name):
                raise FmkUnavailableError(
                    Status.ERR_UNAVAILABLE, f"{what}: {name} is a GPU array; a distributed plan "
                    f"takes host (numpy) arrays only, GPU arrays are not supported yet")

    def _set_points_mpi(self, h: Any, sources: ArrayLike,
                        targets: Optional[ArrayLike]) -> Callable[[], Plan]:
        """set_points of a distributed plan: the checks, then a callable that makes the C call;
        the caller holds self._lock."""
        self._refuse_device("set_points", ("sources", sources), ("targets", targets))
        s = _arrays.host_points(sources, self._dim, "sources")
        t = None if targets is None else _arrays.host_points(targets, self._dim, "targets")
        ns, nt = s.shape[0], 0 if t is None else t.shape[0]

        def call() -> Plan:
            status = self._signals.call(lib().fmk_plan_set_points, h, ns, _arrays.ptr(s), nt,
                                        _arrays.ptr(t))
            self._points_set(h, status, ns, ns if targets is None else nt)
            return self
        return call

    def _eval_mpi(self, h: Any, charges: ArrayLike, many: bool, pot: bool,
                  grad: bool) -> Callable[[], Result]:
        """eval or eval_many of a distributed plan, as _set_points_mpi."""
        what = "eval_many" if many else "eval"
        self._want(what, pot, grad)
        self._refuse_device(what, ("charges", charges))
        n, pshape, gshape = self._shapes(what, pot, grad)
        if many:
            if np.ndim(charges) != 2:
                raise FmkValueError(_ARG, f"charges must have shape (k, {n}); got "
                                          f"{np.shape(charges)}")
            k = np.shape(charges)[0]
            q = _arrays.host_charges(charges, (k, n), self._complex)
            lead: Tuple[int, ...] = (k,)
        else:
            k, lead = 1, ()
            q = _arrays.host_charges(charges, (n,), self._complex)
        out_dtype = np.complex128 if self._complex else np.float64
        p = np.empty(lead + pshape, dtype=out_dtype) if pot else None
        g = np.empty(lead + gshape, dtype=out_dtype) if grad else None

        def call() -> Result:
            args = (_arrays.ptr(q), _arrays.ptr(p), _arrays.ptr(g))
            if many:
                self._run(lib().fmk_plan_eval_many, h, k, *args)
            else:
                self._run(lib().fmk_plan_eval, h, *args)
            return Result(p, g, self._info_locked(h))
        return call

    def _check_device(self, name: str, d: DeviceArray) -> None:
        if d.device != self._device:
            raise FmkValueError(_ARG, f"{name} is on CUDA device {d.device} but the plan uses "
                                      f"device {self._device}; create it with device={d.device}")

    # -- evaluation -----------------------------------------------------------------------------
    # Each evaluation holds the plan's lock from reading the point counts, through sizing the
    # outputs and the C call, to reading the plan's info: a set_points from another thread waits
    # for it, so the outputs always have the size the C library writes.

    def _shapes(self, what: str, pot: bool,
                grad: bool) -> Tuple[int, Tuple[int, ...], Tuple[int, ...]]:
        """n_sources and the output shapes; the caller holds self._lock."""
        if self._n_sources is None:
            self._live(what)
            raise FmkStateError(Status.ERR_STATE, f"{what}: no points yet; call set_points first")
        m = cast(int, self._n_targets)  # set with _n_sources
        return self._n_sources, (m,), ((m,) if self._complex else (m, self._dim))

    @staticmethod
    def _want(what: str, pot: bool, grad: bool) -> None:
        if not (pot or grad):
            raise FmkValueError(_ARG, f"{what}: pot=False and grad=False; ask for at least one")

    def eval(self, charges: ArrayLike, grad: bool = True, pot: bool = True) -> Result:
        """Potential (and gradient unless grad=False) for one charge vector, shape (n_sources,)
        (complex for cauchy2d). Returns a Result. CUDA charges give CUDA results."""
        if self._mpi:
            return self._collective(self._eval_mpi, charges, False, pot, grad)
        self._want("eval", pot, grad)
        device = _arrays.on_device(charges, "charges")
        with self._lock:
            n, pshape, gshape = self._shapes("eval", pot, grad)
            if device:
                return self._eval_device(charges, None, pot, grad, pshape, gshape)
            q = _arrays.host_charges(charges, (n,), self._complex)
            out_dtype = np.complex128 if self._complex else np.float64
            p = np.empty(pshape, dtype=out_dtype) if pot else None
            g = np.empty(gshape, dtype=out_dtype) if grad else None
            h = self._live("eval")
            self._run(lib().fmk_plan_eval, h, _arrays.ptr(q), _arrays.ptr(p), _arrays.ptr(g))
            return Result(p, g, self._info_locked(h))

    def eval_many(self, charges: ArrayLike, grad: bool = True, pot: bool = True) -> Result:
        """eval for k charge vectors at once, charges of shape (k, n_sources); the Result's
        arrays get a leading axis of length k."""
        if self._mpi:
            return self._collective(self._eval_mpi, charges, True, pot, grad)
        self._want("eval_many", pot, grad)
        device = _arrays.on_device(charges, "charges")
        with self._lock:
            n, pshape, gshape = self._shapes("eval_many", pot, grad)
            if device:
                return self._eval_device(charges, "many", pot, grad, pshape, gshape)
            try:
                k = np.shape(charges)[0] if np.ndim(charges) == 2 else -1
            except Exception:
                k = -1
            if k < 0:
                raise FmkValueError(_ARG, f"charges must have shape (k, {n}); got "
                                          f"{np.shape(charges)}")
            q = _arrays.host_charges(charges, (k, n), self._complex)
            out_dtype = np.complex128 if self._complex else np.float64
            p = np.empty((k,) + pshape, dtype=out_dtype) if pot else None
            g = np.empty((k,) + gshape, dtype=out_dtype) if grad else None
            h = self._live("eval_many")
            self._run(lib().fmk_plan_eval_many, h, k, _arrays.ptr(q), _arrays.ptr(p),
                      _arrays.ptr(g))
            return Result(p, g, self._info_locked(h))

    def _run(self, fn: Callable[..., int], h: Any, *args: Any) -> None:
        """An evaluation call fn(h, *args) that Ctrl-C can stop (KeyboardInterrupt); other
        failures raise their FmkError. The caller holds self._lock."""
        status = self._signals.call(fn, h, *args)
        self._signals.raise_pending(status)
        check(status, h)

    def _eval_device(self, charges: Any, many: Optional[str], pot: bool, grad: bool,
                     pshape: Tuple[int, ...], gshape: Tuple[int, ...]) -> Result:
        """Charges, potential and gradient all on the GPU: fmk_plan_eval_device or
        fmk_plan_eval_many_device, no host round trip. The caller holds self._lock."""
        n = cast(int, self._n_sources)  # _shapes checked it
        lead: Tuple[int, ...]
        if many:
            d = _arrays.adopt(charges, self._complex, "charges")
            if len(d.shape) != 2 or d.shape[1] != n:
                raise FmkValueError(_ARG, f"charges must have shape (k, {n}); got {d.shape}")
            k = d.shape[0]
            lead = (k,)
        else:
            d = _arrays.device_charges(charges, (n,), self._complex)
            k, lead = 1, ()
        self._check_device("charges", d)
        p = _arrays.device_empty(d, lead + pshape, self._complex) if pot else None
        g = _arrays.device_empty(d, lead + gshape, self._complex) if grad else None
        item = 16 if self._complex else 8
        q_stride = n * item
        p_stride = int(np.prod(pshape)) * item
        g_stride = int(np.prod(gshape)) * item
        p_addr, g_addr = _arrays.device_address(p), _arrays.device_address(g)
        m = cast(int, self._n_targets)
        h = self._live("eval")
        if m > 0:  # nothing to write otherwise (and empty outputs may have no address)
            L = lib()
            self._run(L.fmk_plan_eval_many_device, h, k, d.pointer(0),
                      _void_double(p_addr, 0) if pot else None,
                      _void_double(g_addr, 0) if grad else None)
        return Result(_arrays.device_result(p, d.origin), _arrays.device_result(g, d.origin),
                      self._info_locked(h))


def _void_double(address: int, offset: int) -> Any:
    return ctypes.cast(ctypes.c_void_p(address + offset), ctypes.POINTER(ctypes.c_double))

