/* engine.cu -- the GPU engine of the 2D FMM (fmm2d_cuda.h): its state and the one device block
 * it lives in, setup (set_points from host arrays), set_points_device, eval (a line a phase, each
 * through its launcher), memory and release, and the engine's row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cub/cub.cuh>

#include "fmm2d/cuda/fmm2d_cuda.h"
#include "tree/resolution.h"

namespace {

int order_of(const fmk_plan *plan)
{
    return fmk_fmm2d_plan_order(plan);
}
int64_t leaf_size_of(const fmk_plan *plan)
{
    return fmk_fmm2d_plan_leaf_size(plan);
}

/* ---------------------------------------------------------------- memory */

/* Device bytes for n points (ns sources, nt targets) with these list lengths. */
int64_t device_bytes(const fmk_plan *plan, int64_t ns, int64_t nt, int self, int64_t n_weak,
                     int64_t n_near)
{
    const int p = order_of(plan);
    const int64_t n = self ? ns : ns + nt;
    const int L = fmk_fmm2d_levels(n, leaf_size_of(plan));
    const int64_t boxes = fmk_fmm2d_first(L + 1), leaves = (int64_t)1 << (2 * L);
    const int cw = fmk_kernel_width(plan->kernel);
    int64_t b = 24 * boxes + 16 * (leaves + 1) + 4 * (boxes + 1) + 4 * (leaves + 1);
    b += 12 * (ns + (self ? 0 : nt)) + 4 * n_weak + 5 * n_near;
    b += 16 * ns + 2 * 16 * boxes * (p + 1) + 44 * nt + 8 * cw * (ns + 2 * nt) + 64;
    return b;
}

/* Workspace of the topological phase and the lists' starting capacity (fmk_fmm2d_ws), with CUB's
 * workspace bounded by 12 bytes a point and 1 MB. */
int64_t build_bytes(int64_t n, int L)
{
    const int64_t boxes = fmk_fmm2d_first(L + 1), leaves = (int64_t)1 << (2 * L);
    return n * (68 + 12) + 352 * boxes + 350 * leaves + (2 << 20);
}

void free_state(fmk_fmm2d_gpu *s)
{
    void *bufs[] = {s->d_block, s->d_stage, s->weak_owned ? s->d_weak : NULL,
                    s->near_owned ? s->d_near : NULL, s->kind_owned ? s->d_kind : NULL};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
        if (bufs[k] && cudaFree(bufs[k]) != cudaSuccess)
            (void)cudaGetLastError();
    for (int k = 0; k < s->events; k++)
        if (cudaEventDestroy(s->ev[k]) != cudaSuccess)
            (void)cudaGetLastError();
    if (s->side && cudaStreamDestroy(s->side) != cudaSuccess)
        (void)cudaGetLastError();
    if (s->h_read && cudaFreeHost(s->h_read) != cudaSuccess)
        (void)cudaGetLastError();
    free(s);
}

void gpu_release(fmk_plan *plan)
{
    fmk_fmm2d_gpu *s = (fmk_fmm2d_gpu *)plan->state;
    plan->state_bytes_device = plan->state_bytes_host = 0;
    if (!s)
        return;
    if (s->keep) { /* set_points_device's release of the old points: kept for the new ones */
        s->keep = 0;
        return;
    }
    const int dev = s->device; /* free_state frees s */
    int prev;
    fmk_status st = fmk_cuda_enter(plan, dev, &prev);
    free_state(s);
    if (st == FMK_OK)
        fmk_cuda_leave(dev, prev);
    plan->state = NULL;
}

void gpu_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d)
{
    if (fmk_bytes_gpu_uncounted(ns, nt)) { /* sizes no GPU holds: beyond what this counts */
        *h = *d = FMK_BYTES_OVERFLOW;
        return;
    }
    const int self = nt < 0;
    if (self)
        nt = ns;
    const int64_t n = self ? ns : ns + nt;
    const int L = fmk_fmm2d_levels(n, leaf_size_of(plan));
    const int64_t boxes = fmk_fmm2d_first(L + 1), leaves = (int64_t)1 << (2 * L);
    *h = (int64_t)sizeof(fmk_fmm2d_gpu);
    *d = device_bytes(plan, ns, nt, self, 32 * boxes, 12 * leaves) + build_bytes(n, L);
}

/* One device allocation carved into n arrays (256-byte aligned), so that a set_points costs
 * one cudaMalloc and one cudaFree rather than dozens. */
/* region: 0 for arrays kept for the plan's life; EVAL_ONLY for those every eval writes before
 * it reads them, TREE_ONLY for the topological phase's scratch: these two share memory. */
