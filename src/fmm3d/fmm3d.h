/*
 * fmm3d.h -- the adaptive 3D FMM (method fmm) on the octree of tree3d.h: interaction lists
 * (fmm3d_lists.c) and the CPU engine (fmm3d.c). docs/fmm3d.md, section 5, defines the lists.
 *
 * One tree over sources and targets together. For separate targets the octree is built over the
 * union of the two point sets, so every node is one cube that may hold sources, targets or both;
 * per node, [src_begin, src_end) and [trg_begin, trg_end) index the sources and the targets in
 * key order. The lists are built on the cubes alone (adjacency: the closed cubes touch) and then
 * filtered: an entry is kept only when its source box holds sources and its target box targets.
 *
 * Lists of a box b (Carrier, Greengard and Rokhlin's adaptive FMM), with the "neighbour set"
 * N(b) = the boxes adjacent to b that are at b's level, or leaves at a coarser level
 * (N(root) = {root}; N(b) is made from N(parent(b)): children of the non-leaf members, and the
 * leaf members, that touch b):
 *   V(b)  the children of the non-leaf members of N(parent(b)) that do not touch b (M2L; same
 *         level, offsets in side units are integer vectors in [-3, 3]^3 with max-norm >= 2);
 *   X(b)  the leaf members of N(parent(b)) that do not touch b (P2L from their sources);
 *   for a leaf b only:
 *   U(b)  the leaves that touch b, at any level, b included (P2P);
 *   W(b)  the descendants d of b's non-leaf colleagues that do not touch b but whose parent
 *         does (M2P of d's multipole at b's targets).
 * Every (target, source) pair is then counted exactly once: by P2P, or by one M2L, P2L or M2P
 * at the coarsest level where the two boxes are separated.
 */
#ifndef FMMKIT_FMM3D_H
#define FMMKIT_FMM3D_H

#include <math.h>
#include <stdint.h>

#include "tree/tree3d.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Directions of the V list: offset (c_target - c_source) / side in [-3, 3]^3. */
#define FMK_FMM3D_NDIR 343
#define FMK_FMM3D_DIR(ox, oy, oz) (((ox) + 3) * 49 + ((oy) + 3) * 7 + ((oz) + 3))

/* The interaction lists of a tree, as compressed rows over nodes: the list of node b is
 * x[x_begin[b] .. x_begin[b + 1]). */
typedef struct fmk_fmm3d_lists {
    int64_t n_nodes;
    double *center; /* n_nodes * 3: centre of each node's cube (mapped coordinates) */
    double *side;   /* n_nodes */
    int64_t *u_begin, *v_begin, *w_begin, *x_begin; /* n_nodes + 1 each */
    int32_t *u, *v, *w, *x;
    int16_t *v_dir;             /* FMK_FMM3D_DIR of each V entry */
    int64_t n_u, n_v, n_w, n_x; /* entries */
    uint8_t dir_used[FMK_FMM3D_NDIR];
} fmk_fmm3d_lists;

/* Builds the lists of tree t. n_src[b] and n_trg[b] are the numbers of sources and targets in
 * node b (entries are kept only from boxes with sources to boxes with targets). Returns 0, or -1
 * when out of memory (then *lists holds nothing). OpenMP over the nodes of a level. */
int fmk_fmm3d_lists_build(const fmk_tree3d *t, const int64_t *n_src, const int64_t *n_trg,
                          fmk_fmm3d_lists *lists, int threads);

/* Frees the lists and zeroes them; safe on a zeroed struct. */
void fmk_fmm3d_lists_free(fmk_fmm3d_lists *lists);

/* Bytes the lists hold; and a planning estimate for a tree of n_nodes nodes. */
int64_t fmk_fmm3d_lists_bytes(const fmk_fmm3d_lists *lists);
int64_t fmk_fmm3d_lists_bytes_for(int64_t n_nodes);

/* The expansion order for a requested relative accuracy eps (1e-14 <= eps <= 1e-2): the
 * smallest p at which the measured worst V-list pair (docs/fmm3d.md, section 4) errs by at most
 * eps in the potential and 10 eps in the gradient. */
int fmk_fmm3d_order_from_eps(double eps);

/* Points (sources and targets) per leaf for order p on the CPU: the split threshold
 * sqrt(8 B / C) = sqrt(8) s_opt of paper 003's cost model A N + B N / s + C N s, with B (the
 * blocked M2L work per box) and C (P2P per point and leaf point) measured (docs/fmm3d.md,
 * section 4): 77 at p = 6, 329 at p = 20, 699 at p = 35; clamped to [32, 4096]. */
int32_t fmk_fmm3d_leaf_size_for(int order);

/* The same split threshold for a P2P that costs t_pair seconds per pair and core
 * (fmk_fmm3d_leaf_size_for: 1.60e-9, the square-root-and-divide loop of p2p_tile.h; the CPU
 * engine's AVX-512 laplace loop takes 0.68e-9: p = 6: 118, 20: 505, 35: 1072). */
int32_t fmk_fmm3d_leaf_size_model(int order, double t_pair);

/* The deepest level an FMM tree may keep for a kernel, both engines (CPU: fmm3d_cpu.c, GPU:
 * cuda/geometry.cu), which cut their octree there (fmk_tree3d_truncate,
 * fmk_cuda_tree3d_truncate): FMK_TREE_MAX_LEVEL for laplace (no cap); for plummer and
 * regularized the deepest level whose boxes are at least d_min wide, softening in units of the
 * root cube's side (the frame's mapped softening on the CPU, that over the root's side where
 * the GPU enlarges the root). The far field (M2L, P2L, M2P) takes their sum from laplace
 * expansions, which differ from the smooth kernel at distance r by, relative, t / 2 in the
 * potential and 3 t / 2 in the gradient (plummer, t = (s / r)^2, s the softening) and 3 t^2 / 8
 * and 15 t^2 / 8 (regularized): the expansions of (1 + t)^(-1/2), (1 + t)^(-3/2) and of
 * (1 + 3t/2)(1 + t)^(-3/2), (1 + 5t/2)(1 + t)^(-5/2), each bounded by its first term for t >= 0
 * (docs/fmm3d.md section 8.1). With r >= d_min = s / sqrt(eps) (plummer) or s / eps^(1/4)
 * (regularized) this is at most eps / 2 and 3 eps / 2 (2 eps: regularized): with the
 * expansions' eps / 2 and 5 eps (the order's margin, lists_cpu.c) within eps and 10 eps. Boxes
 * that the lists separate (V, W, X) are apart by at least the smaller box's side, so boxes
 * narrower than d_min must not be split: every interaction closer than d_min is then in the
 * near field, summed with the exact kernel. */
static inline int fmk_fmm3d_max_level(fmk_kernel kernel, double softening, double eps)
{
    if (kernel != FMK_KERNEL_PLUMMER && kernel != FMK_KERNEL_REGULARIZED)
        return FMK_TREE_MAX_LEVEL;
    const double d_min =
        kernel == FMK_KERNEL_PLUMMER ? softening / sqrt(eps) : softening / sqrt(sqrt(eps));
    int level = 0;
    while (level < FMK_TREE_MAX_LEVEL && ldexp(1.0, -(level + 1)) >= d_min)
        level++;
    return level;
}

/* fmm3d.c: the CPU engine. */
/* The 3D FMM's accuracy range (both backends): 1e-14 <= eps <= 1e-2, and eps >= 1e-5 in fp32. */
fmk_status fmk_fmm3d_check_eps(const fmk_opts *o, double eps);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_FMM3D_H */
