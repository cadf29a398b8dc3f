/* test_fmm2d_gpu.c -- the 2D FMM on the GPU (method fmm, dim 2, backend cuda) against the CPU
 * engine (the same tree, so the results agree to rounding) and against direct sums, for both
 * kernels on uniform, normal, layer, duplicated and outlier sets at eps 1e-3 .. 1e-13, with
 * separate targets; N = 1, 2, identical points; the device-pointer paths (set_points_device,
 * eval_device) against host calls; a non-finite charge on the device; 2^20 points against the
 * CPU and repeated, and out of device memory (not with --quick). --quick: small sizes (for
 * compute-sanitizer). Exit 77 without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../unit/check.h"
#include "../unit/testutil.h"
#include "gpu_oom.h"

static int quick;

/* The sets of Goude & Engblom (testutil.h), all on a grid of 2^-40. */
static void make_points(test_set2d d, int64_t n, uint64_t seed, double *x)
{
    static const double outlier[2] = {1024, -512};
    test_points_set2d(d, n, seed, outlier, 40, x);
}

static fmk_opts fmm_opts(fmk_backend b)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_FMM;
    o.backend = b;
    return o;
}

/* One evaluation (trg NULL: at the sources); order -1: from eps. The CPU engine takes its order
 * from a table of l2 errors and the GPU's from the paper's pointwise bound (fmm2d.h), so the
 * comparisons give the CPU the GPU's order. */
static fmk_status run(fmk_backend b, fmk_kernel k, double eps, int order, int64_t ns,
                      const double *x, const double *q, int64_t nt, const double *y, double *pot,
                      double *grad, fmk_info *info)
{
    fmk_opts o = fmm_opts(b);
    o.order = order;
    fmk_plan *p = NULL;
    fmk_status st = fmk_plan_create(&p, 2, k, eps, &o);
    if (st == FMK_OK)
        st = fmk_plan_set_points(p, ns, x, y ? nt : 0, y);
    if (st == FMK_OK)
        st = fmk_plan_eval(p, q, pot, grad);
    if (st == FMK_OK && info)
        fmk_plan_info(p, info);
    if (st != FMK_OK)
        printf("  %s: %s\n", b == FMK_BACKEND_CUDA ? "gpu" : "cpu", fmk_plan_last_error(p));
    fmk_plan_destroy(p);
    return st;
}

/* GPU against CPU (all targets) and against the reference (a sample). */
static void compare(fmk_kernel k, double eps, int d, int64_t ns, const double *x, const double *q,
                    int64_t nt, const double *y)
{
    const int w = k == FMK_KERNEL_CAUCHY2D ? 2 : 1;
    const int64_t m = y ? nt : ns;
    double *gp = test_alloc(w * m + 1), *gg = test_alloc(2 * m + 1);
    double *cp = test_alloc(w * m + 1), *cg = test_alloc(2 * m + 1);
    fmk_info info;
    check_context("%s %s eps %g n %lld%s", fmk_kernel_name(k), test_set2d_name((test_set2d)d), eps,
                  (long long)ns, y ? " (targets)" : "");
    CHECK_STATUS(run(FMK_BACKEND_CUDA, k, eps, -1, ns, x, q, nt, y, gp, gg, &info), FMK_OK);
    CHECK_STATUS(run(FMK_BACKEND_CPU, k, eps, info.order, ns, x, q, nt, y, cp, cg, NULL), FMK_OK);
    const double dp = test_rel_l2(gp, cp, w * m), dg = test_rel_l2(gg, cg, 2 * m);
    const int64_t ms = m < 500 ? m : 500, stride = m / (ms > 0 ? ms : 1);
    double *ys = test_alloc(2 * ms + 1), *rp = test_alloc(w * ms + 1), *rg = test_alloc(2 * ms + 1);
    double *fp = test_alloc(w * ms + 1), *fg = test_alloc(2 * ms + 1);
    const double *yy = y ? y : x;
    for (int64_t i = 0; i < ms; i++) {
        memcpy(ys + 2 * i, yy + 2 * i * stride, 2 * sizeof(double));
        memcpy(fp + w * i, gp + w * i * stride, w * sizeof(double));
        memcpy(fg + 2 * i, gg + 2 * i * stride, 2 * sizeof(double));
    }
    test_reference(k, 0, ns, x, q, ms, ys, rp, rg);
    const double ep = test_rel_l2(fp, rp, w * ms), eg = test_rel_l2(fg, rg, 2 * ms);
    printf("  %-8s %-10s eps %-6.0e p %2d levels %d: gpu-cpu %.1e %.1e, error %.2e %.2e\n",
           fmk_kernel_name(k), test_set2d_name((test_set2d)d), eps, info.order, info.levels, dp, dg,
           ep, eg);
    /* the two sum in different orders: rounding, up to ~1e-13 where a far outlier's log term
     * dominates the log2d potential */
    const double agree = fmax(1e-3 * eps, 1e-12);
    CHECK_MSG(dp <= agree && dg <= agree, "gpu and cpu differ: %.3e %.3e", dp, dg);
    CHECK_MSG(ep <= eps && eg <= 10 * eps, "errors %.3e %.3e > eps, 10 eps", ep, eg);
    free(gp), free(gg), free(cp), free(cg), free(ys), free(rp), free(rg), free(fp), free(fg);
}

