/* kernels.c -- the kernel table of kernels.h. */
#include "kernels/kernels.h"

const fmk_kernel_desc fmk_kernel_table[FMK_KERNEL_COUNT] = {
    [0] = {NULL, 0, 0, 0, 0},
    [FMK_KERNEL_LAPLACE] = {"laplace", 3, 1, 3, 0},
    [FMK_KERNEL_PLUMMER] = {"plummer", 3, 1, 3, 1},
    [FMK_KERNEL_REGULARIZED] = {"regularized", 3, 1, 3, 1},
    [FMK_KERNEL_LOG2D] = {"log2d", 2, 1, 2, 0},
    [FMK_KERNEL_CAUCHY2D] = {"cauchy2d", 2, 2, 2, 0},
};
