/* fmm3d.cu -- the adaptive 3D FMM for the Laplace kernel on the GPU (method fmm, backend cuda),
 * fp64. docs/fmm3d_gpu.md describes the design and the measured numbers.
 *
 * set_points (geometry, once): the points (mapped into the plan's frame) go to the GPU, the
 * octree over sources and targets together is built there (tree3d.cu, the treecode's build),
 * downloaded once, and the U, V, W, X lists of the CPU engine (fmm3d_lists.c) are built on the
 * host and uploaded with the sources and targets in key order. The translation operators are
 * dense real matrices on (p + 1)(p + 2) doubles (an expansion's real and imaginary parts):
 * with every expansion scaled by its box's side (fmm3d_ops.h), M2M and L2L depend only on the
 * child's octant (8 each) and M2L only on the offset of the two boxes in side units (one of the
 * 316 V-list directions), never on the level. They are built on the GPU, one entry per thread,
 * from the addition theorems (fmm3d_ops.c's references, written per matrix entry) and the
 * harmonics of the 8 + 8 + 316 translation vectors.
 *
 * eval (numbers only): charges to key order; P2M at the leaves (a block per leaf, a thread per
 * source, warp sums); M2M level by level upward and L2L level by level downward in tiles of TB
 * boxes (per octant, the TB input expansions in shared memory times the octant's matrix
 * streamed once for all of them, accumulators in registers); M2L per V direction as one cuBLAS
 * DGEMM of the direction's matrix with the multipoles of all boxes from level 2 down, then a
 * scatter of the direction's pairs into the local expansions; P2L (X list); L2P and M2P
 * (W list) a thread per target; P2P (U list) a block per target leaf with the sources staged in
 * shared memory. W entries with few sources and X entries into boxes with few targets are done
 * as P2P instead (exact, and cheaper there; fmk_cuda_fmm3d_direct_near). Then the results go
 * to the caller's order and units. Nothing is written to the caller's arrays
 * before every pass has succeeded.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>

#include <cublas_v2.h>

#include "../fmm3d.h"
#include "../fmm3d_ops.h"
#include "cuda_internal.h"
#include "tree_internal.h"

#define IDX FMK_FMM3D_IDX

/* Largest order on the GPU: the per-thread harmonics (degree p + 1) and one M2L matrix per
 * direction ((p + 1)^2 (p + 2)^2 doubles: 10 MB at p = 32) bound it; measured to 32. */
#define FMM_GPU_MAX_ORDER 32

/* Tuning knob, not API: 1 (default) does W entries with few sources and X entries into boxes
 * with few targets as P2P (exact, and cheaper there); 0 keeps every list's operator (M2P, P2L),
 * which makes the engine compute what the CPU engine computes. */
extern "C" int fmk_cuda_fmm3d_direct_near;
int fmk_cuda_fmm3d_direct_near = 1;

/* cuBLAS is loaded when the first GPU FMM plan starts, not linked: libfmmkit then runs
 * (CPU and every other GPU engine) on machines whose loader cannot find libcublas, and the
 * GPU FMM says what is missing. The three entry points used are the _v2 ones that
 * cublas_v2.h maps cublasCreate, cublasDestroy and cublasDgemm to. */
namespace blas {

typedef cublasStatus_t (*create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*destroy_fn)(cublasHandle_t);
typedef cublasStatus_t (*dgemm_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                   int, const double *, const double *, int, const double *, int,
                                   const double *, double *, int);
create_fn create;
destroy_fn destroy;
dgemm_fn dgemm;

#define FMK_STR2(x) #x
#define FMK_STR(x) FMK_STR2(x)
#define FMK_CUBLAS_SONAME "libcublas.so." FMK_STR(CUBLAS_VER_MAJOR)

/* 1 when the three functions are there (tries the loader's path, then $CUDA_HOME/lib64 and
 * /usr/local/cuda/lib64); the library stays loaded for the life of the process. */
int load(void)
{
    static int state = 0; /* 0 not tried, 1 loaded, -1 not found */
    if (state)
        return state > 0;
    const char *home = getenv("CUDA_HOME");
    char path[1024];
    void *h = dlopen(FMK_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h && home && strlen(home) < sizeof path - 40) {
        snprintf(path, sizeof path, "%s/lib64/" FMK_CUBLAS_SONAME, home);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!h)
        h = dlopen("/usr/local/cuda/lib64/" FMK_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h) {
        create = (create_fn)dlsym(h, "cublasCreate_v2");
        destroy = (destroy_fn)dlsym(h, "cublasDestroy_v2");
        dgemm = (dgemm_fn)dlsym(h, "cublasDgemm_v2");
    }
    state = h && create && destroy && dgemm ? 1 : -1;
    return state > 0;
}

} // namespace blas

