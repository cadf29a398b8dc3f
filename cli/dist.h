/* dist.h -- reproducible random numbers and the point distributions of `fmmkit bench`.
 *
 * The generator is xoshiro256** (Blackman & Vigna 2018) seeded through splitmix64, so a seed
 * gives the same points on every machine and in every build.
 */
#ifndef FMMKIT_CLI_DIST_H
#define FMMKIT_CLI_DIST_H

#include <stdint.h>

typedef struct dist_rng {
    uint64_t s[4];
} dist_rng;

void dist_rng_seed(dist_rng *rng, uint64_t seed);
uint64_t dist_rng_next(dist_rng *rng);
double dist_rng_uniform(dist_rng *rng);           /* [0, 1), 53 random bits */
double dist_rng_normal(dist_rng *rng);            /* mean 0, variance 1 */
int64_t dist_rng_below(dist_rng *rng, int64_t n); /* uniform in [0, n), n > 0 */

typedef enum dist_kind {
    DIST_UNIFORM,   /* 3D: uniform in the unit cube */
    DIST_PLUMMER,   /* 3D: Plummer sphere of scale radius 1, radius clipped at 10 */
    DIST_SPHERE,    /* 3D: uniform on the unit sphere's surface */
    DIST_CLUSTERED, /* 3D: Gaussian blobs in the unit cube */
    DIST_CORNER,    /* 3D: (u^3, v^3, w^3), crowded towards one corner of the cube */
    DIST_NORMAL2D,  /* 2D: normal about (0.5, 0.5), variance 1/100, kept in the unit square */
    DIST_LAYER2D,   /* 2D: x uniform, y normal about 0.5 with variance 1/100, in the square */
    DIST_UNIFORM2D, /* 2D: uniform in the unit square */
    DIST_COUNT
} dist_kind;

/* The distribution of a name ("uniform", "plummer", ...); returns -1 for an unknown name. */
int dist_from_name(const char *name, dist_kind *kind);
const char *dist_name(dist_kind kind);
int dist_dim(dist_kind kind);
/* "uniform, plummer, ..." for messages. */
const char *dist_names(void);

/* Fills x[dim*i + k], i < n, with points of the distribution. */
void dist_fill(dist_kind kind, dist_rng *rng, int64_t n, double *x);

/* Fills n charges (n pairs when complex) uniform in [-1, 1] (each part, when complex). */
void dist_charges(dist_rng *rng, int64_t n, int complex_charges, double *q);

#endif /* FMMKIT_CLI_DIST_H */
