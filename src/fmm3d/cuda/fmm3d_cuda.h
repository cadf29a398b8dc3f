/*
 * fmm3d_cuda.h -- internal header of the GPU 3D FMM (method fmm, backend cuda; kernels laplace,
 * plummer and regularized: the smooth ones exact in the near field only, fmm3d.h): its
 * tuning knobs, the plan's state, and the launchers of its phases, one file each:
 *
 *   engine.cu     the engine row: set_points, set_points_device, eval (a line a phase), release
 *   geometry.cu   order and leaf size from eps, the octree (and the root cube fitted to it), the
 *                 lists (lists.cu), the rotation tables and the M2L's plan, per set_points
 *   memory.cu     the state's one allocation, eval's buffers, the memory estimate
 *   operators.cu  the translation operators built on the GPU: M2M, L2L, the dense M2L matrices
 *   p2m_l2p.cu    P2M, P2L (X list), L2P and M2P (W list)
 *   translate.cu  M2M and L2L over tiles of boxes
 *   m2l_gemm.cu   the dense M2L: cuBLAS GEMMs of the stacked matrices, the truncated degrees
 *   m2l_rot.cu    the rotation-based M2L (high orders)
 *   p2p.cu        the near field (U list, and the W and X entries done directly)
 *   p2m_l2p_many.cu, p2p_many.cu  P2M, P2L, L2P, M2P and the near field of several charge
 *                 vectors in one pass (eval_many; the other phases take a vector count)
 *   lists.cu      the lists from the GPU octree
 *   report.cu     a plan's lists and counts, for the tests and the benchmark
 *
 * docs/fmm3d_gpu.md describes the design and the measured numbers.
 */
#ifndef FMMKIT_CUDA_FMM3D_H
#define FMMKIT_CUDA_FMM3D_H

#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include <cublas_v2.h>

#include "fmm3d/fmm3d.h"
#include "fmm3d/fmm3d_ops.h"
#include "core/tune.h"
#include "cuda/device.h"
#include "fmm3d/cuda/lists.h"
#include "fmm3d/cuda/m2l_rot.h"
#include "tree/cuda/tree3d_cuda.h"

#define IDX FMK_FMM3D_IDX

/* Largest order on the GPU. The dense M2L (one (p + 1)^2 (p + 2)^2-double matrix per direction:
 * 10 MB at p = 32, 55 MB at p = 50) serves up to the knob m2l_rot_order - 1, the rotation-based
 * M2L (m2l_rot.cu, O(p^3) tables) from there on; what bounds the order then is the other passes:
 * M2M / L2L tiles take S = (p + 1)(p + 2) <= 4096 (fmk_fmm3d_cuda_translate_config), M2P's
 * per-thread harmonics (degree p + 1) have templates up to p = 60, and the CPU operators' tables
 * that build the GPU's go to FMK_FMM3D_MAX_ORDER. */
#define FMM_GPU_MAX_ORDER 60

#include "fmm3d/cuda/fmm3d_tune.h"

/* The plan's knobs (plan->tune). */
static inline const fmk_fmm3d_cuda_tune *fmk_fmm3d_cuda_tune_of(const fmk_plan *plan)
{
    return (const fmk_fmm3d_cuda_tune *)plan->tune;
}

/* ---------------------------------------------------------------------------------------------
 * The plan's state
 * ------------------------------------------------------------------------------------------ */

const int BLOCK = 128; /* threads of the point passes (P2M, P2P) */
/* Charge vectors one pass of eval_many carries at most (engine.cu: more go in several passes;
 * eval's buffers hold nv_cap of them, memory.cu). */
const int FMM_NV_MAX = 8;
const int M2L_DIRS =
    FMK_FMM3D_NDIR - 27; /* the V directions (offsets with a coordinate beyond 1) */

/* The tiles of M2M and L2L (translate.cu): target boxes per tile (TB) and output rows per
 * thread (RPT, of TRANSLATE_THREADS) for S doubles per expansion; TB * S doubles of shared
 * memory (<= 64 KB). */
