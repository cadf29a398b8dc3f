/* p2p_mutual_cpu.c -- the CPU 3D FMM's near field when the targets are the sources (laplace,
 * fp64, AVX-512, one charge vector, no coincident sources): each pair of adjacent leaves
 * (A, B) of the U lists once, both directions from one 1/r. The laplace pair term is symmetric
 * in the potential and antisymmetric in the gradient, so A's points get B's charges and B's
 * points get A's from the same distances: half the pairs of the one-sided loop of p2p_cpu.c.
 *
 * Writing into both leaves would race between threads, so set_points colours the leaf pairs
 * (greedy edge colouring: no two pairs of one colour share a leaf) and eval runs the colours one
 * after the other, the pairs of a colour in parallel. A leaf's pairs with itself and its direct
 * W and X entries (one-sided: fmk_fmm3d_cpu_direct_lists) stay with p2p_cpu.c's loop. */
#include <stdlib.h>
#include <string.h>

#include "fmm3d/fmm3d_cpu.h"

enum {
    MAX_COLORS = 64,    /* a bit each in a leaf's mask */
    MAX_LEAF = 1 << 14  /* sources of the largest leaf the scratch holds */
};

void fmk_fmm3d_cpu_mutual_free(fmk_fmm3d_cpu *s)
{
    free(s->mutual_pair), free(s->mutual_begin), free(s->mutual_buf);
    s->mutual_pair = NULL, s->mutual_begin = NULL, s->mutual_buf = NULL;
    s->n_colors = 0;
}

