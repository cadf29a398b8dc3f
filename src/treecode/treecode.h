/* treecode.h -- what the treecode's CPU and GPU engines share (never installed). */
#ifndef FMMKIT_TREECODE_H
#define FMMKIT_TREECODE_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The treecode's options (both backends): kernels laplace and plummer; order 0, 1 or 2
 * (default 2, quadrupole); 0 < theta <= 1.5 (default 0.6). Fills info's order and theta. */
fmk_status fmk_treecode_check_opts(fmk_opts *o, fmk_kernel kernel, int dim, double eps,
                                   fmk_info *info);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_TREECODE_H */
