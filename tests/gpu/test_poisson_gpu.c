/* test_poisson_gpu.c -- the Poisson solver's method fft on the GPU (src/poisson/fft_cuda.cu,
 * cuFFT) against method fft on the CPU (fft_cpu.c, FFTW), which computes the same convolution
 * with the same definitions: relative l2 differences <= 1e-13 for Psi and u.
 *
 *   match      grids 17 x 24 x 31 (odd and even sides), 1 x 1 x 1, 2 x 3 x 5, 32^3 and 72 x 64 x 40
 *              (omega's upload and the results' download in several pinned chunks); the vortex
 *              rings (fmk_poisson_rings) and random omega; 1 and 3 components, Psi only, u only
 *              and both; the default smoothing (h) and 2.5 h; a second solve on the same solver
 *              gives the same values; info: backend cuda, the sources counted, device bytes;
 *   oom        device memory taken (all but 1 MB free) around set_grid and around a first solve
 *              with u (the velocity's arrays are made then): FMK_ERR_DEVICE_NOMEM with a
 *              message, nothing written, no device memory kept by the failed call, and the
 *              solver works once the memory is back;
 *   interrupt  fmk_poisson_interrupt from a second thread: an interrupted set_grid leaves no
 *              grid, an interrupted solve writes nothing; the solver then gives the same
 *              results again.
 * Every comparison prints its difference beside the bound. Run: test_poisson_gpu [--cpu]
 * [--quick] [test ...] (match, oom, interrupt; all by default; --quick: small grids, for
 * compute-sanitizer); --cpu runs the "GPU" side on backend cpu
 * (the test's own logic checked without a GPU; oom skipped). Exit 77 without a CUDA device or
 * without method fft on the CPU (FFTW). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "fmmkit_poisson.h"
#include "../unit/check.h"
#include "../unit/interrupter.h"
#include "../unit/sentinel.h"

static fmk_backend tested = FMK_BACKEND_CUDA;
/* --quick: the small grids only (compute-sanitizer's memcheck runs every GPU test so) */
static int quick;

static double *alloc_doubles(int64_t n)
{
    double *p = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!p) {
        fprintf(stderr, "out of host memory\n");
        exit(2);
    }
    return p;
}

