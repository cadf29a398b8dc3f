/* opts.c -- option defaults, names of kernels, methods, backends and phases, small utilities. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/internal.h"

#define STR_(x) #x
#define STR(x) STR_(x)

const char *fmk_version(void)
{
    return STR(FMK_VERSION_MAJOR) "." STR(FMK_VERSION_MINOR) "." STR(FMK_VERSION_PATCH);
}

void fmk_opts_default(fmk_opts *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    opts->method = FMK_METHOD_AUTO;
    opts->backend = FMK_BACKEND_AUTO;
    opts->precision = FMK_PRECISION_FP64;
    opts->order = -1;
    opts->n_vectors = 1;
}

fmk_status fmk_opts_only(const fmk_opts *o, const char *method, unsigned takes)
{
    const char *name = !(takes & FMK_TAKES_ORDER) && o->order != -1            ? "order"
                       : !(takes & FMK_TAKES_THETA) && o->theta != 0           ? "theta"
                       : !(takes & FMK_TAKES_LEAF) && o->leaf_size != 0        ? "leaf_size"
                       : !(takes & FMK_TAKES_WALK) && o->walk != FMK_WALK_AUTO ? "walk"
                                                                               : NULL;
    if (!name)
        return FMK_OK;
    return fmk_error_set(NULL, FMK_ERR_ARG,
                         "opts.%s does not apply to method %s (it would be ignored); leave it "
                         "at its default or choose a method that takes it",
                         name, method);
}

double fmk_eps_default(fmk_precision precision)
{
    return precision == FMK_PRECISION_FP32 ? 1e-4 : 1e-6;
}

static const char *const method_names[] = {"auto", "direct", "tree", "fmm"};
static const char *const backend_names[] = {"auto", "cpu", "cuda"};
static const char *const phase_names[FMK_PHASE_COUNT] = {"setup",    "upload", "p2m",     "m2m",
                                                         "m2l",      "l2l",    "l2p",     "p2p",
                                                         "download", "tree",   "moments", "walk"};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

const char *fmk_kernel_name(fmk_kernel k)
{
    return fmk_kernel_desc_of(k)->name;
}
const char *fmk_method_name(fmk_method m)
{
    return (int)m >= 0 && (int)m < COUNT(method_names) ? method_names[m] : NULL;
}
const char *fmk_backend_name(fmk_backend b)
{
    return (int)b >= 0 && (int)b < COUNT(backend_names) ? backend_names[b] : NULL;
}
const char *fmk_phase_name(fmk_phase p)
{
    return (int)p >= 0 && (int)p < FMK_PHASE_COUNT ? phase_names[p] : NULL; /* NULL if unused */
}

/* Index of name in table[first..count), or -1. */
static int lookup(const char *const *table, int first, int count, const char *name)
{
    if (!name)
        return -1;
    for (int i = first; i < count; i++)
        if (table[i] && strcmp(table[i], name) == 0)
            return i;
    return -1;
}

fmk_status fmk_kernel_from_name(const char *name, fmk_kernel *kernel)
{
    if (!kernel)
        return fmk_error_set(NULL, FMK_ERR_NULL, "fmk_kernel_from_name: kernel is NULL");
    int i = -1;
    for (int k = 1; k < FMK_KERNEL_COUNT && name && i < 0; k++)
        if (strcmp(fmk_kernel_table[k].name, name) == 0)
            i = k;
    if (i < 0)
        return fmk_error_set(NULL, FMK_ERR_ARG,
                             "unknown kernel '%s' (laplace, plummer, regularized, log2d, cauchy2d)",
                             name ? name : "(null)");
    *kernel = (fmk_kernel)i;
    return FMK_OK;
}

fmk_status fmk_method_from_name(const char *name, fmk_method *method)
{
    if (!method)
        return fmk_error_set(NULL, FMK_ERR_NULL, "fmk_method_from_name: method is NULL");
    int i = lookup(method_names, 0, COUNT(method_names), name);
    if (i < 0)
        return fmk_error_set(NULL, FMK_ERR_ARG, "unknown method '%s' (auto, direct, tree, fmm)",
                             name ? name : "(null)");
    *method = (fmk_method)i;
    return FMK_OK;
}

fmk_status fmk_backend_from_name(const char *name, fmk_backend *backend)
{
    if (!backend)
        return fmk_error_set(NULL, FMK_ERR_NULL, "fmk_backend_from_name: backend is NULL");
    int i = lookup(backend_names, 0, COUNT(backend_names), name);
    if (i < 0)
        return fmk_error_set(NULL, FMK_ERR_ARG, "unknown backend '%s' (auto, cpu, cuda)",
                             name ? name : "(null)");
    *backend = (fmk_backend)i;
    return FMK_OK;
}

int fmk_kernel_dim(fmk_kernel k)
{
    return fmk_kernel_desc_of(k)->dim;
}

int fmk_kernel_is_complex(fmk_kernel k)
{
    return fmk_kernel_desc_of(k)->width == 2;
}

int fmk_cuda_device_count(void)
{
    int n = fmk_cuda_count_devices(); /* -1: no CUDA backend in this build */
    return n > 0 ? n : 0;
}

/* The process that first resolved a thread count, i.e. the one whose OpenMP thread pool
 * fmmkit's parallel loops start. A process-wide fact, not a knob: fork() copies it into the
 * child, where getpid() then differs. libgomp's pool is not fork-safe (its worker threads do
 * not exist in the child, so a parallel region with more than one thread waits for them
 * forever); a team of one thread never touches the pool. */
static atomic_long first_pid;

int fmk_opts_forked_child(void)
{
    long pid = (long)getpid(), expected = 0;
    if (atomic_compare_exchange_strong(&first_pid, &expected, pid))
        return 0; /* the first call: this process starts the pool */
    return expected != pid;
}

int fmk_opts_resolve_threads(int requested)
{
#ifdef _OPENMP
    if (fmk_opts_forked_child())
        return 1;
    int n = requested > 0 ? requested : omp_get_max_threads();
    return n < 1 ? 1 : n > FMK_THREADS_MAX ? FMK_THREADS_MAX : n;
#else
    (void)requested;
    return 1;
#endif
}

double fmk_time_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void fmk_info_fmm_phases(fmk_info *in, const double t[8], double tree_time)
{
    static const fmk_phase phase[7] = {FMK_PHASE_UPLOAD, FMK_PHASE_P2M, FMK_PHASE_M2M,
                                       FMK_PHASE_M2L,    FMK_PHASE_L2L, FMK_PHASE_L2P,
                                       FMK_PHASE_P2P};
    for (int k = 0; k < 7; k++)
        in->phase_time[phase[k]] = t[k + 1] - t[k];
    in->phase_time[FMK_PHASE_DOWNLOAD] = fmk_time_now() - t[7];
    in->phase_time[FMK_PHASE_TREE] = tree_time;
}
