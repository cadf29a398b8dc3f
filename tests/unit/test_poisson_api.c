/* test_poisson_api.c -- the Poisson solver's checks of its input, its failures and interrupts
 * (include/fmmkit_poisson.h): every bad argument of create, set_grid and solve gets its status
 * and a message and leaves the solver as it was; NaN or Inf in omega and results that overflow
 * write nothing; an interrupted set_grid leaves the solver without a grid, an interrupted solve
 * writes nothing, and both leave the solver usable; fmk_poisson_interrupt from a second
 * thread stops a solve. For methods fft, direct and fmm. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "fmmkit_poisson.h"
#include "interrupter.h"
#include "sentinel.h"
#include "testutil.h"
#include "poisson_check.h"


static const fmk_poisson_method METHODS[3] = {FMK_POISSON_FFT, FMK_POISSON_DIRECT, FMK_POISSON_FMM};

/* On the CPU: the timings these tests rely on (a check that runs after 10 ms of work) are the
 * CPU's; tests/gpu/test_poisson_gpu.c has the GPU's interrupts and failures. */
static fmk_poisson *make_eps(fmk_poisson_method method, double eps)
{
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = method;
    o.backend = FMK_BACKEND_CPU;
    fmk_poisson *ps = NULL;
    if (fmk_poisson_create(&ps, eps, &o) != FMK_OK)
        printf("create %s: %s\n", fmk_poisson_method_name(method), fmk_poisson_last_error(NULL));
    return ps;
}

static fmk_poisson *make(fmk_poisson_method method)
{
    return make_eps(method, 1e-6);
}

/* A create that must fail with status; *solver is then NULL and there is a message. */
static void create_fails(const fmk_poisson_opts *o, double eps, fmk_status status, const char *what)
{
    check_context("create: %s", what);
    fmk_poisson *ps = (fmk_poisson *)&ps; /* not NULL: create must clear it */
    CHECK_STATUS(fmk_poisson_create(&ps, eps, o), status);
    CHECK(ps == NULL);
    CHECK(strlen(fmk_poisson_last_error(NULL)) > 10);
    fmk_poisson_destroy(ps);
}

static void test_create(void)
{
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    check_context("create");
    CHECK_STATUS(fmk_poisson_create(NULL, 1e-6, NULL), FMK_ERR_NULL);
    const double bad_eps[4] = {0, 1, -1e-3, NAN};
    for (int i = 0; i < 4; i++)
        create_fails(&o, bad_eps[i], FMK_ERR_ARG, "eps out of (0, 1)");
    fmk_poisson_opts b = o;
    b.method = (fmk_poisson_method)7;
    create_fails(&b, 1e-6, FMK_ERR_ARG, "method 7");
    b = o, b.backend = (fmk_backend)9;
    create_fails(&b, 1e-6, FMK_ERR_ARG, "backend 9");
    if (fmk_cuda_device_count() == 0) {
        b = o, b.backend = FMK_BACKEND_CUDA, b.method = FMK_POISSON_DIRECT;
        create_fails(&b, 1e-6, FMK_ERR_UNAVAILABLE, "backend cuda without a device");
    }
    b = o, b.hybrid = 1, b.backend = FMK_BACKEND_CPU;
    create_fails(&b, 1e-6, FMK_ERR_ARG, "hybrid on the CPU");
    b = o, b.theta = 1;
    create_fails(&b, 1e-6, FMK_ERR_ARG, "theta 1");
    b = o, b.order = -1;
    create_fails(&b, 1e-6, FMK_ERR_ARG, "order -1");
    const double bad_smoothing[3] = {-1, NAN, INFINITY};
    for (int i = 0; i < 3; i++) {
        b = o, b.smoothing = bad_smoothing[i];
        create_fails(&b, 1e-6, FMK_ERR_ARG, "smoothing");
    }
    b = o, b.threads = -1;
    create_fails(&b, 1e-6, FMK_ERR_ARG, "threads -1");
    b = o, b.threads = FMK_THREADS_MAX + 1;
    create_fails(&b, 1e-6, FMK_ERR_ARG, "threads above FMK_THREADS_MAX");
    b = o, b.verbose = 2;
    create_fails(&b, 1e-6, FMK_ERR_ARG, "verbose 2");
    b = o, b.method = FMK_POISSON_FMM;
    create_fails(&b, 0.5, FMK_ERR_ARG, "fmm at eps 0.5 (it takes up to 1e-2)");

    check_context("create: defaults");
    fmk_poisson *ps = NULL;
    CHECK_STATUS(fmk_poisson_create(&ps, 1e-6, NULL), FMK_OK);
    fmk_poisson_info info;
    CHECK_STATUS(fmk_poisson_get_info(ps, &info), FMK_OK);
    CHECK(info.method == FMK_POISSON_AUTO); /* resolved by the grid */
    CHECK(info.nx == 0 && info.eps == 1e-6);
    CHECK_STATUS(fmk_poisson_set_grid(ps, 4, 5, 6, 0.1, NULL), FMK_OK);
    CHECK_STATUS(fmk_poisson_get_info(ps, &info), FMK_OK);
    if (fmk_poisson_method_available(FMK_POISSON_FFT) && fmk_cuda_device_count() == 0)
        CHECK(info.method == FMK_POISSON_FFT && info.backend == FMK_BACKEND_CPU);
    CHECK(info.nx == 4 && info.n_points == 120 && info.n_blocks == 1);
    CHECK_STATUS(fmk_poisson_get_info(ps, NULL), FMK_ERR_NULL);
    CHECK_STATUS(fmk_poisson_get_info(NULL, &info), FMK_ERR_NULL);
    fmk_poisson_destroy(ps);
    fmk_poisson_destroy(NULL);
    CHECK(!strcmp(fmk_poisson_method_name(FMK_POISSON_FFT), "fft"));
    CHECK(fmk_poisson_method_name((fmk_poisson_method)9) == NULL);
    CHECK(fmk_poisson_method_available(FMK_POISSON_DIRECT) == 1);
    CHECK(fmk_poisson_method_available((fmk_poisson_method)9) == 0);
}

