/* p2p_many.cu -- the near field of the GPU 3D FMM for several charge vectors in one pass
 * (eval_many; fmm3d_cuda.h): p2p.cu's passes with NV = 2 or 4 vectors, each pair's offset, 1/r and
 * 1/r^3 made once for all of them and only the charges' products done per vector. The charges come
 * from d_qk (key order, ns per vector), vector v's sums go to d_near + v * 4 nt.
 *
 * One way (k_p2p_nv): a block per target leaf and pass of 128 targets, the sources staged in
 * shared memory with every vector's charge (fp64, or fp32 on offsets from the leaf's centre, as
 * p2p.cu's k_p2p). Sources = targets in fp64 (k_p2p_pairs_nv): each pair of touching leaves once,
 * both ways, as p2p.cu's k_p2p_pairs, but every warp of a block holds the same 32 RT points of b
 * (RT = 3: each point carries its vectors' charges and sums in registers) and takes every fourth
 * chunk of the stream of the a points, adding its chunk's a sums and, at the pass's end, its b
 * sums atomically; a pass of fewer points left takes a smaller RT. The leaf's own pairs by
 * p2p.cu's ring (self_pairs). A vector left over (odd counts) takes p2p.cu's kernels, its charges
 * in the sources' 4th component. */
#include "fmm3d/cuda/fmm3d_cuda.h"
#include "fmm3d/cuda/p2p_kernels.cuh"

