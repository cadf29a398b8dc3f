/* test_poisson_blocks.c -- the Poisson solver on block grids (fmk_poisson_set_blocks,
 * include/fmmkit_poisson.h): its checks (NULL and empty grids, method fft), the info it reports;
 * method direct against a brute-force double loop over the grid's points written here (weights
 * h_j^3, smoothing h_min or as given, G(0) = 3/(2 eps)) on a three-level grid whose finest
 * blocks touch coarse ones, Psi and u; fmm against direct within eps; a uniform grid given as
 * blocks against set_grid on the same points; NaN in omega named by its block; interrupts (a
 * check, and fmk_poisson_interrupt from a second thread); results at chosen blocks. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fmmkit_poisson.h"
#include "interrupter.h"
#include "sentinel.h"
#include "testutil.h"
#include "poisson_check.h"


static fmk_poisson *make(fmk_poisson_method method, double eps, double smoothing)
{
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = method;
    o.smoothing = smoothing;
    fmk_poisson *ps = NULL;
    if (fmk_poisson_create(&ps, eps, &o) != FMK_OK)
        printf("create %s: %s\n", fmk_poisson_method_name(method), fmk_poisson_last_error(NULL));
    return ps;
}

/* The three-level grid: b = 4, h0 = 1/8, anchor a: the cube [0, 1)^3 + a of 2^3 level-0
 * regions, region (0, 0, 0) as 8 level-1 blocks of which (1, 0, 0) is 8 level-2 blocks (so
 * level 2 touches level 0 at x = 0.5); 22 blocks, added in two calls, levels mixed. */
static fmk_grid *three_levels(const double anchor[3])
{
    int32_t lv[22];
    int64_t ix[66];
    int m = 0;
    for (int c = 1; c < 8; c++, m++) /* level 0 and level 1 interleaved */
        for (int l = 0; l < 2; l++) {
            const int cc = l == 0 ? c : (c == 1 ? 0 : c);
            lv[2 * m + l] = l;
            for (int a = 0; a < 3; a++)
                ix[3 * (2 * m + l) + a] = cc >> a & 1;
        }
    for (int c = 0; c < 8; c++) {
        lv[14 + c] = 2;
        ix[3 * (14 + c)] = 2 + (c & 1), ix[3 * (14 + c) + 1] = c >> 1 & 1;
        ix[3 * (14 + c) + 2] = c >> 2 & 1;
    }
    fmk_grid *g = NULL;
    if (fmk_grid_create(&g, 4, 0.125, anchor) != FMK_OK ||
        fmk_grid_add_blocks_index(g, 10, lv, ix) != FMK_OK ||
        fmk_grid_add_blocks_index(g, 12, lv + 10, ix + 30) != FMK_OK)
        printf("three_levels: %s\n", fmk_poisson_last_error(NULL));
    return g;
}

/* Pseudo-random omega of nc components at np points, a third of the points all zero. */
static void random_omega(int64_t np, int nc, uint64_t seed, double *w)
{
    test_rng r = test_rng_seed(seed);
    for (int64_t p = 0; p < np; p++) {
        const int zero = test_uniform(&r) < 1.0 / 3;
        for (int a = 0; a < nc; a++)
            w[nc * p + a] = zero ? 0 : 2 * test_uniform(&r) - 1;
    }
}

/* The sums of docs/poisson.md by a double loop: Psi_i = 1/(4 pi) sum_j h_j^3 w_j G(|x_i - x_j|),
 * u_i = 1/(4 pi) sum_j h_j^3 grad G(x_i - x_j) x w_j, G(r) = (r^2 + 1.5 e^2) / (r^2 + e^2)^1.5. */
