/* partition.c -- the weighted space-filling-curve partition of a distributed plan's targets
 * (docs/distributed.md, "Partition").
 *
 * At set_points every target gets a key: its Morton key in the global box (21 bits an axis in
 * 3D, 16 in 2D: 32 bits), or, where every rank's targets are its sources and the kernel is
 * smooth with the direct sum, its global source index (so that each rank's share is a slice of
 * the gathered sources and the direct sum leaves out the self pair by index, bit for bit).
 * Ties are broken by the target's global index, so every target has its own place on the
 * curve and equal keys split exactly. P - 1 splitters cut the curve into P runs of equal
 * weight (weights: 1 a target), found by bisection: each round every rank counts its weight
 * below each candidate splitter and one MPI_Allreduce sums the counts. The targets then move to
 * their run's owner by MPI_Alltoallv (counts by MPI_Alltoall) with their global source index
 * (-1 for separate targets), and after an evaluation the results come back the same way, into
 * the caller's order. Failures (memory) are agreed before every collective call. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/hooks.h"
#include "tree/morton.h"
#include "mpi/mpi_internal.h"

/* A target: its key and the caller's index; its global index (the tie-break) is first_id +
 * index, so that the stable sort by key from the caller's order sorts by (key, global index). */
typedef fmk_mpi_keyed item;

/* (key, id) < (k, i) */
static int below(const item *a, int64_t first_id, uint64_t k, int64_t i)
{
    return a->key < k || (a->key == k && first_id + a->index < i);
}

/* The count of items (sorted) below (k, i). */
static int64_t lower_bound(const item *it, int64_t n, int64_t first_id, uint64_t k, int64_t i)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (below(&it[mid], first_id, k, i))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

double fmk_mpi_morton_scale(int dim, const double lo[3], const double hi[3])
{
    const int bits = dim == 3 ? 21 : 16;
    double w = 0;
    for (int k = 0; k < dim; k++)
        w = hi[k] - lo[k] > w ? hi[k] - lo[k] : w;
    return w > 0 ? (double)(1u << bits) / w : 0;
}

uint64_t fmk_mpi_morton(const double *x, int dim, const double lo[3], double scale)
{
    const int bits = dim == 3 ? 21 : 16;
    const double top = (double)((1u << bits) - 1);
    uint32_t c[3] = {0, 0, 0};
    for (int k = 0; k < dim; k++) {
        const double t = (x[k] - lo[k]) * scale;
        c[k] = t <= 0 ? 0 : t >= top ? (uint32_t)top : (uint32_t)t;
    }
    /* bit b of axis k at 3 b + 2 - k (2 b + 1 - k in 2D): axis 0 the highest of each group */
    if (dim == 3)
        return fmk_spread3(c[0]) << 2 | fmk_spread3(c[1]) << 1 | fmk_spread3(c[2]);
    return fmk_spread2(c[0]) << 1 | fmk_spread2(c[1]);
}

void fmk_mpi_partition_free(fmk_mpi_state *s)
{
    free(s->part_counts);
    free(s->order);
    free(s->local_src);
    free(s->split_key);
    s->part_counts = NULL, s->order = NULL, s->local_src = NULL, s->split_key = NULL;
    s->moved = 0;
    s->n_local = 0;
}

/* Bisection, for every splitter j (1..P-1) at once, of the least (k, i) whose weight below is
 * at least want[j]: over keys k in [0, kmax] with i = 0, then over i in [0, imax] with the key
 * before. lo, hi, count: P - 1 each. The loop's course depends on reduced sums only, so every
 * rank makes the same MPI calls. */
/* The weight of the first j sorted items: j, or prefix[j] (prefix sums of the weights). */
static int64_t weight_below(const int64_t *prefix, int64_t j)
{
    return prefix ? prefix[j] : j;
}

