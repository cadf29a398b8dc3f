/*
 * tree3d.cu -- the octree of tree3d.h built on the GPU: Morton keys, a stable CUB radix sort,
 * nodes level by level (breadth-first, key order), next/more pointers, and the target groups
 * of the group walk. tree_internal.h describes the arrays.
 */
#include <stdlib.h>
#include <string.h>

#include <cub/block/block_radix_sort.cuh>
#include <cub/agent/single_pass_scan_operators.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/transform_iterator.h>

#include "tree/cuda/tree3d_cuda.h"

namespace {

constexpr int BLOCK = 256;

inline unsigned blocks_for(int64_t n) { return (unsigned)((n + BLOCK - 1) / BLOCK); }

/* Spreads the 21 low bits of v to every third bit (bit b -> bit 3b). */
__device__ __forceinline__ uint64_t spread3(uint64_t v)
{
    v &= 0x1fffffull;
    v = (v | v << 32) & 0x1f00000000ffffull;
    v = (v | v << 16) & 0x1f0000ff0000ffull;
    v = (v | v << 8) & 0x100f00f00f00f00full;
    v = (v | v << 4) & 0x10c30c30c30c30c3ull;
    v = (v | v << 2) & 0x1249249249249249ull;
    return v;
}

/* tree3d.h: c_k = min(floor((x'_k - 1) 2^21), 2^21 - 1), x highest. */
__device__ __forceinline__ uint64_t cell_of(double x)
{
    double c = floor(__dmul_rn(__dadd_rn(x, -1.0), 2097152.0));
    long long i = (long long)c;
    i = i < 0 ? 0 : i;
    return (uint64_t)(i > 2097151 ? 2097151 : i);
}

__device__ __forceinline__ uint64_t key_of(const double *__restrict__ x, int64_t i)
{
    uint64_t cx = cell_of(x[3 * i]), cy = cell_of(x[3 * i + 1]), cz = cell_of(x[3 * i + 2]);
    return spread3(cx) << 2 | spread3(cy) << 1 | spread3(cz);
}

__global__ void k_keys(int64_t n, const double *__restrict__ x, uint64_t *__restrict__ keys,
                       int32_t *__restrict__ idx, int32_t *__restrict__ lb)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i == 0)
        lb[FMK_CUDA_TREE_LB_SORT] = 0; /* these keys are sorted on every bit */
    if (i >= n)
        return;
    keys[i] = key_of(x, i);
    idx[i] = (int32_t)i;
}

/* Keys and their stable sort in one block for a tile of TILE points (2048, 4096 or
 * SORT_SMALL_MAX = 8192), alone or one of up to t->tune.sort_tiles times 8192 points
 * (block b sorts points [b TILE, (b + 1) TILE) into its place in keys, order, and
 * k_merge_tiles merges the sorted tiles: two launches instead of CUB's ten, which take most of
 * the time of a small tree from 2^11 keys up; below, CUB's one-tile path is faster). The
 * points are loaded in index order (blocked) and padded with all-ones keys, which sort last
 * because the sort is stable and they come last. 8 keys per thread (256 or 512 threads) sort a
 * tile in about half the time of 16 (512 x 16, the tile of 8192); 1024 x 16 spills registers
 * and measured slower than the device sort (bench/RESULTS.md).
 *
 * The sort's passes cost most of the block's time, and few keys of a small set share their
 * top 30 bits (the cells of level 10): the block sorts (top 30 bits, index) in 5 passes of 6
 * bits instead of all 63 bits in 11, keeps the full keys in shared memory, and places each
 * point of a run of equal top bits at its rank in the run by (key, index) (the run is in index
 * order: the sort is stable), as the split sort of large trees does (k_gather_runs). A run of
 * more than BLOCK_RUN_MAX points (or t->tune.split_run_max, when smaller) makes the
 * block sort all 63 bits instead, without a host round trip. The order, (key, index), is the
 * same either way. */
constexpr int SORT_ITEMS = 16, SORT_SMALL_MIN = 2048, SORT_SMALL_MAX = 512 * SORT_ITEMS;
constexpr int TOP_SHIFT = 33, TOP_BITS = 3 * FMK_TREE_KEY_BITS - TOP_SHIFT, BLOCK_RUN_MAX = 64;

template <int BLOCK_THREADS, int TILE = SORT_SMALL_MAX> struct small_sort {
    static constexpr int ITEMS = TILE / BLOCK_THREADS;
    typedef cub::BlockRadixSort<uint32_t, BLOCK_THREADS, ITEMS, int32_t, 6> top_t;
    typedef cub::BlockRadixSort<uint64_t, BLOCK_THREADS, ITEMS, int32_t, 6> type;
    /* the block's shared memory (dynamic: ~170 KB) */
    struct storage {
        union {
            typename top_t::TempStorage top;
            typename type::TempStorage full;
            uint64_t sorted[TILE]; /* the tile's keys, sorted */
        } u;
        uint64_t key[TILE]; /* the tile's keys by index */
        int32_t idx[TILE];  /* the tile's indices sorted by their top bits */
        int full_sort;
    };
};

/* Block part of the sorts above: the points [base, base + TILE) of n (fewer at the end)
 * sorted by (key, index) into keys[base + r], order[base + r] and s.u.sorted[r]. Every thread
 * of the block must call it. */
template <int BLOCK_THREADS, int TILE = SORT_SMALL_MAX>
__device__ __forceinline__ void sort_tile(int64_t n, int64_t base, const double *__restrict__ x,
                                          int run_max,
                                          typename small_sort<BLOCK_THREADS, TILE>::storage &s,
                                          uint64_t *__restrict__ keys, int32_t *__restrict__ order)
{
    typedef small_sort<BLOCK_THREADS, TILE> cfg;
    constexpr int ITEMS = cfg::ITEMS;
    const int tid = threadIdx.x;
    const int m = (int)(n - base < TILE ? n - base : TILE);
    run_max = run_max < BLOCK_RUN_MAX ? run_max : BLOCK_RUN_MAX;
    if (tid == 0)
        s.full_sort = 0;
    uint32_t top[ITEMS];
    int32_t v[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; j++) {
        const int l = tid * ITEMS + j;
        const uint64_t k = l < m ? key_of(x, base + l) : ~0ull;
        s.key[l] = k;
        top[j] = (uint32_t)(k >> TOP_SHIFT); /* the padding's: the largest top bits */
        v[j] = l;
    }
    __syncthreads();
    if (!s.full_sort) {
        typename cfg::top_t(s.u.top).SortBlockedToStriped(top, v, 0, TOP_BITS);
#pragma unroll
        for (int j = 0; j < ITEMS; j++)
            s.idx[j * BLOCK_THREADS + tid] = v[j];
        __syncthreads(); /* (the sort's storage is free: the sorted keys' from here) */
#pragma unroll
        for (int j = 0; j < ITEMS; j++) {
            const int r = j * BLOCK_THREADS + tid;
            if (r >= m)
                continue;
            const uint64_t k = s.key[v[j]];
            const uint64_t t = k >> TOP_SHIFT;
            int rank = r;
            const bool prev = r > 0 && s.key[s.idx[r - 1]] >> TOP_SHIFT == t;
            const bool next = r + 1 < m && s.key[s.idx[r + 1]] >> TOP_SHIFT == t;
            if (prev || next) {
                int a = r, e = r + 1;
                while (a > 0 && r - a <= run_max && s.key[s.idx[a - 1]] >> TOP_SHIFT == t)
                    a--;
                while (e < m && e - r <= run_max && s.key[s.idx[e]] >> TOP_SHIFT == t)
                    e++;
                if (e - a > run_max) { /* all 63 bits below (which rewrite every place) */
                    s.full_sort = 1;
                    continue;
                }
                rank = a;
                for (int q = a; q < e; q++) {
                    const uint64_t kq = s.key[s.idx[q]];
                    rank += kq < k || (kq == k && q < r);
                }
            }
            s.u.sorted[rank] = k, keys[base + rank] = k;
            order[base + rank] = (int32_t)(base + v[j]);
        }
        __syncthreads();
    }
    if (s.full_sort) { /* (the same for every thread) */
        uint64_t k[ITEMS];
#pragma unroll
        for (int j = 0; j < ITEMS; j++)
            k[j] = s.key[tid * ITEMS + j], v[j] = tid * ITEMS + j;
        typename cfg::type(s.u.full).SortBlockedToStriped(k, v, 0, FMK_TREE_KEY_BITS * 3);
        __syncthreads(); /* the sort's storage is the sorted keys' */
#pragma unroll
        for (int j = 0; j < ITEMS; j++) {
            const int r = j * BLOCK_THREADS + tid;
            if (r < m)
                s.u.sorted[r] = k[j], keys[base + r] = k[j], order[base + r] = (int32_t)(base + v[j]);
        }
        __syncthreads();
    }
}

template <int BLOCK_THREADS, int TILE = SORT_SMALL_MAX>
__global__ void __launch_bounds__(BLOCK_THREADS)
    k_sort_small(int64_t n, const double *__restrict__ x, int run_max,
                 uint64_t *__restrict__ keys, int32_t *__restrict__ order, int32_t *__restrict__ lb)
{
    extern __shared__ __align__(16) unsigned char smem[];
    typename small_sort<BLOCK_THREADS, TILE>::storage &s =
        *reinterpret_cast<typename small_sort<BLOCK_THREADS, TILE>::storage *>(smem);
    if (blockIdx.x == 0 && threadIdx.x == 0)
        lb[FMK_CUDA_TREE_LB_SORT] = 0; /* these keys are sorted on every bit */
    sort_tile<BLOCK_THREADS, TILE>(n, (int64_t)blockIdx.x * TILE, x, run_max, s, keys, order);
}

/* The stable merge of sorted tiles of TILE points (in index order: tile b holds points
 * [b TILE, (b + 1) TILE)): a point's place is its place in its tile plus, in every other tile,
 * the keys below its key and, in the tiles before its own, the keys equal to it (the points of
 * lower index come first among equal keys, as in the stable sort). The searches in up to
 * MERGE_UNROLL tiles go step by step together (binary searches of fixed steps), so their loads
 * overlap: a chain of log2(TILE) + 1 loads, not one per tile. */
constexpr int MERGE_UNROLL = 8;

template <int TILE>
__global__ void k_merge_tiles(int64_t n, const uint64_t *__restrict__ keys_in,
                              const int32_t *__restrict__ order_in, uint64_t *__restrict__ keys,
                              int32_t *__restrict__ order)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const uint64_t k = keys_in[i];
    const int64_t own = i / TILE, tiles = (n + TILE - 1) / TILE;
    int64_t place = i - own * TILE;
    for (int64_t b0 = 0; b0 < tiles; b0 += MERGE_UNROLL) {
        int pos[MERGE_UNROLL];
#pragma unroll
        for (int u = 0; u < MERGE_UNROLL; u++)
            pos[u] = 0;
#pragma unroll
        for (int step = TILE; step > 0; step >>= 1)
#pragma unroll
            for (int u = 0; u < MERGE_UNROLL; u++) {
                const int64_t b = b0 + u, lo = b * TILE;
                const int64_t len = b == own || b >= tiles ? 0 : n - lo < TILE ? n - lo : TILE;
                const int idx = pos[u] + step;
                if (idx <= len) {
                    const uint64_t v = keys_in[lo + idx - 1];
                    pos[u] = v < k || (b < own && v == k) ? idx : pos[u];
                }
            }
#pragma unroll
        for (int u = 0; u < MERGE_UNROLL; u++)
            place += pos[u];
    }
    keys[place] = k;
    order[place] = order_in[i];
}

/* The split sort (above t->tune.split_sort_min points). An LSD radix sort of 63-bit keys
 * takes 8 passes of 8 bits over 12-byte pairs; the tree needs the same order, (key, index),
 * but few keys share their top 32 bits (the cells of level 10 and two bits of level 11), so:
 * a stable sort of (top 32 bits, index) in 4 passes over 8-byte pairs, the full keys gathered
 * into that order, and each point of a run of equal top bits placed at its rank in the run by
 * (key, index) (the run is in index order: the sort is stable). A run longer than run_max
 * that is not in key order already (a dense cluster) sets the sort flag, and the build sorts
 * all 63 bits and builds again. */
