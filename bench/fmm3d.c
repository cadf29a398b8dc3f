/* fmm3d.c -- benchmark of the 3D FMM on the GPU (method fmm, backend cuda, laplace, fp64; fp32
 * in the fp32 mode).
 * set_points (host points, or device points in the bar-d rows: tree, lists, operators) and eval (charges, potential and
 * gradient on the device: fmk_plan_eval_device) are timed separately, wall clock (both return
 * with the work done), median of repeats after a warm-up; the phases from fmk_info (CUDA
 * events). Errors: relative l2 of the potential and of the gradient at 1000 sampled targets
 * against a direct sum in double on the host. Prints tables, or JSON with --json.
 *
 *   fmm3d bar        2^20 uniform and Plummer at eps 1e-6: set_points, eval, phases, M2L rate;
 *                    rows bar: points from the host, bar-d: from the device (set_points_device)
 *   fmm3d near       Plummer and uniform at 2^20, eps 1e-6: the threshold of W and X entries
 *                    done as P2P, and the leaf
 *   fmm3d fp32       2^20 uniform and Plummer at eps 1e-3 and 1e-5, fp32 and fp64 (device points)
 *   fmm3d overlap    eval's near field alongside the far field (on two streams) and after it
 *                    (one stream): 2^20 uniform and Plummer at eps 1e-6, fp32 at eps 1e-5,
 *                    2^19 separate targets, eps 1e-3, and 2^12, 2^16 points (device points)
 *   fmm3d m2l        the M2L's GEMMs per octant: a GEMM per direction (-1), runs of directions
 *                    merged across gaps of <= 2, 5, 11 and any number of directions, 2^20
 *                    uniform and Plummer at eps 1e-6,
 *                    one stream (the phases alone), then two streams at the default
 *   fmm3d trunc      the M2L with the far directions' operators truncated, safety factors 0
 *                    (whole operators), 1, 0.3, 0.1, 0.03: 2^20 uniform and Plummer at eps
 *                    1e-6, one stream (the phases alone) and two (device points), with errors
 *   fmm3d m2lcls     the M2L's variants: whole operators, truncated, truncated in 2, 3, 4 degree
 *                    classes, and the size rule (whole below 1000, 5000, 40000 boxes in the M2L's
 *                    columns): 2^12 .. 2^20 uniform and 2^20 Plummer at eps 1e-3 and 1e-6, one
 *                    stream (the M2L alone) and two (eval, errors), device points; the degrees of
 *                    one octant's 189 directions, truncated and in classes
 *   fmm3d fitmix     the fit on uniform sets whose tree is complete to a level and may split
 *                    once more (2^18, 4e5, 6e5, 2^22, 2^24): fit off, 4, 5, 6 points per lane
 *   fmm3d draws [K]  2^K uniform points (default 2^18) on 8 draws: eval, P2P alone, and the
 *                    P2P of leaf pairs counted (pairs, leaf sizes, pass slots)
 *   fmm3d table8     Gumerov & Duraiswami (paper 003) Table 8: N = 2^20 uniform, p = 4, 8, 12,
 *                    potential, and potential + gradient
 *   fmm3d cross      N = 2^12 .. 2^20 uniform: FMM (eps 1e-3, 1e-6) vs GPU direct and treecode
 *   fmm3d fresh [R]  the first call of a fresh plan: R plans (default 9) one after another, each
 *                    created, given device points, evaluated once and destroyed, every call timed
 *                    (2^20 uniform and Plummer, 2^16, 2^12 uniform, eps 1e-6); the median leaves
 *                    out the process's first plan
 *   fmm3d freshblas [R]  fresh plans (2^20 uniform) with their cuBLAS handle made when
 *                    set_points starts and at the first eval's M2L, alternately
 *   fmm3d newton     the P2P of leaf pairs at 2 and 4 points per lane, 1/r by the third-order
 *                    correction and by a Newton step: 2^20 uniform and Plummer at eps 1e-6,
 *                    one stream (the phases alone) and two (device points)
 *   fmm3d cols       P2M and L2P as a thread per point, by column groups and records, and P2M
 *                    two sources a lane at a time: 2^20 uniform and Plummer at eps 1e-6, one
 *                    stream (the phases alone) and two (device points)
 *   fmm3d small      N = 2^12, 2^14, 2^16, 2^18, 2^20 uniform, FMM only, eps 1e-3 and 1e-6 (the
 *                    small-N floor of eval and set_points)
 *   fmm3d scale [K]  N = 2^16 .. 2^K (default 26) uniform at eps 1e-6, slope of log t vs log N
 *   fmm3d leaf P     leaf sizes at order P, 2^20 uniform (the cost model's calibration)
 *   fmm3d cost       p = 4 .. 16 at 2^20 uniform, leaves of 32 and of 256 points (B and C of
 *                    the cost model per p)
 *   fmm3d order [K]  errors against p = 2 .. K (default 30) for the five test distributions,
 *                    N = 10^5 (the eps -> p calibration); orderhi [K]: p = 34 .. K (default 60)
 *                    for the five, the orders of the rotation-based M2L
 *   fmm3d rot        the M2L by rotations against the dense matrices at p = 20 .. 32 (2^20
 *                    uniform, leaves of 38 p, one stream: each phase's own time), then eps
 *                    1e-10 .. 1e-13 at 2^20 uniform and Plummer (the orders from eps, two streams)
 *   fmm3d nd         several charge vectors in one evaluation (fmk_plan_eval_many_device, points
 *                    and charges on the device, potential + gradient): 2^20 uniform and Plummer
 *                    at eps 1e-6, fp64, nd = 1, 2, 4, 8 vectors (plans with opts.n_vectors = nd):
 *                    eval, its ratio to nd = 1, per vector, the phases; then the phases alone
 *                    (one stream), eval_many's P2P of leaf pairs at 1 .. 4 points per lane
 *                    (fmm3d.p2p_many_rt), P2M and L2P vector by vector or the harmonics once
 *                    (fmm3d.many_points), leaf sizes at nd = 4, and the GPU direct sum at 2^16
 *                    points, nd = 1, 2, 4, 8
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "bench_util.h"
#include "fmmkit.h"

#include "core/internal.h"
#include "core/tune.h"
#include "fmm3d/cuda/fmm3d_tune.h"
#include "fmm3d/cuda/report.h"


static int leaf_report; /* measure prints them (draws) */

/* The GPU engine's knobs (core/tune.h, "fmm3d.<field>"; defaults of fmm3d/cuda/fmm3d_cuda.h),
 * set on every GPU FMM plan measure makes (gpu_knobs): a table changes a field here around its
 * rows and restores it after. */
static fmk_fmm3d_cuda_tune knob; /* main: the engine's defaults (fmk_tune_defaults) */

/* The knobs above into a new plan of the GPU FMM (other engines: nothing). */
static fmk_status gpu_knobs(fmk_plan *p)
{
    if (p)
        fmk_plan_tune_copy(p, FMK_METHOD_FMM, &knob, sizeof knob);
    return FMK_OK;
}

