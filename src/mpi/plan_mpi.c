/* plan_mpi.c -- distributed plans: fmk_plan_create_mpi and the hooks that make
 * fmk_plan_set_points, fmk_plan_eval(_many) and fmk_plan_destroy collective.
 *
 * First implementation, "replicated sources" (docs/distributed.md): the global box by
 * allreduce, every rank's sources gathered on every rank in rank order, and each rank's local
 * plan evaluating its own targets against all of them in the global frame. Every step that can
 * fail on one rank ends with fmk_mpi_agree before the next collective call. */
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hooks.h"
#include "fmmkit_mpi.h"
#include "mpi/mpi_internal.h"

static fmk_status mpi_set_points(fmk_plan *plan, int64_t n_sources, const double *sources,
                                 int64_t n_targets, const double *targets);
static fmk_status mpi_eval_many(fmk_plan *plan, int is_many, int64_t n_vectors,
                                const double *charges, double *pot, double *grad);
static void mpi_release(fmk_plan *plan, void *hook_state);

static const fmk_plan_hooks mpi_hooks = {
    .name = "mpi",
    .set_points = mpi_set_points,
    .eval_many = mpi_eval_many,
    .set_points_device = fmk_mpi_set_points_device,
    .eval_many_device = fmk_mpi_eval_many_device,
    .release = mpi_release,
};

fmk_status fmk_mpi_set_points_host(fmk_plan *plan, int64_t ns, const double *sources, int64_t nt,
                                   const double *targets)
{
    return mpi_set_points(plan, ns, sources, nt, targets);
}

fmk_status fmk_mpi_eval_host(fmk_plan *plan, int is_many, int64_t nd, const double *charges,
                             double *pot, double *grad)
{
    return mpi_eval_many(plan, is_many, nd, charges, pot, grad);
}

/* The most points a plan takes from all ranks together: MPI counts are int (in points). */
#define MAX_GATHERED ((int64_t)INT_MAX)

/* The local plan's interrupt check: the distributed plan's (its caller's check and its stop
 * flag), so that fmk_plan_set_interrupt and fmk_plan_interrupt on it stop this rank's work;
 * the status agreement then stops every rank. */
static int forward_interrupt(void *outer)
{
    return fmk_plan_hook_interrupt_poll(outer);
}

