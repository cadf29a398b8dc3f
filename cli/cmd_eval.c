/* cmd_eval.c -- `fmmkit eval`: potentials and gradients of points and charges in .npy, .npz or
 * HDF5 files (arrayfile.h).
 *
 * The outputs are checked first, then the inputs are read and checked completely before the
 * library is called; the results are checked for overflow and written all or nothing
 * (outputs.h has the rule). */
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
#include "cli_mpi.h"
#include "eval.h"
#include "npy.h"
#include "outputs.h"
#include "ranks.h"

static const char *const cmd = "eval";

static const char usage[] =
    "Usage: fmmkit eval --sources S.npy --charges Q.npy [--targets T.npy]\n"
    "                   [--out-pot P.npy] [--out-grad G.npy] [options]\n"
    "\n"
    "Computes phi(y_i) = sum_j q_j G(y_i, x_j) and/or its gradient at the targets (at the\n"
    "sources, leaving out the self term, when --targets is not given).\n"
    "\n"
    "Files: each names one array by its extension: F.npy (a NumPy file; a FIFO or device\n"
    "such as /dev/stdin is read as .npy too), F.npz:NAME (array NAME of a NumPy archive,\n"
    "stored or deflated; an input without :NAME takes the only array), F.h5:/GROUP/NAME or\n"
    "F.hdf5:... (an HDF5 dataset). Other extensions are refused. Inputs: little-endian,\n"
    "C or Fortran order; float32, int64 and int32 are converted to float64, complex64 to\n"
    "complex128 (HDF5 complex: h5py's (r, i) compound); integers must lie within +-2^53.\n"
    "  --sources S.npy     (N, dim) float64, dim = 3 or 2 as the kernel says\n"
    "  --charges Q.npy     (N,) float64; complex128 for cauchy2d\n"
    "  --targets T.npy     (M, dim) float64 (default: the sources)\n"
    "  --out-pot P.npy     potential, (M,) float64; complex128 for cauchy2d\n"
    "  --out-grad G.npy    gradient, (M, dim) float64; (M,) complex128 dphi/dz for cauchy2d\n"
    "  At least one of --out-pot and --out-grad is required. A .npz or HDF5 output keeps the\n"
    "  file's other arrays and replaces one of the same name (default names: pot, grad);\n"
    "  groups are made as needed; both outputs may go to one file.\n"
    "\n"
    "Outputs are written all or nothing: each to a temporary file beside it, renamed over the\n"
    "old file only when every output is complete; on any failure, Ctrl-C (SIGINT, SIGTERM,\n"
    "SIGHUP) or a file size limit, the temporaries are removed and old outputs stay as they\n"
    "were. A symbolic link is followed (the file it names is replaced). An existing FIFO or\n"
    "character device (a pipe, /dev/stdout, /dev/null) is written in place, never replaced.\n"
    "A directory, block device or socket as output, a missing directory, and an output that is\n"
    "an input file (the same member of it for .npz and HDF5) or the other output are refused\n"
    "(status 2) before any work is done.\n"
    "\n"
    "Options:\n"
    "  --kernel K          laplace (default), plummer, regularized, log2d, cauchy2d\n"
    "  --method M          auto (default), direct, tree, fmm\n"
    "  --backend B         auto (default), cpu, cuda\n"
    "  --eps E             requested relative accuracy, 0 < E < 1 (default 1e-6; fp32: 1e-4)\n"
    "  --theta T           opening angle / separation ratio (default: the method's)\n"
    "  --order K           expansion order (default -1: the method's; tree: 0, 1 or 2)\n"
    "  --leaf-size N       points per leaf (default 0: the method's)\n"
    "  --walk W            tree walk: auto (default), group, stackless\n"
    "  --softening H       softening length, required (> 0) for plummer and regularized\n"
    "  --precision P       fp64 (default) or fp32 arithmetic\n"
    "  --threads N         CPU threads (default 0: OpenMP's default)\n"
    "  --per-rank          under mpirun: each rank reads and writes its own files, every\n"
    "                      {rank} in the paths replaced by its rank (required in each path)\n"
    "  -h, --help          show this help\n"
    "\n"
    "Under mpirun -np K (fmmkit built with MPI) the sum is distributed over the K ranks: rank 0\n"
    "reads the inputs, gives each rank a contiguous near-equal share of the sources (and\n"
    "targets), gathers the results and writes them in the input order, the same files as one\n"
    "process would write (bit for bit for --method direct in fp64, within eps for tree and\n"
    "fmm). With --per-rank each rank gives its own points and gets the results at its own\n"
    "targets; the sum is over every rank's sources. A failure on any rank ends every rank with\n"
    "the same exit status, said once (docs/distributed.md, \"The command under mpirun\").\n"
    "\n"
    "Exit status: 0 success; 1 internal failure (out of memory, a write failed); 2 bad usage\n"
    "or bad input, including results that overflow to Inf or NaN (nothing is written then).\n"
    "Killed by a signal while writing: the signal's status (e.g. 130 for SIGINT), nothing\n"
    "written.\n";

