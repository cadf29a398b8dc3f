/* direct.c -- benchmark of the direct sum: GPU kernel time with data on the device
 * (fmk_plan_set_points + fmk_plan_eval_device, the P2P phase timed with CUDA events inside
 * fmmkit), pair interactions per second and the fraction of the chip's arithmetic limit; the
 * CPU engine at a smaller size for comparison. Prints a table, or JSON with --json.
 *
 *   direct [--json] [--quick] [--headline]   (--headline: the two N = 2^20 laplace rows only)
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "bench_util.h"
#include "fmmkit.h"

/* H100 SXM: 132 SMs x 128 fp32 lanes x 2 flops x 1.98 GHz = 66.9 TFLOP/s, half that in fp64;
 * at 20 flops per pair (the usual count for gravity / laplace with gradient). */
#define FLOPS_PER_PAIR 20.0
static const double peak_flops[2] = {33.5e12, 66.9e12}; /* fp64, fp32 */

typedef struct result {
    const char *backend;
    fmk_kernel kernel;
    fmk_precision prec;
    int64_t n;
    int reps;
    double t_kernel, t_call; /* medians, seconds */
    double rate;             /* pairs per second (kernel time) */
    double frac;             /* of the arithmetic limit at 20 flops per pair */
    double err;              /* relative l2 error of pot+grad on a sample, -1 if not checked */
} result;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (rng >> 11) * (1.0 / 9007199254740992.0);
}

