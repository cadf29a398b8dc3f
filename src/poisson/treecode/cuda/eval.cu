/* eval.cu -- the treecode's logical plans on the GPU (treecode.h): the direct part, and
 * unless the solve is hybrid the far part, of every destination brick.
 *
 * Direct part (paper section 4, "Hybrid CPU/GPU evaluation"): a CUDA block per brick, each
 * thread PTS of the brick's up to 512 points; the brick's source ranges are one stream of
 * sources, read through shared memory in tiles of TILE sources (a range list chunk and its
 * prefix sums in shared memory tell a loading thread where its source lies). Coordinates are
 * taken relative to the brick's first point, where grid units (multiples of 1/2 below 2^22)
 * are exact in fp32; in fp32 each tile's sums are kept in fp32 and added to fp64 totals, so
 * the rounding of a point's sum grows with the tile (TILE terms), not with all its sources.
 * fp32 is used for eps >= 1e-4 when every coordinate is below 2^21 grid units (docs/poisson.md:
 * a term's relative error is below 1e-6 and a tile's sum's below 1e-5 of its sum |w G| at
 * worst, typically 1e-6), fp64 otherwise.
 *
 * Far part: a block per brick, each far node's multipoles (all components) in shared memory,
 * each thread the irregular harmonics of its points about the node once for all components
 * (fmm3d/cuda/harmonics.cuh: the GPU FMM's M2P sums), in fp64.
 *
 * Outputs per field point in grid units: pot (nc per point) and u (3 per point). The direct
 * kernel stores every point of every brick (zeros included), the far kernel adds after it on
 * the same stream. */
#include <string.h>
#include <time.h>

#include <cub/block/block_scan.cuh>

#include "fmm3d/cuda/harmonics.cuh"
#include "poisson/treecode/cuda/treecode_cuda.h"
#include "poisson/treecode/treecode.h"



static fmk_status cuda_fail(fmk_poisson *s, cudaError_t err, const char *what)
{
    const fmk_status st = err == cudaErrorMemoryAllocation ? FMK_ERR_DEVICE_NOMEM : FMK_ERR_DEVICE;
    cudaGetLastError(); /* clear a sticky-free error */
    return fmk_solver_fail(s, st, "method treecode on the GPU: %s: %s", what,
                           cudaGetErrorString(err));
}

#define TRY(call, what)                                                                       \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess)                                                                \
            return cuda_fail(s, e_, what);                                                    \
    } while (0)

/* ----------------------------------------------------------------------------------------------
 * Kernels
 * -------------------------------------------------------------------------------------------- */

static __host__ __device__ __forceinline__ real4d real4d_make(double x, double y, double z, double w)
{
    real4d v;
    v.x = x, v.y = y, v.z = z, v.w = w;
    return v;
}

__global__ void k_pack32(int64_t n, const double *__restrict__ h, float4 *xyzw, float2 *w12,
                         int nc)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x) {
        xyzw[j] = make_float4((float)h[j], (float)h[n + j], (float)h[2 * n + j], (float)h[3 * n + j]);
        w12[j] = nc == 3 ? make_float2((float)h[4 * n + j], (float)h[5 * n + j]) : make_float2(0, 0);
    }
}

__global__ void k_pack64(int64_t n, const double *__restrict__ h, real4d *xyzw, double2 *w12,
                         int nc)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x) {
        xyzw[j] = real4d_make(h[j], h[n + j], h[2 * n + j], h[3 * n + j]);
        w12[j] = nc == 3 ? make_double2(h[4 * n + j], h[5 * n + j]) : make_double2(0, 0);
    }
}

template <typename R> struct vec;
template <> struct vec<float> {
    typedef float4 v4;
    typedef float2 v2;
    static __device__ __forceinline__ float rsq(float x) { return rsqrtf(x); }
};
template <> struct vec<double> {
    typedef real4d v4;
    typedef double2 v2;
    static __device__ __forceinline__ double rsq(double x) { return rsqrt(x); }
};

