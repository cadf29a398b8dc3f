/*
 * moments.cu -- the evaluation's first phase: the charge check (non-finite charges; in fp32
 * the power of two that brings the largest |q| into [1, 2)), the charges packed in Morton
 * order, and every node's moments (P2M at the leaves, M2M up the tree; tree3d.h's formulas,
 * sums in fp64, stored in the working precision). Small trees in one launch (k_prep_small,
 * k_moments_small), larger ones in one launch up the tree (k_moments_up), the largest one
 * launch per level (k_pack_charges, k_moments): every path takes a leaf's and a node's
 * moments with the same sums in the same order, so they agree bit for bit.
 */
#include <cub/block/block_reduce.cuh>
#include <cuda/atomic>
#include <cuda/functional>

#include "treecode/cuda/bh_device.cuh"

namespace {

template <typename R>
__global__ void k_pack_charges(int64_t n, const int32_t *__restrict__ order,
                               const double *__restrict__ q,
                               const unsigned long long *__restrict__ stats,
                               typename vec4<R>::type *__restrict__ src)
{
    int64_t s = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (s >= n)
        return;
    src[s].w = (R)(q[order[s]] * charge_scale<R>(stats));
}

/* Charge check: the first non-finite charge (stats[0], the max of its complement) and the
 * largest |q| as bits (stats[1], max), reduced per block before one atomic each (one atomic
 * per thread on one address serializes them). stats must hold zeros before, unless the
 * grid is one block (direct): that block writes the words itself, the walk's overflow flag,
 * the moments' block count, the walk's tickets and its interaction counts (stats[2] .. [6])
 * cleared with them, so no memset comes first.
 * CHARGE_ILP charges in flight per thread (one block has few warps to hide the loads). */
constexpr int CHARGE_ILP = 4, CHARGE_BLOCK = 1024;

__global__ void k_charge_stats(int64_t n, const double *__restrict__ q,
                               unsigned long long *__restrict__ stats, int direct)
{
    unsigned long long big = 0, bad = ~0ull;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i0 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i0 < n;
         i0 += stride * CHARGE_ILP) {
        double a[CHARGE_ILP];
#pragma unroll
        for (int u = 0; u < CHARGE_ILP; u++)
            a[u] = i0 + u * stride < n ? fabs(q[i0 + u * stride]) : 0.0;
#pragma unroll
        for (int u = 0; u < CHARGE_ILP; u++) {
            const int64_t i = i0 + u * stride;
            if (!isfinite(a[u]))
                bad = (unsigned long long)i < bad ? (unsigned long long)i : bad;
            else
                big = (unsigned long long)__double_as_longlong(a[u]) > big
                          ? (unsigned long long)__double_as_longlong(a[u])
                          : big;
        }
    }
    for (int d = 16; d > 0; d >>= 1) {
        const unsigned long long b2 = __shfl_xor_sync(0xffffffffu, big, d);
        const unsigned long long x2 = __shfl_xor_sync(0xffffffffu, bad, d);
        big = b2 > big ? b2 : big, bad = x2 < bad ? x2 : bad;
    }
    __shared__ unsigned long long s_big[32], s_bad[32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0)
        s_big[wid] = big, s_bad[wid] = bad;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 1; k < (int)(blockDim.x >> 5); k++)
            big = s_big[k] > big ? s_big[k] : big, bad = s_bad[k] < bad ? s_bad[k] : bad;
        if (direct) {
            stats[0] = bad != ~0ull ? ~bad : 0, stats[1] = big, stats[2] = 0, stats[3] = 0;
            stats[4] = 0, stats[5] = 0, stats[6] = 0;
            return;
        }
        if (bad != ~0ull)
            atomicMax(&stats[0], ~bad);
        if (big)
            atomicMax(&stats[1], big);
    }
}
/* ---------------------------------------------------------------------------------------- */
/* Moments (tree3d.h)                                                                       */

__device__ __forceinline__ uint64_t compact3(uint64_t v)
{
    v &= 0x1249249249249249ull;
    v = (v ^ (v >> 2)) & 0x10c30c30c30c30c3ull;
    v = (v ^ (v >> 4)) & 0x100f00f00f00f00full;
    v = (v ^ (v >> 8)) & 0x1f0000ff0000ffull;
    v = (v ^ (v >> 16)) & 0x1f00000000ffffull;
    v = (v ^ (v >> 32)) & 0x1fffffull;
    return v;
}

