/* m2l_rot.cu -- the rotation-based M2L of the GPU 3D FMM (m2l_rot.h): point and shoot on
 * the GPU, a block per target box over its V entries, with the rotation and coaxial tables of
 * fmm3d_ops.c built on the host. docs/fmm3d_gpu.md, "High orders: rotation-based M2L". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fmm3d/cuda/m2l_rot.h"

#define IDX FMK_FMM3D_IDX

namespace {

const int ROT_THREADS = 256;

/* Doubles of degrees < n of one polar angle's matrices (fmm3d_ops.c's rot_offset): four
 * (k + 1) x (k + 1) blocks per degree k. */
__host__ __device__ inline int64_t wig_offset(int n)
{
    return 4 * (int64_t)n * (n + 1) * (2 * n + 1) / 6;
}

/* The degree n of coefficient index i = IDX(n, m). */
__device__ inline int degree_of(int i)
{
    int n = (int)((sqrt(8.0 * i + 1) - 1) * 0.5);
    while ((n + 1) * (n + 2) / 2 <= i)
        n++;
    while (n * (n + 1) / 2 > i)
        n--;
    return n;
}

/* A block per target box b = vnodes[blockIdx.x]; per V entry (source a, slot sl), with the
 * expansion's complex coefficients spread over the threads (coefficient i by thread i mod
 * ROT_THREADS, in each of the four passes): A = e^{i m phi} M_a; B = the forward rotation of A
 * (fmk_fmm3d_rotate: Re B_n^m = sum_m' Fr Re A_n^m', Im likewise with Fi); A = the coaxial M2L
 * of B (X_k^m = sum_j Z_m[k][j] B_j^m); acc += e^{-i m' phi} (Br Re A + i Bi Im A). Then
 * L_b += acc / side(b) (locals carry 1/s, fmm3d_ops.h; the tables are for unit sides). Shared
 * memory: A, B, acc, 3 (p + 1)(p + 2) doubles; the tables are read through L1 / L2. */
__global__ void __launch_bounds__(ROT_THREADS)
    k_m2l_rot(int p, const int32_t *__restrict__ vnodes, const int32_t *__restrict__ v_begin,
              const int32_t *__restrict__ v, const int16_t *__restrict__ v_slot,
              const int32_t *__restrict__ slot_info, const double *__restrict__ phase,
              const double *__restrict__ wig, int64_t wig_size, const double *__restrict__ zt,
              int64_t z_size, const real4d *__restrict__ cube, const double *__restrict__ M,
              double *L)
{
    extern __shared__ double sm[];
    const int nc = (p + 1) * (p + 2) / 2, S = 2 * nc;
    double *A = sm, *B = sm + S, *acc = sm + 2 * S;
    const int b = vnodes[blockIdx.x];
    for (int i = threadIdx.x; i < S; i += ROT_THREADS)
        acc[i] = 0;
    for (int e = v_begin[b]; e < v_begin[b + 1]; e++) {
        const int a = v[e], sl = v_slot[e];
        const double *ph = phase + (int64_t)sl * 2 * (p + 1);
        const double *W = wig + (int64_t)slot_info[2 * sl] * wig_size;
        const double *Z = zt + (int64_t)slot_info[2 * sl + 1] * z_size;
        const double *Ma = M + (int64_t)a * S;
        __syncthreads(); /* the previous entry's last pass has read A */
        for (int i = threadIdx.x; i < nc; i += ROT_THREADS) {
            const int m = i - IDX(degree_of(i), 0);
            const double c = ph[2 * m], s = ph[2 * m + 1], mr = Ma[2 * i], mi = Ma[2 * i + 1];
            A[2 * i] = c * mr - s * mi;
            A[2 * i + 1] = c * mi + s * mr;
        }
        __syncthreads();
        for (int i = threadIdx.x; i < nc; i += ROT_THREADS) {
            const int n = degree_of(i), m = i - IDX(n, 0), n1 = n + 1;
            const double *Fr = W + wig_offset(n), *Fi = Fr + n1 * n1; /* transposed: [m'][m] */
            const double *An = A + 2 * IDX(n, 0);
            double re = 0, im = 0;
            for (int mp = 0; mp <= n; mp++) {
                re += Fr[mp * n1 + m] * An[2 * mp];
                im += Fi[mp * n1 + m] * An[2 * mp + 1];
            }
            B[2 * i] = re, B[2 * i + 1] = im;
        }
        __syncthreads();
        for (int i = threadIdx.x; i < nc; i += ROT_THREADS) {
            const int m = i - IDX(degree_of(i), 0);
            double re = 0, im = 0;
            for (int j = m; j <= p; j++) {
                const double z = Z[(int64_t)j * nc + i];
                re += z * B[2 * IDX(j, m)];
                im += z * B[2 * IDX(j, m) + 1];
            }
            A[2 * i] = re, A[2 * i + 1] = im;
        }
        __syncthreads();
        for (int i = threadIdx.x; i < nc; i += ROT_THREADS) {
            const int n = degree_of(i), mp = i - IDX(n, 0), n1 = n + 1;
            const double *Br = W + wig_offset(n) + 2 * n1 * n1, *Bi = Br + n1 * n1; /* [m][m'] */
            const double *An = A + 2 * IDX(n, 0);
            double re = 0, im = 0;
            for (int m = 0; m <= n; m++) {
                re += Br[m * n1 + mp] * An[2 * m];
                im += Bi[m * n1 + mp] * An[2 * m + 1];
            }
            const double c = ph[2 * mp], s = ph[2 * mp + 1];
            acc[2 * i] += c * re + s * im;
            acc[2 * i + 1] += c * im - s * re;
        }
    }
    /* each thread adds the coefficients it accumulated: no barrier needed */
    const double inv_s = 1 / cube[b].w;
    for (int i = threadIdx.x; i < nc; i += ROT_THREADS) {
        L[(int64_t)b * S + 2 * i] += acc[2 * i] * inv_s;
        L[(int64_t)b * S + 2 * i + 1] += acc[2 * i + 1] * inv_s;
    }
}

