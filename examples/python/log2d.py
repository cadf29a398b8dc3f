"""Two-dimensional potential of point charges, phi = sum_j q_j log|y - x_j| (fmmkit.log2d),
on a grid of targets."""
import numpy as np

import fmmkit

rng = np.random.default_rng(4)
x = rng.random((1000, 2))
q = rng.standard_normal(1000)
g = np.linspace(-0.5, 1.5, 40)
y = np.stack(np.meshgrid(g, g), axis=-1).reshape(-1, 2)

r = fmmkit.log2d(x, q, targets=y)
phi = r.pot.reshape(40, 40)
e = -r.grad.reshape(40, 40, 2)                                 # the field
print(f"phi on the grid: min {phi.min():.4f}, max {phi.max():.4f}")
print(f"largest |E|: {np.linalg.norm(e, axis=-1).max():.4f}")
