/*
 * engine.cu -- the GPU treecode engine (fmk_engine_tree_cuda; bh_cuda.h lists its files): the
 * state and its buffers, memory, setup (host points), set_points_device, eval and release,
 * the tuning knobs' table and the engine's row.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "treecode/cuda/bh_cuda.h"

extern "C" const fmk_engine fmk_engine_tree_cuda; /* defined at the end of this file */

/* ---------------------------------------------------------------------------------------- */
/* Tuning knobs and counters                                                                */

static const fmk_treecode_cuda_tune tune_defaults = {
    /* .tree */ FMK_CUDA_TREE_TUNE_DEFAULTS,
    /* .group_merge */ 2,
    /* .group_merge_min */ 1ll << 19,
    /* .moments_small_max */ 8192,
    /* .moments_up_max */ 1ll << 18,
    /* .split_warps */ 24,
    /* .split_nodes */ 8,
    /* .split_level_max */ 5,
    /* .mac */ -1,
    /* .leaf_theta */ 0,
    /* .local */ 4,
    /* .local_k */ -1,
    /* .auto_min */ 32768,
    /* .local_open */ 0.5,
    /* .local_harmonic */ 1,
    /* .super */ 2,
    /* .super_cap */ 640,
    /* .super2 */ 8,
    /* .super2_cap */ 640,
    /* .super_open */ 0,
    /* .super_min */ 1ll << 18,
    /* .super_k */ 1.2,
    /* .super_depth */ 4,
    /* .tickets */ 1,
    /* .frame_small_max */ 1ll << 15,
    /* .frame_cluster */ 8,
    /* .frame_grid */ 1,
    /* .async */ 1,
    /* .prep_small_max */ 4096,
    /* .pack_boxes */ 1,
    /* .charge_block_max */ 1ll << 15,
};

#define TK(field, kind, lo, hi, doc) FMK_KNOB(fmk_treecode_cuda_tune, field, kind, lo, hi, doc)
static const fmk_tune_knob tune_knobs[] = {
    FMK_CUDA_TREE_KNOBS(fmk_treecode_cuda_tune, tree),
    TK(group_merge, FMK_TUNE_INT, 0, 2,
       "groups: 2 cut across siblings, 1 siblings packed, 0 a node each"),
    TK(group_merge_min, FMK_TUNE_INT64, 0, 1e15, "fewer targets: one group per node"),
    TK(moments_small_max, FMK_TUNE_INT64, 0, 1e15,
       "trees of at most this many nodes: moments in one launch"),
    TK(moments_up_max, FMK_TUNE_INT64, 0, 1e15,
       "trees of at most this many nodes: moments up the tree in one launch"),
    TK(split_warps, FMK_TUNE_INT, 0, 1e9,
       "split the group walk up to this many warps per SM (0: never)"),
    TK(split_nodes, FMK_TUNE_INT, 1, 1e9, "the split walk's fewest nodes per part at its level"),
    TK(split_level_max, FMK_TUNE_INT, 1, FMK_TREE_MAX_LEVEL, "the split walk's deepest level"),
    TK(mac, FMK_TUNE_INT, -1, 2,
       "acceptance: 0 box, 1 box or every target, 2 as 1 for leaves; -1 by size"),
    TK(leaf_theta, FMK_TUNE_DOUBLE, 0, 1.5, "theta of a leaf's per-target test (0: theta)"),
    TK(local, FMK_TUNE_INT, 0, 4, "the cell-to-group step's order (2, 3, 4; 0 off)"),
    TK(local_k, FMK_TUNE_DOUBLE, -1, 1e9, "the step's distance factor k (negative: by size)"),
    TK(auto_min, FMK_TUNE_INT64, 0, 1e15,
       "sources from which mac and local_k default to 1 and 1.65"),
    TK(local_open, FMK_TUNE_DOUBLE, 0, 1e9, "the step's weight a of r_open"),
    TK(local_harmonic, FMK_TUNE_INT, 0, 1, "order 4, no softening: the harmonic M2L"),
    TK(super, FMK_TUNE_INT, 0, 32, "groups per super-group (0 or 1: off)"),
    TK(super_cap, FMK_TUNE_INT, 0, FMK_BH_SUPER_LIST_MAX, "a super-group's start-list entries"),
    TK(super2, FMK_TUNE_INT, 0, 32, "super-groups per parent (0 or 1: no second level)"),
    TK(super2_cap, FMK_TUNE_INT, 0, FMK_BH_SUPER_LIST_MAX, "a parent's start-list entries"),
    TK(super_open, FMK_TUNE_INT, 0, 1, "open what the super box opens (1) or every group box (0)"),
    TK(super_min, FMK_TUNE_INT64, 0, 1e15, "super-groups from this many targets"),
    TK(super_k, FMK_TUNE_DOUBLE, 0, 1e9, "the super-groups' step: k' = super_k k"),
    TK(super_depth, FMK_TUNE_DOUBLE, -1e9, 1e9,
       "super-groups for trees this much deeper than uniform"),
    TK(tickets, FMK_TUNE_INT, 0, 1e9,
       "group walks by tickets (1; K > 1: a grid of at most K blocks)"),
    TK(frame_small_max, FMK_TUNE_INT64, 0, 1e15,
       "sets of at most this many points: the frame by one cluster"),
    TK(frame_cluster, FMK_TUNE_INT, 1, 8, "blocks of the small sets' frame"),
    TK(frame_grid, FMK_TUNE_INT, 0, 1, "larger sets' frame by a grid of blocks without a wait"),
    TK(async, FMK_TUNE_INT, 0, 1, "small trees built without a host wait"),
    TK(prep_small_max, FMK_TUNE_INT64, 0, 1e15, "sources of the one-block charges and moments"),
    TK(pack_boxes, FMK_TUNE_INT, 0, 1, "group boxes in the packing launch"),
    TK(charge_block_max, FMK_TUNE_INT64, 0, 1e15, "sources of the one-block charge check"),
};
#undef TK

