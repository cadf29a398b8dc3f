/* eval_cpu.c -- the treecode's logical plans evaluated on the CPU (paper section 4, "CPU-only
 * evaluation"): OpenMP over the bricks (dynamic schedule: their lists differ in length), and
 * inside a brick
 *
 *  - the direct part vectorised along x: a brick's row of up to 8 points fills the lanes, two
 *    rows at a time share each source's loads. On a row, y - y_j and z - z_j are the same for
 *    every lane, so the lanes differ only in dx, and for u the cross product's x component and
 *    half of the others are per source and row. The pair terms are kernels/pair.h's
 *    regularized ones (G(0) = 3/(2e), zero gradient: j = i needs no mask);
 *  - the far part: fmk_fmm3d_m2p_many at the brick's points for every far node, the gradients
 *    when u is wanted, u = curl of the gradients (u_a = d_b pot_c - d_c pot_b).
 *
 * A brick's results are summed in its own buffers and added to the field once: bricks own
 * disjoint points, so no two threads write the same value, and the order of every sum is fixed
 * (the results do not depend on the schedule). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "poisson/treecode/treecode.h"

enum { LANES = 8, BRICK_MAX = 512 };

#define REAL double
#define SQRT sqrt
#define RSQRT(x) (1.0 / sqrt(x))
#define PAIR(name) tc_pair_##name
#include "kernels/pair.h"
#undef REAL
#undef SQRT
#undef RSQRT
#undef PAIR

#if defined(__GNUC__)
#define TC_INLINE inline __attribute__((always_inline))
#else
#define TC_INLINE inline
#endif

/* A brick's buffers (one per thread): its points (interleaved, for M2P), and its results:
 * pot[a BRICK_MAX + q], u[a BRICK_MAX + q] (direct part), grad[a 3 BRICK_MAX + 3 q + d] (far
 * part), q = i + n0 (j + n1 k) the point's place in the brick. */
typedef struct brick_buf {
    double y[3 * BRICK_MAX];
    double pot[3 * BRICK_MAX];
    double u[3 * BRICK_MAX];
    double grad[9 * BRICK_MAX];
} brick_buf;

/* The direct part of one brick over its source ranges: NC weight vectors, the potential (POT)
 * and/or u (U), constants after inlining. Rows j0 and j0 + 1 of plane k share the sources; a
 * brick with an odd row count computes its last row twice and keeps one. */
