/* p2m_l2p.cu -- the GPU 3D FMM's passes between points and expansions (fmm3d_cuda.h): P2M at
 * the leaves (a block per leaf, each lane summing two columns of the harmonics over its share
 * of the sources in registers, at the eps table's orders; else a thread per source, warp sums of
 * the harmonics as they are made), P2L (X list), and L2P (from per-leaf records of the local
 * expansion in shared memory) with M2P (W list), a thread per target. */
#include "fmm3d/cuda/fmm3d_cuda.h"
#include "fmm3d/cuda/harmonics.cuh"

namespace {

/* P2M (list == NULL: the node's own sources, regular harmonics) and P2L (the sources of the
 * node's X list, irregular harmonics I_n^m(x) = R_n^m(x / r^2) / r) into E of node
 * nodes[blockIdx.x]; blockIdx.y splits the sources (gridDim.y blocks per node, atomic adds
 * into E then). Each source's harmonics are made column by column as in regular() and summed
 * over the warp where they are made (q conj(R) into shared memory): no per-thread table (which
 * lived in local memory, written and read back per source). */
__global__ void __launch_bounds__(BLOCK)
    k_p2e(int p, int S, tabs tb, const int32_t *__restrict__ nodes,
          const int32_t *__restrict__ list_begin, const int32_t *__restrict__ list,
          const real4d *__restrict__ cube, const int32_t *__restrict__ sb,
          const int32_t *__restrict__ sn, const real4d *__restrict__ src, double *E)
{
    extern __shared__ double acc[];
    const int b = nodes[blockIdx.x];
    for (int i = threadIdx.x; i < S; i += blockDim.x)
        acc[i] = 0;
    __syncthreads();
    const real4d c = cube[b];
    const double inv_s = 1 / c.w;
    const int e0 = list ? list_begin[b] : 0, e1 = list ? list_begin[b + 1] : 1;
    const int lane = threadIdx.x & 31;
    for (int e = e0; e < e1; e++) {
        const int a = list ? list[e] : b;
        const int j0 = sb[a], j1 = j0 + sn[a];
        for (int base = j0 + blockIdx.y * blockDim.x; base < j1; base += gridDim.y * blockDim.x) {
            const int j = base + threadIdx.x;
            double x = 0, y = 0, z = 0, q = 0;
            if (j < j1) {
                const real4d s = src[j];
                x = (s.x - c.x) * inv_s, y = (s.y - c.y) * inv_s, z = (s.z - c.z) * inv_s;
                q = s.w;
                if (list) { /* Kelvin inversion; locals carry 1/s (fmm3d_ops.h: P2L) */
                    const double inv_r2 = 1 / (x * x + y * y + z * z);
                    q *= sqrt(inv_r2) * inv_s;
                    x *= inv_r2, y *= inv_r2, z *= inv_r2;
                }
            }
            const double r2 = x * x + y * y + z * z;
            double dr = q, di = 0; /* q R_m^m */
            for (int m = 0; m <= p; m++) {
                if (m > 0) {
                    const double f = -tb.rec_diag[m];
                    const double nr = f * (x * dr - y * di), ni = f * (x * di + y * dr);
                    dr = nr, di = ni;
                }
                double pr = 0, pi = 0, cr = dr, ci = di; /* q R_{n-1}^m, q R_n^m */
                for (int n = m; n <= p; n++) {
                    if (n > m) {
                        const double fa = tb.rec_a[IDX(n, m)] * z;
                        const double fb = n > m + 1 ? tb.rec_b[IDX(n, m)] * r2 : 0.0;
                        const double sr = fa * cr - fb * pr, si = fa * ci - fb * pi;
                        pr = cr, pi = ci, cr = sr, ci = si;
                    }
                    const double vr = warp_sum(cr), vi = warp_sum(-ci); /* += q conj(R) */
                    if (lane == 0) {
                        atomicAdd(&acc[2 * IDX(n, m)], vr);
                        atomicAdd(&acc[2 * IDX(n, m) + 1], vi);
                    }
                }
            }
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < S; i += blockDim.x) {
        if (gridDim.y > 1)
            atomicAdd(E + (int64_t)b * S + i, acc[i]);
        else
            E[(int64_t)b * S + i] += acc[i];
    }
}

/* P2M at the orders of the eps table (and 12, 16: p2m_cols below): a block per leaf and
 * column groups instead of a thread per source. The (p + 1)(p + 2) / 2 coefficients of M are
 * split by columns m into G = p / 2 + 1 groups of at most p + 2 (columns m and p - m: equal
 * work), G lanes of a warp per source, one group each, L = 32 / G sources a warp at a time
 * (4 warps: 4 L slices of the leaf's sources). A lane makes its two columns of q R_n^m by
 * fmm3d_ops.c's recursion (the diagonal q R_m^m by the chain R_m^m = -rec_diag[m] (x + i y)
 * R_{m-1}^{m-1}, the column by R_n^m = rec_a z R_{n-1}^m - rec_b r^2 R_{n-2}^m) and adds them to
 * its own sums in registers, U sources at a time (the engine
 * launches U = 1): no per-coefficient reduction over the warp
 * (the thread per source summed each of the 120 coefficients at p = 14 over the warp, 10
 * shuffles and a shared atomic each). The slices' sums are added once per block (shuffles, then
 * shared memory). gridDim.y > 1 splits a leaf's sources over blocks (atomic adds into E then). */
template <int P> struct cols {
    static const int G = P / 2 + 1; /* column groups */
    static const int NE = P + 2;    /* entries of a group, at most */
    static const int L = 32 / G;    /* sources of a warp at a time */
    static const int WARPS = BLOCK / 32;
    static const int CH = 256; /* sources staged at a time */
};

/* the group's entry k: column m and degree n (false: none) */
__device__ __forceinline__ bool col_entry(int P, int g, int k, int *n, int *m)
{
    const int n1 = P + 1 - g; /* column g: degrees g .. P */
    if (k < n1) {
        *m = g, *n = g + k;
        return true;
    }
    if (P - g == g || k - n1 > g) /* column P - g: degrees P - g .. P */
        return false;
    *m = P - g, *n = P - g + (k - n1);
    return true;
}

template <int P, int U, bool QK>
__global__ void __launch_bounds__(BLOCK)
    k_p2m_cols(int S, tabs tb, const int32_t *__restrict__ nodes, const real4d *__restrict__ cube,
               const int32_t *__restrict__ sb, const int32_t *__restrict__ sn,
               const real4d *__restrict__ src, const double *__restrict__ qk, double *E)
{
    typedef cols<P> C;
    const int G = C::G, NE = C::NE, L = C::L;
    __shared__ double2 coef[NE * G]; /* (rec_a, rec_b) of entry k of group g at k G + g */
    __shared__ double diag[P + 1];   /* -rec_diag[m] */
    __shared__ real4d pts[C::CH];    /* the staged sources, in box units */
    __shared__ double part[C::WARPS][G][NE][2];
    const int b = nodes[blockIdx.x];
    for (int i = threadIdx.x; i < NE * G; i += blockDim.x) {
        const int g = i % G, k = i / G;
        int n, m;
        double a = 0, bb = 0;
        if (col_entry(P, g, k, &n, &m) && n > m) {
            a = tb.rec_a[IDX(n, m)];
            bb = n > m + 1 ? tb.rec_b[IDX(n, m)] : 0.0;
        }
        coef[i] = make_double2(a, bb);
    }
    for (int i = threadIdx.x; i <= P; i += blockDim.x)
        diag[i] = i ? -tb.rec_diag[i] : 1.0;
    const real4d c = cube[b];
    const double inv_s = 1 / c.w;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane % G, r = lane / G;
    const int m1 = g, m2 = P - g, n1 = P + 1 - g;
    const int slice = warp * L + r, NS = C::WARPS * L;
    const bool active = r < L;
    double ar[NE], ai[NE];
#pragma unroll
    for (int k = 0; k < NE; k++)
        ar[k] = 0, ai[k] = 0;
    const int per = (sn[b] + gridDim.y - 1) / gridDim.y;
    const int j0 = sb[b] + blockIdx.y * per, j1 = min(sb[b] + sn[b], j0 + per);
    for (int base = j0; base < j1; base += C::CH) {
        const int cnt = min(C::CH, j1 - base);
        __syncthreads();
        for (int i = threadIdx.x; i < cnt; i += blockDim.x) {
            const real4d s = src[base + i];
            pts[i] = real4d{(s.x - c.x) * inv_s, (s.y - c.y) * inv_s, (s.z - c.z) * inv_s,
                            QK ? qk[base + i] : s.w};
        }
        __syncthreads();
        for (int i = active ? slice : cnt; i < cnt; i += U * NS) {
            /* U sources: i, i + NS, ... (past the chunk's end: none, q = 0) */
            double x[U], y[U], z[U], r2[U], dr[U], di[U], d1r[U], d1i[U], d2r[U], d2i[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const real4d v = i + u * NS < cnt ? pts[i + u * NS] : real4d{0, 0, 0, 0};
                x[u] = v.x, y[u] = v.y, z[u] = v.z, r2[u] = v.x * v.x + v.y * v.y + v.z * v.z;
                dr[u] = v.w, di[u] = 0, d1r[u] = v.w, d1i[u] = 0, d2r[u] = v.w, d2i[u] = 0;
            }
            /* the diagonal: q R_m^m for m = m1 and m2 */
#pragma unroll
            for (int m = 1; m <= P; m++) {
                const double f = diag[m];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const double tr = f * (x[u] * dr[u] - y[u] * di[u]),
                                 ti = f * (x[u] * di[u] + y[u] * dr[u]);
                    dr[u] = tr, di[u] = ti;
                    if (m == m1)
                        d1r[u] = tr, d1i[u] = ti;
                    if (m == m2)
                        d2r[u] = tr, d2i[u] = ti;
                }
            }
            /* the two columns: entries 0 .. n1 - 1 column m1, n1 .. column m2 */
            double pr[U], pi[U], cr[U], ci[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                pr[u] = 0, pi[u] = 0, cr[u] = d1r[u], ci[u] = d1i[u];
                ar[0] += cr[u], ai[0] += ci[u];
            }
#pragma unroll
            for (int k = 1; k < NE; k++) {
                const double2 ab = coef[k * G + g];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    if (k == n1) {
                        pr[u] = 0, pi[u] = 0, cr[u] = d2r[u], ci[u] = d2i[u];
                    } else {
                        const double a = ab.x * z[u], bb = ab.y * r2[u];
                        const double sr = a * cr[u] - bb * pr[u], si = a * ci[u] - bb * pi[u];
                        pr[u] = cr[u], pi[u] = ci[u], cr[u] = sr, ci[u] = si;
                    }
                    ar[k] += cr[u], ai[k] += ci[u];
                }
            }
        }
    }
    /* the slices' sums: over the warp's sources (lanes r, r + o at distance o G), then over the
     * warps in shared memory */
#pragma unroll
    for (int k = 0; k < NE; k++) {
        for (int o = 1; o < L; o <<= 1) {
            const double xr = __shfl_down_sync(0xffffffffu, ar[k], o * G);
            const double xi = __shfl_down_sync(0xffffffffu, ai[k], o * G);
            if ((r & (2 * o - 1)) == 0 && r + o < L)
                ar[k] += xr, ai[k] += xi;
        }
        if (r == 0)
            part[warp][g][k][0] = ar[k], part[warp][g][k][1] = ai[k];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * NE; i += blockDim.x) {
        const int gg = i / NE, k = i % NE;
        int n, m;
        if (!col_entry(P, gg, k, &n, &m))
            continue;
        double vr = 0, vi = 0;
        for (int w = 0; w < C::WARPS; w++)
            vr += part[w][gg][k][0], vi += part[w][gg][k][1];
        double *e = E + (int64_t)b * S + 2 * IDX(n, m); /* += q conj(R) */
        if (gridDim.y > 1)
            atomicAdd(e, vr), atomicAdd(e + 1, -vi);
        else
            e[0] += vr, e[1] -= vi;
    }
}

