/* p2p.cu -- the near field of the GPU 3D FMM (fmm3d_cuda.h): P2P of the U lists (and of the W
 * and X entries done directly), blocks per target leaf with the sources staged in shared memory
 * (fp64, or fp32 on offsets from the leaf's centre), or, when the sources are the targets (fp64),
 * per run of pairs of touching leaves, each pair of points once for both (Newton's third law).
 * It runs on the plan's second stream alongside the far field's chain, into its own results,
 * which eval adds to the far field's. The kernels are templates on the pair kernel
 * (p2p_kernels.cuh: laplace, plummer, regularized); with sources = targets a smooth kernel's
 * pair j = i is left out by index (k_p2p; the pairs' kernels never form it). */
#include "fmm3d/cuda/fmm3d_cuda.h"
#include "fmm3d/cuda/p2p_kernels.cuh"

namespace {

/* P2P: the targets of box leaves[blockIdx.x] from the sources of its list (U and the W entries
 * done directly, for leaves; the X entries done directly, for any box), staged in shared
 * memory, in precision R; blockIdx.y splits the targets in passes of BLOCK. With atomic 0 the
 * sums are written (the first pass over the leaves with targets: it initialises the near
 * field's results), else added atomically. Pairs at distance 0 contribute nothing under
 * laplace and G(0) under the smooth kernels, but for j = i with sources = targets (the leaf's own
 * row: own). fp32 works on offsets from the box's centre, rounded from fp64 (to 2^-24 of the
 * offset, not of the frame: close pairs keep their accuracy), times 2^23
 * (FMK_CUDA_LAPLACE32_SCALE, the softening with them), so that r^-3 of the closest distinct
 * offsets (2^-53 of the frame apart at least) stays finite; its sums run in fp32 over a staged
 * tile of BLOCK sources and in fp64 across tiles. */
template <typename K, typename R, int NEWTON>
__global__ void __launch_bounds__(BLOCK)
    k_p2p(const K ker, int nt, int atomic, int skip_self, p2p_scale sc,
          const int32_t *__restrict__ leaves, const int32_t *__restrict__ tbeg,
          const int32_t *__restrict__ tn, const int32_t *__restrict__ sb,
          const int32_t *__restrict__ sn, const int32_t *__restrict__ u_begin,
          const int32_t *__restrict__ u, const real4d *__restrict__ cube,
          const real4d *__restrict__ src, const real4d *__restrict__ trg, double *res)
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
        const R yx = (R)((yd.x - c.x) * cs), yy = (R)((yd.y - c.y) * cs),
                yz = (R)((yd.z - c.z) * cs);
        double p = 0, gx = 0, gy = 0, gz = 0;
        for (int e = u_begin[b]; e < u_begin[b + 1]; e++) {
            const int a = u[e];
            if (a == b && skip_self) /* the leaf's own pairs: k_p2p_pairs, each once */
                continue;
            /* a smooth kernel at the sources: the leaf's own row leaves out j = i by index */
            const bool own = K::smooth && a == b && src == trg;
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
                        if (!own || jb + j != i)
                            ker.template add<NEWTON>(tile[j], yx, yy, yz, tp, tx, ty, tz);
                } else {
                    for (int j = sub; j < cnt; j += T)
                        if (!own || jb + j != i)
                            ker.template add<NEWTON>(tile[j], yx, yy, yz, tp, tx, ty, tz);
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
 * is not fixed). The last pass, when at most 32 of b's points remain, gives all four warps the
 * same points and each warp a quarter of the chunks (a sums added atomically by each warp, b
 * sums added across the warps in shared memory): no warp idles through it. */
const int P2P_RUN_MAX = FMK_P2P_RUN_MAX;

/* 32 steps of a warp: its RT points of b (xi .. gzi) against the 32 RA a points of the lanes
 * (xj .. gzj, RA per lane, moving one lane down per step), each pair once, both ways; UNR steps
 * unrolled. */
template <typename K, int RT, int RA, int UNR, int NEWTON, int MASK>
__device__ __forceinline__ void
pairs_steps(const K &ker, const double *xi, const double *yi, const double *zi, const double *qi,
            double *pi, double *gxi, double *gyi, double *gzi, double *xj, double *yj, double *zj,
            double *qj, double *pj, double *gxj, double *gyj, double *gzj)
{
    const int next = ((threadIdx.x & 31) + 1) & 31;
#pragma unroll UNR
    for (int k = 0; k < 32; k++) {
#pragma unroll
        for (int r = 0; r < RT; r++)
#pragma unroll
            for (int u = 0; u < RA; u++)
                pair_both<NEWTON, MASK>(ker, xi[r], yi[r], zi[r], qi[r], pi[r], gxi[r], gyi[r],
                                        gzi[r], xj[u], yj[u], zj[u], qj[u], pj[u], gxj[u], gyj[u],
                                        gzj[u]);
#pragma unroll
        for (int u = 0; u < RA; u++) {
            xj[u] = __shfl_sync(0xffffffffu, xj[u], next),
            yj[u] = __shfl_sync(0xffffffffu, yj[u], next);
            zj[u] = __shfl_sync(0xffffffffu, zj[u], next),
            qj[u] = __shfl_sync(0xffffffffu, qj[u], next);
            pj[u] = __shfl_sync(0xffffffffu, pj[u], next),
            gxj[u] = __shfl_sync(0xffffffffu, gxj[u], next);
            gyj[u] = __shfl_sync(0xffffffffu, gyj[u], next),
            gzj[u] = __shfl_sync(0xffffffffu, gzj[u], next);
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
template <typename K, int RT, int RA, int G, int UNR, int NEWTON, int MASK>
__device__ __forceinline__ void pairs_pass(const K &ker, int nt, int ib, int i0, int ni, int nj,
                                           int r0, int r1, const int32_t *s_j0, const int32_t *s_n,
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
            xj[u] = t.x, yj[u] = t.y, zj[u] = t.z, qj[u] = t.w,
            pj[u] = gxj[u] = gyj[u] = gzj[u] = 0;
        }
        if (mine < ni && jc < nj)
            pairs_steps<K, RT, RA, UNR, NEWTON, MASK>(ker, xi, yi, zi, qi, pi, gxi, gyi, gzi, xj,
                                                      yj, zj, qj, pj, gxj, gyj, gzj);
        if (WG == 1) { /* a group is a warp: its chunk's sums are complete */
#pragma unroll
            for (int u = 0; u < RA; u++)
                if (j[u] >= 0) {
                    atomicAdd(res + j[u], pj[u]);
                    atomicAdd(res + nt + 3 * j[u], gxj[u]),
                        atomicAdd(res + nt + 3 * j[u] + 1, gyj[u]);
                    atomicAdd(res + nt + 3 * j[u] + 2, gzj[u]);
                }
        } else {
            /* the buffers written here were last read two chunks ago, before the last barrier */
#pragma unroll
            for (int u = 0; u < RA; u++) {
                red[buf * RA + u][0][warp][lane] = pj[u], red[buf * RA + u][1][warp][lane] = gxj[u];
                red[buf * RA + u][2][warp][lane] = gyj[u],
                               red[buf * RA + u][3][warp][lane] = gzj[u];
            }
            __syncthreads();
            /* thread (sum c, lane), per group: its warps' sums of a point, in warp order */
            const int c = warp;
#pragma unroll
            for (int g = 0; g < G; g++)
#pragma unroll
                for (int u = 0; u < RA; u++) {
                    const int jg =
                        g == grp ? j[u]
                                 : stream_point(jc0 + (g * RA + u) * 32, nj, r0, r1, s_j0, s_n);
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
template <typename K, int UNR, int NEWTON>
__device__ __forceinline__ void self_pairs(const K &ker, int nt, int i0, int ni,
                                           const real4d *__restrict__ pts, double *res)
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
                double xj = tj.x, yj = tj.y, zj = tj.z, qj = tj.w, pj = 0, gxj = 0, gyj = 0,
                       gzj = 0;
                int jl = jj; /* the point whose sums this lane holds at the end */
                if (t > s) {
                    pairs_steps<K, 1, 1, UNR, NEWTON, 1>(ker, &xi, &yi, &zi, &qi, &pi, &gxi, &gyi,
                                                         &gzi, &xj, &yj, &zj, &qj, &pj, &gxj, &gyj,
                                                         &gzj);
                } else {
                    xj = __shfl_sync(0xffffffffu, xj, next),
                    yj = __shfl_sync(0xffffffffu, yj, next);
                    zj = __shfl_sync(0xffffffffu, zj, next),
                    qj = __shfl_sync(0xffffffffu, qj, next);
                    for (int k = 1; k < 16; k++) {
                        pair_both<NEWTON, 1>(ker, xi, yi, zi, qi, pi, gxi, gyi, gzi, xj, yj, zj, qj,
                                             pj, gxj, gyj, gzj);
                        xj = __shfl_sync(0xffffffffu, xj, next),
                        yj = __shfl_sync(0xffffffffu, yj, next);
                        zj = __shfl_sync(0xffffffffu, zj, next),
                        qj = __shfl_sync(0xffffffffu, qj, next);
                        pj = __shfl_sync(0xffffffffu, pj, next),
                        gxj = __shfl_sync(0xffffffffu, gxj, next);
                        gyj = __shfl_sync(0xffffffffu, gyj, next),
                        gzj = __shfl_sync(0xffffffffu, gzj, next);
                    }
                    const double w =
                        lane < 16 ? 1.0 : 0.0; /* offset 16: each pair twice, once kept */
                    pair_both<NEWTON, 1>(ker, xi, yi, zi, qi * w, pi, gxi, gyi, gzi, xj, yj, zj,
                                         qj * w, pj, gxj, gyj, gzj);
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
 * pairs each (self_pairs; leaves[blockIdx.x - pair_blocks]). MASK: 1/r masked at r = 0 (else
 * pair_inv_distinct); MINB: blocks per multiprocessor asked of ptxas (__launch_bounds__; 0 none). */
template <typename K, int RT, int UNR, int NEWTON, int MASK, int MINB>
__global__ void __launch_bounds__(BLOCK, MINB)
    k_p2p_pairs(const K ker, int nt, int64_t n_pairs, int run, unsigned pair_blocks,
                const int32_t *__restrict__ leaves, const int32_t *__restrict__ pairs,
                const int32_t *__restrict__ sb, const int32_t *__restrict__ sn,
                const real4d *__restrict__ pts, double *res)
{
    static_assert(BLOCK == 128, "four warps, and a thread per (sum, lane) in the reduction");
    if (blockIdx.x >= pair_blocks) {
        const int b = leaves[blockIdx.x - pair_blocks];
        self_pairs<K, UNR, NEWTON>(ker, nt, sb[b], sn[b], pts, res);
        return;
    }
    __shared__ double red[2][4][BLOCK / 32][32];
    __shared__ int32_t s_b[P2P_RUN_MAX], s_j0[P2P_RUN_MAX], s_n[P2P_RUN_MAX];
    const int64_t e0 = (int64_t)blockIdx.x * run;
    const int ne = (int)(n_pairs - e0 < run ? n_pairs - e0 : run);
    if ((int)threadIdx.x < ne) {
        const int a = pairs[2 * (e0 + threadIdx.x) + 1];
        s_b[threadIdx.x] = pairs[2 * (e0 + threadIdx.x)], s_j0[threadIdx.x] = sb[a],
        s_n[threadIdx.x] = sn[a];
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
            if (left <=
                32) { /* the last pass: every warp the same points, a quarter of the chunks */
                pairs_pass<K, 1, 1, BLOCK / 32, UNR, NEWTON, MASK>(ker, nt, ib, i0, ni, nj, r0, r1,
                                                                   s_j0, s_n, pts, res, red);
                ib += 32;
            } else if (RT >= 5) { /* every warp the same 32 RT points */
                pairs_pass<K, RT, 1, BLOCK / 32, UNR, NEWTON, MASK>(ker, nt, ib, i0, ni, nj, r0, r1,
                                                                    s_j0, s_n, pts, res, red);
                ib += 32 * RT;
            } else if (RT == 1 || left <= BLOCK) {
                pairs_pass<K, 1, 1, 1, UNR, NEWTON, MASK>(ker, nt, ib, i0, ni, nj, r0, r1, s_j0,
                                                          s_n, pts, res, red);
                ib += BLOCK;
            } else if (RT == 3 || RT == 4) { /* two groups of two warps: 192 or 256 points a pass */
                pairs_pass<K, RT, 1, 2, UNR, NEWTON, MASK>(ker, nt, ib, i0, ni, nj, r0, r1, s_j0,
                                                           s_n, pts, res, red);
                ib += BLOCK * RT / 2;
            } else {
                pairs_pass<K, RT, 1, 1, UNR, NEWTON, MASK>(ker, nt, ib, i0, ni, nj, r0, r1, s_j0,
                                                           s_n, pts, res, red);
                ib += BLOCK * RT;
            }
        }
    }
}

/* The P2P on stream st into near (4 nt doubles): the U lists at the leaves (sources = targets in
 * fp64: the rest rows, then the leaf pairs both ways; the first launch writes every target's
 * sums), then the X entries done directly (Y lists, atomic adds), with pair kernel ker in
 * precision R. */
template <typename R, int NEWTON, typename K>
void p2p(fmk_fmm3d_cuda *s, int nt, p2p_scale sc, cudaStream_t st, double *near, const K ker)
{
    const fmk_cuda_fmm3d_geo *g = &s->g;
    const int rt = fmk_fmm3d_cuda_pairs_rt(s);
    const bool pairs = sizeof(R) == 8 && g->d_ur_begin && rt >= 1 && rt <= 6;
    /* a leaf's own pairs once, in k_p2p_pairs's extra blocks */
    const int self = pairs && g->n_leaves_trg > 0;
    if (g->n_leaves_trg > 0) /* the U lists, or with pairs the rest rows (the leaf itself, W) */
        k_p2p<K, R, NEWTON>
            <<<dim3((unsigned)g->n_leaves_trg, split_for(s->leaf_points)), BLOCK, 0, st>>>(
                ker, nt, 0, self, sc, g->d_leaves_trg, g->d_tb, g->d_tn, g->d_sb, g->d_sn,
                pairs ? g->d_ur_begin : g->d_u_begin, pairs ? g->d_ur : g->d_u, g->d_cube, g->d_src,
                g->d_trg, near);
    if constexpr (sizeof(R) == 8) { /* (the pairs' kernels only in fp64) */
        if (pairs && (g->n_pairs > 0 || self)) {
            /* pairs per block: 8 at small leaves, else 4 (docs/fmm3d_gpu.md, section 3) ... but
             * at least 16 blocks per multiprocessor while pairs allow (a few pairs of large
             * leaves in a few blocks left the GPU idle) */
            int run = s->leaf_size < 256 ? 8 : 4;
            while (run > 1 && g->n_pairs < (int64_t)16 * s->sms * run)
                run /= 2;
            const unsigned pair_blocks = (unsigned)((g->n_pairs + run - 1) / run);
            const unsigned blocks = pair_blocks + (self ? (unsigned)g->n_leaves_trg : 0);
            /* per points per lane: the ring's steps unrolled, 1/r masked, blocks per
             * multiprocessor (at 3, 5 and 6 points per lane, registers for 4 or 3 blocks) */
#define FMK_PAIRS(RT, UNR, MASK, MINB)                                                     \
    k_p2p_pairs<K, RT, UNR, NEWTON, MASK, MINB>                                            \
        <<<blocks, BLOCK, 0, st>>>(ker, nt, g->n_pairs, run, pair_blocks, g->d_leaves_trg, \
                                   g->d_pairs, g->d_sb, g->d_sn, g->d_src, near)
            switch (rt) {
            case 1: FMK_PAIRS(1, 1, 1, 0); break;
            case 2: FMK_PAIRS(2, 4, 1, 0); break;
            case 3: FMK_PAIRS(3, 2, 0, 4); break;
            case 4: FMK_PAIRS(4, 2, 0, 0); break;
            case 5: FMK_PAIRS(5, 2, 0, 3); break;
            default: FMK_PAIRS(6, 2, 0, 3); break;
            }
#undef FMK_PAIRS
        }
    }
    if (g->n_ynodes > 0)
        k_p2p<K, R, NEWTON><<<dim3((unsigned)g->n_ynodes, split_for(s->near_max)), BLOCK, 0, st>>>(
            ker, nt, 1, 0, sc, g->d_ynodes, g->d_tb, g->d_tn, g->d_sb, g->d_sn, g->d_y_begin,
            g->d_y, g->d_cube, g->d_src, g->d_trg, near);
}

} // namespace

/* The P2P of leaf pairs' points per lane (the knob p2p_pairs, else from the leaves): 1 below
 * leaf size 256; uniform points 4 (two groups of two warps, 256 points a pass: the 2^20 cube's
 * leaves), or with the root fitted 6 above 140 points per leaf (192 a pass), else 5 (160), but 4
 * in two groups above 205 (where a second full pass of 6 costs more); other points 5
 * (docs/fmm3d_gpu.md, section 3). */
int fmk_fmm3d_cuda_pairs_rt(const fmk_fmm3d_cuda *s)
{
    return s->tune->p2p_pairs >= 0 ? s->tune->p2p_pairs
           : s->leaf_size < 256    ? 1
           : s->fit_mean > 205     ? 4
           : s->fit_mean > 140     ? 6
           : s->fit_mean > 0       ? 5
           : s->uniform            ? 4
                                   : 5;
}

int fmk_fmm3d_cuda_pairs_cap(const fmk_fmm3d_cuda *s)
{
    const int rt = fmk_fmm3d_cuda_pairs_rt(s);
    return rt == 1 ? BLOCK : rt == 4 || rt == 2 ? 256 : 32 * rt;
}

void fmk_cuda_fmm3d_p2p_into(fmk_fmm3d_cuda *s, int nt, p2p_scale sc, cudaStream_t st, double *near)
{
    const int newton = s->tune->p2p_newton < 0 ? s->newton_ok : s->tune->p2p_newton;
    if (s->fp32)
        fmk_p2p_with_kernel<float>(s->kernel, s->softening,
                                   [&](auto ker) { p2p<float, 0>(s, nt, sc, st, near, ker); });
    else if (newton)
        fmk_p2p_with_kernel<double>(s->kernel, s->softening,
                                    [&](auto ker) { p2p<double, 1>(s, nt, sc, st, near, ker); });
    else
        fmk_p2p_with_kernel<double>(s->kernel, s->softening,
                                    [&](auto ker) { p2p<double, 0>(s, nt, sc, st, near, ker); });
}

cudaError_t fmk_cuda_fmm3d_p2p(fmk_fmm3d_cuda *s, int nt, p2p_scale sc, cudaStream_t st)
{
    cudaStreamWaitEvent(st, s->ev[EV_FORK], 0);
    cudaEventRecord(s->ev[EV_NEAR], st);
    fmk_cuda_fmm3d_p2p_into(s, nt, sc, st, s->d_near);
    cudaEventRecord(s->ev[EV_P2P], st);
    return cudaGetLastError();
}