static TC_INLINE void direct_core(int NC, int POT, int U, const fmk_tc_sources *src,
                                  const int64_t *range, int64_t n_range, const fmk_tc_brick *b,
                                  double e2, double *restrict pot, double *restrict u)
{
    const int64_t n = src->n;
    const double *sx = src->x, *sy = src->y, *sz = src->z, *w = src->w;
    const double e15 = 1.5 * e2, e25 = 2.5 * e2;
    const int n0 = b->n[0], n1 = b->n[1], n2 = b->n[2];
    double px[LANES];
    for (int t = 0; t < LANES; t++)
        px[t] = b->corner[0] + b->h * (double)(t < n0 ? t : n0 - 1);
    for (int k = 0; k < n2; k++)
        for (int j0 = 0; j0 < n1; j0 += 2) {
            const int j1 = j0 + 1 < n1 ? j0 + 1 : j0;
            const double py[2] = {b->corner[1] + b->h * j0, b->corner[1] + b->h * j1};
            const double pz = b->corner[2] + b->h * k;
            double P[3][2][LANES], V[3][2][LANES];
            for (int a = 0; a < 3; a++)
                for (int r = 0; r < 2; r++)
                    for (int t = 0; t < LANES; t++)
                        P[a][r][t] = 0, V[a][r][t] = 0;
            for (int64_t g = 0; g < n_range; g++)
                for (int64_t js = range[2 * g]; js < range[2 * g + 1]; js++) {
                    const double xs = sx[js], dz = pz - sz[js];
                    double wa[3] = {0, 0, 0};
                    for (int a = 0; a < NC; a++)
                        wa[a] = w[a * n + js];
                    for (int r = 0; r < 2; r++) {
                        const double dy = py[r] - sy[js], c2 = dy * dy + dz * dz;
                        /* u = -g (d x w): its x component and the per-source halves */
                        const double ux = dy * wa[2] - dz * wa[1];
#pragma omp simd
                        for (int t = 0; t < LANES; t++) {
                            const double dx = px[t] - xs, r2 = dx * dx + c2;
                            const double dinv = 1 / (r2 + e2);
                            const tc_pair_radial kf =
                                tc_pair_regularized_k(sqrt(dinv), dinv, r2, e15, e25);
                            if (POT)
                                for (int a = 0; a < NC; a++)
                                    P[a][r][t] += wa[a] * kf.pot;
                            if (U) {
                                V[0][r][t] -= kf.g * ux;
                                V[1][r][t] -= kf.g * (dz * wa[0] - dx * wa[2]);
                                V[2][r][t] -= kf.g * (dx * wa[1] - dy * wa[0]);
                            }
                        }
                    }
                }
            const int rows = j1 > j0 ? 2 : 1;
            for (int r = 0; r < rows; r++) {
                const int64_t q0 = (int64_t)n0 * (j0 + r + (int64_t)n1 * k);
                for (int t = 0; t < n0; t++) {
                    if (POT)
                        for (int a = 0; a < NC; a++)
                            pot[a * BRICK_MAX + q0 + t] += P[a][r][t];
                    if (U)
                        for (int a = 0; a < 3; a++)
                            u[a * BRICK_MAX + q0 + t] += V[a][r][t];
                }
            }
        }
}

#define DIRECT_VARIANT(name, NC, POT, U)                                                  \
    static FMK_TARGET_CLONES void name(const fmk_tc_sources *src, const int64_t *range,   \
                                       int64_t n_range, const fmk_tc_brick *b, double e2, \
                                       double *pot, double *u)                            \
    {                                                                                     \
        direct_core(NC, POT, U, src, range, n_range, b, e2, pot, u);                      \
    }
DIRECT_VARIANT(direct_1, 1, 1, 0)
DIRECT_VARIANT(direct_3, 3, 1, 0)
DIRECT_VARIANT(direct_3u, 3, 1, 1)
DIRECT_VARIANT(direct_u, 3, 0, 1)
#undef DIRECT_VARIANT

typedef void (*direct_fn)(const fmk_tc_sources *, const int64_t *, int64_t, const fmk_tc_brick *,
                          double, double *, double *);

static direct_fn pick_direct(int nc, int want_pot, int want_u)
{
    if (want_u)
        return want_pot ? direct_3u : direct_u;
    return nc == 1 ? direct_1 : direct_3;
}

/* The far part of brick k: every far node's multipole at the brick's np points. */
static void far_brick(const fmk_tc_tree *t, const fmk_tc_plans *plans, int64_t k, int nc,
                      int want_pot, int want_u, int64_t np, brick_buf *buf, double *work)
{
    for (int64_t f = plans->far_start[k]; f < plans->far_start[k + 1]; f++) {
        const int64_t i = plans->far_node[f];
        fmk_fmm3d_m2p_many(&t->ops, t->center + 3 * i, t->scale[i], nc,
                           t->multipole + i * nc * t->coef, t->coef, np, buf->y,
                           want_pot ? buf->pot : NULL, BRICK_MAX, want_u ? buf->grad : NULL,
                           3 * BRICK_MAX, work);
    }
}

