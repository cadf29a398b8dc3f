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

/* The relative accuracy the resolution guard (tree/resolution.h) holds the treecode to: it
 * does not take eps, so rounding may cost about as much as its own truncation, 1e-3 theta^3
 * (2.2e-4 at theta 0.6: between its potential errors on uniform points at order 2 with charges
 * of one sign, 2.7e-5, and of mixed signs, 1.5e-3; docs/tree.md), or eps where that is
 * larger. */
double fmk_treecode_accuracy(const struct fmk_plan *plan);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_TREECODE_H */
