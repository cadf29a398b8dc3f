/* let.c -- the distributed sources of a treecode plan (docs/distributed.md, "Treecode:
 * locally essential trees").
 *
 * Each rank keeps the sources of its run of the space-filling curve (the targets' partition,
 * partition.c; the sources follow the same splitters) and builds an octree of them in the
 * global box. For every other rank r it walks that tree against r's domain (the boxes of r's
 * targets, allgathered): a node far enough from every box (distance from its centre > a (1 +
 * 1/theta), a the half diagonal of its points' box) goes to r as pseudo-particles, a leaf that
 * is not goes as its particles. The pseudo-particles are Makino's (1999): 12 charges on the
 * icosahedron of radius a about the node's centre, whose multipole moments equal the node's
 * up to the quadrupole (the icosahedron integrates the sphere's polynomials of degree 5, the
 * products of harmonics of degree 2 need 4):
 *
 *     q_k = (1/12) [ M + 3 D.u_k / a + 5 (3 u_k.S.u_k - tr S) / (2 a^2) ]
 *
 * M, D, S the node's charge, dipole and second moment about its centre. Their field outside
 * the node's sphere differs from the node's from the octupole on: the treecode's own order
 * (quadrupole), at a distance the opening test keeps at least a (1 + 1/theta). Rank r's local
 * plan then has its own sources, the particles and the pseudo-particles received as sources,
 * and its targets: an ordinary plan of any backend, walked as usual. The positions travel at
 * set_points, the charges (the particles', the pseudo-particles' from this evaluation's
 * moments) at each evaluation. Volume per rank: the nodes and leaves near the domain's
 * surface, O(n^(2/3)), not the N sources of the replicated path. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hooks.h"
#include "mpi/mpi_internal.h"

enum {
    LET_LEAF = 32,        /* sources per leaf of the sending tree */
    LET_PP = 12,          /* pseudo-particles a node */
    LET_BOXES = 1024,     /* most boxes describing one rank's domain */
    LET_BOXES_SPLIT = 128 /* a box holds at most 1 / LET_BOXES_SPLIT of the rank's targets */
};

typedef struct let_node {
    int64_t begin, end; /* own sources [begin, end) in key order (perm) */
    int32_t child, n_child;
    double c[3], a; /* the centre of its points' box and its half diagonal */
} let_node;

struct fmk_mpi_let {
    int64_t n_own;  /* sources kept here */
    double *own;    /* n_own * 3: their coordinates (routed order) */
    int64_t *perm;  /* n_own: routed index of the k-th in key order */
    let_node *node; /* the sending tree: children after their parent */
    int32_t n_node;
    int64_t *pidx; /* particles sent (routed indices), concatenated over destinations */
    int32_t *nidx; /* nodes sent as pseudo-particles, concatenated over destinations */
    int *pcount, *ncount;
    int *scount, *sdispl, *rcount, *rdispl; /* items: particles + LET_PP a node */
    int64_t n_send, n_recv;
    /* the own sources' routing where the targets are not every rank's sources (4 x size
     * counts as partition.c's, and the caller's index of each source sent) */
    int *route;
    int64_t *route_order;
    int64_t n_route;
};

/* The unit icosahedron's vertices. */
static void icosahedron(double u[LET_PP][3])
{
    const double p = (1 + sqrt(5.0)) / 2, r = sqrt(1 + p * p);
    int k = 0;
    for (int s1 = -1; s1 <= 1; s1 += 2)
        for (int s2 = -1; s2 <= 1; s2 += 2) {
            const double a = s1 / r, b = s2 * p / r;
            const double v[3][3] = {{0, a, b}, {a, b, 0}, {b, 0, a}};
            for (int j = 0; j < 3; j++, k++)
                memcpy(u[k], v[j], sizeof v[j]);
        }
}

void fmk_mpi_let_free(fmk_mpi_state *s)
{
    fmk_mpi_let *l = s->let;
    if (!l)
        return;
    free(l->own), free(l->perm), free(l->node), free(l->pidx), free(l->nidx);
    free(l->pcount), free(l->route), free(l->route_order);
    free(l);
    s->let = NULL;
}

int fmk_mpi_let_applies(const fmk_mpi_state *s)
{
    return s->size > 1 && s->dim == 3 && s->method == FMK_METHOD_TREE && s->let_on;
}

