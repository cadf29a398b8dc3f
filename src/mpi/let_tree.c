/* let_tree.c -- the sending tree of the treecode's distributed sources (let.h): an octree of
 * the sources this rank keeps, in the global box's Morton order; the walks that choose, for
 * every other rank, which nodes it gets as pseudo-particles and which leaves as particles; and
 * at each evaluation the nodes' moments and pseudo-charges.
 *
 * The pseudo-particles are Makino's (1999): 12 charges on the icosahedron of radius a (the
 * half diagonal of the node's points' box) about its centre c, whose multipole moments equal
 * the node's up to the quadrupole (the icosahedron integrates the sphere's polynomials of
 * degree 5; products of harmonics of degree 2 need 4):
 *
 *     q_k = (1/12) [ M + 3 D.u_k / a + 5 (3 u_k.S.u_k - tr S) / (2 a^2) ]
 *
 * with M, D, S the node's charge, dipole and second moment about c. A node goes as
 * pseudo-particles when it has more than 12 sources and its centre is farther than
 * a (1 + 1/theta) from every box of the receiving rank's targets. The FMM's pseudo-particles
 * of order p (let_pseudo.c) take the place of these where l->order > 0: n_pp a node. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/let.h"

/* Sorted Morton keys of n points (NULL: out of memory). */
static fmk_mpi_keyed *sorted_keys(fmk_plan *sorter, const double *x, int64_t n, const double lo[3],
                                  const double hi[3])
{
    fmk_mpi_keyed *k = fmk_mpi_alloc((size_t)(n > 0 ? n : 1) * sizeof *k, NULL);
    if (!k)
        return NULL;
    const double scale = fmk_mpi_morton_scale(3, lo, hi);
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
        k[i].key = fmk_mpi_morton(x + 3 * i, 3, lo, scale), k[i].index = i;
    if (fmk_mpi_sort_on(sorter, k, n, 63) != 0)
        return free(k), NULL;
    return k;
}

/* The box (lo, hi) of points x[b..e) (3 each). */
static void points_box(const double *x, int64_t b, int64_t e, double box[6])
{
    for (int d = 0; d < 3; d++)
        box[d] = INFINITY, box[3 + d] = -INFINITY;
    for (int64_t j = b; j < e; j++)
        for (int d = 0; d < 3; d++) {
            const double v = x[3 * j + d];
            box[d] = v < box[d] ? v : box[d];
            box[3 + d] = v > box[3 + d] ? v : box[3 + d];
        }
}

/* The end of the run from b (< e) of keys whose digit at shift is digit (keys sorted, the
 * higher digits shared by [b, e)): bisection. */