/* The rings on the 16^3 grid, and the solver's results for them. */
enum { N = 16, NP = N * N * N };
static double grid_x[3 * NP], grid_omega[3 * NP];
static const double H = 1.0 / N, ORIGIN[3] = {0.5 / N, 0.5 / N, 0.5 / N};

static void grid_init(void)
{
    for (int p = 0; p < NP; p++) {
        grid_x[3 * p] = ORIGIN[0] + H * (p % N);
        grid_x[3 * p + 1] = ORIGIN[1] + H * (p / N % N);
        grid_x[3 * p + 2] = ORIGIN[2] + H * (p / (N * N));
    }
    if (fmk_poisson_rings(NP, grid_x, grid_omega, NULL, NULL) != FMK_OK)
        printf("fmk_poisson_rings: %s\n", fmk_poisson_last_error(NULL));
}

static void test_set_grid(fmk_poisson_method method)
{
    check_context("set_grid, %s", fmk_poisson_method_name(method));
    fmk_poisson *ps = make(method);
    double ref[3 * NP], psi[3 * NP];
    CHECK_STATUS(fmk_poisson_set_grid(NULL, N, N, N, H, ORIGIN), FMK_ERR_NULL);
    CHECK_SOLVER_OK(fmk_poisson_set_grid(ps, N, N, N, H, ORIGIN), ps);
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, grid_omega, ref, NULL), ps);
    const int64_t big = (int64_t)1 << 20;
    const struct {
        int64_t n[3];
        double h;
        const double *origin;
        fmk_status status;
        const char *what;
    } bad[] = {
        {{0, N, N}, H, ORIGIN, FMK_ERR_ARG, "nx = 0"},
        {{N, -1, N}, H, ORIGIN, FMK_ERR_ARG, "ny = -1"},
        {{N, N, big + 1}, H, ORIGIN, FMK_ERR_ARG, "nz = 2^20 + 1"},
        {{big, big, 2}, H, ORIGIN, FMK_ERR_ARG, "2^41 points"},
        {{N, N, N}, 0, ORIGIN, FMK_ERR_ARG, "h = 0"},
        {{N, N, N}, -H, ORIGIN, FMK_ERR_ARG, "h < 0"},
        {{N, N, N}, NAN, ORIGIN, FMK_ERR_ARG, "h = NaN"},
        {{N, N, N}, INFINITY, ORIGIN, FMK_ERR_ARG, "h = Inf"},
        {{N, N, N}, H, (const double[3]){0, NAN, 0}, FMK_ERR_NONFINITE, "origin NaN"},
        {{N, N, N}, 1e307, (const double[3]){0, 1.7e308, 0}, FMK_ERR_NONFINITE, "last point Inf"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        check_context("set_grid, %s: %s", fmk_poisson_method_name(method), bad[i].what);
        CHECK_STATUS(fmk_poisson_set_grid(ps, bad[i].n[0], bad[i].n[1], bad[i].n[2], bad[i].h,
                                          bad[i].origin),
                     bad[i].status);
        CHECK(strlen(fmk_poisson_last_error(ps)) > 10);
    }
    /* the solver kept its grid through every refused call */
    check_context("set_grid, %s: kept", fmk_poisson_method_name(method));
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, grid_omega, psi, NULL), ps);
    CHECK(!memcmp(psi, ref, sizeof psi));
    fmk_poisson_destroy(ps);

    /* the smoothing within 2^-20 .. 2^20 grid spacings */
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = method;
    const double smoothing[2] = {1e-7, 2e6};
    for (int i = 0; i < 2; i++) {
        check_context("set_grid, %s: smoothing %g h", fmk_poisson_method_name(method),
                      smoothing[i]);
        o.smoothing = smoothing[i];
        CHECK_STATUS(fmk_poisson_create(&ps, 1e-6, &o), FMK_OK);
        CHECK_STATUS(fmk_poisson_set_grid(ps, N, N, N, 1.0, NULL), FMK_ERR_ARG);
        CHECK(strstr(fmk_poisson_last_error(ps), "2^-20 h") != NULL);
        fmk_poisson_destroy(ps);
    }
}