/* A node's record read through L2 (ld.global.cg) when l2: k_moments_up reads records that
 * other blocks of its launch wrote, which the SM's L1 may hold stale. */
__device__ __forceinline__ real4f ld_record(const real4f *p)
{
    const float4 v = __ldcg((const float4 *)p);
    return real4f{v.x, v.y, v.z, v.w};
}
__device__ __forceinline__ real4d ld_record(const real4d *p)
{
    const double2 a = __ldcg((const double2 *)p), b = __ldcg((const double2 *)p + 1);
    return real4d{a.x, a.y, b.x, b.y};
}

template <typename V> __device__ __forceinline__ V rec(const V *p, bool l2)
{
    return l2 ? ld_record(p) : *p;
}

/* The geometric centre of the cube of a node of level L whose first point has the given key
 * (its key prefix), and the cube's side, in the working coordinates. */
__device__ __forceinline__ double node_cube(uint64_t key, int L, double scale, double gc[3])
{
    const double side = ldexp(scale, -L);
    const int sh = FMK_TREE_KEY_BITS - L;
    gc[0] = scale + ((double)(compact3(key >> 2) >> sh) + 0.5) * side;
    gc[1] = scale + ((double)(compact3(key >> 1) >> sh) + 0.5) * side;
    gc[2] = scale + ((double)(compact3(key) >> sh) + 0.5) * side;
    return side;
}

/* Node i's record from its sums: centre of |q| xc, opening radius (eq. 2, 3), M, D, S, A. */
template <typename R>
__device__ __forceinline__ void node_store(int32_t i, double side, const double gc[3],
                                           const double xc[3], double A, double M,
                                           const double D[3], const double S[6], double inv_theta,
                                           typename vec4<R>::type *__restrict__ node)
{
    typedef typename vec4<R>::type V;
    const double sx = xc[0] - gc[0], sy = xc[1] - gc[1], sz = xc[2] - gc[2];
    const double r_open = side * inv_theta + sqrt(sx * sx + sy * sy + sz * sz); /* eq. 2, 3 */
    V o0, o1, o2, o3;
    o0.x = (R)xc[0], o0.y = (R)xc[1], o0.z = (R)xc[2], o0.w = (R)(r_open * r_open);
    o1.x = (R)M, o1.y = (R)D[0], o1.z = (R)D[1], o1.w = (R)D[2];
    o2.x = (R)S[0], o2.y = (R)S[1], o2.z = (R)S[2], o2.w = (R)S[3];
    o3.x = (R)S[4], o3.y = (R)S[5], o3.z = (R)A, o3.w = 0;
    node[4 * i] = o0, node[4 * i + 1] = o1, node[4 * i + 2] = o2, node[4 * i + 3] = o3;
}

/* FMK_MOMENTS_LANES (1, 2, 4, 8, 16 or 32): lanes per leaf in the leaves' moments. 2: each lane
 * sums every other point of its leaf (faster than a thread per leaf; wider segments cost more
 * in shuffles than they save, docs/tree.md). */
#ifndef FMK_MOMENTS_LANES
#define FMK_MOMENTS_LANES 2
#endif
constexpr int MOMENTS_LANES = FMK_MOMENTS_LANES;
static_assert(MOMENTS_LANES >= 1 && MOMENTS_LANES <= 32 &&
                  (MOMENTS_LANES & (MOMENTS_LANES - 1)) == 0,
              "FMK_MOMENTS_LANES: a power of two from 1 to 32");

/* The sums of v over the G lanes of a segment of the warp (lanes G s .. G s + G - 1) by a
 * butterfly (xor G/2, ..., 1): every lane of the segment gets the same bits (the two operands
 * of each addition are the same pair). All 32 lanes call. */
template <int G, int N> __device__ __forceinline__ void segment_sums(double (&v)[N])
{
#pragma unroll
    for (int d = G / 2; d > 0; d >>= 1)
#pragma unroll
        for (int k = 0; k < N; k++)
            v[k] += __shfl_xor_sync(0xffffffffu, v[k], d);
}

