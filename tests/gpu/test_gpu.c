/* test_gpu.c -- the GPU direct engine against the CPU engine: every kernel, precision and
 * output choice at odd sizes, targets = sources and not, coincident points, empty sets, the
 * device-pointer paths, NaN charges and points on the device, device out-of-memory, one plan
 * given points again and again. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "fmmkit.h"

#include "gpu_check.h"

static const fmk_kernel kernels[] = {FMK_KERNEL_LAPLACE, FMK_KERNEL_PLUMMER, FMK_KERNEL_REGULARIZED,
                                     FMK_KERNEL_LOG2D, FMK_KERNEL_CAUCHY2D};

static fmk_opts make_opts(fmk_backend b, fmk_precision p, fmk_kernel k)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_DIRECT;
    o.backend = b;
    o.precision = p;
    if (k == FMK_KERNEL_PLUMMER || k == FMK_KERNEL_REGULARIZED)
        o.softening = 0.02;
    return o;
}

/* Points in a box of side 3 at an offset (the frame makes the offset harmless). */
static double *points(int64_t n, int dim)
{
    double *x = malloc((size_t)(n > 0 ? n : 1) * dim * sizeof *x);
    for (int64_t i = 0; i < n * dim; i++)
        x[i] = 100.0 + 3.0 * urand();
    return x;
}

static double *values(int64_t n)
{
    double *q = malloc((size_t)(n > 0 ? n : 1) * sizeof *q);
    for (int64_t i = 0; i < n; i++)
        q[i] = urand() - 0.3;
    return q;
}

static double *poisoned(int64_t n)
{
    double *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = NAN;
    return x;
}

/* ||a - b|| / ||b||; -1 if a has a NaN (an unwritten output). */
static double rel_l2(const double *a, const double *b, int64_t n)
{
    double d = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]))
            return -1;
        d += (a[i] - b[i]) * (a[i] - b[i]);
        r += b[i] * b[i];
    }
    if (r == 0)
        return d == 0 ? 0 : INFINITY;
    return sqrt(d / r);
}

static double tol(fmk_precision p)
{
    return p == FMK_PRECISION_FP64 ? 1e-13 : 1e-5;
}

