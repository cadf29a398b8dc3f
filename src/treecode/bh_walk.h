/* bh_walk.h -- the treecode's CPU walks, written once and included by bh.c for each working
 * precision (REAL = double, float; RSQRT its 1/sqrt; BH(name) makes the function names), as
 * p2p.c includes p2p_tile.h. The terms themselves come from bh_terms.h, shared with the GPU.
 *
 * Both walks decide in double (centres, opening radii and target boxes are double), so fp32
 * and fp64 open exactly the same nodes; only the arithmetic of the terms differs.
 *
 * Group walk (FMK_WALK_GROUP): the targets of one group (consecutive in key order, with their
 * bounding box) walk the tree once with the next/more pointers; a node is accepted when the
 * box's distance to xc exceeds the opening radius, which holds for every target in the box, so
 * the group MAC is at least as strict as the per-target one. Accepted nodes and opened leaves
 * are copied into structure-of-arrays lists, then every target of the group sums the lists in
 * two `omp simd` loops (M2P, P2P) without branches. With the cell-to-group step (bh.c's
 * knob treecode.local) an accepted node far from the group's box goes instead into one Taylor expansion
 * about the box's centre (M2L, bh_local.h, vectorized over the nodes), which every target of the
 * group evaluates once (L2P).
 *
 * Stackless walk (FMK_WALK_STACKLESS, Nakasato Fig. 6): each target walks alone and adds each
 * term as it meets it. */

#include "treecode/bh_terms.h"
#include "treecode/bh_local.h"

/* Interaction lists of one group (one per thread, grown as needed). */
typedef struct BH(lists) {
    int64_t n_p, cap_p; /* sources of opened leaves */
    REAL *px, *py, *pz, *pq;
    int64_t n_c, cap_c; /* accepted nodes: centre and packed moments */
    REAL *c[3 + FMK_BH_MOMENTS];
    int64_t n_l, cap_l; /* accepted nodes for the group's expansion (as c) */
    REAL *l[3 + FMK_BH_MOMENTS];
    REAL *m2l; /* FMK_BH_LOCAL4 columns of BH_M2L_CHUNK: one chunk's M2L */
} BH(lists);

static void BH(lists_free)(BH(lists) * L)
{
    free(L->px), free(L->py), free(L->pz), free(L->pq);
    for (int k = 0; k < 3 + FMK_BH_MOMENTS; k++)
        free(L->c[k]), free(L->l[k]);
    free(L->m2l);
    memset(L, 0, sizeof *L);
}

