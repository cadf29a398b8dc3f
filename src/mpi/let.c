/* let.c -- the distributed sources of a treecode plan, the exchanges (docs/distributed.md,
 * "Treecode: locally essential trees"; the sending tree is let_tree.c's).
 *
 * Each rank keeps the sources of its run of the space-filling curve (the targets' partition,
 * partition.c; the sources follow the same splitters) and sends every other rank r what r's
 * targets need of them: the nodes far from r's domain (the boxes of r's targets, allgathered)
 * as 12 pseudo-particles each, equal to the node up to the quadrupole, the rest as particles.
 * Rank r's local plan then has its own sources, the particles and the pseudo-particles
 * received as sources, and its targets: an ordinary plan of any backend, walked as usual. The
 * positions travel at set_points, the charges (the particles', the pseudo-particles' from this
 * evaluation's moments) at each evaluation. Volume per rank: the nodes and leaves near the
 * domain's surface, O(n^(2/3)), not the N sources of the replicated path. The 3D FMM takes
 * the same path with pseudo-particles of its order p (let_pseudo.c), for the smooth kernels
 * only beyond the distance where they are laplace's to eps (fmk_let_smooth_near). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hooks.h"
#include "mpi/let.h"

void fmk_mpi_let_free(fmk_mpi_state *s)
{
    fmk_mpi_let *l = s->let;
    if (!l)
        return;
    free(l->own), free(l->perm), free(l->xs), free(l->keys), free(l->node), free(l->pidx);
    free(l->nidx), free(l->pp_u), free(l->pp_w);
    free(l->pcount), free(l->route), free(l->route_order);
    free(l);
    s->let = NULL;
}

int fmk_mpi_let_applies(const fmk_mpi_state *s)
{
    /* the FMM: laplace, and the smooth kernels with their pseudo-particles kept beyond the
     * distance where the kernel is laplace's to eps (fmk_let_smooth_near) */
    const int fmm = s->method == FMK_METHOD_FMM &&
                    (s->kernel == FMK_KERNEL_LAPLACE || s->kernel == FMK_KERNEL_PLUMMER ||
                     s->kernel == FMK_KERNEL_REGULARIZED);
    return s->size > 1 && s->dim == 3 && (s->method == FMK_METHOD_TREE || fmm) && s->let_on;
}

static fmk_status agree(fmk_plan *plan, fmk_mpi_state *s, int ok, const char *what)
{
    fmk_status st =
        ok ? FMK_OK : fmk_plan_hook_error(plan, FMK_ERR_NOMEM, what ? what : "out of host memory");
    return fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st);
}

/* The own sources where the targets are not every rank's sources: each to the owner of its
 * key's run (the targets' splitters), coordinates into l->own. */
static fmk_status route_sources(fmk_plan *plan, fmk_mpi_state *s, fmk_mpi_let *l, int64_t ns,
                                const double *x, const double lo[3], const double hi[3])
{
    const int P = s->size;
    fmk_mpi_keyed *k = fmk_mpi_alloc((size_t)(ns > 0 ? ns : 1) * sizeof *k, NULL);
    if (k) {
        const double scale = fmk_mpi_morton_scale(3, lo, hi);
#pragma omp parallel for schedule(static) if (ns > 65536)
        for (int64_t i = 0; i < ns; i++)
            k[i].key = fmk_mpi_morton(x + 3 * i, 3, lo, scale), k[i].index = i;
        if (fmk_mpi_sort_on(s->local, k, ns, 63) != 0)
            free(k), k = NULL;
    }
    l->route = calloc((size_t)P * 4, sizeof *l->route);
    l->route_order = fmk_mpi_alloc((size_t)(ns > 0 ? ns : 1) * sizeof *l->route_order, NULL);
    double *send = fmk_mpi_alloc((size_t)(ns > 0 ? ns : 1) * 3 * sizeof *send, NULL);
    fmk_status st = agree(plan, s, k && l->route && l->route_order && send, NULL);
    if (st != FMK_OK)
        return free(k), free(send), st;
    int *sc = l->route, *sd = sc + P, *rc = sc + 2 * P, *rd = sc + 3 * P;
    int dest = 0;
    for (int64_t i = 0; i < ns; i++) {
        while (dest < P - 1 && fmk_mpi_at_or_after_split(s, dest, k[i].key))
            dest++;
        sc[dest]++;
    }
#pragma omp parallel for schedule(static) if (ns > 65536)
    for (int64_t i = 0; i < ns; i++) {
        l->route_order[i] = k[i].index;
        memcpy(send + 3 * i, x + 3 * k[i].index, 3 * sizeof(double));
    }
    free(k);
    l->n_route = ns;
    double t0 = MPI_Wtime();
    st = FMK_MPI(plan, &s->fault, MPI_Alltoall, (sc, 1, MPI_INT, rc, 1, MPI_INT, s->comm));
    s->stats.seconds_exchange_points += MPI_Wtime() - t0;
    if (st != FMK_OK)
        return free(send), st;
    int64_t nr = 0;
    for (int r = 0; r < P; r++) {
        sd[r] = r ? sd[r - 1] + sc[r - 1] : 0;
        rd[r] = (int)nr;
        nr += rc[r];
    }
    l->own = fmk_mpi_alloc((size_t)(nr > 0 ? nr : 1) * 3 * sizeof *l->own, NULL);
    if ((st = agree(plan, s, l->own != NULL && nr <= INT_MAX, NULL)) != FMK_OK)
        return free(send), st;
    t0 = MPI_Wtime();
    st = fmk_mpi_alltoallv_rows(plan, &s->fault, s->comm, send, sc, sd, l->own, rc, rd, 3,
                                MPI_DOUBLE);
    s->stats.seconds_exchange_points += MPI_Wtime() - t0;
    s->stats.bytes_sent_points += (int64_t)(ns - sc[s->rank]) * 24;
    free(send);
    l->n_own = nr;
    return st;
}

