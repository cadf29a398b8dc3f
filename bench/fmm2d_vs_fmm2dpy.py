"""bench/fmm2d_vs_fmm2dpy.py -- fmmkit's 2D FMM (GPU and CPU backends) against FMM2D's Python
interface (fmm2dpy, Flatiron Institute) at the same accuracy, cauchy2d at the sources.

    python3 bench/fmm2d_vs_fmm2dpy.py [--n 10000,100000,1000000] [--eps 1e-3,1e-6,1e-10] [--json]
                                      [--fmm2d-wheel fmm2dpy-0.0.5-....whl]

The kernel: fmmkit's cauchy2d is phi(z_i) = sum_j G_j / (z_j - z_i); FMM2D's cfmm2d with dipole
strengths d_j = -G_j computes sum_j d_j / (z_i - z_j), the same sum. Both are timed end to end
from host arrays (points, charges -> potentials), median of 3 after a warm-up; accuracy is the
relative l2 error against fmmkit's direct sum at 1000 sampled points. Without fmm2dpy the script
says so and times fmmkit alone.

fmm2dpy's f2py wrappers need the NumPy ABI they were built for (the 0.0.5 wheels: NumPy 1.x, and
only for some Python versions). Where `import fmm2dpy` fails, --fmm2d-wheel names an fmm2dpy
wheel (or its unpacked folder) and the script calls the compiled FMM2D routine inside it,
cfmm2d_s_d_p(eps, ns, sources, dipstr, pot, ier), directly through ctypes: the same Fortran code
(with its OpenMP) that fmm2dpy.cfmm2d runs, without the NumPy C interface."""
import argparse
import ctypes
import glob
import json
import os
import sys
import tempfile
import time
import zipfile

import numpy as np

import fmmkit


def timed(fn, reps=3):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), out


def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def fmm2d_from_wheel(path):
    """FMM2D's cfmm2d_s_d_p from an fmm2dpy wheel (file or unpacked folder), as a function
    (eps, x (n, 2), dipstr (n,)) -> pot (n,) complex."""
    if os.path.isfile(path):
        folder = tempfile.mkdtemp(prefix="fmm2dpy_")
        with zipfile.ZipFile(path) as z:
            z.extractall(folder)
        path = folder
    so = glob.glob(os.path.join(path, "fmm2dpy", "lfmm2d_fortran*.so"))
    if not so:
        raise FileNotFoundError(f"no fmm2dpy/lfmm2d_fortran*.so under {path}")
    # RTLD_LAZY: the module's Python entry points are never called, so the Python ABI it was
    # built for does not matter; its bundled libgfortran/libgomp are found through its RPATH.
    lib = ctypes.CDLL(so[0], mode=os.RTLD_LAZY | os.RTLD_LOCAL)
    f = lib.cfmm2d_s_d_p_
    f.restype = None

    def run(eps, x, dipstr):
        n = x.shape[0]
        src = np.ascontiguousarray(x, dtype=np.float64)  # Fortran sources(2, ns)
        d = np.ascontiguousarray(dipstr, dtype=np.complex128)
        pot = np.zeros(n, dtype=np.complex128)
        c_eps, c_n, ier = ctypes.c_double(eps), ctypes.c_int(n), ctypes.c_int(0)
        f(ctypes.byref(c_eps), ctypes.byref(c_n), src.ctypes.data_as(ctypes.c_void_p),
          d.ctypes.data_as(ctypes.c_void_p), pot.ctypes.data_as(ctypes.c_void_p),
          ctypes.byref(ier))
        if ier.value != 0:
            raise RuntimeError(f"cfmm2d_s_d_p: ier = {ier.value}")
        return pot
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="10000,100000,1000000")
    ap.add_argument("--eps", default="1e-6", help="one or more tolerances, comma-separated")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--fmm2d-wheel", help="fmm2dpy wheel or unpacked folder, used through "
                    "ctypes where `import fmm2dpy` fails")
    a = ap.parse_args()
    fmm2d, how = None, None
    try:
        import fmm2dpy

        def via_fmm2dpy(eps, x, dipstr):
            return fmm2dpy.cfmm2d(eps=eps, sources=np.ascontiguousarray(x.T), dipstr=dipstr,
                                  pg=1).pot
        fmm2d = via_fmm2dpy
        how = "fmm2dpy.cfmm2d"
    except ImportError as e:
        if a.fmm2d_wheel:
            fmm2d, how = fmm2d_from_wheel(a.fmm2d_wheel), "cfmm2d_s_d_p (ctypes)"
        else:
            print(f"fmm2dpy cannot be imported here ({e}) and no --fmm2d-wheel was given: "
                  "timing fmmkit alone", file=sys.stderr)
    if how and not a.json:
        print(f"FMM2D through {how}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}")
    rng = np.random.default_rng(1)
    rows = []
    for n in [int(v) for v in a.n.split(",")]:
        x = rng.random((n, 2))
        g = rng.uniform(-1, 1, n) + 1j * rng.uniform(-1, 1, n)
        sample = np.linspace(0, n - 1, min(n, 1000)).astype(np.int64)
        ref = fmmkit.cauchy2d(x, g, x[sample], eps=1e-15, method="direct", grad=False,
                              backend="cuda" if fmmkit.cuda_device_count() else "cpu").pot
        # the sample sits on sources: the direct sum skips r = 0, as the self term is skipped
        for eps in [float(v) for v in a.eps.split(",")]:
            rows.append(compare(fmm2d, x, g, sample, ref, n, eps))
            if not a.json:
                print("  ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                for k, v in rows[-1].items()))
    if a.json:
        print(json.dumps(rows, indent=1))


def compare(fmm2d, x, g, sample, ref, n, eps):
    """One row: fmmkit (GPU if present, then CPU) and FMM2D (if given) at tolerance eps."""
    row = {"n": n, "eps": eps}
    for backend in (["cuda"] if fmmkit.cuda_device_count() else []) + ["cpu"]:
        t, r = timed(lambda: fmmkit.cauchy2d(x, g, eps=eps, method="fmm", grad=False,
                                             backend=backend))
        row[f"fmmkit_{backend}_s"] = t
        row[f"fmmkit_{backend}_err"] = rel_l2(r.pot[sample], ref)
    if fmm2d is not None:
        t, pot = timed(lambda: fmm2d(eps, x, -g))
        row["fmm2d_s"] = t
        row["fmm2d_err"] = rel_l2(pot[sample], ref)
    return row


if __name__ == "__main__":
    main()
