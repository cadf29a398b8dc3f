/* resident.cu -- the treecode's solve with omega and the results on the GPU (treecode.h,
 * fmk_poisson_solve_device): the check that omega's support is the uploaded sources', the
 * sources' weights gathered on the GPU (and copied to the host for the CPU's multipoles while
 * the direct part runs), and the results scaled in place, never leaving the GPU. */
#include "poisson/treecode/cuda/treecode_cuda.h"


static unsigned grid_for(int64_t n)
{
    const int64_t blocks = (n + 255) / 256;
    return (unsigned)(blocks < 1 ? 1 : blocks > 8192 ? 8192 : blocks);
}

static __device__ __forceinline__ bool nonzero(const double *om, int nc, int64_t p)
{
    bool nz = false;
    for (int a = 0; a < nc; a++)
        nz |= om[(int64_t)nc * p + a] != 0;
    return nz;
}

/* count[0] += points where omega is nonzero, count[1] += sources whose point is */
__global__ void k_support(const double *__restrict__ om, int nc, int64_t n_points,
                          const int64_t *__restrict__ point, int64_t n_src,
                          unsigned long long *count)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t top = n_points > n_src ? n_points : n_src;
    unsigned long long c0 = 0, c1 = 0;
    for (int64_t i0 = blockIdx.x * (int64_t)blockDim.x; i0 < top; i0 += stride) {
        const int64_t i = i0 + threadIdx.x;
        c0 += __syncthreads_count(i < n_points && nonzero(om, nc, i));
        c1 += __syncthreads_count(i < n_src && nonzero(om, nc, point[i]));
    }
    if (threadIdx.x == 0) {
        atomicAdd(count, c0);
        atomicAdd(count + 1, c1);
    }
}

fmk_status fmk_tc_gpu_support_same(fmk_poisson *s, struct fmk_tc_gpu *g, int nc,
                                   const double *d_omega, int *same)
{
    *same = 0;
    TRY(cudaSetDevice(g->device), "cudaSetDevice");
    if (!g->d_count)
        TRY(cudaMalloc((void **)&g->d_count, 2 * sizeof(unsigned long long)), "a counter");
    TRY(cudaMemsetAsync(g->d_count, 0, 2 * sizeof(unsigned long long), g->stream), "a counter");
    k_support<<<grid_for(g->args.n_points), 256, 0, g->stream>>>(
        d_omega, nc, g->args.n_points, g->d_point, g->n_src, g->d_count);
    TRY(cudaGetLastError(), "the support's check");
    unsigned long long c[2];
    TRY(cudaMemcpyAsync(c, g->d_count, sizeof c, cudaMemcpyDeviceToHost, g->stream),
        "the support's check");
    TRY(cudaStreamSynchronize(g->stream), "the support's check");
    *same = c[0] == (unsigned long long)g->n_src && c[1] == (unsigned long long)g->n_src;
    return FMK_OK;
}

/* w[a n + j] = omega_a(point j) volume_j (treecode/sources.c's product), and the direct part's
 * packed copies of them (positions unchanged) */
template <typename V4, typename V2>
__global__ void k_weights(const double *__restrict__ om, int nc, int64_t n,
                          const int64_t *__restrict__ point, const double *__restrict__ volume,
                          double *w, V4 *xyzw, V2 *w12)
{
    typedef decltype(xyzw->w) R;
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x) {
        const double *o = om + (int64_t)nc * point[j];
        const double v = volume[j];
        const double w0 = o[0] * v;
        w[j] = w0;
        xyzw[j].w = (R)w0;
        if (nc == 3) {
            const double w1 = o[1] * v, w2 = o[2] * v;
            w[n + j] = w1, w[2 * n + j] = w2;
            V2 ww;
            ww.x = (R)w1, ww.y = (R)w2;
            w12[j] = ww;
        }
    }
}

