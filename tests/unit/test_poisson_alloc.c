/* test_poisson_alloc.c -- host allocation failure in the Poisson solver, for methods fft, direct,
 * fmm and treecode: create + set_grid + two solves (the rings' 3 components with Psi and u, then one
 * component of another support, which remakes the plan of the sums) run with the k-th
 * allocation made by the library failing, for k = 1, 2, ... until a run makes fewer than k
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

static void make_inputs(void)
{
    static double x[3 * NP];
    for (int p = 0; p < NP; p++) {
        x[3 * p] = ORIGIN[0] + H * (p % N);
        x[3 * p + 1] = ORIGIN[1] + H * (p / N % N);
        x[3 * p + 2] = ORIGIN[2] + H * (p / (N * N));
    }
    if (fmk_poisson_rings(NP, x, omega, NULL, NULL) != FMK_OK)
        printf("fmk_poisson_rings: %s\n", fmk_poisson_last_error(NULL));
    for (int p = 0; p < NP; p++) /* component x of the first ring alone: another support */
        omega1[p] = x[3 * p + 2] < 0.5 ? omega[3 * p] : 0;
}

static fmk_status create(fmk_poisson_method method, fmk_poisson **ps)
{
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = method;
    o.threads = 1; /* the same operations in the same order: results equal bit for bit */
    return fmk_poisson_create(ps, 1e-6, &o);
}

static fmk_status solve(fmk_poisson *ps, int which)
{
    return which == 0 ? fmk_poisson_solve(ps, 3, omega, psi, u)
                      : fmk_poisson_solve(ps, 1, omega1, psi1, NULL);
}

static int same(int which)
{
    return which == 0 ? !memcmp(psi, ref_psi, sizeof psi) && !memcmp(u, ref_u, sizeof u)
                      : !memcmp(psi1, ref_psi1, sizeof psi1);
}

static void clear_outputs(void)
{
    test_fill_sentinel(psi, 3 * NP), test_fill_sentinel(u, 3 * NP), test_fill_sentinel(psi1, NP);
}

static int untouched(int which)
{
    return which == 0 ? test_untouched(psi, 3 * NP) && test_untouched(u, 3 * NP)
                      : test_untouched(psi1, NP);
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
        stage = 1, st = fmk_poisson_set_grid(ps, N, N, N, H, ORIGIN);
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
        CHECK_MSG(fmk_poisson_set_grid(ps, N, N, N, H, ORIGIN) == FMK_OK,
                  "set_grid after a failed one: %s", fmk_poisson_last_error(ps));
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

int main(void)
{
    make_inputs();
    const fmk_poisson_method methods[4] = {FMK_POISSON_FFT, FMK_POISSON_DIRECT, FMK_POISSON_FMM,
                                           FMK_POISSON_TREECODE};
    for (int m = 0; m < 4; m++) {
        if (!fmk_poisson_method_available(methods[m]))
            continue;
        const char *name = fmk_poisson_method_name(methods[m]);
        check_context("%s, clean run", name);
        fmk_poisson *ps = NULL;
        fmk_status st = create(methods[m], &ps);
        if (st == FMK_OK)
            st = fmk_poisson_set_grid(ps, N, N, N, H, ORIGIN);
        if (st == FMK_OK)
            st = fmk_poisson_solve(ps, 3, omega, ref_psi, ref_u);
        if (st == FMK_OK)
            st = fmk_poisson_solve(ps, 1, omega1, ref_psi1, NULL);
        CHECK_MSG(st == FMK_OK, "%s", fmk_poisson_last_error(ps));
        fmk_poisson_destroy(ps);
        for (int s = 0; s < 2; s++) {
            long k = 1;
            check_context("%s, %s failures", name, s ? "sticky" : "single");
            while (!run_once(methods[m], k, s))
                k++;
            printf("%s: %ld allocations, each failed in turn (%s); %ld tolerated\n", name, k - 1,
                   s ? "and every one after it" : "alone", tolerated);
            tolerated = 0;
        }
    }
    return check_summary();
}
