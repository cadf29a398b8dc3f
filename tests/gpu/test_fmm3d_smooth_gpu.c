/* test_fmm3d_smooth_gpu.c -- the 3D FMM on the GPU (method fmm, backend cuda) with the smooth
 * kernels plummer and regularized: the exact kernel in the near field, laplace expansions in the
 * far field, the tree cut at the deepest level whose boxes are at least d_min = s / sqrt(eps)
 * (plummer) or s / eps^(1/4) (regularized) wide (docs/fmm3d.md section 8.1; fmm3d.h,
 * fmk_fmm3d_max_level), as the CPU engine does.
 *
 *   accuracy  against the direct sum in fp64 (method direct on the CPU): relative l2 error of the
 *             potential <= eps and of the gradient <= 10 eps (the 3D FMM's bound, both engines)
 *             for eps 1e-3, 1e-6, 1e-9 on five sets (uniform, Plummer sphere, a 16^3 grid with
 *             the softening equal to its spacing, coincident groups, clusters nested over 30
 *             octaves), targets = sources and separate targets (a tenth of them on sources: the
 *             kernel's G(0) counts there), one charge vector (eval) and three (eval_many); the
 *             worst of the vectors is printed and checked;
 *   vs_cpu    against the CPU engine at the same order and leaf size (every W and X entry on its
 *             operator, the root cube not fitted): the same cut tree (levels equal) and the same
 *             sums to rounding (1e-12), and the finest boxes at least d_min wide;
 *   coincident  two coincident sources and a third point, by hand: q G(0) from the other
 *             coincident source (targets = sources: not from itself), G(0) = 1/s or 3/(2s);
 *   fp32      precision fp32 (P2P in fp32), eps 1e-3 and 1e-5, against the fp64 direct sum.
 *
 * Every case prints its errors beside the bound. Run: test_fmm3d_smooth_gpu [--cpu] [--quick]
 * [test ...] (--quick: fewer points, for compute-sanitizer)
 * (coincident, vs_cpu, accuracy, fp32; all by default). Exit 77 without a CUDA device; --cpu
 * runs every case on the CPU engine instead (the cases and bounds checked without a GPU). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/tune.h"
#include "../unit/check.h"
#include "../unit/testutil.h"

enum { UNIFORM, PLUMMER, GRID, COINCIDENT, NESTED, N_SETS };
static const char *set_name[N_SETS] = {"uniform", "Plummer", "grid 16^3", "coincident", "nested"};
static const fmk_kernel kernels[2] = {FMK_KERNEL_PLUMMER, FMK_KERNEL_REGULARIZED};
/* The backend under test: cuda, or with --cpu the CPU engine (the test's own cases and bounds
 * checked on a machine without a GPU; vs_cpu then compares the CPU with itself). */
static fmk_backend tested = FMK_BACKEND_CUDA;
/* --quick: fewer points (compute-sanitizer's memcheck runs every GPU test so) */
static int quick;

/* n points of a set into x (n, 3) (the grid: 16 x 16 x n/256); returns the softening: 1e-3 of the
 * box (uniform, coincident groups, nested clusters), 1e-5 of it (the Plummer sphere, cut at
 * radius 4: the far field at every eps), the spacing (the grid). */
static double make_points(int set, int64_t n, uint64_t seed, double *x)
{
    test_rng r = test_rng_seed(seed);
    switch (set) {
    case UNIFORM: test_points(TEST_DIST_CUBE, n, seed, x); return 1e-3;
    case PLUMMER: test_points(TEST_DIST_PLUMMER, n, seed, x); return 8e-5;
    case GRID:
        for (int64_t i = 0; i < n; i++) {
            x[3 * i] = (double)(i % 16) / 16;
            x[3 * i + 1] = (double)(i / 16 % 16) / 16;
            x[3 * i + 2] = (double)(i / 256) / 16;
        }
        return 1.0 / 16;
    case COINCIDENT: /* a fifth of the points in 8 groups at one place each */
        test_points(TEST_DIST_CUBE, n, seed, x);
        for (int64_t i = 0; i < n / 5; i++)
            memcpy(x + 3 * i, x + 3 * (n / 5 + i % 8), 24);
        return 1e-3;
    default: /* x = rand(n, 3) * 2^-randint(0, 30) */
        for (int64_t i = 0; i < n; i++) {
            const double w = ldexp(1.0, -(int)(30 * test_uniform(&r)));
            for (int k = 0; k < 3; k++)
                x[3 * i + k] = w * test_uniform(&r);
        }
        return 1e-3;
    }
}

