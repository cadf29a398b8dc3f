/* fmm2d.cu -- the GPU engine of the 2D adaptive FMM (method fmm, dim 2; log2d and cauchy2d,
 * fp64), after Goude & Engblom, with every phase on the GPU.
 *
 * Topological phase (set_points). The pyramid of fmm2d.h, the same tree the CPU builds. Splits
 * of large segments: the bounding box of every segment (atomics on the coordinates' bit
 * patterns, which order like the doubles in the frame's [1, 2]), one stable CUB radix sort of
 * (segment, split key) with the positions as values, and a gather that also reduces the next
 * split's boxes. The sort replaces the paper's pivot partitioning (Alg. 3.1, 3.2): a median
 * split is a stable partition by the key, and one sort of all segments keeps every launch full.
 * Once every segment fits SPLIT_CAP points, the remaining splits run in one kernel, a block per
 * segment in shared memory (k_split_small). Small n (RANK_N) goes another way, so that every
 * split spreads over the device: ranks in the segment by launches over all points while
 * segments are large, then a block per segment of at most RANK_CAP points (bitonic sort or
 * ranks in shared memory). Then the directed lists level by level, a warp per box (count, CUB
 * scan, fill), the running totals on the device (up to LISTS_SMALL_L levels: all in one
 * block, one launch); the finest level's strong lists carry a kind per entry (P2P, M2P, P2L:
 * the shortcut of the interchanged theta-criterion). One wait: the lists' totals.
 *
 * Computational phase (eval): a warp per box for P2M, M2M, M2L (+ P2L), L2L, L2P (+ M2P) and
 * P2P (several warps per box, their sums added in a fixed order, where boxes are few; then P2P
 * runs beside the expansions on a second stream); in the expansion operators the lanes own the
 * coefficients (two per lane above order 31) and the warp owns its box, so nothing needs
 * atomics; the operators are those of fmm2d_ops.c in the same scaled form (binomials from a
 * table, powers by a product scan over the lanes or by repeated products). The charges are
 * checked on their way into box order; one wait at the end reads the verdict, and the outputs
 * are written only if all were finite.
 *
 * The plan's device arrays are one block, kept (grow-only) from one set_points_device to the
 * next with the events, the side stream and CUB's workspace sizes: a repeated call of the same
 * or smaller size allocates nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cub/cub.cuh>

#include "cuda/device.h"
#include "fmm2d/fmm2d.h"

namespace {

constexpr int WARPS = 4;        /* warps per block in the warp-per-box kernels */
constexpr int NCMAX = FMK_FMM2D_MAX_ORDER + 1;
constexpr int SLOTS = (NCMAX + 31) / 32;
constexpr unsigned FULL = 0xffffffffu;

typedef unsigned long long u64;

/* ---------------------------------------------------------------- state */

typedef struct fmm2d_gpu {
    int device;
    int order, levels;
    int64_t leaf_size;
    int64_t n, ns, nt, n_boxes, leaves;
    int self;
    /* tree */
    double *d_center;           /* n_boxes * 2 */
    double *d_radius;           /* n_boxes */
    int64_t *d_src_start, *d_trg_start; /* leaves + 1 (trg == src when self) */
    int *d_src_order, *d_trg_order;     /* box order -> caller index */
    int *d_trg_place;           /* nt: caller's target index -> box order (d_trg_order's inverse) */
    double *d_src_xy, *d_trg_xy;        /* interleaved, box order */
    int *d_weak_begin;          /* n_boxes + 1 */
    int *d_weak;                /* global indices */
    int *d_near_begin;          /* leaves + 1 */
    int *d_near;                /* finest-level indices */
    signed char *d_kind;        /* per near entry: 0 P2P, 1 M2P, 2 P2L */
    int64_t n_weak, n_near;
    int weak_owned, near_owned, kind_owned; /* the lists outgrew the block: freed apart */
    /* evaluation */
    fmk_cplx *d_q;              /* ns charges in box order */
    fmk_cplx *d_M, *d_L;        /* n_boxes * (order + 1) */
    fmk_cplx *d_res;            /* 2 * nt: V, D */
    double *d_qzero;            /* nt */
    double *d_qtotal;           /* 1 */
    double *d_charges;          /* host calls: staging, allocated at the first (d_stage) */
    double *d_pot, *d_grad;     /* host calls: staging */
    void *d_stage;
    u64 *d_stats;               /* 2 */
    double *d_binom;            /* (2p + 2)^2 binomials C(n, k) at n (2p + 2) + k */
    void *d_block;              /* the one allocation the arrays above are carved from; kept
                                 * (grow-only) from one set_points_device to the next */
    size_t block_bytes;
    int binom_ready;            /* d_binom (the block's first array) holds the binomials */
    /* CUB's workspace sizes, kept with the block: its queries cost host time, so they run once
     * per size (q_n, q_ns, q_nt: the sizes they were made for; q_n = -1: none) */
    int64_t q_n, q_ns, q_nt;
    size_t q_box, q_sort, q_scan_lists, q_scan_points, q_sum;
    void *d_temp;               /* CUB workspace for eval */
    size_t temp_bytes;
    cudaEvent_t ev[10];         /* the eval's phases (8, 9: P2P on the side stream) */
    int events;
    cudaStream_t side;          /* P2P beside the expansions when leaves are few (NULL: none yet) */
    int *h_read;                /* pinned, LS_COUNT + 2 words: what the two waits read back */
    int keep;                   /* the next release keeps the state (gpu_set_points_device) */
    double tree_ms;
} fmm2d_gpu;

int order_of(const fmk_plan *plan) { return fmk_fmm2d_plan_order(plan); }
int64_t leaf_size_of(const fmk_plan *plan) { return fmk_fmm2d_plan_leaf_size(plan); }

/* ---------------------------------------------------------------- device helpers */

/* rho^lane in each lane of a full warp (a product scan over the lanes), and rho^32 in *rho32. */
__device__ inline fmk_cplx warp_pow(fmk_cplx rho, int lane, fmk_cplx *rho32)
{
    fmk_cplx v = lane == 0 ? fmk_c(1, 0) : rho;
    for (int o = 1; o < 32; o <<= 1) {
        const double re = __shfl_up_sync(FULL, v.re, o), im = __shfl_up_sync(FULL, v.im, o);
        if (lane >= o)
            v = fmk_cmul(v, fmk_c(re, im));
    }
    *rho32 = fmk_cmul(fmk_c(__shfl_sync(FULL, v.re, 31), __shfl_sync(FULL, v.im, 31)), rho);
    return v;
}

__device__ inline fmk_cplx ld(const fmk_cplx *p)
{
    const double2 v = __ldg(reinterpret_cast<const double2 *>(p));
    return fmk_c(v.x, v.y);
}

__device__ inline double u2d(u64 v) { return __longlong_as_double((long long)v); }
__device__ inline u64 d2u(double v) { return (u64)__double_as_longlong(v); }

/* ---------------------------------------------------------------- topological phase */

__global__ void k_load_points(int64_t ns, const double *src, int64_t nt, const double *trg,
                              double *x, double *y, int *id)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= ns + nt)
        return;
    const double *p = i < ns ? src + 2 * i : trg + 2 * (i - ns);
    x[i] = p[0], y[i] = p[1], id[i] = (int)i;
}

/* set_points_device: maps the caller's sources (then targets) into the frame,
 * x' = 1.5 + (x - c) / w, straight into the topological phase's arrays (as k_load_points). */
__global__ void k_map_points(int64_t ns, const double *src, int64_t nt, const double *trg,
                             double cx, double cy, double inv_w, double *x, double *y, int *id)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= ns + nt)
        return;
    const double *p = i < ns ? src + 2 * i : trg + 2 * (i - ns);
    x[i] = 1.5 + (p[0] - cx) * inv_w, y[i] = 1.5 + (p[1] - cy) * inv_w, id[i] = (int)i;
}

/* Binomials C(i, k) at i nn + k, i, k < nn, by Pascal's rule (the same additions as on a
 * host): one block, a thread per k, a row at a time. */
__global__ void k_binomials(int nn, double *bin)
{
    for (int i = 0; i < nn; i++) {
        for (int k = threadIdx.x; k < nn; k += blockDim.x)
            bin[i * nn + k] = k > i ? 0 : (k == 0 || k == i) ? 1
                                                             : bin[(i - 1) * nn + k - 1] + bin[(i - 1) * nn + k];
        __syncthreads();
    }
}

/* bb: 4 words per segment, the bit patterns of lo x, lo y, hi x, hi y. */
__global__ void k_bbox_reset(int64_t nseg, u64 *bb)
{
    const int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (g >= nseg)
        return;
    bb[4 * g] = bb[4 * g + 1] = d2u(INFINITY);
    bb[4 * g + 2] = bb[4 * g + 3] = 0;
}

/* Few large segments: point i (px, py) of the segments after s splits into their boxes bb, by
 * warp (and block) reductions, then atomics on the bit patterns (bb reset by k_bbox_reset).
 * Every thread of the block (of 256) calls it, those with i >= n too. */
__device__ void bbox_add(int64_t n, int s, int64_t i, double px, double py, u64 *bb)
{
    __shared__ u64 red[256 / 32][4];
    const bool act = i < n;
    const int64_t g = act ? fmk_fmm2d_seg_of(n, s, i) : -1;
    u64 v[4];
    v[0] = act ? d2u(px) : d2u(INFINITY);
    v[1] = act ? d2u(py) : d2u(INFINITY);
    v[2] = act ? d2u(px) : 0;
    v[3] = act ? d2u(py) : 0;
    const int64_t g0 = __shfl_sync(FULL, g, 0), g31 = __shfl_sync(FULL, g, 31);
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    __shared__ int64_t g_first;
    if (threadIdx.x == 0)
        g_first = g;
    __syncthreads();
    const int block_uniform = __syncthreads_and(g == g_first && act);
    if (g0 == g31 && g0 >= 0) {
        for (int o = 16; o > 0; o >>= 1) {
            u64 a0 = __shfl_xor_sync(FULL, v[0], o), a1 = __shfl_xor_sync(FULL, v[1], o);
            u64 a2 = __shfl_xor_sync(FULL, v[2], o), a3 = __shfl_xor_sync(FULL, v[3], o);
            v[0] = a0 < v[0] ? a0 : v[0], v[1] = a1 < v[1] ? a1 : v[1];
            v[2] = a2 > v[2] ? a2 : v[2], v[3] = a3 > v[3] ? a3 : v[3];
        }
        if (block_uniform) {
            if (lane == 0)
                for (int k = 0; k < 4; k++)
                    red[w][k] = v[k];
            __syncthreads();
            if (threadIdx.x == 0) {
                for (int j = 1; j < (int)(blockDim.x >> 5); j++) {
                    v[0] = red[j][0] < v[0] ? red[j][0] : v[0];
                    v[1] = red[j][1] < v[1] ? red[j][1] : v[1];
                    v[2] = red[j][2] > v[2] ? red[j][2] : v[2];
                    v[3] = red[j][3] > v[3] ? red[j][3] : v[3];
                }
                atomicMin(bb + 4 * g, v[0]), atomicMin(bb + 4 * g + 1, v[1]);
                atomicMax(bb + 4 * g + 2, v[2]), atomicMax(bb + 4 * g + 3, v[3]);
            }
        } else if (lane == 0) {
            atomicMin(bb + 4 * g, v[0]), atomicMin(bb + 4 * g + 1, v[1]);
            atomicMax(bb + 4 * g + 2, v[2]), atomicMax(bb + 4 * g + 3, v[3]);
        }
    } else if (act) {
        atomicMin(bb + 4 * g, v[0]), atomicMin(bb + 4 * g + 1, v[1]);
        atomicMax(bb + 4 * g + 2, v[2]), atomicMax(bb + 4 * g + 3, v[3]);
    }
}

__global__ void k_bbox_atomic(int64_t n, int s, const double *x, const double *y, u64 *bb)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    bbox_add(n, s, i, i < n ? x[i] : 0, i < n ? y[i] : 0, bb);
}

/* The bounding box of points [a, e) by a full warp into out (4 words, by lane 0). */
__device__ inline void warp_bbox(const double *x, const double *y, int64_t a, int64_t e, int lane,
                                 u64 *out)
{
    double lx = INFINITY, ly = INFINITY, hx = -INFINITY, hy = -INFINITY;
    for (int64_t i = a + lane; i < e; i += 32) {
        const double px = x[i], py = y[i];
        lx = fmin(lx, px), ly = fmin(ly, py), hx = fmax(hx, px), hy = fmax(hy, py);
    }
    for (int o = 16; o > 0; o >>= 1) {
        lx = fmin(lx, __shfl_xor_sync(FULL, lx, o)), ly = fmin(ly, __shfl_xor_sync(FULL, ly, o));
        hx = fmax(hx, __shfl_xor_sync(FULL, hx, o)), hy = fmax(hy, __shfl_xor_sync(FULL, hy, o));
    }
    if (lane == 0) {
        if (e > a)
            out[0] = d2u(lx), out[1] = d2u(ly), out[2] = d2u(hx), out[3] = d2u(hy);
        else /* an empty segment (n = 0): the centre of the frame */
            out[0] = out[1] = out[2] = out[3] = d2u(1.5);
    }
}

/* Many small segments: a warp per segment. */
__global__ void k_bbox_warp(int64_t n, int s, const double *x, const double *y, u64 *bb)
{
    const int64_t g = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
    if (g >= ((int64_t)1 << s))
        return;
    warp_bbox(x, y, fmk_fmm2d_seg_begin(n, s, g), fmk_fmm2d_seg_begin(n, s, g + 1),
              threadIdx.x & 31, bb + 4 * g);
}

__global__ void k_keys(int64_t n, int s, const double *x, const double *y, const u64 *bb,
                       unsigned *keys, int *pos)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const int64_t g = fmk_fmm2d_seg_of(n, s, i);
    const double lo[2] = {u2d(bb[4 * g]), u2d(bb[4 * g + 1])};
    const double hi[2] = {u2d(bb[4 * g + 2]), u2d(bb[4 * g + 3])};
    const int axis = fmk_fmm2d_axis(lo, hi);
    const int kb = fmk_fmm2d_key_bits(s);
    keys[i] = ((unsigned)g << kb) | fmk_fmm2d_key(axis ? y[i] : x[i], lo[axis], hi[axis], s);
    pos[i] = (int)i;
}

/* The points in their new order; with bb_next (not NULL), also the bounding boxes of the
 * segments after s_next splits (bbox_add: blocks of 256), saving that split a pass. */
__global__ void k_gather(int64_t n, const int *pos, const double *x, const double *y, const int *id,
                         double *x2, double *y2, int *id2, int s_next, u64 *bb_next)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    double px = 0, py = 0;
    if (i < n) {
        const int j = pos[i];
        px = x[j], py = y[j];
        x2[i] = px, y2[i] = py, id2[i] = id[j];
    }
    if (bb_next)
        bbox_add(n, s_next, i, px, py, bb_next);
}

