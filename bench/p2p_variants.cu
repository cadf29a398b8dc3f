/* p2p_variants.cu -- times the laplace direct-sum kernels of src/cuda/p2p.cu built with other
 * tuning knobs (FMK_CUDA_T32, FMK_CUDA_UNROLL, FMK_CUDA_MINB32), on the device layout directly:
 *   nvcc -O3 -std=c++17 -arch=sm_90 --use_fast_math -Iinclude -DFMK_CUDA_LAPLACE_ONLY \
 *        -DFMK_CUDA_T32=8 bench/p2p_variants.cu -o v && ./v [log2 N] [32|64]
 * Not part of the build: a tool for the notes in bench/RESULTS.md. */
#include <stdio.h>
#include <stdlib.h>

#include "direct/cuda/p2p.cu"

extern "C" int fmk_cuda_sm_count(int device)
{
    int n = 1;
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device);
    return n;
}

#define CK(call)                                                                             \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            printf("%s: %s\n", #call, cudaGetErrorString(e_));                               \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

int main(int argc, char **argv)
{
    const int64_t n = (int64_t)1 << (argc > 1 ? atoi(argv[1]) : 20);
    const int only = argc > 2 ? atoi(argv[2]) : 0; /* 32 or 64: one precision */
    for (int real = 4; real <= 8; real += 4) {
        if ((only == 32 && real != 4) || (only == 64 && real != 8))
            continue;
        const int64_t n_pad = fmk_cuda_padded(n);
        const double S = fmk_cuda_coord_scale(real, FMK_KERNEL_LAPLACE);
        double *x = (double *)malloc(n * 4 * sizeof(double));
        srand(1);
        for (int64_t i = 0; i < n; i++) {
            for (int k = 0; k < 3; k++)
                x[4 * i + k] = 1 + rand() / (RAND_MAX + 1.0);
            x[4 * i + 3] = rand() / (RAND_MAX + 1.0) - 0.5;
        }
        void *h = malloc(n_pad * 4 * real);
        for (int64_t i = 0; i < n_pad * 4; i++) {
            double v = i < n * 4 ? (i % 4 == 3 ? x[i] : x[i] * S) : 0;
            if (real == 4)
                ((float *)h)[i] = (float)v;
            else
                ((double *)h)[i] = v;
        }
        int splits = fmk_cuda_p2p_splits(real, FMK_KERNEL_LAPLACE, n_pad, n_pad, 0);
        void *d_src;
        double *d_pot, *d_grad, *d_partial = NULL;
        CK(cudaMalloc(&d_src, n_pad * 4 * real));
        CK(cudaMalloc((void **)&d_pot, n * 8));
        CK(cudaMalloc((void **)&d_grad, n * 24));
        if (splits > 1)
            CK(cudaMalloc((void **)&d_partial, (size_t)splits * n * 32));
        CK(cudaMemcpy(d_src, h, n_pad * 4 * real, cudaMemcpyHostToDevice));
        fmk_cuda_p2p_args a = {};
        a.real = real, a.kernel = FMK_KERNEL_LAPLACE, a.self = 1, a.splits = splits;
        a.n_pad = n_pad, a.m = n, a.m_pad = n_pad, a.d_src = d_src, a.d_trg = NULL;
        a.d_pot = d_pot, a.d_grad = d_grad, a.d_partial = d_partial;
        a.pot_scale = S, a.grad_scale = S, a.grad_scale2 = S;
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0), cudaEventCreate(&e1);
        CK(fmk_cuda_p2p(&a));
        CK(cudaDeviceSynchronize());
        float best = 1e30f;
        for (int r = 0; r < 3; r++) {
            cudaEventRecord(e0);
            CK(fmk_cuda_p2p(&a));
            cudaEventRecord(e1);
            CK(cudaEventSynchronize(e1));
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            best = ms < best ? ms : best;
        }
        printf("%s T32=%d UNROLL=%d MINB32=%d splits=%d N=%lld: %.3f ms, %.4g pairs/s\n",
               real == 4 ? "fp32" : "fp64", FMK_CUDA_T32, FMK_CUDA_UNROLL, FMK_CUDA_MINB32,
               splits, (long long)n, best, (double)n * n / (best * 1e-3));
        cudaFree(d_src), cudaFree(d_pot), cudaFree(d_grad), cudaFree(d_partial);
        free(x), free(h);
    }
    return 0;
}
