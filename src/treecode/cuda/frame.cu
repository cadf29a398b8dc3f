/*
 * frame.cu -- the points' box, frame and mapping on the device for set_points_device, without
 * a host wait for the box: small sets by one thread-block cluster (k_frame_small), larger ones
 * by a grid of blocks (k_frame_grid, k_map_frame); then the build (build.cu), whose one wait is
 * the frame kernels' too, and the host's check of the frame from the same box.
 */
#include <math.h>
#include <string.h>

#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>

#include "treecode/cuda/bh_cuda.h"

namespace {

/* ---------------------------------------------------------------------------------------- */
/* Packing                                                                                  */

/* Caller points -> mapped doubles: x' = 1.5 + (x - center) * inv, as plan.c maps host points
 * (inv is a power of two, so the product is exact and the two agree bit for bit). */
__device__ __forceinline__ double map_coord(double x, double c, double inv)
{
    return __dadd_rn(1.5, __dmul_rn(__dadd_rn(x, -c), inv));
}

__global__ void k_map(int64_t n, const double *__restrict__ x, double cx, double cy, double cz,
                      double inv, double *__restrict__ out)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    out[3 * i] = map_coord(x[3 * i], cx, inv);
    out[3 * i + 1] = map_coord(x[3 * i + 1], cy, inv);
    out[3 * i + 2] = map_coord(x[3 * i + 2], cz, inv);
}

/* Bounding box, frame and mapping of a small set (ns sources, nt targets; at most a few tens
 * of thousands) in one launch, without the host: the box of the finite points as
 * fmk_cuda_bounding_box reduces it, the frame as fmk_plan_frame_from_box makes it from the
 * box but without the softening (width: the power of two at least the largest extent, 1 for
 * a single point), and the points mapped as k_map does. The host computes the frame from the
 * same box after its wait and redoes the mapping if the softening made it wider. With a
 * non-finite point the mapped values are meaningless (the tree is built from them all the same,
 * boundedly) and the host reports the point. The launch is a thread-block cluster of
 * tune.frame_cluster blocks (one block alone is
 * latency-bound): each block reduces its share of the points, reads the others' boxes from their
 * shared memory (the union is the same in every block: min, max and the first bad index do
 * not depend on the order), and maps its share. */
constexpr int FRAME_BLOCK = 1024, FRAME_ILP = 4, FRAME_CLUSTER_MAX = 8;
struct frame_box_union {
    __device__ fmk_bh_frame_box operator()(const fmk_bh_frame_box &a,
                                           const fmk_bh_frame_box &b) const
    {
        fmk_bh_frame_box r;
        for (int k = 0; k < 3; k++)
            r.lo[k] = fmin(a.lo[k], b.lo[k]), r.hi[k] = fmax(a.hi[k], b.hi[k]);
        r.bad = a.bad < b.bad ? a.bad : b.bad;
        return r;
    }
};

/* Points i0 + u stride (u < FRAME_ILP) of the sources then the targets into p (zeros past
 * the last), all loads issued before any is used. */
__device__ __forceinline__ void frame_points(int64_t ns, const double *__restrict__ s, int64_t nt,
                                             const double *__restrict__ t, int64_t i0,
                                             int64_t stride, double (&p)[FRAME_ILP][3])
{
#pragma unroll
    for (int u = 0; u < FRAME_ILP; u++) {
        const int64_t i = i0 + u * stride;
        for (int k = 0; k < 3; k++)
            p[u][k] = 0.0;
        if (i < ns)
            p[u][0] = s[3 * i], p[u][1] = s[3 * i + 1], p[u][2] = s[3 * i + 2];
        else if (i < ns + nt)
            p[u][0] = t[3 * (i - ns)], p[u][1] = t[3 * (i - ns) + 1], p[u][2] = t[3 * (i - ns) + 2];
    }
}

/* The box of points first, first + stride, ... of the sources then the targets (the set's
 * points first + u stride, FRAME_ILP of them in flight per thread: few warps hide the loads). */