/* The boxes of the segments after s splits go by atomics (few large segments), else a warp per
 * segment. */
inline bool bbox_by_atomics(int64_t n, int s) { return n > 0 && (n >> s) > 4096 && s < 12; }

/* The block's segment (blockIdx.x of split s0) into shared memory; returns its length. */
__device__ int segment_to_shared(int64_t n, int s0, const double *x, const double *y,
                                 const int *id, double *xs, double *ys, int *ids)
{
    const int64_t a = fmk_fmm2d_seg_begin(n, s0, blockIdx.x);
    const int m = (int)(fmk_fmm2d_seg_begin(n, s0, blockIdx.x + 1) - a);
    for (int i = threadIdx.x; i < m; i += blockDim.x)
        xs[i] = x[a + i], ys[i] = y[a + i], ids[i] = id[a + i];
    __syncthreads();
    return m;
}

/* The boxes after split s (s0 <= s) of the subsegments of the block's segment g0 of split s0
 * (points xs, ys in shared memory, from position a), a warp per subsegment, into box_bb at even
 * splits and seg_bb at odd ones (as the launches of the large splits do); returns where they
 * are, visible to the whole block. */
__device__ u64 *block_boxes(int64_t n, int s, int s0, int64_t g0, int64_t a, const double *xs,
                            const double *ys, u64 *box_bb, u64 *seg_bb)
{
    const int k = s - s0, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t gb = g0 << k; /* the block's first segment after s splits */
    u64 *bb = s % 2 == 0 ? box_bb + 4 * fmk_fmm2d_first(s / 2) : seg_bb;
    for (int j = warp; j < (1 << k); j += blockDim.x / 32)
        warp_bbox(xs, ys, fmk_fmm2d_seg_begin(n, s, gb + j) - a,
                  fmk_fmm2d_seg_begin(n, s, gb + j + 1) - a, lane, bb + 4 * (gb + j));
    __syncthreads(); /* the boxes (global memory) are visible to the block */
    return bb;
}

/* The last splits in one kernel, a block per segment once every segment fits SPLIT_CAP points:
 * the segment stays in shared memory, and each split is the bounding box of every subsegment (a
 * warp per subsegment, into box_bb at even splits and seg_bb at odd ones, as the launches of the
 * large splits do), the keys (subsegment, split key) and one stable block radix sort of them,
 * which orders every subsegment by its key, ties in their current order: the same tree. */
constexpr int SPLIT_THREADS = 512, SPLIT_ITEMS = 8, SPLIT_CAP = SPLIT_THREADS * SPLIT_ITEMS;
constexpr size_t SPLIT_SMEM = (size_t)SPLIT_CAP * (2 * sizeof(double) + sizeof(int));

/* The first split s <= 2L after which every segment of n points fits a block, or -1. */
int small_split_from(int64_t n, int L)
{
    for (int s = 0; n > 0 && s <= 2 * L; s++)
        if (((n + ((int64_t)1 << s) - 1) >> s) <= SPLIT_CAP)
            return s;
    return -1;
}

__global__ void __launch_bounds__(SPLIT_THREADS)
    k_split_small(int64_t n, int s0, int L, double *x, double *y, int *id, u64 *box_bb, u64 *seg_bb)
{
    typedef cub::BlockRadixSort<unsigned, SPLIT_THREADS, SPLIT_ITEMS, int> sort_t;
    __shared__ typename sort_t::TempStorage sort_tmp;
    extern __shared__ __align__(16) unsigned char split_sm[];
    double *xs = reinterpret_cast<double *>(split_sm), *ys = xs + SPLIT_CAP;
    int *ids = reinterpret_cast<int *>(ys + SPLIT_CAP);
    const int64_t g0 = blockIdx.x, a = fmk_fmm2d_seg_begin(n, s0, g0);
    const int m = segment_to_shared(n, s0, x, y, id, xs, ys, ids);
    for (int s = s0;; s++) {
        const int k = s - s0;
        const int64_t gb = g0 << k; /* the block's first segment after s splits */
        const u64 *bb = block_boxes(n, s, s0, g0, a, xs, ys, box_bb, seg_bb);
        if (s == 2 * L)
            break;
        const int kb = fmk_fmm2d_key_bits(s);
        unsigned key[SPLIT_ITEMS];
        int src[SPLIT_ITEMS];
        for (int t = 0; t < SPLIT_ITEMS; t++) {
            const int i = threadIdx.x * SPLIT_ITEMS + t; /* blocked: the sort is stable in i */
            src[t] = i;
            key[t] = 0xffffffffu; /* past the segment: after every point */
            if (i < m) {
                const int64_t g = fmk_fmm2d_seg_of(n, s, a + i);
                const u64 *q = bb + 4 * g;
                const double lo[2] = {u2d(q[0]), u2d(q[1])}, hi[2] = {u2d(q[2]), u2d(q[3])};
                const int axis = fmk_fmm2d_axis(lo, hi);
                key[t] = ((unsigned)(g - gb) << kb) |
                         fmk_fmm2d_key(axis ? ys[i] : xs[i], lo[axis], hi[axis], s);
            }
        }
        sort_t(sort_tmp).Sort(key, src, 0, k + kb);
        double px[SPLIT_ITEMS], py[SPLIT_ITEMS];
        int pid[SPLIT_ITEMS];
        for (int t = 0; t < SPLIT_ITEMS; t++) {
            const int i = threadIdx.x * SPLIT_ITEMS + t;
            if (i < m)
                px[t] = xs[src[t]], py[t] = ys[src[t]], pid[t] = ids[src[t]];
        }
        __syncthreads();
        for (int t = 0; t < SPLIT_ITEMS; t++) {
            const int i = threadIdx.x * SPLIT_ITEMS + t;
            if (i < m)
                xs[i] = px[t], ys[i] = py[t], ids[i] = pid[t];
        }
        __syncthreads();
    }
    for (int i = threadIdx.x; i < m; i += SPLIT_THREADS)
        x[a + i] = xs[i], y[a + i] = ys[i], id[a + i] = ids[i];
}

/* Small n (at most RANK_N points): the splits by ranks rather than sorts, so that every split
 * spreads over the whole device. The stable order of a segment by its split key is the order of
 * comp = key << 16 | (position in the segment), all distinct, so a point's place in its
 * segment is the number of the segment's comps below its own. Segments of more than RANK_CAP
 * points go by two launches per split over all points (k_rank_keys, k_rank_scatter: a team of
 * RANK_TEAM threads per point), or by the sort where that would cost too many comparisons
 * (n m > RANK_WORK); the last splits, once every segment fits RANK_CAP points, in one kernel
 * with a block per segment in shared memory (k_split_rank). Same keys, same ties, same tree. */
constexpr int64_t RANK_N = 32768, RANK_WORK = (int64_t)1 << 27;
constexpr int RANK_CAP = 1024, RANK_TEAM = 8;

/* How split s of n <= RANK_N points goes: 2 by k_split_rank (every segment fits RANK_CAP
 * points), 1 by k_rank_keys and k_rank_scatter, 0 by the sort. */
int split_by_rank(int64_t n, int s)
{
    const int64_t m = (n + ((int64_t)1 << s) - 1) >> s;
    return m <= RANK_CAP ? 2 : n * m <= RANK_WORK ? 1 : 0;
}

/* Segments of more than RANK_CAP points: a block per segment reduces its bounding box into bb
 * (4 words) and, unless last, writes every point's comp. */
__global__ void __launch_bounds__(1024)
    k_rank_keys(int64_t n, int s, int last, const double *x, const double *y, u64 *bb,
                unsigned *comp)
{
    __shared__ double red[4][32];
    const int64_t g = blockIdx.x, a = fmk_fmm2d_seg_begin(n, s, g),
                  e = fmk_fmm2d_seg_begin(n, s, g + 1);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    double lx = INFINITY, ly = INFINITY, hx = -INFINITY, hy = -INFINITY;
    for (int64_t i = a + threadIdx.x; i < e; i += blockDim.x) {
        const double px = x[i], py = y[i];
        lx = fmin(lx, px), ly = fmin(ly, py), hx = fmax(hx, px), hy = fmax(hy, py);
    }
    for (int o = 16; o > 0; o >>= 1) {
        lx = fmin(lx, __shfl_xor_sync(FULL, lx, o)), ly = fmin(ly, __shfl_xor_sync(FULL, ly, o));
        hx = fmax(hx, __shfl_xor_sync(FULL, hx, o)), hy = fmax(hy, __shfl_xor_sync(FULL, hy, o));
    }
    if (lane == 0)
        red[0][warp] = lx, red[1][warp] = ly, red[2][warp] = hx, red[3][warp] = hy;
    __syncthreads();
    if (warp == 0) {
        lx = lane < nw ? red[0][lane] : INFINITY, ly = lane < nw ? red[1][lane] : INFINITY;
        hx = lane < nw ? red[2][lane] : -INFINITY, hy = lane < nw ? red[3][lane] : -INFINITY;
        for (int o = 16; o > 0; o >>= 1) {
            lx = fmin(lx, __shfl_xor_sync(FULL, lx, o)), ly = fmin(ly, __shfl_xor_sync(FULL, ly, o));
            hx = fmax(hx, __shfl_xor_sync(FULL, hx, o)), hy = fmax(hy, __shfl_xor_sync(FULL, hy, o));
        }
        if (lane == 0) {
            red[0][0] = lx, red[1][0] = ly, red[2][0] = hx, red[3][0] = hy;
            bb[4 * g] = d2u(lx), bb[4 * g + 1] = d2u(ly), bb[4 * g + 2] = d2u(hx),
                   bb[4 * g + 3] = d2u(hy);
        }
    }
    __syncthreads();
    if (last)
        return;
    const double lo[2] = {red[0][0], red[1][0]}, hi[2] = {red[2][0], red[3][0]};
    const int axis = fmk_fmm2d_axis(lo, hi);
    const double *c = axis ? y : x;
    for (int64_t i = a + threadIdx.x; i < e; i += blockDim.x)
        comp[i] = fmk_fmm2d_key(c[i], lo[axis], hi[axis], s) << 16 | (unsigned)(i - a);
}

/* A team of RANK_TEAM lanes per point counts the comps of its segment below its own; the point
 * goes to that place (x, y, id -> x2, y2, id2). Blocks of RANK_BLOCK threads; the segments of
 * a block's points pass through shared memory RANK_TILE comps at a time (loads all in flight:
 * read straight from memory, each team would wait on every line in turn). */
constexpr int RANK_BLOCK = 256, RANK_TILE = 2048;

__global__ void __launch_bounds__(RANK_BLOCK)
    k_rank_scatter(int64_t n, int s, const unsigned *comp, const double *x, const double *y,
                   const int *id, double *x2, double *y2, int *id2)
{
    __shared__ unsigned tile[RANK_TILE];
    const int64_t t = blockIdx.x * (int64_t)RANK_BLOCK + threadIdx.x;
    const int64_t i = t / RANK_TEAM;
    const int part = (int)(t % RANK_TEAM);
    const int64_t ic = i < n ? i : n - 1; /* the lanes past n help the shuffles only */
    const int64_t g = fmk_fmm2d_seg_of(n, s, ic), a = fmk_fmm2d_seg_begin(n, s, g),
                  e = fmk_fmm2d_seg_begin(n, s, g + 1);
    const unsigned c = comp[ic];
    /* the block's points lie in the segments of its first and last point */
    const int64_t i0 = blockIdx.x * (int64_t)(RANK_BLOCK / RANK_TEAM);
    const int64_t i_last = i0 + RANK_BLOCK / RANK_TEAM - 1;
    const int64_t i1 = i_last < n ? i_last : n - 1;
    const int64_t ba = fmk_fmm2d_seg_begin(n, s, fmk_fmm2d_seg_of(n, s, i0)),
                  be = fmk_fmm2d_seg_begin(n, s, fmk_fmm2d_seg_of(n, s, i1) + 1);
    int below = 0;
    for (int64_t t0 = ba; t0 < be; t0 += RANK_TILE) {
        const int len = be - t0 < RANK_TILE ? (int)(be - t0) : RANK_TILE;
        __syncthreads();
        for (int k = threadIdx.x; k < len; k += RANK_BLOCK)
            tile[k] = comp[t0 + k];
        __syncthreads();
        const int lo = (int)((a > t0 ? a : t0) - t0);
        const int hi = (int)((e < t0 + len ? e : t0 + len) - t0);
        int j = lo + part;
        for (; j + 3 * RANK_TEAM < hi; j += 4 * RANK_TEAM)
            below += (tile[j] < c) + (tile[j + RANK_TEAM] < c) + (tile[j + 2 * RANK_TEAM] < c) +
                     (tile[j + 3 * RANK_TEAM] < c);
        for (; j < hi; j += RANK_TEAM)
            below += tile[j] < c;
    }
    for (int o = RANK_TEAM / 2; o > 0; o >>= 1)
        below += __shfl_xor_sync(FULL, below, o);
    if (i < n && part == 0) {
        const int64_t k = a + below;
        x2[k] = x[i], y2[k] = y[i], id2[k] = id[i];
    }
}

/* A block-wide bitonic sort of one u64 per thread (RANK_CAP threads, ascending): partners
 * within a warp by shuffles, the others through shared memory (sm: RANK_CAP words). */
__device__ u64 block_bitonic(u64 v, u64 *sm)
{
    const int i = threadIdx.x;
    for (int k = 2; k <= RANK_CAP; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            u64 pv;
            if (j >= 32) {
                sm[i] = v;
                __syncthreads();
                pv = sm[i ^ j];
                __syncthreads();
            } else {
                pv = __shfl_xor_sync(FULL, v, j);
            }
            const bool keep_min = ((i & k) == 0) == ((i & j) == 0);
            v = keep_min ? (pv < v ? pv : v) : (pv > v ? pv : v);
        }
    return v;
}

/* The splits s0 .. 2L - 1 of segments of at most RANK_CAP points (and the boxes after each, as
 * k_split_small writes them): a block per segment of split s0, a thread per point, the segment
 * in shared memory. Each split orders the block's points by (subsegment, key, position): a
 * bitonic sort while subsegments are large, else each point's place as the count of the
 * (key, position) pairs below its own in its subsegment (all threads of a warp mostly read the
 * same word). */
