/* opts.c -- the treecode's options, checked for both backends, and theta from eps. */
#include <math.h>

#include "treecode/treecode.h"

/* The worst relative l2 error of the potential over the five accuracy sets (cube, Plummer,
 * sphere, corner, nested; 10^5 points, mixed-sign charges, bench_accuracy theta cpu; the
 * table in bench/history/tree-accuracy-2026-11-28.md) at theta 0.2, 0.3, ..., 0.9, per order.
 * The gradient's errors are smaller still. */
enum { N_THETA = 8 };
static const double worst_error[3][N_THETA] = {
    {5.4e-2, 7.6e-2, 9.3e-2, 1.1e-1, 1.3e-1, 1.7e-1, 2.0e-1, 2.3e-1},
    {2.3e-3, 6.7e-3, 1.2e-2, 1.8e-2, 2.5e-2, 3.5e-2, 4.3e-2, 5.1e-2},
    {2.2e-4, 7.2e-4, 1.8e-3, 3.5e-3, 5.7e-3, 1.0e-2, 1.5e-2, 2.1e-2},
};
/* The measured errors times this must stay within eps (larger N, other sets). */
#define THETA_MARGIN 2.0

/* The largest theta whose error (interpolated in log error between the measured thetas, and
 * held at 0.9 above) times the margin stays within eps; 0 when even theta 0.2 does not. */
static double theta_from_eps(int order, double eps)
{
    const double *e = worst_error[order];
    const double want = eps / THETA_MARGIN;
    if (want < e[0])
        return 0;
    if (want >= e[N_THETA - 1])
        return 0.9;
    int k = 0;
    while (k + 1 < N_THETA && e[k + 1] <= want)
        k++;
    const double f = (log(want) - log(e[k])) / (log(e[k + 1]) - log(e[k]));
    return floor(100 * (0.2 + 0.1 * (k + f))) / 100; /* two digits, rounded down */
}

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
    if (o->theta == 0) { /* from eps: the measured curves */
        o->theta = theta_from_eps(o->order, eps);
        if (o->theta == 0)
            return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                                 "eps = %g is below what method tree reaches with order %d (about "
                                 "%.1g at theta 0.2 with mixed-sign charges): use method fmm (or "
                                 "auto), a larger eps, or set opts.theta to accept what a theta "
                                 "gives",
                                 eps, (int)o->order, THETA_MARGIN * worst_error[o->order][0]);
    }
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
