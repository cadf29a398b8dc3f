/* eval.h -- the parts of `fmmkit eval` that its one-process run (cmd_eval.c) and its run under
 * mpirun (eval_mpi.c) share: the job as parsed, reading and checking the inputs, checking and
 * writing the results. Each function prints its own message ("fmmkit eval: ...") and returns
 * an exit status (cli.h). */
#ifndef FMMKIT_CLI_EVAL_H
#define FMMKIT_CLI_EVAL_H

#include <stdint.h>

#include "fmmkit.h"
#include "npy.h"
#include "outputs.h"

typedef struct eval_job {
    const char *sources, *charges, *targets; /* input paths; targets NULL: the sources */
    const char *pot, *grad;                  /* output paths, NULL when not asked */
    fmk_kernel kernel;
    fmk_opts opts;
    double eps;
    int dim;
    int w;  /* doubles a charge and a potential: 2 for cauchy2d, else 1 */
    int gw; /* doubles a gradient */
} eval_job;

typedef struct eval_inputs {
    npy_array src, q, trg; /* trg empty when the targets are the sources */
    int64_t n, m;          /* sources and targets */
} eval_inputs;

/* The output table of a job (outs[0] the potential, outs[1] the gradient), checked against
 * the rule of outputs.h and against the inputs. CLI_OK or CLI_USAGE. */
int eval_outputs_check(const eval_job *job, out_file outs[2]);

/* Reads and checks every input of job (shapes, dtypes, finite values). CLI_OK, else the status
 * with a message naming the file; *in is then freed. */
int eval_read(const eval_job *job, eval_inputs *in);
void eval_inputs_free(eval_inputs *in);

/* Refuses results that overflowed to Inf or NaN (pot, grad: m targets; NULL: not asked). */
int eval_check_results(const eval_job *job, const double *pot, const double *grad, int64_t m);

/* Writes the results at m targets into the outputs checked by eval_outputs_check. */
int eval_write(const eval_job *job, out_file outs[2], const double *pot, const double *grad,
               int64_t m);

/* eval_mpi.c: the job under mpirun (more than one rank), every rank calling it: rank 0's files
 * scattered and gathered, or with per_rank each rank's own files (their paths already made the
 * rank's). Returns this rank's exit status (the caller's ranks_release makes it every rank's). */
int eval_mpi(const eval_job *job, int per_rank);

#endif /* FMMKIT_CLI_EVAL_H */