static void test_solve(fmk_poisson_method method)
{
    const char *name = fmk_poisson_method_name(method);
    check_context("solve, %s", name);
    fmk_poisson *ps = make(method);
    double psi[3 * NP], u[3 * NP], omega[3 * NP];
    test_fill_sentinel(psi, 3 * NP);
    CHECK_STATUS(fmk_poisson_solve(NULL, 3, grid_omega, psi, NULL), FMK_ERR_NULL);
    CHECK_STATUS(fmk_poisson_solve(ps, 3, grid_omega, psi, NULL), FMK_ERR_STATE);
    CHECK_SOLVER_OK(fmk_poisson_set_grid(ps, N, N, N, H, ORIGIN), ps);
    CHECK_STATUS(fmk_poisson_solve(ps, 2, grid_omega, psi, NULL), FMK_ERR_ARG);
    CHECK_STATUS(fmk_poisson_solve(ps, 0, grid_omega, psi, NULL), FMK_ERR_ARG);
    CHECK_STATUS(fmk_poisson_solve(ps, 3, NULL, psi, NULL), FMK_ERR_NULL);
    CHECK_STATUS(fmk_poisson_solve(ps, 3, grid_omega, NULL, NULL), FMK_ERR_NULL);
    CHECK_STATUS(fmk_poisson_solve(ps, 1, grid_omega, psi, u), FMK_ERR_ARG);
    CHECK(strstr(fmk_poisson_last_error(ps), "3 components") != NULL);
    CHECK(test_untouched(psi, 3 * NP));

    /* NaN and Inf in omega: named, nothing written */
    const double bad[2] = {NAN, -INFINITY};
    for (int i = 0; i < 2; i++) {
        check_context("solve, %s: omega %g", name, bad[i]);
        memcpy(omega, grid_omega, sizeof omega);
        omega[3 * (5 + N * (6 + N * 7)) + 2] = bad[i];
        test_fill_sentinel(u, 3 * NP);
        CHECK_STATUS(fmk_poisson_solve(ps, 3, omega, psi, u), FMK_ERR_NONFINITE);
        CHECK(strstr(fmk_poisson_last_error(ps), "grid point (5, 6, 7)") != NULL);
        CHECK(test_untouched(psi, 3 * NP) && test_untouched(u, 3 * NP));
    }
    /* results beyond the doubles: 1e300 at every point of a grid with h = 1e100 */
    check_context("solve, %s: overflow", name);
    fmk_poisson *big = make(method);
    CHECK_SOLVER_OK(fmk_poisson_set_grid(big, N, N, N, 1e100, NULL), big);
    for (int i = 0; i < 3 * NP; i++)
        omega[i] = 1e300;
    CHECK_STATUS(fmk_poisson_solve(big, 3, omega, psi, u), FMK_ERR_NONFINITE);
    CHECK(strlen(fmk_poisson_last_error(big)) > 10);
    CHECK(test_untouched(psi, 3 * NP) && test_untouched(u, 3 * NP));
    fmk_poisson_destroy(big);
    /* no vorticity, no flow */
    check_context("solve, %s: omega = 0", name);
    memset(omega, 0, sizeof omega);
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, omega, psi, u), ps);
    int zero = 1;
    for (int i = 0; i < 3 * NP; i++)
        zero &= psi[i] == 0 && u[i] == 0;
    CHECK(zero);
    fmk_poisson_destroy(ps);
}


