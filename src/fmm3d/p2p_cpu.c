/* p2p_cpu.c -- the CPU 3D FMM's near field: P2P over the U list and over the W and X entries
 * that are cheaper summed directly, through the direct sum's vectorized loops (p2p_tile.h) or,
 * for laplace in fp64 on a CPU with AVX-512F, the loop below. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fmm3d/fmm3d_cpu.h"

/* The near field (P2P) uses the direct sum's inner loops, built for the widest vector unit of
 * the running CPU (FMK_TARGET_CLONES, internal.h). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#define REAL double
#define SQRT sqrt
#define LOG log
#define P2P(name) fmm_p2p64_##name
#include "kernels/p2p_tile.h"
#undef REAL
#undef SQRT
#undef LOG
#undef P2P
#define REAL float
#define SQRT sqrtf
#define LOG logf
#define P2P(name) fmm_p2p32_##name
#include "kernels/p2p_tile.h"
#undef REAL
#undef SQRT
#undef LOG
#undef P2P
#pragma GCC diagnostic pop

/* The laplace P2P of one target from the sources in n_ranges ranges [begin, begin + count), in
 * fp64 with AVX-512, for nv <= 4 charge vectors: 1/r from the 14-bit vrsqrt14pd estimate and
 * Newton steps y <- y (3/2 - r^2 y^2 / 2), which cost less per pair than vsqrtpd + vdivpd
 * (docs/fmm3d.md section 4): two steps (error 2^-14 -> ~2^-28 -> below 2^-53 relative: the
 * results agree with the sqrt-and-divide loop of p2p_tile.h to rounding), or for eps >= 1e-5
 * one (relative error of each term below 3 2^-29 = 6e-9, a thousandth of the smallest such
 * eps even where the near field's terms cancel a hundredfold). It is written with intrinsics,
 * not through kernels/pair.h: its 1/r is not the pair's. Lanes with r = 0 (the target itself,
 * coincident points) and past n contribute nothing, as in p2p_tile.h. Chosen at run time when
 * the CPU has AVX-512F (fmm_setup), else the tile's loop runs. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(FMK_NO_CLONES)
#include <immintrin.h>
#define FMM_P2P_AVX512 1
/* NV charge vectors and NEWTON steps (constants after inlining), vector v's charges at
 * q + v q_stride and its potential and gradient into out[4 v .. 4 v + 3]. */
__attribute__((target("avx512f"), always_inline)) static inline void
p2p_laplace_avx512_nv(int NV, int NEWTON, const double *restrict sx, const double *restrict sy,
                      const double *restrict sz, const double *restrict q, int64_t q_stride,
                      const int64_t *begin, const int64_t *count, int n_ranges, const double *yi,
                      double *out)
{
    const __m512d X = _mm512_set1_pd(yi[0]), Y = _mm512_set1_pd(yi[1]), Z = _mm512_set1_pd(yi[2]);
    const __m512d half = _mm512_set1_pd(0.5), three_halves = _mm512_set1_pd(1.5);
    __m512d P[4], GX[4], GY[4], GZ[4];
    for (int v = 0; v < NV; v++)
        P[v] = GX[v] = GY[v] = GZ[v] = _mm512_setzero_pd();
    for (int r = 0; r < n_ranges; r++)
        for (int64_t j = begin[r], n = begin[r] + count[r]; j < n; j += 8) {
            const __mmask8 in = n - j >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - j)) - 1);
            const __m512d dx = _mm512_sub_pd(X, _mm512_maskz_loadu_pd(in, sx + j));
            const __m512d dy = _mm512_sub_pd(Y, _mm512_maskz_loadu_pd(in, sy + j));
            const __m512d dz = _mm512_sub_pd(Z, _mm512_maskz_loadu_pd(in, sz + j));
            const __m512d r2 =
                _mm512_fmadd_pd(dx, dx, _mm512_fmadd_pd(dy, dy, _mm512_mul_pd(dz, dz)));
            const __mmask8 live = _mm512_mask_cmp_pd_mask(in, r2, _mm512_setzero_pd(), _CMP_GT_OQ);
            const __m512d hr2 = _mm512_mul_pd(half, r2);
            __m512d y = _mm512_maskz_rsqrt14_pd(live, r2);
            for (int it = 0; it < NEWTON; it++)
                y = _mm512_mul_pd(y, _mm512_fnmadd_pd(hr2, _mm512_mul_pd(y, y), three_halves));
            if (NV == 1) { /* q / r^3 once, times the offsets */
                const __m512d qr = _mm512_mul_pd(_mm512_maskz_loadu_pd(live, q + j), y);
                const __m512d qr3 = _mm512_mul_pd(qr, _mm512_mul_pd(y, y));
                P[0] = _mm512_add_pd(P[0], qr);
                GX[0] = _mm512_fnmadd_pd(qr3, dx, GX[0]);
                GY[0] = _mm512_fnmadd_pd(qr3, dy, GY[0]);
                GZ[0] = _mm512_fnmadd_pd(qr3, dz, GZ[0]);
                continue;
            }
            /* several vectors: the offsets over r^3 once, then four FMAs a vector */
            const __m512d y3 = _mm512_mul_pd(y, _mm512_mul_pd(y, y));
            const __m512d ex = _mm512_mul_pd(y3, dx), ey = _mm512_mul_pd(y3, dy),
                          ez = _mm512_mul_pd(y3, dz);
            for (int v = 0; v < NV; v++) {
                const __m512d qv = _mm512_maskz_loadu_pd(live, q + v * q_stride + j);
                P[v] = _mm512_fmadd_pd(qv, y, P[v]);
                GX[v] = _mm512_fnmadd_pd(qv, ex, GX[v]);
                GY[v] = _mm512_fnmadd_pd(qv, ey, GY[v]);
                GZ[v] = _mm512_fnmadd_pd(qv, ez, GZ[v]);
            }
        }
    for (int v = 0; v < NV; v++) {
        out[4 * v] = _mm512_reduce_add_pd(P[v]), out[4 * v + 1] = _mm512_reduce_add_pd(GX[v]);
        out[4 * v + 2] = _mm512_reduce_add_pd(GY[v]), out[4 * v + 3] = _mm512_reduce_add_pd(GZ[v]);
    }
}

