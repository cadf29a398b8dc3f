/* p2p_tile.h -- the CPU direct-summation inner loops, written once and included by p2p.c for
 * each working precision (REAL = double, float; P2P(name) makes the function names).
 *
 * Each function sums the sources [0, n) of one tile (structure of arrays, mapped coordinates)
 * at one target and returns the potential and gradient in the tile's precision; p2p.c adds
 * tiles up in double. skip is the tile-relative index of the target itself when targets are the
 * sources, or a slice of them (plan->self_slice), -1 otherwise; singular kernels skip r = 0 instead, which includes the self term.
 * Each loop is a single `omp simd` reduction with no branches, so it vectorizes; the pair
 * terms are kernels/pair.h's (instantiated here as P2P(pair_<kernel>)). */

#define REAL_ONE ((REAL)1)
#define RSQRT(x) (REAL_ONE / SQRT(x))
#define PAIR(name) P2P(pair_##name)
#include "kernels/pair.h"

/* laplace: phi = q / r, grad_y = -q (y - x) / r^3 */
static FMK_TARGET_CLONES void P2P(laplace)(const REAL *restrict sx, const REAL *restrict sy,
                                           const REAL *restrict sz, const REAL *restrict q,
                                           int64_t n, const REAL *yi, int64_t skip, REAL eps2,
                                           REAL logw, REAL *out)
{
    (void)skip, (void)eps2, (void)logw;
    REAL phi = 0, gx = 0, gy = 0, gz = 0;
#pragma omp simd reduction(+ : phi, gx, gy, gz)
    for (int64_t j = 0; j < n; j++) {
        REAL dx = yi[0] - sx[j], dy = yi[1] - sy[j], dz = yi[2] - sz[j];
        const PAIR(radial) w = PAIR(laplace)(dx * dx + dy * dy + dz * dz, q[j]);
        phi += w.pot;
        gx -= w.g * dx;
        gy -= w.g * dy;
        gz -= w.g * dz;
    }
    out[0] = phi, out[1] = gx, out[2] = gy, out[3] = gz;
}

/* plummer: phi = q / sqrt(r^2 + s^2), grad_y = -q (y - x) / (r^2 + s^2)^(3/2) */
static FMK_TARGET_CLONES void P2P(plummer)(const REAL *restrict sx, const REAL *restrict sy,
                                           const REAL *restrict sz, const REAL *restrict q,
                                           int64_t n, const REAL *yi, int64_t skip, REAL eps2,
                                           REAL logw, REAL *out)
{
    (void)logw;
    REAL phi = 0, gx = 0, gy = 0, gz = 0;
#pragma omp simd reduction(+ : phi, gx, gy, gz)
    for (int64_t j = 0; j < n; j++) {
        REAL dx = yi[0] - sx[j], dy = yi[1] - sy[j], dz = yi[2] - sz[j];
        const PAIR(radial) w =
            PAIR(plummer)(dx * dx + dy * dy + dz * dz, j == skip ? 0 : q[j], eps2);
        phi += w.pot;
        gx -= w.g * dx;
        gy -= w.g * dy;
        gz -= w.g * dz;
    }
    out[0] = phi, out[1] = gx, out[2] = gy, out[3] = gz;
}

/* regularized (van Rees et al. eq. 7 without -1/(4 pi)): with d = r^2 + s^2,
 * phi = q (r^2 + 1.5 s^2) / d^(3/2), grad_y = -q (y - x) (r^2 + 2.5 s^2) / d^(5/2) */
static FMK_TARGET_CLONES void P2P(regularized)(const REAL *restrict sx, const REAL *restrict sy,
                                               const REAL *restrict sz, const REAL *restrict q,
                                               int64_t n, const REAL *yi, int64_t skip, REAL eps2,
                                               REAL logw, REAL *out)
{
    (void)logw;
    REAL phi = 0, gx = 0, gy = 0, gz = 0;
    const REAL e15 = (REAL)1.5 * eps2, e25 = (REAL)2.5 * eps2;
#pragma omp simd reduction(+ : phi, gx, gy, gz)
    for (int64_t j = 0; j < n; j++) {
        REAL dx = yi[0] - sx[j], dy = yi[1] - sy[j], dz = yi[2] - sz[j];
        const PAIR(radial) w =
            PAIR(regularized)(dx * dx + dy * dy + dz * dz, j == skip ? 0 : q[j], eps2, e15, e25);
        phi += w.pot;
        gx -= w.g * dx;
        gy -= w.g * dy;
        gz -= w.g * dz;
    }
    out[0] = phi, out[1] = gx, out[2] = gy, out[3] = gz;
}