/* The positions of what this rank sends, item by item (particles, then n_pp a node). */
static void send_positions(const fmk_mpi_let *l, int P, double *out)
{
    const double *u = l->pp_u;
    int64_t ip = 0, in = 0, o = 0;
    for (int r = 0; r < P; r++) {
        for (int k = 0; k < l->pcount[r]; k++, ip++, o++)
            memcpy(out + 3 * o, l->own + 3 * l->pidx[ip], 3 * sizeof(double));
        for (int k = 0; k < l->ncount[r]; k++, in++) {
            const let_node *nd = &l->node[l->nidx[in]];
            for (int j = 0; j < l->n_pp; j++, o++)
                for (int d = 0; d < 3; d++)
                    out[3 * o + d] = nd->c[d] + nd->a * u[3 * j + d];
        }
    }
}

fmk_status fmk_mpi_let_setup(fmk_plan *plan, fmk_mpi_state *s, int64_t ns, const double *sources,
                             int all_self, double **targets, int64_t nt, const double lo[3],
                             const double hi[3], double theta, double **let_sources,
                             int64_t *n_let_sources)
{
    const int P = s->size;
    const double t_start = MPI_Wtime(), x_start = s->stats.seconds_exchange_points;
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
    int order = 0; /* the treecode's icosahedron; the FMM's order and opening from eps */
    double near = 0;
    if (s->method == FMK_METHOD_FMM) {
        fmk_info li;
        fmk_plan_info(s->local, &li);
        fmk_let_pseudo_choose(li.eps, &order, &theta);
        near = fmk_let_smooth_near(s->kernel, s->softening, li.eps);
    }
    fmk_status st = agree(plan, s, l && l->pcount && fmk_let_pseudo_setup(l, order) == 0, NULL);
    if (st != FMK_OK)
        return st;
    if (all_self) { /* the own sources are the targets moved here: the array is taken */
        l->n_own = nt;
        l->own = *targets;
        *targets = NULL;
    } else if ((st = route_sources(plan, s, l, ns, sources, lo, hi)) != FMK_OK) {
        return st;
    }
    /* the sending tree, this rank's boxes (their sorts on the local plan's GPU if it has one) */
    l->sorter = s->local;
    int ok = fmk_let_build_tree(l, lo, hi) == 0;
    double *mybox = malloc(6 * LET_BOXES * sizeof *mybox);
    const int nb =
        ok && mybox ? fmk_let_domain_boxes(l, all_self ? l->own : *targets, nt, lo, hi, mybox) : -1;
    free(l->keys);
    l->keys = NULL;
    int *nbox = malloc((size_t)P * 2 * sizeof *nbox);
    if ((st = agree(plan, s, ok && nb >= 0 && nbox, NULL)) != FMK_OK)
        return free(nbox), free(mybox), st;
    double t0 = MPI_Wtime();
    st = FMK_MPI(plan, &s->fault, MPI_Allgather, (&nb, 1, MPI_INT, nbox, 1, MPI_INT, s->comm));
    s->stats.seconds_exchange_points += MPI_Wtime() - t0;
    if (st != FMK_OK)
        return free(nbox), free(mybox), st;
    int total = 0;
    for (int r = 0; r < P; r++)
        nbox[P + r] = 6 * total, total += nbox[r];
    double *boxes = malloc((size_t)(total > 0 ? total : 1) * 6 * sizeof *boxes);
    int *c6 = malloc((size_t)P * sizeof *c6);
    if ((st = agree(plan, s, boxes && c6, NULL)) != FMK_OK)
        return free(nbox), free(boxes), free(mybox), free(c6), st;
    for (int r = 0; r < P; r++)
        c6[r] = 6 * nbox[r];
    t0 = MPI_Wtime();
    st = FMK_MPI(plan, &s->fault, MPI_Allgatherv,
                 (mybox, 6 * nb, MPI_DOUBLE, boxes, c6, nbox + P, MPI_DOUBLE, s->comm));
    s->stats.seconds_exchange_points += MPI_Wtime() - t0;
    s->stats.bytes_sent_points += (int64_t)nb * 48 * (P - 1);
    free(c6), free(mybox);
    if (st != FMK_OK)
        return free(nbox), free(boxes), st;
    ok = fmk_let_lists(l, s, nbox, boxes, theta, near) == 0;
    free(nbox), free(boxes);
    if ((st = agree(plan, s, ok, "out of host memory walking the tree for the other ranks")) !=
        FMK_OK)
        return st;
    /* the positions: counts, then the items */
    t0 = MPI_Wtime();
    st = FMK_MPI(plan, &s->fault, MPI_Alltoall,
                 (l->scount, 1, MPI_INT, l->rcount, 1, MPI_INT, s->comm));
    s->stats.seconds_exchange_points += MPI_Wtime() - t0;
    if (st != FMK_OK)
        return st;
    int64_t sn = 0, rn = 0;
    for (int r = 0; r < P; r++) {
        l->sdispl[r] = (int)sn, l->rdispl[r] = (int)rn;
        sn += l->scount[r], rn += l->rcount[r];
    }
    l->n_send = sn, l->n_recv = rn;
    const int64_t n_src = l->n_own + rn;
    double *send = fmk_mpi_alloc((size_t)(sn > 0 ? sn : 1) * 3 * sizeof *send, NULL);
    double *src = fmk_mpi_alloc((size_t)(n_src > 0 ? n_src : 1) * 3 * sizeof *src, NULL);
    if ((st = agree(plan, s, send && src && sn <= INT_MAX && rn <= INT_MAX, NULL)) != FMK_OK)
        return free(send), free(src), st;
    send_positions(l, P, send);
#pragma omp parallel for schedule(static) if (l->n_own > 65536)
    for (int64_t i = 0; i < l->n_own; i++)
        memcpy(src + 3 * i, l->own + 3 * i, 3 * sizeof(double));
    t0 = MPI_Wtime();
    st = fmk_mpi_alltoallv_rows(plan, &s->fault, s->comm, send, l->scount, l->sdispl,
                                src + 3 * l->n_own, l->rcount, l->rdispl, 3, MPI_DOUBLE);
    s->stats.seconds_exchange_points += MPI_Wtime() - t0;
    s->stats.bytes_sent_points += sn * 24;
    free(send);
    if (st != FMK_OK)
        return free(src), st;
    *let_sources = src, *n_let_sources = n_src;
    s->stats.seconds_tree += MPI_Wtime() - t_start - (s->stats.seconds_exchange_points - x_start);
    return FMK_OK;
}

