/*
 * tree3d_device.cuh -- device code that several files of the GPU octree build share
 * (tree3d_internal.h): Morton keys, the one-block sort of a tile of keys, the octant bounds of
 * a node, and the groups of targets made by one block.
 */
#ifndef FMMKIT_TREE_CUDA_TREE3D_DEVICE_CUH
#define FMMKIT_TREE_CUDA_TREE3D_DEVICE_CUH

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "tree/cuda/tree3d_internal.h"
#include "tree/morton.h"

/* tree3d.h: c_k = min(floor((x'_k - 1) 2^21), 2^21 - 1), x highest. */
static __device__ __forceinline__ uint64_t cell_of(double x)
{
    double c = floor(__dmul_rn(__dadd_rn(x, -1.0), 2097152.0));
    long long i = (long long)c;
    i = i < 0 ? 0 : i;
    return (uint64_t)(i > 2097151 ? 2097151 : i);
}

static __device__ __forceinline__ uint64_t key_of(const double *__restrict__ x, int64_t i)
{
    uint64_t cx = cell_of(x[3 * i]), cy = cell_of(x[3 * i + 1]), cz = cell_of(x[3 * i + 2]);
    return fmk_spread3(cx) << 2 | fmk_spread3(cy) << 1 | fmk_spread3(cz);
}

/* Keys and their stable sort in one block for a tile of TILE points (2048, 4096 or
 * SORT_SMALL_MAX = 8192): alone (a small tree), or one of several tiles that k_merge_tiles
 * merges (two launches instead of the ten of CUB's device sort, which take most of the time
 * of a small tree). The points are loaded in index order (blocked) and padded with all-ones
 * keys, which sort last because the sort is stable and they come last. 8 keys per thread (256
 * or 512 threads) sort a tile faster than 16; 1024 threads of 16 spill registers
 * (bench/RESULTS.md).
 *
 * The sort's passes cost most of the block's time, and few keys of a small set share their
 * top 30 bits (the cells of level 10): the block sorts (top 30 bits, index) in 5 passes of 6
 * bits instead of all 63 bits in 11, keeps the full keys in shared memory, and places each
 * point of a run of equal top bits at its rank in the run by (key, index) (the run is in index
 * order: the sort is stable), as the split sort of large trees does (k_gather_runs). A run of
 * more than BLOCK_RUN_MAX points (or t->tune.split_run_max, when smaller) makes the
 * block sort all 63 bits instead, without a host round trip. The order, (key, index), is the
 * same either way. */
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
static __device__ __forceinline__ void
sort_tile(int64_t n, int64_t base, const double *__restrict__ x, int run_max,
          typename small_sort<BLOCK_THREADS, TILE>::storage &s, uint64_t *__restrict__ keys,
          int32_t *__restrict__ order)
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
                s.u.sorted[r] = k[j], keys[base + r] = k[j],
                order[base + r] = (int32_t)(base + v[j]);
        }
        __syncthreads();
    }
}

/* First position in [lo, hi) whose octant digit (at shift) is >= o (digits are sorted there). */
static __device__ __forceinline__ int32_t octant_bound(const uint64_t *__restrict__ keys,
                                                       int32_t lo, int32_t hi, int shift,
                                                       unsigned o)
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

/* Where octant o of node [b, e) of level L starts: from the cell table when it covers level L
 * (cells not NULL), else by a binary search. */
static __device__ __forceinline__ int32_t octant_start(const uint64_t *__restrict__ keys,
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

/* Groups (tree_internal.h). Without merge: a node that is a group gives chunks of group_size.
 * With merge: a node of more than group_size points that has children gives its children's
 * groups: runs of consecutive children of at most group_size points each, packed greedily up
 * to group_size points (siblings: the run's box stays inside the node), and chunks of
 * group_size for a child leaf of more; the root gives itself when it is a group. merge = 2
 * cuts the children's points (between children that split further) into pieces of group_size
 * regardless of the children's bounds (full warps, larger boxes). */
template <typename Emit>
static __device__ __forceinline__ int32_t group_runs_emit(
    int32_t i, int group_size, int merge, const int32_t *__restrict__ begin,
    const int32_t *__restrict__ end, const int32_t *__restrict__ more,
    const int32_t *__restrict__ n_children, const int32_t *__restrict__ parent, Emit emit)
{
    const int32_t c = end[i] - begin[i];
    int32_t n = 0;
    const int self_group =
        (c <= group_size || more[i] < 0) &&
        (merge ? parent[i] < 0 : (parent[i] < 0 || end[parent[i]] - begin[parent[i]] > group_size));
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
static __device__ __forceinline__ int32_t group_runs(int32_t i, int group_size, int merge,
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

/* The groups of the n_nodes nodes (k_group_count, the scan and k_group_write) by one block of
 * BLOCK threads, for small trees. pending: a tree built without a host wait gives its node
 * count on the device, and none of its groups when it did not fit or its keys were out of
 * order (it is built again); the count goes to h_lb too when not NULL. */
template <int BLOCK>
static __device__ __forceinline__ void
groups_block(int32_t n_nodes, int pending, int group_size, int merge,
             const int32_t *__restrict__ begin, const int32_t *__restrict__ end,
             const int32_t *__restrict__ more, const int32_t *__restrict__ n_children,
             const int32_t *__restrict__ parent, int2 *__restrict__ groups,
             int32_t *__restrict__ lb, int32_t *__restrict__ h_lb)
{
    typedef cub::BlockScan<int32_t, BLOCK> scan_t;
    __shared__ typename scan_t::TempStorage scan;
    __shared__ int32_t carry;
    const int tid = threadIdx.x;
    if (pending)
        n_nodes =
            lb[FMK_CUDA_TREE_LB_FLAG] || lb[FMK_CUDA_TREE_LB_SORT] ? 0 : lb[FMK_CUDA_TREE_LB_NODES];
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

#endif /* FMMKIT_TREE_CUDA_TREE3D_DEVICE_CUH */
