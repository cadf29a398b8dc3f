/* cmd_poisson.c -- `fmmkit poisson`: the grid Poisson solver (include/fmmkit_poisson.h) on the
 * test problem of van Rees et al., two vortex rings (docs/poisson.md): solves on a uniform grid
 * and prints the errors against the analytic streamfunction (and velocity) and the time of
 * each phase; a table, or one JSON object with --json. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fmmkit_poisson.h"

static const char *const cmd = "poisson";

static const char usage[] =
    "Usage: fmmkit poisson [options]\n"
    "\n"
    "Solves lap Psi = -omega in free space on a uniform grid of R^3 cell centres in the unit\n"
    "cube for the test problem of van Rees et al. (two vortex rings, docs/poisson.md), and\n"
    "prints the relative l2 and max errors of Psi (and u = curl Psi) against the analytic\n"
    "solution, and the time of set_grid and of two solves.\n"
    "\n"
    "Options:\n"
    "  --case C            vortex-rings (the only case so far)\n"
    "  --resolution R      grid points per side (default 64)\n"
    "  --method M          auto (default: fft where built with FFTW), fft, fmm, direct\n"
    "  --eps E             relative accuracy of method fmm (default 1e-6)\n"
    "  --velocity          also u = curl Psi\n"
    "  --threads N         CPU threads (default 0: OpenMP's default)\n"
    "  --json              print one JSON object instead of the table\n"
    "  -h, --help          show this help\n"
    "\n"
    "Block-structured (multiresolution) grids, --multires, are not built yet.\n";

static int poisson_error(fmk_poisson *s, fmk_status st)
{
    cli_error(cmd, "%s", fmk_poisson_last_error(s));
    return cli_exit_status(st);
}

/* Relative l2 and max (over the max of the reference) errors of n values. */
static void errors(const double *a, const double *ref, int64_t n, double *l2, double *mx)
{
    double d2 = 0, r2 = 0, dm = 0, rm = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs(a[i] - ref[i]), r = fabs(ref[i]);
        d2 += d * d, r2 += r * r;
        dm = d > dm ? d : dm, rm = r > rm ? r : rm;
    }
    *l2 = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
    *mx = rm > 0 ? dm / rm : dm;
}

