/* test_sim_restart.c -- restarts continue bit for bit, and interrupts stop at a whole step.
 *
 *   - restart in memory (the checkpoint a restart file holds, src/sim/restart.c): a run of
 *     S steps against one stopped after K, checkpointed, destroyed, created again from the
 *     checkpoint (options NULL: the stored ones) and run S - K steps: positions, velocities,
 *     accelerations, potentials, step, time and dt equal bit for bit; for the direct sum, the
 *     treecode, the FMM, the spline with softenings per particle, and the adaptive step;
 *   - a damaged checkpoint (another n, a short state record) is refused with a message;
 *   - interrupts: fmk_sim_interrupt from another thread stops fmk_sim_run with
 *     FMK_ERR_INTERRUPTED at a whole step (the state equals a run of that many steps, bit for
 *     bit) and fmk_sim_step inside its forces (the plan's call is stopped: the state is the one
 *     before the step); the simulation then goes on as if never interrupted. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "sim/sim_internal.h"
#include "sim_check.h"

static void restart_case(const char *what, int64_t n, fmk_sim_opts o, const double *soft)
{
    check_context("restart in memory, %s", what);
    particles p = particles_new(n);
    fmk_sim_ic_plummer(n, 31, p.mass, p.pos, p.vel);
    fmk_sim *a = NULL, *b = NULL, *c = NULL;
    CHECK_SIM(fmk_sim_create(&a, n, p.mass, p.pos, p.vel, soft, NULL, &o), NULL);
    CHECK_SIM(fmk_sim_create(&b, n, p.mass, p.pos, p.vel, soft, NULL, &o), NULL);
    if (!a || !b)
        goto done;
    CHECK_SIM(fmk_sim_run(a, 0, 30), a);
    CHECK_SIM(fmk_sim_run(b, 0, 12), b);
    fmk_sim_checkpoint cp;
    CHECK_SIM(fmk_sim_checkpoint_take(b, &cp), b);
    fmk_sim_destroy(b);
    b = NULL;
    CHECK_SIM(fmk_sim_create_from_checkpoint(&c, &cp, NULL), NULL);
    if (c) {
        fmk_sim_info info;
        fmk_sim_info_get(c, &info);
        CHECK(info.step == 12);
        CHECK_SIM(fmk_sim_run(c, 0, 18), c);
        CHECK_MSG(same_state(a, c, n), "the continued run differs from the uninterrupted one");
    }
    /* damaged checkpoints */
    fmk_sim *d = (fmk_sim *)&d;
    cp.p.n--;
    CHECK_SIM_STATUS(fmk_sim_create_from_checkpoint(&d, &cp, NULL), FMK_ERR_ARG, NULL);
    cp.p.n++;
    cp.state_bytes -= 8;
    CHECK_SIM_STATUS(fmk_sim_create_from_checkpoint(&d, &cp, NULL), FMK_ERR_ARG, NULL);
    cp.state_bytes += 8;
    ((unsigned char *)cp.state)[0] ^= 1;
    CHECK_SIM_STATUS(fmk_sim_create_from_checkpoint(&d, &cp, NULL), FMK_ERR_ARG, NULL);
    CHECK(d == NULL);
    fmk_sim_checkpoint_free(&cp);
done:
    fmk_sim_destroy(a), fmk_sim_destroy(b), fmk_sim_destroy(c);
    particles_free(&p);
}

typedef struct interrupter {
    fmk_sim *sim;
    long pause_ns;
    atomic_int done;
} interrupter;

/* Calls fmk_sim_interrupt every pause_ns until done (each run or step clears the request when
 * it starts, so one early call could be dropped). */
static void *interrupt_loop(void *arg)
{
    interrupter *it = arg;
    const struct timespec pause = {0, it->pause_ns};
    while (!atomic_load(&it->done)) {
        nanosleep(&pause, NULL);
        fmk_sim_interrupt(it->sim);
    }
    return NULL;
}

