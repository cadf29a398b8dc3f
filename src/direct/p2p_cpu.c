/* p2p.c -- the CPU direct-summation engine: OpenMP over blocks of targets, a vectorized loop
 * over cache-sized tiles of sources, fp64 or fp32 arithmetic with tiles summed in double.
 *
 * fp64 works in the exact frame (core/internal.h: the mapped points are the caller's, scaled by
 * a power of two), with the charges scaled by a power of two so that |q| < 1, so each pair is the
 * kernel of the caller's offset rounded once and the results are exact to rounding for any
 * finite input. A plan whose points can make pairs closer than the fast loop takes
 * (kernels/pair_exact.h) sums every pair through careful_block, by classes of distance. fp32 works in the
 * box frame: its coordinates are rounded to 2^-24 of the box either way, and there they keep
 * that resolution wherever the box sits, and r'^2 >= 2^-46 for every pair of distinct points. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "kernels/pair_exact.h"
#include "direct/guard.h"

/* Each inner loop is built for the widest vector unit the running CPU has (FMK_TARGET_CLONES,
 * internal.h). */

#define REAL double
#define SQRT sqrt
#define LOG log
#define P2P(name) p2p64_##name
#include "kernels/p2p_tile.h"
#undef REAL
#undef SQRT
#undef LOG
#undef P2P

#define REAL float
#define SQRT sqrtf
#define LOG logf
#define P2P(name) p2p32_##name
#include "kernels/p2p_tile.h"
#undef REAL
#undef SQRT
#undef LOG
#undef P2P

enum { TARGET_BLOCK = 32 };
/* Below this many pairs the sum runs on the calling thread (direct_eval). */
#define SERIAL_PAIRS 2097152.0

typedef struct cpu_direct {
    void *src[4]; /* x, y, z (or Im charge for cauchy2d, unused for log2d), Re charge */
    void *trg;    /* n_targets * dim, interleaved */
    size_t real;  /* sizeof the working type */
    int careful;  /* fp64: pairs closer than FMK_EXACT_TINY may exist (careful_block) */
} cpu_direct;

static size_t real_size(const fmk_plan *plan)
{
    return plan->opts.precision == FMK_PRECISION_FP32 ? sizeof(float) : sizeof(double);
}

static void direct_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d)
{
    if (nt < 0)
        nt = ns;
    const int64_t real = (int64_t)real_size(plan);
    *h = fmk_bytes_plus((int64_t)sizeof(cpu_direct), 4 * real, ns);
    *h = fmk_bytes_plus(*h, plan->dim * real, nt);
    *d = 0;
}

static void direct_release(fmk_plan *plan)
{
    cpu_direct *s = plan->state;
    if (!s)
        return;
    for (int k = 0; k < 4; k++)
        free(s->src[k]);
    free(s->trg);
    free(s);
    plan->state = NULL;
}

/* Copies n doubles with stride, times 2^-exp (exactly), into a working-precision array. */
static void store(void *dst, size_t real, const double *x, int64_t n, int stride, int exp)
{
    if (real == sizeof(float)) {
        float *f = dst;
        for (int64_t i = 0; i < n; i++)
            f[i] = (float)(exp ? ldexp(x[stride * i], -exp) : x[stride * i]);
    } else {
        double *g = dst;
        for (int64_t i = 0; i < n; i++)
            g[i] = exp ? ldexp(x[stride * i], -exp) : x[stride * i];
    }
}

/* 1 when a mapped coordinate of n values can make a pair closer than the fast loop takes. */
static int any_tiny(const double *x, int64_t n)
{
    int tiny = 0;
    for (int64_t i = 0; i < n; i++)
        tiny |= fmk_exact_coord_is_tiny(x[i]);
    return tiny;
}

static fmk_status direct_setup(fmk_plan *plan)
{
    const int dim = plan->dim;
    const int64_t ns = plan->n_sources > 0 ? plan->n_sources : 1;
    const int64_t nt = plan->n_targets > 0 ? plan->n_targets : 1;
    cpu_direct *s = calloc(1, sizeof *s);
    if (!s)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory");
    plan->state = s;
    s->real = real_size(plan);
    for (int k = 0; k < 4; k++)
        s->src[k] = malloc((size_t)ns * s->real);
    s->trg = malloc((size_t)nt * dim * s->real);
    if (!s->src[0] || !s->src[1] || !s->src[2] || !s->src[3] || !s->trg) {
        long long bytes = (long long)(s->real * (4 * ns + dim * nt));
        direct_release(plan);
        return fmk_error_set(plan, FMK_ERR_NOMEM,
                             "out of host memory for the direct sum (%lld bytes)", bytes);
    }
    for (int k = 0; k < dim; k++)
        store(s->src[k], s->real, plan->sources + k, plan->n_sources, dim, 0);
    if (dim == 2)
        memset(s->src[2], 0, (size_t)ns * s->real);
    store(s->trg, s->real, plan->targets, plan->n_targets * dim, 1, 0);
    /* the smooth kernels add s'^2 >= 1e-30 to r'^2: no pair is too close for them */
    s->careful = plan->frame.kind == FMK_FRAME_EXACT && !fmk_kernel_desc_of(plan->kernel)->smooth &&
                 (any_tiny(plan->sources, plan->n_sources * dim) ||
                  (!plan->self && any_tiny(plan->targets, plan->n_targets * dim)));
    int64_t h, d;
    direct_memory(plan, plan->n_sources, plan->n_targets, &h, &d);
    plan->state_bytes_host = h;
    return fmk_direct_guard(plan);
}

