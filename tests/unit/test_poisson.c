/* test_poisson.c -- the Poisson solver's methods against each other and against the analytic
 * solution (include/fmmkit_poisson.h, docs/poisson.md).
 *
 *  - fft against direct: the same discrete sum, so relative l2 <= 1e-12 for Psi and u, on the
 *    rings at 16^3, on random omega on a 9 x 16 x 11 grid with h = 0.37, an offset origin and
 *    eps = 1.7 h, and on a 1 x 5 x 7 grid; one component against the three-component solve.
 *  - fft against the analytic Psi and u of the rings (cell-centred grids in the unit cube,
 *    eps = h) at 32^3, 64^3, 128^3: the errors fall with an order that grows towards 2 (the
 *    smoothing error O(eps^2) is not yet asymptotic on these grids; docs/poisson.md).
 *  - direct and fmm (eps 1e-6) against fft on 32^3; fmm at eps 1e-3 on 32^3 and 1e-4 on 64^3
 *    (40^3 in the sanitizer build), where its far field is used, within eps (Psi) and 10 eps
 *    (u).
 *  - repeated solves: the same omega again (the plan's points kept), omega scaled, another
 *    support; a new grid on the same solver. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fmmkit_poisson.h"
#include "testutil.h"

/* A grid and the fields on it. */
typedef struct grid {
    int64_t n[3];
    double h, origin[3];
    int64_t np;
    double *x; /* np * 3 points */
} grid;

static grid grid_make(int64_t nx, int64_t ny, int64_t nz, double h, const double origin[3])
{
    grid g = {{nx, ny, nz}, h, {origin[0], origin[1], origin[2]}, nx * ny * nz, NULL};
    g.x = test_alloc(3 * g.np);
    for (int64_t p = 0; p < g.np; p++) {
        const int64_t idx[3] = {p % nx, p / nx % ny, p / (nx * ny)};
        for (int k = 0; k < 3; k++)
            g.x[3 * p + k] = origin[k] + h * (double)idx[k];
    }
    return g;
}

/* The cell-centred n^3 grid of the unit cube. */
static grid grid_unit(int64_t n)
{
    const double h = 1.0 / (double)n, o[3] = {h / 2, h / 2, h / 2};
    return grid_make(n, n, n, h, o);
}

/* One solve on a fresh solver; prints the message on failure. */
static fmk_status solve(fmk_poisson_method method, double eps, double smoothing, const grid *g,
                        int nc, const double *omega, double *psi, double *u)
{
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = method;
    o.smoothing = smoothing;
    fmk_poisson *ps = NULL;
    fmk_status st = fmk_poisson_create(&ps, eps, &o);
    if (st == FMK_OK)
        st = fmk_poisson_set_grid(ps, g->n[0], g->n[1], g->n[2], g->h, g->origin);
    if (st == FMK_OK)
        st = fmk_poisson_solve(ps, nc, omega, psi, u);
    if (st != FMK_OK)
        printf("%s solve: %s\n", fmk_poisson_method_name(method), fmk_poisson_last_error(ps));
    fmk_poisson_destroy(ps);
    return st;
}

/* fft against direct on one grid and omega: Psi and u (3 components), and Psi of one
 * component against component 1 of the three-component solve. */
static void fft_vs_direct(const char *what, const grid *g, double smoothing, const double *omega)
{
    check_context("fft vs direct, %s", what);
    const int64_t np = g->np;
    double *pf = test_alloc(3 * np), *uf = test_alloc(3 * np);
    double *pd = test_alloc(3 * np), *ud = test_alloc(3 * np);
    double *w1 = test_alloc(np), *p1 = test_alloc(np), *p1d = test_alloc(np);
    CHECK_STATUS(solve(FMK_POISSON_FFT, 1e-6, smoothing, g, 3, omega, pf, uf), FMK_OK);
    CHECK_STATUS(solve(FMK_POISSON_DIRECT, 1e-6, smoothing, g, 3, omega, pd, ud), FMK_OK);
    for (int64_t p = 0; p < np; p++)
        w1[p] = omega[3 * p + 1];
    CHECK_STATUS(solve(FMK_POISSON_FFT, 1e-6, smoothing, g, 1, w1, p1, NULL), FMK_OK);
    CHECK_STATUS(solve(FMK_POISSON_DIRECT, 1e-6, smoothing, g, 1, w1, p1d, NULL), FMK_OK);
    for (int64_t p = 0; p < np; p++)
        w1[p] = pd[3 * p + 1]; /* component 1 of the 3-component direct solve */
    const double ep = test_rel_l2(pf, pd, 3 * np), eu = test_rel_l2(uf, ud, 3 * np);
    const double e1 = test_rel_l2(p1, w1, np), e1d = test_rel_l2(p1d, w1, np);
    printf("%-28s fft vs direct: Psi %.2e, u %.2e; one component: fft %.2e, direct %.2e\n", what,
           ep, eu, e1, e1d);
    CHECK_LE(ep, 1e-12, "Psi, fft vs direct");
    CHECK_LE(eu, 1e-12, "u, fft vs direct");
    CHECK_LE(e1, 1e-12, "Psi of one component (fft) vs the 3-component direct solve");
    CHECK_LE(e1d, 1e-14, "Psi of one component (direct) vs the 3-component direct solve");
    free(pf), free(uf), free(pd), free(ud), free(w1), free(p1), free(p1d);
}

