/* far.cu -- the treecode's far part on the GPU for Psi alone (no velocity): the multipole
 * of each far node evaluated at each point of a brick, with the order a template argument.
 *
 * Each point's irregular harmonics about a node (fmm3d_ops.h: I_n^m(u) = R_n^m(u / |u|^2) /
 * |u|) are made column by column (m fixed, n = m .. p) by the three-term recursion, and each
 * value is multiplied into the sums as soon as it exists: nothing is stored, every loop is
 * unrolled, and the recursion's coefficients are compile-time constants (read by the
 * instructions from the constant bank), so a point-node evaluation is about 6 + 2 NC
 * instructions per coefficient (n, m) and its loads (two 16-byte loads for 3 components in
 * fp32). The multipoles of the node (all components) are in shared memory. fp32 (eps >= 1e-4)
 * or fp64. The general kernel (eval.cu, with gradients) serves the velocity and
 * orders above TC_FAST_ORDER_MAX. */
#include "poisson/treecode/cuda/treecode_cuda.h"

#define TC_NCOEF(d) (((d) + 1) * ((d) + 2) / 2)
#define TC_IDX(n, m) ((n) * ((n) + 1) / 2 + (m))

/* sqrt at compile time (Newton from above: exact to an ulp or two) */
static constexpr double tc_csqrt(double x)
{
    if (x <= 0)
        return 0;
    double r = x > 1 ? x : 1;
    for (int i = 0; i < 200; i++) {
        const double next = 0.5 * (r + x / r);
        if (next >= r)
            break;
        r = next;
    }
    return r;
}

/* fmm3d_ops.c's recursion: R_n^m = a(n,m) z R_{n-1}^m - b(n,m) r^2 R_{n-2}^m, and
 * R_m^m = -(x + i y) d(m) R_{m-1}^{m-1}. */
struct tc_rec {
    double a[TC_NCOEF(TC_FAST_ORDER_MAX)], b[TC_NCOEF(TC_FAST_ORDER_MAX)];
    double d[TC_FAST_ORDER_MAX + 1];
};

static constexpr tc_rec tc_rec_make()
{
    tc_rec t{};
    for (int n = 0; n <= TC_FAST_ORDER_MAX; n++)
        for (int m = 0; m <= n; m++)
            if (n > m) {
                const double nm = (double)(n + m) * (n - m);
                t.a[TC_IDX(n, m)] = (2.0 * n - 1) / tc_csqrt(nm);
                t.b[TC_IDX(n, m)] = tc_csqrt((double)(n + m - 1) * (n - m - 1) / nm);
            }
    t.d[0] = 1;
    for (int m = 1; m <= TC_FAST_ORDER_MAX; m++)
        t.d[m] = tc_csqrt((2.0 * m - 1) / (2.0 * m));
    return t;
}

static __constant__ tc_rec c_rec = tc_rec_make();

/* The same in fp32, for the far part in single precision. */
struct tc_recf {
    float a[TC_NCOEF(TC_FAST_ORDER_MAX)], b[TC_NCOEF(TC_FAST_ORDER_MAX)];
    float d[TC_FAST_ORDER_MAX + 1];
};

static constexpr tc_recf tc_recf_make()
{
    const tc_rec t = tc_rec_make();
    tc_recf f{};
    for (int i = 0; i < TC_NCOEF(TC_FAST_ORDER_MAX); i++)
        f.a[i] = (float)t.a[i], f.b[i] = (float)t.b[i];
    for (int m = 0; m <= TC_FAST_ORDER_MAX; m++)
        f.d[m] = (float)t.d[m];
    return f;
}

static __constant__ tc_recf c_recf = tc_recf_make();

/* The recursion's coefficients and 1/sqrt in the precision R. */
template <typename R> struct rec;
template <> struct rec<double> {
    static __device__ __forceinline__ double a(int i) { return c_rec.a[i]; }
    static __device__ __forceinline__ double b(int i) { return c_rec.b[i]; }
    static __device__ __forceinline__ double d(int m) { return c_rec.d[m]; }
    static __device__ __forceinline__ double rsq(double x) { return rsqrt(x); }
};
template <> struct rec<float> {
    static __device__ __forceinline__ float a(int i) { return c_recf.a[i]; }
    static __device__ __forceinline__ float b(int i) { return c_recf.b[i]; }
    static __device__ __forceinline__ float d(int m) { return c_recf.d[m]; }
    static __device__ __forceinline__ float rsq(float x) { return rsqrtf(x); }
};