__device__ fmk_bh_frame_box frame_share(int64_t ns, const double *__restrict__ s, int64_t nt,
                                        const double *__restrict__ t, int64_t first, int64_t stride)
{
    const int64_t n = ns + nt;
    fmk_bh_frame_box b;
    for (int k = 0; k < 3; k++)
        b.lo[k] = INFINITY, b.hi[k] = -INFINITY;
    b.bad = LLONG_MAX;
    for (int64_t i0 = first; i0 < n; i0 += stride * FRAME_ILP) {
        double p[FRAME_ILP][3];
        frame_points(ns, s, nt, t, i0, stride, p);
#pragma unroll
        for (int u = 0; u < FRAME_ILP; u++) {
            const int64_t i = i0 + u * stride;
            if (i >= n)
                continue;
            if (isfinite(p[u][0]) && isfinite(p[u][1]) && isfinite(p[u][2])) {
                for (int k = 0; k < 3; k++)
                    b.lo[k] = fmin(b.lo[k], p[u][k]), b.hi[k] = fmax(b.hi[k], p[u][k]);
            } else {
                b.bad = b.bad < i ? b.bad : i;
            }
        }
    }
    return b;
}

/* The frame of the set's box b as fmk_plan_frame_from_box makes it without the softening:
 * f = (centre, 1 / width), width the power of two at least the largest extent (1 for a single
 * point or none); h (when not NULL): the box, the frame and the first non-finite point. */
__device__ void frame_of_box(const fmk_bh_frame_box &b, double f[4], fmk_bh_frame_out *h)
{
    double extent = 0;
    for (int k = 0; k < 3; k++) {
        double l = b.lo[k], u = b.hi[k];
        if (h)
            h->lo[k] = l, h->hi[k] = u;
        if (l > u) /* no finite point */
            l = u = 0;
        f[k] = 0.5 * l + 0.5 * u;
        if (h)
            h->center[k] = f[k];
        extent = fmax(extent, u - l);
    }
    const double size = extent > 0 ? extent : 1;
    int ex;
    const double m = frexp(size, &ex); /* size = m 2^ex, m in [0.5, 1) */
    const double width = ldexp(1.0, m == 0.5 ? ex - 1 : ex);
    f[3] = 1.0 / width;
    if (h)
        h->width = width, h->bad = b.bad == LLONG_MAX ? -1 : b.bad;
}

__global__ void __launch_bounds__(FRAME_BLOCK)
    k_frame_small(int64_t ns, const double *__restrict__ s, int64_t nt,
                  const double *__restrict__ t, double *__restrict__ out, fmk_bh_frame_out *h)
{
    typedef cub::BlockReduce<fmk_bh_frame_box, FRAME_BLOCK> reduce_t;
    __shared__ typename reduce_t::TempStorage temp;
    __shared__ fmk_bh_frame_box s_box;
    __shared__ double s_frame[4];
#if __CUDA_ARCH__ >= 900
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    const unsigned blocks = cluster.num_blocks(), rank = cluster.block_rank();
#define FRAME_SYNC() cluster.sync()
#define FRAME_BOX(r) (*cluster.map_shared_rank(&s_box, r))
#else /* no clusters: one block (frame_launch) */
    const unsigned blocks = 1, rank = 0;
#define FRAME_SYNC() __syncthreads()
#define FRAME_BOX(r) s_box
#endif
    const int64_t n = ns + nt, stride = (int64_t)blocks * FRAME_BLOCK;
    const int64_t first = (int64_t)rank * FRAME_BLOCK + threadIdx.x;
    fmk_bh_frame_box b = frame_share(ns, s, nt, t, first, stride);
    b = reduce_t(temp).Reduce(b, frame_box_union());
    if (threadIdx.x == 0)
        s_box = b;
    FRAME_SYNC(); /* every block's box is in its shared memory */
    if (threadIdx.x == 0) {
        b = FRAME_BOX(0);
        for (unsigned r = 1; r < blocks; r++)
            b = frame_box_union()(b, FRAME_BOX(r));
        frame_of_box(b, s_frame, rank == 0 ? h : NULL);
    }
    FRAME_SYNC(); /* the boxes are read (a block's shared memory ends with it), the frame set */
#undef FRAME_SYNC
#undef FRAME_BOX
    const double cx = s_frame[0], cy = s_frame[1], cz = s_frame[2], inv = s_frame[3];
    for (int64_t i0 = first; i0 < n; i0 += stride * FRAME_ILP) {
        double p[FRAME_ILP][3];
        frame_points(ns, s, nt, t, i0, stride, p);
#pragma unroll
        for (int u = 0; u < FRAME_ILP; u++) {
            const int64_t i = i0 + u * stride;
            if (i < n) {
                out[3 * i] = map_coord(p[u][0], cx, inv);
                out[3 * i + 1] = map_coord(p[u][1], cy, inv);
                out[3 * i + 2] = map_coord(p[u][2], cz, inv);
            }
        }
    }
}