static void test_accuracy(void)
{
    const int64_t n = quick ? 2000 : 20000;
    const double epss[] = {1e-3, 1e-6, 1e-10, 1e-13};
    double *x = test_alloc(2 * n), *q = test_alloc(2 * n), *y = test_alloc(n);
    for (int kk = 0; kk < 2; kk++) {
        const fmk_kernel k = kk ? FMK_KERNEL_CAUCHY2D : FMK_KERNEL_LOG2D;
        for (int d = 0; d < TEST_SET2D_COUNT; d++) {
            make_points((test_set2d)d, n, 10 + d, x);
            test_charges(n, kk, 20 + d, q);
            for (int e = 0; e < 4; e++) {
                if (quick && e != 1 && d != 0)
                    continue;
                compare(k, epss[e], d, n, x, q, 0, NULL);
            }
        }
        /* separate targets, 40 of them on sources */
        make_points(TEST_SET2D_NORMAL, n, 30, x);
        make_points(TEST_SET2D_UNIFORM, n / 2, 31, y);
        memcpy(y, x, 80 * sizeof(double));
        test_charges(n, kk, 32, q);
        compare(k, 1e-8, TEST_SET2D_NORMAL, n, x, q, n / 2, y);
    }
    free(x), free(q), free(y);
}

/* 2^20 points (not with --quick): the first 8 splits sort all points at once, the rest run a
 * block per segment, many blocks at a time. The same tree as the CPU's: results that agree to
 * rounding (1e-12, where another tree would differ by the truncation error, ~1e-9), and two GPU
 * runs identical to the bit. */