namespace {

const int BLOCK = 128;
const int M2L_THREADS = 128;

/* Order p and leaf size for eps on the GPU (docs/fmm3d_gpu.md, section 3: measured). */
int gpu_order_from_eps(double eps)
{
    /* the smallest p whose measured relative l2 error, worst of the five test distributions
     * (N = 10^5, docs/fmm3d_gpu.md section 3), is at most eps / 2 for the potential and 5 eps for
     * the gradient; below 1e-9 the largest order, which does not reach eps (docs) */
    static const struct {
        double eps;
        int p;
    } table[] = {{1e-2, 3}, {1e-3, 6}, {1e-4, 8}, {1e-5, 11}, {1e-6, 16}, {1e-7, 22},
                 {1e-8, 26}, {1e-9, 32}};
    const int n = (int)(sizeof table / sizeof table[0]);
    for (int i = 0; i < n; i++)
        if (eps >= table[i].eps * (1 - 1e-9))
            return table[i].p;
    return table[n - 1].p;
}

int32_t gpu_leaf_size_for(int p)
{
    /* cost model s_opt = sqrt(B / C) with B (M2L per box, ~ (p + 1)^4) and C (P2P per pair)
     * measured at p = 8 on an H100 (docs/fmm3d_gpu.md, section 3): s_opt ~ 1.2 p^2 */
    double s = 1.2 * p * p;
    if (s < 32)
        s = 32;
    if (s > 512)
        s = 512;
    return (int32_t)s;
}

int order_of(const fmk_plan *plan)
{
    return plan->opts.order >= 0 ? plan->opts.order : gpu_order_from_eps(plan->eps);
}

int32_t leaf_size_of(const fmk_plan *plan, int p)
{
    int64_t ls = plan->opts.leaf_size > 0 ? plan->opts.leaf_size : gpu_leaf_size_for(p);
    return ls > (1 << 30) ? (1 << 30) : (int32_t)ls;
}

/* M2L tiles: target boxes per tile (TB) and output rows per thread (RPT, of M2L_THREADS) for S
 * doubles per expansion; TB * S doubles of shared memory (<= 64 KB). */
struct m2l_cfg {
    int rpt, tb;
};
m2l_cfg m2l_config(int S)
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

/* The harmonic recursion's tables (fmm3d_ops.c) on the device. */
struct tabs {
    const double *rec_a, *rec_b, *rec_diag, *sqrt_int;
};

/* fmm3d_ops.c's fmk_fmm3d_regular, for one point. */
__device__ void regular(const tabs &t, int degree, double x, double y, double z, double *R)
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
__device__ void irregular(const tabs &t, int degree, double x, double y, double z, double *I)
{
    const double inv_r2 = 1 / (x * x + y * y + z * z), inv_r = sqrt(inv_r2);
    regular(t, degree, x * inv_r2, y * inv_r2, z * inv_r2, I);
    const int nc = (degree + 1) * (degree + 2);
    for (int i = 0; i < nc; i++)
        I[i] *= inv_r;
}

__device__ inline double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* P2M (list == NULL: the node's own sources, regular harmonics) and P2L (the sources of the
 * node's X list, irregular harmonics) into E of node nodes[blockIdx.x]. NH >= (p + 1)(p + 2)/2. */
template <int NH>
__global__ void __launch_bounds__(BLOCK) k_p2e(int p, int S, tabs tb, const int32_t *__restrict__ nodes,
                                               const int32_t *__restrict__ list_begin,
                                               const int32_t *__restrict__ list,
                                               const real4d *__restrict__ cube,
                                               const int32_t *__restrict__ sb,
                                               const int32_t *__restrict__ sn,
                                               const real4d *__restrict__ src, double *E)
{
    extern __shared__ double acc[];
    const int b = nodes[blockIdx.x];
    for (int i = threadIdx.x; i < S; i += blockDim.x)
        acc[i] = 0;
    __syncthreads();
    const real4d c = cube[b];
    const double inv_s = 1 / c.w;
    const int nc = S / 2;
    const int e0 = list ? list_begin[b] : 0, e1 = list ? list_begin[b + 1] : 1;
    double H[2 * NH];
    for (int e = e0; e < e1; e++) {
        const int a = list ? list[e] : b;
        const int j0 = sb[a], j1 = j0 + sn[a];
        for (int base = j0; base < j1; base += blockDim.x) {
            const int j = base + threadIdx.x;
            double q = 0;
            if (j < j1) {
                const real4d s = src[j];
                q = s.w;
                if (list) {
                    irregular(tb, p, (s.x - c.x) * inv_s, (s.y - c.y) * inv_s, (s.z - c.z) * inv_s, H);
                    q *= inv_s;
                } else {
                    regular(tb, p, (s.x - c.x) * inv_s, (s.y - c.y) * inv_s, (s.z - c.z) * inv_s, H);
                }
            } else {
                for (int i = 0; i < S; i++)
                    H[i] = 0;
            }
            for (int i = 0; i < nc; i++) { /* += q conj(H) */
                const double vr = warp_sum(q * H[2 * i]), vi = warp_sum(-q * H[2 * i + 1]);
                if ((threadIdx.x & 31) == 0) {
                    atomicAdd(&acc[2 * i], vr);
                    atomicAdd(&acc[2 * i + 1], vi);
                }
            }
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < S; i += blockDim.x)
        E[(int64_t)b * S + i] += acc[i];
}

/* Translations over tiles of TB target boxes (see the file comment): M2L (cube given: the
 * output is scaled by 1/side), M2M and L2L (cube NULL). T[slot][j][k] is a slot's matrix
 * (direction or octant), transposed. tile_src[e * TB + t]: the source box of target t of the
 * tile for entry e, or -1. M2L_THREADS threads, each owning RPT output rows for all TB
 * targets; the TB multipoles sit in shared memory as ms[j][t], so that one 16-byte load feeds
 * 2 RPT fused multiply-adds. */
template <int RPT, int TB>
__global__ void __launch_bounds__(M2L_THREADS) k_tiles(int S, int32_t first_tile,
                                                     const int32_t *__restrict__ tile_nodes,
                                                     const int32_t *__restrict__ tile_begin,
                                                     const int32_t *__restrict__ tile_slot,
                                                     const int32_t *__restrict__ tile_src,
                                                     const double *__restrict__ T,
                                                     const real4d *__restrict__ cube,
                                                     const double *__restrict__ M, double *L)
{
    extern __shared__ double2 ms2[];
    double *ms = (double *)ms2;
    const int tile = first_tile + blockIdx.x;
    double acc[RPT][TB];
#pragma unroll
    for (int r = 0; r < RPT; r++)
#pragma unroll
        for (int t = 0; t < TB; t++)
            acc[r][t] = 0;
    for (int e = tile_begin[tile]; e < tile_begin[tile + 1]; e++) {
        const int32_t *srcs = tile_src + (int64_t)e * TB;
        __syncthreads();
        for (int i = threadIdx.x; i < TB * S; i += M2L_THREADS) {
            const int t = i / S, j = i - t * S;
            const int a = srcs[t];
            ms[j * TB + t] = a >= 0 ? M[(int64_t)a * S + j] : 0.0;
        }
        __syncthreads();
        const double *Td = T + (int64_t)tile_slot[e] * S * S;
        double next[RPT]; /* the matrix row of the next j, loaded while this one is used */
#pragma unroll
        for (int r = 0; r < RPT; r++) {
            const int k = threadIdx.x + r * M2L_THREADS;
            next[r] = k < S ? __ldg(Td + k) : 0.0;
        }
        for (int j = 0; j < S; j++) {
            double tv[RPT];
#pragma unroll
            for (int r = 0; r < RPT; r++) {
                const int k = threadIdx.x + r * M2L_THREADS;
                tv[r] = next[r];
                next[r] = k < S && j + 1 < S ? __ldg(Td + (int64_t)(j + 1) * S + k) : 0.0;
            }
            const double2 *mj = ms2 + j * (TB / 2);
#pragma unroll
            for (int t = 0; t < TB / 2; t++) {
                const double2 m = mj[t];
#pragma unroll
                for (int r = 0; r < RPT; r++) {
                    acc[r][2 * t] += tv[r] * m.x;
                    acc[r][2 * t + 1] += tv[r] * m.y;
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < TB; t++) {
        const int b = tile_nodes[tile * TB + t];
        if (b < 0)
            continue;
        /* M2L: locals carry 1/s (fmm3d_ops.h: P2L), the matrices are for unit sides */
        const double inv_s = cube ? 1 / cube[b].w : 1.0;
#pragma unroll
        for (int r = 0; r < RPT; r++) {
            const int k = threadIdx.x + r * M2L_THREADS;
            if (k < S)
                L[(int64_t)b * S + k] += acc[r][t] * inv_s;
        }
    }
}

/* M2L, second half: L[trg] += X[src] / side(trg) for the pairs of one direction, where X holds
 * that direction's matrix times every multipole (one GEMM). A direction gives each target at
 * most one source, so the pairs of one launch never write the same expansion. X's column 0 is
 * box first. */
__global__ void k_m2l_scatter(int S, int64_t n, int64_t first, const int32_t *__restrict__ src,
                              const int32_t *__restrict__ trg, const real4d *__restrict__ cube,
                              const double *__restrict__ X, double *L)
{
    for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < n * S;
         g += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = g / S;
        const int k = (int)(g - e * S);
        const int a = src[e], b = trg[e];
        /* locals carry 1/s (fmm3d_ops.h: P2L); the matrices are for unit sides */
        L[(int64_t)b * S + k] += X[(a - first) * S + k] / cube[b].w;
    }
}

/* L2P (leaves below level 2) and M2P (W list) at the targets of leaf leaves[blockIdx.x]; writes
 * res (pot | grad, nt + 3 nt), which P2P then adds to. fmm3d_ops.c's l2p and m2p, per target. */
template <int NH>
__global__ void __launch_bounds__(64) k_l2p_m2p(int p, int S, int nt, tabs tb,
                                                const int32_t *__restrict__ leaves,
                                                const int8_t *__restrict__ level,
                                                const real4d *__restrict__ cube,
                                                const int32_t *__restrict__ tbeg,
                                                const int32_t *__restrict__ tn,
                                                const int32_t *__restrict__ w_begin,
                                                const int32_t *__restrict__ w,
                                                const real4d *__restrict__ trg,
                                                const double *__restrict__ Mx,
                                                const double *__restrict__ Lx, double *res)
{
    const int b = leaves[blockIdx.x];
    const double *sq = tb.sqrt_int;
    double H[2 * NH];
    for (int i = tbeg[b] + threadIdx.x; i < tbeg[b] + tn[b]; i += blockDim.x) {
        const real4d y = trg[i];
        double pot = 0, gx = 0, gy = 0, gz = 0;
        if (level[b] >= 2) {
            const real4d c = cube[b];
            const double inv_s = 1 / c.w;
            const double *L = Lx + (int64_t)b * S;
            regular(tb, p, (y.x - c.x) * inv_s, (y.y - c.y) * inv_s, (y.z - c.z) * inv_s, H);
            double phi = 0, gr = 0, gi = 0, gzz = 0;
            for (int nn = 0; nn <= p; nn++) {
                const double *Ln = L + 2 * IDX(nn, 0);
                const double *Rn = H + 2 * IDX(nn, 0);
                double t = Ln[0] * Rn[0] - Ln[1] * Rn[1];
                for (int m = 1; m <= nn; m++)
                    t += 2 * (Ln[2 * m] * Rn[2 * m] - Ln[2 * m + 1] * Rn[2 * m + 1]);
                phi += t;
                if (nn == 0)
                    continue;
                const double *Q = H + 2 * IDX(nn - 1, 0);
                double z = (Ln[0] * Q[0] - Ln[1] * Q[1]) * nn;
                for (int m = 1; m <= nn - 1; m++)
                    z += 2 * sq[nn + m] * sq[nn - m] *
                         (Ln[2 * m] * Q[2 * m] - Ln[2 * m + 1] * Q[2 * m + 1]);
                for (int m = 1; m <= nn; m++) {
                    const double w1 = sq[nn + m] * sq[nn + m - 1];
                    const double *a = Ln + 2 * m, *bb = H + 2 * IDX(nn - 1, m - 1);
                    gr += w1 * (a[0] * bb[0] - a[1] * bb[1]);
                    gi += w1 * (a[0] * bb[1] + a[1] * bb[0]);
                }
                for (int k = 0; k <= nn - 2; k++) {
                    const double w2 = sq[nn - k] * sq[nn - k - 1];
                    const double *a = Ln + 2 * k, *bb = Q + 2 * (k + 1);
                    gr -= w2 * (a[0] * bb[0] - a[1] * bb[1]);
                    gi += w2 * (a[0] * bb[1] + a[1] * bb[0]);
                }
                gzz += z;
            }
            pot += phi;
            gx += -gr * inv_s, gy += gi * inv_s, gz += gzz * inv_s;
        }
        for (int e = w_begin[b]; e < w_begin[b + 1]; e++) {
            const int a = w[e];
            const real4d c = cube[a];
            const double inv_s = 1 / c.w;
            const double *M = Mx + (int64_t)a * S;
            irregular(tb, p + 1, (y.x - c.x) * inv_s, (y.y - c.y) * inv_s, (y.z - c.z) * inv_s, H);
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
            const double g2 = inv_s * inv_s;
            pot += phi * inv_s;
            gx += -gr * g2, gy += gi * g2, gz += gzz * g2;
        }
        res[i] = pot;
        res[nt + 3 * i] = gx, res[nt + 3 * i + 1] = gy, res[nt + 3 * i + 2] = gz;
    }
}

/* P2P: the targets of box leaves[blockIdx.x] from the sources of its list (U and the W entries
 * done directly, for leaves; the X entries done directly, for any box), staged in shared
 * memory. Pairs at distance 0 contribute nothing. */
__global__ void __launch_bounds__(BLOCK) k_p2p(int nt, int atomic, const int32_t *__restrict__ leaves,
                                               const int32_t *__restrict__ tbeg,
                                               const int32_t *__restrict__ tn,
                                               const int32_t *__restrict__ sb,
                                               const int32_t *__restrict__ sn,
                                               const int32_t *__restrict__ u_begin,
                                               const int32_t *__restrict__ u,
                                               const real4d *__restrict__ src,
                                               const real4d *__restrict__ trg, double *res)
{
    __shared__ real4d tile[BLOCK];
    const int b = leaves[blockIdx.x];
    const int i0 = tbeg[b], i1 = i0 + tn[b];
    for (int base = i0; base < i1; base += BLOCK) {
        const int i = base + threadIdx.x;
        real4d y = {0, 0, 0, 0};
        if (i < i1)
            y = trg[i];
        double p = 0, gx = 0, gy = 0, gz = 0;
        for (int e = u_begin[b]; e < u_begin[b + 1]; e++) {
            const int a = u[e];
            const int j0 = sb[a], j1 = j0 + sn[a];
            for (int jb = j0; jb < j1; jb += BLOCK) {
                __syncthreads();
                if (jb + threadIdx.x < j1)
                    tile[threadIdx.x] = src[jb + threadIdx.x];
                __syncthreads();
                const int cnt = j1 - jb < BLOCK ? j1 - jb : BLOCK;
                for (int j = 0; j < cnt; j++) {
                    const real4d s = tile[j];
                    const double dx = y.x - s.x, dy = y.y - s.y, dz = y.z - s.z;
                    const double r2 = dx * dx + dy * dy + dz * dz;
                    const double inv = r2 > 0 ? rsqrt(r2) : 0.0;
                    const double qi = s.w * inv, qi3 = qi * inv * inv;
                    p += qi;
                    gx -= dx * qi3, gy -= dy * qi3, gz -= dz * qi3;
                }
            }
        }
        if (i < i1 && atomic) { /* boxes of one launch may nest */
            atomicAdd(res + i, p);
            atomicAdd(res + nt + 3 * i, gx), atomicAdd(res + nt + 3 * i + 1, gy);
            atomicAdd(res + nt + 3 * i + 2, gz);
        } else if (i < i1) {
            res[i] += p;
            res[nt + 3 * i] += gx, res[nt + 3 * i + 1] += gy, res[nt + 3 * i + 2] += gz;
        }
    }
}

/* Charges in key order into the sources' 4th component. */
__global__ void k_charges(int n, const int32_t *__restrict__ order, const double *__restrict__ q,
                          real4d *src)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        src[i].w = q[order[i]];
}

/* Results (key order, frame units) to the caller's order and units. */
__global__ void k_results(int nt, const int32_t *__restrict__ order, const double *__restrict__ res,
                          double ps, double *pot, double *grad)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nt; i += gridDim.x * blockDim.x) {
        const int c = order[i];
        if (pot)
            pot[c] = res[i] * ps;
        if (grad) /* scaled twice by 1/width: 1/width^2 may overflow */
            for (int d = 0; d < 3; d++)
                grad[3 * c + d] = res[nt + 3 * i + d] * ps * ps;
    }
}

/* ---------------------------------------------------------------------------------------------
 * The translation matrices, one 2 x 2 real block (an output coefficient's real and imaginary
 * parts against an input's) per thread. H holds each translation vector's harmonics (I for
 * M2L, R for M2M and L2L) up to degree hdeg; sqb[a * nb + b] = sqrt(C(a, b)).
 * ------------------------------------------------------------------------------------------ */

__device__ inline void harm(const double *H, int n, int m, double *re, double *im)
{
    const int am = m < 0 ? -m : m;
    double r = H[2 * IDX(n, am)], i = H[2 * IDX(n, am) + 1];
    if (m < 0) { /* X_n^-m = (-1)^m conj(X_n^m) */
        const double sg = (am & 1) ? -1.0 : 1.0;
        r *= sg, i = -i * sg;
    }
    *re = r, *im = i;
}

/* kind 0: M2L, 1: M2M, 2: L2L. The weight c of input coefficient (J, L) (L signed) in output
 * (N, Mo), so that out_{N,Mo} += c In_J^L (fmm3d_ops.c's references with unit sides). */
__device__ void weight(int kind, const double *H, const double *sqb, int nb, int N, int Mo, int J,
                       int L, double *cr, double *ci)
{
    *cr = 0, *ci = 0;
    double hr, hi, w;
    if (kind == 0) { /* L_N^Mo += (-1)^(N+Mo) F(n,i)/(F(N,Mo) F(J,L)) I_{N+J}^{L-Mo}(D) M_J^L */
        harm(H, N + J, L - Mo, &hr, &hi);
        w = sqb[(J + L + N - Mo) * nb + (N - Mo)] * sqb[(J - L + N + Mo) * nb + (N + Mo)];
        if ((N + Mo) & 1)
            w = -w;
    } else if (kind == 1) { /* M_N^Mo += 2^-J F/(FF) conj(R_k^l(t)) M_J^L, k = N - J, l = Mo - L */
        const int k = N - J, l = Mo - L;
        if (k < 0 || l > k || l < -k)
            return;
        harm(H, k, l, &hr, &hi);
        hi = -hi;
        w = ldexp(1.0, -J) * sqb[(N + Mo) * nb + (k + l)] * sqb[(N - Mo) * nb + (k - l)];
    } else { /* L_N^Mo += 2^-N F/(FF) R_j^i(t) L_J^L, j = J - N, i = L - Mo */
        const int j = J - N, i = L - Mo;
        if (j < 0 || i > j || i < -j)
            return;
        harm(H, j, i, &hr, &hi);
        w = ldexp(1.0, -N) * sqb[(J + L) * nb + (N + Mo)] * sqb[(J - L) * nb + (N - Mo)];
    }
    *cr = w * hr, *ci = w * hi;
}

__global__ void k_build(int kind, int p, int n_mat, int hdeg, const double *__restrict__ H,
                        const double *__restrict__ sqb, int nb, double *T)
{
    const int nc = (p + 1) * (p + 2) / 2, S = 2 * nc;
    const int64_t total = (int64_t)n_mat * nc * nc;
    for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < total;
         g += (int64_t)gridDim.x * blockDim.x) {
        const int mat = (int)(g / ((int64_t)nc * nc));
        const int rem = (int)(g - (int64_t)mat * nc * nc);
        const int out = rem % nc, in = rem / nc;
        int N = 0, J = 0;
        while ((N + 1) * (N + 2) / 2 <= out)
            N++;
        while ((J + 1) * (J + 2) / 2 <= in)
            J++;
        const int Mo = out - IDX(N, 0), Li = in - IDX(J, 0);
        const double *Hm = H + (int64_t)mat * (hdeg + 1) * (hdeg + 2);
        double c1r, c1i, c2r = 0, c2i = 0;
        weight(kind, Hm, sqb, nb, N, Mo, J, Li, &c1r, &c1i);
        if (Li > 0) { /* the input's -Li coefficient is (-1)^Li conj of the stored one */
            weight(kind, Hm, sqb, nb, N, Mo, J, -Li, &c2r, &c2i);
            if (Li & 1)
                c2r = -c2r, c2i = -c2i;
        }
        double *Tm = T + (int64_t)mat * S * S;
        const int64_t ir = 2 * in, ii = 2 * in + 1, orr = 2 * out, oi = 2 * out + 1;
        Tm[ir * S + orr] = c1r + c2r;  /* d out_re / d in_re */
        Tm[ii * S + orr] = c2i - c1i;  /* d out_re / d in_im */
        Tm[ir * S + oi] = c1i + c2i;   /* d out_im / d in_re */
        Tm[ii * S + oi] = c1r - c2r;   /* d out_im / d in_im */
    }
}

/* ---------------------------------------------------------------------------------------------
 * State
 * ------------------------------------------------------------------------------------------ */

enum { EV_START, EV_P2M, EV_M2M, EV_M2L, EV_L2L, EV_L2P, EV_P2P, EV_END, N_EV };

struct fmm_gpu {
    int device, order, S, nh;
    int32_t leaf_size;
    m2l_cfg cfg;
    int64_t n_nodes;
    int levels;
    int64_t level_begin[FMK_TREE_MAX_LEVEL + 2];
    int64_t n_leaves_src, n_leaves_trg, n_xnodes, n_ynodes;
    int64_t m2m_first[FMK_TREE_MAX_LEVEL + 2], l2l_first[FMK_TREE_MAX_LEVEL + 2]; /* per level */
    int64_t n_v;                       /* V pairs */
    int n_slots;                       /* V directions that occur */
    int64_t dir_begin[FMK_FMM3D_NDIR + 1]; /* V pairs of slot d: [dir_begin[d], dir_begin[d + 1]) */
    int64_t gemm_first;                /* first node of level 2: M2L's GEMMs start there */
    cublasHandle_t blas;
    int has_blas;
    double tree_time;
    /* device arrays, all in one list so release frees them */
    real4d *d_src, *d_trg;             /* key order; d_trg == d_src when self */
    int32_t *d_src_order, *d_trg_order;
    real4d *d_cube;
    int32_t *d_sb, *d_sn, *d_tb, *d_tn;
    int8_t *d_level;
    int32_t *d_u_begin, *d_u, *d_w_begin, *d_w, *d_x_begin, *d_x;
    int32_t *d_y_begin, *d_y;          /* X entries done as P2P into the box's targets */
    int32_t *d_leaves_src, *d_leaves_trg, *d_xnodes, *d_ynodes;
    int32_t *d_tile_nodes, *d_tile_begin, *d_tile_slot, *d_tile_src;
    int32_t *d_pair_src, *d_pair_trg;  /* V pairs sorted by direction slot */
    double *d_X;                       /* one direction's matrix times every multipole */
    double *d_m2l, *d_m2m, *d_l2l;
    double *d_tabs;                    /* rec_a | rec_b | rec_diag | sqrt_int */
    tabs tb;
    double *d_M, *d_L, *d_res;
    double *d_q, *d_pot, *d_grad;      /* host evaluations */
    unsigned long long *d_stats;
    cudaEvent_t ev[N_EV];
    int events;
    int64_t bytes;
};

void free_all(fmm_gpu *s)
{
    if (s->d_trg != s->d_src)
        cudaFree(s->d_trg);
    void *all[] = {s->d_src, s->d_src_order, s->d_trg_order, s->d_cube, s->d_sb, s->d_sn,
                   s->d_tb, s->d_tn, s->d_level,
                   s->d_u_begin, s->d_u, s->d_w_begin, s->d_w, s->d_x_begin, s->d_x,
                   s->d_y_begin, s->d_y, s->d_leaves_src, s->d_leaves_trg, s->d_xnodes, s->d_ynodes, s->d_tile_nodes,
                   s->d_tile_begin, s->d_tile_slot, s->d_tile_src, s->d_m2l, s->d_m2m, s->d_l2l,
                   s->d_tabs, s->d_M, s->d_L, s->d_res, s->d_pair_src, s->d_pair_trg, s->d_X, s->d_q, s->d_pot, s->d_grad, s->d_stats};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i])
            cudaFree(all[i]);
}

