/* test_poisson_alloc.c -- host allocation failure in the Poisson solver, for methods fft, direct,
 * fmm and treecode (CPU) on a uniform grid and direct, fmm and treecode on a block grid
 * (set_blocks), and in the block grids' own calls (fmk_grid_create, add_blocks,
 * fmk_poisson_rings_grid: a failed call returns FMK_ERR_NOMEM with a message and leaves the
 * grid as it was): create + set_grid (or set_blocks) + two solves (the rings' 3 components with
 * Psi and u, then one component of another support, which remakes the plan of the sums and the
 * treecode's tree and plans) run with the k-th allocation made by the library failing, for k = 1, 2, ... until a run makes fewer than k
 * allocations; a second sweep fails every allocation from the k-th on. Each failing call must
 * return FMK_ERR_NOMEM with a message and write nothing, and the solver must stay usable: a
 * failed set_grid leaves it without a grid (solve: FMK_ERR_STATE) until set_grid succeeds, a
 * failed solve is followed by one that gives the clean run's results. Under the sanitizer
 * build LeakSanitizer checks that nothing leaks.
 *
 * The library's malloc, calloc, realloc, posix_memalign and aligned_alloc are redirected here
 * by the linker (as tests/unit/test_alloc_fail.c); FFTW is a shared library, so its own small
 * allocations (plans, twiddles) are not counted: FFTW aborts when those fail. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fmmkit_poisson.h"
#include "sentinel.h"

#include "alloc_shim.h"

enum { N = 12, NP = N * N * N };
static const double H = 1.0 / N, ORIGIN[3] = {0.5 / N, 0.5 / N, 0.5 / N};
static double omega[3 * NP], omega1[NP];
static double ref_psi[3 * NP], ref_u[3 * NP], ref_psi1[NP];
static double psi[3 * NP], u[3 * NP], psi1[NP];
static fmk_grid *blocks; /* NULL: the uniform grid; else this block grid */
static int64_t np;       /* the grid's points */

/* The block grid: b = 4, h0 = 1/8, region [0, 1/2)^3 as 8 level-1 blocks, 3 level-0 blocks
 * (704 points). Made with no failure injected. */
static fmk_grid *make_blocks(void)
{
    const int32_t lv[11] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0};
    int64_t ix[33] = {0};
    for (int c = 0; c < 8; c++)
        for (int a = 0; a < 3; a++)
            ix[3 * c + a] = c >> a & 1;
    const int64_t coarse[9] = {1, 0, 0, 0, 1, 0, 1, 1, 1};
    memcpy(ix + 24, coarse, sizeof coarse);
    fmk_grid *g = NULL;
    if (fmk_grid_create(&g, 4, 0.125, NULL) != FMK_OK ||
        fmk_grid_add_blocks_index(g, 11, lv, ix) != FMK_OK)
        printf("make_blocks: %s\n", fmk_poisson_last_error(NULL));
    return g;
}

static void make_inputs(void)
{
    static double x[3 * NP];
    np = NP;
    if (blocks) {
        fmk_grid_get(blocks, NULL, &np, NULL, NULL, NULL, NULL);
        fmk_grid_points(blocks, x, NULL);
    } else
        for (int p = 0; p < NP; p++) {
            x[3 * p] = ORIGIN[0] + H * (p % N);
            x[3 * p + 1] = ORIGIN[1] + H * (p / N % N);
            x[3 * p + 2] = ORIGIN[2] + H * (p / (N * N));
        }
    if (fmk_poisson_rings(np, x, omega, NULL, NULL) != FMK_OK)
        printf("fmk_poisson_rings: %s\n", fmk_poisson_last_error(NULL));
    for (int p = 0; p < np; p++) /* component x of the first ring alone: another support */
        omega1[p] = x[3 * p + 2] < 0.5 ? omega[3 * p] : 0;
}

static fmk_status set_grid(fmk_poisson *ps)
{
    return blocks ? fmk_poisson_set_blocks(ps, blocks)
                  : fmk_poisson_set_grid(ps, N, N, N, H, ORIGIN);
}

static fmk_status create(fmk_poisson_method method, fmk_poisson **ps)
{
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = method;
    o.threads = 1; /* the same operations in the same order: results equal bit for bit */
    if (method == FMK_POISSON_TREECODE)
        o.backend = FMK_BACKEND_CPU; /* its GPU part: tests/gpu/test_poisson_tc_gpu.c */
    return fmk_poisson_create(ps, 1e-6, &o);
}