enum { KEPT = 0, EVAL_ONLY = 1, TREE_ONLY = 2 };
struct part {
    void **ptr;
    size_t bytes;
    int region;
};

/* *block (of *bytes, NULL: none yet) is kept when it holds the parts, else replaced by one
 * that does (*fresh = 1). */
fmk_status alloc_parts(fmk_plan *plan, void **block, part *parts, int n, const char *what,
                       long long total, size_t *bytes, int *fresh)
{
    size_t sum[3] = {0, 0, 0};
    for (int k = 0; k < n; k++)
        sum[parts[k].region] += (parts[k].bytes + 255) / 256 * 256;
    size_t all = sum[KEPT] + (sum[EVAL_ONLY] > sum[TREE_ONLY] ? sum[EVAL_ONLY] : sum[TREE_ONLY]);
    all = all > 0 ? all : 256;
    *fresh = !*block || *bytes < all;
    if (*fresh) {
        if (*block && cudaFree(*block) != cudaSuccess)
            (void)cudaGetLastError();
        *block = NULL, *bytes = 0;
        fmk_status st =
            fmk_cuda_alloc(plan, block, all, what, total > (long long)all ? total : (long long)all);
        if (st != FMK_OK)
            return st;
        *bytes = all;
    }
    char *next[3];
    next[KEPT] = (char *)*block;
    next[EVAL_ONLY] = next[TREE_ONLY] = (char *)*block + sum[KEPT];
    for (int k = 0; k < n; k++) {
        *parts[k].ptr = next[parts[k].region];
        next[parts[k].region] += (parts[k].bytes + 255) / 256 * 256;
    }
    return FMK_OK;
}

/* CUB's workspace sizes for s's sizes into s->q_* (the queries only when the sizes changed):
 * the bounding box of ns sources and nt targets (the box's d_s, d_t), the sorts and scans of the
 * topological phase, the total charge. */
cudaError_t query_sizes(fmk_fmm2d_gpu *s, const double *d_s, const double *d_t, int64_t n_box)
{
    if (s->q_n == s->n && s->q_ns == s->ns && s->q_nt == s->nt)
        return cudaSuccess;
    s->q_n = -1;
    const int64_t n1 = s->n > 0 ? s->n : 1, ns1 = s->ns > 0 ? s->ns : 1;
    double lo[3], hi[3];
    int64_t bad;
    cudaError_t err =
        fmk_cuda_bounding_box(2, s->ns, d_s, n_box, d_t, NULL, &s->q_box, NULL, lo, hi, &bad);
    if (err == cudaSuccess)
        err = cub::DeviceRadixSort::SortPairs(NULL, s->q_sort, (unsigned *)NULL, (unsigned *)NULL,
                                              (int *)NULL, (int *)NULL, (int)n1);
    if (err == cudaSuccess)
        err = cub::DeviceScan::ExclusiveSum(NULL, s->q_scan_lists, (u64 *)NULL, (u64 *)NULL,
                                            (int)(s->leaves + 1));
    if (err == cudaSuccess)
        err = cub::DeviceScan::ExclusiveSum(NULL, s->q_scan_points, (int *)NULL, (int *)NULL,
                                            (int)(s->n + 1));
    if (err == cudaSuccess)
        err = cub::DeviceReduce::Sum(NULL, s->q_sum, (double *)NULL, (double *)NULL, (int)ns1);
    if (err == cudaSuccess)
        s->q_n = s->n, s->q_ns = s->ns, s->q_nt = s->nt;
    return err;
}

/* The workspace's arrays for s (CUB's sizes queried), appended to parts; returns their count
 * (at most 32) or -1 with the error recorded. */