static const fmk_tune_table tune_table = {"treecode", sizeof(fmk_treecode_cuda_tune),
                                          &tune_defaults, FMK_TUNE_COUNT(tune_knobs), tune_knobs};

static const fmk_tune_knob counter_knobs[] = {
    FMK_KNOB(fmk_treecode_cuda_counters, frame_redos, FMK_TUNE_INT64, 0, 1e18,
             "set_points_device frames made again (a softening wider than the points)"),
    FMK_KNOB(fmk_treecode_cuda_counters, build_redos, FMK_TUNE_INT64, 0, 1e18,
             "builds without a wait made again (the tree did not fit)"),
    FMK_KNOB(fmk_treecode_cuda_counters, split_redos, FMK_TUNE_INT64, 0, 1e18,
             "split walks made again unsplit (a stack overflow above the split)"),
};

static const fmk_tune_table counter_table = {"treecode", sizeof(fmk_treecode_cuda_counters), NULL,
                                             FMK_TUNE_COUNT(counter_knobs), counter_knobs};

/* ---------------------------------------------------------------------------------------- */
/* The state                                                                                */

int fmk_bh_real(const fmk_plan *plan)
{
    return plan->opts.precision == FMK_PRECISION_FP32 ? 4 : 8;
}

int64_t fmk_bh_leaf_size(const fmk_plan *plan)
{
    /* Group walk: 48, no leaf of more than 48 points (the large cube's cells of ~64 points are
     * split: their P2P blocks cost the walk more); the fastest of 32, 48, 64 for the Plummer
     * sphere too. Stackless walk: 64 (bench/RESULTS.md). */
    if (plan->opts.leaf_size > 0)
        return plan->opts.leaf_size;
    return plan->opts.walk == FMK_WALK_STACKLESS ? 64 : 48;
}

static void free_ptr(void *p)
{
    if (p && cudaFree(p) != cudaSuccess)
        (void)cudaGetLastError();
}

int64_t fmk_bh_held(const fmk_bh_state *s)
{
    const fmk_bh_buf *b[] = {&s->x,      &s->bbox,  &s->src,  &s->trg,  &s->src_lo,
                             &s->trg_lo, &s->links, &s->node, &s->box,  &s->charges,
                             &s->pot,    &s->grad,  &s->part, &s->super};
    int64_t total = s->tree.bytes + s->ttree.bytes + s->cap_groups * (int64_t)sizeof(int2) + 40;
    for (size_t k = 0; k < sizeof b / sizeof b[0]; k++)
        total += (int64_t)b[k]->cap;
    return total;
}

static void buf_free(fmk_bh_buf *b)
{
    free_ptr(b->p);
    b->p = NULL, b->cap = 0;
}

static void free_state(fmk_bh_state *s)
{
    fmk_cuda_tree3d_free(&s->tree);
    fmk_cuda_tree3d_free(&s->ttree);
    fmk_bh_buf *b[] = {&s->x,    &s->bbox, &s->src,     &s->trg, &s->src_lo, &s->trg_lo, &s->links,
                       &s->node, &s->box,  &s->charges, &s->pot, &s->grad,   &s->part,   &s->super};
    for (size_t k = 0; k < sizeof b / sizeof b[0]; k++)
        buf_free(b[k]);
    free_ptr(s->d_groups);
    free_ptr(s->d_stats);
    if (s->h_stats && cudaFreeHost(s->h_stats) != cudaSuccess)
        (void)cudaGetLastError();
    if (s->h_frame && cudaFreeHost(s->h_frame) != cudaSuccess)
        (void)cudaGetLastError();
    if (s->events)
        for (size_t k = 0; k < sizeof s->ev / sizeof s->ev[0]; k++)
            if (cudaEventDestroy(s->ev[k]) != cudaSuccess)
                (void)cudaGetLastError();
    free(s);
}