__global__ void __launch_bounds__(RANK_CAP)
    k_split_rank(int64_t n, int s0, int L, double *x, double *y, int *id, u64 *box_bb, u64 *seg_bb)
{
    __shared__ double xs[RANK_CAP], ys[RANK_CAP];
    __shared__ int ids[RANK_CAP];
    __shared__ u64 comp[RANK_CAP];
    const int64_t g0 = blockIdx.x, a = fmk_fmm2d_seg_begin(n, s0, g0);
    const int m = segment_to_shared(n, s0, x, y, id, xs, ys, ids), i = threadIdx.x;
    for (int s = s0;; s++) {
        const int k = s - s0;
        const int64_t gb = g0 << k; /* the block's first segment after s splits */
        const u64 *bb = block_boxes(n, s, s0, g0, a, xs, ys, box_bb, seg_bb);
        if (s == 2 * L)
            break;
        int sa = 0, se = 0;
        double px = 0, py = 0;
        int pid = 0;
        u64 c = ~0ull; /* past the segment: after every point */
        if (i < m) {
            const int64_t g = fmk_fmm2d_seg_of(n, s, a + i);
            sa = (int)(fmk_fmm2d_seg_begin(n, s, g) - a);
            se = (int)(fmk_fmm2d_seg_begin(n, s, g + 1) - a);
            const u64 *q = bb + 4 * g;
            const double lo[2] = {u2d(q[0]), u2d(q[1])}, hi[2] = {u2d(q[2]), u2d(q[3])};
            const int axis = fmk_fmm2d_axis(lo, hi);
            px = xs[i], py = ys[i], pid = ids[i];
            const u64 key = fmk_fmm2d_key(axis ? py : px, lo[axis], hi[axis], s);
            c = (u64)(g - gb) << 32 | key << 16 | (u64)i;
        }
        if ((m >> k) > 160) { /* large subsegments: sort; thread r gets the r-th point */
            c = block_bitonic(c, comp);
            if (i < m) {
                const int from = (int)(c & 0xffff);
                px = xs[from], py = ys[from], pid = ids[from];
            }
            __syncthreads();
            if (i < m)
                xs[i] = px, ys[i] = py, ids[i] = pid;
        } else { /* small ones: count */
            comp[i] = c;
            __syncthreads();
            if (i < m) {
                int below = 0, j = sa;
                for (; j + 3 < se; j += 4)
                    below += (comp[j] < c) + (comp[j + 1] < c) + (comp[j + 2] < c) +
                             (comp[j + 3] < c);
                for (; j < se; j++)
                    below += comp[j] < c;
                xs[sa + below] = px, ys[sa + below] = py, ids[sa + below] = pid;
            }
        }
        __syncthreads();
    }
    if (i < m)
        x[a + i] = xs[i], y[a + i] = ys[i], id[a + i] = ids[i];
}

/* The end of the splits, a thread per index t: box t's centre and radius (t < nb); for self
 * (the points are the sources and the targets) also point t in box order (t < n) and the
 * start of leaf t (t <= leaves), which k_split_points and k_starts do otherwise. Resets the
 * charge check's flag (and after a failed eval). */
__global__ void k_finish(int64_t nb, const u64 *bb, double *center, double *radius, u64 *bad,
                         int self, int64_t n, int L, const double *x, const double *y,
                         const int *id, double *xy, int *order, int *place, int64_t *src_start)
{
    const int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t == 0)
        *bad = ~0ull;
    if (t < nb) {
        const double lx = u2d(bb[4 * t]), ly = u2d(bb[4 * t + 1]);
        const double hx = u2d(bb[4 * t + 2]), hy = u2d(bb[4 * t + 3]);
        center[2 * t] = 0.5 * (lx + hx), center[2 * t + 1] = 0.5 * (ly + hy);
        radius[t] = 0.5 * sqrt((hx - lx) * (hx - lx) + (hy - ly) * (hy - ly));
    }
    if (!self)
        return;
    if (t < n)
        xy[2 * t] = x[t], xy[2 * t + 1] = y[t], order[t] = id[t], place[id[t]] = (int)t;
    if (t <= ((int64_t)1 << (2 * L)))
        src_start[t] = fmk_fmm2d_seg_begin(n, 2 * L, t);
}

/* Separate targets: the leaves' starts in the sources and in the targets. */
__global__ void k_starts(int64_t n, int L, int64_t leaves, const int *before, int64_t *src_start,
                         int64_t *trg_start)
{
    const int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (b > leaves)
        return;
    const int64_t pos = fmk_fmm2d_seg_begin(n, 2 * L, b);
    src_start[b] = before[pos];
    trg_start[b] = pos - before[pos];
}

/* flags[i] = 1 for a source (i < n), 0 for a target and at i = n. */
__global__ void k_source_flags(int64_t n, int64_t ns, const int *id, int *flags)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i <= n)
        flags[i] = i < n && id[i] < ns ? 1 : 0;
}

__global__ void k_split_points(int64_t n, int64_t ns, const double *x, const double *y,
                               const int *id, const int *before, double *sxy, int *sorder,
                               double *txy, int *torder, int *tplace)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const int c = id[i];
    if (c < ns) {
        const int64_t k = before[i];
        sxy[2 * k] = x[i], sxy[2 * k + 1] = y[i], sorder[k] = c;
    } else {
        const int64_t k = i - before[i];
        txy[2 * k] = x[i], txy[2 * k + 1] = y[i], torder[k] = c - (int)ns;
        tplace[c - ns] = (int)k;
    }
}

__device__ inline int64_t count_in(const int64_t *start, int L, int l, int64_t b)
{
    const int sh = 2 * (L - l);
    return start[(b + 1) << sh] - start[b << sh];
}

/* The lists' running totals on the device (lists built without a host round trip per level). */
enum { LS_WEAK, LS_STRONG, LS_OVERFLOW, LS_BASE, LS_COUNT };

/* The lists of level l (fmm2d.h), a warp per box, a lane per candidate (the children of the
 * parent's strong list); pass 0 counts (weak << 32 | strong, one scan for both), pass 1 fills in
 * candidate order (ballots place them) and writes the level's list starts. The level's weak
 * lists start at base (host totals, ls NULL) or at ls[LS_BASE] (device totals; once
 * LS_OVERFLOW is set, counts of 0 and no lists). */
/* Box b (0 <= b <= 4^l; b = 4^l: the scan's last entry) of k_connect, by a full warp. */
__device__ void connect_box(int l, int L, int pass, int64_t b, int lane, const int *prev_begin,
                            const int *prev, const int64_t *src_start, const int64_t *trg_start,
                            const double *center, const double *radius, u64 *cnt, const u64 *off,
                            int *weak, int *strong, signed char *kind, int base, int *weak_begin,
                            int *strong_begin)
{
    const int64_t nb = (int64_t)1 << (2 * l), f = fmk_fmm2d_first(l);
    /* pass 1: the box's offsets, (weak << 32 | strong) from one scan, and its list starts */
    int off_weak = 0, off_strong = 0;
    if (pass) {
        off_weak = base + (int)(off[b] >> 32), off_strong = (int)(off[b] & 0xffffffffu);
        if (lane == 0)
            weak_begin[b] = off_weak, strong_begin[b] = off_strong;
    }
    if (b == nb) { /* the scan's last entry */
        if (!pass && lane == 0)
            cnt[nb] = 0;
        return;
    }
    int nw = 0, nsg = 0;
    if (count_in(trg_start, L, l, b) > 0) {
        const double cb[2] = {center[2 * (f + b)], center[2 * (f + b) + 1]};
        const double rb = radius[f + b];
        const int64_t P = b >> 2;
        const int e0 = prev_begin[P], total = 4 * (prev_begin[P + 1] - e0);
        const unsigned below = (1u << lane) - 1;
        for (int i0 = 0; i0 < total; i0 += 32) {
            const int i = i0 + lane;
            int64_t c = 0;
            int is_weak = 0, is_strong = 0;
            double rc = 0;
            const double *cc = cb;
            if (i < total) {
                c = 4 * (int64_t)prev[e0 + i / 4] + (i & 3);
                if (count_in(src_start, L, l, c) > 0) {
                    cc = center + 2 * (f + c);
                    rc = radius[f + c];
                    is_weak = fmk_fmm2d_separated(cb, rb, cc, rc, 0);
                    is_strong = !is_weak;
                }
            }
            const unsigned mw = __ballot_sync(FULL, is_weak), ms = __ballot_sync(FULL, is_strong);
            if (pass && is_weak)
                weak[off_weak + nw + __popc(mw & below)] = (int)(f + c);
            if (pass && is_strong) {
                const int o = off_strong + nsg + __popc(ms & below);
                strong[o] = (int)c;
                if (l == L) {
                    signed char k = 0;
                    if (c != b && fmk_fmm2d_separated(cb, rb, cc, rc, 1))
                        k = rc < rb ? 1 : 2;
                    kind[o] = k;
                }
            }
            nw += __popc(mw), nsg += __popc(ms);
        }
    }
    if (!pass && lane == 0)
        cnt[b] = (u64)nw << 32 | (u64)nsg;
}

__global__ void k_connect(int l, int L, int pass, const int *prev_begin, const int *prev,
                          const int64_t *src_start, const int64_t *trg_start, const double *center,
                          const double *radius, u64 *cnt, const u64 *off, int *weak, int *strong,
                          signed char *kind, const int *ls, int base, int *weak_begin,
                          int *strong_begin)
{
    const int64_t b = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (b > ((int64_t)1 << (2 * l)))
        return;
    if (ls && ls[LS_OVERFLOW]) { /* a coarser level did not fit: its lists are not there */
        if (!pass && lane == 0)
            cnt[b] = 0;
        return;
    }
    if (pass && ls)
        base = ls[LS_BASE];
    connect_box(l, L, pass, b, lane, prev_begin, prev, src_start, trg_start, center, radius, cnt,
                off, weak, strong, kind, base, weak_begin, strong_begin);
}

/* The two list totals of a level (the scan's last entry) into out[0], out[1] (one copy to the
 * host). */
__global__ void k_totals(const u64 *total, int *out)
{
    out[0] = (int)(*total >> 32), out[1] = (int)(*total & 0xffffffffu);
}

/* Level 0 of the lists: the root is strongly coupled to itself when root is 1. */
__global__ void k_lists_root(int root, int L, int *begin, int *strong, int *weak_begin,
                             signed char *kind, int *ls)
{
    begin[0] = 0, begin[1] = root, strong[0] = 0;
    weak_begin[0] = weak_begin[1] = 0;
    if (L == 0)
        kind[0] = 0;
    ls[LS_WEAK] = 0, ls[LS_STRONG] = root, ls[LS_OVERFLOW] = 0, ls[LS_BASE] = 0;
}

/* After the scans of a level: its totals (weak_total, strong_total) against the capacities; a
 * level that does not fit sets LS_OVERFLOW and the host builds the lists again, growing them. */
__global__ void k_level_totals(const u64 *total, int64_t weak_cap, int64_t strong_cap, int *ls)
{
    if (ls[LS_OVERFLOW])
        return;
    const int64_t w = (int64_t)ls[LS_WEAK] + (int64_t)(*total >> 32);
    const int64_t st = (int64_t)(*total & 0xffffffffu);
    if (w > weak_cap || st > strong_cap) {
        ls[LS_OVERFLOW] = 1;
        return;
    }
    ls[LS_BASE] = ls[LS_WEAK], ls[LS_WEAK] = (int)w, ls[LS_STRONG] = (int)st;
}

/* Small trees (L <= LISTS_SMALL_L): the root and every level's lists in one block (a warp per
 * box, a block scan per level, the same entries and order as the launches per level); the
 * totals into ls as k_level_totals leaves them, LS_OVERFLOW if a level does not fit. */
constexpr int LISTS_SMALL_L = 5, LISTS_THREADS = 512, LISTS_ITEMS = 3;
static_assert(LISTS_THREADS * LISTS_ITEMS >= (1 << (2 * LISTS_SMALL_L)) + 1, "one scan per level");

__global__ void __launch_bounds__(LISTS_THREADS)
    k_lists_small(int root, int L, int *begin_a, int *begin_b, int *strong_a, int *strong_b,
                  const int64_t *src_start, const int64_t *trg_start, const double *center,
                  const double *radius, u64 *cnt, u64 *off, int *weak, int *weak_begin,
                  signed char *kind, int64_t weak_cap, int64_t strong_cap, int *ls)
{
    typedef cub::BlockScan<u64, LISTS_THREADS> scan_t;
    __shared__ typename scan_t::TempStorage scan_tmp;
    __shared__ u64 total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = LISTS_THREADS / 32;
    if (threadIdx.x == 0) {
        begin_a[0] = 0, begin_a[1] = root, strong_a[0] = 0;
        weak_begin[0] = weak_begin[1] = 0;
        if (L == 0)
            kind[0] = 0;
    }
    __syncthreads();
    int *prev_begin = begin_a, *cur_begin = begin_b, *prev = strong_a, *cur = strong_b;
    int64_t n_weak = 0, n_strong = root;
    for (int l = 1; l <= L; l++) {
        const int64_t nbl = (int64_t)1 << (2 * l), f = fmk_fmm2d_first(l);
        for (int64_t b = warp; b <= nbl; b += nw)
            connect_box(l, L, 0, b, lane, prev_begin, prev, src_start, trg_start, center, radius,
                        cnt, NULL, NULL, NULL, NULL, 0, NULL, NULL);
        __syncthreads();
        u64 v[LISTS_ITEMS];
        for (int t = 0; t < LISTS_ITEMS; t++) {
            const int64_t b = threadIdx.x * LISTS_ITEMS + t;
            v[t] = b <= nbl ? cnt[b] : 0;
        }
        scan_t(scan_tmp).ExclusiveSum(v, v);
        for (int t = 0; t < LISTS_ITEMS; t++) {
            const int64_t b = threadIdx.x * LISTS_ITEMS + t;
            if (b <= nbl)
                off[b] = v[t];
            if (b == nbl)
                total = v[t];
        }
        __syncthreads();
        const int64_t w = n_weak + (int64_t)(total >> 32), st = (int64_t)(total & 0xffffffffu);
        if (w > weak_cap || st > strong_cap) { /* block-uniform: the host builds them again */
            if (threadIdx.x == 0)
                ls[LS_OVERFLOW] = 1;
            return;
        }
        for (int64_t b = warp; b <= nbl; b += nw)
            connect_box(l, L, 1, b, lane, prev_begin, prev, src_start, trg_start, center, radius,
                        NULL, off, weak, cur, kind, (int)n_weak, weak_begin + f, cur_begin);
        __syncthreads();
        n_weak = w, n_strong = st;
        int *tb = prev_begin;
        prev_begin = cur_begin, cur_begin = tb;
        int *ts = prev;
        prev = cur, cur = ts;
    }
    if (threadIdx.x == 0)
        ls[LS_WEAK] = (int)n_weak, ls[LS_STRONG] = (int)n_strong, ls[LS_OVERFLOW] = 0,
        ls[LS_BASE] = 0;
}

/* ---------------------------------------------------------------- computational phase */

struct box_args {
    int p, L, is_log;
    const double *center, *radius;
    const int64_t *src_start, *trg_start;
    const double *src_xy, *trg_xy;
    const fmk_cplx *q;
    fmk_cplx *M, *Lc;
    const double *binom;        /* C(n, k) at n * nb + k */
    int nb;
};

