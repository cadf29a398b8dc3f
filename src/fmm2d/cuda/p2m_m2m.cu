/* p2m_m2m.cu -- the upward pass of the GPU 2D FMM: the binomial table, the charges in box order,
 * P2M and M2M (fmm2d_ops.c's operators in the same scaled form, Goude & Engblom eq. 2.2). */
#include <math.h>

#include <cub/cub.cuh>

#include "fmm2d/cuda/fmm2d.cuh"

namespace {

/* Binomials C(i, k) at i nn + k, i, k < nn, by Pascal's rule (the same additions as on a
 * host): one block, a thread per k, a row at a time. */
__global__ void k_binomials(int nn, double *bin)
{
    for (int i = 0; i < nn; i++) {
        for (int k = threadIdx.x; k < nn; k += blockDim.x)
            bin[i * nn + k] = k > i ? 0
                              : (k == 0 || k == i)
                                  ? 1
                                  : bin[(i - 1) * nn + k - 1] + bin[(i - 1) * nn + k];
        __syncthreads();
    }
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

/* P2M: a warp per finest box; lane k holds a_k (and a_(k+32)). The sources go 32 at a time, a
 * lane each: lane j forms its source's term of every coefficient k (powers of w by repeated
 * products) and a butterfly sum over the lanes hands the total to lane k. */
__global__ void k_p2m(fmk_fmm2d_args a)
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

/* M2M into the boxes of level l: a warp per parent, lane l owns b_l; or (per_child, for levels
 * of few boxes) a block of 4 warps per parent, a child each, whose sums warp 0 adds in the
 * children's order: the same additions, the same result. */
__global__ void k_m2m(fmk_fmm2d_args a, int l, int per_child)
{
    extern __shared__ fmk_cplx smem[];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, nc = a.p + 1;
    fmk_cplx *au = smem + w * nc;
    const int64_t b =
        per_child ? (int64_t)blockIdx.x : (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
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

} // namespace

cudaError_t fmk_cuda_fmm2d_binomials(int p, double *d_binom)
{
    k_binomials<<<1, 128>>>(2 * p + 2, d_binom);
    return cudaGetLastError();
}

cudaError_t fmk_cuda_fmm2d_charges(const fmk_fmm2d_gpu *s, int is_log, const double *d_q)
{
    const int64_t ns = s->ns;
    k_charges<<<grid_of(ns, 256), 256>>>(ns, is_log, s->d_src_order, d_q, s->d_q, s->d_stats);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess || !is_log)
        return err;
    size_t tb = s->temp_bytes;
    return cub::DeviceReduce::Sum(s->d_temp, tb, d_q, s->d_qtotal, (int)ns);
}

cudaError_t fmk_cuda_fmm2d_p2m(const fmk_fmm2d_args *a, const fmk_fmm2d_gpu *s)
{
    const int B = 32 * WARPS;
    k_p2m<<<grid_of(32 * s->leaves, B), B>>>(*a);
    return cudaGetLastError();
}

cudaError_t fmk_cuda_fmm2d_m2m(const fmk_fmm2d_args *a, const fmk_fmm2d_gpu *s)
{
    const size_t sm = sizeof(fmk_cplx) * WARPS * (s->order + 1);
    const int B = 32 * WARPS;
    for (int l = s->levels - 1; l >= 1; l--) { /* few boxes: a warp per child (WARPS = 4) */
        const int64_t nbl = (int64_t)1 << (2 * l);
        const int per_child = split_for(nbl) > 1;
        k_m2m<<<per_child ? (unsigned)nbl : grid_of(32 * nbl, B), B, sm>>>(*a, l, per_child);
    }
    return cudaGetLastError();
}
