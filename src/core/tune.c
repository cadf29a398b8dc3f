/* tune.c -- the per-plan tuning knobs and counters of the engines (core/tune.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tune.h"

/* The knob of table named "prefix.name" (or NULL). */
static const fmk_tune_knob *find(const fmk_tune_table *t, const char *name)
{
    if (!t || !name)
        return NULL;
    size_t lp = strlen(t->prefix);
    if (strncmp(name, t->prefix, lp) != 0 || name[lp] != '.')
        return NULL;
    for (int i = 0; i < t->n_knobs; i++)
        if (strcmp(t->knobs[i].name, name + lp + 1) == 0)
            return &t->knobs[i];
    return NULL;
}

static double get(const fmk_tune_knob *k, const void *base)
{
    const char *p = (const char *)base + k->offset;
    switch (k->type) {
    case FMK_TUNE_INT: return *(const int *)p;
    case FMK_TUNE_INT64: return (double)*(const int64_t *)p;
    default: return *(const double *)p;
    }
}

static fmk_status read_value(const fmk_plan *plan, const fmk_tune_table *t, const void *base,
                             const char *what, const char *name, double *value)
{
    if (!plan || !value)
        return fmk_error_set(NULL, FMK_ERR_NULL, "fmk_plan_%s: plan or value is NULL", what);
    const fmk_tune_knob *k = find(t, name);
    if (!k || !base)
        return fmk_error_set((fmk_plan *)plan, FMK_ERR_ARG, "engine %s has no %s '%s'",
                             plan->engine->name, what, name ? name : "(null)");
    *value = get(k, base);
    return FMK_OK;
}

fmk_status fmk_plan_tune(fmk_plan *plan, const char *name, double value)
{
    if (!plan)
        return fmk_error_set(NULL, FMK_ERR_NULL, "fmk_plan_tune: plan is NULL");
    const fmk_tune_knob *k = find(plan->engine->tune, name);
    if (!k || !plan->tune)
        return fmk_error_set(plan, FMK_ERR_ARG, "engine %s has no knob '%s'", plan->engine->name,
                             name ? name : "(null)");
    if (!(value >= k->min && value <= k->max) ||
        (k->type != FMK_TUNE_DOUBLE && value != floor(value)))
        return fmk_error_set(plan, FMK_ERR_ARG, "knob %s = %g; it takes %s values in [%g, %g]",
                             name, value, k->type == FMK_TUNE_DOUBLE ? "real" : "integer", k->min,
                             k->max);
    char *p = (char *)plan->tune + k->offset;
    switch (k->type) {
    case FMK_TUNE_INT: *(int *)p = (int)value; break;
    case FMK_TUNE_INT64: *(int64_t *)p = (int64_t)value; break;
    default: *(double *)p = value; break;
    }
    return FMK_OK;
}

fmk_status fmk_plan_tuned(const fmk_plan *plan, const char *name, double *value)
{
    return read_value(plan, plan ? plan->engine->tune : NULL, plan ? plan->tune : NULL, "tuned",
                      name, value);
}

fmk_status fmk_plan_counter(const fmk_plan *plan, const char *name, double *value)
{
    return read_value(plan, plan ? plan->engine->counters : NULL, plan ? plan->counters : NULL,
                      "counter", name, value);
}

size_t fmk_plan_tune_list(const fmk_plan *plan, char *buf, size_t size)
{
    size_t len = 0;
    const fmk_tune_table *t = plan ? plan->engine->tune : NULL;
    if (size)
        buf[0] = '\0';
    for (int i = 0; t && plan->tune && i < t->n_knobs; i++) {
        const fmk_tune_knob *k = &t->knobs[i];
        int w = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0,
                         "%s.%s = %g  (%s)\n", t->prefix, k->name, get(k, plan->tune), k->doc);
        if (w > 0)
            len += (size_t)w;
    }
    return len;
}

static void *copy_of(const fmk_tune_table *t)
{
    if (!t)
        return NULL;
    void *p = calloc(1, t->size);
    if (p && t->defaults)
        memcpy(p, t->defaults, t->size);
    return p;
}

fmk_status fmk_tune_alloc(fmk_plan *plan)
{
    plan->tune = copy_of(plan->engine->tune);
    plan->counters = copy_of(plan->engine->counters);
    if ((plan->engine->tune && !plan->tune) || (plan->engine->counters && !plan->counters)) {
        fmk_tune_free(plan);
        return FMK_ERR_NOMEM;
    }
    return FMK_OK;
}

void fmk_tune_free(fmk_plan *plan)
{
    free(plan->tune);
    free(plan->counters);
    plan->tune = plan->counters = NULL;
}

int fmk_tune_defaults(fmk_method method, int dim, fmk_backend backend, void *out, size_t size)
{
    const fmk_engine *e = fmk_engines_find(method, dim, backend);
    if (!e || !e->tune || e->tune->size != size || !out)
        return 0;
    memcpy(out, e->tune->defaults, size);
    return 1;
}

int fmk_plan_tune_copy(fmk_plan *plan, fmk_method method, const void *values, size_t size)
{
    const fmk_engine *e = plan ? fmk_engines_find(method, plan->dim, plan->opts.backend) : NULL;
    if (!e || e != plan->engine || !e->tune || e->tune->size != size || !plan->tune || !values)
        return 0;
    memcpy(plan->tune, values, size);
    return 1;
}
