/* check.h -- assertions for fmmkit's unit tests.
 *
 * Every CHECK counts as one check; a failing one prints "file:line: FAILED: ..." with the
 * current context (set with check_context) and carries on, so one run shows every failure.
 * main() ends with `return check_summary();`, which prints "N passed, N failed" and returns the
 * exit status ctest reads. */
#ifndef FMK_TEST_CHECK_H
#define FMK_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fmmkit.h"

static int check_passed_, check_failed_;
static char check_context_[256];

/* Sets a printf-style description of what is being tested, shown with each failure. */
static void check_context(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(check_context_, sizeof check_context_, fmt, ap);
    va_end(ap);
}

static int check_report(int ok, const char *file, int line, const char *fmt, ...)
{
    if (ok) {
        check_passed_++;
        return 1;
    }
    check_failed_++;
    printf("%s:%d: FAILED: ", file, line);
    if (check_context_[0])
        printf("[%s] ", check_context_);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
    return 0;
}

static int check_summary(void)
{
    printf("%d passed, %d failed\n", check_passed_, check_failed_);
    return check_failed_ ? 1 : 0;
}

/* CHECK(cond): cond must hold. CHECK_MSG(cond, fmt, ...): the same with an explanation.
 * Both evaluate to 1 when the check passed. */
#define CHECK(cond) check_report(!!(cond), __FILE__, __LINE__, "%s", #cond)
#define CHECK_MSG(cond, ...) check_report(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

/* CHECK_STATUS(call, expected): call returns the status expected. */
#define CHECK_STATUS(call, expected)                                                     \
    do {                                                                                 \
        fmk_status check_st_ = (call), check_ex_ = (expected);                           \
        check_report(check_st_ == check_ex_, __FILE__, __LINE__,                         \
                     "%s returned %d (%s), expected %d (%s); last error: \"%s\"", #call, \
                     (int)check_st_, fmk_status_string(check_st_), (int)check_ex_,       \
                     fmk_status_string(check_ex_), fmk_plan_last_error(NULL));           \
    } while (0)

/* CHECK_PLAN_OK(call, plan): call succeeds; on failure prints the plan's message. */
#define CHECK_PLAN_OK(call, plan)                                                            \
    do {                                                                                     \
        fmk_status check_st_ = (call);                                                       \
        check_report(check_st_ == FMK_OK, __FILE__, __LINE__, "%s returned %d (%s): \"%s\"", \
                     #call, (int)check_st_, fmk_status_string(check_st_),                    \
                     fmk_plan_last_error(plan));                                             \
    } while (0)

/* CHECK_LE(value, bound, what): a measured error is within its bound. */
#define CHECK_LE(value, bound, what)                                                             \
    do {                                                                                         \
        double check_v_ = (value), check_b_ = (bound);                                           \
        check_report(check_v_ <= check_b_, __FILE__, __LINE__, "%s = %.3e exceeds %.1e", (what), \
                     check_v_, check_b_);                                                        \
    } while (0)

#endif /* FMK_TEST_CHECK_H */