/* The multipoles of a node in shared memory, coefficient after coefficient: coefficient k's
 * (re, im) of every component side by side, CS values per coefficient (fp32, 3 components: 8,
 * padded for two 16-byte loads; else 2 NC). A coefficient is read where it is used, by loads
 * the compiler may not move (asm volatile): hoisted out of the points' loop they would hold
 * every coefficient in registers at once and spill. */
template <typename R, int NC> struct coefs {
    static constexpr int CS = 2 * NC;
    static __device__ __forceinline__ void load(const R *s, int k, R re[NC], R im[NC])
    {
#pragma unroll
        for (int a = 0; a < NC; a++) {
            const unsigned addr = (unsigned)__cvta_generic_to_shared(s + k * CS + 2 * a);
            asm volatile("ld.shared.v2.f64 {%0, %1}, [%2];" : "=d"(re[a]), "=d"(im[a]) : "r"(addr));
        }
    }
};
template <> struct coefs<float, 1> {
    static constexpr int CS = 2;
    static __device__ __forceinline__ void load(const float *s, int k, float re[1], float im[1])
    {
        const unsigned addr = (unsigned)__cvta_generic_to_shared(s + k * CS);
        asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(re[0]), "=f"(im[0]) : "r"(addr));
    }
};
template <> struct coefs<float, 3> {
    static constexpr int CS = 8;
    static __device__ __forceinline__ void load(const float *s, int k, float re[3], float im[3])
    {
        const unsigned addr = (unsigned)__cvta_generic_to_shared(s + k * CS);
        float pad0, pad1;
        asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                     : "=f"(re[0]), "=f"(im[0]), "=f"(re[1]), "=f"(im[1])
                     : "r"(addr));
        asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                     : "=f"(re[2]), "=f"(im[2]), "=f"(pad0), "=f"(pad1)
                     : "r"(addr + 16));
        (void)pad0, (void)pad1;
    }
};

/* R: the precision of the harmonics and the multipoles (double, or float for eps >= 1e-4: a
 * term's relative rounding 1e-7, the point's sums per node added in double). */
template <typename R, int P, int NC>
__global__ void __launch_bounds__(TC_THREADS)
    k_far_psi(int64_t base, const fmk_tc_brick *__restrict__ bricks,
              const int64_t *__restrict__ fstart, const int32_t *__restrict__ fnode,
              const real4d *__restrict__ node, const double *__restrict__ multipole, double *pot)
{
    typedef coefs<R, NC> C;
    constexpr int S = (P + 1) * (P + 2); /* doubles per component's expansion */
    constexpr int K = S / 2;             /* coefficients */
    __shared__ __align__(16) R s_m[K * C::CS];
    const int64_t bi = base + blockIdx.x;
    const fmk_tc_brick b = bricks[bi];
    const int np = b.n[0] * b.n[1] * b.n[2];
    __shared__ double s_acc[TC_PTS * TC_THREADS * NC]; /* each thread's own sums */
    const int kmax = (np + TC_THREADS - 1 - threadIdx.x) / TC_THREADS; /* this thread's points */
    for (int k = 0; k < kmax; k++) /* a thread zeroes the sums it alone reads and writes */
#pragma unroll
        for (int a = 0; a < NC; a++)
            s_acc[(k * TC_THREADS + threadIdx.x) * NC + a] = 0;
    for (int64_t e = fstart[bi]; e < fstart[bi + 1]; e++) {
        const int nd = fnode[e];
        __syncthreads(); /* the previous node's multipoles are no longer read */
        for (int i = threadIdx.x; i < NC * S; i += TC_THREADS) { /* i = a S + 2 k + part */
            const int a = i / S, k = (i % S) / 2, part = i % 2;
            s_m[k * C::CS + 2 * a + part] = (R)multipole[(int64_t)nd * NC * S + i];
        }
        const real4d c = node[nd];
        __syncthreads();
        const double inv_s = 1 / c.w;
#pragma unroll 1
        for (int k = 0; k < kmax; k++) {
            const int q = threadIdx.x + k * TC_THREADS;
            const R ux = (R)((b.corner[0] + b.h * (q % b.n[0]) - c.x) * inv_s),
                    uy = (R)((b.corner[1] + b.h * (q / b.n[0] % b.n[1]) - c.y) * inv_s),
                    uz = (R)((b.corner[2] + b.h * (q / (b.n[0] * b.n[1])) - c.z) * inv_s);
            const R inv_r = rec<R>::rsq(ux * ux + uy * uy + uz * uz), r2 = inv_r * inv_r;
            const R x = ux * r2, y = uy * r2, z = uz * r2; /* Kelvin: |(x,y,z)|^2 = r2 */
            R sum[NC];
#pragma unroll
            for (int a = 0; a < NC; a++)
                sum[a] = 0;
            R dr = 1, di = 0;
#pragma unroll
            for (int m = 0; m <= P; m++) {
                if (m > 0) {
                    const R f = -rec<R>::d(m);
                    const R nr = f * (x * dr - y * di), ni = f * (x * di + y * dr);
                    dr = nr, di = ni;
                }
                const R w = m ? 2 : 1; /* X_n^-m = (-1)^m conj X_n^m: twice the real part */
                R col[NC], re[NC], im[NC];
                C::load(s_m, TC_IDX(m, m), re, im);
#pragma unroll
                for (int a = 0; a < NC; a++)
                    col[a] = re[a] * dr - im[a] * di;
                R pr = dr, pi = di, qr = 0, qi = 0;
                if (m + 1 <= P) {
                    const R a1 = rec<R>::a(TC_IDX(m + 1, m)) * z;
                    qr = a1 * dr, qi = a1 * di;
                    C::load(s_m, TC_IDX(m + 1, m), re, im);
#pragma unroll
                    for (int a = 0; a < NC; a++)
                        col[a] += re[a] * qr - im[a] * qi;
                }
#pragma unroll
                for (int n = m + 2; n <= P; n++) {
                    const R A = rec<R>::a(TC_IDX(n, m)) * z, B = rec<R>::b(TC_IDX(n, m)) * r2;
                    const R sr = A * qr - B * pr, si = A * qi - B * pi;
                    C::load(s_m, TC_IDX(n, m), re, im);
#pragma unroll
                    for (int a = 0; a < NC; a++)
                        col[a] += re[a] * sr - im[a] * si;
                    pr = qr, pi = qi, qr = sr, qi = si;
                }
#pragma unroll
                for (int a = 0; a < NC; a++)
                    sum[a] += w * col[a];
            }
            const double scale = (double)inv_r * inv_s;
            double *acc = s_acc + (k * TC_THREADS + threadIdx.x) * NC;
#pragma unroll
            for (int a = 0; a < NC; a++)
                acc[a] += (double)sum[a] * scale;
        }
    }
    for (int k = 0; k < kmax; k++) {
        const int q = threadIdx.x + k * TC_THREADS;
        const int64_t pt = b.first + q % b.n[0] + b.stride[0] * (q / b.n[0] % b.n[1]) +
                           b.stride[1] * (q / (b.n[0] * b.n[1]));
        const double *acc = s_acc + (k * TC_THREADS + threadIdx.x) * NC;
#pragma unroll
        for (int a = 0; a < NC; a++)
            atomicAdd(pot + NC * pt + a, acc[a]);
    }
}

