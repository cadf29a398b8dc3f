/* kernels.h -- one descriptor per kernel (include/fmmkit.h lists the formulas): what a plan, an
 * engine or a test needs to know about a kernel without naming it, in a table indexed by
 * fmk_kernel. The pair interactions themselves are in kernels/pair.h. */
#ifndef FMMKIT_KERNELS_H
#define FMMKIT_KERNELS_H

#include "fmmkit.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fmk_kernel_desc {
    const char *name; /* fmk_kernel_name; NULL for a value that is no kernel */
    int dim;          /* 2 or 3 (0: no kernel) */
    int width;        /* values per point of charges and potential: 2 complex, else 1 */
    int grad_width;   /* values per point of the gradient: dim, or 2 for complex dphi/dz */
    int smooth;       /* 1: softened (opts.softening > 0), 0: singular at r = 0 (the pair at
                         * r = 0 adds nothing: docs/kernels.md) */
} fmk_kernel_desc;

/* The table, indexed by fmk_kernel (row 0 and rows past the last kernel: no kernel). */
enum { FMK_KERNEL_COUNT = FMK_KERNEL_CAUCHY2D + 1 };
extern const fmk_kernel_desc fmk_kernel_table[FMK_KERNEL_COUNT];

/* The descriptor of kernel k; for a value that is no kernel, row 0 (name NULL, all zero). */
static inline const fmk_kernel_desc *fmk_kernel_desc_of(fmk_kernel k)
{
    return (int)k > 0 && (int)k < FMK_KERNEL_COUNT ? &fmk_kernel_table[k] : &fmk_kernel_table[0];
}

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_KERNELS_H */
