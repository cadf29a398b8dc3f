/* engine.cu -- the GPU direct engine (fmk_engine_direct_cuda): device state, uploads, device
 * points, evaluation (a long sum in launches of bounded work, with interrupt checks between
 * them) and timing; several charge vectors in one pass (eval_many: p2p_many.cu's kernel, each
 * pair's geometry once for up to 4 vectors). The kernels are in p2p.cu and p2p_many.cu. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/tune.h"
#include "cuda/device.h"
#include "direct/cuda/many.h"
#include "direct/guard.h"
#include "kernels/pair_exact.h"

namespace {

int real_of(const fmk_plan *plan)
{
    return plan->opts.precision == FMK_PRECISION_FP32 ? 4 : 8;
}

const fmk_cuda_direct_tune *tune_of(const fmk_plan *plan)
{
    return (const fmk_cuda_direct_tune *)plan->tune;
}

/* The pairs of a launch at most: the knob launch_pairs, else what the measured rate sums in
 * FMK_CUDA_LAUNCH_SECONDS (FMK_CUDA_LAUNCH_PAIRS before the first measurement). */
double launch_pairs(const fmk_plan *plan, double rate)
{
    const int64_t k = tune_of(plan)->launch_pairs;
    if (k > 0)
        return (double)k;
    const double b = rate > 0 ? rate * FMK_CUDA_LAUNCH_SECONDS : FMK_CUDA_LAUNCH_PAIRS;
    return b < 0x1p26 ? 0x1p26 : b > 0x1p42 ? 0x1p42 : b;
}

/* Device bytes of every buffer for ns sources and nt targets (nt < 0: the sources). */
struct layout {
    int64_t n_pad, m_pad;
    int splits;
    size_t src, trg, charges, pot, grad, partial, stats, carry;
    size_t carry_targets;
    size_t total() const { return src + trg + charges + pot + grad + partial + stats + carry; }
};

layout layout_of(const fmk_plan *plan, int64_t ns, int64_t nt)
{
    layout z;
    const int self = nt < 0, real = real_of(plan);
    const int64_t m = self ? ns : nt;
    const size_t cw = (size_t)fmk_kernel_width(plan->kernel);
    const size_t gw = (size_t)fmk_kernel_grad_width(plan->kernel, plan->dim);
    z.n_pad = fmk_cuda_padded(ns);
    z.m_pad = fmk_cuda_padded(m);
    const int64_t tiles = z.n_pad / fmk_cuda_p2p_tile(real);
    const int forced = tune_of(plan)->splits;
    z.splits = z.n_pad == 0 || z.m_pad == 0 ? 1
               : forced > 0
                   ? (int)(forced < tiles ? forced : tiles)
                   : fmk_cuda_p2p_splits(real, plan->kernel, z.n_pad, z.m_pad, plan->opts.device);
    z.src = (size_t)z.n_pad * 4 * real;
    z.trg = self ? 0 : (size_t)z.m_pad * 4 * real;
    z.charges = (size_t)ns * cw * sizeof(double);
    z.pot = (size_t)m * cw * sizeof(double);
    z.grad = (size_t)m * gw * sizeof(double);
    z.partial = z.splits > 1 ? (size_t)z.splits * m * 4 * sizeof(double) : 0;
    z.stats = 2 * sizeof(unsigned long long);
    /* a sum long enough to be cut into launches may cut the sources too (a wave of target
     * blocks over all of them takes longer than a launch may): one split keeps the totals of a
     * wave's targets between launches (several keep them in partial) */
    z.carry = z.carry_targets = 0;
    const double pairs = (double)z.n_pad * (double)z.m_pad;
    const double first = launch_pairs(plan, 0);
    if (z.splits == 1 && pairs > (first < FMK_CUDA_LAUNCH_PAIRS ? first : FMK_CUDA_LAUNCH_PAIRS)) {
        fmk_cuda_p2p_geometry g;
        fmk_cuda_p2p_shape(real, plan->kernel, z.n_pad, z.m_pad, 1, plan->opts.device, &g);
        const int64_t b = g.wave_blocks < g.blocks ? g.wave_blocks : g.blocks;
        z.carry_targets = (size_t)(b * g.block_targets);
        z.carry = z.carry_targets * 4 * sizeof(double);
    }
    return z;
}