fmk_status fmk_bh_need(fmk_plan *plan, fmk_bh_state *s, fmk_bh_buf *b, size_t bytes,
                       const char *what)
{
    if (bytes <= b->cap && b->p)
        return FMK_OK;
    buf_free(b);
    fmk_status st = fmk_cuda_alloc(plan, &b->p, bytes, what, (long long)(fmk_bh_held(s) + bytes));
    if (st == FMK_OK)
        b->cap = bytes;
    return st;
}

fmk_status fmk_bh_ok(fmk_plan *plan, cudaError_t err, const char *what)
{
    return err == cudaSuccess ? FMK_OK : fmk_cuda_fail(plan, err, what);
}

/* ---------------------------------------------------------------------------------------- */
/* Memory, setup, points                                                                     */

static void bh_release(fmk_plan *plan)
{
    fmk_bh_state *s = (fmk_bh_state *)plan->state;
    if (!s)
        return;
    int prev;
    fmk_status st = fmk_cuda_enter(plan, s->device, &prev);
    const int dev = s->device;
    free_state(s);
    if (st == FMK_OK)
        fmk_cuda_leave(dev, prev);
    plan->state = NULL;
    plan->state_bytes_device = plan->state_bytes_host = 0;
}

/* Device bytes for ns sources and nt targets (nt < 0: the sources), nodes at their bound;
 * everything set_points keeps (its workspace included). */
static int64_t device_bytes(const fmk_plan *plan, int64_t ns, int64_t nt, int with_host_buffers)
{
    const int self = nt < 0;
    const int64_t m = self ? ns : nt, r = fmk_bh_real(plan), G = FMK_BH_GROUP;
    const int64_t nodes = fmk_cuda_tree3d_node_bound(ns, fmk_bh_leaf_size(plan));
    int64_t b = fmk_cuda_tree3d_build_bytes(ns) + nodes * FMK_CUDA_TREE_NODE_BYTES; /* tree */
    b += ns * 4 * r + nodes * (16 + 16 * r); /* sources, links, moments */
    if (r == 4)
        b += (ns + (self ? 0 : m)) * 16; /* the coordinates' rest */
    b += (ns + (self ? 0 : m)) * 24;     /* mapped points */
    const int64_t groups = (self ? nodes : fmk_cuda_tree3d_node_bound(m, G)) + m / G + 1;
    b += groups * (8 + 8 * r);
    if (!self)
        b += fmk_cuda_tree3d_build_bytes(m) +
             fmk_cuda_tree3d_node_bound(m, G) * FMK_CUDA_TREE_NODE_BYTES + m * 4 * r;
    if (with_host_buffers)
        b += ns * 8 + m * 8 + m * 24;
    b += fmk_bh_split_bytes_bound(plan, m);
    if (fmk_bh_super_wanted(plan, m))
        b += fmk_bh_super_bytes(plan, groups, m, (int)r);
    b += 40;
    if (ns + (self ? 0 : m) > fmk_bh_tune(plan)->frame_small_max)
        b += (int64_t)sizeof(fmk_bh_frame_grid_ws); /* the grid frame's workspace */
    return b;
}

static void bh_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d)
{
    if (fmk_bytes_gpu_uncounted(ns, nt)) { /* sizes no GPU holds: beyond what this counts */
        *h = *d = FMK_BYTES_OVERFLOW;
        return;
    }
    int prev = plan->opts.device;
    int entered = fmk_cuda_enter((fmk_plan *)plan, plan->opts.device, &prev) == FMK_OK;
    *d = device_bytes(plan, ns, nt, 1);
    if (entered)
        fmk_cuda_leave(plan->opts.device, prev);
    *h = (int64_t)sizeof(fmk_bh_state) + 2 * (FMK_TREE_MAX_LEVEL + 2) * 8;
}

/* A new state in plan->state (nothing allocated on the device yet but the events and the
 * charge-check words). */