int ws_parts(fmk_plan *plan, const fmk_fmm2d_gpu *s, fmk_fmm2d_ws *w, part *parts)
{
    const int64_t n = s->n, leaves = s->leaves, nb = s->n_boxes;
    const int64_t n1 = n > 0 ? n : 1;
    (void)plan;
    size_t tb = s->q_sort > s->q_scan_lists ? s->q_sort : s->q_scan_lists;
    tb = tb > s->q_scan_points ? tb : s->q_scan_points;
    tb = tb > s->q_box ? tb : s->q_box; /* the bounding box (set_points_device) uses it too */
    w->temp_bytes = tb;
    /* a uniform box has about 40 weak entries: the 4 children of each of its parent's ~13
     * strong boxes, less its own ~13 strong ones; and a uniform finest box about 13 strong ones
     * (its 3 x 3 neighbours and the four at distance 2, eq. 2.1 with theta = 1/2); room for
     * twice as many, and about 2.5 for uneven sets */
    w->weak_cap = 80 * nb + 64;
    w->strong_cap = 32 * leaves + 64;
    const size_t nl = (size_t)(leaves + 2), sc = (size_t)w->strong_cap;
    const int T = TREE_ONLY; /* the lists stay (KEPT) */
    part p[] = {
        {(void **)&w->x[0], 8 * (size_t)n1, T},
        {(void **)&w->x[1], 8 * (size_t)n1, T},
        {(void **)&w->y[0], 8 * (size_t)n1, T},
        {(void **)&w->y[1], 8 * (size_t)n1, T},
        {(void **)&w->id[0], 4 * (size_t)n1, T},
        {(void **)&w->id[1], 4 * (size_t)n1, T},
        {(void **)&w->pos[0], 4 * (size_t)(n1 + 1), T},
        {(void **)&w->pos[1], 4 * (size_t)(n1 + 1), T},
        {(void **)&w->keys[0], 4 * (size_t)n1, T},
        {(void **)&w->keys[1], 4 * (size_t)n1, T},
        {(void **)&w->box_bb, 32 * (size_t)nb, T},
        {(void **)&w->seg_bb, 32 * (size_t)(leaves > 1 ? leaves / 2 : 1), T},
        {(void **)&w->before, 4 * (size_t)(n + 2), T},
        {(void **)&w->cnt, 8 * nl, T},
        {(void **)&w->off, 8 * nl, T},
        {(void **)&w->begin_a, 4 * nl, T},
        {(void **)&w->begin_b, 4 * nl, T},
        {(void **)&w->weak, 4 * (size_t)w->weak_cap, KEPT},
        {(void **)&w->strong[0], 4 * sc, KEPT},
        {(void **)&w->strong[1], 4 * sc, KEPT},
        {(void **)&w->kind, sc, KEPT},
        {(void **)&w->lstat, sizeof(int) * LS_COUNT, KEPT},
        {&w->temp, w->temp_bytes, T},
    };
    const int k = (int)(sizeof p / sizeof p[0]);
    for (int i = 0; i < k; i++)
        parts[i] = p[i];
    return k;
}

/* ---------------------------------------------------------------- setup */

/* Allocates the state for the plan's sizes (s->n, ns, nt, levels set) with the topological
 * phase's workspace ws, whose CUB workspace holds at least box_temp bytes; d_box (not NULL):
 * room for fmk_cuda_bounding_box's box, in the same block. */