/* Evaluates with both engines (host path or device path for the GPU) and compares. */
static void compare(fmk_kernel k, fmk_precision prec, int want_pot, int want_grad, int64_t n,
                    const double *src, int64_t m, const double *trg, const double *q,
                    int device_path, const char *what)
{
    const int dim = fmk_kernel_dim(k), cw = fmk_kernel_is_complex(k) ? 2 : 1;
    const int gw = fmk_kernel_is_complex(k) ? 2 : dim;
    const int64_t mt = trg ? m : n;
    fmk_opts oc = make_opts(FMK_BACKEND_CPU, prec, k), og = make_opts(FMK_BACKEND_CUDA, prec, k);
    fmk_plan *pc = NULL, *pg = NULL;
    /* the engines' agreement, not their accuracy: eps only has to let the points through the
     * fp32 guard (coincident groups beside points 1e-3 apart: about 4e-4 in fp32) */
    const double eps = prec == FMK_PRECISION_FP32 ? 1e-2 : 1e-6;
    fmk_status st = fmk_plan_create(&pc, dim, k, eps, &oc);
    CHECK(st == FMK_OK, "create cpu: %s", fmk_plan_last_error(NULL));
    st = fmk_plan_create(&pg, dim, k, eps, &og);
    CHECK(st == FMK_OK, "create gpu: %s", fmk_plan_last_error(NULL));
    if (!pc || !pg) {
        fmk_plan_destroy(pc), fmk_plan_destroy(pg);
        return;
    }
    double *pot_c = want_pot ? poisoned(mt * cw) : NULL,
           *grad_c = want_grad ? poisoned(mt * gw) : NULL;
    double *pot_g = want_pot ? poisoned(mt * cw) : NULL,
           *grad_g = want_grad ? poisoned(mt * gw) : NULL;
    st = fmk_plan_set_points(pc, n, src, trg ? m : 0, trg);
    CHECK(st == FMK_OK, "cpu set_points: %s", fmk_plan_last_error(pc));
    st = fmk_plan_eval(pc, q, pot_c, grad_c);
    CHECK(st == FMK_OK, "cpu eval: %s", fmk_plan_last_error(pc));

    if (!device_path) {
        st = fmk_plan_set_points(pg, n, src, trg ? m : 0, trg);
        CHECK(st == FMK_OK, "gpu set_points: %s", fmk_plan_last_error(pg));
        st = fmk_plan_eval(pg, q, pot_g, grad_g);
        CHECK(st == FMK_OK, "gpu eval (%s): %s", what, fmk_plan_last_error(pg));
    } else {
        double *d_src = NULL, *d_trg = NULL, *d_q = NULL, *d_pot = NULL, *d_grad = NULL;
        CUDA_OK(cudaMalloc((void **)&d_src, (size_t)(n > 0 ? n : 1) * dim * sizeof(double)));
        CUDA_OK(cudaMemcpy(d_src, src, (size_t)n * dim * sizeof(double), cudaMemcpyHostToDevice));
        if (trg) {
            CUDA_OK(cudaMalloc((void **)&d_trg, (size_t)(m > 0 ? m : 1) * dim * sizeof(double)));
            CUDA_OK(
                cudaMemcpy(d_trg, trg, (size_t)m * dim * sizeof(double), cudaMemcpyHostToDevice));
        }
        CUDA_OK(cudaMalloc((void **)&d_q, (size_t)(n > 0 ? n : 1) * cw * sizeof(double)));
        CUDA_OK(cudaMemcpy(d_q, q, (size_t)n * cw * sizeof(double), cudaMemcpyHostToDevice));
        if (want_pot) {
            CUDA_OK(cudaMalloc((void **)&d_pot, (size_t)(mt > 0 ? mt : 1) * cw * sizeof(double)));
            CUDA_OK(
                cudaMemcpy(d_pot, pot_g, (size_t)mt * cw * sizeof(double), cudaMemcpyHostToDevice));
        }
        if (want_grad) {
            CUDA_OK(cudaMalloc((void **)&d_grad, (size_t)(mt > 0 ? mt : 1) * gw * sizeof(double)));
            CUDA_OK(cudaMemcpy(d_grad, grad_g, (size_t)mt * gw * sizeof(double),
                               cudaMemcpyHostToDevice));
        }
        st = fmk_plan_set_points_device(pg, n, d_src, trg ? m : 0, d_trg);
        CHECK(st == FMK_OK, "gpu set_points_device: %s", fmk_plan_last_error(pg));
        st = fmk_plan_eval_device(pg, d_q, d_pot, d_grad);
        CHECK(st == FMK_OK, "gpu eval_device (%s): %s", what, fmk_plan_last_error(pg));
        if (want_pot)
            CUDA_OK(
                cudaMemcpy(pot_g, d_pot, (size_t)mt * cw * sizeof(double), cudaMemcpyDeviceToHost));
        if (want_grad)
            CUDA_OK(cudaMemcpy(grad_g, d_grad, (size_t)mt * gw * sizeof(double),
                               cudaMemcpyDeviceToHost));
        cudaFree(d_src), cudaFree(d_trg), cudaFree(d_q), cudaFree(d_pot), cudaFree(d_grad);
    }
    if (want_pot) {
        double e = rel_l2(pot_g, pot_c, mt * cw);
        CHECK(e >= 0 && e <= tol(prec), "%s %s %s n=%lld m=%lld pot: rel l2 %.3g", what,
              fmk_kernel_name(k), prec ? "fp32" : "fp64", (long long)n, (long long)mt, e);
    }
    if (want_grad) {
        double e = rel_l2(grad_g, grad_c, mt * gw);
        CHECK(e >= 0 && e <= tol(prec), "%s %s %s n=%lld m=%lld grad: rel l2 %.3g", what,
              fmk_kernel_name(k), prec ? "fp32" : "fp64", (long long)n, (long long)mt, e);
    }
    free(pot_c), free(grad_c), free(pot_g), free(grad_g);
    fmk_plan_destroy(pc);
    fmk_plan_destroy(pg);
}

