"""One plan, many charge vectors: the points are set once (copied, mapped, uploaded to the GPU
when there is one) and each evaluation pays only for the sums (fmmkit.Plan)."""
import numpy as np

import fmmkit

rng = np.random.default_rng(6)
x = rng.random((4000, 3))

with fmmkit.Plan(kernel="laplace", eps=1e-6) as plan:
    print(plan.memory(len(x)))                                 # bytes, before anything is made
    plan.set_points(x)                                         # targets = sources
    for step in range(3):
        q = rng.standard_normal(len(x))
        r = plan.eval(q, grad=False)
        print(f"step {step}: sum phi q = {np.dot(r.pot, q):+.6f}")
    many = plan.eval_many(rng.standard_normal((8, len(x))))   # 8 charge vectors in one call
    print("eval_many:", many.pot.shape, many.grad.shape)
    info = plan.info
    print(f"{info.method}/{info.backend} {info.precision} on {info.device_name}, "
          f"setup {info.times['setup'] * 1e3:.2f} ms, last eval {info.times['p2p'] * 1e3:.2f} ms")
