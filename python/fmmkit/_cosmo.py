"""Cosmology (include/fmmkit_sim.h, docs/cosmology.md): the background's and the power
spectrum's parameters, and a sphere of particles cut from a Gaussian random field at a start
redshift (Eisenstein & Hu power, Zel'dovich or 2LPT), the initial conditions of a comoving
Simulation.

Units of every cosmological quantity: length comoving Mpc (no h: 45 Mpc is 45 Mpc), mass
1e10 Msun, velocity km/s (time Mpc/(km/s)); G = 43.00917 and H0 = 100 h."""
from __future__ import annotations

import ctypes
import dataclasses
import math
from typing import Any, Dict, NamedTuple, Optional, Tuple, Union

import numpy as np
from numpy.typing import NDArray

from ._errors import FmkTypeError, FmkValueError, Status, error_for
from ._lib import fmk_sim_cosmo_ic, fmk_sim_cosmology, lib
from ._plan import _integer, _number, _text

_ARG = Status.ERR_ARG
_dp = ctypes.POINTER(ctypes.c_double)
G = 43.00917  # FMK_SIM_COSMO_G: Mpc (km/s)^2 / (1e10 Msun)
SPACINGS = {"time": 0, "a": 1, "loga": 2}  # fmk_sim_spacing


def _check(status: int) -> None:
    if status != 0:
        raise error_for(status, _text(lib().fmk_sim_last_error(None)))


@dataclasses.dataclass(frozen=True)
class Cosmology:
    """A Friedmann-Lemaitre background (matter, a cosmological constant, curvature
    1 - omega_m - omega_lambda; no radiation) and the linear power spectrum's parameters
    (struct fmk_sim_cosmology). Make one with fmmkit.cosmology(); dataclasses.replace(c, h=0.7)
    or fmmkit.cosmology(c, h=0.7) changes values."""
    omega_m: float       # matter (cold dark matter + baryons) today
    omega_lambda: float  # cosmological constant today
    omega_b: float       # baryons today
    h: float             # H0 = 100 h km/s/Mpc
    n_s: float           # primordial spectral index
    sigma_8: float       # rms linear density contrast in spheres of 8/h Mpc today
    t_cmb: float         # CMB temperature today, K

    def to_c(self) -> fmk_sim_cosmology:
        """The struct fmk_sim_cosmology of these values."""
        return fmk_sim_cosmology(*(float(getattr(self, f.name))
                                   for f in dataclasses.fields(self)))

    @classmethod
    def from_c(cls, c: Any) -> Cosmology:
        return cls(*(getattr(c, f.name) for f in dataclasses.fields(cls)))

    def comoving_dt(self, a0: float, a1: float, steps: int, spacing: str = "time") -> float:
        """The fixed step (Simulation's dt) that takes `steps` equal steps of the stepping
        variable (spacing "time": cosmic time in Mpc/(km/s), "a" or "loga") from the scale
        factor a0 to a1 (fmk_sim_comoving_dt)."""
        dt = ctypes.c_double()
        c = self.to_c()
        _check(lib().fmk_sim_comoving_dt(ctypes.byref(c), _spacing(spacing),
                                         _number("a0", a0, float), _number("a1", a1, float),
                                         _integer("steps", steps), ctypes.byref(dt)))
        return dt.value


_FIELDS = tuple(f.name for f in dataclasses.fields(Cosmology))


def _spacing(name: object) -> int:
    if not isinstance(name, str) or name not in SPACINGS:
        raise FmkValueError(_ARG, f"spacing = {name!r}; it must be 'time', 'a' or 'loga'")
    return SPACINGS[name]


def cosmology(name: Union[str, Cosmology] = "wmap", **overrides: float) -> Cosmology:
    """The parameters of a named set, with any of them overridden:

        fmmkit.cosmology()                       # "wmap": 0.3, 0.7, 0.04, 0.7, 1, 0.9, 2.7255
        fmmkit.cosmology("planck18", sigma_8=0.8)

    name: "wmap" (the default; the era of Hamada et al. 2009) or "planck18"
    (fmk_sim_cosmology_preset), or a Cosmology to start from. overrides: omega_m, omega_lambda,
    omega_b, h, n_s, sigma_8, t_cmb. The result is checked as the library checks it (finite,
    omega_m > 0, omega_lambda >= 0, 0 <= omega_b < omega_m, h, sigma_8, t_cmb > 0, no bounce
    before today): bad values and unknown names raise FmkValueError."""
    if isinstance(name, Cosmology):
        base = name
    elif isinstance(name, str):
        c = fmk_sim_cosmology()
        _check(lib().fmk_sim_cosmology_preset(ctypes.byref(c), name.encode()))
        base = Cosmology.from_c(c)
    else:
        raise FmkTypeError(_ARG, f"cosmology must be a name (str) or a Cosmology; got {name!r}")
    unknown = sorted(set(overrides) - set(_FIELDS))
    if unknown:
        raise FmkValueError(_ARG, f"cosmology: unknown parameter {', '.join(unknown)} (they are "
                                  f"{', '.join(_FIELDS)})")
    values: Dict[str, float] = {}
    for k, v in overrides.items():
        values[k] = _number(k, v, float)
        if not math.isfinite(values[k]):
            raise FmkValueError(_ARG, f"cosmology: {k} = {values[k]}; it must be finite")
    result = dataclasses.replace(base, **values)
    result.comoving_dt(0.5, 1.0, 1)  # the library's checks of the parameters
    return result