static fmk_status fail(fmk_plan *plan, fmk_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static fmk_status fail(fmk_plan *plan, fmk_status st, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return fmk_plan_hook_error(plan, st, text);
}

/* Index of the first non-finite value of x[0..n), or -1. */
static int64_t first_nonfinite(const double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return i;
    return -1;
}

static void free_state(fmk_mpi_state *s)
{
    if (!s)
        return;
    fmk_plan_destroy(s->local);
    fmk_mpi_partition_free(s);
    fmk_mpi_let_free(s);
    fmk_mpi_scratch_free(s);
    int finalized = 0;
    MPI_Finalized(&finalized);
    /* (its errors are returned, and ignored: destroy cannot fail) */
    if (!finalized && s->comm != MPI_COMM_NULL)
        MPI_Comm_free(&s->comm);
    free(s->counts);
    free(s->displs);
    free(s->cost);
    free(s->owner);
    free(s);
}

static void mpi_release(fmk_plan *plan, void *hook_state)
{
    (void)plan;
    free_state(hook_state);
}

/* The GPU of this rank into *gpu: its rank among the ranks of its node (MPI_COMM_TYPE_SHARED)
 * modulo the node's GPUs, so that one rank a GPU is what a plain mpirun gives; 0 with one GPU
 * or none, and without asking CUDA where the plan does not want a GPU (opts: backend cpu, or a
 * device given). Collective over comm; the status of its MPI calls (the thread's message). */
static fmk_status node_gpu(MPI_Comm comm, fmk_mpi_fault *fault, int rank, const fmk_opts *opts,
                           int *gpu)
{
    MPI_Comm node = MPI_COMM_NULL;
    int local = 0;
    *gpu = 0;
    fmk_status st = FMK_MPI(NULL, fault, MPI_Comm_split_type,
                            (comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    if (st == FMK_OK && node != MPI_COMM_NULL) {
        /* (node's errors go to comm's handler, which it inherits: returned) */
        st = FMK_MPI(NULL, fault, MPI_Comm_rank, (node, &local));
        MPI_Comm_free(&node);
    }
    if (st != FMK_OK || (opts && (opts->backend == FMK_BACKEND_CPU || opts->device != 0)))
        return st;
    const int gpus = fmk_cuda_device_count();
    *gpu = gpus > 1 ? local % gpus : 0;
    return FMK_OK;
}

/* The local plan's options into *o: the caller's, with device 0 (the default) made this
 * rank's GPU (node_gpu); a nonzero device is the caller's choice and stays. */
static const fmk_opts *local_opts(fmk_opts *o, const fmk_opts *opts, int gpu)
{
    if (opts)
        *o = *opts;
    else
        fmk_opts_default(o);
    if (o->device == 0)
        o->device = gpu;
    return o;
}

int fmk_plan_is_mpi(const fmk_plan *plan)
{
    return fmk_plan_hook_state(plan, &mpi_hooks) != NULL;
}

fmk_status fmk_plan_create_mpi(fmk_plan **plan, MPI_Comm comm, int dim, fmk_kernel kernel,
                               double eps, const fmk_opts *opts)
{
    if (!plan)
        return fail(NULL, FMK_ERR_NULL, "fmk_plan_create_mpi: plan (the output) is NULL");
    *plan = NULL;
    MPI_Comm dup = MPI_COMM_NULL;
    fmk_status st = fmk_mpi_open(comm, "fmk_plan_create_mpi", &dup);
    if (st != FMK_OK)
        return st;
    fmk_mpi_state *s = calloc(1, sizeof *s);
    fmk_mpi_fault spare = {0}, *fault = s ? &s->fault : &spare;
    int rank = 0, size = 1, gpu = 0;
    st = FMK_MPI(NULL, fault, MPI_Comm_rank, (dup, &rank));
    if (st == FMK_OK)
        st = FMK_MPI(NULL, fault, MPI_Comm_size, (dup, &size));
    if (st == FMK_OK)
        st = node_gpu(dup, fault, rank, opts, &gpu); /* collective */
    fmk_opts lopts;
    if (st == FMK_OK && !s)
        st = fail(NULL, FMK_ERR_NOMEM, "fmk_plan_create_mpi: out of memory");
    if (s) {
        s->comm = dup;
        s->rank = rank;
        s->size = size;
    }
    if (st == FMK_OK) {
        s->counts = calloc((size_t)s->size, sizeof *s->counts);
        s->displs = calloc((size_t)s->size, sizeof *s->displs);
        s->cost = calloc((size_t)s->size * 2, sizeof *s->cost); /* and measure_cost's */
        if (!s->counts || !s->displs || !s->cost)
            st = fail(NULL, FMK_ERR_NOMEM, "fmk_plan_create_mpi: out of memory");
    }
    fmk_plan *outer = NULL;
    if (st == FMK_OK)
        st = fmk_plan_create(&outer, dim, kernel, eps, opts);
    if (st == FMK_OK)
        st = fmk_plan_create(&s->local, dim, kernel, eps, local_opts(&lopts, opts, gpu));
    st = fmk_mpi_agree(NULL, dup, rank, fault, st);
    if (st == FMK_OK) /* the values were valid on every rank: now they must be the same */
        st = fmk_mpi_same_arguments(dup, fault, dim, kernel, eps, opts);
    if (st == FMK_OK) {
        s->dim = dim;
        s->kernel = kernel;
        s->softening = opts ? opts->softening : 0;
        s->method = opts ? opts->method : FMK_METHOD_AUTO;
        s->balance = 1.05;
        s->let_on = 1;
        s->charge_width = fmk_kernel_is_complex(kernel) ? 2 : 1;
        s->grad_width = fmk_kernel_is_complex(kernel) ? 2 : dim;
        st = fmk_plan_set_hooks(outer, &mpi_hooks, s);
        if (st == FMK_OK)
            st = fmk_plan_set_interrupt(s->local, forward_interrupt, outer);
        if (st != FMK_OK) /* a defect, the same on every rank */
            fail(NULL, st, "fmk_plan_create_mpi: %s", fmk_plan_last_error(outer));
    }
    if (st != FMK_OK) {
        fmk_plan_destroy(outer);
        if (s)
            free_state(s);
        else
            MPI_Comm_free(&dup);
        return st;
    }
    *plan = outer;
    return FMK_OK;
}

fmk_status fmk_plan_create_mpi_f(fmk_plan **plan, MPI_Fint comm, int dim, fmk_kernel kernel,
                                 double eps, const fmk_opts *opts)
{
    int initialized = 0, finalized = 0;
    if (MPI_Initialized(&initialized) != MPI_SUCCESS || MPI_Finalized(&finalized) != MPI_SUCCESS ||
        !initialized || finalized) /* MPI_Comm_f2c needs MPI: fmk_plan_create_mpi says why */
        return fmk_plan_create_mpi(plan, MPI_COMM_NULL, dim, kernel, eps, opts);
    return fmk_plan_create_mpi(plan, MPI_Comm_f2c(comm), dim, kernel, eps, opts);
}

/* The local checks of set_points (fmk_plan_set_points's) and this rank's bounding box into
 * lo, hi (lo > hi: no points). */
static fmk_status check_points(fmk_plan *plan, int dim, int64_t ns, const double *sources,
                               int64_t nt, const double *targets, double lo[3], double hi[3])
{
    for (int k = 0; k < 3; k++)
        lo[k] = INFINITY, hi[k] = -INFINITY;
    if (ns < 0 || ns > MAX_GATHERED)
        return fail(plan, FMK_ERR_ARG, "n_sources = %lld is out of range (0..%lld)", (long long)ns,
                    (long long)MAX_GATHERED);
    if (nt < 0 || nt > MAX_GATHERED)
        return fail(plan, FMK_ERR_ARG, "n_targets = %lld is out of range (0..%lld)", (long long)nt,
                    (long long)MAX_GATHERED);
    if (!sources && ns > 0)
        return fail(plan, FMK_ERR_NULL, "sources is NULL but n_sources = %lld", (long long)ns);
    if (!targets && nt > 0)
        return fail(plan, FMK_ERR_NULL,
                    "targets is NULL but n_targets = %lld (pass n_targets = 0 and targets = NULL "
                    "to evaluate at the sources)",
                    (long long)nt);
    for (int pass = 0; pass < 2; pass++) {
        const double *x = pass ? targets : sources;
        const int64_t n = pass ? nt : ns;
        if (!x)
            continue;
        const int64_t bad = first_nonfinite(x, n * dim);
        if (bad >= 0)
            return fail(plan, FMK_ERR_NONFINITE,
                        "%s[%lld] has coordinate %d = %g; points must "
                        "be finite",
                        pass ? "targets" : "sources", (long long)(bad / dim), (int)(bad % dim),
                        x[bad]);
        for (int64_t i = 0; i < n; i++)
            for (int k = 0; k < dim; k++) {
                lo[k] = x[dim * i + k] < lo[k] ? x[dim * i + k] : lo[k];
                hi[k] = x[dim * i + k] > hi[k] ? x[dim * i + k] : hi[k];
            }
    }
    return FMK_OK;
}

/* The plan without points on every rank (after a failure past validation). */
static void drop_points(fmk_plan *plan, fmk_mpi_state *s)
{
    fmk_info none;
    memset(&none, 0, sizeof none);
    fmk_plan_set_points(s->local, 0, NULL, 0, NULL); /* frees the local plan's points */
    fmk_plan_hook_points(plan, 0, &none);
    s->n_sources = s->n_targets = s->n_all = 0;
    s->has_points = 0;
    fmk_mpi_partition_free(s);
    fmk_mpi_let_free(s);
    fmk_mpi_scratch_free(s);
}

/* The counts and displacements of every rank's sources (in points) from the gathered counts;
 * FMK_ERR_UNAVAILABLE (the same on every rank) when they exceed what MPI counts. */
static fmk_status layout(fmk_plan *plan, fmk_mpi_state *s, const int64_t *all_n)
{
    int64_t total = 0;
    for (int r = 0; r < s->size; r++) {
        s->displs[r] = (int)total;
        s->counts[r] = (int)all_n[r];
        total += all_n[r];
        if (total > MAX_GATHERED)
            return fail(plan, FMK_ERR_UNAVAILABLE,
                        "the ranks hold more than %lld sources together, which this version's "
                        "replicated sources cannot gather (docs/distributed.md)",
                        (long long)MAX_GATHERED);
    }
    s->n_all = total;
    return FMK_OK;
}

/* G(0) in caller units for the smooth kernels (the coincident pair's value), else 0. */
static double self_value(fmk_kernel kernel, double softening)
{
    if (kernel == FMK_KERNEL_PLUMMER)
        return 1.0 / softening;
    if (kernel == FMK_KERNEL_REGULARIZED)
        return 1.5 / softening;
    return 0;
}

/* Clears fmk_plan_mpi_info's phases of a set_points (points 1, with the evaluation's) or of
 * an evaluation. */
static void reset_stats(fmk_mpi_state *s, int points)
{
    fmk_mpi_info *i = &s->stats;
    if (points) {
        i->seconds_partition = i->seconds_tree = i->seconds_exchange_points = 0;
        i->seconds_local_set_points = 0;
        i->bytes_sent_points = 0;
        i->targets_sent = 0;
    }
    i->seconds_exchange_charges = i->seconds_moments = i->seconds_local_eval = 0;
    i->seconds_results_home = 0;
    i->bytes_sent_eval = 0;
}

/* Every rank's cost a target (the partition's weights at the next set_points): the mean of
 * this evaluation's measured cost and the previous estimate, where every rank has one (a step's
 * timing jitter, on busy cores, then moves runs of the curve half as much; a real change is
 * followed within a few evaluations); collective, after an agreed evaluation. */
static fmk_status measure_cost(fmk_plan *plan, fmk_mpi_state *s, int64_t n_evaluated)
{
    const double c = n_evaluated > 0 ? s->stats.seconds_local_eval / (double)n_evaluated : 0;
    double *now = s->cost + s->size; /* (cost holds 2 x size) */
    const fmk_status st =
        FMK_MPI(plan, &s->fault, MPI_Allgather, (&c, 1, MPI_DOUBLE, now, 1, MPI_DOUBLE, s->comm));
    if (st != FMK_OK)
        return st;
    int all = 1; /* the same test on every rank: the costs are the same everywhere */
    for (int r = 0; r < s->size; r++)
        all &= s->cost[r] > 0 && now[r] > 0;
    for (int r = 0; r < s->size; r++)
        s->cost[r] = all ? 0.5 * (s->cost[r] + now[r]) : now[r];
    return FMK_OK;
}

/* The plan's state once its local plan has its points (every rank). */
/* The plan's info from its local plan's: this rank's counts, and the host memory of both (the
 * work buffers kept in the plan: scratch.c). */
static void report(fmk_plan *plan, fmk_mpi_state *s)
{
    fmk_info info;
    fmk_plan_info(s->local, &info);
    info.n_sources = s->n_sources;
    info.n_targets = s->n_targets;
    info.bytes_host += fmk_mpi_scratch_bytes(s);
    fmk_plan_hook_points(plan, 1, &info);
}

static void points_done(fmk_plan *plan, fmk_mpi_state *s, int64_t ns, int64_t nt)
{
    s->n_sources = ns, s->n_targets = nt;
    s->has_points = 1;
    report(plan, s);
    fmk_plan_hook_error(plan, FMK_OK, NULL);
}

/* set_points with the treecode's distributed sources (let.c): the targets partitioned (always),
 * the sources kept by their run's rank, the locally essential trees exchanged. *handled 0:
 * nothing to partition (no targets on any rank), the replicated path goes on. */
static fmk_status let_points(fmk_plan *plan, fmk_mpi_state *s, int64_t ns, const double *sources,
                             int64_t nt, const double *targets, int64_t offset, const double lo[3],
                             const double hi[3], int *handled)
{
    int all_self = s->self;
    *handled = 1;
    fmk_status st = FMK_MPI(plan, &s->fault, MPI_Allreduce,
                            (MPI_IN_PLACE, &all_self, 1, MPI_INT, MPI_MIN, s->comm));
    if (st != FMK_OK) {
        drop_points(plan, s);
        return st;
    }
    double *moved = NULL, *src = NULL;
    int64_t n_src = 0;
    const double t0 = MPI_Wtime();
    st = fmk_mpi_partition(plan, s, nt, s->self ? sources : targets, s->self ? offset : -1, 0, 1,
                           lo, hi, &moved);
    s->stats.seconds_partition = MPI_Wtime() - t0;
    if (st == FMK_OK && !s->moved) {
        *handled = 0;
        return FMK_OK;
    }
    fmk_info li;
    fmk_plan_info(s->local, &li);
    if (st == FMK_OK)
        st = fmk_mpi_let_setup(plan, s, ns, sources, all_self, &moved, s->n_local, lo, hi,
                               li.theta > 0 ? li.theta : 0.6, &src, &n_src);
    int taken = 0;
    if (st == FMK_OK) {
        const double t1 = MPI_Wtime();
        /* all_self: the targets are the first sources (let_setup took the array moved) */
        st = fmk_plan_set_points_in_box(s->local, n_src, src, s->n_local, all_self ? src : moved,
                                        lo, hi, all_self ? 0 : -1, &taken);
        s->stats.seconds_local_set_points = MPI_Wtime() - t1;
        if (st != FMK_OK)
            fmk_plan_hook_error(plan, st, fmk_plan_last_error(s->local));
        st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st);
    }
    free(src), free(moved);
    if (st != FMK_OK) {
        drop_points(plan, s);
        return st;
    }
    s->self_value = taken ? 0 : self_value(s->kernel, s->softening);
    points_done(plan, s, ns, nt);
    return FMK_OK;
}

static fmk_status mpi_set_points(fmk_plan *plan, int64_t ns, const double *sources, int64_t nt,
                                 const double *targets)
{
    fmk_mpi_state *s = fmk_plan_hook_state(plan, &mpi_hooks);
    const int dim = s->dim, self = targets == NULL;
    double lo[3], hi[3];
    if (s->fault.failed) /* (no MPI call: docs/distributed.md, "MPI's own errors") */
        return fmk_mpi_refuse_failed(plan, &s->fault, "fmk_plan_set_points");
    reset_stats(s, 1);
    fmk_plan_hook_interrupt_begin(plan);
    fmk_status st = check_points(plan, dim, ns, sources, nt, targets, lo, hi);
    if (st == FMK_OK && self)
        nt = ns;
    /* validation failed on a rank: every rank keeps its points */
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) != FMK_OK)
        return st;

    double box[6]; /* the global box: min of lo, min of -hi */
    for (int k = 0; k < 3; k++)
        box[k] = lo[k], box[3 + k] = -hi[k];
    st = FMK_MPI(plan, &s->fault, MPI_Allreduce,
                 (MPI_IN_PLACE, box, 6, MPI_DOUBLE, MPI_MIN, s->comm));
    for (int k = 0; k < 3; k++)
        lo[k] = box[k], hi[k] = -box[3 + k];
    int64_t *all_n = malloc((size_t)s->size * sizeof *all_n);
    if (st == FMK_OK && !all_n)
        st = fail(plan, FMK_ERR_NOMEM, "out of host memory");
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) == FMK_OK)
        st = FMK_MPI(plan, &s->fault, MPI_Allgather,
                     (&ns, 1, MPI_INT64_T, all_n, 1, MPI_INT64_T, s->comm));
    if (st != FMK_OK) {
        free(all_n);
        drop_points(plan, s);
        return st;
    }
    int64_t first = 0; /* the global index of this rank's first source */
    for (int r = 0; r < s->rank; r++)
        first += all_n[r];
    s->self = self;
    if (fmk_mpi_let_applies(s)) { /* no gather of the sources: no limit on their total */
        int handled = 0;
        st = let_points(plan, s, ns, sources, nt, targets, first, lo, hi, &handled);
        if (handled) {
            free(all_n);
            return st;
        }
    }
    st = layout(plan, s, all_n);
    free(all_n);
    const int64_t n_all = s->n_all, offset = st == FMK_OK ? s->displs[s->rank] : 0;
    double *all = NULL;
    if (st == FMK_OK) {
        all = malloc((size_t)(n_all > 0 ? n_all : 1) * (size_t)dim * sizeof(double));
        if (!all)
            st = fail(plan, FMK_ERR_NOMEM, "out of host memory gathering %lld sources",
                      (long long)n_all);
    }
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) != FMK_OK) {
        free(all);
        drop_points(plan, s);
        return st;
    }
    static const double none[3] = {0, 0, 0};
    double t0 = MPI_Wtime();
    st = fmk_mpi_allgatherv_rows(plan, &s->fault, s->comm, ns > 0 ? sources : none, (int)ns, all,
                                 s->counts, s->displs, dim);
    s->stats.seconds_exchange_points = MPI_Wtime() - t0;
    s->stats.bytes_sent_points = ns * dim * 8 * (s->size - 1);

    /* the partition of the targets: where every rank's targets are its sources and the smooth
     * kernel's self pair is left out by index (the direct sum), the curve is the global source
     * order, so that each rank's share is a slice of the sources */
    int all_self = self;
    if (st == FMK_OK)
        st = FMK_MPI(plan, &s->fault, MPI_Allreduce,
                     (MPI_IN_PLACE, &all_self, 1, MPI_INT, MPI_MIN, s->comm));
    if (st != FMK_OK) {
        free(all);
        drop_points(plan, s);
        return st;
    }
    const int by_index = all_self && self_value(s->kernel, s->softening) != 0 &&
                         s->method != FMK_METHOD_TREE && s->method != FMK_METHOD_FMM;
    double *moved = NULL;
    t0 = MPI_Wtime();
    st = fmk_mpi_partition(plan, s, nt, self ? all + dim * offset : targets, self ? offset : -1,
                           by_index, 0, lo, hi, &moved);
    s->stats.seconds_partition = MPI_Wtime() - t0;
    if (st != FMK_OK) {
        free(all);
        drop_points(plan, s);
        return st;
    }
    /* this rank's plan: all sources, its targets (or its slice of the sources, or the targets
     * moved to it), in the global box, so that every mapped coordinate is the one-rank plan's */
    int taken = 0;
    const int any = lo[0] <= hi[0]; /* some rank has points */
    t0 = MPI_Wtime();
    if (s->moved)
        st = fmk_plan_set_points_in_box(s->local, n_all, all, s->n_local, moved, any ? lo : NULL,
                                        any ? hi : NULL, fmk_mpi_moved_slice(s), &taken);
    else
        st = fmk_plan_set_points_in_box(s->local, n_all, all, nt,
                                        self ? all + dim * offset : targets, any ? lo : NULL,
                                        any ? hi : NULL, self ? offset : -1, &taken);
    s->stats.seconds_local_set_points = MPI_Wtime() - t0;
    free(all);
    free(moved);
    if (st != FMK_OK)
        fmk_plan_hook_error(plan, st, fmk_plan_last_error(s->local));
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) != FMK_OK) {
        drop_points(plan, s);
        return st;
    }
    /* moved: the targets that are sources are known by their index (local_src) */
    s->self_value = (self || s->moved) && !taken ? self_value(s->kernel, s->softening) : 0;
    points_done(plan, s, ns, nt);
    return FMK_OK;
}