static void test_fft_vs_direct(void)
{
    grid g = grid_unit(16);
    double *omega = test_alloc(3 * g.np);
    CHECK_STATUS(fmk_poisson_rings(g.np, g.x, omega, NULL, NULL), FMK_OK);
    fft_vs_direct("rings 16^3", &g, 0, omega);
    free(omega), free(g.x);

    const double origin[3] = {-1.2, 3.4, 0.5};
    g = grid_make(9, 16, 11, 0.37, origin);
    omega = test_alloc(3 * g.np);
    test_charges(3 * g.np, 0, 17, omega);
    fft_vs_direct("random 9x16x11, eps 1.7h", &g, 1.7 * 0.37, omega);
    free(omega), free(g.x);

    g = grid_make(1, 5, 7, 2.0, origin);
    omega = test_alloc(3 * g.np);
    test_charges(3 * g.np, 0, 18, omega);
    fft_vs_direct("random 1x5x7", &g, 0, omega);
    free(omega), free(g.x);
}

/* fft against the analytic solution: relative l2 errors of Psi and u at n^3. */
static void analytic_errors(int64_t n, double *err_psi, double *err_u)
{
    grid g = grid_unit(n);
    double *omega = test_alloc(3 * g.np), *pa = test_alloc(3 * g.np), *ua = test_alloc(3 * g.np);
    double *p = test_alloc(3 * g.np), *u = test_alloc(3 * g.np);
    CHECK_STATUS(fmk_poisson_rings(g.np, g.x, omega, pa, ua), FMK_OK);
    CHECK_STATUS(solve(FMK_POISSON_FFT, 1e-6, 0, &g, 3, omega, p, u), FMK_OK);
    *err_psi = test_rel_l2(p, pa, 3 * g.np);
    *err_u = test_rel_l2(u, ua, 3 * g.np);
    free(omega), free(pa), free(ua), free(p), free(u), free(g.x);
}

static void test_convergence(void)
{
    check_context("fft vs analytic");
    const int64_t sizes[3] = {32, 64, 128};
    double ep[3], eu[3];
    for (int i = 0; i < 3; i++) {
        analytic_errors(sizes[i], &ep[i], &eu[i]);
        printf("rings %3lld^3: relative l2 error Psi %.4e, u %.4e", (long long)sizes[i], ep[i],
               eu[i]);
        if (i > 0)
            printf("; ratio Psi %.2f (order %.2f), u %.2f (order %.2f)", ep[i - 1] / ep[i],
                   log2(ep[i - 1] / ep[i]), eu[i - 1] / eu[i], log2(eu[i - 1] / eu[i]));
        printf("\n");
    }
    const double order_psi[2] = {log2(ep[0] / ep[1]), log2(ep[1] / ep[2])};
    const double order_u[2] = {log2(eu[0] / eu[1]), log2(eu[1] / eu[2])};
    /* Measured: Psi 0.378, 0.156, 0.0504 (orders 1.27, 1.63; 1.85 from 128^3 to 256^3 in
     * bench_poisson); the bounds leave 5% for other compilers' rounding of the same sums. */
    CHECK_LE(ep[0], 0.40, "Psi error at 32^3");
    CHECK_LE(ep[1], 0.165, "Psi error at 64^3");
    CHECK_LE(ep[2], 0.053, "Psi error at 128^3");
    CHECK_MSG(order_psi[0] > 1.2 && order_psi[1] > 1.55 && order_psi[1] > order_psi[0],
              "Psi's order of convergence %.2f then %.2f: it should grow towards 2", order_psi[0],
              order_psi[1]);
    CHECK_MSG(order_u[0] > 1.0 && order_u[1] > 1.4 && order_u[1] > order_u[0],
              "u's order of convergence %.2f then %.2f: it should grow towards 2", order_u[0],
              order_u[1]);
}