/* Leaf i (links l, level L) by a segment of MOMENTS_LANES lanes of the warp, all 32 lanes
 * calling (active: this segment has a leaf; the others add zeros): lane k of the segment sums
 * the leaf's points k, k + G, ... in order (U of them loaded at once), the segment adds its
 * lanes' sums (segment_sums), and its lane 0 writes the record. Every GPU path takes a leaf's
 * moments here, so they agree bit for bit (U changes the loads, not the sums). One pass over
 * the points: with d = x - gc, the offset from the cube's centre, the sums A = sum |q|,
 * M = sum q, sum |q| d, D = sum q d and S = sum q d d^T (fp64); then the centre of |q|
 * xc = gc + sum |q| d / A, and D, S moved to it (h = xc - gc: D - M h, S - D h^T - h D^T +
 * M h h^T; every term is of the cube's size, so nothing cancels beyond fp64's rounding of it).
 * q != NULL: the charges are packed on the way, q[order[j]] cs into src_w[j].w (src_w is
 * src). In fp32 (lo: the sources' k_pack_points rest) a leaf's points are taken whole, x + lo,
 * and xc is rounded to fp32 before the moments are moved to it: the node's stored centre is
 * then exact, and M2P and M2L offsets from it are as good as the target's (the walks form them
 * relative to the group, walk_args), however wide the frame. */
template <typename R, int U = 1>
__device__ __forceinline__ void
leaf_moments_coop(bool active, int32_t i, int4 l, int L, double inv_theta, double scale,
                  const uint64_t *__restrict__ keys, const typename vec4<R>::type *src,
                  typename vec4<R>::type *src_w, const real4f *__restrict__ lo,
                  const int32_t *__restrict__ order, const double *__restrict__ q, double cs,
                  typename vec4<R>::type *__restrict__ node)
{
    typedef typename vec4<R>::type V;
    constexpr int G = MOMENTS_LANES;
    const int sub = threadIdx.x & (G - 1);
    const int32_t b = active ? l.z : 0, e = active ? l.w : 0;
    double gc[3];
    const double side = node_cube(active ? keys[l.z] : 0, L, scale, gc);
    double s[14] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; /* A, M, |q| d, D, S */
    for (int32_t j0 = b + sub; j0 < e; j0 += U * G) {
        V p[U];
        real4f r[U];
        double w[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int32_t j = j0 + u * G;
            const bool in = j < e;
            p[u] = in ? src[j] : V{0, 0, 0, 0};
            r[u] = in && lo ? lo[j] : real4f{0, 0, 0, 0};
            w[u] = in && q ? q[order[j]] * cs : 0.0;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int32_t j = j0 + u * G;
            if (j >= e)
                break;
            if (q) /* the charge packed, as the walks read it */
                src_w[j].w = (R)w[u];
            const double wq = q ? (double)(R)w[u] : (double)p[u].w, a = fabs(wq);
            const double dx = ((double)p[u].x + r[u].x) - gc[0],
                         dy = ((double)p[u].y + r[u].y) - gc[1],
                         dz = ((double)p[u].z + r[u].z) - gc[2];
            s[0] += a, s[1] += wq;
            s[2] += a * dx, s[3] += a * dy, s[4] += a * dz;
            s[5] += wq * dx, s[6] += wq * dy, s[7] += wq * dz;
            s[8] += wq * dx * dx, s[9] += wq * dx * dy, s[10] += wq * dx * dz;
            s[11] += wq * dy * dy, s[12] += wq * dy * dz, s[13] += wq * dz * dz;
        }
    }
    segment_sums<G>(s);
    const double A = s[0], M = s[1];
    double xc[3], h[3];
    for (int d = 0; d < 3; d++) {
        xc[d] = (double)(R)(A > 0 ? gc[d] + s[2 + d] / A : gc[d]);
        h[d] = xc[d] - gc[d];
    }
    double D[3], S[6];
    for (int d = 0; d < 3; d++)
        D[d] = s[5 + d] - M * h[d];
    const int ia[6] = {0, 0, 0, 1, 1, 2}, ib[6] = {0, 1, 2, 1, 2, 2};
    for (int k = 0; k < 6; k++) {
        const int a_ = ia[k], b_ = ib[k];
        S[k] = s[8 + k] - s[5 + a_] * h[b_] - h[a_] * s[5 + b_] + M * h[a_] * h[b_];
    }
    if (active && sub == 0)
        node_store<R>(i, side, gc, xc, A, M, D, S, inv_theta, node);
}