__device__ inline double binom(const box_args &a, int n, int k) { return __ldg(a.binom + n * a.nb + k); }

__device__ inline fmk_cplx center_of(const box_args &a, int64_t g)
{
    return fmk_c(a.center[2 * g], a.center[2 * g + 1]);
}
__device__ inline double scale_of(const box_args &a, int64_t g)
{
    return fmk_fmm2d_scale(a.radius[g]);
}

/* The charges in box order; the smallest index of a non-finite one into *bad (set to ~0 before),
 * so that the check costs no pass and no wait of its own (k_output then writes nothing). */
__global__ void k_charges(int64_t ns, int is_log, const int *order, const double *charges,
                          fmk_cplx *q, u64 *bad)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= ns)
        return;
    const int c = order[i];
    q[i] = is_log ? fmk_c(charges[c], 0) : fmk_c(charges[2 * c], charges[2 * c + 1]);
    if (!isfinite(q[i].re) || !isfinite(q[i].im))
        atomicMin(bad, (u64)c);
}

/* The sum of term over a full warp's lanes (a butterfly), added to coefficient k, which lane
 * k % 32 holds in acc[k / 32]. */
__device__ inline void sum_to_lane(fmk_cplx term, int k, int lane, fmk_cplx acc[SLOTS])
{
    for (int o = 16; o > 0; o >>= 1) {
        term.re += __shfl_xor_sync(FULL, term.re, o);
        term.im += __shfl_xor_sync(FULL, term.im, o);
    }
#pragma unroll
    for (int t = 0; t < SLOTS; t++) /* constant indices: acc stays in registers */
        if (k == lane + 32 * t)
            acc[t] = fmk_cadd(acc[t], term);
}

/* P2M: a warp per finest box; lane k holds a_k (and a_(k+32)). The sources go 32 at a time, a
 * lane each: lane j forms its source's term of every coefficient k (powers of w by repeated
 * products) and a butterfly sum over the lanes hands the total to lane k. */
__global__ void k_p2m(box_args a)
{
    const int64_t b = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    const int64_t leaves = (int64_t)1 << (2 * a.L), g = fmk_fmm2d_first(a.L) + b;
    if (b >= leaves)
        return;
    const int64_t s0 = a.src_start[b], s1 = a.src_start[b + 1];
    if (s1 == s0)
        return;
    const fmk_cplx c = center_of(a, g);
    const double r = scale_of(a, g), inv_r = 1.0 / r;
    fmk_cplx acc[SLOTS];
    for (int t = 0; t < SLOTS; t++)
        acc[t] = fmk_c(0, 0);
    for (int64_t j0 = s0; j0 < s1; j0 += 32) {
        const int64_t j = j0 + lane;
        fmk_cplx w = fmk_c(0, 0), pw = fmk_c(0, 0); /* pw = q_j w^k (cauchy2d: w^(k-1)) */
        if (j < s1) {
            w = fmk_c((a.src_xy[2 * j] - c.re) * inv_r, (a.src_xy[2 * j + 1] - c.im) * inv_r);
            pw = a.q[j];
        }
        for (int k = 0; k <= a.p; k++) {
            fmk_cplx term;
            if (a.is_log) {
                term = k == 0 ? pw : fmk_cscale(pw, -1.0 / k);
                pw = fmk_cmul(pw, w);
            } else if (k == 0) {
                term = fmk_c(0, 0);
            } else {
                term = fmk_cscale(pw, inv_r);
                pw = fmk_cmul(pw, w);
            }
            sum_to_lane(term, k, lane, acc);
        }
    }
    for (int t = 0; t < SLOTS; t++) {
        const int k = lane + 32 * t;
        if (k <= a.p)
            a.M[(a.p + 1) * g + k] = acc[t];
    }
}

/* The expansions (p + 1 coefficients, acc as sum_to_lane holds them) of the first ways warps of
 * the block, which share one box, added in warp order into warp 0's acc, through each warp's
 * row of p + 1 words at smem (done with); true for warp 0. Every thread of the block calls it. */
__device__ bool warps_sum(fmk_cplx acc[SLOTS], int p, int ways, fmk_cplx *smem)
{
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, nc = p + 1;
    __syncwarp();
    for (int t = 0; t < SLOTS; t++)
        if (lane + 32 * t <= p)
            smem[w * nc + lane + 32 * t] = acc[t];
    __syncthreads();
    if (w != 0)
        return false;
    for (int v = 1; v < ways; v++)
        for (int t = 0; t < SLOTS; t++)
            if (lane + 32 * t <= p)
                acc[t] = fmk_cadd(acc[t], smem[v * nc + lane + 32 * t]);
    return true;
}

/* M2M into the boxes of level l: a warp per parent, lane l owns b_l; or (per_child, for levels
 * of few boxes) a block of 4 warps per parent, a child each, whose sums warp 0 adds in the
 * children's order: the same additions, the same result. */