/* direct and fmm against fft on the rings at 32^3. */
static void test_methods_agree(void)
{
    check_context("methods at 32^3");
    grid g = grid_unit(32);
    const int64_t np = g.np;
    double *omega = test_alloc(3 * np), *pf = test_alloc(3 * np), *uf = test_alloc(3 * np);
    double *p = test_alloc(3 * np), *u = test_alloc(3 * np);
    CHECK_STATUS(fmk_poisson_rings(np, g.x, omega, NULL, NULL), FMK_OK);
    CHECK_STATUS(solve(FMK_POISSON_FFT, 1e-6, 0, &g, 3, omega, pf, uf), FMK_OK);
    CHECK_STATUS(solve(FMK_POISSON_DIRECT, 1e-6, 0, &g, 3, omega, p, u), FMK_OK);
    const double dp = test_rel_l2(p, pf, 3 * np), du = test_rel_l2(u, uf, 3 * np);
    CHECK_STATUS(solve(FMK_POISSON_FMM, 1e-6, 0, &g, 3, omega, p, u), FMK_OK);
    const double fp = test_rel_l2(p, pf, 3 * np), fu = test_rel_l2(u, uf, 3 * np);
    printf("32^3 against fft: direct Psi %.2e, u %.2e; fmm (eps 1e-6) Psi %.2e, u %.2e\n", dp, du,
           fp, fu);
    CHECK_LE(dp, 1e-12, "direct Psi vs fft");
    CHECK_LE(du, 1e-12, "direct u vs fft");
    CHECK_LE(fp, 1e-6, "fmm Psi vs fft");
    CHECK_LE(fu, 1e-5, "fmm u vs fft (a gradient: 10 eps, as the FMM's own tests)");
    free(omega), free(pf), free(uf), free(p), free(u), free(g.x);
}

/* fmm at eps where its far field is used (the regularized kernel's boxes are at least
 * eps^(-1/4) h wide: 5.6 h at 1e-3, 10 h at 1e-4), against fft: within eps. */
static void test_fmm_far_field(int64_t n, double eps)
{
    check_context("fmm at eps %g on %lld^3", eps, (long long)n);
    grid g = grid_unit(n);
    const int64_t np = g.np;
    double *omega = test_alloc(3 * np), *pf = test_alloc(3 * np), *uf = test_alloc(3 * np);
    double *p = test_alloc(3 * np), *u = test_alloc(3 * np);
    CHECK_STATUS(fmk_poisson_rings(np, g.x, omega, NULL, NULL), FMK_OK);
    CHECK_STATUS(solve(FMK_POISSON_FFT, 1e-6, 0, &g, 3, omega, pf, uf), FMK_OK);
    CHECK_STATUS(solve(FMK_POISSON_FMM, eps, 0, &g, 3, omega, p, u), FMK_OK);
    const double ep = test_rel_l2(p, pf, 3 * np), eu = test_rel_l2(u, uf, 3 * np);
    printf("%lld^3 fmm (eps %g) against fft: Psi %.2e, u %.2e\n", (long long)n, eps, ep, eu);
    CHECK_LE(ep, eps, "fmm Psi vs fft");
    CHECK_LE(eu, 10 * eps, "fmm u vs fft");
    CHECK_MSG(ep > 1e-12, "the fmm's Psi is the direct sum's: its far field was not used");
    free(omega), free(pf), free(uf), free(p), free(u), free(g.x);
}

/* One solver, many solves: omega again (a fmm plan keeps its points), omega doubled, then
 * another support, then a new grid; each against a fresh solver's result. */