const int TRANSLATE_THREADS = 128;
typedef struct fmk_translate_cfg {
    int rpt, tb;
} fmk_translate_cfg;
fmk_translate_cfg fmk_fmm3d_cuda_translate_config(int S);

/* The harmonic recursion's tables (fmm3d_ops.c) on the device. */
typedef struct tabs {
    const double *rec_a, *rec_b, *rec_diag, *sqrt_int;
} tabs;

/* P2P's scalings (all 1 in fp64): charges times q (a power of two bringing the largest |q|
 * into [1, 2)), and the sums times pot and grad (undoing that and the fp32 coordinates'
 * 2^23, exactly). */
typedef struct p2p_scale {
    double q, pot, grad;
} p2p_scale;
/* The same per charge vector of one eval_many pass (p2p_many.cu takes 4 at a time). */
typedef struct p2p_scales {
    double q[FMM_NV_MAX], pot[FMM_NV_MAX], grad[FMM_NV_MAX];
} p2p_scales;

enum {
    EV_START,
    EV_P2M,
    EV_M2M,
    EV_M2L,
    EV_L2L,
    EV_L2P,
    EV_JOIN,
    EV_END,
    EV_FORK,
    EV_NEAR,
    EV_P2P,
    EV_OPS0,
    EV_OPS1,
    EV_OPS,
    EV_CUT, /* 4 events: the launches of a cut M2L by rotations (fmk_cuda_launch_ranges) */
    N_EV = EV_CUT + 4
}; /* OPS0 .. OPS1: the M2L matrices' kernel on stream 2
                                           * (set_points); OPS: the end of stream 2's operators */

