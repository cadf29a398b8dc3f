/*
 * tree_internal.h -- the octree of tree3d.h on the GPU (tree3d.cu) and what the GPU treecode
 * (bh.cu) and the tests need of it.
 *
 * The device tree holds the arrays of fmk_tree3d with 32-bit indices (the GPU treecode takes
 * fewer than 2^31 points): keys, order, begin, end, more, next, n_children, parent, level, and
 * level_begin on the host. The sorted points themselves are not kept in double on the device
 * (the engine keeps them packed in its working precision); fmk_cuda_tree3d_download rebuilds
 * them from order for comparisons.
 *
 * Build (all on the default stream): keys from the mapped points (double, tree3d.h's
 * formula); a stable CUB radix sort of (key, index) pairs; then level by level: for every node
 * of the level that splits, the octant boundaries in its key range (binary searches), a CUB
 * scan of the child counts, and the children written breadth-first with their next pointers.
 * The node arrays start at an estimate and grow (doubling) when a level does not fit, so the
 * final size is what the points need; fmk_cuda_tree3d_node_bound is the worst case that
 * fmk_plan_memory reports.
 */
#ifndef FMMKIT_CUDA_TREE_INTERNAL_H
#define FMMKIT_CUDA_TREE_INTERNAL_H

#include <stdint.h>

#include "../tree3d.h"
#include "cuda_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest point count of the GPU treecode (32-bit sorted indices and node ranges). */
#define FMK_CUDA_TREE_MAX_POINTS 2147483000ll

typedef struct fmk_cuda_tree {
    int64_t n_points;
    int64_t n_nodes;
    int64_t cap_nodes;          /* allocated node slots */
    int32_t levels;
    int32_t leaf_size;
    int64_t level_begin[FMK_TREE_MAX_LEVEL + 2];
    uint64_t *d_keys;           /* n_points, sorted */
    int32_t *d_order;           /* n_points: sorted position -> caller index */
    int32_t *d_begin, *d_end, *d_more, *d_next, *d_n_children, *d_parent;
    int8_t *d_level;
    int64_t bytes;              /* device bytes held by the arrays above */
} fmk_cuda_tree;

/* Node arrays bytes per node slot. */
#define FMK_CUDA_TREE_NODE_BYTES (6 * 4 + 1)

/* Worst-case node count of a tree of n points with this leaf size: every level's nodes are
 * disjoint non-empty point ranges (<= n, <= 8^L), and only nodes of more than leaf_size points
 * have children (<= 8 each). */
int64_t fmk_cuda_tree3d_node_bound(int64_t n, int64_t leaf_size);
/* Peak device bytes of a build of n points (sort buffers and workspace included), without the
 * node arrays. */
int64_t fmk_cuda_tree3d_build_bytes(int64_t n);

/* Builds the tree of n mapped points (d_x: n * 3 doubles on the device, in [1, 2]) into *t
 * (zeroed by the caller). extra is added to the "needs" of out-of-memory messages. On failure
 * everything the build allocated is freed and *t is left empty. */
fmk_status fmk_cuda_tree3d_build(fmk_plan *plan, int64_t n, const double *d_x, int leaf_size,
                                 long long extra, fmk_cuda_tree *t);
/* Frees the device arrays of *t (safe on an empty or half-built tree) and zeroes it. */
void fmk_cuda_tree3d_free(fmk_cuda_tree *t);

/* Groups of at most group_size nearby sorted points for the group walk: the nodes of at most
 * group_size points (or leaves) whose parent has more, leaves of more cut into pieces of
 * group_size. *d_groups (device, int2 {begin, end}) is allocated here. */
fmk_status fmk_cuda_tree3d_groups(fmk_plan *plan, const fmk_cuda_tree *t, int group_size,
                                  long long extra, int2 **d_groups, int64_t *n_groups);

/* Copies the device tree into host arrays of fmk_tree3d (each malloc'ed; free them with
 * fmk_cuda_tree3d_host_free). d_x, when not NULL, are the mapped points the tree was built
 * from (n * 3 doubles on the device): tree->points gets them in sorted order. */
fmk_status fmk_cuda_tree3d_download(fmk_plan *plan, const fmk_cuda_tree *t, const double *d_x,
                                    fmk_tree3d *tree);
void fmk_cuda_tree3d_host_free(fmk_tree3d *tree);

/* For the tests: the source tree of a plan with method tree on the GPU, as host arrays (points
 * in sorted order, mapped coordinates). FMK_ERR_STATE when the plan has no GPU tree. */
fmk_status fmk_cuda_bh_tree(fmk_plan *plan, fmk_tree3d *tree);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_CUDA_TREE_INTERNAL_H */
