/*
 * build_levels.cu -- the nodes of a large tree level by level over the whole GPU: the cell
 * table of the first levels (k_cell_starts), those levels by one block (build_small.cu), then
 * a level per launch (k_level: count, single-pass scan and write), or a count, CUB's scan and
 * a write per level where k_level's tile states do not fit in the level workspace. The level
 * boundaries stay on the device; the host looks at them every FMK_CUDA_TREE_CHECK levels.
 * Leaves of at most ONE_LEAF_MAX points take the one-pass build instead (build_one_pass.cu).
 */
#include <cub/agent/single_pass_scan_operators.cuh>
#include <cub/device/device_scan.cuh>

#include "tree/cuda/tree3d_device.cuh"

namespace {

/* The level kernels run 8 threads per node (a node's threads are 8 consecutive lanes of a
 * warp): thread o finds where octant o starts, one binary search each, instead of one thread
 * searching the 7 boundaries one after another (a chain of 7 searches of up to 20 dependent
 * loads each). The boundaries, and so the tree, are the same. */

/* Lanes of the calling thread's node (8 consecutive lanes of its warp). */
__device__ __forceinline__ unsigned node_lanes()
{
    return 0xffu << (threadIdx.x & 24);
}

/* The first levels' octant boundaries without binary searches: cells[c] is the first sorted
 * position whose key's cell of level CELL_LEVEL is >= c (k_cell_starts, 8^CELL_LEVEL + 1
 * entries), so where octant o of a node of level L < CELL_LEVEL starts is one load, not a
 * chain of ~20 dependent loads. */
__global__ void k_cell_starts(int64_t n, const uint64_t *__restrict__ keys,
                              int32_t *__restrict__ cells)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i > n)
        return;
    const int shift = 3 * (FMK_TREE_KEY_BITS - CELL_LEVEL);
    const int64_t c = i < n ? (int64_t)(keys[i] >> shift) : CELLS;
    const int64_t prev = i > 0 ? (int64_t)(keys[i - 1] >> shift) : -1;
    for (int64_t q = prev + 1; q <= c; q++) /* the empty cells before c start here too */
        cells[q] = (int32_t)i;
}

/* For thread o of node [b, e) at level L: [*lo, *hi), its octant's points (children at level
 * L + 1; empty when the node does not split), and the mask of the node's nonempty octants (as
 * bits of the warp's lanes). All 8 threads of the node must call it. cells (may be NULL): the
 * table of k_cell_starts. */
__device__ __forceinline__ unsigned octant_of(const uint64_t *__restrict__ keys,
                                              const int32_t *__restrict__ cells, int32_t b,
                                              int32_t e, bool split, int L, int32_t *lo,
                                              int32_t *hi)
{
    const unsigned o = threadIdx.x & 7, lanes = node_lanes();
    const int shift = 3 * (FMK_TREE_KEY_BITS - 1 - L);
    int32_t l = b;
    if (split && o > 0)
        l = octant_start(keys, cells, b, e, shift, L, o);
    int32_t h = __shfl_down_sync(lanes, l, 1, 8);
    h = o == 7 ? e : h;
    *lo = l, *hi = split ? h : b;
    return __ballot_sync(lanes, split && h > l) & lanes;
}

/* Children per node of level L (0: a leaf), 8 threads per node; more = -1 for now. The level
 * is nodes [lb[L], lb[L + 1]); bound >= its size is the grid (8 bound threads), and counts[0 ..
 * bound) gets the child counts (0 past the level) for the scan. */
