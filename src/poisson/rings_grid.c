/* rings_grid.c -- the two-level block grid of the test problem (fmk_poisson_rings_grid;
 * docs/poisson.md, "The two-level rings grid").
 *
 * The unit cube at effective resolution n (fine spacing h = 1/n) is cut into regions of
 * (2b)^3 fine cells, each one coarse block of b^3 cells of spacing 2h (level 0) or 8 fine
 * blocks (level 1). The criterion is the one of the paper's interpolating wavelets (MRAG,
 * section 2): the detail of the coarse level. The coarse level samples omega at its cell
 * centres; I, cubic interpolation from them, predicts omega at the fine cell centres; the detail
 * of a fine point is omega there minus the prediction (3-vectors, measured by their Euclidean
 * norm). A region is refined when its largest detail exceeds refine * max |omega| (over every
 * fine point of the cube); refine = 0 refines wherever omega or its detail is nonzero.
 *
 * The interpolation, per axis: in coarse-cell units (coarse centre C at C) the fine centre F
 * sits at t = F/2 - 1/4, a quarter cell from the centre of coarse cell floor(F/2). Its stencil
 * is the 4 coarse centres s0 .. s0 + 3, s0 = floor(t) - 1 (two on each side of t), moved inside
 * [0, n/2) near the edge of the cube (one-sided there), weighted by the Lagrange cubic at
 * t - s0: inside, (-5, 35, 105, -7)/128 and (-7, 105, 35, -5)/128 (exact for cubics, so the
 * detail falls as (2h)^4 where omega is smooth). In 3D the tensor product, applied axis by axis.
 *
 * Cost: the rings' support (distance < R from their circles) reaches few regions; a region
 * whose cube, widened by the stencil's halo of 2 coarse cells, misses it has omega = 0 at every
 * point that matters and is neither evaluated nor refined. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "poisson/poisson.h"
#include "poisson/rings.h"

#define HALO 2 /* coarse cells of the stencils beyond a region, per side */

/* One axis of a region: fine point f's stencil is coarse points start[f] .. start[f] + 3 of
 * the region's coarse array (which begins HALO cells before the region), weights w[f]. */
typedef struct {
    int32_t start[128]; /* 2b <= 128 fine points per axis */
    double w[128][4];
} stencil;

/* The stencils of the 2b fine points of the region whose first coarse cell is C0 (nc coarse
 * cells on the axis). */
static void axis_stencil(int64_t C0, int32_t b, int64_t nc, stencil *st)
{
    for (int32_t f = 0; f < 2 * b; f++) {
        const double t = 0.5 * (double)(2 * C0 + f) - 0.25;
        int64_t s0 = (int64_t)floor(t) - 1;
        s0 = s0 < 0 ? 0 : s0 > nc - 4 ? nc - 4 : s0;
        const double x = t - (double)s0;
        for (int q = 0; q < 4; q++) {
            double w = 1;
            for (int r = 0; r < 4; r++)
                if (r != q)
                    w *= (x - r) / (q - r);
            st->w[f][q] = w;
        }
        st->start[f] = (int32_t)(s0 - (C0 - HALO));
    }
}

static void rings_omega(const fmk_ring rings[2], const double x[3], double w[3])
{
    w[0] = w[1] = w[2] = 0;
    fmk_rings_add(&rings[0], x, w, NULL, NULL);
    fmk_rings_add(&rings[1], x, w, NULL, NULL);
}

/* 1 when the rings' support may reach the cube of centre c and half side half. */
static int near_rings(const fmk_ring rings[2], const double c[3], double half)
{
    int near = 0;
    for (int k = 0; k < 2; k++) {
        double d[3], rv[3];
        for (int a = 0; a < 3; a++)
            d[a] = c[a] - rings[k].center[a];
        const double *e = rings[k].axis;
        const double z = d[0] * e[0] + d[1] * e[1] + d[2] * e[2];
        for (int a = 0; a < 3; a++)
            rv[a] = d[a] - z * e[a];
        const double r = sqrt(rv[0] * rv[0] + rv[1] * rv[1] + rv[2] * rv[2]);
        const double dist = sqrt((r - rings[k].radius) * (r - rings[k].radius) + z * z);
        near |= dist < rings[k].radius + half * sqrt(3.0);
    }
    return near;
}

