/* plans.c -- the treecode's destination bricks and their logical plans (paper section 3).
 *
 * Bricks. Each box is cut into bricks of at most 8 points per axis: an axis of n points into
 * ceil(n / 8) near-equal pieces (sizes differ by at most one), so a block of 16^3 points is 8
 * bricks of 8^3 and a uniform grid of 20 points per axis has pieces of 7, 7, 6.
 *
 * Plans. For each brick the tree is walked from the root. A node of radius a whose centre is at
 * distance r from the brick's bounding box (the nearest point of the brick's lattice box; 0
 * inside) is taken by its multipole when
 *     a < theta r          (paper: a / r < theta; eq. 6 bounds the truncation by (a / r)^(p+1))
 *     r - a >= r_kernel    (every source of the node is at least r_kernel from every point:
 *                           the far field is the multipole of 1/r, and the regularized kernel
 *                           differs from 1/r by 3/8 (e/d)^4 relative, 15/8 (e/d)^4 in the
 *                           gradient, at distance d: r_kernel keeps that within a small
 *                           fraction of eps; treecode.c, kernel_distance)
 * else opened; a leaf that is not taken goes to the direct list as its source range. A node of
 * at most direct_max sources is summed directly whatever its distance (its range is cheaper
 * than a multipole evaluation, and exact). Nodes are visited depth first with the children in
 * key order, so the direct ranges come in increasing order and adjacent ones merge.
 *
 * The lists are made in two passes over the bricks, counting then filling (each brick walks
 * the tree twice), so that they land in one array per kind in brick order (CSR). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "poisson/treecode/treecode.h"

enum { BRICK_SIDE = 8, STACK = 8 * (FMK_TC_MAX_LEVELS + 1) };

void fmk_tc_plans_free(fmk_tc_plans *p)
{
    free(p->bricks);
    free(p->direct_start);
    free(p->direct_range);
    free(p->far_start);
    free(p->far_node);
    memset(p, 0, sizeof *p);
}

int64_t fmk_tc_plans_bytes(const fmk_tc_plans *p)
{
    int64_t b = (int64_t)sizeof(fmk_tc_brick) * p->n_bricks;
    if (p->direct_start)
        b += (int64_t)sizeof(int64_t) * (2 * (p->n_bricks + 1) + 2 * p->direct_start[p->n_bricks]);
    if (p->far_start)
        b += (int64_t)sizeof(int32_t) * p->far_start[p->n_bricks];
    return b;
}

fmk_status fmk_tc_bricks_make(fmk_poisson *s, fmk_tc_plans *p)
{
    fmk_tc_plans_free(p);
    /* the boxes whose points are wanted: the chosen blocks (set_targets), or all */
    const int64_t n_boxes = s->targets ? s->n_targets : s->n_boxes;
#define BOX(k) (s->targets ? s->targets[k] : (k))
    int64_t count = 0;
    for (int64_t k = 0; k < n_boxes; k++) {
        const struct fmk_poisson_box *b = &s->boxes[BOX(k)];
        int64_t c = 1;
        for (int a = 0; a < 3; a++)
            c *= (b->n[a] + BRICK_SIDE - 1) / BRICK_SIDE;
        count += c;
    }
    p->bricks = malloc(sizeof(fmk_tc_brick) * (size_t)(count > 0 ? count : 1));
    if (!p->bricks)
        return fmk_solver_fail(s, FMK_ERR_NOMEM,
                               "method treecode: out of host memory for %lld bricks",
                               (long long)count);
    int64_t m = 0;
    for (int64_t kk = 0; kk < n_boxes; kk++) {
        const int64_t k = BOX(kk);
        const struct fmk_poisson_box *b = &s->boxes[k];
        int64_t pieces[3];
        for (int a = 0; a < 3; a++)
            pieces[a] = (b->n[a] + BRICK_SIDE - 1) / BRICK_SIDE;
        for (int64_t pz = 0; pz < pieces[2]; pz++)
            for (int64_t py = 0; py < pieces[1]; py++)
                for (int64_t px = 0; px < pieces[0]; px++) {
                    const int64_t idx[3] = {px, py, pz};
                    int64_t start[3];
                    fmk_tc_brick *br = &p->bricks[m++];
                    for (int a = 0; a < 3; a++) {
                        start[a] = b->n[a] * idx[a] / pieces[a];
                        br->n[a] = (int32_t)(b->n[a] * (idx[a] + 1) / pieces[a] - start[a]);
                        br->corner[a] = b->corner[a] + b->h * (double)start[a];
                    }
                    br->h = b->h;
                    br->box = (int32_t)k;
                    br->stride[0] = b->n[0];
                    br->stride[1] = (int64_t)b->n[0] * b->n[1];
                    br->first =
                        b->offset + start[0] + br->stride[0] * start[1] + br->stride[1] * start[2];
                }
    }
