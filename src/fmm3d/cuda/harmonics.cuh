/* harmonics.cuh -- the solid harmonics of the GPU 3D FMM's kernels, one point per thread
 * (fmm3d_ops.c's recursion on its tables, struct tabs): the P2M/P2L, M2P and operator kernels. */
#ifndef FMMKIT_CUDA_FMM3D_HARMONICS_CUH
#define FMMKIT_CUDA_FMM3D_HARMONICS_CUH

#include "fmm3d/cuda/fmm3d_cuda.h"

/* fmm3d_ops.c's fmk_fmm3d_regular, for one point. */
static __device__ void regular(const tabs &t, int degree, double x, double y, double z, double *R)
{
    const double r2 = x * x + y * y + z * z;
    double dr = 1, di = 0;
    for (int m = 0; m <= degree; m++) {
        if (m > 0) {
            const double f = -t.rec_diag[m];
            const double nr = f * (x * dr - y * di), ni = f * (x * di + y * dr);
            dr = nr, di = ni;
        }
        R[2 * IDX(m, m)] = dr, R[2 * IDX(m, m) + 1] = di;
        if (m + 1 > degree)
            break;
        double pr = dr, pi = di;
        const double a1 = t.rec_a[IDX(m + 1, m)] * z;
        double qr = a1 * dr, qi = a1 * di;
        R[2 * IDX(m + 1, m)] = qr, R[2 * IDX(m + 1, m) + 1] = qi;
        for (int n = m + 2; n <= degree; n++) {
            const double a = t.rec_a[IDX(n, m)] * z, b = t.rec_b[IDX(n, m)] * r2;
            const double sr = a * qr - b * pr, si = a * qi - b * pi;
            R[2 * IDX(n, m)] = sr, R[2 * IDX(n, m) + 1] = si;
            pr = qr, pi = qi, qr = sr, qi = si;
        }
    }
}

/* Kelvin inversion: I_n^m(x) = R_n^m(x / r^2) / r. */
static __device__ void irregular(const tabs &t, int degree, double x, double y, double z, double *I)
{
    const double inv_r2 = 1 / (x * x + y * y + z * z), inv_r = sqrt(inv_r2);
    regular(t, degree, x * inv_r2, y * inv_r2, z * inv_r2, I);
    const int nc = (degree + 1) * (degree + 2);
    for (int i = 0; i < nc; i++)
        I[i] *= inv_r;
}

/* M2P at one target (docs/fmm3d.md, M2P): with H the irregular harmonics of the target to degree
 * p + 1 about the box (scaled by its side), the sums of the potential (phi), of D- phi
 * (-(gr + i gi)) and of d/dz phi (gzz), before the box's scales 1/s and 1/s^2. sq: sqrt(i). */
static __device__ __forceinline__ void m2p_sums(int p, const double *__restrict__ sq,
                                                const double *__restrict__ M, const double *H,
                                                double *phi_out, double *gr_out, double *gi_out,
                                                double *gz_out)
{
    double phi = 0, gr = 0, gi = 0, gzz = 0;
    for (int nn = 0; nn <= p; nn++) {
        const double *Mn = M + 2 * IDX(nn, 0);
        const double *In = H + 2 * IDX(nn, 0);
        double t = Mn[0] * In[0] - Mn[1] * In[1];
        for (int m = 1; m <= nn; m++)
            t += 2 * (Mn[2 * m] * In[2 * m] - Mn[2 * m + 1] * In[2 * m + 1]);
        phi += t;
        const double *J = H + 2 * IDX(nn + 1, 0);
        double z = (Mn[0] * J[0] - Mn[1] * J[1]) * (nn + 1);
        for (int m = 1; m <= nn; m++) {
            const double ww = 2 * sq[nn + 1 + m] * sq[nn + 1 - m];
            z += ww * (Mn[2 * m] * J[2 * m] - Mn[2 * m + 1] * J[2 * m + 1]);
            const double w1 = sq[nn - m + 2] * sq[nn - m + 1];
            const double *aa = Mn + 2 * m, *bb = J + 2 * (m - 1);
            gr += w1 * (aa[0] * bb[0] - aa[1] * bb[1]);
            gi += w1 * (aa[0] * bb[1] + aa[1] * bb[0]);
        }
        for (int k = 0; k <= nn; k++) {
            const double w2 = sq[nn + k + 2] * sq[nn + k + 1];
            const double *aa = Mn + 2 * k, *bb = J + 2 * (k + 1);
            gr -= w2 * (aa[0] * bb[0] - aa[1] * bb[1]);
            gi += w2 * (aa[0] * bb[1] + aa[1] * bb[0]);
        }
        gzz -= z;
    }
    *phi_out = phi, *gr_out = gr, *gi_out = gi, *gz_out = gzz;
}

static __device__ inline double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

#endif /* FMMKIT_CUDA_FMM3D_HARMONICS_CUH */