#define SAMPLES 1000
static int json, first_row = 1;
static int device_points; /* set_points_device with the points on the device */
static fmk_precision precision = FMK_PRECISION_FP64;
static int64_t
    separate_targets; /* > 0: that many targets (uniform in the sources' box), no errors */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return ((rng >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static void *xmalloc(size_t b)
{
    void *p = malloc(b ? b : 1);
    if (!p) {
        fprintf(stderr, "fmm3d: out of host memory (%zu bytes)\n", b);
        exit(1);
    }
    return p;
}

/* uniform cube; Plummer (scale 1, cut at radius 4); corner: uniform^3; nested clusters;
 * sphere surface. */
static void points(const char *dist, int64_t n, double *x)
{
    for (int64_t i = 0; i < n; i++) {
        double *p = x + 3 * i;
        if (!strcmp(dist, "plummer")) {
            double r;
            do
                r = 1 / sqrt(pow(urand(), -2.0 / 3.0) - 1);
            while (r > 4);
            const double z = 2 * urand() - 1, ph = 6.283185307179586 * urand(), s = sqrt(1 - z * z);
            p[0] = r * s * cos(ph), p[1] = r * s * sin(ph), p[2] = r * z;
        } else if (!strcmp(dist, "sphere")) {
            const double z = 2 * urand() - 1, ph = 6.283185307179586 * urand(), s = sqrt(1 - z * z);
            p[0] = s * cos(ph), p[1] = s * sin(ph), p[2] = z;
        } else if (!strcmp(dist, "corner")) {
            for (int k = 0; k < 3; k++) {
                const double u = urand();
                p[k] = u * u * u;
            }
        } else if (!strcmp(dist, "nested")) {
            const int level = (int)(i % 3);
            const double side = level == 0 ? 1 : level == 1 ? 0.05 : 0.0025;
            for (int k = 0; k < 3; k++)
                p[k] = 0.3 + side * (urand() - (level ? 0.5 : 0.3));
        } else {
            for (int k = 0; k < 3; k++)
                p[k] = urand();
        }
    }
    /* into [1, 2]^3 with points at both corners: the plan's frame is the identity, so the
     * reference sees the FMM's coordinates (the errors measure the method, not the input's
     * rounding) */
    double lo = x[0], hi = x[0];
    for (int64_t i = 0; i < 3 * n; i++)
        lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
    for (int64_t i = 0; i < 3 * n; i++)
        x[i] = 1 + (x[i] - lo) / (hi - lo);
    if (n >= 2)
        for (int k = 0; k < 3; k++)
            x[k] = 1, x[3 + k] = 2;
}

typedef struct result {
    double setup, eval;            /* seconds, medians */
    double setup_first;            /* seconds, the first set_points of a fresh plan */
    double create, eval_first;     /* seconds: fmk_plan_create, the plan's first evaluation */
    double phase[FMK_PHASE_COUNT]; /* of the last evaluation */
    double err_pot, err_grad;      /* -1: not measured */
    int order, levels;
    int64_t leaf, bytes_device, plan_bytes_device;
    double m2l_rate, m2l_rate_tiles; /* flop/s in M2L: V pairs, and pairs the tiles multiply */
    double setup_part[12];       /* FMM, last set_points: start, tree, lists, operators, buffers;
                                     * the lists' stages: points, boxes, lists, directions, work, tiles */
    double setup_first_part[12]; /* the same of the plan's first set_points (and [11]: the GPU
                                     * time of its M2L matrices' kernel) */
    double m2l;                  /* seconds, the M2L phase's median over the timed evaluations */
    int64_t m2l_boxes;           /* FMM: the M2L's GEMM columns (boxes from level 2 down) */
    int m2l_gemms, m2l_whole;    /* and its GEMMs, whole (1) or truncated (0) operators */
    int64_t p2p[8];              /* FMM: the P2P of leaf pairs counted (fmk_cuda_fmm3d_p2p_stats) */
} result;

/* Direct sum in double at SAMPLES targets (every n/SAMPLES-th source). */
static void errors(int64_t n, const double *x, const double *q, const double *pot,
                   const double *grad, double *ep, double *eg)
{
    const int64_t m = n < SAMPLES ? n : SAMPLES, stride = n / m;
    double dp = 0, np = 0, dg = 0, ng = 0;
#pragma omp parallel for reduction(+ : dp, np, dg, ng) schedule(dynamic, 4)
    for (int64_t s = 0; s < m; s++) {
        const int64_t i = s * stride;
        double p = 0, g[3] = {0, 0, 0};
        for (int64_t j = 0; j < n; j++) {
            const double d[3] = {x[3 * i] - x[3 * j], x[3 * i + 1] - x[3 * j + 1],
                                 x[3 * i + 2] - x[3 * j + 2]};
            const double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
            if (r2 == 0)
                continue;
            const double inv = 1 / sqrt(r2);
            p += q[j] * inv;
            for (int k = 0; k < 3; k++)
                g[k] -= q[j] * d[k] * inv * inv * inv;
        }
        dp += (pot[i] - p) * (pot[i] - p), np += p * p;
        if (grad)
            for (int k = 0; k < 3; k++)
                dg += (grad[3 * i + k] - g[k]) * (grad[3 * i + k] - g[k]), ng += g[k] * g[k];
    }
    *ep = sqrt(dp / np);
    *eg = grad ? sqrt(dg / ng) : -1;
}

/* One configuration: reps set_points and reps evaluations (after one of each as warm-up). */
static int measure(fmk_method method, double eps, int order, int64_t leaf, const char *dist,
                   int64_t n, int want_grad, int reps, int check, result *r)
{
    memset(r, 0, sizeof *r);
    r->err_pot = r->err_grad = -1;
    const int64_t nt = separate_targets > 0 ? separate_targets : n;
    /* two draws of the points: the timed set_points alternate between them, so that each call
     * sees new points (as in a time step) and none can reuse the previous call's geometry */
    const size_t nx = 3 * (size_t)(n + separate_targets);
    double *x = xmalloc(16 * nx), *q = xmalloc(8 * (size_t)n);
    for (int v = 0; v < 2; v++) {
        points(dist, n, x + v * nx);
        if (separate_targets > 0)
            points("cube", separate_targets, x + v * nx + 3 * n);
    }
    const double *xt = separate_targets > 0 ? x + 3 * n : NULL;
    if (xt)
        check = 0;
    for (int64_t i = 0; i < n; i++)
        q[i] = 2 * urand() - 1;
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = method;
    o.backend = FMK_BACKEND_CUDA;
    o.order = order;
    o.leaf_size = leaf;
    o.precision = precision;
    fmk_plan *p = NULL;
    const double tc = bench_now();
    fmk_status created = fmk_plan_create(&p, 3, FMK_KERNEL_LAPLACE, eps, &o);
    if (created == FMK_OK && (created = gpu_knobs(p)) != FMK_OK) {
        fprintf(stderr, "fmm3d: %s\n", fmk_plan_last_error(p));
        fmk_plan_destroy(p), p = NULL;
    }
    r->create = bench_now() - tc;
    if (created != FMK_OK) {
        fprintf(stderr, "fmm3d: %s\n", fmk_plan_last_error(NULL));
        free(x), free(q);
        return -1;
    }
    int64_t hb = 0, db = 0;
    fmk_plan_memory(p, n, xt ? nt : -1, &hb, &db);
    r->plan_bytes_device = db;
    double *dq = NULL, *dp = NULL, *dg = NULL;
    cudaMalloc((void **)&dq, 8 * (size_t)n);
    cudaMalloc((void **)&dp, 8 * (size_t)nt);
    cudaMalloc((void **)&dg, 24 * (size_t)nt);
    cudaMemcpy(dq, q, 8 * (size_t)n, cudaMemcpyHostToDevice);
    double *dx = NULL;
    if (device_points) {
        cudaMalloc((void **)&dx, 16 * nx);
        cudaMemcpy(dx, x, 16 * nx, cudaMemcpyHostToDevice);
    }
    double ts[16], te[16], tm[16];
    int ok = 1;
    /* set k uses draw k % 2; one more untimed call with draw 0 when the last timed one was 1 */
    for (int k = 0; k <= reps + (reps % 2) && ok; k++) {
        const size_t off = (size_t)(k % 2) * nx;
        const double *hs = x + off, *ds = dx ? dx + off : NULL;
        const double t0 = bench_now();
        const int64_t m = xt ? nt : 0;
        ok = (ds ? fmk_plan_set_points_device(p, n, ds, m, xt ? ds + 3 * n : NULL)
                 : fmk_plan_set_points(p, n, hs, m, xt ? hs + 3 * n : NULL)) == FMK_OK;
        const double t1 = bench_now();
        if (k == 0) {
            r->setup_first = t1 - t0;
            if (ok && method == FMK_METHOD_FMM)
                fmk_cuda_fmm3d_setup_times(p, r->setup_first_part);
        } else if (k <= reps)
            ts[k - 1] = t1 - t0;
    }
    for (int k = 0; k <= reps && ok; k++) {
        const double t0 = bench_now();
        ok = fmk_plan_eval_device(p, dq, dp, want_grad ? dg : NULL) == FMK_OK;
        const double t1 = bench_now();
        if (k > 0) {
            te[k - 1] = t1 - t0;
            fmk_info info;
            tm[k - 1] =
                ok && fmk_plan_info(p, &info) == FMK_OK ? info.phase_time[FMK_PHASE_M2L] : 0;
        } else {
            r->eval_first = t1 - t0;
            double part
                [12]; /* the M2L matrices' GPU time: known once the first eval waited for them */
            if (ok && method == FMK_METHOD_FMM && fmk_cuda_fmm3d_setup_times(p, part) == FMK_OK)
                r->setup_first_part[11] = part[11];
        }
    }
    if (!ok) {
        fprintf(stderr, "fmm3d: %s\n", fmk_plan_last_error(p));
    } else {
        r->setup = bench_median(ts, reps);
        r->eval = bench_median(te, reps);
        r->m2l = bench_median(tm, reps);
        if (method == FMK_METHOD_FMM)
            fmk_cuda_fmm3d_m2l_shape(p, &r->m2l_boxes, &r->m2l_gemms, &r->m2l_whole);
        if (method == FMK_METHOD_FMM)
            fmk_cuda_fmm3d_p2p_stats(p, r->p2p);
        if (method == FMK_METHOD_FMM && leaf_report && !json)
            fmk_cuda_fmm3d_leaf_report(p, stdout);
        fmk_info info;
        fmk_plan_info(p, &info);
        memcpy(r->phase, info.phase_time, sizeof r->phase);
        r->order = info.order, r->levels = info.levels, r->leaf = info.leaf_size;
        r->bytes_device = info.bytes_device;
        if (method == FMK_METHOD_FMM)
            fmk_cuda_fmm3d_setup_times(p, r->setup_part);
        int64_t pairs, tile_pairs;
        int S;
        if (method == FMK_METHOD_FMM &&
            fmk_cuda_fmm3d_m2l_work(p, &pairs, &tile_pairs, &S) == FMK_OK &&
            info.phase_time[FMK_PHASE_M2L] > 0) {
            r->m2l_rate = 2.0 * S * S * (double)pairs / info.phase_time[FMK_PHASE_M2L];
            r->m2l_rate_tiles = 2.0 * S * S * (double)tile_pairs / info.phase_time[FMK_PHASE_M2L];
        }
        if (check) {
            double *pot = xmalloc(8 * (size_t)n),
                   *grad = want_grad ? xmalloc(24 * (size_t)n) : NULL;
            cudaMemcpy(pot, dp, 8 * (size_t)n, cudaMemcpyDeviceToHost);
            if (grad)
                cudaMemcpy(grad, dg, 24 * (size_t)n, cudaMemcpyDeviceToHost);
            errors(n, x, q, pot, grad, &r->err_pot, &r->err_grad);
            free(pot), free(grad);
        }
    }
    cudaFree(dq), cudaFree(dp), cudaFree(dg), cudaFree(dx);
    fmk_plan_destroy(p);
    free(x), free(q);
    return ok ? 0 : -1;
}

/* Fresh plans one after another, as a program that makes a plan per problem: create,
 * set_points_device, eval_device (potential and gradient), destroy, each timed (wall clock; the
 * calls return with the work done), plans times; the first is the process's first plan (CUDA's
 * and cuBLAS's start), the median of the others is the figure. Errors of the last plan. */
static void fresh(const char *dist, int64_t n, double eps, int plans)
{
    double *x = xmalloc(24 * (size_t)n), *q = xmalloc(8 * (size_t)n);
    points(dist, n, x);
    for (int64_t i = 0; i < n; i++)
        q[i] = 2 * urand() - 1;
    double *dx = NULL, *dq = NULL, *dp = NULL, *dg = NULL;
    cudaMalloc((void **)&dx, 24 * (size_t)n);
    cudaMalloc((void **)&dq, 8 * (size_t)n);
    cudaMalloc((void **)&dp, 8 * (size_t)n);
    cudaMalloc((void **)&dg, 24 * (size_t)n);
    cudaMemcpy(dx, x, 24 * (size_t)n, cudaMemcpyHostToDevice);
    cudaMemcpy(dq, q, 8 * (size_t)n, cudaMemcpyHostToDevice);
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_FMM;
    o.backend = FMK_BACKEND_CUDA;
    enum { MAXP = 32 };
    plans = plans < 2 ? 2 : plans > MAXP ? MAXP : plans;
    double tc[MAXP], ts[MAXP], te[MAXP], tsum[MAXP], ttot[MAXP], td[MAXP];
    int ok = 1, m = 0;
    double ep = -1, eg = -1;
    if (!json)
        printf("fresh plans: %s N = %lld eps %.0e, device points, potential + gradient (ms)\n",
               dist, (long long)n, eps);
    for (int i = 0; i < plans && ok; i++) {
        fmk_plan *p = NULL;
        const double t0 = bench_now();
        ok =
            fmk_plan_create(&p, 3, FMK_KERNEL_LAPLACE, eps, &o) == FMK_OK && gpu_knobs(p) == FMK_OK;
        const double t1 = bench_now();
        ok = ok && fmk_plan_set_points_device(p, n, dx, 0, NULL) == FMK_OK;
        const double t2 = bench_now();
        ok = ok && fmk_plan_eval_device(p, dq, dp, dg) == FMK_OK;
        const double t3 = bench_now();
        double part[12] = {0};
        if (ok)
            fmk_cuda_fmm3d_setup_times(p, part);
        if (!ok)
            fprintf(stderr, "fmm3d: %s\n", fmk_plan_last_error(p));
        const double t4 = bench_now();
        fmk_plan_destroy(p);
        const double t5 = bench_now();
        if (!ok)
            break;
        if (json)
            printf("%s{\"table\":\"fresh\",\"dist\":\"%s\",\"n\":%lld,\"eps\":%g,\"plan\":%d,"
                   "\"create_ms\":%.4f,"
                   "\"setup_ms\":%.4f,\"eval_ms\":%.4f,\"destroy_ms\":%.4f,\"setup_start_ms\":%.4f,"
                   "\"setup_tree_ms\":%.4f,\"setup_lists_ms\":%.4f,\"setup_ops_ms\":%.4f,\"setup_"
                   "buffers_ms\":%.4f}",
                   first_row ? "[\n" : ",\n", dist, (long long)n, eps, i, 1e3 * (t1 - t0),
                   1e3 * (t2 - t1), 1e3 * (t3 - t2), 1e3 * (t5 - t4), 1e3 * part[0], 1e3 * part[1],
                   1e3 * part[2], 1e3 * part[3], 1e3 * part[4]);
        else
            printf("  plan %2d%s: create %6.2f  set_points %6.2f (start %.2f tree %.2f lists %.2f "
                   "operators %.2f "
                   "buffers %.2f; M2L matrices on the GPU %.2f)  eval %6.2f  | set_points + eval "
                   "%6.2f  "
                   "create + set_points + eval %6.2f  (destroy %.2f)\n",
                   i, i == 0 ? " (the process's first)" : "", 1e3 * (t1 - t0), 1e3 * (t2 - t1),
                   1e3 * part[0], 1e3 * part[1], 1e3 * part[2], 1e3 * part[3], 1e3 * part[4],
                   1e3 * part[11], 1e3 * (t3 - t2), 1e3 * (t3 - t1), 1e3 * (t3 - t0),
                   1e3 * (t5 - t4));
        first_row = 0;
        if (i > 0) {
            tc[m] = t1 - t0, ts[m] = t2 - t1, te[m] = t3 - t2, tsum[m] = t3 - t1, ttot[m] = t3 - t0;
            td[m++] = t5 - t4;
        }
        if (i == plans - 1) {
            double *pot = xmalloc(8 * (size_t)n), *grad = xmalloc(24 * (size_t)n);
            cudaMemcpy(pot, dp, 8 * (size_t)n, cudaMemcpyDeviceToHost);
            cudaMemcpy(grad, dg, 24 * (size_t)n, cudaMemcpyDeviceToHost);
            errors(n, x, q, pot, grad, &ep, &eg);
            free(pot), free(grad);
        }
    }
    if (ok && m > 0 && !json)
        printf("  median of plans 1..%d: create %.2f  set_points %.2f  eval %.2f | set_points + "
               "eval %.2f  "
               "create + set_points + eval %.2f  (destroy %.2f) | err pot %.2e grad %.2e\n",
               m, 1e3 * bench_median(tc, m), 1e3 * bench_median(ts, m), 1e3 * bench_median(te, m),
               1e3 * bench_median(tsum, m), 1e3 * bench_median(ttot, m), 1e3 * bench_median(td, m),
               ep, eg);
    fflush(stdout);
    cudaFree(dx), cudaFree(dq), cudaFree(dp), cudaFree(dg);
    free(x), free(q);
}

/* Fresh plans (2^20 uniform, eps 1e-6) with a knob of the first call (knob: NULL when this
 * build has none) at 1 and 0, alternately, twice each. Returns nonzero without the knob. */
static int fresh_knob(int *knob, const char *on, const char *off, int plans)
{
    if (!knob) {
        fprintf(stderr, "fmm3d: no such knob in this build\n");
        return 1;
    }
    const int keep = *knob;
    for (int v = 0; v < 4; v++) {
        *knob = !(v & 1);
        if (!json)
            printf("%s\n", *knob ? on : off);
        fresh("cube", (int64_t)1 << 20, 1e-6, plans);
    }
    *knob = keep;
    return 0;
}

static const char *method_name(fmk_method m)
{
    return m == FMK_METHOD_FMM ? "fmm" : m == FMK_METHOD_TREE ? "tree" : "direct";
}

static void print_row(const char *table, fmk_method m, const char *dist, int64_t n, double eps,
                      int grad, const result *r)
{
    const double *ph = r->phase;
    if (json) {
        printf(
            "%s{\"table\":\"%s\",\"method\":\"%s\",\"dist\":\"%s\",\"n\":%lld,\"eps\":%g,"
            "\"grad\":%d,\"order\":%d,\"leaf\":%lld,\"levels\":%d,\"setup_ms\":%.4f,"
            "\"eval_ms\":%.4f,\"p2m_ms\":%.4f,\"m2m_ms\":%.4f,\"m2l_ms\":%.4f,\"l2l_ms\":%.4f,"
            "\"l2p_ms\":%.4f,\"p2p_ms\":%.4f,\"tree_ms\":%.4f,\"err_pot\":%.3e,\"err_grad\":%.3e,"
            "\"m2l_gflops\":%.1f,\"m2l_gflops_tiles\":%.1f,\"bytes_device\":%lld,"
            "\"plan_bytes_device\":%lld,\"setup_start_ms\":%.4f,\"setup_tree_ms\":%.4f,"
            "\"setup_lists_ms\":%.4f,\"setup_ops_ms\":%.4f,\"setup_buffers_ms\":%.4f,"
            "\"setup_first_ms\":%.4f,\"create_ms\":%.4f,\"eval_first_ms\":%.4f}",
            first_row ? "[\n" : ",\n", table, method_name(m), dist, (long long)n, eps, grad,
            r->order, (long long)r->leaf, r->levels, 1e3 * r->setup, 1e3 * r->eval,
            1e3 * ph[FMK_PHASE_P2M], 1e3 * ph[FMK_PHASE_M2M], 1e3 * ph[FMK_PHASE_M2L],
            1e3 * ph[FMK_PHASE_L2L], 1e3 * ph[FMK_PHASE_L2P], 1e3 * ph[FMK_PHASE_P2P],
            1e3 * ph[FMK_PHASE_TREE], r->err_pot, r->err_grad, 1e-9 * r->m2l_rate,
            1e-9 * r->m2l_rate_tiles, (long long)r->bytes_device, (long long)r->plan_bytes_device,
            1e3 * r->setup_part[0], 1e3 * r->setup_part[1], 1e3 * r->setup_part[2],
            1e3 * r->setup_part[3], 1e3 * r->setup_part[4], 1e3 * r->setup_first, 1e3 * r->create,
            1e3 * r->eval_first);
        first_row = 0;
        return;
    }
    printf(
        "%-6s %-6s %-7s %9lld %6.0e %d %3d %4lld %2d | %8.2f %8.2f | %6.2f %6.2f %7.2f %6.2f %6.2f "
        "%6.2f %7.2f | %.2e %.2e | %7.0f %7.0f | %6.0f\n",
        table, method_name(m), dist, (long long)n, eps, grad, r->order, (long long)r->leaf,
        r->levels, 1e3 * r->setup, 1e3 * r->eval, 1e3 * ph[FMK_PHASE_P2M], 1e3 * ph[FMK_PHASE_M2M],
        1e3 * ph[FMK_PHASE_M2L], 1e3 * ph[FMK_PHASE_L2L], 1e3 * ph[FMK_PHASE_L2P],
        1e3 * ph[FMK_PHASE_P2P], 1e3 * ph[FMK_PHASE_TREE], r->err_pot, r->err_grad,
        1e-9 * r->m2l_rate, 1e-9 * r->m2l_rate_tiles, (double)r->bytes_device / (double)n);
    if (m == FMK_METHOD_FMM)
        printf("       set_points (ms): start %.2f tree %.2f lists %.2f operators %.2f buffers %.2f"
               " | first call of the plan %.2f\n",
               1e3 * r->setup_part[0], 1e3 * r->setup_part[1], 1e3 * r->setup_part[2],
               1e3 * r->setup_part[3], 1e3 * r->setup_part[4], 1e3 * r->setup_first);
    if (m == FMK_METHOD_FMM)
        printf("       first set_points (ms): start %.2f tree %.2f lists %.2f operators %.2f "
               "buffers %.2f"
               " (M2L matrices on the GPU %.2f, alongside)\n",
               1e3 * r->setup_first_part[0], 1e3 * r->setup_first_part[1],
               1e3 * r->setup_first_part[2], 1e3 * r->setup_first_part[3],
               1e3 * r->setup_first_part[4], 1e3 * r->setup_first_part[11]);
    printf("       fresh plan (ms): create %.2f, first set_points %.2f, first eval %.2f; "
           "set_points + eval "
           "%.2f; create + set_points + eval %.2f\n",
           1e3 * r->create, 1e3 * r->setup_first, 1e3 * r->eval_first,
           1e3 * (r->setup_first + r->eval_first),
           1e3 * (r->create + r->setup_first + r->eval_first));
    if (m == FMK_METHOD_FMM)
        printf("       lists (ms): points %.2f boxes %.2f lists %.2f directions %.2f work %.2f "
               "tiles %.2f\n",
               1e3 * r->setup_part[5], 1e3 * r->setup_part[6], 1e3 * r->setup_part[7],
               1e3 * r->setup_part[8], 1e3 * r->setup_part[9], 1e3 * r->setup_part[10]);
    fflush(stdout);
}

/* The degrees of the 189 directions one octant reaches at order p (truncation f, classes), truncated
 * and in classes, and their GEMM flops over the whole operators'. */
static void m2lcls_degrees(int p, double f, int classes)
{
    int count[64], cls[64];
    double flops[2];
    const fmk_status st =
        p < 64 ? fmk_cuda_fmm3d_m2l_degrees(p, f, classes, count, cls, flops) : FMK_ERR_ARG;
    if (st != FMK_OK)
        return;
    if (json) {
        printf("%s{\"table\":\"m2lcls-degrees\",\"order\":%d,\"trunc\":%g,\"classes\":%d,\"flops_"
               "trunc\":%.4f,"
               "\"flops_classes\":%.4f,\"count\":[",
               first_row ? "[\n" : ",\n", p, f, classes, flops[0], flops[1]);
        for (int q = 0; q <= p; q++)
            printf("%s%d", q ? "," : "", count[q]);
        printf("],\"count_classes\":[");
        for (int q = 0; q <= p; q++)
            printf("%s%d", q ? "," : "", cls[q]);
        printf("]}");
        first_row = 0;
        return;
    }
    printf("  p %2d, %d classes: degree:directions (of one octant's 189)", p, classes);
    for (int q = 0; q <= p; q++)
        if (count[q])
            printf(" %d:%d", q, count[q]);
    printf(" -> in classes");
    for (int q = 0; q <= p; q++)
        if (cls[q])
            printf(" %d:%d", q, cls[q]);
    printf(" | GEMM flops over whole: truncated %.3f, classes %.3f\n", flops[0], flops[1]);
}

/* bench_fmm3d m2lcls: the M2L's variants (truncated degrees in classes, the size rule) at
 * 2^12 .. 2^20 uniform and 2^20 Plummer, eps 1e-3 and 1e-6, device points; every variant of a
 * set sees the same points and charges. Per variant one plan with one stream (the M2L phase
 * alone, eval one stream) and one with two (eval, errors), median of a few evaluations. */
/* The root cube fitted to the points: the points' cube spans k of the 32 cells per side of level 5
 * (root volume (32 / k)^3; uniform 2^20: leaves of 2^20 / k^3 points), with the P2P's passes of 256
 * (groups 2) or 128 points (groups 4) or one point per lane (rt 1), and the M2L's degree classes;
 * 2^20 uniform (and Plummer for some), eps 1e-6, one stream (phases alone) and two (eval). */
/* fitmix: the root fit on uniform sets whose first tree ends one level below its last complete
 * level (2^18, 2^24) or whose last complete level's boxes are too small (2^22), and on sizes
 * between: the fit off, the engine's P2P passes, and 4, 5, 6 points per lane; eval on two
 * streams (device points), two draws of the engine's row */
static int fitmix(void)
{
    const int64_t ns[] = {(int64_t)1 << 18, 400000, 600000, (int64_t)1 << 22, (int64_t)1 << 24};
    const struct {
        const char *name;
        int fit, rt;
    } c[] = {{"engine", 1, -1},    {"engine, another draw", 1, -1},
             {"no fit", 0, -1},    {"4 per lane", 1, 4},
             {"5 per lane", 1, 5}, {"6 per lane", 1, 6}};
    const int fit0 = knob.root_fit, rt0 = knob.p2p_pairs;
    device_points = 1;
    if (!json)
        printf("fitmix: N | setting | eval (ms, two streams) | levels | err pot, grad | P2M M2M "
               "M2L L2L L2P P2P (ms)\n");
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const uint64_t seed = rng;
        for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
            result r0;
            knob.root_fit = c[i].fit, knob.p2p_pairs = c[i].rt;
            if (i != 1)
                rng = seed; /* the first row's points, but for the second draw */
            if (measure(FMK_METHOD_FMM, 1e-6, -1, 0, "cube", ns[k], 1, ns[k] > (1 << 22) ? 2 : 5,
                        ns[k] <= (1 << 20), &r0))
                continue;
            const double *ph = r0.phase;
            if (json)
                printf("%s{\"table\":\"fitmix\",\"n\":%lld,\"setting\":\"%s\",\"eval_ms\":%.4f,"
                       "\"levels\":%d,"
                       "\"err_pot\":%.3e,\"err_grad\":%.3e,\"m2l_ms\":%.4f,\"p2p_ms\":%.4f}",
                       first_row ? "[\n" : ",\n", (long long)ns[k], c[i].name, 1e3 * r0.eval,
                       r0.levels, r0.err_pot, r0.err_grad, 1e3 * ph[FMK_PHASE_M2L],
                       1e3 * ph[FMK_PHASE_P2P]);
            else
                printf("fitmix %9lld | %-22s | %8.3f | %d | %.2e %.2e | %6.2f %6.2f %6.2f %6.2f "
                       "%6.2f %6.2f\n",
                       (long long)ns[k], c[i].name, 1e3 * r0.eval, r0.levels, r0.err_pot,
                       r0.err_grad, 1e3 * ph[FMK_PHASE_P2M], 1e3 * ph[FMK_PHASE_M2M],
                       1e3 * ph[FMK_PHASE_M2L], 1e3 * ph[FMK_PHASE_L2L], 1e3 * ph[FMK_PHASE_L2P],
                       1e3 * ph[FMK_PHASE_P2P]);
            if (json)
                first_row = 0;
            fflush(stdout);
        }
    }
    knob.root_fit = fit0, knob.p2p_pairs = rt0;
    device_points = 0;
    return 0;
}