/* log2d: phi = q log r, grad_y = q (y - x) / r^2; logw restores the frame's scale. */
static FMK_TARGET_CLONES void P2P(log2d)(const REAL *restrict sx, const REAL *restrict sy,
                                         const REAL *restrict sz, const REAL *restrict q, int64_t n,
                                         const REAL *yi, int64_t skip, REAL eps2, REAL logw,
                                         REAL *out)
{
    (void)sz, (void)skip, (void)eps2;
    REAL phi = 0, gx = 0, gy = 0;
#pragma omp simd reduction(+ : phi, gx, gy)
    for (int64_t j = 0; j < n; j++) {
        REAL dx = yi[0] - sx[j], dy = yi[1] - sy[j];
        const PAIR(radial) w = PAIR(log2d)(dx * dx + dy * dy, q[j], logw);
        phi += w.pot;
        gx -= w.g * dx;
        gy -= w.g * dy;
    }
    out[0] = phi, out[1] = gx, out[2] = gy, out[3] = 0;
}

/* cauchy2d (Goude & Engblom eq. 5.1): with w = z_j - z = a + ib and Gamma = gr + i gi,
 * phi = Gamma / w, dphi/dz = Gamma / w^2. q holds gr, sz holds gi. out: phi (re, im),
 * dphi/dz (re, im). */
static FMK_TARGET_CLONES void P2P(cauchy2d)(const REAL *restrict sx, const REAL *restrict sy,
                                            const REAL *restrict gi, const REAL *restrict gr,
                                            int64_t n, const REAL *yi, int64_t skip, REAL eps2,
                                            REAL logw, REAL *out)
{
    (void)skip, (void)eps2, (void)logw;
    REAL pr = 0, pi = 0, dr = 0, di = 0;
#pragma omp simd reduction(+ : pr, pi, dr, di)
    for (int64_t j = 0; j < n; j++) {
        const PAIR(complex) c = PAIR(cauchy2d)(sx[j] - yi[0], sy[j] - yi[1], gr[j], gi[j]);
        pr += c.pr;
        pi += c.pi;
        dr += c.dr;
        di += c.di;
    }
    out[0] = pr, out[1] = pi, out[2] = dr, out[3] = di;
}

typedef void (*P2P(tile_fn))(const REAL *, const REAL *, const REAL *, const REAL *, int64_t,
                             const REAL *, int64_t, REAL, REAL, REAL *);

static P2P(tile_fn) P2P(pick)(fmk_kernel k)
{
    switch (k) {
    case FMK_KERNEL_LAPLACE: return P2P(laplace);
    case FMK_KERNEL_PLUMMER: return P2P(plummer);
    case FMK_KERNEL_REGULARIZED: return P2P(regularized);
    case FMK_KERNEL_LOG2D: return P2P(log2d);
    case FMK_KERNEL_CAUCHY2D: return P2P(cauchy2d);
    }
    return NULL;
}

/* Sums all sources at targets [i0, i1) and adds the results (working units) into acc
 * (4 doubles per target). Sources are walked in tiles that stay in cache. */
static void P2P(block)(const fmk_plan *plan, const REAL *const src[4], const REAL *trg, int64_t i0,
                       int64_t i1, double *acc)
{
    const int64_t tile = 2048;
    const P2P(tile_fn) fn = P2P(pick)(plan->kernel);
    const REAL eps2 = (REAL)(plan->frame.softening * plan->frame.softening);
    const REAL logw = (REAL)plan->frame.log_width;
    const int dim = plan->dim;
    /* target i is source base + i (targets = sources, or a slice of them: core/hooks.h) */
    const int64_t base = plan->self_slice ? plan->self_base : 0;
    for (int64_t j0 = 0; j0 < plan->n_sources; j0 += tile) {
        int64_t nj = plan->n_sources - j0 < tile ? plan->n_sources - j0 : tile;
        for (int64_t i = i0; i < i1; i++) {
            REAL out[4];
            int64_t skip = (plan->self || plan->self_slice) && i + base >= j0 && i + base < j0 + nj
                               ? i + base - j0
                               : -1;
            fn(src[0] + j0, src[1] + j0, src[2] + j0, src[3] + j0, nj, trg + dim * i, skip, eps2,
               logw, out);
            double *a = acc + 4 * (i - i0);
            a[0] += out[0], a[1] += out[1], a[2] += out[2], a[3] += out[3];
        }
    }
}

#undef PAIR
#undef RSQRT
#undef REAL_ONE
