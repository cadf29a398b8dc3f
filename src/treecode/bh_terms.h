/*
 * bh_terms.h -- the treecode's interaction terms, shared by the CPU (bh.c) and the GPU
 * (cuda/bh.cu) so both evaluate the same formulas. Included once per working precision with
 * REAL (float or double), RSQRT (its 1/sqrt) and BH(name) (the name of each function) defined,
 * as p2p.c includes p2p_tile.h. FMK_BH_FN marks the functions for host and device, always
 * inlined (the CPU walk's `omp simd` loops call them per lane: a call left out of line would
 * make the loop scalar).
 *
 * Kernel: G(r) = 1/sqrt(r^2 + eps2); eps2 = 0 is laplace, eps2 = s^2 plummer (mapped units).
 *
 * M2P. A node with moments (tree3d.h) M, D, S about xc, seen from y with r = y - xc and
 * t = |r|^2 + eps2, is the Taylor expansion of G(|r - d|) to second order in d:
 *     phi  =  M t^-1/2  +  (D.r) t^-3/2  +  3/2 (r.S.r) t^-5/2  -  1/2 tr(S) t^-3/2
 * and its gradient in y (grad t = 2r):
 *     grad = -M r t^-3/2
 *            + D t^-3/2 - 3 (D.r) r t^-5/2
 *            + 3 S r t^-5/2 - 15/2 (r.S.r) r t^-7/2 + 3/2 tr(S) r t^-5/2
 * For eps2 = 0 the last terms are the usual traceless quadrupole, (3 rSr - tr S |r|^2)/(2|r|^5).
 * The truncation error is O((size/|r|)^(order+1)) relative, which the opening radius bounds.
 *
 * P2P. One source (x, q) at one target y, d = y - x, t = |d|^2 + eps2:
 *     phi = q t^-1/2,   grad = -q d t^-3/2,
 * kernels/pair.h's plummer pair, with the coincidence rule of docs/kernels.md: for eps2 = 0 a
 * pair with |d| = 0 adds nothing (in the frame, |d| = 0 is an exact test).
 */
#define PAIR(name) BH(pair_##name)
#include "kernels/pair.h"
#undef PAIR

#ifndef FMK_BH_FN
#define FMK_BH_FN FMK_HD static FMK_INLINE
#endif

/* Moments of one node packed for evaluation: M, Dx, Dy, Dz, Sxx, Sxy, Sxz, Syy, Syz, Szz. */
#define FMK_BH_MOMENTS 10

/* The plain form of m2p below, for fp64 (whose range holds its t^-7/2 at any distance the frame
 * resolves). */
FMK_BH_FN void BH(m2p_plain)(int order, REAL rx, REAL ry, REAL rz, REAL eps2, const REAL *m,
                             REAL *phi, REAL *g)
{
    REAL t = rx * rx + ry * ry + rz * rz + eps2;
    REAL u1 = RSQRT(t); /* t^-1/2 */
    REAL u2 = u1 * u1;  /* t^-1 */
    REAL u3 = u1 * u2;  /* t^-3/2 */
    REAL p = m[0] * u1;
    REAL c = -m[0] * u3;         /* coefficient of r in the gradient */
    REAL gx = 0, gy = 0, gz = 0; /* terms not along r */
    if (order >= 1) {
        REAL dr = m[1] * rx + m[2] * ry + m[3] * rz;
        REAL u5 = u3 * u2;
        p += dr * u3;
        c -= 3 * dr * u5;
        gx += m[1] * u3, gy += m[2] * u3, gz += m[3] * u3;
        if (order >= 2) {
            REAL sx = m[4] * rx + m[5] * ry + m[6] * rz; /* S r */
            REAL sy = m[5] * rx + m[7] * ry + m[8] * rz;
            REAL sz = m[6] * rx + m[8] * ry + m[9] * rz;
            REAL rsr = rx * sx + ry * sy + rz * sz;
            REAL tr = m[4] + m[7] + m[9];
            REAL u7 = u5 * u2;
            p += (REAL)1.5 * rsr * u5 - (REAL)0.5 * tr * u3;
            c += (REAL)1.5 * tr * u5 - (REAL)7.5 * rsr * u7;
            gx += 3 * sx * u5, gy += 3 * sy * u5, gz += 3 * sz * u5;
        }
    }
    *phi += p;
    g[0] += gx + c * rx;
    g[1] += gy + c * ry;
    g[2] += gz + c * rz;
}