template <typename R, int P>
static void launch(cudaStream_t st, int nc, int64_t b0, unsigned nb, const fmk_tc_brick *bricks,
                   const int64_t *fstart, const int32_t *fnode, const real4d *node,
                   const double *multipole, double *pot)
{
    if (nc == 1)
        k_far_psi<R, P, 1><<<nb, TC_THREADS, 0, st>>>(b0, bricks, fstart, fnode, node, multipole,
                                                       pot);
    else
        k_far_psi<R, P, 3><<<nb, TC_THREADS, 0, st>>>(b0, bricks, fstart, fnode, node, multipole,
                                                       pot);
}

typedef void (*launcher)(cudaStream_t, int, int64_t, unsigned, const fmk_tc_brick *,
                         const int64_t *, const int32_t *, const real4d *, const double *,
                         double *);

#define TC_LAUNCHERS(R)                                                                        \
    {launch<R, 0>,  launch<R, 1>,  launch<R, 2>,  launch<R, 3>,  launch<R, 4>,  launch<R, 5>,  \
     launch<R, 6>,  launch<R, 7>,  launch<R, 8>,  launch<R, 9>,  launch<R, 10>, launch<R, 11>, \
     launch<R, 12>, launch<R, 13>, launch<R, 14>, launch<R, 15>, launch<R, 16>}

cudaError_t fmk_tc_far_psi(cudaStream_t st, int order, int nc, int fp32, int64_t b0, unsigned nb,
                           const fmk_tc_brick *bricks, const int64_t *fstart, const int32_t *fnode,
                           const real4d *node, const double *multipole, double *pot)
{
    static const launcher by_order[2][TC_FAST_ORDER_MAX + 1] = {TC_LAUNCHERS(double),
                                                                TC_LAUNCHERS(float)};
    if (order < 0 || order > TC_FAST_ORDER_MAX)
        return cudaErrorInvalidValue;
    by_order[fp32 ? 1 : 0][order](st, nc, b0, nb, bricks, fstart, fnode, node, multipole, pot);
    return cudaGetLastError();
}