void fmm_release(fmk_plan *plan)
{
    fmm_gpu *s = (fmm_gpu *)plan->state;
    if (!s)
        return;
    int prev = -1;
    const int entered = fmk_cuda_enter(plan, s->device, &prev) == FMK_OK;
    free_all(s);
    for (int i = 0; i < s->events; i++)
        cudaEventDestroy(s->ev[i]);
    if (s->has_blas)
        blas::destroy(s->blas);
    if (entered)
        fmk_cuda_leave(s->device, prev);
    free(s);
    plan->state = NULL;
    plan->state_bytes_device = 0;
}

/* Device bytes for ns sources, nt targets (nt < 0: at the sources), before allocating. */
int64_t device_bytes(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t nodes, int64_t n_dirs)
{
    const int self = nt < 0;
    if (self)
        nt = ns;
    const int p = order_of(plan);
    const int64_t S = (int64_t)(p + 1) * (p + 2);
    const int64_t np = self ? ns : ns + nt;
    const m2l_cfg cfg = m2l_config((int)S);
    int64_t b = fmk_cuda_tree3d_build_bytes(np) + nodes * FMK_CUDA_TREE_NODE_BYTES; /* tree */
    b += 32 * ns + 4 * ns + (self ? 0 : 36 * nt) + 24 * np;    /* points, orders, upload */
    b += nodes * (32 + 7 * 4 + 2 + 3 * 4 + 12);                /* node arrays, list begins */
    b += nodes * 4 * (27 + 189 + 16 + 16);                     /* U, V (tiles), W, X entries */
    b += nodes * 4 * 189 / cfg.tb * 3 + nodes * 8;             /* tiles */
    b += (n_dirs + 16) * S * S * 8;                            /* matrices */
    b += 2 * nodes * S * 8;                                    /* M, L */
    b += 4 * nt * 8 + ns * 8 + 4 * nt * 8;                     /* results, host eval buffers */
    return b;
}

