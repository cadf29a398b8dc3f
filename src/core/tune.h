/*
 * tune.h -- per-plan tuning knobs and counters of the engines (never installed).
 *
 * Each engine that has knobs defines a struct of them with its documented defaults and a table
 * that names its fields (fmk_tune_table below). fmk_plan_create copies the defaults into the
 * plan (plan->tune), so two plans in one process, on two GPUs or in two threads, are tuned
 * apart; nothing is global. Engines read their knobs from plan->tune. Tests and benchmarks set
 * them by name through this header:
 *
 *     fmk_plan_tune(plan, "fmm3d.p2p_rows", 4);
 *
 * before fmk_plan_set_points (a knob of the geometry) or fmk_plan_eval (a knob of the sums).
 * Counters are the same arrangement for what an engine counts as it works (plan->counters,
 * zeroed at creation), read with fmk_plan_counter. The engines of a backend may share a second
 * table of each (fmk_engine.shared_tune, shared_counters; plan->shared_tune, shared_counters):
 * the GPU engines' "cuda.*" (cuda/device.h), which the same functions reach by name.
 */
#ifndef FMMKIT_TUNE_H
#define FMMKIT_TUNE_H

#include <stddef.h>

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fmk_tune_type { FMK_TUNE_INT, FMK_TUNE_INT64, FMK_TUNE_DOUBLE } fmk_tune_type;

/* One field of a tuning (or counters) struct: its name (the field's, nested fields with a dot),
 * its type and offset, the values it accepts and one line saying what it does. */
typedef struct fmk_tune_knob {
    const char *name;
    fmk_tune_type type;
    size_t offset;
    double min, max;
    const char *doc;
} fmk_tune_knob;

/* A struct of knobs: its prefix in names ("fmm3d" for "fmm3d.p2p_rows"), size, defaults and
 * fields. */
typedef struct fmk_tune_table {
    const char *prefix;
    size_t size;
    const void *defaults; /* NULL: all zero (counters) */
    int n_knobs;
    const fmk_tune_knob *knobs;
} fmk_tune_table;

/* A row of a table: FMK_KNOB(struct type, field, FMK_TUNE_INT, min, max, "what it does"). */
// clang-format off
#define FMK_KNOB(type, field, kind, lo, hi, doc) {#field, kind, offsetof(type, field), lo, hi, doc}
// clang-format on
#define FMK_TUNE_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Sets the knob "prefix.name" of the plan's engine to value (an integer knob takes an integral
 * value). FMK_ERR_ARG for an unknown name or a value out of the knob's range. */
fmk_status fmk_plan_tune(fmk_plan *plan, const char *name, double value);
/* Reads the knob "prefix.name" into *value. */
fmk_status fmk_plan_tuned(const fmk_plan *plan, const char *name, double *value);
/* Reads the counter "prefix.name" into *value. */
fmk_status fmk_plan_counter(const fmk_plan *plan, const char *name, double *value);
/* Writes every knob of the plan's engine with its value and doc line, one per line, to buf
 * (size bytes, truncated); returns the length it needed. */
size_t fmk_plan_tune_list(const fmk_plan *plan, char *buf, size_t size);

/* A whole knob struct at once, for tests and benchmarks that keep a copy of an engine's struct
 * (its type from the engine's header), change its fields and apply it to every plan they make.
 * fmk_tune_defaults copies the defaults of the engine (method, dim, backend) into out and
 * returns 1, or returns 0 when there is no such engine in this build or its struct is not
 * size bytes. fmk_plan_tune_copy copies values over the plan's knobs and returns 1 when the
 * plan's engine is (method, dim, its backend) with a struct of size bytes, else changes
 * nothing and returns 0 (a plan of another engine). */
int fmk_tune_defaults(fmk_method method, int dim, fmk_backend backend, void *out, size_t size);
int fmk_plan_tune_copy(fmk_plan *plan, fmk_method method, const void *values, size_t size);

/* core/plan.c's part: the tuning and counter structs of a new plan (NULL where the engine has
 * none), freed by fmk_tune_free. */
fmk_status fmk_tune_alloc(fmk_plan *plan);
void fmk_tune_free(fmk_plan *plan);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_TUNE_H */
