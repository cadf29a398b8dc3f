/* test_poisson_treecode.c -- the Poisson solver's method treecode (docs/poisson.md, "The
 * treecode") against method direct, the exact sum, by relative l2 error:
 *
 *  - uniform grids (22 x 24 x 20, h = 0.37, an offset origin) and a block grid of two levels
 *    side by side; the rings' smooth omega and random omega in a ball; 1 and 3 components,
 *    Psi and u; eps 1e-2, 1e-4, 1e-6, 1e-8: Psi and u within eps, the errors falling with eps.
 *    With the smoothing eps = h the kernel keeps every source within 37 h (eps 1e-6) summed
 *    directly, which covers these grids: every eps runs with smoothing h/64 too, where the far
 *    field is used (checked: far_pairs > 0);
 *  - explicit order 2..12 at theta 0.5: the error falls with the order;
 *  - the plans reused while the support of omega is the same (time_plans = 0, the same
 *    results) and made again when it changes (right results);
 *  - one source point; every grid point a source; omega in one block of a multi-block grid; a
 *    block far from the others (so far that the sources' Morton keys are coarsened);
 *  - eps out of range; the info fields; an interrupted solve writes nothing (the check, and
 *    fmk_poisson_interrupt from a second thread). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fmmkit_poisson.h"
#include "interrupter.h"
#include "sentinel.h"
#include "testutil.h"
#include "poisson_check.h"


/* A grid: uniform (grid NULL: n, h, origin) or blocks; its points (np x 3). */
typedef struct problem {
    const fmk_grid *grid;
    int64_t n[3];
    double h, origin[3];
    int64_t np;
    double *x;
} problem;

static problem uniform(int64_t nx, int64_t ny, int64_t nz, double h, const double origin[3])
{
    problem p = {NULL, {nx, ny, nz}, h, {origin[0], origin[1], origin[2]}, nx * ny * nz, NULL};
    p.x = test_alloc(3 * p.np);
    for (int64_t q = 0; q < p.np; q++) {
        const int64_t i[3] = {q % nx, q / nx % ny, q / (nx * ny)};
        for (int k = 0; k < 3; k++)
            p.x[3 * q + k] = origin[k] + h * (double)i[k];
    }
    return p;
}

static problem blocks(const fmk_grid *grid)
{
    problem p = {grid, {0, 0, 0}, 0, {0, 0, 0}, 0, NULL};
    CHECK_STATUS(fmk_grid_get(grid, NULL, &p.np, NULL, NULL, NULL, NULL), FMK_OK);
    p.x = test_alloc(3 * p.np);
    CHECK_STATUS(fmk_grid_points(grid, p.x, NULL), FMK_OK);
    return p;
}

static fmk_poisson *make(fmk_poisson_method method, double eps, double smoothing, int order,
                         double theta, const problem *pb)
{
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = method;
    o.smoothing = smoothing;
    o.order = order;
    o.theta = theta;
    o.backend = FMK_BACKEND_CPU;
    fmk_poisson *ps = NULL;
    if (fmk_poisson_create(&ps, eps, &o) != FMK_OK) {
        printf("create: %s\n", fmk_poisson_last_error(NULL));
        return NULL;
    }
    if (pb->grid)
        CHECK_SOLVER_OK(fmk_poisson_set_blocks(ps, pb->grid), ps);
    else
        CHECK_SOLVER_OK(fmk_poisson_set_grid(ps, pb->n[0], pb->n[1], pb->n[2], pb->h, pb->origin),
                        ps);
    return ps;
}

/* One solve on a fresh solver (nc components; u when u != NULL); info filled when given. */
static void solve(fmk_poisson_method method, double eps, double smoothing, int order, double theta,
                  const problem *pb, int nc, const double *omega, double *psi, double *u,
                  fmk_poisson_info *info)
{
    fmk_poisson *ps = make(method, eps, smoothing, order, theta, pb);
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, nc, omega, psi, u), ps);
    if (info)
        CHECK_STATUS(fmk_poisson_get_info(ps, info), FMK_OK);
    fmk_poisson_destroy(ps);
}