/* The polar-angle class of a direction (as the CPU engine groups them: equal ox^2 + oy^2 and
 * oz share the Wigner matrices) and its squared length. */
int angle_key(int d)
{
    const int ox = d / 49 - 3, oy = (d / 7) % 7 - 3, oz = d % 7 - 3;
    return (ox * ox + oy * oy) * 7 + oz + 3;
}

int dist2(int d)
{
    const int ox = d / 49 - 3, oy = (d / 7) % 7 - 3, oz = d % 7 - 3;
    return ox * ox + oy * oy + oz * oz;
}

} /* namespace */

extern "C" int64_t fmk_cuda_fmm3d_rot_bytes(int order, int n_slots)
{
    const int64_t p1 = order + 1, nc = p1 * (p1 + 1) / 2;
    const int64_t angles = n_slots < 61 ? n_slots : 61, dists = n_slots < 28 ? n_slots : 28;
    return 8 * ((int64_t)n_slots * 2 * p1 + angles * wig_offset(order + 1) + dists * p1 * nc) +
           8 * (int64_t)n_slots;
}

extern "C" void fmk_cuda_fmm3d_rot_free(fmk_cuda_fmm3d_rot *r)
{
    if (r->d_tab)
        cudaFree(r->d_tab);
    if (r->d_slot)
        cudaFree(r->d_slot);
    memset(r, 0, sizeof *r);
}