void fmm_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d)
{
    const int64_t np = nt < 0 ? ns : ns + nt;
    const int p = order_of(plan);
    const int64_t nodes = fmk_tree3d_estimate_nodes(np, leaf_size_of(plan, p));
    *d = device_bytes(plan, ns, nt, nodes, FMK_FMM3D_NDIR - 27);
    /* host: the downloaded tree and lists while set_points runs */
    *h = (int64_t)sizeof(fmm_gpu) + fmk_tree3d_bytes_for(np, nodes) +
         fmk_fmm3d_lists_bytes_for(nodes) + 64 * np + 64 * nodes;
}

/* cudaMalloc + copy of host data, with the plan's message on failure. */
fmk_status put(fmk_plan *plan, fmm_gpu *s, void **d, const void *h, size_t bytes, const char *what,
               long long total)
{
    fmk_status st = fmk_cuda_alloc(plan, d, bytes, what, total);
    if (st != FMK_OK)
        return st;
    s->bytes += (int64_t)(bytes ? bytes : 1);
    if (h && bytes) {
        cudaError_t err = cudaMemcpy(*d, h, bytes, cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, what);
    }
    return FMK_OK;
}

/* Octant of a child within its parent: bit 2 x, bit 1 y, bit 0 z (1: upper half). */
int octant(const fmk_fmm3d_lists *l, int64_t child, int64_t parent)
{
    int o = 0;
    for (int k = 0; k < 3; k++)
        o |= (l->center[3 * child + k] > l->center[3 * parent + k]) << (2 - k);
    return o;
}

/* Host-side geometry: everything set_points computes from the downloaded tree. */
struct host_geo {
    fmk_tree3d tree;
    fmk_fmm3d_lists lists;
    int32_t *i32;      /* scratch of the int32 arrays below, one block */
    real4d *src, *trg;
};

template <typename T> T *hmalloc(size_t n) { return (T *)malloc(sizeof(T) * (n > 0 ? n : 1)); }

/* The matrices: harmonics of the translation vectors on the host (fmm3d_ops.h), then the
 * entries on the GPU. */
fmk_status build_matrices(fmk_plan *plan, fmm_gpu *s, const fmk_fmm3d_ops_ctx *ops,
                          const int32_t *dir_of_slot, int n_slots, long long total)
{
    const int p = s->order, S = s->S;
    const int nb = 4 * p + 2;
    const int hdeg_m2l = 2 * p;
    const int64_t hs_m2l = (int64_t)(hdeg_m2l + 1) * (hdeg_m2l + 2);
    const int64_t hs_p = (int64_t)(p + 1) * (p + 2);
    double *sqb = hmalloc<double>((size_t)nb * nb);
    double *H = hmalloc<double>((size_t)(hs_m2l * (n_slots > 0 ? n_slots : 1) + 16 * hs_p));
    if (!sqb || !H) {
        free(sqb), free(H);
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the FMM's operators");
    }
    for (int a = 0; a < nb; a++) /* Pascal's triangle, then square roots */
        for (int b = 0; b < nb; b++)
            sqb[a * nb + b] = b == 0 ? 1 : (b > a ? 0 : sqb[(a - 1) * nb + b - 1] + (b <= a - 1 ? sqb[(a - 1) * nb + b] : 0));
    for (int i = 0; i < nb * nb; i++)
        sqb[i] = sqrt(sqb[i]);
    for (int k = 0; k < n_slots; k++) {
        const int d = dir_of_slot[k];
        fmk_fmm3d_irregular(ops, hdeg_m2l, d / 49 - 3, (d / 7) % 7 - 3, d % 7 - 3, H + hs_m2l * k);
    }
    double *Hud = H + hs_m2l * n_slots;  /* 8 M2M (child - parent) then 8 L2L, in parent sides */
    for (int o = 0; o < 8; o++) {
        double t[3];
        for (int c = 0; c < 3; c++)
            t[c] = (o >> (2 - c)) & 1 ? 0.25 : -0.25;
        fmk_fmm3d_regular(ops, p, t[0], t[1], t[2], Hud + hs_p * o);
        fmk_fmm3d_regular(ops, p, t[0], t[1], t[2], Hud + hs_p * (8 + o));
    }
    double *d_sqb = NULL, *d_H = NULL;
    fmk_status st = put(plan, s, (void **)&d_sqb, sqb, sizeof(double) * nb * nb, "the operator tables", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&d_H, H, sizeof(double) * (hs_m2l * n_slots + 16 * hs_p),
                 "the translation harmonics", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_m2l, NULL, sizeof(double) * S * S * (size_t)(n_slots > 0 ? n_slots : 1),
                 "the M2L matrices", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_m2m, NULL, sizeof(double) * S * S * 8, "the M2M matrices", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_l2l, NULL, sizeof(double) * S * S * 8, "the L2L matrices", total);
    free(sqb), free(H);
    if (st == FMK_OK) {
        const int nc = S / 2;
        if (n_slots > 0)
            k_build<<<2048, 256>>>(0, p, n_slots, hdeg_m2l, d_H, d_sqb, nb, s->d_m2l);
        k_build<<<(8 * nc * nc + 255) / 256, 256>>>(1, p, 8, p, d_H + hs_m2l * n_slots, d_sqb, nb, s->d_m2m);
        k_build<<<(8 * nc * nc + 255) / 256, 256>>>(2, p, 8, p, d_H + hs_m2l * n_slots + 8 * hs_p, d_sqb, nb,
                                                     s->d_l2l);
        cudaError_t err = cudaDeviceSynchronize();
        if (err == cudaSuccess)
            err = cudaGetLastError();
        if (err != cudaSuccess)
            st = fmk_cuda_fail(plan, err, "the operator kernels");
    }
    if (d_sqb)
        cudaFree(d_sqb), s->bytes -= sizeof(double) * nb * nb;
    if (d_H)
        cudaFree(d_H), s->bytes -= sizeof(double) * (hs_m2l * n_slots + 16 * hs_p);
    return st;
}

/* Tiles of TB target boxes for the translation kernel (host side, grown as needed). A tile
 * lists the slots (directions or octants) that occur among its targets and, per slot, each
 * target's source box or -1. */