__global__ void k_count_children(int L, int32_t bound, int leaf_size,
                                 const int32_t *__restrict__ lb, const uint64_t *__restrict__ keys,
                                 const int32_t *__restrict__ cells,
                                 const int32_t *__restrict__ begin, const int32_t *__restrict__ end,
                                 int32_t *__restrict__ n_children, int32_t *__restrict__ more,
                                 int32_t *__restrict__ counts)
{
    const int32_t k = (int32_t)((blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 3);
    if (k >= bound) /* the node's 8 threads leave together */
        return;
    const int32_t first = lb[L], count = lb[L + 1] - first;
    const bool o0 = (threadIdx.x & 7) == 0;
    if (k >= count) {
        if (o0)
            counts[k] = 0;
        return;
    }
    const int32_t i = first + k, b = begin[i], e = end[i];
    int32_t lo, hi;
    const int c = __popc(
        octant_of(keys, cells, b, e, e - b > leaf_size && L < FMK_TREE_MAX_LEVEL, L, &lo, &hi));
    if (o0) {
        n_children[i] = c;
        more[i] = -1;
        counts[k] = c;
    }
}

/* Writes the children of level L, 8 threads per node: node first + k gets children
 * first_child + offset[k] ... (offset: the exclusive scan of the counts, offset[k + 1]
 * inclusive), with their next pointers. Sets lb[L + 2], or the overflow flag (and no children)
 * when they do not fit in cap nodes. */
__global__ void k_write_children(int L, int32_t bound, int64_t cap, int32_t *__restrict__ lb,
                                 const uint64_t *__restrict__ keys,
                                 const int32_t *__restrict__ cells,
                                 const int32_t *__restrict__ offset, int32_t *__restrict__ begin,
                                 int32_t *__restrict__ end, int32_t *__restrict__ n_children,
                                 int32_t *__restrict__ more, int32_t *__restrict__ next,
                                 int32_t *__restrict__ parent, int8_t *__restrict__ level)
{
    const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int32_t k = (int32_t)(tid >> 3);
    const int32_t first = lb[L], count = lb[L + 1] - first;
    const int32_t first_child = first + count;
    const int32_t total = count > 0 ? offset[count] : 0;
    const bool fits = lb[FMK_CUDA_TREE_LB_FLAG] == 0 && (int64_t)first_child + total <= cap;
    if (tid == 0) {
        lb[L + 2] = fits ? first_child + total : first_child;
        if (!fits)
            lb[FMK_CUDA_TREE_LB_FLAG] = 1;
    }
    if (k >= count || k >= bound || !fits) /* the same for the node's 8 threads */
        return;
    const int32_t i = first + k;
    const int nc = n_children[i];
    if (nc == 0)
        return;
    int32_t lo, hi;
    const unsigned nonempty = octant_of(keys, cells, begin[i], end[i], true, L, &lo, &hi);
    const int32_t c0 = first_child + offset[k];
    const unsigned o = threadIdx.x & 7;
    if (o == 0)
        more[i] = c0;
    if (hi > lo) {
        /* nonempty octants before this one (lanes below this one among the node's) */
        const int idx = __popc(nonempty & ((1u << (threadIdx.x & 31)) - 1));
        const int32_t c = c0 + idx;
        begin[c] = lo, end[c] = hi;
        parent[c] = i, level[c] = (int8_t)(L + 1);
        next[c] = idx + 1 < nc ? c + 1 : next[i]; /* Nakasato Fig. 5: sibling, else parent's */
    }
}

/* A level in one launch (k_level): each block counts the children of LEVEL_TILE nodes (8
 * threads a node, LEVEL_ITEMS nodes per 8 threads), takes its children's first index from a
 * single-pass scan over the blocks (CUB's decoupled look-back: ScanTileState and
 * TilePrefixCallbackOp), and writes them, instead of a count, CUB's device scan (two
 * launches) and a write that searched the octants again. The tree is the same. The tile
 * states of level L and L + 1 take turns in the count and offset arrays; the launch of
 * level L clears those of level L + 1. */
constexpr int LEVEL_BLOCK = 256, LEVEL_ITEMS = 1, LEVEL_TILE = LEVEL_BLOCK / 8 * LEVEL_ITEMS;
typedef cub::ScanTileState<int32_t> level_tiles;
typedef cub::TilePrefixCallbackOp<int32_t, ::cuda::std::plus<>, level_tiles> level_prefix;

__global__ void k_level_init(level_tiles tiles, int n_tiles)
{
    tiles.InitializeStatus(n_tiles);
}

/* octant_of for LEVEL_ITEMS nodes of the calling thread's 8 (node p: [b[p], e[p]), active[p]
 * the same for its 8 threads), their binary searches in step (one chain of dependent loads
 * for all of them, not one after another). */
__device__ __forceinline__ void
octants_of(const uint64_t *__restrict__ keys, const int32_t *__restrict__ cells, int L,
           int leaf_size, const bool (&active)[LEVEL_ITEMS], const int32_t (&b)[LEVEL_ITEMS],
           const int32_t (&e)[LEVEL_ITEMS], int32_t (&lo)[LEVEL_ITEMS], int32_t (&hi)[LEVEL_ITEMS],
           unsigned (&nonempty)[LEVEL_ITEMS])
{
    const unsigned o = threadIdx.x & 7, lanes = node_lanes();
    const int shift = 3 * (FMK_TREE_KEY_BITS - 1 - L);
    bool split[LEVEL_ITEMS];
    int32_t l[LEVEL_ITEMS], h[LEVEL_ITEMS]; /* the searches' ranges */
#pragma unroll
    for (int p = 0; p < LEVEL_ITEMS; p++) {
        split[p] = active[p] && e[p] - b[p] > leaf_size && L < FMK_TREE_MAX_LEVEL;
        l[p] = b[p], h[p] = b[p];
        if (split[p] && o > 0) {
            if (cells && L < CELL_LEVEL)
                l[p] = h[p] = octant_start(keys, cells, b[p], e[p], shift, L, o);
            else
                h[p] = e[p];
        }
    }
    for (;;) { /* first position in [l, h) whose octant digit is >= o (octant_bound) */
        bool any = false;
#pragma unroll
        for (int p = 0; p < LEVEL_ITEMS; p++)
            if (l[p] < h[p]) {
                const int32_t mid = l[p] + (h[p] - l[p]) / 2;
                if ((unsigned)(keys[mid] >> shift & 7) < o)
                    l[p] = mid + 1;
                else
                    h[p] = mid;
                any = true;
            }
        if (!any)
            break;
    }
#pragma unroll
    for (int p = 0; p < LEVEL_ITEMS; p++) {
        int32_t up = __shfl_down_sync(lanes, l[p], 1, 8);
        up = o == 7 ? e[p] : up;
        lo[p] = l[p], hi[p] = split[p] ? up : b[p];
        nonempty[p] = __ballot_sync(lanes, split[p] && hi[p] > lo[p]) & lanes;
    }
}

/* Level L (nodes [lb[L], lb[L + 1]), at most LEVEL_TILE gridDim.x of them): n_children, more
 * and the children of level L + 1 with their begin, end, parent, level and next pointers (as
 * k_count_children and k_write_children). Blocks past the level's last node only clear tile
 * states; the block of the last node sets lb[L + 2], or the overflow flag when the children
 * do not fit in cap nodes (a node writes its children only when they fit; a build that
 * overflowed is redone). next_tiles: the next level's tile states, n_next of them, cleared
 * here. */
__global__ void __launch_bounds__(LEVEL_BLOCK)
    k_level(int L, int64_t cap, int leaf_size, int32_t *__restrict__ lb,
            const uint64_t *__restrict__ keys, const int32_t *__restrict__ cells,
            int32_t *__restrict__ begin, int32_t *__restrict__ end,
            int32_t *__restrict__ n_children, int32_t *__restrict__ more,
            int32_t *__restrict__ next, int32_t *__restrict__ parent, int8_t *__restrict__ level,
            level_tiles tiles, level_tiles next_tiles, int n_next)
{
    typedef cub::BlockScan<int32_t, LEVEL_BLOCK> scan_t;
    __shared__ struct {
        typename scan_t::TempStorage scan;
        typename level_prefix::TempStorage prefix;
    } ts;
    next_tiles.InitializeStatus(n_next); /* n_next <= 8 gridDim.x <= the threads */
    const int32_t first = lb[L], count = lb[L + 1] - first, first_child = first + count;
    const int tile = blockIdx.x, last = count > 0 ? (count - 1) / LEVEL_TILE : 0;
    if (tile > last) /* no node here, and no later block waits for this one */
        return;
    const int o = threadIdx.x & 7;
    const bool stop = lb[FMK_CUDA_TREE_LB_FLAG] != 0; /* an earlier level did not fit */
    const int32_t k0 = tile * LEVEL_TILE + (threadIdx.x >> 3) * LEVEL_ITEMS;
    int32_t b[LEVEL_ITEMS], e[LEVEL_ITEMS], lo[LEVEL_ITEMS], hi[LEVEL_ITEMS], c[LEVEL_ITEMS],
        excl[LEVEL_ITEMS];
    bool active[LEVEL_ITEMS];
    unsigned nonempty[LEVEL_ITEMS];
#pragma unroll
    for (int p = 0; p < LEVEL_ITEMS; p++) {
        active[p] = k0 + p < count; /* the same for the node's 8 threads */
        b[p] = active[p] ? begin[first + k0 + p] : 0;
        e[p] = active[p] ? end[first + k0 + p] : 0;
    }
    octants_of(keys, cells, L, leaf_size, active, b, e, lo, hi, nonempty);
#pragma unroll
    for (int p = 0; p < LEVEL_ITEMS; p++)
        c[p] = o == 0 ? __popc(nonempty[p]) : 0; /* a node's count once, in node order */
    if (tile == 0) {
        int32_t all;
        scan_t(ts.scan).ExclusiveSum(c, excl, all);
        if (threadIdx.x == 0)
            tiles.SetInclusive(0, all);
    } else {
        level_prefix prefix(tiles, ts.prefix, ::cuda::std::plus<>{}, tile);
        scan_t(ts.scan).ExclusiveSum(c, excl, prefix);
    }
    if (tile == last && threadIdx.x == LEVEL_BLOCK - 1) {
        /* the last thread's items are zeros: its last exclusive sum is the level's total */
        const int32_t total = excl[LEVEL_ITEMS - 1];
        const bool fits = !stop && (int64_t)first_child + total <= cap;
        lb[L + 2] = fits ? first_child + total : first_child;
        if (!fits)
            lb[FMK_CUDA_TREE_LB_FLAG] = 1;
    }
#pragma unroll
    for (int p = 0; p < LEVEL_ITEMS; p++) {
        const int32_t c0 = first_child + __shfl_sync(0xffffffffu, excl[p], 0, 8);
        if (!active[p])
            continue;
        const int32_t i = first + k0 + p;
        const int nc = __popc(nonempty[p]);
        const bool write = nc > 0 && !stop && (int64_t)c0 + nc <= cap;
        if (o == 0)
            n_children[i] = nc, more[i] = write ? c0 : -1;
        if (write && hi[p] > lo[p]) {
            /* nonempty octants before this one (lanes below this one among the node's) */
            const int idx = __popc(nonempty[p] & ((1u << (threadIdx.x & 31)) - 1));
            const int32_t ch = c0 + idx;
            begin[ch] = lo[p], end[ch] = hi[p];
            parent[ch] = i, level[ch] = (int8_t)(L + 1);
            /* Nakasato Fig. 5: the sibling, else the parent's next */
            next[ch] = idx + 1 < nc ? ch + 1 : next[i];
        }
    }
}

/* Levels built by one block first (fmk_cuda_tree_build_top, with the cell table). */
constexpr int TOP_LEVELS = CELL_LEVEL - 1;

/* Largest size of level L + 1 given a bound b of level L's: 8 children per splitting node, at
 * most n / (leaf_size + 1) nodes split, at most n nodes and cap_nodes in all. */
int64_t next_bound(const fmk_cuda_tree *t, int64_t b)
{
    const int64_t splits = t->n_points / ((int64_t)t->leaf_size + 1);
    int64_t w = 8 * (b < splits ? b : splits);
    w = w < t->n_points ? w : t->n_points;
    return w < t->cap_nodes ? w : t->cap_nodes;
}

#ifndef FMK_CUDA_TREE_CHECK /* levels between the host's looks at the level boundaries */
#define FMK_CUDA_TREE_CHECK 4
#endif

/* Tiles of k_level for a level of at most b nodes. */
int level_tiles_of(int64_t b)
{
    return (int)((b + LEVEL_TILE - 1) / LEVEL_TILE);
}

} // namespace

