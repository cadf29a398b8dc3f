/* l2l_l2p.cu -- the downward pass of the GPU 2D FMM: L2L, L2P with M2P at the finest level
 * (fmm2d_ops.c's operators in the same scaled form, Goude & Engblom eq. 2.2), and the results
 * in the caller's order. */
#include <math.h>

#include "fmm2d/cuda/fmm2d.cuh"

namespace {

/* L2L into the boxes of level l: a warp per child, lane m owns its b_m. */
__global__ void k_l2l(fmk_fmm2d_args a, int l)
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
__global__ void k_l2p(fmk_fmm2d_args a, const int *near_begin, const int *near,
                      const signed char *kind, fmk_cplx *res, int add)
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

} // namespace

cudaError_t fmk_cuda_fmm2d_l2l(const fmk_fmm2d_args *a, const fmk_fmm2d_gpu *s)
{
    const size_t sm = sizeof(fmk_cplx) * WARPS * (s->order + 1);
    const int B = 32 * WARPS;
    for (int l = 2; l <= s->levels; l++)
        k_l2l<<<grid_of(32 * ((int64_t)1 << (2 * l)), B), B, sm>>>(*a, l);
    return cudaGetLastError();
}

cudaError_t fmk_cuda_fmm2d_l2p(const fmk_fmm2d_args *a, const fmk_fmm2d_gpu *s, int add)
{
    const size_t sm = sizeof(fmk_cplx) * WARPS * (s->order + 1);
    const int B = 32 * WARPS;
    k_l2p<<<grid_of(32 * s->leaves, B), B, sm>>>(*a, s->d_near_begin, s->d_near, s->d_kind,
                                                 s->d_res, add);
    return cudaGetLastError();
}

cudaError_t fmk_cuda_fmm2d_output(const fmk_fmm2d_gpu *s, int is_log, const fmk_frame *frame,
                                  double *pot, double *grad)
{
    const int64_t nt = s->nt;
    k_output<<<grid_of(nt, 256), 256>>>(nt, is_log, s->d_trg_place, s->d_res, s->d_qzero,
                                        s->d_qtotal, s->d_stats, frame->log_width, frame->pot_scale,
                                        pot, grad);
    return cudaGetLastError();
}