/* One vector at TARGETS = 4 targets y[3 t + k] at once (into out[4 t .. 4 t + 3]): each source
 * load serves the four, which quarters the traffic from cache that bounds the loop above. The
 * offsets are taken as x - y (the gradient's sign follows). */
__attribute__((target("avx512f"), always_inline)) static inline void
p2p_laplace_avx512_t4(int NEWTON, const double *restrict sx, const double *restrict sy,
                      const double *restrict sz, const double *restrict q, const int64_t *begin,
                      const int64_t *count, int n_ranges, const double *yi, double *out)
{
    enum { T = 4 };
    const __m512d half = _mm512_set1_pd(0.5), three_halves = _mm512_set1_pd(1.5);
    __m512d P[T], GX[T], GY[T], GZ[T];
    for (int t = 0; t < T; t++)
        P[t] = GX[t] = GY[t] = GZ[t] = _mm512_setzero_pd();
    for (int r = 0; r < n_ranges; r++)
        for (int64_t j = begin[r], n = begin[r] + count[r]; j < n; j += 8) {
            const __mmask8 in = n - j >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - j)) - 1);
            const __m512d xs = _mm512_maskz_loadu_pd(in, sx + j);
            const __m512d ys = _mm512_maskz_loadu_pd(in, sy + j);
            const __m512d zs = _mm512_maskz_loadu_pd(in, sz + j);
            const __m512d qs = _mm512_maskz_loadu_pd(in, q + j);
            for (int t = 0; t < T; t++) {
                const __m512d dx = _mm512_sub_pd(xs, _mm512_set1_pd(yi[3 * t]));
                const __m512d dy = _mm512_sub_pd(ys, _mm512_set1_pd(yi[3 * t + 1]));
                const __m512d dz = _mm512_sub_pd(zs, _mm512_set1_pd(yi[3 * t + 2]));
                const __m512d r2 =
                    _mm512_fmadd_pd(dx, dx, _mm512_fmadd_pd(dy, dy, _mm512_mul_pd(dz, dz)));
                const __mmask8 live =
                    _mm512_mask_cmp_pd_mask(in, r2, _mm512_setzero_pd(), _CMP_GT_OQ);
                const __m512d hr2 = _mm512_mul_pd(half, r2);
                __m512d y = _mm512_maskz_rsqrt14_pd(live, r2); /* 0 where not live */
                for (int it = 0; it < NEWTON; it++)
                    y = _mm512_mul_pd(y, _mm512_fnmadd_pd(hr2, _mm512_mul_pd(y, y), three_halves));
                const __m512d qr = _mm512_mul_pd(qs, y);
                const __m512d qr3 = _mm512_mul_pd(qr, _mm512_mul_pd(y, y));
                P[t] = _mm512_add_pd(P[t], qr);
                GX[t] = _mm512_fmadd_pd(qr3, dx, GX[t]);
                GY[t] = _mm512_fmadd_pd(qr3, dy, GY[t]);
                GZ[t] = _mm512_fmadd_pd(qr3, dz, GZ[t]);
            }
        }
    for (int t = 0; t < T; t++) {
        out[4 * t] = _mm512_reduce_add_pd(P[t]), out[4 * t + 1] = _mm512_reduce_add_pd(GX[t]);
        out[4 * t + 2] = _mm512_reduce_add_pd(GY[t]), out[4 * t + 3] = _mm512_reduce_add_pd(GZ[t]);
    }
}