fmk_status setup_common(fmk_plan *plan, fmk_fmm2d_gpu *s, fmk_fmm2d_ws *ws_out, void **d_box)
{
    fmk_status st = FMK_OK;
    const int p = s->order, nc = p + 1;
    const int64_t ns = s->ns, nt = s->nt, nb = s->n_boxes, leaves = s->leaves;
    const int cw = fmk_kernel_width(plan->kernel);
    const long long total =
        (long long)(device_bytes(plan, ns, nt, plan->self, 32 * nb, 12 * leaves) +
                    build_bytes(s->n, s->levels));
    const size_t ns1 = (size_t)(ns > 0 ? ns : 1), nt1 = (size_t)(nt > 0 ? nt : 1);
    fmk_fmm2d_ws &ws = *ws_out;
    memset(&ws, 0, sizeof ws);
    {
        const size_t t = s->q_sum; /* query_sizes ran */
        s->temp_bytes = t;
        const int self = plan->self;
        const size_t nbin = (size_t)(2 * p + 2) * (2 * p + 2);
        part parts[] = {
            {(void **)&s->d_binom, 8 * nbin}, /* first: where the kept block has it */
            {(void **)&s->d_center, 16 * (size_t)nb},
            {(void **)&s->d_radius, 8 * (size_t)nb},
            {(void **)&s->d_src_start, 8 * (size_t)(leaves + 1)},
            {(void **)&s->d_src_order, 4 * ns1},
            {(void **)&s->d_src_xy, 16 * ns1},
            {(void **)&s->d_trg_start, self ? 0 : 8 * (size_t)(leaves + 1)},
            {(void **)&s->d_trg_order, self ? 0 : 4 * nt1},
            {(void **)&s->d_trg_place, 4 * nt1},
            {(void **)&s->d_trg_xy, self ? 0 : 16 * nt1},
            {(void **)&s->d_weak_begin, 4 * (size_t)(nb + 1)},
            {(void **)&s->d_q, 16 * ns1, EVAL_ONLY},
            {(void **)&s->d_M, 16 * (size_t)nb * nc, EVAL_ONLY},
            {(void **)&s->d_L, 16 * (size_t)nb * nc, EVAL_ONLY},
            {(void **)&s->d_res, 32 * nt1, EVAL_ONLY},
            {(void **)&s->d_qzero, 8 * nt1, EVAL_ONLY},
            {(void **)&s->d_qtotal, 8},
            {(void **)&s->d_stats, 16},
            {(void **)&s->d_near_begin, 4 * (size_t)(leaves + 1)},
            {&s->d_temp, t},
        };
        part all[64];
        int k = (int)(sizeof parts / sizeof parts[0]);
        for (int i = 0; i < k; i++)
            all[i] = parts[i];
        int kw = ws_parts(plan, s, &ws, all + k);
        if (kw < 0) {
            st = FMK_ERR_DEVICE;
            goto done;
        }
        if (d_box)
            all[k + kw++] = part{d_box, fmk_cuda_box_bytes(), TREE_ONLY};
        int fresh = 0;
        CS(alloc_parts(plan, &s->d_block, all, k + kw, "the 2D FMM's arrays", total,
                       &s->block_bytes, &fresh));
        if (self)
            s->d_trg_start = s->d_src_start, s->d_trg_order = s->d_src_order,
            s->d_trg_xy = s->d_src_xy;
        if (fresh || !s->binom_ready) {
            /* binomials C(n, k), n, k <= 2p + 1, for M2M, M2L and L2L */
            CK(fmk_cuda_fmm2d_binomials(p, s->d_binom), "the binomial kernel");
            s->binom_ready = 1;
        }
    }
    for (int k = s->events; k < 10; k++) {
        CK(cudaEventCreate(&s->ev[k]), "cudaEventCreate");
        s->events = k + 1;
    }
    if (!s->side)
        CK(cudaStreamCreateWithFlags(&s->side, cudaStreamNonBlocking), "cudaStreamCreate");
    if (!s->h_read) /* pinned: a copy back without the driver's staging */
        CS(fmk_cuda_alloc_host(plan, (void **)&s->h_read, sizeof(int) * (LS_COUNT + 2),
                               "the 2D FMM's read-back words"));
done:
    return st;
}

/* The topological phase (the pyramid, then the lists), timed by events into s->tree_ms; then
 * an interrupt check. */
fmk_status build_timed(fmk_plan *plan, fmk_fmm2d_gpu *s, fmk_fmm2d_ws *ws, const double *d_src,
                       const double *d_trg)
{
    fmk_status st = FMK_OK;
    float ms = 0;
    CK(cudaEventRecord(s->ev[0], 0), "cudaEventRecord");
    CS(fmk_cuda_fmm2d_pyramid(plan, s, ws, d_src, d_trg));
    CS(fmk_cuda_fmm2d_lists(plan, s, ws)); /* it records ev[1] and waits for it */
    CK(cudaEventElapsedTime(&ms, s->ev[0], s->ev[1]), "cudaEventElapsedTime");
    s->tree_ms = ms;
    CS(fmk_cuda_checkpoint(plan, NULL, NULL));
done:
    return st;
}

/* The state for ns sources and nt targets: keep (not NULL: the previous points' state, of this
 * plan) keeps its block, events and binomials, and gives up the rest; else a new one. */
fmk_fmm2d_gpu *new_state(fmk_plan *plan, int64_t ns, int64_t nt, int self, fmk_fmm2d_gpu *keep)
{
    fmk_fmm2d_gpu *s = keep ? keep : (fmk_fmm2d_gpu *)calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (keep) {
        void *bufs[] = {s->d_stage, s->weak_owned ? s->d_weak : NULL,
                        s->near_owned ? s->d_near : NULL, s->kind_owned ? s->d_kind : NULL};
        for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
            if (bufs[k] && cudaFree(bufs[k]) != cudaSuccess)
                (void)cudaGetLastError();
        fmk_fmm2d_gpu kept = *s;
        memset(s, 0, sizeof *s);
        s->d_block = kept.d_block, s->block_bytes = kept.block_bytes;
        s->binom_ready = kept.binom_ready;
        memcpy(s->ev, kept.ev, sizeof s->ev);
        s->events = kept.events;
        s->side = kept.side, s->h_read = kept.h_read;
        s->q_n = kept.q_n, s->q_ns = kept.q_ns, s->q_nt = kept.q_nt;
        s->q_box = kept.q_box, s->q_sort = kept.q_sort, s->q_scan_lists = kept.q_scan_lists;
        s->q_scan_points = kept.q_scan_points, s->q_sum = kept.q_sum;
    } else {
        s->q_n = -1;
    }
    s->device = plan->opts.device;
    s->order = order_of(plan);
    s->leaf_size = leaf_size_of(plan);
    s->ns = ns, s->nt = self ? ns : nt, s->self = self;
    s->n = self ? ns : ns + nt;
    s->levels = fmk_fmm2d_levels(s->n, s->leaf_size);
    s->leaves = (int64_t)1 << (2 * s->levels);
    s->n_boxes = fmk_fmm2d_first(s->levels + 1);
    return s;
}

