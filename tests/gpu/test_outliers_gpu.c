/* test_outliers_gpu.c -- far outliers and points closer than the frame resolves, on the GPU
 * (issue 31, items 9 and 3; tests/unit/test_exact.c and test_finite.c on the CPU):
 *   - the fp64 direct sum works in the exact frame (core/internal.h) on the GPU as on the CPU:
 *     outliers at 1e12, 1e14 and 1e300 from a unit cube, and pairs 1e-200 apart (the careful
 *     kernel of direct/cuda/p2p.cu), host and device paths, agree with the CPU engine (exact to
 *     rounding) to 1e-13;
 *   - the fp32 treecode, 3D FMM and direct sum on 100 points and one at (0, 0, 1e15), and on pairs 1e-9
 *     apart, are refused (the resolution guard, or results that are not finite) or return
 *     finite values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "fmmkit.h"

#include "gpu_check.h"

static double *alloc(int64_t n)
{
    double *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* ||a - b|| / ||b||; -1 when a value of a is not finite. */
static double rel_l2(const double *a, const double *b, int64_t n)
{
    double d = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return -1;
        d += (a[i] - b[i]) * (a[i] - b[i]);
        r += b[i] * b[i];
    }
    return r > 0 ? sqrt(d / r) : d == 0 ? 0 : INFINITY;
}

/* One evaluation at the sources: method, backend, precision; device = 1 through the device
 * pointers. Returns the status. */