/* An inner node i (level L, links l, nc children, its first point's key) from its children's
 * records (leaves: leaf_moments_coop). */
template <typename R, bool L2 = false>
__device__ __forceinline__ void moments_node_of(int32_t i, int L, int4 l, int32_t nc, uint64_t key,
                                                double inv_theta, double scale,
                                                typename vec4<R>::type *__restrict__ node)
{
    /* L2: the children's records read through L2 (ld_record; k_moments_up), with the loops
     * over the children unrolled (predicated: the same sums in the same order), so that their
     * loads are in flight together (a node on a chain up the tree: one latency, not nc) */
    typedef typename vec4<R>::type V;
    double gc[3];
    const double side = node_cube(key, L, scale, gc);
    double A = 0, M = 0, xc[3] = {0, 0, 0}, D[3] = {0, 0, 0}, S[6] = {0, 0, 0, 0, 0, 0};
    const int32_t c0 = l.x;
#pragma unroll(L2 ? 8 : 1)
    for (int32_t k = 0; k < (L2 ? 8 : nc); k++) {
        if (L2 && k >= nc)
            continue;
        const int32_t c = c0 + k;
        const V a = rec(node + 4 * c, L2), m = rec(node + 4 * c + 1, L2),
                s3 = rec(node + 4 * c + 3, L2);
        const double ac = (double)s3.z;
        A += ac, M += (double)m.x;
        xc[0] += ac * (double)a.x, xc[1] += ac * (double)a.y, xc[2] += ac * (double)a.z;
    }
    for (int d = 0; d < 3; d++)
        xc[d] = (double)(R)(A > 0 ? xc[d] / A : gc[d]);
#pragma unroll(L2 ? 8 : 1)
    for (int32_t k = 0; k < (L2 ? 8 : nc); k++) {
        if (L2 && k >= nc)
            continue;
        const int32_t c = c0 + k;
        const V a = rec(node + 4 * c, L2), m = rec(node + 4 * c + 1, L2),
                s2 = rec(node + 4 * c + 2, L2), s3 = rec(node + 4 * c + 3, L2);
        const double h[3] = {(double)a.x - xc[0], (double)a.y - xc[1], (double)a.z - xc[2]};
        const double Mc = (double)m.x;
        const double Dc[3] = {(double)m.y, (double)m.z, (double)m.w};
        const double Sc[6] = {(double)s2.x, (double)s2.y, (double)s2.z,
                              (double)s2.w, (double)s3.x, (double)s3.y};
        /* D += D_c + M_c h;  S += S_c + D_c h^T + h D_c^T + M_c h h^T */
        for (int d = 0; d < 3; d++)
            D[d] += Dc[d] + Mc * h[d];
        const int ia[6] = {0, 0, 0, 1, 1, 2}, ib[6] = {0, 1, 2, 1, 2, 2};
        for (int e = 0; e < 6; e++) {
            const int a_ = ia[e], b_ = ib[e];
            S[e] += Sc[e] + Dc[a_] * h[b_] + h[a_] * Dc[b_] + Mc * h[a_] * h[b_];
        }
    }
    node_store<R>(i, side, gc, xc, A, M, D, S, inv_theta, node);
}

template <typename R>
__device__ __forceinline__ void
moments_node(int32_t i, int L, double inv_theta, double scale, const uint64_t *__restrict__ keys,
             const int4 *__restrict__ links, const int32_t *__restrict__ n_children,
             typename vec4<R>::type *__restrict__ node)
{
    const int4 l = links[i];
    moments_node_of<R>(i, L, l, n_children[i], keys[l.z], inv_theta, scale, node);
}

/* Node i of either kind (valid: i is a node) by a segment of MOMENTS_LANES lanes, all 32 lanes
 * calling: a leaf by leaf_moments_coop (its charges already packed), an inner node by the
 * segment's lane 0. */
