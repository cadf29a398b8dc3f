/* engine.cu -- the adaptive 3D FMM on the GPU (method fmm, backend cuda) for the kernels laplace,
 * plummer and regularized (the smooth ones: exact kernel in P2P, laplace expansions in the far
 * field, the tree cut at d_min: fmm3d.h, fmk_fmm3d_max_level; docs/fmm3d.md section 8.1), fp64,
 * or with P2P in fp32 for precision fp32 (eps >= 1e-5): the engine's row, its state's life
 * cycle and eval. docs/fmm3d_gpu.md describes the design; fmm3d_cuda.h lists the files.
 *
 * set_points (geometry.cu, once per set of points), all on the GPU: the points (mapped into the
 * plan's frame by plan.c, or given on the device and mapped here: set_points_device), the
 * octree, the lists, the operators (on a stream of their own alongside). The state (events,
 * streams, cuBLAS, the tree's and the lists' arrays, matrices, buffers) is kept from one
 * set_points_device to the next, grown where too small. A fresh plan's first call allocates it
 * in one cudaMalloc sized from the node estimate (memory.cu; the tree and the list builder cut
 * their arrays from arenas lent from it), does not wait for the operators' stream (eval's far
 * field does), and makes its cuBLAS handle at the first eval's M2L.
 *
 * eval (numbers only, run_eval): charges to key order; P2M (p2m_l2p.cu); M2M level by level
 * upward to level 2 (translate.cu); M2L (m2l_gemm.cu, or m2l_rot.cu from the knob m2l_rot_order
 * up) and P2L; L2L downward; L2P and M2P; and alongside, on a second stream, the near field
 * (p2p.cu) into its own results; W entries with few sources and X entries into boxes with few
 * targets are done as P2P instead (exact, and cheaper there; the knob direct_near). Then both
 * fields' sums go to the caller's order and units. Nothing is written to the caller's arrays
 * before every pass has succeeded.
 *
 * eval_many: the same run for several charge vectors, passes of up to FMM_NV_MAX of them, each
 * phase made for all the pass's vectors (their expansions side by side, the M2L's GEMMs with
 * their columns together, P2P's pairs once for 4 of them; docs/fmm3d_gpu.md, section 7).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmm3d/cuda/fmm3d_cuda.h"

extern "C" const fmk_engine fmk_engine_fmm_cuda; /* defined at the end of this file */

namespace {

/* Charges in key order into the sources' 4th component. */
__global__ void k_charges(int n, const int32_t *__restrict__ order, const double *__restrict__ q,
                          real4d *src)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        src[i].w = q[order[i]];
}

/* The charges of nv vectors (vector v's at q + v n) in key order into qk (the same layout), and
 * those of vector w (-1: none) into the sources' 4th component too. */
__global__ void k_charges_many(int n, int nv, int w, const int32_t *__restrict__ order,
                               const double *__restrict__ q, real4d *src, double *qk)
{
    const int64_t total = (int64_t)n * nv;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int v = (int)(t / n), i = (int)(t - (int64_t)v * n);
        const double c = q[(int64_t)v * n + order[i]];
        qk[t] = c;
        if (v == w)
            src[i].w = c;
    }
}

/* Results (key order, frame units: the far field's res plus the near field's near) to the
 * caller's order and units. */
__global__ void k_results(int nt, const int32_t *__restrict__ order, const double *__restrict__ res,
                          const double *__restrict__ near, double ps, double *pot, double *grad)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nt; i += gridDim.x * blockDim.x) {
        const int c = order[i];
        if (pot)
            pot[c] = (res[i] + near[i]) * ps;
        if (grad) /* scaled twice by 1/width: 1/width^2 may overflow */
            for (int d = 0; d < 3; d++)
                grad[3 * c + d] = (res[nt + 3 * i + d] + near[nt + 3 * i + d]) * ps * ps;
    }
}

/* k_results for nv vectors: vector v's sums at res, near + v 4 nt, its outputs at pot + v nt and
 * grad + 3 v nt. */
__global__ void k_results_many(int nt, int nv, const int32_t *__restrict__ order,
                               const double *__restrict__ res, const double *__restrict__ near,
                               double ps, double *pot, double *grad)
{
    const int64_t total = (int64_t)nt * nv;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t v = t / nt, i = t - v * nt, c = order[i];
        const double *r = res + 4 * v * nt, *n = near + 4 * v * nt;
        if (pot)
            pot[v * nt + c] = (r[i] + n[i]) * ps;
        if (grad)
            for (int d = 0; d < 3; d++)
                grad[3 * (v * nt + c) + d] = (r[nt + 3 * i + d] + n[nt + 3 * i + d]) * ps * ps;
    }
}