#define CUDA_OK(call)                                                                  \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "direct: %s failed: %s\n", #call, cudaGetErrorString(e_)); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#define FMK_OK_OR_DIE(plan, call)                                                         \
    do {                                                                                  \
        fmk_status s_ = (call);                                                           \
        if (s_ != FMK_OK) {                                                               \
            fprintf(stderr, "direct: %s failed: %s\n", #call, fmk_plan_last_error(plan)); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* Laplace pot+grad at sample targets, in long double, for the error column. */
static double laplace_error(int64_t n, const double *x, const double *q, const double *pot,
                            const double *grad, int samples)
{
    double d = 0, r = 0;
    for (int s = 0; s < samples; s++) {
        int64_t i = (int64_t)s * (n / samples);
        long double a[4] = {0, 0, 0, 0};
        for (int64_t j = 0; j < n; j++) {
            if (j == i)
                continue;
            long double dx = x[3 * i] - x[3 * j], dy = x[3 * i + 1] - x[3 * j + 1],
                        dz = x[3 * i + 2] - x[3 * j + 2];
            long double r2 = dx * dx + dy * dy + dz * dz;
            if (r2 == 0)
                continue;
            long double rinv = 1.0L / sqrtl(r2), qr = q[j] * rinv, qr3 = qr * rinv * rinv;
            a[0] += qr, a[1] -= qr3 * dx, a[2] -= qr3 * dy, a[3] -= qr3 * dz;
        }
        double got[4] = {pot[i], grad[3 * i], grad[3 * i + 1], grad[3 * i + 2]};
        for (int k = 0; k < 4; k++)
            d += ((double)a[k] - got[k]) * ((double)a[k] - got[k]), r += (double)(a[k] * a[k]);
    }
    return sqrt(d / r);
}

static result run_gpu(fmk_kernel k, fmk_precision prec, int64_t n, int reps, int check)
{
    const int dim = fmk_kernel_dim(k), cw = fmk_kernel_is_complex(k) ? 2 : 1;
    const int gw = fmk_kernel_is_complex(k) ? 2 : dim;
    double *x = malloc((size_t)n * dim * sizeof *x), *q = malloc((size_t)n * cw * sizeof *q);
    for (int64_t i = 0; i < n * dim; i++)
        x[i] = urand();
    for (int64_t i = 0; i < n * cw; i++)
        q[i] = 2 * urand() - 1;
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_DIRECT;
    o.backend = FMK_BACKEND_CUDA;
    o.precision = prec;
    if (k == FMK_KERNEL_PLUMMER || k == FMK_KERNEL_REGULARIZED)
        o.softening = 1e-3;
    fmk_plan *p = NULL;
    FMK_OK_OR_DIE(NULL, fmk_plan_create(&p, dim, k, fmk_eps_default(o.precision), &o));
    FMK_OK_OR_DIE(p, fmk_plan_set_points(p, n, x, 0, NULL));
    double *d_q, *d_pot, *d_grad;
    CUDA_OK(cudaMalloc((void **)&d_q, (size_t)n * cw * sizeof(double)));
    CUDA_OK(cudaMalloc((void **)&d_pot, (size_t)n * cw * sizeof(double)));
    CUDA_OK(cudaMalloc((void **)&d_grad, (size_t)n * gw * sizeof(double)));
    CUDA_OK(cudaMemcpy(d_q, q, (size_t)n * cw * sizeof(double), cudaMemcpyHostToDevice));
    double *tk = malloc(reps * sizeof *tk), *tc = malloc(reps * sizeof *tc);
    fmk_info info;
    FMK_OK_OR_DIE(p, fmk_plan_eval_device(p, d_q, d_pot, d_grad)); /* warm-up */
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        FMK_OK_OR_DIE(p, fmk_plan_eval_device(p, d_q, d_pot, d_grad));
        tc[r] = bench_now() - t0;
        fmk_plan_info(p, &info);
        tk[r] = info.phase_time[FMK_PHASE_P2P];
    }
    result res = {"cuda", k, prec, n, reps, bench_median(tk, reps), bench_median(tc, reps),
                  0,      0, -1};
    res.rate = (double)n * (double)n / res.t_kernel;
    res.frac = res.rate * FLOPS_PER_PAIR / peak_flops[prec == FMK_PRECISION_FP32];
    if (check && k == FMK_KERNEL_LAPLACE) {
        double *pot = malloc((size_t)n * sizeof *pot), *grad = malloc((size_t)n * 3 * sizeof *grad);
        CUDA_OK(cudaMemcpy(pot, d_pot, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(grad, d_grad, (size_t)n * 3 * sizeof(double), cudaMemcpyDeviceToHost));
        res.err = laplace_error(n, x, q, pot, grad, 64);
        free(pot), free(grad);
    }
    cudaFree(d_q), cudaFree(d_pot), cudaFree(d_grad);
    fmk_plan_destroy(p);
    free(x), free(q), free(tk), free(tc);
    return res;
}

static result run_cpu(fmk_precision prec, int64_t n, int reps)
{
    double *x = malloc((size_t)n * 3 * sizeof *x), *q = malloc((size_t)n * sizeof *q);
    double *pot = malloc((size_t)n * sizeof *pot), *grad = malloc((size_t)n * 3 * sizeof *grad);
    for (int64_t i = 0; i < n * 3; i++)
        x[i] = urand();
    for (int64_t i = 0; i < n; i++)
        q[i] = 2 * urand() - 1;
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_DIRECT;
    o.backend = FMK_BACKEND_CPU;
    o.precision = prec;
    fmk_plan *p = NULL;
    FMK_OK_OR_DIE(NULL,
                  fmk_plan_create(&p, 3, FMK_KERNEL_LAPLACE, fmk_eps_default(o.precision), &o));
    FMK_OK_OR_DIE(p, fmk_plan_set_points(p, n, x, 0, NULL));
    double *tk = malloc(reps * sizeof *tk);
    FMK_OK_OR_DIE(p, fmk_plan_eval(p, q, pot, grad));
    fmk_info info;
    for (int r = 0; r < reps; r++) {
        FMK_OK_OR_DIE(p, fmk_plan_eval(p, q, pot, grad));
        fmk_plan_info(p, &info);
        tk[r] = info.phase_time[FMK_PHASE_P2P];
    }
    result res = {"cpu", FMK_KERNEL_LAPLACE, prec, n, reps, bench_median(tk, reps), 0, 0, 0, -1};
    res.t_call = res.t_kernel;
    res.rate = (double)n * (double)n / res.t_kernel;
    res.frac = 0;
    fmk_plan_destroy(p);
    free(x), free(q), free(pot), free(grad), free(tk);
    return res;
}

int main(int argc, char **argv)
{
    int json = 0, quick = 0, headline = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--json") == 0)
            json = 1;
        else if (strcmp(argv[a], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[a], "--headline") == 0)
            headline = 1;
        else {
            fprintf(stderr, "usage: direct [--json] [--quick] [--headline]\n");
            return 2;
        }
    }
    if (fmk_cuda_device_count() <= 0) {
        fprintf(stderr, "direct: no CUDA device\n");
        return 1;
    }
    result res[64];
    int nr = 0;
    const int64_t big = quick ? (1 << 16) : (1 << 20);
    /* the headline: laplace pot + grad, N = M = 2^20 */
    res[nr++] = run_gpu(FMK_KERNEL_LAPLACE, FMK_PRECISION_FP32, big, quick ? 3 : 9, 1);
    res[nr++] = run_gpu(FMK_KERNEL_LAPLACE, FMK_PRECISION_FP64, big, quick ? 3 : 5, 1);
    /* sizes */
    for (int64_t n = 1 << 14; n < big && !headline; n <<= 2)
        for (int prec = 1; prec >= 0; prec--)
            res[nr++] = run_gpu(FMK_KERNEL_LAPLACE, (fmk_precision)prec, n, 5, 0);
    /* the other kernels */
    const fmk_kernel others[] = {FMK_KERNEL_PLUMMER, FMK_KERNEL_REGULARIZED, FMK_KERNEL_LOG2D,
                                 FMK_KERNEL_CAUCHY2D};
    for (int k = 0; k < 4 && !headline; k++)
        for (int prec = 1; prec >= 0; prec--)
            res[nr++] = run_gpu(others[k], (fmk_precision)prec, quick ? 1 << 14 : 1 << 18, 3, 0);
    /* the CPU engine */
    if (!headline) {
        res[nr++] = run_cpu(FMK_PRECISION_FP32, quick ? 1 << 12 : 1 << 15, 3);
        res[nr++] = run_cpu(FMK_PRECISION_FP64, quick ? 1 << 12 : 1 << 15, 3);
    }

    fmk_plan *p = NULL;
    fmk_opts o;
    fmk_opts_default(&o);
    o.backend = FMK_BACKEND_CUDA;
    fmk_info info = {0};
    if (fmk_plan_create(&p, 3, FMK_KERNEL_LAPLACE, fmk_eps_default(o.precision), &o) == FMK_OK)
        fmk_plan_info(p, &info);
    fmk_plan_destroy(p);

    if (json) {
        printf("{\"device\": \"%s\", \"fmmkit\": \"%s\", \"flops_per_pair\": %g, \"results\": [\n",
               info.device_name, fmk_version(), FLOPS_PER_PAIR);
        for (int i = 0; i < nr; i++) {
            const result *r = &res[i];
            printf(
                "  {\"backend\": \"%s\", \"kernel\": \"%s\", \"precision\": \"%s\", \"n\": %lld, "
                "\"reps\": %d, \"kernel_s\": %.6e, \"call_s\": %.6e, \"pairs_per_s\": %.4e, "
                "\"fraction_of_limit\": %.4f, \"rel_l2_error\": %.3e}%s\n",
                r->backend, fmk_kernel_name(r->kernel), r->prec ? "fp32" : "fp64", (long long)r->n,
                r->reps, r->t_kernel, r->t_call, r->rate, r->frac, r->err, i + 1 < nr ? "," : "");
        }
        printf("]}\n");
        return 0;
    }
    printf(
        "fmmkit %s direct sum, pot + grad, N = M (targets = sources), uniform in the unit cube\n",
        fmk_version());
    printf("device: %s; limit = peak flop rate / %g flops per pair = %.3g (fp32), %.3g (fp64) "
           "pairs/s\n",
           info.device_name, FLOPS_PER_PAIR, peak_flops[1] / FLOPS_PER_PAIR,
           peak_flops[0] / FLOPS_PER_PAIR);
    printf("%-5s %-12s %-5s %9s %5s %12s %12s %12s %8s %10s\n", "where", "kernel", "prec", "N",
           "reps", "kernel ms", "call ms", "pairs/s", "of limit", "rel l2 err");
    for (int i = 0; i < nr; i++) {
        const result *r = &res[i];
        char err[32] = "-";
        if (r->err >= 0)
            snprintf(err, sizeof err, "%.2e", r->err);
        char frac[16] = "-";
        if (r->frac > 0)
            snprintf(frac, sizeof frac, "%.1f%%", 100 * r->frac);
        printf("%-5s %-12s %-5s %9lld %5d %12.3f %12.3f %12.4g %8s %10s\n", r->backend,
               fmk_kernel_name(r->kernel), r->prec ? "fp32" : "fp64", (long long)r->n, r->reps,
               1e3 * r->t_kernel, 1e3 * r->t_call, r->rate, frac, err);
    }
    return 0;
}