static void test_interrupt_run(void)
{
    check_context("interrupting fmk_sim_run");
    const int64_t n = 3000;
    particles p = particles_new(n);
    fmk_sim_ic_plummer(n, 8, p.mass, p.pos, p.vel);
    fmk_sim_opts o = sim_opts(FMK_METHOD_DIRECT, 0.02, 0.01);
    fmk_sim *sim = NULL, *ref = NULL;
    CHECK_SIM(fmk_sim_create(&sim, n, p.mass, p.pos, p.vel, NULL, NULL, &o), NULL);
    CHECK_SIM(fmk_sim_create(&ref, n, p.mass, p.pos, p.vel, NULL, NULL, &o), NULL);
    if (sim && ref) {
        interrupter it = {.sim = sim, .pause_ns = 20000000};
        atomic_init(&it.done, 0);
        pthread_t th;
        pthread_create(&th, NULL, interrupt_loop, &it);
        const fmk_status st = fmk_sim_run(sim, 0, 100000);
        atomic_store(&it.done, 1);
        pthread_join(th, NULL);
        fmk_sim_info info;
        fmk_sim_info_get(sim, &info);
        printf("fmk_sim_run interrupted after %lld steps: %s\n", (long long)info.step,
               fmk_sim_last_error(sim));
        CHECK_SIM_STATUS(st, FMK_ERR_INTERRUPTED, sim);
        CHECK(info.step < 100000);
        CHECK_SIM(fmk_sim_run(ref, 0, info.step), ref);
        CHECK_MSG(same_state(sim, ref, n), "the interrupted state is not that of %lld steps",
                  (long long)info.step);
        /* and it goes on as if never stopped */
        CHECK_SIM(fmk_sim_run(sim, 0, 3), sim);
        CHECK_SIM(fmk_sim_run(ref, 0, 3), ref);
        CHECK(same_state(sim, ref, n));
    }
    fmk_sim_destroy(sim), fmk_sim_destroy(ref);
    particles_free(&p);
}

static void test_interrupt_step(void)
{
    check_context("interrupting fmk_sim_step in its forces");
    const int64_t n = 20000; /* a direct sum of about 0.1 s: the interrupts land inside it */
    particles p = particles_new(n);
    fmk_sim_ic_plummer(n, 9, p.mass, p.pos, p.vel);
    fmk_sim_opts o = sim_opts(FMK_METHOD_DIRECT, 0.02, 0.01);
    fmk_sim *sim = NULL, *ref = NULL;
    CHECK_SIM(fmk_sim_create(&sim, n, p.mass, p.pos, p.vel, NULL, NULL, &o), NULL);
    CHECK_SIM(fmk_sim_create(&ref, n, p.mass, p.pos, p.vel, NULL, NULL, &o), NULL);
    if (sim && ref) {
        interrupter it = {.sim = sim, .pause_ns = 3000000};
        atomic_init(&it.done, 0);
        pthread_t th;
        pthread_create(&th, NULL, interrupt_loop, &it);
        fmk_status st = FMK_OK;
        for (int tries = 0; tries < 20 && st == FMK_OK; tries++)
            st = fmk_sim_step(sim);
        atomic_store(&it.done, 1);
        pthread_join(th, NULL);
        fmk_sim_info info;
        fmk_sim_info_get(sim, &info);
        printf("fmk_sim_step interrupted at step %lld: %s\n", (long long)info.step + 1,
               fmk_sim_last_error(sim));
        CHECK_SIM_STATUS(st, FMK_ERR_INTERRUPTED, sim);
        CHECK_SIM(fmk_sim_run(ref, 0, info.step), ref);
        CHECK_MSG(same_state(sim, ref, n),
                  "the state after the stopped step is not that of %lld "
                  "steps",
                  (long long)info.step);
        CHECK_SIM(fmk_sim_step(sim), sim);
        CHECK_SIM(fmk_sim_step(ref), ref);
        CHECK(same_state(sim, ref, n));
    }
    fmk_sim_destroy(sim), fmk_sim_destroy(ref);
    particles_free(&p);
}

int main(void)
{
    restart_case("direct", 500, sim_opts(FMK_METHOD_DIRECT, 0.05, 0.01), NULL);
    restart_case("tree", 2000, sim_opts(FMK_METHOD_TREE, 0.05, 0.01), NULL);
    fmk_sim_opts o = sim_opts(FMK_METHOD_FMM, 0.05, 0.01);
    o.eps = 1e-6;
    restart_case("fmm", 2000, o, NULL);
    double soft[1000];
    for (int i = 0; i < 1000; i++)
        soft[i] = 0.01 + 0.04 * (i % 7) / 6.0;
    o = sim_opts(FMK_METHOD_TREE, 0, 0);
    o.softening = FMK_SIM_SOFT_SPLINE;
    o.stepping = FMK_SIM_STEP_ADAPTIVE;
    o.dt = 0.001; /* caps the first step */
    restart_case("tree, spline per particle, adaptive", 1000, o, soft);
    test_interrupt_run();
    test_interrupt_step();
    return check_summary();
}
