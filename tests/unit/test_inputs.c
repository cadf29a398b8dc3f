/* test_inputs.c -- bad and edge-case input: NaN/Inf in sources, targets and charges; empty and
 * tiny point sets; eval_many against single evaluations; fmk_plan_memory and fmk_plan_info;
 * a failed set_points keeps the old points; set_points again with the same sizes equals a fresh
 * plan; a non-finite point deep in a large set is reported at its index; names round-trip; the
 * one-shot call. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testutil.h"

#define SENTINEL (-12345.678)

static const fmk_kernel kernels[] = {FMK_KERNEL_LAPLACE, FMK_KERNEL_PLUMMER, FMK_KERNEL_REGULARIZED,
                                     FMK_KERNEL_LOG2D, FMK_KERNEL_CAUCHY2D};

static void fill(double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = SENTINEL;
}

static int untouched(const double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (x[i] != SENTINEL)
            return 0;
    return 1;
}

static fmk_plan *make_plan(fmk_kernel k, int threads)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.backend = FMK_BACKEND_CPU;
    o.method = FMK_METHOD_DIRECT;
    o.threads = threads;
    o.softening = 0.05;
    fmk_plan *plan = NULL;
    fmk_status st = fmk_plan_create(&plan, fmk_kernel_dim(k), k, 1e-6, &o);
    CHECK_MSG(st == FMK_OK && plan, "fmk_plan_create: %s", fmk_plan_last_error(NULL));
    return plan;
}

static int mentions(const fmk_plan *plan, const char *text)
{
    const char *m = fmk_plan_last_error(plan);
    return m && strstr(m, text) != NULL;
}

/* NaN and Inf in each input: FMK_ERR_NONFINITE, the index in the message, nothing written. */
static void nonfinite(fmk_kernel k)
{
    const int dim = fmk_kernel_dim(k), cw = test_pot_width(k), gw = test_grad_width(k);
    const int64_t n = 50, m = 40;
    double *src = test_alloc(n * dim), *trg = test_alloc(m * dim), *q = test_alloc(2 * n);
    double *pot = test_alloc(n * cw), *grad = test_alloc(n * gw);
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n, 1, src);
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, m, 2, trg);
    test_charges(n, cw == 2, 3, q);
    const double bad[3] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; b++) {
        fmk_plan *plan = make_plan(k, 0);
        if (!plan)
            return;
        check_context("%s, %g in the inputs", fmk_kernel_name(k), bad[b]);
        double keep = src[dim * 37 + 1];
        src[dim * 37 + 1] = bad[b];
        CHECK_STATUS(fmk_plan_set_points(plan, n, src, 0, NULL), FMK_ERR_NONFINITE);
        CHECK_MSG(mentions(plan, "sources[37]"), "message \"%s\" does not name sources[37]",
                  fmk_plan_last_error(plan));
        CHECK_STATUS(fmk_plan_set_points(plan, n, src, m, trg), FMK_ERR_NONFINITE);
        src[dim * 37 + 1] = keep;

        keep = trg[dim * 23];
        trg[dim * 23] = bad[b];
        CHECK_STATUS(fmk_plan_set_points(plan, n, src, m, trg), FMK_ERR_NONFINITE);
        CHECK_MSG(mentions(plan, "targets[23]"), "message \"%s\" does not name targets[23]",
                  fmk_plan_last_error(plan));
        trg[dim * 23] = keep;

        CHECK_PLAN_OK(fmk_plan_set_points(plan, n, src, 0, NULL), plan);
        /* the last value of charge 41 (the imaginary part for cauchy2d) */
        keep = q[cw * 41 + cw - 1];
        q[cw * 41 + cw - 1] = bad[b];
        fill(pot, n * cw), fill(grad, n * gw);
        CHECK_STATUS(fmk_plan_eval(plan, q, pot, grad), FMK_ERR_NONFINITE);
        CHECK_MSG(mentions(plan, "charges[41]"), "message \"%s\" does not name charges[41]",
                  fmk_plan_last_error(plan));
        CHECK(untouched(pot, n * cw) && untouched(grad, n * gw));
        /* the one-shot call reports it through the thread's message */
        CHECK_STATUS(fmk_eval(dim, k, 1e-6, NULL, n, src, q, 0, NULL, pot, grad),
                     k == FMK_KERNEL_PLUMMER || k == FMK_KERNEL_REGULARIZED ? FMK_ERR_ARG
                                                                            : FMK_ERR_NONFINITE);
        CHECK(fmk_plan_last_error(NULL)[0] != '\0');
        CHECK(untouched(pot, n * cw) && untouched(grad, n * gw));
        q[cw * 41 + cw - 1] = keep;
        fmk_plan_destroy(plan);
    }
    free(src), free(trg), free(q), free(pot), free(grad);
}