namespace {

/* P2P's scalings (p2p_scale) of up to 4 vectors. */
struct scale4 {
    double q[4], pot[4], grad[4];
};

/* One source (offsets y - s) at one target for NV vectors: the kernel's factors (1/r and 1/r^3
 * for laplace) once. */
template <int NEWTON, typename K, typename R, int NV>
__device__ __forceinline__ void add_nv(const K &ker, R sx, R sy, R sz, const R (&q)[NV], R yx, R yy,
                                       R yz, R (&tp)[NV], R (&tx)[NV], R (&ty)[NV], R (&tz)[NV])
{
    const R dx = yx - sx, dy = yy - sy, dz = yz - sz;
    const auto k = ker.template factors<NEWTON, 1>(dx * dx + dy * dy + dz * dz);
#pragma unroll
    for (int v = 0; v < NV; v++) {
        tp[v] += q[v] * k.pot;
        const R g = q[v] * k.g;
        tx[v] -= dx * g, ty[v] -= dy * g, tz[v] -= dz * g;
    }
}

/* p2p.cu's k_p2p for NV vectors: the targets of box leaves[blockIdx.x] from the sources of its
 * list, staged in shared memory with their NV charges (times sc.q); atomic 0: the sums written
 * (the first pass over the leaves with targets), else added atomically; skip_self: the leaf's
 * own row left to k_p2p_pairs_nv; a smooth kernel at the sources leaves out j = i by index. */
template <typename R, int NEWTON, int NV, typename K>
__global__ void __launch_bounds__(BLOCK)
    k_p2p_nv(const K ker, int nt, int atomic, int skip_self, scale4 sc, int64_t ns,
             const double *__restrict__ qk, const int32_t *__restrict__ leaves,
             const int32_t *__restrict__ tbeg, const int32_t *__restrict__ tn,
             const int32_t *__restrict__ sb, const int32_t *__restrict__ sn,
             const int32_t *__restrict__ u_begin, const int32_t *__restrict__ u,
             const real4d *__restrict__ cube, const real4d *__restrict__ src,
             const real4d *__restrict__ trg, double *res)
{
    typedef typename vec4<R>::type V;
    __shared__ V tile[BLOCK];
    __shared__ R tq[BLOCK][NV];
    const int b = leaves[blockIdx.x];
    const int i0 = tbeg[b], i1 = i0 + tn[b];
    const bool f32 = sizeof(R) == 4;
    const real4d c = f32 ? cube[b] : real4d{0, 0, 0, 0};
    const double cs = f32 ? FMK_CUDA_LAPLACE32_SCALE : 1.0;
    for (int base = i0 + blockIdx.y * BLOCK; base < i1; base += gridDim.y * BLOCK) {
        /* a pass of few targets: T threads a target (p2p.cu) */
        const int m = i1 - base < BLOCK ? i1 - base : BLOCK;
        int T = 1;
        while (T < 32 && 2 * T * m <= BLOCK)
            T *= 2;
        const int sub = threadIdx.x & (T - 1);
        const int i = base + threadIdx.x / T;
        const real4d yd = i < i1 ? trg[i] : c;
        const R yx = (R)((yd.x - c.x) * cs), yy = (R)((yd.y - c.y) * cs),
                yz = (R)((yd.z - c.z) * cs);
        double p[NV], gx[NV], gy[NV], gz[NV];
#pragma unroll
        for (int v = 0; v < NV; v++)
            p[v] = gx[v] = gy[v] = gz[v] = 0;
        for (int e = u_begin[b]; e < u_begin[b + 1]; e++) {
            const int a = u[e];
            if (a == b && skip_self)
                continue;
            const bool own = K::smooth && a == b && src == trg; /* (p2p.cu's k_p2p) */
            const int j0 = sb[a], j1 = j0 + sn[a];
            for (int jb = j0; jb < j1; jb += BLOCK) {
                __syncthreads();
                if (jb + threadIdx.x < j1) {
                    const int j = jb + threadIdx.x;
                    const real4d s = src[j];
                    tile[threadIdx.x] = V{(R)((s.x - c.x) * cs), (R)((s.y - c.y) * cs),
                                          (R)((s.z - c.z) * cs), (R)0};
#pragma unroll
                    for (int v = 0; v < NV; v++)
                        tq[threadIdx.x][v] = (R)(qk[v * ns + j] * sc.q[v]);
                }
                __syncthreads();
                const int cnt = j1 - jb < BLOCK ? j1 - jb : BLOCK;
                R tp[NV], tx[NV], ty[NV], tz[NV];
#pragma unroll
                for (int v = 0; v < NV; v++)
                    tp[v] = tx[v] = ty[v] = tz[v] = 0;
                if (T == 1) {
#pragma unroll 2
                    for (int j = 0; j < cnt; j++) {
                        if (own && jb + j == i)
                            continue;
                        const V s = tile[j];
                        R q[NV];
#pragma unroll
                        for (int v = 0; v < NV; v++)
                            q[v] = tq[j][v];
                        add_nv<NEWTON>(ker, s.x, s.y, s.z, q, yx, yy, yz, tp, tx, ty, tz);
                    }
                } else {
                    for (int j = sub; j < cnt; j += T) {
                        if (own && jb + j == i)
                            continue;
                        const V s = tile[j];
                        R q[NV];
#pragma unroll
                        for (int v = 0; v < NV; v++)
                            q[v] = tq[j][v];
                        add_nv<NEWTON>(ker, s.x, s.y, s.z, q, yx, yy, yz, tp, tx, ty, tz);
                    }
                }
#pragma unroll
                for (int v = 0; v < NV; v++)
                    p[v] += tp[v], gx[v] += tx[v], gy[v] += ty[v], gz[v] += tz[v];
            }
        }
#pragma unroll
        for (int v = 0; v < NV; v++)
            for (int o = T / 2; o > 0; o /= 2) { /* the T lanes of a target, one warp */
                p[v] += __shfl_xor_sync(0xffffffffu, p[v], o);
                gx[v] += __shfl_xor_sync(0xffffffffu, gx[v], o);
                gy[v] += __shfl_xor_sync(0xffffffffu, gy[v], o);
                gz[v] += __shfl_xor_sync(0xffffffffu, gz[v], o);
            }
        if (sub != 0 || i >= i1)
            continue;
#pragma unroll
        for (int v = 0; v < NV; v++) {
            double *r = res + (int64_t)v * 4 * nt;
            const double pv = p[v] * sc.pot[v], xv = gx[v] * sc.grad[v], yv = gy[v] * sc.grad[v],
                         zv = gz[v] * sc.grad[v];
            if (atomic) { /* boxes of one launch may nest */
                atomicAdd(r + i, pv);
                atomicAdd(r + nt + 3 * i, xv), atomicAdd(r + nt + 3 * i + 1, yv);
                atomicAdd(r + nt + 3 * i + 2, zv);
            } else { /* the near field's first pass: every target once */
                r[i] = pv;
                r[nt + 3 * i] = xv, r[nt + 3 * i + 1] = yv, r[nt + 3 * i + 2] = zv;
            }
        }
    }
}

/* A point of the P2P of leaf pairs with its NV charges and sums. */
template <int NV> struct pt {
    double x, y, z, q[NV], p[NV], gx[NV], gy[NV], gz[NV];
};

/* point j (key order) with zero sums, or the padding point pad with zero charges for j < 0 */
template <int NV>
__device__ __forceinline__ void load_pt(pt<NV> &a, int j, const real4d *__restrict__ pts,
                                        const double *__restrict__ qk, int64_t ns, real4d pad)
{
    const real4d t = j >= 0 ? pts[j] : pad;
    a.x = t.x, a.y = t.y, a.z = t.z;
#pragma unroll
    for (int v = 0; v < NV; v++) {
        a.q[v] = j >= 0 ? qk[v * ns + j] : 0.0;
        a.p[v] = a.gx[v] = a.gy[v] = a.gz[v] = 0;
    }
}

/* its sums added to the results of point j */
template <int NV>
__device__ __forceinline__ void add_pt(double *res, int64_t nt, int j, const pt<NV> &a)
{
#pragma unroll
    for (int v = 0; v < NV; v++) {
        double *r = res + v * 4 * nt;
        atomicAdd(r + j, a.p[v]);
        double *g = r + nt + 3 * (int64_t)j;
        atomicAdd(g, a.gx[v]), atomicAdd(g + 1, a.gy[v]), atomicAdd(g + 2, a.gz[v]);
    }
}

/* the point of lane src (a shuffle of everything it carries) */
template <int NV> __device__ __forceinline__ void shfl_pt(pt<NV> &a, int src)
{
    a.x = __shfl_sync(0xffffffffu, a.x, src), a.y = __shfl_sync(0xffffffffu, a.y, src);
    a.z = __shfl_sync(0xffffffffu, a.z, src);
#pragma unroll
    for (int v = 0; v < NV; v++) {
        a.q[v] = __shfl_sync(0xffffffffu, a.q[v], src),
        a.p[v] = __shfl_sync(0xffffffffu, a.p[v], src);
        a.gx[v] = __shfl_sync(0xffffffffu, a.gx[v], src);
        a.gy[v] = __shfl_sync(0xffffffffu, a.gy[v], src);
        a.gz[v] = __shfl_sync(0xffffffffu, a.gz[v], src);
    }
}

/* One pair both ways for NV vectors: pair_both's sums for each vector, the offset, the
 * kernel's factors and the gradient's factor times the offset (g d: 3 products once instead of 2
 * per vector) made once: 14 + 8 NV fp64 operations (51 at 4 vectors before, 46 now). MASK: 1/r
 * masked at r = 0 (else pair_inv_distinct). */
template <int NEWTON, int MASK, int NV, typename K>
__device__ __forceinline__ void both_nv(const K &ker, pt<NV> &i, pt<NV> &j)
{
    const double dx = i.x - j.x, dy = i.y - j.y, dz = i.z - j.z;
    const double r2 = dx * dx + dy * dy + dz * dz;
    const auto k = ker.template factors<NEWTON, MASK>(r2);
    const double gx = k.g * dx, gy = k.g * dy, gz = k.g * dz;
#pragma unroll
    for (int v = 0; v < NV; v++) {
        i.p[v] = fma(j.q[v], k.pot, i.p[v]), j.p[v] = fma(i.q[v], k.pot, j.p[v]);
        i.gx[v] = fma(-j.q[v], gx, i.gx[v]), i.gy[v] = fma(-j.q[v], gy, i.gy[v]);
        i.gz[v] = fma(-j.q[v], gz, i.gz[v]);
        j.gx[v] = fma(i.q[v], gx, j.gx[v]), j.gy[v] = fma(i.q[v], gy, j.gy[v]);
        j.gz[v] = fma(i.q[v], gz, j.gz[v]);
    }
}

/* 32 steps of a warp: its RT points of b against the lanes' a points, which move one lane down
 * per step (p2p.cu's pairs_steps); UNR steps unrolled. */
template <int RT, int NV, int UNR, int NEWTON, int MASK, typename K>
__device__ __forceinline__ void ring_nv(const K &ker, pt<NV> (&bi)[RT], pt<NV> &aj)
{
    const int next = ((threadIdx.x & 31) + 1) & 31;
#pragma unroll UNR
    for (int k = 0; k < 32; k++) {
#pragma unroll
        for (int r = 0; r < RT; r++)
            both_nv<NEWTON, MASK, NV>(ker, bi[r], aj);
        shfl_pt(aj, next);
    }
}

/* The stream of the run's a points (nj of them: leaves r0 .. r1 - 1 of s_j0, s_n) against b's
 * points ib .. ib + 32 RT - 1 (of ni, from i0), held by every warp; warp w takes the chunks w, w
 * + 4, ... Padding: charge 0, b's at the origin and a's at (-1, -1, -1), so that no pair of two
 * leaves has r = 0 (1/r unmasked). */
template <int RT, int NV, int UNR, int NEWTON, typename K>
__device__ __forceinline__ void pass_nv(const K &ker, int64_t nt, int64_t ns, int ib, int i0,
                                        int ni, int nj, int r0, int r1, const int32_t *s_j0,
                                        const int32_t *s_n, const real4d *__restrict__ pts,
                                        const double *__restrict__ qk, double *res)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    pt<NV> bi[RT];
#pragma unroll
    for (int r = 0; r < RT; r++) {
        const int ii = ib + 32 * r + lane;
        load_pt(bi[r], ii < ni ? i0 + ii : -1, pts, qk, ns, real4d{0, 0, 0, 0});
    }
    for (int jc = 32 * warp; jc < nj; jc += BLOCK) {
        const int j = stream_point(jc, nj, r0, r1, s_j0, s_n);
        pt<NV> aj;
        load_pt(aj, j, pts, qk, ns, real4d{-1, -1, -1, 0});
        ring_nv<RT, NV, UNR, NEWTON, 0>(ker, bi, aj);
        if (j >= 0)
            add_pt(res, nt, j, aj);
    }
#pragma unroll
    for (int r = 0; r < RT; r++) {
        const int ii = ib + 32 * r + lane;
        if (ii < ni)
            add_pt(res, nt, i0 + ii, bi[r]);
    }
}