/* Launches k_frame_small as a cluster of `cluster` blocks (tune.frame_cluster; one block on
 * GPUs without clusters, before compute capability 9.0). */
cudaError_t frame_launch(int device, int cluster, int64_t ns, const double *d_s, int64_t nt,
                         const double *d_t, double *d_x, fmk_bh_frame_out *h)
{
    int blocks = cluster, major = 0;
    blocks = blocks < 1 ? 1 : blocks > FRAME_CLUSTER_MAX ? FRAME_CLUSTER_MAX : blocks;
    cudaError_t err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (err != cudaSuccess)
        return err;
    if (major < 9 || blocks == 1) {
        k_frame_small<<<1, FRAME_BLOCK>>>(ns, d_s, nt, d_t, d_x, h);
        return cudaGetLastError();
    }
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)blocks;
    attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)blocks), cfg.blockDim = dim3(FRAME_BLOCK);
    cfg.attrs = attr, cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, k_frame_small, ns, d_s, nt, d_t, d_x, h);
}

/* The frame of larger sets without a host wait: k_frame_grid's blocks each reduce their share
 * of the points and store its box in part[block]; the last block to finish (by the counter,
 * which it sets back to 0) takes the union of the parts, makes the frame as k_frame_small
 * does, and writes it to ws->frame (centre, 1 / width) and to the pinned fmk_bh_frame_out. The union
 * of boxes and the first bad index do not depend on the order, so the box is CUB's
 * reduction's (fmk_cuda_bounding_box) bit for bit. k_map_frame then maps the points with
 * ws->frame. */
constexpr int GRID_FRAME_BLOCK = 256, GRID_FRAME_MAX = FMK_BH_GRID_FRAME_MAX;

__global__ void __launch_bounds__(GRID_FRAME_BLOCK)
    k_frame_grid(int64_t ns, const double *__restrict__ s, int64_t nt, const double *__restrict__ t,
                 fmk_bh_frame_grid_ws *ws, fmk_bh_frame_out *h)
{
    typedef cub::BlockReduce<fmk_bh_frame_box, GRID_FRAME_BLOCK> reduce_t;
    __shared__ typename reduce_t::TempStorage temp;
    __shared__ bool last;
    const int64_t stride = (int64_t)gridDim.x * GRID_FRAME_BLOCK;
    fmk_bh_frame_box b =
        frame_share(ns, s, nt, t, (int64_t)blockIdx.x * GRID_FRAME_BLOCK + threadIdx.x, stride);
    b = reduce_t(temp).Reduce(b, frame_box_union());
    if (threadIdx.x == 0) {
        ws->part[blockIdx.x] = b;
        __threadfence(); /* the part before the count */
        last = atomicAdd(&ws->count, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    fmk_bh_frame_box u;
    for (int k = 0; k < 3; k++)
        u.lo[k] = INFINITY, u.hi[k] = -INFINITY;
    u.bad = LLONG_MAX;
    for (unsigned j = threadIdx.x; j < gridDim.x; j += GRID_FRAME_BLOCK) {
        const fmk_bh_frame_box *q = &ws->part[j];
        fmk_bh_frame_box v; /* from L2: the other blocks' stores */
        for (int k = 0; k < 3; k++)
            v.lo[k] = __ldcg(&q->lo[k]), v.hi[k] = __ldcg(&q->hi[k]);
        v.bad = __ldcg(&q->bad);
        u = frame_box_union()(u, v);
    }
    __syncthreads(); /* temp is reused */
    u = reduce_t(temp).Reduce(u, frame_box_union());
    if (threadIdx.x == 0) {
        double f[4];
        frame_of_box(u, f, h);
        for (int k = 0; k < 4; k++)
            ws->frame[k] = f[k];
        ws->count = 0;
    }
}

__global__ void k_map_frame(int64_t ns, const double *__restrict__ s, int64_t nt,
                            const double *__restrict__ t, const double *__restrict__ f,
                            double *__restrict__ out)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= ns + nt)
        return;
    const double *x = i < ns ? s + 3 * i : t + 3 * (i - ns);
    const double cx = __ldg(f), cy = __ldg(f + 1), cz = __ldg(f + 2), inv = __ldg(f + 3);
    out[3 * i] = map_coord(x[0], cx, inv);
    out[3 * i + 1] = map_coord(x[1], cy, inv);
    out[3 * i + 2] = map_coord(x[2], cz, inv);
}