__global__ void k_m2m(box_args a, int l, int per_child)
{
    extern __shared__ fmk_cplx smem[];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, nc = a.p + 1;
    fmk_cplx *au = smem + w * nc;
    const int64_t b = per_child ? (int64_t)blockIdx.x
                                : (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
    if (b >= ((int64_t)1 << (2 * l)))
        return;
    const int64_t f = fmk_fmm2d_first(l), fc = fmk_fmm2d_first(l + 1);
    if (count_in(a.src_start, a.L, l, b) == 0)
        return; /* block-uniform when per_child */
    const fmk_cplx cp = center_of(a, f + b);
    const double rp = scale_of(a, f + b);
    fmk_cplx acc[SLOTS];
    for (int t = 0; t < SLOTS; t++)
        acc[t] = fmk_c(0, 0);
    for (int64_t c = per_child ? 4 * b + w : 4 * b; c < (per_child ? 4 * b + w + 1 : 4 * b + 4);
         c++) {
        if (count_in(a.src_start, a.L, l + 1, c) == 0)
            continue;
        const fmk_cplx tt = fmk_cscale(fmk_csub(center_of(a, fc + c), cp), 1.0 / rp);
        const double u = scale_of(a, fc + c) / rp;
        const fmk_cplx *ac = a.M + nc * (fc + c);
        __syncwarp();
        for (int k = lane; k < nc; k += 32)
            au[k] = fmk_cscale(ld(ac + k), pow(u, (double)k));
        __syncwarp();
        const fmk_cplx a0 = au[0];
        for (int t = 0; t < SLOTS; t++) {
            const int m = lane + 32 * t;
            if (m > a.p)
                break;
            if (m == 0) {
                acc[t] = fmk_cadd(acc[t], a0);
                continue;
            }
            /* -a_0 t^m / m + sum_{k=1..m} a_k u^k C(m-1, k-1) t^(m-k), k from m down */
            fmk_cplx s = fmk_c(0, 0), tp = fmk_c(1, 0);
            for (int k = m; k >= 1; k--) {
                fmk_cfma(&s, fmk_cscale(au[k], binom(a, m - 1, k - 1)), tp);
                tp = fmk_cmul(tp, tt);
            }
            /* tp = t^m now */
            s = fmk_csub(s, fmk_cscale(fmk_cmul(a0, tp), 1.0 / m));
            acc[t] = fmk_cadd(acc[t], s);
        }
    }
    if (per_child && !warps_sum(acc, a.p, 4, smem)) /* the children's sums in order */
        return;
    for (int t = 0; t < SLOTS; t++) {
        const int m = lane + 32 * t;
        if (m <= a.p)
            a.M[nc * (f + b) + m] = acc[t];
    }
}

/* Few boxes or leaves: the warps of a block share one box (split of them, block-uniform), each
 * taking every split-th list entry, and add their sums in warp order (the same result run
 * after run). split_for: the warps per box for a launch over nb boxes. */
constexpr int SPLIT_MAX = 8;
int split_for(int64_t nb) { return nb <= 128 ? SPLIT_MAX : nb <= 512 ? 4 : 1; }
unsigned threads_for(int split) { return 32 * (split > 1 ? split : WARPS); }

/* Shared memory of k_m2l with warps warps a block: a row of nc coefficients per warp, then the
 * table of M2L binomials C(m + k - 1, k - 1) at (k - 1) nc + m (k = 1 .. p, m = 0 .. p), so that
 * the lanes (m) read consecutive words. */
size_t m2l_smem(int p, int warps)
{
    return sizeof(fmk_cplx) * warps * (p + 1) + sizeof(double) * p * (p + 1);
}

/* M2L from the weak lists (every level) and, at the finest level, P2L: a warp per target box
 * (or split warps, see split_for), lane l owns b_l. */
__global__ void k_m2l(box_args a, const int *weak_begin, const int *weak, const int *near_begin,
                      const int *near, const signed char *kind, int64_t n_boxes, int split)
{
    extern __shared__ fmk_cplx smem[];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, nc = a.p + 1;
    const int nw = blockDim.x >> 5, part = split > 1 ? w : 0, ways = split > 1 ? split : 1;
    fmk_cplx *ck = smem + w * nc;
    double *tab = reinterpret_cast<double *>(smem + nw * nc);
    for (int i = threadIdx.x; i < a.p * nc; i += blockDim.x) {
        const int k = 1 + i / nc, m = i % nc;
        tab[i] = binom(a, m + k - 1, k - 1);
    }
    __syncthreads();
    const int64_t g = 1 + (split > 1 ? (int64_t)blockIdx.x
                                     : (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5);
    if (g >= n_boxes)
        return;
    const int64_t fl = fmk_fmm2d_first(a.L);
    const int e0 = weak_begin[g], e1 = weak_begin[g + 1];
    const int has_near = g >= fl;
    if (e0 == e1 && !has_near) { /* nothing comes in: zeros, for L2L to add to */
        for (int m = lane + 32 * part; m <= a.p; m += 32 * ways)
            a.Lc[nc * g + m] = fmk_c(0, 0);
        return;
    }
    const fmk_cplx ct = center_of(a, g);
    const double rt = scale_of(a, g);
    fmk_cplx acc[SLOTS];
    for (int t = 0; t < SLOTS; t++)
        acc[t] = fmk_c(0, 0);
    for (int e = e0 + part; e < e1; e += ways) {
        const int c = weak[e];
        const fmk_cplx z0 = fmk_csub(center_of(a, c), ct), iz = fmk_cinv(z0);
        const fmk_cplx rho_s = fmk_cscale(iz, -scale_of(a, c)), rho_t = fmk_cscale(iz, rt);
        const fmk_cplx *ac = a.M + nc * (int64_t)c;
        fmk_cplx rs32, rt32; /* the powers rho^lane, and rho^32 for the second slot */
        const fmk_cplx ps = warp_pow(rho_s, lane, &rs32), pt = warp_pow(rho_t, lane, &rt32);
        __syncwarp();
        for (int k = lane; k < nc; k += 32)
            ck[k] = k == 0 ? fmk_c(0, 0)
                           : fmk_cmul(ld(ac + k), k < 32 ? ps : fmk_cmul(ps, rs32));
        __syncwarp();
        const fmk_cplx a0 = ld(ac);
        const int has_a0 = a0.re != 0 || a0.im != 0;
        for (int t = 0; t < SLOTS; t++) {
            const int m = lane + 32 * t;
            if (m > a.p)
                break;
            /* two partial sums (odd and even k) halve the chain of dependent adds */
            fmk_cplx s = fmk_c(0, 0), s2 = fmk_c(0, 0);
            const double *C = tab + m; /* C(m + k - 1, k - 1) at C[(k - 1) nc] */
            int k = 1;
            for (; k + 1 <= a.p; k += 2) {
                s = fmk_cadd(s, fmk_cscale(ck[k], C[(k - 1) * nc]));
                s2 = fmk_cadd(s2, fmk_cscale(ck[k + 1], C[k * nc]));
            }
            if (k <= a.p)
                s = fmk_cadd(s, fmk_cscale(ck[k], C[(k - 1) * nc]));
            s = fmk_cadd(s, s2);
            if (m == 0) {
                if (has_a0)
                    s = fmk_cadd(s, fmk_cmul(a0, fmk_clog(fmk_cscale(z0, -1))));
                acc[t] = fmk_cadd(acc[t], s);
            } else {
                s = fmk_csub(s, fmk_cscale(a0, 1.0 / m));
                fmk_cfma(&acc[t], s, t == 0 ? pt : fmk_cmul(pt, rt32));
            }
        }
    }
    if (has_near) {
        /* P2L: the sources 32 at a time, a lane each; lane j forms its source's term of every
         * coefficient m (powers of w by repeated products, as fmm2d_ops.c) and a butterfly sum
         * hands the total to lane m (as in P2M) */
        const int64_t b = g - fl;
        for (int e = near_begin[b] + part; e < near_begin[b + 1]; e += ways) {
            if (kind[e] != 2)
                continue;
            const int c = near[e];
            const int64_t s1 = a.src_start[c + 1];
            for (int64_t j0 = a.src_start[c]; j0 < s1; j0 += 32) {
                const int64_t j = j0 + lane;
                fmk_cplx wj = fmk_c(0, 0), pw = fmk_c(0, 0), t0 = fmk_c(0, 0);
                if (j < s1) {
                    const fmk_cplx d = fmk_c(a.src_xy[2 * j] - ct.re, a.src_xy[2 * j + 1] - ct.im);
                    const fmk_cplx id = fmk_cinv(d), qj = a.q[j];
                    wj = fmk_cscale(id, rt);
                    if (a.is_log) { /* b_0 += q log(c - z_j), b_m -= q w^m / m */
                        t0 = fmk_cmul(qj, fmk_clog(fmk_cscale(d, -1)));
                        pw = qj;
                    } else { /* b_m -= G w^m / (z_j - c) */
                        pw = fmk_cscale(fmk_cmul(qj, id), -1);
                    }
                }
                for (int m = 0; m <= a.p; m++) {
                    fmk_cplx term;
                    if (a.is_log) {
                        if (m == 0) {
                            term = t0;
                        } else {
                            pw = fmk_cmul(pw, wj);
                            term = fmk_cscale(pw, -1.0 / m);
                        }
                    } else {
                        term = pw;
                        pw = fmk_cmul(pw, wj);
                    }
                    sum_to_lane(term, m, lane, acc);
                }
            }
        }
    }
    if (ways > 1 && !warps_sum(acc, a.p, ways, smem)) /* the warps' sums in warp order */
        return;
    for (int t = 0; t < SLOTS; t++) {
        const int m = lane + 32 * t;
        if (m <= a.p)
            a.Lc[nc * g + m] = acc[t];
    }
}

/* L2L into the boxes of level l: a warp per child, lane m owns its b_m. */
__global__ void k_l2l(box_args a, int l)
{
    extern __shared__ fmk_cplx smem[];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, nc = a.p + 1;
    fmk_cplx *bp = smem + w * nc;
    const int64_t b = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
    if (b >= ((int64_t)1 << (2 * l)))
        return;
    if (count_in(a.trg_start, a.L, l, b) == 0)
        return;
    const int64_t f = fmk_fmm2d_first(l), P = fmk_fmm2d_first(l - 1) + b / 4;
    const double rp = scale_of(a, P);
    const fmk_cplx tt = fmk_cscale(fmk_csub(center_of(a, f + b), center_of(a, P)), 1.0 / rp);
    const double u = scale_of(a, f + b) / rp;
    for (int k = lane; k < nc; k += 32)
        bp[k] = ld(a.Lc + nc * P + k);
    __syncwarp();
    for (int t = 0; t < SLOTS; t++) {
        const int m = lane + 32 * t;
        if (m > a.p)
            break;
        /* u^m sum_{l=m..p} b_l C(l, m) t^(l-m), Horner from l = p down */
        fmk_cplx s = fmk_c(0, 0);
        for (int k = a.p; k >= m; k--)
            s = fmk_cadd(fmk_cmul(s, tt), fmk_cscale(bp[k], binom(a, k, m)));
        const int64_t o = nc * (f + b) + m;
        a.Lc[o] = fmk_cadd(a.Lc[o], fmk_cscale(s, pow(u, (double)m)));
    }
}

/* L2P and M2P at the finest level: a warp per box, a lane per target; V, D into res (add: onto
 * the P2P sums already there). */
__global__ void k_l2p(box_args a, const int *near_begin, const int *near, const signed char *kind,
                      fmk_cplx *res, int add)
{
    extern __shared__ fmk_cplx smem[];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, nc = a.p + 1;
    fmk_cplx *cf = smem + w * nc;
    const int64_t b = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
    const int64_t leaves = (int64_t)1 << (2 * a.L), fl = fmk_fmm2d_first(a.L);
    if (b >= leaves)
        return;
    const int64_t t0 = a.trg_start[b], t1 = a.trg_start[b + 1];
    if (t0 == t1)
        return;
    const int64_t g = fl + b;
    for (int64_t i0 = t0; i0 < t1; i0 += 32) {
        const int64_t i = i0 + lane;
        const bool act = i < t1;
        const fmk_cplx z = act ? fmk_c(a.trg_xy[2 * i], a.trg_xy[2 * i + 1]) : fmk_c(0, 0);
        fmk_cplx V = fmk_c(0, 0), D = fmk_c(0, 0);
        if (a.L >= 1) {
            __syncwarp();
            for (int k = lane; k < nc; k += 32)
                cf[k] = ld(a.Lc + nc * g + k);
            __syncwarp();
            if (act) {
                fmk_cplx v[2] = {fmk_c(0, 0), fmk_c(0, 0)};
                fmk_fmm2d_l2p_at(a.p, center_of(a, g), scale_of(a, g), cf, z, v);
                V = v[0], D = v[1];
            }
        }
        for (int e = near_begin[b]; e < near_begin[b + 1]; e++) {
            if (kind[e] != 1)
                continue;
            const int64_t c = fl + near[e];
            __syncwarp();
            for (int k = lane; k < nc; k += 32)
                cf[k] = ld(a.M + nc * c + k);
            __syncwarp();
            if (!act)
                continue;
            fmk_cplx v[2] = {V, D};
            fmk_fmm2d_m2p_at(a.p, center_of(a, c), scale_of(a, c), cf, z, v);
            V = v[0], D = v[1];
        }
        if (act)
            res[2 * i] = add ? fmk_cadd(res[2 * i], V) : V,
                    res[2 * i + 1] = add ? fmk_cadd(res[2 * i + 1], D) : D;
    }
}

/* One source's contribution to V, D (fmm2d.h) at (zx, zy); q_zero collects the charge at
 * distance 0. */
__device__ inline void p2p_pair(int is_log, real4d sj, double zx, double zy, double acc[5])
{
    const double dx = zx - sj.x, dy = zy - sj.y, r2 = dx * dx + dy * dy;
    if (r2 == 0) {
        acc[4] += sj.z;
        return;
    }
    const double s = __drcp_rn(r2), ir = dx * s, ii = -dy * s; /* 1 / (z - z_j) */
    if (is_log) {
        acc[0] += sj.z * 0.5 * log(r2);
        acc[2] += sj.z * ir, acc[3] += sj.z * ii;
    } else {
        const double gr = sj.z * ir - sj.w * ii, gi = sj.z * ii + sj.w * ir;
        acc[0] += gr, acc[1] += gi;
        acc[2] -= gr * ir - gi * ii, acc[3] -= gr * ii + gi * ir;
    }
}

/* P2P: a warp per finest box (or split warps, see split_for, each taking every split-th
 * entry of the box's list), each lane two targets (i and i + 32: two independent chains per
 * source read), sources staged through shared memory. With split warps it runs first (beside
 * the expansions, on a second stream) and writes V and D, which k_l2p then adds to; else it
 * adds to k_l2p's. */
template <int WAYS>
__global__ void __launch_bounds__(32 * (WAYS > 1 ? WAYS : WARPS))
    k_p2p(box_args a, const int *near_begin, const int *near, const signed char *kind,
          fmk_cplx *res, double *qzero)
{
    __shared__ real4d tile[WAYS > 1 ? WAYS : WARPS][32];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int part = WAYS > 1 ? w : 0, ways = WAYS;
    const int64_t b = WAYS > 1 ? (int64_t)blockIdx.x
                               : (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
    const int64_t leaves = (int64_t)1 << (2 * a.L);
    if (b >= leaves)
        return;
    const int64_t t0 = a.trg_start[b], t1 = a.trg_start[b + 1];
    for (int64_t i0 = t0; i0 < t1; i0 += 64) {
        const int64_t i = i0 + lane, i2 = i + 32;
        const bool act = i < t1, act2 = i2 < t1;
        const double zx = act ? a.trg_xy[2 * i] : 0, zy = act ? a.trg_xy[2 * i + 1] : 0;
        const double zx2 = act2 ? a.trg_xy[2 * i2] : 0, zy2 = act2 ? a.trg_xy[2 * i2 + 1] : 0;
        double acc[5] = {0, 0, 0, 0, 0}, acc2[5] = {0, 0, 0, 0, 0};
        for (int e = near_begin[b] + part; e < near_begin[b + 1]; e += ways) {
            if (kind[e] != 0)
                continue;
            const int c = near[e];
            const int64_t s0 = a.src_start[c], s1 = a.src_start[c + 1];
            for (int64_t j0 = s0; j0 < s1; j0 += 32) {
                const int nj = s1 - j0 < 32 ? (int)(s1 - j0) : 32;
                __syncwarp();
                if (lane < nj) {
                    const int64_t j = j0 + lane;
                    const fmk_cplx qj = a.q[j];
                    tile[w][lane] = real4d{a.src_xy[2 * j], a.src_xy[2 * j + 1], qj.re, qj.im};
                }
                __syncwarp();
                if (act2) {
                    for (int k = 0; k < nj; k++) {
                        const real4d sj = tile[w][k];
                        p2p_pair(a.is_log, sj, zx, zy, acc);
                        p2p_pair(a.is_log, sj, zx2, zy2, acc2);
                    }
                } else {
                    for (int k = 0; k < nj; k++)
                        p2p_pair(a.is_log, tile[w][k], zx, zy, acc);
                }
            }
        }
        if constexpr (WAYS > 1) { /* the warps' sums by halves (a fixed order) into warp 0 */
            __shared__ double part_sum[WAYS / 2][10][32];
            for (int h = WAYS / 2; h > 0; h >>= 1) {
                if (part >= h && part < 2 * h)
                    for (int k = 0; k < 5; k++)
                        part_sum[part - h][k][lane] = acc[k],
                                               part_sum[part - h][5 + k][lane] = acc2[k];
                __syncthreads();
                if (part < h)
                    for (int k = 0; k < 5; k++)
                        acc[k] += part_sum[part][k][lane], acc2[k] += part_sum[part][5 + k][lane];
                __syncthreads(); /* part_sum is written again */
            }
            if (part != 0)
                continue;
        }
        /* V, D: these, or k_l2p's values plus these */
        const fmk_cplx z0 = fmk_c(0, 0);
        if (act) {
            res[2 * i] = fmk_cadd(WAYS > 1 ? z0 : res[2 * i], fmk_c(acc[0], acc[1]));
            res[2 * i + 1] = fmk_cadd(WAYS > 1 ? z0 : res[2 * i + 1], fmk_c(acc[2], acc[3]));
            qzero[i] = acc[4];
        }
        if (act2) {
            res[2 * i2] = fmk_cadd(WAYS > 1 ? z0 : res[2 * i2], fmk_c(acc2[0], acc2[1]));
            res[2 * i2 + 1] = fmk_cadd(WAYS > 1 ? z0 : res[2 * i2 + 1], fmk_c(acc2[2], acc2[3]));
            qzero[i2] = acc2[4];
        }
    }
}

/* The results in the caller's order: a thread per caller index c (writes together, the reads
 * of V and D one 32-byte piece each). */
__global__ void k_output(int64_t nt, int is_log, const int *place, const fmk_cplx *res,
                         const double *qzero, const double *qtotal, const u64 *bad, double lw,
                         double ps, double *pot, double *grad)
{
    const int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c >= nt || *bad != ~0ull) /* a charge was not finite: the outputs stay as they were */
        return;
    const int64_t i = place[c];
    const fmk_cplx V = res[2 * i], D = res[2 * i + 1];
    if (is_log) {
        if (pot)
            pot[c] = V.re + lw * (*qtotal - qzero[i]);
        if (grad)
            grad[2 * c] = D.re * ps, grad[2 * c + 1] = -D.im * ps;
    } else {
        if (pot)
            pot[2 * c] = -V.re * ps, pot[2 * c + 1] = -V.im * ps;
        if (grad)
            grad[2 * c] = -D.re * ps * ps, grad[2 * c + 1] = -D.im * ps * ps;
    }
}

/* ---------------------------------------------------------------- host side */

unsigned grid_of(int64_t threads, int block) { return (unsigned)((threads + block - 1) / block); }

/* Device bytes for n points (ns sources, nt targets) with these list lengths. */
int64_t device_bytes(const fmk_plan *plan, int64_t ns, int64_t nt, int self, int64_t n_weak,
                     int64_t n_near)
{
    const int p = order_of(plan);
    const int64_t n = self ? ns : ns + nt;
    const int L = fmk_fmm2d_levels(n, leaf_size_of(plan));
    const int64_t boxes = fmk_fmm2d_first(L + 1), leaves = (int64_t)1 << (2 * L);
    const int cw = fmk_kernel_width(plan->kernel);
    int64_t b = 24 * boxes + 16 * (leaves + 1) + 4 * (boxes + 1) + 4 * (leaves + 1);
    b += 12 * (ns + (self ? 0 : nt)) + 4 * n_weak + 5 * n_near;
    b += 16 * ns + 2 * 16 * boxes * (p + 1) + 44 * nt + 8 * cw * (ns + 2 * nt) + 64;
    return b;
}

/* Workspace of the topological phase and the lists' starting capacity (build_ws), with CUB's
 * workspace bounded by 12 bytes a point and 1 MB. */
int64_t build_bytes(int64_t n, int L)
{
    const int64_t boxes = fmk_fmm2d_first(L + 1), leaves = (int64_t)1 << (2 * L);
    return n * (68 + 12) + 352 * boxes + 350 * leaves + (2 << 20);
}

void free_state(fmm2d_gpu *s)
{
    void *bufs[] = {s->d_block, s->d_stage, s->weak_owned ? s->d_weak : NULL, s->near_owned ? s->d_near : NULL,
                    s->kind_owned ? s->d_kind : NULL};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
        if (bufs[k] && cudaFree(bufs[k]) != cudaSuccess)
            (void)cudaGetLastError();
    for (int k = 0; k < s->events; k++)
        if (cudaEventDestroy(s->ev[k]) != cudaSuccess)
            (void)cudaGetLastError();
    if (s->side && cudaStreamDestroy(s->side) != cudaSuccess)
        (void)cudaGetLastError();
    if (s->h_read && cudaFreeHost(s->h_read) != cudaSuccess)
        (void)cudaGetLastError();
    free(s);
}

void gpu_release(fmk_plan *plan)
{
    fmm2d_gpu *s = (fmm2d_gpu *)plan->state;
    plan->state_bytes_device = plan->state_bytes_host = 0;
    if (!s)
        return;
    if (s->keep) { /* set_points_device's release of the old points: kept for the new ones */
        s->keep = 0;
        return;
    }
    const int dev = s->device; /* free_state frees s */
    int prev;
    fmk_status st = fmk_cuda_enter(plan, dev, &prev);
    free_state(s);
    if (st == FMK_OK)
        fmk_cuda_leave(dev, prev);
    plan->state = NULL;
}

void gpu_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d)
{
    const int self = nt < 0;
    if (self)
        nt = ns;
    const int64_t n = self ? ns : ns + nt;
    const int L = fmk_fmm2d_levels(n, leaf_size_of(plan));
    const int64_t boxes = fmk_fmm2d_first(L + 1), leaves = (int64_t)1 << (2 * L);
    *h = (int64_t)sizeof(fmm2d_gpu);
    *d = device_bytes(plan, ns, nt, self, 32 * boxes, 12 * leaves) + build_bytes(n, L);
}

/* A growable device buffer of ints: it starts in the plan's block (owned = 0) and moves to an
 * allocation of its own (owned = 1) only if the lists outgrow the estimate. */
struct ibuf {
    int *d;
    int64_t cap;
    int owned;
};

fmk_status ibuf_reserve(fmk_plan *plan, ibuf *b, int64_t n, int64_t keep, const char *what)
{
    if (n <= b->cap)
        return FMK_OK;
    int64_t cap = n + n / 2 + 1024;
    int *d = NULL;
    fmk_status st = fmk_cuda_alloc(plan, (void **)&d, sizeof(int) * (size_t)cap, what,
                                   (long long)(sizeof(int) * cap));
    if (st != FMK_OK)
        return st;
    if (keep > 0) {
        cudaError_t err = cudaMemcpy(d, b->d, sizeof(int) * (size_t)keep, cudaMemcpyDeviceToDevice);
        if (err != cudaSuccess) {
            cudaFree(d);
            return fmk_cuda_fail(plan, err, "cudaMemcpy (growing a list)");
        }
    }
    if (b->d && b->owned)
        cudaFree(b->d);
    b->d = d, b->cap = cap, b->owned = 1;
    return FMK_OK;
}

#define CK(call, what)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            st = fmk_cuda_fail(plan, e_, what);                                                    \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)
#define CS(call)                                                                                   \
    do {                                                                                           \
        st = (call);                                                                               \
        if (st != FMK_OK)                                                                          \
            goto done;                                                                             \
    } while (0)

/* One device allocation carved into n arrays (256-byte aligned), so that a set_points costs
 * one cudaMalloc and one cudaFree rather than dozens. */
/* region: 0 for arrays kept for the plan's life; EVAL_ONLY for those every eval writes before
 * it reads them, TREE_ONLY for the topological phase's scratch: these two share memory. */
enum { KEPT = 0, EVAL_ONLY = 1, TREE_ONLY = 2 };
struct part {
    void **ptr;
    size_t bytes;
    int region;
};

/* *block (of *bytes, NULL: none yet) is kept when it holds the parts, else replaced by one
 * that does (*fresh = 1). */
fmk_status alloc_parts(fmk_plan *plan, void **block, part *parts, int n, const char *what,
                       long long total, size_t *bytes, int *fresh)
{
    size_t sum[3] = {0, 0, 0};
    for (int k = 0; k < n; k++)
        sum[parts[k].region] += (parts[k].bytes + 255) / 256 * 256;
    size_t all = sum[KEPT] + (sum[EVAL_ONLY] > sum[TREE_ONLY] ? sum[EVAL_ONLY] : sum[TREE_ONLY]);
    all = all > 0 ? all : 256;
    *fresh = !*block || *bytes < all;
    if (*fresh) {
        if (*block && cudaFree(*block) != cudaSuccess)
            (void)cudaGetLastError();
        *block = NULL, *bytes = 0;
        fmk_status st = fmk_cuda_alloc(plan, block, all, what,
                                       total > (long long)all ? total : (long long)all);
        if (st != FMK_OK)
            return st;
        *bytes = all;
    }
    char *next[3];
    next[KEPT] = (char *)*block;
    next[EVAL_ONLY] = next[TREE_ONLY] = (char *)*block + sum[KEPT];
    for (int k = 0; k < n; k++) {
        *parts[k].ptr = next[parts[k].region];
        next[parts[k].region] += (parts[k].bytes + 255) / 256 * 256;
    }
    return FMK_OK;
}

/* The topological phase's workspace, carved from the plan's block (setup_common). */
struct build_ws {
    double *x[2], *y[2];
    int *id[2], *pos[2];
    unsigned *keys[2];
    int *before, *cnt, *off, *begin_a, *begin_b;
    u64 *box_bb, *seg_bb;
    int *weak, *strong[2];
    int *lstat;                 /* LS_COUNT running totals of the lists */
    signed char *kind;
    int64_t weak_cap, strong_cap;
    void *temp;
    size_t temp_bytes;
};

/* CUB's workspace sizes for s's sizes into s->q_* (the queries only when the sizes changed):
 * the bounding box of ns sources and nt targets (the box's d_s, d_t), the sorts and scans of the
 * topological phase, the total charge. */
cudaError_t query_sizes(fmm2d_gpu *s, const double *d_s, const double *d_t, int64_t n_box)
{
    if (s->q_n == s->n && s->q_ns == s->ns && s->q_nt == s->nt)
        return cudaSuccess;
    s->q_n = -1;
    const int64_t n1 = s->n > 0 ? s->n : 1, ns1 = s->ns > 0 ? s->ns : 1;
    double lo[3], hi[3];
    int64_t bad;
    cudaError_t err = fmk_cuda_bounding_box(2, s->ns, d_s, n_box, d_t, NULL, &s->q_box, NULL, lo,
                                            hi, &bad);
    if (err == cudaSuccess)
        err = cub::DeviceRadixSort::SortPairs(NULL, s->q_sort, (unsigned *)NULL, (unsigned *)NULL,
                                              (int *)NULL, (int *)NULL, (int)n1);
    if (err == cudaSuccess)
        err = cub::DeviceScan::ExclusiveSum(NULL, s->q_scan_lists, (u64 *)NULL, (u64 *)NULL,
                                            (int)(s->leaves + 1));
    if (err == cudaSuccess)
        err = cub::DeviceScan::ExclusiveSum(NULL, s->q_scan_points, (int *)NULL, (int *)NULL,
                                            (int)(s->n + 1));
    if (err == cudaSuccess)
        err = cub::DeviceReduce::Sum(NULL, s->q_sum, (double *)NULL, (double *)NULL, (int)ns1);
    if (err == cudaSuccess)
        s->q_n = s->n, s->q_ns = s->ns, s->q_nt = s->nt;
    return err;
}

/* The workspace's arrays for s (CUB's sizes queried), appended to parts; returns their count
 * (at most 32) or -1 with the error recorded. */
int ws_parts(fmk_plan *plan, const fmm2d_gpu *s, build_ws *w, part *parts)
{
    const int64_t n = s->n, leaves = s->leaves, nb = s->n_boxes;
    const int64_t n1 = n > 0 ? n : 1;
    (void)plan;
    size_t tb = s->q_sort > s->q_scan_lists ? s->q_sort : s->q_scan_lists;
    tb = tb > s->q_scan_points ? tb : s->q_scan_points;
    tb = tb > s->q_box ? tb : s->q_box; /* the bounding box (set_points_device) uses it too */
    w->temp_bytes = tb;
    /* a uniform box has about 40 weak entries: the 4 children of each of its parent's ~13
     * strong boxes, less its own ~13 strong ones; and a uniform finest box about 13 strong ones
     * (its 3 x 3 neighbours and the four at distance 2, eq. 2.1 with theta = 1/2); room for
     * twice as many, and about 2.5 for uneven sets */
    w->weak_cap = 80 * nb + 64;
    w->strong_cap = 32 * leaves + 64;
    const size_t nl = (size_t)(leaves + 2), sc = (size_t)w->strong_cap;
    const int T = TREE_ONLY; /* the lists stay (KEPT) */
    part p[] = {
        {(void **)&w->x[0], 8 * (size_t)n1, T},     {(void **)&w->x[1], 8 * (size_t)n1, T},
        {(void **)&w->y[0], 8 * (size_t)n1, T},     {(void **)&w->y[1], 8 * (size_t)n1, T},
        {(void **)&w->id[0], 4 * (size_t)n1, T},    {(void **)&w->id[1], 4 * (size_t)n1, T},
        {(void **)&w->pos[0], 4 * (size_t)(n1 + 1), T},
        {(void **)&w->pos[1], 4 * (size_t)(n1 + 1), T},
        {(void **)&w->keys[0], 4 * (size_t)n1, T},  {(void **)&w->keys[1], 4 * (size_t)n1, T},
        {(void **)&w->box_bb, 32 * (size_t)nb, T},
        {(void **)&w->seg_bb, 32 * (size_t)(leaves > 1 ? leaves / 2 : 1), T},
        {(void **)&w->before, 4 * (size_t)(n + 2), T}, {(void **)&w->cnt, 8 * nl, T},
        {(void **)&w->off, 8 * nl, T},              {(void **)&w->begin_a, 4 * nl, T},
        {(void **)&w->begin_b, 4 * nl, T},
        {(void **)&w->weak, 4 * (size_t)w->weak_cap, KEPT},
        {(void **)&w->strong[0], 4 * sc, KEPT},
        {(void **)&w->strong[1], 4 * sc, KEPT},
        {(void **)&w->kind, sc, KEPT},
        {(void **)&w->lstat, sizeof(int) * LS_COUNT, KEPT},
        {&w->temp, w->temp_bytes, T},
    };
    const int k = (int)(sizeof p / sizeof p[0]);
    for (int i = 0; i < k; i++)
        parts[i] = p[i];
    return k;
}

/* The topological phase from mapped points on the device (d_src: ns * 2; d_trg: nt * 2, NULL
 * when self) into s, in the workspace w. */
fmk_status build_tree(fmk_plan *plan, fmm2d_gpu *s, build_ws *w, const double *d_src,
                      const double *d_trg)
{
    fmk_status st = FMK_OK;
    const int64_t n = s->n, ns = s->ns, L = s->levels, leaves = s->leaves, nb = s->n_boxes;
    const int B = 256;
    const long long total = (long long)plan->state_bytes_device;
    double *x[2] = {w->x[0], w->x[1]}, *y[2] = {w->y[0], w->y[1]};
    int *id[2] = {w->id[0], w->id[1]}, *pos[2] = {w->pos[0], w->pos[1]};
    unsigned *keys[2] = {w->keys[0], w->keys[1]};
    u64 *box_bb = w->box_bb, *seg_bb = w->seg_bb;
    int *before = w->before, *cnt = w->cnt, *off = w->off;
    int *prev_begin = w->begin_a, *cur_begin = w->begin_b;
    ibuf weak = {w->weak, w->weak_cap, 0};
    ibuf strong[2] = {{w->strong[0], w->strong_cap, 0}, {w->strong[1], w->strong_cap, 0}};
    signed char *kind = w->kind;
    int *lstat = w->lstat;
    int kind_owned = 0;
    void *temp = w->temp;
    const size_t temp_bytes = w->temp_bytes;
    size_t tb = 0;
    int64_t n_weak = 0;
    int prev_n = 0;
    const int rank_path = n <= RANK_N;
    const int s_small = rank_path ? -1 : small_split_from(n, (int)L);
    int bb_done = 0; /* the boxes of the coming split are known (from the gather) */
    if (n > 0 && d_src) /* else set_points_device mapped them there */
        k_load_points<<<grid_of(n, B), B>>>(ns, d_src, plan->self ? 0 : s->nt, d_trg, x[0], y[0],
                                            id[0]);
    /* the splits: of large segments by launches over all points, then (from split s_small on)
     * the rest in one launch, a block per segment; for small n (rank_path) by ranks where that
     * is cheaper than the sort (split_by_rank), the last ones a block per segment */
    for (int st_ = 0; st_ <= 2 * L; st_++) {
        const int64_t nseg = (int64_t)1 << st_;
        u64 *bb = st_ % 2 == 0 ? box_bb + 4 * fmk_fmm2d_first(st_ / 2) : seg_bb;
        const int last = st_ == 2 * L;
        const int by_rank = rank_path ? split_by_rank(n, st_) : 0;
        if (by_rank == 2) {
            k_split_rank<<<(unsigned)nseg, RANK_CAP>>>(n, st_, (int)L, x[0], y[0], id[0], box_bb,
                                                       seg_bb);
            CK(cudaGetLastError(), "the split kernel");
            break;
        }
        if (st_ == s_small) {
            CK(cudaFuncSetAttribute(k_split_small, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)SPLIT_SMEM),
               "cudaFuncSetAttribute (the split kernel)");
            k_split_small<<<(unsigned)nseg, SPLIT_THREADS, SPLIT_SMEM>>>(n, st_, (int)L, x[0], y[0],
                                                                         id[0], box_bb, seg_bb);
            CK(cudaGetLastError(), "the split kernel");
            break;
        }
        if (by_rank) {
            k_rank_keys<<<(unsigned)nseg, 1024>>>(n, st_, last, x[0], y[0], bb, keys[0]);
        } else if (!bb_done && !bbox_by_atomics(n, st_)) {
            k_bbox_warp<<<grid_of(32 * nseg, B), B>>>(n, st_, x[0], y[0], bb);
        } else if (!bb_done) {
            k_bbox_reset<<<grid_of(nseg, B), B>>>(nseg, bb);
            k_bbox_atomic<<<grid_of(n, B), B>>>(n, st_, x[0], y[0], bb);
        }
        CK(cudaGetLastError(), "the bounding-box kernels");
        bb_done = 0;
        if (last)
            break;
        if (by_rank) {
            k_rank_scatter<<<grid_of(RANK_TEAM * n, RANK_BLOCK), RANK_BLOCK>>>(
                n, st_, keys[0], x[0], y[0], id[0], x[1], y[1], id[1]);
        } else {
            tb = temp_bytes;
            k_keys<<<grid_of(n, B), B>>>(n, st_, x[0], y[0], bb, keys[0], pos[0]);
            CK(cub::DeviceRadixSort::SortPairs(temp, tb, keys[0], keys[1], pos[0], pos[1], (int)n,
                                               0, st_ + fmk_fmm2d_key_bits(st_)),
               "cub::DeviceRadixSort::SortPairs (the median splits)");
            /* the next split's boxes come with the gather when they go by atomics */
            u64 *bb_next = NULL;
            if (st_ + 1 != s_small && bbox_by_atomics(n, st_ + 1) &&
                !(rank_path && split_by_rank(n, st_ + 1))) {
                bb_next = (st_ + 1) % 2 == 0 ? box_bb + 4 * fmk_fmm2d_first((st_ + 1) / 2) : seg_bb;
                k_bbox_reset<<<grid_of(2 * nseg, B), B>>>(2 * nseg, bb_next);
                bb_done = 1;
            }
            k_gather<<<grid_of(n, B), B>>>(n, pos[1], x[0], y[0], id[0], x[1], y[1], id[1],
                                           st_ + 1, bb_next);
        }
        CK(cudaGetLastError(), "the split kernels");
        double *tx = x[0], *ty = y[0];
        int *ti = id[0];
        x[0] = x[1], y[0] = y[1], id[0] = id[1];
        x[1] = tx, y[1] = ty, id[1] = ti;
    }
    {
        const int64_t nf = plan->self ? (n > nb ? n : nb) : nb, nl = leaves + 1;
        k_finish<<<grid_of(nf > nl ? nf : nl, B), B>>>(nb, box_bb, s->d_center, s->d_radius,
                                                       s->d_stats, plan->self, n, (int)L, x[0],
                                                       y[0], id[0], s->d_src_xy, s->d_src_order,
                                                       s->d_trg_place, s->d_src_start);
        CK(cudaGetLastError(), "the box geometry kernel");
    }
    /* sources and targets in box order (self: k_finish did it) */
    if (!plan->self) {
        k_source_flags<<<grid_of(n + 1, B), B>>>(n, ns, id[0], pos[1]);
        tb = temp_bytes;
        CK(cub::DeviceScan::ExclusiveSum(temp, tb, pos[1], before, (int)(n + 1)),
           "cub::DeviceScan (sources before each point)");
        if (n > 0)
            k_split_points<<<grid_of(n, B), B>>>(n, ns, x[0], y[0], id[0], before, s->d_src_xy,
                                                 s->d_src_order, s->d_trg_xy, s->d_trg_order,
                                                 s->d_trg_place);
        k_starts<<<grid_of(leaves + 1, B), B>>>(n, (int)L, leaves, before, s->d_src_start,
                                                s->d_trg_start);
    }
    CK(cudaGetLastError(), "the point kernels");

    /* the lists, level by level: first with the capacities the block holds and the totals
     * kept on the device (no host round trip per level); if a level does not fit, again with a
     * copy of each level's totals to the host and lists that grow */
    for (int fast = 1; fast >= 0; fast--) {
        const int root = ns > 0 && s->nt > 0 ? 1 : 0;
        if (fast && L <= LISTS_SMALL_L) { /* every level in one launch */
            k_lists_small<<<1, LISTS_THREADS>>>(root, (int)L, prev_begin, cur_begin, strong[0].d,
                                                strong[1].d, s->d_src_start, s->d_trg_start,
                                                s->d_center, s->d_radius,
                                                reinterpret_cast<u64 *>(cnt),
                                                reinterpret_cast<u64 *>(off), weak.d,
                                                s->d_weak_begin, kind, weak.cap, strong[1].cap,
                                                lstat);
            CK(cudaGetLastError(), "the connectivity kernel");
            if (L % 2) { /* where the levels' swaps leave the finest level's lists */
                ibuf tmp = strong[0];
                strong[0] = strong[1], strong[1] = tmp;
                int *tp = prev_begin;
                prev_begin = cur_begin, cur_begin = tp;
            }
        }
        if (!fast || L > LISTS_SMALL_L) {
            k_lists_root<<<1, 1>>>(root, (int)L, prev_begin, strong[0].d, s->d_weak_begin, kind, lstat);
            CK(cudaGetLastError(), "the connectivity kernel");
            n_weak = 0, prev_n = root;
            for (int l = 1; l <= L; l++) {
                const int64_t nbl = (int64_t)1 << (2 * l), f = fmk_fmm2d_first(l);
                u64 *c64 = reinterpret_cast<u64 *>(cnt), *o64 = reinterpret_cast<u64 *>(off);
                int64_t level_base = 0; /* where this level's weak lists start (host totals) */
                k_connect<<<grid_of(32 * (nbl + 1), 128), 128>>>(
                    l, (int)L, 0, prev_begin, strong[0].d, s->d_src_start, s->d_trg_start, s->d_center,
                    s->d_radius, c64, NULL, NULL, NULL, NULL, fast ? lstat : NULL, 0, NULL, NULL);
                CK(cudaGetLastError(), "the connectivity kernel");
                tb = temp_bytes;
                CK(cub::DeviceScan::ExclusiveSum(temp, tb, c64, o64, (int)(nbl + 1)),
                   "cub::DeviceScan (lists)");
                if (fast) {
                    k_level_totals<<<1, 1>>>(o64 + nbl, weak.cap, strong[1].cap, lstat);
                } else {
                    int tot[2];
                    k_totals<<<1, 1>>>(o64 + nbl, cnt);
                    CK(cudaMemcpy(tot, cnt, sizeof tot, cudaMemcpyDeviceToHost), "cudaMemcpy (lists)");
                    if (n_weak + tot[0] > INT32_MAX || tot[1] < 0) {
                        st = fmk_error_set(plan, FMK_ERR_ARG, "the 2D FMM's lists exceed 2^31 entries");
                        goto done;
                    }
                    CS(ibuf_reserve(plan, &weak, n_weak + tot[0], n_weak, "the weak lists"));
                    CS(ibuf_reserve(plan, &strong[1], tot[1] > 0 ? tot[1] : 1, 0, "the strong lists"));
                    if (l == L && tot[1] > w->strong_cap) {
                        CS(fmk_cuda_alloc(plan, (void **)&kind, (size_t)tot[1], "the lists", total));
                        kind_owned = 1;
                    }
                    level_base = n_weak;
                    n_weak += tot[0];
                    prev_n = tot[1];
                }
                k_connect<<<grid_of(32 * (nbl + 1), 128), 128>>>(
                    l, (int)L, 1, prev_begin, strong[0].d, s->d_src_start, s->d_trg_start, s->d_center,
                    s->d_radius, NULL, o64, weak.d, strong[1].d, kind, fast ? lstat : NULL,
                    (int)level_base, s->d_weak_begin + f, cur_begin);
                CK(cudaGetLastError(), "the connectivity kernel");
                ibuf tmp = strong[0];
                strong[0] = strong[1], strong[1] = tmp;
                int *tp = prev_begin;
                prev_begin = cur_begin, cur_begin = tp;
            }
        }
        /* keep the finest level's list starts (the lists themselves stay where they are: in
         * the block unless they outgrew it); the end of the topological phase is then ev[1] */
        CK(cudaMemcpyAsync(s->d_near_begin, prev_begin, 4 * (size_t)(leaves + 1),
                           cudaMemcpyDeviceToDevice),
           "cudaMemcpy (lists)");
        CK(cudaEventRecord(s->ev[1], 0), "cudaEventRecord");
        if (fast) { /* the one wait of the phase: the totals, and whether they fit */
            int *ls = s->h_read;
            CK(cudaMemcpyAsync(ls, lstat, sizeof(int) * LS_COUNT, cudaMemcpyDeviceToHost, 0),
               "the lists");
            CK(cudaStreamSynchronize(0), "the topological phase");
            if (!ls[LS_OVERFLOW]) {
                n_weak = ls[LS_WEAK], prev_n = ls[LS_STRONG];
                break;
            }
        } else {
            CK(cudaEventSynchronize(s->ev[1]), "the topological phase");
        }
    }
    s->d_near = strong[0].d, s->near_owned = strong[0].owned, strong[0].owned = 0;
    s->d_kind = kind, s->kind_owned = kind_owned, kind_owned = 0;
    s->d_weak = weak.d, s->weak_owned = weak.owned, weak.owned = 0;
    s->n_weak = n_weak, s->n_near = prev_n;
done:
    {
        void *bufs[] = {weak.owned ? weak.d : NULL, strong[0].owned ? strong[0].d : NULL,
                        strong[1].owned ? strong[1].d : NULL, kind_owned ? kind : NULL};
        for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
            if (bufs[k] && cudaFree(bufs[k]) != cudaSuccess && st == FMK_OK)
                st = fmk_cuda_fail(plan, cudaGetLastError(), "cudaFree");
    }
    return st;
}

