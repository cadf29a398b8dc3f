/* guard.c -- the fp32 direct sum's accuracy guard (direct/guard.h). */
#include "direct/guard.h"

#include "tree/resolution.h"

static fmk_status check(fmk_plan *plan, const double *xs, int64_t ns, const double *xt, int64_t nt)
{
    if (plan->opts.precision != FMK_PRECISION_FP32)
        return FMK_OK;
    const fmk_resolution_opts o = {plan->eps, FMK_RESOLUTION_FP32, 0, 0, 1};
    fmk_resolution_est e;
    fmk_status st = fmk_resolution_estimate_points(plan, &o, xs, ns, xt, nt, &e);
    return st != FMK_OK ? st : fmk_resolution_verdict(plan, "direct", &o, &e);
}

fmk_status fmk_direct_check_opts(fmk_opts *o, fmk_kernel kernel, int dim, double eps,
                                 fmk_info *info)
{
    (void)kernel, (void)dim, (void)eps, (void)info;
    return fmk_opts_only(o, "direct", 0);
}

fmk_status fmk_direct_guard(fmk_plan *plan)
{
    return check(plan, plan->sources, plan->n_sources, plan->self ? NULL : plan->targets,
                 plan->self ? 0 : plan->n_targets);
}

fmk_status fmk_direct_guard_raw(fmk_plan *plan, double *xs, int64_t ns, double *xt, int64_t nt)
{
    const int dim = plan->dim;
    for (int64_t i = 0; i < ns; i++)
        for (int k = 0; k < dim; k++)
            xs[dim * i + k] = fmk_frame_map(&plan->frame, k, xs[dim * i + k]);
    for (int64_t i = 0; xt && i < nt; i++)
        for (int k = 0; k < dim; k++)
            xt[dim * i + k] = fmk_frame_map(&plan->frame, k, xt[dim * i + k]);
    return check(plan, xs, ns, xt, nt);
}