/* fmm3d_ops.c's l2p at one point (unit box): phi = sum L_n^m R_n^m and the gradient's sums
 * (gr, gi: d/dx - i d/dy parts; gz), with the regular harmonics made column by column as in
 * regular() and each R_j^m used where it is made (in phi with L_j^m, in the gradient with
 * L_{j+1}^{m-1}, L_{j+1}^m, L_{j+1}^{m+1}), so that no table of harmonics is stored: a thread's
 * table of (p + 1)(p + 2) doubles lived in local memory, written and read back per target. */
__device__ void l2p(const tabs &t, int p, double x, double y, double z,
                    const double *__restrict__ L, double *phi_out, double *gr_out, double *gi_out,
                    double *gz_out)
{
    const double *sq = t.sqrt_int;
    const double r2 = x * x + y * y + z * z;
    double phi = 0, gr = 0, gi = 0, gz = 0;
    double dr = 1, di = 0; /* R_m^m */
    for (int m = 0; m <= p; m++) {
        if (m > 0) {
            const double f = -t.rec_diag[m];
            const double nr = f * (x * dr - y * di), ni = f * (x * di + y * dr);
            dr = nr, di = ni;
        }
        double pr = 0, pi = 0, cr = dr, ci = di; /* R_{j-1}^m, R_j^m */
        for (int j = m; j <= p; j++) {
            if (j > m) {
                const double a = t.rec_a[IDX(j, m)] * z,
                             b = j > m + 1 ? t.rec_b[IDX(j, m)] * r2 : 0.0;
                const double sr = a * cr - b * pr, si = a * ci - b * pi;
                pr = cr, pi = ci, cr = sr, ci = si;
            }
            const double *Lj = L + 2 * IDX(j, m);
            phi += (m ? 2.0 : 1.0) * (Lj[0] * cr - Lj[1] * ci);
            if (j == p)
                continue;
            const int n = j + 1;
            const double *Ln = L + 2 * IDX(n, 0);
            /* z: n Re(L_n^0 R_j^0), or 2 sqrt((n + m)(n - m)) Re(L_n^m R_j^m) */
            const double wz = m ? 2 * sq[n + m] * sq[n - m] : (double)n;
            gz += wz * (Ln[2 * m] * cr - Ln[2 * m + 1] * ci);
            const double w1 = sq[n + m + 1] * sq[n + m]; /* L_n^{m+1} R_j^m */
            const double *a = Ln + 2 * (m + 1);
            gr += w1 * (a[0] * cr - a[1] * ci);
            gi += w1 * (a[0] * ci + a[1] * cr);
            if (m > 0) { /* L_n^{m-1} R_j^m */
                const double w2 = sq[n - m + 1] * sq[n - m];
                a = Ln + 2 * (m - 1);
                gr -= w2 * (a[0] * cr - a[1] * ci);
                gi += w2 * (a[0] * ci + a[1] * cr);
            }
        }
    }
    *phi_out = phi, *gr_out = gr, *gi_out = gi, *gz_out = gz;
}

