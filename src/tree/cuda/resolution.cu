/* resolution.cu -- the resolution guard (tree/resolution.h) on the GPU: the estimate's sums
 * over a device octree's points in Morton order, one thread a point, with the terms of
 * fmk_resolution_point (shared with the CPU), reduced per warp into a few atomics. */
#include <math.h>
#include <string.h>

#include "cuda/device.h"
#include "tree/resolution.h"

namespace {

enum { MAX_WINDOWS = 40, SAMPLE_ALL = 1 << 14, SUMS = 6 };

/* What every thread reads. */
struct res_args {
    int64_t n;
    const int32_t *order;
    const double *x;
    double scale, s2;
    double frame_unit, local_unit;
    int64_t local_points, stride;
    int nw;
    double w[MAX_WINDOWS];
};

/* A mapped coordinate as the integer (x - 1) 2^52 (resolution.c's grid). */
__device__ uint64_t grid_of(double x)
{
    double t = (x - 1.0) * 0x1p52;
    t = t < 0 ? 0 : t > 0x1p52 - 1 ? 0x1p52 - 1 : t;
    return (uint64_t)t;
}

__device__ void load(const res_args &a, int64_t p, uint64_t c[3])
{
    const double *x = a.x + 3 * (int64_t)a.order[p];
    for (int k = 0; k < 3; k++)
        c[k] = grid_of(x[k]);
}

/* The side of the smallest dyadic box holding sorted points i and j (frame units), 0 when
 * they coincide. */
__device__ double side_of(const res_args &a, int64_t i, int64_t j)
{
    uint64_t ci[3], cj[3];
    load(a, i, ci), load(a, j, cj);
    const uint64_t diff = (ci[0] ^ cj[0]) | (ci[1] ^ cj[1]) | (ci[2] ^ cj[2]);
    if (!diff)
        return 0;
    const int bits = 64 - __clzll((long long)diff);
    return a.scale * __longlong_as_double((long long)(1023 - 52 + bits) << 52);
}

__device__ double window_side(const res_args &a, int64_t p, int64_t w)
{
    int64_t lo = p - w / 2;
    lo = lo < 0 ? 0 : lo;
    int64_t hi = lo + w - 1;
    if (hi > a.n - 1)
        hi = a.n - 1, lo = hi - w + 1 < 0 ? 0 : hi - w + 1;
    return side_of(a, lo, hi);
}

__device__ double local_side(const res_args &a, int64_t p, int64_t w)
{
    const int64_t lo = p - w + 1 < 0 ? 0 : p - w + 1;
    const int64_t hi = p + w - 1 > a.n - 1 ? a.n - 1 : p + w - 1;
    const double s0 = side_of(a, lo, p), s1 = side_of(a, p, hi);
    return s0 == 0 ? s1 : s1 == 0 ? s0 : fmin(s0, s1);
}

/* sums: E (full unit), P, G (full unit), Q, E and G with the frame's unit alone; closest: the
 * smallest neighbour distance as the bits of a non-negative double (ordered as integers). */
__global__ void k_resolution(const res_args a, double *sums, unsigned long long *closest)
{
    double v[SUMS] = {0, 0, 0, 0, 0, 0}, rmin = INFINITY;
    const int local = a.local_unit > 0 && a.local_points > 1;
    for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < a.n;
         p += (int64_t)gridDim.x * blockDim.x) {
        uint64_t cp[3];
        load(a, p, cp);
        double r2 = INFINITY;
        for (int off = -2; off <= 2; off++) {
            const int64_t q = p + off;
            if (off == 0 || q < 0 || q >= a.n)
                continue;
            uint64_t cq[3];
            load(a, q, cq);
            double d2 = 0;
            for (int k = 0; k < 3; k++) {
                const double d = ((double)cp[k] - (double)cq[k]) * 0x1p-52;
                d2 += d * d;
            }
            if (d2 > 0 && d2 < r2) /* coincident points add nothing to each other */
                r2 = d2;
        }
        const double r = a.scale * sqrt(r2);
        rmin = fmin(rmin, r);
        const double near = local ? 2 * local_side(a, p, a.local_points) : 0;
        double t[6] = {0, 0, 0, 0, 0, 0}, h[MAX_WINDOWS];
        fmk_resolution_point(3, r, a.s2, near, a.w, h, 0, t);
        if (p % a.stride == 0) {
            double tw[6] = {0, 0, 0, 0, 0, 0};
            for (int k = 0; k < a.nw; k++)
                h[k] = window_side(a, p, (int64_t)a.w[k]);
            fmk_resolution_point(3, INFINITY, a.s2, near, a.w, h, a.nw, tw);
            for (int k = 0; k < 6; k++)
                t[k] += (double)a.stride * tw[k];
        }
        const double dn = a.frame_unit + a.local_unit * near / 2;
        const double dn2 = dn * dn, df2 = a.frame_unit * a.frame_unit;
        v[0] += dn2 * t[0] + df2 * t[1], v[1] += t[4];
        v[2] += dn2 * t[2] + df2 * t[3], v[3] += t[5];
        v[4] += df2 * (t[0] + t[1]), v[5] += df2 * (t[2] + t[3]);
    }
    for (int off = 16; off > 0; off /= 2) {
        for (int k = 0; k < SUMS; k++)
            v[k] += __shfl_down_sync(0xffffffffu, v[k], off);
        rmin = fmin(rmin, __shfl_down_sync(0xffffffffu, rmin, off));
    }
    if ((threadIdx.x & 31) == 0) {
        for (int k = 0; k < SUMS; k++)
            atomicAdd(sums + k, v[k]);
        atomicMin(closest, (unsigned long long)__double_as_longlong(rmin));
    }
}

} // namespace

