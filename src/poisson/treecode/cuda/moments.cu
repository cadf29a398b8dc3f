/* moments.cu -- the treecode's multipoles on the GPU (all-GPU solves): every node's multipoles
 * summed straight from its sources (a node's sources are one range of the Morton order), with
 * no M2M: a source adds to each of its ancestors, about ten times the work of P2M at the leaves
 * alone, which the GPU does in about a millisecond for a million sources at p = 8, beside the
 * direct part. The sum is fmm3d_ops.c's P2M, M_n^m = sum_j w_j conj(R_n^m((x_j - c) / s)), on
 * its recursion tables.
 *
 * A node's sources are cut into work items of at most TC_MOM_CHUNK; a block per item, its
 * threads a column m of the harmonics each (P + 1 columns) over one of L = 128 / (P + 1) slices
 * of a shared tile of sources, summing in registers; the slices are added in a fixed order,
 * each item's sums stored, and a second kernel adds a node's items in order. No atomics: the
 * multipoles are the same bits at every run. */
#include <string.h>

#include "poisson/treecode/cuda/treecode_cuda.h"

#define TC_MOM_THREADS 128
#define TC_MOM_CHUNK 2048
#define MOM_IDX(n, m) ((n) * ((n) + 1) / 2 + (m))

template <int P, int NC>
__global__ void __launch_bounds__(TC_MOM_THREADS)
    k_moments(const int32_t *__restrict__ item_node, const int64_t *__restrict__ item_range,
              const real4d *__restrict__ node, const double *__restrict__ xs, int64_t n_src,
              const double *__restrict__ w, tabs tb, double *partial)
{
    constexpr int C = P + 1, L = TC_MOM_THREADS / C, S = (P + 1) * (P + 2);
    constexpr int NCOEF = (P + 1) * (P + 2) / 2;
    __shared__ double s_x[TC_MOM_THREADS], s_y[TC_MOM_THREADS], s_z[TC_MOM_THREADS];
    __shared__ double s_w[NC][TC_MOM_THREADS];
    __shared__ double s_a[NCOEF], s_b[NCOEF], s_d[P + 1];
    __shared__ double s_sum[NC * S];
    for (int i = threadIdx.x; i < NCOEF; i += TC_MOM_THREADS)
        s_a[i] = tb.rec_a[i], s_b[i] = tb.rec_b[i];
    for (int i = threadIdx.x; i <= P; i += TC_MOM_THREADS)
        s_d[i] = tb.rec_diag[i];
    for (int i = threadIdx.x; i < NC * S; i += TC_MOM_THREADS)
        s_sum[i] = 0;
    const int item = blockIdx.x;
    const real4d c = node[item_node[item]];
    const double inv_s = 1 / c.w;
    const int64_t j0 = item_range[2 * item], j1 = item_range[2 * item + 1];
    const int m = threadIdx.x % C, l = threadIdx.x / C;
    double ar[NC][P + 1], ai[NC][P + 1];
#pragma unroll
    for (int a = 0; a < NC; a++)
#pragma unroll
        for (int n = 0; n <= P; n++)
            ar[a][n] = ai[a][n] = 0;
    for (int64_t t0 = j0; t0 < j1; t0 += TC_MOM_THREADS) {
        const int nt = (int)(j1 - t0 < TC_MOM_THREADS ? j1 - t0 : TC_MOM_THREADS);
        __syncthreads();
        if (threadIdx.x < nt) {
            const int64_t j = t0 + threadIdx.x;
            s_x[threadIdx.x] = (xs[j] - c.x) * inv_s;
            s_y[threadIdx.x] = (xs[n_src + j] - c.y) * inv_s;
            s_z[threadIdx.x] = (xs[2 * n_src + j] - c.z) * inv_s;
#pragma unroll
            for (int a = 0; a < NC; a++)
                s_w[a][threadIdx.x] = w[a * n_src + j];
        }
        __syncthreads();
        if (l >= L)
            continue;
        for (int k = l; k < nt; k += L) {
            const double ux = s_x[k], uy = s_y[k], uz = s_z[k];
            const double r2 = ux * ux + uy * uy + uz * uz;
            double dr = 1, di = 0; /* R_m^m */
            for (int mm = 1; mm <= m; mm++) {
                const double f = -s_d[mm];
                const double nr = f * (ux * dr - uy * di), ni = f * (ux * di + uy * dr);
                dr = nr, di = ni;
            }
            double pr = 0, pi = 0, qr = dr, qi = di; /* R_{n-1}^m, R_n^m */
#pragma unroll
            for (int n = 0; n <= P; n++) {
                if (n < m)
                    continue;
                if (n > m) {
                    const double A = s_a[MOM_IDX(n, m)] * uz;
                    const double B = n > m + 1 ? s_b[MOM_IDX(n, m)] * r2 : 0.0;
                    const double sr = A * qr - B * pr, si = A * qi - B * pi;
                    pr = qr, pi = qi, qr = sr, qi = si;
                }
#pragma unroll
                for (int a = 0; a < NC; a++) {
                    ar[a][n] += s_w[a][k] * qr;
                    ai[a][n] -= s_w[a][k] * qi; /* conj */
                }
            }
        }
    }
    /* the slices' sums, in slice order */
    for (int sl = 0; sl < L; sl++) {
        __syncthreads();
        if (l == sl)
#pragma unroll
            for (int n = 0; n <= P; n++)
                if (n >= m)
#pragma unroll
                    for (int a = 0; a < NC; a++) {
                        s_sum[a * S + 2 * MOM_IDX(n, m)] += ar[a][n];
                        s_sum[a * S + 2 * MOM_IDX(n, m) + 1] += ai[a][n];
                    }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < NC * S; i += TC_MOM_THREADS)
        partial[(int64_t)item * NC * S + i] = s_sum[i];
}