/* A pass over b's points from ib with the most points per lane that left (b's points not yet
 * taken) needs, at most RT; returns the points it took. */
template <int RT, int NV, int UNR, int NEWTON, typename K>
__device__ __forceinline__ int pass_fit(const K &ker, int left, int64_t nt, int64_t ns, int ib,
                                        int i0, int ni, int nj, int r0, int r1, const int32_t *s_j0,
                                        const int32_t *s_n, const real4d *__restrict__ pts,
                                        const double *__restrict__ qk, double *res)
{
    if constexpr (RT > 1) {
        if (left <= 32 * (RT - 1))
            return pass_fit<RT - 1, NV, UNR, NEWTON>(ker, left, nt, ns, ib, i0, ni, nj, r0, r1,
                                                     s_j0, s_n, pts, qk, res);
    }
    pass_nv<RT, NV, UNR, NEWTON>(ker, nt, ns, ib, i0, ni, nj, r0, r1, s_j0, s_n, pts, qk, res);
    return 32 * RT;
}

/* p2p.cu's self_pairs for NV vectors: the pairs within leaf b (points i0 .. i0 + ni - 1), each
 * unordered pair once, 1/r masked. */
template <int NV, int UNR, int NEWTON, typename K>
__device__ __forceinline__ void self_pairs_nv(const K &ker, int64_t nt, int64_t ns, int i0, int ni,
                                              const real4d *__restrict__ pts,
                                              const double *__restrict__ qk, double *res)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, m = (ni + 31) / 32;
    const int next = (lane + 1) & 31;
    for (int pos = 2 * warp; pos < m; pos += 2 * (BLOCK / 32))
        for (int h = 0; h < 2 && pos + h < m; h++) {
            const int s = h ? m - 1 - pos / 2 : pos / 2; /* rows 0, m - 1, 1, m - 2, ... by pairs */
            const int ii = 32 * s + lane;
            pt<NV> bi[1];
            load_pt(bi[0], ii < ni ? i0 + ii : -1, pts, qk, ns, real4d{0, 0, 0, 0});
            for (int t = s; t < m; t++) {
                const int jj = 32 * t + lane;
                pt<NV> aj;
                load_pt(aj, jj < ni ? i0 + jj : -1, pts, qk, ns, real4d{-1, -1, -1, 0});
                int jl = jj; /* the point whose sums this lane holds at the end */
                if (t > s) {
                    ring_nv<1, NV, UNR, NEWTON, 1>(ker, bi, aj);
                } else {
                    shfl_pt(aj, next);
                    for (int k = 1; k < 16; k++) {
                        both_nv<NEWTON, 1, NV>(ker, bi[0], aj);
                        shfl_pt(aj, next);
                    }
                    /* offset 16: each pair twice, once kept */
                    const double w = lane < 16 ? 1.0 : 0.0;
                    double qb[NV];
#pragma unroll
                    for (int v = 0; v < NV; v++)
                        qb[v] = bi[0].q[v], bi[0].q[v] *= w, aj.q[v] *= w;
                    both_nv<NEWTON, 1, NV>(ker, bi[0], aj);
#pragma unroll
                    for (int v = 0; v < NV; v++)
                        bi[0].q[v] = qb[v];
                    jl = 32 * t + ((lane + 16) & 31);
                }
                if (jl < ni)
                    add_pt(res, nt, i0 + jl, aj);
            }
            if (ii < ni)
                add_pt(res, nt, i0 + ii, bi[0]);
        }
}