void fmm_release(fmk_plan *plan)
{
    fmk_fmm3d_cuda *s = (fmk_fmm3d_cuda *)plan->state;
    if (!s)
        return;
    int prev = -1;
    const int entered = fmk_cuda_enter(plan, s->device, &prev) == FMK_OK;
    if (s->streams > 2) /* the operators of a set_points not followed by an eval */
        cudaStreamSynchronize(s->stream[2]);
    fmk_fmm3d_cuda_free_all(s);
    for (int i = 0; i < s->events; i++)
        cudaEventDestroy(s->ev[i]);
    for (int i = 0; i < s->streams; i++)
        cudaStreamDestroy(s->stream[i]);
    fmk_fmm3d_cuda_blas_destroy(s);
    if (entered)
        fmk_cuda_leave(s->device, prev);
    free(s);
    plan->state = NULL;
    plan->state_bytes_device = 0;
}

fmk_status too_many(fmk_plan *plan, int64_t np)
{
    if (np <= FMK_CUDA_TREE_MAX_POINTS)
        return FMK_OK;
    return fmk_error_set(plan, FMK_ERR_ARG,
                         "the GPU FMM takes at most %lld points (sources and targets together)",
                         (long long)FMK_CUDA_TREE_MAX_POINTS);
}

/* A failure starting the plan's state: out of memory says what the plan needs. */
fmk_status start_failed(fmk_plan *plan, cudaError_t err, const char *call)
{
    if (err != cudaErrorMemoryAllocation)
        return fmk_cuda_fail(plan, err, call);
    (void)cudaGetLastError();
    return fmk_error_set(plan, FMK_ERR_DEVICE_NOMEM,
                         "%s: out of GPU memory; the plan needs about %lld bytes on the GPU", call,
                         fmk_fmm3d_cuda_plan_bytes(plan));
}

/* A new state in plan->state (*out): its order, events and streams. */
fmk_status new_state(fmk_plan *plan, fmk_fmm3d_cuda **out)
{
    const double t0 = fmk_time_now();
    const fmk_status loaded = fmk_fmm3d_cuda_blas_load(plan);
    if (loaded != FMK_OK)
        return loaded;
    fmk_fmm3d_cuda *s = (fmk_fmm3d_cuda *)calloc(1, sizeof *s);
    if (!s)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory");
    s->tune = fmk_fmm3d_cuda_tune_of(plan);
    s->device = plan->opts.device;
    s->sms = fmk_cuda_sm_count(s->device);
    s->fp32 = plan->opts.precision == FMK_PRECISION_FP32;
    s->kernel = plan->kernel;
    /* the near field's 1/r to ~1e-13 (below 1e-2 of eps) where the order comes from eps */
    s->newton_ok = plan->opts.order < 0 && plan->eps >= 1e-11;
    s->nv_cap = fmk_fmm3d_cuda_nv_of(plan);
    s->order = fmk_fmm3d_cuda_order(plan);
    s->leaf_size = fmk_fmm3d_cuda_leaf_size(plan, s->order);
    s->S = (s->order + 1) * (s->order + 2);
    s->Sp = (s->order + 1) * (s->order + 1);
    s->Sx = m2l_pad(s->Sp);
    s->cfg = fmk_fmm3d_cuda_translate_config(s->S);
    s->use_rot = s->order >= s->tune->m2l_rot_order;
    /* the dense M2L's degrees (truncated only where the order comes from eps), their order and
     * the stacked matrices' rows; the size rule from the node estimate until the tree is built
     * (fmk_fmm3d_cuda_setup) */
    s->m2l_f =
        !s->use_rot && plan->opts.order < 0 && s->tune->m2l_trunc > 0 ? s->tune->m2l_trunc : 0;
    s->m2l_k = s->tune->m2l_classes;
    s->m2l_min = s->tune->m2l_trunc_min;
    {
        const int64_t np = plan->self ? plan->n_sources : plan->n_sources + plan->n_targets;
        const int64_t nn =
            np > 8 * (int64_t)s->leaf_size ? fmk_tree3d_estimate_nodes(np, s->leaf_size) - 9 : 0;
        fmk_fmm3d_cuda_m2l_select(s, fmk_fmm3d_cuda_m2l_whole(s, nn));
    }
    s->fresh = 1;
    plan->state = s;
    *out = s;
    fmk_status st = FMK_OK;
    for (; s->events < N_EV && st == FMK_OK; s->events++) {
        cudaError_t err = cudaEventCreate(&s->ev[s->events]);
        if (err != cudaSuccess)
            st = start_failed(plan, err, "cudaEventCreate");
    }
    /* eval's two streams: the far field's chain of dependent passes first when both have
     * blocks waiting, the near field (independent bulk work) filling the GPU around it */
    int least = 0, greatest = 0;
    if (st == FMK_OK && cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess) {
        (void)cudaGetLastError();
        least = greatest = 0;
    }
    for (; s->streams < 3 && st == FMK_OK; s->streams++) {
        cudaError_t err = cudaStreamCreateWithPriority(
            &s->stream[s->streams], s->streams == 2 ? cudaStreamNonBlocking : cudaStreamDefault,
            s->streams == 0 ? greatest : least);
        if (err != cudaSuccess)
            st = start_failed(plan, err, "cudaStreamCreateWithPriority");
    }
    s->setup_time[0] += fmk_time_now() - t0;
    return st;
}

