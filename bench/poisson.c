/* bench/poisson.c -- the Poisson solver (include/fmmkit_poisson.h, docs/poisson.md) on the test
 * problem of van Rees et al. (two vortex rings, fmk_poisson_rings): time per solve and errors
 * against the analytic Psi and u, method fft against method fmm at several eps, CPU; then
 * method treecode, phase by phase, on uniform grids and on the rings' two-level block grid.
 *
 *   bench_poisson [--json] [--max-n N] [--no-velocity] [--method fft|fmm|treecode]
 *                 [--direct-pairs P]
 *
 * Cell-centred grids n^3 in the unit cube, n = 32, 64, 128 (up to --max-n, default 128; 256
 * needs about 8 GB with the velocity), eps = h. Each row: one solver, set_grid timed, then
 * the 3-component omega solved twice (Psi and u): "first" includes what the first solve
 * builds (fmm: the plan's tree for omega's support; fft: the velocity kernels), "again" is
 * the second solve of the same omega (the steady-support case of a time-stepper). Errors are
 * relative l2 over every grid point, against the analytic solution and against fft (the exact
 * discrete sum). A method goes on to the next n only while a solve took under 2 s (its work
 * grows 8 to 30 times per doubling of n: fmm at eps 1e-6 took 3.8 s at 64^3, 61 to 101 s at
 * 128^3). Public API only.
 *
 * The treecode's table: uniform n^3 (n = 32 .. max-n) and fmk_poisson_rings_grid at effective
 * resolution n (blocks of 16^3, level 1 wherever the rings' omega is nonzero; n = 64 ..
 * max-n), eps 1e-3, 1e-4, 1e-6: the phases of the first solve (tree, plans) and of the second
 * (multipoles, direct, far; the plans kept), the pair counts, and the errors against the
 * analytic solution and the exact sum (fft on uniform grids; method direct on block grids
 * while it takes at most P source-point pairs, default 2e10, about 10 s on 2 cores). */
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

/* ---------------------------------------------------------------------------------------------
 * Method treecode
 * ------------------------------------------------------------------------------------------ */

/* A grid of the treecode's table: uniform n^3 (grid NULL) or the rings' block grid, its points
 * and the rings' omega, Psi and u there. */
typedef struct tc_problem {
    fmk_grid *grid;
    int64_t n, np;
    double *x, *omega, *pa, *ua;
} tc_problem;

static void tc_problem_free(tc_problem *pb)
{
    fmk_grid_destroy(pb->grid);
    free(pb->x), free(pb->omega), free(pb->pa), free(pb->ua);
}

static int tc_problem_make(tc_problem *pb, int blocks, int64_t n)
{
    memset(pb, 0, sizeof *pb);
    pb->n = n;
    if (blocks) {
        if (fmk_poisson_rings_grid(&pb->grid, (int32_t)n, 16, 0) != FMK_OK ||
            fmk_grid_get(pb->grid, NULL, &pb->np, NULL, NULL, NULL, NULL) != FMK_OK)
            return fprintf(stderr, "%s\n", fmk_poisson_last_error(NULL)), -1;
    } else
        pb->np = n * n * n;
    const size_t m = sizeof(double) * 3 * (size_t)pb->np;
    pb->x = malloc(m), pb->omega = malloc(m), pb->pa = malloc(m), pb->ua = malloc(m);
    if (!pb->x || !pb->omega || !pb->pa || !pb->ua)
        return fprintf(stderr, "out of memory for %lld points\n", (long long)pb->np), -1;
    if (blocks)
        fmk_grid_points(pb->grid, pb->x, NULL);
    else
        for (int64_t q = 0; q < pb->np; q++) {
            const double h = 1.0 / (double)n;
            pb->x[3 * q] = h * ((double)(q % n) + 0.5);
            pb->x[3 * q + 1] = h * ((double)(q / n % n) + 0.5);
            pb->x[3 * q + 2] = h * ((double)(q / (n * n)) + 0.5);
        }
    if (fmk_poisson_rings(pb->np, pb->x, pb->omega, pb->pa, pb->ua) != FMK_OK)
        return fprintf(stderr, "%s\n", fmk_poisson_last_error(NULL)), -1;
    return 0;
}

