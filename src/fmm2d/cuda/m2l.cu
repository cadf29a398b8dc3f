/* m2l.cu -- M2L of the GPU 2D FMM from the weak lists of every level, with P2L at the finest
 * level (fmm2d_ops.c's operators in the same scaled form, Goude & Engblom eq. 2.2). */
#include <math.h>

#include "fmm2d/cuda/fmm2d.cuh"

namespace {

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

/* Shared memory of k_m2l with warps warps a block: a row of nc coefficients per warp, then the
 * table of M2L binomials C(m + k - 1, k - 1) at (k - 1) nc + m (k = 1 .. p, m = 0 .. p), so that
 * the lanes (m) read consecutive words. */
size_t m2l_smem(int p, int warps)
{
    return sizeof(fmk_cplx) * warps * (p + 1) + sizeof(double) * p * (p + 1);
}

/* M2L from the weak lists (every level) and, at the finest level, P2L: a warp per target box
 * (or split warps, see split_for), lane l owns b_l. */
__global__ void k_m2l(fmk_fmm2d_args a, const int *weak_begin, const int *weak,
                      const int *near_begin, const int *near, const signed char *kind,
                      int64_t n_boxes, int split)
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
            ck[k] = k == 0 ? fmk_c(0, 0) : fmk_cmul(ld(ac + k), k < 32 ? ps : fmk_cmul(ps, rs32));
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

} // namespace

cudaError_t fmk_cuda_fmm2d_m2l(const fmk_fmm2d_args *a, const fmk_fmm2d_gpu *s)
{
    const int64_t nb = s->n_boxes;
    if (nb > 1) {
        const int split = split_for(nb - 1);
        const unsigned tm = threads_for(split);
        const unsigned grid = split > 1 ? (unsigned)(nb - 1) : grid_of(32 * (nb - 1), tm);
        k_m2l<<<grid, tm, m2l_smem(s->order, (int)tm / 32)>>>(
            *a, s->d_weak_begin, s->d_weak, s->d_near_begin, s->d_near, s->d_kind, nb, split);
    }
    return cudaGetLastError();
}
