/*
 * tree3d_internal.h -- what the files of the GPU octree build (src/tree/cuda/*.cu) share: the
 * constants of their phases, small host helpers, and the launchers of each phase.
 *
 *   keys_sort.cu       Morton keys and their stable sort (one block per tile, CUB, split sort)
 *   build_small.cu     the one-block builds of small trees (and the first levels of large ones)
 *   build_levels.cu    the level-by-level build of large trees
 *   build_one_pass.cu  every level of a large tree from one pass over the points (small leaves)
 *   groups.cu          the groups of targets for the group walk
 *   tree3d.cu          the arrays, and the build, build_async, finish, free and download of
 *                      tree3d_cuda.h
 *
 * C++ only (included by those .cu files); device code they share is in tree3d_device.cuh.
 */
#ifndef FMMKIT_TREE_CUDA_TREE3D_INTERNAL_H
#define FMMKIT_TREE_CUDA_TREE3D_INTERNAL_H

#include <stdint.h>

#include <cuda_runtime.h>

#include "tree/cuda/tree3d_cuda.h"

/* Threads per block of the kernels with one thread per point or node. */
constexpr int BLOCK = 256;

static inline unsigned blocks_for(int64_t n)
{
    return (unsigned)((n + BLOCK - 1) / BLOCK);
}

/* The one-block sorts (keys_sort.cu): tiles of at most SORT_SMALL_MAX points (16 keys per
 * thread of 512); small trees of more than SORT_SMALL_MIN points sort their keys so. */
constexpr int SORT_ITEMS = 16, SORT_SMALL_MIN = 2048, SORT_SMALL_MAX = 512 * SORT_ITEMS;

/* Trees of at most STAGED_MAX points built without a host wait (build_small.cu): the merged
 * tiles are read into shared memory by a block of STAGED_BLOCK threads. */
constexpr int STAGED_BLOCK = 1024, STAGED_MAX = 16384;

/* The points per tile of a sort of n points in tiles: 2048 up to STAGED_MAX points, 4096
 * above (a block of 256 or 512 threads sorts 8 keys per thread). */
static inline int sort_tile_size(int64_t n)
{
    return n <= STAGED_MAX ? 2048 : 4096;
}

/* The cell table (build_levels.cu): where each cell of level CELL_LEVEL starts in the sorted
 * keys (CELLS + 1 entries), the first levels' octant bounds. */
constexpr int CELL_LEVEL = 5;
constexpr int64_t CELLS = 1ll << (3 * CELL_LEVEL);

/* Largest leaf of the one-pass build (build_one_pass.cu). */
constexpr int ONE_LEAF_MAX = 256;

/* The groups a one-block build makes in its own launch (fmk_cuda_tree3d_build_async with
 * groups wanted): after the nodes, the same block makes them as k_groups_small does (one
 * launch less; groups == NULL: none). */
struct fmk_cuda_groups_out {
    int group_size, merge;
    int2 *groups;
};

static inline void free_ptr(void *p)
{
    if (p && cudaFree(p) != cudaSuccess)
        (void)cudaGetLastError();
}