typedef struct keyed {
    uint64_t key;
    int64_t index;
} keyed;

static int keyed_cmp(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* Sorted keys of n points (NULL: out of memory). */
static keyed *sorted_keys(const double *x, int64_t n, const double lo[3], const double hi[3])
{
    keyed *k = malloc((size_t)(n > 0 ? n : 1) * sizeof *k);
    if (!k)
        return NULL;
    const double scale = fmk_mpi_morton_scale(3, lo, hi);
    for (int64_t i = 0; i < n; i++)
        k[i].key = fmk_mpi_morton(x + 3 * i, 3, lo, scale), k[i].index = i;
    qsort(k, (size_t)n, sizeof *k, keyed_cmp);
    return k;
}

static void node_box(let_node *nd, const double *x, const int64_t *perm)
{
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int64_t k = nd->begin; k < nd->end; k++)
        for (int d = 0; d < 3; d++) {
            const double v = x[3 * perm[k] + d];
            lo[d] = v < lo[d] ? v : lo[d];
            hi[d] = v > hi[d] ? v : hi[d];
        }
    double a2 = 0;
    for (int d = 0; d < 3; d++) {
        nd->c[d] = 0.5 * (lo[d] + hi[d]);
        a2 += 0.25 * (hi[d] - lo[d]) * (hi[d] - lo[d]);
    }
    nd->a = sqrt(a2);
}

/* The octree of the sorted keys: breadth first, so children are consecutive and after their
 * parent. -1: out of memory. */
static int build_tree(fmk_mpi_let *l, const keyed *k)
{
    int64_t cap = 64;
    l->node = malloc((size_t)cap * sizeof *l->node);
    int8_t *level = malloc((size_t)cap);
    if (!l->node || !level)
        return free(level), -1;
    l->node[0] = (let_node){0, l->n_own, 0, 0, {0, 0, 0}, 0};
    level[0] = 0;
    int64_t n = 1;
    for (int64_t i = 0; i < n; i++) {
        let_node *nd = &l->node[i];
        node_box(nd, l->own, l->perm);
        if (nd->end - nd->begin <= LET_LEAF || level[i] >= 21)
            continue;
        if (n + 8 > cap) {
            cap *= 2;
            let_node *nn = realloc(l->node, (size_t)cap * sizeof *nn);
            int8_t *nl = realloc(level, (size_t)cap);
            if (nn)
                l->node = nn;
            if (nl)
                level = nl;
            if (!nn || !nl || cap > INT32_MAX)
                return free(level), -1;
            nd = &l->node[i];
        }
        const int shift = 3 * (20 - level[i]);
        nd->child = (int32_t)n;
        for (int64_t b = nd->begin; b < nd->end;) {
            const unsigned digit = (unsigned)(k[b].key >> shift) & 7u;
            int64_t e = b;
            while (e < nd->end && ((unsigned)(k[e].key >> shift) & 7u) == digit)
                e++;
            l->node[n] = (let_node){b, e, 0, 0, {0, 0, 0}, 0};
            level[n] = (int8_t)(level[i] + 1);
            n++, nd->n_child++;
            b = e;
        }
    }
    free(level);
    l->n_node = (int32_t)n;
    return 0;
}

/* The box of the targets k[b..e) into box (lo, hi). */
static void run_box(const double *t, const keyed *k, int64_t b, int64_t e, double *box)
{
    for (int d = 0; d < 3; d++)
        box[d] = INFINITY, box[3 + d] = -INFINITY;
    for (int64_t j = b; j < e; j++)
        for (int d = 0; d < 3; d++) {
            const double v = t[3 * k[j].index + d];
            box[d] = v < box[d] ? v : box[d];
            box[3 + d] = v > box[3 + d] ? v : box[3 + d];
        }
}

/* The boxes of this rank's targets (at most LET_BOXES, 6 doubles each: lo, hi): the leaves of
 * the targets' octree (in key order) with at most nt / LET_BOXES_SPLIT targets each, so that
 * dense regions get small boxes. Returns the count, -1 when out of memory. */
