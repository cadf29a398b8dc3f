/* rings.c -- the vortex rings of van Rees et al. (section 5.1) in closed form.
 *
 * In a ring's cylindrical coordinates (z along its axis, r from it, a = r - R), Psi = psi e_theta
 * with psi = f(t) a function of rho = sqrt(a^2 + z^2) alone, t = rho / R. Psi is divergence-free
 * (axisymmetric and azimuthal), so omega = curl curl Psi = -laplacian Psi, and for an azimuthal
 * field the vector Laplacian is (psi_rr + psi_r / r - psi / r^2 + psi_zz) e_theta. With
 * s = 1 - t^2 and g = -c2 / s (f = c1 e^g):
 *   f'(t)  = f g',  g' = -2 c2 t / s^2,   f'' = f (g'^2 + g''),  g'' = -2 c2 (1 + 3 t^2) / s^3;
 *   psi_rr + psi_zz = F'' + F' / rho  (F(rho) = f(rho / R)),  F' / rho = -2 c2 f / (R^2 s^2),
 *   psi_r = F' a / rho,
 * so
 *   omega_theta = f [ (2 c2 (1 + 3 t^2) / s^3 - 4 c2^2 t^2 / s^4) / R^2
 *                     + 2 c2 (2r - R) / (R^2 s^2 r) + 1 / r^2 ],
 * and u = curl Psi = -psi_z e_r + (psi / r + psi_r) e_z:
 *   u_r = 2 c2 f z / (R^2 s^2),   u_z = f / r - 2 c2 f a / (R^2 s^2).
 * (Checked against sympy's curl curl of the Cartesian field, and against finite differences in
 * tests/unit/test_poisson_rings.c.) The support is r - R and z within R: r > 0 there. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "poisson/poisson.h"
#include "poisson/rings.h"

/* Beyond c2 / s = 700, f < c1 e^-700 (1e-302 c1): the ring adds nothing, and the powers of 1/s
 * (at most 6e6 up to there) never meet an underflowed f as 0 * inf. */
#define RINGS_EXPONENT_MAX 700.0

void fmk_rings_paper(fmk_ring rings[2])
{
    const fmk_ring paper[2] = {
        {{0.25, 0.25, 0.25}, {0, 0, 1}, 0.125, 227, 20},
        {{0.75, 0.75, 0.75}, {0, -1, 0}, 0.125, 227, 20},
    };
    memcpy(rings, paper, sizeof paper);
}

void fmk_rings_add(const fmk_ring *ring, const double x[3], double omega[3], double psi[3],
                   double u[3])
{
    const double *e = ring->axis, R = ring->radius, c1 = ring->c1, c2 = ring->c2;
    double d[3], rv[3];
    for (int k = 0; k < 3; k++)
        d[k] = x[k] - ring->center[k];
    const double z = d[0] * e[0] + d[1] * e[1] + d[2] * e[2];
    for (int k = 0; k < 3; k++)
        rv[k] = d[k] - z * e[k];
    const double r = sqrt(rv[0] * rv[0] + rv[1] * rv[1] + rv[2] * rv[2]);
    const double a = r - R, t2 = (a * a + z * z) / (R * R), s = 1 - t2;
    if (!(s > 0) || c2 > RINGS_EXPONENT_MAX * s)
        return;
    const double f = c1 * exp(-c2 / s);
    const double R2 = R * R, s2 = s * s;
    /* e_r = rv / r, e_theta = axis x rv / r */
    const double er[3] = {rv[0] / r, rv[1] / r, rv[2] / r};
    const double et[3] = {e[1] * er[2] - e[2] * er[1], e[2] * er[0] - e[0] * er[2],
                          e[0] * er[1] - e[1] * er[0]};
    if (psi)
        for (int k = 0; k < 3; k++)
            psi[k] += f * et[k];
    if (omega) {
        const double w =
            f * ((2 * c2 * (1 + 3 * t2) / (s2 * s) - 4 * c2 * c2 * t2 / (s2 * s2)) / R2 +
                 2 * c2 * (2 * r - R) / (R2 * s2 * r) + 1 / (r * r));
        for (int k = 0; k < 3; k++)
            omega[k] += w * et[k];
    }
    if (u) {
        const double ur = 2 * c2 * f * z / (R2 * s2), uz = f / r - 2 * c2 * f * a / (R2 * s2);
        for (int k = 0; k < 3; k++)
            u[k] += ur * er[k] + uz * e[k];
    }
}

fmk_status fmk_poisson_rings(int64_t n, const double *points, double *omega, double *psi,
                             double *velocity)
{
    if (n < 0)
        return fmk_solver_fail(NULL, FMK_ERR_ARG, "fmk_poisson_rings: n = %lld is negative",
                               (long long)n);
    if (n > 0 && !points)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "fmk_poisson_rings: points is NULL");
    for (int64_t i = 0; i < 3 * n; i++)
        if (!isfinite(points[i]))
            return fmk_solver_fail(NULL, FMK_ERR_NONFINITE,
                                   "fmk_poisson_rings: points[%lld][%d] = %g is not finite",
                                   (long long)(i / 3), (int)(i % 3), points[i]);
    fmk_ring rings[2];
    fmk_rings_paper(rings);
    /* 1 thread in a child forked after OpenMP ran (core/opts.c); under 4096 points the calling
     * thread alone: a team's start can cost more than the points (far more on a busy machine,
     * where the finite-difference test, one point per call, took 33 s instead of 0.01 s) */
    const int threads = fmk_opts_resolve_threads(0);
    (void)threads; /* unused without OpenMP */
#pragma omp parallel for schedule(static) num_threads(threads) if (n >= 4096)
    for (int64_t i = 0; i < n; i++) {
        double w[3] = {0, 0, 0}, p[3] = {0, 0, 0}, v[3] = {0, 0, 0};
        for (int k = 0; k < 2; k++)
            fmk_rings_add(&rings[k], points + 3 * i, w, p, v);
        if (omega)
            memcpy(omega + 3 * i, w, sizeof w);
        if (psi)
            memcpy(psi + 3 * i, p, sizeof p);
        if (velocity)
            memcpy(velocity + 3 * i, v, sizeof v);
    }
    return FMK_OK;
}