void free_state(fmk_cuda_direct *s)
{
    void *bufs[] = {
        s->d_src,     s->d_trg,  s->d_charges, s->d_pot,   s->d_grad,
        s->d_partial, s->d_temp, s->d_carry,   s->d_stats, ((fmk_direct_state *)s)->d_many};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
        if (bufs[k] && cudaFree(bufs[k]) != cudaSuccess)
            (void)cudaGetLastError();
    for (int k = 0; k < s->events; k++)
        if (cudaEventDestroy(s->ev[k]) != cudaSuccess)
            (void)cudaGetLastError();
    free(s);
}

void cuda_release(fmk_plan *plan);

/* Makes plan->state hold the buffers for ns sources and nt targets (nt < 0: the sources) and a
 * bounding-box workspace of temp bytes, on the current device. A state kept from the plan's
 * previous points (reuses_state) serves again: a buffer is allocated again only where it is
 * too small, so repeated calls at one size allocate nothing. On failure the state is released
 * (the plan then has no points). */
fmk_status prepare_state(fmk_plan *plan, int64_t ns, int64_t nt, size_t temp)
{
    const layout z = layout_of(plan, ns, nt);
    fmk_cuda_direct *s = (fmk_cuda_direct *)plan->state;
    fmk_status st = FMK_OK;
    if (!s) {
        s = (fmk_cuda_direct *)calloc(1, sizeof(fmk_direct_state));
        if (!s)
            return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory (%zu bytes)",
                                 sizeof(fmk_direct_state));
        s->device = plan->opts.device;
        plan->state = s;
        const int n_ev = (int)(sizeof s->ev / sizeof s->ev[0]);
        for (; s->events < n_ev && st == FMK_OK; s->events++) {
            const cudaError_t err = cudaEventCreate(&s->ev[s->events]);
            if (err != cudaSuccess) {
                st = fmk_cuda_fail(plan, err, "cudaEventCreate");
                break;
            }
        }
        if (st == FMK_OK)
            st = fmk_cuda_alloc(plan, (void **)&s->d_stats, z.stats, "the charge checks",
                                (long long)(z.total() + temp));
    }
    s->real = real_of(plan);
    s->splits = z.splits;
    s->n_pad = z.n_pad;
    s->m_pad = z.m_pad;
    const long long total = (long long)(z.total() + temp);
    void **ptr[8] = {&s->d_src,          &s->d_trg,           (void **)&s->d_charges,
                     (void **)&s->d_pot, (void **)&s->d_grad, (void **)&s->d_partial,
                     &s->d_temp,         (void **)&s->d_carry};
    const size_t want[8] = {z.src, z.trg, z.charges, z.pot, z.grad, z.partial, temp, z.carry};
    const char *what[8] = {"the sources",
                           "the targets",
                           "the charges",
                           "the potential",
                           "the gradient",
                           "the partial sums",
                           "the bounding-box workspace",
                           "the totals between launches"};
    for (int k = 0; k < 8 && st == FMK_OK; k++) {
        if (want[k] == 0 || want[k] <= s->cap[k])
            continue;
        if (*ptr[k] && cudaFree(*ptr[k]) != cudaSuccess)
            (void)cudaGetLastError();
        *ptr[k] = NULL, s->cap[k] = 0;
        st = fmk_cuda_alloc(plan, ptr[k], want[k], what[k], total);
        if (st == FMK_OK)
            s->cap[k] = want[k];
    }
    if (st != FMK_OK) {
        cuda_release(plan);
        return st;
    }
    s->carry_targets = s->cap[7] / (4 * sizeof(double));
    int64_t held = (int64_t)z.stats + (int64_t)((fmk_direct_state *)s)->cap_many;
    for (int k = 0; k < 8; k++)
        held += (int64_t)s->cap[k];
    plan->state_bytes_device = held;
    plan->state_bytes_host = (int64_t)sizeof(fmk_direct_state);
    return FMK_OK;
}

void cuda_release(fmk_plan *plan)
{
    fmk_cuda_direct *s = (fmk_cuda_direct *)plan->state;
    if (!s)
        return;
    const int dev = s->device; /* free_state frees s */
    int prev;
    fmk_status st = fmk_cuda_enter(plan, dev, &prev);
    free_state(s);
    if (st == FMK_OK)
        fmk_cuda_leave(dev, prev);
    plan->state = NULL;
    plan->state_bytes_device = plan->state_bytes_host = 0;
}

