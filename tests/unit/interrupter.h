/* interrupter.h -- the interrupt tests' helpers (tests/unit/test_interrupt.c,
 * tests/gpu/test_interrupt_gpu.c, tests/unit/test_poisson_api.c): a check callback that says
 * stop at its stop_at-th call, and a thread that calls fmk_plan_interrupt (or, with plan NULL,
 * fmk_poisson_interrupt) every few ms until told it is done (each call clears the flag at its
 * start, so a single early request could be dropped). */
#ifndef FMMKIT_TESTS_INTERRUPTER_H
#define FMMKIT_TESTS_INTERRUPTER_H

#include <stdatomic.h>
#include <time.h>

#include "fmmkit.h"
#include "fmmkit_poisson.h"

typedef struct counter {
    int calls, stop_at;
} counter;

static int count_check(void *user)
{
    counter *c = user;
    c->calls++;
    return c->stop_at > 0 && c->calls >= c->stop_at;
}

typedef struct interrupter {
    fmk_plan *plan;
    atomic_int done;
    fmk_poisson *solver; /* with plan NULL */
    long pause_ns;       /* 0: 5 ms */
} interrupter;

static void *interrupt_loop(void *arg)
{
    interrupter *it = arg;
    const struct timespec pause = {0, it->pause_ns > 0 ? it->pause_ns : 5000000};
    while (!atomic_load(&it->done)) {
        nanosleep(&pause, NULL);
        if (it->plan)
            fmk_plan_interrupt(it->plan);
        else
            fmk_poisson_interrupt(it->solver);
    }
    return NULL;
}

#endif /* FMMKIT_TESTS_INTERRUPTER_H */