struct tiles_h {
    int tb;
    int64_t n_tiles, n_entries, cap_tiles, cap_entries;
    int32_t *nodes, *begin, *slot, *src;
};

int tiles_grow(tiles_h *t, int64_t tiles, int64_t entries)
{
    if (tiles > t->cap_tiles) {
        const int64_t c = tiles * 2 + 64;
        int32_t *n = (int32_t *)realloc(t->nodes, 4 * (size_t)(c * t->tb));
        if (n)
            t->nodes = n;
        int32_t *b = (int32_t *)realloc(t->begin, 4 * (size_t)(c + 1));
        if (b)
            t->begin = b;
        if (!n || !b)
            return -1;
        t->cap_tiles = c;
    }
    if (entries > t->cap_entries) {
        const int64_t c = entries * 2 + 512;
        int32_t *sl = (int32_t *)realloc(t->slot, 4 * (size_t)c);
        if (sl)
            t->slot = sl;
        int32_t *sr = (int32_t *)realloc(t->src, 4 * (size_t)(c * t->tb));
        if (sr)
            t->src = sr;
        if (!sl || !sr)
            return -1;
        t->cap_entries = c;
    }
    return 0;
}

/* Appends the tiles of n targets; pairs(ctx, target, slots, srcs) gives a target's (slot,
 * source) pairs (at most FMK_FMM3D_NDIR, distinct slots). Returns 0 or -1 (out of memory). */
typedef int (*pairs_fn)(const void *ctx, int32_t target, int32_t *slots, int32_t *srcs);
int tiles_add(tiles_h *t, int64_t n, const int32_t *targets, pairs_fn pairs, const void *ctx)
{
    const int TB = t->tb;
    int32_t pos[FMK_FMM3D_NDIR], sl[FMK_FMM3D_NDIR], sr[FMK_FMM3D_NDIR];
    if (t->n_tiles == 0 && tiles_grow(t, 1, 1) == 0)
        t->begin[0] = 0;
    for (int64_t first = 0; first < n; first += TB) {
        const int64_t cnt = n - first < TB ? n - first : TB;
        if (tiles_grow(t, t->n_tiles + 1, t->n_entries + FMK_FMM3D_NDIR) != 0)
            return -1;
        for (int d = 0; d < FMK_FMM3D_NDIR; d++)
            pos[d] = -1;
        const int64_t e0 = t->n_entries;
        int64_t e = e0;
        for (int i = 0; i < TB; i++) {
            t->nodes[t->n_tiles * TB + i] = i < cnt ? targets[first + i] : -1;
            if (i >= cnt)
                continue;
            const int np = pairs(ctx, targets[first + i], sl, sr);
            for (int k = 0; k < np; k++) {
                if (pos[sl[k]] < 0) {
                    pos[sl[k]] = (int32_t)(e - e0);
                    t->slot[e] = sl[k];
                    for (int j = 0; j < TB; j++)
                        t->src[e * TB + j] = -1;
                    e++;
                }
                t->src[(e0 + pos[sl[k]]) * TB + i] = sr[k];
            }
        }
        t->n_entries = e;
        t->n_tiles++;
        t->begin[t->n_tiles] = (int32_t)e;
    }
    return 0;
}

struct pairs_ctx {
    const int32_t *more, *n_children, *parent;
    const int64_t *n_src;
    const int8_t *oct;
};

int pairs_children(const void *c, int32_t b, int32_t *slots, int32_t *srcs)
{
    const pairs_ctx *x = (const pairs_ctx *)c;
    int n = 0;
    for (int32_t d = x->more[b]; d < x->more[b] + x->n_children[b]; d++)
        if (x->n_src[d] > 0)
            slots[n] = x->oct[d], srcs[n++] = d;
    return n;
}

int pairs_parent(const void *c, int32_t b, int32_t *slots, int32_t *srcs)
{
    const pairs_ctx *x = (const pairs_ctx *)c;
    slots[0] = x->oct[b], srcs[0] = x->parent[b];
    return 1;
}

/* The tiles of M2M per level (parents with sources) and of L2L per level
 * (boxes with targets below level 2, grouped by octant so each tile has one slot). */
fmk_status build_tiles(fmk_plan *plan, fmm_gpu *s, const fmk_tree3d *t, const fmk_fmm3d_lists *l,
                       const int64_t *n_src, const int64_t *n_trg, const int8_t *oct, long long total)
{
    const int64_t k = l->n_nodes;
    tiles_h h;
    memset(&h, 0, sizeof h);
    h.tb = s->cfg.tb;
    pairs_ctx c = {t->more, t->n_children, t->parent, n_src, oct};
    int32_t *list = hmalloc<int32_t>((size_t)k);
    int bad = !list;
    int64_t n = 0;
    for (int L = 0; L < t->levels && !bad; L++) {
        s->m2m_first[L] = h.n_tiles;
        n = 0;
        for (int64_t b = t->level_begin[L]; b < t->level_begin[L + 1]; b++)
            if (t->more[b] >= 0 && n_src[b] > 0)
                list[n++] = (int32_t)b;
        bad = tiles_add(&h, n, list, pairs_children, &c) != 0;
    }
    s->m2m_first[t->levels] = h.n_tiles;
    for (int L = 0; L < t->levels && !bad; L++) {
        s->l2l_first[L] = h.n_tiles;
        for (int o = 0; o < 8 && !bad; o++) {
            n = 0;
            if (L >= 3)
                for (int64_t b = t->level_begin[L]; b < t->level_begin[L + 1]; b++)
                    if (n_trg[b] > 0 && oct[b] == o)
                        list[n++] = (int32_t)b;
            bad = tiles_add(&h, n, list, pairs_parent, &c) != 0;
        }
    }
    s->l2l_first[t->levels] = h.n_tiles;
    fmk_status st = FMK_OK;
    if (bad)
        st = fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the translation tiles");
    const int TB = h.tb;
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_tile_nodes, h.nodes, 4 * (size_t)(h.n_tiles * TB), "the tiles", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_tile_begin, h.begin, 4 * (size_t)(h.n_tiles + 1), "the tiles", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_tile_slot, h.slot, 4 * (size_t)h.n_entries, "the tiles", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_tile_src, h.src, 4 * (size_t)(h.n_entries * TB), "the tiles", total);
    free(list), free(h.nodes), free(h.begin), free(h.slot), free(h.src);
    return st;
}

/* int64 CSR begins to int32 on the device. */
fmk_status put_begin(fmk_plan *plan, fmm_gpu *s, int32_t **d, const int64_t *h, int64_t n, int32_t *tmp,
                     long long total)
{
    for (int64_t i = 0; i <= n; i++)
        tmp[i] = (int32_t)h[i];
    return put(plan, s, (void **)d, tmp, 4 * (size_t)(n + 1), "the interaction lists", total);
}

/* The V pairs sorted by direction slot (a counting sort), for M2L's GEMM + scatter. */
fmk_status build_pairs(fmk_plan *plan, fmm_gpu *s, const fmk_fmm3d_lists *l, const int32_t *slot_of,
                       long long total)
{
    const int64_t nv = l->n_v;
    int32_t *src = hmalloc<int32_t>((size_t)nv), *trg = hmalloc<int32_t>((size_t)nv);
    if (!src || !trg) {
        free(src), free(trg);
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the V pairs");
    }
    int64_t pos[FMK_FMM3D_NDIR + 1];
    memset(s->dir_begin, 0, sizeof s->dir_begin);
    for (int64_t e = 0; e < nv; e++)
        s->dir_begin[slot_of[l->v_dir[e]] + 1]++;
    for (int d = 0; d < FMK_FMM3D_NDIR; d++)
        s->dir_begin[d + 1] += s->dir_begin[d];
    memcpy(pos, s->dir_begin, sizeof pos);
    for (int64_t b = 0; b < l->n_nodes; b++)
        for (int64_t e = l->v_begin[b]; e < l->v_begin[b + 1]; e++) {
            const int64_t q = pos[slot_of[l->v_dir[e]]]++;
            src[q] = l->v[e], trg[q] = (int32_t)b;
        }
    s->n_v = nv;
    fmk_status st = put(plan, s, (void **)&s->d_pair_src, src, 4 * (size_t)nv, "the V pairs", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_pair_trg, trg, 4 * (size_t)nv, "the V pairs", total);
    free(src), free(trg);
    return st;
}