void cuda_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d)
{
    if (fmk_bytes_gpu_uncounted(ns, nt)) { /* sizes no GPU holds: beyond what this counts */
        *h = *d = FMK_BYTES_OVERFLOW;
        return;
    }
    int prev = plan->opts.device;
    int entered = fmk_cuda_enter((fmk_plan *)plan, plan->opts.device, &prev) == FMK_OK;
    layout z = layout_of(plan, ns, nt);
    const int64_t many = fmk_direct_many_bytes(plan, ns, nt < 0 ? ns : nt, plan->opts.n_vectors);
    if (entered)
        fmk_cuda_leave(plan->opts.device, prev);
    *h = (int64_t)sizeof(fmk_direct_state);
    *d = (int64_t)z.total() + many;
}

/* Packs a host or device array of mapped (map = 0) or caller (map = 1) points. */
fmk_status pack(fmk_plan *plan, int64_t n, int64_t n_pad, const double *d_x, int map, void *d_out)
{
    const double inv = 1.0 / plan->frame.width;
    cudaError_t err = fmk_cuda_pack_points(
        real_of(plan), plan->dim, n, n_pad, d_x, map, plan->frame.center, plan->frame.offset, inv,
        fmk_cuda_coord_scale(real_of(plan), plan->kernel), d_out);
    return err == cudaSuccess ? FMK_OK : fmk_cuda_fail(plan, err, "the point packing kernel");
}

/* After packing: whether the plan is careful (kernels/pair_exact.h: fp64 in the exact frame, a
 * singular kernel, a mapped coordinate that can make pairs closer than the fast kernel takes). */
fmk_status find_careful(fmk_plan *plan)
{
    fmk_cuda_direct *s = (fmk_cuda_direct *)plan->state;
    s->careful = 0;
    if (plan->frame.kind != FMK_FRAME_EXACT || s->real != 8 ||
        fmk_kernel_desc_of(plan->kernel)->smooth)
        return FMK_OK;
    unsigned long long flag = 0;
    cudaError_t err = cudaMemsetAsync(s->d_stats, 0, sizeof flag);
    if (err == cudaSuccess)
        err = fmk_cuda_tiny_coords(plan->dim, s->n_pad, s->d_src, s->d_stats);
    if (err == cudaSuccess && !plan->self)
        err = fmk_cuda_tiny_coords(plan->dim, s->m_pad, s->d_trg, s->d_stats);
    if (err == cudaSuccess)
        err = cudaMemcpy(&flag, s->d_stats, sizeof flag, cudaMemcpyDeviceToHost);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the close-pair check of the points");
    s->careful = flag != 0;
    return FMK_OK;
}