fmk_status fmk_cuda_resolution_check(fmk_plan *plan, const char *method,
                                     const fmk_resolution_opts *o, int64_t n,
                                     const int32_t *d_order, const double *d_x, double scale)
{
    if (n < 2)
        return FMK_OK;
    res_args a;
    memset(&a, 0, sizeof a);
    a.n = n, a.order = d_order, a.x = d_x, a.scale = scale;
    a.s2 = plan->frame.softening * plan->frame.softening;
    /* points on a grid the frame holds mapped exactly; the shrunk root rounds once more */
    a.frame_unit = (plan->frame.exact ? 0 : o->frame_unit) + (scale > 1 ? 0x1p-53 * scale : 0);
    a.local_unit = o->local_unit, a.local_points = o->local_points;
    a.stride = n > SAMPLE_ALL ? n / SAMPLE_ALL : 1;
    for (int64_t m = 8; m < n && a.nw < MAX_WINDOWS - 1; m *= 8)
        a.w[a.nw++] = (double)m;
    a.w[a.nw++] = (double)n;
    void *d_out = NULL;
    const size_t bytes = SUMS * sizeof(double) + sizeof(unsigned long long);
    fmk_status st = fmk_cuda_alloc(plan, &d_out, bytes, "the resolution check", (long long)bytes);
    if (st != FMK_OK)
        return st;
    double *d_sums = (double *)d_out;
    unsigned long long *d_closest = (unsigned long long *)(d_sums + SUMS);
    double h_sums[SUMS];
    unsigned long long h_closest = 0;
    cudaError_t err = cudaMemset(d_sums, 0, SUMS * sizeof(double));
    const double inf = INFINITY;
    if (err == cudaSuccess)
        err = cudaMemcpy(d_closest, &inf, sizeof inf, cudaMemcpyHostToDevice);
    if (err == cudaSuccess) {
        const int64_t blocks = (n + 255) / 256;
        k_resolution<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256>>>(a, d_sums, d_closest);
        err = cudaGetLastError();
    }
    if (err == cudaSuccess)
        err = cudaMemcpy(h_sums, d_sums, sizeof h_sums, cudaMemcpyDeviceToHost);
    if (err == cudaSuccess)
        err = cudaMemcpy(&h_closest, d_closest, sizeof h_closest, cudaMemcpyDeviceToHost);
    cudaFree(d_out);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the resolution check");
    fmk_resolution_est e;
    const double full[4] = {h_sums[0], h_sums[1], h_sums[2], h_sums[3]};
    const double frame[4] = {h_sums[4], h_sums[1], h_sums[5], h_sums[3]};
    fmk_resolution_finish(full, &e.pot, &e.grad);
    double fp, fg;
    fmk_resolution_finish(frame, &fp, &fg);
    const double total = e.pot + e.grad;
    e.local_part = total > 0 ? 1 - (fp + fg) / total : 0;
    memcpy(&e.closest, &h_closest, sizeof e.closest);
    return fmk_resolution_verdict(plan, method, o, &e);
}