/* The errors of the treecode (eps, smoothing; order and theta 0: from eps) against the exact
 * sum pd, ud (method direct's; ud NULL: Psi only). */
typedef struct errors {
    double psi, u;
    fmk_poisson_info info;
} errors;

static errors against(const problem *pb, int nc, const double *omega, const double *pd,
                      const double *ud, double eps, double smoothing, int order, double theta)
{
    const int64_t np = pb->np;
    double *pt = test_alloc(nc * np), *ut = test_alloc(3 * np);
    errors e = {0, 0, {0}};
    solve(FMK_POISSON_TREECODE, eps, smoothing, order, theta, pb, nc, omega, pt, ud ? ut : NULL,
          &e.info);
    e.psi = test_rel_l2(pt, pd, nc * np);
    e.u = ud ? test_rel_l2(ut, ud, 3 * np) : 0;
    free(pt), free(ut);
    return e;
}

/* The same, with method direct's sum made here. */
static errors against_direct(const problem *pb, int nc, const double *omega, int velocity,
                             double eps, double smoothing, int order, double theta)
{
    double *pd = test_alloc(nc * pb->np), *ud = test_alloc(3 * pb->np);
    solve(FMK_POISSON_DIRECT, 1e-6, smoothing, 0, 0, pb, nc, omega, pd, velocity ? ud : NULL, NULL);
    const errors e = against(pb, nc, omega, pd, velocity ? ud : NULL, eps, smoothing, order, theta);
    free(pd), free(ud);
    return e;
}

/* omega: the rings (3 components at the points, in the unit cube as given) or random in
 * [-1, 1] inside the ball of radius 0.3 (in units of the grid's extent) about its middle. */
static double *rings_omega(const problem *pb, double scale)
{
    double *omega = test_alloc(3 * pb->np), *y = test_alloc(3 * pb->np);
    for (int64_t i = 0; i < 3 * pb->np; i++)
        y[i] = pb->x[i] * scale;
    CHECK_STATUS(fmk_poisson_rings(pb->np, y, omega, NULL, NULL), FMK_OK);
    free(y);
    return omega;
}

static double *ball_omega(const problem *pb, uint64_t seed)
{
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int64_t q = 0; q < pb->np; q++)
        for (int k = 0; k < 3; k++)
            lo[k] = fmin(lo[k], pb->x[3 * q + k]), hi[k] = fmax(hi[k], pb->x[3 * q + k]);
    double *omega = test_alloc(3 * pb->np), *q3 = test_alloc(3 * pb->np);
    test_charges(3 * pb->np, 0, seed, q3);
    for (int64_t q = 0; q < pb->np; q++) {
        double r2 = 0;
        for (int k = 0; k < 3; k++) {
            const double d = (pb->x[3 * q + k] - 0.5 * (lo[k] + hi[k])) / (hi[k] - lo[k]);
            r2 += d * d;
        }
        for (int a = 0; a < 3; a++)
            omega[3 * q + a] = r2 < 0.09 ? q3[3 * q + a] : 0;
    }
    free(q3);
    return omega;
}

/* The accuracy sweep on one grid and omega: eps 1e-2 .. 1e-8, Psi and u within eps and
 * falling; with smoothing h/64 too (first_pass 1: that one only). far_used[i]: the cases at
 * EPS[i] whose far field was used (test_accuracy checks that each eps has some). */
static const double EPS[4] = {1e-2, 1e-4, 1e-6, 1e-8};
static int far_used[4];

