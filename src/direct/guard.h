/*
 * guard.h -- the direct sum's accuracy guard, shared by its CPU and GPU engines.
 *
 * The fp64 direct sum is exact to rounding for any finite input (docs/reliability.md). The fp32
 * one keeps each mapped coordinate to 2^-24 of the frame, so points closer than a few of those
 * units, nested clusters and far outliers make it miss eps; it refuses such points at
 * set_points (FMK_ERR_ACCURACY) with the resolution guard of the fast methods
 * (tree/resolution.h), whose frame unit here is FMK_RESOLUTION_FP32.
 */
#ifndef FMMKIT_DIRECT_GUARD_H
#define FMMKIT_DIRECT_GUARD_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The engines' check_opts: the direct sum takes none of the expert options (order, theta,
 * leaf_size, walk). */
fmk_status fmk_direct_check_opts(fmk_opts *o, fmk_kernel kernel, int dim, double eps,
                                 fmk_info *info);

/* The guard on the plan's mapped host points (plan->sources, plan->targets): FMK_OK for fp64
 * plans; otherwise as fmk_resolution_check. */
fmk_status fmk_direct_guard(fmk_plan *plan);

/* The same on raw (unmapped) host copies of the points, which it maps in place with
 * plan->frame: ns sources xs and nt targets xt (NULL: self). */
fmk_status fmk_direct_guard_raw(fmk_plan *plan, double *xs, int64_t ns, double *xt, int64_t nt);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_DIRECT_GUARD_H */