static int m2lcls(void)
{
    static const struct {
        const char *name;
        int whole, classes;
        long long trunc_min;
    } var[] = {{"whole", 1, 0, 0},      {"trunc", 0, 0, 0},        {"cls2", 0, 2, 0},
               {"cls3", 0, 3, 0},       {"cls4", 0, 4, 0},         {"min1000", 0, 0, 1000},
               {"min5000", 0, 0, 5000}, {"min40000", 0, 0, 40000}, {"c3min5000", 0, 3, 5000}};
    enum { NV = sizeof var / sizeof var[0] };
    static const struct {
        const char *dist;
        int lg;
    } sets[] = {{"cube", 12}, {"cube", 14}, {"cube", 16},
                {"cube", 18}, {"cube", 20}, {"plummer", 20}};
    const double epss[] = {1e-3, 1e-6};
    const double f0 = knob.m2l_trunc;
    const int k0 = knob.m2l_classes, ov = knob.overlap;
    const long long m0 = knob.m2l_trunc_min;
    device_points = 1;
    const double t_start = bench_now();
    if (!json)
        printf("m2lcls: dist N eps p | variant (whole: f 0; trunc: f %g; clsK: K degree classes; "
               "minB: whole below "
               "B boxes) | M2L boxes, GEMMs, operators | eval two streams, eval one stream, M2L "
               "one stream (ms, "
               "medians) | err pot, grad | x the whole operators' errors\n",
               f0);
    int ok = 1;
    for (int e = 0; e < 2 && ok; e++) {
        int shown = -1; /* the order whose degrees were printed */
        for (size_t t = 0; t < sizeof sets / sizeof sets[0]; t++) {
            const int64_t n = (int64_t)1 << sets[t].lg;
            const int reps = sets[t].lg <= 16 ? 5 : 3;
            const uint64_t seed = rng;
            double ep0 = -1, eg0 = -1;
            for (int v = 0; v < NV; v++) {
                result r1, r2;
                knob.m2l_trunc = var[v].whole ? 0 : f0;
                knob.m2l_classes = var[v].classes, knob.m2l_trunc_min = var[v].trunc_min;
                rng = seed, knob.overlap = 0;
                int fail =
                    measure(FMK_METHOD_FMM, epss[e], -1, 0, sets[t].dist, n, 1, reps, 0, &r1);
                rng = seed, knob.overlap = 1;
                fail = fail ||
                       measure(FMK_METHOD_FMM, epss[e], -1, 0, sets[t].dist, n, 1, reps, 1, &r2);
                if (fail) {
                    ok = 0;
                    break;
                }
                if (v == 0)
                    ep0 = r2.err_pot, eg0 = r2.err_grad;
                if (r2.order != shown) {
                    for (int k = 0; k <= 4; k++)
                        if (k != 1)
                            m2lcls_degrees(r2.order, f0, k);
                    shown = r2.order;
                }
                const double xp = ep0 > 0 ? r2.err_pot / ep0 : 0,
                             xg = eg0 > 0 ? r2.err_grad / eg0 : 0;
                if (json)
                    printf("%s{\"table\":\"m2lcls\",\"dist\":\"%s\",\"n\":%lld,\"eps\":%g,"
                           "\"order\":%d,"
                           "\"leaf\":%lld,\"variant\":\"%s\",\"trunc\":%g,\"classes\":%d,\"trunc_"
                           "min\":%lld,"
                           "\"m2l_boxes\":%lld,\"m2l_gemms\":%d,\"whole\":%d,\"eval_ms\":%.4f,"
                           "\"eval_one_stream_ms\":%.4f,\"m2l_ms\":%.4f,\"err_pot\":%.3e,\"err_"
                           "grad\":%.3e,"
                           "\"x_whole_pot\":%.4f,\"x_whole_grad\":%.4f}",
                           first_row ? "[\n" : ",\n", sets[t].dist, (long long)n, epss[e], r2.order,
                           (long long)r2.leaf, var[v].name, knob.m2l_trunc, var[v].classes,
                           var[v].trunc_min, (long long)r2.m2l_boxes, r2.m2l_gemms, r2.m2l_whole,
                           1e3 * r2.eval, 1e3 * r1.eval, 1e3 * r1.m2l, r2.err_pot, r2.err_grad, xp,
                           xg);
                else
                    printf("m2lcls %-7s %8lld %6.0e %2d | %-9s | %6lld %4d %-5s | %7.3f %7.3f "
                           "%7.3f | %.2e %.2e | "
                           "x%.2f x%.2f\n",
                           sets[t].dist, (long long)n, epss[e], r2.order, var[v].name,
                           (long long)r2.m2l_boxes, r2.m2l_gemms, r2.m2l_whole ? "whole" : "trunc",
                           1e3 * r2.eval, 1e3 * r1.eval, 1e3 * r1.m2l, r2.err_pot, r2.err_grad, xp,
                           xg);
                first_row = 0;
                fflush(stdout);
            }
        }
    }
    knob.m2l_trunc = f0, knob.m2l_classes = k0, knob.m2l_trunc_min = m0;
    knob.overlap = ov, device_points = 0;
    if (!json)
        printf("m2lcls: %.1f s in all\n", bench_now() - t_start);
    return !ok;
}

