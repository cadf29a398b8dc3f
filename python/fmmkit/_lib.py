"""The C side of fmmkit: finding libfmmkit and the one table of its declarations.

Everything the package knows about the C API is in this file: the structs (fmk_opts, fmk_info,
the Poisson solver's and the simulation driver's: fmk_sim_opts, fmk_sim_info, fmk_sim_cosmology,
fmk_sim_cosmo_ic), the enum values it uses, and FUNCTIONS, POISSON_FUNCTIONS and SIM_FUNCTIONS,
one row per function of include/fmmkit.h, fmmkit_poisson.h and fmmkit_sim.h with its restype and
argtypes. tests/python/test_binding.py checks these tables against the headers (every fmk_*
function, argument count and types), the struct layouts against the C compiler's
sizeof/offsetof, and that the loaded library exports every name.

Where the library is looked for, in order:
  1. the file named by the environment variable FMMKIT_LIBRARY (then nothing else is tried);
  2. this package's own folder: fmmkit/lib/ (where `pip install .` puts it), then fmmkit/;
  3. the build tree of a source checkout: <repo>/build/ (what `make` and the README build);
  4. the system's search path (ctypes.util.find_library("fmmkit")), e.g. after `make install`.

libfmmkit_mpi (distributed plans, fmmkit.Plan(comm=...)) is loaded only when asked for, by
mpi_lib(): the file named by FMMKIT_MPI_LIBRARY, else beside the loaded libfmmkit, else the
system's search path; MPI_FUNCTIONS declares what the package calls of include/fmmkit_mpi.h.

ctypes releases the GIL around every call into a CDLL, so evaluations run in C while other
Python threads go on; each Plan serialises its own calls with a lock (a plan may be used by one
thread at a time). A long call is stopped by Ctrl-C: each Plan gives the library a check
(fmk_plan_set_interrupt, a ctypes callback that takes the GIL back for a moment) that runs
Python's pending signal handlers every 10 ms or so of work.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import sys
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast
from ctypes import (POINTER, c_char, c_char_p, c_double, c_int, c_int32, c_int64, c_uint64,
                    c_void_p)

# Enums travel as C int (every fmmkit enum fits and is passed like one).
fmk_status = c_int
fmk_kernel = c_int
fmk_method = c_int
fmk_backend = c_int
fmk_precision = c_int
fmk_phase = c_int
fmk_walk = c_int

FMK_PHASE_COUNT = 16  # size of fmk_info.phase_time

FMK_BACKEND_AUTO, FMK_BACKEND_CPU, FMK_BACKEND_CUDA = 0, 1, 2
FMK_PRECISION_FP64, FMK_PRECISION_FP32 = 0, 1
PRECISION_NAMES = {FMK_PRECISION_FP64: "fp64", FMK_PRECISION_FP32: "fp32"}


class fmk_opts(ctypes.Structure):
    """struct fmk_opts; fill with fmk_opts_default() first."""
    _fields_ = [
        ("method", fmk_method),
        ("backend", fmk_backend),
        ("precision", fmk_precision),
        ("threads", c_int32),
        ("device", c_int32),
        ("order", c_int32),
        ("leaf_size", c_int64),
        ("softening", c_double),
        ("theta", c_double),
        ("verbose", c_int32),
        ("walk", fmk_walk),
        ("n_vectors", c_int32),
    ]


class fmk_info(ctypes.Structure):
    """struct fmk_info, filled by fmk_plan_info()."""
    _fields_ = [
        ("dim", c_int32),
        ("kernel", fmk_kernel),
        ("method", fmk_method),
        ("backend", fmk_backend),
        ("precision", fmk_precision),
        ("order", c_int32),
        ("levels", c_int32),
        ("walk", fmk_walk),
        ("leaf_size", c_int64),
        ("n_sources", c_int64),
        ("n_targets", c_int64),
        ("bytes_host", c_int64),
        ("bytes_device", c_int64),
        ("eps", c_double),
        ("theta", c_double),
        ("phase_time", c_double * FMK_PHASE_COUNT),
        ("device_name", c_char * 96),
        ("interactions_p2p", c_int64),
        ("interactions_far", c_int64),
    ]


class fmk_poisson_opts(ctypes.Structure):
    """struct fmk_poisson_opts (include/fmmkit_poisson.h); fill with fmk_poisson_opts_default()."""
    _fields_ = [
        ("method", c_int),
        ("backend", fmk_backend),
        ("smoothing", c_double),
        ("threads", c_int32),
        ("verbose", c_int32),
        ("order", c_int32),
        ("theta", c_double),
        ("leaf_size", c_int32),
        ("hybrid", c_int32),
        ("device", c_int32),
    ]


class fmk_poisson_info(ctypes.Structure):
    """struct fmk_poisson_info, filled by fmk_poisson_get_info()."""
    _fields_ = [
        ("method", c_int),
        ("backend", fmk_backend),
        ("eps", c_double),
        ("smoothing", c_double),
        ("nx", c_int64),
        ("ny", c_int64),
        ("nz", c_int64),
        ("h", c_double),
        ("components", c_int32),
        ("n_sources", c_int64),
        ("bytes_host", c_int64),
        ("setup_time", c_double),
        ("solve_time", c_double),
        ("threads", c_int32),
        ("n_points", c_int64),
        ("n_blocks", c_int64),
        ("h_min", c_double),
        ("order", c_int32),
        ("theta", c_double),
        ("leaf_size", c_int32),
        ("n_bricks", c_int64),
        ("n_nodes", c_int64),
        ("direct_pairs", c_double),
        ("far_pairs", c_double),
        ("time_tree", c_double),
        ("time_plans", c_double),
        ("time_expand", c_double),
        ("time_direct", c_double),
        ("time_far", c_double),
        ("time_cpu_part", c_double),
        ("time_gpu_part", c_double),
        ("bytes_device", c_int64),
        ("n_targets", c_int64),
        ("n_target_points", c_int64),
    ]


class fmk_sim_cosmology(ctypes.Structure):
    """struct fmk_sim_cosmology (include/fmmkit_sim.h); fill with fmk_sim_cosmology_preset()."""
    _fields_ = [
        ("omega_m", c_double),
        ("omega_lambda", c_double),
        ("omega_b", c_double),
        ("h", c_double),
        ("n_s", c_double),
        ("sigma_8", c_double),
        ("t_cmb", c_double),
    ]


class fmk_sim_cosmo_ic(ctypes.Structure):
    """struct fmk_sim_cosmo_ic; fill with fmk_sim_cosmo_ic_default()."""
    _fields_ = [
        ("cosmo", fmk_sim_cosmology),
        ("radius", c_double),
        ("n", c_int64),
        ("spacing", c_double),
        ("z_start", c_double),
        ("lpt_order", c_int32),
        ("seed", c_uint64),
        ("threads", c_int32),
    ]


class fmk_sim_opts(ctypes.Structure):
    """struct fmk_sim_opts (include/fmmkit_sim.h); fill with fmk_sim_opts_default()."""
    _fields_ = [
        ("plan", fmk_opts),
        ("eps", c_double),
        ("G", c_double),
        ("softening", c_int),
        ("soft", c_double),
        ("stepping", c_int),
        ("dt", c_double),
        ("eta", c_double),
        ("dt_min", c_double),
        ("dt_max", c_double),
        ("verbose", c_int32),
        ("comoving", c_int32),
        ("cosmology", fmk_sim_cosmology),
        ("spacing", c_int),
        ("soft_mode", c_int),
        ("soft_max_comoving", c_double),
        ("a_start", c_double),
        ("radius", c_double),
        ("integrator", c_int),
    ]


class fmk_sim_info(ctypes.Structure):
    """struct fmk_sim_info, filled by fmk_sim_info_get()."""
    _fields_ = [
        ("n", c_int64),
        ("step", c_int64),
        ("time", c_double),
        ("dt", c_double),
        ("kinetic", c_double),
        ("potential", c_double),
        ("total", c_double),
        ("momentum", c_double * 3),
        ("angular_momentum", c_double * 3),
        ("seconds_force", c_double),
        ("seconds_step", c_double),
        ("interactions", c_int64),
        ("plan", fmk_info),
        ("interactions_total", c_int64),
        ("redshift", c_double),
        ("layzer_irvine", c_double),
        ("layzer_irvine_error", c_double),
        ("n_local", c_int64),
        ("rank", ctypes.c_int32),
        ("ranks", ctypes.c_int32),
    ]


plan_p = c_void_p                    # fmk_plan * (opaque)
sim_p = c_void_p                     # fmk_sim * (opaque)
poisson_p = c_void_p                 # fmk_poisson * (opaque)
grid_p = c_void_p                    # fmk_grid * (opaque)
# fmk_interrupt_fn: int check(void *user), called back from the thread that made the C call
fmk_interrupt_fn = ctypes.CFUNCTYPE(c_int, c_void_p)
double_p = POINTER(c_double)         # host or device array of double
int64_p = POINTER(c_int64)

# name: (restype, argtypes) -- in the order of include/fmmkit.h.
FUNCTIONS = {
    "fmk_version": (c_char_p, ()),
    "fmk_status_string": (c_char_p, (fmk_status,)),
    "fmk_kernel_name": (c_char_p, (fmk_kernel,)),
    "fmk_method_name": (c_char_p, (fmk_method,)),
    "fmk_backend_name": (c_char_p, (fmk_backend,)),
    "fmk_phase_name": (c_char_p, (fmk_phase,)),
    "fmk_kernel_from_name": (fmk_status, (c_char_p, POINTER(fmk_kernel))),
    "fmk_method_from_name": (fmk_status, (c_char_p, POINTER(fmk_method))),
    "fmk_backend_from_name": (fmk_status, (c_char_p, POINTER(fmk_backend))),
    "fmk_kernel_dim": (c_int, (fmk_kernel,)),
    "fmk_kernel_is_complex": (c_int, (fmk_kernel,)),
    "fmk_cuda_device_count": (c_int, ()),
    "fmk_method_available": (c_int, (fmk_method, c_int, fmk_backend)),
    "fmk_opts_default": (None, (POINTER(fmk_opts),)),
    "fmk_eps_default": (c_double, (fmk_precision,)),
    "fmk_plan_create": (fmk_status, (POINTER(plan_p), c_int, fmk_kernel, c_double,
                                     POINTER(fmk_opts))),
    "fmk_plan_set_points": (fmk_status, (plan_p, c_int64, double_p, c_int64, double_p)),
    "fmk_plan_eval": (fmk_status, (plan_p, double_p, double_p, double_p)),
    "fmk_plan_eval_many": (fmk_status, (plan_p, c_int64, double_p, double_p, double_p)),
    "fmk_plan_set_points_device": (fmk_status, (plan_p, c_int64, double_p, c_int64, double_p)),
    "fmk_plan_eval_device": (fmk_status, (plan_p, double_p, double_p, double_p)),
    "fmk_plan_eval_many_device": (fmk_status, (plan_p, c_int64, double_p, double_p, double_p)),
    "fmk_plan_memory": (fmk_status, (plan_p, c_int64, c_int64, int64_p, int64_p)),
    "fmk_plan_info": (fmk_status, (plan_p, POINTER(fmk_info))),
    "fmk_plan_last_error": (c_char_p, (plan_p,)),
    "fmk_plan_set_interrupt": (fmk_status, (plan_p, fmk_interrupt_fn, c_void_p)),
    "fmk_plan_interrupt": (fmk_status, (plan_p,)),
    "fmk_plan_destroy": (None, (plan_p,)),
    "fmk_eval": (fmk_status, (c_int, fmk_kernel, c_double, POINTER(fmk_opts), c_int64, double_p,
                              double_p, c_int64, double_p, double_p, double_p)),
}

# The same for include/fmmkit_poisson.h, in its order.
POISSON_FUNCTIONS = {
    "fmk_poisson_opts_default": (None, (POINTER(fmk_poisson_opts),)),
    "fmk_poisson_method_name": (c_char_p, (c_int,)),
    "fmk_poisson_method_available": (c_int, (c_int,)),
    "fmk_poisson_create": (fmk_status, (POINTER(poisson_p), c_double, POINTER(fmk_poisson_opts))),
    "fmk_poisson_set_grid": (fmk_status, (poisson_p, c_int64, c_int64, c_int64, c_double,
                                          double_p)),
    "fmk_poisson_set_blocks": (fmk_status, (poisson_p, grid_p)),
    "fmk_poisson_set_targets": (fmk_status, (poisson_p, c_int64, POINTER(c_int64))),
    "fmk_poisson_solve": (fmk_status, (poisson_p, c_int32, double_p, double_p, double_p)),
    "fmk_poisson_solve_device": (fmk_status, (poisson_p, c_int32, double_p, double_p, double_p)),
    "fmk_poisson_get_info": (fmk_status, (poisson_p, POINTER(fmk_poisson_info))),
    "fmk_poisson_last_error": (c_char_p, (poisson_p,)),
    "fmk_poisson_set_interrupt": (fmk_status, (poisson_p, fmk_interrupt_fn, c_void_p)),
    "fmk_poisson_interrupt": (fmk_status, (poisson_p,)),
    "fmk_poisson_destroy": (None, (poisson_p,)),
    "fmk_poisson_rings": (fmk_status, (c_int64, double_p, double_p, double_p, double_p)),
    "fmk_grid_create": (fmk_status, (POINTER(grid_p), c_int32, c_double, double_p)),
    "fmk_grid_add_blocks": (fmk_status, (grid_p, c_int64, POINTER(c_int32), double_p)),
    "fmk_grid_add_blocks_index": (fmk_status, (grid_p, c_int64, POINTER(c_int32), int64_p)),
    "fmk_grid_get": (fmk_status, (grid_p, int64_p, int64_p, POINTER(c_int32), double_p,
                                  double_p, POINTER(c_int32))),
    "fmk_grid_block": (fmk_status, (grid_p, c_int64, POINTER(c_int32), int64_p)),
    "fmk_grid_points": (fmk_status, (grid_p, double_p, double_p)),
    "fmk_grid_destroy": (None, (grid_p,)),
    "fmk_poisson_rings_grid": (fmk_status, (POINTER(grid_p), c_int32, c_int32, c_double)),
}


# The same for include/fmmkit_sim.h, in its order.
uint64_p = POINTER(c_uint64)
SIM_FUNCTIONS = {
    "fmk_sim_opts_default": (None, (POINTER(fmk_sim_opts),)),
    "fmk_sim_comoving_dt": (fmk_status, (POINTER(fmk_sim_cosmology), c_int, c_double, c_double,
                                         c_int64, double_p)),
    "fmk_sim_create": (fmk_status, (POINTER(sim_p), c_int64, double_p, double_p, double_p,
                                    double_p, uint64_p, POINTER(fmk_sim_opts))),
    "fmk_sim_create_from_file": (fmk_status, (POINTER(sim_p), c_char_p, POINTER(fmk_sim_opts))),
    "fmk_sim_ic_plummer": (fmk_status, (c_int64, c_uint64, double_p, double_p, double_p)),
    "fmk_sim_ic_cold": (fmk_status, (c_int64, c_uint64, double_p, double_p, double_p)),
    "fmk_sim_ic_kepler": (fmk_status, (c_double, double_p, double_p, double_p)),
    "fmk_sim_cosmology_preset": (fmk_status, (POINTER(fmk_sim_cosmology), c_char_p)),
    "fmk_sim_cosmo_ic_default": (None, (POINTER(fmk_sim_cosmo_ic),)),
    "fmk_sim_ic_cosmo_size": (fmk_status, (POINTER(fmk_sim_cosmo_ic), int64_p, double_p, int64_p,
                                           double_p)),
    "fmk_sim_ic_cosmo": (fmk_status, (POINTER(fmk_sim_cosmo_ic), c_int64, double_p, double_p,
                                      double_p)),
    "fmk_sim_step": (fmk_status, (sim_p,)),
    "fmk_sim_run": (fmk_status, (sim_p, c_double, c_int64)),
    "fmk_sim_set_output": (fmk_status, (sim_p, c_char_p, c_int64, c_int, c_int64, c_int64)),
    "fmk_sim_set_output_times": (fmk_status, (sim_p, c_int64, double_p)),
    "fmk_sim_set_png": (fmk_status, (sim_p, c_int, c_int, c_double)),
    "fmk_sim_set_energy_reference": (fmk_status, (sim_p, c_int64, double_p)),
    "fmk_sim_get_state": (fmk_status, (sim_p, double_p, double_p, double_p, double_p, double_p)),
    "fmk_sim_get_ids": (fmk_status, (sim_p, uint64_p)),
    "fmk_sim_create_device": (fmk_status, (POINTER(sim_p), c_int64, double_p, double_p,
                                           double_p, POINTER(fmk_sim_opts))),
    "fmk_sim_get_state_device": (fmk_status, (sim_p, double_p, double_p, double_p, double_p,
                                              double_p)),
    "fmk_sim_info_get": (fmk_status, (sim_p, POINTER(fmk_sim_info))),
    "fmk_sim_write_snapshot": (fmk_status, (sim_p, c_char_p)),
    "fmk_sim_write_restart": (fmk_status, (sim_p, c_char_p)),
    "fmk_sim_write_png": (fmk_status, (sim_p, c_char_p, c_int, c_int)),
    "fmk_sim_interrupt": (fmk_status, (sim_p,)),
    "fmk_sim_last_error": (c_char_p, (sim_p,)),
    "fmk_sim_destroy": (None, (sim_p,)),
}

# The same for include/fmmkit_mpi.h (libfmmkit_mpi, loaded by mpi_lib()): the entry for bindings,
# which takes the communicator's Fortran handle (MPI_Fint, a C int: mpi4py's comm.py2f()), not
# fmk_plan_create_mpi, whose MPI_Comm differs between MPI libraries.
MPI_Fint = c_int
class fmk_mpi_info(ctypes.Structure):
    """struct fmk_mpi_info of include/fmmkit_mpi.h."""
    _fields_ = [("ranks", c_int), ("distributed_sources", c_int),
                ("sources_kept", ctypes.c_int64), ("local_sources", ctypes.c_int64),
                ("targets_evaluated", ctypes.c_int64)] + \
        [(name, c_double) for name in (
            "seconds_partition", "seconds_tree", "seconds_exchange_points",
            "seconds_local_set_points", "seconds_exchange_charges", "seconds_moments",
            "seconds_local_eval", "seconds_results_home")] + \
        [("bytes_sent_points", ctypes.c_int64), ("bytes_sent_eval", ctypes.c_int64),
         ("targets_sent", ctypes.c_int64)]


MPI_FUNCTIONS = {
    "fmk_plan_create_mpi_f": (fmk_status, (POINTER(plan_p), MPI_Fint, c_int, fmk_kernel, c_double,
                                           POINTER(fmk_opts))),
    "fmk_plan_is_mpi": (c_int, (plan_p,)),
    "fmk_plan_mpi_info": (fmk_status, (plan_p, POINTER(fmk_mpi_info))),
    "fmk_sim_create_mpi_f": (fmk_status, (POINTER(sim_p), MPI_Fint, c_int64, POINTER(c_double),
                                          POINTER(c_double), POINTER(c_double), POINTER(c_double),
                                          POINTER(ctypes.c_uint64), POINTER(fmk_sim_opts))),
    "fmk_sim_create_from_file_mpi_f": (fmk_status, (POINTER(sim_p), MPI_Fint, ctypes.c_char_p,
                                                    POINTER(fmk_sim_opts))),
    "fmk_sim_is_mpi": (c_int, (sim_p,)),
}


def _library_names() -> List[str]:
    if sys.platform == "darwin":
        return ["libfmmkit.dylib"]
    if sys.platform == "win32":
        return ["fmmkit.dll", "libfmmkit.dll"]
    return ["libfmmkit.so"]


def candidate_paths() -> List[str]:
    """The places searched for libfmmkit, in order (see the module docstring)."""
    env = os.environ.get("FMMKIT_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    folders = [os.path.join(here, "lib"), here]
    if os.path.exists(os.path.join(repo, "include", "fmmkit.h")):  # a source checkout
        folders.append(os.path.join(repo, "build"))
    paths = []
    for folder in folders:
        paths += [os.path.join(folder, name) for name in _library_names()]
        # An installed package may hold only the versioned file (libfmmkit.so.0).
        paths += sorted(glob.glob(os.path.join(folder, _library_names()[0] + ".*")), key=len)
    return paths


def _declare(cdll: ctypes.CDLL, path: str) -> None:
    for name, (restype, argtypes) in list(FUNCTIONS.items()) + list(POISSON_FUNCTIONS.items()) + \
            list(SIM_FUNCTIONS.items()):
        try:
            fn = getattr(cdll, name)
        except AttributeError:
            raise ImportError(
                f"{path} does not export {name}; it is not a libfmmkit of this version "
                f"(or it was built with its symbols hidden)") from None
        fn.restype = restype
        fn.argtypes = argtypes


_lock = threading.Lock()
_cdll: Optional[ctypes.CDLL] = None
_path: Optional[str] = None


def lib() -> ctypes.CDLL:
    """The loaded libfmmkit (a ctypes.CDLL with FUNCTIONS declared); loads it on first use."""
    global _cdll, _path
    if _cdll is not None:
        return _cdll
    with _lock:
        if _cdll is not None:
            return _cdll
        tried = []
        for path in candidate_paths():
            if not os.path.exists(path):
                tried.append(f"{path} (not found)")
                continue
            try:
                cdll = ctypes.CDLL(path)
            except OSError as e:
                tried.append(f"{path} ({e})")
                continue
            _declare(cdll, path)
            _cdll, _path = cdll, path
            return cdll
        if not os.environ.get("FMMKIT_LIBRARY"):
            found = ctypes.util.find_library("fmmkit")
            if found:
                cdll = ctypes.CDLL(found)
                _declare(cdll, found)
                _cdll, _path = cdll, found
                return cdll
            tried.append("the system library path (not found)")
        raise ImportError("fmmkit could not load libfmmkit; tried: " + "; ".join(tried) +
                          ". Build it (cmake -S . -B build && cmake --build build), install the "
                          "package (pip install .), or set FMMKIT_LIBRARY to its path.")


def library_path() -> str:
    """The path of the loaded libfmmkit (loading it if needed)."""
    lib()
    return cast(str, _path)


_mpi_cdll: Optional[ctypes.CDLL] = None
_mpi_path: Optional[str] = None


def _mpi_candidates() -> List[str]:
    """Where libfmmkit_mpi is looked for: FMMKIT_MPI_LIBRARY alone when set, else beside the
    loaded libfmmkit (the build tree or the package's folder), else the system's search path."""
    env = os.environ.get("FMMKIT_MPI_LIBRARY")
    if env:
        return [env]
    folder = os.path.dirname(os.path.realpath(library_path()))
    names = [n.replace("fmmkit", "fmmkit_mpi", 1) for n in _library_names()]
    paths = [os.path.join(folder, name) for name in names]
    paths += sorted(glob.glob(os.path.join(folder, names[0] + ".*")), key=len)
    # library_path() itself may be a link in another folder (build/libfmmkit.so)
    linked = os.path.dirname(os.path.abspath(library_path()))
    if linked != folder:
        paths += [os.path.join(linked, name) for name in names]
    return paths


def _address(fn: Any) -> Optional[int]:
    return ctypes.cast(fn, c_void_p).value


def mpi_lib() -> ctypes.CDLL:
    """The loaded libfmmkit_mpi (distributed plans, include/fmmkit_mpi.h), after libfmmkit;
    raises ImportError when it cannot be found or is not built on the libfmmkit already loaded.

    libfmmkit_mpi links libfmmkit: the dynamic loader gives it the libfmmkit already in the
    process (the same soname), so a plan it creates is a plan of lib(). That is checked: both
    must resolve fmk_plan_destroy to the same function."""
    global _mpi_cdll, _mpi_path
    base = lib()
    if _mpi_cdll is not None:
        return _mpi_cdll
    with _lock:
        if _mpi_cdll is not None:
            return _mpi_cdll
        tried = []
        paths = _mpi_candidates()
        if not os.environ.get("FMMKIT_MPI_LIBRARY"):
            found = ctypes.util.find_library("fmmkit_mpi")
            if found:
                paths.append(found)
        for path in paths:
            if os.sep in path and not os.path.exists(path):
                tried.append(f"{path} (not found)")
                continue
            try:
                cdll = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError as e:
                tried.append(f"{path} ({e})")
                continue
            for name, (restype, argtypes) in MPI_FUNCTIONS.items():
                fn = getattr(cdll, name, None)
                if fn is None:
                    raise ImportError(f"{path} does not export {name}; it is not a "
                                      f"libfmmkit_mpi of this version")
                fn.restype = restype
                fn.argtypes = argtypes
            if _address(cdll.fmk_plan_destroy) != _address(base.fmk_plan_destroy):
                raise ImportError(
                    f"{path} uses another libfmmkit than the one loaded ({library_path()}); "
                    f"point FMMKIT_LIBRARY and FMMKIT_MPI_LIBRARY at the same build")
            _mpi_cdll, _mpi_path = cdll, path
            return cdll
        raise ImportError("fmmkit could not load libfmmkit_mpi (distributed plans); tried: " +
                          "; ".join(tried) + ". It is built beside libfmmkit when CMake finds "
                          "MPI (Debian: apt-get install libopenmpi-dev openmpi-bin; CMake option "
                          "FMMKIT_MPI); or set FMMKIT_MPI_LIBRARY to its path.")