/* The local checks of an evaluation (fmk_plan_eval's), n_vectors the same on every rank. */
static fmk_status check_eval(fmk_plan *plan, fmk_mpi_state *s, const char *fn, int has_points,
                             int64_t nd, const double *charges, const double *pot,
                             const double *grad)
{
    int64_t range[2] = {nd, -nd}; /* the least and the largest n_vectors over the ranks */
    const fmk_status st = FMK_MPI(plan, &s->fault, MPI_Allreduce,
                                  (MPI_IN_PLACE, range, 2, MPI_INT64_T, MPI_MIN, s->comm));
    if (st != FMK_OK)
        return st;
    if (!has_points)
        return fail(plan, FMK_ERR_STATE, "%s: no points yet; call fmk_plan_set_points first", fn);
    if (nd < 0)
        return fail(plan, FMK_ERR_ARG, "%s: n_vectors = %lld is negative", fn, (long long)nd);
    if (range[0] != -range[1])
        return fail(plan, FMK_ERR_ARG,
                    "%s: the ranks passed different n_vectors (%lld .. %lld); every rank must "
                    "evaluate the same number of charge vectors",
                    fn, (long long)range[0], (long long)-range[1]);
    if (!charges && s->n_sources > 0 && nd > 0)
        return fail(plan, FMK_ERR_NULL, "%s: charges is NULL", fn);
    if (!pot && !grad)
        return fail(plan, FMK_ERR_ARG, "%s: pot and grad are both NULL; ask for at least one", fn);
    const int64_t nc = s->n_sources * s->charge_width;
    for (int64_t v = 0; v < nd && charges; v++) {
        const int64_t bad = first_nonfinite(charges + v * nc, nc);
        if (bad >= 0)
            return fail(plan, FMK_ERR_NONFINITE,
                        "%s: charges[%lld]%s is %g; charges must be "
                        "finite",
                        fn, (long long)(bad / s->charge_width),
                        nd > 1 ? " (of a later charge vector)" : "", charges[v * nc + bad]);
    }
    return FMK_OK;
}