struct fmk_fmm3d_cuda {
    const fmk_fmm3d_cuda_tune *tune; /* the plan's knobs (plan->tune) */
    int device, order, S;
    int Sp, Sx;        /* the M2L's packed doubles per expansion, (p + 1)^2, and
                                        * that rounded up to 8 (m2l_pad: the GEMMs' strides) */
    int sms;           /* the device's multiprocessors */
    int fp32;          /* P2P in fp32 (precision fp32) */
    fmk_kernel kernel; /* laplace, plummer or regularized: P2P's pair kernel (the far field is
                        * laplace's: fmm3d.h, fmk_fmm3d_max_level) */
    double softening;  /* the smooth kernels' s in the tree's units (the frame's over root_side;
                        * 0 for laplace), set with the tree */
    int newton_ok;     /* fp64 P2P may take 1/r by a Newton step (eps >= 1e-11) */
    int32_t leaf_size;
    int64_t leaf_points;   /* P2P's blocks per target leaf are made for this many targets: the
                            * leaf size, or all the points where the tree was cut (the smooth
                            * kernels' d_min: leaves may hold many more) */
    double root_side;      /* the root cube's side over the points' (>= 1) */
    double fit_mean;       /* the fitted tree's points per leaf (0: not fitted) */
    int uniform;           /* the points' first tree was complete (uniform points) */
    int64_t near_max;      /* W and X entries done as P2P: up to this many points */
    fmk_translate_cfg cfg; /* M2M and L2L tiles */
    int64_t n_nodes;
    int levels;
    int64_t gemm_first; /* first node of level 2: M2L's GEMMs start there */
    int m2l_batch;      /* X holds Sx x (nodes from level 2 down) x this many doubles */
    /* the dense M2L's degree per direction (FMK_FMM3D_DIR: p, or less with
     * the knob m2l_trunc), the M2L order of those (rank, dir_of_rank), and per rank the
     * first row of its matrix in the stacked ones ((deg + 1)^2 rows rounded up to 8: m2l_pad;
     * m2l_roff[M2L_DIRS]: their rows, the leading dimension) */
    int8_t m2l_deg[FMK_FMM3D_NDIR];
    int16_t rank[FMK_FMM3D_NDIR], dir_of_rank[512];
    int32_t m2l_roff[M2L_DIRS + 1];
    /* the plan's truncation (the knob m2l_trunc where it applies, else 0), degree classes
     * and size rule (the knobs m2l_classes, m2l_trunc_min), read when the state is made; the
     * degrees above are whole (m2l_whole: f 0, or the size rule) or truncated */
    double m2l_f;
    int m2l_k;
    long long m2l_min;
    int m2l_whole;
    /* M2L: per octant of the sources, the runs of the directions its sources reach (with gaps of
     * a few directions merged), as GEMMs over the stacked matrices (in the M2L order: ranks);
     * parts (one X each) of as many as X holds, each over a range of the lists' slots */
    struct m2l_gemm {
        int32_t rank0, n_ranks, size, k, row; /* the matrices' first rank and count (one degree:
                                               * k packed doubles in and out, rounded up to size:
                                               * the GEMM's inner dimension and rows per rank),
                                               * X's first row */
    } *m2l_gemms;
    struct m2l_part {
        int oct, gemm0, n_gemms, slot_lo, slot_hi, rows; /* rows of X */
        int64_t xrow; /* its slot -> (row, size) table in d_xrow */
    } *m2l_parts;
    int n_m2l_gemms, n_m2l_parts;
    int64_t m2l_products; /* box-direction products the GEMMs compute */
    double m2l_flops;     /* the GEMMs' flops */
    /* a fresh plan's one allocation (cap_block bytes; state_block): the points, the bounding-box
     * workspace, the operators, the tree's and the list builder's arenas, the dense M2L matrices
     * and eval's buffers, at the sizes the node estimate gives; a buffer that outgrows its place
     * is allocated apart (in_block) */
    void *d_block;
    size_t cap_block;
    double *d_pts; /* the mapped points of the last set_points (cap_pts bytes) */
    void *d_box;   /* set_points_device's bounding-box workspace (cap_box bytes) */
    size_t cap_pts, cap_box;
    cublasHandle_t blas;
    int has_blas;
    int fresh;       /* made by this set_points (setup_time[0] is its start) */
    int ops_pending; /* stream 2's operators (EV_OPS) not yet waited for by eval */
    double tree_time;
    double setup_time[6]; /* seconds: start (events, cuBLAS), tree, lists, operators, buffers;
                                        * the M2L matrices' kernel (GPU time) */
    fmk_cuda_fmm3d_geo g; /* points, boxes, lists, tiles (lists.cu) */
    fmk_cuda_tree tree;   /* the octree, kept with its workspace for the next points */
    int rot_slots;        /* the directions the rotation tables are built for */
    int32_t rot_dir[FMK_FMM3D_NDIR];
    int use_rot;            /* M2L by rotations (m2l_rot.cu), not dense matrices */
    int m2l_timed;          /* EV_OPS0 .. EV_OPS1 hold this set_points' M2L matrices */
    int m2l_built;          /* the dense M2L matrices are built (or on their way) */
    fmk_cuda_fmm3d_rot rot; /* its tables (with use_rot) */
    /* the operators (start_ops), built once per plan on stream 2 while the tree and the lists
     * are built: d_ops holds the harmonic tables (tb), the translation harmonics, the M2M and
     * L2L matrices; d_m2l the dense M2L matrices of all M2L_DIRS directions in the M2L order
     * (packed, each to its degree: m2l_roff) */
    double *d_ops, *d_m2l, *d_m2m, *d_l2l;
    size_t cap_m2l; /* d_m2l's bytes */
    tabs tb;
    /* eval's buffers, one allocation (d_eval, cap_eval bytes) kept from one set_points to the
     * next where large enough: expansions, the M2L's columns, products and tables, the far and
     * near field's results, the charge check, each for nv_cap charge vectors (eval_many): vector
     * v's expansions at d_M + v * n_nodes * S (each vector's as one eval's), its M2L columns
     * interleaved with the other vectors' (Mp column c * nv + v for box column c: one GEMM
     * takes every vector), its results at d_res + v * 4 nt; d_qk: nv_cap > 1, the vectors'
     * charges in key order (ns each) */
    void *d_eval;
    size_t cap_eval;
    double *d_M, *d_L, *d_X, *d_Mp, *d_res, *d_near, *d_qk;
    int32_t *d_xrow;
    unsigned long long *d_stats; /* 2 words per vector */
    int nv_cap;                  /* charge vectors the buffers hold: opts.n_vectors (at most
                                  * FMM_NV_MAX), or more once an eval_many asked for them */
    int64_t n_xrow;              /* the M2L's slot -> row table entries (d_xrow) */
    int64_t nd_call, nd_first;   /* eval_many: the vectors of the call in progress, and the
                                  * first of its pass in progress (messages) */
    int64_t ns;                  /* the points' sources (a charge vector's length) */
    /* evaluations from host arrays: charges, potential, gradient (d_host, cap_host bytes; made at
     * the first such evaluation) */
    void *d_host;
    size_t cap_host;
    cudaEvent_t ev[N_EV];
    int events;
    double rot_rate;        /* boxes per second of a cut M2L by rotations (0: none yet) */
    cudaStream_t stream[3]; /* far field (high priority), near field (low priority),
                                        * operators (set_points; not blocking with the default
                                        * stream, on which the tree and lists are built) */
    int streams;
    int64_t bytes;
};

