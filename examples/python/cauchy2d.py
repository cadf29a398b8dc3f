"""Point vortices in the plane (fmmkit.cauchy2d): phi(z) = sum_j Gamma_j / (z_j - z) with
complex Gamma_j; points may be given as complex numbers z = x + iy.

With Gamma_j = i k_j / (2 pi) for vortices of circulation k_j, phi is the complex velocity u - iv
they induce, so the velocity is conj(phi). At this size method auto picks the 2D FMM."""
import numpy as np

import fmmkit

rng = np.random.default_rng(5)
n = 50_000
z = rng.standard_normal(n) + 1j * rng.standard_normal(n)
k = rng.choice([-1.0, 1.0], n)                                  # circulations
gamma = 1j * k / (2 * np.pi)

r = fmmkit.cauchy2d(z, gamma)                                  # targets = the vortices
velocity = np.conj(r.pot)
print("velocity of the first vortices:", np.round(velocity[:3], 6))
print(f"dphi/dz at the first vortex: {r.grad[0]:.6f}")
print(f"linear impulse rate (should be ~0): {abs(np.sum(k * velocity)):.2e}")
exact = np.sum(np.delete(gamma, 0) / (np.delete(z, 0) - z[0]))
print(f"phi at the first vortex: relative error {abs(r.pot[0] - exact) / abs(exact):.1e} "
      f"({r.info.method}, order {r.info.order}, eps {r.info.eps:g})")
