/* fmm3d.cu -- the adaptive 3D FMM for the Laplace kernel on the GPU (method fmm, backend cuda),
 * fp64, or with P2P in fp32 for precision fp32 (eps >= 1e-5). docs/fmm3d_gpu.md describes the
 * design and the measured numbers.
 *
 * set_points (geometry, once), all on the GPU: the points (mapped into the plan's frame by
 * plan.c, or given on the device and mapped here: set_points_device) go to the GPU, the octree over sources and targets together is built there (tree3d.cu, the
 * treecode's build), and fmm3d_lists.cu derives from it the sources and targets in key order,
 * the boxes, the U, V, W, X lists of the CPU engine (fmm3d_lists.c, entry for entry), the work
 * lists and the M2M/L2L tiles; the host reads only sizes. The translation operators are dense
 * real matrices on (p + 1)(p + 2) doubles (an expansion's real and imaginary parts): with every
 * expansion scaled by its box's side (fmm3d_ops.h), M2M and L2L depend only on the child's
 * octant (8 each) and M2L only on the offset of the two boxes in side units (one of the 316
 * V-list directions), never on the level. They are built on the GPU, one entry per thread, from
 * the addition theorems (fmm3d_ops.c's references, written per matrix entry) and the harmonics
 * of the 8 + 8 + 316 translation vectors; the M2L matrices are stacked into one tall matrix, in
 * an order where the directions that the sources of each octant reach lie in a few runs. The
 * state (events, streams, cuBLAS, the tree's and the lists' arrays, matrices, buffers) is kept
 * from one set_points_device to the next, grown where too small. A fresh plan's first call
 * allocates it in one cudaMalloc sized from the node estimate (state_block; the tree and the
 * list builder cut their arrays from arenas lent from it), does not wait for the operators'
 * stream (eval's far field does), and makes its cuBLAS handle at the first eval's M2L.
 *
 * eval (numbers only): charges to key order; P2M at the leaves (a block per leaf, each lane
 * summing two columns of the harmonics over its share of the sources in registers, at the eps
 * table's orders; else a thread per source, warp sums of the harmonics as they are made); M2M level by level upward (to level 2)
 * and L2L level by level downward in tiles of TB boxes (per octant, the TB input expansions in shared memory times the octant's
 * matrix, accumulators in registers); M2L per octant of the sources, a cuBLAS DGEMM of the
 * stacked matrices of each run of directions of one degree they reach with their multipoles (on
 * packed expansions, (p + 1)^2 doubles without the zero imaginary parts at m = 0; the far
 * directions' operators truncated to a lower degree where the order comes from eps:
 * fmk_cuda_fmm3d_m2l_trunc), then a gather of
 * each target box's V entries of the part (from order fmk_cuda_fmm3d_m2l_rot_order up, where the
 * dense matrices grow too large, point and shoot instead: fmm3d_rot.cu); P2L (X list); L2P (from per-leaf records of
 * the local expansion in shared memory) and M2P (W list) a thread per target; P2P (U list) blocks per target leaf with the sources staged in shared memory (fp64, or
 * fp32 on offsets from the leaf's centre), or per run of pairs of touching leaves, both ways. The near
 * field (P2P) runs on a second stream alongside the far field's chain, into its own results,
 * which k_results adds to the far field's. W entries with
 * few sources and X entries into boxes with few targets are done as P2P instead (exact, and
 * cheaper there; fmk_cuda_fmm3d_direct_near). Then the results go to the caller's order and
 * units. Nothing is written to the caller's arrays before every pass has succeeded.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>

#include <cublas_v2.h>

#include "fmm3d/fmm3d.h"
#include "fmm3d/fmm3d_ops.h"
#include "cuda/device.h"
#include "kernels/rsqrt.cuh"
#include "fmm3d/cuda/lists.h"
#include "fmm3d/cuda/m2l_rot.h"
#include "tree/cuda/tree3d_cuda.h"

extern "C" const fmk_engine fmk_engine_fmm_cuda; /* defined at the end of this file */

#define IDX FMK_FMM3D_IDX

/* Largest order on the GPU. The dense M2L (one (p + 1)^2 (p + 2)^2-double matrix per direction:
 * 10 MB at p = 32, 55 MB at p = 50) serves up to fmk_cuda_fmm3d_m2l_rot_order - 1, the
 * rotation-based M2L (fmm3d_rot.cu, O(p^3) tables) from there on; what bounds the order then is
 * the other passes: M2M / L2L tiles take S = (p + 1)(p + 2) <= 4096 (m2l_config), M2P's
 * per-thread harmonics (degree p + 1) have templates up to p = 60, and the CPU operators' tables
 * that build the GPU's go to FMK_FMM3D_MAX_ORDER. Measured to 60 (docs/fmm3d_gpu.md). */
#define FMM_GPU_MAX_ORDER 60

/* Tuning knob, not API: orders from this one up use the rotation-based M2L (fmm3d_rot.cu), the
 * orders below it the dense matrices and GEMMs (docs/fmm3d_gpu.md, section 6: the GEMMs are
 * faster to p = 30, the rotations at 32, with a seventh of the memory); 0 puts every order on
 * the rotations, a large value none (the tests compare the two). */
extern "C" int fmk_cuda_fmm3d_m2l_rot_order;
int fmk_cuda_fmm3d_m2l_rot_order = 32;

/* Tuning knob, not API: W entries with at most K (p + 1)^2 / 2 sources and X entries into boxes
 * with at most that many targets are done as P2P (exact, and cheaper there), K this knob
 * (docs/fmm3d_gpu.md, section 3: measured); 0 keeps every list's operator (M2P, P2L), which
 * makes the engine compute what the CPU engine computes. */
extern "C" int fmk_cuda_fmm3d_direct_near;
int fmk_cuda_fmm3d_direct_near = 16;

/* Tuning knob, not API: when the sources are the targets, fp64 P2P evaluates each pair of
 * touching leaves once, for both leaves (Newton's third law: the same 1/r and 1/r^3 serve both
 * directions), with this many targets per thread (1, 2 or 4 (in two groups of two warps); -1:
 * from the leaf size); 0
 * evaluates every U entry one way, as the separate-targets path does (docs/fmm3d_gpu.md,
 * section 1: measured). */
extern "C" int fmk_cuda_fmm3d_p2p_pairs;
int fmk_cuda_fmm3d_p2p_pairs = -1; /* -1: from the leaf size (p2p below) */
/* At 4 points per lane, the warps' groups of a full pass (k_p2p_pairs): 2 (two groups of two
 * warps, 256 points a pass) or 4 (every warp the same 128 points, every fourth chunk each) */
extern "C" int fmk_cuda_fmm3d_p2p_groups;
int fmk_cuda_fmm3d_p2p_groups = 2;

/* Tuning knobs, not API, of that P2P of leaf pairs: a block takes this many consecutive pairs
 * (1 .. 16, -1: 8 below leaf size 256, else 4; those of one leaf share its points in registers
 * and one stream of their partners' points); tail 2: the last pass over a leaf's points, when at most 32 remain, spread over the
 * block's warps by chunks of the stream; 1: a pass of one point per lane when at most a block's
 * worth remain; 0: every pass of RT per lane (k_p2p_pairs; docs/fmm3d_gpu.md, section 3:
 * measured). */
extern "C" int fmk_cuda_fmm3d_p2p_run;
int fmk_cuda_fmm3d_p2p_run = -1;
extern "C" int fmk_cuda_fmm3d_p2p_tail;
int fmk_cuda_fmm3d_p2p_tail = 2;
/* and the steps of its 32-step ring unrolled (1, 2, 4 or 8 at 2 points per lane; 1 or 2 at 4 and
 * 6 points per lane, 2 for any value above 1; 2 at 3 and 5) */
extern "C" int fmk_cuda_fmm3d_p2p_unroll;
int fmk_cuda_fmm3d_p2p_unroll = 4;
/* and the variant of its ring at 4 points per lane (0 .. P2P_RINGS - 1, ring_of below); at 3 and
 * 6 points per lane, 3 frees the registers (2 blocks per multiprocessor at 6, 5 at 3) */
extern "C" int fmk_cuda_fmm3d_p2p_ring;
int fmk_cuda_fmm3d_p2p_ring = 1;
/* and a leaf's pairs with itself: 1 each once in that kernel (self_pairs), 0 both ways in k_p2p's
 * rest rows */
extern "C" int fmk_cuda_fmm3d_p2p_self;
int fmk_cuda_fmm3d_p2p_self = 1;
/* fp64 P2P's 1/r by one Newton step (~1e-13 relative) instead of the third-order correction:
 * -1 where the order comes from eps >= 1e-11 (pair_rsqrt_newton; docs/fmm3d_gpu.md), 0 never,
 * 1 always */
extern "C" int fmk_cuda_fmm3d_p2p_newton;
int fmk_cuda_fmm3d_p2p_newton = -1;

/* Tuning knob, not API: 1 runs P2M by column groups (k_p2m_cols, at the orders it is made for;
 * 2: the same with two sources a lane at a time) and L2P from per-leaf records (l2p_rec, to order L2P_REC_MAX_ORDER); 0 runs both as a thread
 * per point (k_p2e, l2p; docs/fmm3d_gpu.md, section 3: measured; the tests compare the two). */
extern "C" int fmk_cuda_fmm3d_point_cols;
int fmk_cuda_fmm3d_point_cols = 1;

/* Tuning knob, not API: the octree's root cube has this many times the volume of the points'
 * bounding cube (>= 1; the points in its low corner), so that a uniform set's leaves can hold
 * other populations than N / 8^L (docs/fmm3d_gpu.md, section 3: measured). */
extern "C" double fmk_cuda_fmm3d_root_volume;
double fmk_cuda_fmm3d_root_volume = 1;

/* Tuning knob, not API: the root cube fitted to evenly spread points. When the octree of the
 * points' bounding cube is complete down to a level F >= 3 (every box of every level to F holds
 * points) and ends at F or F + 1 (a uniform set, whose boxes of level F may split once), L is the
 * last level <= F whose boxes hold at least 1.25 m_t points on average, m_t = leaf size / 2.8
 * (the cost model's best mean, docs/fmm3d_gpu.md section 3, "Leaf size"), and the points are
 * shrunk into the low corner of a root cube whose level L + 1 has k cells across them, k the even
 * number that brings n / k^3 nearest m_t, and the tree built again: a 2^20 cube
 * at eps 1e-6 then has leaves of ~180 points at level 5 instead of 256 at level 4 (eval 9.3 ->
 * 7.9 ms on an H100, with the P2P changes beside it; section 3, "The root cube fitted"). fp64
 * with sources = targets only (the P2P of leaf pairs, whose passes follow the leaves' mean,
 * pairs_rt below), and m_t from 128 to 224 (leaf sizes 358 .. 627: orders 10 .. 16 at the
 * default leaf size, of which eps 1e-5 and 1e-6 give 11 and 14), where passes of 5 or 6 points
 * per lane fit the leaves; 0 off. */
extern "C" int fmk_cuda_fmm3d_root_fit;
/* Tuning knob, not API, read when a plan's streams are made: eval's far field on the higher
 * priority stream (0), both streams at the same priority (1), or the near field higher (2). */
extern "C" int fmk_cuda_fmm3d_priority;
int fmk_cuda_fmm3d_priority = 0;
int fmk_cuda_fmm3d_root_fit = 1;

/* Tuning knob, not API: 1 runs eval's near field (P2P) on a second stream alongside the far
 * field's chain (P2M .. L2P); 0 runs everything on one stream, one pass after another (each
 * phase's time then is its own; docs/fmm3d_gpu.md, section 1). */
extern "C" int fmk_cuda_fmm3d_overlap;
int fmk_cuda_fmm3d_overlap = 1;

/* Tuning knob, not API: the M2L's GEMMs per octant of the sources cover the runs of directions
 * those sources reach, a run and the next merged when at most this many directions apart
 * (docs/fmm3d_gpu.md, section 1: measured); a large value makes one GEMM per octant, -1 one
 * GEMM per direction. */
extern "C" int fmk_cuda_fmm3d_m2l_gap;
int fmk_cuda_fmm3d_m2l_gap = 5;

/* Tuning knob, not API: the dense M2L truncates the operator of a V direction d to degree
 * p_d <= p (input and output), p_d the smallest degree with (rho / |d|)^(p_d + 1) <= f (rho /
 * 2)^(p + 1), rho = sqrt(3) / 2, f this knob, where the order comes from eps only (an order the
 * caller gives keeps every operator whole). The measured error of a truncated direction follows
 * that ratio; f sets the safety: 0.3 keeps the accuracy matrix within 1.09x of the whole
 * operators' errors (docs/fmm3d_gpu.md, "Far field: the M2L on packed expansions"). 0: no
 * truncation. */
extern "C" double fmk_cuda_fmm3d_m2l_trunc;
double fmk_cuda_fmm3d_m2l_trunc = 0.3;

/* Tuning knob, not API: with the far directions truncated, their degrees p_d rounded up to at
 * most this many distinct values (degree classes), chosen to minimise the GEMM flops of the 189
 * directions one octant's sources reach (m2l_classes), so that each octant's runs split into
 * fewer, larger GEMMs; 0 keeps every degree its own. 2, 3 and 4 (at p = 14, 3 classes: degrees
 * 9, 11, 14; 0.49 of the whole operators' flops against 0.44) measured no faster than 0 where
 * the size rule below truncates (2^18 and 2^20; the fitted root's 2^20 cube 8.11 against 8.05 ms
 * with 3), so 0 (docs/fmm3d_gpu.md, section 3, "The root cube fitted", the M2L table). */
extern "C" int fmk_cuda_fmm3d_m2l_classes;
int fmk_cuda_fmm3d_m2l_classes = 0;

/* Tuning knob, not API: the far directions are truncated only where the M2L's GEMMs have at
 * least this many columns (boxes from level 2 down), enough to amortise the launches of the
 * runs split by degree; below it the whole operators (one degree, fewer GEMMs). Decided at
 * each set_points once the tree is built (the operators rebuilt when the choice changes); 0
 * truncates at every size. 1000: the trees of up to ~2^16 uniform points (576 columns at eps
 * 1e-3 and 1e-6) keep the whole operators, which measured up to 2x faster there (docs/fmm3d_gpu.md,
 * section 3, "The root cube fitted", the M2L table). */
extern "C" long long fmk_cuda_fmm3d_m2l_trunc_min;
long long fmk_cuda_fmm3d_m2l_trunc_min = 1000;

/* Tuning knob, not API: the M2L's products (X) take at most this many bytes, or one direction
 * times all boxes from level 2 down when that is more; the GEMMs of an octant that do not fit
 * go to further parts. */
extern "C" long long fmk_cuda_fmm3d_m2l_bytes;
long long fmk_cuda_fmm3d_m2l_bytes = 256ll << 20;

/* Tuning knob, not API: when a plan's first set_points starts the dense M2L matrices on its
 * operators' stream (the other operators start before the tree): 1 before the tree too, 0
 * after the lists (docs/fmm3d_gpu.md, "The first call of a fresh plan": measured, 0 as fast or
 * faster; the tree's first build ran slower beside them). */
extern "C" int fmk_cuda_fmm3d_ops_at;
int fmk_cuda_fmm3d_ops_at = 0;

/* Tuning knob, not API: when a fresh plan makes its cuBLAS handle (cublasCreate, 0.15-0.2 ms
 * of host time on an H100): 1 at its first eval's M2L, the GPU busy meanwhile with the near
 * field, P2M and M2M; 0 when its first set_points starts (when the tree will have a level 2,
 * else once the lists show M2L GEMMs) (docs/fmm3d_gpu.md, "The first call of a fresh plan":
 * measured, 1 faster by 0.15-0.3 ms, eval unchanged). Plans without GEMMs (rotation-based M2L,
 * no V lists) never make one. */
extern "C" int fmk_cuda_fmm3d_blas_at;
int fmk_cuda_fmm3d_blas_at = 1;

/* cuBLAS is loaded when the first GPU FMM plan starts, not linked: libfmmkit then runs
 * (CPU and every other GPU engine) on machines whose loader cannot find libcublas, and the
 * GPU FMM says what is missing. The four entry points used are the _v2 ones that
 * cublas_v2.h maps cublasCreate, cublasDestroy, cublasSetStream and cublasDgemm to. */
namespace blas {

typedef cublasStatus_t (*create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*destroy_fn)(cublasHandle_t);
typedef cublasStatus_t (*stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*dgemm_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                   int, const double *, const double *, int, const double *, int,
                                   const double *, double *, int);
create_fn create;
destroy_fn destroy;
stream_fn set_stream;
dgemm_fn dgemm;

#define FMK_STR2(x) #x
#define FMK_STR(x) FMK_STR2(x)
#define FMK_CUBLAS_SONAME "libcublas.so." FMK_STR(CUBLAS_VER_MAJOR)

/* 1 when the four functions are there (tries the loader's path, then $CUDA_HOME/lib64 and
 * /usr/local/cuda/lib64); the library stays loaded for the life of the process. */
int load(void)
{
    static int state = 0; /* 0 not tried, 1 loaded, -1 not found */
    if (state)
        return state > 0;
    const char *home = getenv("CUDA_HOME");
    char path[1024];
    void *h = dlopen(FMK_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h && home && strlen(home) < sizeof path - 40) {
        snprintf(path, sizeof path, "%s/lib64/" FMK_CUBLAS_SONAME, home);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!h)
        h = dlopen("/usr/local/cuda/lib64/" FMK_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h) {
        create = (create_fn)dlsym(h, "cublasCreate_v2");
        destroy = (destroy_fn)dlsym(h, "cublasDestroy_v2");
        set_stream = (stream_fn)dlsym(h, "cublasSetStream_v2");
        dgemm = (dgemm_fn)dlsym(h, "cublasDgemm_v2");
    }
    state = h && create && destroy && set_stream && dgemm ? 1 : -1;
    return state > 0;
}

} // namespace blas