static int64_t digit_run_end(const fmk_mpi_keyed *k, int64_t b, int64_t e, int shift,
                             uint64_t digit)
{
    int64_t lo = b + 1, hi = e;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (((k[mid].key >> shift) & 7u) == digit)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The children of node nd at level lev (keys sorted): the runs of the next digit, written
 * from out (NULL: only counted); their count. */
static int split_node(const let_node *nd, int lev, const fmk_mpi_keyed *k, let_node *out)
{
    if (nd->end - nd->begin <= LET_LEAF || lev >= 21)
        return 0;
    const int shift = 3 * (20 - lev);
    int c = 0;
    for (int64_t b = nd->begin; b < nd->end; c++) {
        const uint64_t digit = (k[b].key >> shift) & 7u;
        const int64_t e = digit_run_end(k, b, nd->end, shift, digit);
        if (out)
            out[c] = (let_node){b, e, 0, 0, {0, 0, 0}, 0};
        b = e;
    }
    return c;
}

/* The nodes' structure, level by level (children consecutive, after their parent; each
 * level's nodes split in parallel: counted, placed by a prefix sum, written), and the levels'
 * first nodes: -1 when out of memory. */
static int tree_nodes(fmk_mpi_let *l, const fmk_mpi_keyed *k)
{
    int64_t cap = 1024, n = 1;
    l->node = malloc((size_t)cap * sizeof *l->node);
    int32_t *at = NULL; /* a level's nodes' first child, relative */
    if (!l->node)
        return -1;
    l->node[0] = (let_node){0, l->n_own, 0, 0, {0, 0, 0}, 0};
    l->level_start[0] = 0;
    int lev = 0;
    for (int64_t lb = 0, le = 1; lb < le && lev < LET_LEVELS - 1; lev++) {
        int32_t *grown = realloc(at, (size_t)(le - lb + 1) * sizeof *at);
        if (!grown)
            return free(at), -1;
        at = grown;
#pragma omp parallel for schedule(dynamic, 64) if (le - lb > 256)
        for (int64_t i = lb; i < le; i++)
            at[i - lb] = split_node(&l->node[i], lev, k, NULL);
        int64_t total = 0;
        for (int64_t i = lb; i < le; i++) {
            const int32_t c = at[i - lb];
            at[i - lb] = (int32_t)total;
            total += c;
        }
        if (n + total > INT32_MAX)
            return free(at), -1;
        if (n + total > cap) {
            while (n + total > cap)
                cap *= 2;
            let_node *nn = realloc(l->node, (size_t)cap * sizeof *nn);
            if (!nn)
                return free(at), -1;
            l->node = nn;
        }
#pragma omp parallel for schedule(dynamic, 64) if (le - lb > 256)
        for (int64_t i = lb; i < le; i++) {
            let_node *nd = &l->node[i];
            nd->child = (int32_t)(n + at[i - lb]);
            nd->n_child = split_node(nd, lev, k, l->node + nd->child);
        }
        lb = le, le = n + total, n = le;
        l->level_start[lev + 1] = (int32_t)lb;
    }
    free(at);
    l->n_levels = lev;
    l->level_start[lev] = (int32_t)n;
    l->n_node = (int32_t)n;
    return 0;
}

int fmk_let_build_tree(fmk_mpi_let *l, const double lo[3], const double hi[3])
{
    const int64_t n = l->n_own;
    fmk_mpi_keyed *k = sorted_keys(l->sorter, l->own, n, lo, hi);
    l->perm = fmk_mpi_alloc((size_t)(n > 0 ? n : 1) * sizeof *l->perm, NULL);
    l->xs = fmk_mpi_alloc((size_t)(n > 0 ? n : 1) * 3 * sizeof *l->xs, NULL);
    double *box = NULL;
    int rc = k && l->perm && l->xs ? 0 : -1;
    if (rc == 0) {
#pragma omp parallel for schedule(static) if (n > 65536)
        for (int64_t i = 0; i < n; i++) {
            l->perm[i] = k[i].index;
            memcpy(l->xs + 3 * i, l->own + 3 * k[i].index, 3 * sizeof(double));
        }
        rc = tree_nodes(l, k);
    }
    l->keys = k;
    if (rc == 0 && !(box = malloc((size_t)l->n_node * 6 * sizeof *box)))
        rc = -1;
    if (rc != 0)
        return rc;
    /* boxes bottom up: leaves from their points, the others from their children */
#pragma omp parallel for schedule(dynamic, 256) if (n > 65536)
    for (int32_t i = 0; i < l->n_node; i++)
        if (l->node[i].n_child == 0)
            points_box(l->xs, l->node[i].begin, l->node[i].end, box + 6 * (size_t)i);
    for (int lev = l->n_levels - 1; lev >= 0; lev--) /* a level's nodes in parallel */
#pragma omp parallel for schedule(static) if (l->level_start[lev + 1] - l->level_start[lev] > 4096)
        for (int32_t i = l->level_start[lev]; i < l->level_start[lev + 1]; i++) {
            let_node *nd = &l->node[i];
            double *b = box + 6 * (size_t)i;
            if (nd->n_child > 0) {
                memcpy(b, box + 6 * (size_t)nd->child, 6 * sizeof *b);
                for (int32_t c = nd->child + 1; c < nd->child + nd->n_child; c++)
                    for (int d = 0; d < 3; d++) {
                        const double *cb = box + 6 * (size_t)c;
                        b[d] = cb[d] < b[d] ? cb[d] : b[d];
                        b[3 + d] = cb[3 + d] > b[3 + d] ? cb[3 + d] : b[3 + d];
                    }
            }
            double a2 = 0;
            for (int d = 0; d < 3; d++) {
                nd->c[d] = 0.5 * (b[d] + b[3 + d]);
                a2 += 0.25 * (b[3 + d] - b[d]) * (b[3 + d] - b[d]);
            }
            nd->a = n > 0 ? sqrt(a2) : 0;
        }
    free(box);
    return 0;
}

int fmk_let_domain_boxes(const fmk_mpi_let *l, const double *t, int64_t nt, const double lo[3],
                         const double hi[3], double *box)
{
    if (nt == 0)
        return 0;
    const int own = l && l->keys && t == l->own; /* the sending tree's sort serves */
    fmk_mpi_keyed *sk = own ? NULL : sorted_keys(l ? l->sorter : NULL, t, nt, lo, hi);
    const fmk_mpi_keyed *k = own ? l->keys : sk;
    double *xsort = own || !sk ? NULL : malloc((size_t)nt * 3 * sizeof *xsort);
    if (!own && !xsort)
        return free(sk), -1;
    if (!own)
#pragma omp parallel for schedule(static) if (nt > 65536)
        for (int64_t i = 0; i < nt; i++)
            memcpy(xsort + 3 * i, t + 3 * k[i].index, 3 * sizeof(double));
    const double *xs = own ? l->xs : xsort;
    /* the leaves of the targets' octree with at most nt / LET_BOXES_SPLIT targets each, in
     * key order, depth first over (begin, end, level) */
    const int64_t most = nt / LET_BOXES_SPLIT > 1 ? nt / LET_BOXES_SPLIT : 1;
    int nb = 0, top = 0;
    struct {
        int64_t b, e;
        int level;
    } stack[8 * 22];
    stack[top].b = 0, stack[top].e = nt, stack[top++].level = 0;
    while (top > 0) {
        const int64_t b = stack[top - 1].b, e = stack[top - 1].e;
        const int level = stack[--top].level;
        if (e - b <= most || level >= 21 || nb + top + 8 >= LET_BOXES) {
            points_box(xs, b, e, box + 6 * nb++);
            continue;
        }
        const int shift = 3 * (20 - level);
        int64_t cut[9], nc = 0;
        for (int64_t j = b; j < e;) { /* the runs of the next digit, ends by bisection */
            const uint64_t digit = (k[j].key >> shift) & 7u;
            cut[nc++] = j;
            j = digit_run_end(k, j, e, shift, digit);
        }
        cut[nc] = e;
        for (int64_t c = nc - 1; c >= 0; c--) /* pushed last first: popped in key order */
            stack[top].b = cut[c], stack[top].e = cut[c + 1], stack[top++].level = level + 1;
    }
    free(sk), free(xsort);
    return nb;
}

/* One destination's walk. */
typedef struct walk_ctx {
    const fmk_mpi_let *l;
    const double *box; /* the destination's boxes */
    int *keep;         /* (22 levels) x LET_BOXES: the boxes near each node on the path */
    double open, near; /* the opening ratio; the smallest distance of a pseudo-node's sphere */
    int64_t *pidx, np, pcap;
    int32_t *nidx;
    int64_t nn, ncap;
} walk_ctx;

double fmk_let_box_distance(const double *x, const double *b)
{
    double d2 = 0;
    for (int d = 0; d < 3; d++) {
        const double e = x[d] < b[d] ? b[d] - x[d] : x[d] > b[3 + d] ? x[d] - b[3 + d] : 0;
        d2 += e * e;
    }
    return sqrt(d2);
}

/* The node i against the boxes bidx[0..nb) (those near its parent): a node farther than
 * open a (and than near + a) from all of them goes as pseudo-particles, a leaf that is not as
 * its particles, else its children against the boxes near it (farther than
 * max((open + 1) a, near + 2 a): far from every point of the node's sphere, hence from every
 * descendant's by its own opening distance and by near from its sphere). */
static int walk_node(walk_ctx *w, int32_t i, const int *bidx, int nb, int level)
{
    const let_node *nd = &w->l->node[i];
    const int64_t count = nd->end - nd->begin;
    int *near = w->keep + (size_t)level * LET_BOXES, m = 0;
    double dmin = INFINITY;
    const double reach =
        (w->open + 1) * nd->a > w->near + 2 * nd->a ? (w->open + 1) * nd->a : w->near + 2 * nd->a;
    for (int j = 0; j < nb; j++) {
        const double d = fmk_let_box_distance(nd->c, w->box + 6 * bidx[j]);
        dmin = d < dmin ? d : dmin;
        if (d <= reach)
            near[m++] = bidx[j];
    }
    if (count > w->l->n_pp && dmin > w->open * nd->a && dmin - nd->a >= w->near) {
        if (w->nn == w->ncap) {
            int32_t *g = realloc(w->nidx, (size_t)(w->ncap * 2) * sizeof *g);
            if (!g)
                return -1;
            w->nidx = g, w->ncap *= 2;
        }
        w->nidx[w->nn++] = i;
        return 0;
    }
    if (nd->n_child == 0 || level >= 21) {
        while (w->np + count > w->pcap) {
            int64_t *g = realloc(w->pidx, (size_t)(w->pcap * 2) * sizeof *g);
            if (!g)
                return -1;
            w->pidx = g, w->pcap *= 2;
        }
        for (int64_t k = nd->begin; k < nd->end; k++)
            w->pidx[w->np++] = w->l->perm[k];
        return 0;
    }
    for (int32_t c = nd->child; c < nd->child + nd->n_child; c++)
        if (walk_node(w, c, near, m, level + 1) != 0)
            return -1;
    return 0;
}

double fmk_let_smooth_near(fmk_kernel kernel, double softening, double eps)
{
    if (kernel == FMK_KERNEL_PLUMMER)
        return softening / sqrt(eps);
    if (kernel == FMK_KERNEL_REGULARIZED)
        return softening / sqrt(sqrt(eps));
    return 0;
}

int fmk_let_lists(fmk_mpi_let *l, const fmk_mpi_state *s, const int *nbox, const double *boxes,
                  double theta, double near)
{
    walk_ctx w = {l, NULL, NULL, 1 + 1 / theta, near > 0 ? near : 0, NULL, 0, 1024, NULL, 0, 256};
    w.pidx = malloc((size_t)w.pcap * sizeof *w.pidx);
    w.nidx = malloc((size_t)w.ncap * sizeof *w.nidx);
    w.keep = malloc((size_t)23 * LET_BOXES * sizeof *w.keep);
    int *all = malloc(LET_BOXES * sizeof *all);
    int rc = w.pidx && w.nidx && w.keep && all ? 0 : -1;
    for (int j = 0; j < LET_BOXES && all; j++)
        all[j] = j;
    int64_t first = 0;
    for (int r = 0; r < s->size && rc == 0; r++) {
        const int64_t p0 = w.np, n0 = w.nn;
        w.box = boxes + 6 * first;
        if (r != s->rank && nbox[r] > 0 && l->n_own > 0)
            rc = walk_node(&w, 0, all, nbox[r], 0);
        first += nbox[r];
        if (rc == 0 && w.np - p0 + (int64_t)l->n_pp * (w.nn - n0) > INT_MAX)
            rc = -1;
        l->pcount[r] = (int)(w.np - p0), l->ncount[r] = (int)(w.nn - n0);
        l->scount[r] = l->pcount[r] + l->n_pp * l->ncount[r];
    }
    free(w.keep), free(all);
    l->pidx = w.pidx, l->nidx = w.nidx;
    return rc;
}

/* Each node's M, D[3], S[6] (xx yy zz xy xz yz) about its centre for nd vectors (qs: charges
 * in key order, row per source), children first. */
static void moments(const fmk_mpi_let *l, int64_t nd, const double *qs, double *mom)
{
    static const int ia[6] = {0, 1, 2, 0, 0, 1}, ib[6] = {0, 1, 2, 1, 2, 2};
#pragma omp parallel for schedule(dynamic, 256) if (l->n_own > 65536)
    for (int32_t i = 0; i < l->n_node; i++) { /* the leaves, from their sources */
        const let_node *n = &l->node[i];
        for (int64_t v = 0; v < nd && n->n_child == 0; v++) {
            double *m = mom + ((size_t)i * (size_t)nd + (size_t)v) * 10;
            memset(m, 0, 10 * sizeof *m);
            for (int64_t k = n->begin; k < n->end; k++) {
                const double q = qs[k * nd + v], *x = l->xs + 3 * k;
                const double dx = x[0] - n->c[0], dy = x[1] - n->c[1], dz = x[2] - n->c[2];
                m[0] += q, m[1] += q * dx, m[2] += q * dy, m[3] += q * dz;
                m[4] += q * dx * dx, m[5] += q * dy * dy, m[6] += q * dz * dz;
                m[7] += q * dx * dy, m[8] += q * dx * dz, m[9] += q * dy * dz;
            }
        }
    }
    for (int lev = l->n_levels - 1; lev >= 0; lev--) /* the others, from their children */
#pragma omp parallel for schedule(static) if (l->level_start[lev + 1] - l->level_start[lev] > 4096)
        for (int32_t i = l->level_start[lev]; i < l->level_start[lev + 1]; i++) {
            const let_node *n = &l->node[i];
            for (int64_t v = 0; v < nd && n->n_child > 0; v++) {
                double *m = mom + ((size_t)i * (size_t)nd + (size_t)v) * 10;
                memset(m, 0, 10 * sizeof *m);
                for (int32_t c = n->child; c < n->child + n->n_child; c++) {
                    const double *mc = mom + ((size_t)c * (size_t)nd + (size_t)v) * 10;
                    const double t[3] = {l->node[c].c[0] - n->c[0], l->node[c].c[1] - n->c[1],
                                         l->node[c].c[2] - n->c[2]};
                    const double M = mc[0], *D = mc + 1;
                    m[0] += M;
                    for (int d = 0; d < 3; d++)
                        m[1 + d] += D[d] + M * t[d];
                    for (int e = 0; e < 6; e++)
                        m[4 + e] += mc[4 + e] + D[ia[e]] * t[ib[e]] + t[ia[e]] * D[ib[e]] +
                                    M * t[ia[e]] * t[ib[e]];
                }
            }
        }
}

/* The pseudo-charges of a node from its moments m (one vector). */
static void pseudo_charges(const double *m, double a, const double u[LET_PP][3], double *qk)
{
    const double trS = m[4] + m[5] + m[6];
    for (int k = 0; k < LET_PP; k++) {
        const double *e = u[k];
        double q = m[0];
        if (a > 0) {
            const double du = m[1] * e[0] + m[2] * e[1] + m[3] * e[2];
            const double uSu = m[4] * e[0] * e[0] + m[5] * e[1] * e[1] + m[6] * e[2] * e[2] +
                               2 * (m[7] * e[0] * e[1] + m[8] * e[0] * e[2] + m[9] * e[1] * e[2]);
            q += 3 * du / a + 2.5 * (3 * uSu - trS) / (a * a);
        }
        qk[k] = q / LET_PP;
    }
}

int fmk_let_rows(const fmk_mpi_let *l, int P, int64_t nd, const double *q, double *send)
{
    const size_t snd = (size_t)nd;
    double *qs = fmk_mpi_alloc((size_t)(l->n_own > 0 ? l->n_own : 1) * snd * sizeof *qs, NULL);
    double *mom =
        l->order > 0
            ? NULL
            : fmk_mpi_alloc((size_t)(l->n_node > 0 ? l->n_node : 1) * snd * 10 * sizeof *mom, NULL);
    if (!qs || (l->order == 0 && !mom))
        return free(qs), free(mom), -1;
#pragma omp parallel for schedule(static) if (l->n_own > 65536)
    for (int64_t k = 0; k < l->n_own; k++)
        memcpy(qs + (size_t)k * snd, q + (size_t)l->perm[k] * snd, snd * sizeof *qs);
    if (l->order > 0) { /* the FMM's pseudo-particles of order p (let_pseudo.c) */
        const int rc = fmk_let_pseudo_rows(l, P, nd, q, qs, send);
        return free(qs), rc;
    }
    moments(l, nd, qs, mom);
    free(qs);
    double u[LET_PP][3];
    fmk_let_icosahedron(u);
    int64_t ip = 0, in = 0, o = 0; /* this destination's first particle, node and row */
    for (int r = 0; r < P; r++) {
        const int64_t np = l->pcount[r], nn = l->ncount[r];
#pragma omp parallel for schedule(static) if (np > 65536)
        for (int64_t k = 0; k < np; k++)
            memcpy(send + (o + k) * nd, q + l->pidx[ip + k] * nd, snd * sizeof *send);
        o += np;
#pragma omp parallel for schedule(static) if (nn > 4096)
        for (int64_t k = 0; k < nn; k++) {
            const int32_t i = l->nidx[in + k];
            double qk[LET_PP];
            for (int64_t v = 0; v < nd; v++) {
                pseudo_charges(mom + ((size_t)i * snd + (size_t)v) * 10, l->node[i].a, u, qk);
                for (int j = 0; j < LET_PP; j++)
                    send[(o + LET_PP * k + j) * nd + v] = qk[j];
            }
        }
        ip += np, in += nn, o += LET_PP * nn;
    }
    free(mom);
    return 0;
}