/* m separate targets for the sources x (n): uniform in the sources' bounding box, every tenth
 * one on a source. */
static void make_targets(int64_t n, const double *x, int64_t m, uint64_t seed, double *y)
{
    double lo[3] = {x[0], x[1], x[2]}, hi[3] = {x[0], x[1], x[2]};
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            lo[k] = fmin(lo[k], x[3 * i + k]), hi[k] = fmax(hi[k], x[3 * i + k]);
    test_rng r = test_rng_seed(seed);
    for (int64_t i = 0; i < m; i++) {
        for (int k = 0; k < 3; k++)
            y[3 * i + k] = lo[k] + (hi[k] - lo[k]) * test_uniform(&r);
        if (i % 10 == 0)
            memcpy(y + 3 * i, x + 3 * ((i * 7) % n), 24);
    }
}

/* A call that must succeed (its message printed by run()). */
static int check_ok(fmk_status st)
{
    return CHECK_MSG(st == FMK_OK, "status %d (%s)", (int)st, fmk_status_string(st));
}

static fmk_opts base_opts(fmk_method method, fmk_backend backend, double softening)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = method;
    o.backend = backend;
    o.softening = softening;
    return o;
}

/* nv charge vectors through one plan (eval for nv = 1, else eval_many): pot (nv m), grad
 * (3 nv m); y NULL: at the sources. knobs: (name, value) pairs set after creation, NULL-ended. */
static fmk_status run(fmk_kernel kernel, double eps, const fmk_opts *o, const char *const *knobs,
                      const double *values, int64_t n, const double *x, int64_t m, const double *y,
                      int nv, const double *q, double *pot, double *grad, fmk_info *info)
{
    fmk_plan *p = NULL;
    fmk_status st = fmk_plan_create(&p, 3, kernel, eps, o);
    for (int k = 0; st == FMK_OK && knobs && knobs[k]; k++)
        st = fmk_plan_tune(p, knobs[k], values[k]);
    if (st == FMK_OK)
        st = fmk_plan_set_points(p, n, x, y ? m : 0, y);
    if (st == FMK_OK)
        st = nv == 1 ? fmk_plan_eval(p, q, pot, grad) : fmk_plan_eval_many(p, nv, q, pot, grad);
    if (st != FMK_OK)
        printf("  run: %s\n", fmk_plan_last_error(p));
    if (info && p)
        fmk_plan_info(p, info);
    fmk_plan_destroy(p);
    return st;
}

/* The fp64 direct sum on the CPU (the reference) of nv vectors. */
static void reference(fmk_kernel kernel, double softening, int64_t n, const double *x, int64_t m,
                      const double *y, int nv, const double *q, double *pot, double *grad)
{
    const fmk_opts o = base_opts(FMK_METHOD_DIRECT, FMK_BACKEND_CPU, softening);
    CHECK_STATUS(run(kernel, 1e-6, &o, NULL, NULL, n, x, m, y, nv, q, pot, grad, NULL), FMK_OK);
}

/* The worst over nv vectors (m targets each) of the relative l2 errors of pot and grad. */
static void errors(int nv, int64_t m, const double *pot, const double *grad, const double *rp,
                   const double *rg, double err[2])
{
    err[0] = err[1] = 0;
    for (int v = 0; v < nv; v++) {
        err[0] = fmax(err[0], test_rel_l2(pot + v * m, rp + v * m, m));
        err[1] = fmax(err[1], test_rel_l2(grad + 3 * v * m, rg + 3 * v * m, 3 * m));
    }
}