/* N = 0, M = 0, N = 1, N = 2. */
static void tiny_sets(fmk_kernel k)
{
    const int cw = test_pot_width(k), gw = test_grad_width(k);
    double src[6] = {0.1, 0.2, 0.7, 0.5, -0.3, 0.9}, trg[9] = {1, 2, 3, -1, 0.5, 0.25, 4, 4, 4};
    double q[4] = {1.5, -0.5, 2.0, 0.75}, pot[6], grad[9], rp[6], rg[9];
    fmk_plan *plan = make_plan(k, 0);
    if (!plan)
        return;
    check_context("%s, N = 0 with 3 targets", fmk_kernel_name(k));
    CHECK_PLAN_OK(fmk_plan_set_points(plan, 0, NULL, 3, trg), plan);
    fill(pot, 6), fill(grad, 9);
    CHECK_PLAN_OK(fmk_plan_eval(plan, NULL, pot, grad), plan); /* no charges needed */
    int zero = 1;
    for (int i = 0; i < 3 * cw; i++)
        zero &= pot[i] == 0;
    for (int i = 0; i < 3 * gw; i++)
        zero &= grad[i] == 0;
    CHECK_MSG(zero, "N = 0 must give zeros");
    CHECK(untouched(pot + 3 * cw, 6 - 3 * cw));

    check_context("%s, N = 0 and targets = sources", fmk_kernel_name(k));
    CHECK_PLAN_OK(fmk_plan_set_points(plan, 0, NULL, 0, NULL), plan);
    fill(pot, 6);
    CHECK_PLAN_OK(fmk_plan_eval(plan, NULL, pot, NULL), plan);
    CHECK(untouched(pot, 6));

    check_context("%s, M = 0", fmk_kernel_name(k));
    CHECK_PLAN_OK(fmk_plan_set_points(plan, 2, src, 0, trg), plan); /* targets given, none */
    fill(pot, 6), fill(grad, 9);
    CHECK_PLAN_OK(fmk_plan_eval(plan, q, pot, grad), plan);
    CHECK(untouched(pot, 6) && untouched(grad, 9));
    fmk_info info;
    CHECK_STATUS(fmk_plan_info(plan, &info), FMK_OK);
    CHECK(info.n_sources == 2 && info.n_targets == 0);

    for (int n = 1; n <= 2; n++) {
        for (int self = 0; self < 2; self++) {
            check_context("%s, N = %d, %s", fmk_kernel_name(k), n,
                          self ? "targets = sources" : "3 targets");
            const int64_t m = self ? n : 3;
            CHECK_PLAN_OK(fmk_plan_set_points(plan, n, src, self ? 0 : 3, self ? NULL : trg), plan);
            CHECK_PLAN_OK(fmk_plan_eval(plan, q, pot, grad), plan);
            test_reference(k, 0.05, n, src, q, m, self ? NULL : trg, rp, rg);
            CHECK_LE(test_rel_l2(pot, rp, m * cw), 1e-14, "potential error");
            CHECK_LE(test_rel_l2(grad, rg, m * gw), 1e-14, "gradient error");
        }
    }
    fmk_plan_destroy(plan);
}

/* eval_many with 3 vectors equals 3 evals; a bad vector leaves every output untouched. */
static void eval_many(fmk_kernel k)
{
    const int dim = fmk_kernel_dim(k), cw = test_pot_width(k), gw = test_grad_width(k);
    const int64_t n = 120, m = 70;
    double *src = test_alloc(n * dim), *trg = test_alloc(m * dim), *q = test_alloc(3 * n * cw);
    double *pot = test_alloc(3 * m * cw), *grad = test_alloc(3 * m * gw);
    double *p1 = test_alloc(m * cw), *g1 = test_alloc(m * gw);
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n, 5, src);
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, m, 6, trg);
    test_charges(3 * n, cw == 2, 7, q);
    fmk_plan *plan = make_plan(k, 2);
    if (!plan)
        return;
    check_context("%s, eval_many with 3 vectors", fmk_kernel_name(k));
    CHECK_PLAN_OK(fmk_plan_set_points(plan, n, src, m, trg), plan);
    CHECK_PLAN_OK(fmk_plan_eval_many(plan, 3, q, pot, grad), plan);
    for (int v = 0; v < 3; v++) {
        CHECK_PLAN_OK(fmk_plan_eval(plan, q + v * n * cw, p1, g1), plan);
        CHECK_MSG(test_rel_l2(pot + v * m * cw, p1, m * cw) <= 1e-15,
                  "vector %d: potential differs from a single eval", v);
        CHECK_MSG(test_rel_l2(grad + v * m * gw, g1, m * gw) <= 1e-15,
                  "vector %d: gradient differs from a single eval", v);
    }
    /* only one output */
    fill(grad, 3 * m * gw);
    CHECK_PLAN_OK(fmk_plan_eval_many(plan, 3, q, NULL, grad), plan);
    CHECK_PLAN_OK(fmk_plan_eval(plan, q + 2 * n * cw, NULL, g1), plan);
    CHECK(test_rel_l2(grad + 2 * m * gw, g1, m * gw) <= 1e-15);

    check_context("%s, eval_many with 0 vectors", fmk_kernel_name(k));
    fill(pot, 3 * m * cw);
    CHECK_PLAN_OK(fmk_plan_eval_many(plan, 0, q, pot, NULL), plan);
    CHECK(untouched(pot, 3 * m * cw));

    for (int bad_vector = 1; bad_vector <= 2; bad_vector++) {
        check_context("%s, eval_many with NaN in vector %d", fmk_kernel_name(k), bad_vector);
        double *where = q + bad_vector * n * cw + 17 * cw;
        double keep = *where;
        *where = NAN;
        fill(pot, 3 * m * cw), fill(grad, 3 * m * gw);
        CHECK_STATUS(fmk_plan_eval_many(plan, 3, q, pot, grad), FMK_ERR_NONFINITE);
        CHECK_MSG(mentions(plan, "charges[17]"), "message \"%s\" does not name charges[17]",
                  fmk_plan_last_error(plan));
        CHECK(untouched(pot, 3 * m * cw) && untouched(grad, 3 * m * gw));
        *where = keep;
    }
    fmk_plan_destroy(plan);
    free(src), free(trg), free(q), free(pot), free(grad), free(p1), free(g1);
}

