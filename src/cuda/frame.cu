/*
 * frame.cu -- the device frame, one path for every GPU engine: the bounding box and finiteness
 * of points given as device pointers (one CUB reduction), the message for a non-finite point,
 * and the frame made from the box (fmk_plan_frame_from_box, as for host points).
 */
#include <limits.h>
#include <math.h>

#include <cub/device/device_reduce.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "cuda/device.h"

namespace {

/* Bounding box and the first non-finite point, as one CUB reduction over point indices. */
struct box {
    double lo[3], hi[3];
    long long bad;
};

struct box_of_point {
    const double *s, *t;
    long long ns;
    int dim;
    __device__ box operator()(long long i) const
    {
        box b;
        const double *x = i < ns ? s + dim * i : t + dim * (i - ns);
        bool ok = true;
        for (int k = 0; k < 3; k++) {
            double v = k < dim ? x[k] : 0.0;
            ok = ok && isfinite(v);
            b.lo[k] = b.hi[k] = v;
        }
        b.bad = ok ? LLONG_MAX : i;
        if (!ok)
            for (int k = 0; k < 3; k++)
                b.lo[k] = INFINITY, b.hi[k] = -INFINITY;
        return b;
    }
};

struct box_union {
    __device__ box operator()(const box &a, const box &b) const
    {
        box r;
        for (int k = 0; k < 3; k++) {
            r.lo[k] = fmin(a.lo[k], b.lo[k]);
            r.hi[k] = fmax(a.hi[k], b.hi[k]);
        }
        r.bad = a.bad < b.bad ? a.bad : b.bad;
        return r;
    }
};

} // namespace

extern "C" size_t fmk_cuda_box_bytes(void)
{
    return sizeof(box);
}

extern "C" cudaError_t fmk_cuda_bounding_box(int dim, int64_t ns, const double *d_s, int64_t nt,
                                             const double *d_t, void *d_temp, size_t *temp_bytes,
                                             void *d_box, double lo[3], double hi[3], int64_t *bad)
{
    box init;
    for (int k = 0; k < 3; k++)
        init.lo[k] = INFINITY, init.hi[k] = -INFINITY;
    init.bad = LLONG_MAX;
    box_of_point f = {d_s, d_t, (long long)ns, dim};
    thrust::counting_iterator<long long> first(0);
    cudaError_t err = cub::DeviceReduce::TransformReduce(
        d_temp, *temp_bytes, first, (box *)d_box, (long long)(ns + nt), box_union(), f, init);
    if (err != cudaSuccess || d_temp == NULL)
        return err;
    box h;
    err = cudaMemcpy(&h, d_box, sizeof h, cudaMemcpyDeviceToHost);
    if (err != cudaSuccess)
        return err;
    for (int k = 0; k < 3; k++)
        lo[k] = h.lo[k], hi[k] = h.hi[k];
    *bad = h.bad == LLONG_MAX ? -1 : (int64_t)h.bad;
    return cudaSuccess;
}

extern "C" fmk_status fmk_cuda_bad_point(fmk_plan *plan, int64_t bad, int64_t ns, const double *d_s,
                                         const double *d_t)
{
    const char *what = bad < ns ? "sources" : "targets";
    const int64_t i = bad < ns ? bad : bad - ns;
    const double *d_x = (bad < ns ? d_s : d_t) + plan->dim * i;
    double x[3] = {0, 0, 0};
    cudaError_t err = cudaMemcpy(x, d_x, plan->dim * sizeof(double), cudaMemcpyDeviceToHost);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaMemcpy (a point from the GPU)");
    int k = 0;
    while (k < plan->dim - 1 && isfinite(x[k]))
        k++;
    return fmk_error_set(plan, FMK_ERR_NONFINITE, "%s[%lld][%d] is %g; points must be finite", what,
                         (long long)i, k, x[k]);
}

extern "C" fmk_status fmk_cuda_frame_query(fmk_plan *plan, int64_t ns, const double *d_s,
                                           int64_t nt, const double *d_t, size_t *temp_bytes)
{
    double lo[3], hi[3];
    int64_t bad;
    *temp_bytes = 0;
    cudaError_t err =
        fmk_cuda_bounding_box(plan->dim, ns, d_s, nt, d_t, NULL, temp_bytes, NULL, lo, hi, &bad);
    return err == cudaSuccess
               ? FMK_OK
               : fmk_cuda_fail(plan, err, "cub::DeviceReduce::TransformReduce (workspace query)");
}

extern "C" fmk_status fmk_cuda_frame(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                                     const double *d_t, void *d_temp, size_t temp_bytes,
                                     void *d_box, double lo[3], double hi[3], fmk_frame *frame)
{
    int64_t bad = -1;
    cudaError_t err = fmk_cuda_bounding_box(plan->dim, ns, d_s, nt, d_t, d_temp, &temp_bytes, d_box,
                                            lo, hi, &bad);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cub::DeviceReduce::TransformReduce (bounding box)");
    if (bad >= 0)
        return fmk_cuda_bad_point(plan, bad, ns, d_s, d_t);
    return frame ? fmk_plan_frame_from_box(plan, lo, hi, frame) : FMK_OK;
}

extern "C" fmk_status fmk_cuda_points_extent(fmk_plan *plan, int64_t ns, const double *d_s,
                                             int64_t nt, const double *d_t, double *width)
{
    *width = -1;
    cudaError_t dev = cudaSetDevice(plan->opts.device);
    if (dev != cudaSuccess)
        return fmk_cuda_fail(plan, dev, "cudaSetDevice");
    size_t temp_bytes = 0;
    fmk_status st = fmk_cuda_frame_query(plan, ns, d_s, nt, d_t, &temp_bytes);
    if (st != FMK_OK)
        return st;
    void *d_temp = NULL, *d_box = NULL;
    cudaError_t err = cudaMalloc(&d_temp, temp_bytes > 0 ? temp_bytes : 1);
    if (err == cudaSuccess)
        err = cudaMalloc(&d_box, fmk_cuda_box_bytes());
    double lo[3], hi[3];
    if (err == cudaSuccess) {
        st = fmk_cuda_frame(plan, ns, d_s, nt, d_t, d_temp, temp_bytes, d_box, lo, hi, NULL);
        if (st == FMK_OK) {
            *width = 0;
            for (int k = 0; k < plan->dim; k++)
                *width = hi[k] - lo[k] > *width ? hi[k] - lo[k] : *width;
        } else if (st == FMK_ERR_NONFINITE)
            st = FMK_OK; /* the engine's set_points reports it */
    }
    cudaFree(d_temp);
    cudaFree(d_box);
    return err == cudaSuccess ? st : fmk_cuda_fail(plan, err, "cudaMalloc (method auto's bounding box)");
}
