/* hooks.c -- plans whose calls go to hooks (core/hooks.h): attaching them, and what the hooks
 * may change of the plan from outside libfmmkit. */
#include <string.h>

#include "core/hooks.h"
#include "core/internal.h"

fmk_status fmk_plan_set_hooks(fmk_plan *plan, const fmk_plan_hooks *hooks, void *state)
{
    if (!plan || !hooks || !hooks->set_points || !hooks->eval_many)
        return fmk_error_set(plan, FMK_ERR_NULL, "fmk_plan_set_hooks: a pointer is NULL");
    if (plan->hooks || plan->has_points)
        return fmk_error_set(plan, FMK_ERR_STATE,
                             "fmk_plan_set_hooks: the plan already has hooks or points");
    plan->hooks = hooks;
    plan->hook_state = state;
    return FMK_OK;
}

void *fmk_plan_hook_state(const fmk_plan *plan, const fmk_plan_hooks *hooks)
{
    return plan && hooks && plan->hooks == hooks ? plan->hook_state : NULL;
}

fmk_status fmk_plan_hook_error(fmk_plan *plan, fmk_status status, const char *message)
{
    if (status == FMK_OK) {
        if (plan)
            fmk_error_clear(plan);
        return FMK_OK;
    }
    return fmk_error_set(plan, status, "%s", message ? message : "");
}

void fmk_plan_hook_points(fmk_plan *plan, int has_points, const fmk_info *info)
{
    plan->has_points = has_points;
    fmk_info *in = &plan->info;
    in->n_sources = has_points ? info->n_sources : 0;
    in->n_targets = has_points ? info->n_targets : 0;
    in->bytes_host = has_points ? info->bytes_host : 0;
    in->bytes_device = has_points ? info->bytes_device : 0;
    fmk_plan_hook_info(plan, info);
}

void fmk_plan_hook_info(fmk_plan *plan, const fmk_info *info)
{
    fmk_info *in = &plan->info;
    memcpy(in->phase_time, info->phase_time, sizeof in->phase_time);
    in->method = info->method;
    in->backend = info->backend;
    in->order = info->order;
    in->levels = info->levels;
    in->walk = info->walk;
    in->leaf_size = info->leaf_size;
    in->theta = info->theta;
    in->interactions_p2p = info->interactions_p2p;
    in->interactions_far = info->interactions_far;
}

void fmk_plan_hook_interrupt_begin(fmk_plan *plan)
{
    if (plan)
        fmk_interrupt_begin(plan);
}

int fmk_plan_hook_interrupt_poll(fmk_plan *plan)
{
    return plan ? fmk_interrupt_poll(plan) : 0;
}

fmk_status fmk_plan_hook_sort_pairs(fmk_plan *plan, int64_t n, void *pairs, int key_bits)
{
    if (!plan || plan->hooks || plan->opts.backend != FMK_BACKEND_CUDA)
        return FMK_ERR_UNAVAILABLE;
    char kept[FMK_ERROR_LEN]; /* a failure here is the caller's to recover from */
    memcpy(kept, plan->error, sizeof kept);
    const fmk_status st = fmk_cuda_sort_pairs(plan, n, pairs, key_bits);
    memcpy(plan->error, kept, sizeof kept);
    return st;
}

fmk_status fmk_plan_hook_copy(fmk_plan *plan, void *dst, const void *src, size_t bytes,
                              const char *what)
{
    return bytes ? fmk_cuda_copy(plan, dst, src, bytes, what) : FMK_OK;
}