namespace {

const int BLOCK = 128;
const int M2L_THREADS = 128;
const int M2L_DIRS = FMK_FMM3D_NDIR - 27; /* the V directions (offsets with a coordinate beyond 1) */

/* Order p and leaf size for eps on the GPU (docs/fmm3d_gpu.md, section 3: measured). */
int gpu_order_from_eps(double eps)
{
    /* the smallest p whose measured relative l2 error, worst of the five test distributions
     * (N = 10^5, leaves of gpu_leaf_size_for(p), docs/fmm3d_gpu.md section 3), is at most eps / 3
     * for the potential and 10 eps / 3 for the gradient: a margin of 3 on what eps asks. Below
     * 1e-13 no order meets that (the relative error of fp64 sums of charges of both signs
     * stays at 1e-14 .. 3e-14 up to p = 60): the engine's eps_min refuses such eps (docs) */
    static const struct {
        double eps;
        int p;
    } table[] = {{1e-2, 4}, {1e-3, 6}, {1e-4, 8}, {1e-5, 11}, {1e-6, 14}, {1e-7, 18},
                 {1e-8, 26}, {1e-9, 30}, {1e-10, 42}, {1e-11, 46}, {1e-12, 52}, {1e-13, 60}};
    const int n = (int)(sizeof table / sizeof table[0]);
    for (int i = 0; i < n; i++)
        if (eps >= table[i].eps * (1 - 1e-9))
            return table[i].p;
    return table[n - 1].p;
}

int32_t gpu_leaf_size_for(int p)
{
    /* Paper 003's cost model, total = A N + B N / m + C N m for m points per leaf: B (M2M,
     * M2L, L2L per box) and C (P2P per pair) measured on an H100 for p = 4 .. 16
     * (docs/fmm3d_gpu.md, section 3: bench_fmm3d cost) give m_opt = sqrt(B / C) = 11 p .. 14 p
     * (B grows slower than S^2: the GEMMs run faster at larger S). A leaf size s gives leaves
     * of s / 8 .. s points (geometric mean s / 2.8), hence s = 2.8 m_opt ~ 38 p. */
    int s = 38 * p;
    if (s < 32)
        s = 32;
    if (s > 1024)
        s = 1024;
    return s;
}

int order_of(const fmk_plan *plan)
{
    return plan->opts.order >= 0 ? plan->opts.order : gpu_order_from_eps(plan->eps);
}

int32_t leaf_size_of(const fmk_plan *plan, int p)
{
    int64_t ls = plan->opts.leaf_size > 0 ? plan->opts.leaf_size : gpu_leaf_size_for(p);
    return ls > (1 << 30) ? (1 << 30) : (int32_t)ls;
}

/* M2L tiles: target boxes per tile (TB) and output rows per thread (RPT, of M2L_THREADS) for S
 * doubles per expansion; TB * S doubles of shared memory (<= 64 KB). */
struct m2l_cfg {
    int rpt, tb;
};
m2l_cfg m2l_config(int S)
{
    if (S <= 128)
        return {1, 32};
    if (S <= 256)
        return {2, 32};
    if (S <= 512)
        return {4, 16};
    if (S <= 1024)
        return {8, 8};
    if (S <= 2048)
        return {16, 4};
    return {32, 2};
}

/* The harmonic recursion's tables (fmm3d_ops.c) on the device. */
struct tabs {
    const double *rec_a, *rec_b, *rec_diag, *sqrt_int;
};

/* fmm3d_ops.c's fmk_fmm3d_regular, for one point. */
__device__ void regular(const tabs &t, int degree, double x, double y, double z, double *R)
{
    const double r2 = x * x + y * y + z * z;
    double dr = 1, di = 0;
    for (int m = 0; m <= degree; m++) {
        if (m > 0) {
            const double f = -t.rec_diag[m];
            const double nr = f * (x * dr - y * di), ni = f * (x * di + y * dr);
            dr = nr, di = ni;
        }
        R[2 * IDX(m, m)] = dr, R[2 * IDX(m, m) + 1] = di;
        if (m + 1 > degree)
            break;
        double pr = dr, pi = di;
        const double a1 = t.rec_a[IDX(m + 1, m)] * z;
        double qr = a1 * dr, qi = a1 * di;
        R[2 * IDX(m + 1, m)] = qr, R[2 * IDX(m + 1, m) + 1] = qi;
        for (int n = m + 2; n <= degree; n++) {
            const double a = t.rec_a[IDX(n, m)] * z, b = t.rec_b[IDX(n, m)] * r2;
            const double sr = a * qr - b * pr, si = a * qi - b * pi;
            R[2 * IDX(n, m)] = sr, R[2 * IDX(n, m) + 1] = si;
            pr = qr, pi = qi, qr = sr, qi = si;
        }
    }
}

/* Kelvin inversion: I_n^m(x) = R_n^m(x / r^2) / r. */
__device__ void irregular(const tabs &t, int degree, double x, double y, double z, double *I)
{
    const double inv_r2 = 1 / (x * x + y * y + z * z), inv_r = sqrt(inv_r2);
    regular(t, degree, x * inv_r2, y * inv_r2, z * inv_r2, I);
    const int nc = (degree + 1) * (degree + 2);
    for (int i = 0; i < nc; i++)
        I[i] *= inv_r;
}

__device__ inline double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* P2M (list == NULL: the node's own sources, regular harmonics) and P2L (the sources of the
 * node's X list, irregular harmonics I_n^m(x) = R_n^m(x / r^2) / r) into E of node
 * nodes[blockIdx.x]; blockIdx.y splits the sources (gridDim.y blocks per node, atomic adds
 * into E then). Each source's harmonics are made column by column as in regular() and summed
 * over the warp where they are made (q conj(R) into shared memory): no per-thread table (which
 * lived in local memory, written and read back per source). */
__global__ void __launch_bounds__(BLOCK) k_p2e(int p, int S, tabs tb, const int32_t *__restrict__ nodes,
                                               const int32_t *__restrict__ list_begin,
                                               const int32_t *__restrict__ list,
                                               const real4d *__restrict__ cube,
                                               const int32_t *__restrict__ sb,
                                               const int32_t *__restrict__ sn,
                                               const real4d *__restrict__ src, double *E)
{
    extern __shared__ double acc[];
    const int b = nodes[blockIdx.x];
    for (int i = threadIdx.x; i < S; i += blockDim.x)
        acc[i] = 0;
    __syncthreads();
    const real4d c = cube[b];
    const double inv_s = 1 / c.w;
    const int e0 = list ? list_begin[b] : 0, e1 = list ? list_begin[b + 1] : 1;
    const int lane = threadIdx.x & 31;
    for (int e = e0; e < e1; e++) {
        const int a = list ? list[e] : b;
        const int j0 = sb[a], j1 = j0 + sn[a];
        for (int base = j0 + blockIdx.y * blockDim.x; base < j1; base += gridDim.y * blockDim.x) {
            const int j = base + threadIdx.x;
            double x = 0, y = 0, z = 0, q = 0;
            if (j < j1) {
                const real4d s = src[j];
                x = (s.x - c.x) * inv_s, y = (s.y - c.y) * inv_s, z = (s.z - c.z) * inv_s;
                q = s.w;
                if (list) { /* Kelvin inversion; locals carry 1/s (fmm3d_ops.h: P2L) */
                    const double inv_r2 = 1 / (x * x + y * y + z * z);
                    q *= sqrt(inv_r2) * inv_s;
                    x *= inv_r2, y *= inv_r2, z *= inv_r2;
                }
            }
            const double r2 = x * x + y * y + z * z;
            double dr = q, di = 0; /* q R_m^m */
            for (int m = 0; m <= p; m++) {
                if (m > 0) {
                    const double f = -tb.rec_diag[m];
                    const double nr = f * (x * dr - y * di), ni = f * (x * di + y * dr);
                    dr = nr, di = ni;
                }
                double pr = 0, pi = 0, cr = dr, ci = di; /* q R_{n-1}^m, q R_n^m */
                for (int n = m; n <= p; n++) {
                    if (n > m) {
                        const double fa = tb.rec_a[IDX(n, m)] * z;
                        const double fb = n > m + 1 ? tb.rec_b[IDX(n, m)] * r2 : 0.0;
                        const double sr = fa * cr - fb * pr, si = fa * ci - fb * pi;
                        pr = cr, pi = ci, cr = sr, ci = si;
                    }
                    const double vr = warp_sum(cr), vi = warp_sum(-ci); /* += q conj(R) */
                    if (lane == 0) {
                        atomicAdd(&acc[2 * IDX(n, m)], vr);
                        atomicAdd(&acc[2 * IDX(n, m) + 1], vi);
                    }
                }
            }
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < S; i += blockDim.x) {
        if (gridDim.y > 1)
            atomicAdd(E + (int64_t)b * S + i, acc[i]);
        else
            E[(int64_t)b * S + i] += acc[i];
    }
}

/* P2M at the orders of the eps table (and 12, 16: p2m_cols below): a block per leaf and
 * column groups instead of a thread per source. The (p + 1)(p + 2) / 2 coefficients of M are
 * split by columns m into G = p / 2 + 1 groups of at most p + 2 (columns m and p - m: equal
 * work), G lanes of a warp per source, one group each, L = 32 / G sources a warp at a time
 * (4 warps: 4 L slices of the leaf's sources). A lane makes its two columns of q R_n^m by
 * fmm3d_ops.c's recursion (the diagonal q R_m^m by the chain R_m^m = -rec_diag[m] (x + i y)
 * R_{m-1}^{m-1}, the column by R_n^m = rec_a z R_{n-1}^m - rec_b r^2 R_{n-2}^m) and adds them to
 * its own sums in registers, U sources at a time (1 or 2: registers against latency): no per-coefficient reduction over the warp
 * (the thread per source summed each of the 120 coefficients at p = 14 over the warp, 10
 * shuffles and a shared atomic each). The slices' sums are added once per block (shuffles, then
 * shared memory). gridDim.y > 1 splits a leaf's sources over blocks (atomic adds into E then). */
template <int P> struct cols {
    static const int G = P / 2 + 1;  /* column groups */
    static const int NE = P + 2;     /* entries of a group, at most */
    static const int L = 32 / G;     /* sources of a warp at a time */
    static const int WARPS = BLOCK / 32;
    static const int CH = 256;       /* sources staged at a time */
};

/* the group's entry k: column m and degree n (false: none) */
__device__ __forceinline__ bool col_entry(int P, int g, int k, int *n, int *m)
{
    const int n1 = P + 1 - g; /* column g: degrees g .. P */
    if (k < n1) {
        *m = g, *n = g + k;
        return true;
    }
    if (P - g == g || k - n1 > g) /* column P - g: degrees P - g .. P */
        return false;
    *m = P - g, *n = P - g + (k - n1);
    return true;
}

template <int P, int U>
__global__ void __launch_bounds__(BLOCK) k_p2m_cols(int S, tabs tb, const int32_t *__restrict__ nodes,
                                                    const real4d *__restrict__ cube,
                                                    const int32_t *__restrict__ sb,
                                                    const int32_t *__restrict__ sn,
                                                    const real4d *__restrict__ src, double *E)
{
    typedef cols<P> C;
    const int G = C::G, NE = C::NE, L = C::L;
    __shared__ double2 coef[NE * G];    /* (rec_a, rec_b) of entry k of group g at k G + g */
    __shared__ double diag[P + 1];      /* -rec_diag[m] */
    __shared__ real4d pts[C::CH];       /* the staged sources, in box units */
    __shared__ double part[C::WARPS][G][NE][2];
    const int b = nodes[blockIdx.x];
    for (int i = threadIdx.x; i < NE * G; i += blockDim.x) {
        const int g = i % G, k = i / G;
        int n, m;
        double a = 0, bb = 0;
        if (col_entry(P, g, k, &n, &m) && n > m) {
            a = tb.rec_a[IDX(n, m)];
            bb = n > m + 1 ? tb.rec_b[IDX(n, m)] : 0.0;
        }
        coef[i] = make_double2(a, bb);
    }
    for (int i = threadIdx.x; i <= P; i += blockDim.x)
        diag[i] = i ? -tb.rec_diag[i] : 1.0;
    const real4d c = cube[b];
    const double inv_s = 1 / c.w;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane % G, r = lane / G;
    const int m1 = g, m2 = P - g, n1 = P + 1 - g;
    const int slice = warp * L + r, NS = C::WARPS * L;
    const bool active = r < L;
    double ar[NE], ai[NE];
#pragma unroll
    for (int k = 0; k < NE; k++)
        ar[k] = 0, ai[k] = 0;
    const int per = (sn[b] + gridDim.y - 1) / gridDim.y;
    const int j0 = sb[b] + blockIdx.y * per, j1 = min(sb[b] + sn[b], j0 + per);
    for (int base = j0; base < j1; base += C::CH) {
        const int cnt = min(C::CH, j1 - base);
        __syncthreads();
        for (int i = threadIdx.x; i < cnt; i += blockDim.x) {
            const real4d s = src[base + i];
            pts[i] = real4d{(s.x - c.x) * inv_s, (s.y - c.y) * inv_s, (s.z - c.z) * inv_s, s.w};
        }
        __syncthreads();
        for (int i = active ? slice : cnt; i < cnt; i += U * NS) {
            /* U sources: i, i + NS, ... (past the chunk's end: none, q = 0) */
            double x[U], y[U], z[U], r2[U], dr[U], di[U], d1r[U], d1i[U], d2r[U], d2i[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const real4d v = i + u * NS < cnt ? pts[i + u * NS] : real4d{0, 0, 0, 0};
                x[u] = v.x, y[u] = v.y, z[u] = v.z, r2[u] = v.x * v.x + v.y * v.y + v.z * v.z;
                dr[u] = v.w, di[u] = 0, d1r[u] = v.w, d1i[u] = 0, d2r[u] = v.w, d2i[u] = 0;
            }
            /* the diagonal: q R_m^m for m = m1 and m2 */
#pragma unroll
            for (int m = 1; m <= P; m++) {
                const double f = diag[m];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const double tr = f * (x[u] * dr[u] - y[u] * di[u]), ti = f * (x[u] * di[u] + y[u] * dr[u]);
                    dr[u] = tr, di[u] = ti;
                    if (m == m1)
                        d1r[u] = tr, d1i[u] = ti;
                    if (m == m2)
                        d2r[u] = tr, d2i[u] = ti;
                }
            }
            /* the two columns: entries 0 .. n1 - 1 column m1, n1 .. column m2 */
            double pr[U], pi[U], cr[U], ci[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                pr[u] = 0, pi[u] = 0, cr[u] = d1r[u], ci[u] = d1i[u];
                ar[0] += cr[u], ai[0] += ci[u];
            }
#pragma unroll
            for (int k = 1; k < NE; k++) {
                const double2 ab = coef[k * G + g];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    if (k == n1) {
                        pr[u] = 0, pi[u] = 0, cr[u] = d2r[u], ci[u] = d2i[u];
                    } else {
                        const double a = ab.x * z[u], bb = ab.y * r2[u];
                        const double sr = a * cr[u] - bb * pr[u], si = a * ci[u] - bb * pi[u];
                        pr[u] = cr[u], pi[u] = ci[u], cr[u] = sr, ci[u] = si;
                    }
                    ar[k] += cr[u], ai[k] += ci[u];
                }
            }
        }
    }
    /* the slices' sums: over the warp's sources (lanes r, r + o at distance o G), then over the
     * warps in shared memory */
#pragma unroll
    for (int k = 0; k < NE; k++) {
        for (int o = 1; o < L; o <<= 1) {
            const double xr = __shfl_down_sync(0xffffffffu, ar[k], o * G);
            const double xi = __shfl_down_sync(0xffffffffu, ai[k], o * G);
            if ((r & (2 * o - 1)) == 0 && r + o < L)
                ar[k] += xr, ai[k] += xi;
        }
        if (r == 0)
            part[warp][g][k][0] = ar[k], part[warp][g][k][1] = ai[k];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * NE; i += blockDim.x) {
        const int gg = i / NE, k = i % NE;
        int n, m;
        if (!col_entry(P, gg, k, &n, &m))
            continue;
        double vr = 0, vi = 0;
        for (int w = 0; w < C::WARPS; w++)
            vr += part[w][gg][k][0], vi += part[w][gg][k][1];
        double *e = E + (int64_t)b * S + 2 * IDX(n, m); /* += q conj(R) */
        if (gridDim.y > 1)
            atomicAdd(e, vr), atomicAdd(e + 1, -vi);
        else
            e[0] += vr, e[1] -= vi;
    }
}

/* Translations over tiles of TB target boxes (see the file comment): M2L (cube given: the
 * output is scaled by 1/side), M2M and L2L (cube NULL). T[slot][j][k] is a slot's matrix
 * (direction or octant), transposed. tile_src[e * TB + t]: the source box of target t of the
 * tile for entry e, or -1. blockIdx.y splits a tile's entries (gridDim.y blocks per tile, atomic
 * adds into the outputs then: the top levels of M2M have too few tiles to fill the GPU, and a
 * tile's 8 octants are 8 independent products). M2L_THREADS threads, each owning RPT output rows for all TB
 * targets; the TB multipoles sit in shared memory as ms[j][t], so that one 16-byte load feeds
 * 2 RPT fused multiply-adds. */
template <int RPT, int TB>
__global__ void __launch_bounds__(M2L_THREADS) k_tiles(int S, int32_t first_tile,
                                                     const int32_t *__restrict__ tile_nodes,
                                                     const int32_t *__restrict__ tile_begin,
                                                     const int32_t *__restrict__ tile_slot,
                                                     const int32_t *__restrict__ tile_src,
                                                     const double *__restrict__ T,
                                                     const real4d *__restrict__ cube,
                                                     const double *__restrict__ M, double *L)
{
    extern __shared__ double2 ms2[];
    double *ms = (double *)ms2;
    const int tile = first_tile + blockIdx.x;
    double acc[RPT][TB];
#pragma unroll
    for (int r = 0; r < RPT; r++)
#pragma unroll
        for (int t = 0; t < TB; t++)
            acc[r][t] = 0;
    for (int e = tile_begin[tile] + blockIdx.y; e < tile_begin[tile + 1]; e += gridDim.y) {
        const int32_t *srcs = tile_src + (int64_t)e * TB;
        __syncthreads();
        for (int i = threadIdx.x; i < TB * S; i += M2L_THREADS) {
            const int t = i / S, j = i - t * S;
            const int a = srcs[t];
            ms[j * TB + t] = a >= 0 ? M[(int64_t)a * S + j] : 0.0;
        }
        __syncthreads();
        const double *Td = T + (int64_t)tile_slot[e] * S * S;
        /* JC matrix rows loaded together: with few tiles (the top levels) the loop is bound by
         * the latency of these loads, not by the multiply-adds */
        constexpr int JC = RPT >= 8 ? 32 / RPT : 8;
        for (int j0 = 0; j0 < S; j0 += JC) {
            double tv[JC][RPT];
#pragma unroll
            for (int jj = 0; jj < JC; jj++)
#pragma unroll
                for (int r = 0; r < RPT; r++) {
                    const int k = threadIdx.x + r * M2L_THREADS;
                    tv[jj][r] = k < S && j0 + jj < S ? __ldg(Td + (int64_t)(j0 + jj) * S + k) : 0.0;
                }
#pragma unroll
            for (int jj = 0; jj < JC; jj++) {
                if (j0 + jj >= S)
                    break;
                const double2 *mj = ms2 + (j0 + jj) * (TB / 2);
#pragma unroll
                for (int t = 0; t < TB / 2; t++) {
                    const double2 m = mj[t];
#pragma unroll
                    for (int r = 0; r < RPT; r++) {
                        acc[r][2 * t] += tv[jj][r] * m.x;
                        acc[r][2 * t + 1] += tv[jj][r] * m.y;
                    }
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < TB; t++) {
        const int b = tile_nodes[tile * TB + t];
        if (b < 0)
            continue;
        /* M2L: locals carry 1/s (fmm3d_ops.h: P2L), the matrices are for unit sides */
        const double inv_s = cube ? 1 / cube[b].w : 1.0;
#pragma unroll
        for (int r = 0; r < RPT; r++) {
            const int k = threadIdx.x + r * M2L_THREADS;
            if (k < S && gridDim.y > 1)
                atomicAdd(L + (int64_t)b * S + k, acc[r][t] * inv_s);
            else if (k < S)
                L[(int64_t)b * S + k] += acc[r][t] * inv_s;
        }
    }
}

/* The M2L's packed layout: an expansion's (p + 1)^2 doubles without the imaginary parts of the
 * m = 0 coefficients (zero in every multipole and local expansion), by degree: degree n at
 * n^2 .. n^2 + 2n, re(n, 0), re(n, 1), im(n, 1), ..., im(n, n); the leading (q + 1)^2 hold the
 * degrees up to q. packed_at(k): the place of packed double k in the full layout. */
__host__ __device__ inline int packed_at(int k)
{
    int n = (int)sqrt((double)k);
    n -= n * n > k, n += (n + 1) * (n + 1) <= k;
    const int j = k - n * n;
    return n * (n + 1) + (j ? j + 1 : 0);
}

/* M2L, first: the multipoles of the sources from level 2 down as the GEMMs' columns, grouped by
 * octant (Mp column c = M of node box[c], packed: Sp doubles, then zeros to the stride Sx). */
__global__ void k_m2l_columns(int S, int Sp, int Sx, int64_t n, const int32_t *__restrict__ box,
                              const double *__restrict__ M, double *Mp)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * Sx; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = i / Sx;
        const int k = (int)(i - c * Sx);
        Mp[i] = k < Sp ? M[(int64_t)box[c] * S + packed_at(k)] : 0;
    }
}

/* M2L, second half, for one part (m2l_part): L[b] += sum over b's V entries with a source of
 * octant oct and a slot in [slot_lo, slot_hi) of X[column of the source][rows of the slot] /
 * side(b), a block per target box. X holds the part's directions' matrices times the
 * multipoles of the octant's sources (packed, each direction's to its degree): column
 * col[source], rows xrow[2 (slot - slot_lo)] .. + xrow[2 (slot - slot_lo) + 1] (the leading
 * packed doubles of the direction's degree), leading dimension ldx. A box's V entries are
 * sorted by the source's octant, then slot. */
__global__ void k_m2l_gather(int S, int Sp, int64_t ldx, int oct, int slot_lo, int slot_hi,
                             const int32_t *__restrict__ xrow, const int32_t *__restrict__ vnodes,
                             const int32_t *__restrict__ v_begin, const int32_t *__restrict__ v,
                             const int16_t *__restrict__ v_slot, const int8_t *__restrict__ node_oct,
                             const int32_t *__restrict__ col, const real4d *__restrict__ cube,
                             const double *__restrict__ X, double *L)
{
    const int b = vnodes[blockIdx.x];
    int e0 = v_begin[b], e1 = v_begin[b + 1];
    const int key = oct * 1024 + slot_lo;
    while (e0 < e1) { /* first entry of (octant, slot) >= (oct, slot_lo) */
        const int mid = (e0 + e1) / 2;
        if (node_oct[v[mid]] * 1024 + v_slot[mid] < key)
            e0 = mid + 1;
        else
            e1 = mid;
    }
    e1 = v_begin[b + 1];
    /* locals carry 1/s (fmm3d_ops.h: P2L); the matrices are for unit sides */
    const double inv_s = 1 / cube[b].w;
    for (int k = threadIdx.x; k < Sp; k += blockDim.x) {
        double acc = 0;
        for (int e = e0; e < e1; e++) {
            const int a = v[e], sl = v_slot[e];
            if (node_oct[a] != oct || sl >= slot_hi)
                break;
            const int r = xrow[2 * (sl - slot_lo)]; /* >= 0: the octant's sources reach the slot */
            if (r >= 0 && k < xrow[2 * (sl - slot_lo) + 1])
                acc += X[(int64_t)col[a] * ldx + r + k];
        }
        L[(int64_t)b * S + packed_at(k)] += acc * inv_s;
    }
}

/* fmm3d_ops.c's l2p at one point (unit box): phi = sum L_n^m R_n^m and the gradient's sums
 * (gr, gi: d/dx - i d/dy parts; gz), with the regular harmonics made column by column as in
 * regular() and each R_j^m used where it is made (in phi with L_j^m, in the gradient with
 * L_{j+1}^{m-1}, L_{j+1}^m, L_{j+1}^{m+1}), so that no table of harmonics is stored: a thread's
 * table of (p + 1)(p + 2) doubles lived in local memory, written and read back per target. */
__device__ void l2p(const tabs &t, int p, double x, double y, double z, const double *__restrict__ L,
                    double *phi_out, double *gr_out, double *gi_out, double *gz_out)
{
    const double *sq = t.sqrt_int;
    const double r2 = x * x + y * y + z * z;
    double phi = 0, gr = 0, gi = 0, gz = 0;
    double dr = 1, di = 0; /* R_m^m */
    for (int m = 0; m <= p; m++) {
        if (m > 0) {
            const double f = -t.rec_diag[m];
            const double nr = f * (x * dr - y * di), ni = f * (x * di + y * dr);
            dr = nr, di = ni;
        }
        double pr = 0, pi = 0, cr = dr, ci = di; /* R_{j-1}^m, R_j^m */
        for (int j = m; j <= p; j++) {
            if (j > m) {
                const double a = t.rec_a[IDX(j, m)] * z, b = j > m + 1 ? t.rec_b[IDX(j, m)] * r2 : 0.0;
                const double sr = a * cr - b * pr, si = a * ci - b * pi;
                pr = cr, pi = ci, cr = sr, ci = si;
            }
            const double *Lj = L + 2 * IDX(j, m);
            phi += (m ? 2.0 : 1.0) * (Lj[0] * cr - Lj[1] * ci);
            if (j == p)
                continue;
            const int n = j + 1;
            const double *Ln = L + 2 * IDX(n, 0);
            /* z: n Re(L_n^0 R_j^0), or 2 sqrt((n + m)(n - m)) Re(L_n^m R_j^m) */
            const double wz = m ? 2 * sq[n + m] * sq[n - m] : (double)n;
            gz += wz * (Ln[2 * m] * cr - Ln[2 * m + 1] * ci);
            const double w1 = sq[n + m + 1] * sq[n + m]; /* L_n^{m+1} R_j^m */
            const double *a = Ln + 2 * (m + 1);
            gr += w1 * (a[0] * cr - a[1] * ci);
            gi += w1 * (a[0] * ci + a[1] * cr);
            if (m > 0) { /* L_n^{m-1} R_j^m */
                const double w2 = sq[n - m + 1] * sq[n - m];
                a = Ln + 2 * (m - 1);
                gr -= w2 * (a[0] * cr - a[1] * ci);
                gi += w2 * (a[0] * ci + a[1] * cr);
            }
        }
    }
    *phi_out = phi, *gr_out = gr, *gi_out = gi, *gz_out = gz;
}

/* L2P's records: for each R_j^m, in the order in which l2p_rec makes them (column by column),
 * the recursion's factors and every coefficient that R_j^m meets, weights folded in:
 * (a, b): R_j^m = a z R_{j-1}^m - b r^2 R_{j-2}^m, or at j = m the diagonal's -rec_diag[m];
 * Lw = w_m L_j^m (w_0 = 1, else 2) for phi; Z = wz L_{j+1}^m for the gradient's z part;
 * P = w1 L_{j+1}^{m+1} - w2 L_{j+1}^{m-1} and Q = w1 L_{j+1}^{m+1} + w2 L_{j+1}^{m-1} for its
 * d/dx and -d/dy parts (the weights of l2p above; zero at j = p). 5 x 16 bytes per record. */
const int L2P_REC = 10;

/* the records of local expansion L (order p) into rec, by the block's threads */
__device__ void l2p_records(const tabs &t, int p, const double *__restrict__ L, double *rec)
{
    const double *sq = t.sqrt_int;
    const int nr = (p + 1) * (p + 2) / 2;
    for (int i = threadIdx.x; i < nr; i += blockDim.x) {
        /* record i: column m, degree j (columns of p + 1 - m entries) */
        int m = 0, j = i;
        while (j > p - m)
            j -= p + 1 - m, m++;
        j += m;
        double *o = rec + L2P_REC * i;
        o[0] = j == m ? (m ? -t.rec_diag[m] : 1.0) : t.rec_a[IDX(j, m)];
        o[1] = j > m + 1 ? t.rec_b[IDX(j, m)] : 0.0;
        const double w = m ? 2.0 : 1.0;
        o[2] = w * L[2 * IDX(j, m)], o[3] = w * L[2 * IDX(j, m) + 1];
        double zr = 0, zi = 0, pr = 0, pi = 0, qr = 0, qi = 0;
        if (j < p) {
            const int n = j + 1;
            const double *Ln = L + 2 * IDX(n, 0);
            const double wz = m ? 2 * sq[n + m] * sq[n - m] : (double)n;
            zr = wz * Ln[2 * m], zi = wz * Ln[2 * m + 1];
            const double w1 = sq[n + m + 1] * sq[n + m];
            const double ar = w1 * Ln[2 * (m + 1)], ai = w1 * Ln[2 * (m + 1) + 1];
            double br = 0, bi = 0;
            if (m > 0) {
                const double w2 = sq[n - m + 1] * sq[n - m];
                br = w2 * Ln[2 * (m - 1)], bi = w2 * Ln[2 * (m - 1) + 1];
            }
            pr = ar - br, pi = ai - bi, qr = ar + br, qi = ai + bi;
        }
        o[4] = zr, o[5] = zi, o[6] = pr, o[7] = pi, o[8] = qr, o[9] = qi;
    }
}

/* l2p at one point from the records: the same sums, each R_j^m read against one record (five
 * 16-byte shared loads, the same for every lane) instead of four coefficients and six table
 * entries */
__device__ void l2p_rec(int p, double x, double y, double z, const double *__restrict__ rec,
                        double *phi_out, double *gr_out, double *gi_out, double *gz_out)
{
    const double2 *R = (const double2 *)rec;
    const double r2 = x * x + y * y + z * z;
    double phi = 0, gr = 0, gi = 0, gz = 0;
    double dr = 1, di = 0; /* R_m^m */
    int i = 0;
    for (int m = 0; m <= p; m++) {
        double pr = 0, pi = 0, cr, ci; /* R_{j-1}^m, R_j^m */
        for (int j = m; j <= p; j++, i++) {
            const double2 ab = R[5 * i], l = R[5 * i + 1], zz = R[5 * i + 2], pp = R[5 * i + 3], qq = R[5 * i + 4];
            if (j == m) {
                if (m > 0) {
                    const double nr = ab.x * (x * dr - y * di), ni = ab.x * (x * di + y * dr);
                    dr = nr, di = ni;
                }
                cr = dr, ci = di;
            } else {
                const double a = ab.x * z, b = ab.y * r2;
                const double sr = a * cr - b * pr, si = a * ci - b * pi;
                pr = cr, pi = ci, cr = sr, ci = si;
            }
            phi += l.x * cr - l.y * ci;
            gz += zz.x * cr - zz.y * ci;
            gr += pp.x * cr - pp.y * ci;
            gi += qq.x * ci + qq.y * cr;
        }
    }
    *phi_out = phi, *gr_out = gr, *gi_out = gi, *gz_out = gz;
}

/* L2P (leaves below level 2) and M2P (W list) at the targets of leaf leaves[blockIdx.x]; writes
 * res (pot | grad, nt + 3 nt): the far field's results (P2P writes its own, and k_results adds
 * the two). fmm3d_ops.c's l2p and m2p, per target; recs: L2P from the leaf's records
 * (l2p_records, in shared memory), else from L in shared memory (l2p). */
template <int NH>
__global__ void __launch_bounds__(64) k_l2p_m2p(int p, int S, int nt, int recs, tabs tb,
                                                const int32_t *__restrict__ leaves,
                                                const int8_t *__restrict__ level,
                                                const real4d *__restrict__ cube,
                                                const int32_t *__restrict__ tbeg,
                                                const int32_t *__restrict__ tn,
                                                const int32_t *__restrict__ w_begin,
                                                const int32_t *__restrict__ w,
                                                const real4d *__restrict__ trg,
                                                const double *__restrict__ Mx,
                                                const double *__restrict__ Lx, double *res)
{
    const int b = leaves[blockIdx.x];
    const double *sq = tb.sqrt_int;
    double H[2 * NH];
    /* the leaf's local expansion in shared memory: each target reads every coefficient up to
     * four times */
    extern __shared__ double Ls[];
    if (level[b] >= 2) {
        if (recs)
            l2p_records(tb, p, Lx + (int64_t)b * S, Ls);
        else
            for (int i = threadIdx.x; i < S; i += blockDim.x)
                Ls[i] = Lx[(int64_t)b * S + i];
        __syncthreads();
    }
    for (int i = tbeg[b] + threadIdx.x; i < tbeg[b] + tn[b]; i += blockDim.x) {
        const real4d y = trg[i];
        double pot = 0, gx = 0, gy = 0, gz = 0;
        if (level[b] >= 2) {
            const real4d c = cube[b];
            const double inv_s = 1 / c.w;
            double phi, gr, gi, gzz;
            const double ux = (y.x - c.x) * inv_s, uy = (y.y - c.y) * inv_s, uz = (y.z - c.z) * inv_s;
            if (recs)
                l2p_rec(p, ux, uy, uz, Ls, &phi, &gr, &gi, &gzz);
            else
                l2p(tb, p, ux, uy, uz, Ls, &phi, &gr, &gi, &gzz);
            pot += phi;
            gx += -gr * inv_s, gy += gi * inv_s, gz += gzz * inv_s;
        }
        for (int e = w_begin[b]; e < w_begin[b + 1]; e++) {
            const int a = w[e];
            const real4d c = cube[a];
            const double inv_s = 1 / c.w;
            const double *M = Mx + (int64_t)a * S;
            irregular(tb, p + 1, (y.x - c.x) * inv_s, (y.y - c.y) * inv_s, (y.z - c.z) * inv_s, H);
            double phi = 0, gr = 0, gi = 0, gzz = 0;
            for (int nn = 0; nn <= p; nn++) {
                const double *Mn = M + 2 * IDX(nn, 0);
                const double *In = H + 2 * IDX(nn, 0);
                double t = Mn[0] * In[0] - Mn[1] * In[1];
                for (int m = 1; m <= nn; m++)
                    t += 2 * (Mn[2 * m] * In[2 * m] - Mn[2 * m + 1] * In[2 * m + 1]);
                phi += t;
                const double *J = H + 2 * IDX(nn + 1, 0);
                double z = (Mn[0] * J[0] - Mn[1] * J[1]) * (nn + 1);
                for (int m = 1; m <= nn; m++) {
                    const double ww = 2 * sq[nn + 1 + m] * sq[nn + 1 - m];
                    z += ww * (Mn[2 * m] * J[2 * m] - Mn[2 * m + 1] * J[2 * m + 1]);
                    const double w1 = sq[nn - m + 2] * sq[nn - m + 1];
                    const double *aa = Mn + 2 * m, *bb = J + 2 * (m - 1);
                    gr += w1 * (aa[0] * bb[0] - aa[1] * bb[1]);
                    gi += w1 * (aa[0] * bb[1] + aa[1] * bb[0]);
                }
                for (int k = 0; k <= nn; k++) {
                    const double w2 = sq[nn + k + 2] * sq[nn + k + 1];
                    const double *aa = Mn + 2 * k, *bb = J + 2 * (k + 1);
                    gr -= w2 * (aa[0] * bb[0] - aa[1] * bb[1]);
                    gi += w2 * (aa[0] * bb[1] + aa[1] * bb[0]);
                }
                gzz -= z;
            }
            const double g2 = inv_s * inv_s;
            pot += phi * inv_s;
            gx += -gr * g2, gy += gi * g2, gz += gzz * g2;
        }
        res[i] = pot;
        res[nt + 3 * i] = gx, res[nt + 3 * i + 1] = gy, res[nt + 3 * i + 2] = gz;
    }
}

/* 1/r of a P2P pair, 0 at r = 0: in fp64 the direct engine's masked MUFU seed and correction,
 * in fp32 MUFU.RSQ and a select. */
__device__ __forceinline__ double pair_rsqrt(double r2) { return rsqrt_masked(r2); }
__device__ __forceinline__ float pair_rsqrt(float r2) { return r2 > 0 ? rsqrt_plain(r2) : 0.0f; }
/* 1/r of a fp64 pair, 0 at r = 0, by the MUFU seed y and one Newton step, y (1 + e / 2) with
 * e = 1 - r2 y^2: relative error ~3 d^2 / 2 for the seed's d (below 1e-13, always low; the
 * correction above is exact to fp64's rounding). Three fp64 instructions instead of five: y / 2
 * is the seed with its exponent one lower, made on the integer pipe, and both are zeroed where
 * r2 == 0 (r2 >= 2^-104 otherwise: y normal, y / 2 exact). Used where eps >= 1e-11 (p2p). */
__device__ __forceinline__ double pair_rsqrt_newton(double r2)
{
    const double y = rsqrt_seed(r2);
    const bool nz = __double2hiint(r2) != 0;
    const int hi = __double2hiint(y), lo = __double2loint(y);
    const double y0 = __hiloint2double(nz ? hi : 0, lo), yh = __hiloint2double(nz ? hi - 0x100000 : 0, lo);
    return fma(yh, fma(-r2, y0 * y0, 1.0), y0);
}
/* 1/r of a pair: Newton's step where NEWTON (fp64 only) */
template <int NEWTON, typename R> __device__ __forceinline__ R pair_inv(R r2)
{
    return NEWTON ? (R)pair_rsqrt_newton((double)r2) : pair_rsqrt(r2);
}
/* The same for pairs that never have r2 == 0 (two different leaves, whose points never
 * coincide: coincident points share a key and so a leaf; padding kept apart, k_p2p_pairs), with
 * no masking: MUFU.RSQ64H, the seed's high word less 2^20 (y0 / 2) and three fp64 instructions,
 * or the third-order correction. */
__device__ __forceinline__ double pair_inv_distinct(int newton, double r2)
{
    if (!newton)
        return rsqrt_plain(r2);
    const double y0 = rsqrt_seed(r2);
    const double yh = __hiloint2double(__double2hiint(y0) - 0x100000, __double2loint(y0));
    return fma(yh, fma(-r2, y0 * y0, 1.0), y0);
}

/* One source's potential and gradient at a target (offsets y - s), added to the sums. */
template <int NEWTON, typename V, typename R>
__device__ __forceinline__ void p2p_add(const V s, R yx, R yy, R yz, R &tp, R &tx, R &ty, R &tz)
{
    const R dx = yx - s.x, dy = yy - s.y, dz = yz - s.z;
    const R inv = pair_inv<NEWTON>(dx * dx + dy * dy + dz * dz);
    const R qi = s.w * inv, qi3 = qi * inv * inv;
    tp += qi;
    tx -= dx * qi3, ty -= dy * qi3, tz -= dz * qi3;
}

/* P2P's scalings (all 1 in fp64): charges times q (a power of two bringing the largest |q|
 * into [1, 2)), and the sums times pot and grad (undoing that and the fp32 coordinates'
 * 2^23, exactly). */
struct p2p_scale {
    double q, pot, grad;
};

/* P2P: the targets of box leaves[blockIdx.x] from the sources of its list (U and the W entries
 * done directly, for leaves; the X entries done directly, for any box), staged in shared
 * memory, in precision R; blockIdx.y splits the targets in passes of BLOCK. With atomic 0 the
 * sums are written (the first pass over the leaves with targets: it initialises the near
 * field's results), else added atomically. Pairs at distance 0 contribute nothing. fp32 works on offsets from the
 * box's centre, rounded from fp64 (to 2^-24 of the offset, not of the frame: close pairs keep
 * their accuracy), times 2^23 (FMK_CUDA_LAPLACE32_SCALE), so that r^-3 of the closest distinct
 * offsets (2^-53 of the frame apart at least) stays finite; its sums run in fp32 over a staged
 * tile of BLOCK sources and in fp64 across tiles. (Two targets per thread, each staged source
 * serving both, measured slower in fp64 at 307-point leaves: 14.0 against 11.8 ms at 2^20.) */
template <typename R, int NEWTON>
__global__ void __launch_bounds__(BLOCK) k_p2p(int nt, int atomic, int skip_self, p2p_scale sc,
                                               const int32_t *__restrict__ leaves,
                                               const int32_t *__restrict__ tbeg,
                                               const int32_t *__restrict__ tn,
                                               const int32_t *__restrict__ sb,
                                               const int32_t *__restrict__ sn,
                                               const int32_t *__restrict__ u_begin,
                                               const int32_t *__restrict__ u,
                                               const real4d *__restrict__ cube,
                                               const real4d *__restrict__ src,
                                               const real4d *__restrict__ trg, double *res)
{
    typedef typename vec4<R>::type V;
    __shared__ V tile[BLOCK];
    const int b = leaves[blockIdx.x];
    const int i0 = tbeg[b], i1 = i0 + tn[b];
    const bool f32 = sizeof(R) == 4;
    const real4d c = f32 ? cube[b] : real4d{0, 0, 0, 0};
    const double cs = f32 ? FMK_CUDA_LAPLACE32_SCALE : 1.0;
    for (int base = i0 + blockIdx.y * BLOCK; base < i1; base += gridDim.y * BLOCK) {
        /* a pass of few targets takes T threads a target (a power of two up to 32: lanes of one
         * warp), each every T-th source of a tile, their sums added by shuffles at the end: a
         * lone point's rest row of tens of thousands of sources was one thread's work */
        const int m = i1 - base < BLOCK ? i1 - base : BLOCK;
        int T = 1;
        while (T < 32 && 2 * T * m <= BLOCK)
            T *= 2;
        const int sub = threadIdx.x & (T - 1);
        const int i = base + threadIdx.x / T;
        const real4d yd = i < i1 ? trg[i] : c;
        const R yx = (R)((yd.x - c.x) * cs), yy = (R)((yd.y - c.y) * cs), yz = (R)((yd.z - c.z) * cs);
        double p = 0, gx = 0, gy = 0, gz = 0;
        for (int e = u_begin[b]; e < u_begin[b + 1]; e++) {
            const int a = u[e];
            if (a == b && skip_self) /* the leaf's own pairs: k_p2p_pairs, each once */
                continue;
            const int j0 = sb[a], j1 = j0 + sn[a];
            for (int jb = j0; jb < j1; jb += BLOCK) {
                __syncthreads();
                if (jb + threadIdx.x < j1) {
                    const real4d s = src[jb + threadIdx.x];
                    tile[threadIdx.x] = V{(R)((s.x - c.x) * cs), (R)((s.y - c.y) * cs),
                                          (R)((s.z - c.z) * cs), (R)(s.w * sc.q)};
                }
                __syncthreads();
                const int cnt = j1 - jb < BLOCK ? j1 - jb : BLOCK;
                R tp = 0, tx = 0, ty = 0, tz = 0;
                if (T == 1) {
#pragma unroll 4
                    for (int j = 0; j < cnt; j++)
                        p2p_add<NEWTON>(tile[j], yx, yy, yz, tp, tx, ty, tz);
                } else {
                    for (int j = sub; j < cnt; j += T)
                        p2p_add<NEWTON>(tile[j], yx, yy, yz, tp, tx, ty, tz);
                }
                p += tp, gx += tx, gy += ty, gz += tz;
            }
        }
        for (int o = T / 2; o > 0; o /= 2) { /* the T lanes of a target, one warp */
            p += __shfl_xor_sync(0xffffffffu, p, o), gx += __shfl_xor_sync(0xffffffffu, gx, o);
            gy += __shfl_xor_sync(0xffffffffu, gy, o), gz += __shfl_xor_sync(0xffffffffu, gz, o);
        }
        p *= sc.pot, gx *= sc.grad, gy *= sc.grad, gz *= sc.grad;
        if (sub != 0)
            continue;
        if (i < i1 && atomic) { /* boxes of one launch may nest */
            atomicAdd(res + i, p);
            atomicAdd(res + nt + 3 * i, gx), atomicAdd(res + nt + 3 * i + 1, gy);
            atomicAdd(res + nt + 3 * i + 2, gz);
        } else if (i < i1) { /* the near field's first pass: every target once */
            res[i] = p;
            res[nt + 3 * i] = gx, res[nt + 3 * i + 1] = gy, res[nt + 3 * i + 2] = gz;
        }
    }
}

/* P2P of leaf pairs (b, a) (sources = targets, fp64): each pair of points evaluated once and
 * added to both. A block takes up to `run` consecutive pairs (pairs[2 e], pairs[2 e + 1]; the
 * pairs of one b are consecutive) and, for each run of them with the same b, holds b's points in
 * registers while the points of the run's a leaves stream past as one sequence (chunks of 32
 * may span two a leaves: padding only at the run's end, and b's sums added once per run, not per
 * pair). A warp holds 32 RT points of b (RT per lane, their sums in registers) and takes the
 * stream's points 32 at a time, one per lane; in 32 steps each lane meets every one of the 32
 * (the a point, its charge and its four sums move one lane down per step, by shuffles), so each
 * a point's sums come back to its lane summed over the warp's b points. In a full pass the four
 * warps hold different b points and take the same chunks: their a sums are added in shared
 * memory in warp order (two buffers, one barrier per chunk), then to the results atomically, as
 * are the b points' sums at the end (other pairs add to the same points: the order of those adds
 * is not fixed). The last pass, when at most 32 of b's points remain (tail 2), gives all four
 * warps the same points and each warp a quarter of the chunks (a sums added atomically by each
 * warp, b sums added across the warps in shared memory): no warp idles through it; tail 1 runs
 * it as a full pass of one point per lane, tail 0 as a full pass of RT. */
const int P2P_RUN_MAX = 16;

/* The lane's point of the stream (chunk jc), or -1: its a leaf and place there. */
__device__ __forceinline__ int stream_point(int jc, int nj, int r0, int r1, const int32_t *s_j0,
                                            const int32_t *s_n)
{
    const int lane = threadIdx.x & 31;
    if (jc + lane >= nj)
        return -1;
    int off = jc + lane, e = r0;
    while (e < r1 - 1 && off >= s_n[e])
        off -= s_n[e], e++;
    return s_j0[e] + off;
}

/* The ring's variants (fmk_cuda_fmm3d_p2p_ring; docs/fmm3d_gpu.md, section 3): RA a points per
 * lane moving round the ring at once (RA x RT pairs per step), PIPE: the next step's a
 * coordinates shuffled at the step's start (their latency behind the step's pairs; the sums move
 * at its end), MASK: 1/r masked at r = 0 (else pair_inv_distinct), MINB: blocks per
 * multiprocessor asked of ptxas (__launch_bounds__). */
struct ring_cfg {
    int ra, pipe, mask, minb;
};
__host__ __device__ constexpr ring_cfg ring_of(int v)
{
    return v == 0   ? ring_cfg{1, 0, 1, 0}
           : v == 1 ? ring_cfg{1, 0, 0, 0}
           : v == 2 ? ring_cfg{1, 1, 0, 4}
           : v == 3 ? ring_cfg{1, 0, 0, 1}
           : v == 4 ? ring_cfg{2, 0, 0, 2}
           : v == 5 ? ring_cfg{2, 1, 0, 3}
           : v == 6 ? ring_cfg{1, 1, 0, 3}
           : v == 7 ? ring_cfg{1, 0, 0, 3}  /* 7 .. 10: 3, 5 or 6 points per lane (not knob values) */
           : v == 8 ? ring_cfg{1, 0, 0, 2}
           : v == 9 ? ring_cfg{1, 0, 0, 4}
                    : ring_cfg{1, 0, 0, 5};
}
const int P2P_RINGS = 7;

/* One pair (i, j) both ways: i's sums (pi .. gzi) from j, j's (pj .. gzj) from i; the same 1/r
 * and 1/r^3 serve both. */
template <int NEWTON, int MASK>
__device__ __forceinline__ void pair_both(double xi, double yi, double zi, double qi, double &pi, double &gxi,
                                          double &gyi, double &gzi, double xj, double yj, double zj, double qj,
                                          double &pj, double &gxj, double &gyj, double &gzj)
{
    const double dx = xi - xj, dy = yi - yj, dz = zi - zj;
    const double r2 = dx * dx + dy * dy + dz * dz;
    const double inv = MASK ? pair_inv<NEWTON>(r2) : pair_inv_distinct(NEWTON, r2);
    const double inv3 = inv * inv * inv;
    pi = fma(qj, inv, pi), pj = fma(qi, inv, pj);
    const double fj = qj * inv3, fi = qi * inv3;
    gxi = fma(-fj, dx, gxi), gyi = fma(-fj, dy, gyi), gzi = fma(-fj, dz, gzi);
    gxj = fma(fi, dx, gxj), gyj = fma(fi, dy, gyj), gzj = fma(fi, dz, gzj);
}

/* 32 steps of a warp: its RT points of b (xi .. gzi) against the 32 RA a points of the lanes
 * (xj .. gzj, RA per lane, moving one lane down per step), each pair once, both ways; UNR steps
 * unrolled. */
template <int RT, int RA, int UNR, int NEWTON, int MASK, int PIPE>
__device__ __forceinline__ void pairs_steps(const double *xi, const double *yi, const double *zi,
                                            const double *qi, double *pi, double *gxi, double *gyi,
                                            double *gzi, double *xj, double *yj, double *zj, double *qj,
                                            double *pj, double *gxj, double *gyj, double *gzj)
{
    const int next = ((threadIdx.x & 31) + 1) & 31;
#pragma unroll UNR
    for (int k = 0; k < 32; k++) {
        double nx[RA], ny[RA], nz[RA], nq[RA];
        if (PIPE)
#pragma unroll
            for (int u = 0; u < RA; u++) {
                nx[u] = __shfl_sync(0xffffffffu, xj[u], next), ny[u] = __shfl_sync(0xffffffffu, yj[u], next);
                nz[u] = __shfl_sync(0xffffffffu, zj[u], next), nq[u] = __shfl_sync(0xffffffffu, qj[u], next);
            }
#pragma unroll
        for (int r = 0; r < RT; r++)
#pragma unroll
            for (int u = 0; u < RA; u++)
                pair_both<NEWTON, MASK>(xi[r], yi[r], zi[r], qi[r], pi[r], gxi[r], gyi[r], gzi[r], xj[u], yj[u],
                                        zj[u], qj[u], pj[u], gxj[u], gyj[u], gzj[u]);
#pragma unroll
        for (int u = 0; u < RA; u++) {
            if (PIPE) {
                xj[u] = nx[u], yj[u] = ny[u], zj[u] = nz[u], qj[u] = nq[u];
            } else {
                xj[u] = __shfl_sync(0xffffffffu, xj[u], next), yj[u] = __shfl_sync(0xffffffffu, yj[u], next);
                zj[u] = __shfl_sync(0xffffffffu, zj[u], next), qj[u] = __shfl_sync(0xffffffffu, qj[u], next);
            }
            pj[u] = __shfl_sync(0xffffffffu, pj[u], next), gxj[u] = __shfl_sync(0xffffffffu, gxj[u], next);
            gyj[u] = __shfl_sync(0xffffffffu, gyj[u], next), gzj[u] = __shfl_sync(0xffffffffu, gzj[u], next);
        }
    }
}

/* One pass over b's points [ib, ...) by G groups of the block's warps: the warps of a group
 * hold different b points (32 RT each: a pass covers 32 RT NW / G of them), the groups hold the
 * same ones and take every G-th chunk of the stream (a chunk: 32 RA points, RA per lane). G 1:
 * every warp every chunk (the a sums of a chunk added over the warps in shared memory, in warp
 * order: two buffers, one barrier per chunk); G = NW (a group is a warp): the last pass, when at
 * most 32 of b's points remain (a sums added atomically by each warp); G 2 at RT 4: 256 points a
 * pass, the leaf size of a 2^20 cube, with half the shuffles per pair of RT 2. With G > 1 each
 * group adds its b sums atomically. Padding: charge 0, b's at the origin and a's at (-1, -1, -1)
 * (the points lie in [1, 2]^3), so that no pair but a real coincident one has r = 0. */
template <int RT, int RA, int G, int UNR, int NEWTON, int MASK, int PIPE>
__device__ __forceinline__ void pairs_pass(int nt, int ib, int i0, int ni, int nj, int r0, int r1,
                                           const int32_t *s_j0, const int32_t *s_n,
                                           const real4d *__restrict__ pts, double *res,
                                           double (*red)[4][BLOCK / 32][32])
{
    const int NW = BLOCK / 32, WG = NW / G; /* warps per group */
    static_assert(NW % G == 0, "groups of whole warps");
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, grp = G == 1 ? 0 : warp / WG;
    const int mine = ib + (G == 1 ? warp : warp % WG) * 32 * RT; /* the warp's first b point */
    double xi[RT], yi[RT], zi[RT], qi[RT], pi[RT], gxi[RT], gyi[RT], gzi[RT];
#pragma unroll
    for (int r = 0; r < RT; r++) {
        const int ii = mine + 32 * r + lane;
        const real4d t = ii < ni ? pts[i0 + ii] : real4d{0, 0, 0, 0};
        xi[r] = t.x, yi[r] = t.y, zi[r] = t.z, qi[r] = t.w;
        pi[r] = gxi[r] = gyi[r] = gzi[r] = 0;
    }
    int buf = 0;
    for (int jc0 = 0; jc0 < nj; jc0 += G * 32 * RA, buf ^= 1) {
        const int jc = jc0 + grp * 32 * RA; /* the group's chunk */
        int j[RA];
        double xj[RA], yj[RA], zj[RA], qj[RA], pj[RA], gxj[RA], gyj[RA], gzj[RA];
#pragma unroll
        for (int u = 0; u < RA; u++) {
            j[u] = stream_point(jc + 32 * u, nj, r0, r1, s_j0, s_n);
            const real4d t = j[u] >= 0 ? pts[j[u]] : real4d{-1, -1, -1, 0};
            xj[u] = t.x, yj[u] = t.y, zj[u] = t.z, qj[u] = t.w, pj[u] = gxj[u] = gyj[u] = gzj[u] = 0;
        }
        if (mine < ni && jc < nj)
            pairs_steps<RT, RA, UNR, NEWTON, MASK, PIPE>(xi, yi, zi, qi, pi, gxi, gyi, gzi, xj, yj, zj, qj, pj,
                                                         gxj, gyj, gzj);
        if (WG == 1) { /* a group is a warp: its chunk's sums are complete */
#pragma unroll
            for (int u = 0; u < RA; u++)
                if (j[u] >= 0) {
                    atomicAdd(res + j[u], pj[u]);
                    atomicAdd(res + nt + 3 * j[u], gxj[u]), atomicAdd(res + nt + 3 * j[u] + 1, gyj[u]);
                    atomicAdd(res + nt + 3 * j[u] + 2, gzj[u]);
                }
        } else {
            /* the buffers written here were last read two chunks ago, before the last barrier */
#pragma unroll
            for (int u = 0; u < RA; u++) {
                red[buf * RA + u][0][warp][lane] = pj[u], red[buf * RA + u][1][warp][lane] = gxj[u];
                red[buf * RA + u][2][warp][lane] = gyj[u], red[buf * RA + u][3][warp][lane] = gzj[u];
            }
            __syncthreads();
            /* thread (sum c, lane), per group: its warps' sums of a point, in warp order */
            const int c = warp;
#pragma unroll
            for (int g = 0; g < G; g++)
#pragma unroll
                for (int u = 0; u < RA; u++) {
                    const int jg = g == grp ? j[u] : stream_point(jc0 + (g * RA + u) * 32, nj, r0, r1, s_j0, s_n);
                    double v = 0;
#pragma unroll
                    for (int w = 0; w < WG; w++)
                        v += red[buf * RA + u][c][g * WG + w][lane];
                    if (jg >= 0)
                        atomicAdd(res + (c == 0 ? jg : nt + 3 * jg + c - 1), v);
                }
        }
    }
    if (WG > 1)
        __syncthreads(); /* the reads of both buffers are done before the next pass writes them */
#pragma unroll
    for (int r = 0; r < RT; r++) {
        const int ii = mine + 32 * r + lane;
        if (ii < ni) {
            const int i = i0 + ii;
            atomicAdd(res + i, pi[r]);
            atomicAdd(res + nt + 3 * i, gxi[r]), atomicAdd(res + nt + 3 * i + 1, gyi[r]);
            atomicAdd(res + nt + 3 * i + 2, gzi[r]);
        }
    }
}

/* The pairs within leaf b (points i0 .. i0 + ni - 1; sources = targets), each unordered pair once
 * (k_p2p then skips the leaf in its rest row): the leaf's tiles of 32 points, tile pairs (s, t),
 * s <= t, by warps, a lane per point of s, t's points moving round the ring; s < t: 32 steps;
 * s = t: the offsets 1 .. 16 (pairs (l, l + k) once; at 16 the lanes below 16 only), after which
 * lane l holds the point l + 16. A warp holds the rows s and m - 1 - s (m + 1 tile pairs
 * together, the same for every warp at m = 8, a 2^20 cube's 256-point leaves), s's sums in
 * registers across its row, t's added atomically per tile pair. 1/r masked: points of one leaf
 * may coincide. */
template <int UNR, int NEWTON>
__device__ __forceinline__ void self_pairs(int nt, int i0, int ni, const real4d *__restrict__ pts, double *res)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, m = (ni + 31) / 32;
    const int next = (lane + 1) & 31;
    for (int pos = 2 * warp; pos < m; pos += 2 * (BLOCK / 32))
        for (int h = 0; h < 2 && pos + h < m; h++) {
            const int s = h ? m - 1 - pos / 2 : pos / 2; /* rows 0, m - 1, 1, m - 2, ... by pairs */
            const int ii = 32 * s + lane;
            const real4d ti = ii < ni ? pts[i0 + ii] : real4d{0, 0, 0, 0};
            double xi = ti.x, yi = ti.y, zi = ti.z, qi = ti.w, pi = 0, gxi = 0, gyi = 0, gzi = 0;
            for (int t = s; t < m; t++) {
                const int jj = 32 * t + lane;
                const real4d tj = jj < ni ? pts[i0 + jj] : real4d{-1, -1, -1, 0};
                double xj = tj.x, yj = tj.y, zj = tj.z, qj = tj.w, pj = 0, gxj = 0, gyj = 0, gzj = 0;
                int jl = jj; /* the point whose sums this lane holds at the end */
                if (t > s) {
                    pairs_steps<1, 1, UNR, NEWTON, 1, 0>(&xi, &yi, &zi, &qi, &pi, &gxi, &gyi, &gzi, &xj, &yj, &zj,
                                                         &qj, &pj, &gxj, &gyj, &gzj);
                } else {
                    xj = __shfl_sync(0xffffffffu, xj, next), yj = __shfl_sync(0xffffffffu, yj, next);
                    zj = __shfl_sync(0xffffffffu, zj, next), qj = __shfl_sync(0xffffffffu, qj, next);
                    for (int k = 1; k < 16; k++) {
                        pair_both<NEWTON, 1>(xi, yi, zi, qi, pi, gxi, gyi, gzi, xj, yj, zj, qj, pj, gxj, gyj, gzj);
                        xj = __shfl_sync(0xffffffffu, xj, next), yj = __shfl_sync(0xffffffffu, yj, next);
                        zj = __shfl_sync(0xffffffffu, zj, next), qj = __shfl_sync(0xffffffffu, qj, next);
                        pj = __shfl_sync(0xffffffffu, pj, next), gxj = __shfl_sync(0xffffffffu, gxj, next);
                        gyj = __shfl_sync(0xffffffffu, gyj, next), gzj = __shfl_sync(0xffffffffu, gzj, next);
                    }
                    const double w = lane < 16 ? 1.0 : 0.0; /* offset 16: each pair twice, once kept */
                    pair_both<NEWTON, 1>(xi, yi, zi, qi * w, pi, gxi, gyi, gzi, xj, yj, zj, qj * w, pj, gxj, gyj, gzj);
                    jl = 32 * t + ((lane + 16) & 31);
                }
                if (jl < ni) {
                    const int j = i0 + jl;
                    atomicAdd(res + j, pj);
                    atomicAdd(res + nt + 3 * j, gxj), atomicAdd(res + nt + 3 * j + 1, gyj);
                    atomicAdd(res + nt + 3 * j + 2, gzj);
                }
            }
            if (ii < ni) {
                const int i = i0 + ii;
                atomicAdd(res + i, pi);
                atomicAdd(res + nt + 3 * i, gxi), atomicAdd(res + nt + 3 * i + 1, gyi);
                atomicAdd(res + nt + 3 * i + 2, gzi);
            }
        }
}

/* P2P of leaf pairs: blocks below pair_blocks take runs of pairs (above), the others a leaf's own
 * pairs each (self_pairs; leaves[blockIdx.x - pair_blocks]). */
template <int RT, int UNR, int NEWTON, int V>
__global__ void __launch_bounds__(BLOCK, ring_of(V).minb)
    k_p2p_pairs(int nt, int64_t n_pairs, int run, int tail, int groups, unsigned pair_blocks,
                const int32_t *__restrict__ leaves,
                const int32_t *__restrict__ pairs, const int32_t *__restrict__ sb, const int32_t *__restrict__ sn,
                const real4d *__restrict__ pts, double *res)
{
    static_assert(BLOCK == 128, "four warps, and a thread per (sum, lane) in the reduction");
    constexpr ring_cfg C = ring_of(V);
    if (blockIdx.x >= pair_blocks) {
        const int b = leaves[blockIdx.x - pair_blocks];
        self_pairs<UNR, NEWTON>(nt, sb[b], sn[b], pts, res);
        return;
    }
    __shared__ double red[2 * C.ra][4][BLOCK / 32][32];
    __shared__ int32_t s_b[P2P_RUN_MAX], s_j0[P2P_RUN_MAX], s_n[P2P_RUN_MAX];
    const int64_t e0 = (int64_t)blockIdx.x * run;
    const int ne = (int)(n_pairs - e0 < run ? n_pairs - e0 : run);
    if ((int)threadIdx.x < ne) {
        const int a = pairs[2 * (e0 + threadIdx.x) + 1];
        s_b[threadIdx.x] = pairs[2 * (e0 + threadIdx.x)], s_j0[threadIdx.x] = sb[a], s_n[threadIdx.x] = sn[a];
    }
    __syncthreads();
    for (int r0 = 0, r1; r0 < ne; r0 = r1) {
        const int b = s_b[r0];
        int nj = 0;
        for (r1 = r0; r1 < ne && s_b[r1] == b; r1++)
            nj += s_n[r1];
        const int i0 = sb[b], ni = sn[b];
        for (int ib = 0; ib < ni;) {
            const int left = ni - ib;
            if (tail == 2 && left <= 32) {
                pairs_pass<1, 1, BLOCK / 32, UNR, NEWTON, C.mask, 0>(nt, ib, i0, ni, nj, r0, r1, s_j0, s_n, pts,
                                                                     res, red);
                ib += 32;
            } else if (RT >= 5 || (RT == 4 && groups == 4)) { /* every warp the same 32 RT points */
                pairs_pass<RT, 1, BLOCK / 32, UNR, NEWTON, C.mask, 0>(nt, ib, i0, ni, nj, r0, r1, s_j0, s_n, pts,
                                                                      res, red);
                ib += 32 * RT;
            } else if (RT == 1 || (tail && left <= BLOCK)) {
                pairs_pass<1, 1, 1, UNR, NEWTON, C.mask, 0>(nt, ib, i0, ni, nj, r0, r1, s_j0, s_n, pts, res, red);
                ib += BLOCK;
            } else if (RT == 3) { /* two groups of two warps: 192 points a pass */
                pairs_pass<RT, 1, 2, UNR, NEWTON, C.mask, 0>(nt, ib, i0, ni, nj, r0, r1, s_j0, s_n, pts, res, red);
                ib += BLOCK * RT / 2;
            } else if (RT == 4) { /* two groups of two warps: 256 points a pass */
                pairs_pass<RT, C.ra, 2, UNR, NEWTON, C.mask, C.pipe>(nt, ib, i0, ni, nj, r0, r1, s_j0, s_n, pts,
                                                                     res, red);
                ib += BLOCK * RT / 2;
            } else {
                pairs_pass<RT, 1, 1, UNR, NEWTON, C.mask, 0>(nt, ib, i0, ni, nj, r0, r1, s_j0, s_n, pts, res, red);
                ib += BLOCK * RT;
            }
        }
    }
}

/* Charges in key order into the sources' 4th component. */
__global__ void k_charges(int n, const int32_t *__restrict__ order, const double *__restrict__ q,
                          real4d *src)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        src[i].w = q[order[i]];
}