/* The engine's state for the plan's points: in_device, mapped on the device already in the
 * state's d_pts (points_device), else from the plan's host copies. The plan's device is
 * current. On failure the plan holds no state. */
fmk_status build_state(fmk_plan *plan, int on_device)
{
    if (plan->opts.precision == FMK_PRECISION_FP32 && plan->eps < 1e-5) {
        fmm_release(plan);
        return fmk_error_set(plan, FMK_ERR_ARG,
                             "method fmm in fp32 takes eps >= 1e-5 (eps = %g); use precision fp64",
                             plan->eps);
    }
    /* the state of the plan's previous points (set_points_device keeps it): its events,
     * streams, cuBLAS handle, tree workspace, matrices and buffers serve again */
    fmk_fmm3d_cuda *s = (fmk_fmm3d_cuda *)plan->state;
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    const int64_t np = plan->self ? ns : ns + nt;
    fmk_status st = FMK_OK;
    if (!s) {
        st = new_state(plan, &s);
        if (st == FMK_OK)
            st = fmk_fmm3d_cuda_state_block(plan, s, np, 0);
    }
    if (s && !s->fresh)
        s->setup_time[0] = 0;
    if (st == FMK_OK && !on_device) { /* the mapped host points, sources then targets */
        st = fmk_fmm3d_cuda_grow(plan, s, (void **)&s->d_pts, &s->cap_pts,
                                 24 * (size_t)(np > 0 ? np : 1), "the points",
                                 fmk_fmm3d_cuda_plan_bytes(plan));
        cudaError_t err = cudaSuccess;
        if (st == FMK_OK)
            err = cudaMemcpy(s->d_pts, plan->sources, 24 * (size_t)ns, cudaMemcpyHostToDevice);
        if (st == FMK_OK && err == cudaSuccess && !plan->self)
            err = cudaMemcpy(s->d_pts + 3 * ns, plan->targets, 24 * (size_t)nt,
                             cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            st = fmk_cuda_fail(plan, err, "cudaMemcpy (points to the GPU)");
    }
    if (st == FMK_OK)
        st = fmk_fmm3d_cuda_setup(plan, s, s->d_pts);
    if (st != FMK_OK) {
        fmm_release(plan);
        return st;
    }
    s->fresh = 0;
    s->ns = ns;
    plan->state_bytes_device = s->bytes + s->g.bytes + s->tree.bytes;
    plan->info.order = s->order;
    plan->info.levels = s->levels;
    plan->info.leaf_size = s->leaf_size;
    plan->info.phase_time[FMK_PHASE_TREE] = s->tree_time;
    return FMK_OK;
}

fmk_status fmm_setup(fmk_plan *plan)
{
    fmk_status st = too_many(plan, plan->n_sources + (plan->self ? 0 : plan->n_targets));
    int prev;
    if (st == FMK_OK)
        st = fmk_cuda_enter(plan, plan->opts.device, &prev);
    if (st != FMK_OK)
        return st;
    st = build_state(plan, 0);
    fmk_cuda_leave(plan->opts.device, prev);
    return st;
}

/* Caller coordinates to the frame's, sources then targets into out (np * 3 doubles), rounded
 * as plan.c's map_points (no fused multiply-add), so that device and host points give the
 * same mapped points. */
__global__ void k_map_points(int64_t ns, const double *__restrict__ src, int64_t nt,
                             const double *__restrict__ trg, double cx, double cy, double cz,
                             double inv, double *__restrict__ out)
{
    const int64_t n = 3 * (ns + nt);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const double x = i < 3 * ns ? src[i] : trg[i - 3 * ns];
        const int k = (int)(i % 3);
        const double c = k == 0 ? cx : k == 1 ? cy : cz;
        out[i] = __dadd_rn(1.5, __dmul_rn(__dadd_rn(x, -c), inv));
    }
}

/* set_points_device (the plan's points already dropped, its device current): finiteness and
 * bounding box by one CUB reduction, the frame, the points mapped on the GPU, then the state
 * as from host points; the host never holds the points. A fresh plan makes its state first, its
 * one allocation holding the points and the reduction's workspace. */