/* fmk_plan_memory before set_points predicts what fmk_plan_info reports after it;
 * fmk_plan_info describes the plan. */
static void memory_and_info(fmk_kernel k)
{
    const int dim = fmk_kernel_dim(k), cw = test_pot_width(k);
    const int64_t n = 200, m = 100; /* below every crossover of method auto: the direct sum */
    double *src = test_alloc(n * dim), *trg = test_alloc(m * dim), *q = test_alloc(2 * n);
    double *pot = test_alloc(n * cw);
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n, 8, src);
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, m, 9, trg);
    test_charges(n, cw == 2, 10, q);
    fmk_opts o;
    fmk_opts_default(&o); /* AUTO method and backend */
    o.threads = 2;
    o.softening = 0.05;
    fmk_plan *plan = NULL;
    check_context("%s, info and memory", fmk_kernel_name(k));
    CHECK_STATUS(fmk_plan_create(&plan, dim, k, 1e-4, &o), FMK_OK);
    if (!plan)
        return;
    fmk_info info;
    CHECK_STATUS(fmk_plan_info(plan, &info), FMK_OK);
    CHECK(info.dim == dim && info.kernel == k && info.eps == 1e-4);
    CHECK(info.method == FMK_METHOD_DIRECT);
    if (fmk_cuda_device_count() == 0) {
        CHECK(info.backend == FMK_BACKEND_CPU);
        CHECK_MSG(strcmp(info.device_name, "cpu (2 threads)") == 0, "device_name \"%s\"",
                  info.device_name);
    }
    CHECK(info.n_sources == 0 && info.n_targets == 0 && info.bytes_host == 0);
    if (info.backend != FMK_BACKEND_CPU) {
        fmk_plan_destroy(plan);
        return; /* the rest is about the CPU engine */
    }

    int64_t h_self, d_self, h_sep, d_sep, h_small, d_small;
    CHECK_STATUS(fmk_plan_memory(plan, n, -1, &h_self, &d_self), FMK_OK);
    CHECK_STATUS(fmk_plan_memory(plan, n, m, &h_sep, &d_sep), FMK_OK);
    CHECK_STATUS(fmk_plan_memory(plan, n / 2, -1, &h_small, &d_small), FMK_OK);
    CHECK(h_self > 0 && d_self == 0 && d_sep == 0);
    CHECK(h_small < h_self);
    CHECK(h_self >= (int64_t)(n * dim * sizeof(double))); /* at least the copied points */

    CHECK_PLAN_OK(fmk_plan_set_points(plan, n, src, 0, NULL), plan);
    CHECK_PLAN_OK(fmk_plan_eval(plan, q, pot, NULL), plan);
    CHECK_STATUS(fmk_plan_info(plan, &info), FMK_OK);
    CHECK(info.n_sources == n && info.n_targets == n);
    CHECK_MSG(info.bytes_host == h_self, "bytes_host %lld, fmk_plan_memory predicted %lld",
              (long long)info.bytes_host, (long long)h_self);
    CHECK(info.bytes_device == 0);
    CHECK(info.order == 0 && info.levels == 0 && info.leaf_size == 0 && info.theta == 0);
    CHECK(info.precision == FMK_PRECISION_FP64);
    int times_ok = 1;
    for (int p = 0; p < FMK_PHASE_COUNT; p++)
        times_ok &= isfinite(info.phase_time[p]) && info.phase_time[p] >= 0;
    CHECK_MSG(times_ok, "a phase time is negative or not finite");
    for (int p = FMK_PHASE_DOWNLOAD + 1; p < FMK_PHASE_COUNT; p++)
        CHECK_MSG(info.phase_time[p] == 0, "unused phase slot %d = %g", p, info.phase_time[p]);
    for (int p = FMK_PHASE_P2M; p <= FMK_PHASE_L2P; p++)
        CHECK_MSG(info.phase_time[p] == 0, "direct method has %s time %g", fmk_phase_name(p),
                  info.phase_time[p]);

    CHECK_PLAN_OK(fmk_plan_set_points(plan, n, src, m, trg), plan);
    CHECK_STATUS(fmk_plan_info(plan, &info), FMK_OK);
    CHECK(info.n_sources == n && info.n_targets == m);
    CHECK_MSG(info.bytes_host == h_sep, "bytes_host %lld, fmk_plan_memory predicted %lld",
              (long long)info.bytes_host, (long long)h_sep);
    fmk_plan_destroy(plan);
    free(src), free(trg), free(q), free(pot);
}