/* Allocates the state for the plan's sizes (s->n, ns, nt, levels set) with the topological
 * phase's workspace ws, whose CUB workspace holds at least box_temp bytes; d_box (not NULL):
 * room for fmk_cuda_bounding_box's box, in the same block. */
fmk_status setup_common(fmk_plan *plan, fmm2d_gpu *s, build_ws *ws_out, void **d_box)
{
    fmk_status st = FMK_OK;
    const int p = s->order, nc = p + 1;
    const int64_t ns = s->ns, nt = s->nt, nb = s->n_boxes, leaves = s->leaves;
    const int cw = fmk_kernel_width(plan->kernel);
    const long long total = (long long)(device_bytes(plan, ns, nt, plan->self, 32 * nb, 12 * leaves) +
                                        build_bytes(s->n, s->levels));
    const size_t ns1 = (size_t)(ns > 0 ? ns : 1), nt1 = (size_t)(nt > 0 ? nt : 1);
    build_ws &ws = *ws_out;
    memset(&ws, 0, sizeof ws);
    {
        const size_t t = s->q_sum; /* query_sizes ran */
        s->temp_bytes = t;
        const int self = plan->self;
        const size_t nbin = (size_t)(2 * p + 2) * (2 * p + 2);
        part parts[] = {
            {(void **)&s->d_binom, 8 * nbin}, /* first: where the kept block has it */
            {(void **)&s->d_center, 16 * (size_t)nb},
            {(void **)&s->d_radius, 8 * (size_t)nb},
            {(void **)&s->d_src_start, 8 * (size_t)(leaves + 1)},
            {(void **)&s->d_src_order, 4 * ns1},
            {(void **)&s->d_src_xy, 16 * ns1},
            {(void **)&s->d_trg_start, self ? 0 : 8 * (size_t)(leaves + 1)},
            {(void **)&s->d_trg_order, self ? 0 : 4 * nt1},
            {(void **)&s->d_trg_place, 4 * nt1},
            {(void **)&s->d_trg_xy, self ? 0 : 16 * nt1},
            {(void **)&s->d_weak_begin, 4 * (size_t)(nb + 1)},
            {(void **)&s->d_q, 16 * ns1, EVAL_ONLY},
            {(void **)&s->d_M, 16 * (size_t)nb * nc, EVAL_ONLY},
            {(void **)&s->d_L, 16 * (size_t)nb * nc, EVAL_ONLY},
            {(void **)&s->d_res, 32 * nt1, EVAL_ONLY},
            {(void **)&s->d_qzero, 8 * nt1, EVAL_ONLY},
            {(void **)&s->d_qtotal, 8},
            {(void **)&s->d_stats, 16},
            {(void **)&s->d_near_begin, 4 * (size_t)(leaves + 1)},
            {&s->d_temp, t},
        };
        part all[64];
        int k = (int)(sizeof parts / sizeof parts[0]);
        for (int i = 0; i < k; i++)
            all[i] = parts[i];
        int kw = ws_parts(plan, s, &ws, all + k);
        if (kw < 0) {
            st = FMK_ERR_DEVICE;
            goto done;
        }
        if (d_box)
            all[k + kw++] = part{d_box, fmk_cuda_box_bytes(), TREE_ONLY};
        int fresh = 0;
        CS(alloc_parts(plan, &s->d_block, all, k + kw, "the 2D FMM's arrays", total,
                       &s->block_bytes, &fresh));
        if (self)
            s->d_trg_start = s->d_src_start, s->d_trg_order = s->d_src_order,
            s->d_trg_xy = s->d_src_xy;
        if (fresh || !s->binom_ready) {
            /* binomials C(n, k), n, k <= 2p + 1, for M2M, M2L and L2L */
            k_binomials<<<1, 128>>>(2 * p + 2, s->d_binom);
            CK(cudaGetLastError(), "the binomial kernel");
            s->binom_ready = 1;
        }
    }
    for (int k = s->events; k < 10; k++) {
        CK(cudaEventCreate(&s->ev[k]), "cudaEventCreate");
        s->events = k + 1;
    }
    if (!s->side)
        CK(cudaStreamCreateWithFlags(&s->side, cudaStreamNonBlocking), "cudaStreamCreate");
    if (!s->h_read) /* pinned: a copy back without the driver's staging */
        CK(cudaMallocHost((void **)&s->h_read, sizeof(int) * (LS_COUNT + 2)), "cudaMallocHost");
done:
    return st;
}