/* L2P's records: for each R_j^m, in the order in which l2p_rec makes them (column by column),
 * the recursion's factors and every coefficient that R_j^m meets, weights folded in:
 * (a, b): R_j^m = a z R_{j-1}^m - b r^2 R_{j-2}^m, or at j = m the diagonal's -rec_diag[m];
 * Lw = w_m L_j^m (w_0 = 1, else 2) for phi; Z = wz L_{j+1}^m for the gradient's z part;
 * P = w1 L_{j+1}^{m+1} - w2 L_{j+1}^{m-1} and Q = w1 L_{j+1}^{m+1} + w2 L_{j+1}^{m-1} for its
 * d/dx and -d/dy parts (the weights of l2p above; zero at j = p). 5 x 16 bytes per record. */
const int L2P_REC = 10;

/* the records of local expansion L (order p) into rec, by the block's threads */
__device__ void l2p_records(const tabs &t, int p, const double *__restrict__ L, double *rec)
{
    const double *sq = t.sqrt_int;
    const int nr = (p + 1) * (p + 2) / 2;
    for (int i = threadIdx.x; i < nr; i += blockDim.x) {
        /* record i: column m, degree j (columns of p + 1 - m entries) */
        int m = 0, j = i;
        while (j > p - m)
            j -= p + 1 - m, m++;
        j += m;
        double *o = rec + L2P_REC * i;
        o[0] = j == m ? (m ? -t.rec_diag[m] : 1.0) : t.rec_a[IDX(j, m)];
        o[1] = j > m + 1 ? t.rec_b[IDX(j, m)] : 0.0;
        const double w = m ? 2.0 : 1.0;
        o[2] = w * L[2 * IDX(j, m)], o[3] = w * L[2 * IDX(j, m) + 1];
        double zr = 0, zi = 0, pr = 0, pi = 0, qr = 0, qi = 0;
        if (j < p) {
            const int n = j + 1;
            const double *Ln = L + 2 * IDX(n, 0);
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
        o[4] = zr, o[5] = zi, o[6] = pr, o[7] = pi, o[8] = qr, o[9] = qi;
    }
}

/* l2p at one point from the records: the same sums, each R_j^m read against one record (five
 * 16-byte shared loads, the same for every lane) instead of four coefficients and six table
 * entries */
__device__ void l2p_rec(int p, double x, double y, double z, const double *__restrict__ rec,
                        double *phi_out, double *gr_out, double *gi_out, double *gz_out)
{
    const double2 *R = (const double2 *)rec;
    const double r2 = x * x + y * y + z * z;
    double phi = 0, gr = 0, gi = 0, gz = 0;
    double dr = 1, di = 0; /* R_m^m */
    int i = 0;
    for (int m = 0; m <= p; m++) {
        double pr = 0, pi = 0, cr, ci; /* R_{j-1}^m, R_j^m */
        for (int j = m; j <= p; j++, i++) {
            const double2 ab = R[5 * i], l = R[5 * i + 1], zz = R[5 * i + 2], pp = R[5 * i + 3],
                          qq = R[5 * i + 4];
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
            phi += l.x * cr - l.y * ci;
            gz += zz.x * cr - zz.y * ci;
            gr += pp.x * cr - pp.y * ci;
            gi += qq.x * ci + qq.y * cr;
        }
    }
    *phi_out = phi, *gr_out = gr, *gi_out = gi, *gz_out = gz;
}

/* L2P (leaves below level 2) and M2P (W list) at the targets of leaf leaves[blockIdx.x]; writes
 * res (pot | grad, nt + 3 nt): the far field's results (P2P writes its own, and k_results adds
 * the two). fmm3d_ops.c's l2p and m2p, per target; recs: L2P from the leaf's records
 * (l2p_records, in shared memory), else from L in shared memory (l2p). */
template <int NH>
__global__ void __launch_bounds__(64)
    k_l2p_m2p(int p, int S, int nt, int recs, tabs tb, const int32_t *__restrict__ leaves,
              const int8_t *__restrict__ level, const real4d *__restrict__ cube,
              const int32_t *__restrict__ tbeg, const int32_t *__restrict__ tn,
              const int32_t *__restrict__ w_begin, const int32_t *__restrict__ w,
              const real4d *__restrict__ trg, const double *__restrict__ Mx,
              const double *__restrict__ Lx, double *res)
{
    const int b = leaves[blockIdx.x];
    const double *sq = tb.sqrt_int;
    double H[2 * NH];
    /* the leaf's local expansion in shared memory: each target reads every coefficient up to
     * four times */
    extern __shared__ double Ls[];
    if (level[b] >= 2) {
        if (recs)
            l2p_records(tb, p, Lx + (int64_t)b * S, Ls);
        else
            for (int i = threadIdx.x; i < S; i += blockDim.x)
                Ls[i] = Lx[(int64_t)b * S + i];
        __syncthreads();
    }
    for (int i = tbeg[b] + threadIdx.x; i < tbeg[b] + tn[b]; i += blockDim.x) {
        const real4d y = trg[i];
        double pot = 0, gx = 0, gy = 0, gz = 0;
        if (level[b] >= 2) {
            const real4d c = cube[b];
            const double inv_s = 1 / c.w;
            double phi, gr, gi, gzz;
            const double ux = (y.x - c.x) * inv_s, uy = (y.y - c.y) * inv_s,
                         uz = (y.z - c.z) * inv_s;
            if (recs)
                l2p_rec(p, ux, uy, uz, Ls, &phi, &gr, &gi, &gzz);
            else
                l2p(tb, p, ux, uy, uz, Ls, &phi, &gr, &gi, &gzz);
            pot += phi;
            gx += -gr * inv_s, gy += gi * inv_s, gz += gzz * inv_s;
        }
        for (int e = w_begin[b]; e < w_begin[b + 1]; e++) {
            const int a = w[e];
            const real4d c = cube[a];
            const double inv_s = 1 / c.w;
            const double *M = Mx + (int64_t)a * S;
            irregular(tb, p + 1, (y.x - c.x) * inv_s, (y.y - c.y) * inv_s, (y.z - c.z) * inv_s, H);
            double phi, gr, gi, gzz;
            m2p_sums(p, sq, M, H, &phi, &gr, &gi, &gzz);
            const double g2 = inv_s * inv_s;
            pot += phi * inv_s;
            gx += -gr * g2, gy += gi * g2, gz += gzz * g2;
        }
        res[i] = pot;
        res[nt + 3 * i] = gx, res[nt + 3 * i + 1] = gy, res[nt + 3 * i + 2] = gz;
    }
}

/* P2M by column groups at order P (k_p2m_cols) into E, the charges in the sources' 4th component
 * (qk NULL) or in qk (key order: one vector of eval_many): a block per leaf, more only where
 * leaves are large (a block per 1024 sources of the leaf size, up to 8) */
template <int P> void launch_p2m_cols(fmk_fmm3d_cuda *s, double *E, const double *qk)
{
    const int64_t y = (s->leaf_size + 1023) / 1024;
    const unsigned split = (unsigned)(y < 1 ? 1 : y > 8 ? 8 : y);
    const dim3 grid((unsigned)s->g.n_leaves_src, split);
    if (qk)
        k_p2m_cols<P, 1, true><<<grid, BLOCK, 0, s->stream[0]>>>(
            s->S, s->tb, s->g.d_leaves_src, s->g.d_cube, s->g.d_sb, s->g.d_sn, s->g.d_src, qk, E);
    else
        k_p2m_cols<P, 1, false><<<grid, BLOCK, 0, s->stream[0]>>>(
            s->S, s->tb, s->g.d_leaves_src, s->g.d_cube, s->g.d_sb, s->g.d_sn, s->g.d_src, qk, E);
}

} // namespace