constexpr int SPLIT_SHIFT = 31;

__global__ void k_keys_split(int64_t n, const double *__restrict__ x, uint64_t *__restrict__ keys,
                             uint32_t *__restrict__ top, int32_t *__restrict__ idx,
                             int32_t *__restrict__ lb)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i == 0)
        lb[FMK_CUDA_TREE_LB_SORT] = 0;
    if (i >= n)
        return;
    const uint64_t k = key_of(x, i);
    keys[i] = k;
    top[i] = (uint32_t)(k >> SPLIT_SHIFT);
    idx[i] = (int32_t)i;
}

/* keys_out, order_out: the full keys (by_index) gathered into the order of the top bits'
 * sort, with every run of equal top bits of at most run_max points put in (key, index) order:
 * each point of a run finds the run (at most run_max + 1 points each way) and its rank in it.
 * Longer runs are left as they are, and one that is out of key order sets the sort flag. Most
 * points are alone in their run: their neighbours' keys come from the next lanes. */
__global__ void k_gather_runs(int64_t n, int run_max, const uint64_t *__restrict__ by_index,
                              const int32_t *__restrict__ order, uint64_t *__restrict__ keys_out,
                              int32_t *__restrict__ order_out, int32_t *__restrict__ lb)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int lane = threadIdx.x & 31;
    const bool live = i < n;
    const int32_t oi = live ? order[i] : 0;
    const uint64_t k = live ? by_index[oi] : 0;
    uint64_t prev = __shfl_up_sync(0xffffffffu, k, 1), next = __shfl_down_sync(0xffffffffu, k, 1);
    if (!live)
        return;
    const bool has_prev = i > 0, has_next = i + 1 < n;
    if (lane == 0 && has_prev)
        prev = by_index[order[i - 1]];
    if (lane == 31 && has_next)
        next = by_index[order[i + 1]];
    const uint64_t top = k >> SPLIT_SHIFT;
    int64_t rank = i;
    if ((has_prev && prev >> SPLIT_SHIFT == top) || (has_next && next >> SPLIT_SHIFT == top)) {
        int64_t s = i, e = i + 1;
        while (s > 0 && i - s <= run_max && by_index[order[s - 1]] >> SPLIT_SHIFT == top)
            s--;
        while (e < n && e - i <= run_max && by_index[order[e]] >> SPLIT_SHIFT == top)
            e++;
        if (e - s > run_max) {
            if (has_prev && prev > k && prev >> SPLIT_SHIFT == top)
                lb[FMK_CUDA_TREE_LB_SORT] = 1;
        } else {
            rank = s;
            for (int64_t j = s; j < e; j++) {
                const uint64_t kj = by_index[order[j]];
                rank += kj < k || (kj == k && j < i);
            }
        }
    }
    keys_out[rank] = k;
    order_out[rank] = oi;
}

/* First position in [lo, hi) whose octant digit (at shift) is >= o (digits are sorted there). */
__device__ __forceinline__ int32_t octant_bound(const uint64_t *__restrict__ keys, int32_t lo,
                                               int32_t hi, int shift, unsigned o)
{
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if ((unsigned)(keys[mid] >> shift & 7) < o)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The level kernels run 8 threads per node (a node's threads are 8 consecutive lanes of a
 * warp): thread o finds where octant o starts, one binary search each, instead of one thread
 * searching the 7 boundaries one after another (a chain of 7 searches of up to 20 dependent
 * loads each, which made the first levels of a large tree cost ~50 us per kernel). The
 * boundaries, and so the tree, are the same. */

/* Lanes of the calling thread's node (8 consecutive lanes of its warp). */
__device__ __forceinline__ unsigned node_lanes() { return 0xffu << (threadIdx.x & 24); }

/* The first levels' octant boundaries without binary searches: cells[c] is the first sorted
 * position whose key's cell of level CELL_LEVEL is >= c (k_cell_starts, 8^CELL_LEVEL + 1
 * entries), so where octant o of a node of level L < CELL_LEVEL starts is one load (at the top
 * levels of a large tree each search was a chain of ~20 dependent loads, per kernel). */
constexpr int CELL_LEVEL = 5;
constexpr int64_t CELLS = 1ll << (3 * CELL_LEVEL);

__global__ void k_cell_starts(int64_t n, const uint64_t *__restrict__ keys, int32_t *__restrict__ cells)
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

/* Where octant o of node [b, e) of level L starts: from the cell table when it covers level L
 * (cells not NULL), else by a binary search. */
__device__ __forceinline__ int32_t octant_start(const uint64_t *__restrict__ keys,
                                               const int32_t *__restrict__ cells, int32_t b,
                                               int32_t e, int shift, int L, unsigned o)
{
    if (cells && L < CELL_LEVEL) {
        /* the node's cell at level L, its child o, the first cell of level CELL_LEVEL in it */
        const uint64_t child = (keys[b] >> (shift + 3)) << 3 | o;
        const int32_t l = cells[child << 3 * (CELL_LEVEL - 1 - L)];
        return l < b ? b : l > e ? e : l; /* (keys out of order: the build starts again) */
    }
    return octant_bound(keys, b, e, shift, o);
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
__global__ void k_count_children(int L, int32_t bound, int leaf_size, const int32_t *__restrict__ lb,
                                 const uint64_t *__restrict__ keys,
                                 const int32_t *__restrict__ cells, const int32_t *__restrict__ begin,
                                 const int32_t *__restrict__ end, int32_t *__restrict__ n_children,
                                 int32_t *__restrict__ more, int32_t *__restrict__ counts)
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
    const int c = __popc(octant_of(keys, cells, b, e, e - b > leaf_size && L < FMK_TREE_MAX_LEVEL,
                                   L, &lo, &hi));
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
constexpr int LEVEL_BLOCK = 256, LEVEL_ITEMS = 1,
              LEVEL_TILE = LEVEL_BLOCK / 8 * LEVEL_ITEMS;
typedef cub::ScanTileState<int32_t> level_tiles;
typedef cub::TilePrefixCallbackOp<int32_t, ::cuda::std::plus<>, level_tiles> level_prefix;

__global__ void k_level_init(level_tiles tiles, int n_tiles) { tiles.InitializeStatus(n_tiles); }

/* Level L (nodes [lb[L], lb[L + 1]), at most bound of them, gridDim.x tiles of LEVEL_TILE):
 * n_children, more and the children of level L + 1 with their begin, end, parent, level and
 * next pointers (as k_count_children and k_write_children). The last block sets lb[L + 2],
 * or the overflow flag when the children do not fit in cap nodes (a node writes its children
 * only when they fit; a build that overflowed is redone). next_tiles: the next level's tile
 * states, n_next of them, cleared here. */
/* octant_of for LEVEL_ITEMS nodes of the calling thread's 8 (node p: [b[p], e[p]), active[p]
 * the same for its 8 threads), their binary searches in step (one chain of dependent loads
 * for all of them, not one after another). */
__device__ __forceinline__ void octants_of(const uint64_t *__restrict__ keys,
                                           const int32_t *__restrict__ cells, int L, int leaf_size,
                                           const bool (&active)[LEVEL_ITEMS],
                                           const int32_t (&b)[LEVEL_ITEMS],
                                           const int32_t (&e)[LEVEL_ITEMS],
                                           int32_t (&lo)[LEVEL_ITEMS], int32_t (&hi)[LEVEL_ITEMS],
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

/* The whole tree in one pass over the points (k_tree_points, a scan, k_tree_nodes), for leaves
 * of at most ONE_LEAF_MAX points. With sorted keys a node is known from its first and last
 * points. Let cl(a, b) be the deepest level whose cell holds both keys (FMK_TREE_MAX_LEVEL for
 * equal keys), and L the leaf size:
 *   s(p) = cl(key[p - 1], key[p]) + 1, s(0) = 0: p begins a cell at every level >= s(p);
 *   d(p) = min(FMK_TREE_MAX_LEVEL, 1 + max cl(key[j], key[j + L]) over j in [p - L, p],
 *          0 <= j, j + L < n; 0 when there is none): the level of the leaf that holds p. The
 *          cell of level m that holds p has more than L points exactly when L + 1 consecutive
 *          keys around p (key[j] .. key[j + L], j <= p <= j + L) lie in it, so it splits
 *          exactly when m < d(p).
 * So a node of level l begins at p exactly when s(p) <= l <= d(p), and one ends at p - 1
 * exactly when s(p) <= l <= d(p - 1) (s(n) = 0 for the last point). Numbered level by level,
 * in key order within a level (tree3d.h), the node of level l that begins at p is lb[l] plus
 * the number of level-l beginnings before p: each tile of points counts its beginnings per
 * level (k_tree_points), one exclusive scan over [level][tile] gives lb[l] plus the tiles
 * before, and each point writes the nodes it begins (begin, level, parent, more) and those
 * that end just before it (end, next: the node of level s(p) that begins at p; the child
 * count: the level l + 1 beginnings in [begin, end), by two atomic adds). The tree is the one
 * the level kernels build (test_tree_gpu same_tree). */
constexpr int ONE_TILE = 1024, ONE_BLOCK = 256, ONE_WARPS = ONE_BLOCK / 32,
              ONE_PER = ONE_TILE / ONE_BLOCK, ONE_WORDS = ONE_TILE / 32, ONE_LEAF_MAX = 256,
              ONE_LEVELS = FMK_TREE_MAX_LEVEL + 1;

/* The deepest level whose cell holds both keys. */
__device__ __forceinline__ int common_level(uint64_t a, uint64_t b)
{
    return a == b ? FMK_TREE_MAX_LEVEL : (__clzll((long long)(a ^ b)) - 1) / 3;
}

/* Point u of the calling thread in its tile (u < ONE_PER): word w ONE_PER + u of the tile's
 * masks (w its warp), bit lane, so that a ballot over the warp is one word. */
__device__ __forceinline__ int one_point(int u)
{
    return ((threadIdx.x >> 5) * ONE_PER + u) * 32 + (threadIdx.x & 31);
}

/* Tile blockIdx.x of the points 0 .. n (n: the end, which begins nothing): s and d of each
 * point (sd[p]), and the tile's beginnings per level (cnt[l n_tiles + tile]; cnt[ONE_LEVELS
 * n_tiles] = 0 for the total). Clears n_children[0 .. cap) for k_tree_nodes' adds. */
__global__ void __launch_bounds__(ONE_BLOCK)
    k_tree_points(int64_t n, int leaf_size, int64_t cap, const uint64_t *__restrict__ keys,
                  uchar2 *__restrict__ sd, int32_t *__restrict__ cnt, int64_t n_tiles,
                  int32_t *__restrict__ n_children)
{
    __shared__ uint64_t s_key[ONE_TILE + 2 * ONE_LEAF_MAX];
    __shared__ signed char s_c[2][ONE_TILE + ONE_LEAF_MAX];
    __shared__ int32_t s_cnt[ONE_LEVELS];
    const int L = leaf_size;
    const int64_t t0 = (int64_t)blockIdx.x * ONE_TILE, k0 = t0 - L; /* s_key[i]: key[k0 + i] */
    for (int64_t i = blockIdx.x * (int64_t)ONE_BLOCK + threadIdx.x; i < cap;
         i += (int64_t)gridDim.x * ONE_BLOCK)
        n_children[i] = 0;
    if (blockIdx.x == 0 && threadIdx.x == 0)
        cnt[ONE_LEVELS * n_tiles] = 0;
    if (threadIdx.x < ONE_LEVELS)
        s_cnt[threadIdx.x] = 0;
    for (int i = threadIdx.x; i < ONE_TILE + 2 * L; i += ONE_BLOCK) {
        const int64_t g = k0 + i;
        s_key[i] = g >= 0 && g < n ? keys[g] : 0;
    }
    __syncthreads();
    /* s_c[0][i]: cl(key[j], key[j + L]) for j = k0 + i, -1 where there is no such pair */
    const int nc = ONE_TILE + L;
    for (int i = threadIdx.x; i < nc; i += ONE_BLOCK) {
        const int64_t j = k0 + i;
        s_c[0][i] = (signed char)(j >= 0 && j + L < n ? common_level(s_key[i], s_key[i + L]) : -1);
    }
    __syncthreads();
    /* the maximum over L + 1 entries: of 2^K entries by doubling (2^K <= L + 1 < 2^(K + 1)),
     * then two overlapping runs of 2^K */
    const int K = 31 - __clz(L + 1), P = 1 << K;
    int cur = 0;
    for (int k = 0; k < K; k++) {
        const int h = 1 << k;
        for (int i = threadIdx.x; i < nc; i += ONE_BLOCK) {
            int v = s_c[cur][i];
            if (i + h < nc)
                v = max(v, (int)s_c[cur][i + h]);
            s_c[cur ^ 1][i] = (signed char)v;
        }
        cur ^= 1;
        __syncthreads();
    }
    int c[ONE_LEVELS]; /* this warp's beginnings per level (in every lane) */
#pragma unroll
    for (int l = 0; l < ONE_LEVELS; l++)
        c[l] = 0;
#pragma unroll
    for (int u = 0; u < ONE_PER; u++) {
        const int r = one_point(u); /* point t0 + r; window [r, r + L] of s_c */
        const int64_t p = t0 + r;
        int s = ONE_LEVELS, d = -1; /* past the last point: nothing */
        if (p < n) {
            const int m = max((int)s_c[cur][r], (int)s_c[cur][r + L + 1 - P]);
            d = min(FMK_TREE_MAX_LEVEL, m + 1);
            s = p == 0 ? 0 : common_level(s_key[r + L - 1], s_key[r + L]) + 1;
            sd[p] = make_uchar2((unsigned char)s, (unsigned char)d);
        }
#pragma unroll
        for (int l = 0; l < ONE_LEVELS; l++)
            c[l] += __popc(__ballot_sync(0xffffffffu, s <= l && l <= d));
    }
    if ((threadIdx.x & 31) == 0)
#pragma unroll
        for (int l = 0; l < ONE_LEVELS; l++)
            if (c[l])
                atomicAdd(&s_cnt[l], c[l]);
    __syncthreads();
    if (threadIdx.x < ONE_LEVELS)
        cnt[threadIdx.x * n_tiles + blockIdx.x] = s_cnt[threadIdx.x];
}

/* Tile blockIdx.x of the points 0 .. n: the nodes that its points begin, and those that end
 * just before them, from sd and off (the exclusive scan of k_tree_points' cnt; off[ONE_LEVELS
 * n_tiles] is the node count). A point's rank among the tile's beginnings of a level is a
 * count of bits: the beginnings as one mask of the tile's points per level (a ballot a word)
 * and the words' exclusive sums. Block 0 writes the level table (lb[l], and the count past the
 * last level) and the overflow flag; nothing else is written when the nodes do not fit in
 * cap. */
__global__ void __launch_bounds__(ONE_BLOCK)
    k_tree_nodes(int64_t n, int64_t cap, const uchar2 *__restrict__ sd,
                 const int32_t *__restrict__ off, int64_t n_tiles, int32_t *__restrict__ lb,
                 int32_t *__restrict__ begin, int32_t *__restrict__ end,
                 int32_t *__restrict__ n_children, int32_t *__restrict__ more,
                 int32_t *__restrict__ next, int32_t *__restrict__ parent,
                 int8_t *__restrict__ level)
{
    __shared__ uint32_t s_mask[ONE_LEVELS][ONE_WORDS];
    __shared__ int32_t s_rank[ONE_LEVELS][ONE_WORDS]; /* node of the word's first beginning */
    __shared__ int32_t s_lb[ONE_LEVELS];
    __shared__ unsigned char s_s[ONE_TILE];     /* s of point t0 + r */
    __shared__ unsigned char s_d[ONE_TILE + 1]; /* s_d[r + 1]: d of point t0 + r (s_d[0]: t0 - 1) */
    const int64_t total = off[ONE_LEVELS * n_tiles];
    if (blockIdx.x == 0 && threadIdx.x <= FMK_TREE_MAX_LEVEL + 2)
        lb[threadIdx.x] = threadIdx.x < ONE_LEVELS ? off[threadIdx.x * n_tiles] : (int32_t)total;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        lb[FMK_CUDA_TREE_LB_FLAG] = total > cap;
        lb[FMK_CUDA_TREE_LB_GROUPS] = 0;
    }
    if (total > cap)
        return; /* the same for the whole grid */
    const int64_t t0 = (int64_t)blockIdx.x * ONE_TILE;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x < ONE_LEVELS)
        s_lb[threadIdx.x] = off[threadIdx.x * n_tiles];
    if (threadIdx.x == 0) /* d of the point before the tile (-1 as 255: none) */
        s_d[0] = t0 > 0 && t0 <= n ? sd[t0 - 1].y : 255;
#pragma unroll
    for (int u = 0; u < ONE_PER; u++) {
        const int r = one_point(u);
        const int64_t p = t0 + r;
        const uchar2 v = p < n ? sd[p] : make_uchar2(0, 255);
        const int s = p <= n ? v.x : ONE_LEVELS; /* the end (p = n) begins nothing */
        const int d = v.y == 255 ? -1 : v.y;
        s_s[r] = (unsigned char)s, s_d[r + 1] = v.y;
#pragma unroll
        for (int l = 0; l < ONE_LEVELS; l++) {
            const uint32_t b = __ballot_sync(0xffffffffu, s <= l && l <= d);
            if (lane == 0)
                s_mask[l][warp * ONE_PER + u] = b;
        }
    }
    __syncthreads();
    /* the words' exclusive sums per level, plus the level's tiles before (one warp a level) */
    for (int l = warp; l < ONE_LEVELS; l += ONE_WARPS) {
        const int v = __popc(s_mask[l][lane]);
        int x = v;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(0xffffffffu, x, o);
            x += lane >= o ? y : 0;
        }
        s_rank[l][lane] = off[l * n_tiles + blockIdx.x] + x - v;
    }
    __syncthreads();
    const uint32_t below = (1u << lane) - 1;
#pragma unroll 1
    for (int u = 0; u < ONE_PER; u++) {
        const int r = one_point(u), wd = r >> 5;
        const int64_t p = t0 + r;
        const int su = s_s[r], du = s_d[r + 1] == 255 ? -1 : s_d[r + 1];
        const int dp = s_d[r] == 255 ? -1 : s_d[r]; /* the leaf level of point p - 1 */
        const int hi = du > dp ? du : dp;
        if (p > n || su > hi)
            continue; /* begins no node and ends none */
        /* node of level l that begins at p, or the first after p */
#define ONE_AT(l) (s_rank[l][wd] + __popc(s_mask[l][wd] & below))
        const int32_t after = p < n ? ONE_AT(su) : -1; /* next of the nodes ending at p - 1 */
        for (int l = su; l <= hi; l++) {
            const int32_t at = ONE_AT(l);
            const int32_t below_next = l + 1 < ONE_LEVELS ? ONE_AT(l + 1) : 0;
            if (l <= du) { /* the node of level l that begins at p */
                begin[at] = (int32_t)p, level[at] = (int8_t)l;
                parent[at] = l == 0 ? -1 : ONE_AT(l - 1) + (su <= l - 1 ? 1 : 0) - 1;
                int32_t first = -1;
                if (l < du) {
                    first = below_next;
                    atomicAdd(&n_children[at], -first);
                }
                more[at] = first;
            }
            if (l <= dp && at > s_lb[l]) { /* the node of level l that ends at p - 1 */
                const int32_t k = at - 1;
                end[k] = (int32_t)p, next[k] = after;
                if (l < dp)
                    atomicAdd(&n_children[k], below_next); /* one past its last child */
            }
        }
#undef ONE_AT
    }
}