static fmk_status solve(fmk_poisson *ps, int which)
{
    return which == 0 ? fmk_poisson_solve(ps, 3, omega, psi, u)
                      : fmk_poisson_solve(ps, 1, omega1, psi1, NULL);
}

static int same(int which)
{
    const size_t n = sizeof(double) * (size_t)np;
    return which == 0 ? !memcmp(psi, ref_psi, 3 * n) && !memcmp(u, ref_u, 3 * n)
                      : !memcmp(psi1, ref_psi1, n);
}

static void clear_outputs(void)
{
    test_fill_sentinel(psi, 3 * np), test_fill_sentinel(u, 3 * np), test_fill_sentinel(psi1, np);
}

static int untouched(int which)
{
    return which == 0 ? test_untouched(psi, 3 * np) && test_untouched(u, 3 * np)
                      : test_untouched(psi1, np);
}

/* One run with allocation k failing (and every later one when is_sticky). Returns 1 when the
 * run made fewer than k allocations: the sweep is done. */
static int run_once(fmk_poisson_method method, long k, int is_sticky)
{
    fmk_poisson *ps = NULL;
    calls = 0, fail_at = k, sticky = is_sticky;
    int stage = 0; /* 0 create, 1 set_grid, 2 and 3 the solves */
    fmk_status st = create(method, &ps);
    if (st == FMK_OK)
        stage = 1, st = set_grid(ps);
    for (int which = 0; which < 2 && st == FMK_OK; which++) {
        stage = 2 + which;
        clear_outputs();
        st = solve(ps, which);
        if (st == FMK_OK)
            CHECK_MSG(same(which), "solve %d: the results differ from a clean run", which);
    }
    const long made = calls;
    fail_at = 0;
    const char *msg = fmk_poisson_last_error(stage > 0 ? ps : NULL);
    if (made < k) {
        CHECK_MSG(st == FMK_OK, "a run without failures failed: %s", msg);
        fmk_poisson_destroy(ps);
        return 1;
    }
    if (st == FMK_OK) {
        /* an allocation the library can do without (the FMM has some): not an error, and the
         * results were the same (checked above) */
        tolerated++;
        fmk_poisson_destroy(ps);
        return 0;
    }
    static const char *stages[4] = {"create", "set_grid", "solve 0", "solve 1"};
    CHECK_MSG(st == FMK_ERR_NOMEM, "%s returned %d (%s) after allocation %ld failed: \"%s\"",
              stages[stage], (int)st, fmk_status_string(st), k, msg);
    CHECK_MSG(msg[0] != '\0', "%s failed (allocation %ld) with an empty message", stages[stage], k);
    if (stage == 0) {
        CHECK(ps == NULL);
        return 0;
    }
    if (stage == 1) {
        CHECK_STATUS(fmk_poisson_solve(ps, 3, omega, psi, u), FMK_ERR_STATE);
        CHECK_MSG(set_grid(ps) == FMK_OK, "set_grid after a failed one: %s",
                  fmk_poisson_last_error(ps));
    } else {
        CHECK_MSG(untouched(stage - 2), "%s failed (allocation %ld) but wrote its outputs",
                  stages[stage], k);
    }
    for (int which = stage == 3 ? 1 : 0; which < 2; which++) {
        clear_outputs();
        CHECK_MSG(solve(ps, which) == FMK_OK, "solve %d after the failure: %s", which,
                  fmk_poisson_last_error(ps));
        CHECK_MSG(same(which), "solve %d after the failure: the results differ", which);
    }
    fmk_poisson_destroy(ps);
    return 0;
}

/* Both sweeps for each method the grid takes (fft: uniform grids only). */
static void sweep(int use_blocks)
{
    const fmk_poisson_method methods[4] = {FMK_POISSON_FFT, FMK_POISSON_DIRECT, FMK_POISSON_FMM,
                                           FMK_POISSON_TREECODE};
    const char *grid = use_blocks ? "blocks" : "uniform";
    for (int m = use_blocks ? 1 : 0; m < 4; m++) {
        if (!fmk_poisson_method_available(methods[m]))
            continue;
        const char *name = fmk_poisson_method_name(methods[m]);
        check_context("%s on %s, clean run", name, grid);
        fmk_poisson *ps = NULL;
        fmk_status st = create(methods[m], &ps);
        if (st == FMK_OK)
            st = set_grid(ps);
        if (st == FMK_OK)
            st = fmk_poisson_solve(ps, 3, omega, ref_psi, ref_u);
        if (st == FMK_OK)
            st = fmk_poisson_solve(ps, 1, omega1, ref_psi1, NULL);
        CHECK_MSG(st == FMK_OK, "%s", fmk_poisson_last_error(ps));
        fmk_poisson_destroy(ps);
        for (int s = 0; s < 2; s++) {
            long k = 1;
            check_context("%s on %s, %s failures", name, grid, s ? "sticky" : "single");
            while (!run_once(methods[m], k, s))
                k++;
            printf("%s on %s: %ld allocations, each failed in turn (%s); %ld tolerated\n", name,
                   grid, k - 1, s ? "and every one after it" : "alone", tolerated);
            tolerated = 0;
        }
    }
}