int fmk_fmm3d_cpu_mutual_pairs(const fmk_plan *plan, fmk_fmm3d_cpu *s)
{
    s->n_colors = 0;
    if (!plan->self || !s->p2p_avx512 || s->src_slot || s->src32)
        return 0;
    const fmk_fmm3d_lists *l = &s->lists;
    const int64_t k = s->tree.n_nodes;
    int64_t n_pairs = 0, big = 0;
    for (int64_t a = 0; a < k; a++) {
        if (s->tree.more[a] >= 0 || s->n_src[a] == 0)
            continue;
        big = s->n_src[a] > big ? s->n_src[a] : big;
        for (int64_t e = l->u_begin[a]; e < l->u_begin[a + 1]; e++)
            n_pairs += l->u[e] > a;
    }
    if (n_pairs == 0 || big > MAX_LEAF)
        return 0; /* nothing to pair, or a leaf beyond the scratch: the one-sided loop */
    uint64_t *mask = calloc((size_t)k, sizeof(uint64_t));
    int32_t *pair = malloc(sizeof(int32_t) * 2 * (size_t)n_pairs);
    int8_t *color = malloc((size_t)n_pairs);
    s->mutual_begin = calloc(MAX_COLORS + 1, sizeof(int64_t));
    s->mutual_pair = malloc(sizeof(int32_t) * 2 * (size_t)n_pairs);
    s->mutual_buf = malloc(sizeof(double) * 4 * (size_t)big * (size_t)plan->threads);
    const int oom = !mask || !pair || !color || !s->mutual_begin || !s->mutual_pair ||
                    !s->mutual_buf;
    int ok = !oom;
    int64_t n = 0;
    for (int64_t a = 0; a < k && ok; a++) {
        if (s->tree.more[a] >= 0 || s->n_src[a] == 0)
            continue;
        for (int64_t e = l->u_begin[a]; e < l->u_begin[a + 1] && ok; e++) {
            const int32_t b = l->u[e];
            if (b <= a || s->n_src[b] == 0)
                continue;
            const uint64_t free_bits = ~(mask[a] | mask[b]);
            if (!free_bits) { /* a leaf with more than 64 neighbours: the one-sided loop */
                ok = 0;
                break;
            }
            const int c = __builtin_ctzll(free_bits);
            mask[a] |= 1ull << c, mask[b] |= 1ull << c;
            pair[2 * n] = (int32_t)a, pair[2 * n + 1] = b, color[n] = (int8_t)c;
            s->mutual_begin[c + 1]++;
            s->n_colors = c + 1 > s->n_colors ? c + 1 : s->n_colors;
            n++;
        }
    }
    if (ok) { /* the pairs by colour */
        for (int c = 0; c < MAX_COLORS; c++)
            s->mutual_begin[c + 1] += s->mutual_begin[c];
        int64_t at[MAX_COLORS];
        memcpy(at, s->mutual_begin, sizeof at);
        for (int64_t i = 0; i < n; i++) {
            const int64_t j = at[color[i]]++;
            s->mutual_pair[2 * j] = pair[2 * i], s->mutual_pair[2 * j + 1] = pair[2 * i + 1];
        }
        s->mutual_buf_size = 4 * big;
    }
    free(mask), free(pair), free(color);
    if (!ok) {
        fmk_fmm3d_cpu_mutual_free(s);
        return oom ? -1 : 0;
    }
    return 0;
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(FMK_NO_CLONES)
#include <immintrin.h>

/* Leaf A's points [a0, a0 + na) against leaf B's [b0, b0 + nb): A's results (pot at res[i],
 * gradient at res[nt + 3 i]) in registers per point, B's in acc (4 nb: potential, then the
 * gradient's x, y, z), with NEWTON steps for 1/r as p2p_cpu.c's loop. */
__attribute__((target("avx512f"), always_inline)) static inline void
mutual_pair(int NEWTON, const double *restrict sx, const double *restrict sy,
            const double *restrict sz, const double *restrict q, int64_t a0, int64_t na,
            int64_t b0, int64_t nb, int64_t nt, double *restrict res, double *restrict acc)
{
    double *ap = acc, *ax = acc + nb, *ay = ax + nb, *az = ay + nb;
    memset(acc, 0, sizeof(double) * 4 * (size_t)nb);
    const __m512d half = _mm512_set1_pd(0.5), three_halves = _mm512_set1_pd(1.5);
    for (int64_t i = a0; i < a0 + na; i++) {
        const __m512d X = _mm512_set1_pd(sx[i]), Y = _mm512_set1_pd(sy[i]),
                      Z = _mm512_set1_pd(sz[i]), QI = _mm512_set1_pd(q[i]);
        __m512d P = _mm512_setzero_pd(), GX = P, GY = P, GZ = P;
        for (int64_t j = 0; j < nb; j += 8) {
            const __mmask8 in = nb - j >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (nb - j)) - 1);
            const __m512d dx = _mm512_sub_pd(X, _mm512_maskz_loadu_pd(in, sx + b0 + j));
            const __m512d dy = _mm512_sub_pd(Y, _mm512_maskz_loadu_pd(in, sy + b0 + j));
            const __m512d dz = _mm512_sub_pd(Z, _mm512_maskz_loadu_pd(in, sz + b0 + j));
            const __m512d r2 =
                _mm512_fmadd_pd(dx, dx, _mm512_fmadd_pd(dy, dy, _mm512_mul_pd(dz, dz)));
            const __mmask8 live = _mm512_mask_cmp_pd_mask(in, r2, _mm512_setzero_pd(), _CMP_GT_OQ);
            const __m512d hr2 = _mm512_mul_pd(half, r2);
            __m512d y = _mm512_maskz_rsqrt14_pd(live, r2); /* 0 where not live */
            for (int it = 0; it < NEWTON; it++)
                y = _mm512_mul_pd(y, _mm512_fnmadd_pd(hr2, _mm512_mul_pd(y, y), three_halves));
            const __m512d y2 = _mm512_mul_pd(y, y);
            /* A's point i from B's charges: phi += q_j / r, grad -= q_j (y_i - x_j) / r^3 */
            const __m512d qr = _mm512_mul_pd(_mm512_maskz_loadu_pd(in, q + b0 + j), y);
            const __m512d qr3 = _mm512_mul_pd(qr, y2);
            P = _mm512_add_pd(P, qr);
            GX = _mm512_fnmadd_pd(qr3, dx, GX);
            GY = _mm512_fnmadd_pd(qr3, dy, GY);
            GZ = _mm512_fnmadd_pd(qr3, dz, GZ);
            /* B's points from q_i: phi += q_i / r, grad += q_i (y_i - x_j) / r^3 */
            const __m512d pr = _mm512_mul_pd(QI, y), pr3 = _mm512_mul_pd(pr, y2);
            _mm512_mask_storeu_pd(ap + j, in, _mm512_add_pd(_mm512_maskz_loadu_pd(in, ap + j), pr));
            _mm512_mask_storeu_pd(ax + j, in,
                                  _mm512_fmadd_pd(pr3, dx, _mm512_maskz_loadu_pd(in, ax + j)));
            _mm512_mask_storeu_pd(ay + j, in,
                                  _mm512_fmadd_pd(pr3, dy, _mm512_maskz_loadu_pd(in, ay + j)));
            _mm512_mask_storeu_pd(az + j, in,
                                  _mm512_fmadd_pd(pr3, dz, _mm512_maskz_loadu_pd(in, az + j)));
        }
        res[i] += _mm512_reduce_add_pd(P);
        res[nt + 3 * i] += _mm512_reduce_add_pd(GX);
        res[nt + 3 * i + 1] += _mm512_reduce_add_pd(GY);
        res[nt + 3 * i + 2] += _mm512_reduce_add_pd(GZ);
    }
    for (int64_t j = 0; j < nb; j++) {
        res[b0 + j] += ap[j];
        res[nt + 3 * (b0 + j)] += ax[j];
        res[nt + 3 * (b0 + j) + 1] += ay[j];
        res[nt + 3 * (b0 + j) + 2] += az[j];
    }
}

