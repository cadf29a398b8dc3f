/* grid.c -- block-structured grids (include/fmmkit_poisson.h, docs/poisson.md "The grid"): the
 * blocks' checks (alignment, overlap), what a grid holds, and its layout as the solver's boxes.
 *
 * Overlap. Every block is an octree-aligned cube: at the finest level F of the grid, block
 * (l, B) covers the finest-level block indices B 2^(F-l) + [0, 2^(F-l))^3. Aligned cubes either
 * nest or are disjoint, and a cube of side s whose corner is a multiple of s covers exactly the
 * Morton keys [key(corner), key(corner) + s^3). So the blocks overlap iff, sorted by the key of
 * their corners, some block's range reaches past the next block's key. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poisson/poisson.h"

struct fmk_grid {
    int32_t b;
    double h0, anchor[3];
    int64_t n, cap;
    int32_t *level; /* n */
    int64_t *index; /* 3 n */
    int32_t finest; /* the finest level of the blocks (0 when empty) */
};

fmk_status fmk_grid_create(fmk_grid **grid, int32_t b, double h0, const double anchor[3])
{
    if (!grid)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "fmk_grid_create: grid is NULL");
    *grid = NULL;
    if (b < 4 || b > 64 || b % 2)
        return fmk_solver_fail(NULL, FMK_ERR_ARG,
                               "block_size = %d; blocks have an even number of points per side, "
                               "4 to 64",
                               (int)b);
    if (!(isfinite(h0) && h0 > 0))
        return fmk_solver_fail(NULL, FMK_ERR_ARG,
                               "h0 = %g; the level-0 spacing must be finite and > 0", h0);
    const double zero[3] = {0, 0, 0};
    if (!anchor)
        anchor = zero;
    for (int k = 0; k < 3; k++)
        if (!isfinite(anchor[k]))
            return fmk_solver_fail(NULL, FMK_ERR_NONFINITE, "anchor[%d] = %g is not finite", k,
                                   anchor[k]);
    fmk_grid *g = calloc(1, sizeof *g);
    if (!g)
        return fmk_solver_fail(NULL, FMK_ERR_NOMEM, "fmk_grid_create: out of host memory");
    g->b = b;
    g->h0 = h0;
    memcpy(g->anchor, anchor, sizeof g->anchor);
    *grid = g;
    return FMK_OK;
}

void fmk_grid_destroy(fmk_grid *g)
{
    if (!g)
        return;
    free(g->level);
    free(g->index);
    free(g);
}

/* Morton key of a finest-level block index (20 bits per axis). */
static uint64_t key_of(const int64_t c[3])
{
    uint64_t key = 0;
    for (int bit = 19; bit >= 0; bit--)
        for (int a = 0; a < 3; a++)
            key = key << 1 | (uint64_t)(c[a] >> bit & 1);
    return key;
}

typedef struct {
    uint64_t key;
    uint64_t span; /* keys covered: s^3 */
    int64_t block; /* index in the grid after the add */
} cube;

static int by_key(const void *a, const void *b)
{
    const cube *x = a, *y = b;
    return x->key < y->key   ? -1
           : x->key > y->key ? 1
                             : (x->block > y->block) - (x->block < y->block);
}

/* Block k of (level, index) in words: its number in the grid, and in the call that adds it
 * (blocks first_new.. are the call's). */
static void block_name(char *buf, size_t size, const int32_t *level, const int64_t *index,
                       int64_t k, int64_t first_new)
{
    char call[64] = "";
    if (k >= first_new)
        snprintf(call, sizeof call, ", the call's block %lld", (long long)(k - first_new));
    snprintf(buf, size, "block %lld (level %d, index %lld %lld %lld%s)", (long long)k,
             (int)level[k], (long long)index[3 * k], (long long)index[3 * k + 1],
             (long long)index[3 * k + 2], call);
}

/* Checks blocks [0, n) of (level, index) for overlaps (blocks first_new.. are the ones being
 * added); FMK_OK or FMK_ERR_ARG naming a pair. */
