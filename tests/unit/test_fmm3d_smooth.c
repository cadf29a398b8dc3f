/* test_fmm3d_smooth.c -- the 3D FMM (CPU) with the smooth kernels plummer and regularized meets
 * eps: relative l2 error of the potential <= eps and of the gradient <= 10 eps against the
 * direct sum (method direct, fp64), for eps 1e-3, 1e-6, 1e-9 and softening 1e-3, 1e-2 and 0.1
 * of the box, on uniform points, a Plummer sphere, clusters nested over 30 octaves (points
 * 2^-k rand, k in 0..29, where boxes far smaller than the softening used to take laplace
 * expansions: errors of 1e3 in the potential), a coincident group larger than a leaf, and a unit
 * cube with one far outlier (the softening then relative to the cube). The far field of the
 * smooth kernels is laplace, so the engine keeps boxes at least s / sqrt(eps) (plummer) or
 * s / eps^(1/4) (regularized) wide (docs/fmm3d.md section 8.1); the test also runs with leaves
 * of 16 so that the tree would be deep without that rule. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testutil.h"

enum { UNIFORM, PLUMMER, NESTED, COINCIDENT, OUTLIER, N_SET };
static const char *set_names[] = {"uniform", "Plummer", "nested 30 octaves", "coincident group",
                                  "far outlier"};

/* n points of a set into x (n, 3); returns the length the softening is relative to. */
static double make_points(int set, int64_t n, uint64_t seed, double *x)
{
    test_rng r = test_rng_seed(seed);
    double box = 1;
    switch (set) {
    case UNIFORM: test_points(TEST_DIST_CUBE, n, seed, x); break;
    case PLUMMER:
        test_points(TEST_DIST_PLUMMER, n, seed, x);
        box = 8; /* cut at radius 4 */
        break;
    case NESTED: /* x = rand(n, 3) * 2^-randint(0, 30) */
        for (int64_t i = 0; i < n; i++) {
            const double w = ldexp(1.0, -(int)(30 * test_uniform(&r)));
            for (int k = 0; k < 3; k++)
                x[3 * i + k] = w * test_uniform(&r);
        }
        break;
    case COINCIDENT: /* a fifth of the points (more than any leaf holds) at one place */
        test_points(TEST_DIST_CUBE, n, seed, x);
        for (int64_t i = 0; i < n / 5; i++)
            for (int k = 0; k < 3; k++)
                x[3 * i + k] = 0.375;
        break;
    default: /* the unit cube and one point 1e3 away */
        test_points(TEST_DIST_CUBE, n, seed, x);
        x[3 * (n / 2)] = 1e3;
        break;
    }
    /* on a grid of 2^-52 of the box (2^-40 with the outlier), so that the frame maps the points
     * exactly: FMM and direct sum see the same points */
    const int bits = set == OUTLIER ? 40 : set == PLUMMER ? 49 : 52;
    for (int64_t i = 0; i < 3 * n; i++)
        x[i] = ldexp(nearbyint(ldexp(x[i], bits)), -bits);
    return box;
}

/* The FMM's relative l2 errors against the direct sum (ref_pot, ref_grad) at all n targets;
 * returns the status. */
static fmk_status fmm_errors(fmk_kernel kernel, double eps, double softening, int64_t leaf_size,
                             int64_t n, const double *x, const double *q, const double *ref_pot,
                             const double *ref_grad, double err[2], fmk_info *info)
{
    double *pot = test_alloc(n), *grad = test_alloc(3 * n);
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_FMM;
    o.backend = FMK_BACKEND_CPU;
    o.threads = 2;
    o.softening = softening;
    o.leaf_size = leaf_size;
    const fmk_status st = test_run_opts(kernel, eps, &o, n, x, q, 0, NULL, pot, grad, info);
    err[0] = test_rel_l2(pot, ref_pot, n);
    err[1] = test_rel_l2(grad, ref_grad, 3 * n);
    free(pot), free(grad);
    return st;
}

/* Every kernel, softening, set and eps, with the default leaves and with leaves of 16. */
static void accuracy_matrix(void)
{
    const int64_t n = SANITIZED ? 800 : 2000;
    const double epss[] = {1e-3, 1e-6, 1e-9}, softs[] = {1e-3, 1e-2, 0.1};
    const fmk_kernel kernels[] = {FMK_KERNEL_PLUMMER, FMK_KERNEL_REGULARIZED};
    double *x = test_alloc(3 * n), *q = test_alloc(n);
    double *ref_pot = test_alloc(n), *ref_grad = test_alloc(3 * n);
    printf("%-11s %-18s %6s %6s %4s %6s %9s %9s\n", "kernel", "set", "soft", "eps", "leaf",
           "levels", "err pot", "err grad");
    for (int kk = 0; kk < 2; kk++)
        for (int set = 0; set < N_SET; set++) {
            const double box = make_points(set, n, 10 + set, x);
            test_charges(n, 0, 20 + set, q);
            for (int si = 0; si < 3; si++) {
                const double soft = softs[si] * box;
                CHECK_STATUS(test_run(kernels[kk], FMK_PRECISION_FP64, 2, soft, n, x, q, 0, NULL,
                                      ref_pot, ref_grad),
                             FMK_OK);
                for (int e = 0; e < 3; e++)
                    for (int leaves = 0; leaves < 2; leaves++) {
                        if (leaves && set != UNIFORM && set != NESTED)
                            continue;
                        double err[2] = {0, 0};
                        fmk_info info;
                        memset(&info, 0, sizeof info);
                        check_context("%s, %s, softening %g, eps %g, leaves %d",
                                      fmk_kernel_name(kernels[kk]), set_names[set], softs[si],
                                      epss[e], leaves ? 16 : 0);
                        CHECK_STATUS(fmm_errors(kernels[kk], epss[e], soft, leaves ? 16 : 0, n, x,
                                                q, ref_pot, ref_grad, err, &info),
                                     FMK_OK);
                        printf("%-11s %-18s %6g %6g %4d %6d %9.2e %9.2e\n",
                               fmk_kernel_name(kernels[kk]), set_names[set], softs[si], epss[e],
                               leaves ? 16 : 0, info.levels, err[0], err[1]);
                        CHECK_MSG(err[0] <= epss[e], "potential error %.3e > eps", err[0]);
                        CHECK_MSG(err[1] <= 10 * epss[e], "gradient error %.3e > 10 eps", err[1]);
                    }
            }
        }
    free(x), free(q), free(ref_pot), free(ref_grad);
}

int main(void)
{
    accuracy_matrix();
    return check_summary();
}