__attribute__((target("avx512f"))) static void
p2p_laplace_avx512_4(int newton, const double *restrict sx, const double *restrict sy,
                     const double *restrict sz, const double *restrict q, const int64_t *begin,
                     const int64_t *count, int n_ranges, const double *yi, double *out)
{
    if (newton == 1)
        p2p_laplace_avx512_t4(1, sx, sy, sz, q, begin, count, n_ranges, yi, out);
    else
        p2p_laplace_avx512_t4(2, sx, sy, sz, q, begin, count, n_ranges, yi, out);
}

__attribute__((target("avx512f"))) static void
p2p_laplace_avx512(int nv, int newton, const double *restrict sx, const double *restrict sy,
                   const double *restrict sz, const double *restrict q, int64_t q_stride,
                   const int64_t *begin, const int64_t *count, int n_ranges, const double *yi,
                   double *out)
{
#define P2P_NV(a, b) \
    p2p_laplace_avx512_nv(a, b, sx, sy, sz, q, q_stride, begin, count, n_ranges, yi, out)
    switch (4 * (newton == 1) + (nv < 4 ? nv : 4) - 1) {
    case 0: P2P_NV(1, 2); break;
    case 1: P2P_NV(2, 2); break;
    case 2: P2P_NV(3, 2); break;
    case 3: P2P_NV(4, 2); break;
    case 4: P2P_NV(1, 1); break;
    case 5: P2P_NV(2, 1); break;
    case 6: P2P_NV(3, 1); break;
    default: P2P_NV(4, 1); break;
    }
#undef P2P_NV
}
#endif

/* Seconds per P2P pair and core of the loop the engine will run (docs/fmm3d.md section 4): the
 * AVX-512 laplace loop, or the direct sum's square root and division. */
double fmk_fmm3d_cpu_pair_time(const fmk_plan *plan)
{
#ifdef FMM_P2P_AVX512
    if (plan->kernel == FMK_KERNEL_LAPLACE && plan->opts.precision == FMK_PRECISION_FP64 &&
        __builtin_cpu_supports("avx512f"))
        return 0.68e-9;
#endif
    (void)plan;
    return 1.60e-9;
}

int fmk_fmm3d_cpu_p2p_avx512(const fmk_plan *plan)
{
#ifdef FMM_P2P_AVX512
    if (plan->kernel != FMK_KERNEL_LAPLACE || plan->opts.precision != FMK_PRECISION_FP64 ||
        !__builtin_cpu_supports("avx512f"))
        return 0;
    return plan->eps >= 1e-5 ? 1 : 2;
#else
    (void)plan;
    return 0;
#endif
}

/* The leaves under node a (a included) that hold sources (want_src) or targets, into out (NULL:
 * only counted). Depth first with a stack: at most 7 pending siblings per level. */
static int64_t leaves_under(const fmk_fmm3d_cpu *s, int32_t a, int want_src, int32_t *out)
{
    int32_t stack[8 * 64];
    int top = 0;
    int64_t n = 0;
    stack[top++] = a;
    while (top > 0) {
        const int32_t v = stack[--top];
        if ((want_src ? s->n_src[v] : s->n_trg[v]) == 0)
            continue;
        if (s->tree.more[v] < 0) {
            if (out)
                out[n] = v;
            n++;
            continue;
        }
        for (int32_t c = s->tree.more[v]; c < s->tree.more[v] + s->tree.n_children[v]; c++)
            stack[top++] = c;
    }
    return n;
}