/* Results (key order, frame units: the far field's res plus the near field's near) to the
 * caller's order and units. */
__global__ void k_results(int nt, const int32_t *__restrict__ order, const double *__restrict__ res,
                          const double *__restrict__ near, double ps, double *pot, double *grad)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nt; i += gridDim.x * blockDim.x) {
        const int c = order[i];
        if (pot)
            pot[c] = (res[i] + near[i]) * ps;
        if (grad) /* scaled twice by 1/width: 1/width^2 may overflow */
            for (int d = 0; d < 3; d++)
                grad[3 * c + d] = (res[nt + 3 * i + d] + near[nt + 3 * i + d]) * ps * ps;
    }
}

/* ---------------------------------------------------------------------------------------------
 * The translation matrices, one 2 x 2 real block (an output coefficient's real and imaginary
 * parts against an input's) per thread. H holds each translation vector's harmonics (I for
 * M2L, R for M2M and L2L) up to degree hdeg; sqb[a * nb + b] = sqrt(C(a, b)).
 * ------------------------------------------------------------------------------------------ */

__device__ inline void harm(const double *H, int n, int m, double *re, double *im)
{
    const int am = m < 0 ? -m : m;
    double r = H[2 * IDX(n, am)], i = H[2 * IDX(n, am) + 1];
    if (m < 0) { /* X_n^-m = (-1)^m conj(X_n^m) */
        const double sg = (am & 1) ? -1.0 : 1.0;
        r *= sg, i = -i * sg;
    }
    *re = r, *im = i;
}