static fmk_status check_overlap(const int32_t *level, const int64_t *index, int64_t n,
                                int64_t first_new)
{
    int32_t finest = 0;
    for (int64_t k = 0; k < n; k++)
        finest = level[k] > finest ? level[k] : finest;
    for (int64_t k = 0; k < n; k++)
        for (int a = 0; a < 3; a++)
            if (index[3 * k + a] << (finest - level[k]) >= FMK_GRID_INDEX_MAX)
                return fmk_solver_fail(NULL, FMK_ERR_ARG,
                                       "block %lld (level %d, index %lld on axis %d) lies beyond "
                                       "2^20 blocks of the finest level (%d) from the anchor",
                                       (long long)k, (int)level[k], (long long)index[3 * k + a], a,
                                       (int)finest);
    cube *c = malloc(sizeof *c * (size_t)n);
    if (!c)
        return fmk_solver_fail(NULL, FMK_ERR_NOMEM, "fmk_grid_add_blocks: out of host memory");
    for (int64_t k = 0; k < n; k++) {
        const int sh = finest - level[k];
        const int64_t f[3] = {index[3 * k] << sh, index[3 * k + 1] << sh, index[3 * k + 2] << sh};
        c[k].key = key_of(f);
        c[k].span = (uint64_t)1 << (3 * sh);
        c[k].block = k;
    }
    qsort(c, (size_t)n, sizeof *c, by_key);
    fmk_status st = FMK_OK;
    for (int64_t k = 0; k + 1 < n && st == FMK_OK; k++)
        if (c[k].key + c[k].span > c[k + 1].key) {
            const int64_t x = c[k].block, y = c[k + 1].block;
            char nx[160], ny[160];
            block_name(nx, sizeof nx, level, index, x > y ? x : y, first_new);
            block_name(ny, sizeof ny, level, index, x > y ? y : x, first_new);
            st = fmk_solver_fail(NULL, FMK_ERR_ARG, "%s overlaps %s", nx, ny);
        }
    free(c);
    return st;
}

fmk_status fmk_grid_add_blocks_index(fmk_grid *g, int64_t n, const int32_t *levels,
                                     const int64_t *index)
{
    if (!g || !levels || !index)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "fmk_grid_add_blocks: %s is NULL",
                               !g        ? "grid"
                               : !levels ? "levels"
                                         : "index");
    if (n < 1 || n > FMK_GRID_INDEX_MAX * 64)
        return fmk_solver_fail(NULL, FMK_ERR_ARG, "n = %lld; add 1 to 2^26 blocks at a time",
                               (long long)n);
    for (int64_t k = 0; k < n; k++) {
        if (levels[k] < 0 || levels[k] > FMK_GRID_MAX_LEVEL)
            return fmk_solver_fail(NULL, FMK_ERR_ARG, "levels[%lld] = %d; levels are 0 to %d",
                                   (long long)k, (int)levels[k], FMK_GRID_MAX_LEVEL);
        for (int a = 0; a < 3; a++)
            if (index[3 * k + a] < 0 || index[3 * k + a] >= FMK_GRID_INDEX_MAX)
                return fmk_solver_fail(NULL, FMK_ERR_ARG,
                                       "block %lld: index %lld on axis %d; block indices are 0 "
                                       "to 2^20 - 1 (blocks lie on the anchor's side)",
                                       (long long)k, (long long)index[3 * k + a], a);
    }
    const int64_t total = g->n + n;
    int32_t *lv = malloc(sizeof *lv * (size_t)total);
    int64_t *ix = malloc(sizeof *ix * 3 * (size_t)total);
    if (!lv || !ix) {
        free(lv);
        free(ix);
        return fmk_solver_fail(NULL, FMK_ERR_NOMEM, "fmk_grid_add_blocks: out of host memory");
    }
    if (g->n) {
        memcpy(lv, g->level, sizeof *lv * (size_t)g->n);
        memcpy(ix, g->index, sizeof *ix * 3 * (size_t)g->n);
    }
    memcpy(lv + g->n, levels, sizeof *lv * (size_t)n);
    memcpy(ix + 3 * g->n, index, sizeof *ix * 3 * (size_t)n);
    const fmk_status st = check_overlap(lv, ix, total, g->n);
    if (st != FMK_OK) {
        free(lv);
        free(ix);
        return st;
    }
    free(g->level);
    free(g->index);
    g->level = lv;
    g->index = ix;
    g->n = g->cap = total;
    for (int64_t k = 0; k < total; k++)
        g->finest = lv[k] > g->finest ? lv[k] : g->finest;
    return FMK_OK;
}