/* A set_points that fails validation leaves the earlier points in place. */
static void failed_set_points_keeps_points(fmk_kernel k)
{
    const int dim = fmk_kernel_dim(k), cw = test_pot_width(k), gw = test_grad_width(k);
    const int64_t n = 100;
    double *src = test_alloc(n * dim), *q = test_alloc(2 * n), *bad = test_alloc(n * dim);
    double *p0 = test_alloc(n * cw), *g0 = test_alloc(n * gw);
    double *p1 = test_alloc(n * cw), *g1 = test_alloc(n * gw);
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n, 11, src);
    test_charges(n, cw == 2, 12, q);
    fmk_plan *plan = make_plan(k, 0);
    if (!plan)
        return;
    check_context("%s, failed set_points", fmk_kernel_name(k));
    CHECK_PLAN_OK(fmk_plan_set_points(plan, n, src, 0, NULL), plan);
    CHECK_PLAN_OK(fmk_plan_eval(plan, q, p0, g0), plan);

    memcpy(bad, src, sizeof(double) * n * dim);
    bad[5] = NAN; /* non-finite point */
    CHECK_STATUS(fmk_plan_set_points(plan, n, bad, 0, NULL), FMK_ERR_NONFINITE);
    CHECK_STATUS(fmk_plan_set_points(plan, -3, src, 0, NULL), FMK_ERR_ARG);
    CHECK_STATUS(fmk_plan_set_points(plan, n, src, 4, NULL), FMK_ERR_NULL);
    bad[5] = 0, bad[0] = -1e308, bad[dim] = 1e308; /* an axis longer than the largest double */
    CHECK_STATUS(fmk_plan_set_points(plan, n, bad, 0, NULL), FMK_ERR_ARG);
    CHECK(fmk_plan_last_error(plan)[0] != '\0');
    bad[0] = 0; /* an axis of 1e308: no power of two at or above it is a double */
    CHECK_STATUS(fmk_plan_set_points(plan, n, bad, 0, NULL), FMK_ERR_ARG);
    CHECK(fmk_plan_last_error(plan)[0] != '\0');
    if (k == FMK_KERNEL_PLUMMER || k == FMK_KERNEL_REGULARIZED) {
        bad[dim] = 1e15; /* softening 0.05 below 1e-15 of the box */
        CHECK_STATUS(fmk_plan_set_points(plan, n, bad, 0, NULL), FMK_ERR_ARG);
        CHECK_MSG(mentions(plan, "softening"), "message \"%s\" does not mention the softening",
                  fmk_plan_last_error(plan));
    }
    fmk_info info;
    CHECK_STATUS(fmk_plan_info(plan, &info), FMK_OK);
    CHECK(info.n_sources == n && info.n_targets == n);
    CHECK_PLAN_OK(fmk_plan_eval(plan, q, p1, g1), plan);
    CHECK(test_rel_l2(p1, p0, n * cw) == 0 && test_rel_l2(g1, g0, n * gw) == 0);
    fmk_plan_destroy(plan);
    free(src), free(q), free(bad), free(p0), free(g0), free(p1), free(g1);
}

/* Points are copied: changing the caller's arrays after set_points changes nothing. */
static void points_are_copied(void)
{
    const int64_t n = 64;
    double *src = test_alloc(3 * n), *q = test_alloc(n), *p0 = test_alloc(n), *p1 = test_alloc(n);
    test_points(TEST_DIST_CUBE, n, 13, src);
    test_charges(n, 0, 13, q);
    fmk_plan *plan = make_plan(FMK_KERNEL_LAPLACE, 1);
    if (!plan)
        return;
    check_context("points are copied");
    CHECK_PLAN_OK(fmk_plan_set_points(plan, n, src, 0, NULL), plan);
    CHECK_PLAN_OK(fmk_plan_eval(plan, q, p0, NULL), plan);
    for (int64_t i = 0; i < 3 * n; i++)
        src[i] = 1e6;
    CHECK_PLAN_OK(fmk_plan_eval(plan, q, p1, NULL), plan);
    CHECK(test_rel_l2(p1, p0, n) == 0);
    fmk_plan_destroy(plan);
    free(src), free(q), free(p0), free(p1);
}