typedef struct {
    fmk_ring rings[2];
    int32_t b;
    int64_t nc; /* coarse cells per axis, n/2 */
    double h;   /* the fine spacing, 1/n */
} rings_level;

/* Doubles of work one region needs: its coarse values (3 components), one pass along x, the
 * passes along y (3 components). */
static int64_t work_size(int32_t b)
{
    const int64_t W = b + 2 * HALO, F = 2 * (int64_t)b;
    return 3 * W * W * W + W * W * F + 3 * W * F * F;
}

/* The largest detail (*detail) and |omega| (*peak) over the fine points of the region whose
 * first coarse cell is b B; work holds work_size(b) doubles. */
static void region_detail(const rings_level *g, const int64_t B[3], double *work, double *detail,
                          double *peak)
{
    const int64_t b = g->b, W = b + 2 * HALO, F = 2 * b;
    const double h = g->h;
    int64_t C0[3];
    double c[3];
    for (int a = 0; a < 3; a++) {
        C0[a] = b * B[a];
        c[a] = 2 * h * (double)C0[a] + h * (double)b;
    }
    *detail = *peak = 0;
    if (!near_rings(g->rings, c, h * (double)b + 2 * HALO * h + h))
        return;
    stencil s[3];
    for (int a = 0; a < 3; a++)
        axis_stencil(C0[a], g->b, g->nc, &s[a]);
    double *co = work, *px = co + 3 * W * W * W, *py = px + W * W * F;
    for (int64_t k = 0; k < W * W * W; k++) { /* coarse centres 2h (C + 1/2) */
        const int64_t C[3] = {C0[0] - HALO + k % W, C0[1] - HALO + k / W % W,
                              C0[2] - HALO + k / (W * W)};
        double x[3];
        int inside = 1;
        for (int a = 0; a < 3; a++) {
            inside &= C[a] >= 0 && C[a] < g->nc;
            x[a] = 2 * h * ((double)C[a] + 0.5);
        }
        if (inside)
            rings_omega(g->rings, x, co + 3 * k);
        else
            co[3 * k] = co[3 * k + 1] = co[3 * k + 2] = 0; /* outside every stencil */
    }
    for (int a = 0; a < 3; a++) {
        for (int64_t k = 0; k < W * W; k++) /* along x: (z, y) coarse, x fine */
            for (int64_t f = 0; f < F; f++) {
                const double *v = co + 3 * (k * W + s[0].start[f]) + a, *w = s[0].w[f];
                px[k * F + f] = w[0] * v[0] + w[1] * v[3] + w[2] * v[6] + w[3] * v[9];
            }
        for (int64_t z = 0; z < W; z++) /* along y: z coarse, (y, x) fine */
            for (int64_t f = 0; f < F; f++) {
                const double *v = px + (z * W + s[1].start[f]) * F, *w = s[1].w[f];
                double *out = py + ((a * W + z) * F + f) * F;
                for (int64_t i = 0; i < F; i++)
                    out[i] =
                        w[0] * v[i] + w[1] * v[F + i] + w[2] * v[2 * F + i] + w[3] * v[3 * F + i];
            }
    }
    double dmax = 0, pmax = 0;
    for (int64_t m = 0; m < F; m++) /* along z, against omega at the fine centres */
        for (int64_t j = 0; j < F; j++)
            for (int64_t i = 0; i < F; i++) {
                const double x[3] = {h * ((double)(2 * C0[0] + i) + 0.5),
                                     h * ((double)(2 * C0[1] + j) + 0.5),
                                     h * ((double)(2 * C0[2] + m) + 0.5)};
                double w[3], d2 = 0;
                rings_omega(g->rings, x, w);
                for (int a = 0; a < 3; a++) {
                    const double *v = py + ((a * W + s[2].start[m]) * F + j) * F + i;
                    const double *wz = s[2].w[m];
                    const double pred = wz[0] * v[0] + wz[1] * v[F * F] + wz[2] * v[2 * F * F] +
                                        wz[3] * v[3 * F * F];
                    d2 += (w[a] - pred) * (w[a] - pred);
                }
                const double p = sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
                dmax = d2 > dmax ? d2 : dmax;
                pmax = p > pmax ? p : pmax;
            }
    *detail = sqrt(dmax);
    *peak = pmax;
}

