/* tree.c -- the treecode's octree of the sources and its multipoles (paper section 4, "Tree
 * construction"): a top-down pass makes the nodes level by level, a bottom-up pass their
 * expansions (eq. 5) with fmmkit's operators (fmm3d_ops.h: P2M at the leaves, M2M to the
 * parents; the harmonics' recursions are theirs).
 *
 * Nodes. The root holds every source; a node holding more than leaf_size sources is split into
 * its non-empty octants (the next three bits of the sources' Morton keys), unless it is at the
 * keys' deepest level. Nodes are numbered breadth first and children in key order, so the
 * children of a node are contiguous and their sources consecutive ranges of the node's.
 *
 * Geometry. A node's expansion centre is the centre of its sources' bounding box and its radius
 * a the largest distance from there to one of its sources (exact, not a bound: the opening
 * test a / r < theta compares it with the distance to a brick). The expansions' scale is the
 * node's cube side (root_side 2^-level), which keeps the stored coefficients O(1). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "poisson/treecode/treecode.h"

void fmk_tc_tree_free(fmk_tc_tree *t)
{
    free(t->begin);
    free(t->end);
    free(t->child);
    free(t->n_child);
    free(t->center);
    free(t->radius);
    free(t->scale);
    free(t->multipole);
    free(t->level_begin);
    fmk_fmm3d_ops_destroy(&t->ops);
    memset(t, 0, sizeof *t);
}

int64_t fmk_tc_tree_bytes(const fmk_tc_tree *t)
{
    return t->cap * (int64_t)(2 * sizeof(int64_t) + sizeof(int32_t) + 1 + 5 * sizeof(double)) +
           (int64_t)sizeof(double) * t->multipole_cap;
}

static fmk_status out_of_memory(fmk_poisson *s, const char *what)
{
    return fmk_solver_fail(s, FMK_ERR_NOMEM, "method treecode: out of host memory for %s", what);
}

/* Room for n nodes in the node arrays (contents kept); -1 when out of memory or beyond the
 * int32 node numbers (2^31 nodes: more sources than any memory holds). */
static int grow(fmk_tc_tree *t, int64_t n)
{
    if (n <= t->cap)
        return 0;
    if (n > INT32_MAX)
        return -1;
    const int64_t cap = n > 2 * t->cap ? n : 2 * t->cap;
    const size_t m = (size_t)cap;
    void *p[7] = {realloc(t->begin, sizeof(int64_t) * m), NULL, NULL, NULL, NULL, NULL, NULL};
    if (p[0])
        t->begin = p[0];
    p[1] = realloc(t->end, sizeof(int64_t) * m);
    if (p[1])
        t->end = p[1];
    p[2] = realloc(t->child, sizeof(int32_t) * m);
    if (p[2])
        t->child = p[2];
    p[3] = realloc(t->n_child, m);
    if (p[3])
        t->n_child = p[3];
    p[4] = realloc(t->center, sizeof(double) * 3 * m);
    if (p[4])
        t->center = p[4];
    p[5] = realloc(t->radius, sizeof(double) * m);
    if (p[5])
        t->radius = p[5];
    p[6] = realloc(t->scale, sizeof(double) * m);
    if (p[6])
        t->scale = p[6];
    for (int k = 0; k < 7; k++)
        if (!p[k])
            return -1;
    t->cap = cap;
    return 0;
}

/* The first source in [b, e) whose octant ((key >> shift) & 7) is at least o: the octants of
 * a node's sources are sorted. */
static int64_t octant_start(const uint64_t *key, int64_t b, int64_t e, int shift, unsigned o)
{
    while (b < e) {
        const int64_t mid = b + (e - b) / 2;
        if ((unsigned)(key[mid] >> shift & 7) < o)
            b = mid + 1;
        else
            e = mid;
    }
    return b;
}