/* set_points again with the same sizes (the plan keeps its host copies) and new points, with
 * and without separate targets, gives what a fresh plan gives. */
static void set_points_again(void)
{
    const int64_t n = 50, m = 20;
    double *a = test_alloc(3 * n), *b = test_alloc(3 * n), *t1 = test_alloc(3 * m),
           *t2 = test_alloc(3 * m), *q = test_alloc(n);
    double *p0 = test_alloc(n), *p1 = test_alloc(n), *g0 = test_alloc(3 * n),
           *g1 = test_alloc(3 * n);
    test_points(TEST_DIST_CUBE, n, 21, a);
    test_points(TEST_DIST_PLUMMER, n, 22, b);
    test_points(TEST_DIST_CUBE, m, 23, t1);
    test_points(TEST_DIST_PLUMMER, m, 24, t2);
    test_charges(n, 0, 25, q);
    fmk_plan *plan = make_plan(FMK_KERNEL_LAPLACE, 1), *fresh = make_plan(FMK_KERNEL_LAPLACE, 1);
    if (!plan || !fresh)
        return;
    check_context("set_points again, same sizes");
    /* (sources, targets) in turn: a then b at the sources, a with t1 then b with t2, then b at
     * the sources again (n targets, as before, but no separate array) */
    const double *srcs[] = {a, b, a, b, b};
    const double *trgs[] = {NULL, NULL, t1, t2, NULL};
    for (int k = 0; k < 5; k++) {
        const int64_t nt = trgs[k] ? m : 0, mo = trgs[k] ? m : n;
        CHECK_PLAN_OK(fmk_plan_set_points(plan, n, srcs[k], nt, trgs[k]), plan);
        CHECK_PLAN_OK(fmk_plan_eval(plan, q, p0, g0), plan);
        CHECK_PLAN_OK(fmk_plan_set_points(fresh, n, srcs[k], nt, trgs[k]), fresh);
        CHECK_PLAN_OK(fmk_plan_eval(fresh, q, p1, g1), fresh);
        CHECK_MSG(test_rel_l2(p0, p1, mo) == 0 && test_rel_l2(g0, g1, 3 * mo) == 0,
                  "case %d differs from a fresh plan", k);
        fmk_plan_destroy(fresh);
        fresh = make_plan(FMK_KERNEL_LAPLACE, 1);
        if (!fresh)
            break;
    }
    fmk_plan_destroy(plan), fmk_plan_destroy(fresh);
    free(a), free(b), free(t1), free(t2), free(q), free(p0), free(p1), free(g0), free(g1);
}

/* A non-finite coordinate deep in a large set (the check runs on the plan's threads) is
 * reported at its own index. */
static void nonfinite_large(void)
{
    const int64_t n = 30000, at = 23456;
    double *x = test_alloc(3 * n);
    test_points(TEST_DIST_CUBE, n, 31, x);
    x[3 * at + 1] = INFINITY;
    x[3 * (at + 100) + 2] = NAN; /* a later one: the first is reported */
    fmk_plan *plan = make_plan(FMK_KERNEL_LAPLACE, 0);
    if (!plan)
        return;
    check_context("non-finite point in a large set");
    CHECK_STATUS(fmk_plan_set_points(plan, n, x, 0, NULL), FMK_ERR_NONFINITE);
    CHECK_MSG(mentions(plan, "sources[23456][1]"), "message \"%s\"", fmk_plan_last_error(plan));
    fmk_plan_destroy(plan);
    free(x);
}

/* The one-shot call equals a plan's result. */
static void one_shot(fmk_kernel k)
{
    const int dim = fmk_kernel_dim(k), cw = test_pot_width(k), gw = test_grad_width(k);
    const int64_t n = 80, m = 30;
    double *src = test_alloc(n * dim), *trg = test_alloc(m * dim), *q = test_alloc(2 * n);
    double *p0 = test_alloc(m * cw), *g0 = test_alloc(m * gw), *p1 = test_alloc(m * cw),
           *g1 = test_alloc(m * gw);
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n, 14, src);
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, m, 15, trg);
    test_charges(n, cw == 2, 16, q);
    fmk_opts o;
    fmk_opts_default(&o);
    o.backend = FMK_BACKEND_CPU;
    o.softening = 0.05;
    check_context("%s, one-shot", fmk_kernel_name(k));
    CHECK_STATUS(fmk_eval(dim, k, 1e-6, &o, n, src, q, m, trg, p0, g0), FMK_OK);
    CHECK_STATUS(test_run(k, FMK_PRECISION_FP64, 0, 0.05, n, src, q, m, trg, p1, g1), FMK_OK);
    CHECK(test_rel_l2(p0, p1, m * cw) <= 1e-15 && test_rel_l2(g0, g1, m * gw) <= 1e-15);
    free(src), free(trg), free(q), free(p0), free(g0), free(p1), free(g1);
}

