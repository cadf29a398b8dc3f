/* split.cu -- the last phase of a split walk (engine.cu: a walk cut into parts over the
 * groups' sources, each into its own sums): the parts added up into the outputs. */
#include "treecode/cuda/bh_device.cuh"

namespace {

/* The parts of a split walk added up, in part order (the same sums on every run). */
__global__ void k_sum_parts(int64_t m, int parts, const double *__restrict__ part_pot,
                            const double *__restrict__ part_grad,
                            const unsigned long long *__restrict__ stats, double *__restrict__ pot,
                            double *__restrict__ grad)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= m || charges_bad(stats))
        return;
    if (pot) {
        double v = 0;
        for (int p = 0; p < parts; p++)
            v += part_pot[i + p * m];
        pot[i] = v;
    }
    if (grad)
        for (int d = 0; d < 3; d++) {
            double v = 0;
            for (int p = 0; p < parts; p++)
                v += part_grad[3 * (i + p * m) + d];
            grad[3 * i + d] = v;
        }
}

} // namespace

cudaError_t fmk_cuda_bh_sum_parts(int64_t m, int parts, const double *part_pot,
                                  const double *part_grad, const unsigned long long *stats,
                                  double *pot, double *grad)
{
    k_sum_parts<<<fmk_bh_blocks(m), FMK_BH_BLOCK>>>(m, parts, part_pot, part_grad, stats, pot,
                                                    grad);
    return cudaGetLastError();
}
