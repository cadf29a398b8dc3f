/*
 * super.cu -- super-groups (tune.super): the group walk's far field found once for a few
 * consecutive groups (k_walk_super), with their start lists, and a second level of parents;
 * the groups in Morton order for them; their buffer.
 */
#ifdef FMK_BH_COUNT
#include <stdio.h>
#endif
#include <math.h>

#include <cub/device/device_radix_sort.cuh>

#include "treecode/cuda/bh_local.cuh"
#include "treecode/cuda/bh_diag.cuh"

namespace {

#ifdef FMK_BH_COUNT
/* Super-groups' walk: super-groups, start-list entries, nodes into their expansions, steps,
 * overflows (start lists that did not fit), the longest list (a build with -DFMK_BH_COUNT). */
__device__ unsigned long long fmk_bh_super_counts[12]; /* 6..11: a second level's parents */
#endif

/* The super-groups' walk (fmk_cuda_bh_super, walk_args): one warp per super-group of
 * a.super consecutive groups of a.super_order, from the root, breadth-first as k_walk_bfs
 * (32 nodes per step), with the super-group's box B (the union of its groups' boxes, widened
 * by the rounding of its centre) and the tests of the group walk. A node that B's box test
 * accepts and whose centre is farther than a r_open + local_k R_B from B's centre (the
 * cell-to-group step's rule with B for the group's box) goes into the super-group's expansion
 * (bfs_m2l), which is written out once (FMK_BH_LOCAL4 coefficients). A node that B opens is
 * opened when every group box of the super-group opens it too (a.super_open = 0) or always
 * (1). Every other node (accepted by B but too near for the expansion, leaves, nodes some
 * group accepts) goes to the start list. Each group box lies in B, so a node in the expansion
 * passes the group's own tests (box test and the step's rule), and every node of the tree is
 * either in the expansion, in the list, or under an opened node: each source reaches each
 * target once. A list that would exceed a.super_cap entries is dropped (count -1: the groups
 * walk from the root). With a second level (a.super_up) the walk starts from the parent's
 * start list instead of the root (whose nodes the parent neither took nor opened: the same
 * cover of the tree), unless that list overflowed. */
#ifndef FMK_SUPER_WARPS
#define FMK_SUPER_WARPS 1
#endif
constexpr int SUPER_WARPS = FMK_SUPER_WARPS, SUPER_STACK = 1024;

/* The super box of the ng groups from g0 (their boxes into gbox): the union of the group
 * boxes, reduced over the lanes, into *cb, *hb; returns the step's radius. */
template <typename R>
__device__ __forceinline__ R super_box(const fmk_bh_walk_args<R> &a, int64_t g0, int ng,
                                       typename vec4<R>::type (*gbox)[2],
                                       typename vec4<R>::type *cb, typename vec4<R>::type *hb)
{
    typedef typename vec4<R>::type V;
    constexpr unsigned FULL = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    /* the super box: the union of the group boxes, reduced over the lanes */
    R lo[3] = {(R)1e30, (R)1e30, (R)1e30}, hi[3] = {(R)-1e30, (R)-1e30, (R)-1e30};
    if (lane < ng) {
        const int32_t gi = a.super_order ? a.super_order[g0 + lane] : (int32_t)(g0 + lane);
        const V c = a.box[2 * gi], h = a.box[2 * gi + 1];
        gbox[lane][0] = c, gbox[lane][1] = h;
        lo[0] = c.x - h.x, lo[1] = c.y - h.y, lo[2] = c.z - h.z;
        hi[0] = c.x + h.x, hi[1] = c.y + h.y, hi[2] = c.z + h.z;
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1)
#pragma unroll
        for (int k = 0; k < 3; k++) {
            lo[k] = fmin(lo[k], __shfl_xor_sync(FULL, lo[k], d));
            hi[k] = fmax(hi[k], __shfl_xor_sync(FULL, hi[k], d));
        }
    V c, h; /* centre, half sizes: a margin of 2^-20 of the coordinates for the rounding */
    c.x = (lo[0] + hi[0]) / 2, c.y = (lo[1] + hi[1]) / 2, c.z = (lo[2] + hi[2]) / 2, c.w = 0;
    h.x = (hi[0] - lo[0]) / 2 + fabs(c.x) * (R)0x1p-20;
    h.y = (hi[1] - lo[1]) / 2 + fabs(c.y) * (R)0x1p-20;
    h.z = (hi[2] - lo[2]) / 2 + fabs(c.z) * (R)0x1p-20;
    h.w = 0;
    /* the step's radius: k R_B, and at least k R_g + |c - c_g| for each group g (so that the
     * group's own rule, |xc - c_g| > a r_open + k R_g, holds for every node it takes) */
    R lr = 0;
    if (lane < ng) {
        const V gc = gbox[lane][0], gh = gbox[lane][1];
        const R ux = c.x - gc.x, uy = c.y - gc.y, uz = c.z - gc.z;
        lr = a.local_k * sqrt(gh.x * gh.x + gh.y * gh.y + gh.z * gh.z) +
             sqrt(ux * ux + uy * uy + uz * uz);
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1)
        lr = fmax(lr, __shfl_xor_sync(FULL, lr, d));
    *cb = c, *hb = h;
    return fmax(a.super_k * sqrt(h.x * h.x + h.y * h.y + h.z * h.z), lr);
}

/* The rest of the super-group's list into its expansion, written out (FMK_BH_LOCAL4
 * coefficients at a.super_local) when it has any node. */
template <typename R, int ORDER, int LOC>
__device__ __forceinline__ void
super_local_out(const fmk_bh_walk_args<R> &a, int64_t sg, const int32_t *list, int n_loc,
                const typename vec4<R>::type &c, bool any_loc, local_acc<R, LOC> &loc)
{
    constexpr unsigned FULL = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    if (n_loc > 0)
        bfs_m2l<R, ORDER, LOC>(a.node, list, n_loc, a.local, c, a.eps2, loc);
    if (any_loc) {
        constexpr int NC = local_acc<R, LOC>::NC;
        R H[NC];
#pragma unroll
        for (int k = 0; k < NC; k++)
            H[k] = k < 32 ? __shfl_sync(FULL, loc.c[0], k) : loc.c[k < 32 ? 0 : k - 31];
        R L[FMK_BH_LOCAL4];
        if (LOC == 5)
            local4_from_harm(H, L);
        else
#pragma unroll
            for (int k = 0; k < FMK_BH_LOCAL4; k++)
                L[k] = H[k < NC ? k : 0];
        if (lane == 0)
#pragma unroll
            for (int k = 0; k < FMK_BH_LOCAL4; k++)
                a.super_local[sg * FMK_BH_LOCAL4 + k] = L[k];
    }
}

template <typename R, int ORDER, int LOC>
__global__ void __launch_bounds__(SUPER_WARPS * 32) k_walk_super(fmk_bh_walk_args<R> a)
{
    typedef typename vec4<R>::type V;
    constexpr unsigned FULL = 0xffffffffu;
    __shared__ int32_t s_stack[SUPER_WARPS][SUPER_STACK];
    __shared__ int32_t s_loc[SUPER_WARPS][64];
    __shared__ V s_gbox[SUPER_WARPS][32][2];
    const int wb = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t sg = blockIdx.x * (int64_t)SUPER_WARPS + wb;
    if (sg * a.super >= a.n_groups || charges_bad(a.stats))
        return;
#ifdef FMK_BH_TRACE
    const unsigned long long tr0 = trace_clock();
#endif
    int32_t *stack = s_stack[wb], *loc_list = s_loc[wb];
    V(*gbox)[2] = s_gbox[wb];
    const unsigned lt = (1u << lane) - 1;
    const int64_t g0 = sg * a.super;
    const int ng = (int)(a.n_groups - g0 < a.super ? a.n_groups - g0 : a.super);

    V c, h; /* the super box's centre and half sizes */
    const R loc_r = super_box<R>(a, g0, ng, gbox, &c, &h);

    int32_t *out = a.super_list + sg * a.super_cap;
    int sp = 1, n_out = 0, n_loc = 0, h_loc = 0; /* warp-uniform */
    const int64_t up = a.super_up ? g0 / a.super_up : 0;
    const int32_t n_up = a.super_up ? a.up_count[up] : -1; /* < 0: from the root */
    bool any_loc = false, over = false;
    int32_t all_loc = 0; /* nodes into the expansion (its centre's w: super_start counts them) */
    local_acc<R, LOC> loc = {};
#ifdef FMK_BH_COUNT
    long long c_steps = 0, c_loc = 0;
#endif
    if (n_up >= 0) { /* the parent's list (at most up_cap <= SUPER_LIST_MAX entries) */
        for (int e = lane; e < n_up; e += 32)
            stack[e] = a.up_list[up * a.up_cap + e];
        sp = n_up;
    } else if (lane == 0) {
        stack[0] = 0;
    }
    __syncwarp();
    while (sp > 0) {
#ifdef FMK_BH_COUNT
        c_steps++;
#endif
        const int nb = sp < 32 ? sp : 32;
        sp -= nb;
        const bool valid = lane < nb;
        const int32_t i = valid ? stack[sp + lane] : 0;
        __syncwarp();
        const int4 l = __ldg(&a.links[i]);
        const int32_t nc = __ldg(&a.n_children[i]);
        const V x = a.node[4 * i];
        const R dx = fmax(fabs(x.x - c.x) - h.x, (R)0);
        const R dy = fmax(fabs(x.y - c.y) - h.y, (R)0);
        const R dz = fmax(fabs(x.z - c.z) - h.z, (R)0);
        const bool far = dx * dx + dy * dy + dz * dz > x.w;
        bool to_loc = false;
        if (valid && far && l.w - l.z > p2p_cut<ORDER>::value) {
            const R ex = x.x - c.x, ey = x.y - c.y, ez = x.z - c.z;
            const R d = sqrt(ex * ex + ey * ey + ez * ez) - loc_r;
            to_loc = d > 0 && d * d > a.local_a2 * x.w;
        }
        bool open = valid && !far && l.x >= 0;
        if (open && !a.super_open) /* opened only if no group box accepts it */
            for (int k = 0; k < ng && open; k++) {
                const V gc = gbox[k][0], gh = gbox[k][1];
                const R gx = fmax(fabs(x.x - gc.x) - gh.x, (R)0);
                const R gy = fmax(fabs(x.y - gc.y) - gh.y, (R)0);
                const R gz = fmax(fabs(x.z - gc.z) - gh.z, (R)0);
                open = !(gx * gx + gy * gy + gz * gz > x.w);
            }
        int32_t push = open ? nc : 0;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const int32_t v = __shfl_up_sync(FULL, push, d);
            if (lane >= d)
                push += v;
        }
        const int32_t pushed = __shfl_sync(FULL, push, 31);
        bool emit = valid && !to_loc && !open;
        if (sp + pushed > SUPER_STACK) { /* no room: the group walks open them */
            emit = emit || open;
        } else {
            if (open)
                for (int32_t k = 0, at = sp + push - nc; k < nc; k++)
                    stack[at + k] = l.x + k;
            sp += pushed;
        }
        const unsigned loc_mask = __ballot_sync(FULL, to_loc);
        if (loc_mask) {
            if (to_loc)
                loc_list[(h_loc + n_loc + __popc(loc_mask & lt)) & 63] = i;
            n_loc += __popc(loc_mask);
            all_loc += __popc(loc_mask);
            any_loc = true;
#ifdef FMK_BH_COUNT
            c_loc += __popc(loc_mask);
#endif
            __syncwarp();
            if (n_loc >= 32) {
                bfs_m2l<R, ORDER, LOC>(a.node, loc_list + h_loc, 32, a.local, c, a.eps2, loc);
                h_loc ^= 32, n_loc -= 32;
                __syncwarp();
            }
        }
        const unsigned emit_mask = __ballot_sync(FULL, emit);
        if (n_out + __popc(emit_mask) > a.super_cap) {
            over = true;
            break;
        }
        if (emit)
            out[n_out + __popc(emit_mask & lt)] = i;
        n_out += __popc(emit_mask);
        __syncwarp(); /* the stack's slots */
    }
#ifdef FMK_BH_COUNT
    if (lane == 0) {
        unsigned long long *sc = fmk_bh_super_counts + (a.super_up ? 0 : a.up_count ? 6 : 0);
        atomicAdd(&sc[0], 1ull);
        atomicAdd(&sc[1], (unsigned long long)n_out);
        atomicAdd(&sc[2], (unsigned long long)c_loc);
        atomicAdd(&sc[3], (unsigned long long)c_steps);
        atomicAdd(&sc[4], over ? 1ull : 0ull);
        atomicMax(&sc[5], (unsigned long long)n_out);
    }
#endif
#ifdef FMK_BH_TRACE
    trace_put(tr0, a.super_up ? 1 : a.up_count ? 2 : 1, over ? -1.0f : (float)n_out, (unsigned)sg);
#endif
    if (over) {
        if (lane == 0)
            a.super_count[sg] = -1;
        return;
    }
    super_local_out<R, ORDER, LOC>(a, sg, loc_list + h_loc, n_loc, c, any_loc, loc);
    if (lane == 0) {
        c.w = any_loc ? (R)all_loc : (R)0; /* 0: no expansion; else its nodes (exact in fp32:
                                             * fewer than 2^24) */
        a.super_centre[sg] = c;
        a.super_count[sg] = n_out;
    }
}