static void names(void)
{
    check_context("names");
    for (int k = 1; k <= 5; k++) {
        const char *name = fmk_kernel_name((fmk_kernel)k);
        fmk_kernel back = (fmk_kernel)0;
        CHECK(name != NULL);
        CHECK_STATUS(fmk_kernel_from_name(name, &back), FMK_OK);
        CHECK(back == (fmk_kernel)k);
    }
    CHECK(strcmp(fmk_kernel_name(FMK_KERNEL_LAPLACE), "laplace") == 0);
    CHECK(strcmp(fmk_kernel_name(FMK_KERNEL_CAUCHY2D), "cauchy2d") == 0);
    CHECK(fmk_kernel_name((fmk_kernel)0) == NULL && fmk_kernel_name((fmk_kernel)6) == NULL);
    CHECK(fmk_kernel_name((fmk_kernel)-1) == NULL);
    for (int m = 0; m <= 3; m++) {
        const char *name = fmk_method_name((fmk_method)m);
        fmk_method back = (fmk_method)-1;
        CHECK(name != NULL);
        CHECK_STATUS(fmk_method_from_name(name, &back), FMK_OK);
        CHECK(back == (fmk_method)m);
    }
    CHECK(fmk_method_name((fmk_method)4) == NULL && fmk_method_name((fmk_method)-1) == NULL);
    for (int b = 0; b <= 2; b++) {
        const char *name = fmk_backend_name((fmk_backend)b);
        fmk_backend back = (fmk_backend)-1;
        CHECK(name != NULL);
        CHECK_STATUS(fmk_backend_from_name(name, &back), FMK_OK);
        CHECK(back == (fmk_backend)b);
    }
    CHECK(fmk_backend_name((fmk_backend)3) == NULL);
    const char *phases[] = {"setup", "upload", "p2m", "m2m",     "m2l",
                            "l2l",   "l2p",    "p2p", "download"};
    for (int p = 0; p <= FMK_PHASE_DOWNLOAD; p++) {
        const char *name = fmk_phase_name((fmk_phase)p);
        CHECK_MSG(name && strcmp(name, phases[p]) == 0, "phase %d is \"%s\"", p,
                  name ? name : "(null)");
    }
    CHECK(fmk_phase_name((fmk_phase)-1) == NULL && fmk_phase_name(FMK_PHASE_COUNT) == NULL);

    fmk_kernel k = FMK_KERNEL_LAPLACE;
    fmk_method m = FMK_METHOD_DIRECT;
    fmk_backend b = FMK_BACKEND_CPU;
    CHECK_STATUS(fmk_kernel_from_name("coulomb", &k), FMK_ERR_ARG);
    CHECK(fmk_plan_last_error(NULL)[0] != '\0');
    CHECK_STATUS(fmk_kernel_from_name("Laplace", &k), FMK_ERR_ARG);
    CHECK_STATUS(fmk_kernel_from_name("", &k), FMK_ERR_ARG);
    CHECK_STATUS(fmk_kernel_from_name(NULL, &k), FMK_ERR_ARG);
    CHECK_STATUS(fmk_kernel_from_name("laplace", NULL), FMK_ERR_NULL);
    CHECK_STATUS(fmk_method_from_name("barnes-hut", &m), FMK_ERR_ARG);
    CHECK_STATUS(fmk_method_from_name("fmm", NULL), FMK_ERR_NULL);
    CHECK_STATUS(fmk_backend_from_name("opencl", &b), FMK_ERR_ARG);
    CHECK_STATUS(fmk_backend_from_name("cpu", NULL), FMK_ERR_NULL);
    CHECK(k == FMK_KERNEL_LAPLACE && m == FMK_METHOD_DIRECT && b == FMK_BACKEND_CPU);

    for (int i = 0; i < 5; i++) {
        CHECK(fmk_kernel_dim(kernels[i]) == (i < 3 ? 3 : 2));
        CHECK(fmk_kernel_is_complex(kernels[i]) == (kernels[i] == FMK_KERNEL_CAUCHY2D));
    }
    CHECK(fmk_kernel_dim((fmk_kernel)0) == 0 && fmk_kernel_dim((fmk_kernel)9) == 0);

    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", FMK_VERSION_MAJOR, FMK_VERSION_MINOR,
             FMK_VERSION_PATCH);
    CHECK_MSG(strcmp(fmk_version(), version) == 0, "fmk_version() \"%s\", header %s", fmk_version(),
              version);
    CHECK(fmk_cuda_device_count() >= 0);
}

/* Points in a box of subnormal size (found by fuzzing: the frame's 1/width overflowed to Inf and
 * mapped a point to NaN): every method gives a status (its pairs 1e-317 apart overflow) or
 * finite results, and no undefined behaviour (the sanitizer build). */