template <typename R>
__device__ __forceinline__ void
moments_node_seg(bool valid, int32_t i, int L, double inv_theta, double scale,
                 const uint64_t *__restrict__ keys, const int4 *__restrict__ links,
                 const int32_t *__restrict__ n_children, const typename vec4<R>::type *src,
                 const real4f *__restrict__ lo, typename vec4<R>::type *__restrict__ node)
{
    const int4 l = valid ? links[i] : make_int4(0, 0, 0, 0);
    leaf_moments_coop<R>(valid && l.x < 0, i, l, L, inv_theta, scale, keys, src, NULL, lo, NULL,
                         NULL, 0, node);
    if (valid && l.x >= 0 && (threadIdx.x & (MOMENTS_LANES - 1)) == 0)
        moments_node<R>(i, L, inv_theta, scale, keys, links, n_children, node);
}

template <typename R>
__global__ void k_moments(int32_t first, int32_t count, int L, double inv_theta, double scale,
                          const uint64_t *__restrict__ keys, const int4 *__restrict__ links,
                          const int32_t *__restrict__ n_children,
                          const typename vec4<R>::type *__restrict__ src,
                          const real4f *__restrict__ lo, typename vec4<R>::type *__restrict__ node)
{
    /* a segment of MOMENTS_LANES lanes per node (the whole warp calls) */
    const int64_t k = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / MOMENTS_LANES;
    moments_node_seg<R>(k < count, first + (int32_t)(k < count ? k : 0), L, inv_theta, scale, keys,
                        links, n_children, src, lo, node);
}

/* The level boundaries of a small tree (k_prep_small, k_moments_small). */
struct level_table {
    int32_t begin[FMK_TREE_MAX_LEVEL + 2];
};

/* The charge check, the charges' packing and every moment of a small tree in one block (the
 * kernels of run_eval and run_eval_t from the charge check to the moments, which for small N
 * cost more in launches and copies than in work): the check's words written, not reduced
 * into (stats[2], the split walk's overflow flag, stats[4], the walk's tickets, and stats[5],
 * stats[6], its interaction counts, cleared),
 * the charges times charge_scale into src, the leaves, then the inner nodes level by level,
 * deepest first. */
constexpr int PREP_BLOCK = 512, PREP_ILP = 8;

template <typename R>
__global__ void __launch_bounds__(PREP_BLOCK)
    k_prep_small(int64_t n, const int32_t *__restrict__ order, const double *__restrict__ q,
                 unsigned long long *__restrict__ stats, int32_t n_nodes, int levels,
                 level_table lt, const int8_t *__restrict__ level, double inv_theta, double scale,
                 const uint64_t *__restrict__ keys, const int4 *__restrict__ links,
                 const int32_t *__restrict__ n_children, typename vec4<R>::type *__restrict__ src,
                 const real4f *__restrict__ lo, typename vec4<R>::type *__restrict__ node)
{
    typedef cub::BlockReduce<unsigned long long, PREP_BLOCK> reduce_t;
    __shared__ typename reduce_t::TempStorage temp;
    /* PREP_ILP loads in flight per thread: one block has few warps to hide their latency */
    unsigned long long big = 0, bad = ~0ull;
    for (int64_t i0 = threadIdx.x; i0 < n; i0 += PREP_BLOCK * PREP_ILP) {
        double a[PREP_ILP];
#pragma unroll
        for (int u = 0; u < PREP_ILP; u++) {
            const int64_t i = i0 + u * PREP_BLOCK;
            a[u] = i < n ? fabs(q[i]) : 0.0;
        }
#pragma unroll
        for (int u = 0; u < PREP_ILP; u++) {
            const unsigned long long i = (unsigned long long)(i0 + u * PREP_BLOCK);
            const unsigned long long bits = (unsigned long long)__double_as_longlong(a[u]);
            if (!isfinite(a[u]))
                bad = i < bad ? i : bad;
            else
                big = bits > big ? bits : big;
        }
    }
    __shared__ double s_scale;
    big = reduce_t(temp).Reduce(big, cuda::maximum<>{});
    __syncthreads();
    bad = reduce_t(temp).Reduce(bad, cuda::minimum<>{});
    if (threadIdx.x == 0) {
        const unsigned long long w[2] = {bad, big};
        stats[0] = ~bad, stats[1] = big, stats[2] = 0, stats[4] = 0, stats[5] = 0, stats[6] = 0;
        s_scale = charge_scale<R>(w);
    }
    __syncthreads();
    const double cs = s_scale;
    for (int64_t i0 = threadIdx.x; i0 < n; i0 += PREP_BLOCK * PREP_ILP) {
        int32_t o[PREP_ILP];
        double c[PREP_ILP];
#pragma unroll
        for (int u = 0; u < PREP_ILP; u++)
            o[u] = i0 + u * PREP_BLOCK < n ? order[i0 + u * PREP_BLOCK] : 0;
#pragma unroll
        for (int u = 0; u < PREP_ILP; u++)
            c[u] = q[o[u]];
#pragma unroll
        for (int u = 0; u < PREP_ILP; u++)
            if (i0 + u * PREP_BLOCK < n)
                src[i0 + u * PREP_BLOCK].w = (R)(c[u] * cs);
    }
    __syncthreads();
    /* the leaves, a segment of MOMENTS_LANES lanes each (a warp's bound is the same in its lanes) */
    for (int32_t b = (threadIdx.x & ~31) / MOMENTS_LANES; b < n_nodes;
         b += PREP_BLOCK / MOMENTS_LANES) {
        const int32_t i = b + (threadIdx.x & 31) / MOMENTS_LANES;
        const int4 l = links[i < n_nodes ? i : 0];
        leaf_moments_coop<R>(i < n_nodes && l.x < 0, i, l, level[i < n_nodes ? i : 0], inv_theta,
                             scale, keys, src, NULL, lo, NULL, NULL, 0, node);
    }
    __syncthreads();
    for (int L = levels - 2; L >= 0; L--) { /* the deepest level holds only leaves */
        for (int32_t i = lt.begin[L] + threadIdx.x; i < lt.begin[L + 1]; i += PREP_BLOCK)
            if (links[i].x >= 0)
                moments_node<R>(i, L, inv_theta, scale, keys, links, n_children, node);
        __syncthreads();
    }
}

