/* fmm2d.c -- the 2D adaptive FMM on the CPU (method fmm, dim 2). Not built yet: the engine
 * has no setup, so plans that ask for it are refused with FMK_ERR_UNAVAILABLE. */
#include "internal.h"

const fmk_engine fmk_engine_fmm2d_cpu = {"fmm2d/cpu", NULL, NULL, NULL, NULL, NULL, NULL};