static fmk_status new_state(fmk_plan *plan, fmk_bh_state **out)
{
    fmk_bh_state *s = (fmk_bh_state *)calloc(1, sizeof *s);
    *out = NULL;
    if (!s)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory (%zu bytes)", sizeof *s);
    s->device = plan->opts.device;
    s->real = fmk_bh_real(plan);
    fmk_status st = FMK_OK;
    int k = 0;
    const int n_ev = (int)(sizeof s->ev / sizeof s->ev[0]);
    for (; k < n_ev && st == FMK_OK; k++)
        st = fmk_bh_ok(plan, cudaEventCreate(&s->ev[k]), "cudaEventCreate");
    if (st != FMK_OK) {
        for (int j = 0; j < k - 1; j++)
            (void)cudaEventDestroy(s->ev[j]);
        free(s);
        return st;
    }
    s->events = 1;
    st = fmk_cuda_alloc(plan, (void **)&s->d_stats, FMK_BH_STATS * sizeof(unsigned long long),
                        "the charge checks", 32);
    if (st == FMK_OK)
        st = fmk_cuda_alloc_host(plan, (void **)&s->h_stats,
                                 FMK_BH_STATS * sizeof(unsigned long long),
                                 "the charge check, the walk's overflow flag and its counts");
    if (st == FMK_OK)
        st = fmk_cuda_alloc_host(plan, (void **)&s->h_frame, sizeof(fmk_bh_frame_out),
                                 "the frame of small sets");
    if (st == FMK_OK)
        st = fmk_bh_ok(plan, cudaHostGetDevicePointer((void **)&s->dh_frame, s->h_frame, 0),
                       "cudaHostGetDevicePointer (the frame of small sets)");
    if (st != FMK_OK) {
        free_state(s);
        return st;
    }
    plan->state = s;
    *out = s;
    return FMK_OK;
}

static void finish_setup(fmk_plan *plan, fmk_bh_state *s)
{
    s->bytes = fmk_bh_held(s);
    plan->state_bytes_device = s->bytes;
    plan->state_bytes_host = (int64_t)sizeof *s;
    plan->info.levels = s->tree.levels;
    plan->info.leaf_size = fmk_bh_leaf_size(plan);
    plan->info.walk = plan->opts.walk == FMK_WALK_STACKLESS ? FMK_WALK_STACKLESS : FMK_WALK_GROUP;
}

static fmk_status too_many(fmk_plan *plan, int64_t ns, int64_t nt)
{
    if (ns > FMK_CUDA_TREE_MAX_POINTS || nt > FMK_CUDA_TREE_MAX_POINTS)
        return fmk_error_set(plan, FMK_ERR_ARG,
                             "the GPU treecode takes at most %lld sources and targets (got %lld, "
                             "%lld); use backend cpu or split the points",
                             FMK_CUDA_TREE_MAX_POINTS, (long long)ns, (long long)nt);
    return FMK_OK;
}

static fmk_status bh_setup(fmk_plan *plan)
{
    const int64_t ns = plan->n_sources, nt = plan->self ? 0 : plan->n_targets;
    fmk_status st = too_many(plan, ns, nt);
    if (st != FMK_OK)
        return st;
    int prev;
    if ((st = fmk_cuda_enter(plan, plan->opts.device, &prev)) != FMK_OK)
        return st;
    plan->info.phase_time[FMK_PHASE_TREE] = 0;
    fmk_bh_state *s;
    st = new_state(plan, &s);
    if (st == FMK_OK && ns > 0) {
        const size_t bytes = (size_t)(ns + nt) * 24;
        st = fmk_bh_need(plan, s, &s->x, bytes, "staging the points");
        double *d_x = (double *)s->x.p;
        if (st == FMK_OK)
            st = fmk_bh_ok(plan,
                           cudaMemcpy(d_x, plan->sources, (size_t)ns * 24, cudaMemcpyHostToDevice),
                           "cudaMemcpy (sources to the GPU)");
        if (st == FMK_OK && nt > 0)
            st = fmk_bh_ok(
                plan,
                cudaMemcpy(d_x + 3 * ns, plan->targets, (size_t)nt * 24, cudaMemcpyHostToDevice),
                "cudaMemcpy (targets to the GPU)");
        if (st == FMK_OK)
            st = fmk_bh_build(plan, s, ns, d_x, nt, d_x + 3 * ns, fmk_bh_tune(plan)->async);
        if (st == FMK_OK)
            st = fmk_bh_check_resolution(plan, s, ns, d_x, nt, d_x + 3 * ns);
        /* host points: the plan keeps them, so the staging copy is not kept (the next
         * set_points starts a new state anyway) */
        buf_free(&s->x);
    }
    if (st == FMK_OK)
        finish_setup(plan, s);
    else
        bh_release(plan);
    fmk_cuda_leave(plan->opts.device, prev);
    return st;
}

static fmk_status bh_set_points_device(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                                       const double *d_t)
{
    /* The state of the previous points is kept, with its buffers, when it fits this plan: its
     * buffers only grow, so repeated calls allocate nothing. */
    fmk_bh_state *keep = (fmk_bh_state *)plan->state;
    if (keep && (keep->device != plan->opts.device || keep->real != fmk_bh_real(plan)))
        keep = NULL;
    if (keep)
        plan->state = NULL;
    fmk_plan_drop_points(plan); /* the contract: on failure the plan has no points */
    int prev;
    fmk_status st = fmk_cuda_enter(plan, plan->opts.device, &prev);
    if (st != FMK_OK) {
        if (keep)
            free_state(keep);
        return st;
    }
    plan->state = keep; /* released with the plan from here on */
    if (st == FMK_OK)
        st = too_many(plan, ns, nt);
    memset(plan->info.phase_time, 0, sizeof plan->info.phase_time);
    fmk_bh_state *s = keep;
    if (st == FMK_OK && !s)
        st = new_state(plan, &s);
    if (st == FMK_OK)
        st = fmk_bh_points_device(plan, s, ns, d_s, nt, d_t);
    if (st == FMK_OK)
        finish_setup(plan, s);
    if (st != FMK_OK)
        fmk_plan_drop_points(plan);
    fmk_cuda_leave(plan->opts.device, prev);
    return st;
}

