/* pyramid.cu -- the topological phase's splits on the GPU: the pyramid of fmm2d.h (median
 * splits, the boxes' geometry, the points in box order), the same tree the CPU builds
 * (fmm2d_cuda.h). */
#include <math.h>

#include <cub/cub.cuh>

#include "fmm2d/cuda/fmm2d_cuda.h"

namespace {

__device__ inline double u2d(u64 v)
{
    return __longlong_as_double((long long)v);
}
__device__ inline u64 d2u(double v)
{
    return (u64)__double_as_longlong(v);
}

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
inline bool bbox_by_atomics(int64_t n, int s)
{
    return n > 0 && (n >> s) > 4096 && s < 12;
}

/* The block's segment (blockIdx.x of split s0) into shared memory; returns its length. */
__device__ int segment_to_shared(int64_t n, int s0, const double *x, const double *y, const int *id,
                                 double *xs, double *ys, int *ids)
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
__global__ void __launch_bounds__(1024) k_rank_keys(int64_t n, int s, int last, const double *x,
                                                    const double *y, u64 *bb, unsigned *comp)
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
            lx = fmin(lx, __shfl_xor_sync(FULL, lx, o)),
            ly = fmin(ly, __shfl_xor_sync(FULL, ly, o));
            hx = fmax(hx, __shfl_xor_sync(FULL, hx, o)),
            hy = fmax(hy, __shfl_xor_sync(FULL, hy, o));
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
                    below +=
                        (comp[j] < c) + (comp[j + 1] < c) + (comp[j + 2] < c) + (comp[j + 3] < c);
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
        radius[t] = fmk_fmm2d_box(lx, ly, hx, hy, center + 2 * t, center + 2 * t + 1);
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

} // namespace

cudaError_t fmk_cuda_fmm2d_map_points(int64_t ns, const double *d_s, int64_t nt, const double *d_t,
                                      const fmk_frame *frame, const fmk_fmm2d_ws *w)
{
    const int64_t n = ns + nt;
    if (n > 0)
        k_map_points<<<grid_of(n, 256), 256>>>(ns, d_s, nt, d_t, frame->center[0], frame->center[1],
                                               1.0 / frame->width, w->x[0], w->y[0], w->id[0]);
    return cudaGetLastError();
}

fmk_status fmk_cuda_fmm2d_pyramid(fmk_plan *plan, fmk_fmm2d_gpu *s, const fmk_fmm2d_ws *w,
                                  const double *d_src, const double *d_trg)
{
    fmk_status st = FMK_OK;
    const int64_t n = s->n, ns = s->ns, L = s->levels, leaves = s->leaves, nb = s->n_boxes;
    const int B = 256;
    double *x[2] = {w->x[0], w->x[1]}, *y[2] = {w->y[0], w->y[1]};
    int *id[2] = {w->id[0], w->id[1]}, *pos[2] = {w->pos[0], w->pos[1]};
    unsigned *keys[2] = {w->keys[0], w->keys[1]};
    u64 *box_bb = w->box_bb, *seg_bb = w->seg_bb;
    int *before = w->before;
    void *temp = w->temp;
    const size_t temp_bytes = w->temp_bytes;
    size_t tb = 0;
    const int rank_path = n <= RANK_N;
    const int s_small = rank_path ? -1 : small_split_from(n, (int)L);
    int bb_done = 0;    /* the boxes of the coming split are known (from the gather) */
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
            k_gather<<<grid_of(n, B), B>>>(n, pos[1], x[0], y[0], id[0], x[1], y[1], id[1], st_ + 1,
                                           bb_next);
        }
        CK(cudaGetLastError(), "the split kernels");
        double *tx = x[0], *ty = y[0];
        int *ti = id[0];
        x[0] = x[1], y[0] = y[1], id[0] = id[1];
        x[1] = tx, y[1] = ty, id[1] = ti;
    }
    {
        const int64_t nf = plan->self ? (n > nb ? n : nb) : nb, nl = leaves + 1;
        k_finish<<<grid_of(nf > nl ? nf : nl, B), B>>>(
            nb, box_bb, s->d_center, s->d_radius, s->d_stats, plan->self, n, (int)L, x[0], y[0],
            id[0], s->d_src_xy, s->d_src_order, s->d_trg_place, s->d_src_start);
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
done:
    return st;
}