static fmk_status run(fmk_kernel k, fmk_method method, fmk_backend backend, fmk_precision prec,
                      int device, int64_t n, const double *x, const double *q, double *pot,
                      double *grad)
{
    const int dim = fmk_kernel_dim(k), cw = fmk_kernel_is_complex(k) ? 2 : 1;
    const int gw = fmk_kernel_is_complex(k) ? 2 : dim;
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = method, o.backend = backend, o.precision = prec;
    if (method == FMK_METHOD_TREE)
        o.theta = 0.6; /* expert: eps 1e-4 is below what the tree reaches from eps */
    fmk_plan *p = NULL;
    fmk_status st = fmk_plan_create(&p, dim, k, prec == FMK_PRECISION_FP32 ? 1e-4 : 1e-6, &o);
    if (st != FMK_OK) {
        fprintf(stderr, "create: %s\n", fmk_plan_last_error(NULL));
        return st;
    }
    if (!device) {
        st = fmk_plan_set_points(p, n, x, 0, NULL);
        if (st == FMK_OK)
            st = fmk_plan_eval(p, q, pot, grad);
    } else {
        double *d_x, *d_q, *d_p, *d_g;
        CUDA_OK(cudaMalloc((void **)&d_x, (size_t)n * dim * sizeof(double)));
        CUDA_OK(cudaMalloc((void **)&d_q, (size_t)n * cw * sizeof(double)));
        CUDA_OK(cudaMalloc((void **)&d_p, (size_t)n * cw * sizeof(double)));
        CUDA_OK(cudaMalloc((void **)&d_g, (size_t)n * gw * sizeof(double)));
        CUDA_OK(cudaMemcpy(d_x, x, (size_t)n * dim * sizeof(double), cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(d_q, q, (size_t)n * cw * sizeof(double), cudaMemcpyHostToDevice));
        st = fmk_plan_set_points_device(p, n, d_x, 0, NULL);
        if (st == FMK_OK)
            st = fmk_plan_eval_device(p, d_q, d_p, d_g);
        if (st == FMK_OK) {
            CUDA_OK(cudaMemcpy(pot, d_p, (size_t)n * cw * sizeof(double), cudaMemcpyDeviceToHost));
            CUDA_OK(cudaMemcpy(grad, d_g, (size_t)n * gw * sizeof(double), cudaMemcpyDeviceToHost));
        }
        cudaFree(d_x), cudaFree(d_q), cudaFree(d_p), cudaFree(d_g);
    }
    if (st != FMK_OK)
        fprintf(stderr, "run: %s\n", fmk_plan_last_error(p));
    fmk_plan_destroy(p);
    return st;
}

/* n points in the unit cube (square) with charges in [-0.5, 0.5]; case 0..2: the last point at
 * (far, far, far) for far = 1e12, 1e14, 1e300; case 3: points 0, 1, 2 at 1e-200, 2e-200, 2e-200
 * on the first axis (a close pair, a coincident one) with charges 1e-220. */
static void make_case(int c, int dim, int cw, int64_t n, double *x, double *q)
{
    static const double far[3] = {1e12, 1e14, 1e300};
    for (int64_t i = 0; i < n * dim; i++)
        x[i] = urand();
    for (int64_t i = 0; i < n * cw; i++)
        q[i] = urand() - 0.5;
    if (c < 3)
        for (int k = 0; k < dim; k++)
            x[dim * (n - 1) + k] = far[c];
    else
        for (int p = 0; p < 3; p++) {
            for (int k = 0; k < dim; k++)
                x[dim * p + k] = k == 0 ? (p ? 2e-200 : 1e-200) : 0;
            for (int v = 0; v < cw; v++)
                q[cw * p + v] *= 1e-220;
        }
}

static void test_exact_direct(void)
{
    const fmk_kernel kernels[3] = {FMK_KERNEL_LAPLACE, FMK_KERNEL_LOG2D, FMK_KERNEL_CAUCHY2D};
    const char *names[4] = {"outlier at 1e12", "outlier at 1e14", "outlier at 1e300",
                            "pairs 1e-200 apart"};
    for (int kk = 0; kk < 3; kk++)
        for (int c = 0; c < 4; c++) {
            const fmk_kernel k = kernels[kk];
            const int dim = fmk_kernel_dim(k), cw = fmk_kernel_is_complex(k) ? 2 : 1;
            const int gw = fmk_kernel_is_complex(k) ? 2 : dim;
            const int64_t n = 3001;
            double *x = alloc(n * dim), *q = alloc(n * cw);
            double *pc = alloc(n * cw), *gc = alloc(n * gw), *pg = alloc(n * cw),
                   *gg = alloc(n * gw);
            make_case(c, dim, cw, n, x, q);
            CHECK(run(k, FMK_METHOD_DIRECT, FMK_BACKEND_CPU, FMK_PRECISION_FP64, 0, n, x, q, pc,
                      gc) == FMK_OK,
                  "cpu %s", names[c]);
            for (int dev = 0; dev < 2; dev++) {
                CHECK(run(k, FMK_METHOD_DIRECT, FMK_BACKEND_CUDA, FMK_PRECISION_FP64, dev, n, x, q,
                          pg, gg) == FMK_OK,
                      "gpu %s", names[c]);
                const double ep = rel_l2(pg, pc, n * cw), eg = rel_l2(gg, gc, n * gw);
                printf("direct fp64 %-8s %-20s %s: potential %.2e gradient %.2e\n",
                       fmk_kernel_name(k), names[c], dev ? "device" : "host", ep, eg);
                CHECK(ep >= 0 && ep <= 1e-13 && eg >= 0 && eg <= 1e-13,
                      "%s %s %s: %.3g %.3g against the CPU", fmk_kernel_name(k), names[c],
                      dev ? "device" : "host", ep, eg);
            }
            free(x), free(q), free(pc), free(gc), free(pg), free(gg);
        }
}

/* The fp32 tree, 3D FMM and direct sum on the two sets (GPU): refused, or finite
 * results (printed against the fp64 direct sum). */
static void test_fp32_fast(void)
{
    for (int set = 0; set < 2; set++) {
        const int64_t n = set ? 200 : 101;
        double *x = alloc(3 * n), *q = alloc(n), *pd = alloc(n), *gd = alloc(3 * n);
        double *pf = alloc(n), *gf = alloc(3 * n);
        for (int64_t i = 0; i < 3 * n; i++)
            x[i] = urand();
        for (int64_t i = 0; i < n; i++)
            q[i] = urand() - 0.5;
        if (set == 0) /* 100 points and one at (0, 0, 1e15) */
            x[3 * 100] = x[3 * 100 + 1] = 0, x[3 * 100 + 2] = 1e15;
        else /* pairs 1e-9 apart */
            for (int64_t i = 0; i < n; i += 2)
                for (int k = 0; k < 3; k++)
                    x[3 * (i + 1) + k] = x[3 * i + k] + 1e-9;
        /* the reference: the fp64 direct sum, exact to rounding for any finite input */
        CHECK(run(FMK_KERNEL_LAPLACE, FMK_METHOD_DIRECT, FMK_BACKEND_CUDA, FMK_PRECISION_FP64, 0, n,
                  x, q, pd, gd) == FMK_OK,
              "direct fp64");
        for (int m = 0; m < 3; m++) {
            const fmk_method method = m == 2 ? FMK_METHOD_DIRECT
                                      : m    ? FMK_METHOD_FMM
                                             : FMK_METHOD_TREE;
            /* the direct sum through device pointers (its guard copies them to the host) */
            const int st = run(FMK_KERNEL_LAPLACE, method, FMK_BACKEND_CUDA, FMK_PRECISION_FP32,
                               method == FMK_METHOD_DIRECT, n, x, q, pf, gf);
            /* refused (the resolution guard: fp32 cannot hold these points; or results that
             * are not finite), or finite */
            CHECK(st == FMK_OK || st == FMK_ERR_ACCURACY || st == FMK_ERR_NONFINITE,
                  "%s fp32 set %d: status %d", fmk_method_name(method), set, st);
            if (st != FMK_OK) {
                printf("%s fp32 %s: refused (%d)\n", fmk_method_name(method),
                       set ? "pairs 1e-9 apart" : "100 + (0, 0, 1e15)", st);
                continue;
            }
            int finite = 1;
            for (int64_t i = 0; i < n; i++)
                finite &= isfinite(pf[i]) && isfinite(gf[3 * i]) && isfinite(gf[3 * i + 1]) &&
                          isfinite(gf[3 * i + 2]);
            CHECK(finite, "%s fp32 set %d: results not finite", fmk_method_name(method), set);
            const double ep = rel_l2(pf, pd, n), eg = rel_l2(gf, gd, 3 * n);
            printf("%s fp32 %s: against the fp64 direct sum: potential %.2e gradient %.2e\n",
                   fmk_method_name(method), set ? "pairs 1e-9 apart" : "100 + (0, 0, 1e15)", ep,
                   eg);
        }
        free(x), free(q), free(pd), free(gd), free(pf), free(gf);
    }
}

int main(void)
{
    if (fmk_cuda_device_count() <= 0) {
        printf("test_outliers_gpu: no CUDA device; nothing to test\n");
        return 77;
    }
    test_exact_direct();
    test_fp32_fast();
    printf("test_outliers_gpu: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
