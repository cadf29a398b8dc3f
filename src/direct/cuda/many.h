/* many.h -- the GPU direct engine's state and its evaluation of several charge vectors in one
 * pass (eval_many): engine.cu's state and single-vector sum, many.cu's passes, p2p_many.cu's
 * kernel (p2p_many.h). C++ only (the engine's .cu files). */
#ifndef FMMKIT_DIRECT_CUDA_MANY_H
#define FMMKIT_DIRECT_CUDA_MANY_H

#include "direct/cuda/p2p_many.h"

/* The engine's state: device.h's, and eval_many's buffer (d_many, cap_many bytes: the vectors'
 * packed charges, the host evaluation's copies, the splits' partial sums, the charge checks),
 * made at the first eval_many. plan->state points to d, the first member. */
struct fmk_direct_state {
    fmk_cuda_direct d;
    void *d_many;
    size_t cap_many;
    double rate_many; /* pairs per second of eval_many's cut launches (0: none yet) */
    int64_t nd_call;  /* the vectors of the eval_many in progress */
};

/* engine.cu: one vector's sum (the engine's eval, the plan's device current), and the pairs a
 * launch of a cut sum takes at the measured rate (pairs per second; 0: none yet). */
fmk_status fmk_direct_engine_eval_one(fmk_plan *plan, const double *charges, double *pot,
                                      double *grad, int on_device);
double fmk_direct_engine_launch_pairs(const fmk_plan *plan, double rate);

/* many.cu: eval_many's device bytes for ns sources, m targets and calls of nd vectors (0 where
 * they go vector by vector), and the engine's eval_many. */
int64_t fmk_direct_many_bytes(const fmk_plan *plan, int64_t ns, int64_t m, int64_t nd);
fmk_status fmk_direct_many_eval(fmk_plan *plan, int64_t nd, const double *charges, double *pot,
                                double *grad, int on_device);

#endif /* FMMKIT_DIRECT_CUDA_MANY_H */