int64_t fmk_mpi_let_own(const fmk_mpi_state *s)
{
    return s->let ? s->let->n_own : 0;
}

/* Charges from the caller's order (v * n + i) to rows of nd at the owners, by the routing
 * counts c (4 x P) and the caller index of each item sent (order NULL: the items stay, in the
 * caller's order). q NULL: zero rows. */
static fmk_status route_rows(fmk_plan *plan, fmk_mpi_state *s, const int *c, const int64_t *order,
                             int64_t n_send, int64_t n_caller, int64_t nd, const double *q,
                             double *out)
{
    const int P = s->size;
    if (!order) { /* the targets in place (partition.c): the caller's order, nothing moves */
#pragma omp parallel for schedule(static) if (n_send > 65536)
        for (int64_t k = 0; k < n_send; k++)
            for (int64_t v = 0; v < nd; v++)
                out[k * nd + v] = q ? q[v * n_caller + k] : 0;
        return agree(plan, s, 1, NULL);
    }
    double *send =
        fmk_mpi_scratch(s, FMK_MPI_ROWS, (size_t)(n_send > 0 ? n_send : 1) * (size_t)nd * 8);
    fmk_status st = agree(plan, s, send != NULL && nd <= INT_MAX, NULL);
    if (st != FMK_OK)
        return st;
#pragma omp parallel for schedule(static) if (n_send > 65536)
    for (int64_t k = 0; k < n_send; k++)
        for (int64_t v = 0; v < nd; v++)
            send[k * nd + v] = q ? q[v * n_caller + order[k]] : 0;
    const double t0 = MPI_Wtime();
    st = fmk_mpi_alltoallv_rows(plan, &s->fault, s->comm, send, c, c + P, out, c + 2 * P, c + 3 * P,
                                (int)nd, MPI_DOUBLE);
    s->stats.seconds_exchange_charges += MPI_Wtime() - t0;
    s->stats.bytes_sent_eval += (n_send - c[s->rank]) * nd * 8;
    return st;
}