static double rel_l2(const double *a, const double *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* A solver of method fft on a backend, or NULL (the message printed). */
static fmk_poisson *make(fmk_backend backend, double smoothing)
{
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = FMK_POISSON_FFT;
    o.backend = backend;
    o.smoothing = smoothing;
    fmk_poisson *ps = NULL;
    const fmk_status st = fmk_poisson_create(&ps, 1e-6, &o);
    CHECK_MSG(st == FMK_OK, "create on %s: %s", fmk_backend_name(backend),
              fmk_poisson_last_error(NULL));
    return ps;
}

static int ok(fmk_status st, const fmk_poisson *ps, const char *what)
{
    return CHECK_MSG(st == FMK_OK, "%s: %s (%s)", what, fmk_status_string(st),
                     fmk_poisson_last_error(ps));
}

/* omega on an nx x ny x nz grid of spacing h (3 components, interleaved): the rings (the unit
 * cube's test problem, points at the cells' centres) or uniform random in [-1, 1]. */
static void make_omega(int rings, int64_t nx, int64_t ny, int64_t nz, double h, uint64_t seed,
                       double *omega)
{
    const int64_t np = nx * ny * nz;
    if (!rings) {
        uint64_t r = seed * 0x9e3779b97f4a7c15ull + 1;
        for (int64_t i = 0; i < 3 * np; i++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            omega[i] = 2 * ((double)(r >> 11) / 9007199254740992.0) - 1;
        }
        return;
    }
    double *x = alloc_doubles(3 * np);
    for (int64_t p = 0; p < np; p++) {
        x[3 * p] = h * ((double)(p % nx) + 0.5);
        x[3 * p + 1] = h * ((double)(p / nx % ny) + 0.5);
        x[3 * p + 2] = h * ((double)(p / (nx * ny)) + 0.5);
    }
    CHECK(fmk_poisson_rings(np, x, omega, NULL, NULL) == FMK_OK);
    free(x);
}

/* One component of 3-component omega, for nc = 1. */
static void first_component(int64_t np, const double *omega3, double *omega1)
{
    for (int64_t p = 0; p < np; p++)
        omega1[p] = omega3[3 * p];
}

/* The two backends on one grid, omega and smoothing: every output combination. */
static void match_case(int64_t nx, int64_t ny, int64_t nz, int rings, double smoothing_h)
{
    const int64_t np = nx * ny * nz;
    const double h = 1.0 / (double)(nx > ny ? (nx > nz ? nx : nz) : (ny > nz ? ny : nz));
    double *omega3 = alloc_doubles(3 * np), *omega1 = alloc_doubles(np);
    double *pc = alloc_doubles(3 * np), *uc = alloc_doubles(3 * np);
    double *pg = alloc_doubles(3 * np), *ug = alloc_doubles(3 * np), *p2 = alloc_doubles(3 * np);
    make_omega(rings, nx, ny, nz, h, (uint64_t)(nx * 131 + ny * 17 + nz), omega3);
    first_component(np, omega3, omega1);
    fmk_poisson *cpu = make(FMK_BACKEND_CPU, smoothing_h * h), *gpu = make(tested, smoothing_h * h);
    if (!cpu || !gpu || !ok(fmk_poisson_set_grid(cpu, nx, ny, nz, h, NULL), cpu, "set_grid cpu") ||
        !ok(fmk_poisson_set_grid(gpu, nx, ny, nz, h, NULL), gpu, "set_grid gpu"))
        goto done;
    static const struct {
        int nc, psi, u;
        const char *name;
    } kinds[] = {{1, 1, 0, "1 component, Psi"},
                 {3, 1, 0, "3 components, Psi"},
                 {3, 0, 1, "u only"},
                 {3, 1, 1, "Psi and u"}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        const int nc = kinds[k].nc;
        const double *omega = nc == 1 ? omega1 : omega3;
        check_context("match %lld x %lld x %lld, %s omega, smoothing %g h, %s", (long long)nx,
                      (long long)ny, (long long)nz, rings ? "rings" : "random", smoothing_h,
                      kinds[k].name);
        test_fill_sentinel(pg, 3 * np), test_fill_sentinel(ug, 3 * np);
        if (!ok(fmk_poisson_solve(cpu, nc, omega, kinds[k].psi ? pc : NULL, kinds[k].u ? uc : NULL),
                cpu, "solve cpu") ||
            !ok(fmk_poisson_solve(gpu, nc, omega, kinds[k].psi ? pg : NULL, kinds[k].u ? ug : NULL),
                gpu, "solve gpu"))
            continue;
        const double dp = kinds[k].psi ? rel_l2(pg, pc, nc * np) : 0;
        const double du = kinds[k].u ? rel_l2(ug, uc, 3 * np) : 0;
        fmk_poisson_info ic, ig;
        fmk_poisson_get_info(cpu, &ic), fmk_poisson_get_info(gpu, &ig);
        printf("  %3lld x %3lld x %3lld %-6s s %.1f h %-18s: Psi %.2e u %.2e (bound 1e-13); "
               "device %lld bytes\n",
               (long long)nx, (long long)ny, (long long)nz, rings ? "rings" : "random", smoothing_h,
               kinds[k].name, dp, du, (long long)ig.bytes_device);
        CHECK_MSG(dp <= 1e-13 && du <= 1e-13, "GPU vs CPU: Psi %.3e u %.3e", dp, du);
        CHECK_MSG(!kinds[k].psi || !test_untouched(pg, 1), "Psi not written");
        CHECK_MSG(kinds[k].psi || test_untouched(pg, 3 * np), "Psi written when not asked for");
        CHECK_MSG(kinds[k].u || test_untouched(ug, 3 * np), "u written when not asked for");
        CHECK_MSG(ig.n_sources == ic.n_sources, "sources: GPU %lld, CPU %lld",
                  (long long)ig.n_sources, (long long)ic.n_sources);
        CHECK(ig.backend == tested && ig.method == FMK_POISSON_FFT && ig.components == nc);
        CHECK(tested == FMK_BACKEND_CPU || ig.bytes_device > 0);
        if (kinds[k].psi) { /* the same solver again: the same values */
            if (ok(fmk_poisson_solve(gpu, nc, omega, p2, NULL), gpu, "solve gpu again"))
                CHECK_MSG(!memcmp(p2, pg, sizeof(double) * (size_t)(nc * np)),
                          "a second solve differs: %.3e", rel_l2(p2, pg, nc * np));
        }
    }
done:
    check_context("%s", "");
    fmk_poisson_destroy(cpu), fmk_poisson_destroy(gpu);
    free(omega3), free(omega1), free(pc), free(uc), free(pg), free(ug), free(p2);
}

static void test_match(void)
{
    printf("match: method fft, GPU against CPU, relative l2 differences\n");
    match_case(17, 24, 31, 1, 1.0);
    match_case(1, 1, 1, 0, 1.0);
    match_case(2, 3, 5, 0, 1.0);
    if (quick)
        return;
    match_case(17, 24, 31, 0, 2.5);
    match_case(32, 32, 32, 1, 1.0);
    match_case(72, 64, 40, 1, 2.5);
}

/* All but about 1 MB of the device's free memory, or NULL (cudaFree it). */
static void *take_device_memory(void)
{
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    size_t want = free_b > (2u << 20) ? free_b - (1u << 20) : 0;
    void *hog = NULL;
    while (want > 0 && cudaMalloc(&hog, want) != cudaSuccess) {
        cudaGetLastError();
        hog = NULL;
        want -= want > (1u << 20) ? (1u << 20) : want;
    }
    return hog;
}

static size_t device_free(void)
{
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return free_b;
}

/* Out of device memory at set_grid and at the first solve with u (the velocity's arrays). */
static void test_oom(void)
{
    if (tested != FMK_BACKEND_CUDA) {
        printf("oom: skipped (--cpu)\n");
        return;
    }
    const int64_t n = 48, np = n * n * n;
    const double h = 1.0 / n;
    double *omega = alloc_doubles(3 * np), *psi = alloc_doubles(3 * np), *u = alloc_doubles(3 * np);
    double *ref_psi = alloc_doubles(3 * np), *ref_u = alloc_doubles(3 * np);
    make_omega(1, n, n, n, h, 1, omega);
    printf("oom: device memory taken around set_grid and the first solve with u (48^3)\n");
    /* the reference, and every kernel loaded once, before memory runs out */
    fmk_poisson *ps = make(FMK_BACKEND_CUDA, 0);
    if (!ps || !ok(fmk_poisson_set_grid(ps, n, n, n, h, NULL), ps, "set_grid") ||
        !ok(fmk_poisson_solve(ps, 3, omega, ref_psi, ref_u), ps, "solve"))
        goto done;
    fmk_poisson_destroy(ps);
    ps = make(FMK_BACKEND_CUDA, 0);
    /* set_grid */
    check_context("oom, set_grid");
    void *hog = take_device_memory();
    size_t before = device_free();
    fmk_status st = fmk_poisson_set_grid(ps, n, n, n, h, NULL);
    size_t after = device_free();
    printf("  set_grid with %zu bytes free: %s: %s\n", before, fmk_status_string(st),
           fmk_poisson_last_error(ps));
    /* out of memory in a cudaMalloc of its own, or inside cuFFT's planning (whose failures
     * other than CUFFT_ALLOC_FAILED are FMK_ERR_DEVICE) */
    CHECK_MSG(st == FMK_ERR_DEVICE_NOMEM || st == FMK_ERR_DEVICE, "status %s",
              fmk_status_string(st));
    CHECK_MSG(st != FMK_ERR_DEVICE_NOMEM || strstr(fmk_poisson_last_error(ps), "memory"),
              "message: %s", fmk_poisson_last_error(ps));
    /* cuFFT may keep a page of its own after its first failure (as the runtime does: gpu_oom.h) */
    CHECK_MSG(after + (2u << 20) >= before,
              "device memory kept by a failed set_grid: %zu -> %zu free", before, after);
    CHECK(fmk_poisson_solve(ps, 3, omega, psi, NULL) == FMK_ERR_STATE); /* no grid */
    cudaFree(hog);
    /* the first solve with u: its arrays */
    check_context("oom, solve with u");
    if (!ok(fmk_poisson_set_grid(ps, n, n, n, h, NULL), ps, "set_grid") ||
        !ok(fmk_poisson_solve(ps, 3, omega, psi, NULL), ps, "solve (Psi)"))
        goto done;
    hog = take_device_memory();
    before = device_free();
    test_fill_sentinel(psi, 3 * np), test_fill_sentinel(u, 3 * np);
    st = fmk_poisson_solve(ps, 3, omega, psi, u);
    after = device_free();
    printf("  solve with u, %zu bytes free: %s: %s\n", before, fmk_status_string(st),
           fmk_poisson_last_error(ps));
    CHECK_MSG(st == FMK_ERR_DEVICE_NOMEM, "status %s", fmk_status_string(st));
    CHECK(test_untouched(psi, 3 * np) && test_untouched(u, 3 * np));
    CHECK_MSG(after + (2u << 20) >= before, "device memory kept by a failed solve: %zu -> %zu free",
              before, after);
    cudaFree(hog);
    /* and with the memory back, the solver's results */
    check_context("oom, after");
    if (ok(fmk_poisson_solve(ps, 3, omega, psi, u), ps, "solve after")) {
        const double dp = rel_l2(psi, ref_psi, 3 * np), du = rel_l2(u, ref_u, 3 * np);
        printf("  after: Psi %.2e u %.2e from the first solver's (bound 1e-15)\n", dp, du);
        CHECK_MSG(dp <= 1e-15 && du <= 1e-15, "Psi %.3e u %.3e", dp, du);
    }
done:
    check_context("%s", "");
    fmk_poisson_destroy(ps);
    free(omega), free(psi), free(u), free(ref_psi), free(ref_u);
}

/* fmk_poisson_interrupt from a second thread (every 2 ms): set_grid and solve stopped. */
static void test_interrupt(void)
{
    const int64_t n = quick ? 48 : 96, np = n * n * n;
    const double h = 1.0 / n;
    double *omega = alloc_doubles(3 * np), *psi = alloc_doubles(3 * np), *u = alloc_doubles(3 * np);
    double *ref_psi = alloc_doubles(3 * np), *ref_u = alloc_doubles(3 * np);
    make_omega(1, n, n, n, h, 2, omega);
    printf("interrupt: fmk_poisson_interrupt every 2 ms from a second thread (%lld^3)\n",
           (long long)n);
    fmk_poisson *ps = make(tested, 0);
    if (!ps)
        goto done;
    check_context("interrupt, set_grid");
    interrupter it = {NULL, 0, ps, 2000000};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, interrupt_loop, &it) == 0);
    fmk_status st = FMK_OK;
    int tries = 0;
    for (; tries < 200 && st == FMK_OK; tries++)
        st = fmk_poisson_set_grid(ps, n, n, n, h, NULL);
    CHECK_MSG(st == FMK_ERR_INTERRUPTED, "set_grid: %s after %d calls", fmk_status_string(st),
              tries);
    CHECK(fmk_poisson_solve(ps, 3, omega, psi, NULL) == FMK_ERR_STATE);
    atomic_store(&it.done, 1);
    pthread_join(thread, NULL);
    printf("  set_grid: %s after %d calls\n", fmk_status_string(st), tries);
    check_context("interrupt, solve");
    if (!ok(fmk_poisson_set_grid(ps, n, n, n, h, NULL), ps, "set_grid") ||
        !ok(fmk_poisson_solve(ps, 3, omega, ref_psi, ref_u), ps, "solve"))
        goto done;
    atomic_store(&it.done, 0);
    CHECK(pthread_create(&thread, NULL, interrupt_loop, &it) == 0);
    st = FMK_OK;
    for (tries = 0; tries < 200 && st == FMK_OK; tries++) {
        test_fill_sentinel(psi, 3 * np), test_fill_sentinel(u, 3 * np);
        st = fmk_poisson_solve(ps, 3, omega, psi, u);
    }
    atomic_store(&it.done, 1);
    pthread_join(thread, NULL);
    printf("  solve: %s after %d calls, %s\n", fmk_status_string(st), tries,
           fmk_poisson_last_error(ps));
    CHECK_MSG(st == FMK_ERR_INTERRUPTED, "solve: %s", fmk_status_string(st));
    CHECK(test_untouched(psi, 3 * np) && test_untouched(u, 3 * np));
    CHECK(!strcmp(fmk_poisson_last_error(ps), "interrupted"));
    if (ok(fmk_poisson_solve(ps, 3, omega, psi, u), ps, "solve after"))
        CHECK(!memcmp(psi, ref_psi, sizeof(double) * (size_t)(3 * np)) &&
              !memcmp(u, ref_u, sizeof(double) * (size_t)(3 * np)));