/* p2p.cu's k_p2p_pairs for NV vectors: blocks below pair_blocks take runs of pairs, the others a
 * leaf's own pairs each. */
template <int RT, int NV, int UNR, int NEWTON, typename K>
__global__ void __launch_bounds__(BLOCK)
    k_p2p_pairs_nv(const K ker, int nt, int64_t ns, int64_t n_pairs, int run, unsigned pair_blocks,
                   const int32_t *__restrict__ leaves, const int32_t *__restrict__ pairs,
                   const int32_t *__restrict__ sb, const int32_t *__restrict__ sn,
                   const real4d *__restrict__ pts, const double *__restrict__ qk, double *res)
{
    if (blockIdx.x >= pair_blocks) {
        const int b = leaves[blockIdx.x - pair_blocks];
        self_pairs_nv<NV, UNR, NEWTON>(ker, nt, ns, sb[b], sn[b], pts, qk, res);
        return;
    }
    __shared__ int32_t s_b[FMK_P2P_RUN_MAX], s_j0[FMK_P2P_RUN_MAX], s_n[FMK_P2P_RUN_MAX];
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
        for (int ib = 0; ib < ni;)
            ib += pass_fit<RT, NV, UNR, NEWTON>(ker, ni - ib, nt, ns, ib, i0, ni, nj, r0, r1, s_j0,
                                                s_n, pts, qk, res);
    }
}

