/* fmm3d_lists.c -- the U, V, W, X interaction lists of the adaptive 3D FMM on a tree3d octree
 * (definitions in fmm3d.h), and the choice of order and leaf size from eps.
 *
 * Cubes have power-of-two sides and dyadic centres in [1, 2], so the adjacency test
 * |c_a - c_b| <= (s_a + s_b) / 2 on every axis is exact in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fmm3d/fmm3d.h"

/* At most 27 boxes in a neighbour set: they tile the 3x3x3 block of b's level without overlap. */
#define NBR_MAX 27
/* Depth-first stack of the W/U descent: 7 siblings pending per level plus 8 children. */
#define STACK_MAX 256

static int touches(const fmk_fmm3d_lists *l, int64_t a, int64_t b)
{
    const double h = 0.5 * (l->side[a] + l->side[b]);
    for (int k = 0; k < 3; k++)
        if (fabs(l->center[3 * a + k] - l->center[3 * b + k]) > h)
            return 0;
    return 1;
}

/* N(b) from N(parent(b)): the children of non-leaf members and the leaf members that touch b. */
static int neighbours(const fmk_tree3d *t, const fmk_fmm3d_lists *l, const int32_t *nbr,
                      const int8_t *n_nbr, int64_t b, int32_t *out)
{
    if (t->parent[b] < 0) {
        out[0] = (int32_t)b;
        return 1;
    }
    const int64_t P = t->parent[b];
    int n = 0;
    for (int i = 0; i < n_nbr[P]; i++) {
        const int32_t c = nbr[NBR_MAX * P + i];
        if (t->more[c] < 0) {
            if (touches(l, c, b))
                out[n++] = c;
            continue;
        }
        for (int32_t d = t->more[c]; d < t->more[c] + t->n_children[c]; d++)
            if (touches(l, d, b))
                out[n++] = d;
    }
    return n;
}

/* The lists of node b; each out array may be NULL (count only). Returns the counts in cnt. */
static void node_lists(const fmk_tree3d *t, const fmk_fmm3d_lists *l, const int32_t *nbr,
                       const int8_t *n_nbr, const int64_t *n_src, const int64_t *n_trg, int64_t b,
                       int32_t *u, int32_t *v, int16_t *vd, int32_t *w, int32_t *x, int64_t cnt[4])
{
    cnt[0] = cnt[1] = cnt[2] = cnt[3] = 0;
    if (n_trg[b] == 0)
        return;
    const int64_t P = t->parent[b];
    if (P >= 0)
        for (int i = 0; i < n_nbr[P]; i++) {
            const int32_t c = nbr[NBR_MAX * P + i];
            if (t->more[c] < 0) {
                if (!touches(l, c, b) && n_src[c] > 0) { /* X */
                    if (x)
                        x[cnt[3]] = c;
                    cnt[3]++;
                }
                continue;
            }
            for (int32_t d = t->more[c]; d < t->more[c] + t->n_children[c]; d++) {
                if (n_src[d] == 0 || touches(l, d, b))
                    continue;
                if (v) { /* V */
                    int o[3];
                    for (int k = 0; k < 3; k++)
                        o[k] =
                            (int)lround((l->center[3 * b + k] - l->center[3 * d + k]) / l->side[b]);
                    v[cnt[1]] = d;
                    vd[cnt[1]] = (int16_t)FMK_FMM3D_DIR(o[0], o[1], o[2]);
                }
                cnt[1]++;
            }
        }
    if (t->more[b] >= 0)
        return;
    /* leaf: U and W */
    int32_t stack[STACK_MAX];
    int top = 0;
    for (int i = 0; i < n_nbr[b]; i++) {
        const int32_t c = nbr[NBR_MAX * b + i];
        if (t->more[c] < 0) {
            if (n_src[c] > 0) {
                if (u)
                    u[cnt[0]] = c;
                cnt[0]++;
            }
            continue;
        }
        stack[top++] = c;
        while (top > 0) {
            const int32_t e = stack[--top];
            for (int32_t d = t->more[e]; d < t->more[e] + t->n_children[e]; d++) {
                if (n_src[d] == 0)
                    continue;
                if (!touches(l, d, b)) { /* W */
                    if (w)
                        w[cnt[2]] = d;
                    cnt[2]++;
                } else if (t->more[d] < 0) {
                    if (u)
                        u[cnt[0]] = d;
                    cnt[0]++;
                } else {
                    stack[top++] = d;
                }
            }
        }
    }
}

void fmk_fmm3d_lists_free(fmk_fmm3d_lists *l)
{
    if (!l)
        return;
    free(l->center), free(l->side);
    free(l->u_begin), free(l->v_begin), free(l->w_begin), free(l->x_begin);
    free(l->u), free(l->v), free(l->w), free(l->x), free(l->v_dir);
    memset(l, 0, sizeof *l);
}

int64_t fmk_fmm3d_lists_bytes(const fmk_fmm3d_lists *l)
{
    return l->n_nodes * (32 + 4 * 8 + 4) + 4 * (l->n_u + l->n_w + l->n_x) + 6 * l->n_v;
}