/* The direct part of brick blockIdx.x (+ base). NC components, U: the velocity too. */
template <typename R, int NC, bool U>
__global__ void __launch_bounds__(TC_DIRECT_THREADS)
    k_direct(int64_t base, const fmk_tc_brick *__restrict__ bricks,
             const int64_t *__restrict__ dstart, const int64_t *__restrict__ drange,
             const typename vec<R>::v4 *__restrict__ xyzw,
             const typename vec<R>::v2 *__restrict__ w12, R e2, R e05, R e15, double *pot,
             double *u)
{
    typedef typename vec<R>::v4 V4;
    typedef typename vec<R>::v2 V2;
    typedef cub::BlockScan<int64_t, TC_DIRECT_THREADS> Scan;
    __shared__ typename Scan::TempStorage scan_tmp;
    __shared__ int64_t r_begin[TC_DIRECT_THREADS], r_pre[TC_DIRECT_THREADS + 1];
    __shared__ V4 s_xyzw[TC_DIRECT_THREADS];
    __shared__ V2 s_w12[NC == 3 ? TC_DIRECT_THREADS : 1];

    const int64_t bi = base + blockIdx.x;
    const fmk_tc_brick b = bricks[bi];
    const int np = b.n[0] * b.n[1] * b.n[2];
    R px[TC_DIRECT_PTS], py[TC_DIRECT_PTS], pz[TC_DIRECT_PTS];
    double acc[TC_DIRECT_PTS][NC], accu[TC_DIRECT_PTS][3];
#pragma unroll
    for (int k = 0; k < TC_DIRECT_PTS; k++) {
        const int q = threadIdx.x + k * TC_DIRECT_THREADS;
        const int qq = q < np ? q : 0;
        px[k] = (R)(b.h * (qq % b.n[0]));
        py[k] = (R)(b.h * (qq / b.n[0] % b.n[1]));
        pz[k] = (R)(b.h * (qq / (b.n[0] * b.n[1])));
#pragma unroll
        for (int a = 0; a < NC; a++)
            acc[k][a] = 0;
#pragma unroll
        for (int a = 0; a < 3; a++)
            accu[k][a] = 0;
    }
    const R cx = (R)b.corner[0], cy = (R)b.corner[1], cz = (R)b.corner[2];
    const int64_t r0 = dstart[bi], r1 = dstart[bi + 1];
    for (int64_t rc = r0; rc < r1; rc += TC_DIRECT_THREADS) {
        const int nr = (int)(r1 - rc < TC_DIRECT_THREADS ? r1 - rc : TC_DIRECT_THREADS);
        int64_t len = 0;
        if (threadIdx.x < nr) {
            r_begin[threadIdx.x] = drange[2 * (rc + threadIdx.x)];
            len = drange[2 * (rc + threadIdx.x) + 1] - r_begin[threadIdx.x];
        }
        int64_t pre, total;
        Scan(scan_tmp).ExclusiveSum(len, pre, total);
        if (threadIdx.x < nr)
            r_pre[threadIdx.x] = pre;
        if (threadIdx.x == 0)
            r_pre[nr] = total;
        __syncthreads();
        for (int64_t t0 = 0; t0 < total; t0 += TC_DIRECT_THREADS) {
            const int64_t k = t0 + threadIdx.x;
            if (k < total) {
                int lo = 0, hi = nr - 1; /* the last range whose prefix is <= k */
                while (lo < hi) {
                    const int mid = (lo + hi + 1) >> 1;
                    if (r_pre[mid] <= k)
                        lo = mid;
                    else
                        hi = mid - 1;
                }
                const int64_t j = r_begin[lo] + (k - r_pre[lo]);
                V4 v = xyzw[j];
                v.x -= cx, v.y -= cy, v.z -= cz;
                s_xyzw[threadIdx.x] = v;
                if (NC == 3)
                    s_w12[threadIdx.x] = w12[j];
            } else {
                V4 v;
                v.x = v.y = v.z = v.w = 0;
                s_xyzw[threadIdx.x] = v;
                if (NC == 3) {
                    V2 w;
                    w.x = w.y = 0;
                    s_w12[threadIdx.x] = w;
                }
            }
            __syncthreads();
            const int nt = (int)(total - t0 < TC_DIRECT_THREADS ? total - t0 : TC_DIRECT_THREADS);
            R part[TC_DIRECT_PTS][NC], partu[TC_DIRECT_PTS][3];
#pragma unroll
            for (int k2 = 0; k2 < TC_DIRECT_PTS; k2++) {
#pragma unroll
                for (int a = 0; a < NC; a++)
                    part[k2][a] = 0;
#pragma unroll
                for (int a = 0; a < 3; a++)
                    partu[k2][a] = 0;
            }
#pragma unroll 4
            for (int j = 0; j < nt; j++) {
                const V4 sv = s_xyzw[j];
                R w1 = 0, w2 = 0;
                if (NC == 3) {
                    const V2 ww = s_w12[j];
                    w1 = ww.x, w2 = ww.y;
                }
#pragma unroll
                for (int k2 = 0; k2 < TC_DIRECT_PTS; k2++) {
                    /* d = r^2 + e^2; G = (r^2 + 1.5 e^2) / d^1.5 = 1/sqrt(d) + (e^2/2) / d^1.5:
                     * 12 fp32 instructions and 1 rsqrt per pair for 3 components */
                    const R dx = px[k2] - sv.x, dy = py[k2] - sv.y, dz = pz[k2] - sv.z;
                    const R d = e2 + dx * dx + dy * dy + dz * dz;
                    const R rinv = vec<R>::rsq(d);
                    const R dinv = rinv * rinv, t = rinv * dinv;
                    const R G = e05 * t + rinv;
                    part[k2][0] += sv.w * G;
                    if (NC == 3) {
                        part[k2][1 % NC] += w1 * G;
                        part[k2][2 % NC] += w2 * G;
                    }
                    if (U) {
                        /* grad_y G = -g (y - x), g = (r^2 + 2.5 e^2) / d^2.5
                         * = (1 + 1.5 e^2 / d) / d^1.5; u += grad G x w = -g ((y - x) x w) */
                        const R g = t * (e15 * dinv + (R)1);
                        partu[k2][0] -= g * (dy * w2 - dz * w1);
                        partu[k2][1] -= g * (dz * sv.w - dx * w2);
                        partu[k2][2] -= g * (dx * w1 - dy * sv.w);
                    }
                }
            }
#pragma unroll
            for (int k2 = 0; k2 < TC_DIRECT_PTS; k2++) {
#pragma unroll
                for (int a = 0; a < NC; a++)
                    acc[k2][a] += (double)part[k2][a];
#pragma unroll
                for (int a = 0; a < 3; a++)
                    accu[k2][a] += (double)partu[k2][a];
            }
            __syncthreads();
        }
    }
#pragma unroll
    for (int k = 0; k < TC_DIRECT_PTS; k++) {
        const int q = threadIdx.x + k * TC_DIRECT_THREADS;
        if (q >= np)
            continue;
        const int64_t p = b.first + q % b.n[0] + b.stride[0] * (q / b.n[0] % b.n[1]) +
                          b.stride[1] * (q / (b.n[0] * b.n[1]));
        if (pot)
#pragma unroll
            for (int a = 0; a < NC; a++)
                pot[NC * p + a] = acc[k][a];
        if (U)
#pragma unroll
            for (int a = 0; a < 3; a++)
                u[3 * p + a] = accu[k][a];
    }
}