fmk_status fmk_grid_add_blocks(fmk_grid *g, int64_t n, const int32_t *levels, const double *corners)
{
    if (!g || !levels || !corners)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "fmk_grid_add_blocks: %s is NULL",
                               !g        ? "grid"
                               : !levels ? "levels"
                                         : "corners");
    if (n < 1 || n > FMK_GRID_INDEX_MAX * 64)
        return fmk_solver_fail(NULL, FMK_ERR_ARG, "n = %lld; add 1 to 2^26 blocks at a time",
                               (long long)n);
    int64_t *index = malloc(sizeof *index * 3 * (size_t)n);
    if (!index)
        return fmk_solver_fail(NULL, FMK_ERR_NOMEM, "fmk_grid_add_blocks: out of host memory");
    fmk_status st = FMK_OK;
    for (int64_t k = 0; k < n && st == FMK_OK; k++) {
        if (levels[k] < 0 || levels[k] > FMK_GRID_MAX_LEVEL) {
            st = fmk_solver_fail(NULL, FMK_ERR_ARG, "levels[%lld] = %d; levels are 0 to %d",
                                 (long long)k, (int)levels[k], FMK_GRID_MAX_LEVEL);
            break;
        }
        const double side = g->b * ldexp(g->h0, -levels[k]);
        for (int a = 0; a < 3 && st == FMK_OK; a++) {
            const double c = corners[3 * k + a];
            const double B = (c - g->anchor[a]) / side, r = nearbyint(B);
            if (!isfinite(c))
                st = fmk_solver_fail(NULL, FMK_ERR_NONFINITE,
                                     "block %lld: corner[%d] = %g is not finite", (long long)k, a,
                                     c);
            else if (!(fabs(B - r) <= 1e-6) || r < 0 || r >= (double)FMK_GRID_INDEX_MAX)
                st = fmk_solver_fail(NULL, FMK_ERR_ARG,
                                     "block %lld (level %d): corner[%d] = %.17g is not aligned: "
                                     "a block's corner is anchor + b h B for an integer 0 <= B "
                                     "< 2^20 (here B = %.9g, side b h = %g)",
                                     (long long)k, (int)levels[k], a, c, B, side);
            else
                index[3 * k + a] = (int64_t)r;
        }
    }
    if (st == FMK_OK)
        st = fmk_grid_add_blocks_index(g, n, levels, index);
    free(index);
    return st;
}

fmk_status fmk_grid_get(const fmk_grid *g, int64_t *n_blocks, int64_t *n_points,
                        int32_t *block_size, double *h0, double anchor[3], int32_t *finest)
{
    if (!g)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "fmk_grid_get: grid is NULL");
    if (n_blocks)
        *n_blocks = g->n;
    if (n_points)
        *n_points = g->n * g->b * g->b * g->b;
    if (block_size)
        *block_size = g->b;
    if (h0)
        *h0 = g->h0;
    if (anchor)
        memcpy(anchor, g->anchor, sizeof g->anchor);
    if (finest)
        *finest = g->finest;
    return FMK_OK;
}

fmk_status fmk_grid_block(const fmk_grid *g, int64_t k, int32_t *level, int64_t index[3])
{
    if (!g)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "fmk_grid_block: grid is NULL");
    if (k < 0 || k >= g->n)
        return fmk_solver_fail(NULL, FMK_ERR_ARG, "block %lld; the grid has %lld blocks",
                               (long long)k, (long long)g->n);
    if (level)
        *level = g->level[k];
    if (index)
        memcpy(index, g->index + 3 * k, sizeof(int64_t) * 3);
    return FMK_OK;
}

fmk_status fmk_grid_points(const fmk_grid *g, double *points, double *spacing)
{
    if (!g)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "fmk_grid_points: grid is NULL");
    const int64_t b = g->b, b3 = b * b * b;
    for (int64_t k = 0; k < g->n; k++) {
        const double h = ldexp(g->h0, -g->level[k]);
        for (int64_t q = 0; q < b3; q++) {
            const int64_t p = k * b3 + q, i[3] = {q % b, q / b % b, q / (b * b)};
            if (points)
                for (int a = 0; a < 3; a++)
                    points[3 * p + a] =
                        g->anchor[a] + h * ((double)(b * g->index[3 * k + a] + i[a]) + 0.5);
            if (spacing)
                spacing[p] = h;
        }
    }
    return FMK_OK;
}

fmk_status fmk_grid_layout(fmk_poisson *s, const fmk_grid *g, struct fmk_poisson_box **boxes,
                           int64_t *n_boxes, double *h_min, double origin[3], int32_t *block_size)
{
    if (g->n == 0)
        return fmk_solver_fail(s, FMK_ERR_ARG,
                               "fmk_poisson_set_blocks: the grid has no blocks (fmk_grid_add_"
                               "blocks)");
    struct fmk_poisson_box *bx = calloc((size_t)g->n, sizeof *bx);
    if (!bx)
        return fmk_solver_fail(s, FMK_ERR_NOMEM, "fmk_poisson_set_blocks: out of host memory");
    const int64_t b = g->b;
    *h_min = ldexp(g->h0, -g->finest);
    for (int a = 0; a < 3; a++)
        origin[a] = g->anchor[a] + 0.5 * *h_min;
    for (int64_t k = 0; k < g->n; k++) {
        /* point i at anchor + h_l (b B + i + 1/2); in grid units (h_min, from origin):
         * 2^(F-l) (b B + i + 1/2) - 1/2 */
        const double hu = ldexp(1.0, g->finest - g->level[k]);
        bx[k].h = hu;
        for (int a = 0; a < 3; a++) {
            bx[k].corner[a] = hu * ((double)(b * g->index[3 * k + a]) + 0.5) - 0.5;
            bx[k].n[a] = (int32_t)b;
        }
        bx[k].level = g->level[k];
        bx[k].offset = k * b * b * b;
    }
    *boxes = bx;
    *n_boxes = g->n;
    *block_size = g->b;
    return FMK_OK;
}