static void sweep(const char *what, const problem *pb, const double *omega, double h_min,
                  int first_pass)
{
    double *pd = test_alloc(3 * pb->np), *ud = test_alloc(3 * pb->np);
    for (int pass = first_pass; pass < 2; pass++) {
        const double smoothing = pass ? h_min / 64 : 0;
        solve(FMK_POISSON_DIRECT, 1e-6, smoothing, 0, 0, pb, 3, omega, pd, ud, NULL);
        double last_psi = INFINITY, last_u = INFINITY;
        for (int i = 0; i < 4; i++) {
            const double eps = EPS[i];
            check_context("%s, eps %g, smoothing %s", what, eps, pass ? "h/64" : "h");
            const errors e = against(pb, 3, omega, pd, ud, eps, smoothing, 0, 0);
            printf("%-24s eps %.0e smoothing %-4s: Psi %.2e u %.2e (p %2d, theta %.2f, far "
                   "pairs %.3g, direct %.3g)\n",
                   what, eps, pass ? "h/64" : "h", e.psi, e.u, e.info.order, e.info.theta,
                   e.info.far_pairs, e.info.direct_pairs);
            CHECK_LE(e.psi, eps, "Psi, treecode vs direct");
            CHECK_LE(e.u, eps, "u, treecode vs direct");
            CHECK_MSG(e.psi <= last_psi * 1.01 + 1e-14 && e.u <= last_u * 1.01 + 1e-14,
                      "the errors (%.2e, %.2e) did not fall from (%.2e, %.2e) as eps fell", e.psi,
                      e.u, last_psi, last_u);
            far_used[i] += e.info.far_pairs > 0;
            last_psi = e.psi, last_u = e.u;
            if (!pass) { /* Psi alone: its plans reach closer (the kernel distance of Psi) */
                const errors ep = against(pb, 3, omega, pd, NULL, eps, smoothing, 0, 0);
                printf("%-24s eps %.0e smoothing h   : Psi alone %.2e (far pairs %.3g, direct "
                       "%.3g)\n",
                       what, eps, ep.psi, ep.info.far_pairs, ep.info.direct_pairs);
                CHECK_LE(ep.psi, eps, "Psi alone, treecode vs direct");
                CHECK_MSG(ep.info.direct_pairs <= e.info.direct_pairs,
                          "Psi alone summed more pairs directly (%.3g) than with u (%.3g)",
                          ep.info.direct_pairs, e.info.direct_pairs);
            }
        }
    }
    free(pd), free(ud);
}

/* Two levels side by side: a 2 x 2 x 2 arrangement of level-0 blocks of b = 8 whose block
 * (0, 0, 0) is refined into 8 level-1 blocks; h0 = 1/16, anchor 0 (so the rings' first ring,
 * at (0.25, 0.25, 0.25), sits across the refined block and its neighbours). */
static fmk_grid *two_levels(void)
{
    fmk_grid *g = NULL;
    CHECK_STATUS(fmk_grid_create(&g, 8, 1.0 / 16, NULL), FMK_OK);
    int32_t levels[15];
    int64_t index[45];
    int m = 0;
    for (int c = 1; c < 8; c++, m++) {
        levels[m] = 0;
        for (int a = 0; a < 3; a++)
            index[3 * m + a] = c >> a & 1;
    }
    for (int c = 0; c < 8; c++, m++) {
        levels[m] = 1;
        for (int a = 0; a < 3; a++)
            index[3 * m + a] = c >> a & 1;
    }
    CHECK_STATUS(fmk_grid_add_blocks_index(g, m, levels, index), FMK_OK);
    return g;
}

