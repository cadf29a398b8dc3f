"""The CPU 3D FMM at N = 10^6 uniform points, Laplace potential and gradient, set_points +
eval at eps 1e-3, 1e-6, 1e-9 on every core (issue bars; docs/choosing.md), with the error at
1000 sampled targets against the direct sum. Also the phases of a GPU one-shot call at 2^20
points against eps when a GPU is present.

    python3 tools/cpu_bar.py [N]
"""
import sys
import time

import numpy as np

import fmmkit

n = int(sys.argv[1]) if len(sys.argv) > 1 else 10**6
rng = np.random.default_rng(1)
x, q = rng.random((n, 3)), rng.standard_normal(n)
idx = rng.choice(n, 1000, replace=False)
ref = fmmkit.laplace3d(x, q, targets=x[idx], method="direct", backend="cpu")
for eps in [1e-3, 1e-6, 1e-9]:
    best = float("inf")
    for _ in range(2):
        with fmmkit.Plan(kernel="laplace", eps=eps, method="fmm", backend="cpu") as p:
            t = time.perf_counter()
            p.set_points(x)
            r = p.eval(q)
            best = min(best, time.perf_counter() - t)
    err = np.linalg.norm(r.pot[idx] - ref.pot) / np.linalg.norm(ref.pot)
    print(f"cpu N={n} eps {eps:g}: order {r.info.order}, {best:.3f} s set_points + eval, "
          f"potential error {err:.2e} ({r.info.device_name})")
if fmmkit._lib.lib().fmk_cuda_device_count() > 0:
    m = 1 << 20
    x, q = rng.random((m, 3)), rng.standard_normal(m)
    for eps in [1e-2, 1e-3, 1e-6]:
        for _ in range(3):
            r = fmmkit.laplace3d(x, q, method="fmm", backend="cuda", eps=eps)
        print(f"cuda N={m} eps {eps:g}: order {r.info.order} leaf {r.info.leaf_size} levels "
              f"{r.info.levels}: " + ", ".join(f"{k} {v * 1e3:.2f}" for k, v in
                                                r.info.times.items() if v > 0) + " ms")
