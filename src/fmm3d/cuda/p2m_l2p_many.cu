/* p2m_l2p_many.cu -- P2M, P2L, L2P and M2P of the GPU 3D FMM for several charge vectors in one
 * pass (eval_many; fmm3d_cuda.h), each source's and target's harmonics made once for all the
 * vectors. Vector v's charges are at d_qk + v ns (key order), its expansions at d_M, d_L + v
 * n_nodes S, its far-field results at d_res + v 4 nt.
 *
 * P2M and P2L (k_p2e_many): a block per box; per chunk of its sources (or of its X list's
 * sources, Kelvin-inverted as p2m_l2p.cu's k_p2e does), the block makes the chunk's harmonics
 * into shared memory, a thread per source and column m (fmm3d_ops.c's recursion), then each
 * thread adds, for its coefficients, every vector's q conj(R) over the chunk into the block's
 * sums (shared memory), written once per block. L2P (k_l2p_m2p_many): p2m_l2p.cu's records with
 * every vector's coefficients in one record, a thread per target making each R_j^m once and
 * applying it to every vector; M2P of the W entries: the irregular harmonics once per target and
 * entry, applied to every vector's multipole. Vectors beyond what shared memory holds (high
 * orders) go in further launches. */
#include "fmm3d/cuda/fmm3d_cuda.h"
#include "fmm3d/cuda/harmonics.cuh"

