"""The N-body simulation driver (include/fmmkit_sim.h, docs/simulation.md): N gravitating
particles integrated by the kick-drift-kick leapfrog with the forces of an fmmkit plan; GADGET-4
HDF5 snapshots, restart files that continue bit for bit, PNG density projections; comoving
integration of a sphere in an expanding background (docs/cosmology.md; the cosmology itself in
_cosmo.py)."""
from __future__ import annotations

import ctypes
import os
import threading
import weakref
from typing import (Any, Callable, Dict, List, NamedTuple, Optional, Tuple, Type, TypeVar, Union,
                    cast)

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from ._arrays import Array, DeviceArray, adopt, device_address, device_empty, on_device
from ._errors import FmkStateError, FmkTypeError, FmkUnavailableError, FmkValueError, Status
from ._errors import error_for
from ._cosmo import Cosmology, _spacing, as_cosmology, cosmo_ic
from ._lib import PRECISION_NAMES, fmk_sim_info, fmk_sim_opts, lib, sim_p
from ._plan import Info, _comm_handle, _integer, _lookup, _number, _text
from ._poisson import _Owned

_ARG = Status.ERR_ARG
_dp = ctypes.POINTER(ctypes.c_double)
_PRECISIONS = {v: k for k, v in PRECISION_NAMES.items()}
SOFT_PLUMMER, SOFT_SPLINE = 0, 1
STEP_FIXED, STEP_ADAPTIVE = 0, 1
INTEGRATORS = {"leapfrog": 0, "yoshida4": 1}
SOFT_MODES = {"comoving": 0, "physical": 1}  # fmk_sim_soft_mode
# A file name, as os.fsencode takes it.
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
_S = TypeVar("_S", bound="Simulation")


def _check(status: int, handle: Any = None) -> None:
    if status != 0:
        raise error_for(status, _text(lib().fmk_sim_last_error(handle)))


def _path(name: str, path: PathLike) -> bytes:
    try:
        return os.fsencode(path)
    except TypeError:
        raise FmkTypeError(_ARG, f"{name} must be a path (str or os.PathLike); got "
                                 f"{path!r}") from None


class SimInfo(NamedTuple):
    """What a simulation is now (fmk_sim_info): energies at the current time (potential from the
    last force evaluation, negative; total = kinetic + potential), the last step's cost and the
    force plan's Info (method and backend chosen, eps, theta...).

    Comoving runs (comoving True): time is the scale factor a (also .a); kinetic and potential
    are the peculiar energies K and W (docs/cosmology.md, "Diagnostics"), redshift 1/a - 1,
    layzer_irvine C(a) = a (K + W) + int K da (constant for exact integration) and
    layzer_irvine_error (C - C_start) / max |a W|; these three are 0 in a Newtonian run."""
    n: int
    step: int
    time: float
    dt: float              # the last step's dt
    kinetic: float
    potential: float
    total: float
    momentum: Tuple[float, float, float]
    angular_momentum: Tuple[float, float, float]
    seconds_force: float   # the last step's wall time in set_points + eval
    seconds_step: float    # the last step's whole wall time
    interactions: int      # the plan's interactions_p2p + interactions_far (last eval)
    plan: Info
    interactions_total: int  # the sum of interactions over the evaluations so far
    redshift: float
    layzer_irvine: float
    layzer_irvine_error: float
    comoving: bool
    n_local: int = 0       # a distributed simulation: this rank's particles (else n)
    rank: int = 0
    ranks: int = 1

    @property
    def a(self) -> Optional[float]:
        """The scale factor (the time) of a comoving run; None in a Newtonian one."""
        return self.time if self.comoving else None

    @property
    def method(self) -> str:
        return self.plan.method

    @property
    def backend(self) -> str:
        return self.plan.backend


class Energy(NamedTuple):
    kinetic: float
    potential: float
    total: float


class State(NamedTuple):
    """The particles now: mass (n,), pos, vel, acc (n, 3) and pot (n,): the softened potential
    G sum_j m_j phi_s at each particle, positive (the gravitational potential is -pot)."""
    mass: Array  # numpy arrays, or CUDA arrays for state(device=True)
    pos: Array
    vel: Array
    acc: Array
    pot: Array