/* The topological phase (build_tree), timed by events into s->tree_ms. */
fmk_status build_timed(fmk_plan *plan, fmm2d_gpu *s, build_ws *ws, const double *d_src,
                       const double *d_trg)
{
    fmk_status st = FMK_OK;
    float ms = 0;
    CK(cudaEventRecord(s->ev[0], 0), "cudaEventRecord");
    CS(build_tree(plan, s, ws, d_src, d_trg)); /* it records ev[1] and waits for it */
    CK(cudaEventElapsedTime(&ms, s->ev[0], s->ev[1]), "cudaEventElapsedTime");
    s->tree_ms = ms;
done:
    return st;
}

/* The state for ns sources and nt targets: keep (not NULL: the previous points' state, of this
 * plan) keeps its block, events and binomials, and gives up the rest; else a new one. */
fmm2d_gpu *new_state(fmk_plan *plan, int64_t ns, int64_t nt, int self, fmm2d_gpu *keep)
{
    fmm2d_gpu *s = keep ? keep : (fmm2d_gpu *)calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (keep) {
        void *bufs[] = {s->d_stage, s->weak_owned ? s->d_weak : NULL,
                        s->near_owned ? s->d_near : NULL, s->kind_owned ? s->d_kind : NULL};
        for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
            if (bufs[k] && cudaFree(bufs[k]) != cudaSuccess)
                (void)cudaGetLastError();
        fmm2d_gpu kept = *s;
        memset(s, 0, sizeof *s);
        s->d_block = kept.d_block, s->block_bytes = kept.block_bytes;
        s->binom_ready = kept.binom_ready;
        memcpy(s->ev, kept.ev, sizeof s->ev);
        s->events = kept.events;
        s->side = kept.side, s->h_read = kept.h_read;
        s->q_n = kept.q_n, s->q_ns = kept.q_ns, s->q_nt = kept.q_nt;
        s->q_box = kept.q_box, s->q_sort = kept.q_sort, s->q_scan_lists = kept.q_scan_lists;
        s->q_scan_points = kept.q_scan_points, s->q_sum = kept.q_sum;
    } else {
        s->q_n = -1;
    }
    s->device = plan->opts.device;
    s->order = order_of(plan);
    s->leaf_size = leaf_size_of(plan);
    s->ns = ns, s->nt = self ? ns : nt, s->self = self;
    s->n = self ? ns : ns + nt;
    s->levels = fmk_fmm2d_levels(s->n, s->leaf_size);
    s->leaves = (int64_t)1 << (2 * s->levels);
    s->n_boxes = fmk_fmm2d_first(s->levels + 1);
    return s;
}

void finish_setup(fmk_plan *plan, fmm2d_gpu *s)
{
    /* the block keeps the topological phase's workspace and list capacity (no allocations in
     * the next set_points but one) */
    plan->state_bytes_device = (int64_t)s->block_bytes +
                               (s->weak_owned ? 4 * s->n_weak : 0) +
                               (s->near_owned ? 5 * s->n_near : 0);
    plan->state_bytes_host = (int64_t)sizeof *s;
    plan->info.order = s->order;
    plan->info.levels = s->levels + 1;
    plan->info.leaf_size = s->leaf_size;
    plan->info.theta = FMK_FMM2D_THETA;
    plan->info.phase_time[FMK_PHASE_TREE] = s->tree_ms * 1e-3;
}

