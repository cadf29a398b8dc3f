/* fmm2d_cuda.h -- the GPU engine of the 2D adaptive FMM (method fmm, dim 2; log2d and cauchy2d,
 * fp64), after Goude & Engblom, with every phase on the GPU. Internal to src/fmm2d/cuda/.
 *
 * Topological phase (set_points). The pyramid of fmm2d.h, the same tree the CPU builds
 * (pyramid.cu). Splits of large segments: the bounding box of every segment (atomics on the
 * coordinates' bit patterns, which order like the doubles in the frame's [1, 2]), one stable CUB
 * radix sort of (segment, split key) with the positions as values, and a gather that also
 * reduces the next split's boxes. The sort replaces the paper's pivot partitioning (Alg. 3.1,
 * 3.2): a median split is a stable partition by the key, and one sort of all segments keeps
 * every launch full. Once every segment fits SPLIT_CAP points, the remaining splits run in one
 * kernel, a block per segment in shared memory (k_split_small). Small n (RANK_N) goes another
 * way, so that every split spreads over the device: ranks in the segment by launches over all
 * points while segments are large, then a block per segment of at most RANK_CAP points (bitonic
 * sort or ranks in shared memory). Then the directed lists level by level (lists.cu), a warp per
 * box (count, CUB scan, fill), the running totals on the device (up to LISTS_SMALL_L levels: all
 * in one block, one launch); the finest level's strong lists carry a kind per entry (P2P, M2P,
 * P2L: the shortcut of the interchanged theta-criterion). One wait: the lists' totals.
 *
 * Computational phase (eval): a warp per box for P2M, M2M (p2m_m2m.cu), M2L (+ P2L, m2l.cu),
 * L2L, L2P (+ M2P, l2l_l2p.cu) and P2P (p2p.cu: several warps per box, their sums added in a
 * fixed order, where boxes are few; then P2P runs beside the expansions on a second stream); in
 * the expansion operators the lanes own the coefficients (two per lane above order 31) and the
 * warp owns its box, so nothing needs atomics; the operators are those of fmm2d_ops.c in the
 * same scaled form (binomials from a table, powers by a product scan over the lanes or by
 * repeated products). The charges are checked on their way into box order; one wait at the end
 * reads the verdict, and the outputs are written only if all were finite.
 *
 * The plan's device arrays are one block (engine.cu), kept (grow-only) from one
 * set_points_device to the next with the events, the side stream and CUB's workspace sizes: a
 * repeated call of the same or smaller size allocates nothing.
 *
 * Each phase is reached from engine.cu through a launcher fmk_cuda_fmm2d_<phase>() declared
 * here; device helpers shared by several phases are in fmm2d.cuh. */
#ifndef FMMKIT_FMM2D_CUDA_H
#define FMMKIT_FMM2D_CUDA_H

#include <stdint.h>

#include "cuda/device.h"
#include "fmm2d/fmm2d.h"

constexpr int WARPS = 4; /* warps per block in the warp-per-box kernels */
constexpr int NCMAX = FMK_FMM2D_MAX_ORDER + 1;
constexpr int SLOTS = (NCMAX + 31) / 32;
constexpr unsigned FULL = 0xffffffffu;

typedef unsigned long long u64;

/* ---------------------------------------------------------------- state */

/* The engine's state (plan->state): the tree and lists of the plan's points and the arrays of
 * the eval, on the device. */