/* One plan of method for nd vectors (opts.n_vectors = nd, leaf size leaf: 0 the rule's): device
 * points dx (n, dist's) and charges dq (nd vectors), reps timed eval_many_device after one
 * warm-up, potential + gradient into dp, dg; the median and the last evaluation's phases. */
static int measure_nd(fmk_method method, int64_t n, const double *dx, const double *dq, int nd,
                      int64_t leaf, int reps, double *dp, double *dg, result *r)
{
    memset(r, 0, sizeof *r);
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = method, o.backend = FMK_BACKEND_CUDA, o.leaf_size = leaf, o.n_vectors = nd;
    fmk_plan *p = NULL;
    if (fmk_plan_create(&p, 3, FMK_KERNEL_LAPLACE, 1e-6, &o) != FMK_OK) {
        fprintf(stderr, "fmm3d: %s\n", fmk_plan_last_error(NULL));
        return -1;
    }
    gpu_knobs(p);
    int ok = fmk_plan_set_points_device(p, n, dx, 0, NULL) == FMK_OK;
    double te[16];
    for (int k = 0; k <= reps && ok; k++) {
        const double t0 = bench_now();
        ok = fmk_plan_eval_many_device(p, nd, dq, dp, dg) == FMK_OK;
        if (k > 0)
            te[k - 1] = bench_now() - t0;
    }
    if (!ok) {
        fprintf(stderr, "fmm3d: %s\n", fmk_plan_last_error(p));
    } else {
        fmk_info info;
        fmk_plan_info(p, &info);
        r->eval = bench_median(te, reps);
        memcpy(r->phase, info.phase_time, sizeof r->phase);
        r->order = info.order, r->levels = info.levels, r->leaf = info.leaf_size;
        r->bytes_device = info.bytes_device;
    }
    fmk_plan_destroy(p);
    return ok ? 0 : -1;
}

