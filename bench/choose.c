/* bench/choose.c -- the crossovers of method auto (src/core/choose.c, docs/choosing.md): the
 * time of a one-shot call (fmk_plan_create + set_points + eval, targets = sources, potential
 * and gradient) of the direct sum and of the FMM against N, and the N at which the FMM becomes
 * the faster, per backend, dimension, precision and eps.
 *
 *   bench_choose [cpu|cuda|all] [--json]
 *
 * Kernels laplace (3D) and log2d (2D), uniform points in the unit box, random charges; N = 2^8
 * .. 2^17 (CPU) or 2^10 .. 2^19 (GPU) in steps of 2^(1/2), median of 3 calls (1 once a call
 * takes over a second). A method stops once one call takes over 4 s. The crossover N* is
 * interpolated (in log N) where the time ratio passes 1; the library's table is 2 N M / (N + M)
 * >= N*. Public API only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "fmmkit.h"

static uint64_t rng_state = 777;
static double urand(void)
{
    return bench_urand(&rng_state);
}

/* Seconds of one one-shot call, or -1 when refused. */
static double one_call(fmk_method m, fmk_backend b, fmk_precision p, int dim, double eps, int64_t n,
                       const double *x, const double *q, double *pot, double *grad)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = m, o.backend = b, o.precision = p;
    const double t0 = bench_now();
    fmk_plan *plan = NULL;
    fmk_status st =
        fmk_plan_create(&plan, dim, dim == 3 ? FMK_KERNEL_LAPLACE : FMK_KERNEL_LOG2D, eps, &o);
    if (st == FMK_OK)
        st = fmk_plan_set_points(plan, n, x, 0, NULL);
    if (st == FMK_OK)
        st = fmk_plan_eval(plan, q, pot, grad);
    fmk_plan_destroy(plan);
    return st == FMK_OK ? bench_now() - t0 : -1;
}

static double timed(fmk_method m, fmk_backend b, fmk_precision p, int dim, double eps, int64_t n,
                    const double *x, const double *q, double *pot, double *grad)
{
    double t[3];
    int reps = 0;
    for (; reps < 3; reps++) {
        t[reps] = one_call(m, b, p, dim, eps, n, x, q, pot, grad);
        if (t[reps] < 0)
            return -1;
        if (t[reps] > 1)
            return t[reps];
    }
    return bench_median(t, reps);
}

int main(int argc, char **argv)
{
    const char *which = "all";
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else
            which = argv[i];
    }
    const int64_t nmax = 1 << 19;
    double *x = malloc(sizeof(double) * 3 * nmax), *q = malloc(sizeof(double) * nmax);
    double *pot = malloc(sizeof(double) * nmax), *grad = malloc(sizeof(double) * 3 * nmax);
    if (!x || !q || !pot || !grad)
        return fprintf(stderr, "out of memory\n"), 1;
    for (int64_t i = 0; i < 3 * nmax; i++)
        x[i] = urand();
    for (int64_t i = 0; i < nmax; i++)
        q[i] = urand() - 0.5;
    const double epss[3] = {1e-3, 1e-6, 1e-9};
    if (json)
        printf("[\n");
    else
        printf("| backend | dim | prec | eps | N | direct ms | fmm ms |\n| --- | --- | --- | --- | "
               "--- | --- | --- |\n");
    int first = 1;
    char crossings[4096] = "";
    for (int bi = 0; bi < 2; bi++) {
        const fmk_backend b = bi ? FMK_BACKEND_CUDA : FMK_BACKEND_CPU;
        if (strcmp(which, "all") && strcmp(which, fmk_backend_name(b)))
            continue;
        if (b == FMK_BACKEND_CUDA && fmk_cuda_device_count() <= 0)
            continue;
        for (int dim = 3; dim >= 2; dim--)
            for (int pi = 0; pi < 2; pi++) {
                const fmk_precision p = pi ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64;
                if (p == FMK_PRECISION_FP32 && b == FMK_BACKEND_CPU)
                    continue; /* the CPU's fp32 engines run at about its fp64 speed */
                for (int e = 0; e < (p == FMK_PRECISION_FP32 ? 1 : 3); e++) {
                    /* the direct sum does not depend on eps: measured once per row set */
                    const double eps = p == FMK_PRECISION_FP32 ? 1e-3 : epss[e];
                    double prev_ratio = -1, prev_n = 0, cross = -1;
                    int direct_on = 1, fmm_on = 1;
                    const double k0 = b == FMK_BACKEND_CUDA ? 20 : 16;
                    for (double k = k0; k <= 2 * log2((double)nmax) + 1e-9; k += 1) {
                        const int64_t n = (int64_t)llround(pow(2, k / 2));
                        const double td =
                            direct_on ? timed(FMK_METHOD_DIRECT, b, p, dim, eps, n, x, q, pot, grad)
                                      : -1;
                        const double tf =
                            fmm_on ? timed(FMK_METHOD_FMM, b, p, dim, eps, n, x, q, pot, grad) : -1;
                        direct_on = td >= 0 && td < 4, fmm_on = tf >= 0 && tf < 4;
                        if (json)
                            printf("%s  {\"backend\": \"%s\", \"dim\": %d, \"precision\": "
                                   "\"%s\", \"eps\": %g, \"n\": %lld, \"direct_s\": %.6e, "
                                   "\"fmm_s\": %.6e}",
                                   first ? "" : ",\n", fmk_backend_name(b), dim,
                                   pi ? "fp32" : "fp64", eps, (long long)n, td, tf);
                        else
                            printf("| %s | %d | %s | %g | %lld | %.3f | %.3f |\n",
                                   fmk_backend_name(b), dim, pi ? "fp32" : "fp64", eps,
                                   (long long)n, td * 1e3, tf * 1e3);
                        first = 0;
                        if (td > 0 && tf > 0) {
                            const double ratio = log(td / tf);
                            if (cross < 0 && ratio >= 0 && prev_ratio < 0 && prev_n > 0)
                                cross = exp(log(prev_n) + (log((double)n) - log(prev_n)) *
                                                              (-prev_ratio) / (ratio - prev_ratio));
                            else if (cross < 0 && ratio >= 0 && prev_n == 0)
                                cross = (double)n; /* the FMM faster from the first N */
                            prev_ratio = ratio, prev_n = (double)n;
                        }
                        if (!direct_on || !fmm_on || cross > 0)
                            if (cross > 0 && k > 2 * log2(cross) + 2)
                                break;
                        if (!direct_on && !fmm_on)
                            break;
                    }
                    char line[256];
                    snprintf(line, sizeof line, "%s %dD %s eps %g: N* = %.0f\n",
                             fmk_backend_name(b), dim, pi ? "fp32" : "fp64", eps, cross);
                    strncat(crossings, line, sizeof crossings - strlen(crossings) - 1);
                }
            }
    }
    if (json)
        printf("\n]\n");
    else
        printf("\ncrossovers (N at which the FMM becomes the faster; -1: not within the range)\n%s",
               crossings);
    free(x), free(q), free(pot), free(grad);
    return 0;
}