constexpr int SMALL_BLOCK = 512; /* k_build_small<512>, k_groups_small */

/* Groups (tree_internal.h). Without merge: a node that is a group gives chunks of group_size.
 * With merge: a node of more than group_size points that has children gives its children's
 * groups: runs of consecutive children of at most group_size points each, packed greedily up
 * to group_size points (siblings: the run's box stays inside the node), and chunks of
 * group_size for a child leaf of more; the root gives itself when it is a group. merge = 2
 * cuts the children's points (between children that split further) into pieces of group_size
 * regardless of the children's bounds (full warps, larger boxes). */
template <typename Emit>
__device__ __forceinline__ int32_t group_runs_emit(int32_t i, int group_size, int merge,
                                                   const int32_t *__restrict__ begin,
                                                   const int32_t *__restrict__ end,
                                                   const int32_t *__restrict__ more,
                                                   const int32_t *__restrict__ n_children,
                                                   const int32_t *__restrict__ parent, Emit emit)
{
    const int32_t c = end[i] - begin[i];
    int32_t n = 0;
    const int self_group = (c <= group_size || more[i] < 0) &&
                           (merge ? parent[i] < 0
                                  : (parent[i] < 0 || end[parent[i]] - begin[parent[i]] > group_size));
    if (self_group) {
        for (int32_t b = begin[i]; b < end[i]; b += group_size, n++)
            emit(n, b, min(b + group_size, end[i]));
        return n;
    }
    if (!merge || c <= group_size || more[i] < 0)
        return 0;
    int32_t run_b = 0, run_e = 0; /* the open run of small children (empty: run_e == run_b) */
    for (int32_t k = more[i], k1 = more[i] + n_children[i]; k < k1; k++) {
        const int32_t b = begin[k], e = end[k], ck = e - b;
        if (merge == 2 && (ck <= group_size || more[k] < 0)) { /* pour into full chunks */
            if (run_e == run_b)
                run_b = b;
            run_e = e;
            for (; run_e - run_b > group_size; run_b += group_size, n++)
                emit(n, run_b, run_b + group_size);
            continue;
        }
        if (ck > group_size) { /* close the run; a big leaf is chunked here */
            if (run_e > run_b) {
                emit(n, run_b, run_e);
                n++;
            }
            run_b = run_e = 0;
            if (more[k] < 0)
                for (int32_t q = b; q < e; q += group_size, n++)
                    emit(n, q, min(q + group_size, e));
            continue;
        }
        if (run_e > run_b && run_e - run_b + ck <= group_size) {
            run_e = e;
            continue;
        }
        if (run_e > run_b) {
            emit(n, run_b, run_e);
            n++;
        }
        run_b = b, run_e = e;
    }
    if (run_e > run_b) {
        emit(n, run_b, run_e);
        n++;
    }
    return n;
}

/* group_runs_emit writing the groups to out[0 ..] (out NULL: counting only). */
__device__ __forceinline__ int32_t group_runs(int32_t i, int group_size, int merge,
                                              const int32_t *__restrict__ begin,
                                              const int32_t *__restrict__ end,
                                              const int32_t *__restrict__ more,
                                              const int32_t *__restrict__ n_children,
                                              const int32_t *__restrict__ parent,
                                              int2 *__restrict__ out)
{
    return group_runs_emit(i, group_size, merge, begin, end, more, n_children, parent,
                           [out](int32_t n, int32_t b, int32_t e) {
                               if (out)
                                   out[n] = make_int2(b, e);
                           });
}

/* The groups in node order: node i's group count to chunks[i] (k_group_count), then its
 * groups written from offset[i] (k_group_write: offset is the counts' exclusive scan, the
 * total at offset[n_offset], n_offset = n_nodes). The groups in Morton order (by their first
 * point; mask not NULL): they tile the points, so the rank of a group is the number of groups
 * that begin before it. k_group_count sets bit b of mask for each group beginning at point b;
 * k_group_write writes group (b, e) at the rank that offset (the exclusive scan of the mask's
 * words' bit counts, n_offset words) and the bits below b in its word give. Both write the
 * count to lb. */
__global__ void k_group_count(int32_t n_nodes, int group_size, int merge,
                              const int32_t *__restrict__ begin, const int32_t *__restrict__ end,
                              const int32_t *__restrict__ more,
                              const int32_t *__restrict__ n_children,
                              const int32_t *__restrict__ parent, int32_t *__restrict__ chunks,
                              uint32_t *__restrict__ mask)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_nodes)
        return;
    if (mask)
        group_runs_emit(i, group_size, merge, begin, end, more, n_children, parent,
                        [mask](int32_t, int32_t b, int32_t) {
                            atomicOr(&mask[b >> 5], 1u << (b & 31));
                        });
    else
        chunks[i] = group_runs(i, group_size, merge, begin, end, more, n_children, parent, NULL);
}