/* The groups' begins (their Morton order's keys) and indices, for the super-groups' sort. */
__global__ void k_super_keys(int64_t n_groups, const int2 *__restrict__ groups,
                             int32_t *__restrict__ keys, int32_t *__restrict__ vals)
{
    const int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (g < n_groups)
        keys[g] = groups[g].x, vals[g] = (int32_t)g;
}

/* The super-groups' walks: with a second level (a.super_up) the parents' first, from the
 * root (their lists and expansions in the up_* buffers; the parents' own counts kept apart
 * in the statistics: up_count set, super_up 0), then the super-groups'. */
template <typename R, int ORDER, int LOC> void super_walks(const fmk_bh_walk_args<R> &a)
{
    const int64_t n_super = (a.n_groups + a.super - 1) / a.super;
    const unsigned super_blocks = (unsigned)((n_super + SUPER_WARPS - 1) / SUPER_WARPS);
    if (a.super_up) {
        fmk_bh_walk_args<R> u = a;
        u.super = a.super_up, u.super_up = 0, u.super_cap = a.up_cap;
        u.super_count = a.up_count, u.super_list = a.up_list;
        u.super_centre = a.up_centre, u.super_local = a.up_local;
        const int64_t n_up = (a.n_groups + a.super_up - 1) / a.super_up;
        k_walk_super<R, ORDER, LOC>
            <<<(unsigned)((n_up + SUPER_WARPS - 1) / SUPER_WARPS), SUPER_WARPS * 32>>>(u);
    }
    k_walk_super<R, ORDER, LOC><<<super_blocks, SUPER_WARPS * 32>>>(a);
}