/* Queues the frame of ns + nt points by k_frame_grid (its counter cleared first) and their
 * mapping. */
cudaError_t frame_grid_launch(int64_t ns, const double *d_s, int64_t nt, const double *d_t,
                              double *d_x, fmk_bh_frame_grid_ws *ws, fmk_bh_frame_out *h)
{
    const int64_t n = ns + nt, per = (int64_t)GRID_FRAME_BLOCK * FRAME_ILP;
    const int64_t want = (n + per - 1) / per;
    const unsigned blocks =
        (unsigned)(want < GRID_FRAME_MAX ? (want > 0 ? want : 1) : GRID_FRAME_MAX);
    cudaError_t err = cudaMemsetAsync(&ws->count, 0, sizeof ws->count);
    if (err != cudaSuccess)
        return err;
    k_frame_grid<<<blocks, GRID_FRAME_BLOCK>>>(ns, d_s, nt, d_t, ws, h);
    if (n > 0)
        k_map_frame<<<fmk_bh_blocks(n), FMK_BH_BLOCK>>>(ns, d_s, nt, d_t, ws->frame, d_x);
    return cudaGetLastError();
}

/* The frame on the device and the build: small sets by one cluster of blocks (k_frame_small),
 * larger ones by a grid (k_frame_grid, k_map_frame). lo, hi, *bad: the set's box and first
 * non-finite point as the kernels found them; *width, *center: the frame the points were
 * mapped with (the host checks it against its own frame from the box). */
fmk_status frame_device(fmk_plan *plan, fmk_bh_state *s, int small, int64_t ns, const double *d_s,
                        int64_t nt, const double *d_t, double *d_x, double lo[3], double hi[3],
                        int64_t *bad, double center[3], double *width)
{
    fmk_status st = FMK_OK;
    if (small)
        st = fmk_bh_ok(plan,
                       frame_launch(s->device, fmk_bh_tune(plan)->frame_cluster, ns, d_s, nt, d_t,
                                    d_x, s->dh_frame),
                       "the frame kernel (a cluster of blocks)");
    else if ((st = fmk_bh_need(plan, s, &s->bbox, sizeof(fmk_bh_frame_grid_ws),
                               "the frame's workspace")) == FMK_OK)
        st = fmk_bh_ok(plan,
                       frame_grid_launch(ns, d_s, nt, d_t, d_x, (fmk_bh_frame_grid_ws *)s->bbox.p,
                                         s->dh_frame),
                       "the frame kernels");
    if (st == FMK_OK) /* its one wait is the frame kernels' too */
        st = fmk_bh_build(plan, s, ns, d_x, nt, d_x + 3 * ns, fmk_bh_tune(plan)->async);
    if (st != FMK_OK)
        return st;
    const fmk_bh_frame_out *f = s->h_frame;
    for (int k = 0; k < 3; k++)
        lo[k] = f->lo[k], hi[k] = f->hi[k], center[k] = f->center[k];
    *width = f->width;
    *bad = f->bad;
    return FMK_OK;
}

} // namespace