__global__ void k_group_write(int32_t n_nodes, int group_size, int merge,
                              const int32_t *__restrict__ begin, const int32_t *__restrict__ end,
                              const int32_t *__restrict__ more,
                              const int32_t *__restrict__ n_children,
                              const int32_t *__restrict__ parent,
                              const uint32_t *__restrict__ mask, const int32_t *__restrict__ offset,
                              int32_t n_offset, int2 *__restrict__ groups, int32_t *__restrict__ lb)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0)
        lb[FMK_CUDA_TREE_LB_GROUPS] = offset[n_offset];
    if (i >= n_nodes)
        return;
    if (mask)
        group_runs_emit(i, group_size, merge, begin, end, more, n_children, parent,
                        [=](int32_t, int32_t b, int32_t e) {
                            const int32_t w = b >> 5;
                            groups[offset[w] + __popc(mask[w] & ((1u << (b & 31)) - 1))] =
                                make_int2(b, e);
                        });
    else
        group_runs(i, group_size, merge, begin, end, more, n_children, parent, groups + offset[i]);
}

/* A word's bit count, for the scan of k_group_count's mask. */
struct bit_count {
    __host__ __device__ int32_t operator()(uint32_t w) const
    {
#ifdef __CUDA_ARCH__
        return __popc(w);
#else
        return __builtin_popcount(w);
#endif
    }
};

/* The groups of the n_nodes nodes (k_group_count, the scan and k_group_write) by one block of
 * BLOCK threads, for small trees. pending: a tree built without a host wait gives its node
 * count on the device, and none of its groups when it did not fit or its keys were out of
 * order (it is built again); the count goes to h_lb too when not NULL. */
template <int BLOCK>
__device__ __forceinline__ void groups_block(int32_t n_nodes, int pending, int group_size, int merge,
                                             const int32_t *__restrict__ begin,
                                             const int32_t *__restrict__ end,
                                             const int32_t *__restrict__ more,
                                             const int32_t *__restrict__ n_children,
                                             const int32_t *__restrict__ parent,
                                             int2 *__restrict__ groups, int32_t *__restrict__ lb,
                                             int32_t *__restrict__ h_lb)
{
    typedef cub::BlockScan<int32_t, BLOCK> scan_t;
    __shared__ typename scan_t::TempStorage scan;
    __shared__ int32_t carry;
    const int tid = threadIdx.x;
    if (pending)
        n_nodes = lb[FMK_CUDA_TREE_LB_FLAG] || lb[FMK_CUDA_TREE_LB_SORT] ? 0 : lb[FMK_CUDA_TREE_LB_NODES];
    if (tid == 0)
        carry = 0;
    __syncthreads();
    for (int32_t base = 0; base < n_nodes; base += BLOCK) {
        const int32_t i = base + tid;
        const int32_t c = i < n_nodes ? group_runs(i, group_size, merge, begin, end, more,
                                                   n_children, parent, NULL)
                                      : 0;
        int32_t ex, total;
        scan_t(scan).ExclusiveSum(c, ex, total);
        if (c > 0)
            group_runs(i, group_size, merge, begin, end, more, n_children, parent,
                       groups + carry + ex);
        __syncthreads();
        if (tid == 0)
            carry += total;
        __syncthreads();
    }
    if (tid == 0) {
        lb[FMK_CUDA_TREE_LB_GROUPS] = carry;
        if (h_lb)
            h_lb[FMK_CUDA_TREE_LB_GROUPS] = carry;
    }
}

__global__ void __launch_bounds__(SMALL_BLOCK)
    k_groups_small(int32_t n_nodes, int pending, int group_size, int merge,
                   const int32_t *__restrict__ begin, const int32_t *__restrict__ end,
                   const int32_t *__restrict__ more, const int32_t *__restrict__ n_children,
                   const int32_t *__restrict__ parent, int2 *__restrict__ groups,
                   int32_t *__restrict__ lb, int32_t *__restrict__ h_lb)
{
    groups_block<SMALL_BLOCK>(n_nodes, pending, group_size, merge, begin, end, more, n_children,
                              parent, groups, lb, h_lb);
}

/* The groups made by the one-block builds' own launch (fmk_cuda_tree3d_build_async with
 * groups wanted): after the nodes, the same block makes them as k_groups_small does (one
 * launch less; groups == NULL: none). */
struct groups_out {
    int group_size, merge;
    int2 *groups;
};

template <int BUILD_BLOCK>
__device__ __forceinline__ void build_groups(const groups_out &g, const int32_t *__restrict__ begin,
                                             const int32_t *__restrict__ end,
                                             const int32_t *__restrict__ more,
                                             const int32_t *__restrict__ n_children,
                                             const int32_t *__restrict__ parent,
                                             int32_t *__restrict__ lb, int32_t *__restrict__ h_lb)
{
    if (!g.groups)
        return;
    __syncthreads(); /* the nodes and the level table are written (global memory, this block) */
    groups_block<BUILD_BLOCK>(0, 1, g.group_size, g.merge, begin, end, more, n_children, parent,
                              g.groups, lb, h_lb);
}

/* The whole tree below the root in one block, for small trees (a kernel launch per level
 * costs more than the level's work there): the nodes of k_count_children and k_write_children,
 * level by level, BUILD_BLOCK / 8 nodes at a time with 8 threads per node (thread o finds where
 * octant o starts: independent binary searches, not a chain of 7), the children's offsets by a
 * block scan carried from tile to tile, and the level boundaries in lb as the multi-block
 * build leaves them. */
template <int BUILD_BLOCK>
__device__ __forceinline__ void build_nodes(int64_t n, int leaf_size, int64_t cap,
                                            const uint64_t *__restrict__ keys,
                                            int32_t *__restrict__ begin, int32_t *__restrict__ end,
                                            int32_t *__restrict__ n_children,
                                            int32_t *__restrict__ more, int32_t *__restrict__ next,
                                            int32_t *__restrict__ parent, int8_t *__restrict__ level,
                                            int32_t *__restrict__ lb, int32_t *__restrict__ h_lb,
                                            const int32_t *__restrict__ cells = NULL,
                                            int levels_max = FMK_TREE_MAX_LEVEL + 1)
{
    constexpr int SMALL_NODES = BUILD_BLOCK / 8;
    typedef cub::BlockScan<int32_t, BUILD_BLOCK> scan_t;
    __shared__ typename scan_t::TempStorage scan;
    __shared__ int32_t s_bound[SMALL_NODES][9];
    __shared__ int32_t s_base[SMALL_NODES];
    __shared__ int32_t carry;
    const int tid = threadIdx.x, slot = tid >> 3, o = tid & 7;
    if (tid == 0) {
        begin[0] = 0, end[0] = (int32_t)n, parent[0] = -1, next[0] = -1, level[0] = 0;
        lb[0] = 0;
        for (int k = 1; k < FMK_CUDA_TREE_LB_FLAG; k++)
            lb[k] = 1;
        lb[FMK_CUDA_TREE_LB_FLAG] = 0;
        lb[FMK_CUDA_TREE_LB_GROUPS] = 0;
    }
    __syncthreads();
    int32_t first = 0, count = 1;
    for (int L = 0; L < levels_max && L <= FMK_TREE_MAX_LEVEL && count > 0; L++) {
        const int shift = 3 * (FMK_TREE_KEY_BITS - 1 - L);
        const int32_t first_child = first + count;
        if (tid == 0)
            carry = 0;
        __syncthreads();
        for (int32_t base = 0; base < count; base += SMALL_NODES) {
            const int32_t k = base + slot, i = first + k;
            const bool live = k < count;
            const int32_t b = live ? begin[i] : 0, e = live ? end[i] : 0;
            const bool splits = live && e - b > leaf_size && L < FMK_TREE_MAX_LEVEL;
            if (splits) {
                s_bound[slot][o] = o == 0 ? b : octant_start(keys, cells, b, e, shift, L, (unsigned)o);
                if (o == 0)
                    s_bound[slot][8] = e;
            }
            __syncthreads();
            int nc = 0;
            if (splits && o == 0)
                for (int q = 0; q < 8; q++)
                    nc += s_bound[slot][q + 1] > s_bound[slot][q];
            int32_t ex, total;
            scan_t(scan).ExclusiveSum(nc, ex, total);
            if (live && o == 0) {
                n_children[i] = nc;
                more[i] = nc ? first_child + carry + ex : -1;
                s_base[slot] = first_child + carry + ex;
            }
            __syncthreads();
            if (splits && s_bound[slot][o + 1] > s_bound[slot][o]) {
                int idx = 0, all = 0; /* nonempty octants before o, and in all */
                for (int q = 0; q < 8; q++) {
                    const int ne = s_bound[slot][q + 1] > s_bound[slot][q];
                    idx += q < o ? ne : 0;
                    all += ne;
                }
                const int32_t c = s_base[slot] + idx;
                if (c < cap) {
                    begin[c] = s_bound[slot][o], end[c] = s_bound[slot][o + 1];
                    parent[c] = i, level[c] = (int8_t)(L + 1);
                    next[c] = idx + 1 < all ? c + 1 : next[i]; /* Nakasato Fig. 5 */
                }
            }
            __syncthreads(); /* s_bound, s_base and the scan storage are free again */
            if (tid == 0)
                carry += total;
            __syncthreads();
        }
        const int32_t total = carry;
        __syncthreads(); /* everyone has read carry before the next level resets it */
        if ((int64_t)first_child + total > cap) { /* did not fit: the caller grows the arrays */
            if (tid == 0)
                lb[FMK_CUDA_TREE_LB_FLAG] = 1, lb[L + 2] = first_child;
            first = first_child, count = 0;
            break;
        }
        if (tid == 0)
            lb[L + 2] = first_child + total;
        first = first_child, count = total;
    }
    /* the nodes written (all of them unless the flag is set), and the table for the host when
     * it reads it without a copy (thread 0 wrote every word but the sort's flag, which the
     * sort's kernel wrote before this one) */
    if (tid == 0) {
        lb[FMK_CUDA_TREE_LB_NODES] = first;
        if (h_lb)
            for (int k = 0; k < FMK_CUDA_TREE_LB; k++)
                h_lb[k] = lb[k];
    }
}

template <int BUILD_BLOCK>
__global__ void __launch_bounds__(BUILD_BLOCK)
    k_build_small(int64_t n, int leaf_size, int64_t cap, const uint64_t *__restrict__ keys,
                  int32_t *__restrict__ begin, int32_t *__restrict__ end,
                  int32_t *__restrict__ n_children, int32_t *__restrict__ more,
                  int32_t *__restrict__ next, int32_t *__restrict__ parent,
                  int8_t *__restrict__ level, int32_t *__restrict__ lb,
                  int32_t *__restrict__ h_lb,
                  const groups_out g)
{
    build_nodes<BUILD_BLOCK>(n, leaf_size, cap, keys, begin, end, n_children, more, next, parent,
                             level, lb, h_lb);
    build_groups<BUILD_BLOCK>(g, begin, end, more, n_children, parent, lb, h_lb);
}

/* The first levels of a large tree in one block (t->tune.top_levels): the root and the
 * children of levels 0 .. levels - 1 as k_build_small makes them, the octant boundaries from
 * the cell table; the level kernels go on from level `levels` (before: a count, a scan of two
 * launches and a write per level, 16 launches for levels 0..3). */
constexpr int TOP_BLOCK = 1024, TOP_LEVELS = CELL_LEVEL - 1;

__global__ void __launch_bounds__(TOP_BLOCK)
    k_build_top(int64_t n, int leaf_size, int64_t cap, int levels,
                const uint64_t *__restrict__ keys, const int32_t *__restrict__ cells,
                int32_t *__restrict__ begin, int32_t *__restrict__ end,
                int32_t *__restrict__ n_children, int32_t *__restrict__ more,
                int32_t *__restrict__ next, int32_t *__restrict__ parent,
                int8_t *__restrict__ level, int32_t *__restrict__ lb)
{
    build_nodes<TOP_BLOCK>(n, leaf_size, cap, keys, begin, end, n_children, more, next, parent,
                           level, lb, NULL, cells, levels);
}

