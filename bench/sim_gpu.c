/* sim_gpu.c -- the simulation driver with its state on the GPU (issue 34): steps per second of
 * a Plummer sphere (Henon units, Plummer softening 0.98 N^-0.26 (Dehnen 2001), dt 0.005, fixed
 * step) for N = 2^16 .. 2^24 and each method, the headline being the treecode at theta 0.6 in
 * fp32 at 2^20 (the bar: >= 300 steps/s, and everything but set_points + eval <= 5% of
 * a step).
 *
 *   bench_sim_gpu [--min-log2 A] [--max-log2 B] [--steps K] [--only NAME] [--cap-ms MS]
 *                 [--json]
 *
 * For each N and method: K steps (fmk_sim_step, after 3 untimed ones) with the wall time of
 * each; steps/s = K / their sum. "force" is the time in set_points + eval
 * (fmk_sim_info.seconds_force), "outside" the rest of a step as a fraction (the drift and kick
 * kernels, the forces' finite check, the driver's own work). "plan only" times the same plan
 * options on the same points without the driver: K pairs of fmk_plan_set_points_device +
 * fmk_plan_eval_device on device arrays, the bound of a hand-written loop over the plan API.
 * "diag" is one diagnostics reduction (fmk_sim_info_get), paid only for a diagnostics row.
 * The direct sums stop at 2^20 (fp32) and 2^18 (fp64), where a step takes seconds; any method
 * stops growing N after a row whose step took over --cap-ms (1000). The rows marked "1/r" use
 * no softening (the laplace kernel), the case the FMM is built for; "spline" GADGET's cubic
 * spline of the same s (the laplace plan, then the spline's correction of the pairs within
 * 2.8 s; its "plan ms" is the laplace plan's alone). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "fmmkit_sim.h"

#include "bench_util.h"

typedef struct config {
    const char *name;
    fmk_method method;
    fmk_precision precision;
    double theta, eps; /* 0: the defaults */
    int max_log2;
    int softened; /* 1: Plummer softening 0.98 N^-0.26; 0: none (plain 1/r, the laplace kernel);
                   * 2: GADGET's spline of the same s (Newtonian from 2.8 s: the laplace plan and
                   * the spline's correction of the pairs within 2.8 s) */
} config;

static const config configs[] = {
    {"tree fp32 theta 0.6", FMK_METHOD_TREE, FMK_PRECISION_FP32, 0.6, 1e-4, 24, 1},
    {"tree fp64 theta 0.6", FMK_METHOD_TREE, FMK_PRECISION_FP64, 0.6, 1e-6, 24, 1},
    {"fmm fp32 eps 1e-4", FMK_METHOD_FMM, FMK_PRECISION_FP32, 0, 1e-4, 24, 1},
    {"fmm fp64 eps 1e-6", FMK_METHOD_FMM, FMK_PRECISION_FP64, 0, 1e-6, 24, 1},
    {"direct fp32", FMK_METHOD_DIRECT, FMK_PRECISION_FP32, 0, 1e-4, 20, 1},
    {"direct fp64", FMK_METHOD_DIRECT, FMK_PRECISION_FP64, 0, 1e-6, 18, 1},
    {"tree fp32 theta 0.6 1/r", FMK_METHOD_TREE, FMK_PRECISION_FP32, 0.6, 1e-4, 24, 0},
    {"tree fp32 theta 0.6 spline", FMK_METHOD_TREE, FMK_PRECISION_FP32, 0.6, 1e-4, 24, 2},
    {"fmm fp32 eps 1e-4 1/r", FMK_METHOD_FMM, FMK_PRECISION_FP32, 0, 1e-4, 24, 0},
    {"fmm fp64 eps 1e-6 1/r", FMK_METHOD_FMM, FMK_PRECISION_FP64, 0, 1e-6, 24, 0},
};

typedef struct row {
    int ok;
    int64_t steps;
    double steps_per_s, step_ms, force_ms, outside, plan_ms, diag_ms, de;
} row;

static fmk_sim_opts opts_of(const config *c, int64_t n)
{
    fmk_sim_opts o;
    fmk_sim_opts_default(&o);
    o.plan.method = c->method;
    o.plan.backend = FMK_BACKEND_CUDA;
    o.plan.precision = c->precision;
    o.plan.theta = c->theta;
    o.eps = c->eps;
    o.soft = c->softened ? 0.98 * pow((double)n, -0.26) : 0;
    if (c->softened == 2)
        o.softening = FMK_SIM_SOFT_SPLINE;
    o.dt = 0.005;
    return o;
}