template <typename R> cudaError_t super_walks_of(const fmk_bh_walk_args<R> &a, int order, int loc)
{
    const int harm = loc == 5;
    switch (order * 2 + harm) {
    case 0: super_walks<R, 0, 4>(a); break;
    case 1: super_walks<R, 0, 5>(a); break;
    case 2: super_walks<R, 1, 4>(a); break;
    case 3: super_walks<R, 1, 5>(a); break;
    case 4: super_walks<R, 2, 4>(a); break;
    default: super_walks<R, 2, 5>(a); break;
    }
    return cudaPeekAtLastError();
}

/* The super-groups' buffer (fmk_bh_state.super) for g groups: the groups' begins and indices
 * and their Morton order (CUB radix sort: keys and values twice, and its workspace), then per
 * super-group its start-list length, centre, expansion and start list (walk_args). Offsets
 * in bytes, each aligned to 256. */
typedef struct super_layout {
    size_t keys[2], vals[2], temp, temp_bytes, count, centre, local, list, bytes;
    size_t up_count, up_centre, up_local, up_list; /* a second level's parents (super_up) */
    int key_bits, super_up;
} super_layout;

size_t align256(size_t b)
{
    return (b + 255) & ~(size_t)255;
}

int super_cap(const fmk_treecode_cuda_tune *k)
{
    return k->super_cap < FMK_BH_SUPER_LIST_MAX ? k->super_cap : FMK_BH_SUPER_LIST_MAX;
}