static void print_nd(const char *table, fmk_method m, const char *dist, int64_t n, int nd,
                     int64_t leaf, int rt, double t1, const result *r)
{
    const double *ph = r->phase;
    if (json)
        printf("%s{\"table\":\"%s\",\"method\":\"%s\",\"dist\":\"%s\",\"n\":%lld,\"nd\":%d,"
               "\"leaf_opt\":%lld,\"p2p_many_rt\":%d,\"order\":%d,\"leaf\":%lld,\"levels\":%d,"
               "\"eval_ms\":%.4f,\"ratio\":%.3f,\"per_vector_ms\":%.4f,\"p2m_ms\":%.4f,"
               "\"m2m_ms\":%.4f,\"m2l_ms\":%.4f,\"l2l_ms\":%.4f,\"l2p_ms\":%.4f,"
               "\"p2p_ms\":%.4f,\"bytes_device\":%lld}",
               first_row ? "[\n" : ",\n", table, method_name(m), dist, (long long)n, nd,
               (long long)leaf, rt, r->order, (long long)r->leaf, r->levels, 1e3 * r->eval,
               t1 > 0 ? r->eval / t1 : 0, 1e3 * r->eval / nd, 1e3 * ph[FMK_PHASE_P2M],
               1e3 * ph[FMK_PHASE_M2M], 1e3 * ph[FMK_PHASE_M2L], 1e3 * ph[FMK_PHASE_L2L],
               1e3 * ph[FMK_PHASE_L2P], 1e3 * ph[FMK_PHASE_P2P], (long long)r->bytes_device);
    else
        printf("%-8s %-6s %-7s %8lld nd %d leaf %4lld (%4lld) rt %d | eval %8.3f ms  x%5.2f  "
               "%7.3f/vector | p2m %6.3f m2m %6.3f m2l %7.3f l2l %6.3f l2p %6.3f p2p %7.3f | "
               "%lld B\n",
               table, method_name(m), dist, (long long)n, nd, (long long)leaf, (long long)r->leaf,
               rt, 1e3 * r->eval, t1 > 0 ? r->eval / t1 : 0, 1e3 * r->eval / nd,
               1e3 * ph[FMK_PHASE_P2M], 1e3 * ph[FMK_PHASE_M2M], 1e3 * ph[FMK_PHASE_M2L],
               1e3 * ph[FMK_PHASE_L2L], 1e3 * ph[FMK_PHASE_L2P], 1e3 * ph[FMK_PHASE_P2P],
               (long long)r->bytes_device);
    first_row = 0;
    fflush(stdout);
}