static fmk_status bad_charge(fmk_plan *plan, int64_t i, const double *d_q)
{
    double q = 0;
    cudaError_t err = cudaMemcpy(&q, d_q + i, sizeof q, cudaMemcpyDeviceToHost);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaMemcpy (a charge from the GPU)");
    return fmk_error_set(plan, FMK_ERR_NONFINITE, "charges[%lld] is %g; charges must be finite",
                         (long long)i, q);
}

/* ---------------------------------------------------------------------------------------- */
/* Evaluation                                                                               */

/* The walks' arguments for the plan's points and outputs pot, grad (device; into the split
 * walk's part sums when it is split). */
template <typename R>
static fmk_bh_walk_args<R> walk_args_of(const fmk_plan *plan, const fmk_bh_state *s, double *pot,
                                        double *grad)
{
    typedef typename vec4<R>::type V;
    const fmk_treecode_cuda_tune *k = fmk_bh_tune(plan);
    const fmk_cuda_tree *t = &s->tree;
    const double S = fmk_bh_coord_scale(s->real);
    const real4f *lo = (const real4f *)s->src_lo.p; /* fp32 only */
    fmk_bh_walk_args<R> a;
    a.links = (const int4 *)s->links.p;
    a.n_children = t->d_n_children;
    a.node = (const V *)s->node.p;
    a.src = (const V *)s->src.p;
    a.trg = plan->self ? (const V *)s->src.p : (const V *)s->trg.p;
    a.src_lo = lo;
    a.trg_lo = plan->self ? lo : (const real4f *)s->trg_lo.p;
    a.trg_order = plan->self ? t->d_order : s->ttree.d_order;
    a.groups = s->d_groups;
    a.box = (const V *)s->box.p;
    a.m = plan->n_targets;
    a.n_groups = s->n_groups;
    a.eps2 = (R)(plan->frame.softening * S * plan->frame.softening * S);
    a.pot_scale = plan->frame.pot_scale * S;  /* times 1 / charge_scale on the device */
    a.grad_scale = plan->frame.pot_scale * S; /* 1/width^2 may overflow: two steps */
    a.grad_scale2 = plan->frame.pot_scale * S;
    a.pot = pot;
    a.grad = grad;
    a.parts = s->parts;
    a.split_begin = s->split_begin, a.split_end = s->split_end;
    if (s->parts > 1) { /* the parts' sums, added up after the walk */
        a.pot = pot ? (double *)s->part.p : NULL;
        a.grad = grad ? (double *)s->part.p + s->parts * a.m : NULL;
    }
    a.overflow = s->d_stats + 2;
    const int tuned = plan->n_sources >= k->auto_min; /* the defaults of mac, local_k */
    a.mac = k->mac >= 0 ? k->mac : tuned ? 1 : 2;
    /* tree3d.h: theta capped so that no node is accepted by a target inside it */
    const double th = plan->opts.theta < FMK_TREE_THETA_CAP ? plan->opts.theta : FMK_TREE_THETA_CAP;
    {
        const double f_min = 1.01 * sqrt(3.0) / (1 / th + sqrt(3.0) / 2);
        double f = k->leaf_theta > th ? th / k->leaf_theta : 1;
        f = f < f_min ? f_min : f;
        a.leaf_r2 = (R)(f < 1 ? f * f : 1);
        a.inner_r2 = (R)1;
    }
    a.local = k->local >= 2 && k->local <= 4 ? k->local : 0;
    {
        /* the group's radius scaled like a node's size in r_open (l / theta): k at theta 0.6,
         * so that the expansion's truncation falls with theta as the M2P's does; at least 1
         * (every target of the group then outside the node's opening sphere) */
        const double k0 = k->local_k >= 0 ? k->local_k : tuned ? 1.65 : 2.25;
        const double kk = k0 * 0.6 / th;
        a.local_k = (R)(kk > 1 ? kk : 1);
        const double ao = k->local_open > 0 ? k->local_open : 0;
        a.local_a2 = (R)(ao * ao);
    }
    a.harmonic = a.local == 4 && k->local_harmonic && a.eps2 == 0;
    a.stats = s->d_stats;
    a.count = s->d_stats + 5;
    a.ticket = k->tickets && s->parts == 1 ? s->d_stats + 4 : NULL;
    a.super = 0, a.super_open = k->super_open, a.super_cap = 0, a.super_k = 0;
    a.super_order = NULL, a.super_count = a.super_list = NULL;
    a.super_centre = NULL, a.super_local = NULL;
    a.super_up = a.up_cap = 0, a.up_count = a.up_list = NULL, a.up_centre = NULL, a.up_local = NULL;
    a.walk0 = a.walk1 = 0; /* set by walk_launches */
    return a;
}

