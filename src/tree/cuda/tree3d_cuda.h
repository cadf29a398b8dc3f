/*
 * tree3d_cuda.h -- the octree of tree3d.h on the GPU (src/tree/cuda/*.cu) and what the GPU
 * treecode, the GPU 3D FMM and the tests need of it.
 *
 * The device tree holds the arrays of fmk_tree3d with 32-bit indices (the GPU treecode takes
 * fewer than 2^31 points): keys, order, begin, end, more, next, n_children, parent, level, and
 * level_begin on the host. The sorted points themselves are not kept in double on the device
 * (the engine keeps them packed in its working precision); fmk_cuda_tree3d_download rebuilds
 * them from order for comparisons.
 *
 * Build (all on the default stream; tree3d.cu, the phases in the files it names): keys from
 * the mapped points (double, tree3d.h's formula); a stable CUB radix sort of (key, index)
 * pairs (above tune.split_sort_min points: of the keys' top 32 bits only, then each point of a
 * run of equal top bits placed by its rank in the run; a long run out of order makes the
 * build sort all 63 bits and start again); then the nodes. With leaves of at most 256 points
 * every level comes from one pass over the sorted points: each point's first level as a cell
 * start and its leaf's level, their counts per tile and level, one CUB scan, and each point
 * writes the nodes that begin at it and end just before it (docs/tree.md). With larger leaves
 * the levels come one by one: the first four by one block (their octant boundaries from
 * d_cells, where each cell of level 5 starts), then a launch per level that counts the
 * children, scans the counts across blocks and writes the children breadth-first with their
 * next pointers. The level's first node and count live on the device (d_lb), so the kernels
 * run over a bound of the level's size known on the host and the host does not wait per level.
 *
 * Trees of at most tune.small_max points (2^16) are built below the root by one block (no
 * launch per level); up to tune.fused_max points (4096) the keys, their sort and the nodes are
 * one launch of one block (sorting a tile of 2048, 4096 or 8192), and up to tune.sort_tiles
 * times 8192 a block sorts each 2048 points (4096 above 16384) and one launch merges them (up
 * to 16384 points the build then reads the merged keys from shared memory). These one-block
 * sorts order the keys' top 30 bits, then each run of equal top bits (all 63 bits when a run
 * is long). Such a tree can also be built without a host wait (fmk_cuda_tree3d_build_async):
 * its level table is written into pinned host memory by the kernels and read after the
 * caller's one wait, and its target groups can be made by the build's own launch
 * (fmk_cuda_groups_want; docs/tree.md, "Small N").
 * The node arrays start at an estimate (3 n / leaf_size) and are doubled, and the tree built
 * again, when it does not fit; fmk_cuda_tree3d_node_bound is the worst case that
 * fmk_plan_memory reports.
 */
#ifndef FMMKIT_CUDA_TREE_INTERNAL_H
#define FMMKIT_CUDA_TREE_INTERNAL_H

#include <stdint.h>

#include "tree/tree3d.h"
#include "core/tune.h"
#include "cuda/device.h"
#include "tree/cuda/tree_tune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest point count of the GPU treecode (32-bit sorted indices and node ranges). */
#define FMK_CUDA_TREE_MAX_POINTS 2147483000ll