/* The same plan without the driver: set_points_device + eval_device, k times. */
static double plan_only(const fmk_sim *sim, const fmk_sim_opts *o, int64_t n, int64_t k)
{
    fmk_opts po = o->plan;
    po.softening = o->softening == FMK_SIM_SOFT_SPLINE ? 0 : o->soft; /* the spline: laplace */
    const fmk_kernel kernel = po.softening > 0 ? FMK_KERNEL_PLUMMER : FMK_KERNEL_LAPLACE;
    fmk_plan *plan = NULL;
    double *d_x = NULL, *d_q = NULL, *d_p = NULL, *d_g = NULL, seconds = -1;
    if (fmk_plan_create(&plan, 3, kernel, o->eps, &po) != FMK_OK ||
        cudaMalloc((void **)&d_x, (size_t)n * 3 * sizeof(double)) != cudaSuccess ||
        cudaMalloc((void **)&d_q, (size_t)n * sizeof(double)) != cudaSuccess ||
        cudaMalloc((void **)&d_p, (size_t)n * sizeof(double)) != cudaSuccess ||
        cudaMalloc((void **)&d_g, (size_t)n * 3 * sizeof(double)) != cudaSuccess)
        goto done;
    if (fmk_sim_get_state_device(sim, d_q, d_x, NULL, NULL, NULL) != FMK_OK)
        goto done;
    for (int64_t s = 0; s < k + 2; s++) {
        const double t0 = bench_now();
        if (fmk_plan_set_points_device(plan, n, d_x, 0, NULL) != FMK_OK ||
            fmk_plan_eval_device(plan, d_q, d_p, d_g) != FMK_OK) {
            seconds = -1;
            goto done;
        }
        if (s >= 2)
            seconds = (seconds < 0 ? 0 : seconds) + bench_now() - t0;
    }
    seconds /= (double)k;
    if (getenv("BENCH_SIM_PHASES")) { /* the plan's phases of the last step, to stderr */
        fmk_info info;
        fmk_plan_info(plan, &info);
        fprintf(stderr, "  plan phases (ms):");
        for (int p = 0; p < FMK_PHASE_COUNT; p++)
            if (info.phase_time[p] > 0)
                fprintf(stderr, " %s %.3f", fmk_phase_name((fmk_phase)p), 1e3 * info.phase_time[p]);
        fputc('\n', stderr);
    }
done:
    fmk_plan_destroy(plan);
    cudaFree(d_x), cudaFree(d_q), cudaFree(d_p), cudaFree(d_g);
    return seconds;
}

static row measure(const config *c, int64_t n, int64_t k_max, const double *m, const double *x,
                   const double *v)
{
    row r;
    memset(&r, 0, sizeof r);
    const fmk_sim_opts o = opts_of(c, n);
    fmk_sim *sim = NULL;
    if (fmk_sim_create(&sim, n, m, x, v, NULL, NULL, &o) != FMK_OK) {
        fprintf(stderr, "%s, N %lld: %s\n", c->name, (long long)n, fmk_sim_last_error(NULL));
        return r;
    }
    fmk_sim_info info;
    fmk_sim_info_get(sim, &info);
    const double e0 = info.total;
    double first = 0;
    for (int s = 0; s < 3; s++) { /* untimed: plans warm up, memory pools fill */
        const double t0 = bench_now();
        if (fmk_sim_step(sim) != FMK_OK) {
            fprintf(stderr, "%s, N %lld: %s\n", c->name, (long long)n, fmk_sim_last_error(sim));
            fmk_sim_destroy(sim);
            return r;
        }
        first = bench_now() - t0;
    }
    /* about 10 s a row at most */
    int64_t k = first > 0 ? (int64_t)(10 / first) : k_max;
    k = k > k_max ? k_max : k < 5 ? 5 : k;
    double wall = 0, force = 0;
    for (int64_t s = 0; s < k; s++) {
        const double t0 = bench_now();
        if (fmk_sim_step(sim) != FMK_OK) {
            fprintf(stderr, "%s, N %lld: %s\n", c->name, (long long)n, fmk_sim_last_error(sim));
            fmk_sim_destroy(sim);
            return r;
        }
        wall += bench_now() - t0;
        fmk_sim_info_get(sim, &info); /* (outside the timed part) */
        force += info.seconds_force;
    }
    const double t0 = bench_now();
    fmk_sim_info_get(sim, &info);
    r.diag_ms = 1e3 * (bench_now() - t0);
    r.ok = 1;
    r.steps = k;
    r.steps_per_s = (double)k / wall;
    r.step_ms = 1e3 * wall / (double)k;
    r.force_ms = 1e3 * force / (double)k;
    r.outside = 1 - force / wall;
    r.de = fabs(info.total / e0 - 1);
    r.plan_ms = 1e3 * plan_only(sim, &o, n, k);
    fmk_sim_destroy(sim);
    return r;
}

