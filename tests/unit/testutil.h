/* testutil.h -- point sets, charges and an independent high-precision reference for the unit
 * tests. The reference is written from the kernel definitions in fmmkit.h and docs/kernels.md,
 * in the caller's coordinates, with long double arithmetic and compensated sums; it shares no
 * code with the library. */
#ifndef FMK_TESTUTIL_H
#define FMK_TESTUTIL_H

#include <stdint.h>

#include "fmmkit.h"

#include "sanitized.h" /* SANITIZED: tests use fewer points under ASan */

/* A small deterministic random generator (splitmix64). */
typedef struct test_rng {
    uint64_t state;
} test_rng;

test_rng test_rng_seed(uint64_t seed);
double test_uniform(test_rng *rng); /* [0, 1) */
double test_normal(test_rng *rng);  /* standard normal */

/* Point distributions. The 3D ones fill (n, 3) arrays, the 2D ones (n, 2). */
typedef enum test_dist {
    TEST_DIST_CUBE,      /* uniform in the unit cube [0, 1]^3 */
    TEST_DIST_PLUMMER,   /* Plummer sphere, scale radius 1, cut at radius 4 */
    TEST_DIST_CLUSTERED, /* 8 Gaussian clusters (sigma 0.03) in the unit cube */
    TEST_DIST_SPHERE,    /* uniform on the unit sphere's surface */
    TEST_DIST_SQUARE,    /* uniform in the unit square [0, 1]^2 */
    TEST_DIST_NORMAL2D,  /* standard normal in the plane */
    TEST_DIST_LAYER,     /* a thin wavy layer: x in [0, 1], y = 0.1 sin(2 pi x) + 0.2 u */
    TEST_DIST_COUNT
} test_dist;

const char *test_dist_name(test_dist dist);
int test_dist_dim(test_dist dist);
void test_points(test_dist dist, int64_t n, uint64_t seed, double *x);

/* Like test_points, but no two of the n points are closer than min_separation. The test
 * sets use it so that the error of rounding the coordinates themselves (about 2^-53 or 2^-24
 * of the box per coordinate, amplified by box / r in the pair terms of the closest pairs)
 * stays well below the tolerances; otherwise the tolerances would measure the conditioning of
 * the input rather than the library. */
void test_points_separated(test_dist dist, int64_t n, uint64_t seed, double min_separation,
                           double *x);

/* The 2D FMM's sets of Goude & Engblom in the unit square, (n, 2): uniform; x and y normal
 * (0.5, 0.1); a layer (y normal); uniform with every fourth point a copy of the one before it;
 * uniform with point n/2 moved to outlier[]. Normal draws outside the square are drawn again.
 * Coordinates on a grid of 2^-40 (2^-outlier_bits for the outlier set), so that the frame maps
 * them exactly and a reference sums over the very points the FMM sees. */
typedef enum test_set2d {
    TEST_SET2D_UNIFORM,
    TEST_SET2D_NORMAL,
    TEST_SET2D_LAYER,
    TEST_SET2D_DUPLICATES,
    TEST_SET2D_OUTLIER,
    TEST_SET2D_COUNT
} test_set2d;
const char *test_set2d_name(test_set2d set);
void test_points_set2d(test_set2d set, int64_t n, uint64_t seed, const double outlier[2],
                       int outlier_bits, double *x);

/* n charges uniform in [-1, 1] (2n values, (re, im) pairs, when complex). */
void test_charges(int64_t n, int complex_charges, uint64_t seed, double *q);

/* The reference sum of fmmkit.h: targets = NULL means the targets are the sources (the term
 * j = i is left out). Sources at r = 0 from a target are left out for laplace, log2d and
 * cauchy2d; the smooth kernels take their value at r = 0. pot and grad may be NULL. Layouts as
 * in fmk_plan_eval. */
void test_reference(fmk_kernel kernel, double softening, int64_t n_sources, const double *sources,
                    const double *charges, int64_t n_targets, const double *targets, double *pot,
                    double *grad);

/* ||a - b|| / ||b|| in the l2 norm over n values (||a - b|| when b is 0). */
double test_rel_l2(const double *a, const double *b, int64_t n);

/* Tests of the treecode's machinery (not its accuracy) ask for the theta it used before it
 * took theta from eps: the expert theta 0.6, set here for method tree (other methods refuse
 * theta), so that their eps (often 1e-6, below what the tree reaches) does not refuse them. */
static inline void test_tree_theta(fmk_opts *o)
{
    if (o->method == FMK_METHOD_TREE && o->theta == 0)
        o->theta = 0.6;
}

/* The accuracy the tests ask of fp32 plans: fp32 keeps coordinates to 6e-8 of the frame,
 * which gives about 1e-6 on well-spread points (the guard refuses eps 1e-6 there). */
#define TEST_EPS_FP32 1e-4

/* One direct evaluation through a plan (CPU backend, method direct): create, set_points
 * (targets = NULL: at the sources), eval, destroy; eps 1e-6 (fp32: TEST_EPS_FP32). Prints
 * the library's message on failure. */
fmk_status test_run(fmk_kernel kernel, fmk_precision precision, int threads, double softening,
                    int64_t n_sources, const double *sources, const double *charges,
                    int64_t n_targets, const double *targets, double *pot, double *grad);

/* One evaluation through a plan with the given options: create (dimension of the kernel),
 * set_points (targets = NULL: at the sources), eval, info (when info is not NULL), destroy.
 * Prints the library's message on failure. */
fmk_status test_run_opts(fmk_kernel kernel, double eps, const fmk_opts *opts, int64_t n_sources,
                         const double *sources, const double *charges, int64_t n_targets,
                         const double *targets, double *pot, double *grad, fmk_info *info);

/* Values per target of pot and grad for a kernel. */
int test_pot_width(fmk_kernel kernel);
int test_grad_width(fmk_kernel kernel);

/* malloc that never returns NULL (the tests stop on a failed allocation). */
double *test_alloc(int64_t count);

#endif /* FMK_TESTUTIL_H */