static fmk_status bisect(fmk_plan *plan, fmk_mpi_state *s, int nsp, const item *it, int64_t n,
                         int64_t first_id, const int64_t *prefix, const int64_t *want,
                         uint64_t kmax, int64_t imax, uint64_t *sk, int64_t *si, uint64_t *lo,
                         uint64_t *hi, int64_t *count)
{
    for (int phase = 0; phase < 2; phase++) {
        for (int j = 0; j < nsp; j++) {
            lo[j] = 0;
            /* phase 1: the key before the first key that reaches want; none: (0, 0) */
            hi[j] = phase == 0 ? kmax : sk[j] > 0 ? (uint64_t)imax : 0;
            if (phase == 1)
                sk[j] = sk[j] > 0 ? sk[j] - 1 : 0;
        }
        for (;;) {
            int active = 0;
            for (int j = 0; j < nsp; j++) {
                count[j] = 0;
                if (lo[j] < hi[j]) {
                    const uint64_t mid = lo[j] + (hi[j] - lo[j]) / 2;
                    count[j] = weight_below(
                        prefix, phase == 0 ? lower_bound(it, n, first_id, mid, 0)
                                           : lower_bound(it, n, first_id, sk[j], (int64_t)mid));
                    active = 1;
                }
            }
            if (!active)
                break;
            const fmk_status st =
                FMK_MPI(plan, &s->fault, MPI_Allreduce,
                        (MPI_IN_PLACE, count, nsp, MPI_INT64_T, MPI_SUM, s->comm));
            if (st != FMK_OK)
                return st;
            for (int j = 0; j < nsp; j++)
                if (lo[j] < hi[j]) {
                    const uint64_t mid = lo[j] + (hi[j] - lo[j]) / 2;
                    if (count[j] >= want[j])
                        hi[j] = mid;
                    else
                        lo[j] = mid + 1;
                }
        }
        for (int j = 0; j < nsp; j++) {
            if (phase == 0)
                sk[j] = lo[j];
            else
                si[j] = (int64_t)lo[j];
        }
    }
    return FMK_OK;
}

/* The items of this rank's targets, sorted by (key, id); NULL when out of memory. */
static item *make_items(const fmk_mpi_state *s, int64_t nt, const double *x, int64_t src_offset,
                        int by_index, const double lo[3], const double hi[3])
{
    item *it = fmk_mpi_alloc((size_t)(nt > 0 ? nt : 1) * sizeof *it, NULL);
    if (!it)
        return NULL;
    const int dim = s->dim;
    const double scale = fmk_mpi_morton_scale(dim, lo, hi);
#pragma omp parallel for schedule(static) if (nt > 65536)
    for (int64_t i = 0; i < nt; i++) {
        it[i].key =
            by_index ? (uint64_t)(src_offset + i) : fmk_mpi_morton(x + dim * i, dim, lo, scale);
        it[i].index = i;
    }
    if (fmk_mpi_sort_on(s->local, it, nt, 64) != 0)
        return free(it), NULL;
    return it;
}

/* Each target's weight from the last evaluation: the cost a target of the rank that evaluated
 * it (1024 at the ranks' mean), where this rank's targets are as many as then and every rank
 * measured; NULL (1 a target) otherwise, or when out of memory. */
static int64_t *target_weights(const fmk_mpi_state *s, int64_t nt)
{
    if (!s->owner || s->owner_n != nt || nt == 0)
        return NULL;
    double mean = 0;
    for (int r = 0; r < s->size; r++) {
        if (!(s->cost[r] > 0))
            return NULL;
        mean += s->cost[r] / s->size;
    }
    int64_t *w = fmk_mpi_alloc((size_t)nt * sizeof *w, NULL);
    for (int64_t i = 0; w && i < nt; i++) {
        const double c = 1024 * s->cost[s->owner[i]] / mean;
        w[i] = c < 1 ? 1 : c > 1e6 ? 1000000 : (int64_t)(c + 0.5);
    }
    return w;
}