fmk_status fmk_bh_points_device(fmk_plan *plan, fmk_bh_state *s, int64_t ns, const double *d_s,
                                int64_t nt, const double *d_t)
{
    const int self = d_t == NULL;
    if (self)
        nt = 0;
    plan->self = self;
    /* The mapped points' buffer first: a size the GPU cannot hold fails before any read. */
    const size_t xbytes = (size_t)(ns + nt) * 24;
    fmk_status st = fmk_bh_need(plan, s, &s->x, xbytes, "the mapped points");
    double *d_x = (double *)s->x.p;
    double lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0}, center[3] = {0, 0, 0}, width = 0;
    int64_t bad = -1;
    /* built: the points were mapped and built before the host saw their box (small sets by
     * one cluster of blocks, larger ones by a grid of blocks) */
    const int small = ns > 0 && ns + nt <= fmk_bh_tune(plan)->frame_small_max;
    const int grid = ns > 0 && !small && fmk_bh_tune(plan)->frame_grid;
    const int built = small || grid;
    if (st == FMK_OK && built)
        st = frame_device(plan, s, small, ns, d_s, nt, d_t, d_x, lo, hi, &bad, center, &width);
    if (st == FMK_OK && !built) {
        size_t temp_bytes = 0, box_off = 0;
        st = fmk_bh_ok(
            plan, fmk_cuda_bounding_box(3, ns, d_s, nt, d_t, NULL, &temp_bytes, NULL, lo, hi, &bad),
            "cub::DeviceReduce (workspace query)");
        if (st == FMK_OK) {
            box_off = (temp_bytes + 255) / 256 * 256;
            st = fmk_bh_need(plan, s, &s->bbox, box_off + fmk_cuda_box_bytes(),
                             "the bounding-box workspace");
        }
        if (st == FMK_OK)
            st = fmk_bh_ok(plan,
                           fmk_cuda_bounding_box(3, ns, d_s, nt, d_t, s->bbox.p, &temp_bytes,
                                                 (char *)s->bbox.p + box_off, lo, hi, &bad),
                           "cub::DeviceReduce (bounding box)");
    }
    if (st == FMK_OK && bad >= 0)
        st = fmk_cuda_bad_point(plan, bad, ns, d_s, d_t);
    fmk_frame frame;
    if (st == FMK_OK)
        st = fmk_plan_frame_from_box(plan, lo, hi, &frame);
    int redo = !built;
    if (st == FMK_OK && built &&
        (frame.width != width || frame.center[0] != center[0] || frame.center[1] != center[1] ||
         frame.center[2] != center[2])) {
        redo = 1; /* the softening made the frame wider than the points' box */
        fmk_bh_counters(plan)->frame_redos++;
    }
    if (st == FMK_OK)
        plan->frame = frame;
    if (st == FMK_OK && redo) {
        const double inv = 1.0 / frame.width;
        if (ns > 0)
            k_map<<<fmk_bh_blocks(ns), FMK_BH_BLOCK>>>(ns, d_s, frame.center[0], frame.center[1],
                                                       frame.center[2], inv, d_x);
        if (nt > 0)
            k_map<<<fmk_bh_blocks(nt), FMK_BH_BLOCK>>>(nt, d_t, frame.center[0], frame.center[1],
                                                       frame.center[2], inv, d_x + 3 * ns);
        st = fmk_bh_ok(plan, cudaGetLastError(), "the point mapping kernel");
        if (st == FMK_OK && ns > 0)
            st = fmk_bh_build(plan, s, ns, d_x, nt, d_x + 3 * ns, fmk_bh_tune(plan)->async);
    }
    if (st == FMK_OK && ns > 0) /* the frame is the points' now (the trees may predate it) */
        st = fmk_bh_check_resolution(plan, s, ns, d_x, self ? 0 : nt, d_x + 3 * ns);
    if (st != FMK_OK)
        return st;
    plan->n_sources = ns;
    plan->n_targets = self ? ns : nt;
    plan->has_points = 1;
    return FMK_OK;
}