/* The group walk's mode (fmk_cuda_bh_walk_group): without the potential (a.pot NULL) the
 * gradient alone, whose walk leaves out the potential's terms and, with targets = sources,
 * takes each target's pair with its own source in instead of leaving it out by index under a
 * softened kernel: the pair's offsets are the same bits on both sides (rel_point and the P2P
 * list make a point relative to the group's origin alike), so dx = dy = dz = 0 and its
 * gradient term is exactly 0 (fmk_info's count of pairs takes it off after). */
template <typename R> static int walk_mode(const fmk_plan *plan, const fmk_bh_walk_args<R> &a)
{
    return a.pot == NULL ? 2 : plan->self ? 1 : 0;
}

template <typename R> static cudaError_t walk(const fmk_plan *plan, const fmk_bh_walk_args<R> &a)
{
    if (plan->opts.walk == FMK_WALK_STACKLESS)
        return fmk_cuda_bh_walk_stackless(a, plan->opts.order, plan->self);
    return fmk_cuda_bh_walk_group(a, plan->opts.order, walk_mode(plan, a),
                                  fmk_bh_tune(plan)->tickets);
}

/* The walks' ticket counter set to first (queued): where the next launch of a cut walk starts
 * (the charge kernels zeroed it for the first). */
static __global__ void k_tickets_from(unsigned long long *ticket, unsigned long long first)
{
    *ticket = first;
}

/* A launch of the group walks (or the stackless walk's targets) [lo, hi) of a cut walk
 * (fmk_cuda_launch_ranges). */
template <typename R> struct walk_range {
    const fmk_plan *plan;
    fmk_bh_walk_args<R> a;
};

template <typename R> static cudaError_t walk_range_launch(void *ctx, int64_t lo, int64_t hi)
{
    walk_range<R> *r = (walk_range<R> *)ctx;
    r->a.walk0 = lo, r->a.walk1 = hi;
    if (lo > 0 && r->a.ticket) {
        k_tickets_from<<<1, 1>>>(r->a.ticket, (unsigned long long)lo);
        const cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess)
            return err;
    }
    return walk<R>(r->plan, r->a);
}

/* The walk: one launch, or in a long eval (fmk_cuda_long) launches of about 0.1 s each
 * (fmk_cuda_launch_ranges, the rate in s->walk_rate), with an interrupt check after each. */
template <typename R>
static fmk_status walk_launches(fmk_plan *plan, fmk_bh_state *s, const fmk_bh_walk_args<R> &a)
{
    const int stackless = plan->opts.walk == FMK_WALK_STACKLESS;
    const int64_t total = stackless ? a.m : a.n_groups * a.parts;
    const int64_t np = plan->n_sources + (plan->self ? 0 : plan->n_targets);
    walk_range<R> ctx = {plan, a};
    ctx.a.walk0 = 0, ctx.a.walk1 = total;
    if (!fmk_cuda_long(plan, np) || total < 2) {
        const cudaError_t err = walk<R>(plan, ctx.a);
        return err == cudaSuccess ? FMK_OK : fmk_cuda_fail(plan, err, "the tree walk kernel");
    }
    fmk_cuda_ranges r;
    r.total = total, r.quantum = stackless ? 128 : 1024, r.item_work = 1;
    r.first = (double)(total / 4 > 1 ? total / 4 : 1), r.fixed = 0;
    r.rate = &s->walk_rate, r.ev = s->ev + 4, r.stream = 0;
    r.launch = walk_range_launch<R>, r.ctx = &ctx, r.what = "the tree walk kernel";
    return fmk_cuda_launch_ranges(plan, &r);
}

/* The walk after the moments (queued), its wait, and the host's checks: a bad charge (nothing
 * was written), a split walk whose stack overflowed above the split (the walk again, unsplit,
 * into the outputs themselves). */