fmk_status setup_on_device(fmk_plan *plan, fmm_gpu *s)
{
    const double t0 = fmk_time_now();
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    const int64_t np = plan->self ? ns : ns + nt;
    const int p = s->order;
    long long total = device_bytes(plan, ns, plan->self ? -1 : nt,
                                   fmk_tree3d_estimate_nodes(np, s->leaf_size), FMK_FMM3D_NDIR - 27);
    fmk_status st;
    cudaError_t err;
    /* the mapped points, sources then targets, for the tree */
    double *d_all = NULL;
    st = fmk_cuda_alloc(plan, (void **)&d_all, 24 * (size_t)(np > 0 ? np : 1), "the points", total);
    if (st != FMK_OK)
        return st;
    err = cudaMemcpy(d_all, plan->sources, 24 * (size_t)ns, cudaMemcpyHostToDevice);
    if (err == cudaSuccess && !plan->self)
        err = cudaMemcpy(d_all + 3 * ns, plan->targets, 24 * (size_t)nt, cudaMemcpyHostToDevice);
    if (err != cudaSuccess) {
        cudaFree(d_all);
        return fmk_cuda_fail(plan, err, "cudaMemcpy (points to the GPU)");
    }
    fmk_cuda_tree tree;
    memset(&tree, 0, sizeof tree);
    st = fmk_cuda_tree3d_build(plan, np, d_all, s->leaf_size, total, &tree);
    cudaFree(d_all);
    if (st != FMK_OK)
        return st;
    fmk_tree3d t;
    st = fmk_cuda_tree3d_download(plan, &tree, NULL, &t);
    fmk_cuda_tree3d_free(&tree);
    if (st != FMK_OK)
        return st;
    s->tree_time = fmk_time_now() - t0;
    const int64_t k = t.n_nodes;
    s->n_nodes = k;
    s->levels = t.levels;
    for (int L = 0; L <= t.levels; L++)
        s->level_begin[L] = t.level_begin[L];

    /* sources and targets in key order, per-node counts (fmm3d.c's split) */
    int64_t *n_src = hmalloc<int64_t>((size_t)k), *n_trg = hmalloc<int64_t>((size_t)k);
    int64_t *before = hmalloc<int64_t>((size_t)np + 1);
    real4d *hs = hmalloc<real4d>((size_t)ns), *ht = plan->self ? hs : hmalloc<real4d>((size_t)nt);
    int32_t *so = hmalloc<int32_t>((size_t)ns), *to = plan->self ? so : hmalloc<int32_t>((size_t)nt);
    const size_t n32 = (size_t)(k + 1) * 8 + (size_t)(np + 1); /* >= 4 k + 1 */
    int32_t *i32 = hmalloc<int32_t>(n32 > 0 ? n32 : 1);
    real4d *cube = hmalloc<real4d>((size_t)k);
    int8_t *oct = hmalloc<int8_t>((size_t)k);
    fmk_fmm3d_lists l;
    memset(&l, 0, sizeof l);
    int bad = !n_src || !n_trg || !before || !hs || !ht || !so || !to || !i32 || !cube || !oct;
    if (!bad) {
        int64_t is = 0, it = 0;
        for (int64_t q = 0; q < np; q++) {
            const int64_t c = t.order[q];
            before[q] = is;
            const double *x = c < ns ? plan->sources + 3 * c : plan->targets + 3 * (c - ns);
            if (plan->self || c < ns) {
                hs[is].x = x[0], hs[is].y = x[1], hs[is].z = x[2], hs[is].w = 0;
                so[is++] = (int32_t)c;
            } else {
                ht[it].x = x[0], ht[it].y = x[1], ht[it].z = x[2], ht[it].w = 0;
                to[it++] = (int32_t)(c - ns);
            }
        }
        before[np] = is;
        for (int64_t b = 0; b < k; b++) {
            const int64_t sb = before[t.begin[b]], se = before[t.end[b]];
            n_src[b] = se - sb;
            n_trg[b] = plan->self ? se - sb : (t.end[b] - se) - (t.begin[b] - sb);
        }
        bad = fmk_fmm3d_lists_build(&t, n_src, n_trg, &l, plan->threads) != 0;
    }
    /* direction slots */
    int32_t slot_of[FMK_FMM3D_NDIR], dir_of_slot[FMK_FMM3D_NDIR];
    int n_slots = 0;
    if (!bad)
        for (int d = 0; d < FMK_FMM3D_NDIR; d++) {
            slot_of[d] = l.dir_used[d] ? n_slots : -1;
            if (l.dir_used[d])
                dir_of_slot[n_slots++] = d;
        }
    if (bad) {
        st = fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the FMM's lists");
        goto done;
    }
    {
        fmk_fmm3d_ops_ctx ops;
        if ((st = fmk_fmm3d_ops_create(&ops, p)) != FMK_OK) {
            st = fmk_error_set(plan, st, "cannot create the FMM operators of order %d", p);
            goto done;
        }
        /* harmonic tables for degree <= p + 1 */
        const int64_t nh = fmk_fmm3d_ncoef(p + 1);
        const int64_t nt_tab = 2 * nh + (p + 2) + (2 * p + 5);
        double *tab = hmalloc<double>((size_t)nt_tab);
        if (!tab) {
            fmk_fmm3d_ops_destroy(&ops);
            st = fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the FMM's tables");
            goto done;
        }
        memcpy(tab, ops.rec_a, 8 * (size_t)nh);
        memcpy(tab + nh, ops.rec_b, 8 * (size_t)nh);
        memcpy(tab + 2 * nh, ops.rec_diag, 8 * (size_t)(p + 2));
        memcpy(tab + 2 * nh + p + 2, ops.sqrt_int, 8 * (size_t)(2 * p + 5));
        st = put(plan, s, (void **)&s->d_tabs, tab, 8 * (size_t)nt_tab, "the harmonic tables", total);
        free(tab);
        s->tb.rec_a = s->d_tabs, s->tb.rec_b = s->d_tabs + nh, s->tb.rec_diag = s->d_tabs + 2 * nh;
        s->tb.sqrt_int = s->d_tabs + 2 * nh + p + 2;
        if (st == FMK_OK)
            st = build_matrices(plan, s, &ops, dir_of_slot, n_slots, total);
        fmk_fmm3d_ops_destroy(&ops);
        if (st != FMK_OK)
            goto done;
    }
    /* node arrays */
    for (int64_t b = 0; b < k; b++) {
        cube[b].x = l.center[3 * b], cube[b].y = l.center[3 * b + 1], cube[b].z = l.center[3 * b + 2];
        cube[b].w = l.side[b];
        oct[b] = (int8_t)(t.parent[b] >= 0 ? octant(&l, b, t.parent[b]) : 0);
    }
    st = put(plan, s, (void **)&s->d_src, hs, 32 * (size_t)ns, "the sources", total);
    if (st == FMK_OK && !plan->self)
        st = put(plan, s, (void **)&s->d_trg, ht, 32 * (size_t)nt, "the targets", total);
    if (plan->self)
        s->d_trg = s->d_src;
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_src_order, so, 4 * (size_t)ns, "the source order", total);
    if (st == FMK_OK && !plan->self)
        st = put(plan, s, (void **)&s->d_trg_order, to, 4 * (size_t)nt, "the target order", total);
    if (st == FMK_OK && plan->self)
        st = put(plan, s, (void **)&s->d_trg_order, so, 4 * (size_t)nt, "the target order", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_cube, cube, 32 * (size_t)k, "the boxes", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_level, t.level, (size_t)k, "the boxes", total);
    if (st == FMK_OK) { /* per-node source/target begins and counts */
        int32_t *a = i32, *c = i32 + k;
        for (int64_t b = 0; b < k; b++)
            a[b] = (int32_t)before[t.begin[b]], c[b] = (int32_t)n_src[b];
        st = put(plan, s, (void **)&s->d_sb, a, 4 * (size_t)k, "the boxes", total);
        if (st == FMK_OK)
            st = put(plan, s, (void **)&s->d_sn, c, 4 * (size_t)k, "the boxes", total);
        for (int64_t b = 0; b < k; b++) {
            a[b] = (int32_t)(plan->self ? before[t.begin[b]] : t.begin[b] - before[t.begin[b]]);
            c[b] = (int32_t)n_trg[b];
        }
        if (st == FMK_OK)
            st = put(plan, s, (void **)&s->d_tb, a, 4 * (size_t)k, "the boxes", total);
        if (st == FMK_OK)
            st = put(plan, s, (void **)&s->d_tn, c, 4 * (size_t)k, "the boxes", total);
    }
    if (st == FMK_OK) {
        /* Near-field substitutes: a W entry with few sources is cheaper as P2P (appended to the
         * leaf's U list) than M2P at each target, and an X entry into a box with few targets is
         * cheaper as P2P into the box's targets than P2L (a separate list); both exact. */
        const int64_t thr = fmk_cuda_fmm3d_direct_near ? (int64_t)(p + 1) * (p + 1) / 2 : -1;
        int64_t *ub = hmalloc<int64_t>((size_t)k + 1), *wb = hmalloc<int64_t>((size_t)k + 1);
        int64_t *xb = hmalloc<int64_t>((size_t)k + 1), *yb = hmalloc<int64_t>((size_t)k + 1);
        int32_t *u2 = hmalloc<int32_t>((size_t)(l.n_u + l.n_w)), *w2 = hmalloc<int32_t>((size_t)l.n_w);
        int32_t *x2 = hmalloc<int32_t>((size_t)l.n_x), *y2 = hmalloc<int32_t>((size_t)l.n_x);
        if (!ub || !wb || !xb || !yb || !u2 || !w2 || !x2 || !y2) {
            st = fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the FMM's lists");
        } else {
            int64_t nu = 0, nw = 0, nx = 0, ny = 0;
            for (int64_t b = 0; b < k; b++) {
                ub[b] = nu, wb[b] = nw, xb[b] = nx, yb[b] = ny;
                for (int64_t e = l.u_begin[b]; e < l.u_begin[b + 1]; e++)
                    u2[nu++] = l.u[e];
                for (int64_t e = l.w_begin[b]; e < l.w_begin[b + 1]; e++) {
                    if (n_src[l.w[e]] <= thr)
                        u2[nu++] = l.w[e];
                    else
                        w2[nw++] = l.w[e];
                }
                for (int64_t e = l.x_begin[b]; e < l.x_begin[b + 1]; e++) {
                    if (n_trg[b] <= thr)
                        y2[ny++] = l.x[e];
                    else
                        x2[nx++] = l.x[e];
                }
            }
            ub[k] = nu, wb[k] = nw, xb[k] = nx, yb[k] = ny;
            st = put_begin(plan, s, &s->d_u_begin, ub, k, i32, total);
            if (st == FMK_OK)
                st = put(plan, s, (void **)&s->d_u, u2, 4 * (size_t)nu, "the U list", total);
            if (st == FMK_OK)
                st = put_begin(plan, s, &s->d_w_begin, wb, k, i32, total);
            if (st == FMK_OK)
                st = put(plan, s, (void **)&s->d_w, w2, 4 * (size_t)nw, "the W list", total);
            if (st == FMK_OK)
                st = put_begin(plan, s, &s->d_x_begin, xb, k, i32, total);
            if (st == FMK_OK)
                st = put(plan, s, (void **)&s->d_x, x2, 4 * (size_t)nx, "the X list", total);
            if (st == FMK_OK)
                st = put_begin(plan, s, &s->d_y_begin, yb, k, i32, total);
            if (st == FMK_OK)
                st = put(plan, s, (void **)&s->d_y, y2, 4 * (size_t)ny, "the X list", total);
            if (st == FMK_OK) { /* work lists: leaves with sources, leaves with targets, X targets */
                int64_t a = 0, c = 0, x = 0, y = 0;
                int32_t *ls = i32, *lt = i32 + k, *lx = i32 + 2 * k, *ly = i32 + 3 * k;
                for (int64_t b = 0; b < k; b++) {
                    if (t.more[b] < 0 && n_src[b] > 0)
                        ls[a++] = (int32_t)b;
                    if (t.more[b] < 0 && n_trg[b] > 0)
                        lt[c++] = (int32_t)b;
                    if (xb[b + 1] > xb[b])
                        lx[x++] = (int32_t)b;
                    if (yb[b + 1] > yb[b])
                        ly[y++] = (int32_t)b;
                }
                s->n_leaves_src = a, s->n_leaves_trg = c, s->n_xnodes = x, s->n_ynodes = y;
                st = put(plan, s, (void **)&s->d_leaves_src, ls, 4 * (size_t)a, "the leaves", total);
                if (st == FMK_OK)
                    st = put(plan, s, (void **)&s->d_leaves_trg, lt, 4 * (size_t)c, "the leaves", total);
                if (st == FMK_OK)
                    st = put(plan, s, (void **)&s->d_xnodes, lx, 4 * (size_t)x, "the leaves", total);
                if (st == FMK_OK)
                    st = put(plan, s, (void **)&s->d_ynodes, ly, 4 * (size_t)y, "the leaves", total);
            }
        }
        free(ub), free(wb), free(xb), free(yb), free(u2), free(w2), free(x2), free(y2);
    }
    if (st == FMK_OK)
        st = build_tiles(plan, s, &t, &l, n_src, n_trg, oct, total);
    if (st == FMK_OK)
        st = build_pairs(plan, s, &l, slot_of, total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_M, NULL, 8 * (size_t)s->S * (size_t)k, "the multipoles", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_L, NULL, 8 * (size_t)s->S * (size_t)k, "the local expansions", total);
    s->gemm_first = t.levels > 2 ? t.level_begin[2] : k;
    s->n_slots = n_slots;
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_X, NULL, 8 * (size_t)s->S * (size_t)(k - s->gemm_first),
                 "the M2L products", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_res, NULL, 32 * (size_t)nt, "the results", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_q, NULL, 8 * (size_t)ns, "the charges", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_pot, NULL, 8 * (size_t)nt, "the potential", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_grad, NULL, 24 * (size_t)nt, "the gradient", total);
    if (st == FMK_OK)
        st = put(plan, s, (void **)&s->d_stats, NULL, 16, "the charge check", total);
