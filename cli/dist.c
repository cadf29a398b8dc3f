/* dist.c -- xoshiro256** and the point distributions of `fmmkit bench` and `fmmkit demo`. */
#include "dist.h"

#include <math.h>
#include <string.h>

static const double two_pi = 6.283185307179586476925286766559;

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void dist_rng_seed(dist_rng *rng, uint64_t seed)
{
    for (int k = 0; k < 4; k++)
        rng->s[k] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t dist_rng_next(dist_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double dist_rng_uniform(dist_rng *rng)
{
    return (double)(dist_rng_next(rng) >> 11) * 0x1p-53;
}

/* Box-Muller; the second value of each pair is dropped to keep the generator stateless. */
double dist_rng_normal(dist_rng *rng)
{
    double u = 1.0 - dist_rng_uniform(rng); /* (0, 1]: log(u) is finite */
    double v = dist_rng_uniform(rng);
    return sqrt(-2.0 * log(u)) * cos(two_pi * v);
}

int64_t dist_rng_below(dist_rng *rng, int64_t n)
{
    /* Rejection removes the modulo bias. */
    uint64_t un = (uint64_t)n, limit = UINT64_MAX - UINT64_MAX % un;
    uint64_t r;
    do
        r = dist_rng_next(rng);
    while (r >= limit);
    return (int64_t)(r % un);
}

static const struct {
    const char *name;
    int dim;
} table[DIST_COUNT] = {
    [DIST_UNIFORM] = {"uniform", 3}, [DIST_PLUMMER] = {"plummer", 3},
    [DIST_SPHERE] = {"sphere", 3},   [DIST_CLUSTERED] = {"clustered", 3},
    [DIST_CORNER] = {"corner", 3},   [DIST_NORMAL2D] = {"normal2d", 2},
    [DIST_LAYER2D] = {"layer2d", 2}, [DIST_UNIFORM2D] = {"uniform2d", 2},
};

int dist_from_name(const char *name, dist_kind *kind)
{
    for (int k = 0; k < DIST_COUNT; k++)
        if (strcmp(table[k].name, name) == 0) {
            *kind = (dist_kind)k;
            return 0;
        }
    return -1;
}

const char *dist_name(dist_kind kind)
{
    return table[kind].name;
}
int dist_dim(dist_kind kind)
{
    return table[kind].dim;
}

const char *dist_names(void)
{
    return "uniform, plummer, sphere, clustered, corner, normal2d, layer2d, uniform2d";
}

/* A uniformly random unit vector: z uniform in [-1, 1], azimuth uniform (Archimedes). */
static void unit_vector(dist_rng *rng, double v[3])
{
    double z = 2.0 * dist_rng_uniform(rng) - 1.0;
    double phi = two_pi * dist_rng_uniform(rng);
    double rho = sqrt(1.0 - z * z);
    v[0] = rho * cos(phi), v[1] = rho * sin(phi), v[2] = z;
}

/* A normal deviate of standard deviation sigma about mean, redrawn until it lies in [0, 1]. */
static double normal_in_unit(dist_rng *rng, double mean, double sigma)
{
    double x;
    do
        x = mean + sigma * dist_rng_normal(rng);
    while (x < 0.0 || x > 1.0);
    return x;
}

enum { CLUSTERS = 16 };
static const double cluster_sigma = 0.02;
static const double plummer_max_radius = 10.0;

void dist_fill(dist_kind kind, dist_rng *rng, int64_t n, double *x)
{
    double centers[CLUSTERS][3];
    if (kind == DIST_CLUSTERED)
        for (int c = 0; c < CLUSTERS; c++)
            for (int k = 0; k < 3; k++)
                centers[c][k] = 0.1 + 0.8 * dist_rng_uniform(rng);
    for (int64_t i = 0; i < n; i++) {
        double *p = x + (int64_t)dist_dim(kind) * i;
        double v[3];
        switch (kind) {
        case DIST_UNIFORM:
            for (int k = 0; k < 3; k++)
                p[k] = dist_rng_uniform(rng);
            break;
        case DIST_PLUMMER: {
            /* Inverse of the enclosed mass M(r) = r^3 / (1 + r^2)^(3/2) (Aarseth, Henon &
             * Wielen 1974), redrawn beyond the clipping radius. */
            double r;
            do {
                double m = 1.0 - dist_rng_uniform(rng); /* (0, 1] */
                r = 1.0 / sqrt(pow(m, -2.0 / 3.0) - 1.0);
            } while (!(r <= plummer_max_radius));
            unit_vector(rng, v);
            for (int k = 0; k < 3; k++)
                p[k] = r * v[k];
            break;
        }
        case DIST_SPHERE: unit_vector(rng, p); break;
        case DIST_CLUSTERED: {
            int c = (int)dist_rng_below(rng, CLUSTERS);
            for (int k = 0; k < 3; k++)
                p[k] = centers[c][k] + cluster_sigma * dist_rng_normal(rng);
            break;
        }
        case DIST_CORNER:
            for (int k = 0; k < 3; k++) {
                double u = dist_rng_uniform(rng);
                p[k] = u * u * u;
            }
            break;
        case DIST_NORMAL2D:
            p[0] = normal_in_unit(rng, 0.5, 0.1);
            p[1] = normal_in_unit(rng, 0.5, 0.1);
            break;
        case DIST_LAYER2D:
            p[0] = dist_rng_uniform(rng);
            p[1] = normal_in_unit(rng, 0.5, 0.1);
            break;
        case DIST_UNIFORM2D:
            p[0] = dist_rng_uniform(rng);
            p[1] = dist_rng_uniform(rng);
            break;
        case DIST_COUNT: break;
        }
    }
}

void dist_charges(dist_rng *rng, int64_t n, int complex_charges, double *q)
{
    int64_t values = complex_charges ? 2 * n : n;
    for (int64_t i = 0; i < values; i++)
        q[i] = 2.0 * dist_rng_uniform(rng) - 1.0;
}
