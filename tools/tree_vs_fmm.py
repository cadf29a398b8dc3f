"""Times one-shot calls of the treecode (theta from eps) and the FMM at the same eps, the data
of method auto's tree_eps column (src/core/choose.c, docs/choosing.md).

    python3 tools/tree_vs_fmm.py cpu|cuda [fp64|fp32]
"""
import sys
import time

import numpy as np

import fmmkit

backend = sys.argv[1] if len(sys.argv) > 1 else "cpu"
precision = sys.argv[2] if len(sys.argv) > 2 else "fp64"
rng = np.random.default_rng(0)
sizes = [2**18, 2**20] if backend == "cuda" else [2**16, 2**18]
print("| N | eps | fmm ms | fmm order | tree ms | tree theta |")
print("| --- | --- | --- | --- | --- | --- |")
for n in sizes:
    x, q = rng.random((n, 3)), rng.standard_normal(n)
    for eps in [1e-2, 3e-3, 1e-3]:
        row = []
        for method in ["fmm", "tree"]:
            best, info = float("inf"), None
            try:
                for _ in range(3):
                    t = time.perf_counter()
                    r = fmmkit.laplace3d(x, q, method=method, backend=backend,
                                         precision=precision, eps=eps)
                    best, info = min(best, time.perf_counter() - t), r.info
                row += [f"{best * 1e3:.1f}",
                        str(info.order) if method == "fmm" else f"{info.theta:.2f}"]
            except fmmkit.FmkError as e:
                row += ["refused", type(e).__name__]
        print(f"| {n} | {eps:g} | " + " | ".join(row) + " |")
