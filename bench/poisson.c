/* bench/poisson.c -- the Poisson solver (include/fmmkit_poisson.h, docs/poisson.md) on the test
 * problem of van Rees et al. (two vortex rings, fmk_poisson_rings): time per solve and errors
 * against the analytic Psi and u, method fft against method fmm at several eps, CPU.
 *
 *   bench_poisson [--json] [--max-n N] [--no-velocity] [--method fft|fmm]
 *
 * Cell-centred grids n^3 in the unit cube, n = 32, 64, 128 (up to --max-n, default 128; 256
 * needs about 8 GB with the velocity), eps = h. Each row: one solver, set_grid timed, then
 * the 3-component omega solved twice (Psi and u): "first" includes what the first solve
 * builds (fmm: the plan's tree for omega's support; fft: the velocity kernels), "again" is
 * the second solve of the same omega (the steady-support case of a time-stepper). Errors are
 * relative l2 over every grid point, against the analytic solution and against fft (the exact
 * discrete sum). A method goes on to the next n only while a solve took under 2 s (its work
 * grows 8 to 30 times per doubling of n: fmm at eps 1e-6 took 3.8 s at 64^3, 61 to 101 s at
 * 128^3). Public API only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "fmmkit_poisson.h"

static double rel_l2(const double *a, const double *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++)
        num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

typedef struct row {
    double setup, first, again; /* seconds */
    int64_t sources;
    double err_psi, err_u;   /* against the analytic solution */
    double diff_psi, diff_u; /* against fft */
    double mbytes;           /* host memory the solver held */
} row;

/* One solver: create, set_grid, two solves. Returns 0, or -1 with the message printed. */
static int run(fmk_poisson_method method, double eps, int64_t n, const double *omega, int velocity,
               double *psi, double *u, row *r)
{
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = method;
    fmk_poisson *ps = NULL;
    const double h = 1.0 / (double)n, origin[3] = {h / 2, h / 2, h / 2};
    fmk_status st = fmk_poisson_create(&ps, eps, &o);
    double t0 = bench_now();
    if (st == FMK_OK)
        st = fmk_poisson_set_grid(ps, n, n, n, h, origin);
    r->setup = bench_now() - t0;
    t0 = bench_now();
    if (st == FMK_OK)
        st = fmk_poisson_solve(ps, 3, omega, psi, velocity ? u : NULL);
    r->first = bench_now() - t0;
    t0 = bench_now();
    if (st == FMK_OK)
        st = fmk_poisson_solve(ps, 3, omega, psi, velocity ? u : NULL);
    r->again = bench_now() - t0;
    fmk_poisson_info info;
    if (st == FMK_OK && fmk_poisson_get_info(ps, &info) == FMK_OK) {
        r->sources = info.n_sources;
        r->mbytes = (double)info.bytes_host / 1e6;
    }
    if (st != FMK_OK)
        fprintf(stderr, "%s n = %lld: %s\n", fmk_poisson_method_name(method), (long long)n,
                fmk_poisson_last_error(ps));
    fmk_poisson_destroy(ps);
    return st == FMK_OK ? 0 : -1;
}

