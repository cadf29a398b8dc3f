/* device.c -- a distributed plan's *_device calls (fmk_plan_set_points_device,
 * fmk_plan_eval_device, fmk_plan_eval_many_device): each rank's device arrays are copied to
 * host memory, the host calls run (plan_mpi.c), and the results are copied back to the
 * caller's device arrays. Like the ordinary plan's, these calls take a plan of backend cuda.
 * A copy that fails on one rank is agreed on every rank before the next collective step (so
 * every rank returns its status, none waits); the results are copied after an agreed
 * evaluation, and a copy failing on one rank then fails the call on every rank (the others'
 * device results are written). The staging costs host memory for the points, the charges and
 * the results, and the copies over PCIe; the work stays the host calls'. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/hooks.h"
#include "mpi/mpi_internal.h"

/* FMK_OK where the plan's local work runs on the GPU, else FMK_ERR_STATE naming the call. */
static fmk_status on_cuda(fmk_plan *plan, const fmk_mpi_state *s, const char *call)
{
    fmk_info li;
    if (fmk_plan_info(s->local, &li) == FMK_OK && li.backend == FMK_BACKEND_CUDA)
        return FMK_OK;
    char text[160];
    snprintf(text, sizeof text, "%s needs a plan with backend cuda (this one is %s)", call,
             fmk_backend_name(li.backend));
    return fmk_plan_hook_error(plan, FMK_ERR_STATE, text);
}

/* A host copy of n doubles of the device array d (NULL where d is NULL or n is 0, *st set on
 * failure). */
static double *staged(fmk_plan *plan, const double *d, int64_t n, const char *what, fmk_status *st)
{
    if (*st != FMK_OK || !d || n <= 0)
        return NULL;
    double *h = malloc((size_t)n * sizeof *h);
    if (!h) {
        *st = fmk_plan_hook_error(plan, FMK_ERR_NOMEM, "out of host memory staging device arrays");
        return NULL;
    }
    *st = fmk_plan_hook_copy(plan, h, d, (size_t)n * sizeof *h, what);
    return h;
}

fmk_status fmk_mpi_set_points_device(fmk_plan *plan, int64_t ns, const double *d_sources,
                                     int64_t nt, const double *d_targets)
{
    fmk_mpi_state *s = fmk_mpi_plan_state(plan);
    const int dim = s->dim;
    if (s->fault.failed) /* (no MPI call: docs/distributed.md, "MPI's own errors") */
        return fmk_mpi_refuse_failed(plan, &s->fault, "fmk_plan_set_points_device");
    fmk_status st = on_cuda(plan, s, "fmk_plan_set_points_device");
    if (st == FMK_OK && (ns < 0 || ns > INT_MAX || (d_targets && (nt < 0 || nt > INT_MAX))))
        st = fmk_plan_hook_error(plan, FMK_ERR_ARG,
                                 "fmk_plan_set_points_device: n_sources or n_targets out of range");
    if (st == FMK_OK && ((!d_sources && ns > 0) || (!d_targets && nt > 0)))
        st = fmk_plan_hook_error(plan, FMK_ERR_NULL,
                                 "fmk_plan_set_points_device: a point array is NULL");
    double *hs = staged(plan, d_sources, ns * dim, "sources to the host", &st);
    double *ht = staged(plan, d_targets, nt * dim, "targets to the host", &st);
    /* a failure here: every rank keeps its points, as for set_points' own checks */
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) == FMK_OK)
        st = fmk_mpi_set_points_host(plan, ns, hs, d_targets ? nt : 0,
                                     d_targets ? (ht ? ht : hs) : NULL);
    free(hs), free(ht);
    return st;
}

fmk_status fmk_mpi_eval_many_device(fmk_plan *plan, int is_many, int64_t nd,
                                    const double *d_charges, double *d_pot, double *d_grad)
{
    fmk_mpi_state *s = fmk_mpi_plan_state(plan);
    const int cw = s->charge_width, gw = s->grad_width;
    const char *fn = is_many ? "fmk_plan_eval_many_device" : "fmk_plan_eval_device";
    if (s->fault.failed) /* (no MPI call: docs/distributed.md, "MPI's own errors") */
        return fmk_mpi_refuse_failed(plan, &s->fault, fn);
    fmk_status st = on_cuda(plan, s, fn);
    /* the host call checks the rest (no points, n_vectors, NULL arrays) on every rank */
    const int sized = s->has_points && nd > 0 && nd <= INT_MAX;
    const int64_t ns = sized ? s->n_sources : 0, nt = sized ? s->n_targets : 0;
    double *hq = staged(plan, d_charges, nd * ns * cw, "charges to the host", &st);
    double *hp = NULL, *hg = NULL;
    if (st == FMK_OK && sized && nt > 0) {
        hp = d_pot ? malloc((size_t)(nd * nt * cw) * sizeof *hp) : NULL;
        hg = d_grad ? malloc((size_t)(nd * nt * gw) * sizeof *hg) : NULL;
        if ((d_pot && !hp) || (d_grad && !hg))
            st = fmk_plan_hook_error(plan, FMK_ERR_NOMEM, "out of host memory staging results");
    }
    static double none; /* a non-NULL stand-in for arrays of no values */
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) == FMK_OK)
        st = fmk_mpi_eval_host(plan, is_many, nd,
                               hq          ? hq
                               : d_charges ? &none
                                           : NULL,
                               hp      ? hp
                               : d_pot ? &none
                                       : NULL,
                               hg       ? hg
                               : d_grad ? &none
                                        : NULL);
    if (st == FMK_OK) {
        if (hp)
            st = fmk_plan_hook_copy(plan, d_pot, hp, (size_t)(nd * nt * cw) * sizeof *hp,
                                    "potentials to the GPU");
        if (st == FMK_OK && hg)
            st = fmk_plan_hook_copy(plan, d_grad, hg, (size_t)(nd * nt * gw) * sizeof *hg,
                                    "gradients to the GPU");
        st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st);
    }
    free(hq), free(hp), free(hg);
    return st;
}