static void test_repeated(fmk_poisson_method method)
{
    check_context("repeated solves, %s", fmk_poisson_method_name(method));
    grid g = grid_unit(20);
    const int64_t np = g.np;
    double *omega = test_alloc(3 * np), *p0 = test_alloc(3 * np), *u0 = test_alloc(3 * np);
    double *p = test_alloc(3 * np), *u = test_alloc(3 * np), *ref = test_alloc(3 * np);
    CHECK_STATUS(fmk_poisson_rings(np, g.x, omega, NULL, NULL), FMK_OK);
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = method;
    fmk_poisson *ps = NULL;
    CHECK_STATUS(fmk_poisson_create(&ps, 1e-8, &o), FMK_OK);
    CHECK_PLAN_OK(fmk_poisson_set_grid(ps, g.n[0], g.n[1], g.n[2], g.h, g.origin), NULL);
    CHECK_STATUS(fmk_poisson_solve(ps, 3, omega, p0, u0), FMK_OK);
    CHECK_STATUS(fmk_poisson_solve(ps, 3, omega, p, u), FMK_OK);
    CHECK_MSG(!memcmp(p, p0, sizeof(double) * 3 * np) && !memcmp(u, u0, sizeof(double) * 3 * np),
              "a second solve of the same omega differs");
    for (int64_t i = 0; i < 3 * np; i++)
        omega[i] *= 2, p0[i] *= 2;
    CHECK_STATUS(fmk_poisson_solve(ps, 3, omega, p, NULL), FMK_OK);
    CHECK_LE(test_rel_l2(p, p0, 3 * np), 1e-14, "Psi of 2 omega against 2 Psi");
    for (int64_t i = 0; i < np; i++) /* only the first ring: another support */
        if (g.x[3 * i + 2] > 0.5)
            omega[3 * i] = omega[3 * i + 1] = omega[3 * i + 2] = 0;
    CHECK_STATUS(fmk_poisson_solve(ps, 3, omega, p, u), FMK_OK);
    CHECK_STATUS(solve(method, 1e-8, 0, &g, 3, omega, ref, NULL), FMK_OK);
    CHECK_LE(test_rel_l2(p, ref, 3 * np), 1e-14, "another support against a fresh solver");
    fmk_poisson_info info;
    CHECK_STATUS(fmk_poisson_get_info(ps, &info), FMK_OK);
    CHECK(info.method == method && info.backend != FMK_BACKEND_AUTO && info.nx == 20);
    CHECK(info.components == 3 && info.n_sources > 0 && info.n_sources < np / 10);
    CHECK(info.bytes_host > 0 && info.smoothing == g.h && info.threads >= 1);
    /* a new grid on the same solver: the 16^3 rings */
    grid g2 = grid_unit(16);
    double *w2 = test_alloc(3 * g2.np), *p2 = test_alloc(3 * g2.np), *r2 = test_alloc(3 * g2.np);
    CHECK_STATUS(fmk_poisson_rings(g2.np, g2.x, w2, NULL, NULL), FMK_OK);
    CHECK_PLAN_OK(fmk_poisson_set_grid(ps, 16, 16, 16, g2.h, g2.origin), NULL);
    CHECK_STATUS(fmk_poisson_solve(ps, 3, w2, p2, NULL), FMK_OK);
    CHECK_STATUS(solve(method, 1e-8, 0, &g2, 3, w2, r2, NULL), FMK_OK);
    CHECK_LE(test_rel_l2(p2, r2, 3 * g2.np), 1e-14, "a second grid against a fresh solver");
    fmk_poisson_destroy(ps);
    free(omega), free(p0), free(u0), free(p), free(u), free(ref), free(g.x);
    free(w2), free(p2), free(r2), free(g2.x);
}

int main(void)
{
    if (!fmk_poisson_method_available(FMK_POISSON_FFT)) {
        printf("this build has no FFTW: only the direct and fmm checks run\n");
        test_repeated(FMK_POISSON_DIRECT);
        test_repeated(FMK_POISSON_FMM);
        return check_summary();
    }
    test_fft_vs_direct();
    test_methods_agree();
    test_fmm_far_field(32, 1e-3);
    test_fmm_far_field(SANITIZED ? 40 : 64, 1e-4); /* the sanitizer build's P2P is 10x slower */
    test_convergence();
    test_repeated(FMK_POISSON_FFT);
    test_repeated(FMK_POISSON_DIRECT);
    test_repeated(FMK_POISSON_FMM);
    return check_summary();
}