/* The P2P of leaf pairs of NV vectors with b's points RT per lane (at most). */
template <int RT, int NV, int NEWTON, typename K>
void launch_pairs_nv(const K &ker, unsigned blocks, cudaStream_t st, int nt, int64_t ns,
                     int64_t n_pairs, int run, unsigned pair_blocks, const fmk_cuda_fmm3d_geo *g,
                     const double *qk, double *near)
{
    k_p2p_pairs_nv<RT, NV, 2, NEWTON>
        <<<blocks, BLOCK, 0, st>>>(ker, nt, ns, n_pairs, run, pair_blocks, g->d_leaves_trg,
                                   g->d_pairs, g->d_sb, g->d_sn, g->d_src, qk, near);
}

/* The P2P of NV vectors (charges qk, ns each) on stream st into near, as p2p.cu's p2p: the U
 * lists (or the rest rows, then the leaf pairs both ways), then the X entries done directly. */
template <typename R, int NEWTON, int NV, typename K>
void p2p_nv(fmk_fmm3d_cuda *s, int nt, const scale4 &sc, cudaStream_t st, const double *qk,
            double *near, const K ker)
{
    const fmk_cuda_fmm3d_geo *g = &s->g;
    const int rt = fmk_fmm3d_cuda_pairs_rt(s);
    const bool pairs = sizeof(R) == 8 && g->d_ur_begin && rt >= 1 && rt <= 6;
    const int self = pairs && g->n_leaves_trg > 0;
    if (g->n_leaves_trg > 0)
        k_p2p_nv<R, NEWTON, NV>
            <<<dim3((unsigned)g->n_leaves_trg, split_for(s->leaf_points)), BLOCK, 0, st>>>(
                ker, nt, 0, self, sc, s->ns, qk, g->d_leaves_trg, g->d_tb, g->d_tn, g->d_sb,
                g->d_sn, pairs ? g->d_ur_begin : g->d_u_begin, pairs ? g->d_ur : g->d_u, g->d_cube,
                g->d_src, g->d_trg, near);
    if constexpr (sizeof(R) == 8) {
        if (pairs && (g->n_pairs > 0 || self)) {
            int run = s->leaf_size < 256 ? 8 : 4; /* p2p.cu */
            while (run > 1 && g->n_pairs < (int64_t)16 * s->sms * run)
                run /= 2;
            const unsigned pair_blocks = (unsigned)((g->n_pairs + run - 1) / run);
            const unsigned blocks = pair_blocks + (self ? (unsigned)g->n_leaves_trg : 0);
            /* b's points per lane: 3 (the knob p2p_many_rt; at 2 vectors 2 .. 4, at 4 1 .. 3) */
            const int k = s->tune->p2p_many_rt;
            const int prt = NV == 2 ? (k <= 0 ? 3 : k < 2 ? 2 : k) : (k <= 0 ? 3 : k > 3 ? 3 : k);
#define FMK_PAIRS_NV(RT)                                                                         \
    launch_pairs_nv<RT, NV, NEWTON>(ker, blocks, st, nt, s->ns, g->n_pairs, run, pair_blocks, g, \
                                    qk, near)
            if constexpr (NV == 2)
                prt == 2 ? FMK_PAIRS_NV(2) : prt == 3 ? FMK_PAIRS_NV(3) : FMK_PAIRS_NV(4);
            else
                prt == 1 ? FMK_PAIRS_NV(1) : prt == 2 ? FMK_PAIRS_NV(2) : FMK_PAIRS_NV(3);
#undef FMK_PAIRS_NV
        }
    }
    if (g->n_ynodes > 0)
        k_p2p_nv<R, NEWTON, NV>
            <<<dim3((unsigned)g->n_ynodes, split_for(s->near_max)), BLOCK, 0, st>>>(
                ker, nt, 1, 0, sc, s->ns, qk, g->d_ynodes, g->d_tb, g->d_tn, g->d_sb, g->d_sn,
                g->d_y_begin, g->d_y, g->d_cube, g->d_src, g->d_trg, near);
}