/* W and X entries that are cheaper summed directly. M2P of a W box c costs t_m2p ~ 6.2 (p+1)^2 ns
 * per target, P2P from its sources n_src(c) t_pair (the cost model of docs/fmm3d.md section 4),
 * so c's sources are summed directly when
 * n_src(c) < 2.5 (p+1)^2; P2L of an X entry costs t_p2l ~ 2.1 (p+1)^2 ns per source against
 * n_trg(b) t_pair directly, so a box b with fewer than 0.9 (p+1)^2 targets (in its subtree) takes
 * its X entries directly. Both thresholds scale with 1.60 ns / t_pair of the P2P loop in use
 * (2.35x for the AVX-512 loop). Direct sums are exact, so this changes only the cost. The
 * direct entries become, per leaf, a list of source leaves that P2P sums after the U list (a W
 * box's leaves; an X leaf for every leaf under b). Returns 0, or -1 when out of memory. */
int fmk_fmm3d_cpu_direct_lists(fmk_fmm3d_cpu *s, int order, double t_pair, int direct_near)
{
    const fmk_fmm3d_lists *l = &s->lists;
    const int64_t k = l->n_nodes;
    /* direct_near = 0: every W and X entry on its operator (a test compares two engines so) */
    const double q2 = direct_near ? (double)(order + 1) * (order + 1) * (1.60e-9 / t_pair) : 0;
    const double w_max = 2.5 * q2, x_max = 0.9 * q2;
    s->w_direct = malloc((size_t)(l->n_w > 0 ? l->n_w : 1));
    s->x_direct = malloc((size_t)(k > 0 ? k : 1));
    s->d_begin = calloc((size_t)k + 1, sizeof(int64_t));
    if (!s->w_direct || !s->x_direct || !s->d_begin)
        return -1;
    for (int64_t e = 0; e < l->n_w; e++)
        s->w_direct[e] = s->n_src[l->w[e]] < w_max;
    for (int64_t b = 0; b < k; b++)
        s->x_direct[b] = s->n_trg[b] < x_max && l->x_begin[b + 1] > l->x_begin[b];
    /* counts (into d_begin[b + 1]), then offsets, then entries */
    for (int pass = 0; pass < 2; pass++) {
        int64_t *fill = s->d_begin;
        if (pass == 1) {
            for (int64_t b = 0; b < k; b++)
                s->d_begin[b + 1] += s->d_begin[b];
            s->d_leaf = malloc(sizeof(int32_t) * (size_t)(s->d_begin[k] > 0 ? s->d_begin[k] : 1));
            if (!s->d_leaf)
                return -1;
        }
        int64_t *at = NULL;
        if (pass == 1) {
            at = malloc(sizeof(int64_t) * (size_t)(k > 0 ? k : 1));
            if (!at)
                return -1;
            memcpy(at, s->d_begin, sizeof(int64_t) * (size_t)k);
        }
        for (int64_t b = 0; b < k; b++) {
            if (s->tree.more[b] < 0 && s->n_trg[b] > 0)
                for (int64_t e = l->w_begin[b]; e < l->w_begin[b + 1]; e++)
                    if (s->w_direct[e]) {
                        if (pass == 0)
                            fill[b + 1] += leaves_under(s, l->w[e], 1, NULL);
                        else
                            at[b] += leaves_under(s, l->w[e], 1, s->d_leaf + at[b]);
                    }
            if (!s->x_direct[b])
                continue;
            /* every target leaf under b sums b's X leaves directly */
            const int64_t n_under = leaves_under(s, (int32_t)b, 0, NULL);
            int32_t *under = malloc(sizeof(int32_t) * (size_t)(n_under > 0 ? n_under : 1));
            if (!under) {
                free(at);
                return -1;
            }
            const int64_t nd = leaves_under(s, (int32_t)b, 0, under);
            for (int64_t i = 0; i < nd; i++)
                for (int64_t e = l->x_begin[b]; e < l->x_begin[b + 1]; e++) {
                    if (pass == 0)
                        fill[under[i] + 1]++;
                    else
                        s->d_leaf[at[under[i]]++] = l->x[e];
                }
            free(under);
        }
        free(at);
    }
    return 0;
}

