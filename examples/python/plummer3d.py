"""Softened gravity in a Plummer-like cluster (fmmkit.plummer3d).

phi(y_i) = sum_j m_j / sqrt(|y_i - x_j|^2 + s^2); the acceleration of body i is G * grad phi,
since the gradient of this phi points towards the mass."""
import numpy as np

import fmmkit

rng = np.random.default_rng(2)
n = 3000
radius = 1 / np.sqrt(rng.random(n) ** (-2 / 3) - 1)           # Plummer radii, scale 1
direction = rng.standard_normal((n, 3))
x = radius[:, None] * direction / np.linalg.norm(direction, axis=1, keepdims=True)
m = np.full(n, 1.0 / n)

r = fmmkit.plummer3d(x, m, softening=0.01)
acc = r.grad                                                   # with G = 1
print(f"potential energy  W = {-0.5 * np.dot(m, r.pot):.6f}")
print(f"net force (should be ~0): {np.linalg.norm(m @ acc):.2e}")
print(f"{r.info.precision} {r.info.backend}: {sum(r.info.times.values()) * 1e3:.2f} ms")