int cmd_poisson(int argc, char **argv)
{
    const char *case_name = "vortex-rings", *method_name = "auto";
    int64_t res = 64, threads = 0;
    double eps = 1e-6;
    int velocity = 0, json = 0, multires = 0, done = 0;
    args_opt opts[] = {
        {"case", ARGS_STRING, &case_name, 0, 0},  {"resolution", ARGS_INT, &res, 2, 0},
        {"method", ARGS_STRING, &method_name, 0, 0}, {"eps", ARGS_DOUBLE, &eps, 0, 0},
        {"velocity", ARGS_FLAG, &velocity, 0, 0}, {"threads", ARGS_INT, &threads, 0, 0},
        {"json", ARGS_FLAG, &json, 0, 0},         {"multires", ARGS_FLAG, &multires, 0, 0},
    };
    int rc = args_parse(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), usage, &done);
    if (rc != CLI_OK || done)
        return rc;
    if (strcmp(case_name, "vortex-rings") != 0)
        return cli_usage(cmd, "unknown case '%s' (vortex-rings)", case_name);
    if (multires)
        return cli_input_error(cmd, "--multires: block-structured grids are not built yet; "
                                    "use a uniform grid (--resolution)");
    if (res > 1024)
        return cli_usage(cmd, "--resolution %lld is above 1024", (long long)res);
    fmk_poisson_opts po;
    fmk_poisson_opts_default(&po);
    po.threads = (int32_t)threads;
    int found = 0;
    for (int m = 0; m <= FMK_POISSON_FFT; m++)
        if (strcmp(method_name, fmk_poisson_method_name((fmk_poisson_method)m)) == 0)
            po.method = (fmk_poisson_method)m, found = 1;
    if (!found)
        return cli_usage(cmd, "unknown method '%s' (auto, fft, fmm, direct)", method_name);

    const int64_t n = res * res * res;
    const double h = 1.0 / (double)res, origin[3] = {h / 2, h / 2, h / 2};
    double *x = malloc(sizeof(double) * 3 * (size_t)n);
    double *omega = malloc(sizeof(double) * 3 * (size_t)n);
    double *psi_ref = malloc(sizeof(double) * 3 * (size_t)n);
    double *u_ref = malloc(sizeof(double) * 3 * (size_t)n);
    double *psi = malloc(sizeof(double) * 3 * (size_t)n);
    double *u = velocity ? malloc(sizeof(double) * 3 * (size_t)n) : NULL;
    fmk_poisson *s = NULL;
    if (!x || !omega || !psi_ref || !u_ref || !psi || (velocity && !u)) {
        cli_error(cmd, "out of host memory for a %lld^3 grid", (long long)res);
        rc = CLI_FAIL;
        goto done;
    }
    for (int64_t k = 0, p = 0; k < res; k++) /* the solver's layout: x fastest */
        for (int64_t j = 0; j < res; j++)
            for (int64_t i = 0; i < res; i++, p++) {
                x[3 * p] = origin[0] + h * (double)i;
                x[3 * p + 1] = origin[1] + h * (double)j;
                x[3 * p + 2] = origin[2] + h * (double)k;
            }
    fmk_status st = fmk_poisson_rings(n, x, omega, psi_ref, u_ref);
    if (st != FMK_OK) {
        rc = poisson_error(NULL, st);
        goto done;
    }
    if ((st = fmk_poisson_create(&s, eps, &po)) != FMK_OK) {
        rc = poisson_error(NULL, st);
        goto done;
    }
    const double t0 = cli_now();
    st = fmk_poisson_set_grid(s, res, res, res, h, origin);
    const double t1 = cli_now();
    if (st == FMK_OK)
        st = fmk_poisson_solve(s, 3, omega, psi, u);
    const double t2 = cli_now();
    if (st == FMK_OK)
        st = fmk_poisson_solve(s, 3, omega, psi, u);
    const double t3 = cli_now();
    if (st != FMK_OK) {
        rc = poisson_error(s, st);
        goto done;
    }
    fmk_poisson_info info;
    fmk_poisson_get_info(s, &info);
    double ep2, epm, eu2 = NAN, eum = NAN;
    errors(psi, psi_ref, 3 * n, &ep2, &epm);
    if (u)
        errors(u, u_ref, 3 * n, &eu2, &eum);
    const char *mname = fmk_poisson_method_name(info.method);
    if (json) {
        printf("{\n  \"case\": \"vortex-rings\",\n  \"resolution\": %lld,\n  \"method\": \"%s\",\n"
               "  \"eps\": %g,\n  \"points\": %lld,\n  \"sources\": %lld,\n  \"threads\": %d,\n"
               "  \"set_grid_s\": %.6g,\n  \"solve_s\": %.6g,\n  \"solve_again_s\": %.6g,\n"
               "  \"psi_l2\": %.6g,\n  \"psi_max\": %.6g,\n",
               (long long)res, mname, eps, (long long)n, (long long)info.n_sources,
               (int)info.threads, t1 - t0, t2 - t1, t3 - t2, ep2, epm);
        if (u)
            printf("  \"u_l2\": %.6g,\n  \"u_max\": %.6g,\n", eu2, eum);
        else
            printf("  \"u_l2\": null,\n  \"u_max\": null,\n");
        printf("  \"bytes_host\": %lld\n}\n", (long long)info.bytes_host);
    } else {
        printf("vortex rings on %lld^3 points (h = 1/%lld), method %s%s, %d threads\n",
               (long long)res, (long long)res, mname,
               info.method == FMK_POISSON_FMM ? " (eps as given)" : "", (int)info.threads);
        printf("  sources (nonzero omega)  %lld of %lld points\n", (long long)info.n_sources,
               (long long)n);
        printf("  set_grid                 %.4f s\n", t1 - t0);
        printf("  solve (first, again)     %.4f s, %.4f s\n", t2 - t1, t3 - t2);
        printf("  Psi against the analytic solution: relative l2 %.3e, max %.3e\n", ep2, epm);
        if (u)
            printf("  u   against the analytic solution: relative l2 %.3e, max %.3e\n", eu2, eum);
        printf("  (the smoothing length is h: the errors fall as h^2 once the rings' cores are "
               "resolved, docs/poisson.md)\n");
    }
done:
    fmk_poisson_destroy(s);
    free(x), free(omega), free(psi_ref), free(u_ref), free(psi), free(u);
    return rc;
}
