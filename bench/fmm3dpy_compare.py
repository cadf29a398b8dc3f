#!/usr/bin/env python3
"""fmm3dpy_compare.py -- fmmkit's CPU 3D FMM side by side with FMM3D's Python wrapper (fmm3dpy).

Same points (uniform in the unit cube, or a Plummer sphere), same charges (uniform in [-1, 1]),
same eps; potential and gradient at the sources (the self term left out by both). For each eps
it prints the times (fmmkit: set_points, which builds the tree and lists, and eval separately;
fmm3dpy.lfmm3d: one call, tree build included) and the relative l2 errors of both against an
fp64 direct sum in numpy at --sample targets.

fmmkit computes phi(y) = sum_j q_j / |y - x_j| and grad_y phi; FMM3D's Laplace kernel carries
1/(4 pi), so its results are multiplied by 4 pi before the comparison.

Threads: fmmkit uses --threads OpenMP threads. The fmm3dpy wheel on PyPI (2.1.0, manylinux) ships
no OpenMP runtime and runs on one core whatever OMP_NUM_THREADS says, so its time is a
single-core time: divide by the core count for a bound on what FMM3D's multithreaded build can
do, or compare with FMM3D's own figures for its optimized OpenMP build.

    PYTHONPATH=python python3 bench/fmm3dpy_compare.py --n 100000 --eps 1e-3 1e-6 1e-9
    (FMMKIT_LIBRARY=build/libfmmkit.so when the library is not found; --json for one object)
"""
import argparse
import json
import os
import sys
import time

import numpy as np


def points(dist, n, rng):
    if dist == "uniform":
        return rng.random((n, 3))
    # Plummer sphere, scale radius 1, cut at radius 4
    r = np.empty(0)
    while r.size < n:
        u = rng.random(2 * n)
        c = 1 / np.sqrt(u ** (-2.0 / 3.0) - 1)
        r = np.concatenate([r, c[c < 4]])
    r = r[:n]
    v = rng.normal(size=(n, 3))
    return v / np.linalg.norm(v, axis=1)[:, None] * r[:, None]


def direct(x, q, idx, chunk=64):
    """fp64 direct sum at the sources idx (self term left out)."""
    pot = np.empty(idx.size)
    grad = np.empty((idx.size, 3))
    for a in range(0, idx.size, chunk):
        i = idx[a:a + chunk]
        d = x[i][:, None, :] - x[None, :, :]          # (c, n, 3): y - x_j
        r2 = np.einsum("cnk,cnk->cn", d, d)
        with np.errstate(divide="ignore"):
            rinv = np.where(r2 > 0, 1 / np.sqrt(r2), 0.0)
        pot[a:a + chunk] = rinv @ q
        grad[a:a + chunk] = -np.einsum("cn,cnk->ck", q[None, :] * rinv ** 3, d)
    return pot, grad


def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def run_fmmkit(x, q, eps, threads):
    import fmmkit
    plan = fmmkit.Plan(3, "laplace", eps, method="fmm", backend="cpu", threads=threads)
    t0 = time.perf_counter()
    plan.set_points(x)
    t1 = time.perf_counter()
    r = plan.eval(q)
    t2 = time.perf_counter()
    info = r.info
    plan.close()
    return {"set_points_s": t1 - t0, "eval_s": t2 - t1, "total_s": t2 - t0, "order": info.order,
            "leaf_size": info.leaf_size, "levels": info.levels}, r.pot, r.grad


def run_fmm3dpy(x, q, eps):
    import fmm3dpy
    t0 = time.perf_counter()
    out = fmm3dpy.lfmm3d(eps=eps, sources=np.asfortranarray(x.T), charges=q, pg=2)
    t1 = time.perf_counter()
    return {"total_s": t1 - t0}, 4 * np.pi * out.pot, 4 * np.pi * out.grad.T


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--eps", type=float, nargs="+", default=[1e-3, 1e-6, 1e-9])
    ap.add_argument("--dist", choices=["uniform", "plummer"], default="uniform")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--sample", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-fmm3dpy", action="store_true", help="fmmkit only")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)

    rng = np.random.default_rng(a.seed)
    x = points(a.dist, a.n, rng)
    q = rng.uniform(-1, 1, a.n)
    idx = np.unique(np.linspace(0, a.n - 1, min(a.sample, a.n)).astype(np.int64))
    ref_pot, ref_grad = direct(x, q, idx)

    have_fmm3dpy = not a.skip_fmm3dpy
    if have_fmm3dpy:
        try:
            import fmm3dpy  # noqa: F401
        except ImportError:
            have_fmm3dpy = False
            print("fmm3dpy is not installed: fmmkit only (pip install fmm3dpy)", file=sys.stderr)

    rows = []
    for eps in a.eps:
        row = {"eps": eps}
        m, pot, grad = run_fmmkit(x, q, eps, a.threads)
        m["err_pot"], m["err_grad"] = rel_l2(pot[idx], ref_pot), rel_l2(grad[idx], ref_grad)
        row["fmmkit"] = m
        if have_fmm3dpy:
            f, pot, grad = run_fmm3dpy(x, q, eps)
            f["err_pot"], f["err_grad"] = rel_l2(pot[idx], ref_pot), rel_l2(grad[idx], ref_grad)
            row["fmm3dpy"] = f
        rows.append(row)

    if a.json:
        print(json.dumps({"n": a.n, "dist": a.dist, "threads": a.threads, "sample": int(idx.size),
                          "rows": rows}, indent=1))
        return 0
    print(f"laplace, {a.dist}, N = {a.n} (targets = sources), potential + gradient; fmmkit on "
          f"{a.threads} threads, fmm3dpy as the wheel runs (one core); errors: relative l2 at "
          f"{idx.size} sources against an fp64 direct sum")
    print(f"{'eps':>7} | {'fmmkit p':>8} {'leaf':>5} {'set_points':>10} {'eval':>8} {'total':>8} "
          f"{'err pot':>9} {'err grad':>9} | {'fmm3dpy':>8} {'err pot':>9} {'err grad':>9}")
    for r in rows:
        m = r["fmmkit"]
        line = (f"{r['eps']:7.0e} | {m['order']:8d} {m['leaf_size']:5d} {m['set_points_s']:9.3f}s "
                f"{m['eval_s']:7.3f}s {m['total_s']:7.3f}s {m['err_pot']:9.2e} {m['err_grad']:9.2e}")
        if "fmm3dpy" in r:
            f = r["fmm3dpy"]
            line += f" | {f['total_s']:7.3f}s {f['err_pot']:9.2e} {f['err_grad']:9.2e}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
