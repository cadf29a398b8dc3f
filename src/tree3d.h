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

#include "internal.h"

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
    int32_t levels;             /* deepest level + 1 (1: only the root) */
    int32_t leaf_size;
    uint64_t *keys;             /* n_points, sorted */
    int64_t *order;             /* n_points: sorted position -> caller index */
    double *points;             /* n_points * 3, sorted */
    int64_t *begin;             /* n_nodes: first sorted point of the node */
    int64_t *end;               /* n_nodes: one past its last point */
    int32_t *more;              /* n_nodes: first child, -1 for a leaf */
    int32_t *next;              /* n_nodes: next node after the subtree, -1 at the end */
    int32_t *n_children;        /* n_nodes: 0 for a leaf */
    int32_t *parent;            /* n_nodes: -1 for the root */
    int8_t *level;              /* n_nodes */
    int64_t *level_begin;       /* levels + 1: nodes of level L are [level_begin[L], [L+1]) */
} fmk_tree3d;

/* Charge-dependent data of every node (order 2 layout; lower orders leave the rest zero). */
typedef struct fmk_tree3d_moments {
    double *center;             /* n_nodes * 3: expansion centre xc */
    double *monopole;           /* n_nodes */
    double *dipole;             /* n_nodes * 3 */
    double *second;             /* n_nodes * 6: S_xx, S_xy, S_xz, S_yy, S_yz, S_zz */
    double *r_open2;            /* n_nodes: (l / theta + s)^2 */
} fmk_tree3d_moments;

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_TREE3D_H */