static void test_large(void)
{
    const int64_t n = (int64_t)1 << 20;
    double *x = test_alloc(2 * n), *q = test_alloc(2 * n);
    double *p1 = test_alloc(2 * n), *g1 = test_alloc(2 * n), *p2 = test_alloc(2 * n),
           *g2 = test_alloc(2 * n), *cp = test_alloc(2 * n), *cg = test_alloc(2 * n);
    for (int d = TEST_SET2D_UNIFORM; d <= TEST_SET2D_LAYER; d++) {
        make_points((test_set2d)d, n, 90 + d, x);
        test_charges(n, 1, 95 + d, q);
        check_context("%s, 2^20 points", test_set2d_name((test_set2d)d));
        const fmk_kernel k = FMK_KERNEL_CAUCHY2D;
        fmk_info info;
        CHECK_STATUS(run(FMK_BACKEND_CUDA, k, 1e-6, -1, n, x, q, 0, NULL, p1, g1, &info), FMK_OK);
        CHECK_STATUS(run(FMK_BACKEND_CUDA, k, 1e-6, -1, n, x, q, 0, NULL, p2, g2, NULL), FMK_OK);
        CHECK_STATUS(run(FMK_BACKEND_CPU, k, 1e-6, info.order, n, x, q, 0, NULL, cp, cg, NULL),
                     FMK_OK);
        const double dp = test_rel_l2(p1, cp, 2 * n), dg = test_rel_l2(g1, cg, 2 * n);
        printf("  cauchy2d %-10s 2^20 points: gpu-cpu %.1e %.1e\n", test_set2d_name((test_set2d)d),
               dp, dg);
        CHECK_MSG(dp <= 1e-12 && dg <= 1e-12, "gpu and cpu differ: %.3e %.3e", dp, dg);
        CHECK_MSG(memcmp(p1, p2, 16 * n) == 0 && memcmp(g1, g2, 16 * n) == 0,
                  "two runs differ: %.3e %.3e", test_rel_l2(p1, p2, 2 * n),
                  test_rel_l2(g1, g2, 2 * n));
    }
    free(x), free(q), free(p1), free(g1), free(p2), free(g2), free(cp), free(cg);
}

/* N = 1, 2, 3 and identical points. */
static void test_edges(void)
{
    double x[2 * 64], q[2 * 64], pot[128], grad[128];
    for (int kk = 0; kk < 2; kk++) {
        const fmk_kernel k = kk ? FMK_KERNEL_CAUCHY2D : FMK_KERNEL_LOG2D;
        for (int64_t n = 1; n <= 3; n++) {
            make_points(TEST_SET2D_UNIFORM, n, 40 + n, x);
            test_charges(n, kk, 50 + n, q);
            compare(k, 1e-10, TEST_SET2D_UNIFORM, n, x, q, 0, NULL);
        }
        for (int i = 0; i < 64; i++)
            x[2 * i] = 0.25, x[2 * i + 1] = -3;
        test_charges(64, kk, 60, q);
        fmk_opts o = fmm_opts(FMK_BACKEND_CUDA);
        o.leaf_size = 2;
        check_context("%s identical points", fmk_kernel_name(k));
        CHECK_STATUS(fmk_eval(2, k, 1e-6, &o, 64, x, q, 0, NULL, pot, grad), FMK_OK);
        double big = 0;
        for (int i = 0; i < 64 * (kk + 1); i++)
            big = fmax(big, fmax(fabs(pot[i]), fabs(grad[i])));
        CHECK_MSG(big == 0, "largest result %g, not 0", big);
    }
}