void finish_setup(fmk_plan *plan, fmk_fmm2d_gpu *s)
{
    /* the block keeps the topological phase's workspace and list capacity (no allocations in
     * the next set_points but one) */
    plan->state_bytes_device = (int64_t)s->block_bytes + (s->weak_owned ? 4 * s->n_weak : 0) +
                               (s->near_owned ? 5 * s->n_near : 0);
    plan->state_bytes_host = (int64_t)sizeof *s;
    plan->info.order = s->order;
    plan->info.levels = s->levels + 1;
    plan->info.leaf_size = s->leaf_size;
    plan->info.theta = FMK_FMM2D_THETA;
    plan->info.phase_time[FMK_PHASE_TREE] = s->tree_ms * 1e-3;
}

fmk_status gpu_setup(fmk_plan *plan)
{
    if (plan->n_sources + (plan->self ? 0 : plan->n_targets) > INT32_MAX)
        return fmk_error_set(plan, FMK_ERR_ARG,
                             "the 2D FMM on the GPU takes at most 2^31 - 1 points");
    /* the resolution guard (tree/resolution.h), as the CPU engine's, on the host's mapped
     * points (the pyramid has no Morton order to reuse; points given on the device are not
     * checked) */
    const fmk_resolution_opts guard = {plan->eps, FMK_RESOLUTION_FP64, 0, 0, 0};
    fmk_status st = fmk_resolution_check(plan, "fmm", &guard);
    if (st != FMK_OK)
        return st;
    int prev;
    st = fmk_cuda_enter(plan, plan->opts.device, &prev);
    if (st != FMK_OK)
        return st;
    fmk_fmm2d_gpu *s = new_state(plan, plan->n_sources, plan->n_targets, plan->self, NULL);
    if (!s) {
        fmk_cuda_leave(plan->opts.device, prev);
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory");
    }
    plan->state = s;
    double *d_pts = NULL;
    const size_t bytes = 16 * (size_t)(s->n > 0 ? s->n : 1);
    st = fmk_cuda_alloc(plan, (void **)&d_pts, bytes, "staging the points",
                        (long long)(device_bytes(plan, s->ns, s->nt, plan->self, 0, 0) + bytes));
    if (st == FMK_OK && s->ns > 0) {
        cudaError_t err =
            cudaMemcpy(d_pts, plan->sources, 16 * (size_t)s->ns, cudaMemcpyHostToDevice);
        if (err == cudaSuccess && !plan->self && s->nt > 0)
            err = cudaMemcpy(d_pts + 2 * s->ns, plan->targets, 16 * (size_t)s->nt,
                             cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            st = fmk_cuda_fail(plan, err, "cudaMemcpy (points to the GPU)");
    }
    fmk_fmm2d_ws ws;
    if (st == FMK_OK) {
        cudaError_t err = query_sizes(s, NULL, NULL, plan->self ? 0 : s->nt);
        if (err != cudaSuccess)
            st = fmk_cuda_fail(plan, err, "CUB (workspace query)");
    }
    if (st == FMK_OK)
        st = setup_common(plan, s, &ws, NULL);
    if (st == FMK_OK)
        st = build_timed(plan, s, &ws, d_pts, plan->self ? NULL : d_pts + 2 * s->ns);
    if (d_pts && cudaFree(d_pts) != cudaSuccess && st == FMK_OK)
        st = fmk_cuda_fail(plan, cudaGetLastError(), "cudaFree");
    if (st == FMK_OK)
        finish_setup(plan, s);
    else
        gpu_release(plan);
    fmk_cuda_leave(plan->opts.device, prev);
    return st;
}

fmk_status points_device(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                         const double *d_t)
{
    const int self = d_t == NULL;
    if (ns + (self ? 0 : nt) > INT32_MAX)
        return fmk_error_set(plan, FMK_ERR_ARG,
                             "the 2D FMM on the GPU takes at most 2^31 - 1 points");
    double lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
    const int64_t n_box = self ? 0 : nt;
    fmk_fmm2d_gpu *s = new_state(plan, ns, nt, self, (fmk_fmm2d_gpu *)plan->state);
    if (!s)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory");
    plan->state = s;
    plan->self = self;
    plan->n_sources = ns;
    plan->n_targets = self ? ns : nt;
    cudaError_t err = query_sizes(s, d_s, d_t, n_box);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "CUB (workspace query)");
    /* one allocation (or none: the kept block): the plan's arrays, the topological phase's
     * workspace (whose CUB workspace serves the bounding box too) and the box */
    fmk_fmm2d_ws ws;
    void *d_box = NULL;
    fmk_status st = setup_common(plan, s, &ws, &d_box);
    if (st != FMK_OK)
        return st;
    fmk_frame frame;
    st = fmk_cuda_frame(plan, ns, d_s, n_box, d_t, ws.temp, ws.temp_bytes, d_box, lo, hi, &frame);
    if (st == FMK_OK) {
        plan->frame = frame;
        err = fmk_cuda_fmm2d_map_points(ns, d_s, self ? 0 : nt, d_t, &frame, &ws);
        st = err == cudaSuccess ? build_timed(plan, s, &ws, NULL, NULL)
                                : fmk_cuda_fail(plan, err, "the point kernel");
    }
    if (st == FMK_OK) {
        finish_setup(plan, s);
        plan->has_points = 1;
    }
    return st;
}