done:
    check_context("%s", "");
    fmk_poisson_destroy(ps);
    free(omega), free(psi), free(u), free(ref_psi), free(ref_u);
}

int main(int argc, char **argv)
{
    (void)count_check; /* (interrupter.h's check: this test interrupts from a thread) */
    int named = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--cpu") == 0)
            tested = FMK_BACKEND_CPU;
        else if (strcmp(argv[a], "--quick") == 0)
            quick = 1;
        else
            named = 1;
    }
    if (tested == FMK_BACKEND_CUDA && fmk_cuda_device_count() <= 0) {
        printf("no CUDA device: skipped (--cpu runs the cases on the CPU)\n");
        return 77;
    }
    fmk_poisson *probe = NULL;
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = FMK_POISSON_FFT;
    o.backend = FMK_BACKEND_CPU;
    if (fmk_poisson_create(&probe, 1e-6, &o) != FMK_OK) {
        printf("method fft on the CPU (the reference) is not in this build: skipped (%s)\n",
               fmk_poisson_last_error(NULL));
        return 77;
    }
    fmk_poisson_destroy(probe);
    static const struct {
        const char *name;
        void (*run)(void);
    } tests[] = {{"match", test_match}, {"oom", test_oom}, {"interrupt", test_interrupt}};
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int wanted = !named;
        for (int a = 1; a < argc; a++)
            wanted |= strcmp(argv[a], tests[i].name) == 0;
        if (wanted)
            tests[i].run();
    }
    return check_summary();
}
