/* fmm3d_tune.h -- the GPU 3D FMM's knobs (fmm3d_cuda.h), in their own header so that C tests
 * and benchmarks can hold a copy of the engine's knob struct (core/tune.h). */
#ifndef FMMKIT_FMM3D_CUDA_FMM3D_TUNE_H
#define FMMKIT_FMM3D_CUDA_FMM3D_TUNE_H

#include <stdint.h>

#include "tree/cuda/tree_tune.h"

/* ---------------------------------------------------------------------------------------------
 * Tuning knobs (core/tune.h: "fmm3d.<field>", set with fmk_plan_tune after fmk_plan_create).
 * ------------------------------------------------------------------------------------------ */
typedef struct fmk_fmm3d_cuda_tune {
    /* Orders from this one up use the rotation-based M2L (m2l_rot.cu), the orders below it the
     * dense matrices and GEMMs (docs/fmm3d_gpu.md, section 6: the GEMMs are faster below 32, the
     * rotations at 32, with a seventh of the memory); 0 puts every order on the rotations, a
     * large value none. Default 32. */
    int m2l_rot_order;
    /* W entries with at most K (p + 1)^2 / 2 sources and X entries into boxes with at most that
     * many targets are done as P2P (exact, and cheaper there), K this knob; 0 keeps every list's
     * operator (M2P, P2L), which makes the engine compute what the CPU engine computes.
     * Default 16. */
    int direct_near;
    /* When the sources are the targets, fp64 P2P evaluates each pair of touching leaves once,
     * for both leaves (Newton's third law: the same 1/r and 1/r^3 serve both directions), with
     * this many targets per lane (1 .. 6; -1: from the leaf size, fmk_fmm3d_cuda_pairs_rt); 0
     * evaluates every U entry one way, as the separate-targets path does. Default -1. */
    int p2p_pairs;
    /* fp64 P2P's 1/r by one Newton step (~1e-13 relative) instead of the third-order
     * correction: -1 where the order comes from eps >= 1e-11, 0 never, 1 always. Default -1. */
    int p2p_newton;
    /* 1 runs P2M by column groups (k_p2m_cols, at the orders it is made for) and L2P from
     * per-leaf records (to order L2P_REC_MAX_ORDER); 0 runs both as a thread per point (k_p2e,
     * l2p, the paths of the other orders). Default 1. */
    int point_cols;
    /* The octree's root cube has this many times the volume of the points' bounding cube
     * (>= 1; the points in its low corner), so that a uniform set's leaves can hold other
     * populations than N / 8^L. Default 1. */
    double root_volume;
    /* The root cube fitted to evenly spread points (geometry.cu, root_fit; docs/fmm3d_gpu.md,
     * section 3, "The root cube fitted"); 0 off. Default 1. */
    int root_fit;
    /* 1 runs eval's near field (P2P) on a second stream alongside the far field's chain (P2M ..
     * L2P); 0 runs everything on one stream, one pass after another (each phase's time then is
     * its own). Default 1. */
    int overlap;
    /* The M2L's GEMMs per octant of the sources cover the runs of directions those sources
     * reach, a run and the next merged when at most this many directions apart; a large value
     * makes one GEMM per octant, -1 one GEMM per direction. Default 5. */
    int m2l_gap;
    /* The dense M2L truncates the operator of a V direction d to degree p_d <= p (input and
     * output), p_d the smallest degree with (rho / |d|)^(p_d + 1) <= f (rho / 2)^(p + 1), rho =
     * sqrt(3) / 2, f this knob, where the order comes from eps only (an order the caller gives
     * keeps every operator whole). The error of a truncated direction follows that ratio; f
     * sets the safety (docs/fmm3d_gpu.md, "Far field: the M2L on packed expansions"). 0: no
     * truncation. Default 0.3. */
    double m2l_trunc;
    /* With the far directions truncated, their degrees rounded up to at most this many distinct
     * values (degree classes), chosen to minimise the GEMM flops of the 189 directions one
     * octant's sources reach (m2l_classes), so that each octant's runs split into fewer, larger
     * GEMMs; 0 keeps every degree its own. Default 0. */
    int m2l_classes;
    /* The far directions are truncated only where the M2L's GEMMs have at least this many
     * columns (boxes from level 2 down), enough to amortise the launches of the runs split by
     * degree; below it the whole operators (one degree, fewer GEMMs). Decided at each
     * set_points once the tree is built (the operators rebuilt when the choice changes); 0
     * truncates at every size. Default 1000. */
    int64_t m2l_trunc_min;
    /* The M2L's products (X) take at most this many bytes, or one direction times all boxes
     * from level 2 down when that is more; the GEMMs of an octant that do not fit go to further
     * parts. Default 256 MiB. */
    int64_t m2l_bytes;
    /* When a plan's first set_points starts the dense M2L matrices on its operators' stream:
     * 1 before the tree, 0 after the lists (the tree's first build runs slower beside them).
     * Default 0. */
    int ops_at;
    /* When a fresh plan makes its cuBLAS handle (cublasCreate, a fraction of a millisecond of
     * host time): 1 at its first eval's M2L, the GPU busy meanwhile with the near field, P2M
     * and M2M; 0 when its first set_points starts (when the tree will have a level 2, else once
     * the lists show M2L GEMMs). Plans without GEMMs never make one. Default 1. */
    int blas_at;
    /* eval_many's P2P of leaf pairs (p2p_many.cu): the points of b per lane, 2 .. 4 for passes
     * of 2 vectors, 1 .. 3 for passes of 4 (clamped); 0: 3 (measured fastest for both: docs/
     * fmm3d_gpu.md, section 7). Default 0. */
    int p2p_many_rt;
    /* eval_many's passes between points and expansions (p2m_l2p_many.cu): 1 makes each source's
     * and target's harmonics once for the pass's vectors (P2M, P2L, L2P, M2P), 0 runs eval's P2M
     * (by column groups, where the order has them) and L2P vector by vector, -1 the faster
     * measured: P2M vector by vector up to 4 vectors, L2P vector by vector on a complete octree
     * (uniform points) (docs/fmm3d_gpu.md, section 7). P2L always makes them once. Default -1. */
    int many_points;
    /* The GPU octree's build (tree/cuda/tree3d_cuda.h): "fmm3d.tree.*". */
    fmk_cuda_tree_tune tree;
} fmk_fmm3d_cuda_tune;

/* clang-format off */
#define FMK_FMM3D_CUDA_TUNE_DEFAULTS \
    {32, 16, -1, -1, 1, 1.0, 1, 1, 5, 0.3, 0, 1000, 256ll << 20, 0, 1, 0, -1, \
     FMK_CUDA_TREE_TUNE_DEFAULTS}
/* clang-format on */

#endif /* FMMKIT_FMM3D_CUDA_FMM3D_TUNE_H */
