/* measure.c -- timed evaluations and relative l2 errors against the fp64 direct sum. */
#include "measure.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of n values (sorts them). */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

fmk_status measure_run(fmk_plan *plan, int64_t n, const double *sources, const double *charges,
                       int64_t m, const double *targets, int warmup, int repeats, double *pot,
                       double *grad, measure_times *times)
{
    return measure_run_sync(plan, n, sources, charges, m, targets, warmup, repeats, pot, grad,
                            times, NULL);
}

fmk_status measure_run_sync(fmk_plan *plan, int64_t n, const double *sources, const double *charges,
                            int64_t m, const double *targets, int warmup, int repeats, double *pot,
                            double *grad, measure_times *times, const measure_sync *sync)
{
    memset(times, 0, sizeof *times);
    /* samples[p * repeats + r]: phase p of repeat r; the last row is the wall-clock time */
    double *samples = malloc(sizeof(double) * (size_t)repeats * (FMK_PHASE_COUNT + 1));
    if (sync) { /* no rank goes on alone into the plan's collective calls */
        double missing = !samples;
        sync->max(&missing, 1);
        if (missing > 0) {
            free(samples);
            return FMK_ERR_NOMEM;
        }
    }
    if (!samples)
        return FMK_ERR_NOMEM;
    double *wall = samples + (size_t)repeats * FMK_PHASE_COUNT;
    fmk_info info;
    if (sync)
        sync->barrier();
    double t0 = cli_now();
    fmk_status st = fmk_plan_set_points(plan, n, sources, targets ? m : 0, targets);
    double setup_wall = cli_now() - t0;
    if (st == FMK_OK) {
        fmk_plan_info(plan, &info);
        times->setup = info.phase_time[FMK_PHASE_SETUP];
        if (sync) {
            sync->max(&setup_wall, 1);
            times->setup = setup_wall;
        }
    }
    for (int w = 0; w < warmup && st == FMK_OK; w++)
        st = fmk_plan_eval(plan, charges, pot, grad);
    for (int r = 0; r < repeats && st == FMK_OK; r++) {
        double row[FMK_PHASE_COUNT + 1];
        if (sync)
            sync->barrier();
        t0 = cli_now();
        st = fmk_plan_eval(plan, charges, pot, grad);
        row[FMK_PHASE_COUNT] = cli_now() - t0;
        fmk_plan_info(plan, &info);
        for (int p = 0; p < FMK_PHASE_COUNT; p++)
            row[p] = info.phase_time[p];
        if (sync)
            sync->max(row, FMK_PHASE_COUNT + 1);
        wall[r] = row[FMK_PHASE_COUNT];
        for (int p = 0; p < FMK_PHASE_COUNT; p++)
            samples[p * repeats + r] = row[p];
    }
    if (st == FMK_OK) {
        for (int p = FMK_PHASE_UPLOAD; p < FMK_PHASE_COUNT; p++)
            times->phase[p] = median(samples + p * repeats, repeats);
        times->phase[FMK_PHASE_SETUP] = times->setup;
        times->eval = median(wall, repeats);
        times->repeats = repeats;
    }
    free(samples);
    return st;
}

/* G(0) of the smooth kernels: what a source adds at its own position. */
static double self_value(fmk_kernel kernel, double s)
{
    if (kernel == FMK_KERNEL_PLUMMER)
        return 1.0 / s; /* 1 / sqrt(0 + s^2) */
    if (kernel == FMK_KERNEL_REGULARIZED)
        return 1.5 / s; /* (0 + 1.5 s^2) / (s^2)^(3/2) */
    return 0.0;         /* singular kernels: coincident points are left out */
}

/* sqrt(num / den), defined as 0 for 0 / 0 (nothing to compare: nothing is wrong). */
static double relative(double num, double den)
{
    if (den > 0)
        return sqrt(num / den);
    return num > 0 ? INFINITY : 0.0;
}