/* The largest |value| of n values. */
static double largest(const double *x, int64_t n, int threads)
{
    double big = 0;
#pragma omp parallel for reduction(max : big) num_threads(threads) if (n >= (1 << 16))
    for (int64_t i = 0; i < n; i++)
        big = fabs(x[i]) > big ? fabs(x[i]) : big;
    return big;
}

/* Target i's sums into the caller's layout: a[c] the sums of class c (nclass: 1, or 3 for a
 * careful plan: kernels/pair_exact.h) in working units with the charges scaled by 2^-qexp.
 * Every scale is a power of two, applied once by ldexp: exact unless the result itself leaves
 * the range of doubles. */
static void store_target(const fmk_plan *plan, int64_t i, const double a[][4], int nclass, int qexp,
                         double *pot, double *grad)
{
    const fmk_kernel k = plan->kernel;
    const int e = plan->frame.width_exp, dim = plan->dim;
    if (k == FMK_KERNEL_CAUCHY2D) {
        for (int v = 0; v < 2; v++) {
            if (pot)
                pot[2 * i + v] = fmk_exact_value(k, a, nclass, v, qexp, e);
            if (grad)
                grad[2 * i + v] = fmk_exact_value(k, a, nclass, 2 + v, qexp, e);
        }
        return;
    }
    if (pot)
        pot[i] = fmk_exact_value(k, a, nclass, 0, qexp, e);
    if (grad)
        for (int v = 0; v < dim; v++)
            grad[dim * i + v] = fmk_exact_value(k, a, nclass, 1 + v, qexp, e);
}

/* One careful pair (kernels/pair_exact.h): its class from the offset (dx, dy, dz), the offset
 * scaled for the class (ex, ey, ez), and its four values by the fast formula (the macro's
 * statements set w0..w3 from r2, ex, ey, ez, q[j]; lw: log2d's log(width) less the class's
 * shift), added to the class's sums: p (class 0), u (1), v (2). */
/* (clang-format would split the pragma's string, which _Pragma does not take) */
/* clang-format off */
#define CAREFUL_LOOP(...)                                                                          \
    _Pragma("omp simd reduction(+ : p0, p1, p2, p3, u0, u1, u2, u3, v0, v1, v2, v3)")              \
    for (int64_t j = 0; j < ns; j++)                                                               \
    {                                                                                              \
        const double dx = y0 - sx[j], dy = y1 - sy[j], dz = d3 ? y2 - sz[j] : 0;                   \
        const double ax = fabs(dx), ay = fabs(dy), az = fabs(dz);                                  \
        const double mxy = ax > ay ? ax : ay;                                                      \
        const int c = fmk_exact_class(mxy > az ? mxy : az);                                        \
        const double f = fmk_exact_scale(c);                                                       \
        const double ex = dx * f, ey = dy * f, ez = dz * f, r2 = ex * ex + ey * ey + ez * ez;      \
        const double lw = logw - (c == 0 ? 0 : c == 1 ? 500 : 900) * ln2;                          \
        double w0, w1, w2, w3;                                                                     \
        __VA_ARGS__;                                                                               \
        (void)lw, (void)r2;                                                                        \
        p0 += c == 0 ? w0 : 0, p1 += c == 0 ? w1 : 0, p2 += c == 0 ? w2 : 0;                       \
        p3 += c == 0 ? w3 : 0, u0 += c == 1 ? w0 : 0, u1 += c == 1 ? w1 : 0;                       \
        u2 += c == 1 ? w2 : 0, u3 += c == 1 ? w3 : 0, v0 += c == 2 ? w0 : 0;                       \
        v1 += c == 2 ? w1 : 0, v2 += c == 2 ? w2 : 0, v3 += c == 2 ? w3 : 0;                       \
    }
/* clang-format on */

/* Targets [i0, i1) of a careful plan (fp64, a singular kernel, points that can make pairs closer
 * than FMK_EXACT_TINY): every pair in its class (pair_exact.h), a coincident pair (equal inputs)
 * adding nothing. Sums into acc: 3 classes x 4 values a target. */