static void test_accuracy(void)
{
    const double origin[3] = {-1.2, 3.4, 0.5};
    problem pb = uniform(22, 24, 20, 0.37, origin);
    double *omega = ball_omega(&pb, 31);
    sweep("uniform, random ball", &pb, omega, 0.37, 0);
    free(omega), free(pb.x);

    pb = uniform(24, 24, 24, 1.0 / 24, (const double[3]){0.5 / 24, 0.5 / 24, 0.5 / 24});
    omega = rings_omega(&pb, 0.5); /* the first ring fills the grid */
    sweep("uniform, rings", &pb, omega, 1.0 / 24, 0);
    free(omega), free(pb.x);

    fmk_grid *g = two_levels();
    pb = blocks(g);
    omega = rings_omega(&pb, 1.0);
    sweep("two levels, rings", &pb, omega, 1.0 / 32, 0);
    free(omega);
    omega = ball_omega(&pb, 32);
    sweep("two levels, random ball", &pb, omega, 1.0 / 32, 0);
    free(omega), free(pb.x);
    fmk_grid_destroy(g);

    /* a ball of 7000 sources in 40^3 points: the far field at every eps (smoothing h/64) */
    pb = uniform(40, 40, 40, 1.0, (const double[3]){0, 0, 0});
    omega = ball_omega(&pb, 37);
    sweep("uniform 40^3, ball", &pb, omega, 1.0, SANITIZED); /* 10x slower there: h/64 only */
    free(omega), free(pb.x);
    for (int i = 0; i < 4; i++)
        CHECK_MSG(far_used[i] > 0, "eps %g: no case used the far field", EPS[i]);
}

/* One component, Psi only, against component 2 of omega solved alone by direct; and the
 * velocity without Psi. */
static void test_components(void)
{
    check_context("components");
    fmk_grid *g = two_levels();
    problem pb = blocks(g);
    double *omega = rings_omega(&pb, 1.0), *w1 = test_alloc(pb.np);
    for (int64_t q = 0; q < pb.np; q++)
        w1[q] = omega[3 * q + 2];
    const errors e1 = against_direct(&pb, 1, w1, 0, 1e-5, 1.0 / 32 / 8, 0, 0);
    printf("one component, eps 1e-5: Psi %.2e (far pairs %.3g)\n", e1.psi, e1.info.far_pairs);
    CHECK_LE(e1.psi, 1e-5, "Psi of one component");
    CHECK(e1.info.components == 1 && e1.info.far_pairs > 0);
    /* u alone */
    double *ud = test_alloc(3 * pb.np), *ut = test_alloc(3 * pb.np);
    solve(FMK_POISSON_DIRECT, 1e-6, 0, 0, 0, &pb, 3, omega, NULL, ud, NULL);
    solve(FMK_POISSON_TREECODE, 1e-3, 0, 0, 0, &pb, 3, omega, NULL, ut, NULL);
    const double eu = test_rel_l2(ut, ud, 3 * pb.np);
    printf("u alone, eps 1e-3: %.2e\n", eu);
    CHECK_LE(eu, 1e-3, "u without Psi");
    free(omega), free(w1), free(ud), free(ut), free(pb.x);
    fmk_grid_destroy(g);
}

/* Explicit orders at theta 0.5 (smoothing h/16: the far field carries most of the sum): the
 * error falls with the order. */
static void test_orders(void)
{
    check_context("orders");
    problem pb = uniform(24, 24, 24, 1.0, (const double[3]){0, 0, 0});
    double *omega = ball_omega(&pb, 33);
    double last = INFINITY;
    for (int p = 2; p <= 12; p += 2) {
        const errors e = against_direct(&pb, 3, omega, 1, 1e-2, 1.0 / 16, p, 0.5);
        printf("order %2d, theta 0.5: Psi %.2e u %.2e\n", p, e.psi, e.u);
        CHECK(e.info.order == p && e.info.theta == 0.5);
        CHECK_MSG(e.psi < last, "order %d: Psi's error %.2e did not fall (%.2e)", p, e.psi, last);
        last = e.psi;
    }
    CHECK_LE(last, 1e-7, "order 12 at theta 0.5");
    free(omega), free(pb.x);
}