/* ---------------------------------------------------------------------------------------------
 * One process
 * ------------------------------------------------------------------------------------------ */
static int eval_one(const eval_job *job)
{
    out_file outs[2];
    eval_inputs in = {0};
    double *pot = NULL, *grad = NULL;
    fmk_plan *plan = NULL;
    int rc;
    /* The outputs are checked before anything is read or computed. */
    if ((rc = eval_outputs_check(job, outs)) != CLI_OK || (rc = eval_read(job, &in)) != CLI_OK)
        goto done;
    const int64_t n = in.n, m = in.m;
    fmk_status st = fmk_plan_create(&plan, job->dim, job->kernel, job->eps, &job->opts);
    if (st != FMK_OK) {
        rc = cli_library_error(cmd, NULL, st);
        goto done;
    }
    pot = malloc(sizeof(double) * (size_t)(m > 0 ? m * job->w : 1));
    grad = job->grad ? malloc(sizeof(double) * (size_t)(m > 0 ? m * job->gw : 1)) : NULL;
    if (!pot || (job->grad && !grad)) {
        cli_error(cmd, "out of memory for the results of %lld targets", (long long)m);
        rc = CLI_FAIL;
        goto done;
    }
    st = fmk_plan_set_points(plan, n, in.src.data, job->targets ? m : 0,
                             job->targets ? in.trg.data : NULL);
    if (st == FMK_OK)
        st = fmk_plan_eval(plan, in.q.data, job->pot ? pot : NULL, grad);
    if (st != FMK_OK) {
        rc = cli_library_error(cmd, plan, st);
        goto done;
    }
    if ((rc = eval_check_results(job, job->pot ? pot : NULL, grad, m)) == CLI_OK)
        rc = eval_write(job, outs, pot, grad, m);

done:
    outputs_free(outs, 2);
    fmk_plan_destroy(plan);
    eval_inputs_free(&in);
    free(pot);
    free(grad);
    return rc;
}

/* --per-rank: each path given with every "{rank}" replaced by the rank's number (*out,
 * malloc'ed); a path without "{rank}" is a usage error. */
