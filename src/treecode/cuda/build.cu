/*
 * build.cu -- the geometry of set_points on the device: the sources' tree (and the targets'
 * when they are other points), the target groups, the points packed in the working
 * precision with the tree's links, the group boxes, and the split of the walk; one host wait
 * (tree/cuda/tree3d_cuda.h's builds without a wait for small trees).
 */
#include "treecode/cuda/bh_cuda.h"
#include "tree/resolution.h"

namespace {

/* The tree's links of node i: n_nodes, or (a tree built without a wait) at most n_nodes and
 * the count on the device. */
struct links_in {
    int32_t n_nodes;
    const int32_t *count, *more, *next, *begin, *end;
    int4 *links;
};

/* Bounding box of group g of sorted targets (centre and half sides into box[2 g], box[2 g + 1])
 * by LANES threads (lane: this one's; a warp's lanes take the same group): each lane takes
 * every LANES-th target and the lanes reduce min and max, which are exact in any order, so the
 * boxes are those of one thread per group. at(j): sorted target j in the working precision. */
template <typename R, int LANES, typename At>
__device__ __forceinline__ void group_box(int64_t g, int lane, const int2 *__restrict__ groups,
                                          const At &at, typename vec4<R>::type *__restrict__ box)
{
    const int2 r = groups[g];
    R lo[3] = {(R)1e30, (R)1e30, (R)1e30}, hi[3] = {(R)-1e30, (R)-1e30, (R)-1e30};
    for (int32_t j = r.x + lane; j < r.y; j += LANES) {
        const typename vec4<R>::type p = at(j);
        lo[0] = p.x < lo[0] ? p.x : lo[0], hi[0] = p.x > hi[0] ? p.x : hi[0];
        lo[1] = p.y < lo[1] ? p.y : lo[1], hi[1] = p.y > hi[1] ? p.y : hi[1];
        lo[2] = p.z < lo[2] ? p.z : lo[2], hi[2] = p.z > hi[2] ? p.z : hi[2];
    }
    for (int d = LANES / 2; d > 0; d >>= 1)
        for (int k = 0; k < 3; k++) {
            const R l2 = __shfl_xor_sync(0xffffffffu, lo[k], d);
            const R h2 = __shfl_xor_sync(0xffffffffu, hi[k], d);
            lo[k] = l2 < lo[k] ? l2 : lo[k], hi[k] = h2 > hi[k] ? h2 : hi[k];
        }
    if (lane != 0)
        return;
    typename vec4<R>::type c, h;
    c.x = (R)0.5 * (lo[0] + hi[0]), c.y = (R)0.5 * (lo[1] + hi[1]), c.z = (R)0.5 * (lo[2] + hi[2]);
    /* half sides rounded up so the box holds every target; in fp32 the targets lie within
     * half an ulp (2^-12 of the working coordinates) of their fp32 coordinates, and the walks
     * use the exact positions (rel_point) */
    const R ulp2 = sizeof(R) == 4 ? (R)0x1p-12 : (R)0;
    h.x = (R)0.5 * (hi[0] - lo[0]) * (R)(1 + 1e-6) + ulp2;
    h.y = (R)0.5 * (hi[1] - lo[1]) * (R)(1 + 1e-6) + ulp2;
    h.z = (R)0.5 * (hi[2] - lo[2]) * (R)(1 + 1e-6) + ulp2;
    c.w = 0, h.w = 0;
    box[2 * g] = c, box[2 * g + 1] = h;
}

/* Sorted target j as k_pack_points packs it: from the packed array, or from the mapped points
 * through the order (the same conversion, so the same values). */
template <typename R> struct packed_at {
    const typename vec4<R>::type *trg;
    __device__ __forceinline__ typename vec4<R>::type operator()(int32_t j) const { return trg[j]; }
};
template <typename R> struct mapped_at {
    const int32_t *order;
    const double *x;
    double scale;
    __device__ __forceinline__ typename vec4<R>::type operator()(int32_t j) const
    {
        const int64_t i = order[j];
        typename vec4<R>::type p;
        p.x = (R)(x[3 * i] * scale), p.y = (R)(x[3 * i + 1] * scale),
        p.z = (R)(x[3 * i + 2] * scale);
        p.w = 0;
        return p;
    }
};

/* The group boxes of the groups of at most bound (the count is on the device: the grid covers
 * the bound), LANES threads per group (small trees: a warp; one thread per group loops over
 * its targets as a chain of loads; large
 * trees keep one thread, as a grid of 32 threads per group of the bound costs more than the
 * loop). */
template <typename R, int LANES>
__global__ void k_group_boxes(int64_t bound, const int32_t *__restrict__ n_groups,
                              const int2 *__restrict__ groups,
                              const typename vec4<R>::type *__restrict__ trg,
                              typename vec4<R>::type *__restrict__ box)
{
    const int64_t g = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / LANES;
    if (g >= bound || g >= *n_groups) /* the same for the group's lanes */
        return;
    group_box<R, LANES>(g, (int)(threadIdx.x % LANES), groups, packed_at<R>{trg}, box);
}

/* The group boxes asked of k_pack_points (box NULL: none): of the groups of at most bound, the
 * count on the device, a warp each. */
template <typename R> struct boxes_in {
    int64_t bound;
    const int32_t *n_groups;
    const int2 *groups;
    typename vec4<R>::type *box;
};

/* The sorted points in the working precision; in fp32 also the rest of each coordinate,
 * lo = x - (float)x (the offset of the point from its fp32 rounding, ~2^-24 of the frame),
 * from which the walks form the offsets of close pairs (walk_args). The sources' launch also
 * gathers the tree's links (li.n_nodes > 0; one launch instead of two), and the launch of the
 * points the groups come from, for a tree built without a wait, their boxes (bx.box; the
 * points from x through the order, converted as here: one launch instead of two). */
template <typename R>
__global__ void k_pack_points(int64_t n, const int32_t *__restrict__ order,
                              const double *__restrict__ x, double scale,
                              typename vec4<R>::type *__restrict__ out, real4f *__restrict__ lo,
                              links_in li, boxes_in<R> bx)
{
    int64_t s = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (bx.box) {
        const int64_t g = s / 32; /* the same for the warp */
        if (g < bx.bound && g < *bx.n_groups)
            group_box<R, 32>(g, (int)(threadIdx.x % 32), bx.groups, mapped_at<R>{order, x, scale},
                             bx.box);
    }
    if (s < li.n_nodes && (!li.count || s < *li.count))
        li.links[s] = make_int4(li.more[s], li.next[s], li.begin[s], li.end[s]);
    if (s >= n)
        return;
    const int64_t i = order[s];
    const double v[3] = {x[3 * i] * scale, x[3 * i + 1] * scale, x[3 * i + 2] * scale};
    typename vec4<R>::type p;
    p.x = (R)v[0], p.y = (R)v[1], p.z = (R)v[2];
    p.w = 0;
    out[s] = p;
    if (lo) {
        real4f r;
        r.x = (float)(v[0] - (double)p.x), r.y = (float)(v[1] - (double)p.y);
        r.z = (float)(v[2] - (double)p.z), r.w = 0;
        lo[s] = r;
    }
}

/* Warps a split walk aims at (tune.split_warps per SM). */
int64_t split_warps(const fmk_plan *plan, int device)
{
    return (int64_t)fmk_bh_tune(plan)->split_warps * fmk_cuda_sm_count(device);
}

/* Splits the breadth-first walk (walk_args) when its groups give fewer warps than
 * split_warps: up to warps / groups parts (at most FMK_BH_MAX_PARTS), with at least
 * tune.split_nodes nodes per part at the split level (the more, the better the parts share
 * the work of a dense core), at the level no deeper than tune.split_level_max that allows the
 * most parts (the shallowest of equals: the least walk repeated by every part above it). (A
 * walk whose stack overflows above the split level is redone unsplit by the evaluation.) */
fmk_status choose_split(fmk_plan *plan, fmk_bh_state *s, int64_t m)
{
    const fmk_cuda_tree *t = &s->tree;
    const fmk_treecode_cuda_tune *k = fmk_bh_tune(plan);
    const int64_t target = split_warps(plan, s->device);
    s->parts = 1, s->split_begin = s->split_end = 0;
    if (plan->opts.walk == FMK_WALK_STACKLESS || s->n_groups == 0 || s->n_groups >= target)
        return FMK_OK;
    int64_t want = target / s->n_groups;
    want = want > FMK_BH_MAX_PARTS ? FMK_BH_MAX_PARTS : want;
    /* the level that allows the most parts (the shallowest of equals) */
    int64_t parts = 1;
    int level = 0;
    for (int L = 1; L <= k->split_level_max && L < t->levels; L++) {
        int64_t p = (t->level_begin[L + 1] - t->level_begin[L]) / k->split_nodes;
        p = p < want ? p : want;
        if (p > parts)
            parts = p, level = L;
    }
    if (parts < 2)
        return FMK_OK;
    fmk_status st =
        fmk_bh_need(plan, s, &s->part, (size_t)(parts * m * 32), "the split walk's sums");
    if (st != FMK_OK)
        return st;
    s->parts = (int)parts;
    s->split_begin = (int32_t)t->level_begin[level],
    s->split_end = (int32_t)t->level_begin[level + 1];
    return FMK_OK;
}

/* Everything geometric from mapped points on the device (d_xs, and d_xt unless self), queued
 * (build_wait waits). async: trees of at most tune.tree.small_max points are built without
 * a host wait (tree3d_cuda.h): the kernels after them take the node count from the device
 * and the buffers are sized by the node arrays' capacity. */
fmk_status build_launch(fmk_plan *plan, fmk_bh_state *s, int64_t ns, const double *d_xs, int64_t nt,
                        const double *d_xt, int async)
{
    const int self = plan->self, r = s->real;
    const int64_t m = self ? ns : nt;
    const int ls = (int)fmk_bh_leaf_size(plan);
    const size_t v4 = 4 * (size_t)r;
    const double S = fmk_bh_coord_scale(r);
    /* the groups, made by the launch of the tree they come from when it is built without a
     * wait (fmk_cuda_groups_want) */
    const fmk_treecode_cuda_tune *k = fmk_bh_tune(plan);
    const int merge = m >= k->group_merge_min ? k->group_merge : 0;
    const fmk_cuda_groups_want want = {FMK_BH_GROUP, merge, &s->d_groups, &s->cap_groups};
    fmk_status st = fmk_bh_ok(plan, cudaEventRecord(s->ev[0], 0), "cudaEventRecord");
    s->tree.tune = k->tree; /* the plan's knobs of the build (a freed tree is zeroed) */
    if (st == FMK_OK)
        st = async ? fmk_cuda_tree3d_build_async(plan, ns, d_xs, ls, (long long)fmk_bh_held(s),
                                                 self && m > 0 ? &want : NULL, &s->tree)
                   : fmk_cuda_tree3d_build(plan, ns, d_xs, ls, (long long)fmk_bh_held(s), &s->tree);
    if (st != FMK_OK)
        return st;
    fmk_cuda_tree *t = &s->tree;
    const int64_t nn = t->pending ? t->cap_nodes : t->n_nodes;
    const int32_t *count = t->pending ? t->d_lb + FMK_CUDA_TREE_LB_NODES : NULL;
    st = fmk_bh_need(plan, s, &s->src, (size_t)ns * v4, "the sorted sources");
    if (st == FMK_OK && r == 4)
        st = fmk_bh_need(plan, s, &s->src_lo, (size_t)ns * sizeof(real4f),
                         "the sources' fp32 offsets");
    if (st == FMK_OK)
        st = fmk_bh_need(plan, s, &s->links, (size_t)nn * sizeof(int4), "the tree's links");
    if (st == FMK_OK)
        st = fmk_bh_need(plan, s, &s->node, (size_t)nn * 4 * v4, "the tree's moments");
    if (st != FMK_OK)
        return st;

    /* Targets: the sources' tree gives the groups, or the targets get their own tree. */
    fmk_cuda_tree *gt = t; /* the tree the groups come from */
    if (!self && m > 0) {
        gt = &s->ttree;
        gt->tune = k->tree;
        st = async ? fmk_cuda_tree3d_build_async(plan, m, d_xt, FMK_BH_GROUP,
                                                 (long long)fmk_bh_held(s), &want, gt)
                   : fmk_cuda_tree3d_build(plan, m, d_xt, FMK_BH_GROUP, (long long)fmk_bh_held(s),
                                           gt);
        if (st == FMK_OK)
            st = fmk_bh_need(plan, s, &s->trg, (size_t)m * v4, "the sorted targets");
        if (st == FMK_OK && r == 4)
            st = fmk_bh_need(plan, s, &s->trg_lo, (size_t)m * sizeof(real4f),
                             "the targets' fp32 offsets");
        if (st != FMK_OK)
            return st;
    }
    int64_t bound = 0;
    if (m > 0) { /* (nothing to queue when the build's launch made them) */
        st = fmk_cuda_tree3d_groups(plan, gt, FMK_BH_GROUP, merge, (long long)fmk_bh_held(s),
                                    &s->d_groups, &s->cap_groups);
        bound = fmk_cuda_tree3d_groups_bound(gt, FMK_BH_GROUP);
    }
    if (st == FMK_OK && bound > 0)
        st = fmk_bh_need(plan, s, &s->box, (size_t)bound * 2 * v4, "the group boxes");
    if (st != FMK_OK)
        return st;
    const int32_t *n_groups = gt->d_lb + FMK_CUDA_TREE_LB_GROUPS;
    /* the boxes in the packing launch of the points they bound: trees built without a wait
     * (a warp per group) */
    const int fold = bound > 0 && gt->pending && k->pack_boxes;
    const boxes_in<float> bf = {bound, n_groups, s->d_groups, fold ? (real4f *)s->box.p : NULL};
    const boxes_in<double> bd = {bound, n_groups, s->d_groups, fold ? (real4d *)s->box.p : NULL};
    const boxes_in<float> nf = {0, NULL, NULL, NULL};
    const boxes_in<double> nd = {0, NULL, NULL, NULL};
    const links_in li = {(int32_t)nn, count,    t->d_more,         t->d_next,
                         t->d_begin,  t->d_end, (int4 *)s->links.p};
    const int64_t box_threads = fold ? bound * 32 : 0;
    int64_t np = ns > nn ? ns : nn;
    np = self && np < box_threads ? box_threads : np;
    if (r == 4)
        k_pack_points<float><<<fmk_bh_blocks(np), FMK_BH_BLOCK>>>(
            ns, t->d_order, d_xs, S, (real4f *)s->src.p, (real4f *)s->src_lo.p, li, self ? bf : nf);
    else
        k_pack_points<double><<<fmk_bh_blocks(np), FMK_BH_BLOCK>>>(
            ns, t->d_order, d_xs, S, (real4d *)s->src.p, NULL, li, self ? bd : nd);
    const void *trg = s->src.p;
    if (!self && m > 0) {
        const links_in none = {0, NULL, NULL, NULL, NULL, NULL, NULL};
        const int64_t mp = m > box_threads ? m : box_threads;
        if (r == 4)
            k_pack_points<float><<<fmk_bh_blocks(mp), FMK_BH_BLOCK>>>(
                m, gt->d_order, d_xt, S, (real4f *)s->trg.p, (real4f *)s->trg_lo.p, none, bf);
        else
            k_pack_points<double><<<fmk_bh_blocks(mp), FMK_BH_BLOCK>>>(
                m, gt->d_order, d_xt, S, (real4d *)s->trg.p, NULL, none, bd);
        trg = s->trg.p;
    }
    if ((st = fmk_bh_ok(plan, cudaGetLastError(), "the packing kernel")) != FMK_OK)
        return st;
    if (bound > 0 && !fold) {
        const real4f *t4 = (const real4f *)trg;
        const real4d *t8 = (const real4d *)trg;
        if (r == 4 && gt->pending) /* a small tree (built without a wait) */
            k_group_boxes<float, 32><<<fmk_bh_blocks(bound * 32), FMK_BH_BLOCK>>>(
                bound, n_groups, s->d_groups, t4, (real4f *)s->box.p);
        else if (r == 4)
            k_group_boxes<float, 1><<<fmk_bh_blocks(bound), FMK_BH_BLOCK>>>(
                bound, n_groups, s->d_groups, t4, (real4f *)s->box.p);
        else if (gt->pending)
            k_group_boxes<double, 32><<<fmk_bh_blocks(bound * 32), FMK_BH_BLOCK>>>(
                bound, n_groups, s->d_groups, t8, (real4d *)s->box.p);
        else
            k_group_boxes<double, 1><<<fmk_bh_blocks(bound), FMK_BH_BLOCK>>>(
                bound, n_groups, s->d_groups, t8, (real4d *)s->box.p);
        st = fmk_bh_ok(plan, cudaGetLastError(), "the group box kernel");
    }
    return st;
}

/* The wait for build_launch (the caller's contract: set_points returns with the work done),
 * then what the host needs of the trees. *redo: a tree built without a wait did not fit in
 * its arrays (or its split sort's keys were out of order); build again with async = 0. */
fmk_status build_wait(fmk_plan *plan, fmk_bh_state *s, int64_t m, int *redo)
{
    *redo = 0;
    fmk_status st = fmk_bh_ok(plan, cudaEventRecord(s->ev[1], 0), "cudaEventRecord");
    if (st == FMK_OK)
        st = fmk_bh_ok(plan, cudaEventSynchronize(s->ev[1]), "the tree build");
    if (st != FMK_OK)
        return st;
    int r1 = 0, r2 = 0;
    fmk_cuda_tree3d_finish(&s->tree, &r1);
    fmk_cuda_tree3d_finish(&s->ttree, &r2);
    if (r1 || r2) {
        fmk_bh_counters(plan)->build_redos++;
        *redo = 1;
        return FMK_OK;
    }
    /* the group count came to the pinned host copy with the stream */
    const fmk_cuda_tree *gt = plan->self ? &s->tree : &s->ttree;
    s->n_groups = m > 0 ? gt->h_lb[FMK_CUDA_TREE_LB_GROUPS] : 0;
    st = choose_split(plan, s, m); /* plan->n_targets is not set yet here */
    float ms = 0;
    if (st == FMK_OK)
        st = fmk_bh_ok(plan, cudaEventElapsedTime(&ms, s->ev[0], s->ev[1]), "cudaEventElapsedTime");
    if (st == FMK_OK)
        s->tree_time = plan->info.phase_time[FMK_PHASE_TREE] = ms * 1e-3;
    return st;
}

} // namespace