/* Each kernel, set, targets = sources or apart, eps and vector count against the direct sum. */
static void test_accuracy(void)
{
    const int64_t n_max = quick ? 1200 : 5000, m_sep = quick ? 400 : 2000;
    const double epss[] = {1e-3, 1e-6, 1e-9};
    double *x = test_alloc(3 * n_max), *y = test_alloc(3 * m_sep), *q = test_alloc(3 * n_max);
    double *pot = test_alloc(3 * n_max), *grad = test_alloc(9 * n_max);
    double *rp = test_alloc(3 * n_max), *rg = test_alloc(9 * n_max);
    int grad_above_eps = 0;
    printf("accuracy: relative l2 errors against the fp64 direct sum, the worst of the vectors; "
           "bound: pot <= eps, grad <= 10 eps\n");
    printf("  %-11s %-10s %-8s %6s %2s %3s %4s %5s %9s %9s\n", "kernel", "set", "targets", "eps",
           "nv", "p", "leaf", "levels", "err pot", "err grad");
    for (int set = 0; set < N_SETS; set++) {
        const int64_t n = set == GRID ? (quick ? 512 : 4096) : n_max;
        const double soft = make_points(set, n, 10 + set, x);
        test_charges(3 * n, 0, 20 + set, q);
        for (int kk = 0; kk < 2; kk++)
            for (int sep = 0; sep < 2; sep++) {
                const int64_t m = sep ? m_sep : n;
                if (sep)
                    make_targets(n, x, m, 30 + set, y);
                reference(kernels[kk], soft, n, x, m, sep ? y : NULL, 3, q, rp, rg);
                for (int e = 0; e < 3; e++)
                    for (int nv = 1; nv <= 3; nv += 2) {
                        check_context("%s, %s, %s, eps %g, %d vectors",
                                      fmk_kernel_name(kernels[kk]), set_name[set],
                                      sep ? "separate targets" : "targets = sources", epss[e], nv);
                        const fmk_opts o = base_opts(FMK_METHOD_FMM, tested, soft);
                        fmk_info info;
                        memset(&info, 0, sizeof info);
                        if (!check_ok(run(kernels[kk], epss[e], &o, NULL, NULL, n, x, m,
                                          sep ? y : NULL, nv, q, pot, grad, &info)))
                            continue;
                        CHECK(info.backend == tested && info.method == FMK_METHOD_FMM);
                        double err[2];
                        errors(nv, m, pot, grad, rp, rg, err);
                        printf("  %-11s %-10s %-8s %6.0e %2d %3d %4lld %5d %9.2e %9.2e%s\n",
                               fmk_kernel_name(kernels[kk]), set_name[set],
                               sep ? "apart" : "sources", epss[e], nv, info.order,
                               (long long)info.leaf_size, info.levels, err[0], err[1],
                               err[0] <= epss[e] && err[1] <= 10 * epss[e] ? "" : "  <- FAIL");
                        CHECK_MSG(err[0] <= epss[e], "potential error %.3e > eps %.0e", err[0],
                                  epss[e]);
                        CHECK_MSG(err[1] <= 10 * epss[e], "gradient error %.3e > 10 eps = %.0e",
                                  err[1], 10 * epss[e]);
                        grad_above_eps += err[1] > epss[e];
                    }
            }
    }
    /* the tighter bound grad <= eps, not asked of the FMM (the CPU engine met it on these sets,
     * the GPU's orders are chosen for grad <= 10 eps / 3: docs/fmm3d_gpu.md section 3) */
    printf("  cases with eps < grad error <= 10 eps: %d\n", grad_above_eps);
    check_context("%s", "");
    free(x), free(y), free(q), free(pot), free(grad), free(rp), free(rg);
}