typedef struct fmk_fmm2d_gpu {
    int device;
    int order, levels;
    int64_t leaf_size;
    int64_t n, ns, nt, n_boxes, leaves;
    int self;
    /* tree */
    double *d_center;                   /* n_boxes * 2 */
    double *d_radius;                   /* n_boxes */
    int64_t *d_src_start, *d_trg_start; /* leaves + 1 (trg == src when self) */
    int *d_src_order, *d_trg_order;     /* box order -> caller index */
    int *d_trg_place; /* nt: caller's target index -> box order (d_trg_order's inverse) */
    double *d_src_xy, *d_trg_xy; /* interleaved, box order */
    int *d_weak_begin;           /* n_boxes + 1 */
    int *d_weak;                 /* global indices */
    int *d_near_begin;           /* leaves + 1 */
    int *d_near;                 /* finest-level indices */
    signed char *d_kind;         /* per near entry: 0 P2P, 1 M2P, 2 P2L */
    int64_t n_weak, n_near;
    int weak_owned, near_owned, kind_owned; /* the lists outgrew the block: freed apart */
    /* evaluation */
    fmk_cplx *d_q;          /* ns charges in box order */
    fmk_cplx *d_M, *d_L;    /* n_boxes * (order + 1) */
    fmk_cplx *d_res;        /* 2 * nt: V, D */
    double *d_qzero;        /* nt */
    double *d_qtotal;       /* 1 */
    double *d_charges;      /* host calls: staging, allocated at the first (d_stage) */
    double *d_pot, *d_grad; /* host calls: staging */
    void *d_stage;
    u64 *d_stats;    /* 2 */
    double *d_binom; /* (2p + 2)^2 binomials C(n, k) at n (2p + 2) + k */
    void *d_block;   /* the one allocation the arrays above are carved from; kept
                                 * (grow-only) from one set_points_device to the next */
    size_t block_bytes;
    int binom_ready; /* d_binom (the block's first array) holds the binomials */
    /* CUB's workspace sizes, kept with the block: its queries cost host time, so they run once
     * per size (q_n, q_ns, q_nt: the sizes they were made for; q_n = -1: none) */
    int64_t q_n, q_ns, q_nt;
    size_t q_box, q_sort, q_scan_lists, q_scan_points, q_sum;
    void *d_temp; /* CUB workspace for eval */
    size_t temp_bytes;
    cudaEvent_t ev[10]; /* the eval's phases (8, 9: P2P on the side stream) */
    int events;
    cudaStream_t side; /* P2P beside the expansions when leaves are few (NULL: none yet) */
    int *h_read;       /* pinned, LS_COUNT + 2 words: what the two waits read back */
    int keep;          /* the next release keeps the state (gpu_set_points_device) */
    double tree_ms;
} fmk_fmm2d_gpu;

/* The lists' running totals on the device (lists built without a host round trip per level). */
enum { LS_WEAK, LS_STRONG, LS_OVERFLOW, LS_BASE, LS_COUNT };

/* The topological phase's workspace, carved from the plan's block (setup_common). */
struct fmk_fmm2d_ws {
    double *x[2], *y[2];
    int *id[2], *pos[2];
    unsigned *keys[2];
    int *before, *cnt, *off, *begin_a, *begin_b;
    u64 *box_bb, *seg_bb;
    int *weak, *strong[2];
    int *lstat; /* LS_COUNT running totals of the lists */
    signed char *kind;
    int64_t weak_cap, strong_cap;
    void *temp;
    size_t temp_bytes;
};

/* What the expansion and near-field kernels read: the tree, the points and charges in box
 * order, the expansions and the binomial table. */
struct fmk_fmm2d_args {
    int p, L, is_log;
    const double *center, *radius;
    const int64_t *src_start, *trg_start;
    const double *src_xy, *trg_xy;
    const fmk_cplx *q;
    fmk_cplx *M, *Lc;
    const double *binom; /* C(n, k) at n * nb + k */
    int nb;
};

/* Blocks of block threads for threads threads. */
static inline unsigned grid_of(int64_t threads, int block)
{
    return (unsigned)((threads + block - 1) / block);
}

/* Few boxes or leaves: the warps of a block share one box (split of them, block-uniform), each
 * taking every split-th list entry, and add their sums in warp order (the same result run
 * after run). split_for: the warps per box for a launch over nb boxes. */
constexpr int SPLIT_MAX = 8;
static inline int split_for(int64_t nb)
{
    return nb <= 128 ? SPLIT_MAX : nb <= 512 ? 4 : 1;
}
static inline unsigned threads_for(int split)
{
    return 32 * (split > 1 ? split : WARPS);
}