/* The charges' packing and every moment of a small tree in one launch (for more sources than
 * k_prep_small takes; the charge check is done before, by k_charge_stats): the leaves by
 * segments of MOMENTS_LANES lanes, which pack their points' charges (times charge_scale, as
 * k_pack_charges) and take the leaf's moments (leaf_moments_coop). The last block to finish
 * (a counter, stats[3], cleared by the charge check's memset or its one block) then takes the
 * inner nodes level by level, deepest first. (The children of each level's nodes staged in
 * shared memory cost more than they saved: the Plummer sphere's wide levels took many
 * rounds.) */
constexpr int MOMENTS_FUSED_BLOCK = 256;

template <typename R>
__global__ void __launch_bounds__(MOMENTS_FUSED_BLOCK)
    k_moments_small(int32_t n_nodes, int levels, level_table lt, const int8_t *__restrict__ level,
                    double inv_theta, double scale, const uint64_t *__restrict__ keys,
                    const int4 *__restrict__ links, const int32_t *__restrict__ n_children,
                    const int32_t *__restrict__ order, const double *__restrict__ q,
                    unsigned long long *__restrict__ stats, typename vec4<R>::type *src,
                    const real4f *__restrict__ lo, typename vec4<R>::type *__restrict__ node)
{
    constexpr int WARPS = MOMENTS_FUSED_BLOCK / 32;
    __shared__ bool s_last;
    constexpr int PER_WARP = 32 / MOMENTS_LANES; /* leaves a warp takes at once */
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const double cs = charge_scale<R>(stats);
    for (int32_t b = (blockIdx.x * WARPS + w) * PER_WARP; b < n_nodes;
         b += gridDim.x * WARPS * PER_WARP) {
        const int32_t i = b + lane / MOMENTS_LANES, ic = i < n_nodes ? i : 0;
        const int4 l = links[ic];
        leaf_moments_coop<R>(i < n_nodes && l.x < 0, i, l, level[ic], inv_theta, scale, keys, src,
                             src, lo, order, q, cs, node);
    }
    /* the last block takes the inner nodes */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        s_last = atomicAdd(&stats[3], 1ull) == gridDim.x - 1;
    __syncthreads();
    if (!s_last)
        return;
    __threadfence();
    for (int L = levels - 2; L >= 0; L--) { /* the deepest level holds only leaves */
        for (int32_t i = lt.begin[L] + threadIdx.x; i < lt.begin[L + 1]; i += MOMENTS_FUSED_BLOCK)
            if (links[i].x >= 0)
                moments_node<R>(i, L, inv_theta, scale, keys, links, n_children, node);
        __syncthreads(); /* the parents read these */
    }
}

