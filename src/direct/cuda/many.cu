/* many.cu -- the GPU direct engine's eval_many (many.h): several charge vectors in passes of up
 * to FMK_CUDA_MANY_MAX, each pass one sum of p2p_many.cu's kernel (each pair's geometry once for
 * all the pass's vectors), the charges of each vector checked and scaled as the engine's eval
 * does one vector's (engine.cu: run_eval). A vector left alone, the 2D kernels and careful plans
 * (fp64 pairs closer than the fast kernels take) go through the engine's eval, vector by vector.
 * The pass buffer (the packed charges, host copies, partial sums) is the state's, made at the
 * first eval_many and counted in the plan's device bytes. */
#include <math.h>
#include <string.h>

#include "core/tune.h"
#include "direct/cuda/many.h"
#include "kernels/pair_exact.h"

namespace {

/* eval_many: whether the plan's sums take p2p_many.cu's kernel (fp64 careful plans and the 2D
 * kernels go vector by vector), and the vectors of its passes for a call of nd vectors (0: none
 * of several). */
int many_vectors(const fmk_plan *plan, int64_t nd)
{
    const fmk_kernel k = plan->kernel;
    if (k != FMK_KERNEL_LAPLACE && k != FMK_KERNEL_PLUMMER && k != FMK_KERNEL_REGULARIZED)
        return 0;
    return nd < 2 ? 0 : nd < FMK_CUDA_MANY_MAX ? 2 : FMK_CUDA_MANY_MAX;
}

/* Where eval_many's buffer holds what for nv vectors (the current device's occupancy): packed
 * charges, host charges, potential and gradient copies, partial sums, charge checks (off[6]);
 * returns the bytes (0 for nv = 0). */
int64_t many_layout(const fmk_plan *plan, int64_t ns, int64_t m, int nv, int64_t off[6],
                    int *splits)
{
    const int real = plan->opts.precision == FMK_PRECISION_FP32 ? 4 : 8;
    const int64_t n_pad = fmk_cuda_padded(ns), m_pad = fmk_cuda_padded(m);
    *splits =
        nv > 0 && n_pad > 0 && m_pad > 0
            ? fmk_cuda_many_splits(real, plan->kernel, nv, n_pad, m_pad, plan->opts.device, NULL)
            : 1;
    const int64_t bytes[6] = {nv * n_pad * real,
                              nv * ns * 8,
                              nv * m * 8,
                              nv * m * 24,
                              *splits > 1 ? *splits * nv * m * 32 : 0,
                              16 * nv};
    int64_t total = 0;
    for (int i = 0; i < 6; i++)
        off[i] = total, total += (bytes[i] + 255) / 256 * 256;
    return nv > 0 ? total : 0;
}

/* A launch of eval_many's cut sum: target blocks [lo, hi) over all the sources. */
struct many_range {
    fmk_cuda_many_args *a;
};

cudaError_t many_range_launch(void *ctx, int64_t lo, int64_t hi)
{
    fmk_cuda_many_args *a = ((many_range *)ctx)->a;
    a->block0 = lo, a->block1 = hi;
    return fmk_cuda_p2p_many(a);
}

/* One pass of eval_many: nv (2 or 4) vectors of a 3D radial kernel in one sum (p2p_many.cu),
 * each checked and packed with its own scale (as run_eval does one), from the host (copied
 * through the state's buffer, off: many_layout's) or the device; the phase times added to
 * phase. v0: the pass's first vector in the call (messages). */
fmk_status many_pass(fmk_plan *plan, fmk_direct_state *ds, const int64_t off[6], int splits, int nv,
                     int64_t v0, const double *charges, double *pot, double *grad, int on_device,
                     double *phase)
{
    fmk_cuda_direct *s = &ds->d;
    const int64_t n = plan->n_sources, m = plan->n_targets;
    char *b = (char *)ds->d_many;
    double *h_q = (double *)(b + off[1]), *h_pot = (double *)(b + off[2]);
    double *h_grad = (double *)(b + off[3]);
    unsigned long long *d_stats = (unsigned long long *)(b + off[5]);
    const double t0 = fmk_time_now();
    cudaError_t err = cudaSuccess;
    const double *d_q = charges;
    if (!on_device) {
        err = cudaMemcpy(h_q, charges, (size_t)(nv * n) * sizeof(double), cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (charges to the GPU)");
        d_q = h_q;
    }
    unsigned long long stats[2 * FMK_CUDA_MANY_MAX];
    for (int v = 0; v < nv && err == cudaSuccess; v++)
        err = fmk_cuda_charge_stats(1, n, d_q + v * n, d_stats + 2 * v);
    if (err == cudaSuccess)
        err = cudaMemcpy(stats, d_stats, 16 * (size_t)nv, cudaMemcpyDeviceToHost);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the charge check kernel");
    const int sexp = ilogb(fmk_cuda_coord_scale(s->real, plan->kernel)); /* 23 or 0 */
    const int e = plan->frame.width_exp;
    fmk_cuda_many_args a;
    for (int v = 0; v < nv; v++) {
        if (stats[2 * v] != ~0ull) {
            double q = 0;
            err = cudaMemcpy(&q, d_q + v * n + stats[2 * v], sizeof q, cudaMemcpyDeviceToHost);
            if (err != cudaSuccess)
                return fmk_cuda_fail(plan, err, "cudaMemcpy (a charge from the GPU)");
            return fmk_error_set(plan, FMK_ERR_NONFINITE,
                                 "charge vector %lld: charges[%lld] is %g; charges must be finite",
                                 (long long)(v0 + v), (long long)stats[2 * v], q);
        }
        /* run_eval's scale of the charges, per vector */
        int qexp = 0;
        double big = 0;
        memcpy(&big, &stats[2 * v + 1], sizeof big);
        if (plan->frame.kind == FMK_FRAME_EXACT)
            qexp = fmk_exact_charge_exp(big);
        else if (fmk_cuda_coord_scale(s->real, plan->kernel) != 1.0 && stats[2 * v + 1] != 0)
            qexp = ilogb(big);
        err = fmk_cuda_pack_many(s->real, n, s->n_pad, d_q + v * n, qexp,
                                 b + off[0] + v * s->n_pad * s->real);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, "the charge packing kernel");
        a.pot_exp[v] = qexp + sexp - e, a.grad_exp[v] = qexp + 2 * (sexp - e);
    }
    a.real = s->real, a.kernel = plan->kernel, a.self = plan->self, a.nv = nv, a.splits = splits;
    a.n_pad = s->n_pad, a.m = m, a.m_pad = s->m_pad;
    a.d_src = s->d_src, a.d_trg = s->d_trg, a.d_q = b + off[0];
    a.d_pot = pot ? (on_device ? pot : h_pot) : NULL;
    a.d_grad = grad ? (on_device ? grad : h_grad) : NULL;
    a.d_partial = (double *)(b + off[4]);
    a.eps2 = plan->frame.softening * plan->frame.softening;
    a.block0 = 0, a.block1 = INT64_MAX, a.finish = 0;
    const double t1 = fmk_time_now();
    if ((err = cudaEventRecord(s->ev[0], 0)) != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaEventRecord");
    /* a long sum in launches of target blocks, whole waves over all the sources (run_eval's
     * first way of cutting; the rate is eval_many's own: a pair costs more than one vector's) */
    int64_t wave = 1;
    fmk_cuda_many_splits(s->real, plan->kernel, nv, s->n_pad, s->m_pad, s->device, &wave);
    const int64_t blocks = s->m_pad / fmk_cuda_many_block_targets(s->real);
    const double per_block = (double)fmk_cuda_many_block_targets(s->real) * (double)s->n_pad;
    if ((double)s->n_pad * (double)s->m_pad <=
        fmk_direct_engine_launch_pairs(plan, ds->rate_many)) {
        err = fmk_cuda_p2p_many(&a);
    } else {
        many_range ctx = {&a};
        fmk_cuda_ranges r;
        const int64_t k = ((const fmk_cuda_direct_tune *)plan->tune)->launch_pairs;
        r.total = blocks, r.quantum = (wave + splits - 1) / splits, r.item_work = per_block;
        r.rate = &ds->rate_many, r.ev = s->ev + 2, r.stream = 0;
        r.launch = many_range_launch, r.ctx = &ctx, r.what = "the direct-sum kernel";
        r.fixed = k > 0 ? (double)k : 0,
        r.first = fmk_direct_engine_launch_pairs(plan, ds->rate_many);
        const fmk_status st = fmk_cuda_launch_ranges(plan, &r);
        if (st != FMK_OK)
            return st;
        a.block0 = 0, a.block1 = INT64_MAX;
    }
    if (err == cudaSuccess && splits > 1) {
        a.finish = 1;
        err = fmk_cuda_p2p_many(&a);
    }
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the direct-sum kernel launch");
    if ((err = cudaEventRecord(s->ev[1], 0)) != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaEventRecord");
    if ((err = cudaEventSynchronize(s->ev[1])) != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the direct-sum kernel");
    float ms = 0;
    if ((err = cudaEventElapsedTime(&ms, s->ev[0], s->ev[1])) != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaEventElapsedTime");
    const double t2 = fmk_time_now();
    if (!on_device) {
        if (pot && (err = cudaMemcpy(pot, h_pot, (size_t)(nv * m) * sizeof(double),
                                     cudaMemcpyDeviceToHost)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (potential from the GPU)");
        if (grad && (err = cudaMemcpy(grad, h_grad, (size_t)(nv * m) * 3 * sizeof(double),
                                      cudaMemcpyDeviceToHost)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (gradient from the GPU)");
    }
    phase[FMK_PHASE_UPLOAD] += t1 - t0;
    phase[FMK_PHASE_P2P] += ms * 1e-3;
    phase[FMK_PHASE_DOWNLOAD] += on_device ? 0 : fmk_time_now() - t2;
    return FMK_OK;
}

/* eval_many (ds->nd_call vectors): passes of 4 vectors, then 2, then a last one alone (run_eval);
 * vector by vector where the pass kernel does not apply (many_vectors: the 2D kernels) or the
 * plan is careful (fp64 pairs closer than the fast kernel takes: run_eval's careful kernel). The
 * pass buffer is made at the first call (kept, grown when a call needs more). */
fmk_status run_many(fmk_plan *plan, const double *charges, double *pot, double *grad, int on_device)
{
    fmk_direct_state *ds = (fmk_direct_state *)plan->state;
    fmk_cuda_direct *s = &ds->d;
    const int64_t nd = ds->nd_call, n = plan->n_sources, m = plan->n_targets;
    const int cw = fmk_kernel_width(plan->kernel);
    const int gw = fmk_kernel_grad_width(plan->kernel, plan->dim);
    const int most = s->careful || n == 0 ? 0 : many_vectors(plan, nd);
    int64_t off[6];
    int splits = 1;
    fmk_status st = FMK_OK;
    if (most > 0) {
        /* room for a pass of 2 too (its splits may be more) */
        const int64_t two = many_layout(plan, n, m, 2, off, &splits);
        const int64_t all = many_layout(plan, n, m, most, off, &splits);
        const int64_t need = two > all ? two : all;
        if ((size_t)need > ds->cap_many) {
            if (ds->d_many && cudaFree(ds->d_many) != cudaSuccess)
                (void)cudaGetLastError();
            ds->d_many = NULL, ds->cap_many = 0;
            st = fmk_cuda_alloc(plan, &ds->d_many, (size_t)need,
                                "the charges and sums of several charge vectors",
                                (long long)(plan->state_bytes_device + need));
            if (st == FMK_OK)
                ds->cap_many = (size_t)need;
            int64_t held = 0; /* prepare_state's count with the new buffer */
            for (int k = 0; k < 8; k++)
                held += (int64_t)s->cap[k];
            plan->state_bytes_device = held + 16 + (int64_t)ds->cap_many;
            plan->info.bytes_device = plan->state_bytes_device;
            if (st != FMK_OK)
                return st;
        }
    }
    double *phase = plan->info.phase_time, sum[FMK_PHASE_COUNT] = {0};
    for (int64_t v0 = 0; v0 < nd && st == FMK_OK;) {
        if (v0 > 0 && fmk_interrupt_poll(plan))
            return fmk_interrupt_status(plan);
        const int nv = most == 0 ? 1 : (int)(nd - v0 >= most ? most : nd - v0 >= 2 ? 2 : 1);
        const double *q = charges + v0 * n * cw;
        double *p = pot ? pot + v0 * m * cw : NULL, *g = grad ? grad + v0 * m * gw : NULL;
        if (nv == 1) {
            st = fmk_direct_engine_eval_one(plan, q, p, g, on_device);
            for (int k = FMK_PHASE_UPLOAD; k < FMK_PHASE_COUNT && st == FMK_OK; k++)
                sum[k] += phase[k];
        } else {
            if (nv < most) /* the partial sums' layout of nv vectors */
                many_layout(plan, n, m, nv, off, &splits);
            st = many_pass(plan, ds, off, splits, nv, v0, q, p, g, on_device, sum);
        }
        v0 += nv;
    }
    if (st == FMK_OK)
        for (int k = FMK_PHASE_UPLOAD; k < FMK_PHASE_COUNT; k++)
            phase[k] = sum[k];
    return st;
}

} // namespace

int64_t fmk_direct_many_bytes(const fmk_plan *plan, int64_t ns, int64_t m, int64_t nd)
{
    const int most = many_vectors(plan, nd);
    if (most == 0 || ns == 0 || m == 0)
        return 0;
    int64_t off[6];
    int splits;
    const int64_t two = many_layout(plan, ns, m, 2, off, &splits);
    const int64_t all = many_layout(plan, ns, m, most, off, &splits);
    return two > all ? two : all;
}

fmk_status fmk_direct_many_eval(fmk_plan *plan, int64_t nd, const double *charges, double *pot,
                                double *grad, int on_device)
{
    if (plan->state)
        ((fmk_direct_state *)plan->state)->nd_call = nd;
    return fmk_cuda_eval(plan, charges, pot, grad, on_device, run_many);
}
