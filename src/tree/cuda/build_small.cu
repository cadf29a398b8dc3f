/*
 * build_small.cu -- the one-block builds: the nodes of a small tree (at most
 * t->tune.small_max points) level by level in one block, no launch per level (k_build_small);
 * up to t->tune.fused_max points the keys, their sort and the nodes in one launch
 * (k_tree_small); up to STAGED_MAX points a tree built without a host wait from its merged
 * tiles in shared memory (k_build_staged); and the first levels of a large tree (k_build_top).
 * The groups of targets can be made by the same launch (fmk_cuda_groups_out).
 */
#include "tree/cuda/tree3d_device.cuh"

namespace {

/* After a one-block build's nodes, the groups of g (none when g.groups is NULL) by the same
 * block, as k_groups_small makes them. */
template <int BUILD_BLOCK>
__device__ __forceinline__ void
build_groups(const fmk_cuda_groups_out &g, const int32_t *__restrict__ begin,
             const int32_t *__restrict__ end, const int32_t *__restrict__ more,
             const int32_t *__restrict__ n_children, const int32_t *__restrict__ parent,
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
__device__ __forceinline__ void
build_nodes(int64_t n, int leaf_size, int64_t cap, const uint64_t *__restrict__ keys,
            int32_t *__restrict__ begin, int32_t *__restrict__ end,
            int32_t *__restrict__ n_children, int32_t *__restrict__ more,
            int32_t *__restrict__ next, int32_t *__restrict__ parent, int8_t *__restrict__ level,
            int32_t *__restrict__ lb, int32_t *__restrict__ h_lb,
            const int32_t *__restrict__ cells = NULL, int levels_max = FMK_TREE_MAX_LEVEL + 1)
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
                s_bound[slot][o] =
                    o == 0 ? b : octant_start(keys, cells, b, e, shift, L, (unsigned)o);
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
                  int8_t *__restrict__ level, int32_t *__restrict__ lb, int32_t *__restrict__ h_lb,
                  const fmk_cuda_groups_out g)
{
    build_nodes<BUILD_BLOCK>(n, leaf_size, cap, keys, begin, end, n_children, more, next, parent,
                             level, lb, h_lb);
    build_groups<BUILD_BLOCK>(g, begin, end, more, n_children, parent, lb, h_lb);
}

/* The first levels of a large tree in one block (fmk_cuda_tree_build_top): the root and the
 * children of levels 0 .. levels - 1 as k_build_small makes them, the octant boundaries from
 * the cell table; the level kernels go on from level `levels` (one launch instead of a count,
 * a scan and a write per level). */
constexpr int TOP_BLOCK = 1024;

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
    k_tree_small(int64_t n, const double *__restrict__ x, int run_max, int leaf_size, int64_t cap,
                 uint64_t *__restrict__ keys, int32_t *__restrict__ order,
                 int32_t *__restrict__ begin, int32_t *__restrict__ end,
                 int32_t *__restrict__ n_children, int32_t *__restrict__ more,
                 int32_t *__restrict__ next, int32_t *__restrict__ parent,
                 int8_t *__restrict__ level, int32_t *__restrict__ lb, int32_t *__restrict__ h_lb,
                 const fmk_cuda_groups_out g)
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
__global__ void __launch_bounds__(STAGED_BLOCK)
    k_build_staged(int64_t n, int leaf_size, int64_t cap, const uint64_t *__restrict__ keys,
                   int32_t *__restrict__ begin, int32_t *__restrict__ end,
                   int32_t *__restrict__ n_children, int32_t *__restrict__ more,
                   int32_t *__restrict__ next, int32_t *__restrict__ parent,
                   int8_t *__restrict__ level, int32_t *__restrict__ lb, int32_t *__restrict__ h_lb,
                   const fmk_cuda_groups_out g)
{
    extern __shared__ __align__(16) unsigned char smem[];
    uint64_t *sk = reinterpret_cast<uint64_t *>(smem);
    for (int p = threadIdx.x; p < (int)n; p += STAGED_BLOCK)
        sk[p] = keys[p];
    __syncthreads();
    build_nodes<STAGED_BLOCK>(n, leaf_size, cap, sk, begin, end, n_children, more, next, parent,
                              level, lb, h_lb);
    build_groups<STAGED_BLOCK>(g, begin, end, more, n_children, parent, lb, h_lb);
}

template <int BLOCK_THREADS, int TILE>
cudaError_t tree_small_launch(int64_t n, const double *d_x, fmk_cuda_tree *t, int32_t *h_lb,
                              const fmk_cuda_groups_out &g)
{
    static int ready = 0;
    const int bytes = (int)sizeof(typename small_sort<BLOCK_THREADS, TILE>::storage);
    cudaError_t err = allow_smem(k_tree_small<BLOCK_THREADS, TILE>, bytes, &ready);
    if (err == cudaSuccess)
        k_tree_small<BLOCK_THREADS, TILE><<<1, BLOCK_THREADS, bytes>>>(
            n, d_x, t->tune.split_run_max, t->leaf_size, t->cap_nodes, t->d_keys, t->d_order,
            t->d_begin, t->d_end, t->d_n_children, t->d_more, t->d_next, t->d_parent, t->d_level,
            t->d_lb, h_lb, g);
    return err == cudaSuccess ? cudaGetLastError() : err;
}

} // namespace

