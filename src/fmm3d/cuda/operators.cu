/* operators.cu -- the translation operators of the GPU 3D FMM (fmm3d_cuda.h), dense real
 * matrices on (p + 1)(p + 2) doubles (an expansion's real and imaginary parts): with every
 * expansion scaled by its box's side (fmm3d_ops.h), M2M and L2L depend only on the child's
 * octant (8 each) and M2L only on the offset of the two boxes in side units (one of the 316
 * V-list directions), never on the level. They are built on the GPU, one entry per thread, from
 * the addition theorems (fmm3d_ops.c's references, written per matrix entry) and the harmonics
 * of the 8 + 8 + 316 translation vectors, on the plan's third stream, alongside the tree and
 * the lists; the M2L matrices are stacked into one tall matrix, in an order where the
 * directions that the sources of each octant reach lie in a few runs (m2l_gemm.cu). */
#include <math.h>
#include <string.h>

#include "fmm3d/cuda/fmm3d_cuda.h"
#include "fmm3d/cuda/harmonics.cuh"

namespace {

/* ---------------------------------------------------------------------------------------------
 * The translation matrices, one 2 x 2 real block (an output coefficient's real and imaginary
 * parts against an input's) per thread. H holds each translation vector's harmonics (I for
 * M2L, R for M2M and L2L) up to degree hdeg; sqb[a * nb + b] = sqrt(C(a, b)).
 * ------------------------------------------------------------------------------------------ */

__device__ inline void harm(const double *H, int n, int m, double *re, double *im)
{
    const int am = m < 0 ? -m : m;
    double r = H[2 * IDX(n, am)], i = H[2 * IDX(n, am) + 1];
    if (m < 0) { /* X_n^-m = (-1)^m conj(X_n^m) */
        const double sg = (am & 1) ? -1.0 : 1.0;
        r *= sg, i = -i * sg;
    }
    *re = r, *im = i;
}

/* kind 0: M2L, 1: M2M, 2: L2L. The weight c of input coefficient (J, L) (L signed) in output
 * (N, Mo), so that out_{N,Mo} += c In_J^L (fmm3d_ops.c's references with unit sides). */
__device__ void weight(int kind, const double *H, const double *sqb, int nb, int N, int Mo, int J,
                       int L, double *cr, double *ci)
{
    *cr = 0, *ci = 0;
    double hr, hi, w;
    if (kind == 0) { /* L_N^Mo += (-1)^(N+Mo) F(n,i)/(F(N,Mo) F(J,L)) I_{N+J}^{L-Mo}(D) M_J^L */
        harm(H, N + J, L - Mo, &hr, &hi);
        w = sqb[(J + L + N - Mo) * nb + (N - Mo)] * sqb[(J - L + N + Mo) * nb + (N + Mo)];
        if ((N + Mo) & 1)
            w = -w;
    } else if (kind == 1) { /* M_N^Mo += 2^-J F/(FF) conj(R_k^l(t)) M_J^L, k = N - J, l = Mo - L */
        const int k = N - J, l = Mo - L;
        if (k < 0 || l > k || l < -k)
            return;
        harm(H, k, l, &hr, &hi);
        hi = -hi;
        w = ldexp(1.0, -J) * sqb[(N + Mo) * nb + (k + l)] * sqb[(N - Mo) * nb + (k - l)];
    } else { /* L_N^Mo += 2^-N F/(FF) R_j^i(t) L_J^L, j = J - N, i = L - Mo */
        const int j = J - N, i = L - Mo;
        if (j < 0 || i > j || i < -j)
            return;
        harm(H, j, i, &hr, &hi);
        w = ldexp(1.0, -N) * sqb[(J + L) * nb + (N + Mo)] * sqb[(J - L) * nb + (N - Mo)];
    }
    *cr = w * hr, *ci = w * hi;
}

/* kind 0 (M2L) in the packed layout (k_m2l_columns), matrix mat (a direction in the M2L order)
 * to degree deg[mat] at rows roff[mat] .. of T, the output's packed doubles as rows, the input's
 * as columns, column-major with leading dimension ld; kinds 1 and 2 (M2M, L2L) on the full
 * (p + 1)(p + 2) doubles, matrix mat at T + mat * mat_stride (roff, deg NULL). */
__global__ void k_build(int kind, int p, int n_mat, int hdeg, const double *__restrict__ H,
                        const double *__restrict__ sqb, int nb, int64_t mat_stride, int64_t ld,
                        const int32_t *__restrict__ roff, const int32_t *__restrict__ deg,
                        double *T)
{
    const int nc = (p + 1) * (p + 2) / 2;
    const int64_t total = (int64_t)n_mat * nc * nc;
    for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < total;
         g += (int64_t)gridDim.x * blockDim.x) {
        const int mat = (int)(g / ((int64_t)nc * nc));
        const int rem = (int)(g - (int64_t)mat * nc * nc);
        const int out = rem % nc, in = rem / nc;
        int N = 0, J = 0;
        while ((N + 1) * (N + 2) / 2 <= out)
            N++;
        while ((J + 1) * (J + 2) / 2 <= in)
            J++;
        const int Mo = out - IDX(N, 0), Li = in - IDX(J, 0);
        if (deg && (N > deg[mat] || J > deg[mat]))
            continue;
        const double *Hm = H + (int64_t)mat * (hdeg + 1) * (hdeg + 2);
        double c1r, c1i, c2r = 0, c2i = 0;
        weight(kind, Hm, sqb, nb, N, Mo, J, Li, &c1r, &c1i);
        if (Li > 0) { /* the input's -Li coefficient is (-1)^Li conj of the stored one */
            weight(kind, Hm, sqb, nb, N, Mo, J, -Li, &c2r, &c2i);
            if (Li & 1)
                c2r = -c2r, c2i = -c2i;
        }
        if (deg) { /* packed: no imaginary part at m = 0 */
            double *Tm = T + roff[mat];
            const int64_t ir = J * J + (Li ? 2 * Li - 1 : 0), orr = N * N + (Mo ? 2 * Mo - 1 : 0);
            Tm[ir * ld + orr] = c1r + c2r;
            if (Li)
                Tm[(ir + 1) * ld + orr] = c2i - c1i;
            if (Mo)
                Tm[ir * ld + orr + 1] = c1i + c2i;
            if (Li && Mo)
                Tm[(ir + 1) * ld + orr + 1] = c1r - c2r;
            continue;
        }
        double *Tm = T + (int64_t)mat * mat_stride; /* column-major, leading dimension ld */
        const int64_t ir = 2 * in, ii = 2 * in + 1, orr = 2 * out, oi = 2 * out + 1;
        Tm[ir * ld + orr] = c1r + c2r; /* d out_re / d in_re */
        Tm[ii * ld + orr] = c2i - c1i; /* d out_re / d in_im */
        Tm[ir * ld + oi] = c1i + c2i;  /* d out_im / d in_re */
        Tm[ii * ld + oi] = c1r - c2r;  /* d out_im / d in_im */
    }
}