fmk_status gpu_set_points_device(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                                 const double *d_t)
{
    /* The previous points' state is kept for its block (grow-only), so that repeated calls of
     * the same or smaller sizes allocate nothing: the release of the old points leaves it to
     * points_device (a failure there releases it for good). */
    fmk_fmm2d_gpu *s = (fmk_fmm2d_gpu *)plan->state;
    if (s)
        s->keep = 1;
    return fmk_cuda_set_points_device(plan, ns, d_s, nt, d_t, points_device);
}

/* ---------------------------------------------------------------- eval */

/* The arguments of the expansion and near-field kernels. */
fmk_fmm2d_args args_of(const fmk_fmm2d_gpu *s, int is_log)
{
    fmk_fmm2d_args a;
    a.p = s->order, a.L = s->levels, a.is_log = is_log;
    a.center = s->d_center, a.radius = s->d_radius;
    a.src_start = s->d_src_start, a.trg_start = s->d_trg_start;
    a.src_xy = s->d_src_xy, a.trg_xy = s->d_trg_xy;
    a.q = s->d_q, a.M = s->d_M, a.Lc = s->d_L;
    a.binom = s->d_binom, a.nb = 2 * s->order + 2;
    return a;
}

/* No sources (only the device path gets here: plan.c answers host calls itself): zeros. */
fmk_status zero_outputs(fmk_plan *plan, const fmk_fmm2d_gpu *s, double *pot, double *grad)
{
    fmk_status st = FMK_OK;
    const int cw = fmk_kernel_width(plan->kernel);
    if (pot)
        CK(cudaMemset(pot, 0, (size_t)s->nt * cw * sizeof(double)), "cudaMemset (pot)");
    if (grad)
        CK(cudaMemset(grad, 0, (size_t)s->nt * 2 * sizeof(double)), "cudaMemset (grad)");
    CK(cudaDeviceSynchronize(), "cudaMemset");
done:
    return st;
}

/* Host calls: the charges copied to the staging arrays (allocated at the first call), *d_q
 * pointed at them. */
fmk_status stage_charges(fmk_plan *plan, fmk_fmm2d_gpu *s, const double *charges,
                         const double **d_q)
{
    fmk_status st = FMK_OK;
    const int cw = fmk_kernel_width(plan->kernel);
    const int64_t ns = s->ns, nt = s->nt;
    if (!s->d_stage) { /* their staging arrays, once */
        const size_t bc = (size_t)(8 * cw * ns + 255) / 256 * 256;
        const size_t bp = (size_t)(8 * cw * nt + 255) / 256 * 256, bg = (size_t)(16 * nt);
        CS(fmk_cuda_alloc(plan, &s->d_stage, bc + bp + bg, "the host calls' staging arrays",
                          (long long)(plan->state_bytes_device + bc + bp + bg)));
        s->d_charges = (double *)s->d_stage;
        s->d_pot = (double *)((char *)s->d_stage + bc);
        s->d_grad = (double *)((char *)s->d_stage + bc + bp);
        plan->state_bytes_device += (int64_t)(bc + bp + bg);
        plan->info.bytes_device = plan->state_bytes_device;
    }
    CK(cudaMemcpy(s->d_charges, charges, (size_t)ns * cw * sizeof(double), cudaMemcpyHostToDevice),
       "cudaMemcpy (charges to the GPU)");
    *d_q = s->d_charges;
done:
    return st;
}

