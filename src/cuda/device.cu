/* device.cu -- what every GPU engine shares (device.h): device queries and selection, error
 * reporting, allocation with its failures on demand, interrupt checks, the knobs "cuda.*". */
#include <stdio.h>
#include <string.h>

#include "core/tune.h"
#include "cuda/device.h"

static const fmk_cuda_tune cuda_tune_defaults = FMK_CUDA_TUNE_DEFAULTS;
static const fmk_tune_knob cuda_knobs[] = {
    FMK_KNOB(fmk_cuda_tune, fail_alloc_at, FMK_TUNE_INT64, 0, 1e18,
             "the plan's k-th device or pinned allocation fails (0: none)"),
    FMK_KNOB(fmk_cuda_tune, stop_at_check, FMK_TUNE_INT64, 0, 1e18,
             "the plan's k-th interrupt check says stop (0: none)"),
    FMK_KNOB(fmk_cuda_tune, check_min, FMK_TUNE_INT64, 0, 1e18,
             "evals of this many points wait between phases to check for an interrupt"),
};
static const fmk_tune_knob cuda_counter_knobs[] = {
    FMK_KNOB(fmk_cuda_counters, allocs, FMK_TUNE_INT64, 0, 1e18,
             "device and pinned host allocations asked for"),
    FMK_KNOB(fmk_cuda_counters, fail_bytes, FMK_TUNE_INT64, 0, 1e18,
             "the bytes of the allocation fail_alloc_at made fail"),
    FMK_KNOB(fmk_cuda_counters, checks, FMK_TUNE_INT64, 0, 1e18, "interrupt checks made"),
    FMK_KNOB(fmk_cuda_counters, eval_seconds, FMK_TUNE_DOUBLE, 0, 1e18, "the last eval's time"),
};

extern "C" const fmk_tune_table fmk_cuda_tune_table = {
    "cuda", sizeof(fmk_cuda_tune), &cuda_tune_defaults, FMK_TUNE_COUNT(cuda_knobs), cuda_knobs};
extern "C" const fmk_tune_table fmk_cuda_counter_table = {"cuda", sizeof(fmk_cuda_counters), NULL,
                                                          FMK_TUNE_COUNT(cuda_counter_knobs),
                                                          cuda_counter_knobs};

/* A plan's shared knobs and counters (NULL: a plan of an engine without them). */
static const fmk_cuda_tune *tune_of(const fmk_plan *plan)
{
    return plan ? (const fmk_cuda_tune *)plan->shared_tune : NULL;
}
static fmk_cuda_counters *counters_of(const fmk_plan *plan)
{
    return plan ? (fmk_cuda_counters *)plan->shared_counters : NULL;
}

extern "C" int fmk_cuda_count_devices(void)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver or no device: 0 devices, never an error */
        return 0;
    }
    return n;
}

extern "C" fmk_status fmk_cuda_device_name(fmk_plan *plan, int device, char *name, size_t size)
{
    cudaDeviceProp prop;
    cudaError_t err = cudaGetDeviceProperties(&prop, device);
    if (err != cudaSuccess) {
        if (size)
            name[0] = '\0';
        return fmk_cuda_fail(plan, err, "cudaGetDeviceProperties");
    }
    if (size)
        snprintf(name, size, "%s", prop.name);
    return FMK_OK;
}

extern "C" int fmk_cuda_sm_count(int device)
{
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    return n > 0 ? n : 1;
}

extern "C" fmk_status fmk_cuda_fail(fmk_plan *plan, cudaError_t err, const char *call)
{
    (void)cudaGetLastError(); /* clear it when it is not sticky */
    if (err == cudaErrorMemoryAllocation)
        return fmk_error_set(plan, FMK_ERR_DEVICE_NOMEM, "%s: out of GPU memory (%s)", call,
                             cudaGetErrorString(err));
    return fmk_error_set(plan, FMK_ERR_DEVICE, "%s failed: %s (%s)", call, cudaGetErrorString(err),
                         cudaGetErrorName(err));
}

extern "C" int fmk_cuda_alloc_fails(fmk_plan *plan, long long bytes)
{
    const fmk_cuda_tune *k = tune_of(plan);
    fmk_cuda_counters *c = counters_of(plan);
    if (!k || !c)
        return 0;
    c->allocs++;
    if (k->fail_alloc_at <= 0 || c->allocs != k->fail_alloc_at)
        return 0;
    c->fail_bytes = bytes;
    return 1;
}

