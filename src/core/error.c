/* error.c -- status strings and per-plan / per-thread error messages. */
#include <stdarg.h>
#include <stdio.h>

#include "core/internal.h"

/* Messages of failures that had no plan to hold them (create, one-shot, NULL plan). */
static _Thread_local char thread_error[FMK_ERROR_LEN];

fmk_status fmk_error_set(fmk_plan *plan, fmk_status status, const char *fmt, ...)
{
    char *buf = plan ? plan->error : thread_error;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, FMK_ERROR_LEN, fmt, ap);
    va_end(ap);
    return status;
}

void fmk_error_clear(fmk_plan *plan)
{
    if (plan)
        plan->error[0] = '\0';
}

const char *fmk_plan_last_error(const fmk_plan *plan)
{
    return plan ? plan->error : thread_error;
}

const char *fmk_status_string(fmk_status status)
{
    switch (status) {
    case FMK_OK: return "success";
    case FMK_ERR_NULL: return "a required pointer was NULL";
    case FMK_ERR_ARG: return "invalid argument";
    case FMK_ERR_STATE: return "call out of order";
    case FMK_ERR_NONFINITE: return "NaN or Inf in input or result";
    case FMK_ERR_NOMEM: return "out of host memory";
    case FMK_ERR_DEVICE_NOMEM: return "out of GPU memory";
    case FMK_ERR_DEVICE: return "CUDA error";
    case FMK_ERR_UNAVAILABLE: return "not available";
    case FMK_ERR_INTERNAL: return "internal error";
    case FMK_ERR_INTERRUPTED: return "interrupted";
    case FMK_ERR_ACCURACY: return "accuracy not reachable";
    }
    return "unknown status";
}