static void brute(int64_t np, const double *x, const double *hs, int nc, const double *w, double e,
                  double *psi, double *u)
{
    const double e2 = e * e, s = 0.0795774715459476678844418816862571; /* 1/(4 pi) */
    for (int64_t i = 0; i < np; i++) {
        long double p[3] = {0, 0, 0}, v[3] = {0, 0, 0};
        for (int64_t j = 0; j < np; j++) {
            const double d[3] = {x[3 * i] - x[3 * j], x[3 * i + 1] - x[3 * j + 1],
                                 x[3 * i + 2] - x[3 * j + 2]};
            const double q = d[0] * d[0] + d[1] * d[1] + d[2] * d[2], t = q + e2;
            const double vol = hs[j] * hs[j] * hs[j];
            const double G = (q + 1.5 * e2) / (t * sqrt(t)),
                         dG = -(q + 2.5 * e2) / (t * t * sqrt(t));
            for (int a = 0; a < nc; a++)
                p[a] += vol * w[nc * j + a] * G;
            if (u) /* grad G x w */
                for (int a = 0; a < 3; a++) {
                    const int b = (a + 1) % 3, c = (a + 2) % 3;
                    v[a] += vol * dG * (d[b] * w[3 * j + c] - d[c] * w[3 * j + b]);
                }
        }
        for (int a = 0; a < nc; a++)
            psi[nc * i + a] = s * (double)p[a];
        if (u)
            for (int a = 0; a < 3; a++)
                u[3 * i + a] = s * (double)v[a];
    }
}

static double rel_max(const double *a, const double *ref, int64_t n)
{
    double d = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs(a[i] - ref[i]));
        r = fmax(r, fabs(ref[i]));
    }
    return d / r;
}

static void test_set_blocks(void)
{
    check_context("set_blocks: arguments");
    fmk_grid *g = three_levels(NULL), *empty = NULL;
    CHECK_STATUS(fmk_grid_create(&empty, 8, 1, NULL), FMK_OK);
    fmk_poisson *ps = make(FMK_POISSON_DIRECT, 1e-6, 0);
    CHECK_STATUS(fmk_poisson_set_blocks(NULL, g), FMK_ERR_NULL);
    CHECK_STATUS(fmk_poisson_set_blocks(ps, NULL), FMK_ERR_NULL);
    CHECK(strstr(fmk_poisson_last_error(ps), "grid is NULL") != NULL);
    CHECK_STATUS(fmk_poisson_set_blocks(ps, empty), FMK_ERR_ARG);
    CHECK(strstr(fmk_poisson_last_error(ps), "no blocks") != NULL);
    CHECK_SOLVER_OK(fmk_poisson_set_blocks(ps, g), ps);
    CHECK_STATUS(fmk_poisson_set_blocks(ps, empty), FMK_ERR_ARG); /* keeps the grid */

    check_context("set_blocks: info");
    fmk_poisson_info info;
    fmk_poisson_get_info(ps, &info);
    CHECK(info.method == FMK_POISSON_DIRECT && info.backend == FMK_BACKEND_CPU);
    CHECK(info.n_points == 22 * 64 && info.n_blocks == 22);
    CHECK(info.h_min == 0.125 / 4 && info.h == info.h_min && info.smoothing == info.h_min);
    CHECK(info.nx == 0 && info.ny == 0 && info.nz == 0 && info.bytes_host > 0);
    double w[3 * 22 * 64], psi[3 * 22 * 64];
    random_omega(22 * 64, 3, 7, w);
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, w, psi, NULL), ps);
    fmk_poisson_get_info(ps, &info);
    int64_t nonzero = 0;
    for (int p = 0; p < 22 * 64; p++)
        nonzero += w[3 * p] != 0 || w[3 * p + 1] != 0 || w[3 * p + 2] != 0;
    CHECK(info.n_sources == nonzero && info.components == 3 && nonzero < 22 * 64);
    /* a uniform grid after the blocks, and the blocks again */
    CHECK_SOLVER_OK(fmk_poisson_set_grid(ps, 4, 4, 4, 0.1, NULL), ps);
    fmk_poisson_get_info(ps, &info);
    CHECK(info.n_blocks == 1 && info.n_points == 64 && info.nx == 4 && info.h_min == 0.1);
    CHECK_SOLVER_OK(fmk_poisson_set_blocks(ps, g), ps);
    fmk_poisson_destroy(ps);

    check_context("set_blocks: method fft");
    if (fmk_poisson_method_available(FMK_POISSON_FFT)) {
        ps = make(FMK_POISSON_FFT, 1e-6, 0);
        CHECK_SOLVER_OK(fmk_poisson_set_grid(ps, 4, 4, 4, 0.1, NULL), ps);
        CHECK_STATUS(fmk_poisson_set_blocks(ps, g), FMK_ERR_UNAVAILABLE);
        CHECK(strstr(fmk_poisson_last_error(ps), "uniform grids only") != NULL);
        fmk_poisson_get_info(ps, &info); /* the uniform grid stays */
        CHECK(info.n_points == 64 && info.method == FMK_POISSON_FFT);
        fmk_poisson_destroy(ps);
    } else
        printf("fft: not in this build\n");
    fmk_grid_destroy(g);
    fmk_grid_destroy(empty);
}