/* P2M by column groups where it is made for order p (false: not) */
bool fmk_fmm3d_cuda_p2m_cols(fmk_fmm3d_cuda *s, double *E, const double *qk)
{
    if (!s->tune->point_cols)
        return false;
    switch (s->order) {
    case 4: launch_p2m_cols<4>(s, E, qk); return true;
    case 6: launch_p2m_cols<6>(s, E, qk); return true;
    case 8: launch_p2m_cols<8>(s, E, qk); return true;
    case 11: launch_p2m_cols<11>(s, E, qk); return true;
    case 12: launch_p2m_cols<12>(s, E, qk); return true;
    case 14: launch_p2m_cols<14>(s, E, qk); return true;
    case 16: launch_p2m_cols<16>(s, E, qk); return true;
    case 18: launch_p2m_cols<18>(s, E, qk); return true;
    default: return false;
    }
}

namespace {

/* L2P's records fit the 48 KB of shared memory a block gets without asking to this order */
const int L2P_REC_MAX_ORDER = 30;

template <int NH>
void launch_l2p(fmk_fmm3d_cuda *s, int nt, const double *M, const double *L, double *res)
{
    const int p = s->order, S = s->S;
    const int recs = s->tune->point_cols && p <= L2P_REC_MAX_ORDER;
    const size_t l2p_smem = recs ? 8 * (size_t)L2P_REC * ((p + 1) * (p + 2) / 2) : 8 * (size_t)S;
    if (s->g.n_leaves_trg > 0)
        k_l2p_m2p<NH><<<(unsigned)s->g.n_leaves_trg, 64, l2p_smem, s->stream[0]>>>(
            p, S, nt, recs, s->tb, s->g.d_leaves_trg, s->g.d_level, s->g.d_cube, s->g.d_tb,
            s->g.d_tn, s->g.d_w_begin, s->g.d_w, s->g.d_trg, M, L, res);
}

} // namespace

