/* fmm2d.cu -- the 2D adaptive FMM on the GPU (method fmm, dim 2). Not built yet: the engine has
 * no setup, so plans that ask for it are refused with FMK_ERR_UNAVAILABLE. */
#include "cuda_internal.h"

extern "C" const fmk_engine fmk_engine_fmm2d_cuda = {"fmm2d/cuda", NULL, NULL, NULL, NULL, NULL, NULL};