static int domain_boxes(const double *t, int64_t nt, const double lo[3], const double hi[3],
                        double *box)
{
    if (nt == 0)
        return 0;
    keyed *k = sorted_keys(t, nt, lo, hi);
    if (!k)
        return -1;
    const int64_t most = nt / LET_BOXES_SPLIT > 1 ? nt / LET_BOXES_SPLIT : 1;
    int nb = 0;
    /* depth-first over (begin, end, level), children in key order */
    struct {
        int64_t b, e;
        int level;
    } stack[8 * 22];
    int top = 0;
    stack[top].b = 0, stack[top].e = nt, stack[top++].level = 0;
    while (top > 0) {
        const int64_t b = stack[top - 1].b, e = stack[top - 1].e;
        const int level = stack[--top].level;
        if (e - b <= most || level >= 21 || nb + top + 8 >= LET_BOXES) {
            run_box(t, k, b, e, box + 6 * nb++);
            continue;
        }
        const int shift = 3 * (20 - level);
        int64_t cut[9], nc = 0;
        for (int64_t j = b; j < e;) { /* the runs of the next digit */
            const uint64_t digit = (k[j].key >> shift) & 7u;
            cut[nc++] = j;
            while (j < e && ((k[j].key >> shift) & 7u) == digit)
                j++;
        }
        cut[nc] = e;
        for (int64_t c = nc - 1; c >= 0; c--) /* pushed last first: popped in key order */
            stack[top].b = cut[c], stack[top].e = cut[c + 1], stack[top++].level = level + 1;
    }
    free(k);
    return nb;
}

/* The distance from x to the nearest of nb boxes. */
static double box_distance(const double *x, const double *box, int nb)
{
    double best = INFINITY;
    for (int b = 0; b < nb; b++) {
        double d2 = 0;
        for (int d = 0; d < 3; d++) {
            const double lo = box[6 * b + d], hi = box[6 * b + 3 + d];
            const double e = x[d] < lo ? lo - x[d] : x[d] > hi ? x[d] - hi : 0;
            d2 += e * e;
        }
        best = d2 < best ? d2 : best;
    }
    return sqrt(best);
}

/* The walk of the sending tree against one rank's boxes: appends the particles and the nodes
 * that rank needs. -1: out of memory. */
static int walk_for(const fmk_mpi_let *l, const double *box, int nb, double open, int64_t **pidx,
                    int64_t *np, int64_t *pcap, int32_t **nidx, int64_t *nn, int64_t *ncap)
{
    if (nb == 0 || l->n_own == 0)
        return 0;
    int32_t stack_small[256], *stack = stack_small;
    int64_t top = 0, scap = 256;
    stack[top++] = 0;
    int rc = 0;
    while (top > 0 && rc == 0) {
        const let_node *nd = &l->node[stack[--top]];
        const int64_t count = nd->end - nd->begin;
        if (count > LET_PP && box_distance(nd->c, box, nb) > nd->a * open) {
            if (*nn == *ncap) {
                int32_t *g = realloc(*nidx, (size_t)(*ncap * 2) * sizeof *g);
                if (!g) {
                    rc = -1;
                    break;
                }
                *nidx = g, *ncap *= 2;
            }
            (*nidx)[(*nn)++] = (int32_t)(nd - l->node);
        } else if (nd->n_child == 0) {
            while (*np + count > *pcap) {
                int64_t *g = realloc(*pidx, (size_t)(*pcap * 2) * sizeof *g);
                if (!g) {
                    rc = -1;
                    break;
                }
                *pidx = g, *pcap *= 2;
            }
            for (int64_t k = nd->begin; k < nd->end && rc == 0; k++)
                (*pidx)[(*np)++] = l->perm[k];
        } else {
            if (top + nd->n_child > scap) {
                int32_t *g = stack == stack_small ? malloc((size_t)scap * 2 * sizeof *g)
                                                  : realloc(stack, (size_t)scap * 2 * sizeof *g);
                if (!g) {
                    rc = -1;
                    break;
                }
                if (stack == stack_small)
                    memcpy(g, stack_small, sizeof stack_small);
                stack = g, scap *= 2;
            }
            for (int c = nd->n_child - 1; c >= 0; c--)
                stack[top++] = nd->child + c;
        }
    }
    if (stack != stack_small)
        free(stack);
    return rc;
}

