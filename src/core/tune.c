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

/* The knob (counters = 0) or counter (1) named "prefix.name" of the plan's engine, in its own
 * table or in its backend's shared one, and the plan's struct that holds it (*base; NULL where
 * the plan has none). */
static const fmk_tune_knob *lookup(const fmk_plan *plan, int counters, const char *name,
                                   void **base)
{
    const fmk_engine *e = plan->engine;
    const fmk_tune_knob *k = find(counters ? e->counters : e->tune, name);
    *base = counters ? plan->counters : plan->tune;
    if (!k) {
        k = find(counters ? e->shared_counters : e->shared_tune, name);
        *base = counters ? plan->shared_counters : plan->shared_tune;
    }
    return k;
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

static fmk_status read_value(const fmk_plan *plan, int counters, const char *name, double *value)
{
    const char *what = counters ? "counter" : "tuned";
    if (!plan || !value)
        return fmk_error_set(NULL, FMK_ERR_NULL, "fmk_plan_%s: plan or value is NULL", what);
    void *base;
    const fmk_tune_knob *k = lookup(plan, counters, name, &base);
    if (!k || !base)
        return fmk_error_set((fmk_plan *)plan, FMK_ERR_ARG, "engine %s has no %s '%s'",
                             plan->engine->name, counters ? "counter" : "knob",
                             name ? name : "(null)");
    *value = get(k, base);
    return FMK_OK;
}

fmk_status fmk_plan_tune(fmk_plan *plan, const char *name, double value)
{
    if (!plan)
        return fmk_error_set(NULL, FMK_ERR_NULL, "fmk_plan_tune: plan is NULL");
    void *base;
    const fmk_tune_knob *k = lookup(plan, 0, name, &base);
    if (!k || !base)
        return fmk_error_set(plan, FMK_ERR_ARG, "engine %s has no knob '%s'", plan->engine->name,
                             name ? name : "(null)");
    if (!(value >= k->min && value <= k->max) ||
        (k->type != FMK_TUNE_DOUBLE && value != floor(value)))
        return fmk_error_set(plan, FMK_ERR_ARG, "knob %s = %g; it takes %s values in [%g, %g]",
                             name, value, k->type == FMK_TUNE_DOUBLE ? "real" : "integer", k->min,
                             k->max);
    char *p = (char *)base + k->offset;
    switch (k->type) {
    case FMK_TUNE_INT: *(int *)p = (int)value; break;
    case FMK_TUNE_INT64: *(int64_t *)p = (int64_t)value; break;
    default: *(double *)p = value; break;
    }
    return FMK_OK;
}

fmk_status fmk_plan_tuned(const fmk_plan *plan, const char *name, double *value)
{
    return read_value(plan, 0, name, value);
}

fmk_status fmk_plan_counter(const fmk_plan *plan, const char *name, double *value)
{
    return read_value(plan, 1, name, value);
}

/* Appends the knobs of table t (values in base) to buf at *len (fmk_plan_tune_list). */
static void list_table(const fmk_tune_table *t, const void *base, char *buf, size_t size,
                       size_t *len)
{
    for (int i = 0; t && base && i < t->n_knobs; i++) {
        const fmk_tune_knob *k = &t->knobs[i];
        int w = snprintf(*len < size ? buf + *len : NULL, *len < size ? size - *len : 0,
                         "%s.%s = %g  (%s)\n", t->prefix, k->name, get(k, base), k->doc);
        if (w > 0)
            *len += (size_t)w;
    }
}

size_t fmk_plan_tune_list(const fmk_plan *plan, char *buf, size_t size)
{
    size_t len = 0;
    if (size)
        buf[0] = '\0';
    if (plan) {
        list_table(plan->engine->tune, plan->tune, buf, size, &len);
        list_table(plan->engine->shared_tune, plan->shared_tune, buf, size, &len);
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
    const fmk_engine *e = plan->engine;
    plan->tune = copy_of(e->tune);
    plan->counters = copy_of(e->counters);
    plan->shared_tune = copy_of(e->shared_tune);
    plan->shared_counters = copy_of(e->shared_counters);
    if ((e->tune && !plan->tune) || (e->counters && !plan->counters) ||
        (e->shared_tune && !plan->shared_tune) || (e->shared_counters && !plan->shared_counters)) {
        fmk_tune_free(plan);
        return FMK_ERR_NOMEM;
    }
    return FMK_OK;
}

void fmk_tune_free(fmk_plan *plan)
{
    free(plan->tune);
    free(plan->counters);
    free(plan->shared_tune);
    free(plan->shared_counters);
    plan->tune = plan->counters = plan->shared_tune = plan->shared_counters = NULL;
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