/* A phase's launch status err, then the event that ends the phase (ev[k], default stream),
 * which a long eval (check) waits for to check for an interrupt. */
fmk_status phase_end(fmk_plan *plan, fmk_fmm2d_gpu *s, cudaError_t err, const char *what, int k,
                     int check)
{
    if (err == cudaSuccess)
        err = cudaEventRecord(s->ev[k], 0), what = "cudaEventRecord";
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, what);
    return check ? fmk_cuda_checkpoint(plan, s->ev[k], "the 2D FMM kernels") : FMK_OK;
}

/* Few leaves: the near field (which needs only the charges) on the side stream, after ev[1],
 * while the expansions go up and down; ev[8], ev[9] time it. L2P then adds to it. */
fmk_status p2p_beside(fmk_plan *plan, fmk_fmm2d_gpu *s, const fmk_fmm2d_args *a)
{
    fmk_status st = FMK_OK;
    CK(cudaStreamWaitEvent(s->side, s->ev[1], 0), "cudaStreamWaitEvent");
    CK(cudaEventRecord(s->ev[8], s->side), "cudaEventRecord");
    CK(fmk_cuda_fmm2d_p2p(a, s, s->side), "P2P");
    CK(cudaEventRecord(s->ev[9], s->side), "cudaEventRecord");
done:
    return st;
}

/* The one wait of the eval: k_charges' verdict. If a charge was not finite, nothing was
 * written; the error names the first. */
fmk_status charges_verdict(fmk_plan *plan, fmk_fmm2d_gpu *s, const double *d_q)
{
    fmk_status st = FMK_OK;
    const int cw = fmk_kernel_width(plan->kernel);
    u64 bad = 0;
    CK(cudaMemcpyAsync(s->h_read, s->d_stats, sizeof bad, cudaMemcpyDeviceToHost, 0),
       "the 2D FMM kernels");
    CK(cudaStreamSynchronize(0), "the 2D FMM kernels");
    memcpy(&bad, s->h_read, sizeof bad);
    if (bad != ~0ull) {
        CK(cudaMemsetAsync(s->d_stats, 0xff, sizeof(u64)), "cudaMemset");
        double q[2] = {0, 0};
        CK(cudaMemcpy(q, d_q + cw * bad, cw * sizeof(double), cudaMemcpyDeviceToHost),
           "cudaMemcpy (a charge from the GPU)");
        return fmk_error_set(plan, FMK_ERR_NONFINITE,
                             "charges[%lld] is %g%s; charges must be finite", (long long)bad,
                             isfinite(q[0]) && cw == 2 ? q[1] : q[0],
                             isfinite(q[0]) && cw == 2 ? " (imaginary part)" : "");
    }
done:
    return st;
}

/* The phases' times from the events into the plan's info, and for host calls the results
 * copied back (their time as the download). */
fmk_status eval_times(fmk_plan *plan, const fmk_fmm2d_gpu *s, double *pot, double *grad,
                      int on_device, int beside)
{
    fmk_status st = FMK_OK;
    const int cw = fmk_kernel_width(plan->kernel);
    const int64_t nt = s->nt;
    double *phase = plan->info.phase_time;
    float ms[7];
    double t_dn = 0;
    for (int k = 0; k < 7; k++)
        CK(cudaEventElapsedTime(&ms[k], s->ev[k], s->ev[k + 1]), "cudaEventElapsedTime");
    if (beside) /* P2P's own time (L2P's includes any wait for it) */
        CK(cudaEventElapsedTime(&ms[6], s->ev[8], s->ev[9]), "cudaEventElapsedTime");
    t_dn = fmk_time_now();
    if (!on_device) {
        if (pot)
            CK(cudaMemcpy(pot, s->d_pot, (size_t)nt * cw * sizeof(double), cudaMemcpyDeviceToHost),
               "cudaMemcpy (potential from the GPU)");
        if (grad)
            CK(cudaMemcpy(grad, s->d_grad, (size_t)nt * 2 * sizeof(double), cudaMemcpyDeviceToHost),
               "cudaMemcpy (gradient from the GPU)");
    }
    phase[FMK_PHASE_UPLOAD] = ms[0] * 1e-3;
    phase[FMK_PHASE_P2M] = ms[1] * 1e-3;
    phase[FMK_PHASE_M2M] = ms[2] * 1e-3;
    phase[FMK_PHASE_M2L] = ms[3] * 1e-3;
    phase[FMK_PHASE_L2L] = ms[4] * 1e-3;
    phase[FMK_PHASE_L2P] = ms[5] * 1e-3;
    phase[FMK_PHASE_P2P] = ms[6] * 1e-3;
    phase[FMK_PHASE_DOWNLOAD] = fmk_time_now() - t_dn;
    phase[FMK_PHASE_TREE] = s->tree_ms * 1e-3;
done:
    return st;
}

