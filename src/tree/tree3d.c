/* tree3d.c -- the CPU build of the shared octree (tree3d.h is the specification): Morton keys,
 * a stable parallel radix sort by (key, index), the flat breadth-first node arrays with their
 * next/more pointers, and the upward pass of the moments. Nothing here recurses: the tree is
 * built and swept level by level, so depth costs no stack. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tree/morton.h"
#include "tree/tree3d.h"

#define KEY_CELLS (1 << FMK_TREE_KEY_BITS)

static uint64_t cell(double x)
{
    double c = floor((x - 1.0) * (double)KEY_CELLS);
    if (!(c >= 0)) /* also NaN, which the plan never passes */
        return 0;
    return c >= KEY_CELLS - 1 ? KEY_CELLS - 1 : (uint64_t)c;
}

uint64_t fmk_tree3d_key(double x, double y, double z)
{
    return fmk_spread3(cell(x)) << 2 | fmk_spread3(cell(y)) << 1 | fmk_spread3(cell(z));
}

/* ---------------------------------------------------------------------------------------------
 * Stable LSD radix sort of (key, index) pairs
 * ------------------------------------------------------------------------------------------ */

enum { RADIX_BITS = 11, RADIX = 1 << RADIX_BITS, KEY_BITS = 3 * FMK_TREE_KEY_BITS };
_Static_assert((int)RADIX == (int)FMK_TREE3D_SORT_RADIX, "tree3d.h's histogram size");

int fmk_tree3d_sort(uint64_t *keys, int64_t *index, int64_t n, int threads)
{
    return fmk_tree3d_sort_bits(keys, index, n, threads, KEY_BITS);
}

int fmk_tree3d_sort_bits(uint64_t *keys, int64_t *index, int64_t n, int threads, int bits)
{
    if (n <= 1)
        return 0;
    if (threads < 1)
        threads = 1;
    uint64_t *k2 = malloc(sizeof(uint64_t) * (size_t)n);
    int64_t *i2 = malloc(sizeof(int64_t) * (size_t)n);
    int64_t *hist = malloc(sizeof(int64_t) * (size_t)threads * FMK_TREE3D_SORT_RADIX);
    int rc = -1;
    if (k2 && i2 && hist)
        rc = fmk_tree3d_sort_ws(keys, index, n, threads, bits, k2, i2, hist);
    free(k2), free(i2), free(hist);
    return rc;
}