/* The owners of targets that stay where they are (no partition): this rank. */
static fmk_status keep_owners(fmk_mpi_state *s, int64_t nt)
{
    s->owner = fmk_mpi_alloc((size_t)(nt > 0 ? nt : 1) * sizeof *s->owner, NULL);
    s->owner_n = s->owner ? nt : 0;
    for (int64_t i = 0; s->owner && i < nt; i++)
        s->owner[i] = s->rank;
    return FMK_OK;
}

/* order[displ[r] ..] = the indices i of owner[i] = r, increasing: a stable counting sort, one
 * histogram a thread over static chunks. */
static void group_by_owner(const int *owner, int64_t n, int P, const int *displ, int64_t *order)
{
    int threads = 1;
#ifdef _OPENMP
    threads = n > 65536 ? omp_get_max_threads() : 1;
#endif
    threads = threads > 64 ? 64 : threads;
    int64_t *next = malloc((size_t)threads * (size_t)P * sizeof *next);
    if (!next) /* the serial pass needs no memory */
        threads = 1;
    if (threads == 1) {
        if (next) { /* P counters */
            for (int r = 0; r < P; r++)
                next[r] = displ[r];
            for (int64_t i = 0; i < n; i++)
                order[next[owner[i]]++] = i;
        } else { /* no memory for them: a pass a rank */
            int64_t filled = 0;
            for (int r = 0; r < P; r++)
                for (int64_t i = 0; i < n; i++)
                    if (owner[i] == r)
                        order[filled++] = i;
        }
        free(next);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        const int64_t b = n * t / threads, e = n * (t + 1) / threads;
        int64_t *h = next + (size_t)t * (size_t)P;
        for (int r = 0; r < P; r++)
            h[r] = 0;
        for (int64_t i = b; i < e; i++)
            h[owner[i]]++;
#pragma omp barrier
#pragma omp single
        for (int r = 0; r < P; r++) { /* rank by rank, thread by thread: stable */
            int64_t at = displ[r];
            for (int u = 0; u < threads; u++) {
                const int64_t c = next[(size_t)u * (size_t)P + (size_t)r];
                next[(size_t)u * (size_t)P + (size_t)r] = at;
                at += c;
            }
        }
        for (int64_t i = b; i < e; i++)
            order[h[owner[i]]++] = i;
    }
    free(next);
}

/* The partition where every rank's targets stay on it (a simulation whose particles live where
 * the curve puts them): the local plan's targets are the caller's, in its order (s->order NULL:
 * the identity), copied; no MPI call moves anything now or at the evaluations. pc's counts and
 * displacements say so. Agreed status. */
static fmk_status keep_in_place(fmk_plan *plan, fmk_mpi_state *s, int64_t nt, const double *x,
                                int64_t src_offset, double **local_targets)
{
    const int dim = s->dim;
    double *lt = fmk_mpi_alloc((size_t)(nt > 0 ? nt : 1) * (size_t)dim * sizeof *lt, NULL);
    int64_t *src = fmk_mpi_alloc((size_t)(nt > 0 ? nt : 1) * sizeof *src, NULL);
    fmk_status st = lt && src ? FMK_OK
                              : fmk_plan_hook_error(plan, FMK_ERR_NOMEM,
                                                    "out of memory keeping the targets in place");
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) != FMK_OK)
        return free(lt), free(src), st;
#pragma omp parallel for schedule(static) if (nt > 65536)
    for (int64_t k = 0; k < nt; k++) {
        memcpy(lt + dim * k, x + dim * k, (size_t)dim * sizeof(double));
        src[k] = src_offset >= 0 ? src_offset + k : -1;
    }
    s->moved = 1;
    s->n_local = nt;
    s->order = NULL;
    s->local_src = src;
    *local_targets = lt;
    return FMK_OK;
}