/* The far part of brick blockIdx.x (+ base): adds into pot and u. */
template <int NC>
__global__ void __launch_bounds__(TC_THREADS)
    k_far(int64_t base, const fmk_tc_brick *__restrict__ bricks, const int64_t *__restrict__ fstart,
          const int32_t *__restrict__ fnode, const real4d *__restrict__ node,
          const double *__restrict__ multipole, int p, tabs tb, const double *__restrict__ sq,
          double *pot, double *u)
{
    extern __shared__ double s_m[]; /* NC expansions of (p + 1)(p + 2) doubles */
    const int64_t bi = base + blockIdx.x;
    const fmk_tc_brick b = bricks[bi];
    const int np = b.n[0] * b.n[1] * b.n[2];
    const int S = (p + 1) * (p + 2);
    double H[(TC_ORDER_MAX + 2) * (TC_ORDER_MAX + 3)];
    double acc[TC_PTS][NC], grad[TC_PTS][NC][3];
#pragma unroll
    for (int k = 0; k < TC_PTS; k++)
#pragma unroll
        for (int a = 0; a < NC; a++)
            acc[k][a] = grad[k][a][0] = grad[k][a][1] = grad[k][a][2] = 0;
    const bool want_u = u != NULL;
    for (int64_t e = fstart[bi]; e < fstart[bi + 1]; e++) {
        const int nd = fnode[e];
        for (int i = threadIdx.x; i < NC * S; i += TC_THREADS)
            s_m[i] = multipole[(int64_t)nd * NC * S + i];
        const real4d c = node[nd];
        __syncthreads();
        const double inv_s = 1 / c.w, g2 = inv_s * inv_s;
#pragma unroll
        for (int k = 0; k < TC_PTS; k++) {
            const int q = threadIdx.x + k * TC_THREADS;
            if (q >= np)
                continue;
            const double x = b.corner[0] + b.h * (q % b.n[0]),
                         y = b.corner[1] + b.h * (q / b.n[0] % b.n[1]),
                         z = b.corner[2] + b.h * (q / (b.n[0] * b.n[1]));
            irregular(tb, p + 1, (x - c.x) * inv_s, (y - c.y) * inv_s, (z - c.z) * inv_s, H);
#pragma unroll
            for (int a = 0; a < NC; a++) {
                double phi, gr, gi, gzz;
                m2p_sums(p, sq, s_m + a * S, H, &phi, &gr, &gi, &gzz);
                acc[k][a] += phi * inv_s;
                grad[k][a][0] += -gr * g2;
                grad[k][a][1] += gi * g2;
                grad[k][a][2] += gzz * g2;
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int k = 0; k < TC_PTS; k++) {
        const int q = threadIdx.x + k * TC_THREADS;
        if (q >= np)
            continue;
        const int64_t pt = b.first + q % b.n[0] + b.stride[0] * (q / b.n[0] % b.n[1]) +
                           b.stride[1] * (q / (b.n[0] * b.n[1]));
        if (pot)
#pragma unroll
            for (int a = 0; a < NC; a++)
                pot[NC * pt + a] += acc[k][a];
        if (want_u && NC == 3) {
            /* u = curl Psi: u_a = d_b Psi_c - d_c Psi_b, (a, b, c) cyclic */
#pragma unroll
            for (int a = 0; a < 3; a++) {
                const int bb = (a + 1) % 3, cc = (a + 2) % 3;
                u[3 * pt + a] += grad[k][cc % NC][bb] - grad[k][bb % NC][cc];
            }
        }
    }
}

/* ----------------------------------------------------------------------------------------------
 * Host side
 * -------------------------------------------------------------------------------------------- */

fmk_status fmk_tc_gpu_create(fmk_poisson *s, const fmk_tc_gpu_args *args, struct fmk_tc_gpu **out)
{
    *out = NULL;
    struct fmk_tc_gpu *g = (struct fmk_tc_gpu *)calloc(1, sizeof *g);
    if (!g)
        return fmk_solver_fail(s, FMK_ERR_NOMEM, "method treecode: out of host memory");
    g->args = *args;
    g->device = args->device;
    cudaError_t e = cudaSetDevice(g->device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&g->stream2, cudaStreamNonBlocking);
    for (int k = 0; k < 8 && e == cudaSuccess; k++)
        e = cudaEventCreate(&g->ev[k]);
    if (e != cudaSuccess) {
        fmk_tc_gpu_release(g);
        return cuda_fail(s, e, "the stream");
    }
    *out = g;
    return FMK_OK;
}

void fmk_tc_gpu_results(const struct fmk_tc_gpu *g, const double **pot, const double **u)
{
    *pot = g->want_pot ? g->h_out : NULL;
    *u = g->want_u ? g->h_out + 3 * g->args.n_points : NULL;
}

int64_t fmk_tc_gpu_bytes(const struct fmk_tc_gpu *g)
{
    return g ? g->bytes : 0;
}

void fmk_tc_gpu_release(struct fmk_tc_gpu *g)
{
    if (!g)
        return;
    cudaSetDevice(g->device);
    if (g->stream)
        cudaStreamSynchronize(g->stream);
    if (g->stream2)
        cudaStreamSynchronize(g->stream2);
    void *dev[] = {g->f_xyzw, g->f_w12, g->d_xyzw, g->d_w12, g->d_stage, g->bricks, g->direct_start,
                   g->direct_range, g->far_start, g->far_node, g->node, g->multipole,
                   g->tabs_mem, g->pot, g->u, g->d_point, g->d_volume, g->d_w, g->d_count,
                   g->item_node, g->item_range, g->item_first, g->partial};
    for (size_t k = 0; k < sizeof dev / sizeof dev[0]; k++)
        cudaFree(dev[k]);
    cudaFreeHost(g->h_src);
    cudaFreeHost(g->h_out);
    cudaFreeHost(g->h_w);
    for (int k = 0; k < 8; k++)
        if (g->ev[k])
            cudaEventDestroy(g->ev[k]);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    if (g->stream2)
        cudaStreamDestroy(g->stream2);
    free(g);
}

/* Device arrays are freed and made again at their new sizes (bytes kept in g->bytes). */
static cudaError_t dev_array(struct fmk_tc_gpu *g, void **p, size_t bytes)
{
    cudaFree(*p);
    *p = NULL;
    cudaError_t e = cudaMalloc(p, bytes > 0 ? bytes : 1);
    if (e == cudaSuccess)
        g->bytes += (int64_t)bytes;
    return e;
}

/* The bricks in the order of their direct part's work, the largest first, so that the last
 * blocks of a launch are short (the work per brick varies by orders of magnitude between the
 * support's inside and the grid's far corners). */
typedef struct brick_work {
    double work;
    int64_t brick;
} brick_work;

static int by_work(const void *a, const void *b)
{
    const brick_work *x = (const brick_work *)a, *y = (const brick_work *)b;
    return x->work > y->work ? -1 : x->work < y->work ? 1 : (x->brick > y->brick) - (x->brick < y->brick);
}

/* The plans in that order, in host arrays (freed by the caller). */
static int plans_by_work(const fmk_tc_plans *pl, fmk_tc_plans *out)
{
    const int64_t nb = pl->n_bricks, nd = pl->direct_start[nb], nf = pl->far_start[nb];
    brick_work *w = (brick_work *)malloc(sizeof(brick_work) * (size_t)(nb > 0 ? nb : 1));
    out->bricks = (fmk_tc_brick *)malloc(sizeof(fmk_tc_brick) * (size_t)(nb > 0 ? nb : 1));
    out->direct_start = (int64_t *)malloc(sizeof(int64_t) * (size_t)(nb + 1));
    out->direct_range = (int64_t *)malloc(sizeof(int64_t) * 2 * (size_t)(nd > 0 ? nd : 1));
    out->far_start = (int64_t *)malloc(sizeof(int64_t) * (size_t)(nb + 1));
    out->far_node = (int32_t *)malloc(sizeof(int32_t) * (size_t)(nf > 0 ? nf : 1));
    if (!w || !out->bricks || !out->direct_start || !out->direct_range || !out->far_start ||
        !out->far_node) {
        free(w);
        return 1;
    }
    for (int64_t b = 0; b < nb; b++) {
        double src = 0;
        for (int64_t r = pl->direct_start[b]; r < pl->direct_start[b + 1]; r++)
            src += (double)(pl->direct_range[2 * r + 1] - pl->direct_range[2 * r]);
        w[b].work = src * pl->bricks[b].n[0] * pl->bricks[b].n[1] * pl->bricks[b].n[2];
        w[b].brick = b;
    }
    qsort(w, (size_t)nb, sizeof *w, by_work);
    out->direct_start[0] = out->far_start[0] = 0;
    for (int64_t k = 0; k < nb; k++) {
        const int64_t b = w[k].brick;
        out->bricks[k] = pl->bricks[b];
        const int64_t d0 = pl->direct_start[b], dn = pl->direct_start[b + 1] - d0;
        memcpy(out->direct_range + 2 * out->direct_start[k], pl->direct_range + 2 * d0,
               sizeof(int64_t) * 2 * (size_t)dn);
        out->direct_start[k + 1] = out->direct_start[k] + dn;
        const int64_t f0 = pl->far_start[b], fn = pl->far_start[b + 1] - f0;
        memcpy(out->far_node + out->far_start[k], pl->far_node + f0, sizeof(int32_t) * (size_t)fn);
        out->far_start[k + 1] = out->far_start[k] + fn;
    }
    free(w);
    return 0;
}

static void plans_free_host(fmk_tc_plans *p)
{
    free(p->bricks), free(p->direct_start), free(p->direct_range), free(p->far_start),
        free(p->far_node);
}

static fmk_status upload_plans(fmk_poisson *s, struct fmk_tc_gpu *g, const fmk_tc_tree *tree,
                               const fmk_tc_plans *given)
{
    g->bytes = 0;
    fmk_tc_plans sorted;
    memset(&sorted, 0, sizeof sorted);
    if (plans_by_work(given, &sorted)) {
        plans_free_host(&sorted);
        return fmk_solver_fail(s, FMK_ERR_NOMEM, "method treecode: out of host memory");
    }
    const fmk_tc_plans *pl = &sorted;
    const int64_t nb = given->n_bricks, nd = given->direct_start[nb], nf = given->far_start[nb];
    g->n_bricks = nb, g->n_direct = nd, g->n_far = nf, g->n_nodes = tree->n_nodes;
    cudaError_t e = dev_array(g, (void **)&g->bricks, sizeof(fmk_tc_brick) * (size_t)nb);
    if (e == cudaSuccess)
        e = dev_array(g, (void **)&g->direct_start, sizeof(int64_t) * (size_t)(nb + 1));
    if (e == cudaSuccess)
        e = dev_array(g, (void **)&g->direct_range, sizeof(int64_t) * 2 * (size_t)nd);
    if (e == cudaSuccess)
        e = dev_array(g, (void **)&g->far_start, sizeof(int64_t) * (size_t)(nb + 1));
    if (e == cudaSuccess)
        e = dev_array(g, (void **)&g->far_node, sizeof(int32_t) * (size_t)nf);
    if (e == cudaSuccess)
        e = dev_array(g, (void **)&g->node, sizeof(real4d) * (size_t)tree->n_nodes);
    /* synchronous copies: the host arrays are freed below */
    if (e == cudaSuccess)
        e = cudaMemcpy(g->bricks, pl->bricks, sizeof(fmk_tc_brick) * (size_t)nb,
                       cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemcpy(g->direct_start, pl->direct_start, sizeof(int64_t) * (size_t)(nb + 1),
                       cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemcpy(g->direct_range, pl->direct_range, sizeof(int64_t) * 2 * (size_t)nd,
                       cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemcpy(g->far_start, pl->far_start, sizeof(int64_t) * (size_t)(nb + 1),
                       cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemcpy(g->far_node, pl->far_node, sizeof(int32_t) * (size_t)nf,
                       cudaMemcpyHostToDevice);
    plans_free_host(&sorted);
    TRY(e, "the plans' upload");
    real4d *h = (real4d *)malloc(sizeof(real4d) * (size_t)(tree->n_nodes > 0 ? tree->n_nodes : 1));
    if (!h)
        return fmk_solver_fail(s, FMK_ERR_NOMEM, "method treecode: out of host memory");
    for (int64_t k = 0; k < tree->n_nodes; k++)
        h[k] = real4d_make(tree->center[3 * k], tree->center[3 * k + 1], tree->center[3 * k + 2],
                            tree->scale[k]);
    e = cudaMemcpy(g->node, h, sizeof(real4d) * (size_t)tree->n_nodes, cudaMemcpyHostToDevice);
    free(h);
    TRY(e, "the tree's upload");
    g->partial_len = 0; /* made again at its new size (dev_array's count restarted) */
    cudaFree(g->partial);
    g->partial = NULL;
    fmk_status st = fmk_tc_gpu_moment_items(s, g, tree);
    if (st != FMK_OK)
        return st;
    /* the harmonics' tables of the order */
    if (g->order != tree->order || !g->tabs_mem) {
        fmk_fmm3d_ops_ctx ctx;
        if (fmk_fmm3d_ops_create(&ctx, tree->order) != FMK_OK)
            return fmk_solver_fail(s, FMK_ERR_NOMEM, "method treecode: out of host memory");
        const int p = tree->order, deg = 2 * p + 1;
        const int64_t nh = fmk_fmm3d_ncoef(deg), len = 2 * nh + (deg + 1) + (2 * p + 5);
        cudaFree(g->tabs_mem);
        g->tabs_mem = NULL;
        e = cudaMalloc((void **)&g->tabs_mem, sizeof(double) * (size_t)len);
        if (e == cudaSuccess) {
            double *d = g->tabs_mem;
            cudaMemcpy(d, ctx.rec_a, sizeof(double) * (size_t)nh, cudaMemcpyHostToDevice);
            cudaMemcpy(d + nh, ctx.rec_b, sizeof(double) * (size_t)nh, cudaMemcpyHostToDevice);
            cudaMemcpy(d + 2 * nh, ctx.rec_diag, sizeof(double) * (size_t)(deg + 1),
                       cudaMemcpyHostToDevice);
            e = cudaMemcpy(d + 2 * nh + deg + 1, ctx.sqrt_int, sizeof(double) * (size_t)(2 * p + 5),
                           cudaMemcpyHostToDevice);
            g->tb.rec_a = d, g->tb.rec_b = d + nh, g->tb.rec_diag = d + 2 * nh;
            g->tb.sqrt_int = g->sq = d + 2 * nh + deg + 1;
            g->order = p;
        }
        fmk_fmm3d_ops_destroy(&ctx);
        TRY(e, "the harmonics' tables");
    }
    return FMK_OK;
}

fmk_status fmk_tc_gpu_upload(fmk_poisson *s, struct fmk_tc_gpu *g, const fmk_tc_sources *src,
                             const fmk_tc_tree *tree, const fmk_tc_plans *plans, int plans_changed)
{
    TRY(cudaSetDevice(g->device), "cudaSetDevice");
    g->far = 0;
    const int nc = src->nc;
    if (plans_changed || !g->bricks || g->nc != nc) {
        fmk_status st = upload_plans(s, g, tree, plans);
        if (st != FMK_OK)
            return st;
        /* the other arrays again (g->bytes restarted with the plans') */
        void **old[] = {(void **)&g->f_xyzw, (void **)&g->f_w12, (void **)&g->d_xyzw,
                        (void **)&g->d_w12, (void **)&g->d_stage, (void **)&g->multipole,
                        (void **)&g->pot, (void **)&g->u, (void **)&g->d_point,
                        (void **)&g->d_volume, (void **)&g->d_w};
        for (size_t k = 0; k < sizeof old / sizeof old[0]; k++) {
            cudaFree(*old[k]);
            *old[k] = NULL;
        }
        g->cap32 = g->cap64 = g->stage_cap = g->multipole_len = g->n_points = 0;
        g->resident_cap = 0;
        plans_changed = 1;
    }
    g->nc = nc;
    const int64_t n = src->n;
    g->n_src = n;
    /* fp32 needs coordinates exact in fp32 (multiples of 1/2 below 2^21) */
    double top = 0;
    for (int64_t j = 0; j < n; j++) {
        const double m = fmax(fabs(src->x[j]), fmax(fabs(src->y[j]), fabs(src->z[j])));
        top = m > top ? m : top;
    }
    const int fp32 = g->args.eps >= 1e-4 && top < 2097152.0;
    g->fp32 = fp32;
    if (6 * n > g->h_src_cap) {
        cudaFreeHost(g->h_src);
        g->h_src = NULL;
        g->h_src_cap = 0;
        TRY(cudaMallocHost((void **)&g->h_src, sizeof(double) * 6 * (size_t)n), "pinned memory");
        g->h_src_cap = 6 * n;
    }
    if (n > g->stage_cap) {
        TRY(dev_array(g, (void **)&g->d_stage, sizeof(double) * 6 * (size_t)n), "the sources");
        g->stage_cap = n;
    }
    if (fp32 && n > g->cap32) {
        TRY(dev_array(g, (void **)&g->f_xyzw, sizeof(float4) * (size_t)n), "the sources");
        TRY(dev_array(g, (void **)&g->f_w12, sizeof(float2) * (size_t)n), "the sources");
        g->cap32 = n;
    }
    if (!fp32 && n > g->cap64) {
        TRY(dev_array(g, (void **)&g->d_xyzw, sizeof(real4d) * (size_t)n), "the sources");
        TRY(dev_array(g, (void **)&g->d_w12, sizeof(double2) * (size_t)n), "the sources");
        g->cap64 = n;
    }
    double *h = g->h_src;
    memcpy(h, src->x, sizeof(double) * (size_t)n);
    memcpy(h + n, src->y, sizeof(double) * (size_t)n);
    memcpy(h + 2 * n, src->z, sizeof(double) * (size_t)n);
    memcpy(h + 3 * n, src->w, sizeof(double) * (size_t)(nc * n));
    TRY(cudaEventRecord(g->ev[4], g->stream), "an event");
    TRY(cudaMemcpyAsync(g->d_stage, h, sizeof(double) * (size_t)((3 + nc) * n),
                        cudaMemcpyHostToDevice, g->stream),
        "the sources' upload");
    const int64_t blocks = (n + 255) / 256;
    const int grid = (int)(blocks < 1 ? 1 : blocks > 4096 ? 4096 : blocks);
    if (fp32)
        k_pack32<<<grid, 256, 0, g->stream>>>(n, g->d_stage, g->f_xyzw, g->f_w12, nc);
    else
        k_pack64<<<grid, 256, 0, g->stream>>>(n, g->d_stage, g->d_xyzw, g->d_w12, nc);
    TRY(cudaGetLastError(), "the sources' packing");
    if (plans_changed) { /* the sources' field indices and volumes, for resident.cu */
        TRY(dev_array(g, (void **)&g->d_point, sizeof(int64_t) * (size_t)(n > 0 ? n : 1)),
            "the sources");
        TRY(dev_array(g, (void **)&g->d_volume, sizeof(double) * (size_t)(n > 0 ? n : 1)),
            "the sources");
        TRY(cudaMemcpyAsync(g->d_point, src->point, sizeof(int64_t) * (size_t)n,
                            cudaMemcpyHostToDevice, g->stream),
            "the sources' upload");
        TRY(cudaMemcpyAsync(g->d_volume, src->volume, sizeof(double) * (size_t)n,
                            cudaMemcpyHostToDevice, g->stream),
            "the sources' upload");
    }
    const int64_t np = g->args.n_points;
    if (np > g->n_points) {
        TRY(dev_array(g, (void **)&g->pot, sizeof(double) * 3 * (size_t)np), "the results");
        TRY(dev_array(g, (void **)&g->u, sizeof(double) * 3 * (size_t)np), "the results");
        cudaFreeHost(g->h_out);
        g->h_out = NULL;
        TRY(cudaMallocHost((void **)&g->h_out, sizeof(double) * 6 * (size_t)np), "pinned memory");
        g->n_points = np;
    }
    return FMK_OK;
}

/* Bricks per launch: the grid's x dimension is far larger, but a launch of bounded size keeps
 * the queue short for an interrupt. */
#define TC_LAUNCH_BRICKS 65536

template <typename R>
static void launch_direct(struct fmk_tc_gpu *g, R e2, R e05, R e15, int64_t b0, int64_t nb,
                          const void *xyzw, const void *w12)
{
    typedef typename vec<R>::v4 V4;
    typedef typename vec<R>::v2 V2;
    double *pot = g->want_pot ? g->pot : NULL, *u = g->u;
    const V4 *x = (const V4 *)xyzw;
    const V2 *w = (const V2 *)w12;
    const unsigned grid = (unsigned)nb;
    if (g->nc == 1)
        k_direct<R, 1, false><<<grid, TC_DIRECT_THREADS, 0, g->stream>>>(
            b0, g->bricks, g->direct_start, g->direct_range, x, w, e2, e05, e15, pot, u);
    else if (!g->want_u)
        k_direct<R, 3, false><<<grid, TC_DIRECT_THREADS, 0, g->stream>>>(
            b0, g->bricks, g->direct_start, g->direct_range, x, w, e2, e05, e15, pot, u);
    else
        k_direct<R, 3, true><<<grid, TC_DIRECT_THREADS, 0, g->stream>>>(
            b0, g->bricks, g->direct_start, g->direct_range, x, w, e2, e05, e15, pot, u);
}

fmk_status fmk_tc_gpu_launch(fmk_poisson *s, struct fmk_tc_gpu *g, int want_pot, int want_u)
{
    TRY(cudaSetDevice(g->device), "cudaSetDevice");
    g->want_pot = want_pot, g->want_u = want_u;
    g->moments_ready = 0;
    const double e2 = g->args.e * g->args.e;
    TRY(cudaEventRecord(g->ev[0], g->stream), "an event");
    for (int64_t b0 = 0; b0 < g->n_bricks; b0 += TC_LAUNCH_BRICKS) {
        const int64_t nb = g->n_bricks - b0 < TC_LAUNCH_BRICKS ? g->n_bricks - b0 : TC_LAUNCH_BRICKS;
        if (g->fp32)
            launch_direct<float>(g, (float)e2, (float)(0.5 * e2), (float)(1.5 * e2), b0, nb,
                                 g->f_xyzw, g->f_w12);
        else
            launch_direct<double>(g, e2, 0.5 * e2, 1.5 * e2, b0, nb, g->d_xyzw, g->d_w12);
    }
    TRY(cudaGetLastError(), "the direct part's kernels");
    TRY(cudaEventRecord(g->ev[1], g->stream), "an event");
    return FMK_OK;
}

fmk_status fmk_tc_gpu_far(fmk_poisson *s, struct fmk_tc_gpu *g, const fmk_tc_tree *tree)
{
    TRY(cudaSetDevice(g->device), "cudaSetDevice");
    if (tree->order > TC_ORDER_MAX)
        return fmk_solver_fail(s, FMK_ERR_UNAVAILABLE,
                               "method treecode on the GPU: order %d is above %d (opts.order)",
                               tree->order, TC_ORDER_MAX);
    const int64_t len = tree->n_nodes * g->nc * tree->coef;
    if (!g->moments_ready && len > g->multipole_len) {
        /* the direct part may be running: its arrays stay, this one grows */
        TRY(cudaStreamSynchronize(g->stream2), "the far part's stream");
        TRY(dev_array(g, (void **)&g->multipole, sizeof(double) * (size_t)len), "the multipoles");
        g->multipole_len = len;
    }
    /* the CPU's multipoles go up beside the direct part (unless the GPU made them: moments.cu);
     * the far part adds to its results after it */
    if (!g->moments_ready)
        TRY(cudaMemcpyAsync(g->multipole, tree->multipole, sizeof(double) * (size_t)len,
                            cudaMemcpyHostToDevice, g->stream2),
            "the multipoles' upload");
    TRY(cudaStreamWaitEvent(g->stream2, g->ev[1], 0), "an event");
    TRY(cudaEventRecord(g->ev[3], g->stream2), "an event");
    const int S = (g->order + 1) * (g->order + 2);
    const size_t shm = sizeof(double) * (size_t)(g->nc * S);
    double *pot = g->want_pot ? g->pot : NULL, *u = g->want_u ? g->u : NULL;
    const int fast = !g->want_u && g->order <= TC_FAST_ORDER_MAX;
    for (int64_t b0 = 0; b0 < g->n_bricks; b0 += TC_LAUNCH_BRICKS) {
        const unsigned nb = (unsigned)(g->n_bricks - b0 < TC_LAUNCH_BRICKS ? g->n_bricks - b0
                                                                            : TC_LAUNCH_BRICKS);
        if (fast)
            TRY(fmk_tc_far_psi(g->stream2, g->order, g->nc, g->fp32, b0, nb, g->bricks, g->far_start,
                               g->far_node, g->node, g->multipole, pot),
                "the far part's kernels");
        else if (g->nc == 1)
            k_far<1><<<nb, TC_THREADS, shm, g->stream2>>>(b0, g->bricks, g->far_start, g->far_node,
                                                          g->node, g->multipole, g->order, g->tb,
                                                          g->sq, pot, u);
        else
            k_far<3><<<nb, TC_THREADS, shm, g->stream2>>>(b0, g->bricks, g->far_start, g->far_node,
                                                          g->node, g->multipole, g->order, g->tb,
                                                          g->sq, pot, u);
    }
    TRY(cudaGetLastError(), "the far part's kernels");
    TRY(cudaEventRecord(g->ev[2], g->stream2), "an event");
    g->far = 1;
    return FMK_OK;
}

fmk_status fmk_tc_gpu_wait(fmk_poisson *s, struct fmk_tc_gpu *g, cudaStream_t last)
{
    /* polling the solver's stop request; the queued work finishes either way */
    int stop = 0;
    for (;;) {
        cudaError_t q = cudaStreamQuery(last);
        if (q == cudaSuccess)
            q = cudaStreamQuery(g->stream);
        if (q == cudaSuccess)
            break;
        if (q != cudaErrorNotReady)
            return cuda_fail(s, q, "the GPU's part");
        if (!stop && fmk_solver_poll(s))
            stop = 1;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    if (stop)
        return fmk_solver_fail(s, FMK_ERR_INTERRUPTED, "method treecode: interrupted");
    return FMK_OK;
}

void fmk_tc_gpu_times(const struct fmk_tc_gpu *g, double kernel_seconds[4])
{
    float ms_direct = 0, ms_far = 0;
    cudaEventElapsedTime(&ms_direct, g->ev[0], g->ev[1]);
    if (g->far)
        cudaEventElapsedTime(&ms_far, g->ev[3], g->ev[2]);
    float ms_span = 0, ms_down = 0;
    if (g->far)
        cudaEventElapsedTime(&ms_span, g->ev[4], g->ev[5]);
    else { /* the upload and the direct part, then the downloads (the GPU idles between) */
        cudaEventElapsedTime(&ms_span, g->ev[4], g->ev[1]);
        cudaEventElapsedTime(&ms_down, g->ev[3], g->ev[5]);
    }
    ms_span += ms_down;
    float ms_moments = 0;
    if (g->moments_ready)
        cudaEventElapsedTime(&ms_moments, g->ev[6], g->ev[7]);
    kernel_seconds[0] = 1e-3 * ms_direct;
    kernel_seconds[1] = 1e-3 * ms_far;
    kernel_seconds[2] = 1e-3 * ms_span;
    kernel_seconds[3] = 1e-3 * ms_moments;
}

fmk_status fmk_tc_gpu_collect(fmk_poisson *s, struct fmk_tc_gpu *g, double *pot, double *u,
                              double kernel_seconds[4])
{
    TRY(cudaSetDevice(g->device), "cudaSetDevice");
    /* the results come down after the last kernel: on the far part's stream when it ran */
    cudaStream_t last = g->far ? g->stream2 : g->stream;
    const int64_t np = g->args.n_points;
    if (!g->far) /* hybrid: the downloads' start, to leave the wait for the CPU out of the span */
        TRY(cudaEventRecord(g->ev[3], last), "an event");
    if (g->want_pot)
        TRY(cudaMemcpyAsync(g->h_out, g->pot, sizeof(double) * (size_t)(g->nc * np),
                            cudaMemcpyDeviceToHost, last),
            "the results' download");
    if (g->want_u)
        TRY(cudaMemcpyAsync(g->h_out + 3 * np, g->u, sizeof(double) * 3 * (size_t)np,
                            cudaMemcpyDeviceToHost, last),
            "the results' download");
    if (g->far) /* the direct part's stream is done too (the far part waited for it) */
        TRY(cudaEventRecord(g->ev[5], last), "an event");
    else
        TRY(cudaEventRecord(g->ev[5], g->stream), "an event");
    fmk_status st = fmk_tc_gpu_wait(s, g, last);
    if (st != FMK_OK)
        return st;
    if (kernel_seconds)
        fmk_tc_gpu_times(g, kernel_seconds);
    const int64_t nc = g->nc;
    if (pot && g->want_pot) {
        const double *h = g->h_out;
        for (int64_t i = 0; i < nc * np; i++)
            pot[i] += h[i];
    }
    if (u && g->want_u) {
        const double *h = g->h_out + 3 * np;
        for (int64_t i = 0; i < 3 * np; i++)
            u[i] += h[i];
    }
    return FMK_OK;
}
