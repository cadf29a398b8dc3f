/* lists_common.cuh -- what the files of the GPU 3D FMM's list build share (lists.cu and its
 * kernels' files: lists_boxes.cu, lists_uvwx.cu, lists_work.cu): sizes and the adjacency test. */
#ifndef FMMKIT_CUDA_FMM3D_LISTS_COMMON_CUH
#define FMMKIT_CUDA_FMM3D_LISTS_COMMON_CUH

#include <math.h>

#include "fmm3d/cuda/lists.h"

namespace fmk_cuda_lists {

const int BLOCK = 256;
const int NBR_MAX = 27; /* a neighbour set tiles the 3 x 3 x 3 block of its box's level */
const int V_MAX =
    189; /* V entries of a box: its parent's neighbours' children (216) less its own neighbours */
const int STACK_MAX = 256; /* the U/W descent: 7 pending siblings per level plus 8 children */
const int GROUPS = 256;    /* tile groups: levels (M2M) + 8 levels (L2L) <= 22 + 176 */
const int RANK_MAX = 512;  /* > FMK_FMM3D_NDIR: V sort keys are octant * RANK_MAX + place */

static inline unsigned blocks_for(int64_t n)
{
    return (unsigned)((n + BLOCK - 1) / BLOCK > 0 ? (n + BLOCK - 1) / BLOCK : 1);
}

/* The closed cubes of a and b touch (exact: dyadic centres and sides). */
static __device__ __forceinline__ bool touches(const real4d *__restrict__ cube, int32_t a,
                                               int32_t b)
{
    const real4d p = cube[a], q = cube[b];
    const double h = 0.5 * (p.w + q.w);
    return fabs(p.x - q.x) <= h && fabs(p.y - q.y) <= h && fabs(p.z - q.z) <= h;
}

} // namespace fmk_cuda_lists

#endif /* FMMKIT_CUDA_FMM3D_LISTS_COMMON_CUH */
