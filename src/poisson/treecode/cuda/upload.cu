/* upload.cu -- the treecode's plans, tree and sources sent to the GPU (treecode.h,
 * fmk_tc_gpu_upload): the plans in the order of their bricks' direct work, the tree's centres
 * and scales, the multipoles' work items (moments.cu), and every solve's sources through pinned
 * memory, packed for the direct part in its precision. */
#include <string.h>

#include "poisson/treecode/cuda/treecode_cuda.h"

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

/* Device arrays are freed and made again at their new sizes (bytes kept in g->bytes). */
cudaError_t fmk_tc_dev_array(struct fmk_tc_gpu *g, void **p, size_t bytes)
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
    cudaError_t e = fmk_tc_dev_array(g, (void **)&g->bricks, sizeof(fmk_tc_brick) * (size_t)nb);
    if (e == cudaSuccess)
        e = fmk_tc_dev_array(g, (void **)&g->direct_start, sizeof(int64_t) * (size_t)(nb + 1));
    if (e == cudaSuccess)
        e = fmk_tc_dev_array(g, (void **)&g->direct_range, sizeof(int64_t) * 2 * (size_t)nd);
    if (e == cudaSuccess)
        e = fmk_tc_dev_array(g, (void **)&g->far_start, sizeof(int64_t) * (size_t)(nb + 1));
    if (e == cudaSuccess)
        e = fmk_tc_dev_array(g, (void **)&g->far_node, sizeof(int32_t) * (size_t)nf);
    if (e == cudaSuccess)
        e = fmk_tc_dev_array(g, (void **)&g->node, sizeof(real4d) * (size_t)tree->n_nodes);
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
        TRY(fmk_tc_dev_array(g, (void **)&g->d_stage, sizeof(double) * 6 * (size_t)n), "the sources");
        g->stage_cap = n;
    }
    if (fp32 && n > g->cap32) {
        TRY(fmk_tc_dev_array(g, (void **)&g->f_xyzw, sizeof(float4) * (size_t)n), "the sources");
        TRY(fmk_tc_dev_array(g, (void **)&g->f_w12, sizeof(float2) * (size_t)n), "the sources");
        g->cap32 = n;
    }
    if (!fp32 && n > g->cap64) {
        TRY(fmk_tc_dev_array(g, (void **)&g->d_xyzw, sizeof(real4d) * (size_t)n), "the sources");
        TRY(fmk_tc_dev_array(g, (void **)&g->d_w12, sizeof(double2) * (size_t)n), "the sources");
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
    if (plans_changed && src->point && src->volume) { /* the field indices and volumes of the
                                                        * sources, for resident.cu */
        TRY(fmk_tc_dev_array(g, (void **)&g->d_point, sizeof(int64_t) * (size_t)(n > 0 ? n : 1)),
            "the sources");
        TRY(fmk_tc_dev_array(g, (void **)&g->d_volume, sizeof(double) * (size_t)(n > 0 ? n : 1)),
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
        TRY(fmk_tc_dev_array(g, (void **)&g->pot, sizeof(double) * 3 * (size_t)np), "the results");
        TRY(fmk_tc_dev_array(g, (void **)&g->u, sizeof(double) * 3 * (size_t)np), "the results");
        cudaFreeHost(g->h_out);
        g->h_out = NULL;
        TRY(cudaMallocHost((void **)&g->h_out, sizeof(double) * 6 * (size_t)np), "pinned memory");
        g->n_points = np;
    }
    return FMK_OK;
}