/* Interrupts on a grid where a solve takes 30 ms or more (the check runs every 10 ms): 64^3
 * for fft, 32^3 for the sums; the fmm at eps 1e-3, whose leaves are small enough (at 1e-6
 * the regularized kernel's boxes are 32 h wide: the 32^3 grid is one leaf, one P2P block,
 * which runs to its end). */
static void test_interrupt(fmk_poisson_method method)
{
    const int M = method == FMK_POISSON_FFT ? 64 : 32, MP = M * M * M;
    const char *name = fmk_poisson_method_name(method);
    check_context("interrupt, %s", name);
    double *x = test_alloc(3 * MP), *omega = test_alloc(3 * MP);
    double *ref = test_alloc(3 * MP), *psi = test_alloc(3 * MP);
    const double h = 1.0 / M;
    for (int p = 0; p < MP; p++) {
        x[3 * p] = h * (p % M + 0.5), x[3 * p + 1] = h * (p / M % M + 0.5);
        x[3 * p + 2] = h * (p / (M * M) + 0.5);
    }
    CHECK_STATUS(fmk_poisson_rings(MP, x, omega, NULL, NULL), FMK_OK);
    fmk_poisson *ps = make_eps(method, method == FMK_POISSON_FMM ? 1e-3 : 1e-6);
    counter c = {0, 1};
    CHECK_STATUS(fmk_poisson_set_interrupt(NULL, count_check, &c), FMK_ERR_NULL);
    CHECK_STATUS(fmk_poisson_interrupt(NULL), FMK_ERR_NULL);
    if (method == FMK_POISSON_FFT) { /* set_grid does work worth stopping only for fft */
        CHECK_STATUS(fmk_poisson_set_interrupt(ps, count_check, &c), FMK_OK);
        const double t0 = (double)clock();
        fmk_status st;
        /* the check runs only after 10 ms of work: a fast machine may finish first */
        while ((st = fmk_poisson_set_grid(ps, 2 * M, 2 * M, 2 * M, h, NULL)) == FMK_OK &&
               (double)clock() - t0 < 5.0 * CLOCKS_PER_SEC)
            ;
        CHECK_STATUS(st, FMK_ERR_INTERRUPTED);
        CHECK(!strcmp(fmk_poisson_last_error(ps), "interrupted"));
        CHECK_STATUS(fmk_poisson_solve(ps, 3, omega, psi, NULL), FMK_ERR_STATE);
        CHECK_STATUS(fmk_poisson_set_interrupt(ps, NULL, NULL), FMK_OK);
    }
    CHECK_SOLVER_OK(fmk_poisson_set_grid(ps, M, M, M, h, NULL), ps);
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, omega, ref, NULL), ps);
    /* stopped by the check and from a second thread: nothing written, the solver carries on */
    check_solve_interrupts(ps, omega, psi, ref, 3 * MP);
    fmk_poisson_destroy(ps);
    free(x), free(omega), free(ref), free(psi);
}

int main(void)
{
    grid_init();
    test_create();
    for (int m = 0; m < 3; m++) {
        if (!fmk_poisson_method_available(METHODS[m])) {
            printf("%s: not in this build\n", fmk_poisson_method_name(METHODS[m]));
            fmk_poisson *ps = NULL;
            fmk_poisson_opts o;
            fmk_poisson_opts_default(&o);
            o.method = METHODS[m];
            CHECK_STATUS(fmk_poisson_create(&ps, 1e-6, &o), FMK_ERR_UNAVAILABLE);
            continue;
        }
        test_set_grid(METHODS[m]);
        test_solve(METHODS[m]);
        test_interrupt(METHODS[m]);
    }
    return check_summary();
}
