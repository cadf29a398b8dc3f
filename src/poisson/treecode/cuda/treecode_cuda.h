/* treecode_cuda.h -- what the treecode's CUDA files share (C++ only): the brick kernels' shape and
 * the far part for Psi alone with the order a template argument (cuda/far.cu). */
#ifndef FMMKIT_POISSON_TREECODE_CUDA_H
#define FMMKIT_POISSON_TREECODE_CUDA_H

#include "cuda/device.h"
#include "poisson/treecode/treecode.h"

#define TC_THREADS 128 /* threads per brick */
#define TC_PTS 4       /* points per thread: 4 x 128 = 512 = 8^3 */
#define TC_FAST_ORDER_MAX 16
/* The direct part: points per thread (a brick's 512 over 512 / TC_DIRECT_PTS threads, which
 * also load one source each per tile and one range each per chunk of the range list). */
#ifndef TC_DIRECT_PTS
#define TC_DIRECT_PTS 4
#endif
#define TC_DIRECT_THREADS (512 / TC_DIRECT_PTS)

/* The far part of bricks b0 .. b0 + nb for Psi alone (pot += , nc per point) at an order
 * 0 .. TC_FAST_ORDER_MAX, launched on st; cudaErrorInvalidValue for another order. */
cudaError_t fmk_tc_far_psi(cudaStream_t st, int order, int nc, int64_t b0, unsigned nb,
                           const fmk_tc_brick *bricks, const int64_t *fstart, const int32_t *fnode,
                           const real4d *node, const double *multipole, double *pot);

#endif /* FMMKIT_POISSON_TREECODE_CUDA_H */
