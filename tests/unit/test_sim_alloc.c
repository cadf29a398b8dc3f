/* test_sim_alloc.c -- host allocation failure in the simulation driver (and the plan under it):
 * a scenario (create with the spline and softenings per particle on the treecode, 3 steps,
 * a checkpoint, a simulation created from it, 2 more steps) runs with the k-th allocation of
 * the library failing, for k = 1, 2, ... until a run makes fewer than k. Every call that hits
 * the failure must return a status with a message (FMK_ERR_NOMEM, or succeed where the
 * allocation was one the plan can do without); a failed create leaves *sim NULL; a failed step
 * leaves the state of the last whole step, so that taking the step again gives the clean run's
 * state bit for bit. A second sweep fails every allocation from the k-th on (nothing may crash
 * or leak: LeakSanitizer checks in make test-asan).
 *
 * The library's allocations fail through alloc_shim.h (the linker's --wrap); this file never
 * allocates. */
#include <math.h>
#include <string.h>

#include "sim/sim_internal.h"

#include "check.h"

#include "alloc_shim.h"

#define N 300
#define STATE (11 * N)

static double mass[N], pos[3 * N], vel[3 * N], soft[N];
static double ref3[STATE], ref5[STATE], got[STATE];

static fmk_sim_opts options(void)
{
    fmk_sim_opts o;
    fmk_sim_opts_default(&o);
    o.plan.method = FMK_METHOD_TREE;
    o.plan.backend = FMK_BACKEND_CPU;
    o.plan.theta = 0.5;
    o.plan.threads = 1;
    o.softening = FMK_SIM_SOFT_SPLINE;
    o.dt = 0.01;
    return o;
}

/* A call that may fail: OK, or a status with a message. */
static int failed(fmk_status st, const fmk_sim *sim)
{
    if (st == FMK_OK)
        return 0;
    CHECK_MSG(fmk_sim_last_error(sim)[0] != '\0', "status %d without a message", (int)st);
    CHECK_MSG(st == FMK_ERR_NOMEM || sticky, "status %d (%s): %s", (int)st, fmk_status_string(st),
              fmk_sim_last_error(sim));
    return 1;
}

/* The state (asked again once when it fails: the potential of steps that did not compute it
 * is evaluated by the query, which allocates). */
static void state_of(const fmk_sim *sim, double *s)
{
    for (int tries = 0; tries < 2; tries++) {
        memset(s, 0, STATE * sizeof *s);
        if (!failed(fmk_sim_get_state(sim, s, s + N, s + 4 * N, s + 7 * N, s + 10 * N), sim))
            return;
    }
}

/* Steps until the simulation is at step `to`, taking a failed step again (at most 5 times). */
static int steps_to(fmk_sim *sim, int64_t to)
{
    fmk_sim_info info;
    for (int tries = 0; tries < 5; tries++) {
        /* (the energies' potential, computed on demand after steps without it, allocates) */
        if (failed(fmk_sim_info_get(sim, &info), sim))
            continue;
        if (info.step >= to)
            return 1;
        failed(fmk_sim_step(sim), sim);
    }
    return 0;
}

/* The scenario; reference = 1 fills ref3 and ref5. Returns 1 when it ran to its end. */
static int scenario(int reference)
{
    const fmk_sim_opts o = options();
    fmk_sim *sim = NULL, *copy = NULL;
    fmk_sim_checkpoint cp;
    memset(&cp, 0, sizeof cp);
    int complete = 0;
    if (failed(fmk_sim_create(&sim, N, mass, pos, vel, soft, NULL, &o), NULL)) {
        CHECK(sim == NULL);
        if (failed(fmk_sim_create(&sim, N, mass, pos, vel, soft, NULL, &o), NULL))
            return 0;
    }
    if (!steps_to(sim, 3))
        goto done;
    state_of(sim, got);
    if (reference)
        memcpy(ref3, got, sizeof got);
    else if (!sticky)
        CHECK_MSG(memcmp(got, ref3, sizeof got) == 0, "after 3 steps (failure at allocation %ld)",
                  fail_at);
    if (failed(fmk_sim_checkpoint_take(sim, &cp), sim) &&
        failed(fmk_sim_checkpoint_take(sim, &cp), sim))
        goto done;
    if (failed(fmk_sim_create_from_checkpoint(&copy, &cp, NULL), NULL)) {
        CHECK(copy == NULL);
        if (failed(fmk_sim_create_from_checkpoint(&copy, &cp, NULL), NULL))
            goto done;
    }
    if (!steps_to(copy, 5))
        goto done;
    state_of(copy, got);
    if (reference)
        memcpy(ref5, got, sizeof got);
    else if (!sticky)
        CHECK_MSG(memcmp(got, ref5, sizeof got) == 0, "after 5 steps (failure at allocation %ld)",
                  fail_at);
    complete = 1;
done:
    fmk_sim_checkpoint_free(&cp);
    fmk_sim_destroy(copy);
    fmk_sim_destroy(sim);
    return complete;
}

int main(void)
{
    (void)tolerated; /* alloc_shim.h's: every failure here must be recovered from */
    fmk_sim_ic_plummer(N, 21, mass, pos, vel);
    for (int i = 0; i < N; i++)
        soft[i] = 0.01 + 0.01 * (i % 3);
    check_context("clean run");
    fail_at = 0;
    calls = 0;
    CHECK(scenario(1));
    const long total = calls;
    printf("the scenario makes %ld allocations\n", total);
    for (int pass = 0; pass < 2; pass++) {
        sticky = pass;
        for (fail_at = 1;; fail_at++) {
            check_context("%s failure at allocation %ld", sticky ? "every" : "one", fail_at);
            calls = 0;
            const int complete = scenario(0);
            if (calls < fail_at) { /* nothing failed: the sweep is over */
                CHECK(complete);
                break;
            }
            if (!sticky)
                CHECK_MSG(complete, "the scenario did not recover from the failure");
        }
        printf("%s: %ld runs\n",
               sticky ? "every allocation from the k-th on" : "the k-th allocation", fail_at);
    }
    return check_summary();
}
