/* measure.h -- timing a plan's evaluations and checking its results against the fp64 direct sum,
 * shared by `fmmkit bench` and `fmmkit demo`. */
#ifndef FMMKIT_CLI_MEASURE_H
#define FMMKIT_CLI_MEASURE_H

#include <stdint.h>

#include "dist.h"
#include "fmmkit.h"

/* Median times of repeated evaluations. */
typedef struct measure_times {
    double setup;                  /* the one set_points call (phase "setup") */
    double phase[FMK_PHASE_COUNT]; /* median over the timed evaluations of each phase */
    double eval;                   /* median wall-clock seconds of one fmk_plan_eval */
    int repeats;
} measure_times;

/* How the ranks of a distributed plan time together (bench_mpi.c fills it; NULL: one process):
 * barrier before each timed call, and max replaces values[0..n) by their largest over the ranks
 * on every rank. */
typedef struct measure_sync {
    void (*barrier)(void);
    void (*max)(double *values, int n);
} measure_sync;

/* Calls set_points once, then evaluates warmup + repeats times (repeats >= 1), timing each
 * evaluation after the warm-up. targets = NULL: targets are the sources. pot and grad as for
 * fmk_plan_eval (both are written). Returns the library's status. */
fmk_status measure_run(fmk_plan *plan, int64_t n, const double *sources, const double *charges,
                       int64_t m, const double *targets, int warmup, int repeats, double *pot,
                       double *grad, measure_times *times);

/* measure_run for the ranks of a distributed plan (sync not NULL), every rank calling it: each
 * timed call (set_points, each evaluation) starts after a barrier, and its wall-clock time and
 * phase times are the largest over the ranks; times->setup is then set_points' wall-clock time,
 * communication included. The same status on every rank. */
fmk_status measure_run_sync(fmk_plan *plan, int64_t n, const double *sources, const double *charges,
                            int64_t m, const double *targets, int warmup, int repeats, double *pot,
                            double *grad, measure_times *times, const measure_sync *sync);

/* Relative l2 errors of potential and gradient over a sample of targets. */
typedef struct measure_errors {
    int64_t sample; /* targets checked (0: no check was made; errors are then NaN) */
    double pot;
    double grad;
} measure_errors;

/* Compares pot and grad (the results at all m targets, or at the n sources when targets is NULL)
 * with an fp64 direct sum on the CPU at `sample` targets drawn without replacement by rng.
 * When the targets are the sources, the sampled sources are passed as separate targets: a
 * target on its own source contributes nothing for the singular kernels, and for the smooth
 * ones the self term q_i G(0) is subtracted. threads as in fmk_opts. Returns the status of the
 * reference computation; on failure msg (size bytes) holds the library's sentence. */
fmk_status measure_errors_direct(int dim, fmk_kernel kernel, double softening, int threads,
                                 int64_t n, const double *sources, const double *charges, int64_t m,
                                 const double *targets, const double *pot, const double *grad,
                                 int64_t sample, dist_rng *rng, measure_errors *errors, char *msg,
                                 size_t size);

#endif /* FMMKIT_CLI_MEASURE_H */