fmk_status gpu_setup(fmk_plan *plan)
{
    if (plan->n_sources + (plan->self ? 0 : plan->n_targets) > INT32_MAX)
        return fmk_error_set(plan, FMK_ERR_ARG, "the 2D FMM on the GPU takes at most 2^31 - 1 points");
    int prev;
    fmk_status st = fmk_cuda_enter(plan, plan->opts.device, &prev);
    if (st != FMK_OK)
        return st;
    fmm2d_gpu *s = new_state(plan, plan->n_sources, plan->n_targets, plan->self, NULL);
    if (!s) {
        fmk_cuda_leave(plan->opts.device, prev);
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory");
    }
    plan->state = s;
    double *d_pts = NULL;
    const size_t bytes = 16 * (size_t)(s->n > 0 ? s->n : 1);
    st = fmk_cuda_alloc(plan, (void **)&d_pts, bytes, "staging the points",
                        (long long)(device_bytes(plan, s->ns, s->nt, plan->self, 0, 0) + bytes));
    if (st == FMK_OK && s->ns > 0) {
        cudaError_t err = cudaMemcpy(d_pts, plan->sources, 16 * (size_t)s->ns, cudaMemcpyHostToDevice);
        if (err == cudaSuccess && !plan->self && s->nt > 0)
            err = cudaMemcpy(d_pts + 2 * s->ns, plan->targets, 16 * (size_t)s->nt,
                             cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            st = fmk_cuda_fail(plan, err, "cudaMemcpy (points to the GPU)");
    }
    build_ws ws;
    if (st == FMK_OK) {
        cudaError_t err = query_sizes(s, NULL, NULL, plan->self ? 0 : s->nt);
        if (err != cudaSuccess)
            st = fmk_cuda_fail(plan, err, "CUB (workspace query)");
    }
    if (st == FMK_OK)
        st = setup_common(plan, s, &ws, NULL);
    if (st == FMK_OK)
        st = build_timed(plan, s, &ws, d_pts, plan->self ? NULL : d_pts + 2 * s->ns);
    if (d_pts && cudaFree(d_pts) != cudaSuccess && st == FMK_OK)
        st = fmk_cuda_fail(plan, cudaGetLastError(), "cudaFree");
    if (st == FMK_OK)
        finish_setup(plan, s);
    else
        gpu_release(plan);
    fmk_cuda_leave(plan->opts.device, prev);
    return st;
}

fmk_status points_device(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                         const double *d_t)
{
    const int self = d_t == NULL;
    if (ns + (self ? 0 : nt) > INT32_MAX)
        return fmk_error_set(plan, FMK_ERR_ARG, "the 2D FMM on the GPU takes at most 2^31 - 1 points");
    double lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
    int64_t bad = -1;
    const int64_t n_box = self ? 0 : nt;
    fmm2d_gpu *s = new_state(plan, ns, nt, self, (fmm2d_gpu *)plan->state);
    if (!s)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory");
    plan->state = s;
    plan->self = self;
    plan->n_sources = ns;
    plan->n_targets = self ? ns : nt;
    cudaError_t err = query_sizes(s, d_s, d_t, n_box);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "CUB (workspace query)");
    /* one allocation (or none: the kept block): the plan's arrays, the topological phase's
     * workspace (whose CUB workspace serves the bounding box too) and the box */
    build_ws ws;
    void *d_box = NULL;
    fmk_status st = setup_common(plan, s, &ws, &d_box);
    if (st != FMK_OK)
        return st;
    size_t temp_bytes = ws.temp_bytes;
    err = fmk_cuda_bounding_box(2, ns, d_s, n_box, d_t, ws.temp, &temp_bytes, d_box, lo, hi, &bad);
    fmk_frame frame;
    if (err != cudaSuccess) {
        st = fmk_cuda_fail(plan, err, "cub::DeviceReduce::TransformReduce (bounding box)");
    } else if (bad >= 0) {
        const char *what = bad < ns ? "sources" : "targets";
        st = fmk_error_set(plan, FMK_ERR_NONFINITE, "%s[%lld] is not finite; points must be finite",
                           what, (long long)(bad < ns ? bad : bad - ns));
    } else {
        st = fmk_plan_frame_from_box(plan, lo, hi, &frame);
    }
    if (st == FMK_OK) {
        plan->frame = frame;
        const int64_t n = s->n;
        if (n > 0)
            k_map_points<<<grid_of(n, 256), 256>>>(ns, d_s, self ? 0 : nt, d_t, frame.center[0],
                                                   frame.center[1], 1.0 / frame.width, ws.x[0],
                                                   ws.y[0], ws.id[0]);
        st = build_timed(plan, s, &ws, NULL, NULL);
    }
    if (st == FMK_OK) {
        finish_setup(plan, s);
        plan->has_points = 1;
    }
    return st;
}

fmk_status gpu_set_points_device(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                                 const double *d_t)
{
    /* The previous points' state is kept for its block (grow-only), so that repeated calls of
     * the same or smaller sizes allocate nothing: the release of the old points leaves it to
     * points_device (a failure there releases it for good). */
    fmm2d_gpu *s = (fmm2d_gpu *)plan->state;
    if (s)
        s->keep = 1;
    return fmk_cuda_set_points_device(plan, ns, d_s, nt, d_t, points_device);
}

/* P2P with the warps per leaf that suit the number of leaves, on stream. */
void launch_p2p(const box_args &a, const fmm2d_gpu *s, cudaStream_t stream)
{
    const int64_t leaves = s->leaves;
    switch (split_for(leaves) > 1 && leaves <= 64 ? 2 * SPLIT_MAX : split_for(leaves)) {
    case 2 * SPLIT_MAX: /* few leaves: more warps still */
        k_p2p<2 * SPLIT_MAX><<<(unsigned)leaves, 64 * SPLIT_MAX, 0, stream>>>(
            a, s->d_near_begin, s->d_near, s->d_kind, s->d_res, s->d_qzero);
        break;
    case SPLIT_MAX:
        k_p2p<SPLIT_MAX><<<(unsigned)leaves, 32 * SPLIT_MAX, 0, stream>>>(
            a, s->d_near_begin, s->d_near, s->d_kind, s->d_res, s->d_qzero);
        break;
    case 4:
        k_p2p<4><<<(unsigned)leaves, 32 * 4, 0, stream>>>(a, s->d_near_begin, s->d_near, s->d_kind,
                                                          s->d_res, s->d_qzero);
        break;
    default:
        k_p2p<1><<<grid_of(32 * leaves, 32 * WARPS), 32 * WARPS, 0, stream>>>(
            a, s->d_near_begin, s->d_near, s->d_kind, s->d_res, s->d_qzero);
    }
}

fmk_status run_eval(fmk_plan *plan, const double *charges, double *pot, double *grad, int on_device)
{
    fmm2d_gpu *s = (fmm2d_gpu *)plan->state;
    fmk_status st = FMK_OK;
    const int cw = fmk_kernel_width(plan->kernel), is_log = plan->kernel == FMK_KERNEL_LOG2D;
    const int64_t ns = s->ns, nt = s->nt, nb = s->n_boxes, leaves = s->leaves;
    const int p = s->order, nc = p + 1, L = s->levels;
    double *phase = plan->info.phase_time;
    const size_t sm = sizeof(fmk_cplx) * WARPS * nc;
    const int B = 32 * WARPS;
    const double *d_q = charges;
    double *out_pot = pot ? (on_device ? pot : s->d_pot) : NULL;
    double *out_grad = grad ? (on_device ? grad : s->d_grad) : NULL;
    float ms[7];
    const int beside = split_for(s->leaves) > 1; /* P2P on the side stream */
    double t_up = fmk_time_now();
    box_args a;
    a.p = p, a.L = L, a.is_log = is_log;
    a.center = s->d_center, a.radius = s->d_radius;
    a.src_start = s->d_src_start, a.trg_start = s->d_trg_start;
    a.src_xy = s->d_src_xy, a.trg_xy = s->d_trg_xy;
    a.q = s->d_q, a.M = s->d_M, a.Lc = s->d_L;
    a.binom = s->d_binom, a.nb = 2 * p + 2;

    if (ns == 0) { /* only the device path gets here: plan.c answers host calls itself */
        if (pot)
            CK(cudaMemset(pot, 0, (size_t)nt * cw * sizeof(double)), "cudaMemset (pot)");
        if (grad)
            CK(cudaMemset(grad, 0, (size_t)nt * 2 * sizeof(double)), "cudaMemset (grad)");
        CK(cudaDeviceSynchronize(), "cudaMemset");
        return FMK_OK;
    }
    if (!on_device && !s->d_stage) { /* host calls: their staging arrays, once */
        const size_t bc = (size_t)(8 * cw * ns + 255) / 256 * 256;
        const size_t bp = (size_t)(8 * cw * nt + 255) / 256 * 256, bg = (size_t)(16 * nt);
        CS(fmk_cuda_alloc(plan, &s->d_stage, bc + bp + bg, "the host calls' staging arrays",
                          (long long)(plan->state_bytes_device + bc + bp + bg)));
        s->d_charges = (double *)s->d_stage;
        s->d_pot = (double *)((char *)s->d_stage + bc);
        s->d_grad = (double *)((char *)s->d_stage + bc + bp);
        plan->state_bytes_device += (int64_t)(bc + bp + bg);
        plan->info.bytes_device = plan->state_bytes_device;
        out_pot = pot ? s->d_pot : NULL;
        out_grad = grad ? s->d_grad : NULL;
    }
    if (!on_device) {
        CK(cudaMemcpy(s->d_charges, charges, (size_t)ns * cw * sizeof(double),
                      cudaMemcpyHostToDevice),
           "cudaMemcpy (charges to the GPU)");
        d_q = s->d_charges;
    }
    /* the charges are checked on the way into box order (k_charges); the one wait of the eval
     * reads the verdict at the end, and k_output writes only if they were all finite */
    CK(cudaEventRecord(s->ev[0], 0), "cudaEventRecord");
    k_charges<<<grid_of(ns, 256), 256>>>(ns, is_log, s->d_src_order, d_q, s->d_q, s->d_stats);
    if (is_log) {
        size_t tb = s->temp_bytes;
        CK(cub::DeviceReduce::Sum(s->d_temp, tb, d_q, s->d_qtotal, (int)ns),
           "cub::DeviceReduce::Sum (total charge)");
    }
    /* no clearing of M and L: P2M and M2M write every box with sources (no other is read),
     * M2L every box's local expansion before L2L adds to it */
    CK(cudaEventRecord(s->ev[1], 0), "cudaEventRecord");
    /* few leaves: the near field (which needs only the charges) runs on the side stream while
     * the expansions go up and down; L2P then adds to it */
    if (beside) {
        CK(cudaStreamWaitEvent(s->side, s->ev[1], 0), "cudaStreamWaitEvent");
        CK(cudaEventRecord(s->ev[8], s->side), "cudaEventRecord");
        launch_p2p(a, s, s->side);
        CK(cudaEventRecord(s->ev[9], s->side), "cudaEventRecord");
    }
    k_p2m<<<grid_of(32 * leaves, B), B>>>(a);
    CK(cudaEventRecord(s->ev[2], 0), "cudaEventRecord");
    for (int l = L - 1; l >= 1; l--) { /* few boxes: a warp per child (WARPS = 4) */
        const int64_t nbl = (int64_t)1 << (2 * l);
        const int per_child = split_for(nbl) > 1;
        k_m2m<<<per_child ? (unsigned)nbl : grid_of(32 * nbl, B), B, sm>>>(a, l, per_child);
    }
    CK(cudaEventRecord(s->ev[3], 0), "cudaEventRecord");
    if (nb > 1) {
        const int split = split_for(nb - 1);
        const unsigned tm = threads_for(split);
        k_m2l<<<split > 1 ? (unsigned)(nb - 1) : grid_of(32 * (nb - 1), tm), tm,
                m2l_smem(p, (int)tm / 32)>>>(a, s->d_weak_begin, s->d_weak, s->d_near_begin,
                                             s->d_near, s->d_kind, nb, split);
    }
    CK(cudaEventRecord(s->ev[4], 0), "cudaEventRecord");
    for (int l = 2; l <= L; l++)
        k_l2l<<<grid_of(32 * ((int64_t)1 << (2 * l)), B), B, sm>>>(a, l);
    CK(cudaEventRecord(s->ev[5], 0), "cudaEventRecord");
    if (beside)
        CK(cudaStreamWaitEvent(0, s->ev[9], 0), "cudaStreamWaitEvent");
    k_l2p<<<grid_of(32 * leaves, B), B, sm>>>(a, s->d_near_begin, s->d_near, s->d_kind, s->d_res,
                                              beside);
    CK(cudaEventRecord(s->ev[6], 0), "cudaEventRecord");
    if (!beside)
        launch_p2p(a, s, 0);
    CK(cudaEventRecord(s->ev[7], 0), "cudaEventRecord");
    CK(cudaGetLastError(), "the 2D FMM kernels");
    k_output<<<grid_of(nt, 256), 256>>>(nt, is_log, s->d_trg_place, s->d_res, s->d_qzero,
                                        s->d_qtotal, s->d_stats, plan->frame.log_width,
                                        plan->frame.pot_scale, out_pot, out_grad);
    CK(cudaGetLastError(), "the output kernel");
    {
        u64 bad = 0;
        CK(cudaMemcpyAsync(s->h_read, s->d_stats, sizeof bad, cudaMemcpyDeviceToHost, 0),
           "the 2D FMM kernels");
        CK(cudaStreamSynchronize(0), "the 2D FMM kernels");
        memcpy(&bad, s->h_read, sizeof bad);
        if (bad != ~0ull) { /* nothing was written */
            CK(cudaMemsetAsync(s->d_stats, 0xff, sizeof(u64)), "cudaMemset");
            double q[2] = {0, 0};
            CK(cudaMemcpy(q, d_q + cw * bad, cw * sizeof(double), cudaMemcpyDeviceToHost),
               "cudaMemcpy (a charge from the GPU)");
            return fmk_error_set(plan, FMK_ERR_NONFINITE,
                                 "charges[%lld] is %g%s; charges must be finite", (long long)bad,
                                 isfinite(q[0]) && cw == 2 ? q[1] : q[0],
                                 isfinite(q[0]) && cw == 2 ? " (imaginary part)" : "");
        }
    }
    for (int k = 0; k < 7; k++)
        CK(cudaEventElapsedTime(&ms[k], s->ev[k], s->ev[k + 1]), "cudaEventElapsedTime");
    if (beside) /* P2P's own time (L2P's includes any wait for it) */
        CK(cudaEventElapsedTime(&ms[6], s->ev[8], s->ev[9]), "cudaEventElapsedTime");
    {
        const double t_dn = fmk_time_now();
        if (!on_device) {
            if (pot)
                CK(cudaMemcpy(pot, s->d_pot, (size_t)nt * cw * sizeof(double), cudaMemcpyDeviceToHost),
                   "cudaMemcpy (potential from the GPU)");
            if (grad)
                CK(cudaMemcpy(grad, s->d_grad, (size_t)nt * 2 * sizeof(double), cudaMemcpyDeviceToHost),
                   "cudaMemcpy (gradient from the GPU)");
        }
        (void)t_up;
        phase[FMK_PHASE_UPLOAD] = ms[0] * 1e-3;
        phase[FMK_PHASE_P2M] = ms[1] * 1e-3;
        phase[FMK_PHASE_M2M] = ms[2] * 1e-3;
        phase[FMK_PHASE_M2L] = ms[3] * 1e-3;
        phase[FMK_PHASE_L2L] = ms[4] * 1e-3;
        phase[FMK_PHASE_L2P] = ms[5] * 1e-3;
        phase[FMK_PHASE_P2P] = ms[6] * 1e-3;
        phase[FMK_PHASE_DOWNLOAD] = fmk_time_now() - t_dn;
        phase[FMK_PHASE_TREE] = s->tree_ms * 1e-3;
    }
done:
    return st;
}

fmk_status gpu_eval(fmk_plan *plan, const double *charges, double *pot, double *grad, int on_device)
{
    return fmk_cuda_eval(plan, charges, pot, grad, on_device, run_eval);
}

} // namespace

extern "C" const fmk_engine fmk_engine_fmm2d_cuda = {
    /* .name */ "fmm2d/cuda",
    /* .setup */ gpu_setup,
    /* .eval */ gpu_eval,
    /* .memory */ gpu_memory,
    /* .set_points_device */ gpu_set_points_device,
    /* .release */ gpu_release,
    /* .check_opts */ fmk_fmm2d_check_opts,
};