template <typename R>
static fmk_status walk_phase(fmk_plan *plan, fmk_bh_state *s, const double *d_q, double *pot,
                             double *grad)
{
    fmk_bh_walk_args<R> a = walk_args_of<R>(plan, s, pot, grad);
    const int stackless = plan->opts.walk == FMK_WALK_STACKLESS;
    fmk_bh_walk_diag_begin();
    fmk_bh_super_diag_begin();
    if (!stackless && s->parts == 1 && a.local == 4 && fmk_bh_super_wanted(plan, a.m) &&
        fmk_bh_super_deep(plan, s) && s->n_groups > 0) {
        fmk_status st = fmk_bh_super_setup(plan, s, &a);
        if (st != FMK_OK)
            return st;
    }
    const fmk_status st = walk_launches<R>(plan, s, a);
    cudaError_t err = cudaSuccess;
    if (st == FMK_OK && s->parts > 1)
        err = fmk_cuda_bh_sum_parts(a.m, s->parts, a.pot, a.grad, s->d_stats, pot, grad);
    if (err == cudaSuccess) /* the charge check, the overflow flag and the interaction counts,
                             * read after the wait (one copy) */
        err = cudaMemcpyAsync(s->h_stats, s->d_stats, FMK_BH_STATS * sizeof(unsigned long long),
                              cudaMemcpyDeviceToHost, 0);
    fmk_bh_super_diag_end(a.super, a.super_up);
    fmk_bh_walk_diag_end();
    if (st != FMK_OK) /* interrupted, or a failed launch (nothing is left running) */
        return st;
    if (err == cudaSuccess)
        err = cudaEventRecord(s->ev[3], 0);
    if (err == cudaSuccess)
        err = cudaEventSynchronize(s->ev[3]);
    if (err == cudaSuccess && s->h_stats[0] != 0) /* nothing was written */
        return bad_charge(plan, (int64_t)~s->h_stats[0], d_q);
    if (err == cudaSuccess && s->parts > 1 && s->h_stats[2]) {
        a.parts = 1, a.pot = pot, a.grad = grad;
        a.ticket = NULL; /* one group per block: no counter was cleared for this walk */
        fmk_bh_counters(plan)->split_redos++;
        /* the counts of this walk alone (this rare path's own clear and copy) */
        err = cudaMemsetAsync(a.count, 0, 2 * sizeof(unsigned long long), 0);
        const fmk_status again =
            err == cudaSuccess ? walk_launches<R>(plan, s, a)
                               : fmk_cuda_fail(plan, err, "cudaMemsetAsync (the walk's counts)");
        if (again != FMK_OK)
            return again;
        err = cudaMemcpyAsync(s->h_stats + 5, a.count, 2 * sizeof(unsigned long long),
                              cudaMemcpyDeviceToHost, 0);
        if (err == cudaSuccess)
            err = cudaEventRecord(s->ev[3], 0);
        if (err == cudaSuccess)
            err = cudaEventSynchronize(s->ev[3]);
    }
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the tree walk kernel");
    const int self_counted = plan->self && !stackless && walk_mode(plan, a) == 2;
    plan->info.interactions_p2p = (int64_t)s->h_stats[5] - (self_counted ? a.m : 0);
    plan->info.interactions_far = (int64_t)s->h_stats[6];
    return FMK_OK;
}

/* The charges on the device: d_q itself, or the host's copied into the state's buffer (with
 * the outputs' buffers). */
static fmk_status upload(fmk_plan *plan, fmk_bh_state *s, const double *charges, int on_device,
                         const double **d_q)
{
    const int64_t n = plan->n_sources, m = plan->n_targets;
    *d_q = charges;
    if (on_device)
        return FMK_OK;
    fmk_status st = fmk_bh_need(plan, s, &s->charges, (size_t)n * 8, "the charges");
    if (st == FMK_OK)
        st = fmk_bh_need(plan, s, &s->pot, (size_t)m * 8, "the potential");
    if (st == FMK_OK)
        st = fmk_bh_need(plan, s, &s->grad, (size_t)m * 24, "the gradient");
    s->bytes = fmk_bh_held(s);
    plan->state_bytes_device = plan->info.bytes_device = s->bytes;
    if (st != FMK_OK)
        return st;
    cudaError_t err = cudaMemcpy(s->charges.p, charges, (size_t)n * 8, cudaMemcpyHostToDevice);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaMemcpy (charges to the GPU)");
    *d_q = (const double *)s->charges.p;
    return FMK_OK;
}

