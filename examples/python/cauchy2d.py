"""Point vortices in the plane (fmmkit.cauchy2d): phi(z) = sum_j Gamma_j / (z_j - z) with
complex Gamma_j; points may be given as complex numbers z = x + iy.

With Gamma_j = i k_j / (2 pi) for vortices of circulation k_j, phi is the complex velocity u - iv
they induce, so the velocity is conj(phi)."""
import numpy as np

import fmmkit

rng = np.random.default_rng(5)
z = rng.standard_normal(2000) + 1j * rng.standard_normal(2000)
k = rng.choice([-1.0, 1.0], 2000)                               # circulations
gamma = 1j * k / (2 * np.pi)

r = fmmkit.cauchy2d(z, gamma)                                  # targets = the vortices
velocity = np.conj(r.pot)
print("velocity of the first vortices:", np.round(velocity[:3], 6))
print(f"dphi/dz at the first vortex: {r.grad[0]:.6f}")
print(f"linear impulse rate (should be ~0): {abs(np.sum(k * velocity)):.2e}")