/* The GPU and the CPU engines at the same order (8) and leaf size (64), every W and X entry on
 * its operator (fmm3d.direct_near 0 on both), the GPU's root cube the points' (fmm3d.root_fit
 * 0): the same tree cut at the same level, the same lists, so the same sums to rounding. The
 * Plummer sphere (deep in its core) and the nested clusters, softenings that cut the tree with a
 * far field left. */
static void test_vs_cpu(void)
{
    const int64_t n = quick ? 1200 : 4000, m = quick ? 400 : 1500;
    double *x = test_alloc(3 * n), *y = test_alloc(3 * m), *q = test_alloc(n);
    double *p1 = test_alloc(n), *g1 = test_alloc(3 * n), *p2 = test_alloc(n),
           *g2 = test_alloc(3 * n);
    static const char *const knobs_cpu[] = {"fmm3d.direct_near", "fmm3d.newton", NULL};
    static const double values_cpu[] = {0, 2};
    static const char *const knobs_gpu[] = {"fmm3d.direct_near", "fmm3d.root_fit", NULL};
    static const double values_gpu[] = {0, 0};
    const int sets[2] = {PLUMMER, NESTED};
    const double softs[2] = {8e-4, 1e-3}, epss[2] = {1e-6, 1e-3};
    printf("vs_cpu: GPU against the CPU engine at p = 8, leaves of 64; bound 1e-12 (rounding)\n");
    for (int si = 0; si < 2; si++) {
        make_points(sets[si], n, 40 + si, x);
        make_targets(n, x, m, 42 + si, y);
        test_charges(n, 0, 44 + si, q);
        for (int kk = 0; kk < 2; kk++)
            for (int sep = 0; sep < 2; sep++) {
                const int64_t nt = sep ? m : n;
                const double eps = epss[si], soft = softs[si];
                check_context("vs cpu, %s, %s, %s", fmk_kernel_name(kernels[kk]),
                              set_name[sets[si]], sep ? "separate targets" : "targets = sources");
                fmk_opts oc = base_opts(FMK_METHOD_FMM, FMK_BACKEND_CPU, soft),
                         og = base_opts(FMK_METHOD_FMM, tested, soft);
                oc.order = og.order = 8;
                oc.leaf_size = og.leaf_size = 64;
                fmk_info ic, ig;
                memset(&ic, 0, sizeof ic), memset(&ig, 0, sizeof ig);
                if (!check_ok(run(kernels[kk], eps, &oc, knobs_cpu, values_cpu, n, x, nt,
                                  sep ? y : NULL, 1, q, p1, g1, &ic)) ||
                    !check_ok(run(kernels[kk], eps, &og,
                                  tested == FMK_BACKEND_CUDA ? knobs_gpu : knobs_cpu,
                                  tested == FMK_BACKEND_CUDA ? values_gpu : values_cpu, n, x, nt,
                                  sep ? y : NULL, 1, q, p2, g2, &ig)))
                    continue;
                const double dp = test_rel_l2(p2, p1, nt), dg = test_rel_l2(g2, g1, 3 * nt);
                /* the finest boxes' side in the frame (the root's is 1), and d_min there (the
                 * frame's width is the power of two at or above the box's side) */
                double lo[3] = {x[0], x[1], x[2]}, hi[3] = {x[0], x[1], x[2]}, side_max = 0;
                for (int64_t i = 0; i < n + (sep ? m : 0); i++)
                    for (int k = 0; k < 3; k++) {
                        const double c = i < n ? x[3 * i + k] : y[3 * (i - n) + k];
                        lo[k] = fmin(lo[k], c), hi[k] = fmax(hi[k], c);
                    }
                for (int k = 0; k < 3; k++)
                    side_max = fmax(side_max, hi[k] - lo[k]);
                const double w = exp2(ceil(log2(side_max)));
                const double d_min = soft / w / pow(eps, kk ? 0.25 : 0.5);
                const double side = ldexp(1.0, -(ig.levels - 1));
                printf("  %-11s %-8s %-8s levels GPU %d CPU %d (finest side %.2e, d_min %.2e): "
                       "pot %.2e grad %.2e\n",
                       fmk_kernel_name(kernels[kk]), set_name[sets[si]], sep ? "apart" : "sources",
                       ig.levels, ic.levels, side, d_min, dp, dg);
                CHECK_MSG(ig.levels == ic.levels, "levels: GPU %d, CPU %d", ig.levels, ic.levels);
                CHECK_MSG(side >= d_min || ig.levels == 1, "finest boxes %.3e < d_min %.3e", side,
                          d_min);
                CHECK_MSG(dp < 1e-12 && dg < 1e-12, "GPU vs CPU: pot %.3e grad %.3e", dp, dg);
            }
    }
    check_context("%s", "");
    free(x), free(y), free(q), free(p1), free(g1), free(p2), free(g2);
}

