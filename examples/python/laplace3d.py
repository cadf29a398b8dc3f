"""Potential and field of random charges in a unit cube (fmmkit.laplace3d).

phi(y_i) = sum_j q_j / |y_i - x_j|, evaluated at the charges themselves (the self term is left
out), then checked at one point against a sum written out in numpy."""
import numpy as np

import fmmkit

rng = np.random.default_rng(1)
x = rng.random((2000, 3))
q = rng.standard_normal(2000)

r = fmmkit.laplace3d(x, q)                  # r.pot (2000,), r.grad (2000, 3)

d = np.linalg.norm(x[0] - x[1:], axis=1)
print(f"phi(x_0) = {r.pot[0]:.12f}   numpy: {np.sum(q[1:] / d):.12f}")
print(f"grad phi(x_0) = {r.grad[0]}")
print(f"{r.info.method} on {r.info.device_name}: {r.info.times['p2p'] * 1e3:.2f} ms")