/* The targets to their owners: send holds this rank's nt of them as rows of dim + 1 (the
 * coordinates, the global source index or -1) grouped by owner, pc the send counts and
 * displacements (rows); the receive counts and displacements are set, and this rank's n_local
 * targets go to *local_targets and s->local_src. Agreed status (MPI's own errors: this rank's). */
static fmk_status exchange_targets(fmk_plan *plan, fmk_mpi_state *s, int64_t nt, const double *send,
                                   int *pc, double **local_targets)
{
    const int P = s->size, dim = s->dim;
    const int *scount = pc, *sdispl = pc + P;
    int *rcount = pc + 2 * P, *rdispl = pc + 3 * P;
    fmk_status st =
        FMK_MPI(plan, &s->fault, MPI_Alltoall, (scount, 1, MPI_INT, rcount, 1, MPI_INT, s->comm));
    if (st != FMK_OK)
        return st;
    int64_t nl = 0;
    for (int r = 0; r < P; r++) {
        rdispl[r] = (int)nl;
        nl += rcount[r];
    }
    double *recv =
        fmk_mpi_alloc((size_t)(nl > 0 ? nl : 1) * (size_t)(dim + 1) * sizeof *recv, NULL);
    double *lt = fmk_mpi_alloc((size_t)(nl > 0 ? nl : 1) * (size_t)dim * sizeof *lt, NULL);
    int64_t *src = fmk_mpi_alloc((size_t)(nl > 0 ? nl : 1) * sizeof *src, NULL);
    if (nl > INT_MAX) {
        char text[160];
        snprintf(text, sizeof text,
                 "the partition gives this rank %lld targets, more than MPI's counts reach "
                 "(2^31 - 1); use more ranks",
                 (long long)nl);
        st = fmk_plan_hook_error(plan, FMK_ERR_UNAVAILABLE, text);
    } else
        st = recv && lt && src ? FMK_OK
                               : fmk_plan_hook_error(plan, FMK_ERR_NOMEM,
                                                     "out of memory receiving moved targets");
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) == FMK_OK)
        st = fmk_mpi_alltoallv_rows(plan, &s->fault, s->comm, send, scount, sdispl, recv, rcount,
                                    rdispl, dim + 1, MPI_DOUBLE);
    if (st != FMK_OK)
        return free(recv), free(lt), free(src), st;
    s->stats.bytes_sent_points += (nt - scount[s->rank]) * (dim + 1) * 8;
#pragma omp parallel for schedule(static) if (nl > 65536)
    for (int64_t k = 0; k < nl; k++) {
        memcpy(lt + dim * k, recv + (dim + 1) * k, (size_t)dim * sizeof(double));
        src[k] = (int64_t)recv[(dim + 1) * k + dim];
    }
    free(recv);
    s->moved = 1;
    s->n_local = nl;
    s->local_src = src;
    *local_targets = lt;
    return FMK_OK;
}