static void subnormal_box(fmk_kernel k)
{
    const int dim = fmk_kernel_dim(k), cw = test_pot_width(k);
    double x[3 * 5] = {0}, q[2 * 5], pot[2 * 5], grad[3 * 5];
    x[0] = 8.03e-317; /* the rest at the origin */
    test_charges(5, cw == 2, 61, q);
    const fmk_method methods[3] = {FMK_METHOD_DIRECT, FMK_METHOD_TREE, FMK_METHOD_FMM};
    for (int m = 0; m < 3; m++) {
        if (!fmk_method_available(methods[m], dim, FMK_BACKEND_CPU))
            continue;
        fmk_opts o;
        fmk_opts_default(&o);
        o.backend = FMK_BACKEND_CPU, o.method = methods[m], o.softening = 0.05;
        check_context("%s, %s, a subnormal box", fmk_kernel_name(k), fmk_method_name(methods[m]));
        fmk_plan *plan = NULL;
        fmk_status st = fmk_plan_create(&plan, dim, k, 1e-3, &o);
        if (st == FMK_ERR_UNAVAILABLE) /* a kernel the method does not take */
            continue;
        CHECK_STATUS(st, FMK_OK);
        if (!plan)
            continue;
        st = fmk_plan_set_points(plan, 5, x, 0, NULL);
        if (st == FMK_OK)
            st = fmk_plan_eval(plan, q, pot, grad);
        CHECK_MSG(st == FMK_OK || st == FMK_ERR_ACCURACY || st == FMK_ERR_NONFINITE,
                  "status %d: %s", (int)st, fmk_plan_last_error(plan));
        if (st == FMK_OK) {
            int finite = 1;
            for (int i = 0; i < 5 * cw; i++)
                finite &= isfinite(pot[i]);
            CHECK(finite);
        }
        fmk_plan_destroy(plan);
    }
}

/* Two points given 1.7e-17 apart in a frame 4 wide map to one point (found by fuzzing: the 2D
 * FMM dropped their pair as coincident and returned a potential 100% off with success): the
 * fast methods refuse such points (the resolution guard compares the caller's points where
 * two map to one); the same points given equal are fine. */
static void collapsed_pair(fmk_kernel k)
{
    const int dim = fmk_kernel_dim(k), cw = test_pot_width(k);
    if (k == FMK_KERNEL_PLUMMER || k == FMK_KERNEL_REGULARIZED)
        return; /* smooth: the pair's term is flat at that distance */
    enum { N = 40 };
    double x[3 * N], q[2 * N], pot[2 * N];
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, N, 71, x);
    for (int i = 0; i < N * dim; i++)
        x[i] = 4 * x[i] - 2;
    test_charges(N, cw == 2, 72, q);
    for (int c = 0; c < dim; c++)
        x[c] = 0, x[dim + c] = -1.2e-17; /* points 0 and 1 */
    const fmk_method methods[2] = {FMK_METHOD_TREE, FMK_METHOD_FMM};
    for (int m = 0; m < 2; m++) {
        if (!fmk_method_available(methods[m], dim, FMK_BACKEND_CPU))
            continue;
        fmk_opts o;
        fmk_opts_default(&o);
        o.backend = FMK_BACKEND_CPU, o.method = methods[m];
        fmk_plan *plan = NULL;
        if (fmk_plan_create(&plan, dim, k, 1e-3, &o) != FMK_OK)
            continue; /* a kernel the method does not take */
        check_context("%s, %s, a pair 1.7e-17 apart", fmk_kernel_name(k),
                      fmk_method_name(methods[m]));
        CHECK_STATUS(fmk_plan_set_points(plan, N, x, 0, NULL), FMK_ERR_ACCURACY);
        for (int c = 0; c < dim; c++)
            x[dim + c] = 0; /* given equal: coincident, fine */
        CHECK_STATUS(fmk_plan_set_points(plan, N, x, 0, NULL), FMK_OK);
        CHECK_STATUS(fmk_plan_eval(plan, q, pot, NULL), FMK_OK);
        for (int c = 0; c < dim; c++)
            x[dim + c] = -1.2e-17;
        fmk_plan_destroy(plan);
    }
}

/* Method auto picks the engine at set_points from the sizes (core/choose.c): the direct sum
 * for few points or few targets, the FMM for many, back and forth on one plan, with info and
 * fmk_plan_memory following; the expert options are refused with auto and where the chosen
 * method does not take them. */
