/* common.c -- messages, exit statuses and the clock of the fmmkit command. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "cli.h"

static void vreport(const char *cmd, const char *fmt, va_list ap)
{
    fprintf(stderr, "fmmkit%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
}

int cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
    fprintf(stderr, "Try 'fmmkit%s%s --help'.\n", cmd ? " " : "", cmd ? cmd : "");
    return CLI_USAGE;
}

int cli_input_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
    return CLI_USAGE;
}

int cli_exit_status(fmk_status status)
{
    switch (status) {
    case FMK_OK: return CLI_OK;
    case FMK_ERR_NULL:
    case FMK_ERR_ARG:
    case FMK_ERR_STATE:
    case FMK_ERR_NONFINITE:
    case FMK_ERR_UNAVAILABLE:
    case FMK_ERR_ACCURACY: return CLI_USAGE;
    case FMK_ERR_NOMEM:
    case FMK_ERR_DEVICE_NOMEM:
    case FMK_ERR_DEVICE:
    case FMK_ERR_INTERNAL:
    case FMK_ERR_INTERRUPTED: return CLI_FAIL;
    }
    return CLI_FAIL;
}

int cli_library_error(const char *cmd, const fmk_plan *plan, fmk_status status)
{
    const char *msg = fmk_plan_last_error(plan);
    if (!msg || !msg[0])
        msg = fmk_status_string(status);
    cli_error(cmd, "%s", msg);
    return cli_exit_status(status);
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