/* Uploads host mapped points through the staging buffer d_tmp and packs them. */
fmk_status upload_points(fmk_plan *plan, int64_t n, int64_t n_pad, const double *x, double *d_tmp,
                         void *d_out)
{
    if (n_pad == 0)
        return FMK_OK;
    if (n > 0) {
        cudaError_t err =
            cudaMemcpy(d_tmp, x, (size_t)n * plan->dim * sizeof(double), cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (points to the GPU)");
    }
    return pack(plan, n, n_pad, d_tmp, 0, d_out);
}

/* Host points: the kept buffers, and a staging buffer for the mapped points while they are
 * packed (freed before returning: the plan holds what fmk_plan_memory reported). */
fmk_status cuda_setup(fmk_plan *plan)
{
    fmk_status st = fmk_direct_guard(plan); /* fp32: points it cannot resolve (guard.h) */
    if (st != FMK_OK)
        return st;
    int prev;
    st = fmk_cuda_enter(plan, plan->opts.device, &prev);
    if (st != FMK_OK)
        return st;
    const int64_t nt = plan->self ? -1 : plan->n_targets;
    const int64_t most = plan->n_sources > nt ? plan->n_sources : nt;
    const size_t stage = (size_t)most * plan->dim * sizeof(double);
    double *d_tmp = NULL;
    st = prepare_state(plan, plan->n_sources, nt, 0);
    if (st == FMK_OK)
        st = fmk_cuda_alloc(plan, (void **)&d_tmp, stage, "staging the points",
                            (long long)(plan->state_bytes_device + stage));
    if (st == FMK_OK) {
        fmk_cuda_direct *s = (fmk_cuda_direct *)plan->state;
        st = upload_points(plan, plan->n_sources, s->n_pad, plan->sources, d_tmp, s->d_src);
        if (st == FMK_OK && !plan->self)
            st = upload_points(plan, plan->n_targets, s->m_pad, plan->targets, d_tmp, s->d_trg);
        if (st == FMK_OK)
            st = find_careful(plan);
    }
    if (d_tmp && cudaFree(d_tmp) != cudaSuccess && st == FMK_OK) /* waits for the packing */
        st = fmk_cuda_fail(plan, cudaGetLastError(), "the point packing kernel");
    if (st != FMK_OK)
        cuda_release(plan);
    fmk_cuda_leave(plan->opts.device, prev);
    return st;
}

/* The fp32 guard (direct/guard.h) on host copies of device points (nt 0, d_t NULL: self). */
static fmk_status guard_device_points(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                                      const double *d_t)
{
    const int dim = plan->dim;
    const size_t bs = (size_t)ns * dim * sizeof(double), bt = (size_t)nt * dim * sizeof(double);
    double *h = (double *)malloc(bs + bt + 1);
    if (!h)
        return fmk_error_set(plan, FMK_ERR_NOMEM,
                             "out of host memory checking the resolution of %lld points",
                             (long long)(ns + nt));
    cudaError_t err = cudaMemcpy(h, d_s, bs, cudaMemcpyDeviceToHost);
    if (err == cudaSuccess && d_t)
        err = cudaMemcpy(h + (size_t)ns * dim, d_t, bt, cudaMemcpyDeviceToHost);
    fmk_status st = err != cudaSuccess
                        ? fmk_cuda_fail(plan, err, "cudaMemcpy (the points, for the fp32 guard)")
                        : fmk_direct_guard_raw(plan, h, ns, d_t ? h + (size_t)ns * dim : NULL, nt);
    free(h);
    return st;
}

fmk_status points_device(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                         const double *d_t)
{
    const int self = d_t == NULL;
    const int64_t n_box = self ? 0 : nt;

    /* The buffers first (a size beyond the GPU's memory stops here), then the bounding box and
     * finiteness: one CUB reduction (two-phase workspace query), its workspace kept in the
     * state. */
    fmk_status st = prepare_state(plan, ns, self ? -1 : nt, 0);
    if (st != FMK_OK)
        return st;
    size_t temp_bytes = 0;
    double lo[3], hi[3];
    st = fmk_cuda_frame_query(plan, ns, d_s, n_box, d_t, &temp_bytes);
    if (st != FMK_OK)
        return st;
    const size_t box_off = (temp_bytes + 255) / 256 * 256;
    st = prepare_state(plan, ns, self ? -1 : nt, box_off + fmk_cuda_box_bytes());
    if (st != FMK_OK)
        return st;
    fmk_cuda_direct *s = (fmk_cuda_direct *)plan->state;
    fmk_frame frame;
    st = fmk_cuda_frame(plan, ns, d_s, n_box, d_t, s->d_temp, temp_bytes,
                        (char *)s->d_temp + box_off, lo, hi, &frame);
    if (st != FMK_OK)
        return st;
    plan->frame = frame;
    if (plan->opts.precision == FMK_PRECISION_FP32) {
        st = guard_device_points(plan, ns, d_s, self ? 0 : nt, self ? NULL : d_t);
        if (st != FMK_OK)
            return st;
    }
    plan->self = self; /* find_careful reads it */
    st = pack(plan, ns, s->n_pad, d_s, 1, s->d_src);
    if (st == FMK_OK && !self)
        st = pack(plan, nt, s->m_pad, d_t, 1, s->d_trg);
    if (st == FMK_OK)
        st = find_careful(plan);
    if (st == FMK_OK) { /* the caller may reuse its arrays once this returns */
        cudaError_t err = cudaStreamSynchronize(0);
        if (err != cudaSuccess)
            st = fmk_cuda_fail(plan, err, "the point packing kernel");
    }
    if (st != FMK_OK)
        return st;
    plan->self = self;
    plan->n_sources = ns;
    plan->n_targets = self ? ns : nt;
    plan->has_points = 1;
    return FMK_OK;
}

fmk_status cuda_set_points_device(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                                  const double *d_t)
{
    return fmk_cuda_set_points_device(plan, ns, d_s, nt, d_t, points_device);
}

/* The message for a non-finite charge found on the GPU. */
fmk_status bad_charge(fmk_plan *plan, int64_t i, int cw, const double *d_q)
{
    double q[2] = {0, 0};
    cudaError_t err = cudaMemcpy(q, d_q + cw * i, cw * sizeof(double), cudaMemcpyDeviceToHost);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaMemcpy (a charge from the GPU)");
    return fmk_error_set(plan, FMK_ERR_NONFINITE, "charges[%lld] is %g%s; charges must be finite",
                         (long long)i, isfinite(q[0]) && cw == 2 ? q[1] : q[0],
                         isfinite(q[0]) && cw == 2 ? " (imaginary part)" : "");
}

/* A launch of a cut sum: the ranges of fmk_cuda_launch_ranges are target blocks (tiles 0:
 * all of them) or, of the blocks of a, tiles. */
struct p2p_range {
    fmk_cuda_p2p_args *a;
    int tiles;
};

cudaError_t p2p_range_launch(void *ctx, int64_t lo, int64_t hi)
{
    const p2p_range *r = (const p2p_range *)ctx;
    if (r->tiles)
        r->a->tile0 = lo, r->a->tile1 = hi;
    else
        r->a->block0 = lo, r->a->block1 = hi;
    return fmk_cuda_p2p(r->a);
}

/* A sum of more pairs than a launch takes (launch_pairs), in launches of about that many
 * (fmk_cuda_launch_ranges: two queued at a time, the rate measured and an interrupt check
 * after each): target blocks in whole waves over all the sources; or, when even a wave of
 * them over all the sources is more (and their totals can be kept between launches: d_carry
 * or d_partial), a wave at a time over ranges of each split's tiles. */
fmk_status p2p_launches(fmk_plan *plan, fmk_cuda_direct *s, fmk_cuda_p2p_args *a)
{
    fmk_cuda_p2p_geometry g;
    fmk_cuda_p2p_shape(s->real, plan->kernel, s->n_pad, s->m_pad, s->splits, s->device, &g);
    const double tile = (double)g.block_targets * (double)g.tile_sources * s->splits;
    const int64_t wave = g.wave_blocks < g.blocks ? g.wave_blocks : g.blocks;
    const int64_t k = tune_of(plan)->launch_pairs;
    fmk_cuda_ranges r;
    p2p_range ctx = {a, 0};
    r.rate = &s->rate, r.ev = s->ev + 2, r.stream = 0;
    r.launch = p2p_range_launch, r.ctx = &ctx, r.what = "the direct-sum kernel";
    r.fixed = k > 0 ? (double)k : 0, r.first = launch_pairs(plan, s->rate);
    a->block0 = 0, a->block1 = INT64_MAX, a->tile0 = 0, a->tile1 = INT64_MAX;
    const int keep = s->splits > 1 || (int64_t)s->carry_targets >= wave * g.block_targets;
    if (!keep || (double)wave * tile * (double)g.tiles <= launch_pairs(plan, s->rate)) {
        r.total = g.blocks, r.quantum = wave, r.item_work = tile * (double)g.tiles;
        return fmk_cuda_launch_ranges(plan, &r);
    }
    ctx.tiles = 1;
    r.total = g.tiles, r.quantum = 1, r.item_work = tile * (double)wave;
    fmk_status st = FMK_OK;
    for (int64_t b0 = 0; b0 < g.blocks && st == FMK_OK; b0 += wave) {
        a->block0 = b0, a->block1 = b0 + wave;
        r.item_work = tile * (double)(a->block1 < g.blocks ? wave : g.blocks - b0);
        st = fmk_cuda_launch_ranges(plan, &r);
    }
    return st;
}

/* The P2P of a: in one launch, or a sum of more pairs than a launch takes in several
 * (p2p_launches); then the splits' sums added up. */
fmk_status p2p_sum(fmk_plan *plan, fmk_cuda_direct *s, fmk_cuda_p2p_args *a)
{
    a->finish = 0, a->d_carry = s->d_carry;
    a->block0 = 0, a->tile0 = 0;
    a->block1 = a->tile1 = INT64_MAX; /* every block and tile */
    cudaError_t err = cudaSuccess;
    if ((double)s->n_pad * (double)s->m_pad <= launch_pairs(plan, s->rate)) {
        err = fmk_cuda_p2p(a);
    } else {
        const fmk_status st = p2p_launches(plan, s, a);
        if (st != FMK_OK)
            return st;
    }
    if (err == cudaSuccess && s->splits > 1) {
        a->finish = 1;
        err = fmk_cuda_p2p(a);
    }
    return err == cudaSuccess ? FMK_OK : fmk_cuda_fail(plan, err, "the direct-sum kernel launch");
}

fmk_status run_eval(fmk_plan *plan, const double *charges, double *pot, double *grad, int on_device)
{
    fmk_cuda_direct *s = (fmk_cuda_direct *)plan->state;
    const int cw = fmk_kernel_width(plan->kernel);
    const int gw = fmk_kernel_grad_width(plan->kernel, plan->dim);
    const int64_t n = plan->n_sources, m = plan->n_targets;
    double *phase = plan->info.phase_time;
    cudaError_t err;

    if (n == 0) { /* only the device path gets here: plan.c answers host calls itself */
        if (pot && (err = cudaMemset(pot, 0, (size_t)m * cw * sizeof(double))) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemset (pot)");
        if (grad && (err = cudaMemset(grad, 0, (size_t)m * gw * sizeof(double))) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemset (grad)");
        if ((err = cudaDeviceSynchronize()) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemset");
        return FMK_OK;
    }

    /* Upload: charges to the GPU (host calls), checked and packed into the source vectors. */
    double t0 = fmk_time_now();
    const double *d_q = charges;
    if (!on_device) {
        err = cudaMemcpy(s->d_charges, charges, (size_t)n * cw * sizeof(double),
                         cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (charges to the GPU)");
        d_q = s->d_charges;
    }
    unsigned long long stats[2];
    err = fmk_cuda_charge_stats(cw, n, d_q, s->d_stats);
    if (err == cudaSuccess)
        err = cudaMemcpy(stats, s->d_stats, sizeof stats, cudaMemcpyDeviceToHost);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the charge check kernel");
    if (stats[0] != ~0ull)
        return bad_charge(plan, (int64_t)stats[0], cw, d_q);
    /* The charges times 2^-qexp (exact). fp32 laplace: the largest |q| into [1, 2); fp64 (the
     * exact frame): into [0.5, 1), so that no pair the fast kernel takes overflows
     * (kernels/pair_exact.h); fp32 otherwise: the charges as they are. */
    int qexp = 0;
    double big = 0;
    memcpy(&big, &stats[1], sizeof big);
    if (plan->frame.kind == FMK_FRAME_EXACT)
        qexp = fmk_exact_charge_exp(big);
    else if (fmk_cuda_coord_scale(s->real, plan->kernel) != 1.0 && stats[1] != 0)
        qexp = ilogb(big);
    err = fmk_cuda_pack_charges(s->real, cw, n, d_q, qexp, s->d_src);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the charge packing kernel");

    /* P2P: the kernels alone, timed with events. */
    const int sexp = ilogb(fmk_cuda_coord_scale(s->real, plan->kernel)); /* 23 or 0 */
    const int e = plan->frame.width_exp, log2d = plan->kernel == FMK_KERNEL_LOG2D;
    fmk_cuda_p2p_args a;
    a.real = s->real;
    a.kernel = plan->kernel;
    a.self = plan->self;
    a.splits = s->splits;
    a.n_pad = s->n_pad;
    a.m = m;
    a.m_pad = s->m_pad;
    a.d_src = s->d_src;
    a.d_trg = s->d_trg;
    a.d_pot = pot ? (on_device ? pot : s->d_pot) : NULL;
    a.d_grad = grad ? (on_device ? grad : s->d_grad) : NULL;
    a.d_partial = s->d_partial;
    a.eps2 = plan->frame.softening * plan->frame.softening;
    a.log_width = plan->frame.log_width;
    /* sums in working units: coordinates times 2^(sexp - e), charges times 2^-qexp; log2d's
     * potential carries log(width) per source instead of a scale */
    a.pot_exp = log2d ? qexp : qexp + sexp - e;
    a.grad_exp = log2d ? qexp + sexp - e : qexp + 2 * (sexp - e);
    a.careful = s->careful;
    a.charge_exp = qexp;
    a.width_exp = e;
    double t1 = fmk_time_now();
    if ((err = cudaEventRecord(s->ev[0], 0)) != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaEventRecord");
    const fmk_status st = p2p_sum(plan, s, &a);
    if (st != FMK_OK)
        return st;
    if ((err = cudaEventRecord(s->ev[1], 0)) != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaEventRecord");
    if ((err = cudaEventSynchronize(s->ev[1])) != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the direct-sum kernel");
    float ms = 0;
    if ((err = cudaEventElapsedTime(&ms, s->ev[0], s->ev[1])) != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaEventElapsedTime");

    /* Download (host calls). */
    double t2 = fmk_time_now();
    if (!on_device) {
        if (pot && (err = cudaMemcpy(pot, s->d_pot, (size_t)m * cw * sizeof(double),
                                     cudaMemcpyDeviceToHost)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (potential from the GPU)");
        if (grad && (err = cudaMemcpy(grad, s->d_grad, (size_t)m * gw * sizeof(double),
                                      cudaMemcpyDeviceToHost)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (gradient from the GPU)");
    }
    phase[FMK_PHASE_UPLOAD] = t1 - t0;
    phase[FMK_PHASE_P2P] = ms * 1e-3;
    phase[FMK_PHASE_DOWNLOAD] = on_device ? 0 : fmk_time_now() - t2;
    return FMK_OK;
}

fmk_status cuda_eval(fmk_plan *plan, const double *charges, double *pot, double *grad,
                     int on_device)
{
    return fmk_cuda_eval(plan, charges, pot, grad, on_device, run_eval);
}

} // namespace

fmk_status fmk_direct_engine_eval_one(fmk_plan *plan, const double *charges, double *pot,
                                      double *grad, int on_device)
{
    return run_eval(plan, charges, pot, grad, on_device);
}

double fmk_direct_engine_launch_pairs(const fmk_plan *plan, double rate)
{
    return launch_pairs(plan, rate);
}

/* The knobs (device.h), "direct.<field>". */
static const fmk_cuda_direct_tune direct_cuda_tune_defaults = {0, 0};
static const fmk_tune_knob direct_cuda_knobs[] = {
    FMK_KNOB(fmk_cuda_direct_tune, launch_pairs, FMK_TUNE_INT64, 0, 1e18,
             "pairs of a launch of the sum at most (0: about 0.1 s of them)"),
    FMK_KNOB(fmk_cuda_direct_tune, splits, FMK_TUNE_INT, 0, 65535,
             "source ranges summed apart (0: to fill the GPU in whole waves)"),
};
static const fmk_tune_table direct_cuda_tune_table = {
    "direct", sizeof(fmk_cuda_direct_tune), &direct_cuda_tune_defaults,
    FMK_TUNE_COUNT(direct_cuda_knobs), direct_cuda_knobs};

extern "C" const fmk_engine fmk_engine_direct_cuda = {
    /* .name */ "direct/cuda",
    /* .setup */ cuda_setup,
    /* .eval */ cuda_eval,
    /* .memory */ cuda_memory,
    /* .set_points_device */ cuda_set_points_device,
    /* .release */ cuda_release,
    /* .check_opts */ fmk_direct_check_opts,
    /* .eps_min */ 0,
    /* .reuses_state */ 1, /* prepare_state takes the previous points' buffers */
    /* .tune */ &direct_cuda_tune_table,
    /* .counters */ NULL,
    /* .shared_tune */ &fmk_cuda_tune_table,
    /* .shared_counters */ &fmk_cuda_counter_table,
    /* .frame */ {FMK_FRAME_EXACT, FMK_FRAME_BOX}, /* fp64, fp32: as the CPU engine */
    /* .eval_many */ fmk_direct_many_eval, /* passes of up to 4 vectors (3D radial kernels) */
};