fmk_status fmk_mpi_partition(fmk_plan *plan, fmk_mpi_state *s, int64_t nt, const double *x,
                             int64_t src_offset, int by_index, int force, const double lo[3],
                             const double hi[3], double **local_targets)
{
    const int P = s->size, dim = s->dim;
    fmk_mpi_partition_free(s);
    *local_targets = NULL;
    /* weights: each target's cost where the last evaluation measured it (target_weights),
     * else 1 a target; a rank's weight is the sum of its targets' */
    int64_t *w = target_weights(s, nt);
    free(s->owner); /* read; the partition sets it anew */
    s->owner = NULL, s->owner_n = 0;
    int64_t *all_nt = malloc((size_t)P * 2 * sizeof *all_nt);
    fmk_status st = all_nt ? FMK_OK : fmk_plan_hook_error(plan, FMK_ERR_NOMEM, "out of memory");
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) != FMK_OK)
        return free(all_nt), free(w), st;
    int64_t mine[2] = {nt, 0};
    for (int64_t i = 0; i < nt; i++)
        mine[1] += w ? w[i] : 1;
    st = FMK_MPI(plan, &s->fault, MPI_Allgather,
                 (mine, 2, MPI_INT64_T, all_nt, 2, MPI_INT64_T, s->comm));
    if (st != FMK_OK)
        return free(all_nt), free(w), st;
    int64_t count = 0, total = 0, most = 0, first_id = 0;
    for (int r = 0; r < P; r++) {
        first_id += r < s->rank ? all_nt[2 * r] : 0;
        count += all_nt[2 * r];
        total += all_nt[2 * r + 1];
        most = all_nt[2 * r + 1] > most ? all_nt[2 * r + 1] : most;
    }
    free(all_nt);
    const double mean = (double)total / P;
    s->imbalance = total > 0 ? (double)most / mean : 1;
    /* the same decision on every rank (from gathered sums) */
    /* (MPI counts are int: a rank's share must stay below 2^31 targets) */
    if (P == 1 || count == 0 || count / P > INT_MAX / 4 ||
        (!force && !((double)most > s->balance * mean))) {
        free(w);
        return keep_owners(s, nt);
    }

    const int nsp = P - 1;
    item *it = make_items(s, nt, x, src_offset, by_index, lo, hi);
    int *pc = calloc((size_t)P * 4, sizeof *pc);
    uint64_t *work = malloc((size_t)(nsp > 0 ? nsp : 1) * 3 * sizeof *work);
    s->split_key = malloc((size_t)(nsp > 0 ? nsp : 1) * sizeof *s->split_key);
    int64_t *iwork = malloc((size_t)(nsp > 0 ? nsp : 1) * 3 * sizeof *iwork);
    int64_t *order = fmk_mpi_alloc((size_t)(nt > 0 ? nt : 1) * sizeof *order, NULL);
    double *send =
        fmk_mpi_alloc((size_t)(nt > 0 ? nt : 1) * (size_t)(dim + 1) * sizeof *send, NULL);
    int64_t *prefix = w ? fmk_mpi_alloc((size_t)(nt + 1) * sizeof *prefix, NULL) : NULL;
    s->owner = fmk_mpi_alloc((size_t)(nt > 0 ? nt : 1) * sizeof *s->owner, NULL);
    st = it && pc && work && iwork && order && send && s->split_key && (!w || prefix) && s->owner
             ? FMK_OK
             : fmk_plan_hook_error(plan, FMK_ERR_NOMEM, "out of memory partitioning the targets");
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) != FMK_OK)
        goto done;
    /* splitter j + 1 at the weight total (j + 1) / P */
    int64_t *want = iwork, *si = iwork + nsp, *counts = iwork + 2 * nsp;
    uint64_t *sk = work, *blo = work + nsp, *bhi = work + 2 * nsp;
    for (int j = 0; j < nsp; j++)
        want[j] = total / P * (j + 1) + total % P * (j + 1) / P;
    if (prefix) {
        prefix[0] = 0;
        for (int64_t k = 0; k < nt; k++)
            prefix[k + 1] = prefix[k] + w[it[k].index];
    }
    const uint64_t kmax = by_index ? (uint64_t)count : (uint64_t)1 << (dim == 3 ? 63 : 32);
    if ((st = bisect(plan, s, nsp, it, nt, first_id, prefix, want, kmax, count, sk, si, blo, bhi,
                     counts)) != FMK_OK)
        goto done;
    memcpy(s->split_key, sk, (size_t)nsp * sizeof *sk);
    /* owners: the sorted items go to ranks 0, 1, ... in order */
    int *scount = pc, *sdispl = pc + P, *rcount = pc + 2 * P, *rdispl = pc + 3 * P;
    /* each rank's run of the sorted items, from the splitters by bisection */
    int64_t start = 0, *bound = iwork; /* the bisection's work is done: P - 1 ends */
    for (int r = 0; r < P; r++) {
        const int64_t end = r < nsp ? lower_bound(it, nt, first_id, sk[r], si[r]) : nt;
        scount[r] = (int)(end - start);
        if (r < nsp)
            bound[r] = end;
        start = end;
    }