/* kind 0: M2L, 1: M2M, 2: L2L. The weight c of input coefficient (J, L) (L signed) in output
 * (N, Mo), so that out_{N,Mo} += c In_J^L (fmm3d_ops.c's references with unit sides). */
__device__ void weight(int kind, const double *H, const double *sqb, int nb, int N, int Mo, int J,
                       int L, double *cr, double *ci)
{
    *cr = 0, *ci = 0;
    double hr, hi, w;
    if (kind == 0) { /* L_N^Mo += (-1)^(N+Mo) F(n,i)/(F(N,Mo) F(J,L)) I_{N+J}^{L-Mo}(D) M_J^L */
        harm(H, N + J, L - Mo, &hr, &hi);
        w = sqb[(J + L + N - Mo) * nb + (N - Mo)] * sqb[(J - L + N + Mo) * nb + (N + Mo)];
        if ((N + Mo) & 1)
            w = -w;
    } else if (kind == 1) { /* M_N^Mo += 2^-J F/(FF) conj(R_k^l(t)) M_J^L, k = N - J, l = Mo - L */
        const int k = N - J, l = Mo - L;
        if (k < 0 || l > k || l < -k)
            return;
        harm(H, k, l, &hr, &hi);
        hi = -hi;
        w = ldexp(1.0, -J) * sqb[(N + Mo) * nb + (k + l)] * sqb[(N - Mo) * nb + (k - l)];
    } else { /* L_N^Mo += 2^-N F/(FF) R_j^i(t) L_J^L, j = J - N, i = L - Mo */
        const int j = J - N, i = L - Mo;
        if (j < 0 || i > j || i < -j)
            return;
        harm(H, j, i, &hr, &hi);
        w = ldexp(1.0, -N) * sqb[(J + L) * nb + (N + Mo)] * sqb[(J - L) * nb + (N - Mo)];
    }
    *cr = w * hr, *ci = w * hi;
}

/* kind 0 (M2L) in the packed layout (k_m2l_columns), matrix mat (a direction in the M2L order)
 * to degree deg[mat] at rows roff[mat] .. of T, the output's packed doubles as rows, the input's
 * as columns, column-major with leading dimension ld; kinds 1 and 2 (M2M, L2L) on the full
 * (p + 1)(p + 2) doubles, matrix mat at T + mat * mat_stride (roff, deg NULL). */
__global__ void k_build(int kind, int p, int n_mat, int hdeg, const double *__restrict__ H,
                        const double *__restrict__ sqb, int nb, int64_t mat_stride, int64_t ld,
                        const int32_t *__restrict__ roff, const int32_t *__restrict__ deg, double *T)
{
    const int nc = (p + 1) * (p + 2) / 2;
    const int64_t total = (int64_t)n_mat * nc * nc;
    for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < total;
         g += (int64_t)gridDim.x * blockDim.x) {
        const int mat = (int)(g / ((int64_t)nc * nc));
        const int rem = (int)(g - (int64_t)mat * nc * nc);
        const int out = rem % nc, in = rem / nc;
        int N = 0, J = 0;
        while ((N + 1) * (N + 2) / 2 <= out)
            N++;
        while ((J + 1) * (J + 2) / 2 <= in)
            J++;
        const int Mo = out - IDX(N, 0), Li = in - IDX(J, 0);
        if (deg && (N > deg[mat] || J > deg[mat]))
            continue;
        const double *Hm = H + (int64_t)mat * (hdeg + 1) * (hdeg + 2);
        double c1r, c1i, c2r = 0, c2i = 0;
        weight(kind, Hm, sqb, nb, N, Mo, J, Li, &c1r, &c1i);
        if (Li > 0) { /* the input's -Li coefficient is (-1)^Li conj of the stored one */
            weight(kind, Hm, sqb, nb, N, Mo, J, -Li, &c2r, &c2i);
            if (Li & 1)
                c2r = -c2r, c2i = -c2i;
        }
        if (deg) { /* packed: no imaginary part at m = 0 */
            double *Tm = T + roff[mat];
            const int64_t ir = J * J + (Li ? 2 * Li - 1 : 0), orr = N * N + (Mo ? 2 * Mo - 1 : 0);
            Tm[ir * ld + orr] = c1r + c2r;
            if (Li)
                Tm[(ir + 1) * ld + orr] = c2i - c1i;
            if (Mo)
                Tm[ir * ld + orr + 1] = c1i + c2i;
            if (Li && Mo)
                Tm[(ir + 1) * ld + orr + 1] = c1r - c2r;
            continue;
        }
        double *Tm = T + (int64_t)mat * mat_stride; /* column-major, leading dimension ld */
        const int64_t ir = 2 * in, ii = 2 * in + 1, orr = 2 * out, oi = 2 * out + 1;
        Tm[ir * ld + orr] = c1r + c2r;  /* d out_re / d in_re */
        Tm[ii * ld + orr] = c2i - c1i;  /* d out_re / d in_im */
        Tm[ir * ld + oi] = c1i + c2i;   /* d out_im / d in_re */
        Tm[ii * ld + oi] = c1r - c2r;   /* d out_im / d in_im */
    }
}

/* The translation harmonics of the operators (ops_layout): thread i < n_h the irregular
 * harmonics to degree 2p of the M2L vector vec[i], then 8 M2M vectors (child - parent centre)
 * and 8 L2L vectors, in parent sides, regular to degree p (fmm3d_ops.c's, made here from its
 * tables). */
__global__ void k_harmonics(int p, int n_h, tabs t, const double *__restrict__ vec, double *H)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t hs_m2l = (int64_t)(2 * p + 1) * (2 * p + 2), hs_p = (int64_t)(p + 1) * (p + 2);
    if (i < n_h) {
        irregular(t, 2 * p, vec[3 * i], vec[3 * i + 1], vec[3 * i + 2], H + hs_m2l * i);
    } else if (i < n_h + 16) {
        const int o = (i - n_h) & 7;
        regular(t, p, (o & 4) ? 0.25 : -0.25, (o & 2) ? 0.25 : -0.25, (o & 1) ? 0.25 : -0.25,
                H + hs_m2l * n_h + hs_p * (i - n_h));
    }
}

/* ---------------------------------------------------------------------------------------------
 * State
 * ------------------------------------------------------------------------------------------ */

/* eval's events: the far field's chain (and the results) on stream 0 of the plan, START ..
 * END in that order; the near field on stream 1 between NEAR (after FORK, the charges in key
 * order) and P2P; JOIN on stream 0 once both are done. */
enum { EV_START, EV_P2M, EV_M2M, EV_M2L, EV_L2L, EV_L2P, EV_JOIN, EV_END, EV_FORK, EV_NEAR, EV_P2P,
       EV_OPS0, EV_OPS1, EV_OPS, N_EV }; /* OPS0 .. OPS1: the M2L matrices' kernel on stream 2
                                           * (set_points); OPS: the end of stream 2's operators */

struct fmm_gpu {
    int device, order, S;
    int Sp, Sx;                        /* the M2L's packed doubles per expansion, (p + 1)^2, and
                                        * that rounded up to 8 (m2l_pad: the GEMMs' strides) */
    int sms;                           /* the device's multiprocessors */
    int fp32;                          /* P2P in fp32 (precision fp32) */
    int newton_ok;                     /* fp64 P2P may take 1/r by a Newton step (eps >= 1e-11) */
    int32_t leaf_size;
    double root_side;                  /* the root cube's side over the points' (>= 1) */
    double fit_mean;                   /* the fitted tree's points per leaf (0: not fitted) */
    int uniform;                       /* the points' first tree was complete (uniform points) */
    int64_t near_max;                  /* W and X entries done as P2P: up to this many points */
    m2l_cfg cfg;
    int64_t n_nodes;
    int levels;
    int64_t gemm_first;                /* first node of level 2: M2L's GEMMs start there */
    int m2l_batch;                     /* X holds Sx x (nodes from level 2 down) x this many doubles */
    /* the dense M2L's degree per direction (FMK_FMM3D_DIR: p, or less with
     * fmk_cuda_fmm3d_m2l_trunc), the M2L order of those (rank, dir_of_rank), and per rank the
     * first row of its matrix in the stacked ones ((deg + 1)^2 rows rounded up to 8: m2l_pad;
     * m2l_roff[M2L_DIRS]: their rows, the leading dimension) */
    int8_t m2l_deg[FMK_FMM3D_NDIR];
    int16_t rank[FMK_FMM3D_NDIR], dir_of_rank[512];
    int32_t m2l_roff[M2L_DIRS + 1];
    /* the plan's truncation (fmk_cuda_fmm3d_m2l_trunc where it applies, else 0), degree classes
     * and size rule (fmk_cuda_fmm3d_m2l_classes, _trunc_min), read when the state is made; the
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
        int64_t xrow;                  /* its slot -> (row, size) table in d_xrow */
    } *m2l_parts;
    int n_m2l_gemms, n_m2l_parts;
    int64_t m2l_products;              /* box-direction products the GEMMs compute */
    double m2l_flops;                  /* the GEMMs' flops */
    /* a fresh plan's one allocation (cap_block bytes; state_block): the points, the bounding-box
     * workspace, the operators, the tree's and the list builder's arenas, the dense M2L matrices
     * and eval's buffers, at the sizes the node estimate gives; a buffer that outgrows its place
     * is allocated apart (in_block) */
    void *d_block;
    size_t cap_block;
    double *d_pts;                     /* the mapped points of the last set_points (cap_pts bytes) */
    void *d_box;                       /* set_points_device's bounding-box workspace (cap_box bytes) */
    size_t cap_pts, cap_box;
    cublasHandle_t blas;
    int has_blas;
    int fresh;                         /* made by this set_points (setup_time[0] is its start) */
    int ops_pending;                   /* stream 2's operators (EV_OPS) not yet waited for by eval */
    double tree_time;
    double setup_time[6];              /* seconds: start (events, cuBLAS), tree, lists, operators, buffers;
                                        * the M2L matrices' kernel (GPU time) */
    fmk_cuda_fmm3d_geo g;              /* points, boxes, lists, tiles (fmm3d_lists.cu) */
    fmk_cuda_tree tree;                /* the octree, kept with its workspace for the next points */
    int rot_slots;                     /* the directions the rotation tables are built for */
    int32_t rot_dir[FMK_FMM3D_NDIR];
    int use_rot;                       /* M2L by rotations (fmm3d_rot.cu), not dense matrices */
    int m2l_timed;                     /* EV_OPS0 .. EV_OPS1 hold this set_points' M2L matrices */
    int m2l_built;                     /* the dense M2L matrices are built (or on their way) */
    fmk_cuda_fmm3d_rot rot;            /* its tables (with use_rot) */
    /* the operators (start_ops), built once per plan on stream 2 while the tree and the lists
     * are built: d_ops holds the harmonic tables (tb), the translation harmonics, the M2M and
     * L2L matrices; d_m2l the dense M2L matrices of all M2L_DIRS directions in the M2L order
     * (packed, each to its degree: m2l_roff) */
    double *d_ops, *d_m2l, *d_m2m, *d_l2l;
    size_t cap_m2l;                    /* d_m2l's bytes */
    tabs tb;
    /* eval's buffers, one allocation (d_eval, cap_eval bytes) kept from one set_points to the
     * next where large enough: expansions, the M2L's columns, products and tables, the far and
     * near field's results, the charge check */
    void *d_eval;
    size_t cap_eval;
    double *d_M, *d_L, *d_X, *d_Mp, *d_res, *d_near;
    int32_t *d_xrow;
    unsigned long long *d_stats;
    /* evaluations from host arrays: charges, potential, gradient (d_host, cap_host bytes; made at
     * the first such evaluation) */
    void *d_host;
    size_t cap_host;
    cudaEvent_t ev[N_EV];
    int events;
    cudaStream_t stream[3];            /* far field (high priority), near field (low priority),
                                        * operators (set_points; not blocking with the default
                                        * stream, on which the tree and lists are built) */
    int streams;
    int64_t bytes;
};

/* p lies in the state's block (a fresh plan's one allocation) */
int pairs_rt(const fmm_gpu *s);
int pairs_cap(const fmm_gpu *s);

int in_block(const fmm_gpu *s, const void *p)
{
    return p && s->d_block && (const char *)p >= (const char *)s->d_block &&
           (const char *)p < (const char *)s->d_block + s->cap_block;
}

/* Frees buffer *d of *cap bytes unless it lies in the block, and forgets it. */
void drop(fmm_gpu *s, void **d, size_t *cap)
{
    if (*d && !in_block(s, *d)) {
        cudaFree(*d);
        s->bytes -= (int64_t)(*cap ? *cap : 1);
    }
    *d = NULL, *cap = 0;
}

void free_all(fmm_gpu *s)
{
    free(s->m2l_gemms), free(s->m2l_parts);
    s->m2l_gemms = NULL, s->m2l_parts = NULL;
    fmk_cuda_fmm3d_geo_free(&s->g);
    fmk_cuda_tree3d_free(&s->tree);
    fmk_cuda_fmm3d_rot_free(&s->rot);
    void *all[] = {s->d_ops, s->d_m2l, s->d_eval, s->d_host, s->d_pts, s->d_box};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] && !in_block(s, all[i]))
            cudaFree(all[i]);
    if (s->d_block)
        cudaFree(s->d_block);
}

void fmm_release(fmk_plan *plan)
{
    fmm_gpu *s = (fmm_gpu *)plan->state;
    if (!s)
        return;
    int prev = -1;
    const int entered = fmk_cuda_enter(plan, s->device, &prev) == FMK_OK;
    if (s->streams > 2) /* the operators of a set_points not followed by an eval */
        cudaStreamSynchronize(s->stream[2]);
    free_all(s);
    for (int i = 0; i < s->events; i++)
        cudaEventDestroy(s->ev[i]);
    for (int i = 0; i < s->streams; i++)
        cudaStreamDestroy(s->stream[i]);
    if (s->has_blas)
        blas::destroy(s->blas);
    if (entered)
        fmk_cuda_leave(s->device, prev);
    free(s);
    plan->state = NULL;
    plan->state_bytes_device = 0;
}

/* The M2L's packed expansions and matrices take rows and columns in multiples of 8 doubles:
 * every GEMM operand then starts 64-byte aligned, with leading and inner dimensions multiples of
 * 8 (docs/fmm3d_gpu.md, "Far field: the M2L on packed expansions": cuBLAS's DGEMM ran 1.3x
 * slower per flop on an inner dimension of 225 than on 240). */
int m2l_pad(int64_t n) { return (int)((n + 7) / 8 * 8); }

/* X's size in directions (of Sx doubles) times all nn boxes from level 2 down: as many as keep
 * it within fmk_cuda_fmm3d_m2l_bytes (at least one). */
int m2l_batch_for(int64_t Sp, int64_t nn, int n_dirs)
{
    const int64_t per = 8 * Sp * (nn > 0 ? nn : 1);
    int64_t b = fmk_cuda_fmm3d_m2l_bytes / per;
    if (b > n_dirs)
        b = n_dirs;
    return b < 1 ? 1 : (int)b;
}

/* Where the operators live in d_ops (start_ops), in doubles, each part 256-byte aligned: the
 * harmonic recursion's tables to degree 2p + 1 (rec_a | rec_b | rec_diag | sqrt_int: fmm3d_ops.h;
 * eval's tabs use them too), sqrt(C(a, b)) for a, b < nb = 4p + 2, the M2L_DIRS translation
 * vectors in the M2L order and per rank the first row and the degree of its matrix (int32, M2L
 * stacked matrices: fmm_gpu's m2l_roff, m2l_deg) (uploaded: [0, n_up)); then the translation harmonics (n_h M2L
 * vectors to degree 2p, then 8 M2M and 8 L2L vectors to degree p), the M2M and the L2L
 * matrices (8 each). */