/* The note on a failure made by the knob. */
static const char *injected(int fake)
{
    return fake ? " (a failure asked for by the knob cuda.fail_alloc_at)" : "";
}

extern "C" fmk_status fmk_cuda_alloc(fmk_plan *plan, void **ptr, size_t bytes, const char *what,
                                     long long total)
{
    *ptr = NULL;
    const int fake = fmk_cuda_alloc_fails(plan, (long long)bytes);
    cudaError_t err = fake ? cudaErrorMemoryAllocation : cudaMalloc(ptr, bytes ? bytes : 1);
    if (err == cudaSuccess)
        return FMK_OK;
    *ptr = NULL;
    (void)cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
        (void)cudaGetLastError(), free_b = 0;
    if (total < (long long)bytes)
        total = (long long)bytes;
    if (err == cudaErrorMemoryAllocation)
        return fmk_error_set(plan, FMK_ERR_DEVICE_NOMEM,
                             "out of GPU memory: %s needs %zu bytes; the plan needs %lld bytes "
                             "(%.1f MiB) on the GPU and %zu bytes (%.1f MiB) are free%s",
                             what, bytes, total, total / 1048576.0, free_b, free_b / 1048576.0,
                             injected(fake));
    return fmk_error_set(plan, FMK_ERR_DEVICE, "cudaMalloc of %zu bytes for %s failed: %s", bytes,
                         what, cudaGetErrorString(err));
}

extern "C" fmk_status fmk_cuda_alloc_host(fmk_plan *plan, void **ptr, size_t bytes,
                                          const char *what)
{
    *ptr = NULL;
    const int fake = fmk_cuda_alloc_fails(plan, (long long)bytes);
    cudaError_t err = fake ? cudaErrorMemoryAllocation : cudaMallocHost(ptr, bytes ? bytes : 1);
    if (err == cudaSuccess)
        return FMK_OK;
    *ptr = NULL;
    (void)cudaGetLastError();
    if (err == cudaErrorMemoryAllocation)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of pinned host memory: %s needs %zu bytes%s",
                             what, bytes, injected(fake));
    return fmk_error_set(plan, FMK_ERR_DEVICE, "cudaMallocHost of %zu bytes for %s failed: %s",
                         bytes, what, cudaGetErrorString(err));
}

extern "C" int fmk_cuda_stop(fmk_plan *plan)
{
    if (!plan)
        return 0;
    const fmk_cuda_tune *k = tune_of(plan);
    fmk_cuda_counters *c = counters_of(plan);
    if (c)
        c->checks++;
    if (k && c && k->stop_at_check > 0 && c->checks == k->stop_at_check)
        return 1;
    return fmk_interrupt_poll(plan);
}

extern "C" fmk_status fmk_cuda_checkpoint(fmk_plan *plan, cudaEvent_t ev, const char *what)
{
    if (ev) {
        const cudaError_t err = cudaEventSynchronize(ev);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, what);
    }
    return fmk_cuda_stop(plan) ? fmk_interrupt_status(plan) : FMK_OK;
}

/* The wait for a launch of fmk_cuda_launch_ranges (its events ev[0], ev[1]; its work), its
 * rate into *rate, then the interrupt check (check = 0: none, the last launch). */
static fmk_status range_done(fmk_plan *plan, const fmk_cuda_ranges *r, const cudaEvent_t *ev,
                             double work, int check)
{
    float ms = 0;
    cudaError_t err = cudaEventSynchronize(ev[1]);
    if (err == cudaSuccess)
        err = cudaEventElapsedTime(&ms, ev[0], ev[1]);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, r->what);
    if (ms > 0)
        *r->rate = work / (1e-3 * ms);
    return check ? fmk_cuda_checkpoint(plan, NULL, NULL) : FMK_OK;
}