/* Two coincident sources a (charge 1) and b (charge 2) at the origin and c (charge -3) at
 * (1, 0, 0), softening 0.25: targets = sources leaves out j = i only, so a gets 2 G(0) + (-3)
 * G(1) and b gets 1 G(0) + (-3) G(1); separate targets at the origin and at (0.5, 0, 0) get
 * everything: 3 G(0) - 3 G(1) and 3 G(0.25) - 3 G(0.75). Potentials only (the gradients are
 * along x, checked against the direct sum in accuracy). */
static void test_coincident(void)
{
    const double x[9] = {0, 0, 0, 0, 0, 0, 1, 0, 0}, q[3] = {1, 2, -3}, s = 0.25;
    const double y[6] = {0, 0, 0, 0.25, 0, 0};
    printf("coincident: two sources at one point, by hand (bound 1e-12 relative)\n");
    for (int kk = 0; kk < 2; kk++) {
        const fmk_kernel k = kernels[kk];
        /* G(r) in both kernels' forms */
#define G(r)                                               \
    (k == FMK_KERNEL_PLUMMER ? 1 / sqrt((r) * (r) + s * s) \
                             : ((r) * (r) + 1.5 * s * s) / pow((r) * (r) + s * s, 1.5))
        const double self_want[3] = {2 * G(0) - 3 * G(1), G(0) - 3 * G(1), 3 * G(1)};
        const double sep_want[2] = {3 * G(0) - 3 * G(1), 3 * G(0.25) - 3 * G(0.75)};
#undef G
        for (int e = 0; e < 2; e++) {
            const double eps = e ? 1e-9 : 1e-3;
            check_context("coincident, %s, eps %g", fmk_kernel_name(k), eps);
            const fmk_opts o = base_opts(FMK_METHOD_FMM, tested, s);
            double pot[3], grad[9];
            if (!check_ok(run(k, eps, &o, NULL, NULL, 3, x, 0, NULL, 1, q, pot, grad, NULL)))
                continue;
            double worst = 0;
            for (int i = 0; i < 3; i++)
                worst = fmax(worst, fabs(pot[i] - self_want[i]) / fabs(self_want[i]));
            double pt[2], gt[6];
            if (check_ok(run(k, eps, &o, NULL, NULL, 3, x, 2, y, 1, q, pt, gt, NULL))) {
                worst = fmax(worst, fabs(pt[0] - sep_want[0]) / fabs(sep_want[0]));
                worst = fmax(worst, fabs(pt[1] - sep_want[1]) / fabs(sep_want[1]));
            }
            printf("  %-11s eps %.0e: at the sources %.6f %.6f %.6f (want %.6f %.6f %.6f), "
                   "worst relative error %.2e\n",
                   fmk_kernel_name(k), eps, pot[0], pot[1], pot[2], self_want[0], self_want[1],
                   self_want[2], worst);
            CHECK_MSG(worst < 1e-12, "relative error %.3e", worst);
        }
    }
    check_context("%s", "");
}