/* node blockIdx.x's multipoles: its items' sums in order */
__global__ void k_moments_sum(const int64_t *__restrict__ item_first,
                              const double *__restrict__ partial, int len, double *multipole)
{
    const int64_t k = blockIdx.x, i0 = item_first[k], i1 = item_first[k + 1];
    for (int i = threadIdx.x; i < len; i += blockDim.x) {
        double v = 0;
        for (int64_t it = i0; it < i1; it++)
            v += partial[it * len + i];
        multipole[k * len + i] = v;
    }
}

typedef void (*moments_kernel)(const int32_t *, const int64_t *, const real4d *, const double *,
                               int64_t, const double *, tabs, double *);

template <int P> static moments_kernel pick(int nc)
{
    return nc == 1 ? k_moments<P, 1> : k_moments<P, 3>;
}

static moments_kernel kernel_for(int p, int nc)
{
    static moments_kernel (*const by_order[TC_FAST_ORDER_MAX + 1])(int) = {
        pick<0>,  pick<1>,  pick<2>,  pick<3>,  pick<4>,  pick<5>,  pick<6>,  pick<7>, pick<8>,
        pick<9>,  pick<10>, pick<11>, pick<12>, pick<13>, pick<14>, pick<15>, pick<16>};
    return p >= 0 && p <= TC_FAST_ORDER_MAX ? by_order[p](nc) : NULL;
}