static int BH(grow)(REAL **p, int64_t cap)
{
    REAL *q = realloc(*p, sizeof(REAL) * (size_t)cap);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

/* Makes room for `more` sources (or nodes); returns 0 or -1. */
static int BH(reserve_p)(BH(lists) * L, int64_t more)
{
    if (L->n_p + more <= L->cap_p)
        return 0;
    int64_t cap = 2 * L->cap_p > L->n_p + more ? 2 * L->cap_p : L->n_p + more + 256;
    if (BH(grow)(&L->px, cap) || BH(grow)(&L->py, cap) || BH(grow)(&L->pz, cap) ||
        BH(grow)(&L->pq, cap))
        return -1;
    L->cap_p = cap;
    return 0;
}

/* Makes room for one more node in a node list (c or l, with its count and capacity). */
static int BH(reserve_node)(REAL **list, int64_t n, int64_t *cap)
{
    if (n < *cap)
        return 0;
    int64_t c = 2 * *cap + 256;
    for (int k = 0; k < 3 + FMK_BH_MOMENTS; k++)
        if (BH(grow)(&list[k], c))
            return -1;
    *cap = c;
    return 0;
}

/* Appends node i to a node list: its packed moments from pack, its centre xc (double) as
 * xc - o, rounded once (o: the walk's origin, bh_walk_group). */
static void BH(push_node)(REAL **list, int64_t n, const REAL *pack, int32_t i, const double *xc,
                          const double *o)
{
    const REAL *p = pack + (3 + FMK_BH_MOMENTS) * (int64_t)i;
    for (int k = 0; k < 3; k++)
        list[k][n] = (REAL)(xc[3 * (int64_t)i + k] - o[k]);
    for (int k = 3; k < 3 + FMK_BH_MOMENTS; k++)
        list[k][n] = p[k];
}

/* Packs the moments for evaluation: per node xc (3) and M, D, S (FMK_BH_MOMENTS), in REAL. */
static void BH(pack)(const fmk_tree3d_moments *m, int64_t n_nodes, REAL *pack, int threads)
{
    const int w = 3 + FMK_BH_MOMENTS;
#pragma omp parallel for schedule(static) num_threads(threads) if (n_nodes > 4096)
    for (int64_t i = 0; i < n_nodes; i++) {
        REAL *p = pack + w * i;
        for (int k = 0; k < 3; k++)
            p[k] = (REAL)m->center[3 * i + k];
        p[3] = (REAL)m->monopole[i];
        for (int k = 0; k < 3; k++)
            p[4 + k] = (REAL)m->dipole[3 * i + k];
        for (int k = 0; k < 6; k++)
            p[7 + k] = (REAL)m->second[6 * i + k];
    }
}

/* The terms of bh_terms.h as values: the `omp simd` loops below call these, so no local of the
 * loop body has its address taken (that would make GCC keep it in memory, per lane, and give
 * up vectorizing); once inlined, the arrays here become registers. */
typedef struct BH(field) {
    REAL phi, gx, gy, gz;
} BH(field);

static inline BH(field)
    BH(m2p_value)(int order, REAL rx, REAL ry, REAL rz, REAL eps2, REAL m0, REAL m1, REAL m2,
                  REAL m3, REAL m4, REAL m5, REAL m6, REAL m7, REAL m8, REAL m9)
{
    const REAL m[FMK_BH_MOMENTS] = {m0, m1, m2, m3, m4, m5, m6, m7, m8, m9};
    REAL phi = 0, g[3] = {0, 0, 0};
    BH(m2p)(order, rx, ry, rz, eps2, m, &phi, g);
    BH(field) f = {phi, g[0], g[1], g[2]};
    return f;
}

static inline BH(field) BH(p2p_value)(REAL dx, REAL dy, REAL dz, REAL q, REAL eps2)
{
    REAL phi = 0, g[3] = {0, 0, 0};
    BH(p2p)(dx, dy, dz, q, eps2, &phi, g);
    BH(field) f = {phi, g[0], g[1], g[2]};
    return f;
}

/* M2L of order P (bh_local.h) into L, for the `omp simd` loop below. */
static inline __attribute__((always_inline)) void
BH(m2l_order)(int P, int order, REAL rx, REAL ry, REAL rz, REAL eps2, const REAL *m, REAL *L)
{
    if (P == 4)
        BH(m2l4)(order, rx, ry, rz, eps2, m, L);
    else if (P == 3)
        BH(m2l3)(order, rx, ry, rz, eps2, m, L);
    else
        BH(m2l2)(order, rx, ry, rz, eps2, m, L);
}

static inline __attribute__((always_inline)) int BH(local_size)(int P)
{
    return P == 4 ? FMK_BH_LOCAL4 : P == 3 ? FMK_BH_LOCAL3 : FMK_BH_LOCAL2;
}

/* Nodes translated by one pass of the M2L loop (its columns stay in cache). */
#define BH_M2L_CHUNK 128

/* M2L of nodes [j0, j0 + n) of list l into the rows of col (coefficient k of node j0 + j at
 * col[j * BH(local_size)(P) + k]), one node per SIMD lane. GCC's own vectorizer, not `omp simd`:
 * with `omp simd` GCC 12 keeps the moments' array in memory per lane and gives up. */
#define BH_M2L_LOOP(P, ORDER)                                                \
    _Pragma("GCC ivdep") for (int64_t j = 0; j < n; j++)                     \
    {                                                                        \
        const REAL m[FMK_BH_MOMENTS] = {m0[j], m1[j], m2[j], m3[j], m4[j],   \
                                        m5[j], m6[j], m7[j], m8[j], m9[j]};  \
        BH(m2l_order)(P, ORDER, c0 - lx[j], c1 - ly[j], c2 - lz[j], eps2, m, \
                      col + j * BH(local_size)(P));                          \
    }
#define BH_M2L_ORDERS(P)     \
    if (order == 2) {        \
        BH_M2L_LOOP(P, 2)    \
    } else if (order == 1) { \
        BH_M2L_LOOP(P, 1)    \
    } else {                 \
        BH_M2L_LOOP(P, 0)    \
    }

/* The cell-to-group step's M2L: sets Lexp (BH(local_size)(P) coefficients) to the sum of the
 * expansions about c of the nodes in L's l list. */
static FMK_TARGET_CLONES void BH(m2l_list)(const BH(lists) * L, int P, int order, REAL c0, REAL c1,
                                           REAL c2, REAL eps2, REAL *Lexp)
{
    const int nk = BH(local_size)(P);
    REAL *restrict col = L->m2l;
    for (int k = 0; k < nk; k++)
        Lexp[k] = 0;
    for (int64_t j0 = 0; j0 < L->n_l; j0 += BH_M2L_CHUNK) {
        const int64_t n = L->n_l - j0 < BH_M2L_CHUNK ? L->n_l - j0 : BH_M2L_CHUNK;
        const REAL *restrict lx = L->l[0] + j0, *restrict ly = L->l[1] + j0,
                             *restrict lz = L->l[2] + j0;
        const REAL *restrict m0 = L->l[3] + j0, *restrict m1 = L->l[4] + j0,
                             *restrict m2 = L->l[5] + j0, *restrict m3 = L->l[6] + j0,
                             *restrict m4 = L->l[7] + j0, *restrict m5 = L->l[8] + j0,
                             *restrict m6 = L->l[9] + j0, *restrict m7 = L->l[10] + j0,
                             *restrict m8 = L->l[11] + j0, *restrict m9 = L->l[12] + j0;
        if (P == 4) {
            BH_M2L_ORDERS(4)
        } else if (P == 3) {
            BH_M2L_ORDERS(3)
        } else {
            BH_M2L_ORDERS(2)
        }
        for (int64_t j = 0; j < n; j++)
#pragma omp simd
            for (int k = 0; k < nk; k++)
                Lexp[k] += col[j * nk + k];
    }
}
#undef BH_M2L_ORDERS
#undef BH_M2L_LOOP

/* Sums the lists at targets [0, nt) (coordinates tx, ty, tz) into out (4 doubles a target);
 * skip[t] is the list position of target t's own source (-1: none), whose charge is then taken
 * as qskip[t] instead: 0 for a source of its own, the rest of a coincident leaf's charge for a
 * target inside that leaf. */
#define BH_M2P_LOOP(ORDER)                                                                      \
    _Pragma("omp simd reduction(+ : phi, gx, gy, gz)") for (int64_t j = 0; j < nc; j++)         \
    {                                                                                           \
        BH(field)                                                                               \
        f = BH(m2p_value)(ORDER, y0 - cx[j], y1 - cy[j], y2 - cz[j], eps2, m0[j], m1[j], m2[j], \
                          m3[j], m4[j], m5[j], m6[j], m7[j], m8[j], m9[j]);                     \
        phi += f.phi, gx += f.gx, gy += f.gy, gz += f.gz;                                       \
    }

static FMK_TARGET_CLONES void BH(eval_lists)(const BH(lists) * L, int order, REAL eps2,
                                             const REAL *tx, const REAL *ty, const REAL *tz,
                                             int64_t nt, const int64_t *skip, const REAL *qskip,
                                             double *out)
{
    const int64_t np = L->n_p, nc = L->n_c;
    const REAL *restrict px = L->px, *restrict py = L->py, *restrict pz = L->pz,
                         *restrict pq = L->pq;
    const REAL *restrict cx = L->c[0], *restrict cy = L->c[1], *restrict cz = L->c[2];
    const REAL *restrict m0 = L->c[3], *restrict m1 = L->c[4], *restrict m2 = L->c[5],
                         *restrict m3 = L->c[6], *restrict m4 = L->c[7], *restrict m5 = L->c[8],
                         *restrict m6 = L->c[9], *restrict m7 = L->c[10], *restrict m8 = L->c[11],
                         *restrict m9 = L->c[12];
    for (int64_t t = 0; t < nt; t++) {
        const REAL y0 = tx[t], y1 = ty[t], y2 = tz[t];
        const int64_t sk = skip[t];
        const REAL qs = qskip[t];
        REAL phi = 0, gx = 0, gy = 0, gz = 0;
        if (order == 0) {
            BH_M2P_LOOP(0)
        } else if (order == 1) {
            BH_M2P_LOOP(1)
        } else {
            BH_M2P_LOOP(2)
        }
        double *o = out + 4 * t;
        o[0] = phi, o[1] = gx, o[2] = gy, o[3] = gz;
        phi = 0, gx = 0, gy = 0, gz = 0;
#pragma omp simd reduction(+ : phi, gx, gy, gz)
        for (int64_t j = 0; j < np; j++) {
            BH(field)
            f = BH(p2p_value)(y0 - px[j], y1 - py[j], y2 - pz[j], j == sk ? qs : pq[j], eps2);
            phi += f.phi, gx += f.gx, gy += f.gy, gz += f.gz;
        }
        o[0] += phi, o[1] += gx, o[2] += gy, o[3] += gz;
    }
}
#undef BH_M2P_LOOP

/* Adds the group's expansion Lexp of order P about c at targets [0, nt) to out (L2P). */
static void BH(l2p_group)(const REAL *Lexp, int P, REAL c0, REAL c1, REAL c2, const REAL *tx,
                          const REAL *ty, const REAL *tz, int64_t nt, double *out)
{
    for (int64_t t = 0; t < nt; t++) {
        REAL phi = 0, g[3] = {0, 0, 0};
        if (P == 4)
            BH(l2p4)(Lexp, tx[t] - c0, ty[t] - c1, tz[t] - c2, &phi, g);
        else if (P == 3)
            BH(l2p3)(Lexp, tx[t] - c0, ty[t] - c1, tz[t] - c2, &phi, g);
        else
            BH(l2p2)(Lexp, tx[t] - c0, ty[t] - c1, tz[t] - c2, &phi, g);
        double *o = out + 4 * t;
        o[0] += phi, o[1] += g[0], o[2] += g[1], o[3] += g[2];
    }
}

/* The interaction lists of group [g0, g1) (box: its targets' bounding box, c its centre):
 * walks the tree with the next/more pointers and puts each accepted node into L's M2P list c or,
 * for the cell-to-group step, its expansion's list l (farther than loc_r + a r_open from c), and
 * the sources of each opened leaf into L's p list (positions relative to o), with skip and
 * qskip of the group's targets (bh_walk_group); *n_self: the group's targets whose own source
 * is in the p list with charge 0 (a pair left out of fmk_info.interactions_p2p). Returns 0, or
 * -1 when out of memory. */
static int BH(group_lists)(const fmk_plan *plan, const tree_cpu *s, fmk_bh_local_step step,
                           int64_t g0, int64_t g1, const double *box, const double *c, double loc_r,
                           const double *o, BH(lists) * L, int64_t *skip, REAL *qskip,
                           int64_t *n_self)
{
    *n_self = 0;
    const fmk_tree3d *src = &s->src;
    const fmk_tree3d_moments *m = &s->mom;
    const REAL *sx = s->src_soa, *sy = sx + src->n_points, *sz = sy + src->n_points,
               *sq = sz + src->n_points;
    const REAL *pack = s->node_pack;
    const int self = plan->self;
    const int rel = sizeof(REAL) < sizeof(double);
    int32_t i = 0;
    while (i >= 0) {
        const double *xc = m->center + 3 * i;
        double d2 = 0;
        for (int k = 0; k < 3; k++) {
            double d = box[k] - xc[k] > xc[k] - box[3 + k] ? box[k] - xc[k] : xc[k] - box[3 + k];
            d = d > 0 ? d : 0;
            d2 += d * d;
        }
        if (d2 > m->r_open2[i]) { /* accepted: M2P, or M2L into the expansion */
            int to_loc = 0;
            if (step.order) {
                const double ex = xc[0] - c[0], ey = xc[1] - c[1], ez = xc[2] - c[2];
                const double d = sqrt(ex * ex + ey * ey + ez * ez) - loc_r;
                to_loc = d > 0 && d * d > step.a2 * m->r_open2[i];
            }
            if (to_loc ? BH(reserve_node)(L->l, L->n_l, &L->cap_l)
                       : BH(reserve_node)(L->c, L->n_c, &L->cap_c))
                return -1;
            if (to_loc)
                BH(push_node)(L->l, L->n_l++, pack, i, m->center, o);
            else
                BH(push_node)(L->c, L->n_c++, pack, i, m->center, o);
            i = src->next[i];
        } else if (src->more[i] < 0 && s->coincident[i]) {
            /* a leaf of identical points is one source of their total charge; a target
             * among them gets the total less its own charge */
            const int64_t b = src->begin[i], e = src->end[i];
            if (BH(reserve_p)(L, 1))
                return -1;
            const double q = m->monopole[i];
            const double *x = src->points + 3 * b;
            L->px[L->n_p] = (REAL)(x[0] - o[0]), L->py[L->n_p] = (REAL)(x[1] - o[1]);
            L->pz[L->n_p] = (REAL)(x[2] - o[2]);
            L->pq[L->n_p] = (REAL)q;
            if (self)
                for (int64_t u = (b > g0 ? b : g0); u < (e < g1 ? e : g1); u++)
                    skip[u - g0] = L->n_p, qskip[u - g0] = (REAL)(q - s->q_sorted[u]);
            L->n_p++;
            i = src->next[i];
        } else if (src->more[i] < 0) { /* opened leaf: P2P */
            const int64_t b = src->begin[i], e = src->end[i];
            if (BH(reserve_p)(L, e - b))
                return -1;
            if (rel) {
                const double *x = src->points + 3 * b;
                REAL *restrict px = L->px + L->n_p, *restrict py = L->py + L->n_p,
                               *restrict pz = L->pz + L->n_p;
#pragma omp simd
                for (int64_t j = 0; j < e - b; j++) {
                    px[j] = (REAL)(x[3 * j] - o[0]);
                    py[j] = (REAL)(x[3 * j + 1] - o[1]);
                    pz[j] = (REAL)(x[3 * j + 2] - o[2]);
                }
            } else {
                memcpy(L->px + L->n_p, sx + b, sizeof(REAL) * (size_t)(e - b));
                memcpy(L->py + L->n_p, sy + b, sizeof(REAL) * (size_t)(e - b));
                memcpy(L->pz + L->n_p, sz + b, sizeof(REAL) * (size_t)(e - b));
            }
            memcpy(L->pq + L->n_p, sq + b, sizeof(REAL) * (size_t)(e - b));
            if (self) { /* the group's own sources in this leaf: skip them by index */
                for (int64_t u = (b > g0 ? b : g0); u < (e < g1 ? e : g1); u++)
                    skip[u - g0] = L->n_p + (u - b);
                if ((e < g1 ? e : g1) > (b > g0 ? b : g0))
                    *n_self += (e < g1 ? e : g1) - (b > g0 ? b : g0);
            }
            L->n_p += e - b;
            i = src->next[i];
        } else {
            i = src->more[i];
        }
    }
    return 0;
}

/* The group walk over all groups; writes s->result (key order, working units) and the
 * interaction counts into count[0] (P2P pairs) and count[1] (nodes, per target: M2P and the
 * group's expansion alike), each group's from its lists' lengths. Returns 0, or -1 when a
 * thread ran out of memory for its lists (the caller's outputs are then untouched).
 *
 * Coordinates. In fp32 every position of a group's lists (targets, node centres, sources) is
 * taken relative to the origin o = the centre c of the group's box: the difference is formed
 * in double from the tree's double points (and the moments' double centres) and rounded
 * once, so a position carries an error of 2^-24 of its distance to c, not of the frame. A pair
 * y - x then errs by about 2^-24 (|y - c| + |x - c|): for the close pairs, which lie in or
 * near the group, the size of the group's cells, however wide the frame (frame coordinates
 * in float resolve only 2^-24 of the frame: two points 1e-5 of the frame apart had their
 * offset wrong by ~1e-3 relative). The per-pair work is unchanged; the conversion is per
 * group and source or node. fp64 keeps the frame's coordinates (o = 0): no rounding to
 * speak of, and the lists are plain copies. */
static int BH(walk_group)(const fmk_plan *plan, const tree_cpu *s, int64_t count[2])
{
    int64_t n_p2p = 0, n_far = 0;
    const fmk_tree3d *trg = plan->self ? &s->src : &s->trg;
    const REAL *tsoa = plan->self ? s->src_soa : s->trg_soa;
    const REAL *tx = tsoa, *ty = tx + trg->n_points, *tz = ty + trg->n_points;
    const int order = plan->opts.order;
    const REAL eps2 = (REAL)(plan->frame.softening * plan->frame.softening);
    const fmk_bh_local_step step = fmk_bh_local_step_of(plan);
    const int rel = sizeof(REAL) < sizeof(double); /* positions relative to the group's c */
    int failed = 0;
#pragma omp parallel num_threads(plan->threads) reduction(+ : n_p2p, n_far)
    {
        BH(lists) L;
        memset(&L, 0, sizeof L);
        int64_t skip[FMK_BH_GROUP_MAX];
        REAL qskip[FMK_BH_GROUP_MAX];
        REAL ux[FMK_BH_GROUP_MAX], uy[FMK_BH_GROUP_MAX], uz[FMK_BH_GROUP_MAX];
        double out[4 * FMK_BH_GROUP_MAX];
        REAL Lexp[FMK_BH_LOCAL4];
        if (step.order)
            L.m2l = malloc(sizeof(REAL) * FMK_BH_LOCAL4 * BH_M2L_CHUNK);
        if (step.order && !L.m2l) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 4)
        for (int64_t g = 0; g < s->n_groups; g++) {
            if (failed || fmk_interrupt_team(plan))
                continue;
            const int64_t g0 = s->group_begin[g], g1 = s->group_begin[g + 1];
            const double *box = s->group_box + 6 * g;
            for (int64_t t = 0; t < g1 - g0; t++)
                skip[t] = -1, qskip[t] = 0;
            L.n_p = L.n_c = L.n_l = 0;
            /* the cell-to-group step: an accepted node whose centre is farther than
             * a r_open + k R_g from the box's centre c goes into the group's expansion about c;
             * every target (within R_g of c) is outside its opening sphere (it was accepted)
             * and |y - c| / |xc - c| < 1 / k */
            double c[3], rg2 = 0;
            for (int k = 0; k < 3; k++) {
                c[k] = 0.5 * (box[k] + box[3 + k]);
                const double h = 0.5 * (box[3 + k] - box[k]);
                rg2 += h * h;
            }
            const double loc_r = step.k * sqrt(rg2);
            /* the origin of the lists' positions, and the targets relative to it */
            const double o[3] = {rel ? c[0] : 0, rel ? c[1] : 0, rel ? c[2] : 0};
            const REAL *yx = tx + g0, *yy = ty + g0, *yz = tz + g0;
            if (rel) {
                for (int64_t t = 0; t < g1 - g0; t++) {
                    const double *y = trg->points + 3 * (g0 + t);
                    ux[t] = (REAL)(y[0] - o[0]), uy[t] = (REAL)(y[1] - o[1]);
                    uz[t] = (REAL)(y[2] - o[2]);
                }
                yx = ux, yy = uy, yz = uz;
            }
            int64_t n_self = 0;
            const int bad =
                BH(group_lists)(plan, s, step, g0, g1, box, c, loc_r, o, &L, skip, qskip, &n_self);
            if (bad) {
#pragma omp atomic write
                failed = 1;
                continue;
            }
            n_p2p += (g1 - g0) * L.n_p - n_self;
            n_far += (g1 - g0) * (L.n_c + L.n_l);
            BH(eval_lists)(&L, order, eps2, yx, yy, yz, g1 - g0, skip, qskip, out);
            if (L.n_l > 0) {
                const REAL cr[3] = {(REAL)(c[0] - o[0]), (REAL)(c[1] - o[1]), (REAL)(c[2] - o[2])};
                BH(m2l_list)(&L, step.order, order, cr[0], cr[1], cr[2], eps2, Lexp);
                BH(l2p_group)(Lexp, step.order, cr[0], cr[1], cr[2], yx, yy, yz, g1 - g0, out);
            }
            /* into the plan's buffer (key order, working units): the caller's arrays are
             * written by tree_eval only when every group has succeeded */
            memcpy(s->result + 4 * g0, out, sizeof(double) * 4 * (size_t)(g1 - g0));
        }
        BH(lists_free)(&L);
    }
    count[0] = n_p2p, count[1] = n_far;
    return failed ? -1 : 0;
}