static inline fmk_status check(fmk_plan *plan, cudaError_t err, const char *what)
{
    return err == cudaSuccess ? FMK_OK : fmk_cuda_fail(plan, err, what);
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

/* keys_sort.cu */

/* CUB's workspace for the sorts of n keys: all 63 bits of 64-bit keys, or 32-bit keys (the
 * split sort), whichever needs more. */
cudaError_t fmk_cuda_tree_sort_bytes(int64_t n, size_t *bytes);
/* The keys of the n mapped points d_x sorted in tiles of sort_tile_size(n) points, one block
 * each, into t->d_keys, t->d_order (several tiles: into t->d_keys_alt, t->d_order_alt, then
 * merged). */
cudaError_t fmk_cuda_tree_sort_small(int64_t n, const double *d_x, fmk_cuda_tree *t);
/* Sorts the keys of the n mapped points d_x with their indices into t->d_keys, t->d_order:
 * by one block (2049 .. 8192 points of a small tree) or a few and their merge (up to
 * t->tune.sort_tiles times 8192), the split sort when split is set (the build checks its
 * flag after the levels), or CUB's sort of all 63 key bits. */
fmk_status fmk_cuda_tree_sort(fmk_plan *plan, fmk_cuda_tree *t, int64_t n, const double *d_x,
                              int split);

/* build_small.cu */

/* k_build_small over t's sorted keys; h_lb: the host's copy of the level table to write, or
 * NULL; g: the groups to make too (g.groups NULL: none). */
cudaError_t fmk_cuda_tree_build_small(fmk_cuda_tree *t, int32_t *h_lb,
                                      const fmk_cuda_groups_out &g);
/* The root and the children of levels 0 .. levels - 1 of t by one block (k_build_top, the
 * octant bounds from the cell table t->d_cells). */
cudaError_t fmk_cuda_tree_build_top(fmk_cuda_tree *t, int levels);
/* Whether the keys, their sort and the nodes of n points come from one launch
 * (fmk_cuda_tree_small_fused; t->tune.fused_max). */
int fmk_cuda_tree_small_fused_takes(const fmk_cuda_tree *t, int64_t n);
/* k_tree_small over the n mapped points d_x into t (h_lb, g as fmk_cuda_tree_build_small). */
cudaError_t fmk_cuda_tree_small_fused(int64_t n, const double *d_x, fmk_cuda_tree *t, int32_t *h_lb,
                                      const fmk_cuda_groups_out &g);
/* Whether the n points of a tree built without a wait are sorted in tiles, merged and built
 * from shared memory (fmk_cuda_tree_small_staged). */
int fmk_cuda_tree_small_staged_takes(const fmk_cuda_tree *t, int64_t n);
/* The tiles' sort, k_merge_tiles and k_build_staged (h_lb, g as fmk_cuda_tree_build_small). */
cudaError_t fmk_cuda_tree_small_staged(int64_t n, const double *d_x, fmk_cuda_tree *t,
                                       int32_t *h_lb, const fmk_cuda_groups_out &g);

/* build_levels.cu */

/* The levels below the root, into t (keys sorted). Sets *overflow when the node arrays were
 * too small (the tree is then incomplete). */
fmk_status fmk_cuda_tree_build_levels(fmk_plan *plan, fmk_cuda_tree *t, int *overflow);
/* levels, level_begin and n_nodes of t from the host's copy of the level table, whose levels
 * up to L were built: up to the last non-empty one (h[k] for k > L + 1 was never written). */
void fmk_cuda_tree_read_levels(fmk_cuda_tree *t, int L);

/* build_one_pass.cu */

/* The whole tree in one pass over the points (k_tree_points, k_tree_nodes), into t (keys
 * sorted, leaves of at most ONE_LEAF_MAX points): *taken = 0 (and nothing done) when the
 * scan's arrays or its workspace do not fit in t's level workspace. Sets *overflow when the
 * node arrays were too small. */
fmk_status fmk_cuda_tree_build_one_pass(fmk_plan *plan, fmk_cuda_tree *t, int *overflow,
                                        int *taken);

/* groups.cu */

/* *d_groups (*cap_groups slots) grown to bound slots when smaller (its contents are not kept). */
fmk_status fmk_cuda_tree_grow_groups(fmk_plan *plan, int64_t bound, long long extra,
                                     int2 **d_groups, int64_t *cap_groups);

/* tree3d.cu */

/* The host copy of t's level table pinned and mapped (t->dh_lb), for the kernels that write
 * it there and the group count's asynchronous copy. */
fmk_status fmk_cuda_tree_pin_lb(fmk_plan *plan, fmk_cuda_tree *t);

#endif /* FMMKIT_TREE_CUDA_TREE3D_INTERNAL_H */