/* The keys, their sort and the tree of at most TILE points in one launch
 * (k_sort_small's block part, then k_build_small's from the sorted keys in shared memory: the
 * octant searches of every level read shared memory, not global). The same arrays as the two
 * kernels. */
template <int BUILD_BLOCK, int TILE = SORT_SMALL_MAX>
__global__ void __launch_bounds__(BUILD_BLOCK)
    k_tree_small(int64_t n, const double *__restrict__ x, int run_max, int leaf_size,
                 int64_t cap, uint64_t *__restrict__ keys, int32_t *__restrict__ order,
                 int32_t *__restrict__ begin, int32_t *__restrict__ end,
                 int32_t *__restrict__ n_children, int32_t *__restrict__ more,
                 int32_t *__restrict__ next, int32_t *__restrict__ parent,
                 int8_t *__restrict__ level, int32_t *__restrict__ lb, int32_t *__restrict__ h_lb,
                 const groups_out g)
{
    extern __shared__ __align__(16) unsigned char smem[];
    typename small_sort<BUILD_BLOCK, TILE>::storage &s =
        *reinterpret_cast<typename small_sort<BUILD_BLOCK, TILE>::storage *>(smem);
    if (threadIdx.x == 0)
        lb[FMK_CUDA_TREE_LB_SORT] = 0; /* these keys are sorted on every bit */
    sort_tile<BUILD_BLOCK, TILE>(n, 0, x, run_max, s, keys, order);
    build_nodes<BUILD_BLOCK>(n, leaf_size, cap, s.u.sorted, begin, end, n_children, more, next,
                             parent, level, lb, h_lb);
    build_groups<BUILD_BLOCK>(g, begin, end, more, n_children, parent, lb, h_lb);
}

/* k_build_small of at most STAGED_MAX sorted keys (k_merge_tiles' output) loaded into shared
 * memory first: the octant searches of every level read shared memory, as in k_tree_small, not
 * global memory. */
constexpr int STAGED_BLOCK = 1024, STAGED_MAX = 16384;

__global__ void __launch_bounds__(STAGED_BLOCK)
    k_build_staged(int64_t n, int leaf_size, int64_t cap, const uint64_t *__restrict__ keys,
                   int32_t *__restrict__ begin, int32_t *__restrict__ end,
                   int32_t *__restrict__ n_children, int32_t *__restrict__ more,
                   int32_t *__restrict__ next, int32_t *__restrict__ parent,
                   int8_t *__restrict__ level, int32_t *__restrict__ lb, int32_t *__restrict__ h_lb,
                   const groups_out g)
{
    extern __shared__ __align__(16) unsigned char smem[];
    uint64_t *sk = reinterpret_cast<uint64_t *>(smem);
    for (int p = threadIdx.x; p < (int)n; p += STAGED_BLOCK)
        sk[p] = keys[p];
    __syncthreads();
    build_nodes<STAGED_BLOCK>(n, leaf_size, cap, sk, begin, end, n_children, more, next,
                                   parent, level, lb, h_lb);
    build_groups<STAGED_BLOCK>(g, begin, end, more, n_children, parent, lb, h_lb);
}

void free_ptr(void *p)
{
    if (p && cudaFree(p) != cudaSuccess)
        (void)cudaGetLastError();
}

fmk_status check(fmk_plan *plan, cudaError_t err, const char *what)
{
    return err == cudaSuccess ? FMK_OK : fmk_cuda_fail(plan, err, what);
}

/* p lies in t's one allocation of a first build (fmk_cuda_tree3d_build) */
int in_arena(const fmk_cuda_tree *t, const void *p)
{
    return p && t->d_arena && (const char *)p >= (const char *)t->d_arena &&
           (const char *)p < (const char *)t->d_arena + t->arena_bytes;
}

/* Frees *p and allocates bytes for it (the old contents are not kept). */
fmk_status regrow(fmk_plan *plan, fmk_cuda_tree *t, void **p, size_t old_bytes, size_t bytes,
                  const char *what, long long total)
{
    if (!in_arena(t, *p)) /* (the arena's bytes stay held) */
        free_ptr(*p), t->bytes -= (int64_t)old_bytes;
    *p = NULL;
    fmk_status st = fmk_cuda_alloc(plan, p, bytes, what, total);
    if (st == FMK_OK)
        t->bytes += (int64_t)bytes;
    return st;
}

/* Node arrays (and the level workspace) of t for at least need nodes; contents not kept. */
fmk_status grow_nodes(fmk_plan *plan, fmk_cuda_tree *t, int64_t need, long long extra)
{
    if (need <= t->cap_nodes)
        return FMK_OK;
    const int64_t old = t->cap_nodes, cap = need;
    void **arr[9] = {(void **)&t->d_begin, (void **)&t->d_end, (void **)&t->d_more,
                     (void **)&t->d_next, (void **)&t->d_n_children, (void **)&t->d_parent,
                     (void **)&t->d_counts, (void **)&t->d_offset, (void **)&t->d_level};
    const long long total = extra + t->bytes + (long long)(cap - old) * FMK_CUDA_TREE_NODE_BYTES;
    fmk_status st = FMK_OK;
    t->cap_nodes = 0;
    for (int k = 0; k < 9 && st == FMK_OK; k++) {
        const size_t w = k < 8 ? 4 : 1, extra_slot = k == 6 || k == 7 ? 1 : 0;
        st = regrow(plan, t, arr[k], (size_t)(old > 0 ? old + (int64_t)extra_slot : 0) * w,
                    (size_t)(cap + (int64_t)extra_slot) * w, "the tree's nodes", total);
    }
    if (st == FMK_OK)
        t->cap_nodes = cap;
    return st;
}

/* CUB's workspace for the sorts of n keys: all 63 bits of 64-bit keys, or 32-bit keys (the
 * split sort), whichever needs more. */
cudaError_t sort_temp_bytes(int64_t n, size_t *bytes)
{
    size_t b64 = 0, b32 = 0;
    const int m = (int)(n > 0 ? n : 1);
    cub::DoubleBuffer<uint64_t> k(NULL, NULL);
    cub::DoubleBuffer<uint32_t> k32(NULL, NULL);
    cub::DoubleBuffer<int32_t> v(NULL, NULL);
    cudaError_t err = cub::DeviceRadixSort::SortPairs(NULL, b64, k, v, m, 0, 63);
    if (err == cudaSuccess)
        err = cub::DeviceRadixSort::SortPairs(NULL, b32, k32, v, m, 0, 32);
    *bytes = b64 > b32 ? b64 : b32;
    return err;
}

/* Largest size of level L + 1 given a bound b of level L's: 8 children per splitting node, at
 * most n / (leaf_size + 1) nodes split, at most n nodes and cap_nodes in all. */
int64_t next_bound(const fmk_cuda_tree *t, int64_t b)
{
    const int64_t splits = t->n_points / ((int64_t)t->leaf_size + 1);
    int64_t w = 8 * (b < splits ? b : splits);
    w = w < t->n_points ? w : t->n_points;
    return w < t->cap_nodes ? w : t->cap_nodes;
}


} // namespace


namespace {

/* k_build_small over t's sorted keys; h_lb: the host's copy of the level table to write, or
 * NULL; g: the groups to make too (g.groups NULL: none). */
void build_small(fmk_cuda_tree *t, int32_t *h_lb, const groups_out &g)
{
    k_build_small<1024><<<1, 1024>>>(t->n_points, t->leaf_size, t->cap_nodes, t->d_keys,
                                         t->d_begin, t->d_end, t->d_n_children, t->d_more,
                                         t->d_next, t->d_parent, t->d_level, t->d_lb, h_lb, g);
}

#ifndef FMK_CUDA_TREE_CHECK /* levels between the host's looks at the level boundaries */
#define FMK_CUDA_TREE_CHECK 4
#endif

/* Tiles of k_level for a level of at most b nodes. */
int level_tiles_of(int64_t b) { return (int)((b + LEVEL_TILE - 1) / LEVEL_TILE); }

/* levels, level_begin and n_nodes of t from the host's copy of the level table, whose levels
 * up to L were built: up to the last non-empty one (h[k] for k > L + 1 was never written). */
void read_levels(fmk_cuda_tree *t, int L)
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

/* The whole tree in one pass over the points (k_tree_points, k_tree_nodes), into t (keys
 * sorted): *taken = 0 (and nothing done) when the scan's arrays or its workspace do not fit in
 * t's level workspace. Sets *overflow when the node arrays were too small. */
fmk_status build_one_pass(fmk_plan *plan, fmk_cuda_tree *t, int *overflow, int *taken)
{
    const int64_t n = t->n_points, n_tiles = (n + ONE_TILE) / ONE_TILE; /* points 0 .. n */
    const int64_t items = ONE_LEVELS * n_tiles + 1;
    int32_t *cnt, *off;
    *taken = 0;
    if (items <= t->cap_nodes + 1) /* the level workspace */
        cnt = t->d_counts, off = t->d_offset;
    else if (2 * items <= t->cap_points) /* the sort's second indices, free after it */
        cnt = t->d_order_alt, off = t->d_order_alt + items;
    else
        return FMK_OK;
    size_t need = 0;
    cudaError_t err = cub::DeviceScan::ExclusiveSum(NULL, need, cnt, off, (int)items);
    if (err != cudaSuccess || need > t->temp_bytes)
        return check(plan, err, "CUB (workspace query)");
    *taken = 1;
    k_tree_points<<<(unsigned)n_tiles, ONE_BLOCK>>>(n, t->leaf_size, t->cap_nodes, t->d_keys,
                                                    (uchar2 *)t->d_keys_alt, cnt, n_tiles,
                                                    t->d_n_children);
    size_t tb = t->temp_bytes;
    err = cub::DeviceScan::ExclusiveSum(t->d_temp, tb, cnt, off, (int)items);
    if (err == cudaSuccess)
        k_tree_nodes<<<(unsigned)n_tiles, ONE_BLOCK>>>(
            n, t->cap_nodes, (const uchar2 *)t->d_keys_alt, off, n_tiles, t->d_lb, t->d_begin,
            t->d_end, t->d_n_children, t->d_more, t->d_next, t->d_parent, t->d_level);
    if (err == cudaSuccess)
        err = cudaMemcpy(t->h_lb, t->d_lb, FMK_CUDA_TREE_LB * sizeof(int32_t),
                         cudaMemcpyDeviceToHost);
    if (err == cudaSuccess)
        err = cudaGetLastError();
    fmk_status st = check(plan, err, "the tree build kernels");
    if (st != FMK_OK)
        return st;
    *overflow = t->h_lb[FMK_CUDA_TREE_LB_FLAG] != 0;
    read_levels(t, FMK_TREE_MAX_LEVEL + 1);
    return FMK_OK;
}

/* The levels below the root, into t (keys sorted). Sets *overflow when the node arrays were
 * too small (the tree is then incomplete). */
fmk_status build_levels(fmk_plan *plan, fmk_cuda_tree *t, int *overflow)
{
    if (t->n_points > t->tune.small_max &&
        t->leaf_size <= ONE_LEAF_MAX && t->cap_nodes > 0) {
        int taken = 0;
        const fmk_status st = build_one_pass(plan, t, overflow, &taken);
        if (st != FMK_OK || taken)
            return st;
    }
    const int64_t n = t->n_points;
    int32_t *lb = t->d_lb, *h = t->h_lb;
    int32_t *cells = t->d_cells;
    cudaError_t err = cudaSuccess;
    int L = 0;
    if (n <= t->tune.small_max) {
        build_small(t, NULL, groups_out{0, 0, NULL});
        L = FMK_TREE_MAX_LEVEL + 1;
    }
    int64_t bound = n <= t->tune.small_max ? 0 : 1;
    int64_t width = 1; /* 8^L, capped */
    /* the first levels by one block (with the cell table) */
    if (n > t->tune.small_max) {
        k_cell_starts<<<blocks_for(n + 1), BLOCK>>>(n, t->d_keys, cells);
        k_build_top<<<1, TOP_BLOCK>>>(n, t->leaf_size, t->cap_nodes, TOP_LEVELS, t->d_keys, cells,
                                      t->d_begin, t->d_end, t->d_n_children, t->d_more,
                                      t->d_next, t->d_parent, t->d_level, lb);
        for (; L < TOP_LEVELS; L++)
            bound = next_bound(t, bound), width = width < n ? width * 8 : width;
    }
    /* Level L + 1 cannot be empty while 8^L leaf_size < n (level L has at most 8^L nodes, and
     * one of them holds more than leaf_size points): no look before that. fresh: the host's
     * copy of the level table is the last one written. */
    int fresh = 0;
    /* one launch a level (k_level) when the tile states fit in the count and offset arrays */
    level_tiles tiles[2];
    size_t tile_bytes = 0;
    const int fused =
        t->cap_nodes > 0 &&
        level_tiles::AllocationSize(level_tiles_of(t->cap_nodes), tile_bytes) == cudaSuccess &&
        tile_bytes <= 4 * (size_t)(t->cap_nodes + 1);
    if (!fused && t->cap_nodes > 0 && n > t->tune.small_max) /* offset[0] of the scans */
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
            k_write_children<<<blocks, BLOCK>>>(L, (int32_t)bound, t->cap_nodes, lb, t->d_keys,
                                                cells, t->d_offset, t->d_begin, t->d_end,
                                                t->d_n_children, t->d_more, t->d_next,
                                                t->d_parent, t->d_level);
        }
        bound = nb;
        fresh = 0;
        const int known = width * t->leaf_size < n && L < FMK_TREE_MAX_LEVEL;
        width = width < n ? width * 8 : width;
        if (L % FMK_CUDA_TREE_CHECK == FMK_CUDA_TREE_CHECK - 1 && bound > 0 && !known) {
            err = cudaMemcpy(h, lb, FMK_CUDA_TREE_LB * sizeof(int32_t), cudaMemcpyDeviceToHost);
            fresh = err == cudaSuccess;
            if (err == cudaSuccess && (h[L + 2] == h[L + 1] || h[FMK_CUDA_TREE_LB_FLAG] ||
                                       h[FMK_CUDA_TREE_LB_SORT]))
                bound = 0; /* level L + 1 is empty, the arrays are full, or the keys unsorted */
        }
    }
    if (err == cudaSuccess && !fresh)
        err = cudaMemcpy(h, lb, FMK_CUDA_TREE_LB * sizeof(int32_t), cudaMemcpyDeviceToHost);
    if (err == cudaSuccess)
        err = cudaGetLastError();
    fmk_status st = check(plan, err, "the tree build kernels");
    if (st != FMK_OK)
        return st;
    *overflow = h[FMK_CUDA_TREE_LB_FLAG] != 0;
    read_levels(t, L);
    return FMK_OK;
}

} // namespace