/* Method direct against the brute-force sum on the three-level grid, with the smoothing h_min
 * (default) and given; Psi and u of 3 components, Psi of 1. */
static void test_direct(void)
{
    enum { NP = 22 * 64 };
    const double anchor[3] = {-0.3, 0.2, 1.1};
    fmk_grid *g = three_levels(anchor);
    static double x[3 * NP], hs[NP], w[3 * NP], psi[3 * NP], u[3 * NP], rp[3 * NP], ru[3 * NP];
    CHECK_STATUS(fmk_grid_points(g, x, hs), FMK_OK);
    random_omega(NP, 3, 11, w);
    const double smoothing[2] = {0, 0.05};
    for (int s = 0; s < 2; s++) {
        check_context("direct vs brute force, smoothing %g", smoothing[s]);
        fmk_poisson *ps = make(FMK_POISSON_DIRECT, 1e-6, smoothing[s]);
        CHECK_SOLVER_OK(fmk_poisson_set_blocks(ps, g), ps);
        CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, w, psi, u), ps);
        const double e = smoothing[s] > 0 ? smoothing[s] : 0.125 / 4;
        brute(NP, x, hs, 3, w, e, rp, ru);
        printf("direct vs brute force, smoothing %g: rel l2 Psi %.2e, u %.2e\n", e,
               test_rel_l2(psi, rp, 3 * NP), test_rel_l2(u, ru, 3 * NP));
        CHECK_LE(test_rel_l2(psi, rp, 3 * NP), 1e-14, "rel l2 of Psi");
        CHECK_LE(rel_max(psi, rp, 3 * NP), 1e-13, "max error of Psi");
        CHECK_LE(test_rel_l2(u, ru, 3 * NP), 1e-14, "rel l2 of u");
        CHECK_LE(rel_max(u, ru, 3 * NP), 1e-13, "max error of u");
        /* one component: the y column alone */
        static double w1[NP], p1[NP], r1[NP];
        for (int p = 0; p < NP; p++)
            w1[p] = w[3 * p + 1];
        CHECK_SOLVER_OK(fmk_poisson_solve(ps, 1, w1, p1, NULL), ps);
        brute(NP, x, hs, 1, w1, e, r1, NULL);
        CHECK_LE(test_rel_l2(p1, r1, NP), 1e-14, "rel l2 of Psi_y alone");
        fmk_poisson_destroy(ps);
    }
    fmk_grid_destroy(g);
}

/* fmm against direct on a two-level grid of the rings (b = 8: region (0, 0, 0) at h = 1/32, the
 * rest at 1/16; 7680 points). */