/* The nd mode (header comment): one point set per distribution, 8 charge vectors on the device. */
static void nd_tables(void)
{
    const int64_t n = 1 << 20, nd_max = 8;
    const int nds[] = {1, 2, 4, 8};
    double *x = xmalloc(24 * (size_t)n), *q = xmalloc(8 * (size_t)(nd_max * n));
    double *dx = NULL, *dq = NULL, *dp = NULL, *dg = NULL;
    cudaMalloc((void **)&dx, 24 * (size_t)n);
    cudaMalloc((void **)&dq, 8 * (size_t)(nd_max * n));
    cudaMalloc((void **)&dp, 8 * (size_t)(nd_max * n));
    cudaMalloc((void **)&dg, 24 * (size_t)(nd_max * n));
    for (int64_t i = 0; i < nd_max * n; i++)
        q[i] = 2 * urand() - 1;
    cudaMemcpy(dq, q, 8 * (size_t)(nd_max * n), cudaMemcpyHostToDevice);
    const char *dists[] = {"cube", "plummer"};
    const int ov = knob.overlap, rt = knob.p2p_many_rt;
    result r;
    for (int d = 0; d < 2; d++) {
        points(dists[d], n, x);
        cudaMemcpy(dx, x, 24 * (size_t)n, cudaMemcpyHostToDevice);
        double t1 = 0;
        for (int o = 1; o >= 0; o--) { /* two streams (the default), then one (phases alone) */
            knob.overlap = o;
            for (int k = 0; k < 4; k++)
                if (measure_nd(FMK_METHOD_FMM, n, dx, dq, nds[k], 0, 5, dp, dg, &r) == 0) {
                    if (k == 0)
                        t1 = r.eval;
                    print_nd(o ? "nd" : "nd-ov0", FMK_METHOD_FMM, dists[d], n, nds[k], 0, 0, t1,
                             &r);
                }
        }
        knob.overlap = 0; /* the P2P of leaf pairs alone: points per lane */
        for (int k = 1; k <= 2; k++)
            for (int v = k == 1 ? 2 : 1; v <= (k == 1 ? 4 : 3); v++) {
                knob.p2p_many_rt = v;
                if (measure_nd(FMK_METHOD_FMM, n, dx, dq, nds[k], 0, 3, dp, dg, &r) == 0)
                    print_nd("nd-rt", FMK_METHOD_FMM, dists[d], n, nds[k], 0, v, 0, &r);
            }
        knob.p2p_many_rt = rt;
        /* P2M and L2P alone: vector by vector (0), the harmonics once for all vectors (1) */
        const int mp = knob.many_points;
        for (int k = 1; k < 4; k++)
            for (int v = 0; v <= 1; v++) {
                knob.many_points = v;
                if (measure_nd(FMK_METHOD_FMM, n, dx, dq, nds[k], 0, 3, dp, dg, &r) == 0)
                    print_nd(v ? "nd-pts1" : "nd-pts0", FMK_METHOD_FMM, dists[d], n, nds[k], 0, 0,
                             0, &r);
            }
        knob.many_points = mp, knob.overlap = ov;
        const int64_t leaves[] = {350, 532, 800};
        for (int l = 0; l < 3; l++) /* nd 4 */
            if (measure_nd(FMK_METHOD_FMM, n, dx, dq, 4, leaves[l], 3, dp, dg, &r) == 0)
                print_nd("nd-leaf", FMK_METHOD_FMM, dists[d], n, 4, leaves[l], 0, 0, &r);
    }
    /* the direct sum: 2^16 uniform points */
    const int64_t nn = 1 << 16;
    points("cube", nn, x);
    cudaMemcpy(dx, x, 24 * (size_t)nn, cudaMemcpyHostToDevice);
    for (int k = 0; k < nd_max * nn; k++) /* the charges of 8 vectors of nn points */
        q[k] = 2 * urand() - 1;
    cudaMemcpy(dq, q, 8 * (size_t)(nd_max * nn), cudaMemcpyHostToDevice);
    double t1 = 0;
    for (int k = 0; k < 4; k++)
        if (measure_nd(FMK_METHOD_DIRECT, nn, dx, dq, nds[k], 0, 3, dp, dg, &r) == 0) {
            if (k == 0)
                t1 = r.eval;
            print_nd("nd", FMK_METHOD_DIRECT, "cube", nn, nds[k], 0, 0, t1, &r);
        }
    cudaFree(dx), cudaFree(dq), cudaFree(dp), cudaFree(dg);
    free(x), free(q);
}

static void header(void)
{
    if (!json)
        printf("table  method dist            N    eps g   p leaf  L |  setupms   evalms |    p2m  "
               "  m2m     "
               "m2l    l2l    l2p    p2p    tree | err_pot  err_grad | m2lGF/s tileGF/s | B/pt\n");
}