int64_t fmk_fmm3d_lists_bytes_for(int64_t n_nodes)
{
    /* a uniform tree: about 27 U, 189 V and a few W, X entries per box, plus the build's
     * neighbour sets (28 bytes per node) */
    return fmk_bytes_mul(n_nodes, (32 + 4 * 8 + 4 + 28) + (4 * 27 + 6 * 189 + 4 * 16));
}

static int64_t *scan(const int64_t *count, int64_t n, int64_t *total)
{
    int64_t *b = malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!b)
        return NULL;
    b[0] = 0;
    for (int64_t i = 0; i < n; i++)
        b[i + 1] = b[i] + count[i];
    *total = b[n];
    return b;
}

int fmk_fmm3d_lists_build(const fmk_tree3d *t, const int64_t *n_src, const int64_t *n_trg,
                          fmk_fmm3d_lists *l, int threads)
{
    memset(l, 0, sizeof *l);
    const int64_t n = t->n_nodes;
    l->n_nodes = n;
    l->center = malloc(sizeof(double) * 3 * (size_t)(n > 0 ? n : 1));
    l->side = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    int32_t *nbr = malloc(sizeof(int32_t) * NBR_MAX * (size_t)(n > 0 ? n : 1));
    int8_t *n_nbr = malloc((size_t)(n > 0 ? n : 1));
    int64_t *cnt = malloc(sizeof(int64_t) * 4 * (size_t)(n > 0 ? n : 1));
    if (!l->center || !l->side || !nbr || !n_nbr || !cnt)
        goto fail;
    for (int64_t i = 0; i < n; i++)
        fmk_tree3d_node_cube(t, i, l->center + 3 * i, &l->side[i]);
    for (int32_t L = 0; L < t->levels; L++) {
        const int64_t a = t->level_begin[L], e = t->level_begin[L + 1];
#pragma omp parallel for schedule(dynamic, 64) num_threads(threads) if (e - a > 256)
        for (int64_t b = a; b < e; b++)
            n_nbr[b] = (int8_t)neighbours(t, l, nbr, n_nbr, b, nbr + NBR_MAX * b);
    }
#pragma omp parallel for schedule(dynamic, 64) num_threads(threads) if (n > 256)
    for (int64_t b = 0; b < n; b++)
        node_lists(t, l, nbr, n_nbr, n_src, n_trg, b, NULL, NULL, NULL, NULL, NULL, cnt + 4 * b);
    {
        int64_t *c = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
        if (!c)
            goto fail;
        int64_t **begin[4] = {&l->u_begin, &l->v_begin, &l->w_begin, &l->x_begin};
        int64_t *total[4] = {&l->n_u, &l->n_v, &l->n_w, &l->n_x};
        for (int k = 0; k < 4; k++) {
            for (int64_t b = 0; b < n; b++)
                c[b] = cnt[4 * b + k];
            *begin[k] = scan(c, n, total[k]);
        }
        free(c);
    }
    if (!l->u_begin || !l->v_begin || !l->w_begin || !l->x_begin)
        goto fail;
    l->u = malloc(sizeof(int32_t) * (size_t)(l->n_u + 1));
    l->v = malloc(sizeof(int32_t) * (size_t)(l->n_v + 1));
    l->v_dir = malloc(sizeof(int16_t) * (size_t)(l->n_v + 1));
    l->w = malloc(sizeof(int32_t) * (size_t)(l->n_w + 1));
    l->x = malloc(sizeof(int32_t) * (size_t)(l->n_x + 1));
    if (!l->u || !l->v || !l->v_dir || !l->w || !l->x)
        goto fail;
#pragma omp parallel for schedule(dynamic, 64) num_threads(threads) if (n > 256)
    for (int64_t b = 0; b < n; b++) {
        int64_t c4[4];
        node_lists(t, l, nbr, n_nbr, n_src, n_trg, b, l->u + l->u_begin[b], l->v + l->v_begin[b],
                   l->v_dir + l->v_begin[b], l->w + l->w_begin[b], l->x + l->x_begin[b], c4);
    }
    for (int64_t e = 0; e < l->n_v; e++)
        l->dir_used[l->v_dir[e]] = 1;
    free(nbr), free(n_nbr), free(cnt);
    return 0;
fail:
    free(nbr), free(n_nbr), free(cnt);
    fmk_fmm3d_lists_free(l);
    return -1;
}

/* The worst V-list pair of docs/fmm3d.md, section 4 (two full boxes, centres two sides apart,
 * P2M -> M2L -> L2P): maximum relative errors of the potential and of the gradient at p = 4, 8,
 * ..., 40. The order is the smallest p, interpolated in log10 between these, with the potential
 * error <= eps / 2 and the gradient error <= 5 eps: a margin of two on the bounds (eps,
 * 10 eps), although the l2 error of a whole sum is well below its worst pair's. The rigorous
 * bound (fmk_fmm3d_order_for at rho = sqrt(3)/2) would ask p ~ 110 for eps = 1e-6. */