int main(int argc, char **argv)
{
    int lo = 16, hi = 24, json = 0;
    int64_t k_max = 50;
    double cap_ms = 1000;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--min-log2") && i + 1 < argc)
            lo = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-log2") && i + 1 < argc)
            hi = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            k_max = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--cap-ms") && i + 1 < argc)
            cap_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else {
            fprintf(stderr,
                    "usage: %s [--min-log2 A] [--max-log2 B] [--steps K] [--only NAME] "
                    "[--cap-ms MS] [--json]\n",
                    argv[0]);
            return 2;
        }
    }
    if (fmk_cuda_device_count() == 0) {
        fprintf(stderr, "bench_sim_gpu: no GPU\n");
        return 1;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    if (json)
        printf("{\"device\": \"%s\", \"rows\": [", prop.name);
    else
        printf("Simulation driver on %s: Plummer sphere, softening 0.98 N^-0.26, dt 0.005, state "
               "on the GPU\n%-22s %9s %9s %9s %9s %8s %9s %8s %9s\n",
               prop.name, "method", "N", "steps/s", "step ms", "force ms", "outside", "plan ms",
               "diag ms", "|dE/E|");
    int first_row = 1;
    enum { N_CONFIGS = sizeof configs / sizeof configs[0] };
    int stopped[N_CONFIGS] = {0}; /* a method whose step took over cap_ms stops growing N */
    for (int l = lo; l <= hi; l++) {
        const int64_t n = (int64_t)1 << l;
        double *m = malloc((size_t)n * sizeof *m), *x = malloc((size_t)n * 3 * sizeof *x),
               *v = malloc((size_t)n * 3 * sizeof *v);
        if (!m || !x || !v)
            return 2;
        fmk_sim_ic_plummer(n, 1, m, x, v);
        for (size_t c = 0; c < N_CONFIGS; c++) {
            const config *cf = &configs[c];
            if (l > cf->max_log2 || stopped[c] || (only && !strstr(cf->name, only)))
                continue;
            const row r = measure(cf, n, k_max, m, x, v);
            stopped[c] = !r.ok || r.step_ms > cap_ms;
            if (json) {
                printf("%s{\"method\": \"%s\", \"n\": %lld, \"ok\": %d, \"steps\": %lld, "
                       "\"steps_per_s\": %.2f, \"step_ms\": %.4f, \"force_ms\": %.4f, "
                       "\"outside_fraction\": %.4f, \"plan_only_ms\": %.4f, \"diag_ms\": %.4f, "
                       "\"dE_over_E\": %.3e}",
                       first_row ? "" : ", ", cf->name, (long long)n, r.ok, (long long)r.steps,
                       r.steps_per_s, r.step_ms, r.force_ms, r.outside, r.plan_ms, r.diag_ms, r.de);
                first_row = 0;
            } else if (r.ok) {
                printf("%-22s %9lld %9.1f %9.3f %9.3f %7.1f%% %9.3f %8.3f %9.1e\n", cf->name,
                       (long long)n, r.steps_per_s, r.step_ms, r.force_ms, 100 * r.outside,
                       r.plan_ms, r.diag_ms, r.de);
            } else {
                printf("%-22s %9lld   failed\n", cf->name, (long long)n);
            }
            fflush(stdout);
        }
        free(m), free(x), free(v);
    }
    if (json)
        printf("]}\n");
    return 0;
}