/* Removes the coincident pair q_i G(0) of each target from the potentials (the gradient's
 * term is 0): for a rank whose targets are its sources where the local engine kept it. */
static void remove_self(const fmk_mpi_state *s, int64_t nd, const double *charges, double *pot)
{
    const int64_t n = s->n_sources;
    for (int64_t v = 0; v < nd; v++)
        for (int64_t i = 0; i < n; i++)
            pot[v * n + i] -= charges[v * n + i] * s->self_value;
}

/* The evaluation with the treecode's distributed sources: the locally essential trees'
 * charges exchanged (let.c), the moved targets evaluated here, the results sent home. */
static fmk_status let_eval(fmk_plan *plan, fmk_mpi_state *s, int is_many, int64_t nd,
                           const double *charges, double *pot, double *grad)
{
    const char *fn = is_many ? "fmk_plan_eval_many" : "fmk_plan_eval";
    double *q = NULL, *tq = NULL; /* the plan's buffers */
    fmk_status st = fmk_mpi_let_charges(plan, s, nd, charges, s->self, &q, &tq);
    if (st != FMK_OK)
        return st;
    const int cw = s->charge_width, gw = s->grad_width;
    const int64_t nt = s->n_local;
    const size_t rn = (size_t)nd * (size_t)(nt > 0 ? nt : 1) * (size_t)(cw + gw);
    double *staged = fmk_mpi_scratch(s, FMK_MPI_STAGED, rn * sizeof(double));
    st = staged ? FMK_OK
                : fail(plan, FMK_ERR_NOMEM, "%s: out of host memory for %lld results", fn,
                       (long long)rn);
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) != FMK_OK)
        return st;
    double *sp = pot ? staged : NULL;
    double *sg = grad ? staged + (size_t)nd * (size_t)nt * (size_t)cw : NULL;
    const double t0 = MPI_Wtime();
    st = is_many ? fmk_plan_eval_many(s->local, nd, q, sp, sg) : fmk_plan_eval(s->local, q, sp, sg);
    s->stats.seconds_local_eval = MPI_Wtime() - t0;
    if (st != FMK_OK)
        fmk_plan_hook_error(plan, st, fmk_plan_last_error(s->local));
    if (st == FMK_OK && sp && s->self_value != 0)
        for (int64_t k = 0; k < nd * nt; k++)
            sp[k] -= tq[k] * s->self_value;
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) == FMK_OK)
        st = measure_cost(plan, s, nt); /* (waits for the slowest rank: not in the exchange's) */
    if (st == FMK_OK) {
        const double t1 = MPI_Wtime();
        st = fmk_mpi_send_home(plan, s, nd, sp, sg, pot, grad);
        s->stats.seconds_results_home = MPI_Wtime() - t1;
    }
    if (st != FMK_OK)
        return st;
    if (nd > 1) /* the work buffers stay for one vector's evaluations, not for many */
        fmk_mpi_scratch_free(s);
    report(plan, s);
    return fmk_plan_hook_error(plan, FMK_OK, NULL);
}