#undef BOX
    p->n_bricks = count;
    return FMK_OK;
}

/* One brick's walk. With range and far NULL it only counts: *n_range (after merging) and
 * *n_far; else it fills them. *n_direct: the sources in its direct ranges. */
static void walk(const fmk_tc_tree *t, const fmk_tc_brick *b, const fmk_tc_params *prm,
                 int64_t *range, int32_t *far, int64_t *n_range, int64_t *n_far, int64_t *n_direct)
{
    double lo[3], hi[3];
    for (int k = 0; k < 3; k++)
        lo[k] = b->corner[k], hi[k] = b->corner[k] + b->h * (double)(b->n[k] - 1);
    int32_t stack[STACK];
    int top = 0;
    stack[top++] = 0;
    int64_t nr = 0, nf = 0, nd = 0, last_end = -1;
    while (top > 0) {
        const int32_t i = stack[--top];
        const int64_t begin = t->begin[i], end = t->end[i];
        if (end - begin > prm->direct_max) {
            const double *c = t->center + 3 * i;
            double r2 = 0;
            for (int k = 0; k < 3; k++) {
                const double d = c[k] < lo[k] ? lo[k] - c[k] : (c[k] > hi[k] ? c[k] - hi[k] : 0);
                r2 += d * d;
            }
            const double r = sqrt(r2), a = t->radius[i];
            if (a < prm->theta * r && r - a >= prm->r_kernel) {
                if (far)
                    far[nf] = i;
                nf++;
                continue;
            }
            if (t->child[i] >= 0) {
                for (int c = t->n_child[i] - 1; c >= 0; c--)
                    stack[top++] = t->child[i] + c;
                continue;
            }
        }
        nd += end - begin;
        if (begin == last_end) { /* adjacent to the last range: merged */
            if (range)
                range[2 * (nr - 1) + 1] = end;
        } else {
            if (range)
                range[2 * nr] = begin, range[2 * nr + 1] = end;
            nr++;
        }
        last_end = end;
    }
    *n_range = nr, *n_far = nf, *n_direct = nd;
}

fmk_status fmk_tc_plans_build(fmk_poisson *s, const fmk_tc_tree *t, const fmk_tc_params *prm,
                              fmk_tc_plans *p)
{
    const int64_t nb = p->n_bricks;
    free(p->direct_start), free(p->direct_range), free(p->far_start), free(p->far_node);
    p->direct_range = NULL, p->far_node = NULL;
    p->direct_start = malloc(sizeof(int64_t) * (size_t)(nb + 1));
    p->far_start = malloc(sizeof(int64_t) * (size_t)(nb + 1));
    if (!p->direct_start || !p->far_start)
        goto nomem;
#pragma omp parallel for schedule(dynamic, 4) num_threads(s->threads)
    for (int64_t k = 0; k < nb; k++) {
        int64_t nd;
        walk(t, &p->bricks[k], prm, NULL, NULL, &p->direct_start[k + 1], &p->far_start[k + 1], &nd);
    }
    p->direct_start[0] = p->far_start[0] = 0;
    for (int64_t k = 0; k < nb; k++) {
        p->direct_start[k + 1] += p->direct_start[k];
        p->far_start[k + 1] += p->far_start[k];
    }
    if (fmk_solver_poll(s))
        return fmk_solver_fail(s, FMK_ERR_INTERRUPTED, "interrupted");
    p->direct_range = malloc(sizeof(int64_t) * 2 * (size_t)(p->direct_start[nb] + 1));
    p->far_node = malloc(sizeof(int32_t) * (size_t)(p->far_start[nb] + 1));
    if (!p->direct_range || !p->far_node)
        goto nomem;
    double direct_pairs = 0, far_pairs = 0;
#pragma omp parallel for schedule(dynamic, 4) num_threads(s->threads)                          \
    reduction(+ : direct_pairs, far_pairs)
    for (int64_t k = 0; k < nb; k++) {
        const fmk_tc_brick *b = &p->bricks[k];
        int64_t nr, nf, nd;
        walk(t, b, prm, p->direct_range + 2 * p->direct_start[k], p->far_node + p->far_start[k],
             &nr, &nf, &nd);
        const double points = (double)b->n[0] * b->n[1] * b->n[2];
        direct_pairs += points * (double)nd;
        far_pairs += points * (double)nf;
    }
    p->direct_pairs = direct_pairs;
    p->far_pairs = far_pairs;
    return FMK_OK;
nomem:
    free(p->direct_start), free(p->direct_range), free(p->far_start), free(p->far_node);
    p->direct_start = p->direct_range = p->far_start = NULL;
    p->far_node = NULL;
    return fmk_solver_fail(s, FMK_ERR_NOMEM,
                           "method treecode: out of host memory for the logical plans");
}