/* Every destination's lists (pidx, nidx, pcount, ncount) from the allgathered boxes. */
static int make_lists(fmk_mpi_let *l, const fmk_mpi_state *s, const int *nbox, const double *boxes,
                      double theta)
{
    const int P = s->size;
    int64_t pcap = 1024, ncap = 256, np = 0, nn = 0;
    l->pidx = malloc((size_t)pcap * sizeof *l->pidx);
    l->nidx = malloc((size_t)ncap * sizeof *l->nidx);
    if (!l->pidx || !l->nidx)
        return -1;
    const double open = 1 + 1 / theta;
    int64_t first = 0;
    for (int r = 0; r < P; r++) {
        const int64_t p0 = np, n0 = nn;
        if (r != s->rank && walk_for(l, boxes + 6 * first, nbox[r], open, &l->pidx, &np, &pcap,
                                     &l->nidx, &nn, &ncap) != 0)
            return -1;
        first += nbox[r];
        if (np - p0 + LET_PP * (nn - n0) > INT_MAX)
            return -1;
        l->pcount[r] = (int)(np - p0), l->ncount[r] = (int)(nn - n0);
        l->scount[r] = l->pcount[r] + LET_PP * l->ncount[r];
    }
    return 0;
}

static fmk_status agree(fmk_plan *plan, const fmk_mpi_state *s, int ok, const char *what)
{
    fmk_status st =
        ok ? FMK_OK : fmk_plan_hook_error(plan, FMK_ERR_NOMEM, what ? what : "out of host memory");
    return fmk_mpi_agree(plan, s->comm, s->rank, st);
}

/* The own sources where the targets are not every rank's sources: each to the owner of its
 * key's run (the targets' splitters), coordinates into l->own. */
static fmk_status route_sources(fmk_plan *plan, fmk_mpi_state *s, fmk_mpi_let *l, int64_t ns,
                                const double *x, const double lo[3], const double hi[3])
{
    const int P = s->size;
    keyed *k = sorted_keys(x, ns, lo, hi);
    l->route = calloc((size_t)P * 4, sizeof *l->route);
    l->route_order = malloc((size_t)(ns > 0 ? ns : 1) * sizeof *l->route_order);
    double *send = malloc((size_t)(ns > 0 ? ns : 1) * 3 * sizeof *send);
    fmk_status st = agree(plan, s, k && l->route && l->route_order && send, NULL);
    if (st != FMK_OK)
        return free(k), free(send), st;
    int *sc = l->route, *sd = sc + P, *rc = sc + 2 * P, *rd = sc + 3 * P;
    int dest = 0;
    for (int64_t i = 0; i < ns; i++) {
        while (dest < P - 1 && fmk_mpi_at_or_after_split(s, dest, k[i].key))
            dest++;
        sc[dest]++;
        l->route_order[i] = k[i].index;
        memcpy(send + 3 * i, x + 3 * k[i].index, 3 * sizeof(double));
    }
    free(k);
    l->n_route = ns;
    MPI_Alltoall(sc, 1, MPI_INT, rc, 1, MPI_INT, s->comm);
    int64_t nr = 0;
    for (int r = 0; r < P; r++) {
        sd[r] = r ? sd[r - 1] + sc[r - 1] : 0;
        rd[r] = (int)nr;
        nr += rc[r];
    }
    l->own = malloc((size_t)(nr > 0 ? nr : 1) * 3 * sizeof *l->own);
    if ((st = agree(plan, s, l->own != NULL && nr <= INT_MAX, NULL)) != FMK_OK)
        return free(send), st;
    MPI_Datatype pt;
    MPI_Type_contiguous(3, MPI_DOUBLE, &pt);
    MPI_Type_commit(&pt);
    MPI_Alltoallv(send, sc, sd, pt, l->own, rc, rd, pt, s->comm);
    MPI_Type_free(&pt);
    free(send);
    l->n_own = nr;
    return FMK_OK;
}

/* The positions of what this rank sends, item by item (particles, then LET_PP a node). */
static void send_positions(const fmk_mpi_let *l, int P, double *out)
{
    double u[LET_PP][3];
    icosahedron(u);
    int64_t ip = 0, in = 0, o = 0;
    for (int r = 0; r < P; r++) {
        for (int k = 0; k < l->pcount[r]; k++, ip++, o++)
            memcpy(out + 3 * o, l->own + 3 * l->pidx[ip], 3 * sizeof(double));
        for (int k = 0; k < l->ncount[r]; k++, in++) {
            const let_node *nd = &l->node[l->nidx[in]];
            for (int j = 0; j < LET_PP; j++, o++)
                for (int d = 0; d < 3; d++)
                    out[3 * o + d] = nd->c[d] + nd->a * u[j][d];
        }
    }
}