/* The charges' packing and every moment of a large tree in one launch (tune.moments_up_max;
 * instead of k_pack_charges and k_moments once per level): a segment of lanes per leaf packs
 * its charges and takes its moments (leaf_moments_coop), then its first lane goes up the tree:
 * the last child of a node to be done (a counter per node, arrive, zero before the launch)
 * takes the node as k_moments does (the same sums in the same order: the same moments bit for
 * bit; its children's records read through L2), and so on up to the root or to a node whose
 * other children are not done yet. The arrivals are acquire-release atomics: each releases
 * this child's record and acquires the other children's. */
constexpr int MOMENTS_UP_BLOCK = 128;
/* k_moments_up's leaves: 4 of a lane's points loaded at once (leaf_moments_coop's U: more
 * loads in flight, for more registers). */
constexpr int MOMENTS_UP_ILP = 4;

template <typename R>
__global__ void __launch_bounds__(MOMENTS_UP_BLOCK)
    k_moments_up(int32_t n_nodes, const int8_t *__restrict__ level, double inv_theta, double scale,
                 const uint64_t *__restrict__ keys, const int4 *__restrict__ links,
                 const int32_t *__restrict__ n_children, const int32_t *__restrict__ parent,
                 const int32_t *__restrict__ order, const double *__restrict__ q,
                 const unsigned long long *__restrict__ stats, typename vec4<R>::type *src,
                 const real4f *__restrict__ lo, typename vec4<R>::type *__restrict__ node,
                 int32_t *__restrict__ arrive)
{
    /* a segment of MOMENTS_LANES lanes per leaf (the whole warp calls) */
    const int64_t k = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / MOMENTS_LANES;
    const int32_t i = (int32_t)(k < n_nodes ? k : 0);
    const int4 l = links[i];
    const bool leaf = k < n_nodes && l.x < 0;
    leaf_moments_coop<R, MOMENTS_UP_ILP>(leaf, i, l, level[i], inv_theta, scale, keys, src, src, lo,
                                         order, q, charge_scale<R>(stats), node);
    if (!leaf || (threadIdx.x & (MOMENTS_LANES - 1)) != 0) /* lane 0 of the segment wrote the
                                                             * record and goes up the tree */
        return;
    for (int32_t p = parent[i]; p >= 0;) { /* a child of p is done */
        /* what the parent's step reads of the tree (not written by this launch), and the next
         * parent, loaded before the arrival so that their latency overlaps it */
        const int4 lp = links[p];
        const int32_t ncp = n_children[p], pp = parent[p];
        const int Lp = level[p];
        const uint64_t kp = keys[lp.z];
        /* the arrival releases this child's record and acquires the other children's */
        cuda::atomic_ref<int32_t, cuda::thread_scope_device> a(arrive[p]);
        if (a.fetch_add(1, cuda::memory_order_acq_rel) != ncp - 1)
            break;
        moments_node_of<R, true>(p, Lp, lp, ncp, kp, inv_theta, scale, node);
        p = pp;
    }
}

/* Every node's moments of the tree t, the charges d_q packed into src on the way (with
 * k_prep_small the charge check too). */