/* Plans kept while the support is the same, made again when it changes. */
static void test_plans_reused(void)
{
    check_context("plans reused");
    fmk_grid *g = two_levels();
    problem pb = blocks(g);
    const int64_t np = pb.np;
    double *omega = rings_omega(&pb, 1.0);
    double *p0 = test_alloc(3 * np), *u0 = test_alloc(3 * np), *p = test_alloc(3 * np),
           *u = test_alloc(3 * np), *ref = test_alloc(3 * np);
    fmk_poisson *ps = make(FMK_POISSON_TREECODE, 1e-4, 0, 0, 0, &pb);
    fmk_poisson_info info;
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, omega, p0, u0), ps);
    CHECK_STATUS(fmk_poisson_get_info(ps, &info), FMK_OK);
    CHECK(info.time_plans > 0 && info.n_nodes > 0 && info.n_bricks == 15 * 1);
    CHECK(info.leaf_size > 0 && info.order > 0 && info.theta > 0 && info.direct_pairs > 0);
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, omega, p, u), ps);
    CHECK_STATUS(fmk_poisson_get_info(ps, &info), FMK_OK);
    CHECK_MSG(info.time_plans == 0, "the same omega: the plans were made again");
    CHECK(!memcmp(p, p0, sizeof(double) * 3 * np) && !memcmp(u, u0, sizeof(double) * 3 * np));
    for (int64_t i = 0; i < 3 * np; i++) /* the same support, other values */
        omega[i] *= omega[i] > 0 ? 2 : -0.5;
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, omega, p, u), ps);
    CHECK_STATUS(fmk_poisson_get_info(ps, &info), FMK_OK);
    CHECK_MSG(info.time_plans == 0, "the same support: the plans were made again");
    solve(FMK_POISSON_DIRECT, 1e-6, 0, 0, 0, &pb, 3, omega, ref, NULL, NULL);
    CHECK_LE(test_rel_l2(p, ref, 3 * np), 1e-4, "new values on the same support");
    for (int64_t q = 0; q < np; q++) /* the second ring only: another support */
        if (pb.x[3 * q] < 0.5)
            omega[3 * q] = omega[3 * q + 1] = omega[3 * q + 2] = 0;
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, omega, p, NULL), ps);
    CHECK_STATUS(fmk_poisson_get_info(ps, &info), FMK_OK);
    CHECK_MSG(info.time_plans > 0, "another support: the plans were kept");
    solve(FMK_POISSON_DIRECT, 1e-6, 0, 0, 0, &pb, 3, omega, ref, NULL, NULL);
    CHECK_LE(test_rel_l2(p, ref, 3 * np), 1e-4, "another support");
    /* no vorticity: zero, then the rings again */
    memset(omega, 0, sizeof(double) * 3 * np);
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, omega, p, u), ps);
    int zero = 1;
    for (int64_t i = 0; i < 3 * np; i++)
        zero &= p[i] == 0 && u[i] == 0;
    CHECK(zero);
    free(omega);
    omega = rings_omega(&pb, 1.0);
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, omega, p, u), ps);
    CHECK(!memcmp(p, p0, sizeof(double) * 3 * np) && !memcmp(u, u0, sizeof(double) * 3 * np));
    fmk_poisson_destroy(ps);
    free(omega), free(p0), free(u0), free(p), free(u), free(ref), free(pb.x);
    fmk_grid_destroy(g);
}

/* A case against direct at eps 1e-3 with smoothing h_min/64 (the far field used where the grid
 * allows) and at 1e-6 with smoothing h_min, Psi and u. */
static void edge_case(const char *what, const problem *pb, const double *omega, double h_min)
{
    check_context("%s", what);
    errors e = against_direct(pb, 3, omega, 1, 1e-3, h_min / 64, 0, 0);
    printf("%-36s Psi %.2e u %.2e (sources %lld, nodes %lld, far pairs %.3g)\n", what, e.psi, e.u,
           (long long)e.info.n_sources, (long long)e.info.n_nodes, e.info.far_pairs);
    CHECK_LE(e.psi, 1e-3, "Psi");
    CHECK_LE(e.u, 1e-3, "u");
    e = against_direct(pb, 3, omega, 1, 1e-6, 0, 0, 0);
    printf("%-36s Psi %.2e u %.2e (sources %lld, nodes %lld, far pairs %.3g)\n", what, e.psi, e.u,
           (long long)e.info.n_sources, (long long)e.info.n_nodes, e.info.far_pairs);
    CHECK_LE(e.psi, 1e-6, "Psi");
    CHECK_LE(e.u, 1e-6, "u");
}