extern "C" int64_t fmk_cuda_tree3d_node_bound(int64_t n, int64_t leaf_size)
{
    if (n <= 0)
        return 1;
    const int64_t splits_max = n / (leaf_size + 1);
    int64_t nodes = 1, width = 1, splits = splits_max < 1 ? 0 : 1; /* level 0 */
    for (int L = 1; L <= FMK_TREE_MAX_LEVEL && splits > 0; L++) {
        int64_t w = width * 8;
        w = w < n ? w : n;
        w = w < 8 * splits ? w : 8 * splits;
        nodes += w;
        width = w;
        splits = w < splits_max ? w : splits_max;
    }
    return nodes;
}

extern "C" int64_t fmk_cuda_tree3d_build_bytes(int64_t n)
{
    size_t sort_bytes = 0;
    if (sort_temp_bytes(n, &sort_bytes) != cudaSuccess)
        (void)cudaGetLastError(), sort_bytes = (size_t)n * 4 + (1 << 20);
    /* keys and indices twice (the sort's buffers) and the sort's workspace, all kept; the
     * level table and the cell table */
    return 2 * n * (8 + 4) + (int64_t)sort_bytes + FMK_CUDA_TREE_LB * 4 + (CELLS + 1) * 4;
}

extern "C" void fmk_cuda_tree3d_free(fmk_cuda_tree *t)
{
    void *p[] = {t->d_keys, t->d_order, t->d_begin, t->d_end, t->d_more, t->d_next,
                 t->d_n_children, t->d_parent, t->d_level, t->d_keys_alt, t->d_order_alt,
                 t->d_temp, t->d_counts, t->d_offset, t->d_lb, t->d_cells};
    for (size_t k = 0; k < sizeof p / sizeof p[0]; k++)
        if (!in_arena(t, p[k]))
            free_ptr(p[k]);
    if (!t->arena_lent)
        free_ptr(t->d_arena);
    if (!t->dh_lb)
        free(t->h_lb);
    else if (cudaFreeHost(t->h_lb) != cudaSuccess)
        (void)cudaGetLastError();
    const fmk_cuda_tree_tune tune = t->tune; /* the knobs stay with the tree */
    memset(t, 0, sizeof *t);
    t->tune = tune;
}