fmk_status fmk_mpi_let_charges(fmk_plan *plan, fmk_mpi_state *s, int64_t nd, const double *charges,
                               int self, double **local_q, double **target_q)
{
    fmk_mpi_let *l = s->let;
    const int P = s->size;
    *local_q = NULL, *target_q = NULL;
    const int64_t n_own = l->n_own, n_all = n_own + l->n_recv, nl = s->n_local;
    const size_t snd = (size_t)nd;
    /* one vector: rows are the plan's layout, the kept sources' charges are written where the
     * local plan reads them and the received rows land after them; several: rows, then
     * vector after vector. (The buffers are the plan's, kept for the next evaluation.) */
    const int one = nd == 1;
    double *q = fmk_mpi_scratch(s, FMK_MPI_CHARGES, (size_t)(n_all > 0 ? n_all : 1) * snd * 8);
    double *tq = fmk_mpi_scratch(s, FMK_MPI_TARGET_Q, (size_t)(nl > 0 ? nl : 1) * snd * 8);
    double *own_q =
        one ? q : fmk_mpi_scratch(s, FMK_MPI_OWN_Q, (size_t)(n_own > 0 ? n_own : 1) * snd * 8);
    double *send =
        fmk_mpi_scratch(s, FMK_MPI_SEND, (size_t)(l->n_send > 0 ? l->n_send : 1) * snd * 8);
    fmk_status st = agree(plan, s, q && tq && own_q && send, NULL);
    if (st != FMK_OK)
        return st;
    /* the targets' own charges (where a target is its rank's source), and the sources' */
    const int *pc = s->part_counts;
    if ((st = route_rows(plan, s, pc, s->order, s->n_targets, s->n_sources, nd,
                         self ? charges : NULL, tq)) != FMK_OK)
        return st;
    if (l->route) {
        if ((st = route_rows(plan, s, l->route, l->route_order, l->n_route, s->n_sources, nd,
                             charges, own_q)) != FMK_OK)
            return st;
    } else { /* the own sources are the targets moved here */
        memcpy(own_q, tq, (size_t)n_own * snd * sizeof *own_q);
    }
    /* the rows to send: particles' charges, pseudo-charges */
    const double tm = MPI_Wtime();
    const int rows_ok = fmk_let_rows(l, P, nd, own_q, send) == 0;
    s->stats.seconds_moments += MPI_Wtime() - tm;
    if ((st = agree(plan, s, rows_ok, NULL)) != FMK_OK)
        return st;
    double *rows =
        one ? q : fmk_mpi_scratch(s, FMK_MPI_ROWS, (size_t)(n_all > 0 ? n_all : 1) * snd * 8);
    double *tqv =
        one ? tq : fmk_mpi_scratch(s, FMK_MPI_TARGET_QV, (size_t)(nl > 0 ? nl : 1) * snd * 8);
    if ((st = agree(plan, s, rows && tqv, NULL)) != FMK_OK)
        return st;
    if (!one)
        memcpy(rows, own_q, (size_t)n_own * snd * sizeof *rows);
    const double t1 = MPI_Wtime();
    st = fmk_mpi_alltoallv_rows(plan, &s->fault, s->comm, send, l->scount, l->sdispl,
                                rows + (size_t)n_own * snd, l->rcount, l->rdispl, (int)nd,
                                MPI_DOUBLE);
    s->stats.seconds_exchange_charges += MPI_Wtime() - t1;
    s->stats.bytes_sent_eval += l->n_send * nd * 8;
    if (st != FMK_OK)
        return st;
    if (!one) {
#pragma omp parallel for schedule(static) if (n_all > 65536)
        for (int64_t j = 0; j < n_all; j++) /* rows to the plan's layout: vector after vector */
            for (int64_t v = 0; v < nd; v++)
                q[v * n_all + j] = rows[j * nd + v];
#pragma omp parallel for schedule(static) if (nl > 65536)
        for (int64_t j = 0; j < nl; j++)
            for (int64_t v = 0; v < nd; v++)
                tqv[v * nl + j] = tq[j * nd + v];
    }
    *local_q = q, *target_q = tqv;
    return FMK_OK;
}