fmk_status fmk_mpi_let_setup(fmk_plan *plan, fmk_mpi_state *s, int64_t ns, const double *sources,
                             int all_self, const double *targets, int64_t nt, const double lo[3],
                             const double hi[3], double theta, double **let_sources,
                             int64_t *n_let_sources)
{
    const int P = s->size;
    *let_sources = NULL, *n_let_sources = 0;
    fmk_mpi_let_free(s);
    fmk_mpi_let *l = calloc(1, sizeof *l);
    s->let = l;
    if (l) {
        l->pcount = calloc((size_t)P * 6, sizeof *l->pcount);
        if (l->pcount) {
            l->ncount = l->pcount + P, l->scount = l->pcount + 2 * P;
            l->sdispl = l->pcount + 3 * P, l->rcount = l->pcount + 4 * P;
            l->rdispl = l->pcount + 5 * P;
        }
    }
    fmk_status st = agree(plan, s, l && l->pcount, NULL);
    if (st != FMK_OK)
        return st;
    if (all_self) { /* the own sources are the targets moved here */
        l->n_own = nt;
        l->own = malloc((size_t)(nt > 0 ? nt : 1) * 3 * sizeof *l->own);
        if (l->own)
            memcpy(l->own, targets, (size_t)nt * 3 * sizeof(double));
        if ((st = agree(plan, s, l->own != NULL, NULL)) != FMK_OK)
            return st;
    } else if ((st = route_sources(plan, s, l, ns, sources, lo, hi)) != FMK_OK) {
        return st;
    }
    /* the sending tree, this rank's boxes */
    keyed *k = sorted_keys(l->own, l->n_own, lo, hi);
    l->perm = malloc((size_t)(l->n_own > 0 ? l->n_own : 1) * sizeof *l->perm);
    int ok = k && l->perm;
    if (ok) {
        for (int64_t i = 0; i < l->n_own; i++)
            l->perm[i] = k[i].index;
        ok = build_tree(l, k) == 0;
    }
    free(k);
    double *mybox = malloc(6 * LET_BOXES * sizeof *mybox);
    const int nb = ok && mybox ? domain_boxes(targets, nt, lo, hi, mybox) : -1;
    int *nbox = malloc((size_t)P * 2 * sizeof *nbox);
    if ((st = agree(plan, s, ok && nb >= 0 && nbox, NULL)) != FMK_OK)
        return free(nbox), free(mybox), st;
    MPI_Allgather(&nb, 1, MPI_INT, nbox, 1, MPI_INT, s->comm);
    int total = 0;
    for (int r = 0; r < P; r++)
        nbox[P + r] = 6 * total, total += nbox[r];
    double *boxes = malloc((size_t)(total > 0 ? total : 1) * 6 * sizeof *boxes);
    int *c6 = malloc((size_t)P * sizeof *c6);
    if ((st = agree(plan, s, boxes && c6, NULL)) != FMK_OK)
        return free(nbox), free(boxes), free(mybox), free(c6), st;
    for (int r = 0; r < P; r++)
        c6[r] = 6 * nbox[r];
    MPI_Allgatherv(mybox, 6 * nb, MPI_DOUBLE, boxes, c6, nbox + P, MPI_DOUBLE, s->comm);
    free(c6), free(mybox);
    ok = make_lists(l, s, nbox, boxes, theta) == 0;
    free(nbox), free(boxes);
    if ((st = agree(plan, s, ok, "out of host memory walking the tree for the other ranks")) !=
        FMK_OK)
        return st;
    /* the positions: counts, then the items */
    MPI_Alltoall(l->scount, 1, MPI_INT, l->rcount, 1, MPI_INT, s->comm);
    int64_t sn = 0, rn = 0;
    for (int r = 0; r < P; r++) {
        l->sdispl[r] = (int)sn, l->rdispl[r] = (int)rn;
        sn += l->scount[r], rn += l->rcount[r];
    }
    l->n_send = sn, l->n_recv = rn;
    const int64_t n_src = l->n_own + rn;
    double *send = malloc((size_t)(sn > 0 ? sn : 1) * 3 * sizeof *send);
    double *src = malloc((size_t)(n_src > 0 ? n_src : 1) * 3 * sizeof *src);
    if ((st = agree(plan, s, send && src && sn <= INT_MAX && rn <= INT_MAX, NULL)) != FMK_OK)
        return free(send), free(src), st;
    send_positions(l, P, send);
    memcpy(src, l->own, (size_t)l->n_own * 3 * sizeof(double));
    MPI_Datatype pt;
    MPI_Type_contiguous(3, MPI_DOUBLE, &pt);
    MPI_Type_commit(&pt);
    MPI_Alltoallv(send, l->scount, l->sdispl, pt, src + 3 * l->n_own, l->rcount, l->rdispl, pt,
                  s->comm);
    MPI_Type_free(&pt);
    free(send);
    *let_sources = src, *n_let_sources = n_src;
    return FMK_OK;
}