__attribute__((target("avx512f"))) static void
mutual_pair_any(int newton, const double *sx, const double *sy, const double *sz, const double *q,
                int64_t a0, int64_t na, int64_t b0, int64_t nb, int64_t nt, double *res,
                double *acc)
{
    if (newton == 1)
        mutual_pair(1, sx, sy, sz, q, a0, na, b0, nb, nt, res, acc);
    else
        mutual_pair(2, sx, sy, sz, q, a0, na, b0, nb, nt, res, acc);
}

void fmk_fmm3d_cpu_p2p_mutual(const fmk_plan *plan, fmk_fmm3d_cpu *s)
{
    const int64_t ns = s->n_unique, nt = plan->n_targets;
    const double *sx = s->src_soa, *sy = sx + ns, *sz = sy + ns, *q = s->qv;
    for (int c = 0; c < s->n_colors; c++) {
        const int64_t p0 = s->mutual_begin[c], p1 = s->mutual_begin[c + 1];
#pragma omp parallel for schedule(dynamic, 4) num_threads(plan->threads)
        for (int64_t e = p0; e < p1; e++) {
            if (fmk_interrupt_team(plan))
                continue;
            const int32_t a = s->mutual_pair[2 * e], b = s->mutual_pair[2 * e + 1];
            double *acc = s->mutual_buf + s->mutual_buf_size * fmk_thread_num();
            /* the larger leaf inside: its points stream through the vector lanes */
            const int32_t in = s->n_src[a] >= s->n_src[b] ? a : b, out = in == a ? b : a;
            mutual_pair_any(s->p2p_avx512, sx, sy, sz, q, s->src_begin[out], s->n_src[out],
                            s->src_begin[in], s->n_src[in], nt, s->result, acc);
        }
    }
}
#else
void fmk_fmm3d_cpu_p2p_mutual(const fmk_plan *plan, fmk_fmm3d_cpu *s)
{
    (void)plan, (void)s; /* never called: mutual_pairs leaves n_colors 0 without AVX-512 */
}
#endif