/* One run of the grid calls with allocation k failing (every later one when is_sticky):
 * create, add_blocks (corners), add_blocks_index, the rings' grid. Returns 1 when the run made
 * fewer than k allocations. */
static int grid_once(long k, int is_sticky)
{
    calls = 0, fail_at = k, sticky = is_sticky;
    fmk_grid *g = NULL, *rg = NULL;
    int64_t nb[3] = {-1, -1, -1};
    const int32_t lv[8] = {1, 1, 1, 1, 1, 1, 1, 1}, l0[3] = {0, 0, 0};
    int64_t ix[24];
    for (int c = 0; c < 8; c++)
        for (int a = 0; a < 3; a++)
            ix[3 * c + a] = c >> a & 1;
    const double corners[9] = {0.5, 0, 0, 0, 0.5, 0, 0.5, 0.5, 0.5};
    fmk_status st[4];
    st[0] = fmk_grid_create(&g, 4, 0.125, NULL);
    const char *msg0 = fmk_poisson_last_error(NULL);
    CHECK_MSG(st[0] == FMK_OK || (g == NULL && msg0[0]), "create: a failure without a message");
    st[1] = st[2] = FMK_ERR_NOMEM;
    if (g) {
        fmk_grid_get(g, &nb[0], NULL, NULL, NULL, NULL, NULL);
        st[1] = fmk_grid_add_blocks(g, 3, l0, corners);
        fmk_grid_get(g, &nb[1], NULL, NULL, NULL, NULL, NULL);
        st[2] = fmk_grid_add_blocks_index(g, 8, lv, ix);
        fmk_grid_get(g, &nb[2], NULL, NULL, NULL, NULL, NULL);
        CHECK_MSG(nb[1] == (st[1] == FMK_OK ? 3 : 0), "add_blocks: %lld blocks after status %d",
                  (long long)nb[1], (int)st[1]);
        CHECK_MSG(nb[2] == nb[1] + (st[2] == FMK_OK ? 8 : 0),
                  "add_blocks_index: %lld blocks after status %d", (long long)nb[2], (int)st[2]);
    }
    st[3] = fmk_poisson_rings_grid(&rg, 16, 4, 1e-4);
    const long made = calls;
    fail_at = 0;
    CHECK_MSG(st[3] == FMK_OK || rg == NULL, "rings_grid failed but returned a grid");
    for (int i = 0; i < 4; i++)
        CHECK_MSG(st[i] == FMK_OK || st[i] == FMK_ERR_NOMEM, "call %d returned %d (%s)", i,
                  (int)st[i], fmk_status_string(st[i]));
    if (made < k)
        CHECK_MSG(st[0] == FMK_OK && st[1] == FMK_OK && st[2] == FMK_OK && st[3] == FMK_OK,
                  "a run without failures failed: %s", fmk_poisson_last_error(NULL));
    fmk_grid_destroy(g);
    fmk_grid_destroy(rg);
    return made < k;
}

int main(void)
{
    for (int s = 0; s < 2; s++) {
        long k = 1;
        check_context("grid calls, %s failures", s ? "sticky" : "single");
        while (!grid_once(k, s))
            k++;
        printf("grid calls: %ld allocations, each failed in turn (%s)\n", k - 1,
               s ? "and every one after it" : "alone");
    }
    for (int use_blocks = 0; use_blocks < 2; use_blocks++) {
        blocks = use_blocks ? make_blocks() : NULL;
        memset(ref_psi, 0, sizeof ref_psi), memset(ref_u, 0, sizeof ref_u);
        memset(ref_psi1, 0, sizeof ref_psi1);
        make_inputs();
        sweep(use_blocks);
        fmk_grid_destroy(blocks);
    }
    return check_summary();
}