static void test_all_kernels(void)
{
    const int64_t sizes[] = {1, 2, 31, 1000, 4097};
    for (size_t ki = 0; ki < sizeof kernels / sizeof kernels[0]; ki++)
        for (int prec = 0; prec < 2; prec++)
            for (int mode = 0; mode < 3; mode++)
                for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
                    for (int self = 0; self < 2; self++) {
                        fmk_kernel k = kernels[ki];
                        int dim = fmk_kernel_dim(k), cw = fmk_kernel_is_complex(k) ? 2 : 1;
                        int64_t n = sizes[si], m = self ? n : sizes[(si + 2) % 5] + 3;
                        double *src = points(n, dim), *trg = self ? NULL : points(m, dim);
                        double *q = values(n * cw);
                        /* the device path for a third of the cases */
                        int dev = (ki + si + mode) % 3 == 0;
                        compare(k, (fmk_precision)prec, mode != 1, mode != 0, n, src, m, trg, q,
                                dev, dev ? "device" : "host");
                        free(src), free(trg), free(q);
                    }
}

/* Duplicated sources and targets that sit on sources. */
static void test_coincident(void)
{
    for (size_t ki = 0; ki < sizeof kernels / sizeof kernels[0]; ki++)
        for (int prec = 0; prec < 2; prec++)
            for (int dev = 0; dev < 2; dev++) {
                fmk_kernel k = kernels[ki];
                int dim = fmk_kernel_dim(k), cw = fmk_kernel_is_complex(k) ? 2 : 1;
                int64_t n = 777, m = 301;
                double *src = points(n, dim), *trg = points(m, dim), *q = values(n * cw);
                for (int64_t i = 0; i < 100; i++) /* source i+200 duplicates source i */
                    memcpy(src + dim * (i + 200), src + dim * i, dim * sizeof(double));
                for (int64_t i = 0; i < m; i += 3) /* every third target on a source */
                    memcpy(trg + dim * i, src + dim * (5 * i % n), dim * sizeof(double));
                compare(k, (fmk_precision)prec, 1, 1, n, src, 0, NULL, q, dev, "coincident self");
                compare(k, (fmk_precision)prec, 1, 1, n, src, m, trg, q, dev, "coincident targets");
                free(src), free(trg), free(q);
            }
}

