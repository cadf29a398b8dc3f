"""Potential and field of random charges in a unit cube (fmmkit.laplace3d).

phi(y_i) = sum_j q_j / |y_i - x_j|, evaluated at the charges themselves (the self term is left
out). With the defaults (method auto, eps 1e-6) fmmkit picks the method from the size: the FMM
here; the result is checked at a few charges against sums written out in numpy."""
import numpy as np

import fmmkit

rng = np.random.default_rng(1)
n = 100_000
x = rng.random((n, 3))
q = rng.standard_normal(n)

r = fmmkit.laplace3d(x, q)                  # r.pot (n,), r.grad (n, 3)

check = rng.choice(n, 20, replace=False)
exact = np.empty(20)
for k, i in enumerate(check):
    d = np.linalg.norm(x - x[i], axis=1)
    d[i] = np.inf                           # the self term
    exact[k] = np.sum(q / d)
err = np.linalg.norm(r.pot[check] - exact) / np.linalg.norm(exact)
print(f"phi(x_0) = {r.pot[check[0]]:.12f}   numpy: {exact[0]:.12f}")
print(f"relative l2 error at 20 charges: {err:.1e} (eps {r.info.eps:g})")
print(f"method {r.info.method} (order {r.info.order}) on {r.info.device_name}: "
      f"{sum(r.info.times.values()) * 1e3:.1f} ms")
