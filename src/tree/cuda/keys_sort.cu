/*
 * keys_sort.cu -- the Morton keys of the mapped points (tree3d.h's formula) and their stable
 * sort by (key, index): by one block per tile of at most 8192 points and a merge (small
 * trees), CUB's radix sort of all 63 bits, or the split sort (large trees: the top 32 bits by
 * CUB, then each run of equal top bits by rank).
 */
#include <cub/device/device_radix_sort.cuh>

#include "tree/cuda/tree3d_device.cuh"

namespace {

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

template <int BLOCK_THREADS, int TILE = SORT_SMALL_MAX>
__global__ void __launch_bounds__(BLOCK_THREADS)
    k_sort_small(int64_t n, const double *__restrict__ x, int run_max, uint64_t *__restrict__ keys,
                 int32_t *__restrict__ order, int32_t *__restrict__ lb)
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
        k_sort_small<BLOCK_THREADS, TILE>
            <<<1, BLOCK_THREADS, bytes>>>(n, d_x, run_max, t->d_keys, t->d_order, t->d_lb);
    } else if (err == cudaSuccess) {
        k_sort_small<BLOCK_THREADS, TILE><<<(unsigned)tiles, BLOCK_THREADS, bytes>>>(
            n, d_x, run_max, t->d_keys_alt, t->d_order_alt, t->d_lb);
        k_merge_tiles<TILE>
            <<<blocks_for(n), BLOCK>>>(n, t->d_keys_alt, t->d_order_alt, t->d_keys, t->d_order);
    }
    if (err == cudaSuccess)
        err = cudaGetLastError();
    return err;
}

} // namespace

cudaError_t fmk_cuda_tree_sort_small(int64_t n, const double *d_x, fmk_cuda_tree *t)
{
    if (sort_tile_size(n) == 2048)
        return sort_tiles<256, 2048>(n, d_x, t);
    return sort_tiles<512, 4096>(n, d_x, t);
}

cudaError_t fmk_cuda_tree_sort_bytes(int64_t n, size_t *bytes)
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

fmk_status fmk_cuda_tree_sort(fmk_plan *plan, fmk_cuda_tree *t, int64_t n, const double *d_x,
                              int split)
{
    if (n > SORT_SMALL_MIN && n <= (int64_t)t->tune.sort_tiles * SORT_SMALL_MAX &&
        n <= t->tune.small_max)
        return check(plan, fmk_cuda_tree_sort_small(n, d_x, t), "the one-block sort");
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
            k_gather_runs<<<blocks_for(n), BLOCK>>>(n, t->tune.split_run_max, t->d_keys_alt, order,
                                                    t->d_keys, order_out, t->d_lb);
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