def as_cosmology(value: Union[str, Cosmology, None]) -> Cosmology:
    """A Cosmology from a name, a Cosmology or None (the default, "wmap")."""
    return cosmology() if value is None else cosmology(value)


class CosmoIC(NamedTuple):
    """A sphere of particles (cosmo_ic): mass (n,) in 1e10 Msun, pos (n, 3) comoving Mpc about
    the sphere's centre, vel (n, 3) the comoving momenta p = a^2 dx/dt in km/s; grid points per
    side and the periodic box's side (comoving Mpc) of the field it was cut from."""
    mass: NDArray[np.float64]
    pos: NDArray[np.float64]
    vel: NDArray[np.float64]
    grid: int
    box: float

    @property
    def n(self) -> int:
        return len(self.mass)

    @property
    def spacing(self) -> float:
        """The lattice spacing, comoving Mpc (box / grid)."""
        return self.box / self.grid


def _ic_params(n: int, radius: float, z_start: float, cosmology: Union[str, Cosmology, None],
               lpt: int, seed: int, spacing: Optional[float],
               threads: Optional[int]) -> fmk_sim_cosmo_ic:
    p = fmk_sim_cosmo_ic()
    lib().fmk_sim_cosmo_ic_default(ctypes.byref(p))
    p.cosmo = as_cosmology(cosmology).to_c()
    p.radius = _number("radius", radius, float)
    p.n = _integer("n", n)
    if spacing is not None:
        p.spacing = _number("spacing", spacing, float)
        if not p.spacing > 0:
            raise FmkValueError(_ARG, f"spacing = {p.spacing}; it must be > 0 (or None: from n)")
    p.z_start = _number("z_start", z_start, float)
    p.lpt_order = _integer("lpt", lpt, 32)
    s = _integer("seed", seed, 65)
    if not 0 <= s < 2**64:
        raise FmkValueError(_ARG, f"seed = {s}; it must be in 0 .. 2^64 - 1")
    p.seed = s
    if threads is not None:
        p.threads = _integer("threads", threads, 32)
    return p


def cosmo_ic_size(n: int = 2874551, radius: float = 45.0, z_start: float = 49.0,
                  cosmology: Union[str, Cosmology, None] = "wmap", lpt: int = 1, seed: int = 1,
                  spacing: Optional[float] = None,
                  threads: Optional[int] = None) -> Tuple[int, float, int, float]:
    """What cosmo_ic would make, without making it: (particles, particle mass, grid, box)."""
    p = _ic_params(n, radius, z_start, cosmology, lpt, seed, spacing, threads)
    count, mass, grid, box = ctypes.c_int64(), ctypes.c_double(), ctypes.c_int64(), \
        ctypes.c_double()
    _check(lib().fmk_sim_ic_cosmo_size(ctypes.byref(p), ctypes.byref(count), ctypes.byref(mass),
                                       ctypes.byref(grid), ctypes.byref(box)))
    return count.value, mass.value, grid.value, box.value


def cosmo_ic(n: int = 2874551, radius: float = 45.0, z_start: float = 49.0,
             cosmology: Union[str, Cosmology, None] = "wmap", lpt: int = 1, seed: int = 1,
             spacing: Optional[float] = None, threads: Optional[int] = None) -> CosmoIC:
    """Cosmological initial conditions (fmk_sim_ic_cosmo): a Gaussian random field with the
    Eisenstein & Hu (1998) power spectrum on a periodic grid, particles displaced from the
    lattice by the Zel'dovich approximation (lpt 1) or 2LPT (lpt 2), lpt 0 the lattice itself
    (no displacement, at rest), then those whose lattice point lies within radius (comoving Mpc)
    of the box centre kept: about n particles (the lattice spacing (4 pi radius^3 / (3 n))^(1/3),
    or spacing in Mpc when given), each of mass rho_m spacing^3, at redshift z_start.

        ic = fmmkit.cosmo_ic(20000, radius=45, z_start=49, cosmology="planck18", seed=2)
        ic.mass, ic.pos, ic.vel, ic.grid, ic.box       # or: mass, pos, vel, *_ = ic

    cosmology: a name ("wmap", "planck18") or a Cosmology. seed: the white noise's stream (the
    same parameters give the same particles); threads: OpenMP threads (None: OpenMP's default).
    Returns a CosmoIC. Needs FFTW in the build (else FmkUnavailableError)."""
    p = _ic_params(n, radius, z_start, cosmology, lpt, seed, spacing, threads)
    count, grid, box = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_double()
    _check(lib().fmk_sim_ic_cosmo_size(ctypes.byref(p), ctypes.byref(count), None,
                                       ctypes.byref(grid), ctypes.byref(box)))
    k = count.value
    m, x, v = np.empty(k), np.empty((k, 3)), np.empty((k, 3))
    _check(lib().fmk_sim_ic_cosmo(ctypes.byref(p), k, m.ctypes.data_as(_dp),
                                  x.ctypes.data_as(_dp), v.ctypes.data_as(_dp)))
    return CosmoIC(m, x, v, grid.value, box.value)