/* set_points_device + eval_device against host calls; a NaN charge on the device. */
static void test_device_paths(void)
{
    const int64_t n = quick ? 3000 : 100000, m = quick ? 700 : 20000;
    double *x = test_alloc(2 * n), *y = test_alloc(2 * m), *q = test_alloc(2 * n);
    double *hp = test_alloc(2 * m), *hg = test_alloc(2 * m), *dp = test_alloc(2 * m),
           *dg = test_alloc(2 * m);
    make_points(TEST_SET2D_LAYER, n, 70, x);
    make_points(TEST_SET2D_UNIFORM, m, 71, y);
    double *d_x, *d_y, *d_q, *d_pot, *d_grad;
    cudaMalloc((void **)&d_x, 16 * n), cudaMalloc((void **)&d_y, 16 * m);
    cudaMalloc((void **)&d_q, 16 * n), cudaMalloc((void **)&d_pot, 16 * m);
    cudaMalloc((void **)&d_grad, 16 * m);
    cudaMemcpy(d_x, x, 16 * n, cudaMemcpyHostToDevice);
    cudaMemcpy(d_y, y, 16 * m, cudaMemcpyHostToDevice);
    for (int kk = 0; kk < 2; kk++) {
        const fmk_kernel k = kk ? FMK_KERNEL_CAUCHY2D : FMK_KERNEL_LOG2D;
        const int w = kk + 1;
        test_charges(n, kk, 72, q);
        cudaMemcpy(d_q, q, 8 * w * n, cudaMemcpyHostToDevice);
        fmk_opts o = fmm_opts(FMK_BACKEND_CUDA);
        fmk_plan *p = NULL;
        check_context("%s device paths", fmk_kernel_name(k));
        CHECK_STATUS(fmk_plan_create(&p, 2, k, 1e-8, &o), FMK_OK);
        CHECK_STATUS(fmk_plan_set_points(p, n, x, m, y), FMK_OK);
        CHECK_STATUS(fmk_plan_eval(p, q, hp, hg), FMK_OK);
        CHECK_STATUS(fmk_plan_set_points_device(p, n, d_x, m, d_y), FMK_OK);
        CHECK_STATUS(fmk_plan_eval_device(p, d_q, d_pot, d_grad), FMK_OK);
        cudaMemcpy(dp, d_pot, 8 * w * m, cudaMemcpyDeviceToHost);
        cudaMemcpy(dg, d_grad, 16 * m, cudaMemcpyDeviceToHost);
        const double e1 = test_rel_l2(dp, hp, w * m), e2 = test_rel_l2(dg, hg, 2 * m);
        printf("  %s device paths: %.1e %.1e\n", fmk_kernel_name(k), e1, e2);
        CHECK_MSG(e1 <= 1e-14 && e2 <= 1e-14, "device and host paths differ: %.3e %.3e", e1, e2);
        /* a NaN charge: refused, outputs untouched; the next eval with finite charges works */
        const double nan = NAN;
        cudaMemcpy(d_q + w * 17, &nan, 8, cudaMemcpyHostToDevice);
        CHECK_STATUS(fmk_plan_eval_device(p, d_q, d_pot, d_grad), FMK_ERR_NONFINITE);
        CHECK_MSG(strstr(fmk_plan_last_error(p), "charges[17]") != NULL, "message: %s",
                  fmk_plan_last_error(p));
        cudaMemcpy(hp, d_pot, 8 * w * m, cudaMemcpyDeviceToHost);
        cudaMemcpy(hg, d_grad, 16 * m, cudaMemcpyDeviceToHost);
        CHECK_MSG(memcmp(hp, dp, 8 * w * m) == 0 && memcmp(hg, dg, 16 * m) == 0,
                  "outputs written despite a NaN charge");
        cudaMemcpy(d_q, q, 8 * w * n, cudaMemcpyHostToDevice);
        CHECK_STATUS(fmk_plan_eval_device(p, d_q, d_pot, d_grad), FMK_OK);
        fmk_plan_destroy(p);
    }
    cudaFree(d_x), cudaFree(d_y), cudaFree(d_q), cudaFree(d_pot), cudaFree(d_grad);
    free(x), free(y), free(q), free(hp), free(hg), free(dp), free(dg);
}

/* One plan's set_points_device with sizes that shrink and grow again (the plan keeps its
 * device block) against a new plan for each: the same results to the bit. */