cudaError_t fmk_cuda_tree_build_small(fmk_cuda_tree *t, int32_t *h_lb, const fmk_cuda_groups_out &g)
{
    k_build_small<1024><<<1, 1024>>>(t->n_points, t->leaf_size, t->cap_nodes, t->d_keys, t->d_begin,
                                     t->d_end, t->d_n_children, t->d_more, t->d_next, t->d_parent,
                                     t->d_level, t->d_lb, h_lb, g);
    return cudaGetLastError();
}

cudaError_t fmk_cuda_tree_build_top(fmk_cuda_tree *t, int levels)
{
    k_build_top<<<1, TOP_BLOCK>>>(t->n_points, t->leaf_size, t->cap_nodes, levels, t->d_keys,
                                  t->d_cells, t->d_begin, t->d_end, t->d_n_children, t->d_more,
                                  t->d_next, t->d_parent, t->d_level, t->d_lb);
    return cudaGetLastError();
}

int fmk_cuda_tree_small_fused_takes(const fmk_cuda_tree *t, int64_t n)
{
    return n > 0 && n <= SORT_SMALL_MAX && n <= t->tune.fused_max;
}

/* A tile of 2048, 4096 or 8192 points, the smallest that holds them. */
cudaError_t fmk_cuda_tree_small_fused(int64_t n, const double *d_x, fmk_cuda_tree *t, int32_t *h_lb,
                                      const fmk_cuda_groups_out &g)
{
    if (n <= 2048)
        return tree_small_launch<256, 2048>(n, d_x, t, h_lb, g);
    if (n <= 4096)
        return tree_small_launch<512, 4096>(n, d_x, t, h_lb, g);
    return tree_small_launch<512, SORT_SMALL_MAX>(n, d_x, t, h_lb, g);
}

int fmk_cuda_tree_small_staged_takes(const fmk_cuda_tree *t, int64_t n)
{
    return n > sort_tile_size(n) && n <= STAGED_MAX &&
           n <= (int64_t)t->tune.sort_tiles * SORT_SMALL_MAX && n <= t->tune.small_max;
}

cudaError_t fmk_cuda_tree_small_staged(int64_t n, const double *d_x, fmk_cuda_tree *t,
                                       int32_t *h_lb, const fmk_cuda_groups_out &g)
{
    cudaError_t err = fmk_cuda_tree_sort_small(n, d_x, t);
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