/* Adds brick b's buffers into the field arrays. */
static void scatter(const fmk_tc_brick *b, int nc, const brick_buf *buf, int far, double *pot,
                    double *u)
{
    const int n0 = b->n[0], n1 = b->n[1], n2 = b->n[2];
    for (int k = 0; k < n2; k++)
        for (int j = 0; j < n1; j++)
            for (int i = 0; i < n0; i++) {
                const int64_t q = i + (int64_t)n0 * (j + (int64_t)n1 * k);
                const int64_t p = b->first + i + b->stride[0] * j + b->stride[1] * k;
                if (pot)
                    for (int a = 0; a < nc; a++)
                        pot[nc * p + a] += buf->pot[a * BRICK_MAX + q];
                if (!u)
                    continue;
                for (int a = 0; a < 3; a++) {
                    double v = buf->u[a * BRICK_MAX + q];
                    if (far) {
                        const int bb = (a + 1) % 3, c = (a + 2) % 3;
                        v += buf->grad[c * 3 * BRICK_MAX + 3 * q + bb] -
                             buf->grad[bb * 3 * BRICK_MAX + 3 * q + c];
                    }
                    u[3 * p + a] += v;
                }
            }
}

fmk_status fmk_tc_eval_cpu(fmk_poisson *s, const fmk_tc_sources *src, const fmk_tc_tree *tree,
                           const fmk_tc_plans *plans, int direct, int far, double *pot, double *u)
{
    const int nc = src->nc;
    const int want_pot = pot != NULL, want_u = u != NULL;
    if ((!want_pot && !want_u) || (!direct && !far))
        return FMK_OK;
    const int64_t ws = fmk_fmm3d_points_work_size(&tree->ops, nc);
    const size_t stride = sizeof(brick_buf) + sizeof(double) * (size_t)ws;
    char *mem = malloc(stride * (size_t)s->threads);
    if (!mem)
        return fmk_solver_fail(s, FMK_ERR_NOMEM,
                               "method treecode: out of host memory for the bricks' buffers");
    const direct_fn fn = pick_direct(nc, want_pot, want_u);
    const double e2 = s->e * s->e;
    atomic_int *stop = &s->interrupt.stop;
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->threads)
    for (int64_t k = 0; k < plans->n_bricks; k++) {
        if (atomic_load_explicit(stop, memory_order_relaxed))
            continue;
        if (fmk_thread_num() == 0 && fmk_solver_poll(s))
            continue;
        brick_buf *buf = (brick_buf *)(mem + stride * (size_t)fmk_thread_num());
        double *work = (double *)(buf + 1);
        const fmk_tc_brick *b = &plans->bricks[k];
        const int64_t np = (int64_t)b->n[0] * b->n[1] * b->n[2];
        memset(buf->pot, 0, sizeof(double) * 3 * BRICK_MAX);
        memset(buf->u, 0, sizeof(double) * 3 * BRICK_MAX);
        if (direct) {
            const int64_t r0 = plans->direct_start[k], r1 = plans->direct_start[k + 1];
            fn(src, plans->direct_range + 2 * r0, r1 - r0, b, e2, buf->pot, buf->u);
        }
        const int has_far = far && plans->far_start[k + 1] > plans->far_start[k];
        if (has_far) {
            for (int64_t q = 0; q < np; q++) {
                const int64_t i = q % b->n[0], j = q / b->n[0] % b->n[1],
                              m = q / ((int64_t)b->n[0] * b->n[1]);
                buf->y[3 * q] = b->corner[0] + b->h * (double)i;
                buf->y[3 * q + 1] = b->corner[1] + b->h * (double)j;
                buf->y[3 * q + 2] = b->corner[2] + b->h * (double)m;
            }
            if (want_u)
                memset(buf->grad, 0, sizeof(double) * 9 * BRICK_MAX);
            far_brick(tree, plans, k, nc, want_pot, want_u, np, buf, work);
        }
        scatter(b, nc, buf, has_far, pot, u);
    }
    free(mem);
    if (atomic_load_explicit(stop, memory_order_relaxed))
        return fmk_solver_fail(s, FMK_ERR_INTERRUPTED, "interrupted");
    return FMK_OK;
}