static void test_empty(void)
{
    for (int dev = 0; dev < 2; dev++) {
        fmk_opts o = make_opts(FMK_BACKEND_CUDA, FMK_PRECISION_FP64, FMK_KERNEL_LAPLACE);
        fmk_plan *p = NULL;
        CHECK(fmk_plan_create(&p, 3, FMK_KERNEL_LAPLACE, fmk_eps_default(o.precision), &o) ==
                  FMK_OK,
              "create");
        double *trg = points(10, 3), pot[10], grad[30], dummy = 0;
        for (int i = 0; i < 10; i++)
            pot[i] = NAN;
        for (int i = 0; i < 30; i++)
            grad[i] = NAN;
        double *d_trg, *d_pot, *d_grad, *d_q;
        CUDA_OK(cudaMalloc((void **)&d_trg, 30 * sizeof(double)));
        CUDA_OK(cudaMalloc((void **)&d_pot, 10 * sizeof(double)));
        CUDA_OK(cudaMalloc((void **)&d_grad, 30 * sizeof(double)));
        CUDA_OK(cudaMalloc((void **)&d_q, sizeof(double)));
        CUDA_OK(cudaMemcpy(d_trg, trg, 30 * sizeof(double), cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(d_pot, pot, 10 * sizeof(double), cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(d_grad, grad, 30 * sizeof(double), cudaMemcpyHostToDevice));
        fmk_status st;
        /* N = 0: zero results */
        if (dev) {
            st = fmk_plan_set_points_device(p, 0, NULL, 10, d_trg);
            CHECK(st == FMK_OK, "N=0 set_points_device: %s", fmk_plan_last_error(p));
            st = fmk_plan_eval_device(p, d_q, d_pot, d_grad);
            CHECK(st == FMK_OK, "N=0 eval_device: %s", fmk_plan_last_error(p));
            CUDA_OK(cudaMemcpy(pot, d_pot, 10 * sizeof(double), cudaMemcpyDeviceToHost));
            CUDA_OK(cudaMemcpy(grad, d_grad, 30 * sizeof(double), cudaMemcpyDeviceToHost));
        } else {
            st = fmk_plan_set_points(p, 0, NULL, 10, trg);
            CHECK(st == FMK_OK, "N=0 set_points: %s", fmk_plan_last_error(p));
            st = fmk_plan_eval(p, &dummy, pot, grad);
            CHECK(st == FMK_OK, "N=0 eval: %s", fmk_plan_last_error(p));
        }
        int zero = 1;
        for (int i = 0; i < 10; i++)
            zero = zero && pot[i] == 0 && grad[3 * i] == 0 && grad[3 * i + 1] == 0 &&
                   grad[3 * i + 2] == 0;
        CHECK(zero, "N=0 (%s): results are not all zero", dev ? "device" : "host");
        /* M = 0: nothing to do, success */
        double *src = points(5, 3), q[5] = {1, 2, 3, 4, 5};
        double *d_src;
        CUDA_OK(cudaMalloc((void **)&d_src, 15 * sizeof(double)));
        CUDA_OK(cudaMemcpy(d_src, src, 15 * sizeof(double), cudaMemcpyHostToDevice));
        if (dev)
            st = fmk_plan_set_points_device(p, 5, d_src, 0, d_trg);
        else
            st = fmk_plan_set_points(p, 5, src, 0, trg);
        CHECK(st == FMK_OK, "M=0 set_points: %s", fmk_plan_last_error(p));
        st = dev ? fmk_plan_eval_device(p, d_q, d_pot, d_grad) : fmk_plan_eval(p, q, pot, grad);
        CHECK(st == FMK_OK, "M=0 eval: %s", fmk_plan_last_error(p));
        /* N = M = 0 */
        st = dev ? fmk_plan_set_points_device(p, 0, NULL, 0, NULL)
                 : fmk_plan_set_points(p, 0, NULL, 0, NULL);
        CHECK(st == FMK_OK, "N=M=0 set_points: %s", fmk_plan_last_error(p));
        st = dev ? fmk_plan_eval_device(p, d_q, d_pot, d_grad) : fmk_plan_eval(p, q, pot, grad);
        CHECK(st == FMK_OK, "N=M=0 eval: %s", fmk_plan_last_error(p));
        cudaFree(d_trg), cudaFree(d_pot), cudaFree(d_grad), cudaFree(d_q), cudaFree(d_src);
        free(trg), free(src);
        fmk_plan_destroy(p);
    }
}

static void test_nonfinite_device(void)
{
    const int64_t n = 1000;
    double *src = points(n, 3), *q = values(n);
    q[617] = NAN;
    double *d_src, *d_q, *d_pot, pot[1000];
    CUDA_OK(cudaMalloc((void **)&d_src, n * 3 * sizeof(double)));
    CUDA_OK(cudaMalloc((void **)&d_q, n * sizeof(double)));
    CUDA_OK(cudaMalloc((void **)&d_pot, n * sizeof(double)));
    CUDA_OK(cudaMemcpy(d_src, src, n * 3 * sizeof(double), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_q, q, n * sizeof(double), cudaMemcpyHostToDevice));
    for (int i = 0; i < n; i++)
        pot[i] = 12345.0;
    CUDA_OK(cudaMemcpy(d_pot, pot, n * sizeof(double), cudaMemcpyHostToDevice));
    for (int prec = 0; prec < 2; prec++) {
        fmk_opts o = make_opts(FMK_BACKEND_CUDA, (fmk_precision)prec, FMK_KERNEL_LAPLACE);
        fmk_plan *p = NULL;
        CHECK(fmk_plan_create(&p, 3, FMK_KERNEL_LAPLACE, fmk_eps_default(o.precision), &o) ==
                  FMK_OK,
              "create");
        fmk_status st = fmk_plan_set_points_device(p, n, d_src, 0, NULL);
        CHECK(st == FMK_OK, "set_points_device: %s", fmk_plan_last_error(p));
        st = fmk_plan_eval_device(p, d_q, d_pot, NULL);
        CHECK(st == FMK_ERR_NONFINITE, "NaN charge on the device: status %d (%s)", st,
              fmk_plan_last_error(p));
        CHECK(strstr(fmk_plan_last_error(p), "charges[617]") != NULL, "message: %s",
              fmk_plan_last_error(p));
        CUDA_OK(cudaMemcpy(pot, d_pot, n * sizeof(double), cudaMemcpyDeviceToHost));
        int untouched = 1;
        for (int i = 0; i < n; i++)
            untouched = untouched && pot[i] == 12345.0;
        CHECK(untouched, "a failed eval_device wrote its output");
        /* a NaN point on the device */
        double bad = INFINITY;
        CUDA_OK(cudaMemcpy(d_src + 3 * 411 + 2, &bad, sizeof bad, cudaMemcpyHostToDevice));
        st = fmk_plan_set_points_device(p, n, d_src, 0, NULL);
        CHECK(st == FMK_ERR_NONFINITE, "Inf point on the device: status %d", st);
        CHECK(strstr(fmk_plan_last_error(p), "sources[411][2]") != NULL, "message: %s",
              fmk_plan_last_error(p));
        st = fmk_plan_eval_device(p, d_q, d_pot, NULL);
        CHECK(st == FMK_ERR_STATE, "eval after a failed set_points_device: status %d", st);
        CUDA_OK(cudaMemcpy(d_src + 3 * 411 + 2, src + 3 * 411 + 2, sizeof(double),
                           cudaMemcpyHostToDevice));
        fmk_plan_destroy(p);
    }
    cudaFree(d_src), cudaFree(d_q), cudaFree(d_pot);
    free(src), free(q);
}

static void test_oom(void)
{
    fmk_opts o = make_opts(FMK_BACKEND_CUDA, FMK_PRECISION_FP64, FMK_KERNEL_LAPLACE);
    fmk_plan *p = NULL;
    CHECK(fmk_plan_create(&p, 3, FMK_KERNEL_LAPLACE, fmk_eps_default(o.precision), &o) == FMK_OK,
          "create");
    /* beyond 2^36 points the GPU estimates are refused (core/internal.h); 2^35 points (1 TB of
     * coordinates and results) are counted and fit no GPU */
    const int64_t huge = (int64_t)1 << 35;
    int64_t h = 0, d = 0;
    CHECK(fmk_plan_memory(p, (int64_t)1 << 40, -1, &h, &d) == FMK_ERR_ARG, "2^40 refused");
    CHECK(fmk_plan_memory(p, huge, -1, &h, &d) == FMK_OK, "memory");
    CHECK(d >= huge * 32, "fmk_plan_memory reports %lld device bytes for 2^35 points",
          (long long)d);
    double *d_src;
    CUDA_OK(cudaMalloc((void **)&d_src, 3 * sizeof(double)));
    size_t free0, free1, total;
    CUDA_OK(cudaMemGetInfo(&free0, &total));
    fmk_status st = fmk_plan_set_points_device(p, huge, d_src, 0, NULL);
    CHECK(st == FMK_ERR_DEVICE_NOMEM, "2^35 points: status %d (%s)", st, fmk_plan_last_error(p));
    CHECK(strstr(fmk_plan_last_error(p), "bytes") != NULL, "message: %s", fmk_plan_last_error(p));
    CUDA_OK(cudaMemGetInfo(&free1, &total));
    CHECK(free1 == free0, "device memory leaked after out-of-memory: %zu -> %zu", free0, free1);
    fmk_info info;
    fmk_plan_info(p, &info);
    CHECK(info.bytes_device == 0, "a plan without points holds %lld device bytes",
          (long long)info.bytes_device);
    /* the plan still works afterwards */
    double src[6] = {0, 0, 0, 1, 0, 0}, q[2] = {1, 1}, pot[2];
    st = fmk_plan_set_points(p, 2, src, 0, NULL);
    CHECK(st == FMK_OK, "set_points after OOM: %s", fmk_plan_last_error(p));
    st = fmk_plan_eval(p, q, pot, NULL);
    CHECK(st == FMK_OK && pot[0] == 1.0 && pot[1] == 1.0, "eval after OOM: %g %g", pot[0], pot[1]);
    fmk_plan_info(p, &info);
    CHECK(info.bytes_device > 0 && info.phase_time[FMK_PHASE_P2P] > 0, "info after eval");
    cudaFree(d_src);
    fmk_plan_destroy(p);
}

/* A box of 3e-160: 1/width^2 overflows, the gradients (charges 1e-200) do not. fp64 only:
 * the CPU fp32 engine, the reference, cannot hold such charges. */
static void test_tiny_box(void)
{
    for (int prec = 0; prec < 1; prec++)
        for (int dev = 0; dev < 2; dev++) {
            const int64_t n = 500;
            double *src = points(n, 3), *q = values(n);
            for (int64_t i = 0; i < n * 3; i++)
                src[i] = (src[i] - 100.0) * 1e-160;
            for (int64_t i = 0; i < n; i++)
                q[i] *= 1e-200;
            compare(FMK_KERNEL_LAPLACE, (fmk_precision)prec, 1, 1, n, src, 0, NULL, q, dev,
                    "tiny box");
            free(src), free(q);
        }
}

static void test_misc(void)
{
    CHECK(fmk_cuda_device_count() > 0, "no CUDA device seen");
    int dev = -1;
    CUDA_OK(cudaGetDevice(&dev));
    CHECK(dev == 0, "current device %d", dev);
    /* eval_many on the GPU matches single evals */
    const int64_t n = 300;
    double *src = points(n, 3), *q = values(2 * n), pot[600], pot1[300];
    fmk_opts o = make_opts(FMK_BACKEND_CUDA, FMK_PRECISION_FP64, FMK_KERNEL_LAPLACE);
    fmk_plan *p = NULL;
    CHECK(fmk_plan_create(&p, 3, FMK_KERNEL_LAPLACE, fmk_eps_default(o.precision), &o) == FMK_OK,
          "create");
    CHECK(fmk_plan_set_points(p, n, src, 0, NULL) == FMK_OK, "set_points");
    CHECK(fmk_plan_eval_many(p, 2, q, pot, NULL) == FMK_OK, "eval_many: %s",
          fmk_plan_last_error(p));
    CHECK(fmk_plan_eval(p, q + n, pot1, NULL) == FMK_OK, "eval");
    CHECK(memcmp(pot + n, pot1, sizeof pot1) == 0, "eval_many differs from eval");
    fmk_info info;
    fmk_plan_info(p, &info);
    CHECK(info.backend == FMK_BACKEND_CUDA && info.device_name[0] != '\0', "info");
    CUDA_OK(cudaGetDevice(&dev));
    CHECK(dev == 0, "current device %d after calls", dev);
    fmk_plan_destroy(p);
    free(src), free(q);
}

/* set_points + eval on plan p by the host (dev 0) or the device path (dev 1): n sources,
 * m targets (trg NULL: the sources), results into pot and grad on the host. */
static fmk_status points_and_eval(fmk_plan *p, int dev, int64_t n, const double *src, int64_t m,
                                  const double *trg, const double *q, double *pot, double *grad)
{
    const int64_t mt = trg ? m : n;
    if (!dev) {
        fmk_status st = fmk_plan_set_points(p, n, src, trg ? m : 0, trg);
        return st == FMK_OK ? fmk_plan_eval(p, q, pot, grad) : st;
    }
    double *d_src = NULL, *d_trg = NULL, *d_q = NULL, *d_pot = NULL, *d_grad = NULL;
    CUDA_OK(cudaMalloc((void **)&d_src, (size_t)n * 3 * sizeof(double)));
    CUDA_OK(cudaMemcpy(d_src, src, (size_t)n * 3 * sizeof(double), cudaMemcpyHostToDevice));
    if (trg) {
        CUDA_OK(cudaMalloc((void **)&d_trg, (size_t)m * 3 * sizeof(double)));
        CUDA_OK(cudaMemcpy(d_trg, trg, (size_t)m * 3 * sizeof(double), cudaMemcpyHostToDevice));
    }
    CUDA_OK(cudaMalloc((void **)&d_q, (size_t)n * sizeof(double)));
    CUDA_OK(cudaMemcpy(d_q, q, (size_t)n * sizeof(double), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMalloc((void **)&d_pot, (size_t)mt * sizeof(double)));
    CUDA_OK(cudaMalloc((void **)&d_grad, (size_t)mt * 3 * sizeof(double)));
    fmk_status st = fmk_plan_set_points_device(p, n, d_src, trg ? m : 0, d_trg);
    if (st == FMK_OK)
        st = fmk_plan_eval_device(p, d_q, d_pot, d_grad);
    if (st == FMK_OK) {
        CUDA_OK(cudaMemcpy(pot, d_pot, (size_t)mt * sizeof(double), cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(grad, d_grad, (size_t)mt * 3 * sizeof(double), cudaMemcpyDeviceToHost));
    }
    cudaFree(d_src), cudaFree(d_trg), cudaFree(d_q), cudaFree(d_pot), cudaFree(d_grad);
    return st;
}

/* One GPU plan given points again and again (the state of its previous points serves the
 * next: buffers kept, grown, a self plan becoming a targets plan and back), by the host and the
 * device paths in turn: every result equals a fresh plan's, bit for bit, and the plan reports
 * at least the bytes its points need. */
static void test_reuse(void)
{
    static const int64_t ns[] = {1000, 300, 2000, 2000, 500, 4097, 1, 64};
    static const int64_t nt[] = {0, 700, 0, 3000, 0, 10, 0, 5000};
    for (int prec = 0; prec < 2; prec++) {
        const fmk_kernel k = prec ? FMK_KERNEL_LAPLACE : FMK_KERNEL_PLUMMER;
        fmk_opts o = make_opts(FMK_BACKEND_CUDA, (fmk_precision)prec, k);
        fmk_plan *p = NULL;
        CHECK(fmk_plan_create(&p, 3, k, fmk_eps_default(o.precision), &o) == FMK_OK, "create");
        if (!p)
            return;
        for (int c = 0; c < (int)(sizeof ns / sizeof ns[0]); c++) {
            const int64_t n = ns[c], m = nt[c] ? nt[c] : n;
            double *src = points(n, 3), *trg = nt[c] ? points(m, 3) : NULL, *q = values(n);
            double *pot = poisoned(m), *grad = poisoned(3 * m);
            double *pot_f = poisoned(m), *grad_f = poisoned(3 * m);
            const int dev = c & 1;
            fmk_status st = points_and_eval(p, dev, n, src, m, trg, q, pot, grad);
            CHECK(st == FMK_OK, "reuse %d: %s", c, fmk_plan_last_error(p));
            fmk_info info;
            fmk_plan_info(p, &info);
            int64_t h = 0, d = 0;
            fmk_plan_memory(p, n, trg ? m : -1, &h, &d);
            CHECK(info.bytes_device >= d,
                  "reuse %d: the plan reports %lld device bytes, less than "
                  "the %lld its points need",
                  c, (long long)info.bytes_device, (long long)d);
            fmk_plan *f = NULL;
            CHECK(fmk_plan_create(&f, 3, k, fmk_eps_default(o.precision), &o) == FMK_OK,
                  "create (fresh)");
            st = points_and_eval(f, dev, n, src, m, trg, q, pot_f, grad_f);
            CHECK(st == FMK_OK, "fresh plan: %s", fmk_plan_last_error(f));
            CHECK(memcmp(pot, pot_f, (size_t)m * sizeof(double)) == 0 &&
                      memcmp(grad, grad_f, (size_t)m * 3 * sizeof(double)) == 0,
                  "reuse %d (%s, n %lld, m %lld): results differ from a fresh plan's", c,
                  prec ? "fp32" : "fp64", (long long)n, (long long)m);
            fmk_plan_destroy(f);
            free(src), free(trg), free(q), free(pot), free(grad), free(pot_f), free(grad_f);
        }
        fmk_plan_destroy(p);
    }
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (fmk_cuda_device_count() <= 0) {
        printf("test_gpu: no CUDA device; nothing to test\n");
        return 77;
    }
    test_misc();
    test_reuse();
    test_empty();
    test_nonfinite_device();
    test_oom();
    test_coincident();
    test_tiny_box();
    if (!quick)
        test_all_kernels();
    printf("test_gpu: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