struct ops_layout {
    int64_t nh, sqb, vec, dirs, H, m2m, l2l, total, n_up;
    int nb, n_h;
};

int64_t align32(int64_t n) { return (n + 31) / 32 * 32; }

ops_layout ops_layout_for(int p, int rot)
{
    ops_layout o;
    const int64_t S = (int64_t)(p + 1) * (p + 2), hs_m2l = (int64_t)(2 * p + 1) * (2 * p + 2);
    o.nh = fmk_fmm3d_ncoef(2 * p + 1);
    o.nb = 4 * p + 2;
    o.n_h = rot ? 0 : M2L_DIRS; /* rotations: no dense M2L, no M2L harmonics */
    o.sqb = align32(2 * o.nh + (2 * p + 2) + (2 * p + 5));
    o.vec = o.sqb + align32((int64_t)o.nb * o.nb);
    o.dirs = o.vec + align32(3 * M2L_DIRS);
    o.H = o.dirs + align32(M2L_DIRS);
    o.n_up = o.H;
    o.m2m = o.H + align32(hs_m2l * o.n_h + 16 * S);
    o.l2l = o.m2m + align32(8 * S * S);
    o.total = o.l2l + align32(8 * S * S);
    return o;
}

/* Device bytes for ns sources, nt targets (nt < 0: at the sources), before allocating. */
int64_t device_bytes(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t nodes, int64_t n_dirs)
{
    const int self = nt < 0;
    if (self)
        nt = ns;
    const int p = order_of(plan);
    const int64_t S = (int64_t)(p + 1) * (p + 2), Sp = (int64_t)(p + 1) * (p + 1), Sx = m2l_pad(Sp);
    const int64_t np = self ? ns : ns + nt;
    const m2l_cfg cfg = m2l_config((int)S);
    int64_t b = fmk_cuda_tree3d_build_bytes(np) + nodes * FMK_CUDA_TREE_NODE_BYTES; /* tree */
    b += 24 * np;                                              /* points to the GPU */
    b += fmk_cuda_fmm3d_geo_bytes(np, ns, self, nodes, cfg.tb); /* boxes, lists, tiles */
    const int rot = p >= fmk_cuda_fmm3d_m2l_rot_order;
    b += 8 * ops_layout_for(p, rot).total;                     /* tables, M2M, L2L matrices */
    if (!rot)                                                  /* M2L matrices (at most) */
        b += 8 * M2L_DIRS * Sx * Sx;
    if (rot)                                                   /* or M2L's rotation tables */
        b += fmk_cuda_fmm3d_rot_bytes(p, (int)n_dirs);
    b += 3 * nodes * S * 8 + 8 * 8 * n_dirs;                   /* M, L, the M2L's columns and tables */
    if (!rot)
        b += 8 * Sx * nodes * m2l_batch_for(Sx, nodes, (int)n_dirs); /* M2L products */
    b += 2 * 4 * nt * 8 + ns * 8 + 4 * nt * 8;                 /* results, host eval buffers */
    return b;
}

void fmm_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d)
{
    const int64_t np = nt < 0 ? ns : ns + nt;
    const int p = order_of(plan);
    const int64_t nodes = fmk_tree3d_estimate_nodes(np, leaf_size_of(plan, p));
    *d = device_bytes(plan, ns, nt, nodes, FMK_FMM3D_NDIR - 27);
    /* host: the operator tables to upload while set_points runs, and fmm3d_ops.c's */
    *h = (int64_t)sizeof(fmm_gpu) + 8 * ops_layout_for(p, 1).n_up + 8 * (int64_t)(4 * p + 3) * (4 * p + 3);
    if (p >= fmk_cuda_fmm3d_m2l_rot_order) /* the rotation tables, made on the host first */
        *h += fmk_cuda_fmm3d_rot_bytes(p, FMK_FMM3D_NDIR - 27);
}

/* cudaMalloc + copy of host data, with the plan's message on failure. */
fmk_status put(fmk_plan *plan, fmm_gpu *s, void **d, const void *h, size_t bytes, const char *what,
               long long total)
{
    fmk_status st = fmk_cuda_alloc(plan, d, bytes, what, total);
    if (st != FMK_OK)
        return st;
    s->bytes += (int64_t)(bytes ? bytes : 1);
    if (h && bytes) {
        cudaError_t err = cudaMemcpy(*d, h, bytes, cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, what);
    }
    return FMK_OK;
}

template <typename T> T *hmalloc(size_t n) { return (T *)malloc(sizeof(T) * (n > 0 ? n : 1)); }

/* A buffer kept from the previous points (*cap bytes) when it holds bytes, else allocated again
 * (put). */
fmk_status grow(fmk_plan *plan, fmm_gpu *s, void **d, size_t *cap, size_t bytes, const char *what,
                long long total)
{
    if (*d && *cap >= bytes)
        return FMK_OK;
    drop(s, d, cap);
    const fmk_status st = put(plan, s, d, NULL, bytes, what, total);
    if (st == FMK_OK)
        *cap = bytes;
    return st;
}

/* The M2L's part of the operators' upload (up: o.n_up doubles, ops_layout): the translation
 * vectors of the M2L_DIRS directions in the M2L order and per rank the first row and the degree
 * of its matrix in the stacked ones. */
void fill_dirs(const fmm_gpu *s, const ops_layout &o, double *up)
{
    int32_t *dirs = (int32_t *)(up + o.dirs);
    for (int r = 0; r < M2L_DIRS; r++) { /* target - source, in sides */
        const int d = s->dir_of_rank[r];
        up[o.vec + 3 * r] = d / 49 - 3, up[o.vec + 3 * r + 1] = (d / 7) % 7 - 3, up[o.vec + 3 * r + 2] = d % 7 - 3;
        dirs[r] = s->m2l_roff[r], dirs[M2L_DIRS + r] = s->m2l_deg[d];
    }
}

/* The operators that depend only on the order (ops_layout), started on stream 2, which does
 * not wait for the default stream: the tables from the host (fmm3d_ops.c's, a few kB), then on
 * the GPU the translation harmonics (k_harmonics) and the M2M and L2L matrices (k_build), in
 * d_ops (the block's, or allocated here). Runs alongside the tree and list builds; eval's far
 * field waits for it (EV_OPS), set_points does not. */
fmk_status start_ops(fmk_plan *plan, fmm_gpu *s, long long total)
{
    const int p = s->order;
    const int64_t S = s->S;
    const ops_layout o = ops_layout_for(p, s->use_rot);
    fmk_fmm3d_ops_ctx ops;
    fmk_status st = fmk_fmm3d_ops_create(&ops, p);
    if (st != FMK_OK)
        return fmk_error_set(plan, st, "cannot create the FMM operators of order %d", p);
    double *up = hmalloc<double>((size_t)o.n_up);
    if (!up) {
        fmk_fmm3d_ops_destroy(&ops);
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the FMM's operators");
    }
    memset(up, 0, 8 * (size_t)o.n_up);
    const int64_t nh = o.nh;
    memcpy(up, ops.rec_a, 8 * (size_t)nh);
    memcpy(up + nh, ops.rec_b, 8 * (size_t)nh);
    memcpy(up + 2 * nh, ops.rec_diag, 8 * (size_t)(2 * p + 2));
    memcpy(up + 2 * nh + 2 * p + 2, ops.sqrt_int, 8 * (size_t)(2 * p + 5));
    fmk_fmm3d_ops_destroy(&ops);
    const int nb = o.nb;
    double *sqb = up + o.sqb; /* Pascal's triangle, then square roots */
    for (int a = 0; a < nb; a++)
        for (int b = 0; b < nb; b++)
            sqb[a * nb + b] = b == 0 ? 1 : (b > a ? 0 : sqb[(a - 1) * nb + b - 1] + (b <= a - 1 ? sqb[(a - 1) * nb + b] : 0));
    for (int i = 0; i < nb * nb; i++)
        sqb[i] = sqrt(sqb[i]);
    fill_dirs(s, o, up);
    if (!s->d_ops)
        st = put(plan, s, (void **)&s->d_ops, NULL, 8 * (size_t)o.total, "the FMM's operators", total);
    cudaStream_t os = s->stream[2];
    cudaError_t err = cudaSuccess;
    if (st == FMK_OK) /* from pageable memory: copied out before the call returns */
        err = cudaMemcpyAsync(s->d_ops, up, 8 * (size_t)o.n_up, cudaMemcpyHostToDevice, os);
    free(up);
    if (st != FMK_OK)
        return st;
    double *d = s->d_ops;
    s->tb.rec_a = d, s->tb.rec_b = d + nh, s->tb.rec_diag = d + 2 * nh, s->tb.sqrt_int = d + 2 * nh + 2 * p + 2;
    s->d_m2m = d + o.m2m, s->d_l2l = d + o.l2l;
    const int nc = (int)(S / 2);
    const int64_t hs_m2l = (int64_t)(2 * p + 1) * (2 * p + 2), hs_p = S;
    if (err == cudaSuccess) {
        k_harmonics<<<(o.n_h + 16 + 127) / 128, 128, 0, os>>>(p, o.n_h, s->tb, d + o.vec, d + o.H);
        k_build<<<(8 * nc * nc + 255) / 256, 256, 0, os>>>(1, p, 8, p, d + o.H + hs_m2l * o.n_h, d + o.sqb, nb,
                                                           S * S, S, NULL, NULL, s->d_m2m);
        k_build<<<(8 * nc * nc + 255) / 256, 256, 0, os>>>(2, p, 8, p, d + o.H + hs_m2l * o.n_h + 8 * hs_p,
                                                           d + o.sqb, nb, S * S, S, NULL, NULL, s->d_l2l);
        cudaEventRecord(s->ev[EV_OPS], os);
        s->ops_pending = 1;
        err = cudaGetLastError();
    }
    return err == cudaSuccess ? FMK_OK : fmk_cuda_fail(plan, err, "the operator kernels");
}

/* The dense M2L matrices of all M2L_DIRS directions, packed, each to its degree q (rank r:
 * (q + 1)^2 columns and rows, then zeros to m2l_roff[r + 1] - m2l_roff[r] of each), stacked in
 * the M2L order (column-major, leading dimension m2l_roff[M2L_DIRS], Sx columns), on stream 2
 * after start_ops. */
fmk_status start_m2l(fmk_plan *plan, fmm_gpu *s, long long total)
{
    const int p = s->order;
    const int64_t Sx = s->Sx, ld = s->m2l_roff[M2L_DIRS];
    const ops_layout o = ops_layout_for(p, s->use_rot);
    { /* the block's place, or one apart when the degrees grew (the size rule) */
        const fmk_status st = grow(plan, s, (void **)&s->d_m2l, &s->cap_m2l, 8 * (size_t)(ld * Sx), "the M2L matrices",
                                   total);
        if (st != FMK_OK)
            return st;
    }
    const int32_t *dirs = (const int32_t *)(s->d_ops + o.dirs);
    cudaEventRecord(s->ev[EV_OPS0], s->stream[2]);
    cudaMemsetAsync(s->d_m2l, 0, 8 * (size_t)(ld * Sx), s->stream[2]);
    k_build<<<2048, 256, 0, s->stream[2]>>>(0, p, M2L_DIRS, 2 * p, s->d_ops + o.H, s->d_ops + o.sqb, o.nb, 0, ld,
                                              dirs, dirs + M2L_DIRS, s->d_m2l);
    cudaEventRecord(s->ev[EV_OPS1], s->stream[2]);
    cudaEventRecord(s->ev[EV_OPS], s->stream[2]);
    s->m2l_timed = 1, s->m2l_built = 1, s->ops_pending = 1;
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? FMK_OK : fmk_cuda_fail(plan, err, "the M2L matrix kernel");
}

/* The far field's stream (st) waits for the operators of stream 2 at eval's first pass
 * that reads them (their kernels' faults are eval's then). */
void ops_wait(fmm_gpu *s, cudaStream_t st)
{
    if (!s->ops_pending)
        return;
    cudaStreamWaitEvent(st, s->ev[EV_OPS], 0);
    s->ops_pending = 0;
}

/* The M2L matrices' kernel time (setup_time[5]), once eval has waited for it. */
void ops_time(fmm_gpu *s)
{
    float ms = 0;
    if (s->m2l_timed && cudaEventElapsedTime(&ms, s->ev[EV_OPS0], s->ev[EV_OPS1]) != cudaSuccess)
        (void)cudaGetLastError(), ms = 0;
    if (s->m2l_timed)
        s->setup_time[5] = 1e-3 * ms;
    s->m2l_timed = 0;
}

/* Device bytes of the plan's points (plan->n_sources, n_targets, self), for messages. */
long long plan_total(const fmk_plan *plan)
{
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    const int64_t np = plan->self ? ns : ns + nt;
    return device_bytes(plan, ns, plan->self ? -1 : nt,
                        fmk_tree3d_estimate_nodes(np, leaf_size_of(plan, order_of(plan))),
                        FMK_FMM3D_NDIR - 27);
}

/* The M2L's GEMMs and parts (fmm_gpu): per octant o of the sources (columns m2l_first[o] ..
 * m2l_first[o + 1] of Mp), the directions in use (the lists' slots) that its sources reach, d_i
 * in [-2 - o_i, 3 - o_i] per axis, in the order of the stacked matrices (the M2L order, ranks:
 * fmk_cuda_fmm3d_m2l_order puts them in about 4 runs per degree), runs of one degree at most
 * fmk_cuda_fmm3d_m2l_gap directions in use apart merged (a GEMM the fewer, a few products more),
 * cut into parts of at most what X holds. A part covers the slots of its ranks; *n_xrow: the
 * entries of the parts' slot -> (row, size) tables (fill_xrow). */
fmk_status m2l_plan(fmk_plan *plan, fmm_gpu *s, int64_t nn, int64_t *n_xrow)
{
    const int n_slots = s->g.n_slots;
    free(s->m2l_gemms), free(s->m2l_parts);
    s->n_m2l_gemms = s->n_m2l_parts = 0;
    s->m2l_products = 0;
    s->m2l_flops = 0;
    *n_xrow = 0;
    /* at most every direction a GEMM and a part */
    s->m2l_gemms = hmalloc<fmm_gpu::m2l_gemm>(8 * (size_t)M2L_DIRS);
    s->m2l_parts = hmalloc<fmm_gpu::m2l_part>(8 * (size_t)M2L_DIRS);
    if (!s->m2l_gemms || !s->m2l_parts)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the M2L's plan");
    if (nn == 0 || s->g.n_vnodes == 0 || s->use_rot) /* rotations: no GEMMs */
        return FMK_OK;
    const int16_t *rank = s->rank, *dir_of_rank = s->dir_of_rank;
    const int32_t *roff = s->m2l_roff;
    int used[M2L_DIRS + 1], first_slot[M2L_DIRS + 1]; /* first_slot[r]: slots of ranks below r */
    for (int r = 0; r < M2L_DIRS; r++)
        used[r] = 0;
    for (int sl = 0; sl < n_slots; sl++)
        used[rank[s->g.dir_of_slot[sl]]] = 1;
    first_slot[0] = 0;
    for (int r = 0; r < M2L_DIRS; r++)
        first_slot[r + 1] = first_slot[r] + used[r];
    for (int o = 0; o < 8; o++) {
        const int64_t n_o = s->g.m2l_first[o + 1] - s->g.m2l_first[o];
        if (n_o == 0)
            continue;
        const int64_t cap = (int64_t)s->m2l_batch * nn / n_o * s->Sx; /* X's rows in a part (>= Sx) */
        const int lo[3] = {-2 - ((o >> 2) & 1), -2 - ((o >> 1) & 1), -2 - (o & 1)};
        fmm_gpu::m2l_part *part = NULL;
        int run0 = -1, run1 = -1; /* the current run, [run0, run1) */
        for (int r = 0; r <= M2L_DIRS; r++) {
            int in = 0;
            if (r < M2L_DIRS && used[r]) {
                const int d = dir_of_rank[r];
                const int dv[3] = {d / 49 - 3, (d / 7) % 7 - 3, d % 7 - 3};
                in = 1;
                for (int a = 0; a < 3; a++)
                    in = in && dv[a] >= lo[a] && dv[a] <= lo[a] + 5;
                /* extend the run over a gap of at most m2l_gap directions in use; those not in use
                 * in between do not count (their few products are computed: the runs, and the
                 * GEMMs, are those of the lists' slots) */
                if (in && run0 >= 0 && s->m2l_deg[d] == s->m2l_deg[dir_of_rank[run0]] &&
                    first_slot[r] - first_slot[run1] <= fmk_cuda_fmm3d_m2l_gap) {
                    run1 = r + 1;
                    continue;
                }
            }
            if (run0 >= 0 && (in || r == M2L_DIRS)) { /* the run ends: its GEMMs */
                const int q = s->m2l_deg[dir_of_rank[run0]]; /* the run's one degree */
                const int size = roff[run0 + 1] - roff[run0];
                for (int a = run0; a < run1;) {
                    if (!part || part->rows + size > cap) {
                        part = &s->m2l_parts[s->n_m2l_parts++];
                        part->oct = o, part->gemm0 = s->n_m2l_gemms, part->n_gemms = 0;
                        part->slot_lo = first_slot[a], part->rows = 0;
                    }
                    const int64_t fit = (cap - part->rows) / size;
                    const int take = (int)(run1 - a < fit ? run1 - a : fit);
                    fmm_gpu::m2l_gemm &gm = s->m2l_gemms[s->n_m2l_gemms++];
                    gm.rank0 = a, gm.n_ranks = take, gm.size = size, gm.k = (q + 1) * (q + 1), gm.row = part->rows;
                    part->n_gemms++, part->rows += take * size, part->slot_hi = first_slot[a + take];
                    s->m2l_products += (int64_t)take * n_o;
                    s->m2l_flops += 2.0 * take * size * (double)size * (double)n_o;
                    a += take;
                }
                run0 = run1 = -1;
            }
            if (in)
                run0 = r, run1 = r + 1;
        }
    }
    for (int i = 0; i < s->n_m2l_parts; i++) {
        s->m2l_parts[i].xrow = *n_xrow;
        *n_xrow += s->m2l_parts[i].slot_hi - s->m2l_parts[i].slot_lo;
    }
    return FMK_OK;
}

/* The parts' slot -> (row, size) tables (n_xrow pairs, m2l_plan) into xr: X's first row of a
 * slot's products in its part and their count (the packed doubles of the direction's degree);
 * row -1 where the part's octant does not reach the slot's direction. */
void fill_xrow(const fmm_gpu *s, int32_t *xr)
{
    for (int i = 0; i < s->n_m2l_parts; i++) {
        const fmm_gpu::m2l_part &q = s->m2l_parts[i];
        for (int sl = q.slot_lo; sl < q.slot_hi; sl++) {
            const int r = s->rank[s->g.dir_of_slot[sl]];
            int32_t row = -1, size = 0;
            for (int j = q.gemm0; j < q.gemm0 + q.n_gemms && row < 0; j++) {
                const fmm_gpu::m2l_gemm &gm = s->m2l_gemms[j];
                if (r >= gm.rank0 && r < gm.rank0 + gm.n_ranks)
                    row = gm.row + (r - gm.rank0) * gm.size, size = gm.k;
            }
            xr[2 * (q.xrow + sl - q.slot_lo)] = row, xr[2 * (q.xrow + sl - q.slot_lo) + 1] = size;
        }
    }
}

/* The mapped points (in [1, 2]) into the low corner of the root cube, times 1 / c. */
__global__ void k_shrink(int64_t n, double inv_c, double top, double *__restrict__ x)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = fmin(fma(x[i] - 1.0, inv_c, 1.0), top);
}

/* Where eval's buffers lie in d_eval for k nodes (S doubles an expansion; Sx packed), nn of them
 * from level 2 down, x_bytes of M2L products, nt targets and n_xrow M2L table entries (off[8],
 * 256-byte aligned): expansions M and L, the products X, the M2L's columns Mp, the far and near
 * field's results, the tables, the charge check. Returns the bytes. */
int64_t eval_layout(int64_t S, int64_t Sx, int64_t k, int64_t nn, int64_t x_bytes, int64_t nt, int64_t n_xrow,
                    int64_t off[8])
{
    const int64_t bytes[8] = {8 * S * k, 8 * S * k, x_bytes, 8 * Sx * nn, 32 * nt, 32 * nt, 8 * n_xrow, 16};
    int64_t need = 0;
    for (int i = 0; i < 8; i++)
        off[i] = need, need += (bytes[i] + 255) / 256 * 256;
    return need;
}

/* Eval's buffers (fmm_gpu: d_eval) for k nodes, nn of them from level 2 down, nt targets and
 * n_xrow M2L table entries: kept from the previous points (or the block's place) when large
 * enough, else one new allocation. */
fmk_status eval_buffers(fmk_plan *plan, fmm_gpu *s, int64_t k, int64_t nn, int64_t nt, int64_t n_xrow,
                        long long total)
{
    int64_t off[8];
    const int64_t need = eval_layout(s->S, s->Sx, k, nn, 8 * s->Sx * nn * s->m2l_batch, nt, n_xrow, off);
    const fmk_status st = grow(plan, s, &s->d_eval, &s->cap_eval, (size_t)need,
                               "the expansions, the M2L's products and the results", total);
    if (st != FMK_OK)
        return st;
    char *e = (char *)s->d_eval;
    s->d_M = (double *)(e + off[0]), s->d_L = (double *)(e + off[1]);
    s->d_X = (double *)(e + off[2]), s->d_Mp = (double *)(e + off[3]);
    s->d_res = (double *)(e + off[4]), s->d_near = (double *)(e + off[5]);
    s->d_xrow = (int32_t *)(e + off[6]), s->d_stats = (unsigned long long *)(e + off[7]);
    return FMK_OK;
}

fmk_status ensure_blas(fmk_plan *plan, fmm_gpu *s); /* (below, with the state's start) */
void m2l_select(fmm_gpu *s, int whole);              /* (below, with the degrees) */
int m2l_whole_for(const fmm_gpu *s, int64_t nn);

/* The size rule once the tree is built (nn: boxes from level 2 down): when it picks the other
 * degrees (whole or truncated) than the state's, they are selected again, the M2L's part of
 * the operators uploaded again and its harmonics made again on stream 2 (start_ops' tables
 * stand), and the M2L matrices marked for a rebuild after the lists (start_m2l). The previous
 * eval has finished (eval waits for its end), so nothing reads them meanwhile. */
fmk_status m2l_reselect(fmk_plan *plan, fmm_gpu *s, int64_t nn)
{
    const int whole = m2l_whole_for(s, nn);
    if (s->use_rot || whole == s->m2l_whole)
        return FMK_OK;
    m2l_select(s, whole);
    s->m2l_built = 0;
    if (!s->tb.rec_a) /* the operators not started: start_ops uploads these */
        return FMK_OK;
    const ops_layout o = ops_layout_for(s->order, s->use_rot);
    double *up = hmalloc<double>((size_t)o.n_up);
    if (!up)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the FMM's operators");
    memset(up, 0, 8 * (size_t)o.n_up);
    fill_dirs(s, o, up);
    cudaStream_t os = s->stream[2];
    cudaError_t err = cudaMemcpyAsync(s->d_ops + o.vec, up + o.vec, 8 * (size_t)(o.n_up - o.vec),
                                      cudaMemcpyHostToDevice, os); /* pageable: copied before it returns */
    free(up);
    if (err == cudaSuccess) {
        k_harmonics<<<(o.n_h + 16 + 127) / 128, 128, 0, os>>>(s->order, o.n_h, s->tb, s->d_ops + o.vec,
                                                               s->d_ops + o.H);
        cudaEventRecord(s->ev[EV_OPS], os);
        s->ops_pending = 1;
        err = cudaGetLastError();
    }
    return err == cudaSuccess ? FMK_OK : fmk_cuda_fail(plan, err, "the M2L's operators");
}

/* The geometry and the operators from the mapped points d_all (sources, then targets unless
 * self: np * 3 doubles on the device), which the state keeps (d_pts) from here on. The
 * operators (once per plan) build on stream 2 alongside the tree and the lists. */
