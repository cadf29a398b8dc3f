/* status.c -- the Poisson solver's messages and interrupt polls (poisson.h), shared by solver.c,
 * grid.c and every method. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "poisson/poisson.h"

fmk_status fmk_solver_fail(fmk_poisson *s, fmk_status status, const char *fmt, ...)
{
    char buf[FMK_ERROR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!s)
        return fmk_error_set(NULL, status, "%s", buf);
    memcpy(s->error, buf, sizeof buf);
    return status;
}

int fmk_solver_poll(fmk_poisson *s)
{
    return fmk_interrupt_poll_state(&s->interrupt);
}

int fmk_solver_check(void *solver)
{
    return fmk_solver_poll(solver);
}