cudaError_t fmk_cuda_fmm3d_p2m(fmk_fmm3d_cuda *s)
{
    const int p = s->order, S = s->S;
    if (s->g.n_leaves_src > 0 && !fmk_fmm3d_cuda_p2m_cols(s, s->d_M, NULL))
        k_p2e<<<dim3((unsigned)s->g.n_leaves_src, split_for(s->leaf_size)), BLOCK, 8 * S,
                s->stream[0]>>>(p, S, s->tb, s->g.d_leaves_src, NULL, NULL, s->g.d_cube, s->g.d_sb,
                                s->g.d_sn, s->g.d_src, s->d_M);
    return cudaGetLastError();
}

cudaError_t fmk_cuda_fmm3d_p2l(fmk_fmm3d_cuda *s)
{
    const int p = s->order, S = s->S;
    if (s->g.n_xnodes > 0)
        k_p2e<<<(unsigned)s->g.n_xnodes, BLOCK, 8 * S, s->stream[0]>>>(
            p, S, s->tb, s->g.d_xnodes, s->g.d_x_begin, s->g.d_x, s->g.d_cube, s->g.d_sb, s->g.d_sn,
            s->g.d_src, s->d_L);
    return cudaGetLastError();
}

cudaError_t fmk_cuda_fmm3d_l2p(fmk_fmm3d_cuda *s, int nt)
{
    return fmk_cuda_fmm3d_l2p_into(s, nt, s->d_M, s->d_L, s->d_res);
}

cudaError_t fmk_cuda_fmm3d_l2p_into(fmk_fmm3d_cuda *s, int nt, const double *M, const double *L,
                                    double *res)
{
    /* M2P's harmonics to degree p + 1 per thread */
    if (s->order <= 12)
        launch_l2p<105>(s, nt, M, L, res);
    else if (s->order <= 24)
        launch_l2p<351>(s, nt, M, L, res);
    else if (s->order <= 32)
        launch_l2p<595>(s, nt, M, L, res);
    else if (s->order <= 44)
        launch_l2p<1081>(s, nt, M, L, res);
    else
        launch_l2p<1953>(s, nt, M, L, res);
    static_assert(FMM_GPU_MAX_ORDER <= 60, "M2P's harmonics: (p + 2)(p + 3) / 2 <= 1953");
    return cudaGetLastError();
}