fmk_status measure_errors_direct(int dim, fmk_kernel kernel, double softening, int threads,
                                 int64_t n, const double *sources, const double *charges, int64_t m,
                                 const double *targets, const double *pot, const double *grad,
                                 int64_t sample, dist_rng *rng, measure_errors *errors, char *msg,
                                 size_t size)
{
    const int64_t n_targets = targets ? m : n;
    const int64_t s_count = sample < n_targets ? sample : n_targets;
    const int w = fmk_kernel_is_complex(kernel) ? 2 : 1;
    const int gw = fmk_kernel_is_complex(kernel) ? 2 : dim;
    const double *points = targets ? targets : sources;
    errors->sample = 0;
    errors->pot = errors->grad = NAN;
    if (s_count <= 0)
        return FMK_OK;

    int64_t *index = malloc(sizeof(int64_t) * (size_t)n_targets);
    double *picked = malloc(sizeof(double) * (size_t)((s_count + 2 * dim) * dim));
    double *ref_pot = malloc(sizeof(double) * (size_t)((s_count + 2 * dim) * w));
    double *ref_grad = malloc(sizeof(double) * (size_t)((s_count + 2 * dim) * gw));
    fmk_plan *ref = NULL;
    fmk_status st = FMK_ERR_NOMEM;
    snprintf(msg, size, "out of memory for the reference sum");
    if (!index || !picked || !ref_pot || !ref_grad)
        goto done;

    /* The first s_count entries of a partial Fisher-Yates shuffle. */
    for (int64_t i = 0; i < n_targets; i++)
        index[i] = i;
    for (int64_t i = 0; i < s_count; i++) {
        int64_t j = i + dist_rng_below(rng, n_targets - i);
        int64_t t = index[i];
        index[i] = index[j], index[j] = t;
    }
    for (int64_t i = 0; i < s_count; i++)
        memcpy(picked + dim * i, points + dim * index[i], sizeof(double) * (size_t)dim);
    /* fmmkit maps points into the frame of their bounding box (internal.h). With separate
     * targets, the extreme ones join the reference's targets so that both plans see the same box,
     * map every point identically, and the comparison measures the method alone rather than the
     * conditioning of near pairs under a different rounding of coordinates. */
    int64_t extra = 0;
    if (targets)
        for (int k = 0; k < dim; k++)
            for (int side = 0; side < 2; side++) {
                int64_t best = 0;
                for (int64_t i = 1; i < m; i++) {
                    double v = targets[dim * i + k], b = targets[dim * best + k];
                    if (side ? v > b : v < b)
                        best = i;
                }
                memcpy(picked + dim * (s_count + extra++), targets + dim * best,
                       sizeof(double) * (size_t)dim);
            }

    fmk_opts opts;
    fmk_opts_default(&opts);
    opts.method = FMK_METHOD_DIRECT;
    opts.backend = FMK_BACKEND_CPU;
    opts.precision = FMK_PRECISION_FP64;
    opts.softening = softening;
    opts.threads = threads;
    st = fmk_plan_create(&ref, dim, kernel, 1e-15, &opts);
    if (st != FMK_OK) {
        snprintf(msg, size, "%s", fmk_plan_last_error(NULL));
        goto done;
    }
    st = fmk_plan_set_points(ref, n, sources, s_count + extra, picked);
    if (st == FMK_OK)
        st = fmk_plan_eval(ref, charges, ref_pot, ref_grad);
    if (st != FMK_OK) {
        snprintf(msg, size, "%s", fmk_plan_last_error(ref));
        goto done;
    }
    if (!targets) {
        double g0 = self_value(kernel, softening);
        for (int64_t i = 0; i < s_count; i++)
            ref_pot[i] -= charges[index[i]] * g0; /* smooth kernels are real */
    }

    double num_p = 0, den_p = 0, num_g = 0, den_g = 0;
    for (int64_t i = 0; i < s_count; i++) {
        const int64_t t = index[i];
        for (int k = 0; k < w; k++) {
            double r = ref_pot[w * i + k], d = pot[w * t + k] - r;
            num_p += d * d, den_p += r * r;
        }
        for (int k = 0; k < gw; k++) {
            double r = ref_grad[gw * i + k], d = grad[gw * t + k] - r;
            num_g += d * d, den_g += r * r;
        }
    }
    errors->sample = s_count;
    errors->pot = relative(num_p, den_p);
    errors->grad = relative(num_g, den_g);
    msg[0] = '\0';

done:
    fmk_plan_destroy(ref);
    free(index);
    free(picked);
    free(ref_pot);
    free(ref_grad);
    return st;
}
