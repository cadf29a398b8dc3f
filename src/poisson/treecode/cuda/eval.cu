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
 * Outputs per field point in grid units: pot (nc per point) and u (3 per point), zeroed at the
 * start; the direct kernels (stream) and the far kernels (stream2) run side by side and each
 * adds once (atomically) to every point of every brick, so the results are the same bits in
 * whichever order the two adds land. */
#include <string.h>
#include <time.h>

#include <cub/block/block_scan.cuh>

#include "fmm3d/cuda/harmonics.cuh"
#include "poisson/treecode/cuda/treecode_cuda.h"
#include "poisson/treecode/treecode.h"



fmk_status fmk_tc_cuda_fail(fmk_poisson *s, cudaError_t err, const char *what)
{
    const fmk_status st = err == cudaErrorMemoryAllocation ? FMK_ERR_DEVICE_NOMEM : FMK_ERR_DEVICE;
    cudaGetLastError(); /* clear a sticky-free error */
    return fmk_solver_fail(s, st, "method treecode on the GPU: %s: %s", what,
                           cudaGetErrorString(err));
}

/* ----------------------------------------------------------------------------------------------
 * Kernels
 * -------------------------------------------------------------------------------------------- */

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
__global__ void __launch_bounds__(TC_DIRECT_THREADS, TC_DIRECT_MIN_BLOCKS)
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
                atomicAdd(pot + NC * p + a, acc[k][a]);
        if (U)
#pragma unroll
            for (int a = 0; a < 3; a++)
                atomicAdd(u + 3 * p + a, accu[k][a]);
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
                atomicAdd(pot + NC * pt + a, acc[k][a]);
        if (want_u && NC == 3) {
            /* u = curl Psi: u_a = d_b Psi_c - d_c Psi_b, (a, b, c) cyclic */
#pragma unroll
            for (int a = 0; a < 3; a++) {
                const int bb = (a + 1) % 3, cc = (a + 2) % 3;
                atomicAdd(u + 3 * pt + a, grad[k][cc % NC][bb] - grad[k][bb % NC][cc]);
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
        return fmk_tc_cuda_fail(s, e, "the stream");
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
    /* the direct and the far part each add once to every point of their bricks, in either
     * order and at the same time: from zero, the two sums are the same bits either way */
    const int64_t np = g->args.n_points;
    if (want_pot)
        TRY(cudaMemsetAsync(g->pot, 0, sizeof(double) * (size_t)(g->nc * np), g->stream), "memset");
    if (want_u)
        TRY(cudaMemsetAsync(g->u, 0, sizeof(double) * 3 * (size_t)np, g->stream), "memset");
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
        TRY(fmk_tc_dev_array(g, (void **)&g->multipole, sizeof(double) * (size_t)len), "the multipoles");
        g->multipole_len = len;
    }
    /* the CPU's multipoles go up beside the direct part (unless the GPU made them: moments.cu);
     * the far part runs beside it too, once the results are zeroed (ev[0]) */
    if (!g->moments_ready)
        TRY(cudaMemcpyAsync(g->multipole, tree->multipole, sizeof(double) * (size_t)len,
                            cudaMemcpyHostToDevice, g->stream2),
            "the multipoles' upload");
    TRY(cudaStreamWaitEvent(g->stream2, g->ev[0], 0), "an event");
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
            return fmk_tc_cuda_fail(s, q, "the GPU's part");
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
    else /* the direct part too */
        TRY(cudaStreamWaitEvent(last, g->ev[1], 0), "an event");
    if (g->want_pot)
        TRY(cudaMemcpyAsync(g->h_out, g->pot, sizeof(double) * (size_t)(g->nc * np),
                            cudaMemcpyDeviceToHost, last),
            "the results' download");
    if (g->want_u)
        TRY(cudaMemcpyAsync(g->h_out + 3 * np, g->u, sizeof(double) * 3 * (size_t)np,
                            cudaMemcpyDeviceToHost, last),
            "the results' download");
    if (g->far) /* the direct part's stream is done too (waited for above) */
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