/* The nodes, level by level. Returns 0, or -1 when out of memory. */
static int make_nodes(fmk_tc_tree *t, const fmk_tc_sources *src, int32_t leaf_size)
{
    const int levels_max = src->key_levels; /* a node at this level is not split */
    t->n_nodes = 0;
    if (grow(t, 64))
        return -1;
    t->begin[0] = 0, t->end[0] = src->n;
    t->n_nodes = 1;
    t->level_begin[0] = 0;
    for (int level = 0;; level++) {
        const int64_t first = t->level_begin[level], last = t->n_nodes;
        for (int64_t i = first; i < last; i++) {
            const int64_t b = t->begin[i], e = t->end[i];
            t->child[i] = -1, t->n_child[i] = 0;
            if (e - b <= leaf_size || level >= levels_max)
                continue;
            if (grow(t, t->n_nodes + 8))
                return -1;
            const int shift = 3 * (levels_max - 1 - level);
            t->child[i] = (int32_t)t->n_nodes;
            int64_t lo = b;
            for (unsigned o = 1; o <= 8; o++) {
                const int64_t hi = o < 8 ? octant_start(src->key, lo, e, shift, o) : e;
                if (hi > lo) {
                    t->begin[t->n_nodes] = lo, t->end[t->n_nodes] = hi;
                    t->n_nodes++, t->n_child[i]++;
                }
                lo = hi;
            }
        }
        t->level_begin[level + 1] = last; /* the nodes made here are the next level's */
        if (t->n_nodes == last) {
            t->levels = level + 1;
            return 0;
        }
    }
}

/* Centres (bounding boxes: the leaves' from their sources, the parents' from their children),
 * radii and scales. box: 6 doubles per node (lo, hi). */
static void geometry(fmk_tc_tree *t, const fmk_tc_sources *src, double *box, int threads)
{
    const double *x[3] = {src->x, src->y, src->z};
    for (int level = t->levels - 1; level >= 0; level--) {
        const int64_t first = t->level_begin[level], last = t->level_begin[level + 1];
        const double side = ldexp(src->root_side, -level);
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads)
        for (int64_t i = first; i < last; i++) {
            double *bx = box + 6 * i;
            for (int k = 0; k < 3; k++)
                bx[k] = INFINITY, bx[3 + k] = -INFINITY;
            if (t->child[i] < 0) {
                for (int k = 0; k < 3; k++)
                    for (int64_t j = t->begin[i]; j < t->end[i]; j++) {
                        bx[k] = fmin(bx[k], x[k][j]);
                        bx[3 + k] = fmax(bx[3 + k], x[k][j]);
                    }
            } else {
                for (int c = t->child[i]; c < t->child[i] + t->n_child[i]; c++)
                    for (int k = 0; k < 3; k++) {
                        bx[k] = fmin(bx[k], box[6 * c + k]);
                        bx[3 + k] = fmax(bx[3 + k], box[6 * c + 3 + k]);
                    }
            }
            for (int k = 0; k < 3; k++)
                t->center[3 * i + k] = 0.5 * (bx[k] + bx[3 + k]);
            t->scale[i] = side;
        }
    }
    /* radii: each node over its sources (the work is n per level; a node a task) */
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t i = 0; i < t->n_nodes; i++) {
        const double *c = t->center + 3 * i;
        double r2 = 0;
        for (int64_t j = t->begin[i]; j < t->end[i]; j++) {
            const double dx = x[0][j] - c[0], dy = x[1][j] - c[1], dz = x[2][j] - c[2];
            const double d2 = dx * dx + dy * dy + dz * dz;
            r2 = d2 > r2 ? d2 : r2;
        }
        t->radius[i] = sqrt(r2);
    }
}

fmk_status fmk_tc_tree_build(fmk_poisson *s, const fmk_tc_sources *src, int32_t leaf_size,
                             int order, fmk_tc_tree *t)
{
    if (!t->ops.sqrt_int || t->ops.order != order) {
        fmk_fmm3d_ops_destroy(&t->ops);
        const fmk_status st = fmk_fmm3d_ops_create(&t->ops, order);
        if (st != FMK_OK)
            return st == FMK_ERR_NOMEM ? out_of_memory(s, "the expansion operators")
                                       : fmk_solver_fail(s, st,
                                                         "method treecode: order %d "
                                                         "has no expansion operators",
                                                         order);
    }
    t->order = order;
    t->coef = 2 * t->ops.n_coef;
    if (!t->level_begin) {
        t->level_begin = malloc(sizeof(int64_t) * (FMK_TC_MAX_LEVELS + 2));
        if (!t->level_begin)
            return out_of_memory(s, "the tree");
    }
    if (make_nodes(t, src, leaf_size))
        return out_of_memory(s, "the tree's nodes");
    double *box = malloc(sizeof(double) * 6 * (size_t)t->n_nodes);
    if (!box)
        return out_of_memory(s, "the tree's bounding boxes");
    geometry(t, src, box, s->threads);
    free(box);
    return FMK_OK;
}