int main(int argc, char **argv)
{
    int json = 0, velocity = 1;
    const char *only = NULL; /* one method's rows */
    int64_t max_n = 128;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--no-velocity"))
            velocity = 0;
        else if (!strcmp(argv[i], "--max-n") && i + 1 < argc)
            max_n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--method") && i + 1 < argc)
            only = argv[++i];
        else
            return fprintf(stderr, "usage: bench_poisson [--json] [--max-n N] [--no-velocity] "
                                   "[--method fft|fmm]\n"),
                   2;
    }
    typedef struct method_case {
        fmk_poisson_method method;
        double eps;
        const char *label; /* eps as shown in the table */
        int on;            /* still run at larger n */
    } method_case;
    method_case cases[] = {{FMK_POISSON_FFT, 1e-6, "-", 1},
                           {FMK_POISSON_FMM, 1e-3, "1e-3", 1},
                           {FMK_POISSON_FMM, 1e-4, "1e-4", 1},
                           {FMK_POISSON_FMM, 1e-6, "1e-6", 1}};
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    if (!fmk_poisson_method_available(FMK_POISSON_FFT))
        return fprintf(stderr, "this build has no FFTW: method fft is not available\n"), 1;
    if (json)
        printf("[\n");
    else
        printf("| n | method | eps | sources | setup s | first solve s | solve again s | MB | "
               "Psi err | u err | Psi vs fft | u vs fft |\n"
               "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    int first_row = 1;
    for (int64_t n = 32; n <= max_n; n *= 2) {
        const int64_t np = n * n * n;
        const double h = 1.0 / (double)n;
        double *x = malloc(sizeof(double) * 3 * (size_t)np);
        double *omega = malloc(sizeof(double) * 3 * (size_t)np);
        double *pa = malloc(sizeof(double) * 3 * (size_t)np),
               *ua = malloc(sizeof(double) * 3 * (size_t)np);
        double *pf = malloc(sizeof(double) * 3 * (size_t)np),
               *uf = malloc(sizeof(double) * 3 * (size_t)np);
        double *p = malloc(sizeof(double) * 3 * (size_t)np),
               *u = malloc(sizeof(double) * 3 * (size_t)np);
        if (!x || !omega || !pa || !ua || !pf || !uf || !p || !u)
            return fprintf(stderr, "out of memory at n = %lld\n", (long long)n), 1;
        for (int64_t q = 0; q < np; q++) {
            x[3 * q] = h * ((double)(q % n) + 0.5);
            x[3 * q + 1] = h * ((double)(q / n % n) + 0.5);
            x[3 * q + 2] = h * ((double)(q / (n * n)) + 0.5);
        }
        if (fmk_poisson_rings(np, x, omega, pa, ua) != FMK_OK)
            return fprintf(stderr, "%s\n", fmk_poisson_last_error(NULL)), 1;
        for (int c = 0; c < n_cases; c++) {
            method_case *mc = &cases[c];
            if (!mc->on || (only && strcmp(only, fmk_poisson_method_name(mc->method))))
                continue;
            const int is_fft = mc->method == FMK_POISSON_FFT;
            row r = {0};
            if (run(mc->method, mc->eps, n, omega, velocity, is_fft ? pf : p, is_fft ? uf : u, &r))
                continue;
            const double *ps = is_fft ? pf : p, *us = is_fft ? uf : u;
            r.err_psi = rel_l2(ps, pa, 3 * np);
            r.err_u = velocity ? rel_l2(us, ua, 3 * np) : NAN;
            r.diff_psi = rel_l2(ps, pf, 3 * np);
            r.diff_u = velocity ? rel_l2(us, uf, 3 * np) : NAN;
            mc->on = r.again < 2;
            const char *name = fmk_poisson_method_name(mc->method);
            if (json) {
                char eu[32], du[32]; /* JSON has no NaN: null without the velocity */
                snprintf(eu, sizeof eu, velocity ? "%.6e" : "null", r.err_u);
                snprintf(du, sizeof du, velocity ? "%.6e" : "null", r.diff_u);
                printf("%s  {\"n\": %lld, \"method\": \"%s\", \"eps\": %g, \"sources\": %lld, "
                       "\"setup_s\": %.6e, \"first_solve_s\": %.6e, \"solve_s\": %.6e, "
                       "\"mbytes\": %.1f, \"err_psi\": %.6e, \"err_u\": %s, "
                       "\"diff_psi\": %.6e, \"diff_u\": %s}",
                       first_row ? "" : ",\n", (long long)n, name, is_fft ? 0 : mc->eps,
                       (long long)r.sources, r.setup, r.first, r.again, r.mbytes, r.err_psi, eu,
                       r.diff_psi, du);
            } else {
                printf("| %lld | %s | %s | %lld | %.3f | %.3f | %.3f | %.0f | %.3e | %.3e | %.1e "
                       "| %.1e |\n",
                       (long long)n, name, mc->label, (long long)r.sources, r.setup, r.first,
                       r.again, r.mbytes, r.err_psi, r.err_u, r.diff_psi, r.diff_u);
            }
            fflush(stdout);
            first_row = 0;
        }
        free(x), free(omega), free(pa), free(ua), free(pf), free(uf), free(p), free(u);
    }
    if (json)
        printf("\n]\n");
    return 0;
}
