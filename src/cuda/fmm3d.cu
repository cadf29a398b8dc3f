/* fmm3d.cu -- the 3D adaptive FMM on the GPU (method fmm, dim 3). Not built yet: the engine has
 * no setup, so plans that ask for it are refused with FMK_ERR_UNAVAILABLE. */
#include "cuda_internal.h"

extern "C" const fmk_engine fmk_engine_fmm_cuda = {"fmm/cuda", NULL, NULL, NULL, NULL, NULL, NULL};
