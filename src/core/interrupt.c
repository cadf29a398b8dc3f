/* interrupt.c -- stopping a long call: the caller's check (fmk_plan_set_interrupt), run by the
 * calling thread every FMK_INTERRUPT_INTERVAL seconds of work at most, and the plan's stop flag
 * (fmk_plan_interrupt, or a check that said stop), which every thread of a team reads. */
#include <stdatomic.h>
#include <stdlib.h>

#include "core/internal.h"

/* Seconds between two runs of the caller's check: often enough that a call stops within a
 * fraction of a second, rarely enough that a check taking a lock (Python's GIL) costs nothing. */
#define FMK_INTERRUPT_INTERVAL 0.01

void fmk_interrupt_init(struct fmk_interrupt *in)
{
    atomic_init(&in->stop, 0);
    in->check = NULL, in->user = NULL, in->last = 0;
}

void fmk_interrupt_start(struct fmk_interrupt *in)
{
    atomic_store(&in->stop, 0);
    in->last = fmk_time_now();
}

int fmk_interrupt_poll_state(struct fmk_interrupt *in)
{
    if (atomic_load_explicit(&in->stop, memory_order_relaxed))
        return 1;
    if (!in->check)
        return 0;
    const double now = fmk_time_now();
    if (now - in->last < FMK_INTERRUPT_INTERVAL)
        return 0;
    in->last = now;
    if (!in->check(in->user))
        return 0;
    atomic_store_explicit(&in->stop, 1, memory_order_relaxed);
    return 1;
}

void fmk_interrupt_set_check(struct fmk_interrupt *in, fmk_interrupt_fn check, void *user)
{
    in->check = check;
    in->user = check ? user : NULL;
}

void fmk_interrupt_request(struct fmk_interrupt *in)
{
    atomic_store(&in->stop, 1);
}

int fmk_interrupt_alloc(fmk_plan *plan)
{
    plan->interrupt = malloc(sizeof *plan->interrupt);
    if (!plan->interrupt)
        return -1;
    fmk_interrupt_init(plan->interrupt);
    return 0;
}

void fmk_interrupt_free(fmk_plan *plan)
{
    free(plan->interrupt);
    plan->interrupt = NULL;
}

void fmk_interrupt_begin(fmk_plan *plan)
{
    if (plan->interrupt)
        fmk_interrupt_start(plan->interrupt);
}

int fmk_interrupt_stopped(const fmk_plan *plan)
{
    return plan->interrupt && atomic_load_explicit(&plan->interrupt->stop, memory_order_relaxed);
}

int fmk_interrupt_poll(const fmk_plan *plan)
{
    return plan->interrupt ? fmk_interrupt_poll_state(plan->interrupt) : 0;
}

int fmk_interrupt_team(const fmk_plan *plan)
{
    return fmk_thread_num() == 0 ? fmk_interrupt_poll(plan) : fmk_interrupt_stopped(plan);
}

fmk_status fmk_interrupt_status(fmk_plan *plan)
{
    return fmk_error_set(plan, FMK_ERR_INTERRUPTED, "interrupted");
}

fmk_status fmk_plan_set_interrupt(fmk_plan *plan, fmk_interrupt_fn check, void *user)
{
    if (!plan)
        return fmk_error_set(NULL, FMK_ERR_NULL, "fmk_plan_set_interrupt: plan is NULL");
    fmk_interrupt_set_check(plan->interrupt, check, user);
    return FMK_OK;
}

fmk_status fmk_plan_interrupt(fmk_plan *plan)
{
    if (!plan)
        return FMK_ERR_NULL; /* no message: this may run in a signal handler */
    fmk_interrupt_request(plan->interrupt);
    return FMK_OK;
}