static void test_fmm(void)
{
    int32_t lv[15];
    int64_t ix[45];
    for (int c = 0; c < 15; c++) {
        const int cc = c < 8 ? c : c - 7;
        lv[c] = c < 8 ? 1 : 0;
        for (int a = 0; a < 3; a++)
            ix[3 * c + a] = cc >> a & 1;
    }
    fmk_grid *g = NULL;
    CHECK_STATUS(fmk_grid_create(&g, 8, 1.0 / 16, NULL), FMK_OK);
    CHECK_STATUS(fmk_grid_add_blocks_index(g, 15, lv, ix), FMK_OK);
    const int64_t np = 15 * 512;
    double *x = test_alloc(3 * np), *w = test_alloc(3 * np);
    double *pd = test_alloc(3 * np), *ud = test_alloc(3 * np);
    double *pf = test_alloc(3 * np), *uf = test_alloc(3 * np);
    fmk_grid_points(g, x, NULL);
    fmk_poisson_rings(np, x, w, NULL, NULL);
    const double eps[2] = {1e-3, 1e-6};
    fmk_poisson *direct = make(FMK_POISSON_DIRECT, 1e-6, 0);
    CHECK_SOLVER_OK(fmk_poisson_set_blocks(direct, g), direct);
    CHECK_SOLVER_OK(fmk_poisson_solve(direct, 3, w, pd, ud), direct);
    for (int k = 0; k < 2; k++) {
        check_context("fmm at %g vs direct", eps[k]);
        fmk_poisson *ps = make(FMK_POISSON_FMM, eps[k], 0);
        CHECK_SOLVER_OK(fmk_poisson_set_blocks(ps, g), ps);
        CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, w, pf, uf), ps);
        printf("fmm at %g vs direct: rel l2 Psi %.2e, u %.2e\n", eps[k],
               test_rel_l2(pf, pd, 3 * np), test_rel_l2(uf, ud, 3 * np));
        CHECK_LE(test_rel_l2(pf, pd, 3 * np), eps[k], "rel l2 of Psi");
        CHECK_LE(test_rel_l2(uf, ud, 3 * np), eps[k], "rel l2 of u");
        fmk_poisson_destroy(ps);
    }
    fmk_poisson_destroy(direct);
    fmk_grid_destroy(g);
    free(x), free(w), free(pd), free(ud), free(pf), free(uf);
}

/* One level of 3 x 2 x 1 blocks (added out of order) against set_grid on the same points:
 * origin = anchor + h/2 (the cell centres). */
static void test_uniform_as_blocks(void)
{
    check_context("uniform grid as blocks");
    enum { B = 4, NX = 12, NY = 8, NZ = 4, NP = NX * NY * NZ };
    const double h = 0.1, anchor[3] = {0.3, -0.2, 0.05};
    const double origin[3] = {anchor[0] + h / 2, anchor[1] + h / 2, anchor[2] + h / 2};
    const int32_t lv[6] = {0, 0, 0, 0, 0, 0};
    const int64_t ix[18] = {2, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 2, 0, 0, 1, 0, 0};
    fmk_grid *g = NULL;
    CHECK_STATUS(fmk_grid_create(&g, B, h, anchor), FMK_OK);
    CHECK_STATUS(fmk_grid_add_blocks_index(g, 6, lv, ix), FMK_OK);
    static double wu[3 * NP], wb[3 * NP], pu[3 * NP], uu[3 * NP], pb[3 * NP], ub[3 * NP];
    static double xb[3 * NP];
    static int64_t map[NP]; /* block point -> uniform point */
    random_omega(NP, 3, 5, wu);
    for (int k = 0; k < 6; k++)
        for (int q = 0; q < B * B * B; q++) {
            const int64_t i = B * ix[3 * k] + q % B, j = B * ix[3 * k + 1] + q / B % B,
                          m = B * ix[3 * k + 2] + q / (B * B);
            map[k * B * B * B + q] = i + NX * (j + NY * m);
        }
    for (int p = 0; p < NP; p++)
        memcpy(wb + 3 * p, wu + 3 * map[p], sizeof(double) * 3);
    fmk_grid_points(g, xb, NULL);
    double worst = 0;
    for (int p = 0; p < NP; p++) {
        const int64_t t = map[p];
        const double xu[3] = {origin[0] + h * (double)(t % NX),
                              origin[1] + h * (double)(t / NX % NY),
                              origin[2] + h * (double)(t / (NX * NY))};
        for (int a = 0; a < 3; a++)
            worst = fmax(worst, fabs(xb[3 * p + a] - xu[a]));
    }
    CHECK_LE(worst, 1e-15, "|block point - uniform point|");
    fmk_poisson *su = make(FMK_POISSON_DIRECT, 1e-6, 0), *sb = make(FMK_POISSON_DIRECT, 1e-6, 0);
    CHECK_SOLVER_OK(fmk_poisson_set_grid(su, NX, NY, NZ, h, origin), su);
    CHECK_SOLVER_OK(fmk_poisson_set_blocks(sb, g), sb);
    CHECK_SOLVER_OK(fmk_poisson_solve(su, 3, wu, pu, uu), su);
    CHECK_SOLVER_OK(fmk_poisson_solve(sb, 3, wb, pb, ub), sb);
    double dp = 0, du = 0, mp = 0, mu = 0;
    for (int p = 0; p < NP; p++)
        for (int a = 0; a < 3; a++) {
            dp = fmax(dp, fabs(pb[3 * p + a] - pu[3 * map[p] + a]));
            du = fmax(du, fabs(ub[3 * p + a] - uu[3 * map[p] + a]));
            mp = fmax(mp, fabs(pu[3 * p + a])), mu = fmax(mu, fabs(uu[3 * p + a]));
        }
    printf("blocks vs set_grid: max rel difference Psi %.2e, u %.2e\n", dp / mp, du / mu);
    CHECK_LE(dp / mp, 1e-14, "max |Psi blocks - Psi set_grid| / max |Psi|");
    CHECK_LE(du / mu, 1e-14, "max |u blocks - u set_grid| / max |u|");
    fmk_poisson_destroy(su), fmk_poisson_destroy(sb);
    fmk_grid_destroy(g);
}

