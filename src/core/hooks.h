/*
 * hooks.h -- the contract between libfmmkit and its families built as separate libraries
 * (libfmmkit_mpi, src/mpi/). Never installed; the functions declared here are exported from
 * libfmmkit (FMK_API) so that a library of the same build can call them.
 *
 * A plan may carry a hook table. fmk_plan_set_points, fmk_plan_eval, fmk_plan_eval_many and
 * fmk_plan_destroy hand a hooked plan to its hooks before any check of their own (the hooks
 * validate: for a distributed plan a check that fails on one rank alone must still take part
 * in the collective steps); the *_device calls go to its device hooks (FMK_ERR_UNAVAILABLE
 * where it has none). The hooks keep
 * their own state (hook_state), which core never reads, so core needs no type of theirs (no
 * MPI_Comm in core). docs/distributed.md, "How the work is hooked in".
 */
#ifndef FMMKIT_CORE_HOOKS_H
#define FMMKIT_CORE_HOOKS_H

#include "fmmkit.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fmk_plan_hooks {
    const char *name; /* for messages: "mpi" */
    /* fmk_plan_set_points on the plan: arguments unchecked. */
    fmk_status (*set_points)(fmk_plan *plan, int64_t n_sources, const double *sources,
                             int64_t n_targets, const double *targets);
    /* fmk_plan_eval (is_many 0, n_vectors 1) and fmk_plan_eval_many: arguments unchecked. */
    fmk_status (*eval_many)(fmk_plan *plan, int is_many, int64_t n_vectors, const double *charges,
                            double *pot, double *grad);
    /* fmk_plan_set_points_device, fmk_plan_eval_device and fmk_plan_eval_many_device (is_many
     * 1): the same with device arrays, arguments unchecked; NULL: not taken. */
    fmk_status (*set_points_device)(fmk_plan *plan, int64_t n_sources, const double *d_sources,
                                    int64_t n_targets, const double *d_targets);
    fmk_status (*eval_many_device)(fmk_plan *plan, int is_many, int64_t n_vectors,
                                   const double *d_charges, double *d_pot, double *d_grad);
    /* fmk_plan_destroy: frees the hook state (core frees the plan afterwards). */
    void (*release)(fmk_plan *plan, void *hook_state);
} fmk_plan_hooks;

/* Attaches hooks and their state to a plan that has none and no points (FMK_ERR_STATE
 * otherwise); from then on the plan's calls go to them and destroy calls release(state). */
FMK_API fmk_status fmk_plan_set_hooks(fmk_plan *plan, const fmk_plan_hooks *hooks, void *state);

/* The hook state of a plan whose hooks are these (NULL: another plan, or plan NULL). */
FMK_API void *fmk_plan_hook_state(const fmk_plan *plan, const fmk_plan_hooks *hooks);

/* Records message as the plan's last error (plan NULL: the calling thread's) and returns
 * status; FMK_OK clears the plan's message. */
FMK_API fmk_status fmk_plan_hook_error(fmk_plan *plan, fmk_status status, const char *message);

/* The hooked plan's state after its hooks' set_points: has_points, and info (n_sources,
 * n_targets, bytes, the setup time) copied from the plan that does the work. */
FMK_API void fmk_plan_hook_points(fmk_plan *plan, int has_points, const fmk_info *info);

/* The hooked plan's info after an evaluation (the working plan's phase times and counts). */
FMK_API void fmk_plan_hook_info(fmk_plan *plan, const fmk_info *info);

/* A hooked plan's interrupt (fmk_plan_set_interrupt, fmk_plan_interrupt on it) for the plan
 * that does the work: begin at the start of each call (a stop asked before it is cleared, as
 * an ordinary plan's calls do), poll during it (1: stop; the caller's check runs at most every
 * 10 ms, from the calling thread). */
FMK_API void fmk_plan_hook_interrupt_begin(fmk_plan *plan);
FMK_API int fmk_plan_hook_interrupt_poll(fmk_plan *plan);

/* fmk_plan_set_points on an ordinary plan with two more inputs:
 * lo, hi (NULL: none): a box that the plan's frame contains as well as the points, so that
 *   plans of parts of a larger set of points work in that set's frame (the same mapped
 *   coordinates, the same rounding);
 * slice_base >= 0 (with separate targets): the targets are the sources
 *   [slice_base, slice_base + n_targets), and the pair of target i with source slice_base + i
 *   is to be left out as for targets = sources. *slice_taken (may be NULL) says whether the
 *   plan's engine leaves it out (the CPU direct sum does, by index, exactly as the one-plan
 *   sum); where it is 0, the pair is in the results and the caller removes it. */
FMK_API fmk_status fmk_plan_set_points_in_box(fmk_plan *plan, int64_t n_sources,
                                              const double *sources, int64_t n_targets,
                                              const double *targets, const double lo[3],
                                              const double hi[3], int64_t slice_base,
                                              int *slice_taken);

/* bytes from src to dst, either or both in GPU memory (cudaMemcpy with the kind inferred
 * from the pointers); FMK_OK, FMK_ERR_UNAVAILABLE in a build without CUDA, or the failure with
 * a message on plan (what: the data, for it). */
FMK_API fmk_status fmk_plan_hook_copy(fmk_plan *plan, void *dst, const void *src, size_t bytes,
                                      const char *what);

/* n pairs (a 64-bit key, then a 64-bit value: 16 bytes each) sorted stably by the key's low
 * key_bits bits on the GPU of plan (an ordinary plan of backend cuda; the pairs in host
 * memory). FMK_ERR_UNAVAILABLE for a plan of another backend (or a build without CUDA), else
 * the GPU's status; on any failure the pairs are as they were and the caller sorts on the
 * host. The plan's error message is left as it was. */
FMK_API fmk_status fmk_plan_hook_sort_pairs(fmk_plan *plan, int64_t n, void *pairs, int key_bits);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_CORE_HOOKS_H */
