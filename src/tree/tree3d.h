/*
 * tree3d.h -- the 3D octree shared by the treecode (bh.c, cuda/bh.cu) and, later, the 3D FMM.
 *
 * The CPU (tree3d.c) and the GPU (cuda/tree3d.cu) build the same tree, array for array, from
 * the same input, so either can be checked against the other and the walks can be swapped.
 *
 * Keys. Points are in the plan's frame (internal.h: mapped coordinates in [1, 2]). Each axis is
 * cut into 2^21 cells:  c_k = min(floor((x'_k - 1) * 2^21), 2^21 - 1)  (computed in double; the
 * frame guarantees x' - 1 in [0, 1]). The key interleaves the bits of c_x, c_y, c_z, most
 * significant first, x highest: bit 3*b+2 = bit b of c_x, 3*b+1 of c_y, 3*b of c_z (63 bits).
 *
 * Order. Points are sorted by (key, caller index): a stable radix sort of keys with the indices
 * as values (CUB on the GPU). order[s] is the caller index of the point at sorted position s.
 *
 * Nodes. Node 0 is the root (level 0, the cube [1, 2]^3, all points). A node at level L covers
 * the points whose keys share its 3L leading bits. A node is split when it holds more than
 * leaf_size points and L < FMK_TREE_MAX_LEVEL; its children are its non-empty octants, in key
 * order. A node that holds only identical keys is never split past FMK_TREE_MAX_LEVEL, so
 * coincident points end in one leaf and depth is bounded. Nodes are numbered breadth-first
 * (level by level, key order within a level), so the children of a node are contiguous.
 *
 * Walk pointers (Nakasato, Fig. 5 and 6): more[i] is the first child of node i (-1 for a leaf);
 * next[i] is the node that follows i's subtree in depth-first order: the next sibling if there is
 * one, else next[parent]; -1 after the last node. A walk that starts at node 0 and at each node
 * either accepts it (go to next) or opens it (go to more) visits the tree without a stack.
 *
 * Moments (per evaluation, since they depend on the charges). Expansion centre: the centre of
 * |q|, xc = sum |q_j| x_j / sum |q_j| (the centre of mass for charges of one sign; for mixed
 * signs it still lies inside the cell, where the centre of charge sum q x / sum q may not).
 * About xc, with d = x - xc: monopole M = sum q, dipole D = sum q d (zero for charges of one
 * sign), second moments S_ab = sum q d_a d_b (raw, not traceless: the softened expansion needs
 * the trace). Order 0 uses M, order 1 adds D, order 2 (default) adds S. A parent's moments come
 * from its children's (h = xc_child - xc_parent): D += D_c + M_c h,
 * S += S_c + D_c h^T + h D_c^T + M_c h h^T. bh_terms.h evaluates them at a target (M2P).
 * Opening radius (Nakasato eq. 2, 3): with l the node's side and s = |xc - geometric centre|,
 * the node is accepted for a target at distance r from xc when r^2 > r_open^2 = (l/theta + s)^2.
 */
#ifndef FMMKIT_TREE3D_H
#define FMMKIT_TREE3D_H

#include <stdint.h>

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FMK_TREE_MAX_LEVEL 21
#define FMK_TREE_KEY_BITS 21

/* Geometry of one tree, in the frame's mapped coordinates. All arrays are owned by the tree
 * (host arrays here; the GPU keeps the same arrays on the device). */
typedef struct fmk_tree3d {
    int64_t n_points;
    int64_t n_nodes;
    int32_t levels; /* deepest level + 1 (1: only the root) */
    int32_t leaf_size;
    uint64_t *keys;       /* n_points, sorted */
    int64_t *order;       /* n_points: sorted position -> caller index */
    double *points;       /* n_points * 3, sorted */
    int64_t *begin;       /* n_nodes: first sorted point of the node */
    int64_t *end;         /* n_nodes: one past its last point */
    int32_t *more;        /* n_nodes: first child, -1 for a leaf */
    int32_t *next;        /* n_nodes: next node after the subtree, -1 at the end */
    int32_t *n_children;  /* n_nodes: 0 for a leaf */
    int32_t *parent;      /* n_nodes: -1 for the root */
    int8_t *level;        /* n_nodes */
    int64_t *level_begin; /* levels + 1: nodes of level L are [level_begin[L], [L+1]) */
} fmk_tree3d;

/* Charge-dependent data of every node (order 2 layout; lower orders leave the rest zero). */
typedef struct fmk_tree3d_moments {
    double *center;   /* n_nodes * 3: expansion centre xc */
    double *monopole; /* n_nodes */
    double *dipole;   /* n_nodes * 3 */
    double *second;   /* n_nodes * 6: S_xx, S_xy, S_xz, S_yy, S_yz, S_zz */
    double *r_open2;  /* n_nodes: (l / theta + s)^2 */
} fmk_tree3d_moments;