fmk_status points_device(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                         const double *d_t)
{
    const int self = d_t == NULL;
    const int64_t n_box = self ? 0 : nt;
    if (self)
        nt = ns;
    const int64_t np = ns + n_box;
    fmk_status st = too_many(plan, np);
    if (st != FMK_OK)
        return st;
    plan->self = self;
    plan->n_sources = ns, plan->n_targets = nt;
    const long long total = fmk_fmm3d_cuda_plan_bytes(plan);
    size_t temp_bytes = 0;
    double lo[3], hi[3];
    st = fmk_cuda_frame_query(plan, ns, d_s, n_box, d_t, &temp_bytes);
    if (st != FMK_OK)
        return st;
    const size_t box_off = (temp_bytes + 255) / 256 * 256,
                 box_bytes = box_off + fmk_cuda_box_bytes();
    /* the mapped points' buffer first: a size the GPU cannot hold fails before any read; the
     * plan's state from its previous points (fmm_set_points_device) lends its buffers (on
     * failure the caller drops the state) */
    fmk_fmm3d_cuda *s = (fmk_fmm3d_cuda *)plan->state;
    if (!s && (st = new_state(plan, &s)) == FMK_OK)
        st = fmk_fmm3d_cuda_state_block(plan, s, np, box_bytes);
    if (st == FMK_OK)
        st = fmk_fmm3d_cuda_grow(plan, s, (void **)&s->d_pts, &s->cap_pts,
                                 24 * (size_t)(np > 0 ? np : 1), "the points", total);
    if (st == FMK_OK)
        st = fmk_fmm3d_cuda_grow(plan, s, &s->d_box, &s->cap_box, box_bytes,
                                 "the bounding-box workspace", total);
    fmk_frame frame;
    if (st == FMK_OK)
        st = fmk_cuda_frame(plan, ns, d_s, n_box, d_t, s->d_box, temp_bytes,
                            (char *)s->d_box + box_off, lo, hi, &frame);
    if (st == FMK_OK && np > 0) {
        const int64_t blocks = (3 * np + 255) / 256;
        k_map_points<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256>>>(
            ns, d_s, n_box, d_t, frame.center[0], frame.center[1], frame.center[2],
            1.0 / frame.width, s->d_pts);
        const cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess)
            st = fmk_cuda_fail(plan, err, "the point mapping kernel");
    }
    if (st != FMK_OK)
        return st;
    plan->frame = frame;
    st = build_state(plan, 1);
    if (st == FMK_OK)
        plan->has_points = 1;
    return st;
}

fmk_status fmm_set_points_device(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                                 const double *d_t)
{
    /* the previous points' state is kept through the drop (reuses_state: its buffers serve
     * again, repeated calls allocate little); on failure the plan holds no state and no points */
    return fmk_cuda_set_points_device(plan, ns, d_s, nt, d_t, points_device);
}

/* Eval from host arrays: the device copies of the charges, potential and gradient (in d_host). */
struct eval_io {
    const double *d_q;
    double *h_pot, *h_grad;
};

/* Upload: the charges of nv vectors on the device (io->d_q: the caller's, or copied from the
 * host), checked here where plan.c has not (device charges, and fp32's scaling), and P2P's
 * scalings per vector. */