fmk_status setup_on_device(fmk_plan *plan, fmm_gpu *s, double *d_all)
{
    const double t0 = fmk_time_now();
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    const int64_t np = plan->self ? ns : ns + nt;
    const int p = s->order;
    const long long total = plan_total(plan);
    fmk_status st = FMK_OK;
    fmk_cuda_tree &tree = s->tree;
    s->setup_time[5] = 0;
    /* the operators first (a plan's first call); the dense M2L matrices after the lists when
     * they have V entries, or (fmk_cuda_fmm3d_ops_at = 1) here too when the tree will have a
     * level 2 */
    const int early_m2l = !s->use_rot && np > 8 * (int64_t)s->leaf_size && fmk_cuda_fmm3d_ops_at == 1;
    if (!s->tb.rec_a) /* not started yet */
        st = start_ops(plan, s, total);
    if (st == FMK_OK && early_m2l && !s->m2l_built)
        st = start_m2l(plan, s, total);
    const double t_ops = fmk_time_now() - t0;
    s->root_side = fmk_cuda_fmm3d_root_volume > 1 ? cbrt(fmk_cuda_fmm3d_root_volume) : 1.0;
    if (st == FMK_OK && s->root_side > 1 && np > 0) {
        const int64_t blocks = (3 * np + 255) / 256;
        k_shrink<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256>>>(3 * np, 1.0 / s->root_side, 2.0, d_all);
    }
    const double t0t = fmk_time_now();
    if (st == FMK_OK)
        st = fmk_cuda_tree3d_build(plan, np, d_all, s->leaf_size, total, &tree);
    s->fit_mean = 0, s->uniform = 0;
    int full = -1; /* the last level of which every box holds points */
    if (st == FMK_OK) {
        while (full + 1 < tree.levels && full < 20 &&
               tree.level_begin[full + 2] - tree.level_begin[full + 1] == (int64_t)1 << (3 * (full + 1)))
            full++;
        /* a complete octree (every box of every level down to L >= 3 holds points) */
        s->uniform = full >= 3 && full == tree.levels - 1;
    }
    if (st == FMK_OK && full >= 3 && full + 2 >= tree.levels && s->root_side == 1 && fmk_cuda_fmm3d_root_fit &&
        plan->self && !s->fp32) {
        /* fmk_cuda_fmm3d_root_fit: uniform points refitted; their tree complete to level full and
         * at most one level deeper, L the last of those levels whose boxes hold 1.25 m_t */
        const double mt = s->leaf_size / 2.8;
        int L = full;
        while (L > 0 && (double)np < 1.25 * mt * (double)((int64_t)1 << (3 * L)))
            L--;
        if (mt >= 128 && mt <= 224 && (double)np >= 1.25 * mt * (double)((int64_t)1 << (3 * L))) {
            const int cells = 2 << L; /* across the root at level L + 1 */
            int k = 2 * (int)llround(0.5 * cbrt((double)np / mt));
            k = k > cells ? cells : k <= cells / 2 ? cells / 2 + 2 : k;
            if (k < cells) {
                const int64_t blocks = (3 * np + 255) / 256;
                /* the points at the frame's top (mapped 2) would land on cell k, outside the k^3
                 * cells: each a lone leaf of level 2 whose rest row (W entries done as P2P)
                 * held 35,000 .. 82,000 sources (2^18: P2P 3.3 .. 6.3 ms by the draw); they
                 * are kept below it, one ulp (2^-52 of the frame) from where they were */
                k_shrink<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256>>>(
                    3 * np, (double)k / cells, nextafter(1.0 + (double)k / cells, 1.0), d_all);
                s->root_side = (double)cells / k;
                s->fit_mean = (double)np / ((double)k * k * k);
                st = fmk_cuda_tree3d_build(plan, np, d_all, s->leaf_size, total, &tree);
            }
        }
    }
    s->tree_time = fmk_time_now() - t0t;
    if (st == FMK_OK) {
        /* Near-field substitutes: a W entry with few sources is cheaper as P2P (appended to the
         * leaf's U list) than M2P at each target, and an X entry into a box with few targets is
         * cheaper as P2P into the box's targets than P2L (a separate list); both exact. */
        const int64_t near_max =
            fmk_cuda_fmm3d_direct_near > 0 ? (int64_t)fmk_cuda_fmm3d_direct_near * (p + 1) * (p + 1) / 2 : -1;
        s->near_max = near_max;
        /* the size rule on this tree's M2L columns: the degrees and with them the M2L order */
        st = m2l_reselect(plan, s, tree.levels > 2 ? tree.n_nodes - tree.level_begin[2] : 0);
    }
    if (st == FMK_OK) {
        memcpy(s->g.m2l_deg, s->m2l_deg, sizeof s->m2l_deg); /* the V rows in the M2L order */
        st = fmk_cuda_fmm3d_geometry(plan, &tree, d_all, ns, plan->self, s->near_max, s->cfg.tb, pairs_cap(s), total,
                                     &s->g);
    }
    const double t1 = fmk_time_now();
    s->setup_time[1] = s->tree_time, s->setup_time[2] = t1 - t0t - s->tree_time;
    const int64_t k = tree.n_nodes;
    s->n_nodes = k;
    s->levels = tree.levels;
    s->gemm_first = tree.levels > 2 ? tree.level_begin[2] : k;
    if (st != FMK_OK)
        return st;
    const int n_slots = s->g.n_slots;
    if (!s->use_rot && !s->m2l_built && n_slots > 0)
        st = start_m2l(plan, s, total);
    /* the rotation tables of the previous points serve when their directions are these (the
     * order is the plan's) */
    const int same = s->rot.d_tab && s->rot_slots == n_slots &&
                     memcmp(s->rot_dir, s->g.dir_of_slot, sizeof(int32_t) * (size_t)n_slots) == 0;
    if (st == FMK_OK && s->use_rot && !same) {
        s->bytes -= s->rot.bytes;
        fmk_cuda_fmm3d_rot_free(&s->rot);
        s->rot_slots = -1;
        fmk_fmm3d_ops_ctx ops;
        if ((st = fmk_fmm3d_ops_create(&ops, p)) != FMK_OK)
            return fmk_error_set(plan, st, "cannot create the FMM operators of order %d", p);
        st = fmk_cuda_fmm3d_rot_build(plan, &ops, s->g.dir_of_slot, n_slots, total, &s->rot);
        fmk_fmm3d_ops_destroy(&ops);
        if (st != FMK_OK)
            return st;
        s->bytes += s->rot.bytes;
        s->rot_slots = n_slots;
        memcpy(s->rot_dir, s->g.dir_of_slot, sizeof(int32_t) * (size_t)n_slots);
    }
    const double t2 = fmk_time_now();
    const int64_t nn = k - s->gemm_first;
    s->m2l_batch = s->use_rot ? 0 : m2l_batch_for(s->Sx, nn, M2L_DIRS); /* no X with rotations */
    int64_t n_xrow = 0;
    if (st == FMK_OK)
        st = m2l_plan(plan, s, nn, &n_xrow);
    if (st == FMK_OK && s->n_m2l_parts > 0 && fmk_cuda_fmm3d_blas_at == 0)
        st = ensure_blas(plan, s);
    if (st == FMK_OK)
        st = eval_buffers(plan, s, k, nn, nt, n_xrow, total);
    if (st == FMK_OK && n_xrow > 0) { /* the parts' slot -> row tables */
        int32_t *xr = hmalloc<int32_t>(2 * (size_t)n_xrow);
        if (!xr)
            return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the M2L tables");
        fill_xrow(s, xr);
        const cudaError_t err = cudaMemcpy(s->d_xrow, xr, 8 * (size_t)n_xrow, cudaMemcpyHostToDevice);
        free(xr);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (the M2L tables)");
    }
    const double t3 = fmk_time_now();
    /* operators: their host part (a plan's first call; eval waits for their kernels) */
    s->setup_time[3] = t_ops + (t2 - t1);
    s->setup_time[4] = t3 - t2;
    return st;
}

fmk_status too_many(fmk_plan *plan, int64_t np)
{
    if (np <= FMK_CUDA_TREE_MAX_POINTS)
        return FMK_OK;
    return fmk_error_set(plan, FMK_ERR_ARG,
                         "the GPU FMM takes at most %lld points (sources and targets together)",
                         (long long)FMK_CUDA_TREE_MAX_POINTS);
}

/* A failure starting the plan's state: out of memory says what the plan needs. */
fmk_status start_failed(fmk_plan *plan, cudaError_t err, const char *call)
{
    if (err != cudaErrorMemoryAllocation)
        return fmk_cuda_fail(plan, err, call);
    (void)cudaGetLastError();
    return fmk_error_set(plan, FMK_ERR_DEVICE_NOMEM,
                         "%s: out of GPU memory; the plan needs about %lld bytes on the GPU", call,
                         plan_total(plan));
}

/* The state's cuBLAS handle on its first stream, made at the first call that needs it
 * (fmk_cuda_fmm3d_blas_at). */
fmk_status ensure_blas(fmk_plan *plan, fmm_gpu *s)
{
    if (s->has_blas)
        return FMK_OK;
    const cublasStatus_t bs = blas::create(&s->blas);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return bs == CUBLAS_STATUS_ALLOC_FAILED
                   ? fmk_error_set(plan, FMK_ERR_DEVICE_NOMEM,
                                   "out of GPU memory starting cuBLAS; the plan needs about %lld bytes "
                                   "on the GPU",
                                   plan_total(plan))
                   : fmk_error_set(plan, FMK_ERR_DEVICE, "cuBLAS could not start (status %d)", (int)bs);
    s->has_blas = 1;
    if (blas::set_stream(s->blas, s->stream[0]) != CUBLAS_STATUS_SUCCESS)
        return fmk_error_set(plan, FMK_ERR_DEVICE, "cuBLAS could not take the FMM's stream");
    return FMK_OK;
}

/* The dense M2L's degree of each V direction d (FMK_FMM3D_DIR) at order p: the smallest p_d with
 * (rho / |d|)^(p_d + 1) <= f (rho / 2)^(p + 1), rho = sqrt(3) / 2 (fmk_cuda_fmm3d_m2l_trunc); p
 * for all with f <= 0 (and for the near directions, which have no M2L). */
void m2l_degrees(int p, double f, int8_t deg[FMK_FMM3D_NDIR])
{
    const double rho = 0.5 * sqrt(3.0), bound = f > 0 ? log(f) + (p + 1) * log(rho / 2) : 0;
    for (int d = 0; d < FMK_FMM3D_NDIR; d++) {
        const int o[3] = {d / 49 - 3, (d / 7) % 7 - 3, d % 7 - 3};
        const double dist = sqrt((double)(o[0] * o[0] + o[1] * o[1] + o[2] * o[2]));
        int q = p;
        if (f > 0 && dist > 2)
            for (q = 0; q < p && (q + 1) * log(rho / dist) > bound; q++)
                ;
        deg[d] = (int8_t)(q < 127 ? q : 127);
    }
}

/* The GEMM flops of one direction whose operator keeps degree q: its rows and inner dimension
 * are (q + 1)^2 padded to 8 (m2l_pad), per box. */
double m2l_cost(int q)
{
    const double n = m2l_pad((int64_t)(q + 1) * (q + 1));
    return n * n;
}

/* The degrees of the 189 V directions that the sources of one octant reach (octant 0: d_i in
 * [-2, 3]; every octant's are its mirror image, with the same distances): count[q] of degree q,
 * q = 0 .. p (count: p + 1 entries). */
void m2l_octant_degrees(int p, const int8_t deg[FMK_FMM3D_NDIR], int *count)
{
    for (int q = 0; q <= p; q++)
        count[q] = 0;
    for (int d = 0; d < FMK_FMM3D_NDIR; d++) {
        const int o[3] = {d / 49 - 3, (d / 7) % 7 - 3, d % 7 - 3};
        const int reach = o[0] >= -2 && o[1] >= -2 && o[2] >= -2;
        const int v = abs(o[0]) > 1 || abs(o[1]) > 1 || abs(o[2]) > 1;
        if (reach && v)
            count[deg[d] < p ? deg[d] : p]++;
    }
}

/* Degree classes (fmk_cuda_fmm3d_m2l_classes): every V direction's degree rounded up to one of
 * at most k values, chosen to minimise the GEMM flops (m2l_cost) of the directions one octant
 * reaches (m2l_octant_degrees): the degrees that occur, ascending, cut into at most k groups,
 * each rounded up to its largest (so the largest degree stays), by dynamic programming over the
 * cuts (at most p + 1 degrees). k <= 0, or at least as many as occur: unchanged. */
void m2l_classes(int p, int k, int8_t deg[FMK_FMM3D_NDIR])
{
    enum { MAXD = FMM_GPU_MAX_ORDER + 1 };
    int count[MAXD], v[MAXD], c[MAXD], nd = 0;
    if (k <= 0 || p >= MAXD)
        return;
    m2l_octant_degrees(p, deg, count);
    for (int q = 0; q <= p; q++)
        if (count[q] > 0)
            v[nd] = q, c[nd++] = count[q];
    if (nd <= k)
        return;
    /* best[j][i]: least cost of degrees v[0 .. i] in j + 1 groups, the last topped by v[i];
     * from[j][i]: the top of the group before (-1: none); 45 kB */
    double best[MAXD][MAXD];
    int from[MAXD][MAXD];
    for (int i = 0; i < nd; i++) {
        double n = 0;
        for (int a = 0; a <= i; a++)
            n += c[a];
        best[0][i] = n * m2l_cost(v[i]), from[0][i] = -1;
    }
    for (int j = 1; j < k; j++)
        for (int i = 0; i < nd; i++) {
            best[j][i] = best[j - 1][i], from[j][i] = from[j - 1][i]; /* fewer groups */
            double n = 0;                                             /* v[m + 1 .. i] up to v[i] */
            for (int m = i - 1; m >= 0; m--) {
                n += c[m + 1];
                const double t = best[j - 1][m] + n * m2l_cost(v[i]);
                if (t < best[j][i])
                    best[j][i] = t, from[j][i] = m;
            }
        }
    int8_t top[MAXD]; /* the class of each degree 0 .. p: the top of its group */
    for (int i = nd - 1, j = k - 1; i >= 0; j = j > 0 ? j - 1 : 0) {
        const int m = from[j][i];
        for (int q = m >= 0 ? v[m] + 1 : 0; q <= v[i]; q++)
            top[q] = (int8_t)v[i];
        i = m;
    }
    for (int d = 0; d < FMK_FMM3D_NDIR; d++)
        if (deg[d] < p)
            deg[d] = top[deg[d]];
}

/* The dense M2L's degrees (whole: every operator to p; else truncated by the state's factor
 * and rounded to its classes), their M2L order and the stacked matrices' rows (m2l_roff). */
void m2l_select(fmm_gpu *s, int whole)
{
    m2l_degrees(s->order, whole ? 0 : s->m2l_f, s->m2l_deg);
    if (!whole)
        m2l_classes(s->order, s->m2l_k, s->m2l_deg);
    s->m2l_whole = whole || s->m2l_f <= 0;
    fmk_cuda_fmm3d_m2l_order(s->m2l_deg, s->rank, s->dir_of_rank);
    s->m2l_roff[0] = 0;
    for (int r = 0; r < M2L_DIRS; r++) {
        const int q = s->m2l_deg[s->dir_of_rank[r]];
        s->m2l_roff[r + 1] = s->m2l_roff[r] + m2l_pad((q + 1) * (q + 1));
    }
}

/* The size rule (fmk_cuda_fmm3d_m2l_trunc_min): whole operators for an M2L of nn GEMM columns
 * (boxes from level 2 down). */
int m2l_whole_for(const fmm_gpu *s, int64_t nn)
{
    return s->m2l_f <= 0 || (s->m2l_min > 0 && nn < s->m2l_min);
}

/* A new state in plan->state (*out): its order, events and streams. */
fmk_status new_state(fmk_plan *plan, fmm_gpu **out)
{
    const double t0 = fmk_time_now();
    if (!blas::load())
        return fmk_error_set(plan, FMK_ERR_UNAVAILABLE,
                             "the GPU FMM needs cuBLAS (" FMK_CUBLAS_SONAME "), which was not found: add "
                             "the CUDA toolkit's lib64 to LD_LIBRARY_PATH (or set CUDA_HOME), or use "
                             "backend cpu");
    fmm_gpu *s = (fmm_gpu *)calloc(1, sizeof *s);
    if (!s)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory");
    s->device = plan->opts.device;
    s->sms = fmk_cuda_sm_count(s->device);
    static const fmk_cuda_tree_tune tree_tune = FMK_CUDA_TREE_TUNE_DEFAULTS;
    s->tree.tune = tree_tune;
    s->fp32 = plan->opts.precision == FMK_PRECISION_FP32;
    /* the near field's 1/r to ~1e-13 (below 1e-2 of eps) where the order comes from eps */
    s->newton_ok = plan->opts.order < 0 && plan->eps >= 1e-11;
    s->order = order_of(plan);
    s->leaf_size = leaf_size_of(plan, s->order);
    s->S = (s->order + 1) * (s->order + 2);
    s->Sp = (s->order + 1) * (s->order + 1);
    s->Sx = m2l_pad(s->Sp);
    s->cfg = m2l_config(s->S);
    s->use_rot = s->order >= fmk_cuda_fmm3d_m2l_rot_order;
    /* the dense M2L's degrees (truncated only where the order comes from eps), their order and
     * the stacked matrices' rows; the size rule from the node estimate until the tree is built
     * (setup_on_device) */
    s->m2l_f = !s->use_rot && plan->opts.order < 0 && fmk_cuda_fmm3d_m2l_trunc > 0 ? fmk_cuda_fmm3d_m2l_trunc : 0;
    s->m2l_k = fmk_cuda_fmm3d_m2l_classes;
    s->m2l_min = fmk_cuda_fmm3d_m2l_trunc_min;
    {
        const int64_t np = plan->self ? plan->n_sources : plan->n_sources + plan->n_targets;
        const int64_t nn = np > 8 * (int64_t)s->leaf_size ? fmk_tree3d_estimate_nodes(np, s->leaf_size) - 9 : 0;
        m2l_select(s, m2l_whole_for(s, nn));
    }
    s->fresh = 1;
    plan->state = s;
    *out = s;
    fmk_status st = FMK_OK;
    for (; s->events < N_EV && st == FMK_OK; s->events++) {
        cudaError_t err = cudaEventCreate(&s->ev[s->events]);
        if (err != cudaSuccess)
            st = start_failed(plan, err, "cudaEventCreate");
    }
    /* eval's two streams: the far field's chain of dependent passes first when both have
     * blocks waiting, the near field (independent bulk work) filling the GPU around it */
    int least = 0, greatest = 0;
    if (st == FMK_OK && cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess) {
        (void)cudaGetLastError();
        least = greatest = 0;
    }
    for (; s->streams < 3 && st == FMK_OK; s->streams++) {
        cudaError_t err = cudaStreamCreateWithPriority(&s->stream[s->streams],
                                                       s->streams == 2 ? cudaStreamNonBlocking : cudaStreamDefault,
                                                       s->streams == 0 ? (fmk_cuda_fmm3d_priority == 0 ? greatest : least)
                                                       : s->streams == 1 && fmk_cuda_fmm3d_priority == 2 ? greatest
                                                                                                           : least);
        if (err != cudaSuccess)
            st = start_failed(plan, err, "cudaStreamCreateWithPriority");
    }
    s->setup_time[0] += fmk_time_now() - t0;
    return st;
}

/* A fresh state's one allocation for np points (box_bytes: set_points_device's bounding-box
 * workspace, or 0): the points, the workspace, the operators, the tree's and the list builder's
 * arenas (lent to them), the dense M2L matrices (when the tree will have a level 2) and eval's
 * buffers, at the sizes the node estimate of fmk_plan_memory gives. What turns out larger than
 * its place is allocated apart later. A plan's first call pays per cudaMalloc (~0.05 to 0.3 ms
 * each on an H100, more for the larger), not in proportion to the bytes. With a level 2 ahead
 * (M2L GEMMs) the cuBLAS handle too (fmk_cuda_fmm3d_blas_at 0). */
fmk_status state_block(fmk_plan *plan, fmm_gpu *s, int64_t np, size_t box_bytes)
{
    const double t0 = fmk_time_now();
    const int64_t ns = plan->n_sources, nt = plan->n_targets, S = s->S, Sx = s->Sx;
    const int64_t k = fmk_tree3d_estimate_nodes(np, s->leaf_size);
    const int v_lists = np > 8 * (int64_t)s->leaf_size; /* a level 2: V entries, M2L's GEMMs */
    const int dense = !s->use_rot && v_lists;
    const ops_layout o = ops_layout_for(s->order, s->use_rot);
    /* the M2L's products: at most fmk_cuda_fmm3d_m2l_bytes or one direction (m2l_batch_for),
     * at most all directions, for at most k boxes from level 2 down */
    int64_t x_bytes = 8 * Sx * k > fmk_cuda_fmm3d_m2l_bytes ? 8 * Sx * k : fmk_cuda_fmm3d_m2l_bytes;
    if (x_bytes > 8 * Sx * k * M2L_DIRS)
        x_bytes = 8 * Sx * k * M2L_DIRS;
    int64_t eval_off[8];
    /* the dense M2L matrices: as the degrees are, or whole where the size rule may pick them
     * (fmk_cuda_fmm3d_m2l_trunc_min: the degrees follow the tree's size) */
    const int64_t m2l_rows = s->m2l_min > 0 && s->m2l_f > 0 ? (int64_t)M2L_DIRS * Sx : s->m2l_roff[M2L_DIRS];
    const int64_t bytes[7] = {24 * (np > 0 ? np : 1),
                              (int64_t)box_bytes,
                              8 * o.total,
                              fmk_cuda_tree3d_first_bytes(np, s->leaf_size),
                              fmk_cuda_fmm3d_geo_arena_bytes(np, ns, plan->self, k, s->cfg.tb),
                              dense ? 8 * align32(m2l_rows * Sx) : 0,
                              eval_layout(S, Sx, k, k, dense ? x_bytes : 0, nt, 8 * (int64_t)M2L_DIRS, eval_off)};
    int64_t off[7], total = 0;
    for (int i = 0; i < 7; i++)
        off[i] = total, total += (bytes[i] + 255) / 256 * 256;
    fmk_status st = put(plan, s, &s->d_block, NULL, (size_t)total, "the FMM's points, operators and buffers",
                        plan_total(plan));
    if (st != FMK_OK)
        return st;
    char *b = (char *)s->d_block;
    s->cap_block = (size_t)total;
    s->d_pts = (double *)(b + off[0]), s->cap_pts = (size_t)bytes[0];
    if (box_bytes)
        s->d_box = b + off[1], s->cap_box = box_bytes;
    s->d_ops = (double *)(b + off[2]);
    s->tree.d_arena = b + off[3], s->tree.arena_bytes = (size_t)bytes[3], s->tree.arena_lent = 1;
    s->g.arena = b + off[4], s->g.arena_bytes = (size_t)bytes[4], s->g.arena_used = 0, s->g.arena_lent = 1;
    if (dense)
        s->d_m2l = (double *)(b + off[5]), s->cap_m2l = (size_t)bytes[5];
    s->d_eval = b + off[6], s->cap_eval = (size_t)bytes[6];
    if (dense && fmk_cuda_fmm3d_blas_at == 0)
        st = ensure_blas(plan, s);
    s->setup_time[0] += fmk_time_now() - t0;
    return st;
}

/* The engine's state for the plan's points: in_device, mapped on the device already in the
 * state's d_pts (points_device), else from the plan's host copies. The plan's device is
 * current. On failure the plan holds no state. */
fmk_status build_state(fmk_plan *plan, int on_device)
{
    if (plan->opts.precision == FMK_PRECISION_FP32 && plan->eps < 1e-5) {
        fmm_release(plan);
        return fmk_error_set(plan, FMK_ERR_ARG,
                             "method fmm in fp32 takes eps >= 1e-5 (eps = %g); use precision fp64",
                             plan->eps);
    }
    /* the state of the plan's previous points (set_points_device keeps it): its events,
     * streams, cuBLAS handle, tree workspace, matrices and buffers serve again */
    fmm_gpu *s = (fmm_gpu *)plan->state;
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    const int64_t np = plan->self ? ns : ns + nt;
    fmk_status st = FMK_OK;
    if (!s) {
        st = new_state(plan, &s);
        if (st == FMK_OK)
            st = state_block(plan, s, np, 0);
    }
    if (s && !s->fresh)
        s->setup_time[0] = 0;
    if (st == FMK_OK && !on_device) { /* the mapped host points, sources then targets */
        st = grow(plan, s, (void **)&s->d_pts, &s->cap_pts, 24 * (size_t)(np > 0 ? np : 1), "the points",
                  plan_total(plan));
        cudaError_t err = cudaSuccess;
        if (st == FMK_OK)
            err = cudaMemcpy(s->d_pts, plan->sources, 24 * (size_t)ns, cudaMemcpyHostToDevice);
        if (st == FMK_OK && err == cudaSuccess && !plan->self)
            err = cudaMemcpy(s->d_pts + 3 * ns, plan->targets, 24 * (size_t)nt, cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            st = fmk_cuda_fail(plan, err, "cudaMemcpy (points to the GPU)");
    }
    if (st == FMK_OK)
        st = setup_on_device(plan, s, s->d_pts);
    if (st != FMK_OK) {
        fmm_release(plan);
        return st;
    }
    s->fresh = 0;
    plan->state_bytes_device = s->bytes + s->g.bytes + s->tree.bytes;
    plan->info.order = s->order;
    plan->info.levels = s->levels;
    plan->info.leaf_size = s->leaf_size;
    plan->info.phase_time[FMK_PHASE_TREE] = s->tree_time;
    return FMK_OK;
}

fmk_status fmm_setup(fmk_plan *plan)
{
    fmk_status st = too_many(plan, plan->n_sources + (plan->self ? 0 : plan->n_targets));
    int prev;
    if (st == FMK_OK)
        st = fmk_cuda_enter(plan, plan->opts.device, &prev);
    if (st != FMK_OK)
        return st;
    st = build_state(plan, 0);
    fmk_cuda_leave(plan->opts.device, prev);
    return st;
}

/* Caller coordinates to the frame's, sources then targets into out (np * 3 doubles), rounded
 * as plan.c's map_points (no fused multiply-add), so that device and host points give the
 * same mapped points. */
__global__ void k_map_points(int64_t ns, const double *__restrict__ src, int64_t nt,
                             const double *__restrict__ trg, double cx, double cy, double cz,
                             double inv, double *__restrict__ out)
{
    const int64_t n = 3 * (ns + nt);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const double x = i < 3 * ns ? src[i] : trg[i - 3 * ns];
        const int k = (int)(i % 3);
        const double c = k == 0 ? cx : k == 1 ? cy : cz;
        out[i] = __dadd_rn(1.5, __dmul_rn(__dadd_rn(x, -c), inv));
    }
}