/* P2P at every leaf with targets, into the results (key order) of vectors [v_first, v_first +
 * nv) of the s->nv (in fp32, one vector: its charges in src32). */
void fmk_fmm3d_cpu_p2p(const fmk_plan *plan, fmk_fmm3d_cpu *s, int v_first, int nv)
{
    const fmk_tree3d *t = &s->tree;
    const fmk_fmm3d_lists *l = &s->lists;
    const int64_t k = t->n_nodes;
    const int th = plan->threads;
    const int64_t ns = s->n_unique; /* the arrays' length: a run of coincident sources is one */
    const int64_t nt = plan->n_targets, rs = 4 * nt; /* one vector's results */
    double *result = s->result + v_first * rs;
    const double *qv = s->qv + v_first * ns;
    /* one vector with targets = sources: the U pairs of distinct leaves once, both ways */
    const int mutual = s->n_colors > 0 && nv == 1 && !s->src32;
    /* P2P from the U list: per target leaf, one source leaf at a time (it stays in cache)
     * through the direct sum's vectorized loop for the plan's kernel (plummer and regularized:
     * the exact smooth kernel in the near field), in fp64 or, for precision fp32, in fp32 */
    const double *sx = s->src_soa, *sy = sx + ns, *sz = sy + ns;
    /* fp32 copies only for precision fp32 (src32 is NULL otherwise: no offsets from it) */
    const float *fx = s->src32, *fy = fx ? fx + ns : NULL, *fz = fx ? fy + ns : NULL,
                *fq = fx ? fz + ns : NULL;
    const fmm_p2p64_tile_fn p2p = fmm_p2p64_pick(plan->kernel);
    const fmm_p2p32_tile_fn p2p32 = fmm_p2p32_pick(plan->kernel);
    const double eps2 = plan->frame.softening * plan->frame.softening;
#pragma omp parallel for schedule(dynamic, 1) num_threads(th)
    for (int64_t b = 0; b < k; b++) {
        if (t->more[b] >= 0 || s->n_trg[b] == 0 || fmk_interrupt_team(plan))
            continue;
        const int64_t tb = s->trg_begin[b], te = tb + s->n_trg[b];
        const int64_t nu = l->u_begin[b + 1] - l->u_begin[b];
        const int64_t nd = s->d_begin[b + 1] - s->d_begin[b];
#ifdef FMM_P2P_AVX512
        if (s->p2p_avx512) { /* all source leaves at once per target, 64 at a time */
            for (int64_t e0 = 0; e0 < nu + nd; e0 += 64) {
                int64_t jb[64], jn[64];
                int cnt = 0;
                for (int64_t e = e0; e < nu + nd && e < e0 + 64; e++) {
                    const int32_t c =
                        e < nu ? l->u[l->u_begin[b] + e] : s->d_leaf[s->d_begin[b] + e - nu];
                    if (mutual && e < nu && c != b) /* the pair runs both ways below */
                        continue;
                    fmk_fmm3d_cpu_src_range(s, c, jb + cnt, jn + cnt);
                    cnt++;
                }
                int64_t i0 = tb;
                if (nv == 1 && s->p2p_targets == 4) /* four targets at a time, then the rest */
                    for (; i0 + 4 <= te; i0 += 4) {
                        double out[16];
                        p2p_laplace_avx512_4(s->p2p_avx512, sx, sy, sz, qv, jb, jn, cnt,
                                             s->trg_xyz + 3 * i0, out);
                        for (int t = 0; t < 4; t++) {
                            result[i0 + t] += out[4 * t];
                            for (int d = 0; d < 3; d++)
                                result[nt + 3 * (i0 + t) + d] += out[4 * t + 1 + d];
                        }
                    }
                for (int v0 = 0; v0 < nv; v0 += 4) { /* the vectors, four at a time */
                    const int n4 = nv - v0 < 4 ? nv - v0 : 4;
                    for (int64_t i = i0; i < te; i++) {
                        double out[16];
                        p2p_laplace_avx512(n4, s->p2p_avx512, sx, sy, sz, qv + v0 * ns, ns, jb, jn,
                                           cnt, s->trg_xyz + 3 * i, out);
                        for (int v = 0; v < n4; v++) {
                            double *res = result + (v0 + v) * rs;
                            res[i] += out[4 * v];
                            for (int d = 0; d < 3; d++)
                                res[nt + 3 * i + d] += out[4 * v + 1 + d];
                        }
                    }
                }
            }
            continue;
        }
#endif
        for (int64_t e = 0; e < nu + nd; e++) { /* the U list, then the direct W and X leaves */
            const int32_t c = e < nu ? l->u[l->u_begin[b] + e] : s->d_leaf[s->d_begin[b] + e - nu];
            int64_t j0, nj;
            fmk_fmm3d_cpu_src_range(s, c, &j0, &nj);
            for (int v = 0; v < nv; v++) {
                double *res = result + v * rs;
                const double *sq = qv + v * ns;
                for (int64_t i = tb; i < te; i++) {
                    double out[4];
                    /* the target itself, when targets are the sources (smooth kernels; its
                     * whole run: fmk_fmm3d_cpu_p2p_runs adds the rest) */
                    const int64_t skip = plan->self && c == b ? fmk_fmm3d_cpu_slot(s, i) - j0 : -1;
                    if (fx) { /* fp32: one vector, in turns (fmm_eval) */
                        float o32[4], y32[3];
                        for (int d = 0; d < 3; d++)
                            y32[d] = (float)(s->trg_xyz[3 * i + d] - l->center[3 * c + d]);
                        p2p32(fx + j0, fy + j0, fz + j0, fq + j0, nj, y32, skip, (float)eps2, 0,
                              o32);
                        for (int d = 0; d < 4; d++)
                            out[d] = o32[d];
                    } else {
                        p2p(sx + j0, sy + j0, sz + j0, sq + j0, nj, s->trg_xyz + 3 * i, skip, eps2,
                            0, out);
                    }
                    res[i] += out[0];
                    for (int d = 0; d < 3; d++)
                        res[nt + 3 * i + d] += out[1 + d];
                }
            }
        }
    }
    if (mutual)
        fmk_fmm3d_cpu_p2p_mutual(plan, s);
}

