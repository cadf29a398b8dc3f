/* poisson_check.h -- what the Poisson solver's C tests share (test_poisson_api.c,
 * test_poisson_blocks.c, test_poisson_treecode.c): CHECK_SOLVER_OK, and the interrupt sequence
 * every method and grid must pass. Include after check.h, sentinel.h and interrupter.h. */
#ifndef FMMKIT_TESTS_POISSON_CHECK_H
#define FMMKIT_TESTS_POISSON_CHECK_H

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "fmmkit_poisson.h"

/* call succeeds; on failure prints the solver's message. */
#define CHECK_SOLVER_OK(call, solver)                                                        \
    do {                                                                                     \
        fmk_status check_st_ = (call);                                                       \
        check_report(check_st_ == FMK_OK, __FILE__, __LINE__, "%s returned %d (%s): \"%s\"", \
                     #call, (int)check_st_, fmk_status_string(check_st_),                    \
                     fmk_poisson_last_error(solver));                                        \
    } while (0)

/* Solves of Psi (3 components of omega, len = 3 points values) on ps stopped two ways: by a
 * check that says stop at its first call (it runs after 10 ms of work: a fast machine may finish
 * a few solves first), and by fmk_poisson_interrupt from a second thread (each call clears old
 * requests). Each stop: FMK_ERR_INTERRUPTED and psi untouched; the solver then gives ref again. */
static inline void check_solve_interrupts(fmk_poisson *ps, const double *omega, double *psi,
                                          const double *ref, int64_t len)
{
    counter c = {0, 1};
    CHECK_STATUS(fmk_poisson_set_interrupt(ps, count_check, &c), FMK_OK);
    fmk_status st = FMK_OK;
    for (int i = 0; i < 100 && st == FMK_OK; i++) {
        test_fill_sentinel(psi, len);
        st = fmk_poisson_solve(ps, 3, omega, psi, NULL);
    }
    CHECK_STATUS(st, FMK_ERR_INTERRUPTED);
    CHECK(c.calls >= 1 && test_untouched(psi, len));
    CHECK_STATUS(fmk_poisson_set_interrupt(ps, NULL, NULL), FMK_OK);
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, omega, psi, NULL), ps);
    CHECK(!memcmp(psi, ref, sizeof(double) * (size_t)len));
    interrupter it = {NULL, 0, ps, 2000000};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, interrupt_loop, &it) == 0);
    st = FMK_OK;
    for (int i = 0; i < 200 && st == FMK_OK; i++)
        st = fmk_poisson_solve(ps, 3, omega, psi, NULL);
    atomic_store(&it.done, 1);
    pthread_join(thread, NULL);
    CHECK_STATUS(st, FMK_ERR_INTERRUPTED);
    CHECK_SOLVER_OK(fmk_poisson_solve(ps, 3, omega, psi, NULL), ps);
    CHECK(!memcmp(psi, ref, sizeof(double) * (size_t)len));
}

#endif /* FMMKIT_TESTS_POISSON_CHECK_H */