/* P2M of leaf i, in pieces of up to CHUNK sources gathered to interleaved coordinates. */
enum { CHUNK = 256 };

static void leaf_p2m(fmk_tc_tree *t, const fmk_tc_sources *src, int64_t i, double *xyz,
                     double *work)
{
    const int64_t n = src->n;
    double *M = t->multipole + i * src->nc * t->coef;
    for (int64_t j0 = t->begin[i]; j0 < t->end[i]; j0 += CHUNK) {
        const int64_t m = t->end[i] - j0 < CHUNK ? t->end[i] - j0 : CHUNK;
        for (int64_t j = 0; j < m; j++)
            xyz[3 * j] = src->x[j0 + j], xyz[3 * j + 1] = src->y[j0 + j],
                    xyz[3 * j + 2] = src->z[j0 + j];
        fmk_fmm3d_p2m_many(&t->ops, t->center + 3 * i, t->scale[i], m, xyz, src->nc, src->w + j0, n,
                           M, t->coef, work);
    }
}

/* M2M of node i's children into it: one rotation per child, shared by the components. */
static void parent_m2m(fmk_tc_tree *t, int nc, int64_t i, double *rot, double *work)
{
    double *M = t->multipole + i * nc * t->coef;
    for (int64_t c = t->child[i]; c < t->child[i] + t->n_child[i]; c++) {
        const double *cc = t->center + 3 * c, *cp = t->center + 3 * i;
        const double dir[3] = {cp[0] - cc[0], cp[1] - cc[1], cp[2] - cc[2]};
        fmk_fmm3d_rot_init(&t->ops, dir, rot, work);
        for (int a = 0; a < nc; a++)
            fmk_fmm3d_m2m(&t->ops, rot, cc, t->scale[c], t->multipole + (c * nc + a) * t->coef, cp,
                          t->scale[i], M + a * t->coef, work);
    }
}

fmk_status fmk_tc_tree_expand(fmk_poisson *s, const fmk_tc_sources *src, fmk_tc_tree *t)
{
    const int nc = src->nc;
    const int64_t need = t->n_nodes * nc * t->coef;
    if (need > t->multipole_cap) {
        free(t->multipole);
        t->multipole_cap = 0;
        t->multipole = malloc(sizeof(double) * (size_t)need);
        if (!t->multipole)
            return out_of_memory(s, "the multipoles");
        t->multipole_cap = need;
    }
    t->nc = nc;
    memset(t->multipole, 0, sizeof(double) * (size_t)need);
    const int64_t ws = fmk_fmm3d_points_work_size(&t->ops, nc), wt = fmk_fmm3d_work_size(&t->ops),
                  rs = fmk_fmm3d_rot_size(&t->ops);
    const int64_t stride = 3 * CHUNK + (ws > wt ? ws : wt) + rs;
    double *work = malloc(sizeof(double) * (size_t)(stride * s->threads));
    if (!work)
        return out_of_memory(s, "the multipoles' work arrays");
#pragma omp parallel for schedule(dynamic, 4) num_threads(s->threads)
    for (int64_t i = 0; i < t->n_nodes; i++)
        if (t->child[i] < 0) {
            double *w = work + stride * fmk_thread_num();
            leaf_p2m(t, src, i, w, w + 3 * CHUNK + rs);
        }
    if (fmk_solver_poll(s)) {
        free(work);
        return fmk_solver_fail(s, FMK_ERR_INTERRUPTED, "interrupted");
    }
    for (int level = t->levels - 2; level >= 0; level--) {
        const int64_t first = t->level_begin[level], last = t->level_begin[level + 1];
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->threads)
        for (int64_t i = first; i < last; i++)
            if (t->child[i] >= 0) {
                double *w = work + stride * fmk_thread_num();
                parent_m2m(t, nc, i, w + 3 * CHUNK, w + 3 * CHUNK + rs);
            }
    }
    free(work);
    return FMK_OK;
}