/* The computational phase. The charges are checked on their way into box order; the one wait
 * reads the verdict at the end, and the output kernel writes only if they were all finite. No
 * clearing of M and L: P2M and M2M write every box with sources (no other is read), M2L every
 * box's local expansion before L2L adds to it. A long eval (fmk_cuda_long) checks for an
 * interrupt after each phase; a call that stops early waits for the side stream's P2P and
 * clears the charge verdict. */
fmk_status run_eval(fmk_plan *plan, const double *charges, double *pot, double *grad, int on_device)
{
    fmk_fmm2d_gpu *s = (fmk_fmm2d_gpu *)plan->state;
    fmk_status st = FMK_OK;
    const int is_log = plan->kernel == FMK_KERNEL_LOG2D;
    const int beside = split_for(s->leaves) > 1; /* P2P on the side stream */
    const int check = fmk_cuda_long(plan, s->self ? s->ns : s->ns + s->nt);
    const fmk_fmm2d_args a = args_of(s, is_log);
    const double *d_q = charges;
    double *out_pot = pot, *out_grad = grad;
    if (s->ns == 0)
        return zero_outputs(plan, s, pot, grad);
    if (!on_device) {
        CS(stage_charges(plan, s, charges, &d_q));
        out_pot = pot ? s->d_pot : NULL, out_grad = grad ? s->d_grad : NULL;
    }
    CK(cudaEventRecord(s->ev[0], 0), "cudaEventRecord");
    CS(phase_end(plan, s, fmk_cuda_fmm2d_charges(s, is_log, d_q), "the charge kernels", 1, check));
    if (beside)
        CS(p2p_beside(plan, s, &a));
    CS(phase_end(plan, s, fmk_cuda_fmm2d_p2m(&a, s), "P2M", 2, check));
    CS(phase_end(plan, s, fmk_cuda_fmm2d_m2m(&a, s), "M2M", 3, check));
    CS(phase_end(plan, s, fmk_cuda_fmm2d_m2l(&a, s), "M2L", 4, check));
    CS(phase_end(plan, s, fmk_cuda_fmm2d_l2l(&a, s), "L2L", 5, check));
    if (beside)
        CK(cudaStreamWaitEvent(0, s->ev[9], 0), "cudaStreamWaitEvent");
    CS(phase_end(plan, s, fmk_cuda_fmm2d_l2p(&a, s, beside), "L2P (and M2P)", 6, check));
    CS(phase_end(plan, s, beside ? cudaSuccess : fmk_cuda_fmm2d_p2p(&a, s, 0), "P2P", 7, check));
    CK(fmk_cuda_fmm2d_output(s, is_log, &plan->frame, out_pot, out_grad), "the output kernel");
    CS(charges_verdict(plan, s, d_q));
    CS(eval_times(plan, s, pot, grad, on_device, beside));
done:
    if (st != FMK_OK) { /* nothing runs on after the return, and the next eval's charge verdict
                           starts afresh (a call that stopped before it did not read it) */
        if (beside && cudaStreamSynchronize(s->side) != cudaSuccess)
            (void)cudaGetLastError();
        if (cudaMemsetAsync(s->d_stats, 0xff, sizeof(u64), 0) != cudaSuccess)
            (void)cudaGetLastError();
    }
    return st;
}

fmk_status gpu_eval(fmk_plan *plan, const double *charges, double *pot, double *grad, int on_device)
{
    return fmk_cuda_eval(plan, charges, pot, grad, on_device, run_eval);
}

} // namespace

extern "C" const fmk_engine fmk_engine_fmm2d_cuda = {
    /* .name */ "fmm2d/cuda",
    /* .setup */ gpu_setup,
    /* .eval */ gpu_eval,
    /* .memory */ gpu_memory,
    /* .set_points_device */ gpu_set_points_device,
    /* .release */ gpu_release,
    /* .check_opts */ fmk_fmm2d_check_opts,
    /* .eps_min */ 0,
    /* .reuses_state */ 0, /* set_points_device keeps the state itself (gpu_set_points_device) */
    /* .tune */ NULL,
    /* .counters */ NULL,
    /* .shared_tune */ &fmk_cuda_tune_table,
    /* .shared_counters */ &fmk_cuda_counter_table,
};