#pragma omp parallel for schedule(static) if (nt > 65536)
    for (int64_t k = 0; k < nt; k++) {
        int lo = 0, hi = nsp; /* the first run whose end is past k */
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (k >= bound[mid])
                lo = mid + 1;
            else
                hi = mid;
        }
        s->owner[it[k].index] = lo;
    }
    for (int r = 0; r < P; r++)
        sdispl[r] = r ? sdispl[r - 1] + scount[r - 1] : 0;
    /* where every target of every rank stays, nothing moves (keep_in_place) */
    s->stats.targets_sent = nt - scount[s->rank];
    int stay = scount[s->rank] == nt;
    if ((st = FMK_MPI(plan, &s->fault, MPI_Allreduce,
                      (MPI_IN_PLACE, &stay, 1, MPI_INT, MPI_MIN, s->comm))) != FMK_OK)
        goto done;
    if (stay) {
        for (int r = 0; r < P; r++) { /* what would have moved: this rank's own, to itself */
            rcount[r] = r == s->rank ? (int)nt : 0;
            rdispl[r] = r > s->rank ? (int)nt : 0;
        }
        if ((st = keep_in_place(plan, s, nt, x, src_offset, local_targets)) == FMK_OK)
            s->part_counts = pc, pc = NULL;
        goto done;
    }
    /* the targets sent in the caller's order, grouped by owner: the rows sent now and the
     * results that come back read and write the caller's arrays in increasing order */
    group_by_owner(s->owner, nt, P, sdispl, order);
#pragma omp parallel for schedule(static) if (nt > 65536)
    for (int64_t k = 0; k < nt; k++) {
        const int64_t i = order[k];
        const double *p = x + dim * i;
        for (int d = 0; d < dim; d++)
            send[(dim + 1) * k + d] = p[d];
        send[(dim + 1) * k + dim] = src_offset >= 0 ? (double)(src_offset + i) : -1;
    }
    if ((st = exchange_targets(plan, s, nt, send, pc, local_targets)) != FMK_OK)
        goto done;
    s->part_counts = pc, pc = NULL;
    s->order = order, order = NULL;
done:
    free(it), free(pc), free(work), free(iwork), free(order), free(send), free(w), free(prefix);
    if (st == FMK_OK)
        s->owner_n = nt;
    return st;
}

int fmk_mpi_at_or_after_split(const fmk_mpi_state *s, int j, uint64_t key)
{
    return key >= s->split_key[j];
}

int64_t fmk_mpi_moved_slice(const fmk_mpi_state *s)
{
    if (!s->moved || s->n_local == 0 || s->local_src[0] < 0)
        return -1;
    for (int64_t k = 1; k < s->n_local; k++)
        if (s->local_src[k] != s->local_src[0] + k)
            return -1;
    return s->local_src[0];
}

void fmk_mpi_remove_self_moved(const fmk_mpi_state *s, int64_t nd, const double *all_q, double *pot)
{
    const int64_t n = s->n_local;
    for (int64_t v = 0; v < nd; v++)
        for (int64_t k = 0; k < n; k++)
            if (s->local_src[k] >= 0)
                pot[v * n + k] -= all_q[v * s->n_all + s->local_src[k]] * s->self_value;
}

/* Rows of width doubles (lrows: this rank's n_local of them) back to the ranks they came
 * from, into back in the order they were sent. */
static fmk_status rows_home(fmk_plan *plan, fmk_mpi_state *s, const double *lrows, int64_t width,
                            double *back)
{
    const int P = s->size;
    const int *scount = s->part_counts, *sdispl = scount + P, *rcount = scount + 2 * P,
              *rdispl = scount + 3 * P;
    /* the way back: what came from r goes to r, into the places it was sent from */
    s->stats.bytes_sent_eval += (s->n_local - rcount[s->rank]) * width * 8;
    return fmk_mpi_alltoallv_rows(plan, &s->fault, s->comm, lrows, rcount, rdispl, back, scount,
                                  sdispl, (int)width, MPI_DOUBLE);
}