/* NaN and Inf in omega are named by block; nothing is written. */
static void test_nonfinite(void)
{
    enum { NP = 22 * 64 };
    fmk_grid *g = three_levels(NULL);
    static double w[3 * NP], psi[3 * NP], u[3 * NP];
    random_omega(NP, 3, 3, w);
    fmk_poisson *ps = make(FMK_POISSON_FMM, 1e-6, 0);
    CHECK_SOLVER_OK(fmk_poisson_set_blocks(ps, g), ps);
    const double bad[2] = {NAN, INFINITY};
    for (int i = 0; i < 2; i++) {
        check_context("omega %g on blocks", bad[i]);
        const int64_t p = 5 * 64 + 1 + 4 * (2 + 4 * 3); /* (1, 2, 3) of block 5 */
        const double keep = w[3 * p + 1];
        w[3 * p + 1] = bad[i];
        test_fill_sentinel(psi, 3 * NP), test_fill_sentinel(u, 3 * NP);
        CHECK_STATUS(fmk_poisson_solve(ps, 3, w, psi, u), FMK_ERR_NONFINITE);
        CHECK_MSG(strstr(fmk_poisson_last_error(ps), "component 1 of grid point (1, 2, 3) of "
                                                     "block 5") != NULL,
                  "message: %s", fmk_poisson_last_error(ps));
        CHECK(test_untouched(psi, 3 * NP) && test_untouched(u, 3 * NP));
        w[3 * p + 1] = keep;
    }
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, w, psi, u), ps);
    fmk_poisson_destroy(ps);
    fmk_grid_destroy(g);
}

/* A check that says stop at its first call stops a solve on blocks (method direct, 2 x 2 x 1
 * blocks of 16^3 points, 0.05 s or more a solve): nothing written, and the solver carries on. */
static void test_interrupt(void)
{
    check_context("interrupt on blocks");
    const int32_t lv[4] = {0, 0, 0, 0};
    const int64_t ix[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0};
    fmk_grid *g = NULL;
    CHECK_STATUS(fmk_grid_create(&g, 16, 1.0 / 32, NULL), FMK_OK);
    CHECK_STATUS(fmk_grid_add_blocks_index(g, 4, lv, ix), FMK_OK);
    const int64_t np = 4 * 4096;
    double *w = test_alloc(3 * np), *ref = test_alloc(3 * np), *psi = test_alloc(3 * np);
    random_omega(np, 3, 9, w);
    for (int64_t p = 0; p < np; p++) /* a fifth of the points as sources */
        if (p % 5)
            w[3 * p] = w[3 * p + 1] = w[3 * p + 2] = 0;
    fmk_poisson *ps = make(FMK_POISSON_DIRECT, 1e-6, 0);
    CHECK_SOLVER_OK(fmk_poisson_set_blocks(ps, g), ps);
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, w, ref, NULL), ps);
    check_solve_interrupts(ps, w, psi, ref, 3 * np);
    fmk_poisson_destroy(ps);
    fmk_grid_destroy(g);
    free(w), free(ref), free(psi);
}

/* Results at chosen blocks (fmk_poisson_set_targets): methods direct and treecode (which makes
 * bricks for the chosen blocks only) give the full solve's values there, bit for bit, in the
 * order chosen; n = 0 chooses every point again; the refusals. */
