/*
 * spline.h -- GADGET's cubic spline softening (Springel 2005, MNRAS 364, 1105, section 2.1 and
 * eq. 4; the same kernel in GADGET-4, Springel et al. 2021, MNRAS 506, 2871) and the hashed cell
 * list that finds the pairs closer than h; shared by spline.c (CPU) and cuda/spline.cu (GPU).
 *
 * With u = r / h and h = 2.8 s, the softened 1/r is phi_s(r) = -W2(u) / h where (GADGET-2's
 * forcetree.c writes the same polynomials)
 *
 *   W2(u) = -14/5 + u^2 (16/3 + u^2 (32/5 u - 48/5))                        0 <= u < 1/2
 *   W2(u) = -16/5 + 1/(15 u) + u^2 (32/3 + u (-16 + u (48/5 - 32/15 u)))     1/2 <= u < 1
 *   phi_s = 1/r                                                              u >= 1
 *
 * and the acceleration a particle of mass m at x_j gives one at x_i is G m g(r) (x_j - x_i) with
 *
 *   g(r) = (32/3 + u^2 (32 u - 192/5)) / h^3                                 0 <= u < 1/2
 *   g(r) = (64/3 - 48 u + 192/5 u^2 - 32/3 u^3 - 1/(15 u^3)) / h^3           1/2 <= u < 1
 *   g(r) = 1/r^3                                                             u >= 1
 *
 * so that phi_s(0) = 2.8 / h = 1/s (the Plummer sphere of softening s has the same depth) and
 * both are continuous with the Newtonian forms at u = 1. The driver evaluates the Newtonian sum
 * with fmmkit's laplace kernel and adds, for each pair closer than h, phi_s - 1/r and
 * (g - 1/r^3) (x_j - x_i); a pair at r = 0 (which the plan leaves out) gets phi_s(0) alone.
 */
#ifndef FMMKIT_SIM_SPLINE_H
#define FMMKIT_SIM_SPLINE_H

#include <math.h>
#include <stdint.h>

/* GADGET's spline: Newtonian beyond h = FMK_SIM_SPLINE_H s (Springel 2005, section 2.1). */
#define FMK_SIM_SPLINE_H 2.8

#ifdef __CUDACC__
#define FMK_SIM_HD static __host__ __device__ __forceinline__
#else
#define FMK_SIM_HD static inline
#endif

/* The corrections phi_s(r) - 1/r and g(r) - 1/r^3 for 0 <= r < h (r = 0: phi_s(0), 0). */
FMK_SIM_HD void fmk_sim_spline_delta(double r, double h, double *dphi, double *dg)
{
    const double hinv = 1.0 / h, u = r * hinv, h3inv = hinv * hinv * hinv;
    double phi, g;
    if (u < 0.5) {
        phi = -hinv * (-2.8 + u * u * (16.0 / 3.0 + u * u * (6.4 * u - 9.6)));
        g = h3inv * (32.0 / 3.0 + u * u * (32.0 * u - 38.4));
    } else {
        phi = -hinv * (-3.2 + 1.0 / (15.0 * u) +
                       u * u * (32.0 / 3.0 + u * (-16.0 + u * (9.6 - 32.0 / 15.0 * u))));
        g = h3inv * (64.0 / 3.0 - 48.0 * u + 38.4 * u * u - 32.0 / 3.0 * u * u * u -
                     1.0 / (15.0 * u * u * u));
    }
    if (r > 0) {
        const double rinv = 1.0 / r;
        *dphi = phi - rinv;
        *dg = g - rinv * rinv * rinv;
    } else {
        *dphi = phi;
        *dg = 0;
    }
}

/* The cell list: cells of side `cell` (the largest h), cell (ix, iy, iz) = floor(x / cell),
 * hashed into a power-of-two table (mask = table - 1). Different cells may share a bucket; a
 * particle's 27 neighbour cells are looked up bucket by bucket with repeats skipped, and
 * every candidate's distance is checked, so sharing costs time, never correctness. */
FMK_SIM_HD int64_t fmk_sim_cell_coord(double x, double inv_cell)
{
    double c = floor(x * inv_cell);
    /* far outliers: any cell beyond 2^60 is as good as another (its pairs are checked) */
    c = c > 1152921504606846976.0 ? 1152921504606846976.0 : c;
    c = c < -1152921504606846976.0 ? -1152921504606846976.0 : c;
    return (int64_t)c;
}

FMK_SIM_HD uint32_t fmk_sim_cell_bucket(int64_t ix, int64_t iy, int64_t iz, uint64_t mask)
{
    uint64_t z = (uint64_t)ix * 0x9e3779b97f4a7c15ull ^ (uint64_t)iy * 0xc2b2ae3d27d4eb4full ^
                 (uint64_t)iz * 0x165667b19e3779f9ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull; /* splitmix64's finalizer */
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) & mask);
}

/* The table size for n particles: a power of two >= n, at least 64, at most 2^31. */
FMK_SIM_HD int64_t fmk_sim_cell_table(int64_t n)
{
    int64_t t = 64;
    while (t < n && t < ((int64_t)1 << 31))
        t *= 2;
    return t;
}

#endif /* FMMKIT_SIM_SPLINE_H */