extern "C" fmk_status fmk_cuda_fmm3d_rot_build(fmk_plan *plan, const fmk_fmm3d_ops_ctx *ops,
                                               const int32_t *dir_of_slot, int n_slots,
                                               long long total, fmk_cuda_fmm3d_rot *r)
{
    memset(r, 0, sizeof *r);
    const int p = ops->order;
    const int64_t p1 = p + 1, nc = fmk_fmm3d_ncoef(p), ph_size = 2 * p1;
    const int64_t wsz = wig_offset(p + 1), zsz = p1 * nc;
    /* the polar angles and distances in use, each with a direction of it */
    int angle_of[19 * 7], dist_of[28], angle_dir[19 * 7], dist_q[28];
    int32_t *info = (int32_t *)malloc(8 * (size_t)(n_slots > 0 ? n_slots : 1));
    for (int i = 0; i < 19 * 7; i++)
        angle_of[i] = -1;
    for (int i = 0; i < 28; i++)
        dist_of[i] = -1;
    int na = 0, nd = 0;
    for (int sl = 0; sl < n_slots && info; sl++) {
        const int d = dir_of_slot[sl], ak = angle_key(d), q = dist2(d);
        if (angle_of[ak] < 0)
            angle_dir[na] = d, angle_of[ak] = na++;
        if (dist_of[q] < 0)
            dist_q[nd] = q, dist_of[q] = nd++;
        info[2 * sl] = angle_of[ak], info[2 * sl + 1] = dist_of[q];
    }
    const int64_t n_tab = n_slots * ph_size + na * wsz + nd * zsz;
    double *tab = (double *)malloc(8 * (size_t)(n_tab > 0 ? n_tab : 1));
    double *rot = (double *)malloc(8 * (size_t)ops->rot_size);
    double *work = (double *)malloc(8 * (size_t)ops->work_size);
    double *zmat = (double *)malloc(8 * (size_t)fmk_fmm3d_m2l_zmat_size(ops));
    fmk_status st = FMK_OK;
    if (!info || !tab || !rot || !work || !zmat)
        st = fmk_error_set(plan, FMK_ERR_NOMEM,
                           "out of host memory for the M2L's rotation tables (%lld bytes)",
                           (long long)(8 * n_tab));
    if (st == FMK_OK) {
        double *ph = tab, *wig = tab + n_slots * ph_size, *zt = wig + na * wsz;
        for (int sl = 0; sl < n_slots; sl++) {
            const int d = dir_of_slot[sl];
            const double dir[3] = {(double)(d / 49 - 3), (double)((d / 7) % 7 - 3),
                                   (double)(d % 7 - 3)};
            fmk_fmm3d_rot_phase(ops, dir, ph + sl * ph_size);
        }
        for (int k = 0; k < na; k++) { /* each degree's four blocks transposed */
            const int d = angle_dir[k];
            const double dir[3] = {(double)(d / 49 - 3), (double)((d / 7) % 7 - 3),
                                   (double)(d % 7 - 3)};
            fmk_fmm3d_rot_init(ops, dir, rot, work);
            const double *F = rot + ph_size;
            double *Wk = wig + k * wsz;
            for (int n = 0; n <= p; n++) {
                const int n1 = n + 1;
                for (int blk = 0; blk < 4; blk++) {
                    const double *src = F + wig_offset(n) + blk * n1 * n1;
                    double *dst = Wk + wig_offset(n) + blk * n1 * n1;
                    for (int a = 0; a < n1; a++)
                        for (int c = 0; c < n1; c++)
                            dst[c * n1 + a] = src[a * n1 + c];
                }
            }
        }
        for (int k = 0; k < nd; k++) { /* Z_m[k - m][j - m] at row j, column IDX(k, m) */
            fmk_fmm3d_m2l_zmat(ops, sqrt((double)dist_q[k]), zmat);
            double *Zk = zt + k * zsz;
            memset(Zk, 0, 8 * (size_t)zsz);
            const double *z = zmat;
            for (int m = 0; m <= p; m++)
                for (int kk = m; kk <= p; kk++)
                    for (int j = m; j <= p; j++)
                        Zk[(int64_t)j * nc + IDX(kk, m)] = *z++;
        }
        st = fmk_cuda_alloc(plan, (void **)&r->d_tab, 8 * (size_t)(n_tab > 0 ? n_tab : 1),
                            "the M2L's rotation tables", total);
        if (st == FMK_OK)
            st = fmk_cuda_alloc(plan, (void **)&r->d_slot, 8 * (size_t)(n_slots > 0 ? n_slots : 1),
                                "the M2L's rotation tables", total);
        cudaError_t err = cudaSuccess;
        if (st == FMK_OK && n_tab > 0)
            err = cudaMemcpy(r->d_tab, tab, 8 * (size_t)n_tab, cudaMemcpyHostToDevice);
        if (st == FMK_OK && err == cudaSuccess && n_slots > 0)
            err = cudaMemcpy(r->d_slot, info, 8 * (size_t)n_slots, cudaMemcpyHostToDevice);
        if (st == FMK_OK && err != cudaSuccess)
            st = fmk_cuda_fail(plan, err, "cudaMemcpy (the M2L's rotation tables)");
    }
    free(info), free(tab), free(rot), free(work), free(zmat);
    if (st != FMK_OK) {
        fmk_cuda_fmm3d_rot_free(r);
        return st;
    }
    r->order = p, r->n_slots = n_slots, r->n_angles = na, r->n_dist = nd;
    r->wig_size = wsz, r->z_size = zsz;
    r->bytes = 8 * (n_tab > 0 ? n_tab : 1) + 8 * (int64_t)(n_slots > 0 ? n_slots : 1);
    return FMK_OK;
}

extern "C" cudaError_t fmk_cuda_fmm3d_m2l_rot(const fmk_cuda_fmm3d_rot *r, int64_t n_vnodes,
                                              const int32_t *d_vnodes, const int32_t *d_v_begin,
                                              const int32_t *d_v, const int16_t *d_v_slot,
                                              const real4d *d_cube, const double *d_M, double *d_L,
                                              cudaStream_t st)
{
    if (n_vnodes <= 0 || r->n_slots == 0)
        return cudaSuccess;
    const int p = r->order;
    const size_t smem = 3 * 8 * (size_t)(p + 1) * (p + 2);
    cudaError_t err =
        cudaFuncSetAttribute(k_m2l_rot, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess)
        return err;
    const double *ph = r->d_tab, *wig = ph + (int64_t)r->n_slots * 2 * (p + 1);
    const double *zt = wig + (int64_t)r->n_angles * r->wig_size;
    k_m2l_rot<<<(unsigned)n_vnodes, ROT_THREADS, smem, st>>>(p, d_vnodes, d_v_begin, d_v, d_v_slot,
                                                             r->d_slot, ph, wig, r->wig_size, zt,
                                                             r->z_size, d_cube, d_M, d_L);
    return cudaGetLastError();
}
