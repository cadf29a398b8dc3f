/*
 * rings.h -- the test problem of van Rees et al. (section 5.1): vortex rings whose
 * streamfunction is known in closed form, with the exact vorticity omega = curl curl Psi and
 * velocity u = curl Psi (docs/poisson.md, "The test problem"). Shared by the solver's public
 * fmk_poisson_rings, the tests and the benchmark.
 */
#ifndef FMMKIT_POISSON_RINGS_H
#define FMMKIT_POISSON_RINGS_H

#include <stdint.h>

/* One ring: Psi = f(t) e_theta about the axis through center, t = sqrt((r - R)^2 + z^2) / R,
 * f(t) = c1 exp(-c2 / (1 - t^2)) for |t| < 1, else 0. */
typedef struct fmk_ring {
    double center[3];
    double axis[3]; /* unit vector */
    double radius;  /* R */
    double c1, c2;
} fmk_ring;

/* The paper's two rings: R = 0.125, c1 = 227, c2 = 20, at (0.25, 0.25, 0.25) with axis z and at
 * (0.75, 0.75, 0.75) with axis -y (the first rotated by pi/2 about x). */
void fmk_rings_paper(fmk_ring rings[2]);

/* Adds one ring's omega, Psi and u at point x to the 3-vectors given (any may be NULL). */
void fmk_rings_add(const fmk_ring *ring, const double x[3], double omega[3], double psi[3],
                   double u[3]);

#endif /* FMMKIT_POISSON_RINGS_H */
