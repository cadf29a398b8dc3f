/* fmm2d.cuh -- device helpers of the GPU 2D FMM that several phases use (fmm2d_cuda.h). */
#ifndef FMMKIT_FMM2D_CUH
#define FMMKIT_FMM2D_CUH

#include "fmm2d/cuda/fmm2d_cuda.h"

static __device__ __forceinline__ fmk_cplx ld(const fmk_cplx *p)
{
    const double2 v = __ldg(reinterpret_cast<const double2 *>(p));
    return fmk_c(v.x, v.y);
}

/* The points of box b of level l, counted by the finest level's starts start. */
static __device__ __forceinline__ int64_t count_in(const int64_t *start, int L, int l, int64_t b)
{
    const int sh = 2 * (L - l);
    return start[(b + 1) << sh] - start[b << sh];
}

static __device__ __forceinline__ double binom(const fmk_fmm2d_args &a, int n, int k)
{
    return __ldg(a.binom + n * a.nb + k);
}

static __device__ __forceinline__ fmk_cplx center_of(const fmk_fmm2d_args &a, int64_t g)
{
    return fmk_c(a.center[2 * g], a.center[2 * g + 1]);
}
static __device__ __forceinline__ double scale_of(const fmk_fmm2d_args &a, int64_t g)
{
    return fmk_fmm2d_scale(a.radius[g]);
}

/* The sum of term over a full warp's lanes (a butterfly), added to coefficient k, which lane
 * k % 32 holds in acc[k / 32]. */
static __device__ __forceinline__ void sum_to_lane(fmk_cplx term, int k, int lane,
                                                   fmk_cplx acc[SLOTS])
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

/* The expansions (p + 1 coefficients, acc as sum_to_lane holds them) of the first ways warps of
 * the block, which share one box, added in warp order into warp 0's acc, through each warp's
 * row of p + 1 words at smem (done with); true for warp 0. Every thread of the block calls it. */
static __device__ __forceinline__ bool warps_sum(fmk_cplx acc[SLOTS], int p, int ways,
                                                 fmk_cplx *smem)
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

#endif /* FMMKIT_FMM2D_CUH */