void fmk_fmm3d_cpu_p2p_runs(const fmk_plan *plan, fmk_fmm3d_cpu *s, const double *charges)
{
    if (!plan->self || !s->src_slot || plan->kernel == FMK_KERNEL_LAPLACE)
        return;
    const fmm_p2p64_tile_fn p2p = fmm_p2p64_pick(plan->kernel);
    const double eps2 = plan->frame.softening * plan->frame.softening;
    const int64_t n = plan->n_targets, nu = s->n_unique;
    for (int v = 0; v < s->nv; v++) {
        const double *qv = s->qv + v * nu, *cv = charges + v * plan->n_sources;
        double *res = s->result + 4 * n * v;
#pragma omp parallel for schedule(static) num_threads(plan->threads) if (n > 4096)
        for (int64_t i = 0; i < n; i++) {
            /* the run's charge without the target's own, at r = 0 through the kernel's loop */
            const double dq = qv[s->src_slot[i]] - cv[s->src_order[i]];
            if (dq == 0)
                continue;
            const double *y = s->trg_xyz + 3 * i;
            double out[4];
            p2p(y, y + 1, y + 2, &dq, 1, y, -1, eps2, 0, out);
            res[i] += out[0]; /* the gradient at r = 0 is zero */
        }
    }
}

void fmk_fmm3d_cpu_interactions(const fmk_fmm3d_cpu *s, int self, int64_t n_targets, int64_t *p2p,
                                int64_t *far)
{
    const fmk_fmm3d_lists *l = &s->lists;
    int64_t pairs = 0, terms = l->n_v;
    for (int64_t b = 0; b < l->n_nodes; b++) {
        if (!s->x_direct[b])
            terms += l->x_begin[b + 1] - l->x_begin[b];
        if (s->tree.more[b] >= 0 || s->n_trg[b] == 0)
            continue;
        int64_t sources = 0; /* of the U list and the direct entries */
        for (int64_t e = l->u_begin[b]; e < l->u_begin[b + 1]; e++)
            sources += s->n_src[l->u[e]];
        for (int64_t e = s->d_begin[b]; e < s->d_begin[b + 1]; e++)
            sources += s->n_src[s->d_leaf[e]];
        pairs += s->n_trg[b] * sources;
    }
    for (int64_t e = 0; e < l->n_w; e++)
        terms += !s->w_direct[e];
    *p2p = pairs - (self ? n_targets : 0);
    *far = terms;
}
