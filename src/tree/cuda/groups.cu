/*
 * groups.cu -- the groups of targets of the group walk (tree3d_cuda.h, fmk_cuda_tree3d_groups):
 * by one block for small or pending trees (k_groups_small), else per node over the GPU
 * (k_group_count, a CUB scan, k_group_write), in Morton order where the level workspace holds
 * a bit per point.
 */
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/transform_iterator.h>

#include "tree/cuda/tree3d_device.cuh"

namespace {

constexpr int SMALL_BLOCK = 512; /* k_groups_small */

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
        group_runs_emit(
            i, group_size, merge, begin, end, more, n_children, parent,
            [mask](int32_t, int32_t b, int32_t) { atomicOr(&mask[b >> 5], 1u << (b & 31)); });
    else
        chunks[i] = group_runs(i, group_size, merge, begin, end, more, n_children, parent, NULL);
}

__global__ void k_group_write(int32_t n_nodes, int group_size, int merge,
                              const int32_t *__restrict__ begin, const int32_t *__restrict__ end,
                              const int32_t *__restrict__ more,
                              const int32_t *__restrict__ n_children,
                              const int32_t *__restrict__ parent, const uint32_t *__restrict__ mask,
                              const int32_t *__restrict__ offset, int32_t n_offset,
                              int2 *__restrict__ groups, int32_t *__restrict__ lb)
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

} // namespace

/* *d_groups (*cap_groups slots) grown to bound slots when smaller (its contents are not kept). */
fmk_status fmk_cuda_tree_grow_groups(fmk_plan *plan, int64_t bound, long long extra,
                                     int2 **d_groups, int64_t *cap_groups)
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

extern "C" int64_t fmk_cuda_tree3d_groups_bound(const fmk_cuda_tree *t, int group_size)
{
    /* every group is a node (pending: at most cap_nodes of them), or a piece of group_size
     * points of a leaf */
    return (t->pending ? t->cap_nodes : t->n_nodes) +
           t->n_points / (group_size > 0 ? group_size : 1) + 1;
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
    fmk_status st = fmk_cuda_tree_grow_groups(plan, fmk_cuda_tree3d_groups_bound(t, group_size),
                                              extra, d_groups, cap_groups);
    if (st != FMK_OK)
        return st;
    st = fmk_cuda_tree_pin_lb(plan,
                              t); /* the count's copy (small trees: the kernel's write) reaches h_lb
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
                                                 t->d_more, t->d_n_children, t->d_parent, d_chunks,
                                                 mask);
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