static int rank_path(const char *option, const char *path, int rank, char **out)
{
    *out = NULL;
    if (!path)
        return CLI_OK;
    const char *const mark = "{rank}";
    if (!strstr(path, mark))
        return cli_usage(cmd,
                         "--per-rank: the path of --%s must contain {rank} (each rank reads and "
                         "writes its own files), not '%s'",
                         option, path);
    char num[16];
    int digits = snprintf(num, sizeof num, "%d", rank);
    size_t len = 1;
    for (const char *p = path; *p;)
        if (strncmp(p, mark, 6) == 0)
            len += (size_t)digits, p += 6;
        else
            len++, p++;
    char *s = malloc(len), *o = s;
    if (!s) {
        cli_error(cmd, "out of memory");
        return CLI_FAIL;
    }
    for (const char *p = path; *p;)
        if (strncmp(p, mark, 6) == 0)
            o += sprintf(o, "%s", num), p += 6;
        else
            *o++ = *p++;
    *o = '\0';
    *out = s;
    return CLI_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The command
 * ------------------------------------------------------------------------------------------ */
static int eval_command(int argc, char **argv)
{
    const char *sources_path = NULL, *charges_path = NULL, *targets_path = NULL;
    const char *pot_path = NULL, *grad_path = NULL;
    const char *kernel_name = "laplace", *method_name = "auto", *backend_name = "auto";
    const char *precision_name = "fp64", *walk_name = "auto";
    double eps = NAN, theta = 0, softening = 0; /* NAN: not given */
    int64_t threads = 0, order = -1, leaf_size = 0;
    int per_rank = 0;
    args_opt table[] = {
        {"sources", ARGS_STRING, &sources_path, 0, 0},
        {"charges", ARGS_STRING, &charges_path, 0, 0},
        {"targets", ARGS_STRING, &targets_path, 0, 0},
        {"out-pot", ARGS_STRING, &pot_path, 0, 0},
        {"out-grad", ARGS_STRING, &grad_path, 0, 0},
        {"kernel", ARGS_STRING, &kernel_name, 0, 0},
        {"method", ARGS_STRING, &method_name, 0, 0},
        {"backend", ARGS_STRING, &backend_name, 0, 0},
        {"precision", ARGS_STRING, &precision_name, 0, 0},
        {"eps", ARGS_DOUBLE, &eps, 0, 0},
        {"theta", ARGS_DOUBLE, &theta, 0, 0},
        {"order", ARGS_INT, &order, -1, 0},
        {"leaf-size", ARGS_INT, &leaf_size, 0, 0},
        {"walk", ARGS_STRING, &walk_name, 0, 0},
        {"softening", ARGS_DOUBLE, &softening, 0, 0},
        {"threads", ARGS_INT, &threads, 0, 0},
        {"per-rank", ARGS_FLAG, &per_rank, 0, 0},
    };
    const int n_table = (int)(sizeof table / sizeof table[0]);
    int done, rc = args_parse(cmd, argc, argv, table, n_table, usage, &done);
    if (rc != CLI_OK || done)
        return rc;

    eval_job job = {.sources = sources_path,
                    .charges = charges_path,
                    .targets = targets_path,
                    .pot = pot_path,
                    .grad = grad_path};
    const args_method_names names = {kernel_name, method_name, backend_name, precision_name,
                                     walk_name,   order,       leaf_size};
    if ((rc = args_method_opts(cmd, &names, &job.kernel, &job.opts)) != CLI_OK)
        return rc;
    if (!sources_path)
        return cli_usage(cmd, "--sources is required");
    if (!charges_path)
        return cli_usage(cmd, "--charges is required");
    if (!pot_path && !grad_path)
        return cli_usage(cmd, "nothing to write: give --out-pot, --out-grad or both");
    if (threads > INT32_MAX)
        return cli_usage(cmd, "--threads: %lld is out of range", (long long)threads);
    if ((job.kernel == FMK_KERNEL_PLUMMER || job.kernel == FMK_KERNEL_REGULARIZED) &&
        !(softening > 0))
        return cli_usage(cmd, "kernel %s needs a softening length: --softening H with H > 0",
                         fmk_kernel_name(job.kernel));
    job.opts.theta = theta;
    job.opts.softening = softening;
    job.opts.threads = (int32_t)threads;
    job.dim = fmk_kernel_dim(job.kernel);
    job.w = fmk_kernel_is_complex(job.kernel) ? 2 : 1;
    job.gw = fmk_kernel_is_complex(job.kernel) ? 2 : job.dim;
    job.eps = isnan(eps) ? fmk_eps_default(job.opts.precision) : eps;

    char *paths[5] = {NULL};
    if (per_rank) {
        const char *const options[5] = {"sources", "charges", "targets", "out-pot", "out-grad"};
        const char **fields[5] = {&job.sources, &job.charges, &job.targets, &job.pot, &job.grad};
        for (int k = 0; k < 5 && rc == CLI_OK; k++)
            if ((rc = rank_path(options[k], *fields[k], cli_mpi_rank(), &paths[k])) == CLI_OK &&
                paths[k])
                *fields[k] = paths[k];
    }
    if (rc == CLI_OK)
        rc = cli_mpi_size() > 1 ? eval_mpi(&job, per_rank) : eval_one(&job);
    for (int k = 0; k < 5; k++)
        free(paths[k]);
    return rc;
}

int cmd_eval(int argc, char **argv)
{
    /* under mpirun: one message for the job (ranks.h) */
    ranks_held held;
    ranks_hold(&held);
    return ranks_release(&held, eval_command(argc, argv));
}