/* The P2P terms of one leaf at one target (skip: the leaf-relative index of the target's own
 * source, -1 for none). */
static FMK_TARGET_CLONES void BH(leaf_p2p)(const REAL *restrict sx, const REAL *restrict sy,
                                           const REAL *restrict sz, const REAL *restrict sq,
                                           int64_t n, const REAL *y, int64_t skip, REAL eps2,
                                           double *acc)
{
    const REAL y0 = y[0], y1 = y[1], y2 = y[2];
    REAL phi = 0, gx = 0, gy = 0, gz = 0;
#pragma omp simd reduction(+ : phi, gx, gy, gz)
    for (int64_t j = 0; j < n; j++) {
        BH(field)
        f = BH(p2p_value)(y0 - sx[j], y1 - sy[j], y2 - sz[j], j == skip ? 0 : sq[j], eps2);
        phi += f.phi, gx += f.gx, gy += f.gy, gz += f.gz;
    }
    acc[0] += phi, acc[1] += gx, acc[2] += gy, acc[3] += gz;
}

/* The P2P terms of one leaf at one target y from the tree's double points x (n of them,
 * interleaved): each offset y - x formed in double and rounded once (fp32: as the group walk's
 * relative positions, an error of 2^-24 of the pair's distance, not of the frame). */