typedef struct fmk_cuda_tree {
    int64_t n_points;
    int64_t n_nodes;
    int64_t cap_points; /* allocated point slots */
    int64_t cap_nodes;  /* allocated node slots */
    int32_t levels;
    int32_t leaf_size;
    int64_t level_begin[FMK_TREE_MAX_LEVEL + 2];
    uint64_t *d_keys; /* n_points, sorted */
    int32_t *d_order; /* n_points: sorted position -> caller index */
    int32_t *d_begin, *d_end, *d_more, *d_next, *d_n_children, *d_parent;
    int8_t *d_level;
    /* Workspace, kept from build to build (grow-only): the sort's second buffers, CUB's
     * temporary storage, a level's child counts and their scan (cap_nodes + 1 each), and the
     * level boundaries on the device (FMK_CUDA_TREE_LB words) with a pinned host copy. */
    uint64_t *d_keys_alt;
    int32_t *d_order_alt;
    void *d_temp;
    size_t temp_bytes;
    int32_t *d_counts, *d_offset;
    int32_t *d_lb, *h_lb;
    int32_t *dh_lb;   /* h_lb as the kernels see it once pinned and mapped (pin_lb), else NULL */
    int32_t *d_cells; /* where each cell of level 5 starts (the first levels' bounds) */
    int64_t bytes;    /* device bytes held by the arrays above */
    /* fmk_cuda_tree3d_build's first build of an empty tree cuts the arrays above from this one
     * allocation (arena_bytes): its own, or the caller's when lent (set before the first build,
     * at least fmk_cuda_tree3d_first_bytes; not freed with the tree); an array that outgrows
     * its place is allocated apart */
    void *d_arena;
    size_t arena_bytes;
    int arena_lent;
    int pending; /* started by fmk_cuda_tree3d_build_async, not finished yet */
    /* the groups made by that build's launch (fmk_cuda_groups_want): for fmk_cuda_tree3d_groups,
     * which then has nothing to do when asked for the same ones */
    int groups_made, groups_size, groups_merge;
    /* the last fmk_cuda_tree3d_groups wrote the groups in Morton order (by first point) */
    int groups_sorted;
    int2 *groups_at;
    /* the knobs of the builds (set by the engine before each build; kept by fmk_cuda_tree3d_free) */
    fmk_cuda_tree_tune tune;
} fmk_cuda_tree;

/* Words of d_lb: level_begin[0 .. FMK_TREE_MAX_LEVEL + 2], an overflow flag, a group count,
 * the split sort's flag (set: the keys are not in order, sort all their bits), and the node
 * count of a tree built by one block. */
#define FMK_CUDA_TREE_LB (FMK_TREE_MAX_LEVEL + 7)
#define FMK_CUDA_TREE_LB_FLAG (FMK_TREE_MAX_LEVEL + 3)
#define FMK_CUDA_TREE_LB_GROUPS (FMK_TREE_MAX_LEVEL + 4)
#define FMK_CUDA_TREE_LB_SORT (FMK_TREE_MAX_LEVEL + 5)
#define FMK_CUDA_TREE_LB_NODES (FMK_TREE_MAX_LEVEL + 6)

/* Node arrays bytes per node slot (with the level workspace: counts and their scan). */
#define FMK_CUDA_TREE_NODE_BYTES (8 * 4 + 1)

/* Worst-case node count of a tree of n points with this leaf size: every level's nodes are
 * disjoint non-empty point ranges (<= n, <= 8^L), and only nodes of more than leaf_size points
 * have children (<= 8 each). */
int64_t fmk_cuda_tree3d_node_bound(int64_t n, int64_t leaf_size);
/* Device bytes a tree of n points holds besides its node arrays: keys and order with the
 * sort's second buffers, and CUB's workspace (kept from build to build). */
int64_t fmk_cuda_tree3d_build_bytes(int64_t n);

/* Device bytes of the arena of a first build of n points (fmk_cuda_tree3d_build). */
int64_t fmk_cuda_tree3d_first_bytes(int64_t n, int leaf_size);

/* Builds the tree of n mapped points (d_x: n * 3 doubles on the device, in [1, 2]) into *t
 * (zeroed before its first build; a later build reuses its arrays where they are large
 * enough). extra is added to the "needs" of out-of-memory messages. On failure everything *t
 * holds is freed and *t is left empty. No host round trip per level: the level boundaries
 * stay on the device and the host reads them every FMK_CUDA_TREE_CHECK levels (to stop) and
 * once at the end; a tree that outgrows the node arrays is built again in larger ones. After
 * each build of the levels the plan's interrupt is checked (fmk_cuda_stop): a build that is
 * to stop fails with FMK_ERR_INTERRUPTED. */
