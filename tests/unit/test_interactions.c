/* test_interactions.c -- fmk_info's interaction counts (interactions_p2p, interactions_far) on
 * the CPU: the direct sum's exact count; the treecode's between N and N^2, falling as theta
 * grows, the direct count at a tiny theta, for both walks; the FMMs' (3D, 2D) within N^2; and 0
 * before the first evaluation of each set of points. */
#include <stdlib.h>

#include "check.h"
#include "testutil.h"

enum { N = 2000, N_TRG = 700 };

typedef struct counts {
    int64_t p2p, far;
} counts;

/* A plan of this method on the CPU, with theta (tree; 0: default) and walk, evaluated once at
 * the n points x (targets = sources, or the m points y apart when y is not NULL). */
static counts run(int dim, fmk_kernel kernel, fmk_method method, double theta, fmk_walk walk,
                  int64_t n, const double *x, int64_t m, const double *y, const double *q)
{
    counts c = {-1, -1};
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = method, o.backend = FMK_BACKEND_CPU, o.threads = 2, o.theta = theta, o.walk = walk;
    fmk_plan *plan = NULL;
    if (!CHECK(fmk_plan_create(&plan, dim, kernel, 1e-6, &o) == FMK_OK))
        return c;
    fmk_info in;
    CHECK(fmk_plan_set_points(plan, n, x, y ? m : 0, y) == FMK_OK);
    CHECK(fmk_plan_info(plan, &in) == FMK_OK);
    CHECK(in.interactions_p2p == 0 && in.interactions_far == 0); /* no evaluation yet */
    const int64_t nt = y ? m : n;
    double *pot = test_alloc(nt * (kernel == FMK_KERNEL_CAUCHY2D ? 2 : 1));
    CHECK(fmk_plan_eval(plan, q, pot, NULL) == FMK_OK);
    CHECK(fmk_plan_info(plan, &in) == FMK_OK);
    c.p2p = in.interactions_p2p, c.far = in.interactions_far;
    /* new points: 0 again until their evaluation */
    CHECK(fmk_plan_set_points(plan, n, x, y ? m : 0, y) == FMK_OK);
    CHECK(fmk_plan_info(plan, &in) == FMK_OK);
    CHECK(in.interactions_p2p == 0 && in.interactions_far == 0);
    CHECK(fmk_plan_eval(plan, q, pot, NULL) == FMK_OK);
    CHECK(fmk_plan_info(plan, &in) == FMK_OK);
    CHECK(in.interactions_p2p == c.p2p && in.interactions_far == c.far); /* the same work */
    free(pot);
    fmk_plan_destroy(plan);
    return c;
}

static void test_direct(const double *x, const double *y, const double *q)
{
    check_context("direct");
    counts c = run(3, FMK_KERNEL_LAPLACE, FMK_METHOD_DIRECT, 0, FMK_WALK_AUTO, N, x, 0, NULL, q);
    CHECK(c.p2p == (int64_t)N * (N - 1) && c.far == 0);
    c = run(3, FMK_KERNEL_LAPLACE, FMK_METHOD_DIRECT, 0, FMK_WALK_AUTO, N, x, N_TRG, y, q);
    CHECK(c.p2p == (int64_t)N * N_TRG && c.far == 0);
}

static void test_tree(const double *x, const double *y, const double *q)
{
    const fmk_walk walks[2] = {FMK_WALK_GROUP, FMK_WALK_STACKLESS};
    const int64_t nn = (int64_t)N * (N - 1);
    for (int w = 0; w < 2; w++) {
        check_context("tree, walk %d", (int)walks[w]);
        counts prev = {INT64_MAX, 0};
        int64_t prev_all = INT64_MAX;
        const double thetas[3] = {0.3, 0.6, 1.0};
        for (int k = 0; k < 3; k++) {
            const counts c =
                run(3, FMK_KERNEL_LAPLACE, FMK_METHOD_TREE, thetas[k], walks[w], N, x, 0, NULL, q);
            const int64_t all = c.p2p + c.far;
            CHECK_MSG(all >= N && all <= nn, "theta %g: %lld + %lld interactions", thetas[k],
                      (long long)c.p2p, (long long)c.far);
            CHECK_MSG(c.p2p > 0 && c.far > 0, "theta %g: p2p %lld, far %lld", thetas[k],
                      (long long)c.p2p, (long long)c.far);
            CHECK_MSG(all < prev_all, "theta %g: %lld interactions, %lld at a smaller theta",
                      thetas[k], (long long)all, (long long)prev_all);
            prev_all = all, prev = c;
        }
        (void)prev;
        /* every node opened: the direct sum's pairs */
        counts c = run(3, FMK_KERNEL_LAPLACE, FMK_METHOD_TREE, 1e-6, walks[w], N, x, 0, NULL, q);
        CHECK_MSG(c.p2p == nn && c.far == 0, "theta 1e-6: p2p %lld (direct %lld), far %lld",
                  (long long)c.p2p, (long long)nn, (long long)c.far);
        c = run(3, FMK_KERNEL_LAPLACE, FMK_METHOD_TREE, 1e-6, walks[w], N, x, N_TRG, y, q);
        CHECK_MSG(c.p2p == (int64_t)N * N_TRG && c.far == 0,
                  "targets apart, theta 1e-6: p2p %lld, far %lld", (long long)c.p2p,
                  (long long)c.far);
    }
}

static void test_fmm(const double *x, const double *q)
{
    const int64_t n = 6000; /* enough for a tree of several levels */
    double *x3 = test_alloc(3 * n), *q3 = test_alloc(2 * n);
    test_points(TEST_DIST_CUBE, n, 7, x3);
    test_charges(n, 0, 8, q3);
    check_context("fmm 3D");
    counts c = run(3, FMK_KERNEL_LAPLACE, FMK_METHOD_FMM, 0, FMK_WALK_AUTO, n, x3, 0, NULL, q3);
    CHECK_MSG(c.p2p > 0 && c.p2p <= n * n, "p2p %lld", (long long)c.p2p);
    CHECK_MSG(c.far > 0, "far %lld", (long long)c.far);
    check_context("fmm 2D");
    double *x2 = test_alloc(2 * n);
    test_points(TEST_DIST_SQUARE, n, 9, x2);
    test_charges(n, 1, 10, q3);
    c = run(2, FMK_KERNEL_CAUCHY2D, FMK_METHOD_FMM, 0, FMK_WALK_AUTO, n, x2, 0, NULL, q3);
    CHECK_MSG(c.p2p > 0 && c.p2p <= n * n, "p2p %lld", (long long)c.p2p);
    CHECK_MSG(c.far > 0, "far %lld", (long long)c.far);
    free(x3), free(q3), free(x2);
    (void)x, (void)q;
}

int main(void)
{
    double *x = test_alloc(3 * N), *y = test_alloc(3 * N_TRG), *q = test_alloc(N);
    test_points(TEST_DIST_CUBE, N, 1, x);
    test_points(TEST_DIST_CUBE, N_TRG, 2, y);
    test_charges(N, 0, 3, q);
    test_direct(x, y, q);
    test_tree(x, y, q);
    test_fmm(x, q);
    free(x), free(y), free(q);
    return check_summary();
}