/* The translation harmonics of the operators (ops_layout): thread i < n_h the irregular
 * harmonics to degree 2p of the M2L vector vec[i], then 8 M2M vectors (child - parent centre)
 * and 8 L2L vectors, in parent sides, regular to degree p (fmm3d_ops.c's, made here from its
 * tables). */
__global__ void k_harmonics(int p, int n_h, tabs t, const double *__restrict__ vec, double *H)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t hs_m2l = (int64_t)(2 * p + 1) * (2 * p + 2), hs_p = (int64_t)(p + 1) * (p + 2);
    if (i < n_h) {
        irregular(t, 2 * p, vec[3 * i], vec[3 * i + 1], vec[3 * i + 2], H + hs_m2l * i);
    } else if (i < n_h + 16) {
        const int o = (i - n_h) & 7;
        regular(t, p, (o & 4) ? 0.25 : -0.25, (o & 2) ? 0.25 : -0.25, (o & 1) ? 0.25 : -0.25,
                H + hs_m2l * n_h + hs_p * (i - n_h));
    }
}

/* The M2L's part of the operators' upload (up: o.n_up doubles, ops_layout): the translation
 * vectors of the M2L_DIRS directions in the M2L order and per rank the first row and the degree
 * of its matrix in the stacked ones. */
void fill_dirs(const fmk_fmm3d_cuda *s, const ops_layout &o, double *up)
{
    int32_t *dirs = (int32_t *)(up + o.dirs);
    for (int r = 0; r < M2L_DIRS; r++) { /* target - source, in sides */
        const int d = s->dir_of_rank[r];
        up[o.vec + 3 * r] = d / 49 - 3, up[o.vec + 3 * r + 1] = (d / 7) % 7 - 3,
                       up[o.vec + 3 * r + 2] = d % 7 - 3;
        dirs[r] = s->m2l_roff[r], dirs[M2L_DIRS + r] = s->m2l_deg[d];
    }
}

} // namespace

