/* solve_device.c -- fmk_poisson_solve_device (include/fmmkit_poisson.h): the solve with the
 * caller's arrays on the GPU. omega is checked there; a method with a device path (its row's
 * solve_device) leaves its results on the GPU, which are checked there and copied into the
 * caller's arrays; any other method is staged through the host (omega down, the host solve,
 * the results checked and copied up). Nothing reaches the caller's arrays unless the whole
 * solve succeeded with finite values. */
#include <stdlib.h>

#include "poisson/poisson.h"
#ifdef FMK_HAVE_CUDA
#include "poisson/device.h"
#endif

#ifdef FMK_HAVE_CUDA
/* The chosen blocks' points of the results (device) into the caller's arrays. */
static fmk_status copy_targets(fmk_poisson *s, int nc, const double *rp, const double *ru,
                               double *d_psi, double *d_u)
{
    int64_t *ranges = malloc(sizeof(int64_t) * 2 * (size_t)s->n_targets);
    if (!ranges)
        return fmk_solver_fail(s, FMK_ERR_NOMEM, "fmk_poisson_solve_device: out of host memory");
    for (int64_t k = 0; k < s->n_targets; k++) {
        const struct fmk_poisson_box *b = &s->boxes[s->targets[k]];
        ranges[2 * k] = b->offset;
        ranges[2 * k + 1] = (int64_t)b->n[0] * b->n[1] * b->n[2];
    }
    fmk_status st = FMK_OK;
    if (d_psi)
        st = fmk_poisson_dev_gather(s, s->opts.device, d_psi, rp, nc, s->n_targets, ranges);
    if (st == FMK_OK && d_u)
        st = fmk_poisson_dev_gather(s, s->opts.device, d_u, ru, 3, s->n_targets, ranges);
    free(ranges);
    return st;
}

/* The method's device results checked finite, then copied to the caller's arrays. */
static fmk_status deliver(fmk_poisson *s, int nc, const double *rp, const double *ru, double *d_psi,
                          double *d_u)
{
    const int dev = s->opts.device;
    const double *res[2] = {d_psi ? rp : NULL, d_u ? ru : NULL};
    const int width[2] = {nc, 3};
    const char *what[2] = {"Psi", "u"};
    for (int k = 0; k < 2; k++) {
        if (!res[k])
            continue;
        int64_t bad;
        double v;
        fmk_status st =
            fmk_poisson_dev_first_nonfinite(s, dev, res[k], s->n_points * width[k], &bad, &v);
        if (st != FMK_OK)
            return st;
        if (bad >= 0)
            return fmk_poisson_results_nonfinite(s, what[k], bad, width[k]);
    }
    if (s->targets) /* the chosen blocks, one range of points each */
        return copy_targets(s, nc, rp, ru, d_psi, d_u);
    fmk_status st = FMK_OK;
    if (d_psi)
        st = fmk_poisson_dev_copy(s, dev, d_psi, rp, (int64_t)sizeof(double) * s->n_points * nc,
                                  FMK_POISSON_D2D, "the results' copy");
    if (st == FMK_OK && d_u)
        st = fmk_poisson_dev_copy(s, dev, d_u, ru, (int64_t)sizeof(double) * s->n_points * 3,
                                  FMK_POISSON_D2D, "the results' copy");
    return st;
}

/* A method without a device path: through host memory. */
static fmk_status staged(fmk_poisson *s, int nc, const double *d_omega, double *d_psi, double *d_u)
{
    const int dev = s->opts.device;
    const int64_t len_om = s->n_points * nc, len_psi = d_psi ? s->n_points * nc : 0,
                  len_u = d_u ? s->n_points * 3 : 0;
    const int64_t len_out = fmk_poisson_result_points(s) * 3;
    double *h = NULL;
    fmk_status st = fmk_poisson_stage(s, len_om + len_psi + len_u + len_out, &h);
    if (st == FMK_OK)
        st = fmk_poisson_dev_copy(s, dev, h, d_omega, (int64_t)sizeof(double) * len_om,
                                  FMK_POISSON_D2H, "omega's download");
    double *psi = d_psi ? h + len_om : NULL, *u = d_u ? h + len_om + len_psi : NULL;
    if (st == FMK_OK)
        st = s->ops->solve(s, nc, h, psi, u);
    if (st == FMK_OK)
        st = fmk_poisson_check_staged(s, nc, psi, u);
    double *out = h + len_om + len_psi + len_u; /* the caller's points (the chosen blocks') */
    const int64_t n_out = fmk_poisson_result_points(s);
    if (st == FMK_OK && d_psi) {
        fmk_poisson_extract(s, out, psi, nc);
        st = fmk_poisson_dev_copy(s, dev, d_psi, out, (int64_t)sizeof(double) * n_out * nc,
                                  FMK_POISSON_H2D, "the results' upload");
    }
    if (st == FMK_OK && d_u) {
        fmk_poisson_extract(s, out, u, 3);
        st = fmk_poisson_dev_copy(s, dev, d_u, out, (int64_t)sizeof(double) * n_out * 3,
                                  FMK_POISSON_H2D, "the results' upload");
    }
    return st;
}
#endif

fmk_status fmk_poisson_solve_device(fmk_poisson *s, int32_t nc, const double *d_omega,
                                    double *d_psi, double *d_velocity)
{
    const char *fn = "fmk_poisson_solve_device";
    fmk_status st = fmk_poisson_solve_begin(s, nc, d_omega, d_psi, d_velocity, fn);
    if (st != FMK_OK)
        return st;
#ifndef FMK_HAVE_CUDA
    return fmk_solver_fail(s, FMK_ERR_UNAVAILABLE,
                           "%s: this build of fmmkit has no CUDA backend; use fmk_poisson_solve",
                           fn);
#else
    if (s->info.backend != FMK_BACKEND_CUDA)
        return fmk_solver_fail(s, FMK_ERR_ARG,
                               "%s: the solver runs on backend %s; device pointers need backend "
                               "cuda (opts.backend)",
                               fn, fmk_backend_name(s->info.backend));
    const int dev = s->opts.device;
    const void *ptr[3] = {d_omega, d_psi, d_velocity};
    const char *name[3] = {"omega", "psi", "velocity"};
    for (int k = 0; k < 3 && st == FMK_OK; k++)
        if (ptr[k])
            st = fmk_poisson_dev_pointer(s, dev, ptr[k], name[k]);
    int64_t bad = -1;
    double v = 0;
    if (st == FMK_OK)
        st = fmk_poisson_dev_first_nonfinite(s, dev, d_omega, s->n_points * nc, &bad, &v);
    if (st != FMK_OK)
        return st;
    if (bad >= 0)
        return fmk_poisson_omega_nonfinite(s, nc, bad, v);
    const double t0 = fmk_time_now();
    const double *rp = NULL, *ru = NULL;
    if (s->ops->solve_device)
        st = s->ops->solve_device(s, nc, d_omega, d_psi != NULL, d_velocity != NULL, &rp, &ru);
    if (st == FMK_OK && (rp || ru))
        st = deliver(s, nc, rp, ru, d_psi, d_velocity);
    else if (st == FMK_OK)
        st = staged(s, nc, d_omega, d_psi, d_velocity);
    if (st != FMK_OK)
        return st;
    fmk_poisson_solve_end(s, nc, t0);
    return FMK_OK;
#endif
}