/* A solver of the method for the problem's grid, or NULL (message printed). */
static fmk_poisson *tc_solver(const tc_problem *pb, fmk_poisson_method method, double eps)
{
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = method;
    o.backend = FMK_BACKEND_CPU;
    fmk_poisson *ps = NULL;
    fmk_status st = fmk_poisson_create(&ps, eps, &o);
    if (st == FMK_OK && pb->grid)
        st = fmk_poisson_set_blocks(ps, pb->grid);
    else if (st == FMK_OK) {
        const double h = 1.0 / (double)pb->n, origin[3] = {h / 2, h / 2, h / 2};
        st = fmk_poisson_set_grid(ps, pb->n, pb->n, pb->n, h, origin);
    }
    if (st != FMK_OK) {
        fprintf(stderr, "%s: %s\n", fmk_poisson_method_name(method), fmk_poisson_last_error(ps));
        fmk_poisson_destroy(ps);
        return NULL;
    }
    return ps;
}

/* The exact sum (fft on a uniform grid, direct on blocks while affordable) into psi and u;
 * 0, or 1 when it was not computed. */
static int tc_exact(const tc_problem *pb, int velocity, double direct_pairs, int64_t sources,
                    double *psi, double *u)
{
    const fmk_poisson_method m = pb->grid ? FMK_POISSON_DIRECT : FMK_POISSON_FFT;
    if (pb->grid && (double)sources * (double)pb->np > direct_pairs)
        return 1;
    if (!pb->grid && !fmk_poisson_method_available(FMK_POISSON_FFT))
        return 1;
    fmk_poisson *ps = tc_solver(pb, m, 1e-6);
    const int bad = !ps || fmk_poisson_solve(ps, 3, pb->omega, psi, velocity ? u : NULL) != FMK_OK;
    fmk_poisson_destroy(ps);
    return bad;
}

typedef struct tc_row {
    fmk_poisson_info first, again;
    double setup, t_first, t_again, err_psi, err_u, diff_psi, diff_u;
} tc_row;

static int tc_run(const tc_problem *pb, double eps, int velocity, double *psi, double *u, tc_row *r)
{
    double t0 = bench_now();
    fmk_poisson *ps = tc_solver(pb, FMK_POISSON_TREECODE, eps);
    r->setup = bench_now() - t0;
    if (!ps)
        return -1;
    fmk_status st = FMK_OK;
    for (int pass = 0; pass < 2 && st == FMK_OK; pass++) {
        t0 = bench_now();
        st = fmk_poisson_solve(ps, 3, pb->omega, psi, velocity ? u : NULL);
        *(pass ? &r->t_again : &r->t_first) = bench_now() - t0;
        fmk_poisson_get_info(ps, pass ? &r->again : &r->first);
    }
    if (st != FMK_OK)
        fprintf(stderr, "treecode: %s\n", fmk_poisson_last_error(ps));
    fmk_poisson_destroy(ps);
    return st == FMK_OK ? 0 : -1;
}

static void tc_print(const tc_problem *pb, double eps, const tc_row *r, int json, int *first_row)
{
    const fmk_poisson_info *a = &r->first, *b = &r->again;
    const char *grid = pb->grid ? "rings blocks" : "uniform";
    if (json) {
        char eu[32], dp[32], du[32]; /* JSON has no NaN: null where not computed */
        snprintf(eu, sizeof eu, isfinite(r->err_u) ? "%.6e" : "null", r->err_u);
        snprintf(dp, sizeof dp, isfinite(r->diff_psi) ? "%.6e" : "null", r->diff_psi);
        snprintf(du, sizeof du, isfinite(r->diff_u) ? "%.6e" : "null", r->diff_u);
        printf("%s  {\"grid\": \"%s\", \"n\": %lld, \"method\": \"treecode\", \"eps\": %g, "
               "\"order\": %d, \"theta\": %g, \"points\": %lld, \"sources\": %lld, "
               "\"nodes\": %lld, \"bricks\": %lld, \"direct_pairs\": %.6e, \"far_pairs\": %.6e, "
               "\"setup_s\": %.6e, \"tree_s\": %.6e, \"plans_s\": %.6e, \"expand_s\": %.6e, "
               "\"direct_s\": %.6e, \"far_s\": %.6e, \"first_solve_s\": %.6e, \"solve_s\": "
               "%.6e, \"err_psi\": %.6e, \"err_u\": %s, \"diff_psi\": %s, \"diff_u\": %s}",
               *first_row ? "" : ",\n", grid, (long long)pb->n, eps, (int)a->order, a->theta,
               (long long)a->n_points, (long long)a->n_sources, (long long)a->n_nodes,
               (long long)a->n_bricks, b->direct_pairs, b->far_pairs, r->setup, a->time_tree,
               a->time_plans, b->time_expand, b->time_direct, b->time_far, r->t_first, r->t_again,
               r->err_psi, eu, dp, du);
    } else
        printf("| %s | %lld | %.0e | %d / %.2f | %lld | %lld | %lld | %.2e | %.2e | %.3f | %.3f "
               "| %.3f | %.3f | %.3f | %.3f | %.3f | %.3e | %.3e | %.1e | %.1e |\n",
               grid, (long long)pb->n, eps, (int)a->order, a->theta, (long long)a->n_points,
               (long long)a->n_sources, (long long)a->n_nodes, b->direct_pairs, b->far_pairs,
               a->time_tree, a->time_plans, b->time_expand, b->time_direct, b->time_far, r->t_first,
               r->t_again, r->err_psi, r->err_u, r->diff_psi, r->diff_u);
    fflush(stdout);
    *first_row = 0;
}