static void test_reuse(void)
{
    const int64_t sizes[] = {quick ? 3000 : 40000, 700, 1, quick ? 1500 : 9000,
                             quick ? 5000 : 60000};
    const int64_t nmax = quick ? 5000 : 60000;
    double *x = test_alloc(2 * nmax), *q = test_alloc(2 * nmax);
    double *a = test_alloc(4 * nmax), *b = test_alloc(4 * nmax); /* pot, then grad */
    double *d_x, *d_q, *d_pot, *d_grad;
    cudaMalloc((void **)&d_x, 16 * nmax), cudaMalloc((void **)&d_q, 16 * nmax);
    cudaMalloc((void **)&d_pot, 16 * nmax), cudaMalloc((void **)&d_grad, 16 * nmax);
    make_points(TEST_SET2D_NORMAL, nmax, 75, x);
    test_charges(nmax, 1, 76, q);
    cudaMemcpy(d_x, x, 16 * nmax, cudaMemcpyHostToDevice);
    cudaMemcpy(d_q, q, 16 * nmax, cudaMemcpyHostToDevice);
    fmk_opts o = fmm_opts(FMK_BACKEND_CUDA);
    fmk_plan *kept = NULL;
    CHECK_STATUS(fmk_plan_create(&kept, 2, FMK_KERNEL_CAUCHY2D, 1e-6, &o), FMK_OK);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int64_t n = sizes[k];
        check_context("set_points_device again, n %lld", (long long)n);
        CHECK_STATUS(fmk_plan_set_points_device(kept, n, d_x, 0, NULL), FMK_OK);
        CHECK_STATUS(fmk_plan_eval_device(kept, d_q, d_pot, d_grad), FMK_OK);
        cudaMemcpy(a, d_pot, 16 * n, cudaMemcpyDeviceToHost);
        cudaMemcpy(a + 2 * n, d_grad, 16 * n, cudaMemcpyDeviceToHost);
        fmk_plan *p = NULL;
        CHECK_STATUS(fmk_plan_create(&p, 2, FMK_KERNEL_CAUCHY2D, 1e-6, &o), FMK_OK);
        CHECK_STATUS(fmk_plan_set_points_device(p, n, d_x, 0, NULL), FMK_OK);
        CHECK_STATUS(fmk_plan_eval_device(p, d_q, d_pot, d_grad), FMK_OK);
        cudaMemcpy(b, d_pot, 16 * n, cudaMemcpyDeviceToHost);
        cudaMemcpy(b + 2 * n, d_grad, 16 * n, cudaMemcpyDeviceToHost);
        fmk_plan_destroy(p);
        CHECK_MSG(memcmp(a, b, 32 * n) == 0, "kept and new plan differ: %.3e",
                  test_rel_l2(a, b, 4 * n));
    }
    printf("  set_points_device again with %d sizes: identical to new plans\n",
           (int)(sizeof sizes / sizeof sizes[0]));
    fmk_plan_destroy(kept);
    cudaFree(d_x), cudaFree(d_q), cudaFree(d_pot), cudaFree(d_grad);
    free(x), free(q), free(a), free(b);
}

/* Out of device memory: a clear status, nothing leaked, and the plan works afterwards. */
static void test_oom(void)
{
    const int64_t n = 400000;
    double *x = test_alloc(2 * n), *q = test_alloc(2 * n), *pot = test_alloc(2 * n);
    make_points(TEST_SET2D_UNIFORM, n, 80, x);
    test_charges(n, 1, 81, q);
    fmk_opts o = fmm_opts(FMK_BACKEND_CUDA);
    fmk_plan *p = NULL;
    check_context("out of device memory");
    CHECK_STATUS(fmk_plan_create(&p, 2, FMK_KERNEL_CAUCHY2D, 1e-6, &o), FMK_OK);
    int64_t h = 0, d = 0;
    CHECK_STATUS(fmk_plan_memory(p, n, -1, &h, &d), FMK_OK);
    void *hog = gpu_oom_set_points(p, n, x);
    cudaFree(hog);
    CHECK_STATUS(fmk_plan_set_points(p, n, x, 0, NULL), FMK_OK);
    CHECK_STATUS(fmk_plan_eval(p, q, pot, NULL), FMK_OK);
    fmk_info info;
    fmk_plan_info(p, &info);
    printf("  %lld points: %lld device bytes held; fmk_plan_memory bound %lld\n", (long long)n,
           (long long)info.bytes_device, (long long)d);
    CHECK_MSG(d >= info.bytes_device, "fmk_plan_memory %lld < held %lld", (long long)d,
              (long long)info.bytes_device);
    fmk_plan_destroy(p);
    free(x), free(q), free(pot);
}

int main(int argc, char **argv)
{
    quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (fmk_cuda_device_count() <= 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    test_edges();
    test_device_paths();
    test_reuse();
    test_accuracy();
    if (!quick)
        test_large();
    if (!quick)
        test_oom();
    return check_summary();
}