/* Where the operators live in d_ops (operators.cu: fmk_fmm3d_cuda_start_ops), in doubles, each
 * part 256-byte aligned: the harmonic recursion's tables to degree 2p + 1 (rec_a | rec_b |
 * rec_diag | sqrt_int: fmm3d_ops.h; eval's tabs use them too), sqrt(C(a, b)) for a, b < nb = 4p +
 * 2, the M2L_DIRS translation vectors in the M2L order and per rank the first row and the degree
 * of its matrix (int32, M2L stacked matrices: m2l_roff, m2l_deg) (uploaded: [0, n_up)); then the
 * translation harmonics (n_h M2L vectors to degree 2p, then 8 M2M and 8 L2L vectors to degree
 * p), the M2M and the L2L matrices (8 each). */
typedef struct ops_layout {
    int64_t nh, sqb, vec, dirs, H, m2m, l2l, total, n_up;
    int nb, n_h;
} ops_layout;

static inline int64_t align32(int64_t n)
{
    return (n + 31) / 32 * 32;
}

/* The M2L's packed expansions and matrices take rows and columns in multiples of 8 doubles:
 * every GEMM operand then starts 64-byte aligned, with leading and inner dimensions multiples of
 * 8 (docs/fmm3d_gpu.md, "Far field: the M2L on packed expansions": cuBLAS's DGEMM runs slower
 * per flop on odd inner dimensions). */
static inline int m2l_pad(int64_t n)
{
    return (int)((n + 7) / 8 * 8);
}

/* Blocks per box of a point pass over at most n points: passes of BLOCK points spread over
 * blocks (up to 8), so that a few thousand leaves still fill the GPU in many waves (a block
 * per leaf left the last of ~3 waves mostly idle). */
static inline unsigned split_for(int64_t n)
{
    const int64_t y = (n + BLOCK - 1) / BLOCK;
    return (unsigned)(y < 1 ? 1 : y > 8 ? 8 : y);
}

template <typename T> T *hmalloc(size_t n)
{
    return (T *)malloc(sizeof(T) * (n > 0 ? n : 1));
}

/* ---------------------------------------------------------------------------------------------
 * Between the files (host)
 * ------------------------------------------------------------------------------------------ */

/* geometry.cu: the plan's order and leaf size; set_points' geometry and operators from the
 * mapped points d_all on the device (the state keeps them). */
int fmk_fmm3d_cuda_order(const fmk_plan *plan);
int32_t fmk_fmm3d_cuda_leaf_size(const fmk_plan *plan, int p);
fmk_status fmk_fmm3d_cuda_setup(fmk_plan *plan, fmk_fmm3d_cuda *s, double *d_all);

/* memory.cu */
/* Device bytes of the plan's points (plan->n_sources, n_targets, self), for messages. */
long long fmk_fmm3d_cuda_plan_bytes(const fmk_plan *plan);
/* Host and device bytes of a plan of ns sources and nt targets (nt < 0: at the sources). */
void fmk_fmm3d_cuda_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d);
/* cudaMalloc + copy of host data h (NULL: none), with the plan's message on failure. */
fmk_status fmk_fmm3d_cuda_put(fmk_plan *plan, fmk_fmm3d_cuda *s, void **d, const void *h,
                              size_t bytes, const char *what, long long total);