static void test_edge_cases(void)
{
    problem pb = uniform(17, 9, 12, 0.5, (const double[3]){1, 2, 3});
    double *omega = test_alloc(3 * pb.np);
    memset(omega, 0, sizeof(double) * 3 * pb.np);
    omega[3 * 700] = 1, omega[3 * 700 + 1] = -2, omega[3 * 700 + 2] = 0.5;
    edge_case("one source point", &pb, omega, 0.5);
    test_charges(3 * pb.np, 0, 34, omega);
    edge_case("every grid point a source", &pb, omega, 0.5);
    free(omega), free(pb.x);

    fmk_grid *g = two_levels();
    pb = blocks(g);
    omega = test_alloc(3 * pb.np);
    memset(omega, 0, sizeof(double) * 3 * pb.np);
    test_charges(3 * 512, 0, 35, omega + 3 * 512 * 9); /* block 9: a level-1 block */
    edge_case("omega in one block of 15", &pb, omega, 1.0 / 32);
    free(omega), free(pb.x);
    fmk_grid_destroy(g);

    /* a cluster of 2 x 2 x 1 level-1 blocks and one level-0 block at index 2^17 along x
     * (2^21 finest spacings away: the sources' keys lose their last bit) */
    g = NULL;
    CHECK_STATUS(fmk_grid_create(&g, 8, 1.0, NULL), FMK_OK);
    const int32_t levels[5] = {1, 1, 1, 1, 0};
    const int64_t index[15] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0, (int64_t)1 << 17, 0, 0};
    CHECK_STATUS(fmk_grid_add_blocks_index(g, 5, levels, index), FMK_OK);
    pb = blocks(g);
    omega = test_alloc(3 * pb.np);
    test_charges(3 * pb.np, 0, 36, omega);
    edge_case("a block 2^21 h away", &pb, omega, 0.5);
    free(omega), free(pb.x);
    fmk_grid_destroy(g);
}

static void test_api(void)
{
    check_context("api");
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = FMK_POISSON_TREECODE;
    fmk_poisson *ps = NULL;
    const double bad[3] = {2e-2, 1e-11, 0.5};
    for (int i = 0; i < 3; i++) {
        CHECK_STATUS(fmk_poisson_create(&ps, bad[i], &o), FMK_ERR_ARG);
        CHECK(ps == NULL && strstr(fmk_poisson_last_error(NULL), "treecode"));
    }
    CHECK(fmk_poisson_method_available(FMK_POISSON_TREECODE));
    CHECK_STATUS(fmk_poisson_create(&ps, 1e-10, &o), FMK_OK);
    fmk_poisson_destroy(ps);
}

/* Stopped by the check and from a second thread: nothing written; the solver carries on. */
static void test_interrupt(void)
{
    check_context("interrupt");
    problem pb = uniform(40, 40, 40, 1.0 / 40, (const double[3]){0.5 / 40, 0.5 / 40, 0.5 / 40});
    double *omega = rings_omega(&pb, 1.0);
    double *ref = test_alloc(3 * pb.np), *psi = test_alloc(3 * pb.np);
    fmk_poisson *ps = make(FMK_POISSON_TREECODE, 1e-6, 0, 0, 0, &pb);
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, omega, ref, NULL), ps);
    check_solve_interrupts(ps, omega, psi, ref, 3 * pb.np);
    fmk_poisson_destroy(ps);
    free(omega), free(ref), free(psi), free(pb.x);
}

int main(void)
{
    test_api();
    test_accuracy();
    test_components();
    test_orders();
    test_plans_reused();
    test_edge_cases();
    test_interrupt();
    return check_summary();
}