def _options(method: str = "auto", backend: str = "auto", precision: str = "fp64",
             theta: Optional[float] = None, eps: Optional[float] = None,
             G: Optional[float] = None, softening: Optional[float] = None, spline: bool = False,
             dt: Optional[float] = None, adaptive: bool = False, eta: Optional[float] = None,
             dt_min: Optional[float] = None, dt_max: Optional[float] = None,
             threads: Optional[int] = None, device: Optional[int] = None, verbose: bool = False,
             comoving: bool = False, cosmology: Union[str, Cosmology, None] = None,
             spacing: Optional[str] = None, soft_mode: Optional[str] = None,
             soft_max: Optional[float] = None, a_start: Optional[float] = None,
             radius: Optional[float] = None, integrator: Optional[str] = None) -> fmk_sim_opts:
    """fmk_sim_opts from keyword options (None: the library's default)."""
    o = fmk_sim_opts()
    lib().fmk_sim_opts_default(ctypes.byref(o))
    o.plan.method = _lookup("method", method)
    o.plan.backend = _lookup("backend", backend)
    if precision not in _PRECISIONS:
        raise FmkValueError(_ARG, f"unknown precision {precision!r} (fp64, fp32)")
    o.plan.precision = _PRECISIONS[precision]
    for name, value in (("theta", theta), ("threads", threads), ("device", device)):
        if value is not None:
            setattr(o.plan, name, _number(name, value, float) if name == "theta"
                    else _integer(name, value, 32))
    for name, field, value in (("eps", "eps", eps), ("G", "G", G), ("softening", "soft", softening),
                               ("dt", "dt", dt), ("eta", "eta", eta), ("dt_min", "dt_min", dt_min),
                               ("dt_max", "dt_max", dt_max)):
        if value is not None:
            setattr(o, field, _number(name, value, float))
    o.softening = SOFT_SPLINE if spline else SOFT_PLUMMER
    o.stepping = STEP_ADAPTIVE if adaptive else STEP_FIXED
    o.verbose = 1 if verbose else 0
    if integrator is not None:
        if not isinstance(integrator, str) or integrator not in INTEGRATORS:
            raise FmkValueError(_ARG, f"integrator = {integrator!r}; it must be 'leapfrog' or "
                                      f"'yoshida4'")
        o.integrator = INTEGRATORS[integrator]
    given = [k for k, v in (("cosmology", cosmology), ("spacing", spacing),
                            ("soft_mode", soft_mode), ("soft_max", soft_max),
                            ("a_start", a_start), ("radius", radius)) if v is not None]
    if not comoving:
        if given:
            raise FmkValueError(_ARG, f"{', '.join(given)}: for comoving runs (comoving=True)")
        return o
    o.comoving = 1
    o.cosmology = as_cosmology(cosmology).to_c()
    o.spacing = _spacing(spacing if spacing is not None else "time")
    mode = soft_mode if soft_mode is not None else "comoving"
    if not isinstance(mode, str) or mode not in SOFT_MODES:
        raise FmkValueError(_ARG, f"soft_mode = {mode!r}; it must be 'comoving' or 'physical'")
    o.soft_mode = SOFT_MODES[mode]
    if soft_max is not None:
        if mode != "physical":
            raise FmkValueError(_ARG, "soft_max (the cap on the comoving softening) is for "
                                      "soft_mode='physical'")
        o.soft_max_comoving = _number("soft_max", soft_max, float)
    for name, value in (("a_start", a_start), ("radius", radius)):
        if value is not None:
            setattr(o, name, _number(name, value, float))
    return o


def _host(name: str, a: ArrayLike, shape: Tuple[int, ...],
          dtype: DTypeLike = np.float64) -> NDArray[Any]:
    try:
        x = np.asarray(a)
    except Exception as e:
        raise FmkTypeError(_ARG, f"{name} is not an array of numbers ({e})") from None
    if x.dtype.kind not in ("iu" if dtype == np.uint64 else "fiu"):
        raise FmkTypeError(_ARG, f"{name} has dtype {x.dtype}; use "
                                 f"{'integers' if dtype == np.uint64 else 'float64'}")
    if x.shape != shape:
        raise FmkValueError(_ARG, f"{name} must have shape {shape}; got {x.shape}")
    return np.ascontiguousarray(x, dtype=dtype)