/* ---------------------------------------------------------------------------------------------
 * The CPU build (tree3d.c, OpenMP). The GPU side may call it too, to check its own tree.
 * ------------------------------------------------------------------------------------------ */

/* The key of one mapped point (coordinates in [1, 2]; out-of-range values are clamped). */
uint64_t fmk_tree3d_key(double x, double y, double z);

/* Sorts keys[0..n) with the values index[0..n) carried along: a stable LSD radix sort (11-bit
 * digits, OpenMP histograms; a pass whose digit is the same for all keys is skipped). Pass
 * index[s] = s to get the order by (key, index). Returns 0, or -1 when out of memory. */
int fmk_tree3d_sort(uint64_t *keys, int64_t *index, int64_t n, int threads);
/* The same for keys below 2^bits: only the digits that can differ are passed over. */
int fmk_tree3d_sort_bits(uint64_t *keys, int64_t *index, int64_t n, int threads, int bits);
/* The same with the caller's workspace (nothing allocated; returns 0): k2, i2 of n entries,
 * hist of threads * FMK_TREE3D_SORT_RADIX (threads is taken as 1 below 4096 keys). */
enum { FMK_TREE3D_SORT_RADIX = 2048 };
int fmk_tree3d_sort_ws(uint64_t *keys, int64_t *index, int64_t n, int threads, int bits,
                       uint64_t *k2, int64_t *i2, int64_t *hist);

/* Builds the tree of n points (interleaved mapped coordinates) with at most leaf_size (>= 1)
 * points per leaf below the depth cap. *tree is overwritten (free it with fmk_tree3d_free).
 * Returns FMK_OK, or FMK_ERR_NOMEM with a message on plan (NULL: on the calling thread); on
 * failure *tree holds nothing. */
fmk_status fmk_tree3d_build(struct fmk_plan *plan, fmk_tree3d *tree, int64_t n,
                            const double *points, int32_t leaf_size, int threads);

/* Cuts the tree below max_level: the nodes of that level become leaves (more = -1, no
 * children) with all the points of their subtrees, and the deeper nodes are dropped. Nodes are
 * numbered level by level, so the kept ones are a prefix of the arrays, and their begin, end,
 * parent and next stay valid (next leads to a sibling or to an ancestor's next). The arrays
 * keep their size. Nothing to do when the tree is no deeper (or max_level < 0). The 3D FMM cuts
 * its tree so for the smooth kernels (fmm3d.h, fmk_fmm3d_max_level); the GPU tree has the same
 * (tree/cuda/tree3d_cuda.h, fmk_cuda_tree3d_truncate). */
void fmk_tree3d_truncate(fmk_tree3d *tree, int max_level);

/* Frees the tree's arrays and zeroes it; safe on a zeroed tree. */
void fmk_tree3d_free(fmk_tree3d *tree);

/* Bytes the tree holds; and the bytes a tree of n points with n_nodes nodes holds. */
int64_t fmk_tree3d_bytes(const fmk_tree3d *tree);
int64_t fmk_tree3d_bytes_for(int64_t n, int64_t n_nodes);

/* A planning estimate of the node count for n points of a smooth distribution (used before
 * the tree exists, by fmk_plan_memory); the built tree's count is exact. */
int64_t fmk_tree3d_estimate_nodes(int64_t n, int32_t leaf_size);

/* The geometric cube of a node: its centre and side (2^-level). */
void fmk_tree3d_node_cube(const fmk_tree3d *tree, int64_t node, double center[3], double *side);

/* Allocates (zeroed) or frees the moments of n_nodes nodes; alloc returns 0 or -1. */
int fmk_tree3d_moments_alloc(fmk_tree3d_moments *m, int64_t n_nodes);
void fmk_tree3d_moments_free(fmk_tree3d_moments *m);
int64_t fmk_tree3d_moments_bytes(int64_t n_nodes);

/* The upward pass: moments of every node from the charges in sorted order (q[s] is the charge
 * of the point at sorted position s), to the given order (0, 1, 2), and the opening radius for
 * theta. abs_charge (n_nodes doubles) is scratch: it ends holding sum |q| of each node.
 * Leaves sum their points; a parent shifts its children's moments (the formulas above); levels
 * are done deepest first, the nodes of a level in parallel. theta is capped at
 * FMK_TREE_THETA_CAP in the opening radius (see below). */
void fmk_tree3d_moments_compute(const fmk_tree3d *tree, const double *q, int order, double theta,
                                double *abs_charge, fmk_tree3d_moments *m, int threads);

/* A target inside a node's cube is at most sqrt(3)/2 l + s from xc, so with theta below
 * 2/sqrt(3) = 1.1547 the opening radius (l/theta + s) already keeps a node from being accepted
 * by a target (or a group) inside it, and the walks never need a separate containment test.
 * Larger theta (plan.c allows up to 1.5) is capped here, with a margin for rounding. */
#define FMK_TREE_THETA_CAP 1.15

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_TREE3D_H */