/* The treecode's table: uniform grids, then the rings' block grid. Stops a grid kind at the
 * first n whose solve took more than 30 s. */
static int tc_table(int64_t max_n, int velocity, int json, double direct_pairs, int *first_row)
{
    static const double EPS[3] = {1e-3, 1e-4, 1e-6};
    if (!json)
        printf("\n| grid | n | eps | p / theta | points | sources | nodes | direct pairs | far "
               "pairs | tree s | plans s | expand s | direct s | far s | first solve s | solve "
               "again s | Psi err | u err | Psi vs exact | u vs exact |\n"
               "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | "
               "--- | --- | --- | --- | --- | --- | --- |\n");
    for (int blocks = 0; blocks < 2; blocks++)
        for (int64_t n = blocks ? 64 : 32, go = 1; n <= max_n && go; n *= 2) {
            tc_problem pb;
            if (tc_problem_make(&pb, blocks, n)) {
                tc_problem_free(&pb);
                return -1;
            }
            const size_t m = sizeof(double) * 3 * (size_t)pb.np;
            double *ref = malloc(m), *uref = malloc(m), *p = malloc(m), *u = malloc(m);
            if (!ref || !uref || !p || !u)
                return fprintf(stderr, "out of memory at n = %lld\n", (long long)n), -1;
            int have_ref = -1; /* the exact sum, made after the first row gives the sources */
            for (int k = 0; k < 3 && go; k++) {
                tc_row r;
                memset(&r, 0, sizeof r);
                if (tc_run(&pb, EPS[k], velocity, p, u, &r))
                    continue;
                if (have_ref < 0)
                    have_ref = !tc_exact(&pb, velocity, direct_pairs, r.first.n_sources, ref, uref);
                r.err_psi = rel_l2(p, pb.pa, 3 * pb.np);
                r.err_u = velocity ? rel_l2(u, pb.ua, 3 * pb.np) : NAN;
                r.diff_psi = have_ref ? rel_l2(p, ref, 3 * pb.np) : NAN;
                r.diff_u = have_ref && velocity ? rel_l2(u, uref, 3 * pb.np) : NAN;
                tc_print(&pb, EPS[k], &r, json, first_row);
                go = r.t_again < 30;
            }
            free(ref), free(uref), free(p), free(u);
            tc_problem_free(&pb);
        }
    return 0;
}

int main(int argc, char **argv)
{
    int json = 0, velocity = 1;
    const char *only = NULL; /* one method's rows */
    int64_t max_n = 128;
    double direct_pairs = 2e10; /* the block grids' reference: direct while it is affordable */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--no-velocity"))
            velocity = 0;
        else if (!strcmp(argv[i], "--max-n") && i + 1 < argc)
            max_n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--method") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--direct-pairs") && i + 1 < argc)
            direct_pairs = atof(argv[++i]);
        else
            return fprintf(stderr, "usage: bench_poisson [--json] [--max-n N] [--no-velocity] "
                                   "[--method fft|fmm|treecode] [--direct-pairs P]\n"),
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
    const int sums = !only || strcmp(only, "treecode"); /* the first table's methods */
    if (sums && !fmk_poisson_method_available(FMK_POISSON_FFT))
        return fprintf(stderr, "this build has no FFTW: method fft is not available\n"), 1;
    if (json)
        printf("[\n");
    else if (sums)
        printf("| n | method | eps | sources | setup s | first solve s | solve again s | MB | "
               "Psi err | u err | Psi vs fft | u vs fft |\n"
               "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    int first_row = 1;
    for (int64_t n = 32; n <= max_n && sums; n *= 2) {
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
    if ((!only || !strcmp(only, "treecode")) &&
        tc_table(max_n, velocity, json, direct_pairs, &first_row))
        return 1;
    if (json)
        printf("\n]\n");
    return 0;
}