template <typename R> cudaError_t moments(const fmk_plan *plan, fmk_bh_state *s, const double *d_q)
{
    typedef typename vec4<R>::type V;
    const fmk_treecode_cuda_tune *k = fmk_bh_tune(plan);
    const fmk_cuda_tree *t = &s->tree;
    const int64_t n = plan->n_sources;
    const double S = fmk_bh_coord_scale(s->real);
    const real4f *lo = (const real4f *)s->src_lo.p; /* fp32 only */
    /* tree3d.h: theta capped so that no node is accepted by a target inside it */
    const double theta =
        plan->opts.theta < FMK_TREE_THETA_CAP ? plan->opts.theta : FMK_TREE_THETA_CAP;
    const double inv_theta = 1.0 / theta;
    const int4 *links = (const int4 *)s->links.p;
    V *src = (V *)s->src.p, *node = (V *)s->node.p;
    level_table lt;
    for (int L = 0; L <= t->levels; L++)
        lt.begin[L] = (int32_t)t->level_begin[L];
    if (fmk_bh_prep_small(plan, s)) { /* the charge check too (fmk_cuda_bh_charges) */
        k_prep_small<R><<<1, PREP_BLOCK>>>(n, t->d_order, d_q, s->d_stats, (int32_t)t->n_nodes,
                                           t->levels, lt, t->d_level, inv_theta, S, t->d_keys,
                                           links, t->d_n_children, src, lo, node);
        return cudaGetLastError();
    }
    if (t->n_nodes <= k->moments_small_max) {
        constexpr int W = MOMENTS_FUSED_BLOCK / 32;
        constexpr int NPB = W * (32 / MOMENTS_LANES); /* nodes a block takes at once */
        k_moments_small<R><<<(unsigned)((t->n_nodes + NPB - 1) / NPB), MOMENTS_FUSED_BLOCK>>>(
            (int32_t)t->n_nodes, t->levels, lt, t->d_level, inv_theta, S, t->d_keys, links,
            t->d_n_children, t->d_order, d_q, s->d_stats, src, lo, node);
        return cudaGetLastError();
    }
    if (t->n_nodes <= k->moments_up_max) {
        cudaError_t err = cudaMemsetAsync(t->d_counts, 0, (size_t)t->n_nodes * sizeof(int32_t), 0);
        const unsigned nb = fmk_bh_blocks(t->n_nodes * MOMENTS_LANES, MOMENTS_UP_BLOCK);
        if (err == cudaSuccess)
            k_moments_up<R><<<nb, MOMENTS_UP_BLOCK>>>(
                (int32_t)t->n_nodes, t->d_level, inv_theta, S, t->d_keys, links, t->d_n_children,
                t->d_parent, t->d_order, d_q, s->d_stats, src, lo, node, t->d_counts);
        return err == cudaSuccess ? cudaGetLastError() : err;
    }
    k_pack_charges<R><<<fmk_bh_blocks(n), FMK_BH_BLOCK>>>(n, t->d_order, d_q, s->d_stats, src);
    for (int L = t->levels - 1; L >= 0; L--) {
        const int32_t first = (int32_t)t->level_begin[L];
        const int32_t count = (int32_t)(t->level_begin[L + 1] - first);
        k_moments<R><<<fmk_bh_blocks((int64_t)count * MOMENTS_LANES, 128), 128>>>(
            first, count, L, inv_theta, S, t->d_keys, links, t->d_n_children, src, lo, node);
    }
    return cudaGetLastError();
}

} // namespace

int fmk_bh_prep_small(const fmk_plan *plan, const fmk_bh_state *s)
{
    const fmk_treecode_cuda_tune *k = fmk_bh_tune(plan);
    return plan->n_sources <= k->prep_small_max && s->tree.n_nodes <= k->moments_small_max;
}

cudaError_t fmk_cuda_bh_charges(const fmk_plan *plan, const fmk_bh_state *s, const double *d_q)
{
    const int64_t n = plan->n_sources;
    if (fmk_bh_prep_small(plan, s)) /* checked by k_prep_small */
        return cudaSuccess;
    if (n <= fmk_bh_tune(plan)->charge_block_max) {
        k_charge_stats<<<1, CHARGE_BLOCK>>>(n, d_q, s->d_stats, 1);
        return cudaGetLastError();
    }
    cudaError_t err = cudaMemsetAsync(s->d_stats, 0, FMK_BH_STATS * sizeof(unsigned long long), 0);
    const int64_t nb = (n + FMK_BH_BLOCK - 1) / FMK_BH_BLOCK;
    if (err == cudaSuccess)
        k_charge_stats<<<(unsigned)(nb < 1024 ? nb : 1024), FMK_BH_BLOCK>>>(n, d_q, s->d_stats, 0);
    return err == cudaSuccess ? cudaGetLastError() : err;
}

cudaError_t fmk_cuda_bh_moments(const fmk_plan *plan, fmk_bh_state *s, const double *d_q)
{
    return s->real == 4 ? moments<float>(plan, s, d_q) : moments<double>(plan, s, d_q);
}
