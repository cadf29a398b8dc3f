/* translate.cu -- M2M and L2L of the GPU 3D FMM (fmm3d_cuda.h), level by level over tiles of TB
 * boxes: per octant, the TB input expansions in shared memory times the octant's matrix
 * (operators.cu), accumulators in registers. With every expansion scaled by its box's side
 * (fmm3d_ops.h), M2M and L2L depend only on the child's octant, never on the level. */
#include "fmm3d/cuda/fmm3d_cuda.h"

fmk_translate_cfg fmk_fmm3d_cuda_translate_config(int S)
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

namespace {

/* Translations over tiles of TB target boxes: M2M and L2L. T[slot][j][k] is a slot's matrix (an
 * octant's), transposed. tile_src[e * TB + t]: the source box of target t of the tile for entry
 * e, or -1. blockIdx.y splits a tile's entries (gridDim.y blocks per tile, atomic adds into the
 * outputs then: the top levels of M2M have too few tiles to fill the GPU, and a tile's 8
 * octants are 8 independent products). TRANSLATE_THREADS threads, each owning RPT output rows
 * for all TB targets; the TB input expansions sit in shared memory as ms[j][t], so that one
 * 16-byte load feeds 2 RPT fused multiply-adds. blockIdx.z: the charge vector (its expansions
 * vstride doubles after the previous one's). */
template <int RPT, int TB>
__global__ void __launch_bounds__(TRANSLATE_THREADS)
    k_translate(int S, int32_t first_tile, const int32_t *__restrict__ tile_nodes,
                const int32_t *__restrict__ tile_begin, const int32_t *__restrict__ tile_slot,
                const int32_t *__restrict__ tile_src, const double *__restrict__ T,
                const double *__restrict__ M, double *L, int64_t vstride)
{
    extern __shared__ double2 ms2[];
    M += blockIdx.z * vstride, L += blockIdx.z * vstride;
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
        for (int i = threadIdx.x; i < TB * S; i += TRANSLATE_THREADS) {
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
                    const int k = threadIdx.x + r * TRANSLATE_THREADS;
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
#pragma unroll
        for (int r = 0; r < RPT; r++) {
            const int k = threadIdx.x + r * TRANSLATE_THREADS;
            if (k < S && gridDim.y > 1)
                atomicAdd(L + (int64_t)b * S + k, acc[r][t]);
            else if (k < S)
                L[(int64_t)b * S + k] += acc[r][t];
        }
    }
}

/* Tiles [first, end) of the translation kernel with matrices T. */
template <int RPT, int TB>
cudaError_t launch_tiles(fmk_fmm3d_cuda *s, int64_t first, int64_t end, const double *T,
                         const double *in, double *out, unsigned split, int nv)
{
    const size_t smem = 8 * (size_t)TB * s->S;
    cudaError_t err = cudaFuncSetAttribute(k_translate<RPT, TB>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err == cudaSuccess && end > first) {
        k_translate<RPT, TB><<<dim3((unsigned)(end - first), split, (unsigned)nv),
                               TRANSLATE_THREADS, smem, s->stream[0]>>>(
            s->S, (int32_t)first, s->g.d_tile_nodes, s->g.d_tile_begin, s->g.d_tile_slot,
            s->g.d_tile_src, T, in, out, s->n_nodes * (int64_t)s->S);
        err = cudaGetLastError();
    }
    return err;
}

cudaError_t tiles(fmk_fmm3d_cuda *s, int64_t first, int64_t end, const double *T, const double *in,
                  double *out, int split_entries, int nv)
{
    /* a level with fewer tiles than two blocks per SM: each tile's entries over up to 8 blocks */
    unsigned split = 1;
    const int64_t n = (end - first) * nv, want = 2 * (int64_t)s->sms;
    if (split_entries && n > 0 && n < want)
        split = (unsigned)((want + n - 1) / n > 8 ? 8 : (want + n - 1) / n);
    switch (s->cfg.rpt) {
    case 1: return launch_tiles<1, 32>(s, first, end, T, in, out, split, nv);
    case 2: return launch_tiles<2, 32>(s, first, end, T, in, out, split, nv);
    case 4: return launch_tiles<4, 16>(s, first, end, T, in, out, split, nv);
    case 8: return launch_tiles<8, 8>(s, first, end, T, in, out, split, nv);
    case 16: return launch_tiles<16, 4>(s, first, end, T, in, out, split, nv);
    default: return launch_tiles<32, 2>(s, first, end, T, in, out, split, nv);
    }
}

} // namespace

/* up to level 2 only: M2L and M2P read multipoles from level 2 down (V and W entries are there) */
cudaError_t fmk_cuda_fmm3d_m2m(fmk_fmm3d_cuda *s, int nv)
{
    cudaError_t err = cudaSuccess;
    for (int lev = s->levels - 2; lev >= 2 && err == cudaSuccess; lev--)
        err =
            tiles(s, s->g.m2m_first[lev], s->g.m2m_first[lev + 1], s->d_m2m, s->d_M, s->d_M, 1, nv);
    return err;
}

cudaError_t fmk_cuda_fmm3d_l2l(fmk_fmm3d_cuda *s, int nv)
{
    cudaError_t err = cudaSuccess;
    for (int lev = 3; lev < s->levels && err == cudaSuccess; lev++)
        err =
            tiles(s, s->g.l2l_first[lev], s->g.l2l_first[lev + 1], s->d_l2l, s->d_L, s->d_L, 0, nv);
    return err;
}