namespace {

/* Shared memory the kernels here take at most, where the order allows (opted in beyond 48 KB);
 * L2P's records of one vector at the highest orders take more (151 KB at p = 60). */
const int SMEM_MANY = 96 * 1024;

/* P2M and P2L's shape for S doubles an expansion and nv vectors: chunks of ch sources (their
 * harmonics, ch S doubles, and charges, ch FMM_NV_MAX), nvk vectors a launch (their sums, nvk S
 * doubles). */
struct p2e_shape {
    int ch, nvk;
};

p2e_shape p2e_shape_for(int S, int nv)
{
    int64_t ch = 32768 / (8 * (int64_t)S);
    ch = ch < 1 ? 1 : ch > 32 ? 32 : ch;
    int64_t nvk = (SMEM_MANY - 8 * ch * (S + FMM_NV_MAX)) / (8 * (int64_t)S);
    nvk = nvk < 1 ? 1 : nvk > nv ? nv : nvk;
    return {(int)ch, (int)nvk};
}

size_t p2e_smem(int S, int ch, int nvk)
{
    return 8 * ((size_t)ch * (S + FMM_NV_MAX) + (size_t)nvk * S);
}

/* P2M (list == NULL: the node's own sources, regular harmonics) and P2L (the sources of the
 * node's X list, irregular harmonics I_n^m(x) = R_n^m(x / r^2) / r) of nvk vectors (charges qk,
 * ns each) into E of node nodes[blockIdx.x] (vector v's at E + v vstride); blockIdx.y splits the
 * sources of P2M (atomic adds into E then). */
__global__ void __launch_bounds__(BLOCK)
    k_p2e_many(int p, int S, int ch, int nvk, int64_t vstride, tabs tb,
               const int32_t *__restrict__ nodes, const int32_t *__restrict__ list_begin,
               const int32_t *__restrict__ list, const real4d *__restrict__ cube,
               const int32_t *__restrict__ sb, const int32_t *__restrict__ sn,
               const real4d *__restrict__ src, const double *__restrict__ qk, int64_t ns, double *E)
{
    extern __shared__ double smem[];
    double *H = smem;                  /* ch S: the chunk's harmonics */
    double *Q = H + (int64_t)ch * S;   /* ch FMM_NV_MAX: their charges */
    double *acc = Q + ch * FMM_NV_MAX; /* nvk S: the block's sums */
    const int b = nodes[blockIdx.x];
    for (int i = threadIdx.x; i < nvk * S; i += blockDim.x)
        acc[i] = 0;
    const real4d c = cube[b];
    const double inv_s = 1 / c.w;
    const int e0 = list ? list_begin[b] : 0, e1 = list ? list_begin[b + 1] : 1;
    for (int e = e0; e < e1; e++) {
        const int a = list ? list[e] : b;
        int j0 = sb[a], j1 = j0 + sn[a];
        if (!list) { /* the block's share of the leaf */
            const int per = (sn[a] + gridDim.y - 1) / gridDim.y;
            j0 += blockIdx.y * per, j1 = min(j1, j0 + per);
        }
        for (int base = j0; base < j1; base += ch) {
            const int cnt = min(ch, j1 - base);
            __syncthreads(); /* the previous chunk's sums have read H and Q */
            for (int i = threadIdx.x; i < cnt * nvk; i += blockDim.x) {
                const int jj = i / nvk, v = i - jj * nvk;
                Q[jj * FMM_NV_MAX + v] = qk[v * ns + base + jj];
            }
            /* the harmonics, a thread per source and column m: weight w R_m^m by the diagonal
             * chain, then the column by the recursion (fmm3d_ops.c's regular) */
            for (int i = threadIdx.x; i < cnt * (p + 1); i += blockDim.x) {
                const int jj = i / (p + 1), m = i - jj * (p + 1);
                const real4d s = src[base + jj];
                double x = (s.x - c.x) * inv_s, y = (s.y - c.y) * inv_s, z = (s.z - c.z) * inv_s;
                double w = 1;
                if (list) { /* Kelvin inversion; locals carry 1/s (fmm3d_ops.h: P2L) */
                    const double inv_r2 = 1 / (x * x + y * y + z * z);
                    w = sqrt(inv_r2) * inv_s;
                    x *= inv_r2, y *= inv_r2, z *= inv_r2;
                }
                const double r2 = x * x + y * y + z * z;
                double dr = w, di = 0;
                for (int k = 1; k <= m; k++) {
                    const double f = -tb.rec_diag[k];
                    const double nr = f * (x * dr - y * di), ni = f * (x * di + y * dr);
                    dr = nr, di = ni;
                }
                double *h = H + (int64_t)jj * S;
                double pr = 0, pi = 0, cr = dr, ci = di; /* R_{n-1}^m, R_n^m */
                for (int n = m; n <= p; n++) {
                    if (n > m) {
                        const double fa = tb.rec_a[IDX(n, m)] * z;
                        const double fb = n > m + 1 ? tb.rec_b[IDX(n, m)] * r2 : 0.0;
                        const double sr = fa * cr - fb * pr, si = fa * ci - fb * pi;
                        pr = cr, pi = ci, cr = sr, ci = si;
                    }
                    h[2 * IDX(n, m)] = cr, h[2 * IDX(n, m) + 1] = ci;
                }
            }
            __syncthreads();
            /* += q conj(R): a thread per coefficient double, every vector */
            for (int k = threadIdx.x; k < S; k += blockDim.x) {
                const double sg = (k & 1) ? -1.0 : 1.0;
                double t[FMM_NV_MAX];
#pragma unroll
                for (int v = 0; v < FMM_NV_MAX; v++)
                    t[v] = v < nvk ? acc[v * S + k] : 0.0;
                for (int jj = 0; jj < cnt; jj++) {
                    const double h = sg * H[(int64_t)jj * S + k];
#pragma unroll
                    for (int v = 0; v < FMM_NV_MAX; v++)
                        if (v < nvk)
                            t[v] = fma(Q[jj * FMM_NV_MAX + v], h, t[v]);
                }
#pragma unroll
                for (int v = 0; v < FMM_NV_MAX; v++)
                    if (v < nvk)
                        acc[v * S + k] = t[v];
            }
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nvk * S; i += blockDim.x) {
        const int v = i / S, k = i - v * S;
        double *o = E + v * vstride + (int64_t)b * S + k;
        if (gridDim.y > 1)
            atomicAdd(o, acc[i]);
        else
            *o += acc[i];
    }
}

/* L2P's records (p2m_l2p.cu's l2p_records) of nvk vectors: record i, for R_j^m in the order l2p
 * makes them, holds the recursion's factors (a, b) once, then per vector v the coefficients R_j^m
 * meets, weights folded in: Lw = w_m L_j^m, Z = wz L_{j+1}^m, P and Q = w1 L_{j+1}^{m+1} -+ w2
 * L_{j+1}^{m-1} (re, im each): 2 + 8 nvk doubles. L: vector 0's local expansion of the leaf,
 * vector v's vstride doubles on. */
__device__ void l2p_records_many(const tabs &t, int p, int nvk, int64_t vstride,
                                 const double *__restrict__ L, double *rec)
{
    const double *sq = t.sqrt_int;
    const int nr = (p + 1) * (p + 2) / 2, rs = 2 + 8 * nvk;
    for (int idx = threadIdx.x; idx < nr * nvk; idx += blockDim.x) {
        const int v = idx / nr, i = idx - v * nr;
        int m = 0, j = i; /* record i: column m, degree j */
        while (j > p - m)
            j -= p + 1 - m, m++;
        j += m;
        double *o = rec + (int64_t)rs * i;
        if (v == 0) {
            o[0] = j == m ? (m ? -t.rec_diag[m] : 1.0) : t.rec_a[IDX(j, m)];
            o[1] = j > m + 1 ? t.rec_b[IDX(j, m)] : 0.0;
        }
        o += 2 + 8 * v;
        const double *Lv = L + v * vstride;
        const double w = m ? 2.0 : 1.0;
        o[0] = w * Lv[2 * IDX(j, m)], o[1] = w * Lv[2 * IDX(j, m) + 1];
        double zr = 0, zi = 0, pr = 0, pi = 0, qr = 0, qi = 0;
        if (j < p) {
            const int n = j + 1;
            const double *Ln = Lv + 2 * IDX(n, 0);
            const double wz = m ? 2 * sq[n + m] * sq[n - m] : (double)n;
            zr = wz * Ln[2 * m], zi = wz * Ln[2 * m + 1];
            const double w1 = sq[n + m + 1] * sq[n + m];
            const double ar = w1 * Ln[2 * (m + 1)], ai = w1 * Ln[2 * (m + 1) + 1];
            double br = 0, bi = 0;
            if (m > 0) {
                const double w2 = sq[n - m + 1] * sq[n - m];
                br = w2 * Ln[2 * (m - 1)], bi = w2 * Ln[2 * (m - 1) + 1];
            }
            pr = ar - br, pi = ai - bi, qr = ar + br, qi = ai + bi;
        }
        o[2] = zr, o[3] = zi, o[4] = pr, o[5] = pi, o[6] = qr, o[7] = qi;
    }
}

/* The per-vector sums of L2P and M2P at one target. */
struct sums_many {
    double phi[FMM_NV_MAX], gr[FMM_NV_MAX], gi[FMM_NV_MAX], gz[FMM_NV_MAX];
};

/* p2m_l2p.cu's l2p_rec for nvk vectors at one point (unit box): each R_j^m made once, read
 * against every vector's record entries. */
__device__ __forceinline__ void l2p_rec_many(int p, int nvk, double x, double y, double z,
                                             const double *__restrict__ rec, sums_many &o)
{
    const int rs2 = 1 + 4 * nvk; /* a record in double2 */
    const double2 *R = (const double2 *)rec;
    const double r2 = x * x + y * y + z * z;
#pragma unroll
    for (int v = 0; v < FMM_NV_MAX; v++)
        o.phi[v] = o.gr[v] = o.gi[v] = o.gz[v] = 0;
    double dr = 1, di = 0; /* R_m^m */
    int i = 0;
    for (int m = 0; m <= p; m++) {
        double pr = 0, pi = 0, cr, ci; /* R_{j-1}^m, R_j^m */
        for (int j = m; j <= p; j++, i++) {
            const double2 *Ri = R + (int64_t)rs2 * i;
            const double2 ab = Ri[0];
            if (j == m) {
                if (m > 0) {
                    const double nr = ab.x * (x * dr - y * di), ni = ab.x * (x * di + y * dr);
                    dr = nr, di = ni;
                }
                cr = dr, ci = di;
            } else {
                const double a = ab.x * z, b = ab.y * r2;
                const double sr = a * cr - b * pr, si = a * ci - b * pi;
                pr = cr, pi = ci, cr = sr, ci = si;
            }
#pragma unroll
            for (int v = 0; v < FMM_NV_MAX; v++)
                if (v < nvk) {
                    const double2 l = Ri[1 + 4 * v], zz = Ri[2 + 4 * v], pp = Ri[3 + 4 * v],
                                  qq = Ri[4 + 4 * v];
                    o.phi[v] += l.x * cr - l.y * ci;
                    o.gz[v] += zz.x * cr - zz.y * ci;
                    o.gr[v] += pp.x * cr - pp.y * ci;
                    o.gi[v] += qq.x * ci + qq.y * cr;
                }
        }
    }
}

/* L2P (leaves below level 2) and M2P (W list) of nvk vectors at the targets of leaf
 * leaves[blockIdx.x], writing their far-field results (vector v's at res + v 4 nt): p2m_l2p.cu's
 * k_l2p_m2p with the records of l2p_records_many in shared memory. */
template <int NH>
__global__ void __launch_bounds__(64)
    k_l2p_m2p_many(int p, int S, int nt, int nvk, int64_t vstride, tabs tb,
                   const int32_t *__restrict__ leaves, const int8_t *__restrict__ level,
                   const real4d *__restrict__ cube, const int32_t *__restrict__ tbeg,
                   const int32_t *__restrict__ tn, const int32_t *__restrict__ w_begin,
                   const int32_t *__restrict__ w, const real4d *__restrict__ trg,
                   const double *__restrict__ Mx, const double *__restrict__ Lx, double *res)
{
    const int b = leaves[blockIdx.x];
    const double *sq = tb.sqrt_int;
    double H[2 * NH];
    extern __shared__ double2 rec2[];
    double *rec = (double *)rec2;
    if (level[b] >= 2) {
        l2p_records_many(tb, p, nvk, vstride, Lx + (int64_t)b * S, rec);
        __syncthreads();
    }
    for (int i = tbeg[b] + threadIdx.x; i < tbeg[b] + tn[b]; i += blockDim.x) {
        const real4d y = trg[i];
        double pot[FMM_NV_MAX], gx[FMM_NV_MAX], gy[FMM_NV_MAX], gz[FMM_NV_MAX];
#pragma unroll
        for (int v = 0; v < FMM_NV_MAX; v++)
            pot[v] = gx[v] = gy[v] = gz[v] = 0;
        if (level[b] >= 2) {
            const real4d c = cube[b];
            const double inv_s = 1 / c.w;
            sums_many o;
            l2p_rec_many(p, nvk, (y.x - c.x) * inv_s, (y.y - c.y) * inv_s, (y.z - c.z) * inv_s, rec,
                         o);
#pragma unroll
            for (int v = 0; v < FMM_NV_MAX; v++)
                pot[v] += o.phi[v], gx[v] += -o.gr[v] * inv_s, gy[v] += o.gi[v] * inv_s,
                    gz[v] += o.gz[v] * inv_s;
        }
        for (int e = w_begin[b]; e < w_begin[b + 1]; e++) {
            const int a = w[e];
            const real4d c = cube[a];
            const double inv_s = 1 / c.w;
            irregular(tb, p + 1, (y.x - c.x) * inv_s, (y.y - c.y) * inv_s, (y.z - c.z) * inv_s, H);
            const double g2 = inv_s * inv_s;
            for (int v = 0; v < nvk; v++) { /* p2m_l2p.cu's M2P, per vector */
                const double *M = Mx + v * vstride + (int64_t)a * S;
                double phi, gr, gi, gzz;
                m2p_sums(p, sq, M, H, &phi, &gr, &gi, &gzz);
#pragma unroll
                for (int u = 0; u < FMM_NV_MAX; u++) /* into vector v's sums (registers) */
                    if (u == v)
                        pot[u] += phi * inv_s, gx[u] += -gr * g2, gy[u] += gi * g2,
                            gz[u] += gzz * g2;
            }
        }
#pragma unroll
        for (int v = 0; v < FMM_NV_MAX; v++)
            if (v < nvk) {
                double *r = res + v * 4 * (int64_t)nt;
                r[i] = pot[v];
                r[nt + 3 * (int64_t)i] = gx[v], r[nt + 3 * (int64_t)i + 1] = gy[v];
                r[nt + 3 * (int64_t)i + 2] = gz[v];
            }
    }
}

/* P2M or P2L of nv vectors: launches of as many vectors as shared memory holds. */
cudaError_t p2e_many(fmk_fmm3d_cuda *s, int nv, unsigned n_nodes, unsigned split,
                     const int32_t *nodes, const int32_t *list_begin, const int32_t *list,
                     double *E)
{
    if (n_nodes == 0)
        return cudaSuccess;
    const int S = s->S;
    const int64_t vstride = s->n_nodes * (int64_t)S;
    const p2e_shape sh = p2e_shape_for(S, nv);
    cudaError_t err = cudaFuncSetAttribute(k_p2e_many, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)p2e_smem(S, sh.ch, sh.nvk));
    for (int v0 = 0; v0 < nv && err == cudaSuccess; v0 += sh.nvk) {
        const int nvk = nv - v0 < sh.nvk ? nv - v0 : sh.nvk;
        k_p2e_many<<<dim3(n_nodes, split), BLOCK, p2e_smem(S, sh.ch, nvk), s->stream[0]>>>(
            s->order, S, sh.ch, nvk, vstride, s->tb, nodes, list_begin, list, s->g.d_cube,
            s->g.d_sb, s->g.d_sn, s->g.d_src, s->d_qk + v0 * s->ns, s->ns, E + v0 * vstride);
        err = cudaGetLastError();
    }
    return err;
}

/* L2P and M2P of nv vectors with M2P's harmonics to NH entries: launches of as many vectors as
 * SMEM_MANY holds of records (at least one). */
template <int NH> cudaError_t launch_l2p_many(fmk_fmm3d_cuda *s, int nt, int nv)
{
    if (s->g.n_leaves_trg == 0)
        return cudaSuccess;
    const int p = s->order, S = s->S;
    const int64_t vstride = s->n_nodes * (int64_t)S, nr = (int64_t)(p + 1) * (p + 2) / 2;
    int64_t per = (SMEM_MANY / (8 * nr) - 2) / 8;
    per = per < 1 ? 1 : per > nv ? nv : per;
    cudaError_t err =
        cudaFuncSetAttribute(k_l2p_m2p_many<NH>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)(8 * nr * (2 + 8 * per)));
    for (int v0 = 0; v0 < nv && err == cudaSuccess; v0 += (int)per) {
        const int nvk = (int)(nv - v0 < per ? nv - v0 : per);
        k_l2p_m2p_many<NH>
            <<<(unsigned)s->g.n_leaves_trg, 64, 8 * nr *(2 + 8 * nvk), s->stream[0]>>>(
                p, S, nt, nvk, vstride, s->tb, s->g.d_leaves_trg, s->g.d_level, s->g.d_cube,
                s->g.d_tb, s->g.d_tn, s->g.d_w_begin, s->g.d_w, s->g.d_trg, s->d_M + v0 * vstride,
                s->d_L + v0 * vstride, s->d_res + (int64_t)v0 * 4 * nt);
        err = cudaGetLastError();
    }
    return err;
}

} // namespace