int super2_cap(const fmk_treecode_cuda_tune *k)
{
    const int c = k->super2_cap > 0 ? k->super2_cap : 0;
    return c < FMK_BH_SUPER_LIST_MAX ? c : FMK_BH_SUPER_LIST_MAX;
}

/* Groups per parent of a second level (tune.super2), 0 without one. */
int super_up_of(const fmk_treecode_cuda_tune *k)
{
    const int s2 = k->super2;
    return s2 >= 2 && s2 * k->super <= 32 ? s2 * k->super : 0;
}

cudaError_t super_layout_of(const fmk_treecode_cuda_tune *k, int64_t g, int64_t m, int real,
                            super_layout *l)
{
    const int64_t ns = (g + k->super - 1) / k->super;
    l->super_up = super_up_of(k);
    const int64_t nu = l->super_up ? (g + l->super_up - 1) / l->super_up : 0;
    l->key_bits = 1;
    while (l->key_bits < 31 && (1ll << l->key_bits) <= m)
        l->key_bits++;
    l->temp_bytes = 0;
    cudaError_t err = cub::DeviceRadixSort::SortPairs(NULL, l->temp_bytes, (const int32_t *)NULL,
                                                      (int32_t *)NULL, (const int32_t *)NULL,
                                                      (int32_t *)NULL, (int)g, 0, l->key_bits);
    size_t o = 0;
    for (int k2 = 0; k2 < 2; k2++) {
        l->keys[k2] = o, o += align256((size_t)g * 4);
        l->vals[k2] = o, o += align256((size_t)g * 4);
    }
    l->temp = o, o += align256(l->temp_bytes);
    l->count = o, o += align256((size_t)ns * 4);
    l->centre = o, o += align256((size_t)ns * 4 * real);
    l->local = o, o += align256((size_t)ns * FMK_BH_LOCAL4 * real);
    l->list = o, o += align256((size_t)ns * super_cap(k) * 4);
    l->up_count = o, o += align256((size_t)nu * 4);
    l->up_centre = o, o += align256((size_t)nu * 4 * real);
    l->up_local = o, o += align256((size_t)nu * FMK_BH_LOCAL4 * real);
    l->up_list = o, o += (size_t)nu * super2_cap(k) * 4;
    l->bytes = o;
    return err;
}

