/* ic.c -- initial conditions (fmk_sim_ic_*) and the driver's random stream.
 *
 * The stream is splitmix64 (Steele, Lea & Flood 2014): a seed gives the same 64-bit sequence
 * on every machine. The generators turn it into particles with +, -, *, / and sqrt only, which
 * IEEE 754 rounds the same way everywhere (no libm pow, cbrt, sin or cos, whose last bit may
 * differ between C libraries), so the same seed gives the same particles bit for bit on every
 * machine: directions by Marsaglia's (1972) method, cube roots by Newton's iteration. */
#include <math.h>

#include "sim/sim_internal.h"

/* No fused multiply-adds: a compiler that contracts a * b + c (clang does, where the machine
 * has an FMA) would round differently from one that does not. */
#pragma STDC FP_CONTRACT OFF

static uint64_t rng_next(fmk_sim_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double fmk_sim_rng_uniform(fmk_sim_rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1p-53;
}

/* A direction uniform on the unit sphere times len (Marsaglia 1972). */
static void random_direction(fmk_sim_rng *r, double len, double *x)
{
    double u, v, s;
    do {
        u = 2 * fmk_sim_rng_uniform(r) - 1;
        v = 2 * fmk_sim_rng_uniform(r) - 1;
        s = u * u + v * v;
    } while (s >= 1);
    const double f = 2 * sqrt(1 - s);
    x[0] = len * u * f;
    x[1] = len * v * f;
    x[2] = len * (1 - 2 * s);
}

/* x^(1/3) for 0 < x <= 1 by Newton's iteration from 1, which decreases monotonically to the
 * root; it stops when a step no longer decreases it. */
static double cube_root_unit(double x)
{
    double y = 1;
    for (int k = 0; k < 400; k++) {
        const double next = (2 * y + x / (y * y)) / 3;
        if (!(next < y))
            break;
        y = next;
    }
    return y;
}

/* Moves the centre of mass to the origin and its velocity to zero (summed in index order). */
static void centre(int64_t n, const double *mass, double *pos, double *vel)
{
    double m = 0, x[3] = {0, 0, 0}, v[3] = {0, 0, 0};
    for (int64_t i = 0; i < n; i++) {
        m += mass[i];
        for (int k = 0; k < 3; k++) {
            x[k] += mass[i] * pos[3 * i + k];
            v[k] += mass[i] * vel[3 * i + k];
        }
    }
    for (int k = 0; k < 3; k++)
        x[k] /= m, v[k] /= m;
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            pos[3 * i + k] -= x[k];
            vel[3 * i + k] -= v[k];
        }
}

static fmk_status check_ic(const char *what, int64_t n, const double *mass, const double *pos,
                           const double *vel)
{
    if (!mass || !pos || !vel)
        return fmk_sim_fail(NULL, FMK_ERR_NULL,
                            "fmk_sim_ic_%s: mass, pos and vel must be arrays "
                            "of n, 3n and 3n doubles",
                            what);
    if (n < 1)
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "fmk_sim_ic_%s: n = %lld; it must be >= 1", what,
                            (long long)n);
    return FMK_OK;
}

/* The fraction of the mass the Plummer sphere keeps (Aarseth, Henon & Wielen 1974, appendix;
 * the cut of their recipe as NEMO's and Starlab's mkplummer apply it): the radius is drawn from
 * the enclosed mass fraction X uniform in [0, 0.999), so no particle lies beyond
 * (0.999^(-2/3) - 1)^(-1/2) = 38.7 Plummer radii (22.8 in Henon units). */
#define PLUMMER_MASS_CUT 0.999

fmk_status fmk_sim_ic_plummer(int64_t n, uint64_t seed, double *mass, double *pos, double *vel)
{
    fmk_status st = check_ic("plummer", n, mass, pos, vel);
    if (st != FMK_OK)
        return st;
    fmk_sim_rng r = {seed};
    /* Henon units (G = M = 1, E = -1/4): the Plummer radius is 3 pi / 16. */
    const double a = 3 * 3.14159265358979323846 / 16, vscale = 1 / sqrt(a);
    for (int64_t i = 0; i < n; i++) {
        mass[i] = 1.0 / (double)n;
        /* radius from the enclosed mass fraction X: M(r)/M = r^3 / (1 + r^2)^(3/2) */
        const double x = PLUMMER_MASS_CUT * fmk_sim_rng_uniform(&r);
        double radius = 0;
        if (x > 0) {
            const double c = cube_root_unit(x);
            radius = 1 / sqrt(1 / (c * c) - 1);
        }
        random_direction(&r, a * radius, pos + 3 * i);
        /* speed: q = v / v_esc with density q^2 (1 - q^2)^(7/2) (at most 0.0922 < 0.1), by
         * von Neumann's rejection as AHW do */
        double q, g;
        do {
            q = fmk_sim_rng_uniform(&r);
            const double w = 1 - q * q;
            g = q * q * w * w * w * sqrt(w);
        } while (0.1 * fmk_sim_rng_uniform(&r) >= g);
        const double v_esc = sqrt(2.0) / sqrt(sqrt(1 + radius * radius));
        random_direction(&r, vscale * q * v_esc, vel + 3 * i);
    }
    centre(n, mass, pos, vel);
    return FMK_OK;
}

fmk_status fmk_sim_ic_cold(int64_t n, uint64_t seed, double *mass, double *pos, double *vel)
{
    fmk_status st = check_ic("cold", n, mass, pos, vel);
    if (st != FMK_OK)
        return st;
    fmk_sim_rng r = {seed};
    for (int64_t i = 0; i < n; i++) {
        mass[i] = 1.0 / (double)n;
        double x, y, z;
        do { /* uniform in the unit ball: the cube's points inside it */
            x = 2 * fmk_sim_rng_uniform(&r) - 1;
            y = 2 * fmk_sim_rng_uniform(&r) - 1;
            z = 2 * fmk_sim_rng_uniform(&r) - 1;
        } while (x * x + y * y + z * z >= 1);
        pos[3 * i] = x, pos[3 * i + 1] = y, pos[3 * i + 2] = z;
        vel[3 * i] = vel[3 * i + 1] = vel[3 * i + 2] = 0;
    }
    centre(n, mass, pos, vel);
    return FMK_OK;
}

fmk_status fmk_sim_ic_kepler(double e, double *mass, double *pos, double *vel)
{
    fmk_status st = check_ic("kepler", 2, mass, pos, vel);
    if (st != FMK_OK)
        return st;
    if (!(e >= 0 && e < 1))
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "fmk_sim_ic_kepler: e = %g; the eccentricity must be in [0, 1)", e);
    /* G M = 1, a = 1: at apocentre the separation is 1 + e along x and the relative speed
     * sqrt((1 - e) / (1 + e)) along y (vis-viva); each body carries half of each. */
    const double r_apo = 1 + e, v_apo = sqrt((1 - e) / (1 + e));
    mass[0] = mass[1] = 0.5;
    const double p[6] = {0.5 * r_apo, 0, 0, -0.5 * r_apo, 0, 0};
    const double v[6] = {0, 0.5 * v_apo, 0, 0, -0.5 * v_apo, 0};
    for (int k = 0; k < 6; k++)
        pos[k] = p[k], vel[k] = v[k];
    return FMK_OK;
}