cudaError_t fmk_cuda_fmm3d_p2m_many(fmk_fmm3d_cuda *s, int nv)
{
    /* vector by vector by column groups (the knob many_points 0, or -1 and at most 4 vectors:
     * faster there, docs/fmm3d_gpu.md section 7), where the order has them */
    const int mode = s->tune->many_points;
    const int64_t vstride = s->n_nodes * (int64_t)s->S;
    if (mode == 0 || (mode < 0 && nv <= 4)) {
        bool cols = true;
        for (int v = 0; v < nv && cols; v++)
            cols = fmk_fmm3d_cuda_p2m_cols(s, s->d_M + v * vstride, s->d_qk + v * s->ns);
        if (cols)
            return cudaGetLastError();
    }
    /* a block per leaf, more only where leaves are large (p2m_l2p.cu's P2M by columns) */
    const int64_t y = (s->leaf_size + 1023) / 1024;
    const unsigned split = (unsigned)(y < 1 ? 1 : y > 8 ? 8 : y);
    return p2e_many(s, nv, (unsigned)s->g.n_leaves_src, split, s->g.d_leaves_src, NULL, NULL,
                    s->d_M);
}

cudaError_t fmk_cuda_fmm3d_p2l_many(fmk_fmm3d_cuda *s, int nv)
{
    return p2e_many(s, nv, (unsigned)s->g.n_xnodes, 1, s->g.d_xnodes, s->g.d_x_begin, s->g.d_x,
                    s->d_L);
}