static void auto_method(fmk_kernel k)
{
    const int dim = fmk_kernel_dim(k), cw = test_pot_width(k);
    const int64_t big = 20000, few = 8;
    double *src = test_alloc(big * dim), *q = test_alloc(2 * big), *pot = test_alloc(big * cw);
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, big, 21, src);
    test_charges(big, cw == 2, 22, q);
    fmk_opts o;
    fmk_opts_default(&o);
    /* a softening small against the cube: the smooth kernels' FMM can go deep */
    o.backend = FMK_BACKEND_CPU, o.threads = 2, o.softening = 1e-4;
    fmk_plan *plan = NULL;
    check_context("%s, method auto", fmk_kernel_name(k));
    CHECK_STATUS(fmk_plan_create(&plan, dim, k, 1e-6, &o), FMK_OK);
    if (!plan)
        return;
    const int64_t sizes[4] = {100, big, 100, big};
    for (int r = 0; r < 4; r++) {
        const int64_t n = sizes[r];
        int64_t h, d;
        CHECK_STATUS(fmk_plan_memory(plan, n, -1, &h, &d), FMK_OK);
        CHECK_PLAN_OK(fmk_plan_set_points(plan, n, src, 0, NULL), plan);
        CHECK_PLAN_OK(fmk_plan_eval(plan, q, pot, NULL), plan);
        fmk_info info;
        CHECK_STATUS(fmk_plan_info(plan, &info), FMK_OK);
        const fmk_method want = n == big ? FMK_METHOD_FMM : FMK_METHOD_DIRECT;
        CHECK_MSG(info.method == want, "N = %lld: method %s", (long long)n,
                  fmk_method_name(info.method));
        CHECK_MSG(want == FMK_METHOD_DIRECT ? info.order == 0 : info.order > 0, "order %d",
                  (int)info.order);
        CHECK_MSG(want == FMK_METHOD_FMM || info.bytes_host == h,
                  "N = %lld: bytes_host %lld, fmk_plan_memory predicted %lld", (long long)n,
                  (long long)info.bytes_host, (long long)h);
    }
    /* many sources, few targets: the direct sum */
    CHECK_PLAN_OK(fmk_plan_set_points(plan, big, src, few, src), plan);
    fmk_info info;
    CHECK_STATUS(fmk_plan_info(plan, &info), FMK_OK);
    CHECK_MSG(info.method == FMK_METHOD_DIRECT, "%lld sources, %lld targets: method %s",
              (long long)big, (long long)few, fmk_method_name(info.method));
    fmk_plan_destroy(plan);
    if (k == FMK_KERNEL_PLUMMER || k == FMK_KERNEL_REGULARIZED) {
        /* a softening of 5% of the cube: the FMM could not go deeper than a few levels (its far
         * field starts at s / sqrt(eps) or s / eps^(1/4)): the treecode where it meets eps (not
         * at 1e-6 on the CPU), else the direct sum */
        fmk_opts w = o;
        w.softening = 0.05;
        CHECK_STATUS(fmk_plan_create(&plan, dim, k, 1e-6, &w), FMK_OK);
        CHECK_PLAN_OK(fmk_plan_set_points(plan, big, src, 0, NULL), plan);
        CHECK_STATUS(fmk_plan_info(plan, &info), FMK_OK);
        CHECK_MSG(info.method == FMK_METHOD_DIRECT, "softening 0.05, eps 1e-6: method %s",
                  fmk_method_name(info.method));
        fmk_plan_destroy(plan);
        if (k == FMK_KERNEL_PLUMMER) { /* at 1e-3 the treecode */
            CHECK_STATUS(fmk_plan_create(&plan, dim, k, 1e-3, &w), FMK_OK);
            CHECK_PLAN_OK(fmk_plan_set_points(plan, big, src, 0, NULL), plan);
            CHECK_STATUS(fmk_plan_info(plan, &info), FMK_OK);
            CHECK_MSG(info.method == FMK_METHOD_TREE, "softening 0.05, eps 1e-3: method %s",
                      fmk_method_name(info.method));
            fmk_plan_destroy(plan);
        }
    }

    fmk_opts e = o;
    e.theta = 0.5; /* auto with an expert option */
    CHECK_STATUS(fmk_plan_create(&plan, dim, k, 1e-6, &e), FMK_ERR_ARG);
    e.method = FMK_METHOD_DIRECT; /* the direct sum takes none */
    CHECK_STATUS(fmk_plan_create(&plan, dim, k, 1e-6, &e), FMK_ERR_ARG);
    e.method = FMK_METHOD_FMM; /* nor does the FMM take theta */
    CHECK_STATUS(fmk_plan_create(&plan, dim, k, 1e-6, &e), FMK_ERR_ARG);
    e.theta = 0, e.order = 8; /* but the FMM takes an order */
    CHECK_STATUS(fmk_plan_create(&plan, dim, k, 1e-6, &e), FMK_OK);
    fmk_plan_destroy(plan);
    free(src), free(q), free(pot);
}

int main(void)
{
    for (int i = 0; i < 5; i++) {
        nonfinite(kernels[i]);
        tiny_sets(kernels[i]);
        eval_many(kernels[i]);
        memory_and_info(kernels[i]);
        auto_method(kernels[i]);
        subnormal_box(kernels[i]);
        collapsed_pair(kernels[i]);
        failed_set_points_keeps_points(kernels[i]);
        one_shot(kernels[i]);
    }
    points_are_copied();
    set_points_again();
    nonfinite_large();
    names();
    return check_summary();
}