template <typename R>
fmk_status super_setup(fmk_plan *plan, fmk_bh_state *s, fmk_bh_walk_args<R> *a)
{
    const fmk_treecode_cuda_tune *k = fmk_bh_tune(plan);
    super_layout l;
    cudaError_t err = super_layout_of(k, s->n_groups, a->m, s->real, &l);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cub::DeviceRadixSort (workspace query)");
    fmk_status st = fmk_bh_need(plan, s, &s->super, l.bytes, "the super-groups");
    s->bytes = fmk_bh_held(s);
    plan->state_bytes_device = plan->info.bytes_device = s->bytes;
    if (st != FMK_OK)
        return st;
    char *p = (char *)s->super.p;
    int32_t *keys[2] = {(int32_t *)(p + l.keys[0]), (int32_t *)(p + l.keys[1])};
    int32_t *vals[2] = {(int32_t *)(p + l.vals[0]), (int32_t *)(p + l.vals[1])};
    /* the groups in Morton order: made so by the tree (fmk_cuda_tree3d_groups), or sorted */
    const fmk_cuda_tree *gt = plan->self ? &s->tree : &s->ttree;
    if (!gt->groups_sorted) {
        k_super_keys<<<fmk_bh_blocks(s->n_groups), FMK_BH_BLOCK>>>(s->n_groups, s->d_groups,
                                                                   keys[0], vals[0]);
        err = cudaGetLastError();
        size_t tb = l.temp_bytes;
        if (err == cudaSuccess)
            err = cub::DeviceRadixSort::SortPairs(p + l.temp, tb, keys[0], keys[1], vals[0],
                                                  vals[1], (int)s->n_groups, 0, l.key_bits);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, "the super-groups' sort");
    }
    a->super = k->super;
    a->super_cap = super_cap(k);
    a->super_k = (R)(a->local_k * (k->super_k > 1 ? k->super_k : 1));
    a->super_order = gt->groups_sorted ? NULL : vals[1];
    a->super_count = (int32_t *)(p + l.count);
    a->super_list = (int32_t *)(p + l.list);
    a->super_centre = (typename vec4<R>::type *)(p + l.centre);
    a->super_local = (R *)(p + l.local);
    a->super_up = l.super_up, a->up_cap = super2_cap(k);
    if (l.super_up) {
        a->up_count = (int32_t *)(p + l.up_count);
        a->up_list = (int32_t *)(p + l.up_list);
        a->up_centre = (typename vec4<R>::type *)(p + l.up_centre);
        a->up_local = (R *)(p + l.up_local);
    }
    return FMK_OK;
}

} // namespace