ops_layout fmk_fmm3d_cuda_ops_layout(int p, int rot)
{
    ops_layout o;
    const int64_t S = (int64_t)(p + 1) * (p + 2), hs_m2l = (int64_t)(2 * p + 1) * (2 * p + 2);
    o.nh = fmk_fmm3d_ncoef(2 * p + 1);
    o.nb = 4 * p + 2;
    o.n_h = rot ? 0 : M2L_DIRS; /* rotations: no dense M2L, no M2L harmonics */
    o.sqb = align32(2 * o.nh + (2 * p + 2) + (2 * p + 5));
    o.vec = o.sqb + align32((int64_t)o.nb * o.nb);
    o.dirs = o.vec + align32(3 * M2L_DIRS);
    o.H = o.dirs + align32(M2L_DIRS);
    o.n_up = o.H;
    o.m2m = o.H + align32(hs_m2l * o.n_h + 16 * S);
    o.l2l = o.m2m + align32(8 * S * S);
    o.total = o.l2l + align32(8 * S * S);
    return o;
}

/* The operators that depend only on the order (ops_layout), started on stream 2, which does
 * not wait for the default stream: the tables from the host (fmm3d_ops.c's, a few kB), then on
 * the GPU the translation harmonics (k_harmonics) and the M2M and L2L matrices (k_build), in
 * d_ops (the block's, or allocated here). Runs alongside the tree and list builds; eval's far
 * field waits for it (EV_OPS), set_points does not. */