static FMK_TARGET_CLONES void BH(leaf_p2p_rel)(const double *restrict x, const REAL *restrict sq,
                                               int64_t n, const double *y, int64_t skip, REAL eps2,
                                               double *acc)
{
    const double y0 = y[0], y1 = y[1], y2 = y[2];
    REAL phi = 0, gx = 0, gy = 0, gz = 0;
#pragma omp simd reduction(+ : phi, gx, gy, gz)
    for (int64_t j = 0; j < n; j++) {
        BH(field)
        f = BH(p2p_value)((REAL)(y0 - x[3 * j]), (REAL)(y1 - x[3 * j + 1]),
                          (REAL)(y2 - x[3 * j + 2]), j == skip ? 0 : sq[j], eps2);
        phi += f.phi, gx += f.gx, gy += f.gy, gz += f.gz;
    }
    acc[0] += phi, acc[1] += gx, acc[2] += gy, acc[3] += gz;
}

/* The stackless walk (Nakasato Fig. 6): one walk per target with next/more, each term added as
 * the walk meets it. Offsets target - centre and target - source are formed in double and
 * rounded once (in fp64 that is what the frame's coordinates gave). The interaction counts
 * into count[0] (P2P pairs, a target's own source left out) and count[1] (M2P terms). */
static void BH(walk_stackless)(const fmk_plan *plan, const tree_cpu *s, double *pot, double *grad,
                               int64_t count[2])
{
    int64_t n_p2p = 0, n_far = 0;
    const fmk_tree3d *src = &s->src;
    const fmk_tree3d *trg = plan->self ? &s->src : &s->trg;
    const fmk_tree3d_moments *m = &s->mom;
    const REAL *sx = s->src_soa, *sy = sx + src->n_points, *sz = sy + src->n_points,
               *sq = sz + src->n_points;
    const REAL *pack = s->node_pack;
    const int order = plan->opts.order, self = plan->self;
    const REAL eps2 = (REAL)(plan->frame.softening * plan->frame.softening);
    const double ps = plan->frame.pot_scale;
    const int64_t nt = trg->n_points;
#pragma omp parallel for schedule(dynamic, 64) num_threads(plan->threads) \
    reduction(+ : n_p2p, n_far)
    for (int64_t t = 0; t < nt; t++) {
        if (fmk_interrupt_team(plan)) /* the caller asked to stop: skip the remaining targets */
            continue;
        const double *y = trg->points + 3 * t;
        const REAL yr[3] = {(REAL)y[0], (REAL)y[1], (REAL)y[2]};
        double acc[4] = {0, 0, 0, 0};
        int32_t i = 0;
        while (i >= 0) {
            const double *xc = m->center + 3 * i;
            double dx = y[0] - xc[0], dy = y[1] - xc[1], dz = y[2] - xc[2];
            if (dx * dx + dy * dy + dz * dz > m->r_open2[i]) {
                const REAL *p = pack + (3 + FMK_BH_MOMENTS) * (int64_t)i;
                REAL phi = 0, g[3] = {0, 0, 0};
                BH(m2p)(order, (REAL)dx, (REAL)dy, (REAL)dz, eps2, p + 3, &phi, g);
                acc[0] += phi, acc[1] += g[0], acc[2] += g[1], acc[3] += g[2];
                n_far++;
                i = src->next[i];
            } else if (src->more[i] < 0 && s->coincident[i]) { /* as in the group walk */
                const int64_t b = src->begin[i], e = src->end[i];
                const double q =
                    self && t >= b && t < e ? m->monopole[i] - s->q_sorted[t] : m->monopole[i];
                const double *x = src->points + 3 * b;
                BH(field)
                f = BH(p2p_value)((REAL)(y[0] - x[0]), (REAL)(y[1] - x[1]), (REAL)(y[2] - x[2]),
                                  (REAL)q, eps2);
                acc[0] += f.phi, acc[1] += f.gx, acc[2] += f.gy, acc[3] += f.gz;
                n_p2p++;
                i = src->next[i];
            } else if (src->more[i] < 0) {
                const int64_t b = src->begin[i], e = src->end[i];
                int64_t sk = self && t >= b && t < e ? t - b : -1;
                n_p2p += e - b - (sk >= 0);
                if (sizeof(REAL) < sizeof(double))
                    BH(leaf_p2p_rel)(src->points + 3 * b, sq + b, e - b, y, sk, eps2, acc);
                else
                    BH(leaf_p2p)(sx + b, sy + b, sz + b, sq + b, e - b, yr, sk, eps2, acc);
                i = src->next[i];
            } else {
                i = src->more[i];
            }
        }
        const int64_t c = trg->order[t];
        if (pot)
            pot[c] = acc[0] * ps;
        if (grad)
            for (int k = 0; k < 3; k++)
                grad[3 * c + k] = acc[1 + k] * ps * ps;
    }
    count[0] = n_p2p, count[1] = n_far;
}