static void test_targets(void)
{
    const double anchor[3] = {0, 0, 0};
    fmk_grid *g = three_levels(anchor);
    int64_t np = 0;
    fmk_grid_get(g, NULL, &np, NULL, NULL, NULL, NULL);
    double *w = malloc(sizeof(double) * 3 * np), *full = malloc(sizeof(double) * 3 * np),
           *fu = malloc(sizeof(double) * 3 * np), *part = malloc(sizeof(double) * 3 * np),
           *pu = malloc(sizeof(double) * 3 * np);
    random_omega(np, 3, 11, w);
    const int64_t chosen[5] = {17, 0, 5, 21, 9}, b3 = 64;
    const fmk_poisson_method methods[2] = {FMK_POISSON_DIRECT, FMK_POISSON_TREECODE};
    for (int k = 0; k < 2; k++) {
        fmk_poisson *ps = make(methods[k], 1e-6, 0);
        CHECK_SOLVER_OK(fmk_poisson_set_blocks(ps, g), ps);
        CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, w, full, fu), ps);
        CHECK_SOLVER_OK(fmk_poisson_set_targets(ps, 5, chosen), ps);
        fmk_poisson_info in;
        fmk_poisson_get_info(ps, &in);
        CHECK(in.n_targets == 5 && in.n_target_points == 5 * b3);
        test_fill_sentinel(part, 3 * np);
        CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, w, part, pu), ps);
        int same = 1;
        for (int t = 0; t < 5; t++)
            same &= !memcmp(part + 3 * b3 * t, full + 3 * b3 * chosen[t],
                            sizeof(double) * 3 * (size_t)b3) &&
                    !memcmp(pu + 3 * b3 * t, fu + 3 * b3 * chosen[t], sizeof(double) * 3 * (size_t)b3);
        CHECK(same);
        CHECK(test_untouched(part + 3 * 5 * b3, 3 * np - 3 * 5 * b3));
        if (methods[k] == FMK_POISSON_TREECODE) {
            fmk_poisson_get_info(ps, &in);
            CHECK(in.n_bricks == 5); /* b = 4: a brick per block */
        }
        /* every point again */
        CHECK_SOLVER_OK(fmk_poisson_set_targets(ps, 0, NULL), ps);
        CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, w, part, NULL), ps);
        CHECK(!memcmp(part, full, sizeof(double) * 3 * (size_t)np));
        /* refusals, the choice unchanged */
        const int64_t bad1[2] = {3, 22}, bad2[3] = {1, 2, 1};
        CHECK_STATUS(fmk_poisson_set_targets(ps, 2, bad1), FMK_ERR_ARG);
        CHECK(strstr(fmk_poisson_last_error(ps), "out of range") != NULL);
        CHECK_STATUS(fmk_poisson_set_targets(ps, 3, bad2), FMK_ERR_ARG);
        CHECK(strstr(fmk_poisson_last_error(ps), "repeated") != NULL);
        CHECK_STATUS(fmk_poisson_set_targets(ps, 2, NULL), FMK_ERR_NULL);
        CHECK_STATUS(fmk_poisson_set_targets(ps, -1, chosen), FMK_ERR_ARG);
        fmk_poisson_get_info(ps, &in);
        CHECK(in.n_targets == 0 && in.n_target_points == np);
        fmk_poisson_destroy(ps);
    }
    fmk_poisson *u = make(FMK_POISSON_DIRECT, 1e-6, 0);
    CHECK_STATUS(fmk_poisson_set_targets(u, 1, chosen), FMK_ERR_STATE);
    CHECK_SOLVER_OK(fmk_poisson_set_grid(u, 4, 4, 4, 0.25, NULL), u);
    CHECK_STATUS(fmk_poisson_set_targets(u, 1, chosen), FMK_ERR_ARG);
    CHECK_STATUS(fmk_poisson_set_targets(NULL, 1, chosen), FMK_ERR_NULL);
    fmk_poisson_destroy(u);
    fmk_grid_destroy(g);
    free(w), free(full), free(fu), free(part), free(pu);
}

int main(void)
{
    test_targets();
    test_set_blocks();
    test_direct();
    test_fmm();
    test_uniform_as_blocks();
    test_nonfinite();
    test_interrupt();
    return check_summary();
}