fmk_status fmk_fmm3d_cuda_start_ops(fmk_plan *plan, fmk_fmm3d_cuda *s, long long total)
{
    const int p = s->order;
    const int64_t S = s->S;
    const ops_layout o = fmk_fmm3d_cuda_ops_layout(p, s->use_rot);
    fmk_fmm3d_ops_ctx ops;
    fmk_status st = fmk_fmm3d_ops_create(&ops, p);
    if (st != FMK_OK)
        return fmk_error_set(plan, st, "cannot create the FMM operators of order %d", p);
    double *up = hmalloc<double>((size_t)o.n_up);
    if (!up) {
        fmk_fmm3d_ops_destroy(&ops);
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the FMM's operators");
    }
    memset(up, 0, 8 * (size_t)o.n_up);
    const int64_t nh = o.nh;
    memcpy(up, ops.rec_a, 8 * (size_t)nh);
    memcpy(up + nh, ops.rec_b, 8 * (size_t)nh);
    memcpy(up + 2 * nh, ops.rec_diag, 8 * (size_t)(2 * p + 2));
    memcpy(up + 2 * nh + 2 * p + 2, ops.sqrt_int, 8 * (size_t)(2 * p + 5));
    fmk_fmm3d_ops_destroy(&ops);
    const int nb = o.nb;
    double *sqb = up + o.sqb; /* Pascal's triangle, then square roots */
    for (int a = 0; a < nb; a++)
        for (int b = 0; b < nb; b++)
            sqb[a * nb + b] = b == 0 ? 1
                                     : (b > a ? 0
                                              : sqb[(a - 1) * nb + b - 1] +
                                                    (b <= a - 1 ? sqb[(a - 1) * nb + b] : 0));
    for (int i = 0; i < nb * nb; i++)
        sqb[i] = sqrt(sqb[i]);
    fill_dirs(s, o, up);
    if (!s->d_ops)
        st = fmk_fmm3d_cuda_put(plan, s, (void **)&s->d_ops, NULL, 8 * (size_t)o.total,
                                "the FMM's operators", total);
    cudaStream_t os = s->stream[2];
    cudaError_t err = cudaSuccess;
    if (st == FMK_OK) /* from pageable memory: copied out before the call returns */
        err = cudaMemcpyAsync(s->d_ops, up, 8 * (size_t)o.n_up, cudaMemcpyHostToDevice, os);
    free(up);
    if (st != FMK_OK)
        return st;
    double *d = s->d_ops;
    s->tb.rec_a = d, s->tb.rec_b = d + nh, s->tb.rec_diag = d + 2 * nh,
    s->tb.sqrt_int = d + 2 * nh + 2 * p + 2;
    s->d_m2m = d + o.m2m, s->d_l2l = d + o.l2l;
    const int nc = (int)(S / 2);
    const int64_t hs_m2l = (int64_t)(2 * p + 1) * (2 * p + 2), hs_p = S;
    if (err == cudaSuccess) {
        k_harmonics<<<(o.n_h + 16 + 127) / 128, 128, 0, os>>>(p, o.n_h, s->tb, d + o.vec, d + o.H);
        k_build<<<(8 * nc * nc + 255) / 256, 256, 0, os>>>(
            1, p, 8, p, d + o.H + hs_m2l * o.n_h, d + o.sqb, nb, S * S, S, NULL, NULL, s->d_m2m);
        k_build<<<(8 * nc * nc + 255) / 256, 256, 0, os>>>(
            2, p, 8, p, d + o.H + hs_m2l * o.n_h + 8 * hs_p, d + o.sqb, nb, S * S, S, NULL, NULL,
            s->d_l2l);
        cudaEventRecord(s->ev[EV_OPS], os);
        s->ops_pending = 1;
        err = cudaGetLastError();
    }
    return err == cudaSuccess ? FMK_OK : fmk_cuda_fail(plan, err, "the operator kernels");
}

/* The dense M2L matrices of all M2L_DIRS directions, packed, each to its degree q (rank r:
 * (q + 1)^2 columns and rows, then zeros to m2l_roff[r + 1] - m2l_roff[r] of each), stacked in
 * the M2L order (column-major, leading dimension m2l_roff[M2L_DIRS], Sx columns), on stream 2
 * after start_ops. */