/* Error exits of the host functions (fmk_status st, fmk_plan *plan and a label done in scope). */
#define CK(call, what)                          \
    do {                                        \
        cudaError_t e_ = (call);                \
        if (e_ != cudaSuccess) {                \
            st = fmk_cuda_fail(plan, e_, what); \
            goto done;                          \
        }                                       \
    } while (0)
#define CS(call)          \
    do {                  \
        st = (call);      \
        if (st != FMK_OK) \
            goto done;    \
    } while (0)

/* ---------------------------------------------------------------- the phases */

/* pyramid.cu: the caller's points (device, ns sources then nt targets) mapped into the frame,
 * x' = 1.5 + (x - c) / w, straight into the topological phase's arrays of w. */
cudaError_t fmk_cuda_fmm2d_map_points(int64_t ns, const double *d_s, int64_t nt, const double *d_t,
                                      const fmk_frame *frame, const fmk_fmm2d_ws *w);
/* pyramid.cu: the splits into the pyramid from mapped points on the device (d_src: ns * 2;
 * d_trg: nt * 2, NULL when self; d_src NULL: fmk_cuda_fmm2d_map_points put them in w), then the
 * boxes' centres and radii and the points in box order into s, in the workspace w. */
fmk_status fmk_cuda_fmm2d_pyramid(fmk_plan *plan, fmk_fmm2d_gpu *s, const fmk_fmm2d_ws *w,
                                  const double *d_src, const double *d_trg);
/* lists.cu: the weak lists of every level and the finest level's strong lists with their kinds
 * into s (after fmk_cuda_fmm2d_pyramid), in the workspace w; records s->ev[1] at their end and
 * waits for it (the topological phase's one wait). */
fmk_status fmk_cuda_fmm2d_lists(fmk_plan *plan, fmk_fmm2d_gpu *s, const fmk_fmm2d_ws *w);

/* p2m_m2m.cu: the binomials C(n, k), n, k <= 2p + 1, for M2M, M2L and L2L into d_binom. */
cudaError_t fmk_cuda_fmm2d_binomials(int p, double *d_binom);
/* p2m_m2m.cu: the charges d_q (caller's order, 1 or 2 words each) into box order (s->d_q),
 * checked on the way (s->d_stats); log2d: their total into s->d_qtotal. */
cudaError_t fmk_cuda_fmm2d_charges(const fmk_fmm2d_gpu *s, int is_log, const double *d_q);
/* p2m_m2m.cu: P2M at the finest level; M2M up to level 1. */
cudaError_t fmk_cuda_fmm2d_p2m(const fmk_fmm2d_args *a, const fmk_fmm2d_gpu *s);
cudaError_t fmk_cuda_fmm2d_m2m(const fmk_fmm2d_args *a, const fmk_fmm2d_gpu *s);
/* m2l.cu: M2L into every box below the root (and P2L at the finest level). */
cudaError_t fmk_cuda_fmm2d_m2l(const fmk_fmm2d_args *a, const fmk_fmm2d_gpu *s);
/* l2l_l2p.cu: L2L from level 2 down; L2P and M2P into V, D (add: onto the P2P sums there). */
cudaError_t fmk_cuda_fmm2d_l2l(const fmk_fmm2d_args *a, const fmk_fmm2d_gpu *s);
cudaError_t fmk_cuda_fmm2d_l2p(const fmk_fmm2d_args *a, const fmk_fmm2d_gpu *s, int add);
/* p2p.cu: P2P with the warps per leaf that suit the number of leaves, on stream (with split
 * warps it writes V and D, else it adds to L2P's). */
cudaError_t fmk_cuda_fmm2d_p2p(const fmk_fmm2d_args *a, const fmk_fmm2d_gpu *s,
                               cudaStream_t stream);
/* l2l_l2p.cu: the results in the caller's order into pot, grad (either NULL: not wanted), unless
 * a charge was not finite; frame: the plan's. */
cudaError_t fmk_cuda_fmm2d_output(const fmk_fmm2d_gpu *s, int is_log, const fmk_frame *frame,
                                  double *pot, double *grad);

#endif /* FMMKIT_FMM2D_CUDA_H */