fmk_status fmk_tc_gpu_moment_items(fmk_poisson *s, struct fmk_tc_gpu *g, const fmk_tc_tree *t)
{
    cudaFree(g->item_node), cudaFree(g->item_range), cudaFree(g->item_first);
    g->item_node = NULL, g->item_range = NULL, g->item_first = NULL, g->n_items = 0;
    int64_t n_items = 0;
    for (int64_t k = 0; k < t->n_nodes; k++)
        n_items += (t->end[k] - t->begin[k] + TC_MOM_CHUNK - 1) / TC_MOM_CHUNK;
    int32_t *node = (int32_t *)malloc(sizeof(int32_t) * (size_t)(n_items > 0 ? n_items : 1));
    int64_t *range = (int64_t *)malloc(sizeof(int64_t) * 2 * (size_t)(n_items > 0 ? n_items : 1));
    int64_t *first = (int64_t *)malloc(sizeof(int64_t) * (size_t)(t->n_nodes + 1));
    if (!node || !range || !first) {
        free(node), free(range), free(first);
        return fmk_solver_fail(s, FMK_ERR_NOMEM, "method treecode: out of host memory");
    }
    int64_t it = 0;
    for (int64_t k = 0; k < t->n_nodes; k++) {
        first[k] = it;
        for (int64_t j = t->begin[k]; j < t->end[k]; j += TC_MOM_CHUNK, it++) {
            node[it] = (int32_t)k;
            range[2 * it] = j;
            range[2 * it + 1] = t->end[k] - j < TC_MOM_CHUNK ? t->end[k] : j + TC_MOM_CHUNK;
        }
    }
    first[t->n_nodes] = it;
    cudaError_t e = cudaMalloc((void **)&g->item_node, sizeof(int32_t) * (size_t)(it > 0 ? it : 1));
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&g->item_range, sizeof(int64_t) * 2 * (size_t)(it > 0 ? it : 1));
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&g->item_first, sizeof(int64_t) * (size_t)(t->n_nodes + 1));
    if (e == cudaSuccess)
        e = cudaMemcpy(g->item_node, node, sizeof(int32_t) * (size_t)it, cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemcpy(g->item_range, range, sizeof(int64_t) * 2 * (size_t)it,
                       cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemcpy(g->item_first, first, sizeof(int64_t) * (size_t)(t->n_nodes + 1),
                       cudaMemcpyHostToDevice);
    free(node), free(range), free(first);
    if (e != cudaSuccess)
        return fmk_tc_cuda_fail(s, e, "the multipoles' work items");
    g->n_items = it;
    g->bytes += (int64_t)(sizeof(int32_t) + 2 * sizeof(int64_t)) * it +
                (int64_t)sizeof(int64_t) * (t->n_nodes + 1);
    return FMK_OK;
}

fmk_status fmk_tc_gpu_moments(fmk_poisson *s, struct fmk_tc_gpu *g, const double *w)
{
    const moments_kernel kern = kernel_for(g->order, g->nc);
    if (!kern)
        return fmk_solver_fail(s, FMK_ERR_INTERNAL,
                               "method treecode on the GPU: no multipole kernel of order %d",
                               g->order);
    cudaError_t e = cudaSetDevice(g->device);
    const int len = g->nc * (g->order + 1) * (g->order + 2);
    const int64_t need_m = g->n_nodes * len, need_p = g->n_items * len;
    if (e == cudaSuccess && need_m > g->multipole_len) {
        cudaStreamSynchronize(g->stream2);
        cudaFree(g->multipole);
        g->multipole = NULL, g->multipole_len = 0;
        e = cudaMalloc((void **)&g->multipole, sizeof(double) * (size_t)need_m);
        if (e == cudaSuccess)
            g->multipole_len = need_m, g->bytes += (int64_t)sizeof(double) * need_m;
    }
    if (e == cudaSuccess && need_p > g->partial_len) {
        cudaStreamSynchronize(g->stream2);
        cudaFree(g->partial);
        g->partial = NULL, g->partial_len = 0;
        e = cudaMalloc((void **)&g->partial, sizeof(double) * (size_t)need_p);
        if (e == cudaSuccess)
            g->partial_len = need_p, g->bytes += (int64_t)sizeof(double) * need_p;
    }
    if (e != cudaSuccess)
        return fmk_tc_cuda_fail(s, e, "the multipoles' arrays");
    /* after the weights (gathered or uploaded before the direct part's start), beside it */
    e = cudaStreamWaitEvent(g->stream2, g->ev[0], 0);
    if (e == cudaSuccess)
        e = cudaEventRecord(g->ev[6], g->stream2);
    if (e == cudaSuccess && g->n_items > 0) {
        kern<<<(unsigned)g->n_items, TC_MOM_THREADS, 0, g->stream2>>>(
            g->item_node, g->item_range, g->node, g->d_stage, g->n_src,
            w ? w : g->d_stage + 3 * g->n_src, g->tb, g->partial);
        k_moments_sum<<<(unsigned)g->n_nodes, 128, 0, g->stream2>>>(g->item_first, g->partial, len,
                                                                     g->multipole);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaEventRecord(g->ev[7], g->stream2);
    if (e != cudaSuccess)
        return fmk_tc_cuda_fail(s, e, "the multipoles' kernels");
    g->moments_ready = 1;
    return FMK_OK;
}

int fmk_tc_gpu_moments_order_ok(int order)
{
    return order >= 0 && order <= TC_FAST_ORDER_MAX;
}

fmk_status fmk_tc_gpu_moments_launch(fmk_poisson *s, struct fmk_tc_gpu *g, int resident)
{
    return fmk_tc_gpu_moments(s, g, resident ? g->d_w : NULL);
}