fmk_status fmk_fmm3d_cuda_start_m2l(fmk_plan *plan, fmk_fmm3d_cuda *s, long long total)
{
    const int p = s->order;
    const int64_t Sx = s->Sx, ld = s->m2l_roff[M2L_DIRS];
    const ops_layout o = fmk_fmm3d_cuda_ops_layout(p, s->use_rot);
    { /* the block's place, or one apart when the degrees grew (the size rule) */
        const fmk_status st = fmk_fmm3d_cuda_grow(plan, s, (void **)&s->d_m2l, &s->cap_m2l,
                                                  8 * (size_t)(ld * Sx), "the M2L matrices", total);
        if (st != FMK_OK)
            return st;
    }
    const int32_t *dirs = (const int32_t *)(s->d_ops + o.dirs);
    cudaEventRecord(s->ev[EV_OPS0], s->stream[2]);
    cudaMemsetAsync(s->d_m2l, 0, 8 * (size_t)(ld * Sx), s->stream[2]);
    k_build<<<2048, 256, 0, s->stream[2]>>>(0, p, M2L_DIRS, 2 * p, s->d_ops + o.H, s->d_ops + o.sqb,
                                            o.nb, 0, ld, dirs, dirs + M2L_DIRS, s->d_m2l);
    cudaEventRecord(s->ev[EV_OPS1], s->stream[2]);
    cudaEventRecord(s->ev[EV_OPS], s->stream[2]);
    s->m2l_timed = 1, s->m2l_built = 1, s->ops_pending = 1;
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? FMK_OK : fmk_cuda_fail(plan, err, "the M2L matrix kernel");
}

/* The far field's stream (st) waits for the operators of stream 2 at eval's first pass
 * that reads them (their kernels' faults are eval's then). */
void fmk_fmm3d_cuda_ops_wait(fmk_fmm3d_cuda *s, cudaStream_t st)
{
    if (!s->ops_pending)
        return;
    cudaStreamWaitEvent(st, s->ev[EV_OPS], 0);
    s->ops_pending = 0;
}

/* The M2L matrices' kernel time (setup_time[5]), once eval has waited for it. */
void fmk_fmm3d_cuda_ops_time(fmk_fmm3d_cuda *s)
{
    float ms = 0;
    if (s->m2l_timed && cudaEventElapsedTime(&ms, s->ev[EV_OPS0], s->ev[EV_OPS1]) != cudaSuccess)
        (void)cudaGetLastError(), ms = 0;
    if (s->m2l_timed)
        s->setup_time[5] = 1e-3 * ms;
    s->m2l_timed = 0;
}

/* The size rule once the tree is built (nn: boxes from level 2 down): when it picks the other
 * degrees (whole or truncated) than the state's, they are selected again, the M2L's part of
 * the operators uploaded again and its harmonics made again on stream 2 (start_ops' tables
 * stand), and the M2L matrices marked for a rebuild after the lists (start_m2l). The previous
 * eval has finished (eval waits for its end), so nothing reads them meanwhile. */
fmk_status fmk_fmm3d_cuda_m2l_reselect(fmk_plan *plan, fmk_fmm3d_cuda *s, int64_t nn)
{
    const int whole = fmk_fmm3d_cuda_m2l_whole(s, nn);
    if (s->use_rot || whole == s->m2l_whole)
        return FMK_OK;
    fmk_fmm3d_cuda_m2l_select(s, whole);
    s->m2l_built = 0;
    if (!s->tb.rec_a) /* the operators not started: start_ops uploads these */
        return FMK_OK;
    const ops_layout o = fmk_fmm3d_cuda_ops_layout(s->order, s->use_rot);
    double *up = hmalloc<double>((size_t)o.n_up);
    if (!up)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the FMM's operators");
    memset(up, 0, 8 * (size_t)o.n_up);
    fill_dirs(s, o, up);
    cudaStream_t os = s->stream[2];
    cudaError_t err =
        cudaMemcpyAsync(s->d_ops + o.vec, up + o.vec, 8 * (size_t)(o.n_up - o.vec),
                        cudaMemcpyHostToDevice, os); /* pageable: copied before it returns */
    free(up);
    if (err == cudaSuccess) {
        k_harmonics<<<(o.n_h + 16 + 127) / 128, 128, 0, os>>>(s->order, o.n_h, s->tb,
                                                              s->d_ops + o.vec, s->d_ops + o.H);
        cudaEventRecord(s->ev[EV_OPS], os);
        s->ops_pending = 1;
        err = cudaGetLastError();
    }
    return err == cudaSuccess ? FMK_OK : fmk_cuda_fail(plan, err, "the M2L's operators");
}