static fmk_status mpi_eval_many(fmk_plan *plan, int is_many, int64_t nd, const double *charges,
                                double *pot, double *grad)
{
    fmk_mpi_state *s = fmk_plan_hook_state(plan, &mpi_hooks);
    const char *fn = is_many ? "fmk_plan_eval_many" : "fmk_plan_eval";
    if (s->fault.failed) /* (no MPI call: docs/distributed.md, "MPI's own errors") */
        return fmk_mpi_refuse_failed(plan, &s->fault, fn);
    fmk_plan_hook_interrupt_begin(plan);
    fmk_status st = check_eval(plan, s, fn, s->has_points, nd, charges, pot, grad);
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) != FMK_OK)
        return st;
    if (nd == 0)
        return fmk_plan_hook_error(plan, FMK_OK, NULL);
    reset_stats(s, 0);
    if (s->let)
        return let_eval(plan, s, is_many, nd, charges, pot, grad);
    const int cw = s->charge_width, gw = s->grad_width;
    const int64_t ns = s->n_sources, n_all = s->n_all;
    const int64_t nt = s->moved ? s->n_local : s->n_targets; /* the targets evaluated here */
    /* every vector's charges of every rank, and this rank's staged results */
    const size_t qn = (size_t)nd * (size_t)(n_all > 0 ? n_all : 1) * (size_t)cw;
    const size_t rn = (size_t)nd * (size_t)(nt > 0 ? nt : 1) * (size_t)(cw + gw);
    double *all_q = fmk_mpi_scratch(s, FMK_MPI_CHARGES, qn * sizeof(double));
    double *staged = fmk_mpi_scratch(s, FMK_MPI_STAGED, rn * sizeof(double));
    if (!all_q || !staged)
        st = fail(plan, FMK_ERR_NOMEM, "%s: out of host memory for %lld charges and %lld results",
                  fn, (long long)qn, (long long)rn);
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) != FMK_OK)
        return st;
    static const double none[2] = {0, 0};
    double t0 = MPI_Wtime();
    s->stats.bytes_sent_eval = nd * ns * cw * 8 * (s->size - 1);
    for (int64_t v = 0; v < nd && st == FMK_OK; v++)
        st =
            fmk_mpi_allgatherv_rows(plan, &s->fault, s->comm, ns > 0 ? charges + v * ns * cw : none,
                                    (int)ns, all_q + v * n_all * cw, s->counts, s->displs, cw);
    s->stats.seconds_exchange_charges = MPI_Wtime() - t0;
    if (st != FMK_OK)
        return st;

    double *sp = pot ? staged : NULL;
    double *sg = grad ? staged + (size_t)nd * (size_t)nt * (size_t)cw : NULL;
    t0 = MPI_Wtime();
    st = is_many ? fmk_plan_eval_many(s->local, nd, all_q, sp, sg)
                 : fmk_plan_eval(s->local, all_q, sp, sg);
    s->stats.seconds_local_eval = MPI_Wtime() - t0;
    if (st != FMK_OK)
        fmk_plan_hook_error(plan, st, fmk_plan_last_error(s->local));
    if (st == FMK_OK && sp && s->self_value != 0) {
        if (s->moved)
            fmk_mpi_remove_self_moved(s, nd, all_q, sp);
        else
            remove_self(s, nd, charges, sp);
    }
    if ((st = fmk_mpi_agree(plan, s->comm, s->rank, &s->fault, st)) != FMK_OK ||
        (st = measure_cost(plan, s, nt)) != FMK_OK)
        return st;
    if (s->moved) { /* the results go home, in the caller's order */
        t0 = MPI_Wtime();
        st = fmk_mpi_send_home(plan, s, nd, sp, sg, pot, grad);
        s->stats.seconds_results_home = MPI_Wtime() - t0;
        if (st != FMK_OK)
            return st;
    } else {
        if (pot)
            memcpy(pot, sp, (size_t)nd * (size_t)nt * (size_t)cw * sizeof(double));
        if (grad)
            memcpy(grad, sg, (size_t)nd * (size_t)nt * (size_t)gw * sizeof(double));
    }
    if (nd > 1) /* the work buffers stay for one vector's evaluations, not for many */
        fmk_mpi_scratch_free(s);
    report(plan, s);
    return fmk_plan_hook_error(plan, FMK_OK, NULL);
}