extern "C" fmk_status fmk_cuda_launch_ranges(fmk_plan *plan, const fmk_cuda_ranges *r)
{
    const int64_t q = r->quantum > 0 ? r->quantum : 1;
    double work[2] = {0, 0};
    int k = 0, queued = 0;
    fmk_status st = FMK_OK;
    cudaError_t err = cudaSuccess;
    for (int64_t lo = 0; lo < r->total && st == FMK_OK;) {
        const double budget = r->fixed > 0     ? r->fixed
                              : *r->rate > 0.0 ? *r->rate * FMK_CUDA_LAUNCH_SECONDS
                                               : r->first;
        const double fit = budget / (r->item_work > 0 ? r->item_work : 1);
        int64_t n = fit < (double)r->total ? (int64_t)fit / q * q : r->total;
        n = n < q ? q : n;
        const int64_t hi = r->total - lo > n ? lo + n : r->total;
        const cudaEvent_t *ev = r->ev + 2 * k;
        err = cudaEventRecord(ev[0], r->stream);
        if (err == cudaSuccess)
            err = r->launch(r->ctx, lo, hi);
        if (err == cudaSuccess)
            err = cudaEventRecord(ev[1], r->stream);
        if (err != cudaSuccess)
            break;
        work[k] = (double)(hi - lo) * r->item_work;
        lo = hi;
        if (queued) /* the previous launch: done, measured, and the check */
            st = range_done(plan, r, r->ev + 2 * (k ^ 1), work[k ^ 1], 1);
        queued = 1, k ^= 1;
    }
    if (err != cudaSuccess || st != FMK_OK) { /* nothing left running on the caller's buffers */
        if (cudaStreamSynchronize(r->stream) != cudaSuccess)
            (void)cudaGetLastError();
        return err != cudaSuccess ? fmk_cuda_fail(plan, err, r->what) : st;
    }
    return queued ? range_done(plan, r, r->ev + 2 * (k ^ 1), work[k ^ 1], 0) : FMK_OK;
}

extern "C" int fmk_cuda_long(const fmk_plan *plan, int64_t np)
{
    const fmk_cuda_tune *k = tune_of(plan);
    const fmk_cuda_counters *c = counters_of(plan);
    return (k && np >= k->check_min) || (c && c->eval_seconds >= 0.1);
}

extern "C" fmk_status fmk_cuda_enter(fmk_plan *plan, int device, int *prev)
{
    *prev = device;
    cudaError_t err = cudaGetDevice(prev);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaGetDevice");
    if (*prev != device) {
        err = cudaSetDevice(device);
        if (err != cudaSuccess) {
            *prev = device;
            return fmk_cuda_fail(plan, err, "cudaSetDevice");
        }
    }
    return FMK_OK;
}

extern "C" void fmk_cuda_leave(int device, int prev)
{
    if (prev != device && cudaSetDevice(prev) != cudaSuccess)
        (void)cudaGetLastError();
}

extern "C" fmk_status fmk_cuda_set_points_device(fmk_plan *plan, int64_t ns, const double *d_s,
                                                 int64_t nt, const double *d_t,
                                                 fmk_cuda_points_fn points)
{
    /* the contract: on failure the plan has no points; an engine that reuses its state
     * (fmk_engine.reuses_state) gets the previous points' state back through the drop */
    void *keep = plan->engine->reuses_state ? plan->state : NULL;
    if (keep)
        plan->state = NULL;
    fmk_plan_drop_points(plan);
    if (keep)
        plan->state = keep;
    int prev;
    fmk_status st = fmk_cuda_enter(plan, plan->opts.device, &prev);
    if (st != FMK_OK) {
        fmk_plan_drop_points(plan);
        return st;
    }
    st = points(plan, ns, d_s, nt, d_t);
    if (st != FMK_OK)
        fmk_plan_drop_points(plan);
    fmk_cuda_leave(plan->opts.device, prev);
    return st;
}

extern "C" fmk_status fmk_cuda_eval(fmk_plan *plan, const double *charges, double *pot,
                                    double *grad, int on_device, fmk_cuda_eval_fn run)
{
    if (!plan->state)
        return fmk_error_set(plan, FMK_ERR_INTERNAL, "the GPU engine %s has no state",
                             plan->engine->name);
    int prev;
    fmk_status st = fmk_cuda_enter(plan, plan->opts.device, &prev);
    if (st != FMK_OK)
        return st;
    const double t0 = fmk_time_now();
    st = run(plan, charges, pot, grad, on_device);
    fmk_cuda_counters *c = counters_of(plan);
    if (c && st == FMK_OK)
        c->eval_seconds = fmk_time_now() - t0;
    fmk_cuda_leave(plan->opts.device, prev);
    return st;
}

extern "C" fmk_status fmk_cuda_copy(fmk_plan *plan, void *dst, const void *src, size_t bytes,
                                    const char *what)
{
    const cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    if (err == cudaSuccess)
        return FMK_OK;
    (void)cudaGetLastError();
    return fmk_error_set(plan, FMK_ERR_DEVICE, "cudaMemcpy of %zu bytes (%s) failed: %s", bytes,
                         what, cudaGetErrorString(err));
}