int64_t fmk_bh_split_bytes_bound(const fmk_plan *plan, int64_t m)
{
    /* parts * m * 32 bytes with parts <= FMK_BH_MAX_PARTS and parts * groups < 2 * warps,
     * groups >= m / 64 */
    const int64_t b = 2 * split_warps(plan, plan->opts.device) * 64 * 32;
    const int64_t bm = FMK_BH_MAX_PARTS * m * 32;
    return b < bm ? b : bm;
}

/* build_launch and build_wait, without a wait inside when async (and again with one when that
 * tree did not fit); then an interrupt check. */
fmk_status fmk_bh_build(fmk_plan *plan, fmk_bh_state *s, int64_t ns, const double *d_xs, int64_t nt,
                        const double *d_xt, int async)
{
    const int64_t m = plan->self ? ns : nt;
    int redo = 0;
    fmk_status st = build_launch(plan, s, ns, d_xs, nt, d_xt, async);
    if (st == FMK_OK)
        st = build_wait(plan, s, m, &redo);
    if (st == FMK_OK && redo)
        st = build_launch(plan, s, ns, d_xs, nt, d_xt, 0);
    if (st == FMK_OK && redo)
        st = build_wait(plan, s, m, &redo);
    if (st == FMK_OK) /* the build waited for: an interrupt check */
        st = fmk_cuda_checkpoint(plan, NULL, NULL);
    return st;
}

/* The resolution guard (tree/resolution.h), as the CPU engine's, on the finished trees: the
 * sources' tree, and with separate targets the targets' own (each set on its own: the CPU
 * engine sorts them together). */
fmk_status fmk_bh_check_resolution(fmk_plan *plan, const fmk_bh_state *s, int64_t ns,
                                   const double *d_xs, int64_t nt, const double *d_xt)
{
    fmk_resolution_opts guard = {fmk_treecode_accuracy(plan), FMK_RESOLUTION_FP64, 0, 0, 0};
    if (plan->opts.precision == FMK_PRECISION_FP32)
        guard.local_unit = FMK_RESOLUTION_FP32_LOCAL, guard.local_points = FMK_BH_GROUP;
    fmk_status st = fmk_cuda_resolution_check(plan, "tree", &guard, ns, s->tree.d_order, d_xs, 1.0);
    if (st == FMK_OK && !plan->self && nt > 0)
        st = fmk_cuda_resolution_check(plan, "tree", &guard, nt, s->ttree.d_order, d_xt, 1.0);
    return st;
}
