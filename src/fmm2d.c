/* fmm2d.c -- the 2D adaptive FMM on the CPU (method fmm, dim 2). Not built yet: the engine
 * has no setup, so plans ask for it are refused with FMK_ERR_UNAVAILABLE. */
#include "internal.h"

const fmk_engine fmk_engine_fmm2d_cpu = {"fmm2d/cpu", NULL, NULL, NULL, NULL, NULL};

fmk_status fmk_fmm2d_check_opts(fmk_opts *o, fmk_kernel kernel)
{
    if (kernel != FMK_KERNEL_LOG2D && kernel != FMK_KERNEL_CAUCHY2D)
        return fmk_error_set(NULL, FMK_ERR_ARG, "method fmm in 2D takes kernel log2d or cauchy2d, not %s",
                             fmk_kernel_name(kernel));
    if (o->precision != FMK_PRECISION_FP64)
        return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE, "method fmm in 2D runs in fp64; use precision fp64");
    return FMK_OK;
}
