"""The regularized kernel of vortex methods at separate targets (fmmkit.regularized3d).

G = (r^2 + 1.5 s^2) / (r^2 + s^2)^(3/2): close to 1/r far away, finite at r = 0."""
import numpy as np

import fmmkit

rng = np.random.default_rng(3)
x = rng.random((1500, 3))
q = rng.standard_normal(1500)
y = np.array([[0.5, 0.5, 0.5], [2.0, 2.0, 2.0], x[0]])       # the last one sits on a source

r = fmmkit.regularized3d(x, q, targets=y, softening=0.05, grad=False)
far = fmmkit.laplace3d(x, q, targets=y[1:2], grad=False)
print("phi at the targets:", r.pot)
print(f"far away it is close to laplace: {r.pot[1]:.6f} vs {far.pot[0]:.6f}")