int fmk_bh_super_wanted(const fmk_plan *plan, int64_t m)
{
    const fmk_treecode_cuda_tune *k = fmk_bh_tune(plan);
    return k->super >= 2 && k->super <= 32 && k->super_cap > 0 &&
           plan->opts.walk != FMK_WALK_STACKLESS && k->local == 4 && m >= k->super_min;
}

int fmk_bh_super_deep(const fmk_plan *plan, const fmk_bh_state *s)
{
    const double uniform = log((double)plan->n_sources / (double)fmk_bh_leaf_size(plan)) / log(8.0);
    return s->tree.levels >= uniform + fmk_bh_tune(plan)->super_depth;
}

int64_t fmk_bh_super_bytes(const fmk_plan *plan, int64_t g, int64_t m, int real)
{
    super_layout l;
    if (super_layout_of(fmk_bh_tune(plan), g, m, real, &l) != cudaSuccess)
        (void)cudaGetLastError(); /* a size query: the workspace counted as 0 */
    return (int64_t)l.bytes;
}

fmk_status fmk_bh_super_setup(fmk_plan *plan, fmk_bh_state *s, fmk_bh_walk_args<float> *a)
{
    return super_setup<float>(plan, s, a);
}

fmk_status fmk_bh_super_setup(fmk_plan *plan, fmk_bh_state *s, fmk_bh_walk_args<double> *a)
{
    return super_setup<double>(plan, s, a);
}

cudaError_t fmk_cuda_bh_super_walks(const fmk_bh_walk_args<float> &a, int order, int loc)
{
    return super_walks_of<float>(a, order, loc);
}

cudaError_t fmk_cuda_bh_super_walks(const fmk_bh_walk_args<double> &a, int order, int loc)
{
    return super_walks_of<double>(a, order, loc);
}

void fmk_bh_super_diag_begin(void)
{
#ifdef FMK_BH_COUNT
    unsigned long long sc[12] = {0};
    (void)cudaMemcpyToSymbol(fmk_bh_super_counts, sc, sizeof sc);
#endif
#ifdef FMK_BH_TRACE
    trace_reset();
#endif
}

void fmk_bh_super_diag_end(int super, int super_up)
{
#ifdef FMK_BH_COUNT
    unsigned long long sc[12] = {0};
    if (super && cudaMemcpyFromSymbol(sc, fmk_bh_super_counts, sizeof sc) == cudaSuccess)
        for (int lv = 0; lv < 2; lv++) {
            const unsigned long long *c = sc + 6 * lv;
            if (c[0] > 0)
                fprintf(stderr,
                        "super-groups%s: %llu of %d groups; per super-group %.1f "
                        "start-list entries (longest %llu), %.1f nodes into its expansion, "
                        "%.1f steps; %llu overflows\n",
                        lv ? " (parents)" : "", c[0], lv ? super_up : super, (double)c[1] / c[0],
                        c[5], (double)c[2] / c[0], (double)c[3] / c[0], c[4]);
        }
#else
    (void)super, (void)super_up;
#endif
#ifdef FMK_BH_TRACE
    trace_append(0);
#endif
}