fmk_status fmk_tc_gpu_weights(fmk_poisson *s, struct fmk_tc_gpu *g, int nc, const double *d_omega)
{
    TRY(cudaSetDevice(g->device), "cudaSetDevice");
    const int64_t n = g->n_src;
    if (n > g->resident_cap) {
        cudaFree(g->d_w);
        cudaFreeHost(g->h_w);
        g->d_w = NULL, g->h_w = NULL, g->resident_cap = 0;
        TRY(cudaMalloc((void **)&g->d_w, sizeof(double) * 3 * (size_t)n), "the weights");
        TRY(cudaMallocHost((void **)&g->h_w, sizeof(double) * 3 * (size_t)n), "pinned memory");
        g->resident_cap = n;
        g->bytes += (int64_t)sizeof(double) * 3 * n;
    }
    g->far = 0;
    TRY(cudaEventRecord(g->ev[4], g->stream), "an event");
    if (g->fp32)
        k_weights<<<grid_for(n), 256, 0, g->stream>>>(d_omega, nc, n, g->d_point, g->d_volume,
                                                      g->d_w, g->f_xyzw, g->f_w12);
    else
        k_weights<<<grid_for(n), 256, 0, g->stream>>>(d_omega, nc, n, g->d_point, g->d_volume,
                                                      g->d_w, g->d_xyzw, g->d_w12);
    TRY(cudaGetLastError(), "the weights' gather");
    return FMK_OK;
}

fmk_status fmk_tc_gpu_host_weights(fmk_poisson *s, struct fmk_tc_gpu *g, const double **w)
{
    *w = NULL;
    TRY(cudaSetDevice(g->device), "cudaSetDevice");
    /* after the gather, beside the direct part (ev[0] is its start, after the gather) */
    TRY(cudaStreamWaitEvent(g->stream2, g->ev[0], 0), "an event");
    TRY(cudaMemcpyAsync(g->h_w, g->d_w, sizeof(double) * (size_t)(g->nc * g->n_src),
                        cudaMemcpyDeviceToHost, g->stream2),
        "the weights' download");
    TRY(cudaStreamSynchronize(g->stream2), "the weights' download");
    *w = g->h_w;
    return FMK_OK;
}

__global__ void k_scale(double *v, int64_t n, double a)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        v[i] *= a;
}

fmk_status fmk_tc_gpu_finish(fmk_poisson *s, struct fmk_tc_gpu *g, double scale_psi,
                             double scale_u, double kernel_seconds[4], const double **d_psi,
                             const double **d_u)
{
    *d_psi = *d_u = NULL;
    TRY(cudaSetDevice(g->device), "cudaSetDevice");
    const int64_t np = g->args.n_points;
    cudaStream_t last = g->far ? g->stream2 : g->stream;
    if (g->far) /* after the direct part too */
        TRY(cudaStreamWaitEvent(last, g->ev[1], 0), "an event");
    if (g->want_pot)
        k_scale<<<grid_for(g->nc * np), 256, 0, last>>>(g->pot, g->nc * np, scale_psi);
    if (g->want_u)
        k_scale<<<grid_for(3 * np), 256, 0, last>>>(g->u, 3 * np, scale_u);
    TRY(cudaGetLastError(), "the results' scaling");
    TRY(cudaEventRecord(g->ev[5], last), "an event");
    fmk_status st = fmk_tc_gpu_wait(s, g, last);
    if (st != FMK_OK)
        return st;
    fmk_tc_gpu_times(g, kernel_seconds);
    *d_psi = g->want_pot ? g->pot : NULL;
    *d_u = g->want_u ? g->u : NULL;
    return FMK_OK;
}

fmk_status fmk_tc_gpu_zero(fmk_poisson *s, struct fmk_tc_gpu *g, int nc, int want_psi, int want_u,
                           const double **d_psi, const double **d_u)
{
    *d_psi = *d_u = NULL;
    TRY(cudaSetDevice(g->device), "cudaSetDevice");
    const int64_t np = g->args.n_points;
    if (np > g->n_points) { /* eval.cu's sizes: 3 values per point each */
        cudaFree(g->pot);
        cudaFree(g->u);
        cudaFreeHost(g->h_out);
        g->pot = g->u = g->h_out = NULL;
        g->n_points = 0;
        TRY(cudaMalloc((void **)&g->pot, sizeof(double) * 3 * (size_t)np), "the results");
        TRY(cudaMalloc((void **)&g->u, sizeof(double) * 3 * (size_t)np), "the results");
        TRY(cudaMallocHost((void **)&g->h_out, sizeof(double) * 6 * (size_t)np), "pinned memory");
        g->n_points = np;
        g->bytes += (int64_t)sizeof(double) * 6 * np;
    }
    if (want_psi)
        TRY(cudaMemsetAsync(g->pot, 0, sizeof(double) * (size_t)(nc * np), g->stream), "memset");
    if (want_u)
        TRY(cudaMemsetAsync(g->u, 0, sizeof(double) * 3 * (size_t)np, g->stream), "memset");
    TRY(cudaStreamSynchronize(g->stream), "memset");
    *d_psi = want_psi ? g->pot : NULL;
    *d_u = want_u ? g->u : NULL;
    return FMK_OK;
}