void fmk_mpi_set_balance(fmk_plan *plan, double balance)
{
    fmk_mpi_state *s = fmk_plan_hook_state(plan, &mpi_hooks);
    if (s && balance >= 0)
        s->balance = balance;
}

fmk_status fmk_plan_mpi_info(const fmk_plan *plan, fmk_mpi_info *info)
{
    if (!plan || !info)
        return fmk_plan_hook_error(NULL, FMK_ERR_NULL, "fmk_plan_mpi_info: plan or info is NULL");
    const fmk_mpi_state *s = fmk_plan_hook_state(plan, &mpi_hooks);
    if (!s)
        return fmk_plan_hook_error(NULL, FMK_ERR_ARG,
                                   "fmk_plan_mpi_info: the plan is not distributed (made by "
                                   "fmk_plan_create, not fmk_plan_create_mpi)");
    *info = s->stats;
    info->ranks = s->size;
    info->distributed_sources = s->let != NULL;
    fmk_info li;
    const int ok = s->has_points && fmk_plan_info(s->local, &li) == FMK_OK;
    info->local_sources = ok ? li.n_sources : 0;
    info->sources_kept = s->let ? fmk_mpi_let_own(s) : ok ? s->n_all : 0;
    info->targets_evaluated = fmk_mpi_evaluated_targets(plan);
    return FMK_OK;
}