/* set_points_device (the plan's points already dropped, its device current): finiteness and
 * bounding box by one CUB reduction, the frame, the points mapped on the GPU, then the state
 * as from host points; the host never holds the points. A fresh plan makes its state first, its
 * one allocation holding the points and the reduction's workspace. */
fmk_status points_device(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt, const double *d_t)
{
    const int self = d_t == NULL;
    const int64_t n_box = self ? 0 : nt;
    if (self)
        nt = ns;
    const int64_t np = ns + n_box;
    fmk_status st = too_many(plan, np);
    if (st != FMK_OK)
        return st;
    plan->self = self;
    plan->n_sources = ns, plan->n_targets = nt;
    const long long total = plan_total(plan);
    size_t temp_bytes = 0;
    double lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
    int64_t bad = -1;
    cudaError_t err = fmk_cuda_bounding_box(3, ns, d_s, n_box, d_t, NULL, &temp_bytes, NULL, lo, hi, &bad);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cub::DeviceReduce::TransformReduce (workspace query)");
    const size_t box_off = (temp_bytes + 255) / 256 * 256, box_bytes = box_off + fmk_cuda_box_bytes();
    /* the mapped points' buffer first: a size the GPU cannot hold fails before any read; the
     * plan's state from its previous points (fmm_set_points_device) lends its buffers (on
     * failure the caller drops the state) */
    fmm_gpu *s = (fmm_gpu *)plan->state;
    if (!s && (st = new_state(plan, &s)) == FMK_OK)
        st = state_block(plan, s, np, box_bytes);
    if (st == FMK_OK)
        st = grow(plan, s, (void **)&s->d_pts, &s->cap_pts, 24 * (size_t)(np > 0 ? np : 1), "the points", total);
    if (st == FMK_OK)
        st = grow(plan, s, &s->d_box, &s->cap_box, box_bytes, "the bounding-box workspace", total);
    if (st == FMK_OK) {
        err = fmk_cuda_bounding_box(3, ns, d_s, n_box, d_t, s->d_box, &temp_bytes, (char *)s->d_box + box_off,
                                    lo, hi, &bad);
        if (err != cudaSuccess)
            st = fmk_cuda_fail(plan, err, "cub::DeviceReduce::TransformReduce (bounding box)");
    }
    if (st == FMK_OK && bad >= 0)
        st = fmk_error_set(plan, FMK_ERR_NONFINITE, "%s[%lld] is not finite; points must be finite",
                           bad < ns ? "sources" : "targets", (long long)(bad < ns ? bad : bad - ns));
    fmk_frame frame;
    if (st == FMK_OK)
        st = fmk_plan_frame_from_box(plan, lo, hi, &frame);
    if (st == FMK_OK && np > 0) {
        const int64_t blocks = (3 * np + 255) / 256;
        k_map_points<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256>>>(
            ns, d_s, n_box, d_t, frame.center[0], frame.center[1], frame.center[2], 1.0 / frame.width, s->d_pts);
        if ((err = cudaGetLastError()) != cudaSuccess)
            st = fmk_cuda_fail(plan, err, "the point mapping kernel");
    }
    if (st != FMK_OK)
        return st;
    plan->frame = frame;
    st = build_state(plan, 1);
    if (st == FMK_OK)
        plan->has_points = 1;
    return st;
}

fmk_status fmm_set_points_device(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                                 const double *d_t)
{
    /* the previous points' state is kept through the drop (reuses_state: its buffers serve
     * again, repeated calls allocate little); on failure the plan holds no state and no points */
    return fmk_cuda_set_points_device(plan, ns, d_s, nt, d_t, points_device);
}

/* Blocks per box of a point pass over at most n points: passes of BLOCK points spread over
 * blocks (up to 8), so that a few thousand leaves still fill the GPU in many waves (a block
 * per leaf left the last of ~3 waves mostly idle). */
unsigned split_for(int64_t n)
{
    const int64_t y = (n + BLOCK - 1) / BLOCK;
    return (unsigned)(y < 1 ? 1 : y > 8 ? 8 : y);
}

/* P2M by column groups at order P (k_p2m_cols): a block per leaf, more only where leaves are
 * large (a block per 1024 sources of the leaf size, up to 8) */
template <int P> void launch_p2m_cols(fmm_gpu *s)
{
    void (*k)(int, tabs, const int32_t *, const real4d *, const int32_t *, const int32_t *, const real4d *,
              double *) = fmk_cuda_fmm3d_point_cols == 2 ? k_p2m_cols<P, 2> : k_p2m_cols<P, 1>;
    const int64_t y = (s->leaf_size + 1023) / 1024;
    const unsigned split = (unsigned)(y < 1 ? 1 : y > 8 ? 8 : y);
    k<<<dim3((unsigned)s->g.n_leaves_src, split), BLOCK, 0, s->stream[0]>>>(
        s->S, s->tb, s->g.d_leaves_src, s->g.d_cube, s->g.d_sb, s->g.d_sn, s->g.d_src, s->d_M);
}

/* P2M by column groups where it is made for order p (false: not) */
bool p2m_cols(fmm_gpu *s)
{
    if (!fmk_cuda_fmm3d_point_cols)
        return false;
    switch (s->order) {
    case 4: launch_p2m_cols<4>(s); return true;
    case 6: launch_p2m_cols<6>(s); return true;
    case 8: launch_p2m_cols<8>(s); return true;
    case 11: launch_p2m_cols<11>(s); return true;
    case 12: launch_p2m_cols<12>(s); return true;
    case 14: launch_p2m_cols<14>(s); return true;
    case 16: launch_p2m_cols<16>(s); return true;
    case 18: launch_p2m_cols<18>(s); return true;
    default: return false;
    }
}

/* L2P's records fit the 48 KB of shared memory a block gets without asking to this order */
const int L2P_REC_MAX_ORDER = 30;

template <int NH>
void launch_point_ops(fmm_gpu *s, int nt, int which)
{
    const int p = s->order, S = s->S;
    if (which == 0 && s->g.n_leaves_src > 0 && !p2m_cols(s))
        k_p2e<<<dim3((unsigned)s->g.n_leaves_src, split_for(s->leaf_size)), BLOCK, 8 * S, s->stream[0]>>>(
            p, S, s->tb, s->g.d_leaves_src, NULL, NULL, s->g.d_cube, s->g.d_sb, s->g.d_sn, s->g.d_src, s->d_M);
    if (which == 1 && s->g.n_xnodes > 0)
        k_p2e<<<(unsigned)s->g.n_xnodes, BLOCK, 8 * S, s->stream[0]>>>(p, S, s->tb, s->g.d_xnodes, s->g.d_x_begin, s->g.d_x,
                                                         s->g.d_cube, s->g.d_sb, s->g.d_sn, s->g.d_src, s->d_L);
    const int recs = fmk_cuda_fmm3d_point_cols && p <= L2P_REC_MAX_ORDER;
    const size_t l2p_smem = recs ? 8 * (size_t)L2P_REC * ((p + 1) * (p + 2) / 2) : 8 * (size_t)S;
    if (which == 2 && s->g.n_leaves_trg > 0)
        k_l2p_m2p<NH><<<(unsigned)s->g.n_leaves_trg, 64, l2p_smem, s->stream[0]>>>(p, S, nt, recs, s->tb, s->g.d_leaves_trg, s->g.d_level,
                                                         s->g.d_cube, s->g.d_tb, s->g.d_tn, s->g.d_w_begin, s->g.d_w,
                                                         s->g.d_trg, s->d_M, s->d_L, s->d_res);
}

void point_ops(fmm_gpu *s, int nt, int which)
{
    /* harmonics to degree p + 1 per thread */
    if (s->order <= 12)
        launch_point_ops<105>(s, nt, which);
    else if (s->order <= 24)
        launch_point_ops<351>(s, nt, which);
    else if (s->order <= 32)
        launch_point_ops<595>(s, nt, which);
    else if (s->order <= 44)
        launch_point_ops<1081>(s, nt, which);
    else
        launch_point_ops<1953>(s, nt, which);
    static_assert(FMM_GPU_MAX_ORDER <= 60, "M2P's harmonics: (p + 2)(p + 3) / 2 <= 1953");
}

/* Tiles [first, end) of the translation kernel with matrices T (cube: M2L's scaling). */
template <int RPT, int TB>
cudaError_t launch_tiles(fmm_gpu *s, int64_t first, int64_t end, const double *T, const real4d *cube,
                         const double *in, double *out, unsigned split)
{
    const size_t smem = 8 * (size_t)TB * s->S;
    cudaError_t err = cudaFuncSetAttribute(k_tiles<RPT, TB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)smem);
    if (err == cudaSuccess && end > first) {
        k_tiles<RPT, TB><<<dim3((unsigned)(end - first), split), M2L_THREADS, smem, s->stream[0]>>>(
            s->S, (int32_t)first, s->g.d_tile_nodes, s->g.d_tile_begin, s->g.d_tile_slot, s->g.d_tile_src, T, cube, in,
            out);
        err = cudaGetLastError();
    }
    return err;
}

cudaError_t tiles(fmm_gpu *s, int64_t first, int64_t end, const double *T, const real4d *cube,
                  const double *in, double *out, int split_entries)
{
    /* a level with fewer tiles than two blocks per SM: each tile's entries over up to 8 blocks */
    unsigned split = 1;
    const int64_t n = end - first, want = 2 * (int64_t)s->sms;
    if (split_entries && n > 0 && n < want)
        split = (unsigned)((want + n - 1) / n > 8 ? 8 : (want + n - 1) / n);
    switch (s->cfg.rpt) {
    case 1: return launch_tiles<1, 32>(s, first, end, T, cube, in, out, split);
    case 2: return launch_tiles<2, 32>(s, first, end, T, cube, in, out, split);
    case 4: return launch_tiles<4, 16>(s, first, end, T, cube, in, out, split);
    case 8: return launch_tiles<8, 8>(s, first, end, T, cube, in, out, split);
    case 16: return launch_tiles<16, 4>(s, first, end, T, cube, in, out, split);
    default: return launch_tiles<32, 2>(s, first, end, T, cube, in, out, split);
    }
}

/* P2P on stream st into d_near: the U lists at the leaves (sources = targets in fp64: the rest
 * rows, then the leaf pairs both ways; the first launch writes every target's sums), then the X
 * entries done directly (Y lists, atomic adds). */
/* The P2P of leaf pairs' points per lane (p2p below) and the points a full pass holds: 1 below
 * leaf size 256; uniform points 4 (two groups of two warps, 256 points a pass: the 2^20 cube's
 * leaves), or with the root fitted 6 above 140 points per leaf (192 a pass), else 5 (160), but
 * 4 in two groups above 205 (4e5 and 6e5 points in leaves of ~231 and ~219: eval 4.17 and 5.46
 * ms against 4.85 and 5.80 at 6 per lane, whose second pass is then a full one);
 * other points 5 (the 2^20 Plummer sphere: eval 15.1 ms against 15.7 at 4, 15.3 at 6 and 16.1
 * at 3; docs: measured) */
int pairs_rt(const fmm_gpu *s)
{
    return fmk_cuda_fmm3d_p2p_pairs >= 0 ? fmk_cuda_fmm3d_p2p_pairs
           : s->leaf_size < 256          ? 1
           : s->fit_mean > 205           ? 4
           : s->fit_mean > 140           ? 6
           : s->fit_mean > 0             ? 5
           : s->uniform                  ? 4
                                         : 5;
}
int pairs_cap(const fmm_gpu *s)
{
    const int rt = pairs_rt(s);
    return rt == 1 ? BLOCK : rt == 4 && fmk_cuda_fmm3d_p2p_groups == 4 ? 128 : rt == 4 || rt == 2 ? 256 : 32 * rt;
}

template <typename R, int NEWTON> void p2p(fmm_gpu *s, int nt, p2p_scale sc, cudaStream_t st)
{
    const fmk_cuda_fmm3d_geo *g = &s->g;
    /* targets per thread: 1 below leaves of 256 (most leaves then hold 32 points or fewer, and
     * a second register set per thread would be padding), else 4 in two groups of two warps
     * (256 points a pass; 2 per lane, 256 a pass in one group, spent twice the shuffles per pair:
     * P2P 7.40 against 8.03 ms at 2^20 uniform, docs: measured) */
    /* points per lane (pairs_rt): with the root fitted 6 above 140 points per leaf, every warp
     * the same 192 points (2^20 cube, leaves of ~180: P2P 5.2..5.4 ms against 5.8..6.1 at 5 per
     * lane and 5.6..5.8 at 3 in two groups of 192), else 5 (160 points; 2^20 in leaves of ~131:
     * 6.9..7.0 against 7.6..9.1 at 6 and 8.4..8.5 at 4 in passes of 128; docs: measured) */
    const int rt = pairs_rt(s);
    const bool pairs = sizeof(R) == 8 && g->d_ur_begin && rt >= 1 && rt <= 6;
    /* a leaf's own pairs once, in k_p2p_pairs's extra blocks (else both ways in k_p2p) */
    const int self = pairs && fmk_cuda_fmm3d_p2p_self && g->n_leaves_trg > 0;
    if (g->n_leaves_trg > 0) /* the U lists, or with pairs the rest rows (the leaf itself, W) */
        k_p2p<R, NEWTON><<<dim3((unsigned)g->n_leaves_trg, split_for(s->leaf_size)), BLOCK, 0, st>>>(
            nt, 0, self, sc, g->d_leaves_trg, g->d_tb, g->d_tn, g->d_sb, g->d_sn, pairs ? g->d_ur_begin : g->d_u_begin,
            pairs ? g->d_ur : g->d_u, g->d_cube, g->d_src, g->d_trg, s->d_near);
    if (pairs && (g->n_pairs > 0 || self)) {
        /* pairs per block: 8 at small leaves (2^20 uniform, 32-point leaves: P2P 4.00 -> 3.85 ms
         * against 4), else 4 (256-point leaves: 7.68 against 7.82 with 8; docs: measured) */
        int run = fmk_cuda_fmm3d_p2p_run > 0 ? fmk_cuda_fmm3d_p2p_run : s->leaf_size < 256 ? 8 : 4;
        run = run > P2P_RUN_MAX ? P2P_RUN_MAX : run;
        /* ... but at least 16 blocks per multiprocessor while pairs allow: at 2^12 points 28
         * pairs of 512-point leaves in 7 blocks took P2P from 0.15 to 0.8-1.1 ms */
        while (fmk_cuda_fmm3d_p2p_run <= 0 && run > 1 && g->n_pairs < (int64_t)16 * s->sms * run)
            run /= 2;
        const unsigned pair_blocks = (unsigned)((g->n_pairs + run - 1) / run);
        const unsigned blocks = pair_blocks + (self ? (unsigned)g->n_leaves_trg : 0);
        const int tail = fmk_cuda_fmm3d_p2p_tail, unroll = fmk_cuda_fmm3d_p2p_unroll;
        const int ring = fmk_cuda_fmm3d_p2p_ring >= 0 && fmk_cuda_fmm3d_p2p_ring < P2P_RINGS ? fmk_cuda_fmm3d_p2p_ring : 0;
#define FMK_PAIRS(RT, UNR, V)                                                                       \
    k_p2p_pairs<RT, UNR, NEWTON, V><<<blocks, BLOCK, 0, st>>>(nt, g->n_pairs, run, tail, fmk_cuda_fmm3d_p2p_groups, \
                                                              pair_blocks, g->d_leaves_trg, \
                                                              g->d_pairs, g->d_sb, g->d_sn, g->d_src, s->d_near)
        if (rt == 5)
            FMK_PAIRS(5, 2, 7);
        else if (rt == 6 && ring == 3) /* registers free: 2 blocks per multiprocessor */
            FMK_PAIRS(6, 2, 8);
        else if (rt == 6 && unroll == 1)
            FMK_PAIRS(6, 1, 7);
        else if (rt == 6)
            FMK_PAIRS(6, 2, 7);
        else if (rt == 3 && ring == 3)
            FMK_PAIRS(3, 2, 10);
        else if (rt == 3)
            FMK_PAIRS(3, 2, 9);
        else if (rt == 4 && unroll >= 2) {
            switch (ring) {
            case 0: FMK_PAIRS(4, 2, 0); break;
            case 1: FMK_PAIRS(4, 2, 1); break;
            case 2: FMK_PAIRS(4, 2, 2); break;
            case 3: FMK_PAIRS(4, 2, 3); break;
            case 4: FMK_PAIRS(4, 2, 4); break;
            case 5: FMK_PAIRS(4, 2, 5); break;
            default: FMK_PAIRS(4, 2, 6); break;
            }
        } else if (rt == 4)
            FMK_PAIRS(4, 1, 0);
        else if (rt == 1)
            FMK_PAIRS(1, 1, 0);
        else if (unroll >= 8)
            FMK_PAIRS(2, 8, 0);
        else if (unroll >= 4)
            FMK_PAIRS(2, 4, 0);
        else if (unroll == 2)
            FMK_PAIRS(2, 2, 0);
        else
            FMK_PAIRS(2, 1, 0);
#undef FMK_PAIRS
    }
    if (g->n_ynodes > 0)
        k_p2p<R, NEWTON><<<dim3((unsigned)g->n_ynodes, split_for(s->near_max)), BLOCK, 0, st>>>(
            nt, 1, 0, sc, g->d_ynodes, g->d_tb, g->d_tn, g->d_sb, g->d_sn, g->d_y_begin, g->d_y, g->d_cube, g->d_src,
            g->d_trg, s->d_near);
}

/* The near field on stream st, after the charges are in key order (EV_FORK), between the events
 * EV_NEAR and EV_P2P. */
void near_field(fmm_gpu *s, int nt, p2p_scale sc, cudaStream_t st)
{
    cudaStreamWaitEvent(st, s->ev[EV_FORK], 0);
    cudaEventRecord(s->ev[EV_NEAR], st);
    const int newton = fmk_cuda_fmm3d_p2p_newton < 0 ? s->newton_ok : fmk_cuda_fmm3d_p2p_newton;
    if (s->fp32)
        p2p<float, 0>(s, nt, sc, st);
    else if (newton)
        p2p<double, 1>(s, nt, sc, st);
    else
        p2p<double, 0>(s, nt, sc, st);
    cudaEventRecord(s->ev[EV_P2P], st);
}