cudaError_t fmk_cuda_fmm3d_l2p_many(fmk_fmm3d_cuda *s, int nt, int nv)
{
    /* vector by vector (the knob many_points 0, or -1 on a complete octree: faster there; the
     * harmonics once where W lists remain, as on the Plummer sphere: docs/fmm3d_gpu.md,
     * section 7) */
    const int mode = s->tune->many_points;
    if (mode == 0 || (mode < 0 && s->uniform)) {
        const int64_t vstride = s->n_nodes * (int64_t)s->S;
        cudaError_t err = cudaSuccess;
        for (int v = 0; v < nv && err == cudaSuccess; v++)
            err = fmk_cuda_fmm3d_l2p_into(s, nt, s->d_M + v * vstride, s->d_L + v * vstride,
                                          s->d_res + (int64_t)v * 4 * nt);
        return err;
    }
    /* M2P's harmonics to degree p + 1 per thread (p2m_l2p.cu) */
    if (s->order <= 12)
        return launch_l2p_many<105>(s, nt, nv);
    if (s->order <= 24)
        return launch_l2p_many<351>(s, nt, nv);
    if (s->order <= 32)
        return launch_l2p_many<595>(s, nt, nv);
    if (s->order <= 44)
        return launch_l2p_many<1081>(s, nt, nv);
    return launch_l2p_many<1953>(s, nt, nv);
}