namespace {

/* Point arrays (keys, order and their sort twins) for n points; contents not kept. */
fmk_status grow_points(fmk_plan *plan, fmk_cuda_tree *t, int64_t n, long long extra)
{
    if (n <= t->cap_points && t->d_keys)
        return FMK_OK;
    const int64_t old = t->cap_points, cap = n > 0 ? n : 1;
    const long long total = extra + t->bytes + (long long)(cap - old) * 24;
    void **arr[4] = {(void **)&t->d_keys, (void **)&t->d_keys_alt, (void **)&t->d_order,
                     (void **)&t->d_order_alt};
    fmk_status st = FMK_OK;
    t->cap_points = 0;
    for (int k = 0; k < 4 && st == FMK_OK; k++) {
        const size_t w = k < 2 ? 8 : 4;
        st = regrow(plan, t, arr[k], (size_t)old * w, (size_t)cap * w, k < 2 ? "the Morton keys" : "the sort order", total);
    }
    if (st == FMK_OK)
        t->cap_points = cap;
    return st;
}

/* CUB's temporary storage in bytes for a sort of n pairs and scans of up to cap_nodes + 1 items. */
cudaError_t temp_need(int64_t n, int64_t cap_nodes, size_t *need)
{
    size_t sort_bytes = 0, scan_bytes = 0, scan2 = 0;
    cudaError_t err = sort_temp_bytes(n, &sort_bytes);
    if (err == cudaSuccess)
        err = cub::DeviceScan::InclusiveSum(NULL, scan_bytes, (int32_t *)NULL, (int32_t *)NULL,
                                            (int)(cap_nodes + 1));
    if (err == cudaSuccess)
        err = cub::DeviceScan::ExclusiveSum(NULL, scan2, (int32_t *)NULL, (int32_t *)NULL,
                                            (int)(cap_nodes + 1));
    *need = sort_bytes > scan_bytes ? sort_bytes : scan_bytes;
    *need = *need > scan2 ? *need : scan2;
    return err;
}

/* CUB's temporary storage for a sort of n pairs and scans of up to cap_nodes + 1 items. */
fmk_status grow_temp(fmk_plan *plan, fmk_cuda_tree *t, int64_t n, long long extra)
{
    size_t need = 0;
    fmk_status st = check(plan, temp_need(n, t->cap_nodes, &need), "CUB (workspace query)");
    if (st != FMK_OK || need <= t->temp_bytes)
        return st;
    const size_t old = t->temp_bytes;
    t->temp_bytes = 0;
    st = regrow(plan, t, &t->d_temp, old, need, "the sort workspace",
                extra + t->bytes + (long long)(need - old));
    if (st == FMK_OK)
        t->temp_bytes = need;
    return st;
}

/* The level boundaries on the device and their host copy (once; pin_lb pins it where needed). */
fmk_status make_lb(fmk_plan *plan, fmk_cuda_tree *t, long long extra)
{
    if (t->d_lb)
        return FMK_OK;
    fmk_status st = fmk_cuda_alloc(plan, (void **)&t->d_lb, FMK_CUDA_TREE_LB * sizeof(int32_t),
                                   "the tree's level table", extra + t->bytes);
    if (st == FMK_OK)
        t->bytes += FMK_CUDA_TREE_LB * sizeof(int32_t);
    if (st == FMK_OK)
        st = fmk_cuda_alloc(plan, (void **)&t->d_cells, (size_t)(CELLS + 1) * sizeof(int32_t),
                            "the tree's cell table", extra + t->bytes + (CELLS + 1) * 4);
    if (st == FMK_OK)
        t->bytes += (CELLS + 1) * sizeof(int32_t);
    if (st == FMK_OK) /* the sort's flag is read after builds that do not write it (n = 0) */
        st = check(plan, cudaMemset(t->d_lb, 0, FMK_CUDA_TREE_LB * sizeof(int32_t)),
                   "cudaMemset (the tree's level table)");
    if (st == FMK_OK && !(t->h_lb = (int32_t *)calloc(FMK_CUDA_TREE_LB, sizeof(int32_t))))
        st = fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the tree's level table");
    return st;
}

/* The host copy of the level table pinned and mapped, for the kernels that write it there
 * (the build without host waits, the small trees' groups) and the group count's asynchronous
 * copy. Only the treecode needs it: the 3D FMM's build (with waits) reads the table with
 * cudaMemcpy, and a pinned allocation costs ~1 ms (H100), most of a fresh FMM plan's first
 * tree build. */
fmk_status pin_lb(fmk_plan *plan, fmk_cuda_tree *t)
{
    if (t->dh_lb)
        return FMK_OK;
    int32_t *h = NULL;
    fmk_status st = check(plan, cudaMallocHost((void **)&h, FMK_CUDA_TREE_LB * sizeof(int32_t)),
                          "cudaMallocHost (the tree's level table)");
    if (st != FMK_OK)
        return st;
    int32_t *dh = NULL; /* where the kernels write it (the same address with unified addressing) */
    st = check(plan, cudaHostGetDevicePointer((void **)&dh, h, 0),
               "cudaHostGetDevicePointer (the tree's level table)");
    if (st != FMK_OK) {
        if (cudaFreeHost(h) != cudaSuccess)
            (void)cudaGetLastError();
        return st;
    }
    memcpy(h, t->h_lb, FMK_CUDA_TREE_LB * sizeof(int32_t));
    free(t->h_lb);
    t->h_lb = h, t->dh_lb = dh;
    return FMK_OK;
}

/* Lets kernel use bytes of dynamic shared memory (once per process and kernel: *ready). */
template <typename K> cudaError_t allow_smem(K kernel, int bytes, int *ready)
{
    cudaError_t err = cudaSuccess;
    if (!*ready)
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    *ready = err == cudaSuccess;
    return err;
}

/* Launches k_sort_small<BLOCK_THREADS, TILE>, one block per tile of TILE points, and
 * k_merge_tiles when there are several. */
template <int BLOCK_THREADS, int TILE>
cudaError_t sort_tiles(int64_t n, const double *d_x, fmk_cuda_tree *t)
{
    static int ready = 0;
    const int bytes = (int)sizeof(typename small_sort<BLOCK_THREADS, TILE>::storage);
    const int64_t tiles = (n + TILE - 1) / TILE;
    const int run_max = t->tune.split_run_max;
    cudaError_t err = allow_smem(k_sort_small<BLOCK_THREADS, TILE>, bytes, &ready);
    if (err == cudaSuccess && tiles == 1) {
        k_sort_small<BLOCK_THREADS, TILE><<<1, BLOCK_THREADS, bytes>>>(n, d_x, run_max, t->d_keys,
                                                                      t->d_order, t->d_lb);
    } else if (err == cudaSuccess) {
        k_sort_small<BLOCK_THREADS, TILE><<<(unsigned)tiles, BLOCK_THREADS, bytes>>>(
            n, d_x, run_max, t->d_keys_alt, t->d_order_alt, t->d_lb);
        k_merge_tiles<TILE><<<blocks_for(n), BLOCK>>>(n, t->d_keys_alt, t->d_order_alt,
                                                     t->d_keys, t->d_order);
    }
    if (err == cudaSuccess)
        err = cudaGetLastError();
    return err;
}

/* The points per tile of a sort of n points in tiles: 2048 up to STAGED_MAX points, 4096
 * above (a block of 256 or 512 threads sorts 8 keys per thread). */
int sort_tile_size(int64_t n) { return n <= STAGED_MAX ? 2048 : 4096; }

cudaError_t sort_small(int64_t n, const double *d_x, fmk_cuda_tree *t)
{
    if (sort_tile_size(n) == 2048)
        return sort_tiles<256, 2048>(n, d_x, t);
    return sort_tiles<512, 4096>(n, d_x, t);
}

/* Whether the n points of a tree built without a wait are sorted in tiles, merged
 * (k_merge_tiles) and built from shared memory (k_build_staged). */
int staged_takes(const fmk_cuda_tree *t, int64_t n)
{
    return n > sort_tile_size(n) && n <= STAGED_MAX &&
           n <= (int64_t)t->tune.sort_tiles * SORT_SMALL_MAX && n <= t->tune.small_max;
}

/* The tiles' sort, k_merge_tiles and k_build_staged (staged_takes(t, n)). */
cudaError_t build_staged(int64_t n, const double *d_x, fmk_cuda_tree *t, int32_t *h_lb,
                         const groups_out &g)
{
    cudaError_t err = sort_small(n, d_x, t);
    if (err != cudaSuccess)
        return err;
    static int ready = 0;
    err = allow_smem(k_build_staged, STAGED_MAX * (int)sizeof(uint64_t), &ready);
    if (err == cudaSuccess)
        k_build_staged<<<1, STAGED_BLOCK, (size_t)n * sizeof(uint64_t)>>>(
            n, t->leaf_size, t->cap_nodes, t->d_keys, t->d_begin, t->d_end, t->d_n_children,
            t->d_more, t->d_next, t->d_parent, t->d_level, t->d_lb, h_lb, g);
    return err == cudaSuccess ? cudaGetLastError() : err;
}

/* Whether k_tree_small takes the n points (else k_sort_small or CUB's sort and k_build_small). */
int tree_small_takes(const fmk_cuda_tree *t, int64_t n)
{
    return n > 0 && n <= SORT_SMALL_MAX && n <= t->tune.fused_max;
}

template <int BLOCK_THREADS, int TILE>
cudaError_t tree_small_launch(int64_t n, const double *d_x, fmk_cuda_tree *t, int32_t *h_lb,
                              const groups_out &g)
{
    static int ready = 0;
    const int bytes = (int)sizeof(typename small_sort<BLOCK_THREADS, TILE>::storage);
    cudaError_t err = allow_smem(k_tree_small<BLOCK_THREADS, TILE>, bytes, &ready);
    if (err == cudaSuccess)
        k_tree_small<BLOCK_THREADS, TILE><<<1, BLOCK_THREADS, bytes>>>(
            n, d_x, t->tune.split_run_max, t->leaf_size,
            t->cap_nodes, t->d_keys, t->d_order, t->d_begin, t->d_end, t->d_n_children, t->d_more,
            t->d_next, t->d_parent, t->d_level, t->d_lb, h_lb, g);
    return err == cudaSuccess ? cudaGetLastError() : err;
}

/* k_tree_small over the n mapped points d_x into t (h_lb as build_small's): a tile of 2048,
 * 4096 or 8192 points, the smallest that holds them. */
cudaError_t tree_small(int64_t n, const double *d_x, fmk_cuda_tree *t, int32_t *h_lb,
                       const groups_out &g)
{
    if (n <= 2048)
        return tree_small_launch<256, 2048>(n, d_x, t, h_lb, g);
    if (n <= 4096)
        return tree_small_launch<512, 4096>(n, d_x, t, h_lb, g);
    return tree_small_launch<512, SORT_SMALL_MAX>(n, d_x, t, h_lb, g);
}

/* Sorts the keys of the n mapped points d_x with their indices into t->d_keys, t->d_order:
 * by one block (2049 .. 8192 points of a small tree) or a few and their merge (up to
 * t->tune.sort_tiles times 8192), the split sort when split is set (the build checks its
 * flag after the levels), or CUB's sort of all 63 key bits. */
fmk_status sort_points(fmk_plan *plan, fmk_cuda_tree *t, int64_t n, const double *d_x, int split)
{
    if (n > SORT_SMALL_MIN && n <= (int64_t)t->tune.sort_tiles * SORT_SMALL_MAX &&
        n <= t->tune.small_max)
        return check(plan, sort_small(n, d_x, t), "the one-block sort");
    if (n <= 0)
        return FMK_OK;
    size_t tb = t->temp_bytes;
    cudaError_t err;
    if (split) {
        /* the full keys by index in keys_alt; the top bits and their sort twin in keys */
        uint32_t *top = (uint32_t *)t->d_keys;
        k_keys_split<<<blocks_for(n), BLOCK>>>(n, d_x, t->d_keys_alt, top, t->d_order, t->d_lb);
        cub::DoubleBuffer<uint32_t> dk(top, top + n);
        cub::DoubleBuffer<int32_t> dv(t->d_order, t->d_order_alt);
        err = cub::DeviceRadixSort::SortPairs(t->d_temp, tb, dk, dv, (int)n, 0, 32);
        if (err == cudaSuccess) {
            int32_t *order = dv.Current(), *order_out = dv.Alternate();
            /* the top bits are done with: the sorted keys go to keys */
            k_gather_runs<<<blocks_for(n), BLOCK>>>(n, t->tune.split_run_max, t->d_keys_alt,
                                                    order, t->d_keys, order_out, t->d_lb);
            t->d_order = order_out, t->d_order_alt = order;
            err = cudaGetLastError();
        }
        return check(plan, err, "the split sort");
    }
    k_keys<<<blocks_for(n), BLOCK>>>(n, d_x, t->d_keys, t->d_order, t->d_lb);
    /* (key, index) pairs: LSD radix sort is stable, so ties keep the caller's order */
    cub::DoubleBuffer<uint64_t> dk(t->d_keys, t->d_keys_alt);
    cub::DoubleBuffer<int32_t> dv(t->d_order, t->d_order_alt);
    err = cub::DeviceRadixSort::SortPairs(t->d_temp, tb, dk, dv, (int)n, 0, 63);
    if (err == cudaSuccess) {
        t->d_keys = dk.Current(), t->d_keys_alt = dk.Alternate();
        t->d_order = dv.Current(), t->d_order_alt = dv.Alternate();
    }
    return check(plan, err, "cub::DeviceRadixSort::SortPairs");
}

/* Node slots of a tree's first build of n points. */
int64_t first_nodes(int64_t n, int leaf_size)
{
    const int64_t ls = leaf_size > 0 ? leaf_size : 1;
    return 3 * n / ls + 64;
}

/* The arrays of a build of n points (kept from build to build when large enough); with_temp:
 * and CUB's workspace (the one-block paths of fmk_cuda_tree3d_build_async use none, and its
 * size queries cost host time at every build). */
fmk_status prepare(fmk_plan *plan, int64_t n, int leaf_size, long long extra, fmk_cuda_tree *t,
                   int with_temp)
{
    t->n_points = n;
    t->leaf_size = leaf_size;
    t->n_nodes = 0;
    t->levels = 0;
    t->pending = 0;
    t->groups_made = 0;
    /* Nodes: a uniform cube fills its leaves from 1/8 to 1 of leaf_size (levels of 8x), a
     * tree of about 1.14 n / (leaf_size / 2) nodes in the middle: start at 3 n / leaf_size. */
    const int64_t cap = first_nodes(n, leaf_size);
    fmk_status st = make_lb(plan, t, extra);
    if (st == FMK_OK)
        st = grow_points(plan, t, n, extra);
    if (st == FMK_OK)
        st = grow_nodes(plan, t, cap, extra);
    if (st == FMK_OK && with_temp)
        st = grow_temp(plan, t, n, extra);
    return st;
}

/* *d_groups (*cap_groups slots) grown to bound slots when smaller (its contents are not kept). */
fmk_status grow_groups(fmk_plan *plan, int64_t bound, long long extra, int2 **d_groups,
                       int64_t *cap_groups)
{
    if (bound <= *cap_groups && *d_groups)
        return FMK_OK;
    free_ptr(*d_groups), *d_groups = NULL, *cap_groups = 0;
    fmk_status st = fmk_cuda_alloc(plan, (void **)d_groups, (size_t)bound * sizeof(int2),
                                   "the groups", extra + bound * (long long)sizeof(int2));
    if (st == FMK_OK)
        *cap_groups = bound;
    return st;
}

} // namespace

extern "C" fmk_status fmk_cuda_tree3d_build_async(fmk_plan *plan, int64_t n, const double *d_x,
                                                  int leaf_size, long long extra,
                                                  const fmk_cuda_groups_want *want,
                                                  fmk_cuda_tree *t)
{
    if (n > t->tune.small_max)
        return fmk_cuda_tree3d_build(plan, n, d_x, leaf_size, extra, t);
    const int fused = tree_small_takes(t, n);
    fmk_status st = prepare(plan, n, leaf_size, extra, t, !fused && !staged_takes(t, n));
    if (st == FMK_OK)
        st = pin_lb(plan, t);
    groups_out g = {0, 0, NULL};
    if (st == FMK_OK && want) {
        /* fmk_cuda_tree3d_groups_bound of the pending tree */
        const int gs = want->group_size > 0 ? want->group_size : 1;
        st = grow_groups(plan, t->cap_nodes + n / gs + 1, extra, want->d_groups, want->cap_groups);
        if (st == FMK_OK)
            g = groups_out{want->group_size, want->merge, *want->d_groups};
    }
    if (st == FMK_OK && fused) {
        st = check(plan, tree_small(n, d_x, t, t->dh_lb, g), "the one-block keys, sort and tree build");
    } else if (st == FMK_OK && staged_takes(t, n)) {
        st = check(plan, build_staged(n, d_x, t, t->dh_lb, g), "the tiles' sort, merge and build");
    } else {
        if (st == FMK_OK) /* a split sort's flag is looked at by finish */
            st = sort_points(plan, t, n, d_x, n > t->tune.split_sort_min);
        if (st == FMK_OK) {
            build_small(t, t->dh_lb, g);
            st = check(plan, cudaGetLastError(), "the one-block tree build");
        }
    }
    if (st == FMK_OK) {
        t->pending = 1;
        t->groups_made = g.groups != NULL;
        t->groups_size = g.group_size, t->groups_merge = g.merge;
        t->groups_at = g.groups;
    } else {
        fmk_cuda_tree3d_free(t);
    }
    return st;
}

extern "C" void fmk_cuda_tree3d_finish(fmk_cuda_tree *t, int *redo)
{
    *redo = 0;
    if (!t->pending)
        return;
    t->pending = 0;
    const int32_t *h = t->h_lb;
    if (h[FMK_CUDA_TREE_LB_FLAG] || h[FMK_CUDA_TREE_LB_SORT]) {
        *redo = 1;
        return;
    }
    read_levels(t, FMK_TREE_MAX_LEVEL + 1);
}