/* The grid's blocks: region k (x fastest) as one coarse block, or 8 fine ones where refined. */
static fmk_status make_grid(fmk_grid **grid, int32_t n, int32_t b, int64_t nb,
                            const unsigned char *refined)
{
    const int64_t nblocks = nb * nb * nb;
    int64_t m = 0;
    for (int64_t k = 0; k < nblocks; k++)
        m += refined[k] ? 8 : 1;
    int32_t *levels = malloc(sizeof(int32_t) * (size_t)m);
    int64_t *index = malloc(sizeof(int64_t) * 3 * (size_t)m);
    fmk_status st = FMK_OK;
    if (!levels || !index)
        st = fmk_solver_fail(NULL, FMK_ERR_NOMEM, "fmk_poisson_rings_grid: out of host memory");
    for (int64_t k = 0, q = 0; k < nblocks && st == FMK_OK; k++) {
        const int64_t B[3] = {k % nb, k / nb % nb, k / (nb * nb)};
        for (int c = 0; c < (refined[k] ? 8 : 1); c++, q++) {
            levels[q] = refined[k] ? 1 : 0;
            for (int a = 0; a < 3; a++)
                index[3 * q + a] = refined[k] ? 2 * B[a] + (c >> a & 1) : B[a];
        }
    }
    if (st == FMK_OK)
        st = fmk_grid_create(grid, b, 2.0 / n, NULL);
    if (st == FMK_OK && (st = fmk_grid_add_blocks_index(*grid, m, levels, index)) != FMK_OK) {
        fmk_grid_destroy(*grid);
        *grid = NULL;
    }
    free(levels);
    free(index);
    return st;
}

fmk_status fmk_poisson_rings_grid(fmk_grid **grid, int32_t n, int32_t b, double refine)
{
    if (!grid)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "fmk_poisson_rings_grid: grid is NULL");
    *grid = NULL;
    if (b < 4 || b > 64 || b % 2 || n < 2 * b || n % (2 * b) || n > (1 << 14))
        return fmk_solver_fail(NULL, FMK_ERR_ARG,
                               "resolution %d, block size %d: the resolution must be a multiple "
                               "of 2 b up to 2^14, b even in 4..64",
                               (int)n, (int)b);
    if (!(refine >= 0 && refine < 1))
        return fmk_solver_fail(NULL, FMK_ERR_ARG, "refine = %g; use 0 <= refine < 1", refine);
    rings_level g;
    fmk_rings_paper(g.rings);
    g.b = b;
    g.nc = n / 2;
    g.h = 1.0 / n;
    const int64_t nb = n / (2 * b), nblocks = nb * nb * nb, ws = work_size(b);
    const int threads = fmk_opts_resolve_threads(0);
    double *detail = malloc(sizeof(double) * (size_t)nblocks);
    double *peak = malloc(sizeof(double) * (size_t)nblocks);
    unsigned char *refined = malloc((size_t)nblocks);
    double *work = malloc(sizeof(double) * (size_t)(ws * threads));
    fmk_status st = FMK_OK;
    if (!detail || !peak || !refined || !work)
        st = fmk_solver_fail(NULL, FMK_ERR_NOMEM, "fmk_poisson_rings_grid: out of host memory");
    if (st == FMK_OK) {
#pragma omp parallel for schedule(dynamic) num_threads(threads)
        for (int64_t k = 0; k < nblocks; k++) {
            const int64_t B[3] = {k % nb, k / nb % nb, k / (nb * nb)};
            region_detail(&g, B, work + ws * fmk_thread_num(), &detail[k], &peak[k]);
        }
        double top = 0;
        for (int64_t k = 0; k < nblocks; k++)
            top = peak[k] > top ? peak[k] : top;
        for (int64_t k = 0; k < nblocks; k++)
            refined[k] = refine > 0 ? detail[k] > refine * top : detail[k] > 0 || peak[k] > 0;
        st = make_grid(grid, n, b, nb, refined);
    }
    free(detail);
    free(peak);
    free(refined);
    free(work);
    return st;
}
