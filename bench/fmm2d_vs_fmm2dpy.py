"""bench/fmm2d_vs_fmm2dpy.py -- fmmkit's 2D FMM (GPU and CPU backends) against FMM2D's Python
interface (fmm2dpy, Flatiron Institute) at the same accuracy, cauchy2d at the sources.

    python3 bench/fmm2d_vs_fmm2dpy.py [--n 10000,100000,1000000] [--eps 1e-6] [--json]

The kernel: fmmkit's cauchy2d is phi(z_i) = sum_j G_j / (z_j - z_i); FMM2D's cfmm2d with dipole
strengths d_j = -G_j computes sum_j d_j / (z_i - z_j), the same sum. Both are timed end to end
from host arrays (points, charges -> potentials), median of 3 after a warm-up; accuracy is the
relative l2 error against fmmkit's direct sum at 1000 sampled points. Without fmm2dpy the script
says so and times fmmkit alone."""
import argparse
import json
import sys
import time

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="10000,100000,1000000")
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        import fmm2dpy
    except ImportError:
        fmm2dpy = None
        print("fmm2dpy is not installed here: timing fmmkit alone", file=sys.stderr)
    rng = np.random.default_rng(1)
    rows = []
    for n in [int(v) for v in a.n.split(",")]:
        x = rng.random((n, 2))
        g = rng.uniform(-1, 1, n) + 1j * rng.uniform(-1, 1, n)
        sample = np.linspace(0, n - 1, min(n, 1000)).astype(np.int64)
        ref = fmmkit.cauchy2d(x, g, x[sample], eps=1e-15, method="direct", grad=False,
                              backend="cuda" if fmmkit.cuda_device_count() else "cpu").pot
        # the sample sits on sources: the direct sum skips r = 0, as the self term is skipped
        row = {"n": n, "eps": a.eps}
        for backend in (["cuda"] if fmmkit.cuda_device_count() else []) + ["cpu"]:
            t, r = timed(lambda: fmmkit.cauchy2d(x, g, eps=a.eps, method="fmm", grad=False,
                                                 backend=backend))
            row[f"fmmkit_{backend}_s"] = t
            row[f"fmmkit_{backend}_err"] = rel_l2(r.pot[sample], ref)
        if fmm2dpy is not None:
            src = np.ascontiguousarray(x.T)
            t, out = timed(lambda: fmm2dpy.cfmm2d(eps=a.eps, sources=src, dipstr=-g, pg=1))
            row["fmm2dpy_s"] = t
            row["fmm2dpy_err"] = rel_l2(out.pot[sample], ref)
        rows.append(row)
        if not a.json:
            print("  ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                            for k, v in row.items()))
    if a.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