static const double worst_pot[10] = {1.3e-3,  1.1e-5,  4.3e-7,  1.6e-8,  1.4e-9,
                                     1.5e-10, 1.4e-11, 5.8e-13, 3.5e-14, 6.5e-15};
static const double worst_grad[10] = {2.7e-2, 4.0e-4,  6.0e-6,  5.2e-7,  6.6e-8,
                                      4.1e-9, 4.3e-10, 2.3e-11, 2.3e-12, 2.8e-13};

static double order_for_table(const double *err, double target)
{
    const double t = log10(target);
    if (t >= log10(err[0])) /* below p = 4: extrapolate with the first segment's slope */
        return 4 + (t - log10(err[0])) / ((log10(err[1]) - log10(err[0])) / 4);
    for (int i = 0; i < 9; i++) {
        const double a = log10(err[i]), b = log10(err[i + 1]);
        if (t >= b)
            return 4 * (i + 1) + 4 * (t - a) / (b - a);
    }
    return 40 + (t - log10(err[9])) / ((log10(err[9]) - log10(err[8])) / 4);
}

/* Full sums whose charges crowd into the corners of their boxes (the "corner cluster", uniform^3
 * per coordinate, 4000 points, leaves of 40, mixed-sign charges) converge more slowly than the
 * worst pair of full boxes: their relative l2 error fell from 9.6e-4 at p = 4 to 6.6e-13 at
 * p = 48, log10 ~ -3.02 - 0.208 (p - 4). The model of orders past the measured table below. */
static int order_model(double eps)
{
    const double p_pot = order_for_table(worst_pot, 0.5 * eps);
    const double p_grad = order_for_table(worst_grad, 5 * eps);
    const double p_corner = 4 + (-log10(0.5 * eps) - 3.02) / 0.208;
    double p = p_pot > p_grad ? p_pot : p_grad;
    p = ceil((p > p_corner ? p : p_corner) - 1e-9);
    return p < 2 ? 2 : p > 60 ? 60 : (int)p;
}

/* The smallest order whose measured relative l2 errors, worst of the five distributions of
 * docs/choosing.md (uniform cube, Plummer, sphere surface, corner cluster, nested clusters;
 * N = 10^5, mixed-sign charges, leaves of fmk_fmm3d_leaf_size_model; bench_accuracy orders)
 * and made monotone in p, are at most eps / 2 for the potential and 5 eps for the gradient: a
 * margin of two on what eps asks. The corner cluster sets every row; uniform and Plummer
 * points then land at eps / 8 .. eps / 60 (docs/fmm3d.md, "Order from eps"). Below the table,
 * order_model (more conservative). */
int fmk_fmm3d_order_from_eps(double eps)
{
    static const struct {
        double eps;
        int p;
    } table[] = {{1e-2, 3},  {3e-3, 4},  {1e-3, 6},  {3e-4, 7},  {1e-4, 8},  {3e-5, 9},
                 {1e-5, 11}, {3e-6, 13}, {1e-6, 15}, {3e-7, 18}, {1e-7, 20}, {3e-8, 23},
                 {1e-8, 26}, {3e-9, 29}, {1e-9, 31}, {3e-10, 34}};
    const int n = (int)(sizeof table / sizeof table[0]);
    for (int i = 0; i < n; i++)
        if (eps >= table[i].eps * (1 - 1e-9))
            return table[i].p;
    const int p = order_model(eps);
    return p > table[n - 1].p ? p : table[n - 1].p;
}

int32_t fmk_fmm3d_leaf_size_model(int order, double t_pair)
{
    /* Paper 003's cost model: per point A + B / s + C s, with B the translation work per box
     * (up to 189 M2L of order p, in blocks) and C = 27 t_pair the P2P work per point and per
     * point of a leaf; s_opt = sqrt(B / C). A box of n points costs B + C n^2 as a leaf and
     * 8 B + C n^2 / 8 split, so splitting pays when n > sqrt(8 B / C) = sqrt(8) s_opt: that is
     * the leaf size (the split threshold of the octree). Blocked M2L measured on one core
     * (docs/fmm3d.md section 4): t_m2l(p) = 0.252 (p + 1)^3 + 1.73 (p + 1)^2 ns. */
    const double q = (order > 0 ? order : 0) + 1.0;
    const double t_m2l = 0.252e-9 * q * q * q + 1.73e-9 * q * q;
    double s = t_pair > 0 ? sqrt(8 * 189 * t_m2l / (27 * t_pair)) : 4096;
    if (s < 32)
        s = 32;
    if (s > 4096)
        s = 4096;
    return (int32_t)s;
}

int32_t fmk_fmm3d_leaf_size_for(int order)
{
    return fmk_fmm3d_leaf_size_model(order, 1.60e-9); /* p = 6: 77, 12: 174, 20: 329, 35: 699 */
}
