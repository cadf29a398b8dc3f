/* p2p.cu -- the near field of the GPU 2D FMM: P2P over the finest level's strong lists (the
 * entries of kind P2P), a warp or several per leaf. */
#include <math.h>

#include "fmm2d/cuda/fmm2d.cuh"

namespace {

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
    k_p2p(fmk_fmm2d_args a, const int *near_begin, const int *near, const signed char *kind,
          fmk_cplx *res, double *qzero)
{
    __shared__ real4d tile[WAYS > 1 ? WAYS : WARPS][32];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int part = WAYS > 1 ? w : 0, ways = WAYS;
    const int64_t b =
        WAYS > 1 ? (int64_t)blockIdx.x : (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
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

} // namespace

cudaError_t fmk_cuda_fmm2d_p2p(const fmk_fmm2d_args *args, const fmk_fmm2d_gpu *s,
                               cudaStream_t stream)
{
    const fmk_fmm2d_args &a = *args;
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
    return cudaGetLastError();
}