/* A buffer kept from the previous points (*cap bytes) when it holds bytes, else allocated
 * again. */
fmk_status fmk_fmm3d_cuda_grow(fmk_plan *plan, fmk_fmm3d_cuda *s, void **d, size_t *cap,
                               size_t bytes, const char *what, long long total);
/* A fresh state's one allocation for np points (box_bytes: set_points_device's bounding-box
 * workspace, or 0). */
fmk_status fmk_fmm3d_cuda_state_block(fmk_plan *plan, fmk_fmm3d_cuda *s, int64_t np,
                                      size_t box_bytes);
/* Eval's buffers for k nodes, nn of them from level 2 down, nt targets and n_xrow M2L table
 * entries, for s->nv_cap charge vectors. */
fmk_status fmk_fmm3d_cuda_eval_buffers(fmk_plan *plan, fmk_fmm3d_cuda *s, int64_t k, int64_t nn,
                                       int64_t nt, int64_t n_xrow, long long total);
/* Eval's buffers for at least nv charge vectors (eval_many): grown, with the M2L's tables again,
 * when they hold fewer. */
fmk_status fmk_fmm3d_cuda_vectors(fmk_plan *plan, fmk_fmm3d_cuda *s, int nv);
/* The charge vectors eval's buffers hold for the plan's opts.n_vectors. */
int fmk_fmm3d_cuda_nv_of(const fmk_plan *plan);
/* Frees the state's device memory (not its events, streams, cuBLAS handle). */
void fmk_fmm3d_cuda_free_all(fmk_fmm3d_cuda *s);

/* operators.cu */
ops_layout fmk_fmm3d_cuda_ops_layout(int p, int rot);
fmk_status fmk_fmm3d_cuda_start_ops(fmk_plan *plan, fmk_fmm3d_cuda *s, long long total);
fmk_status fmk_fmm3d_cuda_start_m2l(fmk_plan *plan, fmk_fmm3d_cuda *s, long long total);
fmk_status fmk_fmm3d_cuda_m2l_reselect(fmk_plan *plan, fmk_fmm3d_cuda *s, int64_t nn);
void fmk_fmm3d_cuda_ops_wait(fmk_fmm3d_cuda *s, cudaStream_t st);
void fmk_fmm3d_cuda_ops_time(fmk_fmm3d_cuda *s);

/* m2l_gemm.cu */
/* cuBLAS loaded (FMK_ERR_UNAVAILABLE with a message when it cannot be). */
fmk_status fmk_fmm3d_cuda_blas_load(fmk_plan *plan);
fmk_status fmk_fmm3d_cuda_ensure_blas(fmk_plan *plan, fmk_fmm3d_cuda *s);
void fmk_fmm3d_cuda_blas_destroy(fmk_fmm3d_cuda *s);
int fmk_fmm3d_cuda_m2l_batch(const fmk_plan *plan, int64_t Sp, int64_t nn, int n_dirs);
void fmk_fmm3d_cuda_m2l_select(fmk_fmm3d_cuda *s, int whole);
int fmk_fmm3d_cuda_m2l_whole(const fmk_fmm3d_cuda *s, int64_t nn);
fmk_status fmk_fmm3d_cuda_m2l_plan(fmk_plan *plan, fmk_fmm3d_cuda *s, int64_t nn, int64_t *n_xrow);
void fmk_fmm3d_cuda_fill_xrow(const fmk_fmm3d_cuda *s, int32_t *xr);
/* The parts' slot -> row tables (fill_xrow, s->n_xrow entries) into d_xrow. */
fmk_status fmk_fmm3d_cuda_put_xrow(fmk_plan *plan, fmk_fmm3d_cuda *s);