int64_t fmk_mpi_let_own(const fmk_mpi_state *s)
{
    return s->let ? s->let->n_own : 0;
}

/* Each node's M, D[3], S[6] (xx yy zz xy xz yz) about its centre for nd vectors (q: the own
 * sources' charges, row per source), children first. */
static void moments(const fmk_mpi_let *l, int64_t nd, const double *q, double *mom)
{
    for (int32_t i = l->n_node - 1; i >= 0; i--) {
        const let_node *nd_ = &l->node[i];
        for (int64_t v = 0; v < nd; v++) {
            double *m = mom + ((size_t)i * (size_t)nd + (size_t)v) * 10;
            memset(m, 0, 10 * sizeof *m);
            if (nd_->n_child == 0) {
                for (int64_t k = nd_->begin; k < nd_->end; k++) {
                    const int64_t j = l->perm[k];
                    const double qq = q[j * nd + v];
                    const double x = l->own[3 * j] - nd_->c[0], y = l->own[3 * j + 1] - nd_->c[1],
                                 z = l->own[3 * j + 2] - nd_->c[2];
                    m[0] += qq, m[1] += qq * x, m[2] += qq * y, m[3] += qq * z;
                    m[4] += qq * x * x, m[5] += qq * y * y, m[6] += qq * z * z;
                    m[7] += qq * x * y, m[8] += qq * x * z, m[9] += qq * y * z;
                }
                continue;
            }
            for (int32_t c = nd_->child; c < nd_->child + nd_->n_child; c++) {
                const double *mc = mom + ((size_t)c * (size_t)nd + (size_t)v) * 10;
                const double t[3] = {l->node[c].c[0] - nd_->c[0], l->node[c].c[1] - nd_->c[1],
                                     l->node[c].c[2] - nd_->c[2]};
                const double M = mc[0], *D = mc + 1;
                m[0] += M;
                for (int d = 0; d < 3; d++)
                    m[1 + d] += D[d] + M * t[d];
                static const int ia[6] = {0, 1, 2, 0, 0, 1}, ib[6] = {0, 1, 2, 1, 2, 2};
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

/* Charges from the caller's order (v * n + i) to rows of nd at the owners, by the routing
 * counts c (4 x P) and the caller index of each item sent. src NULL: zero rows. */
static fmk_status route_rows(fmk_plan *plan, const fmk_mpi_state *s, const int *c,
                             const int64_t *order, int64_t n_send, int64_t n_caller, int64_t nd,
                             const double *q, double *out)
{
    const int P = s->size;
    double *send = malloc((size_t)(n_send > 0 ? n_send : 1) * (size_t)nd * sizeof *send);
    fmk_status st = agree(plan, s, send != NULL && nd <= INT_MAX, NULL);
    if (st != FMK_OK)
        return free(send), st;
    for (int64_t k = 0; k < n_send; k++)
        for (int64_t v = 0; v < nd; v++)
            send[k * nd + v] = q ? q[v * n_caller + order[k]] : 0;
    MPI_Datatype row;
    MPI_Type_contiguous((int)nd, MPI_DOUBLE, &row);
    MPI_Type_commit(&row);
    MPI_Alltoallv(send, c, c + P, row, out, c + 2 * P, c + 3 * P, row, s->comm);
    MPI_Type_free(&row);
    free(send);
    return FMK_OK;
}

fmk_status fmk_mpi_let_charges(fmk_plan *plan, fmk_mpi_state *s, int64_t nd, const double *charges,
                               int self, double **local_q, double **target_q)
{
    fmk_mpi_let *l = s->let;
    const int P = s->size;
    *local_q = NULL, *target_q = NULL;
    const int64_t n_own = l->n_own, n_all = n_own + l->n_recv, nl = s->n_local;
    const size_t snd = (size_t)nd;
    double *own_q = malloc((size_t)(n_own > 0 ? n_own : 1) * snd * sizeof *own_q);
    double *tq = malloc((size_t)(nl > 0 ? nl : 1) * snd * sizeof *tq);
    double *mom = malloc((size_t)(l->n_node > 0 ? l->n_node : 1) * snd * 10 * sizeof *mom);
    double *send = malloc((size_t)(l->n_send > 0 ? l->n_send : 1) * snd * sizeof *send);
    double *q = malloc((size_t)(n_all > 0 ? n_all : 1) * snd * sizeof *q);
    fmk_status st = agree(plan, s, own_q && tq && mom && send && q, NULL);
    if (st != FMK_OK)
        goto fail;
    /* the targets' own charges (where a target is its rank's source), and the sources' */
    const int *pc = s->part_counts;
    if ((st = route_rows(plan, s, pc, s->order, s->n_targets, s->n_sources, nd,
                         self ? charges : NULL, tq)) != FMK_OK)
        goto fail;
    if (l->route) {
        if ((st = route_rows(plan, s, l->route, l->route_order, l->n_route, s->n_sources, nd,
                             charges, own_q)) != FMK_OK)
            goto fail;
    } else {
        memcpy(own_q, tq, (size_t)n_own * snd * sizeof *own_q);
    }
    /* the rows to send: particles' charges, pseudo-charges */
    moments(l, nd, own_q, mom);
    double u[LET_PP][3];
    icosahedron(u);
    int64_t ip = 0, in = 0, o = 0;
    double qk[LET_PP];
    for (int r = 0; r < P; r++) {
        for (int k = 0; k < l->pcount[r]; k++, ip++, o++)
            memcpy(send + o * nd, own_q + l->pidx[ip] * nd, snd * sizeof *send);
        for (int k = 0; k < l->ncount[r]; k++, in++, o += LET_PP)
            for (int64_t v = 0; v < nd; v++) {
                const int32_t i = l->nidx[in];
                pseudo_charges(mom + ((size_t)i * snd + (size_t)v) * 10, l->node[i].a, u, qk);
                for (int j = 0; j < LET_PP; j++)
                    send[(o + j) * nd + v] = qk[j];
            }
    }
    double *rows = malloc((size_t)(n_all > 0 ? n_all : 1) * snd * sizeof *rows);
    double *tqv = malloc((size_t)(nl > 0 ? nl : 1) * snd * sizeof *tqv);
    if ((st = agree(plan, s, rows && tqv, NULL)) != FMK_OK) {
        free(rows), free(tqv);
        goto fail;
    }
    memcpy(rows, own_q, (size_t)n_own * snd * sizeof *rows);
    MPI_Datatype row;
    MPI_Type_contiguous((int)nd, MPI_DOUBLE, &row);
    MPI_Type_commit(&row);
    MPI_Alltoallv(send, l->scount, l->sdispl, row, rows + (size_t)n_own * snd, l->rcount, l->rdispl,
                  row, s->comm);
    MPI_Type_free(&row);
    for (int64_t j = 0; j < n_all; j++) /* rows to the plan's layout: vector after vector */
        for (int64_t v = 0; v < nd; v++)
            q[v * n_all + j] = rows[j * nd + v];
    for (int64_t j = 0; j < nl; j++)
        for (int64_t v = 0; v < nd; v++)
            tqv[v * nl + j] = tq[j * nd + v];
    free(rows), free(own_q), free(tq), free(mom), free(send);
    *local_q = q, *target_q = tqv;
    return FMK_OK;
fail:
    free(own_q), free(tq), free(mom), free(send), free(q);
    return st;
}
