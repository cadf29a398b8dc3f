/* opts.c -- the treecode's options, checked for both backends. */
#include "treecode/treecode.h"

fmk_status fmk_treecode_check_opts(fmk_opts *o, fmk_kernel kernel, int dim, double eps,
                                   fmk_info *info)
{
    (void)dim, (void)eps;
    const fmk_status taken = fmk_opts_only(
        o, "tree", FMK_TAKES_ORDER | FMK_TAKES_THETA | FMK_TAKES_LEAF | FMK_TAKES_WALK);
    if (taken != FMK_OK)
        return taken;
    if (kernel != FMK_KERNEL_LAPLACE && kernel != FMK_KERNEL_PLUMMER)
        return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                             "method tree supports the laplace and plummer kernels, not %s",
                             fmk_kernel_name(kernel));
    if (o->order == -1)
        o->order = 2;
    if (o->order > 2)
        return fmk_error_set(NULL, FMK_ERR_ARG,
                             "opts.order = %d; the treecode takes 0 (monopole), 1 (dipole) "
                             "or 2 (quadrupole)",
                             (int)o->order);
    if (o->theta == 0)
        o->theta = 0.6;
    if (o->theta > 1.5)
        return fmk_error_set(NULL, FMK_ERR_ARG,
                             "opts.theta = %g; the treecode takes 0 < theta <= 1.5", o->theta);
    info->theta = o->theta;
    info->order = o->order;
    return FMK_OK;
}

double fmk_treecode_accuracy(const fmk_plan *plan)
{
    const double th = plan->opts.theta, own = 1e-3 * th * th * th;
    return plan->eps > own ? plan->eps : own;
}