void fmk_cuda_tree_read_levels(fmk_cuda_tree *t, int L)
{
    const int32_t *h = t->h_lb;
    int levels = 1;
    while (levels < L && levels <= FMK_TREE_MAX_LEVEL && h[levels + 1] > h[levels])
        levels++;
    t->levels = levels;
    for (int k = 0; k <= levels; k++)
        t->level_begin[k] = h[k];
    t->n_nodes = h[levels];
}

namespace {

/* The end of a build: the level table read (unless fresh: the host's copy is the last one
 * written), the launches' errors, *overflow, and t's levels up to L. */
fmk_status levels_done(fmk_plan *plan, fmk_cuda_tree *t, cudaError_t err, int fresh, int L,
                       int *overflow)
{
    int32_t *h = t->h_lb;
    if (err == cudaSuccess && !fresh)
        err = cudaMemcpy(h, t->d_lb, FMK_CUDA_TREE_LB * sizeof(int32_t), cudaMemcpyDeviceToHost);
    if (err == cudaSuccess)
        err = cudaGetLastError();
    fmk_status st = check(plan, err, "the tree build kernels");
    if (st != FMK_OK)
        return st;
    *overflow = h[FMK_CUDA_TREE_LB_FLAG] != 0;
    fmk_cuda_tree_read_levels(t, L);
    return FMK_OK;
}

/* The levels of a tree of more than t->tune.small_max points: the cell table, the first
 * TOP_LEVELS levels by one block, then a launch a level (k_level) when its tile states fit in
 * the count and offset arrays, else a count, CUB's scan and a write. */
fmk_status build_large(fmk_plan *plan, fmk_cuda_tree *t, int *overflow)
{
    const int64_t n = t->n_points;
    int32_t *lb = t->d_lb, *h = t->h_lb;
    int32_t *cells = t->d_cells;
    int L = 0;
    int64_t bound = 1;
    int64_t width = 1; /* 8^L, capped */
    k_cell_starts<<<blocks_for(n + 1), BLOCK>>>(n, t->d_keys, cells);
    cudaError_t err = fmk_cuda_tree_build_top(t, TOP_LEVELS);
    for (; L < TOP_LEVELS; L++)
        bound = next_bound(t, bound), width = width < n ? width * 8 : width;
    /* Level L + 1 cannot be empty while 8^L leaf_size < n (level L has at most 8^L nodes, and
     * one of them holds more than leaf_size points): no look before that. fresh: the host's
     * copy of the level table is the last one written. */
    int fresh = 0;
    level_tiles tiles[2];
    size_t tile_bytes = 0;
    const int fused =
        t->cap_nodes > 0 &&
        level_tiles::AllocationSize(level_tiles_of(t->cap_nodes), tile_bytes) == cudaSuccess &&
        tile_bytes <= 4 * (size_t)(t->cap_nodes + 1);
    if (err == cudaSuccess && !fused && t->cap_nodes > 0) /* offset[0] of the scans */
        err = cudaMemsetAsync(t->d_offset, 0, sizeof(int32_t));
    if (fused && bound > 0) {
        (void)tiles[0].Init(0, t->d_counts, tile_bytes);
        (void)tiles[1].Init(0, t->d_offset, tile_bytes);
        const int nt = level_tiles_of(bound);
        k_level_init<<<blocks_for(nt), BLOCK>>>(tiles[L & 1], nt);
    }
    for (; L <= FMK_TREE_MAX_LEVEL && err == cudaSuccess && bound > 0; L++) {
        const int64_t nb = next_bound(t, bound);
        if (fused) {
            k_level<<<level_tiles_of(bound), LEVEL_BLOCK>>>(
                L, t->cap_nodes, t->leaf_size, lb, t->d_keys, cells, t->d_begin, t->d_end,
                t->d_n_children, t->d_more, t->d_next, t->d_parent, t->d_level, tiles[L & 1],
                tiles[(L + 1) & 1], level_tiles_of(nb));
        } else {
            const unsigned blocks = blocks_for(8 * bound);
            k_count_children<<<blocks, BLOCK>>>(L, (int32_t)bound, t->leaf_size, lb, t->d_keys,
                                                cells, t->d_begin, t->d_end, t->d_n_children,
                                                t->d_more, t->d_counts);
            size_t tb = t->temp_bytes;
            err = cub::DeviceScan::InclusiveSum(t->d_temp, tb, t->d_counts, t->d_offset + 1,
                                                (int)bound);
            if (err != cudaSuccess)
                break;
            k_write_children<<<blocks, BLOCK>>>(
                L, (int32_t)bound, t->cap_nodes, lb, t->d_keys, cells, t->d_offset, t->d_begin,
                t->d_end, t->d_n_children, t->d_more, t->d_next, t->d_parent, t->d_level);
        }
        bound = nb;
        fresh = 0;
        const int known = width * t->leaf_size < n && L < FMK_TREE_MAX_LEVEL;
        width = width < n ? width * 8 : width;
        if (L % FMK_CUDA_TREE_CHECK == FMK_CUDA_TREE_CHECK - 1 && bound > 0 && !known) {
            err = cudaMemcpy(h, lb, FMK_CUDA_TREE_LB * sizeof(int32_t), cudaMemcpyDeviceToHost);
            fresh = err == cudaSuccess;
            if (err == cudaSuccess &&
                (h[L + 2] == h[L + 1] || h[FMK_CUDA_TREE_LB_FLAG] || h[FMK_CUDA_TREE_LB_SORT]))
                bound = 0; /* level L + 1 is empty, the arrays are full, or the keys unsorted */
        }
    }
    return levels_done(plan, t, err, fresh, L, overflow);
}

} // namespace

fmk_status fmk_cuda_tree_build_levels(fmk_plan *plan, fmk_cuda_tree *t, int *overflow)
{
    if (t->n_points <= t->tune.small_max) { /* one block, no launch per level */
        const cudaError_t err = fmk_cuda_tree_build_small(t, NULL, fmk_cuda_groups_out{0, 0, NULL});
        return levels_done(plan, t, err, 0, FMK_TREE_MAX_LEVEL + 1, overflow);
    }
    if (t->leaf_size <= ONE_LEAF_MAX && t->cap_nodes > 0) {
        int taken = 0;
        const fmk_status st = fmk_cuda_tree_build_one_pass(plan, t, overflow, &taken);
        if (st != FMK_OK || taken)
            return st;
    }
    return build_large(plan, t, overflow);
}