/* The fp32 form of m2p below: written in e = r t^-1/2 (|e| <= 1) and nested in u = t^-1/2, so that no intermediate is a
 * high power of 1/|r|: with D ~ M l and S ~ M l^2 for a node of size l < |r|, every term inside
 * the brackets is at most about M, and only u (phi) and u^2 (grad) scale the result. The plain
 * form's t^-7/2 overflows fp32 at |r| below 3e-6 of the frame (nested clusters), where these
 * terms are moderate:
 *     phi  = u (M + u (D.e + u (3/2 e.S.e - 1/2 tr S)))
 *     grad = u^2 (-M e + u (D - 3 (D.e) e + u (3 S e - 15/2 (e.S.e) e + 3/2 tr(S) e))) */
FMK_BH_FN void BH(m2p_unit)(int order, REAL rx, REAL ry, REAL rz, REAL eps2, const REAL *m,
                            REAL *phi, REAL *g)
{
    const REAL t = rx * rx + ry * ry + rz * rz + eps2;
    const REAL u = RSQRT(t); /* t^-1/2 */
    const REAL ex = rx * u, ey = ry * u, ez = rz * u;
    REAL p = 0, c = 0;           /* phi / u - M and the coefficient of e in grad / u^2, + M */
    REAL gx = 0, gy = 0, gz = 0; /* grad / u^2 not along e */
    if (order >= 1) {
        const REAL de = m[1] * ex + m[2] * ey + m[3] * ez;
        REAL pp = de, cc = -3 * de, hx = m[1], hy = m[2], hz = m[3];
        if (order >= 2) {
            const REAL sx = m[4] * ex + m[5] * ey + m[6] * ez; /* S e */
            const REAL sy = m[5] * ex + m[7] * ey + m[8] * ez;
            const REAL sz = m[6] * ex + m[8] * ey + m[9] * ez;
            const REAL ese = ex * sx + ey * sy + ez * sz;
            const REAL tr = m[4] + m[7] + m[9];
            pp += u * ((REAL)1.5 * ese - (REAL)0.5 * tr);
            cc += u * ((REAL)1.5 * tr - (REAL)7.5 * ese);
            hx += 3 * u * sx, hy += 3 * u * sy, hz += 3 * u * sz;
        }
        p = u * pp, c = u * cc;
        gx = u * hx, gy = u * hy, gz = u * hz;
    }
    const REAL u2 = u * u;
    *phi += u * (m[0] + p);
    c -= m[0];
    g[0] += u2 * (gx + c * ex);
    g[1] += u2 * (gy + c * ey);
    g[2] += u2 * (gz + c * ez);
}

/* Adds the field of packed moments m (order 0, 1 or 2) at offset r = y - xc to phi and g[3]:
 * in fp32 by the unit-vector form (the plain form's t^-7/2 overflows fp32 on nested
 * clusters), in fp64 by the plain one (10-15% less time in the CPU walk). */
FMK_BH_FN void BH(m2p)(int order, REAL rx, REAL ry, REAL rz, REAL eps2, const REAL *m, REAL *phi,
                       REAL *g)
{
    if (sizeof(REAL) == sizeof(float))
        BH(m2p_unit)(order, rx, ry, rz, eps2, m, phi, g);
    else
        BH(m2p_plain)(order, rx, ry, rz, eps2, m, phi, g);
}

/* Adds one source of charge q at offset d = y - x (see the coincidence rule above). */
FMK_BH_FN void BH(p2p)(REAL dx, REAL dy, REAL dz, REAL q, REAL eps2, REAL *phi, REAL *g)
{
    const BH(pair_radial) w = BH(pair_plummer)(dx * dx + dy * dy + dz * dz, q, eps2);
    *phi += w.pot;
    g[0] -= w.g * dx;
    g[1] -= w.g * dy;
    g[2] -= w.g * dz;
}