void fmk_mpi_set_costs(fmk_plan *plan, const double *cost)
{
    fmk_mpi_state *s = fmk_plan_hook_state(plan, &mpi_hooks);
    if (s && cost)
        memcpy(s->cost, cost, (size_t)s->size * sizeof *s->cost);
}

void fmk_mpi_set_let(fmk_plan *plan, int on)
{
    fmk_mpi_state *s = fmk_plan_hook_state(plan, &mpi_hooks);
    if (s)
        s->let_on = on != 0;
}

void fmk_mpi_let_counts(const fmk_plan *plan, int64_t *own, int64_t *local_sources)
{
    const fmk_mpi_state *s = fmk_plan_hook_state(plan, &mpi_hooks);
    fmk_info info;
    *own = s ? fmk_mpi_let_own(s) : 0;
    *local_sources =
        s && s->has_points && fmk_plan_info(s->local, &info) == FMK_OK ? info.n_sources : 0;
}

int64_t fmk_mpi_evaluated_targets(const fmk_plan *plan)
{
    const fmk_mpi_state *s = fmk_plan_hook_state(plan, &mpi_hooks);
    if (!s || !s->has_points)
        return 0;
    return s->moved ? s->n_local : s->n_targets;
}

fmk_mpi_state *fmk_mpi_plan_state(const fmk_plan *plan)
{
    return fmk_plan_hook_state(plan, &mpi_hooks);
}
