/* sort_pairs.cu -- a host array of (64-bit key, 64-bit value) pairs sorted by key on a plan's
 * GPU: uploaded, split into keys and values, sorted by CUB's radix sort (stable, so equal keys
 * keep their order), joined and downloaded. libfmmkit_mpi's partition and sending trees sort
 * tens of millions of Morton keys a rank this way (core/hooks.h, fmk_plan_hook_sort_pairs);
 * the host's radix sort is their fallback: a failure leaves the pairs as they were. */
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>

#include "cuda/device.h"

namespace {

struct pair64 {
    unsigned long long key;
    long long value;
};

__global__ void k_split(int64_t n, const pair64 *p, unsigned long long *k, long long *v)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        k[i] = p[i].key, v[i] = p[i].value;
}

__global__ void k_join(int64_t n, const unsigned long long *k, const long long *v, pair64 *p)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        p[i].key = k[i], p[i].value = v[i];
}

} // namespace

extern "C" fmk_status fmk_cuda_sort_pairs(fmk_plan *plan, int64_t n, void *pairs, int key_bits)
{
    if (n < 2)
        return FMK_OK;
    if (n > INT32_MAX || key_bits < 1 || key_bits > 64)
        return fmk_error_set(plan, FMK_ERR_ARG, "fmk_cuda_sort_pairs: n = %lld, key_bits = %d",
                             (long long)n, key_bits);
    int prev = 0;
    fmk_status st = fmk_cuda_enter(plan, plan->opts.device, &prev);
    if (st != FMK_OK)
        return st;
    const size_t bytes = (size_t)n * sizeof(pair64);
    size_t temp_bytes = 0;
    cub::DoubleBuffer<unsigned long long> dk(NULL, NULL);
    cub::DoubleBuffer<long long> dv(NULL, NULL);
    cudaError_t err =
        cub::DeviceRadixSort::SortPairs(NULL, temp_bytes, dk, dv, (int)n, 0, key_bits);
    void *d_pairs = NULL, *d_k = NULL, *d_v = NULL, *d_temp = NULL;
    const long long total = (long long)(3 * bytes + temp_bytes);
    if (err != cudaSuccess)
        st = fmk_cuda_fail(plan, err, "cub::DeviceRadixSort::SortPairs (size query)");
    if (st == FMK_OK)
        st = fmk_cuda_alloc(plan, &d_pairs, bytes, "the pairs to sort", total);
    if (st == FMK_OK)
        st = fmk_cuda_alloc(plan, &d_k, bytes, "the keys and their twin", total);
    if (st == FMK_OK)
        st = fmk_cuda_alloc(plan, &d_v, bytes, "the values and their twin", total);
    if (st == FMK_OK)
        st = fmk_cuda_alloc(plan, &d_temp, temp_bytes > 0 ? temp_bytes : 1, "the sort's workspace",
                            total);
    if (st == FMK_OK) {
        unsigned long long *k = (unsigned long long *)d_k;
        long long *v = (long long *)d_v;
        const int blocks = 4 * fmk_cuda_sm_count(plan->opts.device);
        err = cudaMemcpy(d_pairs, pairs, bytes, cudaMemcpyHostToDevice);
        if (err == cudaSuccess) {
            k_split<<<blocks, 256>>>(n, (const pair64 *)d_pairs, k, v);
            dk = cub::DoubleBuffer<unsigned long long>(k, k + n);
            dv = cub::DoubleBuffer<long long>(v, v + n);
            err = cudaGetLastError();
        }
        if (err == cudaSuccess)
            err = cub::DeviceRadixSort::SortPairs(d_temp, temp_bytes, dk, dv, (int)n, 0, key_bits);
        if (err == cudaSuccess) {
            k_join<<<blocks, 256>>>(n, dk.Current(), dv.Current(), (pair64 *)d_pairs);
            err = cudaGetLastError();
        }
        /* downloaded beside the pairs, then copied over them: a failed download leaves them
         * as they were, so that the caller can sort them on the host */
        void *back = err == cudaSuccess ? malloc(bytes) : NULL;
        if (err == cudaSuccess && back)
            err = cudaMemcpy(back, d_pairs, bytes, cudaMemcpyDeviceToHost);
        if (err != cudaSuccess)
            st = fmk_cuda_fail(plan, err, "the GPU sort of (key, value) pairs");
        else if (!back)
            st = fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the sorted pairs");
        else
            memcpy(pairs, back, bytes);
        free(back);
    }
    cudaFree(d_pairs), cudaFree(d_k), cudaFree(d_v), cudaFree(d_temp);
    fmk_cuda_leave(plan->opts.device, prev);
    return st;
}