def _seed(seed: int) -> int:
    s = _integer("seed", seed, 65)
    if not 0 <= s < 2**64:
        raise FmkValueError(_ARG, f"seed = {s}; it must be in 0 .. 2^64 - 1")
    return s


def _n_of(mass: Any, least: int = 1) -> int:
    shape = np.shape(mass) if not hasattr(mass, "shape") else tuple(mass.shape)
    if len(shape) != 1 or shape[0] < least:
        raise FmkValueError(_ARG, f"mass must have shape (n,), n >= {least}; got {shape}")
    return shape[0]


def _share(n: int, comm: Any) -> slice:
    """This rank's equal share of n particles: the slice (rank r: n // size, one more when
    r < n % size), as fmk_sim_create_root_mpi and `mpirun fmmkit sim` cut them."""
    size, rank = comm.Get_size(), comm.Get_rank()
    q, r = divmod(n, size)
    first = q * rank + min(rank, r)
    return slice(first, first + q + (rank < r))


class Simulation(_Owned):
    """An N-body simulation (fmk_sim): positions and velocities (n, 3) and masses (n,), fp64.

        sim = fmmkit.Simulation.plummer(4096, dt=1 / 128, softening=0.01, method="tree",
                                        theta=0.5)
        sim.set_output("run", snap_every=100, png=True, diag_every=10)
        sim.run(t_end=10.0)                  # or steps=...; Ctrl-C stops after a whole step
        print(sim.energy(), sim.info.method)
        sim.snapshot("final.hdf5"); sim.restart("final.restart.h5")

    mass, pos, vel: numpy (or anything numpy takes), or CUDA device arrays (CuPy, PyTorch,
    DLPack; backend "cuda", the state then lives on the GPU: fmk_sim_create_device). soft: n
    softening lengths (spline only), ids: n particle ids (host arrays only).
    Options (fmk_sim_opts): method ("auto", "direct", "tree", "fmm"), backend, precision ("fp64",
    "fp32": the forces'), theta, eps, threads, device; G (1); softening (the length s, 0: plain
    1/r), spline (GADGET's cubic spline instead of Plummer's); dt (the fixed step, required
    unless adaptive, then its cap), adaptive, eta (0.025), dt_min, dt_max; integrator
    ("leapfrog", default, or "yoshida4": fourth order, three force evaluations a step, CPU
    backend); verbose (a progress bar on a terminal).
    Comoving integration (docs/cosmology.md; units Mpc, 1e10 Msun, km/s; G is then 43.00917):
    comoving=True, with pos comoving Mpc, vel the momenta p = a^2 dx/dt (km/s), the time the
    scale factor a; a_start (the initial a, required), cosmology (a name, "wmap" by default, or
    fmmkit.cosmology(...)), spacing ("time", the default, "a" or "loga": the variable dt is a
    step of), soft_mode ("comoving", the default: softening is a comoving length; "physical":
    a physical one, its comoving value capped at soft_max), radius (the sphere's comoving
    radius for the reference energy; default: from the mass at the mean density).
    Simulation.cosmo makes the initial conditions and these options together.
    comm: an mpi4py communicator makes a distributed simulation (fmk_sim_create_mpi_f;
    docs/distributed.md, "The simulation under MPI"): mass, pos, vel (and ids) are this rank's
    own particles (any number, none included); every call is then collective, the energies and
    info are sums over the ranks (info.n_local: this rank's), state() gives this rank's
    particles (after a step those whose forces it evaluates: they migrate; ids() says which),
    rank 0 writes the files. Host arrays only; needs mpi4py and libfmmkit_mpi.
    Simulation.plummer, cold, kepler and cosmo with comm make every particle on every rank and
    keep this rank's equal share (the particles of a one-process run)."""
    _share: slice  # Simulation.cosmo: this rank's particles of the sphere

    def __init__(self, mass: ArrayLike, pos: ArrayLike, vel: ArrayLike, *,
                 soft: Optional[ArrayLike] = None, ids: Optional[ArrayLike] = None,
                 comm: Any = None, **options: Any) -> None:
        L = lib()
        n = _n_of(mass, 0 if comm is not None else 1)
        self._comoving: Optional[bool] = bool(options.get("comoving"))
        self.a_end: Optional[float] = None  # the end of a Simulation.cosmo run
        device = [on_device(a, k) for k, a in (("mass", mass), ("pos", pos), ("vel", vel))]
        handle = sim_p()
        self._like: Optional[DeviceArray] = None
        if comm is not None and any(device):
            raise FmkUnavailableError(Status.ERR_UNAVAILABLE, "a distributed simulation "
                                      "(comm=...) takes host arrays: its state is on the host")
        if any(device):
            if not all(device):
                raise FmkTypeError(_ARG, "mass, pos and vel must all be host arrays or all CUDA "
                                         "device arrays")
            if soft is not None or ids is not None:
                raise FmkValueError(_ARG, "soft and ids are taken with host arrays only")
            if options.get("backend", "auto") == "auto":
                options["backend"] = "cuda"
            o = _options(**options)
            d = [adopt(a, False, k) for k, a in (("mass", mass), ("pos", pos), ("vel", vel))]
            for k, a, want in zip(("mass", "pos", "vel"), d, ((n,), (n, 3), (n, 3))):
                if a.shape != want:
                    raise FmkValueError(_ARG, f"{k} must have shape {want}; got {a.shape}")
            self._like = d[0]
            _check(L.fmk_sim_create_device(ctypes.byref(handle), n, d[0].pointer(),
                                           d[1].pointer(), d[2].pointer(), ctypes.byref(o)))
        else:
            o = _options(**options)
            m, x, v = (_host(k, a, s) for k, a, s in (("mass", mass, (n,)), ("pos", pos, (n, 3)),
                                                       ("vel", vel, (n, 3))))
            s = None if soft is None else _host("soft", soft, (n,))
            i = None if ids is None else _host("ids", ids, (n,), np.uint64)
            args = (m.ctypes.data_as(_dp), x.ctypes.data_as(_dp), v.ctypes.data_as(_dp),
                    None if s is None else s.ctypes.data_as(_dp),
                    None if i is None else i.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                    ctypes.byref(o))
            if comm is not None:  # collective: every rank of comm gets the same status
                fint, M = _comm_handle(comm)
                _check(M.fmk_sim_create_mpi_f(ctypes.byref(handle), fint, n, *args))
                self._adopt(handle)
                return
            _check(L.fmk_sim_create(ctypes.byref(handle), n, m.ctypes.data_as(_dp),
                                    x.ctypes.data_as(_dp), v.ctypes.data_as(_dp),
                                    None if s is None else s.ctypes.data_as(_dp),
                                    None if i is None else
                                    i.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                                    ctypes.byref(o)))
        self._adopt(handle)

    def _adopt(self, handle: Any) -> None:
        self._handle = handle
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, lib().fmk_sim_destroy, handle)

    # -- other ways to make one ------------------------------------------------------------------

    @classmethod
    def from_file(cls: Type[_S], path: PathLike, comm: Any = None, **options: Any) -> _S:
        """From a GADGET-4 style HDF5 snapshot (PartType1; give dt and the other options) or a
        restart file (no options: it continues with the ones stored in it, bit for bit).
        comm (mpi4py): distributed, rank 0 reads the file (fmk_sim_create_from_file_mpi_f)."""
        handle = sim_p()
        o = _options(**options) if options else None
        if comm is not None:
            fint, M = _comm_handle(comm)
            _check(M.fmk_sim_create_from_file_mpi_f(ctypes.byref(handle), fint,
                                                    _path("path", path),
                                                    ctypes.byref(o) if o is not None else None))
        else:
            _check(lib().fmk_sim_create_from_file(ctypes.byref(handle), _path("path", path),
                                                  ctypes.byref(o) if o is not None else None))
        sim = cls.__new__(cls)
        sim._like, sim.a_end = None, None
        # a restart keeps its options: then info tells whether the run is comoving
        sim._comoving = bool(options.get("comoving")) if options else None
        sim._adopt(handle)
        return sim

    @classmethod
    def cosmo(cls: Type[_S], n: int = 2874551, radius: float = 45.0, z_start: float = 49.0,
              z_end: float = 0.0, steps: Optional[int] = None, dt: Optional[float] = None,
              cosmology: Union[str, Cosmology] = "wmap", lpt: int = 1, seed: int = 1,
              **options: Any) -> _S:
        """A comoving run of a sphere cut from a Gaussian random field, as `fmmkit sim --ic
        cosmo` makes it: about n particles within radius (comoving Mpc) at redshift z_start
        (fmmkit.cosmo_ic with cosmology, lpt 1 Zel'dovich or 2 2LPT, seed), to be run to z_end:

            sim = fmmkit.Simulation.cosmo(20000, z_end=0, steps=3584, theta=0.6, softening=0.1)
            sim.set_output("run", diag_every=1, times=[0.25, 0.5, 1.0])
            sim.run()                            # to a = 1 / (1 + z_end), sim.a_end

        steps: equal steps of the stepping variable (spacing "time", the default, "a" or "loga")
        spanning z_start to z_end give dt (fmk_sim_comoving_dt); or dt, a step in that variable.
        The forces are fp32 unless precision is given, and theta alone picks the treecode (as
        the command does). The potential energy W is measured against the unperturbed lattice
        (fmmkit.cosmo_ic with lpt 0; fmk_sim_set_energy_reference), so it is the peculiar
        potential energy from the start. Other options: those of Simulation."""
        for k in ("comoving", "a_start", "cosmology"):
            if k in options:
                raise FmkValueError(_ARG, f"Simulation.cosmo sets {k} itself")
        z0, z1 = _number("z_start", z_start, float), _number("z_end", z_end, float)
        if not (z0 > 0 and 0 <= z1 < z0):
            raise FmkValueError(_ARG, f"z_start = {z0}, z_end = {z1}; they need z_start > "
                                      f"z_end >= 0")
        c = as_cosmology(cosmology)
        a0, a1 = 1 / (1 + z0), 1 / (1 + z1)
        if dt is None:
            if steps is None:
                raise FmkValueError(_ARG, "Simulation.cosmo: give steps (they span z_start to "
                                          "z_end) or dt")
            dt = c.comoving_dt(a0, a1, steps, options.get("spacing") or "time")
        elif steps is not None:
            raise FmkValueError(_ARG, "Simulation.cosmo: give steps or dt, not both")
        options.setdefault("precision", "fp32")
        if "theta" in options and "method" not in options:
            options["method"] = "tree"
        ic_args: Dict[str, Any] = dict(n=n, radius=radius, z_start=z0, cosmology=c, seed=seed,
                       threads=options.get("threads"))
        ic = cosmo_ic(lpt=lpt, **ic_args)
        comm = options.get("comm")
        share = slice(None) if comm is None else _share(len(ic.mass), comm)
        sim = cls(ic.mass[share], ic.pos[share], ic.vel[share], comoving=True, cosmology=c,
                  a_start=a0, dt=dt, **options)
        sim._share = share
        sim.a_end = a1
        try:
            sim._reference(ic_args)
        except BaseException:
            sim.close()
            raise
        return sim

    def _reference(self, ic_args: Dict[str, Any]) -> None:
        """W against the unperturbed lattice of the same sphere (Simulation.cosmo)."""
        self.set_energy_reference(cosmo_ic(lpt=0, **ic_args).pos[self._share])

    @classmethod
    def _from_ic(cls: Type[_S], fn: Callable[..., int], n: int, *args: Any, **options: Any) -> _S:
        m, x, v = np.empty(n), np.empty((n, 3)), np.empty((n, 3))
        _check(fn(*args, m.ctypes.data_as(_dp), x.ctypes.data_as(_dp), v.ctypes.data_as(_dp)))
        if options.get("comm") is not None:  # this rank's share, ids their global indices + 1
            k = _share(n, options["comm"])
            ids = np.arange(k.start + 1, k.stop + 1, dtype=np.uint64)
            return cls(m[k], x[k], v[k], ids=ids, **options)
        return cls(m, x, v, **options)

    @classmethod
    def plummer(cls: Type[_S], n: int, seed: int = 1, **options: Any) -> _S:
        """A Plummer sphere of n particles, total mass 1, Henon units (E = -1/4)."""
        n = _integer("n", n)
        if n < 1:
            raise FmkValueError(_ARG, f"n = {n}; it must be >= 1")
        return cls._from_ic(lib().fmk_sim_ic_plummer, n, n, _seed(seed), **options)

    @classmethod
    def cold(cls: Type[_S], n: int, seed: int = 1, **options: Any) -> _S:
        """A uniform sphere of radius 1 and mass 1, at rest (a cold collapse)."""
        n = _integer("n", n)
        if n < 1:
            raise FmkValueError(_ARG, f"n = {n}; it must be >= 1")
        return cls._from_ic(lib().fmk_sim_ic_cold, n, n, _seed(seed), **options)

    @classmethod
    def kepler(cls: Type[_S], e: float = 0.5, **options: Any) -> _S:
        """Two bodies of mass 0.5 on an orbit of semi-major axis 1 and eccentricity e, at
        apocentre (period 2 pi)."""
        return cls._from_ic(lib().fmk_sim_ic_kepler, 2, _number("e", e, float), **options)

    # -- running ----------------------------------------------------------------------------------

    def _live(self) -> Any:
        if not self._finalizer.alive:
            raise FmkStateError(Status.ERR_STATE, "the simulation is closed")
        return self._handle

    def _interruptible(self, fn: Callable[..., int], *args: Any) -> int:
        """fn(*args), a long C call, in a worker thread while the main thread waits: Ctrl-C
        (KeyboardInterrupt) asks the library to stop after a whole step (fmk_sim_interrupt),
        waits for it and is raised again. The C API has no callback for this (fmk_plan's
        _Signals): the interrupt is the one call safe from another thread."""
        if threading.current_thread() is not threading.main_thread():
            return fn(*args)
        box: List[int] = []
        done = threading.Event()

        def work() -> None:
            try:
                box.append(fn(*args))
            finally:
                done.set()
        # Waiting on an Event, not Thread.join: a KeyboardInterrupt inside join() can leave the
        # Thread marked stopped while it still runs (CPython's bpo-45274 handling).
        threading.Thread(target=work, daemon=True).start()
        try:
            while not done.wait(0.05):
                pass
        except KeyboardInterrupt:
            lib().fmk_sim_interrupt(self._handle)
            while not done.is_set():  # the step ends soon; the C call must end before we do
                try:
                    done.wait(0.05)
                except KeyboardInterrupt:
                    pass
            raise
        return box[0]

    def step(self: _S) -> _S:
        """One step. Returns self."""
        with self._lock:
            _check(lib().fmk_sim_step(self._live()), self._handle)
        return self

    def run(self: _S, t_end: Optional[float] = None, steps: Optional[int] = None) -> _S:
        """Steps until the time is t_end (the last step shortened to land on it; in a comoving
        run the time is a), or steps steps (one of them; neither: to a_end, the end
        Simulation.cosmo was given). Writes the outputs of set_output. Ctrl-C stops it after a
        whole step (KeyboardInterrupt; the state is that step's). Returns self."""
        if t_end is None and steps is None and self.a_end is not None:
            t_end = self.a_end
        if (t_end is None) == (steps is None):
            raise FmkValueError(_ARG, "run: give t_end or steps (one of them)")
        with self._lock:
            h = self._live()
            if t_end is not None:
                t_end = _number("t_end", t_end, float)
                now = self._info_locked().time
                if not t_end >= now:
                    raise FmkValueError(_ARG, f"run: t_end = {t_end} is before the current time "
                                              f"{now}")
                args = (t_end, 0)
            else:
                steps = _integer("steps", steps)
                if steps < 0:
                    raise FmkValueError(_ARG, f"run: steps = {steps}; it must be >= 0")
                args = (-1e308, steps)  # a t_end not after the time: count steps
            _check(self._interruptible(lib().fmk_sim_run, h, *args), h)
        return self

    def set_output(self: _S, dir: PathLike, snap_every: int = 0, png: bool = False,
                   diag_every: int = 0, restart_every: int = 0,
                   times: Optional[ArrayLike] = None) -> _S:
        """What run() writes into dir (created if missing): dir/snapshot_NNN.hdf5 every
        snap_every steps (and its PNG when png), a row of dir/diagnostics.csv every diag_every
        steps, dir/restart.h5 every restart_every steps (0: never); times: snapshots at these
        times too (set_output_times). Returns self."""
        if times is not None:
            self.set_output_times(times)
        with self._lock:
            h = self._live()
            _check(lib().fmk_sim_set_output(h, _path("dir", dir), _integer("snap_every", snap_every),
                                            1 if png else 0, _integer("diag_every", diag_every),
                                            _integer("restart_every", restart_every)), h)
        return self

    def set_output_times(self: _S, times: Optional[ArrayLike] = None, *,
                         z: Optional[ArrayLike] = None) -> _S:
        """Snapshots (numbered with the others, into set_output's dir: call set_output after
        this, or give it times=) when the time reaches each of times (scale factors a in a
        comoving run), or each redshift of z (comoving runs): run() shortens the step that would
        pass one to land on it exactly (fmk_sim_set_output_times). Sorted here; an empty list
        clears them. Returns self."""
        if (times is None) == (z is None):
            raise FmkValueError(_ARG, "set_output_times: give times or z (one of them)")
        name, values = ("times", times) if z is None else ("z", z)
        v = np.atleast_1d(cast(ArrayLike, values))
        t = _host(name, v, (v.size,))
        if z is not None:
            if not self.info.comoving:
                raise FmkValueError(_ARG, "set_output_times: z is for comoving runs")
            t = 1 / (1 + t)
        t = np.ascontiguousarray(np.sort(t))
        with self._lock:
            h = self._live()
            _check(lib().fmk_sim_set_output_times(h, len(t), t.ctypes.data_as(_dp)), h)
        return self

    def set_png(self: _S, axis: int = 2, width: int = 512, extent: float = 0.0) -> _S:
        """The view of the PNGs of run()'s snapshots: projected along axis (0, 1, 2), width x
        width pixels, a square of side extent about the centre of mass (comoving Mpc in a
        comoving run; 0: the square holding 99% of the mass). Returns self."""
        with self._lock:
            h = self._live()
            _check(lib().fmk_sim_set_png(h, _integer("axis", axis, 32),
                                         _integer("width", width, 32),
                                         _number("extent", extent, float)), h)
        return self

    def set_energy_reference(self: _S, pos: ArrayLike) -> _S:
        """Comoving runs, before the first step (FmkStateError after): the reference of the
        potential energy, U_ref = U at these (n, 3) positions with the simulation's masses and
        softening (e.g. the unperturbed lattice, fmmkit.cosmo_ic with lpt 0, as Simulation.cosmo
        does): W = (U - U_ref) / a is then the peculiar potential energy and the Layzer-Irvine
        error is relative to it (fmk_sim_set_energy_reference; by default U_ref is a uniform
        sphere's). Kept in restarts. Returns self."""
        with self._lock:
            h = self._live()
            n = self._info_locked().n_local
            x = _host("pos", pos, (n, 3))
            _check(lib().fmk_sim_set_energy_reference(h, n, x.ctypes.data_as(_dp)), h)
        return self

    # -- looking --------------------------------------------------------------------------------

    def _info_locked(self) -> SimInfo:
        c = fmk_sim_info()
        _check(lib().fmk_sim_info_get(self._handle, ctypes.byref(c)), self._handle)
        comoving = self._comoving
        if comoving is None:  # a restart file's run: Newtonian ones keep these at 0
            comoving = c.redshift != 0 or c.layzer_irvine != 0
        return SimInfo(c.n, c.step, c.time, c.dt, c.kinetic, c.potential, c.total,
                       tuple(c.momentum), tuple(c.angular_momentum), c.seconds_force,
                       c.seconds_step, c.interactions, Info.from_c(c.plan),
                       c.interactions_total, c.redshift, c.layzer_irvine,
                       c.layzer_irvine_error, bool(comoving), c.n_local, c.rank, c.ranks)

    @property
    def info(self) -> SimInfo:
        """SimInfo: step, time, energies, momenta, the last step's cost, the plan's Info."""
        with self._lock:
            self._live()
            return self._info_locked()

    @property
    def n(self) -> int:
        return self.info.n

    @property
    def time(self) -> float:
        return self.info.time

    @property
    def a(self) -> Optional[float]:
        """The scale factor of a comoving run (its time); None in a Newtonian one."""
        return self.info.a

    def energy(self) -> Energy:
        """Energy(kinetic, potential, total) at the current time."""
        i = self.info
        return Energy(i.kinetic, i.potential, i.total)

    def state(self, device: bool = False) -> State:
        """State(mass, pos, vel, acc, pot): numpy copies; device=True: CUDA arrays (of the
        library of the arrays given, else CuPy or PyTorch) copied on the GPU, for a simulation
        on the CUDA backend (fmk_sim_get_state_device)."""
        with self._lock:
            h = self._live()
            n = self._info_locked().n_local  # a distributed simulation's: this rank's
            if not device:
                m, x, v, a, p = np.empty(n), np.empty((n, 3)), np.empty((n, 3)), \
                    np.empty((n, 3)), np.empty(n)
                _check(lib().fmk_sim_get_state(h, *(o.ctypes.data_as(_dp)
                                                    for o in (m, x, v, a, p))), h)
                return State(m, x, v, a, p)
            like = self._device_like()
            out = [device_empty(like, s, False) for s in ((n,), (n, 3), (n, 3), (n, 3), (n,))]
            ptrs = [ctypes.cast(ctypes.c_void_p(device_address(o)), _dp) for o in out]
            _check(lib().fmk_sim_get_state_device(h, *ptrs), h)
            return State(*out)

    def ids(self) -> np.ndarray:
        """The particles' ids (uint64), in state()'s order (fmk_sim_get_ids). A distributed
        simulation's ranks hold the particles that its force partition gives them, which
        change from step to step: the ids say which these are."""
        with self._lock:
            h = self._live()
            out = np.empty(self._info_locked().n_local, dtype=np.uint64)
            _check(lib().fmk_sim_get_ids(h, out.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64))),
                   h)
            return out

    def _device_like(self) -> DeviceArray:
        if self._like is not None:
            return self._like
        d = DeviceArray()
        d.origin, d.device, d.shape, d.address = "cupy", 0, (0,), 0
        try:
            import cupy
            d.lib, d.array = "cupy", cupy.empty(0)
            return d
        except ImportError:
            pass
        try:
            import torch
            d.lib, d.array, d.origin = "torch", torch.empty(0, device="cuda"), "torch"
            return d
        except ImportError:
            raise FmkUnavailableError(Status.ERR_UNAVAILABLE, "state(device=True) needs CuPy or "
                                                              "PyTorch installed") from None

    # -- files ------------------------------------------------------------------------------------

    def snapshot(self: _S, path: PathLike) -> _S:
        """Writes a GADGET-4 HDF5 snapshot (whole or not at all). Returns self."""
        with self._lock:
            h = self._live()
            _check(lib().fmk_sim_write_snapshot(h, _path("path", path)), h)
        return self

    def restart(self: _S, path: PathLike) -> _S:
        """Writes a restart file: Simulation.from_file(path) continues bit for bit. Returns
        self."""
        with self._lock:
            h = self._live()
            _check(lib().fmk_sim_write_restart(h, _path("path", path)), h)
        return self

    def png(self: _S, path: PathLike, axis: int = 2, width: int = 512) -> _S:
        """Writes a PNG density projection along axis (0, 1, 2), width pixels. Returns self."""
        with self._lock:
            h = self._live()
            _check(lib().fmk_sim_write_png(h, _path("path", path), _integer("axis", axis, 32),
                                           _integer("width", width, 32)), h)
        return self

    def interrupt(self) -> None:
        """Asks a run() in another thread to stop after its current whole step."""
        lib().fmk_sim_interrupt(self._live())

    def __repr__(self) -> str:
        if not self._finalizer.alive:
            return "<fmmkit.Simulation (closed)>"
        i = self.info
        return (f"<fmmkit.Simulation n={i.n} step={i.step} time={i.time:g} "
                f"method={i.plan.method} backend={i.plan.backend}>")