/* p2p.cu: the points per lane of the P2P of leaf pairs, and the points a full pass holds */
int fmk_fmm3d_cuda_pairs_rt(const fmk_fmm3d_cuda *s);
int fmk_fmm3d_cuda_pairs_cap(const fmk_fmm3d_cuda *s);

/* ---------------------------------------------------------------------------------------------
 * The phases of eval (launchers on the state's streams; each returns the launch's status)
 * ------------------------------------------------------------------------------------------ */

/* p2m_l2p.cu: P2M at the leaves into d_M; P2L (X lists) into d_L; L2P and M2P (W lists) at the
 * targets into d_res (the far field's results), on stream 0. */
cudaError_t fmk_cuda_fmm3d_p2m(fmk_fmm3d_cuda *s);
cudaError_t fmk_cuda_fmm3d_p2l(fmk_fmm3d_cuda *s);
cudaError_t fmk_cuda_fmm3d_l2p(fmk_fmm3d_cuda *s, int nt);
/* The same of one vector of eval_many: P2M by column groups of the charges qk (key order) into E
 * (false, nothing launched: no such kernel at this order, or the knob point_cols 0); L2P and M2P
 * of expansions M, L into res. */
bool fmk_fmm3d_cuda_p2m_cols(fmk_fmm3d_cuda *s, double *E, const double *qk);
cudaError_t fmk_cuda_fmm3d_l2p_into(fmk_fmm3d_cuda *s, int nt, const double *M, const double *L,
                                    double *res);
/* p2m_l2p_many.cu: the same for nv charge vectors (charges d_qk, expansions and results of
 * vector v at its place in d_M, d_L, d_res): each source's and target's harmonics made once for
 * all of them, or the kernels above vector by vector (the knob many_points). */
cudaError_t fmk_cuda_fmm3d_p2m_many(fmk_fmm3d_cuda *s, int nv);
cudaError_t fmk_cuda_fmm3d_p2l_many(fmk_fmm3d_cuda *s, int nv);
cudaError_t fmk_cuda_fmm3d_l2p_many(fmk_fmm3d_cuda *s, int nt, int nv);
/* translate.cu: M2M level by level upward to level 2, L2L level by level downward from 3 (nv
 * charge vectors: blockIdx.z). */
cudaError_t fmk_cuda_fmm3d_m2m(fmk_fmm3d_cuda *s, int nv = 1);
cudaError_t fmk_cuda_fmm3d_l2l(fmk_fmm3d_cuda *s, int nv = 1);
/* m2l_gemm.cu: the M2L from level 2 down, by GEMMs (or by rotations, m2l_rot.cu); *blas_status:
 * a failure of cuBLAS (a fresh plan's handle, a GEMM), or an interrupt between the launches
 * of a long M2L by rotations, with the plan's message. nv charge vectors: one GEMM of nv times
 * the columns per run (by rotations, one pass per vector). */
cudaError_t fmk_cuda_fmm3d_m2l(fmk_plan *plan, fmk_fmm3d_cuda *s, fmk_status *blas_status,
                               int nv = 1);
/* p2p.cu: the near field into d_near on stream st, after the charges are in key order
 * (EV_FORK), between the events EV_NEAR and EV_P2P. */
cudaError_t fmk_cuda_fmm3d_p2p(fmk_fmm3d_cuda *s, int nt, p2p_scale sc, cudaStream_t st);
/* p2p.cu: its kernels alone, the charges in the sources' 4th component, the sums into near
 * (4 nt doubles). */
void fmk_cuda_fmm3d_p2p_into(fmk_fmm3d_cuda *s, int nt, p2p_scale sc, cudaStream_t st,
                             double *near);
/* p2p_many.cu: the near field of nv charge vectors (charges d_qk; vector nv - 1, when nv is odd,
 * also in the sources' 4th component) into d_near, 4 vectors at a time, between the same events
 * as fmk_cuda_fmm3d_p2p. */
cudaError_t fmk_cuda_fmm3d_p2p_many(fmk_fmm3d_cuda *s, int nt, int nv, const p2p_scales &sc,
                                    cudaStream_t st);

#endif /* FMMKIT_CUDA_FMM3D_H */