done:
    free(n_src), free(n_trg), free(before), free(so), free(hs), free(i32), free(cube), free(oct);
    if (!plan->self)
        free(ht), free(to);
    fmk_fmm3d_lists_free(&l);
    fmk_cuda_tree3d_host_free(&t);
    return st;
}

fmk_status fmm_setup(fmk_plan *plan)
{
    if (plan->n_sources + plan->n_targets > FMK_CUDA_TREE_MAX_POINTS)
        return fmk_error_set(plan, FMK_ERR_ARG,
                             "the GPU FMM takes at most %lld points (sources and targets together)",
                             (long long)FMK_CUDA_TREE_MAX_POINTS);
    fmm_gpu *s = (fmm_gpu *)calloc(1, sizeof *s);
    if (!s)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory");
    s->device = plan->opts.device;
    s->order = order_of(plan);
    s->leaf_size = leaf_size_of(plan, s->order);
    s->S = (s->order + 1) * (s->order + 2);
    s->cfg = m2l_config(s->S);
    plan->state = s;
    int prev;
    fmk_status st = fmk_cuda_enter(plan, s->device, &prev);
    if (st != FMK_OK) {
        fmm_release(plan);
        return st;
    }
    for (; s->events < N_EV && st == FMK_OK; s->events++) {
        cudaError_t err = cudaEventCreate(&s->ev[s->events]);
        if (err != cudaSuccess)
            st = fmk_cuda_fail(plan, err, "cudaEventCreate");
    }
    if (st == FMK_OK && !blas::load())
        st = fmk_error_set(plan, FMK_ERR_UNAVAILABLE,
                           "the GPU FMM needs cuBLAS (" FMK_CUBLAS_SONAME "), which was not found: add "
                           "the CUDA toolkit's lib64 to LD_LIBRARY_PATH (or set CUDA_HOME), or use "
                           "backend cpu");
    if (st == FMK_OK) {
        const cublasStatus_t bs = blas::create(&s->blas);
        if (bs != CUBLAS_STATUS_SUCCESS)
            st = bs == CUBLAS_STATUS_ALLOC_FAILED
                     ? fmk_error_set(plan, FMK_ERR_DEVICE_NOMEM,
                                     "out of GPU memory starting cuBLAS; the plan needs about %lld bytes "
                                     "on the GPU",
                                     (long long)device_bytes(plan, plan->n_sources,
                                                             plan->self ? -1 : plan->n_targets,
                                                             fmk_tree3d_estimate_nodes(
                                                                 plan->n_sources + (plan->self ? 0 : plan->n_targets),
                                                                 s->leaf_size),
                                                             FMK_FMM3D_NDIR - 27))
                     : fmk_error_set(plan, FMK_ERR_DEVICE, "cuBLAS could not start (status %d)", (int)bs);
        else
            s->has_blas = 1;
    }
    if (st == FMK_OK)
        st = setup_on_device(plan, s);
    fmk_cuda_leave(s->device, prev);
    if (st != FMK_OK) {
        fmm_release(plan);
        return st;
    }
    plan->state_bytes_device = s->bytes;
    plan->info.order = s->order;
    plan->info.levels = s->levels;
    plan->info.leaf_size = s->leaf_size;
    plan->info.phase_time[FMK_PHASE_TREE] = s->tree_time;
    return FMK_OK;
}

template <int NH>
void launch_point_ops(fmm_gpu *s, int nt, int which)
{
    const int p = s->order, S = s->S;
    if (which == 0 && s->n_leaves_src > 0)
        k_p2e<NH><<<(unsigned)s->n_leaves_src, BLOCK, 8 * S>>>(p, S, s->tb, s->d_leaves_src, NULL, NULL,
                                                               s->d_cube, s->d_sb, s->d_sn, s->d_src, s->d_M);
    if (which == 1 && s->n_xnodes > 0)
        k_p2e<NH><<<(unsigned)s->n_xnodes, BLOCK, 8 * S>>>(p, S, s->tb, s->d_xnodes, s->d_x_begin, s->d_x,
                                                           s->d_cube, s->d_sb, s->d_sn, s->d_src, s->d_L);
    if (which == 2 && s->n_leaves_trg > 0)
        k_l2p_m2p<NH><<<(unsigned)s->n_leaves_trg, 64>>>(p, S, nt, s->tb, s->d_leaves_trg, s->d_level,
                                                         s->d_cube, s->d_tb, s->d_tn, s->d_w_begin, s->d_w,
                                                         s->d_trg, s->d_M, s->d_L, s->d_res);
}

void point_ops(fmm_gpu *s, int nt, int which)
{
    /* harmonics to degree p + 1 per thread */
    if (s->order <= 12)
        launch_point_ops<105>(s, nt, which);
    else if (s->order <= 24)
        launch_point_ops<351>(s, nt, which);
    else
        launch_point_ops<595>(s, nt, which);
}

/* Tiles [first, end) of the translation kernel with matrices T (cube: M2L's scaling). */
template <int RPT, int TB>
cudaError_t launch_tiles(fmm_gpu *s, int64_t first, int64_t end, const double *T, const real4d *cube,
                         const double *in, double *out)
{
    const size_t smem = 8 * (size_t)TB * s->S;
    cudaError_t err = cudaFuncSetAttribute(k_tiles<RPT, TB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)smem);
    if (err == cudaSuccess && end > first) {
        k_tiles<RPT, TB><<<(unsigned)(end - first), M2L_THREADS, smem>>>(
            s->S, (int32_t)first, s->d_tile_nodes, s->d_tile_begin, s->d_tile_slot, s->d_tile_src, T, cube, in,
            out);
        err = cudaGetLastError();
    }
    return err;
}