/* Precision fp32 (P2P in fp32 on offsets from the leaf's centre, expansions in fp64): eps 1e-3
 * and 1e-5 (fp32's range) on the uniform, Plummer and coincident sets, one and three vectors,
 * against the fp64 direct sum; pot <= eps, grad <= 10 eps. A set the fp32 frame cannot resolve
 * is refused (FMK_ERR_ACCURACY) and said so. */
static void test_fp32(void)
{
    const int64_t n = quick ? 1200 : 5000;
    const int sets[3] = {UNIFORM, PLUMMER, COINCIDENT};
    const double epss[2] = {1e-3, 1e-5};
    double *x = test_alloc(3 * n), *q = test_alloc(3 * n), *pot = test_alloc(3 * n),
           *grad = test_alloc(9 * n), *rp = test_alloc(3 * n), *rg = test_alloc(9 * n);
    printf("fp32: against the fp64 direct sum; bound: pot <= eps, grad <= 10 eps\n");
    for (int si = 0; si < 3; si++) {
        const double soft = make_points(sets[si], n, 60 + si, x);
        test_charges(3 * n, 0, 70 + si, q);
        for (int kk = 0; kk < 2; kk++) {
            reference(kernels[kk], soft, n, x, n, NULL, 3, q, rp, rg);
            for (int e = 0; e < 2; e++)
                for (int nv = 1; nv <= 3; nv += 2) {
                    check_context("fp32, %s, %s, eps %g, %d vectors", fmk_kernel_name(kernels[kk]),
                                  set_name[sets[si]], epss[e], nv);
                    fmk_opts o = base_opts(FMK_METHOD_FMM, tested, soft);
                    o.precision = FMK_PRECISION_FP32;
                    fmk_info info;
                    const fmk_status st = run(kernels[kk], epss[e], &o, NULL, NULL, n, x, n, NULL,
                                              nv, q, pot, grad, &info);
                    if (st == FMK_ERR_ACCURACY) {
                        printf("  %-11s %-10s eps %.0e: refused (fp32 cannot resolve the set)\n",
                               fmk_kernel_name(kernels[kk]), set_name[sets[si]], epss[e]);
                        continue;
                    }
                    if (!check_ok(st))
                        continue;
                    CHECK(info.precision == FMK_PRECISION_FP32 && info.backend == tested);
                    double err[2];
                    errors(nv, n, pot, grad, rp, rg, err);
                    printf("  %-11s %-10s eps %.0e nv %d: levels %d pot %.2e grad %.2e%s\n",
                           fmk_kernel_name(kernels[kk]), set_name[sets[si]], epss[e], nv,
                           info.levels, err[0], err[1],
                           err[0] <= epss[e] && err[1] <= 10 * epss[e] ? "" : "  <- FAIL");
                    CHECK_MSG(err[0] <= epss[e] && err[1] <= 10 * epss[e],
                              "pot %.3e grad %.3e (eps %.0e)", err[0], err[1], epss[e]);
                }
        }
    }
    check_context("%s", "");
    free(x), free(q), free(pot), free(grad), free(rp), free(rg);
}

int main(int argc, char **argv)
{
    int named = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--cpu") == 0)
            tested = FMK_BACKEND_CPU;
        else if (strcmp(argv[a], "--quick") == 0)
            quick = 1;
        else
            named = 1;
    }
    if (tested == FMK_BACKEND_CUDA && fmk_cuda_device_count() <= 0) {
        printf("no CUDA device: skipped (--cpu runs the cases on the CPU engine)\n");
        return 77;
    }
    static const struct {
        const char *name;
        void (*run)(void);
    } tests[] = {{"coincident", test_coincident},
                 {"vs_cpu", test_vs_cpu},
                 {"accuracy", test_accuracy},
                 {"fp32", test_fp32}};
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int wanted = !named;
        for (int a = 1; a < argc; a++)
            wanted |= strcmp(argv[a], tests[i].name) == 0;
        if (wanted)
            tests[i].run();
    }
    return check_summary();
}