static FMK_TARGET_CLONES void careful_block(const fmk_plan *plan, const double *const src[4],
                                            const double *trg, int64_t i0, int64_t i1, double *acc)
{
    const int dim = plan->dim, d3 = dim == 3;
    const fmk_kernel kernel = plan->kernel;
    const double logw = plan->frame.log_width, ln2 = 0.693147180559945309417232121458176568;
    const double *restrict sx = src[0], *restrict sy = src[1], *restrict sz = src[2],
                           *restrict q = src[3];
    const int64_t ns = plan->n_sources;
    for (int64_t i = i0; i < i1; i++) {
        const double *y = trg + dim * i;
        const double y0 = y[0], y1 = y[1], y2 = d3 ? y[2] : 0;
        double p0 = 0, p1 = 0, p2 = 0, p3 = 0, u0 = 0, u1 = 0, u2 = 0, u3 = 0, v0 = 0, v1 = 0,
               v2 = 0, v3 = 0;
        if (kernel == FMK_KERNEL_CAUCHY2D) {
            CAREFUL_LOOP(const p2p64_pair_complex w = p2p64_pair_cauchy2d(-ex, -ey, q[j], sz[j]);
                         w0 = w.pr, w1 = w.pi, w2 = w.dr, w3 = w.di)
        } else if (kernel == FMK_KERNEL_LOG2D) {
            CAREFUL_LOOP(const p2p64_pair_radial w = p2p64_pair_log2d(r2, q[j], lw);
                         w0 = w.pot, w1 = -w.g * ex, w2 = -w.g * ey, w3 = 0)
        } else {
            CAREFUL_LOOP(const p2p64_pair_radial w = p2p64_pair_laplace(r2, q[j]);
                         w0 = w.pot, w1 = -w.g * ex, w2 = -w.g * ey, w3 = -w.g * ez)
        }
        double *a = acc + 12 * (i - i0);
        a[0] = p0, a[1] = p1, a[2] = p2, a[3] = p3, a[4] = u0, a[5] = u1, a[6] = u2;
        a[7] = u3, a[8] = v0, a[9] = v1, a[10] = v2, a[11] = v3;
    }
}
#undef CAREFUL_LOOP

static fmk_status direct_eval(fmk_plan *plan, const double *charges, double *pot, double *grad,
                              int on_device)
{
    if (on_device)
        return fmk_error_set(plan, FMK_ERR_INTERNAL, "the CPU engine got device pointers");
    cpu_direct *s = plan->state;
    const int cw = fmk_kernel_width(plan->kernel);
    const int cplx = cw == 2;
    const int64_t nt = plan->n_targets;
    double t0 = fmk_time_now();
    /* charges scaled by 2^-qexp into (-1, 1): q / r'^3 then stays finite for every pair the
     * fast loop takes, and fp32 charges are not rounded to Inf */
    const int qexp = fmk_exact_charge_exp(largest(charges, plan->n_sources * cw, plan->threads));
    store(s->src[3], s->real, charges, plan->n_sources, cw, qexp);
    if (cplx)
        store(s->src[2], s->real, charges + 1, plan->n_sources, cw, qexp);
    double t1 = fmk_time_now();

    const int64_t nblocks = (nt + TARGET_BLOCK - 1) / TARGET_BLOCK;
    /* a small sum (under a millisecond on one core) runs on the calling thread: starting
     * OpenMP's thread pool costs a first call more than the whole sum (3 ms against 0.45 ms
     * for 1000 points, 2 cores) */
    const int parallel = (double)nt * (double)plan->n_sources >= SERIAL_PAIRS;
#pragma omp parallel for schedule(dynamic, 1) num_threads(plan->threads) if (parallel)
    for (int64_t b = 0; b < nblocks; b++) {
        if (fmk_interrupt_team(plan)) /* the caller asked to stop: skip the remaining blocks */
            continue;
        double acc[12 * TARGET_BLOCK]; /* 4 a target, or 12 (3 classes) when careful */
        int64_t i0 = b * TARGET_BLOCK, i1 = i0 + TARGET_BLOCK < nt ? i0 + TARGET_BLOCK : nt;
        const int nclass = s->careful ? 3 : 1;
        memset(acc, 0, sizeof acc);
        if (s->real == sizeof(float))
            p2p32_block(plan, (const float *const *)s->src, s->trg, i0, i1, acc);
        else if (s->careful)
            careful_block(plan, (const double *const *)s->src, s->trg, i0, i1, acc);
        else
            p2p64_block(plan, (const double *const *)s->src, s->trg, i0, i1, acc);
        for (int64_t i = i0; i < i1; i++)
            store_target(plan, i, (const double(*)[4])(acc + 4 * nclass * (i - i0)), nclass, qexp,
                         pot, grad);
    }
    if (fmk_interrupt_stopped(plan))
        return fmk_interrupt_status(plan);
    plan->info.phase_time[FMK_PHASE_UPLOAD] = t1 - t0;
    plan->info.phase_time[FMK_PHASE_P2P] = fmk_time_now() - t1;
    return FMK_OK;
}

const fmk_engine fmk_engine_direct_cpu = {
    .name = "direct/cpu",
    .setup = direct_setup,
    .eval = direct_eval,
    .memory = direct_memory,
    .release = direct_release,
    .check_opts = fmk_direct_check_opts,
    .frame = {[FMK_PRECISION_FP64] = FMK_FRAME_EXACT, [FMK_PRECISION_FP32] = FMK_FRAME_BOX},
    .takes_self_slice = 1,
};