fmk_status upload(fmk_plan *plan, fmk_fmm3d_cuda *s, const double *charges, int on_device, int nv,
                  eval_io *io, p2p_scales *sc)
{
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    cudaError_t err = cudaSuccess;
    io->d_q = charges, io->h_pot = io->h_grad = NULL;
    if (!on_device) {
        const size_t need = (8 * (size_t)ns + 32 * (size_t)nt) * (size_t)nv;
        const fmk_status st = fmk_fmm3d_cuda_grow(plan, s, &s->d_host, &s->cap_host, need,
                                                  "the charges and results of host arrays",
                                                  fmk_fmm3d_cuda_plan_bytes(plan));
        if (st != FMK_OK)
            return st;
        plan->state_bytes_device = s->bytes + s->g.bytes + s->tree.bytes;
        double *h_q = (double *)s->d_host;
        io->h_pot = h_q + nv * ns, io->h_grad = io->h_pot + nv * nt;
        err = cudaMemcpy(h_q, charges, 8 * (size_t)ns * nv, cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (charges to the GPU)");
        io->d_q = h_q;
    }
    for (int v = 0; v < nv; v++)
        sc->q[v] = sc->pot[v] = sc->grad[v] = 1;
    if (!on_device && !s->fp32) /* plan.c checks host charges; device charges are checked here */
        return FMK_OK;
    unsigned long long stats[2 * FMM_NV_MAX];
    for (int v = 0; v < nv && err == cudaSuccess; v++)
        err = fmk_cuda_charge_stats(1, ns, io->d_q + v * ns, s->d_stats + 2 * v);
    if (err == cudaSuccess)
        err = cudaMemcpy(stats, s->d_stats, 16 * (size_t)nv, cudaMemcpyDeviceToHost);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the charge check kernel");
    for (int v = 0; v < nv; v++) {
        double qmax;
        memcpy(&qmax, &stats[2 * v + 1], sizeof qmax);
        if (s->fp32 && qmax > 0) { /* the largest |q| into [1, 2) */
            int ex;
            frexp(qmax, &ex);
            const int e = 1 - ex < 1000 ? 1 - ex : 1000;
            sc->q[v] = ldexp(1.0, e);
        }
        if (s->fp32) {
            sc->pot[v] = FMK_CUDA_LAPLACE32_SCALE / sc->q[v];
            sc->grad[v] = FMK_CUDA_LAPLACE32_SCALE * FMK_CUDA_LAPLACE32_SCALE / sc->q[v];
        }
        if (stats[2 * v] != ~0ull) {
            double q = 0;
            err = cudaMemcpy(&q, io->d_q + v * ns + stats[2 * v], sizeof q, cudaMemcpyDeviceToHost);
            if (err != cudaSuccess)
                return fmk_cuda_fail(plan, err, "cudaMemcpy (a charge from the GPU)");
            char vec[48] = ""; /* eval_many: the vector's place in the call */
            if (s->nd_call > 1)
                snprintf(vec, sizeof vec, "charge vector %lld: ", (long long)(s->nd_first + v));
            return fmk_error_set(plan, FMK_ERR_NONFINITE,
                                 "%scharges[%lld] is %g; charges must be finite", vec,
                                 (long long)stats[2 * v], q);
        }
    }
    return FMK_OK;
}

/* The charges in key order on the far field's stream (EV_START .. EV_FORK): all the near field
 * needs. nv vectors: all of them into d_qk, the last of an odd count also into the sources (P2P
 * takes it alone, fmk_cuda_fmm3d_p2p_many). */
cudaError_t charges_in_key_order(fmk_fmm3d_cuda *s, int64_t ns, const double *d_q, int nv)
{
    cudaStream_t fs = s->stream[0];
    cudaEventRecord(s->ev[EV_START], fs);
    if (nv == 1)
        k_charges<<<1024, 256, 0, fs>>>((int)ns, s->g.d_src_order, d_q, s->g.d_src);
    else
        k_charges_many<<<1024, 256, 0, fs>>>((int)ns, nv, nv % 2 ? nv - 1 : -1, s->g.d_src_order,
                                             d_q, s->g.d_src, s->d_qk);
    cudaEventRecord(s->ev[EV_FORK], fs);
    return cudaGetLastError();
}

/* The far field's expansions (of nv vectors) zeroed, and (a plan's first eval) the wait for the
 * operators of its first set_points. */
void far_start(fmk_fmm3d_cuda *s, int nv)
{
    cudaStream_t fs = s->stream[0];
    cudaMemsetAsync(s->d_M, 0, 8 * (size_t)s->S * (size_t)s->n_nodes * nv, fs);
    cudaMemsetAsync(s->d_L, 0, 8 * (size_t)s->S * (size_t)s->n_nodes * nv, fs);
    fmk_fmm3d_cuda_ops_wait(s, fs);
}

/* Download: once both fields are done (EV_JOIN), their sums to the caller's order and units
 * (the points were shrunk by 1 / root_side: the sums are root_side (pot) and root_side^2 (grad)
 * times the frame's), into the caller's device arrays or the host evaluation's copies. */
cudaError_t download(fmk_plan *plan, fmk_fmm3d_cuda *s, const eval_io *io, double *pot,
                     double *grad, int on_device, int nv)
{
    cudaStream_t fs = s->stream[0];
    double *p = pot ? (on_device ? pot : io->h_pot) : NULL;
    double *g = grad ? (on_device ? grad : io->h_grad) : NULL;
    if (nv == 1)
        k_results<<<1024, 256, 0, fs>>>((int)plan->n_targets, s->g.d_trg_order, s->d_res, s->d_near,
                                        plan->frame.pot_scale / s->root_side, p, g);
    else
        k_results_many<<<1024, 256, 0, fs>>>((int)plan->n_targets, nv, s->g.d_trg_order, s->d_res,
                                             s->d_near, plan->frame.pot_scale / s->root_side, p, g);
    return cudaGetLastError();
}

/* The phases' times from their events (each on its own stream: with the near field alongside,
 * the far field's phases and P2P each take longer than alone and overlap), then the host
 * evaluation's results copied back. */
fmk_status finish(fmk_plan *plan, fmk_fmm3d_cuda *s, const eval_io *io, double *pot, double *grad,
                  int on_device, int nv)
{
    const int64_t nt = plan->n_targets * nv;
    double *phase = plan->info.phase_time;
    fmk_fmm3d_cuda_ops_time(s);
    static const struct {
        int phase, from, to;
    } ph[] = {{FMK_PHASE_P2M, EV_START, EV_P2M},    {FMK_PHASE_M2M, EV_P2M, EV_M2M},
              {FMK_PHASE_M2L, EV_M2M, EV_M2L},      {FMK_PHASE_L2L, EV_M2L, EV_L2L},
              {FMK_PHASE_L2P, EV_L2L, EV_L2P},      {FMK_PHASE_P2P, EV_NEAR, EV_P2P},
              {FMK_PHASE_DOWNLOAD, EV_JOIN, EV_END}};
    for (size_t i = 0; i < sizeof ph / sizeof ph[0]; i++) {
        float ms = 0;
        cudaEventElapsedTime(&ms, s->ev[ph[i].from], s->ev[ph[i].to]);
        phase[ph[i].phase] = 1e-3 * ms;
    }
    phase[FMK_PHASE_UPLOAD] = 0;
    if (!on_device) {
        const double t2 = fmk_time_now();
        cudaError_t err;
        if (pot && (err = cudaMemcpy(pot, io->h_pot, 8 * (size_t)nt, cudaMemcpyDeviceToHost)) !=
                       cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (potential from the GPU)");
        if (grad && (err = cudaMemcpy(grad, io->h_grad, 24 * (size_t)nt, cudaMemcpyDeviceToHost)) !=
                        cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (gradient from the GPU)");
        phase[FMK_PHASE_DOWNLOAD] += fmk_time_now() - t2;
    }
    phase[FMK_PHASE_TREE] = s->tree_time;
    return FMK_OK;
}

/* One phase of eval on the far field's stream: run unless an earlier one failed or the call
 * was interrupted; its end an event (the phases' times), which a long eval (check) waits for
 * to check for an interrupt (the near field runs on meanwhile). */
#define PHASE(call, end)                                                        \
    do {                                                                        \
        if (err == cudaSuccess && cst == FMK_OK)                                \
            err = (call);                                                       \
        cudaEventRecord(s->ev[end], fs);                                        \
        if (check && end != EV_END && err == cudaSuccess && cst == FMK_OK)      \
            cst = fmk_cuda_checkpoint(plan, s->ev[end], "the FMM's far field"); \
    } while (0)

/* Eval, the algorithm. The near field (P2P) needs only the charges in key order, so it runs on
 * the plan's second stream alongside the far field's chain (P2M .. L2P) and writes its own
 * results, which the download adds to the far field's once both are done (the knob overlap 0:
 * one stream, the near field after L2P). Nothing reaches the caller's arrays after a failed
 * pass. A long eval (fmk_cuda_long) checks for an interrupt after each phase of the far field;
 * an interrupted one waits for the near field before it returns. */
fmk_status run_eval(fmk_plan *plan, fmk_fmm3d_cuda *s, const double *charges, double *pot,
                    double *grad, int on_device, int nv)
{
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    cudaError_t err = cudaSuccess;
    if (ns == 0) { /* only the device path gets here */
        if (pot && (err = cudaMemset(pot, 0, 8 * (size_t)nt * nv)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemset (pot)");
        if (grad && (err = cudaMemset(grad, 0, 24 * (size_t)nt * nv)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemset (grad)");
        return FMK_OK;
    }
    eval_io io;
    p2p_scales scs;
    const fmk_status up = upload(plan, s, charges, on_device, nv, &io, &scs);
    if (up != FMK_OK)
        return up;
    const p2p_scale sc = {scs.q[0], scs.pot[0], scs.grad[0]};
    const int overlap = s->tune->overlap != 0;
    cudaStream_t fs = s->stream[0], nst = overlap ? s->stream[1] : fs;
    fmk_status bst = FMK_OK; /* in the M2L: cuBLAS's failure (a fresh plan's first: its start),
                                or an interrupt between its launches */
    fmk_status cst = FMK_OK; /* a check between the phases: interrupted */
    const int check = fmk_cuda_long(plan, plan->self ? ns : ns + nt);
    /* nv charge vectors (eval_many): the same passes, each made for nv of them */
    const int one = nv == 1;
    err = charges_in_key_order(s, ns, io.d_q, nv); /* upload: charges in key order */
    if (overlap && err == cudaSuccess)             /* P2P, alongside */
        err = one ? fmk_cuda_fmm3d_p2p(s, (int)nt, sc, nst)
                  : fmk_cuda_fmm3d_p2p_many(s, (int)nt, nv, scs, nst);
    far_start(s, nv);
    PHASE(one ? fmk_cuda_fmm3d_p2m(s) : fmk_cuda_fmm3d_p2m_many(s, nv), EV_P2M); /* P2M */
    PHASE(fmk_cuda_fmm3d_m2m(s, nv), EV_M2M);                                    /* M2M */
    if (err == cudaSuccess && cst == FMK_OK)
        err = fmk_cuda_fmm3d_m2l(plan, s, &bst, nv); /* M2L */
    PHASE(one ? fmk_cuda_fmm3d_p2l(s) : fmk_cuda_fmm3d_p2l_many(s, nv),
          EV_M2L);                            /* P2L (timed with M2L) */
    PHASE(fmk_cuda_fmm3d_l2l(s, nv), EV_L2L); /* L2L */
    PHASE(one ? fmk_cuda_fmm3d_l2p(s, (int)nt) : fmk_cuda_fmm3d_l2p_many(s, (int)nt, nv),
          EV_L2P);                                       /* L2P, M2P */
    if (!overlap && err == cudaSuccess && cst == FMK_OK) /* P2P, after */
        err = one ? fmk_cuda_fmm3d_p2p(s, (int)nt, sc, nst)
                  : fmk_cuda_fmm3d_p2p_many(s, (int)nt, nv, scs, nst);
    cudaStreamWaitEvent(fs, s->ev[EV_P2P], 0);
    cudaEventRecord(s->ev[EV_JOIN], fs);
    PHASE(download(plan, s, &io, pot, grad, on_device, nv), EV_END); /* download */
    if (err != cudaSuccess || cst != FMK_OK) /* the near field may still run: no buffer is freed
                                                under it, nothing writes after the return */
        cudaStreamSynchronize(nst), cudaStreamSynchronize(fs);
    if (bst != FMK_OK)
        return bst;
    if (cst != FMK_OK)
        return cst;
    if (err == cudaSuccess)
        err = cudaEventSynchronize(s->ev[EV_END]);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the FMM kernels");
    return finish(plan, s, &io, pot, grad, on_device, nv);
}

#undef PHASE

fmk_status fmm_run(fmk_plan *plan, const double *charges, double *pot, double *grad, int on_device)
{
    fmk_fmm3d_cuda *s = (fmk_fmm3d_cuda *)plan->state;
    s->nd_call = 1, s->nd_first = 0;
    return run_eval(plan, s, charges, pot, grad, on_device, 1);
}

fmk_status fmm_eval(fmk_plan *plan, const double *charges, double *pot, double *grad, int on_device)
{
    return fmk_cuda_eval(plan, charges, pot, grad, on_device, fmm_run);
}

/* eval_many (s->nd_call vectors): passes of at most FMM_NV_MAX vectors, as even as they can be
 * (eval's buffers made for that many: fmk_fmm3d_cuda_vectors), each one run_eval of all its
 * vectors; the phase times summed over the passes. */
fmk_status fmm_run_many(fmk_plan *plan, const double *charges, double *pot, double *grad,
                        int on_device)
{
    fmk_fmm3d_cuda *s = (fmk_fmm3d_cuda *)plan->state;
    const int64_t nd = s->nd_call, ns = plan->n_sources, nt = plan->n_targets;
    const int64_t passes = (nd + FMM_NV_MAX - 1) / FMM_NV_MAX;
    const int per = (int)((nd + passes - 1) / passes);
    fmk_status st = fmk_fmm3d_cuda_vectors(plan, s, per);
    double *phase = plan->info.phase_time, sum[FMK_PHASE_COUNT] = {0};
    for (int64_t v0 = 0; v0 < nd && st == FMK_OK; v0 += per) {
        if (v0 > 0 && fmk_interrupt_poll(plan))
            return fmk_interrupt_status(plan);
        const int nv = (int)(nd - v0 < per ? nd - v0 : per);
        s->nd_first = v0;
        st = run_eval(plan, s, charges + v0 * ns, pot ? pot + v0 * nt : NULL,
                      grad ? grad + 3 * v0 * nt : NULL, on_device, nv);
        for (int k = FMK_PHASE_UPLOAD; k < FMK_PHASE_COUNT && st == FMK_OK; k++)
            sum[k] += phase[k];
    }
    if (st == FMK_OK)
        for (int k = FMK_PHASE_UPLOAD; k < FMK_PHASE_COUNT; k++)
            if (k != FMK_PHASE_TREE)
                phase[k] = sum[k];
    return st;
}

fmk_status fmm_eval_many(fmk_plan *plan, int64_t nd, const double *charges, double *pot,
                         double *grad, int on_device)
{
    if (plan->state)
        ((fmk_fmm3d_cuda *)plan->state)->nd_call = nd;
    return fmk_cuda_eval(plan, charges, pot, grad, on_device, fmm_run_many);
}

fmk_status fmm_check_opts(fmk_opts *o, fmk_kernel kernel, int dim, double eps, fmk_info *info)
{
    (void)dim, (void)info;
    fmk_status st = fmk_opts_only(o, "fmm", FMK_TAKES_ORDER | FMK_TAKES_LEAF);
    if (st == FMK_OK)
        st = fmk_fmm3d_check_eps(o, eps);
    if (st != FMK_OK)
        return st;
    if (kernel != FMK_KERNEL_LAPLACE && kernel != FMK_KERNEL_PLUMMER &&
        kernel != FMK_KERNEL_REGULARIZED)
        return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                             "method fmm on the GPU is not available for kernel %s (laplace, "
                             "plummer, regularized)",
                             fmk_kernel_name(kernel));
    if (o->order > FMM_GPU_MAX_ORDER)
        return fmk_error_set(NULL, FMK_ERR_ARG, "order %d is above the GPU FMM's largest, %d",
                             (int)o->order, FMM_GPU_MAX_ORDER);
    return FMK_OK;
}

} // namespace

/* The knobs (fmm3d_cuda.h), "fmm3d.<field>". */
static const fmk_fmm3d_cuda_tune fmm3d_cuda_tune_defaults = FMK_FMM3D_CUDA_TUNE_DEFAULTS;
static const fmk_tune_knob fmm3d_cuda_knobs[] = {
    FMK_KNOB(fmk_fmm3d_cuda_tune, m2l_rot_order, FMK_TUNE_INT, 0, 1e9,
             "rotation-based M2L from this order"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, direct_near, FMK_TUNE_INT, 0, 1e6,
             "W and X entries of few points as P2P (0 off)"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, p2p_pairs, FMK_TUNE_INT, -1, 6,
             "P2P of leaf pairs: points per lane (-1 auto, 0 off)"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, p2p_newton, FMK_TUNE_INT, -1, 1,
             "fp64 P2P's 1/r by a Newton step (-1 auto)"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, point_cols, FMK_TUNE_INT, 0, 1,
             "P2M by column groups, L2P from records"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, root_volume, FMK_TUNE_DOUBLE, 1, 1e9,
             "root cube's volume over the points' cube"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, root_fit, FMK_TUNE_INT, 0, 1,
             "root cube fitted to uniform points"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, overlap, FMK_TUNE_INT, 0, 1, "near field on a second stream"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, m2l_gap, FMK_TUNE_INT, -1, 1e9,
             "M2L GEMM runs merged across this many directions"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, m2l_trunc, FMK_TUNE_DOUBLE, 0, 1e9,
             "far M2L operators truncated, safety factor (0 off)"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, m2l_classes, FMK_TUNE_INT, 0, 64,
             "truncated degrees in at most this many classes (0 off)"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, m2l_trunc_min, FMK_TUNE_INT64, 0, 1e15,
             "truncation from this many M2L columns"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, m2l_bytes, FMK_TUNE_INT64, 1, 1e15,
             "bytes of the M2L's products"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, ops_at, FMK_TUNE_INT, 0, 1,
             "M2L matrices before the tree (1) or after the lists"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, blas_at, FMK_TUNE_INT, 0, 1,
             "cuBLAS handle at the first eval (1) or set_points"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, p2p_many_rt, FMK_TUNE_INT, 0, 4,
             "eval_many's P2P of leaf pairs: points per lane (0 auto)"),
    FMK_KNOB(fmk_fmm3d_cuda_tune, many_points, FMK_TUNE_INT, -1, 1,
             "eval_many's P2M, L2P: harmonics once (1), per vector (0), auto (-1)"),
    FMK_CUDA_TREE_KNOBS(fmk_fmm3d_cuda_tune, tree),
};
static const fmk_tune_table fmm3d_cuda_tune_table = {
    "fmm3d", sizeof(fmk_fmm3d_cuda_tune), &fmm3d_cuda_tune_defaults,
    FMK_TUNE_COUNT(fmm3d_cuda_knobs), fmm3d_cuda_knobs};

extern "C" const fmk_engine fmk_engine_fmm_cuda = {
    /* .name */ "fmm/cuda",
    /* .setup */ fmm_setup,
    /* .eval */ fmm_eval,
    /* .memory */ fmk_fmm3d_cuda_memory,
    /* .set_points_device */ fmm_set_points_device,
    /* .release */ fmm_release,
    /* .check_opts */ fmm_check_opts,
    /* .eps_min */
    1e-13, /* eps_min: p = 60 (rotation-based M2L) meets 1e-13; 1e-14 is below fp64's floor here
            * (docs/fmm3d_gpu.md) */
    /* .reuses_state */ 1, /* build_state takes the previous points' buffers */
    /* .tune */ &fmm3d_cuda_tune_table,
    /* .counters */ NULL,
    /* .shared_tune */ &fmk_cuda_tune_table,
    /* .shared_counters */ &fmk_cuda_counter_table,
    /* .frame */ {FMK_FRAME_BOX, FMK_FRAME_BOX},
    /* .eval_many */ fmm_eval_many, /* one pass for up to FMM_NV_MAX vectors */
};