namespace {

/* The first build of an empty tree: the arrays prepare() makes (the level and cell tables,
 * keys and order with their sort twins, the node arrays, CUB's workspace), at the sizes it
 * asks for, cut from one allocation: a first call of a fresh plan pays per cudaMalloc (~0.05
 * to 0.2 ms on an H100). prepare() then finds them large enough. first_layout: their bytes
 * (off[16], 256-byte aligned; *temp: CUB's part), the total returned. */
const int FIRST_ARRAYS = 16;
int64_t first_layout(int64_t n, int leaf_size, size_t off[FIRST_ARRAYS], size_t *temp, cudaError_t *err)
{
    const int64_t pts = n > 0 ? n : 1, nodes = first_nodes(n, leaf_size);
    *err = temp_need(n, nodes, temp);
    /* lb, cells, keys, keys_alt, order, order_alt, begin .. parent (6), counts, offset, level, temp */
    const size_t bytes[FIRST_ARRAYS] = {FMK_CUDA_TREE_LB * 4, (size_t)(CELLS + 1) * 4, 8 * (size_t)pts,
                                        8 * (size_t)pts, 4 * (size_t)pts, 4 * (size_t)pts, 4 * (size_t)nodes,
                                        4 * (size_t)nodes, 4 * (size_t)nodes, 4 * (size_t)nodes,
                                        4 * (size_t)nodes, 4 * (size_t)nodes, 4 * (size_t)(nodes + 1),
                                        4 * (size_t)(nodes + 1), (size_t)nodes, *temp};
    size_t total = 0;
    for (int k = 0; k < FIRST_ARRAYS; k++)
        off[k] = total, total += (bytes[k] + 255) / 256 * 256;
    return (int64_t)total;
}

fmk_status alloc_once(fmk_plan *plan, int64_t n, int leaf_size, long long extra, fmk_cuda_tree *t)
{
    size_t off[FIRST_ARRAYS], temp = 0;
    cudaError_t err;
    const size_t total = (size_t)first_layout(n, leaf_size, off, &temp, &err);
    fmk_status st = check(plan, err, "CUB (workspace query)");
    if (st != FMK_OK)
        return st;
    if (!t->d_arena || !t->arena_lent || t->arena_bytes < total) { /* none lent, or too small */
        t->d_arena = NULL, t->arena_lent = 0;
        if ((st = fmk_cuda_alloc(plan, &t->d_arena, total, "the tree", extra + (long long)total)) != FMK_OK)
            return st;
        t->arena_bytes = total, t->bytes = (int64_t)total;
    }
    char *a = (char *)t->d_arena;
    void **arr[FIRST_ARRAYS] = {(void **)&t->d_lb, (void **)&t->d_cells, (void **)&t->d_keys,
                                (void **)&t->d_keys_alt, (void **)&t->d_order, (void **)&t->d_order_alt,
                                (void **)&t->d_begin, (void **)&t->d_end, (void **)&t->d_more,
                                (void **)&t->d_next, (void **)&t->d_n_children, (void **)&t->d_parent,
                                (void **)&t->d_counts, (void **)&t->d_offset, (void **)&t->d_level, &t->d_temp};
    for (int k = 0; k < FIRST_ARRAYS; k++)
        *arr[k] = a + off[k];
    t->cap_points = n > 0 ? n : 1, t->cap_nodes = first_nodes(n, leaf_size), t->temp_bytes = temp;
    /* the rest of make_lb: the sort's flag is read after builds that do not write it (n = 0) */
    st = check(plan, cudaMemsetAsync(t->d_lb, 0, FMK_CUDA_TREE_LB * sizeof(int32_t)),
               "cudaMemset (the tree's level table)");
    if (st == FMK_OK && !(t->h_lb = (int32_t *)calloc(FMK_CUDA_TREE_LB, sizeof(int32_t))))
        st = fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the tree's level table");
    return st;
}

} // namespace

extern "C" int64_t fmk_cuda_tree3d_first_bytes(int64_t n, int leaf_size)
{
    size_t off[FIRST_ARRAYS], temp = 0;
    cudaError_t err;
    const int64_t total = first_layout(n, leaf_size, off, &temp, &err);
    return err == cudaSuccess ? total : total + (1 << 20); /* (a query that failed: a margin) */
}

extern "C" fmk_status fmk_cuda_tree3d_build(fmk_plan *plan, int64_t n, const double *d_x,
                                            int leaf_size, long long extra, fmk_cuda_tree *t)
{
    fmk_status st = t->d_lb || t->d_keys || t->d_begin ? FMK_OK : alloc_once(plan, n, leaf_size, extra, t);
    /* (on failure the tree is freed below: its own arena with it, a lent one left to the caller) */
    if (st == FMK_OK)
        st = prepare(plan, n, leaf_size, extra, t, 1);
    int64_t cap = t->cap_nodes;
    int split = n > t->tune.split_sort_min;
    if (st == FMK_OK)
        st = sort_points(plan, t, n, d_x, split);
    for (int tries = 0; st == FMK_OK; tries++) {
        int overflow = 0;
        st = build_levels(plan, t, &overflow);
        if (st == FMK_OK && split && t->h_lb[FMK_CUDA_TREE_LB_SORT]) {
            /* a run of equal top bits too long for one block: all 63 bits, and again */
            split = 0;
            st = sort_points(plan, t, n, d_x, 0);
            continue;
        }
        if (st != FMK_OK || !overflow)
            break;
        /* the node arrays were too small: larger ones, and the scan's workspace with them */
        cap = t->cap_nodes * 2;
        st = grow_nodes(plan, t, cap, extra);
        if (st == FMK_OK)
            st = grow_temp(plan, t, n, extra);
    }
    if (st != FMK_OK)
        fmk_cuda_tree3d_free(t);
    return st;
}

extern "C" int64_t fmk_cuda_tree3d_groups_bound(const fmk_cuda_tree *t, int group_size)
{
    /* every group is a node (pending: at most cap_nodes of them), or a piece of group_size
     * points of a leaf */
    return (t->pending ? t->cap_nodes : t->n_nodes) + t->n_points / (group_size > 0 ? group_size : 1) + 1;
}

extern "C" fmk_status fmk_cuda_tree3d_groups(fmk_plan *plan, fmk_cuda_tree *t, int group_size,
                                             int merge, long long extra, int2 **d_groups,
                                             int64_t *cap_groups)
{
    const int32_t nn = (int32_t)t->n_nodes;
    if (t->pending && t->groups_made && t->groups_size == group_size && t->groups_merge == merge &&
        t->groups_at == *d_groups) {
        t->groups_sorted = 0;
        return FMK_OK; /* the build's launch made them */
    }
    fmk_status st = grow_groups(plan, fmk_cuda_tree3d_groups_bound(t, group_size), extra,
                                d_groups, cap_groups);
    if (st != FMK_OK)
        return st;
    st = pin_lb(plan, t); /* the count's copy (small trees: the kernel's write) reaches h_lb
                             without a host wait */
    if (st != FMK_OK)
        return st;
    t->groups_sorted = 0;
    if (t->pending || t->n_points <= t->tune.small_max) {
        /* the count reaches h_lb from the kernel (no copy) */
        k_groups_small<<<1, SMALL_BLOCK>>>(nn, t->pending, group_size, merge, t->d_begin, t->d_end,
                                           t->d_more, t->d_n_children, t->d_parent, *d_groups,
                                           t->d_lb, t->dh_lb);
        return check(plan, cudaGetLastError(), "the group kernel");
    }
    /* the level workspace: the group starts' mask and its words' scan (words + 1 <= cap_nodes
     * + 1) for the groups in Morton order, else the counts (nn + 1) and their scan */
    const int64_t words = (t->n_points + 31) / 32;
    t->groups_sorted = words <= t->cap_nodes;
    uint32_t *mask = t->groups_sorted ? (uint32_t *)t->d_counts : NULL;
    int32_t *d_chunks = t->d_counts, *d_offset = t->d_offset;
    const int32_t n_items = t->groups_sorted ? (int32_t)words : nn; /* scanned, then one more */
    cudaError_t err = cudaMemsetAsync(t->d_counts + (mask ? 0 : nn), 0,
                                      (size_t)(mask ? words + 1 : 1) * sizeof(int32_t));
    if (err == cudaSuccess)
        k_group_count<<<blocks_for(nn), BLOCK>>>(nn, group_size, merge, t->d_begin, t->d_end,
                                                 t->d_more, t->d_n_children, t->d_parent,
                                                 d_chunks, mask);
    size_t tb = t->temp_bytes;
    if (err == cudaSuccess && mask)
        err = cub::DeviceScan::ExclusiveSum(
            t->d_temp, tb, thrust::make_transform_iterator((const uint32_t *)mask, bit_count()),
            d_offset, n_items + 1);
    else if (err == cudaSuccess)
        err = cub::DeviceScan::ExclusiveSum(t->d_temp, tb, d_chunks, d_offset, n_items + 1);
    if (err == cudaSuccess)
        k_group_write<<<blocks_for(nn), BLOCK>>>(nn, group_size, merge, t->d_begin, t->d_end,
                                                 t->d_more, t->d_n_children, t->d_parent, mask,
                                                 d_offset, n_items, *d_groups, t->d_lb);
    if (err == cudaSuccess)
        err = cudaMemcpyAsync(t->h_lb + FMK_CUDA_TREE_LB_GROUPS, t->d_lb + FMK_CUDA_TREE_LB_GROUPS,
                              sizeof(int32_t), cudaMemcpyDeviceToHost, 0);
    if (err == cudaSuccess)
        err = cudaGetLastError();
    return check(plan, err, "the group kernels");
}

extern "C" void fmk_cuda_tree3d_host_free(fmk_tree3d *tree)
{
    free(tree->keys), free(tree->order), free(tree->points), free(tree->begin), free(tree->end);
    free(tree->more), free(tree->next), free(tree->n_children), free(tree->parent);
    free(tree->level), free(tree->level_begin);
    memset(tree, 0, sizeof *tree);
}

extern "C" fmk_status fmk_cuda_tree3d_download(fmk_plan *plan, const fmk_cuda_tree *t,
                                               const double *d_x, fmk_tree3d *tree)
{
    memset(tree, 0, sizeof *tree);
    const int64_t n = t->n_points, nn = t->n_nodes;
    const size_t np = (size_t)(n > 0 ? n : 1), nq = (size_t)(nn > 0 ? nn : 1);
    tree->n_points = n, tree->n_nodes = nn, tree->levels = t->levels, tree->leaf_size = t->leaf_size;
    tree->keys = (uint64_t *)malloc(np * 8);
    tree->order = (int64_t *)malloc(np * 8);
    tree->points = d_x ? (double *)malloc(np * 24) : NULL;
    tree->begin = (int64_t *)malloc(nq * 8);
    tree->end = (int64_t *)malloc(nq * 8);
    tree->more = (int32_t *)malloc(nq * 4);
    tree->next = (int32_t *)malloc(nq * 4);
    tree->n_children = (int32_t *)malloc(nq * 4);
    tree->parent = (int32_t *)malloc(nq * 4);
    tree->level = (int8_t *)malloc(nq);
    tree->level_begin = (int64_t *)malloc((size_t)(t->levels + 1) * 8);
    int32_t *tmp = (int32_t *)malloc((np > 2 * nq ? np : 2 * nq) * 4);
    double *x = d_x ? (double *)malloc(np * 24) : NULL;
    if (!tree->keys || !tree->order || (d_x && (!tree->points || !x)) || !tree->begin ||
        !tree->end || !tree->more || !tree->next || !tree->n_children || !tree->parent ||
        !tree->level || !tree->level_begin || !tmp) {
        free(tmp), free(x);
        fmk_cuda_tree3d_host_free(tree);
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory copying the tree");
    }
    cudaError_t err = cudaSuccess;
#define FMK_GET(dst, src, bytes)                                                                \
    if (err == cudaSuccess && (bytes) > 0)                                                     \
    err = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost)
    FMK_GET(tree->keys, t->d_keys, (size_t)n * 8);
    FMK_GET(tmp, t->d_order, (size_t)n * 4);
    if (err == cudaSuccess)
        for (int64_t i = 0; i < n; i++)
            tree->order[i] = tmp[i];
    if (d_x) {
        FMK_GET(x, d_x, (size_t)n * 24);
        if (err == cudaSuccess)
            for (int64_t i = 0; i < n; i++)
                memcpy(tree->points + 3 * i, x + 3 * tree->order[i], 24);
    }
    FMK_GET(tmp, t->d_begin, (size_t)nn * 4);
    FMK_GET(tmp + nn, t->d_end, (size_t)nn * 4);
    if (err == cudaSuccess)
        for (int64_t i = 0; i < nn; i++)
            tree->begin[i] = tmp[i], tree->end[i] = tmp[nn + i];
    FMK_GET(tree->more, t->d_more, (size_t)nn * 4);
    FMK_GET(tree->next, t->d_next, (size_t)nn * 4);
    FMK_GET(tree->n_children, t->d_n_children, (size_t)nn * 4);
    FMK_GET(tree->parent, t->d_parent, (size_t)nn * 4);
    FMK_GET(tree->level, t->d_level, (size_t)nn);
#undef FMK_GET
    memcpy(tree->level_begin, t->level_begin, (size_t)(t->levels + 1) * 8);
    free(tmp), free(x);
    if (err != cudaSuccess) {
        fmk_cuda_tree3d_host_free(tree);
        return fmk_cuda_fail(plan, err, "cudaMemcpy (the tree from the GPU)");
    }
    return FMK_OK;
}