int main(int argc, char **argv)
{
    const char *mode = "bar";
    int arg = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--json"))
            json = 1;
        else if (argv[a][0] >= '0' && argv[a][0] <= '9')
            arg = atoi(argv[a]);
        else
            mode = argv[a];
    }
    if (!fmk_tune_defaults(FMK_METHOD_FMM, 3, FMK_BACKEND_CUDA, &knob, sizeof knob) ||
        fmk_cuda_device_count() <= 0) {
        fprintf(stderr, "fmm3d: no CUDA device\n");
        return 1;
    }
    header();
    result r;
    const int64_t N20 = 1 << 20;
    if (!strcmp(mode, "bar")) {
        const char *dists[] = {"cube", "plummer"};
        for (device_points = 0; device_points <= 1; device_points++)
            for (int d = 0; d < 2; d++)
                if (measure(FMK_METHOD_FMM, 1e-6, -1, 0, dists[d], N20, 1, 5, 1, &r) == 0)
                    print_row(device_points ? "bar-d" : "bar", FMK_METHOD_FMM, dists[d], N20, 1e-6,
                              1, &r);
        device_points = 0;
    } else if (!strcmp(mode, "near")) {
        /* the threshold of W and X entries done as P2P (K (p + 1)^2 / 2) and the leaf, 2^20
         * Plummer and uniform at eps 1e-6 */
        const int ks[] = {1, 2, 4, 8, 16, 32};
        const int near = knob.direct_near;
        for (int d = 0; d < 2; d++)
            for (int leaf = 0; leaf <= (d ? 0 : 300); leaf += 300)
                for (int k = 0; k < 6; k++) {
                    knob.direct_near = ks[k];
                    if (!json)
                        printf("K = %d\n", ks[k]);
                    if (measure(FMK_METHOD_FMM, 1e-6, -1, leaf, d ? "cube" : "plummer", N20, 1, 3,
                                0, &r) == 0)
                        print_row("near", FMK_METHOD_FMM, d ? "cube" : "plummer", N20, 1e-6, 1, &r);
                }
        knob.direct_near = near;
    } else if (!strcmp(mode, "pairs")) {
        /* P2P one way per U entry (0) against each leaf pair once, both ways, with 1, 2, 4
         * targets per thread: 2^20 uniform and Plummer, eps 1e-6 and 1e-3, device points */
        const int rts[] = {0, 1, 2, 4};
        const char *dists[] = {"cube", "plummer"};
        const double epss[] = {1e-6, 1e-3};
        const int saved = knob.p2p_pairs;
        device_points = 1;
        for (int e = 0; e < 2; e++)
            for (int d = 0; d < 2; d++)
                for (int k = 0; k < 4; k++) {
                    knob.p2p_pairs = rts[k];
                    if (!json)
                        printf("targets per thread %d\n", rts[k]);
                    if (measure(FMK_METHOD_FMM, epss[e], -1, 0, dists[d], N20, 1, 5, 1, &r) == 0)
                        print_row("pairs", FMK_METHOD_FMM, dists[d], N20, epss[e], 1, &r);
                }
        knob.p2p_pairs = saved;
        device_points = 0;
    } else if (!strcmp(mode, "fp32")) {
        /* fp32 against fp64 at eps 1e-3 and 1e-5, 2^20 uniform and Plummer, points on the device */
        const char *dists[] = {"cube", "plummer"};
        const double epss[] = {1e-3, 1e-5};
        device_points = 1;
        for (int e = 0; e < 2; e++)
            for (int d = 0; d < 2; d++)
                for (int f = 0; f < 2; f++) {
                    precision = f ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64;
                    if (measure(FMK_METHOD_FMM, epss[e], -1, 0, dists[d], N20, 1, 5, 1, &r) == 0)
                        print_row(f ? "fp32" : "fp64", FMK_METHOD_FMM, dists[d], N20, epss[e], 1,
                                  &r);
                }
        device_points = 0;
        precision = FMK_PRECISION_FP64;
    } else if (!strcmp(mode, "overlap")) {
        /* eval's near field on a second stream alongside the far field's chain (1) or on the
         * same stream after it (0), with the settings that must not get slower */
        const int saved = knob.overlap;
        device_points = 1;
        for (int ov = 0; ov <= 1; ov++) {
            knob.overlap = ov;
            const char *table = ov ? "ov1" : "ov0";
            if (!json)
                printf("near field %s\n",
                       ov ? "alongside the far field (two streams)" : "after it (one stream)");
            if (measure(FMK_METHOD_FMM, 1e-6, -1, 0, "cube", N20, 1, 5, 1, &r) == 0)
                print_row(table, FMK_METHOD_FMM, "cube", N20, 1e-6, 1, &r);
            if (measure(FMK_METHOD_FMM, 1e-6, -1, 0, "plummer", N20, 1, 5, 1, &r) == 0)
                print_row(table, FMK_METHOD_FMM, "plummer", N20, 1e-6, 1, &r);
            precision = FMK_PRECISION_FP32;
            if (measure(FMK_METHOD_FMM, 1e-5, -1, 0, "cube", N20, 1, 5, 1, &r) == 0)
                print_row(ov ? "ov1-f32" : "ov0-f32", FMK_METHOD_FMM, "cube", N20, 1e-5, 1, &r);
            precision = FMK_PRECISION_FP64;
            separate_targets = N20 / 2;
            if (measure(FMK_METHOD_FMM, 1e-6, -1, 0, "plummer", N20, 1, 5, 0, &r) == 0)
                print_row(ov ? "ov1-trg" : "ov0-trg", FMK_METHOD_FMM, "plummer", N20, 1e-6, 1, &r);
            separate_targets = 0;
            if (measure(FMK_METHOD_FMM, 1e-3, -1, 0, "cube", N20, 1, 5, 0, &r) == 0)
                print_row(table, FMK_METHOD_FMM, "cube", N20, 1e-3, 1, &r);
            for (int lg = 12; lg <= 16; lg += 4)
                if (measure(FMK_METHOD_FMM, 1e-6, -1, 0, "cube", (int64_t)1 << lg, 1, 7, 0, &r) ==
                    0)
                    print_row(table, FMK_METHOD_FMM, "cube", (int64_t)1 << lg, 1e-6, 1, &r);
        }
        knob.overlap = saved;
        device_points = 0;
    } else if (!strcmp(mode, "m2l")) {
        const int gap = knob.m2l_gap, ov = knob.overlap;
        const int gaps[] = {-1, 2, 5, 11, 1000};
        const char *dists[] = {"cube", "plummer"};
        device_points = 1;
        for (int d = 0; d < 2; d++) {
            knob.overlap = 0;
            for (int k = 0; k < 5; k++) {
                knob.m2l_gap = gaps[k];
                if (!json)
                    printf("runs merged across gaps of <= %d directions, one stream\n", gaps[k]);
                if (measure(FMK_METHOD_FMM, 1e-6, -1, 0, dists[d], N20, 1, 5, k == 2, &r) == 0)
                    print_row("m2l", FMK_METHOD_FMM, dists[d], N20, 1e-6, 1, &r);
            }
            knob.m2l_gap = gap, knob.overlap = ov;
            if (!json)
                printf("default, two streams\n");
            if (measure(FMK_METHOD_FMM, 1e-6, -1, 0, dists[d], N20, 1, 5, 1, &r) == 0)
                print_row("m2l-ov", FMK_METHOD_FMM, dists[d], N20, 1e-6, 1, &r);
        }
        knob.m2l_gap = gap, knob.overlap = ov;
        device_points = 0;
    } else if (!strcmp(mode, "trunc")) {
        const double f0 = knob.m2l_trunc;
        const int ov = knob.overlap;
        const double knobs[] = {0, 1, 0.3, 0.1, 0.03};
        const char *dists[] = {"cube", "plummer"};
        device_points = 1;
        for (int d = 0; d < 2; d++) {
            for (int o = 0; o <= 1; o++)
                for (int k = 0; k < 5; k++) {
                    knob.m2l_trunc = knobs[k], knob.overlap = o;
                    if (!json)
                        printf("M2L truncation factor %g (0: whole operators), %s\n", knobs[k],
                               o ? "two streams" : "one stream");
                    if (measure(FMK_METHOD_FMM, 1e-6, -1, 0, dists[d], N20, 1, 5, 1, &r) == 0)
                        print_row(o ? "trunc-ov" : "trunc", FMK_METHOD_FMM, dists[d], N20, 1e-6, 1,
                                  &r);
                }
        }
        knob.m2l_trunc = f0, knob.overlap = ov;
        device_points = 0;
    } else if (!strcmp(mode, "m2lcls")) {
        if (m2lcls())
            return 1;
    } else if (!strcmp(mode, "fitmix")) {
        if (fitmix())
            return 1;
    } else if (!strcmp(mode, "draws")) {
        /* one N (2^arg, default 2^18) uniform at eps 1e-6 on 8 draws of points: eval and P2P
         * alone (one stream), and the P2P of leaf pairs counted; device points */
        const int64_t n = (int64_t)1 << (arg > 0 ? arg : 18);
        const int ov = knob.overlap;
        device_points = 1;
        if (!json)
            printf("draws: N | eval one stream, two (ms) | P2P alone (ms) | pairs leaves largest "
                   "over-pass | slots x "
                   "partners, interactions (1e9), ratio | most pairs held | pass\n");
        for (int d = 0; d < 8; d++) {
            result r1, r2;
            const uint64_t seed = rng;
            knob.overlap = 0, leaf_report = 1;
            int fail = measure(FMK_METHOD_FMM, 1e-6, -1, 0, "cube", n, 1, 5, 0, &r1);
            leaf_report = 0;
            rng = seed, knob.overlap = 1;
            fail = fail || measure(FMK_METHOD_FMM, 1e-6, -1, 0, "cube", n, 1, 5, 0, &r2);
            if (fail)
                continue;
            const int64_t *c = r1.p2p;
            if (json)
                printf("%s{\"table\":\"draws\",\"n\":%lld,\"eval_one_stream_ms\":%.4f,\"eval_ms\":%"
                       ".4f,\"p2p_ms\":%.4f,"
                       "\"pairs\":%lld,\"leaves\":%lld,\"largest\":%lld,\"over_pass\":%lld,"
                       "\"slots\":%lld,"
                       "\"interactions\":%lld,\"held_max\":%lld,\"pass\":%lld}",
                       first_row ? "[\n" : ",\n", (long long)n, 1e3 * r1.eval, 1e3 * r2.eval,
                       1e3 * r1.phase[FMK_PHASE_P2P], (long long)c[0], (long long)c[1],
                       (long long)c[2], (long long)c[3], (long long)c[4], (long long)c[5],
                       (long long)c[6], (long long)c[7]);
            else
                printf("draws %9lld | %7.3f %7.3f | %6.3f | %lld %lld %lld %lld | %.3f %.3f %.3f | "
                       "%lld | %lld\n",
                       (long long)n, 1e3 * r1.eval, 1e3 * r2.eval, 1e3 * r1.phase[FMK_PHASE_P2P],
                       (long long)c[0], (long long)c[1], (long long)c[2], (long long)c[3],
                       1e-9 * (double)c[4], 1e-9 * (double)c[5],
                       c[5] > 0 ? (double)c[4] / (double)c[5] : 0.0, (long long)c[6],
                       (long long)c[7]);
            if (json)
                first_row = 0;
            fflush(stdout);
        }
        knob.overlap = ov;
        device_points = 0;
    } else if (!strcmp(mode, "newton")) {
        const int nw = knob.p2p_newton, rt = knob.p2p_pairs, ov = knob.overlap;
        const int rts[] = {2, 4};
        device_points = 1;
        for (int d = 0; d < 2; d++)
            for (int k = 0; k < 2; k++)
                for (int n = 0; n <= 1; n++)
                    for (int o = 0; o <= 1; o++) {
                        knob.p2p_pairs = rts[k], knob.p2p_newton = n;
                        knob.overlap = o;
                        if (!json)
                            printf("points per lane %d, Newton %d, %s\n", rts[k], n,
                                   o ? "two streams" : "one stream");
                        if (measure(FMK_METHOD_FMM, 1e-6, -1, 0, d ? "plummer" : "cube", N20, 1, 5,
                                    1, &r) == 0)
                            print_row(o ? "newton-ov" : "newton", FMK_METHOD_FMM,
                                      d ? "plummer" : "cube", N20, 1e-6, 1, &r);
                    }
        knob.p2p_newton = nw, knob.p2p_pairs = rt, knob.overlap = ov;
        device_points = 0;
    } else if (!strcmp(mode, "cols")) {
        /* P2M and L2P: a thread per point (0), column groups and records (1), P2M two sources a
         * lane at a time (2); one stream (each phase alone) and two */
        const int pc = knob.point_cols, ov = knob.overlap;
        device_points = 1;
        for (int d = 0; d < 2; d++)
            for (int c = 0; c <= 2; c++)
                for (int o = 0; o <= 1; o++) {
                    knob.point_cols = c, knob.overlap = o;
                    if (!json)
                        printf("point_cols %d, %s\n", c, o ? "two streams" : "one stream");
                    if (measure(FMK_METHOD_FMM, 1e-6, -1, 0, d ? "plummer" : "cube", N20, 1, 5, 1,
                                &r) == 0)
                        print_row(o ? "cols-ov" : "cols", FMK_METHOD_FMM, d ? "plummer" : "cube",
                                  N20, 1e-6, 1, &r);
                }
        knob.point_cols = pc, knob.overlap = ov;
        device_points = 0;
    } else if (!strcmp(mode, "rootleaf")) {
        /* the root volume with a smaller leaf size, so that the partly filled boxes at the
         * points' edge split as well (uniform: 128- and 192-point leaves at level 5) */
        const int ov = knob.overlap;
        const double vol = knob.root_volume;
        const struct {
            double vol;
            int64_t leaf;
        } vl[] = {{1, 0}, {4, 200}, {6, 300}};
        device_points = 1;
        for (int v = 0; v < 3; v++)
            for (int o = 0; o <= 1; o++) {
                knob.root_volume = vl[v].vol, knob.overlap = o;
                if (!json)
                    printf("root volume %g, leaf size %lld, %s\n", vl[v].vol, (long long)vl[v].leaf,
                           o ? "two streams" : "one stream");
                if (measure(FMK_METHOD_FMM, 1e-6, -1, vl[v].leaf, "cube", N20, 1, 5, 1, &r) == 0)
                    print_row(o ? "root-ov" : "root", FMK_METHOD_FMM, "cube", N20, 1e-6, 1, &r);
            }
        knob.root_volume = vol, knob.overlap = ov;
        device_points = 0;
    } else if (!strcmp(mode, "table8")) {
        const int orders[] = {4, 8, 12};
        for (int k = 0; k < 3; k++)
            for (int g = 0; g <= 1; g++)
                if (measure(FMK_METHOD_FMM, 1e-6, orders[k], arg, "cube", N20, g, 5, 1, &r) == 0)
                    print_row("table8", FMK_METHOD_FMM, "cube", N20, 0, g, &r);
    } else if (!strcmp(mode, "cross")) {
        for (int lg = 12; lg <= 20; lg += 2) {
            const int64_t n = (int64_t)1 << lg;
            const double epss[] = {1e-3, 1e-6};
            for (int e = 0; e < 2; e++) {
                if (measure(FMK_METHOD_FMM, epss[e], -1, 0, "cube", n, 1, 5, 1, &r) == 0)
                    print_row("cross", FMK_METHOD_FMM, "cube", n, epss[e], 1, &r);
                if (measure(FMK_METHOD_TREE, epss[e], -1, 0, "cube", n, 1, 5, 1, &r) == 0)
                    print_row("cross", FMK_METHOD_TREE, "cube", n, epss[e], 1, &r);
            }
            if (measure(FMK_METHOD_DIRECT, 1e-6, -1, 0, "cube", n, 1, 3, 0, &r) == 0)
                print_row("cross", FMK_METHOD_DIRECT, "cube", n, 0, 1, &r);
        }
    } else if (!strcmp(mode, "fresh")) {
        /* the first call of a fresh plan: 2^20 uniform and Plummer at eps 1e-6, 2^16 and 2^12
         * uniform */
        fresh("cube", N20, 1e-6, arg > 1 ? arg : 9);
        fresh("plummer", N20, 1e-6, arg > 1 ? arg : 9);
        fresh("cube", 1 << 16, 1e-6, arg > 1 ? arg : 9);
        fresh("cube", 1 << 12, 1e-6, arg > 1 ? arg : 9);
    } else if (!strcmp(mode, "freshops")) {
        /* a fresh plan's first set_points with the M2L matrices started before the tree and
         * after the lists (the default), alternately */
        if (fresh_knob(&knob.ops_at, "M2L matrices before the tree", "M2L matrices after the lists",
                       arg > 1 ? arg : 5))
            return 1;
    } else if (!strcmp(mode, "freshblas")) {
        /* a fresh plan's cuBLAS handle made at its first eval's M2L (the default) and when its
         * first set_points starts, alternately */
        if (fresh_knob(&knob.blas_at, "cuBLAS handle at the first eval's M2L",
                       "cuBLAS handle when set_points starts", arg > 1 ? arg : 5))
            return 1;
    } else if (!strcmp(mode, "small")) {
        for (int lg = 12; lg <= 20; lg += 2) {
            const int64_t n = (int64_t)1 << lg;
            const double epss[] = {1e-3, 1e-6};
            for (int e = 0; e < 2; e++)
                if (measure(FMK_METHOD_FMM, epss[e], -1, 0, "cube", n, 1, 7, 1, &r) == 0)
                    print_row("small", FMK_METHOD_FMM, "cube", n, epss[e], 1, &r);
        }
    } else if (!strcmp(mode, "scale")) {
        const int top = arg > 0 ? arg : 26;
        double sx = 0, sy = 0, sxx = 0, sxy = 0;
        int k = 0;
        for (int lg = 16; lg <= top; lg += 2) {
            const int64_t n = (int64_t)1 << lg;
            if (measure(FMK_METHOD_FMM, 1e-6, -1, 0, "cube", n, 1, lg >= 24 ? 2 : 4, lg <= 20,
                        &r) != 0)
                break;
            print_row("scale", FMK_METHOD_FMM, "cube", n, 1e-6, 1, &r);
            const double lx = log((double)n), ly = log(r.eval);
            sx += lx, sy += ly, sxx += lx * lx, sxy += lx * ly, k++;
        }
        if (k > 1 && !json)
            printf("slope of log(eval) against log(N): %.3f\n",
                   (k * sxy - sx * sy) / (k * sxx - sx * sx));
    } else if (!strcmp(mode, "leaf")) {
        const int p = arg > 0 ? arg : 8;
        for (int leaf = 16; leaf <= 256; leaf = leaf * 3 / 2)
            if (measure(FMK_METHOD_FMM, 1e-6, p, leaf, "cube", N20, 1, 3, 0, &r) == 0)
                print_row("leaf", FMK_METHOD_FMM, "cube", N20, 0, 1, &r);
    } else if (!strcmp(mode, "cost")) {
        /* the cost model's B (translations per box) and C (P2P per pair) against p: 2^20
         * uniform with leaves at level 5 (leaf 100: 32 points per leaf) and level 4 (leaf 600:
         * 256 points) */
        const int orders[] = {4, 5, 6, 8, 10, 11, 12, 13, 14, 16};
        for (int k = 0; k < 10; k++)
            for (int leaf = 100; leaf <= 600; leaf += 500)
                if (measure(FMK_METHOD_FMM, 1e-6, orders[k], leaf, "cube", N20, 1, 3, 0, &r) == 0)
                    print_row("cost", FMK_METHOD_FMM, "cube", N20, 0, 1, &r);
    } else if (!strcmp(mode, "orderhi")) {
        const char *dists[] = {"cube", "sphere", "plummer", "corner", "nested"};
        for (int d = 0; d < 5; d++)
            for (int p = 34; p <= (arg > 0 ? arg : 60); p += 2)
                if (measure(FMK_METHOD_FMM, 1e-6, p, 0, dists[d], 100000, 1, 1, 1, &r) == 0)
                    print_row("order", FMK_METHOD_FMM, dists[d], 100000, 0, 1, &r);
    } else if (!strcmp(mode, "rot")) {
        const int saved = knob.m2l_rot_order, ov = knob.overlap;
        const int orders[] = {20, 26, 28, 30, 32};
        knob.overlap = 0;
        for (int k = 0; k < 5; k++)
            for (int v = 0; v < 2; v++) {
                knob.m2l_rot_order = v ? 0 : 1000;
                if (measure(FMK_METHOD_FMM, 1e-6, orders[k], 0, "cube", N20, 1, 3, 1, &r) == 0)
                    print_row(v ? "rot" : "dense", FMK_METHOD_FMM, "cube", N20, 0, 1, &r);
            }
        knob.m2l_rot_order = saved, knob.overlap = ov;
        const double epss[] = {1e-10, 1e-11, 1e-12, 1e-13};
        for (int d = 0; d < 2; d++)
            for (int e = 0; e < 4; e++)
                if (measure(FMK_METHOD_FMM, epss[e], -1, 0, d ? "plummer" : "cube", N20, 1, 3, 1,
                            &r) == 0)
                    print_row("eps", FMK_METHOD_FMM, d ? "plummer" : "cube", N20, epss[e], 1, &r);
    } else if (!strcmp(mode, "nd")) {
        nd_tables();
    } else if (!strcmp(mode, "order")) {
        const char *dists[] = {"cube", "sphere", "plummer", "corner", "nested"};
        for (int d = 0; d < 5; d++)
            for (int p = 2; p <= (arg > 0 ? arg : 30); p += p < 20 ? 1 : 2)
                if (measure(FMK_METHOD_FMM, 1e-6, p, 0, dists[d], 100000, 1, 1, 1, &r) == 0)
                    print_row("order", FMK_METHOD_FMM, dists[d], 100000, 0, 1, &r);
    } else {
        fprintf(stderr, "fmm3d: unknown mode %s\n", mode);
        return 1;
    }
    if (json && !first_row)
        printf("\n]\n");
    return 0;
}