template <int NV>
void p2p_precision(fmk_fmm3d_cuda *s, int nt, const scale4 &sc, cudaStream_t st, const double *qk,
                   double *near)
{
    const int newton = s->tune->p2p_newton < 0 ? s->newton_ok : s->tune->p2p_newton;
    if (s->fp32)
        fmk_p2p_with_kernel<float>(s->kernel, s->softening, [&](auto ker) {
            p2p_nv<float, 0, NV>(s, nt, sc, st, qk, near, ker);
        });
    else if (newton)
        fmk_p2p_with_kernel<double>(s->kernel, s->softening, [&](auto ker) {
            p2p_nv<double, 1, NV>(s, nt, sc, st, qk, near, ker);
        });
    else
        fmk_p2p_with_kernel<double>(s->kernel, s->softening, [&](auto ker) {
            p2p_nv<double, 0, NV>(s, nt, sc, st, qk, near, ker);
        });
}

} // namespace

cudaError_t fmk_cuda_fmm3d_p2p_many(fmk_fmm3d_cuda *s, int nt, int nv, const p2p_scales &sc,
                                    cudaStream_t st)
{
    cudaStreamWaitEvent(st, s->ev[EV_FORK], 0);
    cudaEventRecord(s->ev[EV_NEAR], st);
    for (int v0 = 0; v0 < nv;) {
        const int k = nv - v0 >= 4 ? 4 : nv - v0 >= 2 ? 2 : 1;
        double *near = s->d_near + (int64_t)v0 * 4 * nt;
        if (k == 1) { /* nv - 1, its charges in the sources' 4th component */
            const p2p_scale one = {sc.q[v0], sc.pot[v0], sc.grad[v0]};
            fmk_cuda_fmm3d_p2p_into(s, nt, one, st, near);
        } else {
            scale4 c;
            for (int u = 0; u < 4; u++) {
                const int v = v0 + (u < k ? u : 0);
                c.q[u] = sc.q[v], c.pot[u] = sc.pot[v], c.grad[u] = sc.grad[v];
            }
            const double *qk = s->d_qk + v0 * s->ns;
            if (k == 4)
                p2p_precision<4>(s, nt, c, st, qk, near);
            else
                p2p_precision<2>(s, nt, c, st, qk, near);
        }
        v0 += k;
    }
    cudaEventRecord(s->ev[EV_P2P], st);
    return cudaGetLastError();
}
