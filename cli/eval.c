/* eval.c -- what `fmmkit eval` does with its files, in one process (cmd_eval.c) or under
 * mpirun (eval_mpi.c): the inputs read and checked, the outputs checked before any work, the
 * results checked for overflow and written all or nothing (eval.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "arrayfile.h"
#include "eval.h"
#include "npy.h"
#include "outputs.h"

static const char *const cmd = "eval";

/* "(3, 2)" for messages. */
static const char *shape_text(const npy_array *a, char *buf, size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "(");
    for (int k = 0; k < a->ndim && len < size; k++)
        len += (size_t)snprintf(buf + len, size - len, "%s%lld%s", k ? " " : "",
                                (long long)a->shape[k], a->ndim == 1 || k + 1 < a->ndim ? "," : "");
    if (len < size)
        snprintf(buf + len, size - len, ")");
    return buf;
}

/* Reads a file; on failure prints "fmmkit eval: PATH: problem" and returns CLI_USAGE, or
 * CLI_FAIL when memory ran out. */
static int read_input(const char *path, npy_array *a)
{
    char err[256];
    int rc = arrayfile_read(path, a, err, sizeof err);
    if (rc == NPY_NO_MEMORY) {
        cli_error(cmd, "%s: %s", path, err);
        return CLI_FAIL;
    }
    if (rc != NPY_OK)
        return cli_input_error(cmd, "%s: %s", path, err);
    return CLI_OK;
}

/* Points must be a real (n, dim) array. */
static int check_points(const char *path, const char *what, const npy_array *a, int dim,
                        fmk_kernel kernel)
{
    char shape[128];
    if (a->is_complex)
        return cli_input_error(cmd,
                               "%s: %s must be real (float64, float32, int64 or int32), not %s",
                               path, what, npy_dtype_name(a->dtype));
    if (a->ndim != 2 || a->shape[1] != dim)
        return cli_input_error(cmd,
                               "%s: %s must have shape (N, %d) for kernel %s; this array "
                               "has shape %s",
                               path, what, dim, fmk_kernel_name(kernel),
                               shape_text(a, shape, sizeof shape));
    return CLI_OK;
}

/* NaN and Inf are refused by the library too; checking here lets the message name the file. */
static int check_finite(const char *path, const npy_array *a)
{
    const int64_t values = a->count * (a->is_complex ? 2 : 1);
    for (int64_t i = 0; i < values; i++)
        if (!isfinite(a->data[i])) {
            int64_t e = a->is_complex ? i / 2 : i;
            if (a->ndim == 2)
                return cli_input_error(cmd, "%s: element [%lld, %lld] is %g; values must be finite",
                                       path, (long long)(e / a->shape[1]),
                                       (long long)(e % a->shape[1]), a->data[i]);
            return cli_input_error(cmd, "%s: element [%lld] is %g; values must be finite", path,
                                   (long long)e, a->data[i]);
        }
    return CLI_OK;
}

static int check_charges(const char *path, const npy_array *a, int64_t n, const char *sources_path,
                         fmk_kernel kernel)
{
    char shape[128];
    const int want_complex = fmk_kernel_is_complex(kernel);
    if (a->is_complex != want_complex)
        return cli_input_error(cmd, "%s: kernel %s takes %s charges (%s), not %s", path,
                               fmk_kernel_name(kernel), want_complex ? "complex" : "real",
                               want_complex ? "complex128 or complex64"
                                            : "float64, float32, int64 or int32",
                               npy_dtype_name(a->dtype));
    if (a->ndim != 1)
        return cli_input_error(cmd, "%s: charges must have shape (N,); this array has shape %s",
                               path, shape_text(a, shape, sizeof shape));
    if (a->shape[0] != n)
        return cli_input_error(cmd, "%s: %lld charges for %lld sources (%s)", path,
                               (long long)a->shape[0], (long long)n, sources_path);
    return CLI_OK;
}

/* A sum that overflows float64 (or float32 with --precision fp32) comes back as Inf, or NaN where
 * infinities meet; such results are refused rather than written. */
static int check_result(const char *what, const double *values, int64_t m, int per_target)
{
    for (int64_t i = 0; i < m * per_target; i++)
        if (!isfinite(values[i]))
            return cli_input_error(cmd,
                                   "the %s at target %lld is %g: the sum overflows the "
                                   "floating-point range; nothing was written (scale the "
                                   "charges down: the results are linear in them)",
                                   what, (long long)(i / per_target), values[i]);
    return CLI_OK;
}

/* ---------------------------------------------------------------------------------------------
 * What the one-process run and the distributed one share (eval.h)
 * ------------------------------------------------------------------------------------------ */
int eval_outputs_check(const eval_job *job, out_file outs[2])
{
    outs[0] = (out_file){.option = "--out-pot", .path = job->pot, .member = "pot"};
    outs[1] = (out_file){.option = "--out-grad", .path = job->grad, .member = "grad"};
    const char *const inputs[3] = {job->sources, job->charges, job->targets};
    return outputs_check(cmd, outs, 2, inputs, 3);
}

void eval_inputs_free(eval_inputs *in)
{
    npy_free(&in->src);
    npy_free(&in->q);
    npy_free(&in->trg);
}

int eval_read(const eval_job *job, eval_inputs *in)
{
    int rc;
    memset(in, 0, sizeof *in);
    if ((rc = read_input(job->sources, &in->src)) != CLI_OK ||
        (rc = check_points(job->sources, "sources", &in->src, job->dim, job->kernel)) != CLI_OK ||
        (rc = check_finite(job->sources, &in->src)) != CLI_OK ||
        (rc = read_input(job->charges, &in->q)) != CLI_OK ||
        (rc = check_charges(job->charges, &in->q, in->src.shape[0], job->sources, job->kernel)) !=
            CLI_OK ||
        (rc = check_finite(job->charges, &in->q)) != CLI_OK)
        goto fail;
    if (job->targets &&
        ((rc = read_input(job->targets, &in->trg)) != CLI_OK ||
         (rc = check_points(job->targets, "targets", &in->trg, job->dim, job->kernel)) != CLI_OK ||
         (rc = check_finite(job->targets, &in->trg)) != CLI_OK))
        goto fail;
    in->n = in->src.shape[0];
    in->m = job->targets ? in->trg.shape[0] : in->n;
    return CLI_OK;
fail:
    eval_inputs_free(in);
    return rc;
}

int eval_check_results(const eval_job *job, const double *pot, const double *grad, int64_t m)
{
    int rc = CLI_OK;
    if ((pot && (rc = check_result("potential", pot, m, job->w)) != CLI_OK) ||
        (grad && (rc = check_result("gradient", grad, m, job->gw)) != CLI_OK))
        return rc;
    return CLI_OK;
}

int eval_write(const eval_job *job, out_file outs[2], const double *pot, const double *grad,
               int64_t m)
{
    const int w = job->w;
    outs[0].is_complex = outs[1].is_complex = w == 2;
    outs[0].ndim = 1, outs[0].shape[0] = m, outs[0].data = pot;
    outs[1].ndim = w == 2 ? 1 : 2, outs[1].shape[0] = m, outs[1].shape[1] = job->dim;
    outs[1].data = grad;
    return outputs_write(cmd, outs, 2);
}