fmk_status fmk_cuda_tree3d_build(fmk_plan *plan, int64_t n, const double *d_x, int leaf_size,
                                 long long extra, fmk_cuda_tree *t);
/* fmk_tree3d_truncate of a built tree (not pending) on the device: the nodes of max_level become
 * leaves, the deeper ones are dropped (n_nodes, levels and level_begin lowered; the arrays keep
 * their size). One kernel on the default stream (no wait); FMK_OK, or a launch failure with the
 * plan's message. */
fmk_status fmk_cuda_tree3d_truncate(fmk_plan *plan, fmk_cuda_tree *t, int max_level);
/* The groups fmk_cuda_tree3d_groups(plan, t, group_size, merge, extra, d_groups, cap_groups)
 * would make, asked of fmk_cuda_tree3d_build_async. */
typedef struct fmk_cuda_groups_want {
    int group_size, merge;
    int2 **d_groups;
    int64_t *cap_groups;
} fmk_cuda_groups_want;

/* The same tree without a host wait, for trees of at most t->tune.small_max points
 * (larger ones: fmk_cuda_tree3d_build, and t->pending stays 0). The kernels are queued and
 * t->pending is set: the node count is on the device (d_lb[FMK_CUDA_TREE_LB_NODES]; at most
 * cap_nodes), and the level table reaches h_lb with the stream. Once the caller has waited
 * for the stream, fmk_cuda_tree3d_finish fills n_nodes, levels and level_begin; *redo set
 * there means that the tree did not fit in its arrays (or the split sort's keys were out of
 * order) and must be built again with fmk_cuda_tree3d_build. Kernels queued after this one
 * must bound their work by the device count until then (fmk_cuda_tree3d_groups does).
 * groups (or NULL): the groups of the tree are made by the build's own launch too
 * (*groups->d_groups grown to their bound here), and a later
 * fmk_cuda_tree3d_groups for the same ones queues nothing. */
fmk_status fmk_cuda_tree3d_build_async(fmk_plan *plan, int64_t n, const double *d_x, int leaf_size,
                                       long long extra, const fmk_cuda_groups_want *groups,
                                       fmk_cuda_tree *t);
void fmk_cuda_tree3d_finish(fmk_cuda_tree *t, int *redo);
/* Frees the device arrays of *t (safe on an empty or half-built tree) and zeroes it, all but
 * its knobs (t->tune). */
void fmk_cuda_tree3d_free(fmk_cuda_tree *t);

/* Groups of at most group_size nearby sorted points for the group walk (t may be pending): the nodes of at most
 * group_size points (or leaves) whose parent has more, leaves of more cut into pieces of
 * group_size; with merge, consecutive such siblings packed together up to group_size points
 * (fuller warps; a group's box stays inside the parent); merge = 2 cuts the siblings' points
 * into pieces of group_size across their bounds. At most
 * fmk_cuda_tree3d_groups_bound(t, group_size) of them: *d_groups (device,
 * int2 {begin, end}, *cap_groups slots) is grown here to that bound when smaller. The count is
 * written to t->d_lb[FMK_CUDA_TREE_LB_GROUPS] and, once the stream reaches it, to
 * t->h_lb[FMK_CUDA_TREE_LB_GROUPS] (no synchronization here). Uses t's level workspace.
 * The groups come in Morton order (by first point; t->groups_sorted set) from trees of more
 * than t->tune.small_max points whose node arrays hold targets / 32 words, else in the order
 * of their nodes. */
int64_t fmk_cuda_tree3d_groups_bound(const fmk_cuda_tree *t, int group_size);
fmk_status fmk_cuda_tree3d_groups(fmk_plan *plan, fmk_cuda_tree *t, int group_size, int merge,
                                  long long extra, int2 **d_groups, int64_t *cap_groups);

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