fmk_status fmk_mpi_send_home(fmk_plan *plan, fmk_mpi_state *s, int64_t nd, const double *lpot,
                             const double *lgrad, double *pot, double *grad)
{
    const int cw = s->charge_width, gw = s->grad_width;
    const int64_t nl = s->n_local, nt = s->n_targets;
    const int64_t wp = lpot ? cw : 0, wg = lgrad ? gw : 0, w = nd * (wp + wg);
    /* one vector: the potentials and the gradients go as they are; several: a row a target,
     * every vector's potential, then every vector's gradient */
    if (!s->order) { /* in place (keep_in_place): the local plan's layout is the caller's */
        const int64_t np = nd * nt * cw, ng = nd * nt * gw;
#pragma omp parallel for schedule(static) if (np + ng > 65536)
        for (int64_t k = 0; k < np + ng; k++) {
            if (k < np && pot)
                pot[k] = lpot[k];
            else if (k >= np && grad)
                grad[k - np] = lgrad[k - np];
        }
        return fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, FMK_OK);
    }
    const int packed = nd > 1;
    const size_t nb = (size_t)(nt > 0 ? nt : 1);
    double *out = packed ? fmk_mpi_scratch(s, FMK_MPI_OUT,
                                           (size_t)(nl > 0 ? nl : 1) * (size_t)w * sizeof(double))
                         : NULL;
    double *back = fmk_mpi_scratch(s, FMK_MPI_BACK, nb * (size_t)(packed ? w : wp) * 8);
    double *back2 =
        packed || !lgrad ? NULL : fmk_mpi_scratch(s, FMK_MPI_BACK2, nb * (size_t)wg * 8);
    fmk_status st =
        (out || !packed) && back && (back2 || packed || !lgrad) && w <= INT_MAX
            ? FMK_OK
            : fmk_plan_hook_error(plan, FMK_ERR_NOMEM, "out of memory sending results home");
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) != FMK_OK)
        return st;
    if (packed) {
#pragma omp parallel for schedule(static) if (nl > 65536)
        for (int64_t k = 0; k < nl; k++)
            for (int64_t v = 0; v < nd; v++) {
                double *o = out + w * k;
                if (lpot)
                    memcpy(o + wp * v, lpot + (v * nl + k) * cw, (size_t)cw * sizeof(double));
                if (lgrad)
                    memcpy(o + nd * wp + wg * v, lgrad + (v * nl + k) * gw,
                           (size_t)gw * sizeof(double));
            }
        st = rows_home(plan, s, out, w, back);
    } else {
        if (lpot)
            st = rows_home(plan, s, lpot, wp, back);
        if (lgrad && st == FMK_OK)
            st = rows_home(plan, s, lgrad, wg, back2);
    }
    if (st != FMK_OK) /* (the outputs are written only on success) */
        return st;
        /* the k-th target sent is the caller's order[k]: increasing within each rank's run */
#pragma omp parallel for schedule(static) if (nt > 65536)
    for (int64_t k = 0; k < nt; k++) {
        const int64_t i = s->order[k];
        if (!packed) {
            if (pot)
                memcpy(pot + i * cw, back + k * wp, (size_t)cw * sizeof(double));
            if (grad)
                memcpy(grad + i * gw, back2 + k * wg, (size_t)gw * sizeof(double));
            continue;
        }
        const double *b = back + w * k;
        for (int64_t v = 0; v < nd; v++) {
            if (pot)
                memcpy(pot + (v * nt + i) * cw, b + wp * v, (size_t)cw * sizeof(double));
            if (grad)
                memcpy(grad + (v * nt + i) * gw, b + nd * wp + wg * v, (size_t)gw * sizeof(double));
        }
    }
    return FMK_OK;
}
