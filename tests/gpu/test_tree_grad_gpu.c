/* test_tree_grad_gpu.c -- the GPU treecode's walk for the gradient alone (eval with pot NULL:
 * no potential terms, and with targets = sources under a softened kernel the self pair taken
 * in, its gradient term exactly 0): its gradient against the same plan's with the potential
 * (the same sums but for +0 terms: equal to fp rounding), and both against the fp64 direct
 * sum; fp32 and fp64, laplace and plummer, targets = sources and separate targets, host and
 * device arrays, the group walk with and without super-groups (sizes), and the stackless walk.
 * --quick: smaller sets (compute-sanitizer's runs; no super-groups).
 * fmk_info's pair count is the same with and without the potential. Public API only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "fmmkit.h"
#include "../unit/check.h"
#include "../unit/testutil.h"

static void one_case(fmk_kernel kernel, fmk_precision prec, fmk_walk walk, int64_t n, int64_t m,
                     int on_device)
{
    const double soft = kernel == FMK_KERNEL_PLUMMER ? 0.01 : 0;
    check_context("%s %s %s, n %lld, %s, %s arrays", fmk_kernel_name(kernel),
                  prec == FMK_PRECISION_FP32 ? "fp32" : "fp64",
                  walk == FMK_WALK_STACKLESS ? "stackless" : "group", (long long)n,
                  m ? "separate targets" : "targets = sources", on_device ? "device" : "host");
    const int64_t mt = m ? m : n;
    double *x = test_alloc(3 * n), *q = test_alloc(n), *y = m ? test_alloc(3 * m) : NULL;
    double *pot = test_alloc(mt), *g1 = test_alloc(3 * mt), *g2 = test_alloc(3 * mt);
    double *rp = test_alloc(mt), *rg = test_alloc(3 * mt);
    test_points(TEST_DIST_PLUMMER, n, 41 + (uint64_t)n, x);
    for (int64_t i = 0; i < n; i++)
        q[i] = 1.0 / (double)n;
    if (m)
        test_points(TEST_DIST_PLUMMER, m, 43, y);
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_TREE, o.backend = FMK_BACKEND_CUDA, o.precision = prec;
    o.theta = 0.6, o.walk = walk, o.softening = soft;
    fmk_plan *p = NULL;
    CHECK_STATUS(fmk_plan_create(&p, 3, kernel, 1e-3, &o), FMK_OK);
    fmk_info i1, i2;
    memset(&i1, 0, sizeof i1), memset(&i2, 0, sizeof i2);
    if (on_device) {
        double *dx = NULL, *dq = NULL, *dy = NULL, *dp = NULL, *dg = NULL;
        int ok = cudaMalloc((void **)&dx, (size_t)n * 24) == cudaSuccess &&
                 cudaMalloc((void **)&dq, (size_t)n * 8) == cudaSuccess &&
                 (!m || cudaMalloc((void **)&dy, (size_t)m * 24) == cudaSuccess) &&
                 cudaMalloc((void **)&dp, (size_t)mt * 8) == cudaSuccess &&
                 cudaMalloc((void **)&dg, (size_t)mt * 24) == cudaSuccess;
        ok = ok && cudaMemcpy(dx, x, (size_t)n * 24, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemcpy(dq, q, (size_t)n * 8, cudaMemcpyHostToDevice) == cudaSuccess &&
             (!m || cudaMemcpy(dy, y, (size_t)m * 24, cudaMemcpyHostToDevice) == cudaSuccess);
        CHECK(ok);
        if (ok) {
            CHECK_PLAN_OK(fmk_plan_set_points_device(p, n, dx, m, dy), p);
            CHECK_PLAN_OK(fmk_plan_eval_device(p, dq, dp, dg), p);
            fmk_plan_info(p, &i1);
            CHECK(cudaMemcpy(pot, dp, (size_t)mt * 8, cudaMemcpyDeviceToHost) == cudaSuccess);
            CHECK(cudaMemcpy(g1, dg, (size_t)mt * 24, cudaMemcpyDeviceToHost) == cudaSuccess);
            CHECK_PLAN_OK(fmk_plan_eval_device(p, dq, NULL, dg), p);
            fmk_plan_info(p, &i2);
            CHECK(cudaMemcpy(g2, dg, (size_t)mt * 24, cudaMemcpyDeviceToHost) == cudaSuccess);
        }
        cudaFree(dx), cudaFree(dq), cudaFree(dy), cudaFree(dp), cudaFree(dg);
    } else {
        CHECK_PLAN_OK(fmk_plan_set_points(p, n, x, m, y), p);
        CHECK_PLAN_OK(fmk_plan_eval(p, q, pot, g1), p);
        fmk_plan_info(p, &i1);
        CHECK_PLAN_OK(fmk_plan_eval(p, q, NULL, g2), p);
        fmk_plan_info(p, &i2);
    }
    fmk_plan_destroy(p);
    /* the same sums, but for exact zeros: equal to rounding */
    const double same = test_rel_l2(g2, g1, 3 * mt);
    CHECK_LE(same, prec == FMK_PRECISION_FP32 ? 1e-6 : 1e-14, "gradient alone vs with potential");
    CHECK_MSG(i1.interactions_p2p == i2.interactions_p2p,
              "pairs %lld with the potential, %lld "
              "without",
              (long long)i1.interactions_p2p, (long long)i2.interactions_p2p);
    CHECK(i1.interactions_far == i2.interactions_far);
    /* and against the fp64 direct sum */
    fmk_opts d;
    fmk_opts_default(&d);
    d.method = FMK_METHOD_DIRECT, d.backend = FMK_BACKEND_CUDA, d.softening = soft;
    d.precision = FMK_PRECISION_FP64;
    fmk_plan *r = NULL;
    CHECK_STATUS(fmk_plan_create(&r, 3, kernel, 1e-6, &d), FMK_OK);
    CHECK_PLAN_OK(fmk_plan_set_points(r, n, x, m, y), r);
    CHECK_PLAN_OK(fmk_plan_eval(r, q, rp, rg), r);
    fmk_plan_destroy(r);
    CHECK_LE(test_rel_l2(g2, rg, 3 * mt), 2e-3, "gradient alone vs direct");
    CHECK_LE(test_rel_l2(pot, rp, mt), 2e-3, "potential vs direct");
    free(x), free(q), free(y), free(pot), free(g1), free(g2), free(rp), free(rg);
}

int main(int argc, char **argv)
{
    const int quick = argc > 1 && strcmp(argv[1], "--quick") == 0; /* compute-sanitizer's */
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count <= 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    const fmk_kernel kernels[] = {FMK_KERNEL_PLUMMER, FMK_KERNEL_LAPLACE};
    const fmk_precision precs[] = {FMK_PRECISION_FP32, FMK_PRECISION_FP64};
    /* the larger with super-groups (from 2^18 targets) */
    const int64_t sizes[] = {3000, quick ? 20000 : 300000};
    for (int k = 0; k < 2; k++)
        for (int pr = 0; pr < 2; pr++)
            for (int s = 0; s < 2; s++) {
                one_case(kernels[k], precs[pr], FMK_WALK_GROUP, sizes[s], 0, s);
                one_case(kernels[k], precs[pr], FMK_WALK_GROUP, sizes[s], sizes[s] / 2, 0);
            }
    one_case(FMK_KERNEL_PLUMMER, FMK_PRECISION_FP32, FMK_WALK_STACKLESS, 20000, 0, 0);
    return check_summary();
}