int fmk_tree3d_sort_ws(uint64_t *keys, int64_t *index, int64_t n, int threads, int bits,
                       uint64_t *k2, int64_t *i2, int64_t *hist)
{
    if (n <= 1)
        return 0;
    if (threads < 1)
        threads = 1;
    if (n < 4096)
        threads = 1;
    uint64_t *ks = keys, *kd = k2;
    int64_t *is = index, *id = i2;
    for (int shift = 0; shift < bits && shift < 64; shift += RADIX_BITS) {
        int skip = 0;
#pragma omp parallel num_threads(threads)
        {
            const int t = fmk_thread_num(), nt = fmk_thread_count();
            const int64_t a = n * t / nt, b = n * (t + 1) / nt;
            int64_t *h = hist + (size_t)t * RADIX;
            memset(h, 0, sizeof(int64_t) * RADIX);
            for (int64_t i = a; i < b; i++)
                h[(ks[i] >> shift) & (RADIX - 1)]++;
#pragma omp barrier
#pragma omp single
            {
                /* offsets in (digit, thread) order keep the sort stable */
                int64_t sum = 0;
                for (int d = 0; d < RADIX; d++) {
                    int64_t total = 0;
                    for (int u = 0; u < nt; u++) {
                        int64_t c = hist[(size_t)u * RADIX + d];
                        hist[(size_t)u * RADIX + d] = sum;
                        sum += c;
                        total += c;
                    }
                    if (total == n)
                        skip = 1; /* every key has this digit: the pass would copy */
                }
            }
            if (!skip)
                for (int64_t i = a; i < b; i++) {
                    int64_t p = h[(ks[i] >> shift) & (RADIX - 1)]++;
                    kd[p] = ks[i];
                    id[p] = is[i];
                }
        }
        if (!skip) {
            uint64_t *kt = ks;
            int64_t *it = is;
            ks = kd, kd = kt;
            is = id, id = it;
        }
    }
    if (ks != keys) {
        memcpy(keys, ks, sizeof(uint64_t) * (size_t)n);
        memcpy(index, is, sizeof(int64_t) * (size_t)n);
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Nodes
 * ------------------------------------------------------------------------------------------ */

int64_t fmk_tree3d_bytes_for(int64_t n, int64_t n_nodes)
{
    /* keys, order, points; begin, end; more, next, n_children, parent; level; level_begin */
    /* saturating (fmk_bytes_plus): sizes no machine holds give FMK_BYTES_OVERFLOW */
    const int64_t b = fmk_bytes_plus((FMK_TREE_MAX_LEVEL + 2) * 8, 8 + 8 + 24, n);
    return fmk_bytes_plus(b, 16 + 16 + 1, n_nodes);
}

int64_t fmk_tree3d_bytes(const fmk_tree3d *tree)
{
    return tree->keys ? fmk_tree3d_bytes_for(tree->n_points, tree->n_nodes) : 0;
}

int64_t fmk_tree3d_estimate_nodes(int64_t n, int32_t leaf_size)
{
    /* A split node holds more than leaf_size points over up to 8 octants, so leaves of a smooth
     * distribution hold at least ~leaf_size / 8 points on average (uniform points at the worst
     * level fill: 8 n / leaf_size leaves), plus 1/7 as many inner nodes. Clustered or
     * degenerate sets can need more; the built tree reports its true size. */
    if (leaf_size < 1)
        leaf_size = 1;
    const int64_t per = n / leaf_size + (n % leaf_size != 0);
    const int64_t est = fmk_bytes_plus(1, 10, per), most = fmk_bytes_plus(1, 2, n);
    return est < most ? est : most;
}

void fmk_tree3d_node_cube(const fmk_tree3d *tree, int64_t node, double center[3], double *side)
{
    const int level = tree->level[node];
    const uint64_t key = tree->n_points > 0 ? tree->keys[tree->begin[node]] : 0;
    const double h = ldexp(1.0, -level);
    for (int k = 0; k < 3; k++) {
        uint64_t c = fmk_compact3(key >> (2 - k)) >> (FMK_TREE_KEY_BITS - level);
        center[k] = 1.0 + ((double)c + 0.5) * h;
    }
    *side = h;
}

void fmk_tree3d_free(fmk_tree3d *t)
{
    free(t->keys), free(t->order), free(t->points);
    free(t->begin), free(t->end), free(t->more), free(t->next), free(t->n_children);
    free(t->parent), free(t->level), free(t->level_begin);
    memset(t, 0, sizeof *t);
}

void fmk_tree3d_truncate(fmk_tree3d *t, int max_level)
{
    if (max_level < 0 || t->levels - 1 <= max_level)
        return;
    const int64_t n = t->level_begin[max_level + 1];
    for (int64_t i = t->level_begin[max_level]; i < n; i++)
        t->more[i] = -1, t->n_children[i] = 0;
    for (int L = max_level + 2; L <= FMK_TREE_MAX_LEVEL + 1; L++)
        t->level_begin[L] = n;
    t->n_nodes = n;
    t->levels = max_level + 1;
}

/* Node arrays that grow level by level. */
static int grow_nodes(fmk_tree3d *t, int64_t *cap, int64_t need)
{
    if (need <= *cap)
        return 0;
    int64_t c = *cap * 2 > need ? *cap * 2 : need;
#define GROW(field)                                                 \
    do {                                                            \
        void *p = realloc(t->field, sizeof(*t->field) * (size_t)c); \
        if (!p)                                                     \
            return -1;                                              \
        t->field = p;                                               \
    } while (0)
    GROW(begin);
    GROW(end);
    GROW(more);
    GROW(next);
    GROW(n_children);
    GROW(parent);
    GROW(level);
#undef GROW
    *cap = c;
    return 0;
}

/* First position in [lo, hi) whose key is >= bound (keys sorted). */
static int64_t lower_bound(const uint64_t *keys, int64_t lo, int64_t hi, uint64_t bound)
{
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < bound)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Counts (out = NULL) or writes the children ranges of the node [b, e) at level L. */
static int split_node(const uint64_t *keys, int64_t b, int64_t e, int level, int64_t *out_begin)
{
    const int shift = 3 * (FMK_TREE_MAX_LEVEL - 1 - level);
    int count = 0;
    for (int64_t p = b; p < e;) {
        uint64_t bound = ((keys[p] >> shift) + 1) << shift;
        int64_t q = lower_bound(keys, p + 1, e, bound);
        if (out_begin)
            out_begin[count] = p;
        count++;
        p = q;
    }
    return count;
}

/* Builds the node arrays from sorted keys. Returns 0, or -1 when out of memory. */
static int build_nodes(fmk_tree3d *t, int threads)
{
    const int64_t n = t->n_points;
    const int32_t ls = t->leaf_size;
    int64_t cap = 0;
    int32_t *count = NULL;
    int64_t count_cap = 0;
    t->level_begin = calloc(FMK_TREE_MAX_LEVEL + 2, sizeof(int64_t));
    if (!t->level_begin || grow_nodes(t, &cap, 64))
        return -1;
    t->begin[0] = 0, t->end[0] = n, t->parent[0] = -1, t->level[0] = 0, t->next[0] = -1;
    t->level_begin[0] = 0, t->level_begin[1] = 1;
    int64_t n_nodes = 1;
    int levels = 1;
    for (int L = 0; L < FMK_TREE_MAX_LEVEL; L++) {
        const int64_t lb = t->level_begin[L], le = t->level_begin[L + 1];
        if (le - lb > count_cap) {
            int32_t *c = realloc(count, sizeof(int32_t) * (size_t)(le - lb + 1));
            if (!c) {
                free(count);
                return -1;
            }
            count = c, count_cap = le - lb;
        }
#pragma omp parallel for schedule(dynamic, 256) num_threads(threads) if (le - lb > 1024)
        for (int64_t i = lb; i < le; i++)
            count[i - lb] = t->end[i] - t->begin[i] > ls
                                ? split_node(t->keys, t->begin[i], t->end[i], L, NULL)
                                : 0;
        /* exclusive scan: the first child of each node */
        int64_t total = 0;
        for (int64_t i = lb; i < le; i++) {
            int32_t c = count[i - lb];
            t->n_children[i] = c;
            t->more[i] = c ? (int32_t)(le + total) : -1;
            total += c;
        }
        if (total == 0)
            break;
        if (le + total > INT32_MAX || grow_nodes(t, &cap, le + total)) {
            free(count);
            return -1;
        }
#pragma omp parallel for schedule(dynamic, 256) num_threads(threads) if (le - lb > 1024)
        for (int64_t i = lb; i < le; i++) {
            int32_t c = t->n_children[i];
            if (!c)
                continue;
            int64_t first = t->more[i];
            split_node(t->keys, t->begin[i], t->end[i], L, t->begin + first);
            for (int32_t k = 0; k < c; k++) {
                int64_t j = first + k;
                t->end[j] = k + 1 < c ? t->begin[j + 1] : t->end[i];
                t->parent[j] = (int32_t)i;
                t->level[j] = (int8_t)(L + 1);
            }
        }
        n_nodes = le + total;
        t->level_begin[L + 2] = n_nodes;
        levels = L + 2;
    }
    free(count);
    /* the deepest level's nodes are leaves */
    for (int64_t i = t->level_begin[levels - 1]; i < n_nodes; i++)
        t->more[i] = -1, t->n_children[i] = 0;
    /* next: the following sibling, else the parent's next (parents are done first) */
    for (int L = 1; L < levels; L++) {
        const int64_t lb = t->level_begin[L], le = t->level_begin[L + 1];
#pragma omp parallel for schedule(static) num_threads(threads) if (le - lb > 4096)
        for (int64_t i = lb; i < le; i++)
            t->next[i] = i + 1 < le && t->parent[i + 1] == t->parent[i] ? (int32_t)(i + 1)
                                                                        : t->next[t->parent[i]];
    }
    for (int L = levels + 1; L <= FMK_TREE_MAX_LEVEL + 1; L++)
        t->level_begin[L] = n_nodes;
    t->n_nodes = n_nodes;
    t->levels = levels;
    /* give back what the doubling left unused */
    if (cap > n_nodes) {
        int64_t c = n_nodes;
#define SHRINK(field)                                               \
    do {                                                            \
        void *p = realloc(t->field, sizeof(*t->field) * (size_t)c); \
        if (p)                                                      \
            t->field = p;                                           \
    } while (0)
        SHRINK(begin);
        SHRINK(end);
        SHRINK(more);
        SHRINK(next);
        SHRINK(n_children);
        SHRINK(parent);
        SHRINK(level);
#undef SHRINK
    }
    return 0;
}

fmk_status fmk_tree3d_build(struct fmk_plan *plan, fmk_tree3d *t, int64_t n, const double *points,
                            int32_t leaf_size, int threads)
{
    memset(t, 0, sizeof *t);
    t->n_points = n;
    t->leaf_size = leaf_size < 1 ? 1 : leaf_size;
    const size_t nn = (size_t)(n > 0 ? n : 1);
    t->keys = malloc(sizeof(uint64_t) * nn);
    t->order = malloc(sizeof(int64_t) * nn);
    t->points = malloc(sizeof(double) * 3 * nn);
    if (!t->keys || !t->order || !t->points)
        goto nomem;
#pragma omp parallel for schedule(static) num_threads(threads) if (n > 4096)
    for (int64_t i = 0; i < n; i++) {
        const double *x = points + 3 * i;
        t->keys[i] = fmk_tree3d_key(x[0], x[1], x[2]);
        t->order[i] = i;
    }
    if (fmk_tree3d_sort(t->keys, t->order, n, threads))
        goto nomem;
#pragma omp parallel for schedule(static) num_threads(threads) if (n > 4096)
    for (int64_t s = 0; s < n; s++) {
        const double *x = points + 3 * t->order[s];
        t->points[3 * s] = x[0], t->points[3 * s + 1] = x[1], t->points[3 * s + 2] = x[2];
    }
    if (build_nodes(t, threads))
        goto nomem;
    return FMK_OK;
nomem:;
    long long bytes = (long long)fmk_tree3d_bytes_for(n, fmk_tree3d_estimate_nodes(n, leaf_size));
    fmk_tree3d_free(t);
    return fmk_error_set(plan, FMK_ERR_NOMEM,
                         "out of host memory building the octree of %lld points (about %lld bytes)",
                         (long long)n, bytes);
}

/* ---------------------------------------------------------------------------------------------
 * Moments (the upward pass)
 * ------------------------------------------------------------------------------------------ */

int64_t fmk_tree3d_moments_bytes(int64_t n_nodes)
{
    return fmk_bytes_mul(n_nodes, 8 * (3 + 1 + 3 + 6 + 1));
}

int fmk_tree3d_moments_alloc(fmk_tree3d_moments *m, int64_t n_nodes)
{
    const size_t k = (size_t)(n_nodes > 0 ? n_nodes : 1);
    memset(m, 0, sizeof *m);
    m->center = calloc(3 * k, sizeof(double));
    m->monopole = calloc(k, sizeof(double));
    m->dipole = calloc(3 * k, sizeof(double));
    m->second = calloc(6 * k, sizeof(double));
    m->r_open2 = calloc(k, sizeof(double));
    if (!m->center || !m->monopole || !m->dipole || !m->second || !m->r_open2) {
        fmk_tree3d_moments_free(m);
        return -1;
    }
    return 0;
}

void fmk_tree3d_moments_free(fmk_tree3d_moments *m)
{
    free(m->center), free(m->monopole), free(m->dipole), free(m->second), free(m->r_open2);
    memset(m, 0, sizeof *m);
}

/* The expansion centre of node i: the centre of |q| (c = sum |q| x, a = sum |q|), or the node's
 * geometric centre when all its charges are zero. */
static void set_center(const fmk_tree3d *t, int64_t i, double a, const double c[3], double xc[3])
{
    if (a > 0) {
        for (int k = 0; k < 3; k++)
            xc[k] = c[k] / a;
    } else {
        double side;
        fmk_tree3d_node_cube(t, i, xc, &side);
    }
}

/* Moments of one leaf from its points. */
static void leaf_moments(const fmk_tree3d *t, const double *q, int order, int64_t i,
                         double *abs_charge, fmk_tree3d_moments *m)
{
    double a = 0, mono = 0, c[3] = {0, 0, 0};
    for (int64_t s = t->begin[i]; s < t->end[i]; s++) {
        double w = fabs(q[s]);
        a += w, mono += q[s];
        for (int k = 0; k < 3; k++)
            c[k] += w * t->points[3 * s + k];
    }
    double *xc = m->center + 3 * i;
    set_center(t, i, a, c, xc);
    abs_charge[i] = a;
    m->monopole[i] = mono;
    double d1[3] = {0, 0, 0}, d2[6] = {0, 0, 0, 0, 0, 0};
    if (order >= 1)
        for (int64_t s = t->begin[i]; s < t->end[i]; s++) {
            double dx = t->points[3 * s] - xc[0], dy = t->points[3 * s + 1] - xc[1],
                   dz = t->points[3 * s + 2] - xc[2], w = q[s];
            d1[0] += w * dx, d1[1] += w * dy, d1[2] += w * dz;
            if (order >= 2) {
                d2[0] += w * dx * dx, d2[1] += w * dx * dy, d2[2] += w * dx * dz;
                d2[3] += w * dy * dy, d2[4] += w * dy * dz, d2[5] += w * dz * dz;
            }
        }
    memcpy(m->dipole + 3 * i, d1, sizeof d1);
    memcpy(m->second + 6 * i, d2, sizeof d2);
}

/* Moments of an inner node from its children's: D += D_c + M_c h,
 * S += S_c + D_c h^T + h D_c^T + M_c h h^T with h = xc_child - xc. */
static void inner_moments(const fmk_tree3d *t, int order, int64_t i, double *abs_charge,
                          fmk_tree3d_moments *m)
{
    const int64_t c0 = t->more[i], c1 = c0 + t->n_children[i];
    double a = 0, mono = 0, c[3] = {0, 0, 0};
    for (int64_t j = c0; j < c1; j++) {
        double w = abs_charge[j];
        a += w, mono += m->monopole[j];
        for (int k = 0; k < 3; k++)
            c[k] += w * m->center[3 * j + k];
    }
    double *xc = m->center + 3 * i;
    set_center(t, i, a, c, xc);
    abs_charge[i] = a;
    m->monopole[i] = mono;
    double d1[3] = {0, 0, 0}, d2[6] = {0, 0, 0, 0, 0, 0};
    if (order >= 1)
        for (int64_t j = c0; j < c1; j++) {
            const double M = m->monopole[j], *D = m->dipole + 3 * j, *S = m->second + 6 * j;
            const double h[3] = {m->center[3 * j] - xc[0], m->center[3 * j + 1] - xc[1],
                                 m->center[3 * j + 2] - xc[2]};
            for (int k = 0; k < 3; k++)
                d1[k] += D[k] + M * h[k];
            if (order >= 2) {
                static const int ia[6] = {0, 0, 0, 1, 1, 2}, ib[6] = {0, 1, 2, 1, 2, 2};
                for (int k = 0; k < 6; k++) {
                    int x = ia[k], y = ib[k];
                    d2[k] += S[k] + D[x] * h[y] + h[x] * D[y] + M * h[x] * h[y];
                }
            }
        }
    memcpy(m->dipole + 3 * i, d1, sizeof d1);
    memcpy(m->second + 6 * i, d2, sizeof d2);
}

void fmk_tree3d_moments_compute(const fmk_tree3d *t, const double *q, int order, double theta,
                                double *abs_charge, fmk_tree3d_moments *m, int threads)
{
    const double th = theta < FMK_TREE_THETA_CAP ? theta : FMK_TREE_THETA_CAP;
    for (int L = t->levels - 1; L >= 0; L--) {
        const int64_t lb = t->level_begin[L], le = t->level_begin[L + 1];
#pragma omp parallel for schedule(dynamic, 64) num_threads(threads) if (le - lb > 256)
        for (int64_t i = lb; i < le; i++) {
            if (t->more[i] < 0)
                leaf_moments(t, q, order, i, abs_charge, m);
            else
                inner_moments(t, order, i, abs_charge, m);
            double gc[3], side;
            fmk_tree3d_node_cube(t, i, gc, &side);
            const double *xc = m->center + 3 * i;
            double s = sqrt((xc[0] - gc[0]) * (xc[0] - gc[0]) + (xc[1] - gc[1]) * (xc[1] - gc[1]) +
                            (xc[2] - gc[2]) * (xc[2] - gc[2]));
            double r = side / th + s; /* Nakasato eq. 2, 3 */
            m->r_open2[i] = r * r;
        }
    }
}