cudaError_t tiles(fmm_gpu *s, int64_t first, int64_t end, const double *T, const real4d *cube,
                  const double *in, double *out)
{
    switch (s->cfg.rpt) {
    case 1: return launch_tiles<1, 32>(s, first, end, T, cube, in, out);
    case 2: return launch_tiles<2, 32>(s, first, end, T, cube, in, out);
    case 4: return launch_tiles<4, 16>(s, first, end, T, cube, in, out);
    case 8: return launch_tiles<8, 8>(s, first, end, T, cube, in, out);
    case 16: return launch_tiles<16, 4>(s, first, end, T, cube, in, out);
    default: return launch_tiles<32, 2>(s, first, end, T, cube, in, out);
    }
}

fmk_status run_eval(fmk_plan *plan, fmm_gpu *s, const double *charges, double *pot, double *grad,
                    int on_device)
{
    const int64_t ns = plan->n_sources, nt = plan->n_targets, k = s->n_nodes;
    const int S = s->S;
    double *phase = plan->info.phase_time;
    cudaError_t err = cudaSuccess;
    if (ns == 0) { /* only the device path gets here */
        if (pot && (err = cudaMemset(pot, 0, 8 * (size_t)nt)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemset (pot)");
        if (grad && (err = cudaMemset(grad, 0, 24 * (size_t)nt)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemset (grad)");
        return FMK_OK;
    }
    const double *d_q = charges;
    if (!on_device) {
        err = cudaMemcpy(s->d_q, charges, 8 * (size_t)ns, cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (charges to the GPU)");
        d_q = s->d_q;
    } else { /* plan.c checks host charges; device charges are checked here */
        unsigned long long stats[2];
        err = fmk_cuda_charge_stats(1, ns, d_q, s->d_stats);
        if (err == cudaSuccess)
            err = cudaMemcpy(stats, s->d_stats, sizeof stats, cudaMemcpyDeviceToHost);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, "the charge check kernel");
        if (stats[0] != ~0ull) {
            double q = 0;
            err = cudaMemcpy(&q, d_q + stats[0], sizeof q, cudaMemcpyDeviceToHost);
            if (err != cudaSuccess)
                return fmk_cuda_fail(plan, err, "cudaMemcpy (a charge from the GPU)");
            return fmk_error_set(plan, FMK_ERR_NONFINITE, "charges[%lld] is %g; charges must be finite",
                                 (long long)stats[0], q);
        }
    }
    const int grid = 1024;
    cudaEventRecord(s->ev[EV_START]);
    k_charges<<<grid, 256>>>((int)ns, s->d_src_order, d_q, s->d_src);
    cudaMemsetAsync(s->d_M, 0, 8 * (size_t)S * (size_t)k);
    cudaMemsetAsync(s->d_L, 0, 8 * (size_t)S * (size_t)k);
    point_ops(s, (int)nt, 0); /* P2M */
    cudaEventRecord(s->ev[EV_P2M]);
    for (int lev = s->levels - 2; lev >= 0 && err == cudaSuccess; lev--)
        err = tiles(s, s->m2m_first[lev], s->m2m_first[lev + 1], s->d_m2m, NULL, s->d_M, s->d_M);
    cudaEventRecord(s->ev[EV_M2M]);
    /* M2L: per direction, X = T_d M (all boxes from level 2 down, one GEMM on the tensor
     * cores), then the direction's pairs add X[source] to L[target] */
    const int64_t nn = k - s->gemm_first;
    for (int d = 0; d < s->n_slots && err == cudaSuccess && nn > 0; d++) {
        const int64_t np = s->dir_begin[d + 1] - s->dir_begin[d];
        if (np == 0)
            continue;
        const double one = 1, zero = 0;
        const cublasStatus_t bs = blas::dgemm(s->blas, CUBLAS_OP_N, CUBLAS_OP_N, S, (int)nn, S, &one,
                                              s->d_m2l + (int64_t)d * S * S, S, s->d_M + s->gemm_first * S, S,
                                              &zero, s->d_X, S);
        if (bs != CUBLAS_STATUS_SUCCESS) {
            err = cudaErrorUnknown;
            break;
        }
        const int64_t work = np * S;
        const unsigned blocks = (unsigned)(work / 256 + 1 < 8192 ? work / 256 + 1 : 8192);
        k_m2l_scatter<<<blocks, 256>>>(S, np, s->gemm_first, s->d_pair_src + s->dir_begin[d], s->d_pair_trg + s->dir_begin[d],
                                       s->d_cube, s->d_X, s->d_L);
    }
    if (err == cudaSuccess)
        point_ops(s, (int)nt, 1); /* P2L */
    cudaEventRecord(s->ev[EV_M2L]);
    for (int lev = 3; lev < s->levels && err == cudaSuccess; lev++)
        err = tiles(s, s->l2l_first[lev], s->l2l_first[lev + 1], s->d_l2l, NULL, s->d_L, s->d_L);
    cudaEventRecord(s->ev[EV_L2L]);
    point_ops(s, (int)nt, 2); /* L2P, M2P */
    cudaEventRecord(s->ev[EV_L2P]);
    if (s->n_leaves_trg > 0)
        k_p2p<<<(unsigned)s->n_leaves_trg, BLOCK>>>((int)nt, 0, s->d_leaves_trg, s->d_tb, s->d_tn, s->d_sb,
                                                    s->d_sn, s->d_u_begin, s->d_u, s->d_src, s->d_trg, s->d_res);
    if (s->n_ynodes > 0)
        k_p2p<<<(unsigned)s->n_ynodes, BLOCK>>>((int)nt, 1, s->d_ynodes, s->d_tb, s->d_tn, s->d_sb, s->d_sn,
                                                s->d_y_begin, s->d_y, s->d_src, s->d_trg, s->d_res);
    cudaEventRecord(s->ev[EV_P2P]);
    double *p = pot ? (on_device ? pot : s->d_pot) : NULL;
    double *g = grad ? (on_device ? grad : s->d_grad) : NULL;
    k_results<<<grid, 256>>>((int)nt, s->d_trg_order, s->d_res, plan->frame.pot_scale, p, g);
    cudaEventRecord(s->ev[EV_END]);
    if (err == cudaSuccess)
        err = cudaGetLastError();
    if (err == cudaSuccess)
        err = cudaEventSynchronize(s->ev[EV_END]);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the FMM kernels");
    static const int ph[] = {FMK_PHASE_P2M, FMK_PHASE_M2M, FMK_PHASE_M2L, FMK_PHASE_L2L,
                             FMK_PHASE_L2P, FMK_PHASE_P2P, FMK_PHASE_DOWNLOAD};
    for (int i = 0; i < 7; i++) {
        float ms = 0;
        cudaEventElapsedTime(&ms, s->ev[i], s->ev[i + 1]);
        phase[ph[i]] = 1e-3 * ms;
    }
    phase[FMK_PHASE_UPLOAD] = 0;
    if (!on_device) {
        const double t2 = fmk_time_now();
        if (pot && (err = cudaMemcpy(pot, s->d_pot, 8 * (size_t)nt, cudaMemcpyDeviceToHost)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (potential from the GPU)");
        if (grad && (err = cudaMemcpy(grad, s->d_grad, 24 * (size_t)nt, cudaMemcpyDeviceToHost)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (gradient from the GPU)");
        phase[FMK_PHASE_DOWNLOAD] += fmk_time_now() - t2;
    }
    phase[FMK_PHASE_TREE] = s->tree_time;
    return FMK_OK;
}

fmk_status fmm_eval(fmk_plan *plan, const double *charges, double *pot, double *grad, int on_device)
{
    fmm_gpu *s = (fmm_gpu *)plan->state;
    int prev;
    fmk_status st = fmk_cuda_enter(plan, s->device, &prev);
    if (st != FMK_OK)
        return st;
    st = run_eval(plan, s, charges, pot, grad, on_device);
    fmk_cuda_leave(s->device, prev);
    return st;
}

fmk_status fmm_check_opts(fmk_opts *o, fmk_kernel kernel)
{
    if (kernel != FMK_KERNEL_LAPLACE)
        return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                             "method fmm on the GPU is not available for kernel %s (only laplace)",
                             fmk_kernel_name(kernel));
    if (o->precision != FMK_PRECISION_FP64)
        return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                             "method fmm on the GPU is not available in fp32 yet; use precision fp64");
    if (o->order > FMM_GPU_MAX_ORDER)
        return fmk_error_set(NULL, FMK_ERR_ARG, "order %d is above the GPU FMM's largest, %d",
                             (int)o->order, FMM_GPU_MAX_ORDER);
    return FMK_OK;
}

} /* namespace */

/* For the benchmark: the M2L work of a plan's lists: V pairs, the box-direction products the
 * GEMMs compute (directions times boxes from level 2 down), and doubles per expansion. */
extern "C" fmk_status fmk_cuda_fmm3d_m2l_work(const fmk_plan *plan, int64_t *pairs,
                                              int64_t *tile_pairs, int *stride)
{
    if (!plan || plan->engine != &fmk_engine_fmm_cuda || !plan->state)
        return FMK_ERR_STATE;
    const fmm_gpu *s = (const fmm_gpu *)plan->state;
    *pairs = s->n_v;
    *tile_pairs = (int64_t)s->n_slots * (s->n_nodes - s->gemm_first);
    *stride = s->S;
    return FMK_OK;
}

extern "C" const fmk_engine fmk_engine_fmm_cuda = {
    "fmm/cuda", fmm_setup, fmm_eval, fmm_memory, NULL, fmm_release, fmm_check_opts,
};