fmk_status run_eval(fmk_plan *plan, fmm_gpu *s, const double *charges, double *pot, double *grad,
                    int on_device)
{
    const int64_t ns = plan->n_sources, nt = plan->n_targets, k = s->n_nodes;
    const int S = s->S;
    double *phase = plan->info.phase_time;
    cudaError_t err = cudaSuccess;
    if (ns == 0) { /* only the device path gets here */
        if (pot && (err = cudaMemset(pot, 0, 8 * (size_t)nt)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemset (pot)");
        if (grad && (err = cudaMemset(grad, 0, 24 * (size_t)nt)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemset (grad)");
        return FMK_OK;
    }
    const double *d_q = charges;
    double *h_q = NULL, *h_pot = NULL, *h_grad = NULL; /* host evaluations: the device copies */
    if (!on_device) {
        const size_t need = 8 * (size_t)ns + 32 * (size_t)nt;
        const fmk_status st = grow(plan, s, &s->d_host, &s->cap_host, need,
                                   "the charges and results of host arrays", plan_total(plan));
        if (st != FMK_OK)
            return st;
        plan->state_bytes_device = s->bytes + s->g.bytes + s->tree.bytes;
        h_q = (double *)s->d_host, h_pot = h_q + ns, h_grad = h_pot + nt;
        err = cudaMemcpy(h_q, charges, 8 * (size_t)ns, cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (charges to the GPU)");
        d_q = h_q;
    }
    p2p_scale sc = {1, 1, 1};
    if (on_device || s->fp32) { /* plan.c checks host charges; device charges are checked here */
        unsigned long long stats[2];
        err = fmk_cuda_charge_stats(1, ns, d_q, s->d_stats);
        if (err == cudaSuccess)
            err = cudaMemcpy(stats, s->d_stats, sizeof stats, cudaMemcpyDeviceToHost);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, "the charge check kernel");
        double qmax;
        memcpy(&qmax, &stats[1], sizeof qmax);
        if (s->fp32 && qmax > 0) { /* the largest |q| into [1, 2) */
            int ex;
            frexp(qmax, &ex);
            const int e = 1 - ex < 1000 ? 1 - ex : 1000;
            sc.q = ldexp(1.0, e);
        }
        if (s->fp32) {
            sc.pot = FMK_CUDA_LAPLACE32_SCALE / sc.q;
            sc.grad = FMK_CUDA_LAPLACE32_SCALE * FMK_CUDA_LAPLACE32_SCALE / sc.q;
        }
        if (stats[0] != ~0ull) {
            double q = 0;
            err = cudaMemcpy(&q, d_q + stats[0], sizeof q, cudaMemcpyDeviceToHost);
            if (err != cudaSuccess)
                return fmk_cuda_fail(plan, err, "cudaMemcpy (a charge from the GPU)");
            return fmk_error_set(plan, FMK_ERR_NONFINITE, "charges[%lld] is %g; charges must be finite",
                                 (long long)stats[0], q);
        }
    }
    const int grid = 1024;
    /* The near field (P2P) needs only the charges in key order: it runs on the plan's second
     * stream alongside the far field's chain (P2M .. L2P) and writes its own results, which
     * k_results adds to the far field's once both are done (fmk_cuda_fmm3d_overlap 0: one
     * stream, the near field after L2P). */
    const int overlap = fmk_cuda_fmm3d_overlap != 0;
    cudaStream_t fs = s->stream[0], nst = overlap ? s->stream[1] : fs;
    cudaEventRecord(s->ev[EV_START], fs);
    k_charges<<<grid, 256, 0, fs>>>((int)ns, s->g.d_src_order, d_q, s->g.d_src);
    cudaEventRecord(s->ev[EV_FORK], fs);
    if (overlap)
        near_field(s, (int)nt, sc, nst);
    cudaMemsetAsync(s->d_M, 0, 8 * (size_t)S * (size_t)k, fs);
    cudaMemsetAsync(s->d_L, 0, 8 * (size_t)S * (size_t)k, fs);
    ops_wait(s, fs); /* a plan's first eval: the operators of its first set_points */
    point_ops(s, (int)nt, 0); /* P2M */
    cudaEventRecord(s->ev[EV_P2M], fs);
    /* up to level 2 only: M2L, M2P read multipoles from level 2 down (V and W entries are there) */
    for (int lev = s->levels - 2; lev >= 2 && err == cudaSuccess; lev--)
        err = tiles(s, s->g.m2m_first[lev], s->g.m2m_first[lev + 1], s->d_m2m, NULL, s->d_M, s->d_M, 1);
    cudaEventRecord(s->ev[EV_M2M], fs);
    /* M2L: per octant of the sources and run of the directions they reach, X = [T_d0; T_d1;
     * ...] Mp (the matrices stacked, the octant's sources: one GEMM on the tensor cores), then
     * each target box gathers its V entries of the part */
    const int64_t nn = k - s->gemm_first;
    /* a fresh plan's cuBLAS handle here (fmk_cuda_fmm3d_blas_at 1), the GPU busy meanwhile */
    fmk_status bst = FMK_OK;
    if (s->n_m2l_parts > 0 && err == cudaSuccess && (bst = ensure_blas(plan, s)) != FMK_OK)
        err = cudaErrorUnknown;
    if (s->use_rot && err == cudaSuccess) /* high orders: point and shoot, a block per target box */
        err = fmk_cuda_fmm3d_m2l_rot(&s->rot, s->g.n_vnodes, s->g.d_vnodes, s->g.d_v_begin, s->g.d_v,
                                     s->g.d_v_slot, s->g.d_cube, s->d_M, s->d_L, fs);
    const int Sp = s->Sp, Sx = s->Sx;
    if (s->n_m2l_parts > 0) {
        const int64_t n = nn * Sx;
        k_m2l_columns<<<(unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096), 256, 0, fs>>>(
            S, Sp, Sx, nn, s->g.d_m2l_box, s->d_M, s->d_Mp);
    }
    for (int i = 0; i < s->n_m2l_parts && err == cudaSuccess; i++) {
        const fmm_gpu::m2l_part &q = s->m2l_parts[i];
        const int64_t c0 = s->g.m2l_first[q.oct], n_o = s->g.m2l_first[q.oct + 1] - c0;
        const int64_t ldx = q.rows;
        for (int j = q.gemm0; j < q.gemm0 + q.n_gemms; j++) {
            /* a run of one degree: each direction's leading gm.k packed doubles in and out, padded
             * with zeros to gm.size */
            const fmm_gpu::m2l_gemm &gm = s->m2l_gemms[j];
            const double one = 1, zero = 0;
            const cublasStatus_t bs = blas::dgemm(s->blas, CUBLAS_OP_N, CUBLAS_OP_N, gm.n_ranks * gm.size, (int)n_o,
                                                  gm.size, &one, s->d_m2l + s->m2l_roff[gm.rank0],
                                                  s->m2l_roff[M2L_DIRS], s->d_Mp + c0 * Sx, Sx, &zero,
                                                  s->d_X + gm.row, (int)ldx);
            if (bs != CUBLAS_STATUS_SUCCESS) {
                err = cudaErrorUnknown;
                break;
            }
        }
        k_m2l_gather<<<(unsigned)s->g.n_vnodes, M2L_THREADS, 0, fs>>>(
            S, Sp, ldx, q.oct, q.slot_lo, q.slot_hi, s->d_xrow + 2 * q.xrow, s->g.d_vnodes, s->g.d_v_begin, s->g.d_v,
            s->g.d_v_slot, s->g.d_oct, s->g.d_m2l_col, s->g.d_cube, s->d_X, s->d_L);
    }
    if (err == cudaSuccess)
        point_ops(s, (int)nt, 1); /* P2L */
    cudaEventRecord(s->ev[EV_M2L], fs);
    for (int lev = 3; lev < s->levels && err == cudaSuccess; lev++)
        err = tiles(s, s->g.l2l_first[lev], s->g.l2l_first[lev + 1], s->d_l2l, NULL, s->d_L, s->d_L, 0);
    cudaEventRecord(s->ev[EV_L2L], fs);
    if (err == cudaSuccess)
        point_ops(s, (int)nt, 2); /* L2P, M2P */
    cudaEventRecord(s->ev[EV_L2P], fs);
    if (!overlap)
        near_field(s, (int)nt, sc, nst);
    cudaStreamWaitEvent(fs, s->ev[EV_P2P], 0);
    cudaEventRecord(s->ev[EV_JOIN], fs);
    double *p = pot ? (on_device ? pot : h_pot) : NULL;
    double *g = grad ? (on_device ? grad : h_grad) : NULL;
    /* the points were shrunk by 1 / root_side: the sums are root_side (pot) and root_side^2
     * (grad) times the frame's */
    if (err == cudaSuccess) /* nothing reaches the caller's arrays after a failed pass */
        k_results<<<grid, 256, 0, fs>>>((int)nt, s->g.d_trg_order, s->d_res, s->d_near,
                                        plan->frame.pot_scale / s->root_side, p, g);
    cudaEventRecord(s->ev[EV_END], fs);
    if (err == cudaSuccess)
        err = cudaGetLastError();
    if (err != cudaSuccess) /* the near field may still run: no buffer is freed under it */
        cudaStreamSynchronize(nst), cudaStreamSynchronize(fs);
    if (bst != FMK_OK)
        return bst;
    if (err == cudaSuccess)
        err = cudaEventSynchronize(s->ev[EV_END]);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the FMM kernels");
    ops_time(s);
    /* each phase from its events on its own stream: with the near field alongside, the far
     * field's phases and P2P each take longer than alone and overlap (docs/fmm3d_gpu.md) */
    static const struct {
        int phase, from, to;
    } ph[] = {{FMK_PHASE_P2M, EV_START, EV_P2M}, {FMK_PHASE_M2M, EV_P2M, EV_M2M},
              {FMK_PHASE_M2L, EV_M2M, EV_M2L},   {FMK_PHASE_L2L, EV_M2L, EV_L2L},
              {FMK_PHASE_L2P, EV_L2L, EV_L2P},   {FMK_PHASE_P2P, EV_NEAR, EV_P2P},
              {FMK_PHASE_DOWNLOAD, EV_JOIN, EV_END}};
    for (size_t i = 0; i < sizeof ph / sizeof ph[0]; i++) {
        float ms = 0;
        cudaEventElapsedTime(&ms, s->ev[ph[i].from], s->ev[ph[i].to]);
        phase[ph[i].phase] = 1e-3 * ms;
    }
    phase[FMK_PHASE_UPLOAD] = 0;
    if (!on_device) {
        const double t2 = fmk_time_now();
        if (pot && (err = cudaMemcpy(pot, h_pot, 8 * (size_t)nt, cudaMemcpyDeviceToHost)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (potential from the GPU)");
        if (grad && (err = cudaMemcpy(grad, h_grad, 24 * (size_t)nt, cudaMemcpyDeviceToHost)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (gradient from the GPU)");
        phase[FMK_PHASE_DOWNLOAD] += fmk_time_now() - t2;
    }
    phase[FMK_PHASE_TREE] = s->tree_time;
    return FMK_OK;
}

fmk_status fmm_eval(fmk_plan *plan, const double *charges, double *pot, double *grad, int on_device)
{
    fmm_gpu *s = (fmm_gpu *)plan->state;
    int prev;
    fmk_status st = fmk_cuda_enter(plan, s->device, &prev);
    if (st != FMK_OK)
        return st;
    st = run_eval(plan, s, charges, pot, grad, on_device);
    fmk_cuda_leave(s->device, prev);
    return st;
}

fmk_status fmm_check_opts(fmk_opts *o, fmk_kernel kernel, int dim, double eps, fmk_info *info)
{
    (void)dim, (void)info;
    fmk_status st = fmk_fmm3d_check_eps(o, eps);
    if (st != FMK_OK)
        return st;
    if (kernel != FMK_KERNEL_LAPLACE)
        return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                             "method fmm on the GPU is not available for kernel %s (only laplace)",
                             fmk_kernel_name(kernel));
    if (o->order > FMM_GPU_MAX_ORDER)
        return fmk_error_set(NULL, FMK_ERR_ARG, "order %d is above the GPU FMM's largest, %d",
                             (int)o->order, FMM_GPU_MAX_ORDER);
    return FMK_OK;
}

} /* namespace */

/* For the benchmark: the M2L work of a plan's lists: V pairs, the box-direction products the
 * GEMMs compute (directions times boxes from level 2 down) in whole (Sp x Sp) products' worth
 * of flops (fewer with the far directions truncated), and the M2L's (packed) doubles per
 * expansion, Sp. */
extern "C" fmk_status fmk_cuda_fmm3d_m2l_work(const fmk_plan *plan, int64_t *pairs,
                                              int64_t *tile_pairs, int *stride)
{
    if (!plan || plan->engine != &fmk_engine_fmm_cuda || !plan->state)
        return FMK_ERR_STATE;
    const fmm_gpu *s = (const fmm_gpu *)plan->state;
    *pairs = s->g.n_v;
    *tile_pairs = (int64_t)(s->m2l_flops / (2.0 * s->Sp * s->Sp) + 0.5);
    *stride = s->Sp;
    return FMK_OK;
}

/* For the benchmark and the tests: the M2L of a plan's last set_points: its GEMM columns
 * (boxes from level 2 down), GEMMs, and whether the operators are whole (1: the size rule, or
 * no truncation) or truncated (0). */
extern "C" fmk_status fmk_cuda_fmm3d_m2l_shape(const fmk_plan *plan, int64_t *boxes, int *gemms, int *whole)
{
    if (!plan || plan->engine != &fmk_engine_fmm_cuda || !plan->state)
        return FMK_ERR_STATE;
    const fmm_gpu *s = (const fmm_gpu *)plan->state;
    *boxes = s->n_nodes - s->gemm_first;
    *gemms = s->n_m2l_gemms;
    *whole = s->m2l_whole;
    return FMK_OK;
}

/* For the benchmark: the P2P of leaf pairs of a plan's last set_points, counted on the host
 * (copies of the pairs and the leaves' counts): st[0] pairs, [1] leaves with targets, [2] the
 * largest leaf, [3] leaves of more points than a full pass holds, [4] the pass slots the
 * kernel runs (the held leaf's passes, tail passes of 32 included, times the partner's
 * points), [5] the pairs' interactions (n_b n_a), [6] the most pairs one leaf holds, [7] the
 * points a full pass holds. FMK_ERR_STATE when the plan has no pairs; FMK_ERR_NOMEM (host
 * copies) or FMK_ERR_DEVICE (a copy failed), st untouched. */
extern "C" fmk_status fmk_cuda_fmm3d_p2p_stats(const fmk_plan *plan, int64_t st[8])
{
    if (!plan || plan->engine != &fmk_engine_fmm_cuda || !plan->state)
        return FMK_ERR_STATE;
    const fmm_gpu *s = (const fmm_gpu *)plan->state;
    const fmk_cuda_fmm3d_geo *g = &s->g;
    if (!g->d_pairs || g->n_pairs <= 0)
        return FMK_ERR_STATE;
    const int64_t np = g->n_pairs, nn = s->n_nodes;
    int32_t *pr = (int32_t *)malloc(8 * (size_t)np), *sn = (int32_t *)malloc(4 * (size_t)nn);
    int32_t *held = (int32_t *)calloc((size_t)nn, 4), *lv = (int32_t *)malloc(4 * (size_t)(g->n_leaves_trg + 1));
    fmk_status rc = !pr || !sn || !held || !lv ? FMK_ERR_NOMEM : FMK_OK;
    if (rc == FMK_OK && (cudaMemcpy(pr, g->d_pairs, 8 * (size_t)np, cudaMemcpyDeviceToHost) != cudaSuccess ||
                         cudaMemcpy(sn, g->d_sn, 4 * (size_t)nn, cudaMemcpyDeviceToHost) != cudaSuccess ||
                         cudaMemcpy(lv, g->d_leaves_trg, 4 * (size_t)g->n_leaves_trg, cudaMemcpyDeviceToHost) !=
                             cudaSuccess))
        rc = FMK_ERR_DEVICE;
    if (rc == FMK_OK) {
        const int cap = pairs_cap(s), tail = fmk_cuda_fmm3d_p2p_tail;
        memset(st, 0, 8 * sizeof st[0]);
        st[0] = np, st[1] = g->n_leaves_trg, st[7] = cap;
        for (int64_t i = 0; i < g->n_leaves_trg; i++) {
            const int n = sn[lv[i]];
            st[2] = n > st[2] ? n : st[2];
            st[3] += n > cap;
        }
        for (int64_t e = 0; e < np; e++) {
            const int b = pr[2 * e], a = pr[2 * e + 1];
            int slots = 0;
            for (int left = sn[b]; left > 0;) {
                const int pass = tail == 2 && left <= 32 ? 32 : cap;
                slots += pass, left -= pass;
            }
            st[4] += (int64_t)slots * sn[a], st[5] += (int64_t)sn[b] * sn[a];
            held[b]++;
            st[6] = held[b] > st[6] ? held[b] : st[6];
        }
    }
    free(pr), free(sn), free(held), free(lv);
    return rc;
}

/* For the benchmark: the leaves of a plan's last set_points that are not on the deepest level
 * or hold fewer than 32 points, each on a line to f (node, level, sources, pairs held and
 * partnered, its rest row's boxes and points, its Y row's boxes and points), then the lists'
 * totals. */
extern "C" fmk_status fmk_cuda_fmm3d_leaf_report(const fmk_plan *plan, FILE *f)
{
    if (!plan || plan->engine != &fmk_engine_fmm_cuda || !plan->state || !f)
        return FMK_ERR_STATE;
    const fmm_gpu *s = (const fmm_gpu *)plan->state;
    const fmk_cuda_fmm3d_geo *g = &s->g;
    const int64_t nn = s->n_nodes, nl = g->n_leaves_trg, np = g->d_pairs ? g->n_pairs : 0;
    int32_t *sn = (int32_t *)malloc(4 * (size_t)nn), *lv = (int32_t *)malloc(4 * (size_t)(nl + 1));
    int32_t *urb = (int32_t *)malloc(4 * (size_t)(nn + 1)), *ur = (int32_t *)malloc(4 * (size_t)(g->n_ur + 1));
    int32_t *yb = (int32_t *)malloc(4 * (size_t)(nn + 1)), *y = (int32_t *)malloc(4 * (size_t)(g->n_y + 1));
    int32_t *pr = (int32_t *)malloc(8 * (size_t)(np + 1)), *held = (int32_t *)calloc((size_t)nn, 4);
    int32_t *part = (int32_t *)calloc((size_t)nn, 4);
    int8_t *lev = (int8_t *)malloc((size_t)nn);
    fmk_status rc = !sn || !lv || !urb || !ur || !yb || !y || !pr || !held || !part || !lev ? FMK_ERR_NOMEM : FMK_OK;
    if (rc == FMK_OK && (cudaMemcpy(sn, g->d_sn, 4 * (size_t)nn, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(lv, g->d_leaves_trg, 4 * (size_t)nl, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(lev, g->d_level, (size_t)nn, cudaMemcpyDeviceToHost) != cudaSuccess ||
        (g->d_ur_begin && cudaMemcpy(urb, g->d_ur_begin, 4 * (size_t)(nn + 1), cudaMemcpyDeviceToHost) != cudaSuccess) ||
        (g->d_ur && g->n_ur > 0 && cudaMemcpy(ur, g->d_ur, 4 * (size_t)g->n_ur, cudaMemcpyDeviceToHost) != cudaSuccess) ||
        (g->d_y_begin && cudaMemcpy(yb, g->d_y_begin, 4 * (size_t)(nn + 1), cudaMemcpyDeviceToHost) != cudaSuccess) ||
        (g->d_y && g->n_y > 0 && cudaMemcpy(y, g->d_y, 4 * (size_t)g->n_y, cudaMemcpyDeviceToHost) != cudaSuccess) ||
        (np > 0 && cudaMemcpy(pr, g->d_pairs, 8 * (size_t)np, cudaMemcpyDeviceToHost) != cudaSuccess)))
        rc = FMK_ERR_DEVICE;
    if (rc == FMK_OK) {
        int deepest = 0;
        for (int64_t i = 0; i < nl; i++)
            deepest = lev[lv[i]] > deepest ? lev[lv[i]] : deepest;
        for (int64_t e = 0; e < np; e++)
            held[pr[2 * e]]++, part[pr[2 * e + 1]]++;
        for (int64_t i = 0; i < nl; i++) {
            const int b = lv[i];
            if (lev[b] == deepest && sn[b] >= 32)
                continue;
            int64_t rs = 0, ys = 0;
            const int64_t nr = g->d_ur_begin ? urb[b + 1] - urb[b] : 0, ny = g->d_y_begin ? yb[b + 1] - yb[b] : 0;
            for (int64_t e = 0; e < nr; e++)
                rs += sn[ur[urb[b] + e]];
            for (int64_t e = 0; e < ny; e++)
                ys += sn[y[yb[b] + e]];
            fprintf(f, "  leaf %d: level %d (deepest %d), %d points, pairs held %d partnered %d, rest row %lld boxes "
                       "%lld points, Y row %lld boxes %lld points\n",
                    b, lev[b], deepest, sn[b], held[b], part[b], (long long)nr, (long long)rs, (long long)ny, (long long)ys);
        }
        fprintf(f, "  totals: nodes %lld, leaves %lld, pairs %lld, rest entries %lld, W %lld, X %lld, Y %lld in %lld boxes\n",
                (long long)nn, (long long)nl, (long long)np, (long long)g->n_ur, (long long)g->n_w, (long long)g->n_x,
                (long long)g->n_y, (long long)g->n_ynodes);
    }
    free(sn), free(lv), free(urb), free(ur), free(yb), free(y), free(pr), free(held), free(part), free(lev);
    return rc;
}

/* For the benchmark: at order p (from eps) with the knobs as they are now
 * (fmk_cuda_fmm3d_m2l_trunc, _classes), the dense M2L's degrees of the 189 directions one
 * octant's sources reach: count[q] of degree q truncated, count_cls[q] after the degree classes
 * (q = 0 .. p, p + 1 entries each), and the GEMM flops of those directions over the whole
 * (padded, packed) operators' (flops[0]: truncated, flops[1]: classes). */
extern "C" fmk_status fmk_cuda_fmm3d_m2l_degrees(int p, int *count, int *count_cls, double flops[2])
{
    if (p < 0 || p >= FMM_GPU_MAX_ORDER)
        return FMK_ERR_ARG;
    int8_t deg[FMK_FMM3D_NDIR];
    m2l_degrees(p, fmk_cuda_fmm3d_m2l_trunc, deg);
    m2l_octant_degrees(p, deg, count);
    m2l_classes(p, fmk_cuda_fmm3d_m2l_classes, deg);
    m2l_octant_degrees(p, deg, count_cls);
    double f0 = 0, f1 = 0, whole = 0;
    for (int q = 0; q <= p; q++)
        f0 += count[q] * m2l_cost(q), f1 += count_cls[q] * m2l_cost(q), whole += count[q] * m2l_cost(p);
    flops[0] = f0 / whole, flops[1] = f1 / whole;
    return FMK_OK;
}

/* For the benchmark: set_points' parts in seconds: start (events, cuBLAS handle), tree (points
 * to the GPU and the octree), lists (fmm3d_lists.cu), operators (their host part and the wait
 * for them at the end), buffers; then the list build's stages (fmk_cuda_fmm3d_geo's
 * stage_time); then the GPU time of the M2L matrices' kernel when this set_points built them
 * (else 0). */
extern "C" fmk_status fmk_cuda_fmm3d_setup_times(const fmk_plan *plan, double t[12])
{
    if (!plan || plan->engine != &fmk_engine_fmm_cuda || !plan->state)
        return FMK_ERR_STATE;
    const fmm_gpu *s = (const fmm_gpu *)plan->state;
    memcpy(t, s->setup_time, 5 * sizeof(double));
    memcpy(t + 5, s->g.stage_time, 6 * sizeof(double));
    t[11] = s->setup_time[5];
    return FMK_OK;
}

/* For the tests: the lists the plan built on the GPU, in the host's form (fmm3d.h; V entries
 * with their directions, X and the X entries done as P2P together, U with the W entries done as
 * P2P). Free with fmk_fmm3d_lists_free. */
extern "C" fmk_status fmk_cuda_fmm3d_lists(fmk_plan *plan, fmk_fmm3d_lists *l)
{
    memset(l, 0, sizeof *l);
    if (!plan || plan->engine != &fmk_engine_fmm_cuda || !plan->state)
        return FMK_ERR_STATE;
    const fmm_gpu *s = (const fmm_gpu *)plan->state;
    const fmk_cuda_fmm3d_geo *g = &s->g;
    const int64_t k = g->n_nodes;
    int prev;
    fmk_status st = fmk_cuda_enter(plan, s->device, &prev);
    if (st != FMK_OK)
        return st;
    real4d *cube = hmalloc<real4d>((size_t)k);
    int32_t *beg = hmalloc<int32_t>(5 * (size_t)(k + 1));
    int32_t *u = hmalloc<int32_t>((size_t)g->n_u), *v = hmalloc<int32_t>((size_t)g->n_v);
    int32_t *w = hmalloc<int32_t>((size_t)g->n_w), *x = hmalloc<int32_t>((size_t)g->n_x);
    int32_t *y = hmalloc<int32_t>((size_t)g->n_y);
    int16_t *vs = hmalloc<int16_t>((size_t)g->n_v);
    l->n_nodes = k;
    l->center = hmalloc<double>(3 * (size_t)k), l->side = hmalloc<double>((size_t)k);
    l->u_begin = hmalloc<int64_t>((size_t)k + 1), l->v_begin = hmalloc<int64_t>((size_t)k + 1);
    l->w_begin = hmalloc<int64_t>((size_t)k + 1), l->x_begin = hmalloc<int64_t>((size_t)k + 1);
    l->u = hmalloc<int32_t>((size_t)g->n_u), l->v = hmalloc<int32_t>((size_t)g->n_v);
    l->v_dir = hmalloc<int16_t>((size_t)g->n_v), l->w = hmalloc<int32_t>((size_t)g->n_w);
    l->x = hmalloc<int32_t>((size_t)(g->n_x + g->n_y));
    if (!cube || !beg || !u || !v || !w || !x || !y || !vs || !l->center || !l->side || !l->u_begin ||
        !l->v_begin || !l->w_begin || !l->x_begin || !l->u || !l->v || !l->v_dir || !l->w || !l->x) {
        st = fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the lists");
    } else {
        const struct {
            void *h;
            const void *d;
            size_t bytes;
        } cp[] = {{cube, g->d_cube, 32 * (size_t)k},
                  {beg, g->d_u_begin, 4 * (size_t)(k + 1)},
                  {beg + (k + 1), g->d_v_begin, 4 * (size_t)(k + 1)},
                  {beg + 2 * (k + 1), g->d_w_begin, 4 * (size_t)(k + 1)},
                  {beg + 3 * (k + 1), g->d_x_begin, 4 * (size_t)(k + 1)},
                  {beg + 4 * (k + 1), g->d_y_begin, 4 * (size_t)(k + 1)},
                  {u, g->d_u, 4 * (size_t)g->n_u},
                  {v, g->d_v, 4 * (size_t)g->n_v},
                  {vs, g->d_v_slot, 2 * (size_t)g->n_v},
                  {w, g->d_w, 4 * (size_t)g->n_w},
                  {x, g->d_x, 4 * (size_t)g->n_x},
                  {y, g->d_y, 4 * (size_t)g->n_y}};
        for (size_t i = 0; i < sizeof cp / sizeof cp[0] && st == FMK_OK; i++) {
            const cudaError_t err = cudaMemcpy(cp[i].h, cp[i].d, cp[i].bytes, cudaMemcpyDeviceToHost);
            if (err != cudaSuccess)
                st = fmk_cuda_fail(plan, err, "cudaMemcpy (the lists)");
        }
    }
    if (st == FMK_OK) {
        const int32_t *ub = beg, *vb = beg + (k + 1), *wb = beg + 2 * (k + 1), *xb = beg + 3 * (k + 1);
        const int32_t *yb = beg + 4 * (k + 1);
        int64_t nx = 0;
        for (int64_t b = 0; b <= k; b++) {
            l->u_begin[b] = ub[b], l->v_begin[b] = vb[b], l->w_begin[b] = wb[b], l->x_begin[b] = nx;
            if (b == k)
                break;
            l->center[3 * b] = cube[b].x, l->center[3 * b + 1] = cube[b].y, l->center[3 * b + 2] = cube[b].z;
            l->side[b] = cube[b].w;
            for (int32_t e = xb[b]; e < xb[b + 1]; e++)
                l->x[nx++] = x[e];
            for (int32_t e = yb[b]; e < yb[b + 1]; e++)
                l->x[nx++] = y[e];
        }
        memcpy(l->u, u, 4 * (size_t)g->n_u), memcpy(l->v, v, 4 * (size_t)g->n_v);
        memcpy(l->w, w, 4 * (size_t)g->n_w);
        for (int64_t e = 0; e < g->n_v; e++) {
            l->v_dir[e] = (int16_t)g->dir_of_slot[vs[e]];
            l->dir_used[l->v_dir[e]] = 1;
        }
        l->n_u = g->n_u, l->n_v = g->n_v, l->n_w = g->n_w, l->n_x = nx;
    }
    free(cube), free(beg), free(u), free(v), free(w), free(x), free(y), free(vs);
    if (st != FMK_OK)
        fmk_fmm3d_lists_free(l);
    fmk_cuda_leave(s->device, prev);
    return st;
}

extern "C" const fmk_engine fmk_engine_fmm_cuda = {
    /* .name */ "fmm/cuda",
    /* .setup */ fmm_setup,
    /* .eval */ fmm_eval,
    /* .memory */ fmm_memory,
    /* .set_points_device */ fmm_set_points_device,
    /* .release */ fmm_release,
    /* .check_opts */ fmm_check_opts,
    /* .eps_min */ 1e-13, /* eps_min: p = 60 (rotation-based M2L) meets 1e-13; 1e-14 is below fp64's floor here
            * (docs/fmm3d_gpu.md) */
    1,    /* reuses_state: build_state takes the previous points' buffers */
};