static fmk_status download(fmk_plan *plan, fmk_bh_state *s, double *pot, double *grad)
{
    const int64_t m = plan->n_targets;
    cudaError_t err;
    if (pot &&
        (err = cudaMemcpy(pot, s->pot.p, (size_t)m * 8, cudaMemcpyDeviceToHost)) != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaMemcpy (potential from the GPU)");
    if (grad &&
        (err = cudaMemcpy(grad, s->grad.p, (size_t)m * 24, cudaMemcpyDeviceToHost)) != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaMemcpy (gradient from the GPU)");
    return FMK_OK;
}

/* Sums with no sources: zeros (only the device path gets here: plan.c answers host calls). */
static fmk_status no_sources(fmk_plan *plan, double *pot, double *grad)
{
    const int64_t m = plan->n_targets;
    cudaError_t err;
    if (pot && (err = cudaMemset(pot, 0, (size_t)m * sizeof(double))) != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaMemset (pot)");
    if (grad && (err = cudaMemset(grad, 0, (size_t)m * 3 * sizeof(double))) != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaMemset (grad)");
    return fmk_bh_ok(plan, cudaDeviceSynchronize(), "cudaMemset");
}

/* One evaluation: the charges (upload and check), the moments, the walk, the results. A long
 * one (fmk_cuda_long) checks for an interrupt after the moments and between the walk's launches
 * (walk_launches). */
static fmk_status run_eval(fmk_plan *plan, fmk_bh_state *s, const double *charges, double *pot,
                           double *grad, int on_device)
{
    double *phase = plan->info.phase_time;
    if (plan->n_sources == 0)
        return no_sources(plan, pot, grad);
    const double t0 = fmk_time_now();
    const double *d_q;
    fmk_status st = upload(plan, s, charges, on_device, &d_q);
    if (st == FMK_OK)
        st = fmk_bh_ok(plan, fmk_cuda_bh_charges(plan, s, d_q), "the charge check kernel");
    if (st != FMK_OK)
        return st;
    double *p = pot ? (on_device ? pot : (double *)s->pot.p) : NULL;
    double *g = grad ? (on_device ? grad : (double *)s->grad.p) : NULL;
    phase[FMK_PHASE_UPLOAD] = fmk_time_now() - t0;

    cudaError_t err = cudaEventRecord(s->ev[1], 0);
    if (err == cudaSuccess)
        err = fmk_cuda_bh_moments(plan, s, d_q);
    if (err == cudaSuccess)
        err = cudaEventRecord(s->ev[2], 0);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the moment kernels");
    /* a long eval: the moments waited for, and an interrupt check before the walk */
    if (fmk_cuda_long(plan, plan->n_sources + (plan->self ? 0 : plan->n_targets)) &&
        (st = fmk_cuda_checkpoint(plan, s->ev[2], "the moment kernels")) != FMK_OK)
        return st;
    st = s->real == 4 ? walk_phase<float>(plan, s, d_q, p, g)
                      : walk_phase<double>(plan, s, d_q, p, g);
    if (st != FMK_OK)
        return st;
    float ms1 = 0, ms2 = 0;
    if ((err = cudaEventElapsedTime(&ms1, s->ev[1], s->ev[2])) != cudaSuccess ||
        (err = cudaEventElapsedTime(&ms2, s->ev[2], s->ev[3])) != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaEventElapsedTime");
    phase[FMK_PHASE_MOMENTS] = ms1 * 1e-3;
    phase[FMK_PHASE_WALK] = ms2 * 1e-3;

    if (!on_device) {
        const double t2 = fmk_time_now();
        if ((st = download(plan, s, pot, grad)) != FMK_OK)
            return st;
        phase[FMK_PHASE_DOWNLOAD] = fmk_time_now() - t2;
    }
    return FMK_OK;
}

static fmk_status bh_run(fmk_plan *plan, const double *charges, double *pot, double *grad,
                         int on_device)
{
    fmk_bh_state *s = (fmk_bh_state *)plan->state;
    const fmk_status st = run_eval(plan, s, charges, pot, grad, on_device);
    /* the tree's time belongs to set_points: plan.c clears eval's phases, keep it */
    plan->info.phase_time[FMK_PHASE_TREE] = s->tree_time;
    return st;
}

static fmk_status bh_eval(fmk_plan *plan, const double *charges, double *pot, double *grad,
                          int on_device)
{
    return fmk_cuda_eval(plan, charges, pot, grad, on_device, bh_run);
}

extern "C" fmk_status fmk_cuda_bh_tree(fmk_plan *plan, fmk_tree3d *tree)
{
    memset(tree, 0, sizeof *tree);
    if (plan->engine != &fmk_engine_tree_cuda || !plan->state)
        return fmk_error_set(plan, FMK_ERR_STATE, "the plan has no GPU tree");
    fmk_bh_state *s = (fmk_bh_state *)plan->state;
    int prev;
    fmk_status st = fmk_cuda_enter(plan, s->device, &prev);
    if (st != FMK_OK)
        return st;
    st = fmk_cuda_tree3d_download(plan, &s->tree, NULL, tree);
    fmk_cuda_leave(s->device, prev);
    return st;
}

extern "C" const fmk_engine fmk_engine_tree_cuda = {
    /* .name */ "tree/cuda",
    /* .setup */ bh_setup,
    /* .eval */ bh_eval,
    /* .memory */ bh_memory,
    /* .set_points_device */ bh_set_points_device,
    /* .release */ bh_release,
    /* .check_opts */ fmk_treecode_check_opts,
    /* .eps_min */ 0,
    /* .reuses_state */ 0,
    /* .tune */ &tune_table,
    /* .counters */ &counter_table,
    /* .shared_tune */ &fmk_cuda_tune_table,
    /* .shared_counters */ &fmk_cuda_counter_table,
};
