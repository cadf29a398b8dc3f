/* let_pseudo.c -- the pseudo-particles of order p of the FMM's distributed sources (let.h;
 * docs/distributed.md, "FMM: locally essential trees").
 *
 * A node of centre c and radius a (its sources within a of c) goes to another rank as
 * K = (p+1)(2p+1) charges on the sphere of radius a about c: the directions u_k are the
 * Gauss-Legendre nodes in cos(theta) (p+1) times 2p+1 equispaced phi, w_k the product weights
 * (sum 4 pi), a rule exact for the sphere's polynomials of degree 2p + 1. With the regular
 * solid harmonics of Dehnen (2014, eqs. 8-9)
 *
 *     R_n^m(x) = r^n P_n^m(cos theta) e^(i m phi) / (n + m)!      (Condon-Shortley phase in P)
 *
 * the node's moments about c are M_n^m = sum_j q_j conj R_n^m(y_j - c) (m >= 0; M_n^-m =
 * (-1)^m conj M_n^m), and the addition theorem R_n^m(x + t) = sum_{k,l} R_k^l(t) R_(n-k)^(m-l)(x)
 * gives the M2M translation. The node's degree-n field in the direction u is
 *
 *     F_n(u) = sum_j q_j rho_j^n P_n(u . y_j/rho_j)
 *            = Re sum_{m=0..n} eps_m (n-m)! (n+m)! M_n^m R_n^m(u)     (eps_0 = 1, else 2)
 *
 * (the addition theorem of the Legendre polynomials), and the pseudo-charges
 *
 *     q_k = w_k sum_{n<=p} (2n+1)/(4 pi) a^-n F_n(u_k)
 *
 * have the moments of the node for every n <= p: sum_k q_k a^n Y_n^m*(u_k) is the quadrature of
 * f Y_n^m* (f = sum_n (2n+1)/(4 pi) a^-n F_n, of degree p; the product of degree <= 2p) and
 * the orthonormality of Y_n^m leaves a^n a^-n M. Outside the sphere the pseudo-particles and
 * the node's sources then differ by the degrees above p only: at a distance d from c, less
 * than 2 Q (a/d)^(p+1) / (d - a) for Q the sum of |q|. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/let.h"

#define TRI(n, m) ((n) * ((n) + 1) / 2 + (m))
static const double pi = 3.14159265358979323846, four_pi = 4 * 3.14159265358979323846;

int fmk_let_pseudo_count(int order)
{
    return order > 0 ? (order + 1) * (2 * order + 1) : LET_PP;
}

int fmk_let_pseudo_terms(int order)
{
    return (order + 1) * (order + 2) / 2;
}

int fmk_let_pseudo_work(int order)
{
    return fmk_let_pseudo_terms(order) + 2 * (order + 1) * (order + 1);
}

/* The opening ratio and the order from eps. theta 0.5: a node goes as pseudo-particles at a
 * distance of at least 3a from every box of the receiver, a / d <= r = 1/3 (about the r that
 * lets the nearest nodes go: a node needs more than K ~ 2 p^2 sources, p ~ log eps / log r,
 * within a ball of radius r d). The order: the smallest p with r^(p+1) <= eps. The bound
 * 2 r^(p+1) / (1 - r) is reached only by a target at the MAC distance, sources on the sphere
 * and all of one sign; the measured worst potential error of a node at d = 3a is below
 * eps / 100, its gradient's below eps / 10, relative to the node's own field at that target
 * (tests/mpi/test_let_pseudo.c), and the relative l2 error over all targets, to which the
 * near sources contribute, far less: most of eps is left to the local FMM. */
void fmk_let_pseudo_choose(double eps, int *order, double *theta)
{
    const double th = 0.5, r = th / (1 + th);
    const double e = eps > 1e-15 ? eps : 1e-15;
    int p = (int)ceil(log(e) / log(r)) - 1;
    p = p < 2 ? 2 : p > LET_ORDER_MAX ? LET_ORDER_MAX : p;
    *order = p, *theta = th;
}

/* The Legendre polynomial P_n(x) and its derivative. */
static void legendre(int n, double x, double *pn, double *dpn)
{
    double p0 = 1, p1 = x;
    for (int k = 2; k <= n; k++) {
        const double p2 = ((2 * k - 1) * x * p1 - (k - 1) * p0) / k;
        p0 = p1, p1 = p2;
    }
    *pn = n == 0 ? 1 : p1;
    *dpn = n == 0 ? 0 : n * (x * p1 - p0) / (x * x - 1);
}

void fmk_let_sphere(int order, double *u, double *w)
{
    const int ng = order + 1, nphi = 2 * order + 1;
    for (int i = 0; i < ng; i++) {
        /* Gauss-Legendre node i of ng by Newton's iteration from the asymptotic guess */
        double x = cos(pi * (i + 0.75) / (ng + 0.5)), pn = 0, dpn = 1;
        for (int it = 0; it < 100; it++) {
            legendre(ng, x, &pn, &dpn);
            const double dx = pn / dpn;
            x -= dx;
            if (fabs(dx) < 1e-16)
                break;
        }
        legendre(ng, x, &pn, &dpn);
        const double wg = 2 / ((1 - x * x) * dpn * dpn), s = sqrt(1 - x * x);
        for (int j = 0; j < nphi; j++) {
            const double phi = 2 * pi * j / nphi;
            const int k = i * nphi + j;
            u[3 * k] = s * cos(phi), u[3 * k + 1] = s * sin(phi), u[3 * k + 2] = x;
            w[k] = wg * 2 * pi / nphi;
        }
    }
}

void fmk_let_regular(int order, const double x[3], double complex *R)
{
    const double r2 = x[0] * x[0] + x[1] * x[1] + x[2] * x[2];
    const double complex xy = x[0] + I * x[1];
    R[0] = 1;
    for (int m = 1; m <= order; m++) /* R_m^m = -(x + i y) / (2m) R_(m-1)^(m-1) */
        R[TRI(m, m)] = -xy / (2 * m) * R[TRI(m - 1, m - 1)];
    for (int m = 0; m < order; m++) { /* (n+m)(n-m) R_n^m = (2n-1) z R_(n-1)^m - r^2 R_(n-2)^m */
        R[TRI(m + 1, m)] = x[2] * R[TRI(m, m)];
        for (int n = m + 2; n <= order; n++)
            R[TRI(n, m)] = ((2 * n - 1) * x[2] * R[TRI(n - 1, m)] - r2 * R[TRI(n - 2, m)]) /
                           ((n + m) * (n - m));
    }
}

void fmk_let_p2m(int order, const double c[3], double unit, int64_t n, const double *x, int64_t nd,
                 const double *q, double complex *mom, double complex *work)
{
    /* R_n^m = R_m^m s_n^m with s real: s_m^m = 1, s_(m+1)^m = z, and
     * (n+m)(n-m) s_n^m = (2n-1) z s_(n-1)^m - r^2 s_(n-2)^m (fmk_let_regular's recurrence,
     * whose coefficients are real), its coefficients tabled once: no division a particle, no
     * complex product of the C library's */
    (void)work;
    const int T = fmk_let_pseudo_terms(order);
    double ca[TRI(LET_ORDER_MAX + 1, 0)], cb[TRI(LET_ORDER_MAX + 1, 0)];
    for (int m = 0; m <= order; m++)
        for (int k = m + 2; k <= order; k++) {
            ca[TRI(k, m)] = (2.0 * k - 1) / ((double)(k + m) * (k - m));
            cb[TRI(k, m)] = 1.0 / ((double)(k + m) * (k - m));
        }
    const double inv = 1 / unit;
    double *M = (double *)mom; /* re, im of each term, nd vectors of T */
    for (int64_t j = 0; j < n; j++) {
        const double y0 = (x[3 * j] - c[0]) * inv, y1 = (x[3 * j + 1] - c[1]) * inv,
                     z = (x[3 * j + 2] - c[2]) * inv, r2 = y0 * y0 + y1 * y1 + z * z;
        double pr = 1, pim = 0; /* R_m^m */
        for (int m = 0; m <= order; m++) {
            if (m > 0) { /* R_m^m = -(y0 + i y1) / (2m) R_(m-1)^(m-1) */
                const double f = -0.5 / m, nr = f * (y0 * pr - y1 * pim);
                pim = f * (y0 * pim + y1 * pr), pr = nr;
            }
            double s[LET_ORDER_MAX + 1]; /* s_k^m, k = m .. order */
            s[m] = 1;
            if (m < order)
                s[m + 1] = z;
            for (int k = m + 2; k <= order; k++)
                s[k] = ca[TRI(k, m)] * z * s[k - 1] - cb[TRI(k, m)] * r2 * s[k - 2];
            for (int64_t v = 0; v < nd; v++) { /* += q conj(R_k^m) */
                const double qj = q[j * nd + v], qr = qj * pr, qi = -qj * pim;
                double *mv = M + 2 * (size_t)v * (size_t)T;
                for (int k = m; k <= order; k++) {
                    mv[2 * TRI(k, m)] += qr * s[k];
                    mv[2 * TRI(k, m) + 1] += qi * s[k];
                }
            }
        }
    }
}

/* a moment or a harmonic of any m from its m >= 0 half: X_n^-m = (-1)^m conj X_n^m */
static inline double complex any_m(const double complex *X, int n, int m)
{
    if (m >= 0)
        return X[TRI(n, m)];
    const double complex c = conj(X[TRI(n, -m)]);
    return (m & 1) ? -c : c;
}

void fmk_let_m2m(int order, const double t[3], const double complex *child, double complex *parent,
                 double complex *work)
{
    /* conj R(t) and the child's moments for every m (-n..n: index n^2 + n + m), so that the
     * convolution below has no branches */
    const int T = fmk_let_pseudo_terms(order), F = (order + 1) * (order + 1);
    double complex *rt = work + T, *cf = rt + F;
    fmk_let_regular(order, t, work);
    for (int n = 0; n <= order; n++)
        for (int m = -n; m <= n; m++) {
            rt[n * n + n + m] = conj(any_m(work, n, m));
            cf[n * n + n + m] = any_m(child, n, m);
        }
    for (int n = 0; n <= order; n++) /* (the products by hand: C's complex product checks
                                       * for infinities, a call a term) */
        for (int m = 0; m <= n; m++) {
            double sr = 0, si = 0;
            for (int k = 0; k <= n; k++) {
                const int nk = n - k;
                const int l0 = m - nk > -k ? m - nk : -k, l1 = m + nk < k ? m + nk : k;
                const double *r = (const double *)(rt + k * k + k);
                const double *c = (const double *)(cf + nk * nk + nk + m);
                for (int l = l0; l <= l1; l++) {
                    const double ar = r[2 * l], ai = r[2 * l + 1];
                    const double br = c[-2 * l], bi = c[-2 * l + 1];
                    sr += ar * br - ai * bi, si += ar * bi + ai * br;
                }
            }
            parent[TRI(n, m)] += sr + I * si;
        }
}

void fmk_let_pseudo_table(int order, int K, const double *u, const double *w, double complex *B,
                          double complex *work)
{
    const int T = fmk_let_pseudo_terms(order);
    double fact[2 * LET_ORDER_MAX + 2];
    fact[0] = 1;
    for (int k = 1; k <= 2 * order; k++)
        fact[k] = fact[k - 1] * k;
    for (int k = 0; k < K; k++) {
        fmk_let_regular(order, u + 3 * k, work);
        for (int n = 0; n <= order; n++)
            for (int m = 0; m <= n; m++)
                B[(size_t)k * T + TRI(n, m)] = w[k] * (2 * n + 1) / four_pi * (m ? 2 : 1) *
                                               fact[n - m] * fact[n + m] * work[TRI(n, m)];
    }
}

void fmk_let_pseudo_charges(int order, int K, const double complex *B, double a,
                            const double complex *mom, double *qk, int64_t stride)
{
    const int T = fmk_let_pseudo_terms(order);
    double complex ms[(LET_ORDER_MAX + 1) * (LET_ORDER_MAX + 2) / 2];
    double an = 1; /* a^-n: a node of one point (a = 0) has only its charge */
    for (int n = 0; n <= order; n++, an = a > 0 ? an / a : 0)
        for (int m = 0; m <= n; m++)
            ms[TRI(n, m)] = mom[TRI(n, m)] * an;
    for (int k = 0; k < K; k++) {
        const double complex *b = B + (size_t)k * T;
        double s = 0;
        for (int t = 0; t < T; t++)
            s += creal(b[t]) * creal(ms[t]) - cimag(b[t]) * cimag(ms[t]);
        qk[k * stride] = s;
    }
}

void fmk_let_icosahedron(double u[LET_PP][3])
{
    const double p = (1 + sqrt(5.0)) / 2, r = sqrt(1 + p * p);
    int k = 0;
    for (int s1 = -1; s1 <= 1; s1 += 2)
        for (int s2 = -1; s2 <= 1; s2 += 2) {
            const double a = s1 / r, b = s2 * p / r;
            const double v[3][3] = {{0, a, b}, {a, b, 0}, {b, 0, a}};
            for (int j = 0; j < 3; j++, k++)
                memcpy(u[k], v[j], sizeof v[j]);
        }
}

int fmk_let_pseudo_setup(fmk_mpi_let *l, int order)
{
    l->order = order;
    l->n_pp = fmk_let_pseudo_count(order);
    l->pp_u = malloc((size_t)l->n_pp * 3 * sizeof *l->pp_u);
    l->pp_w = malloc((size_t)l->n_pp * sizeof *l->pp_w);
    if (!l->pp_u || !l->pp_w)
        return -1;
    if (order > 0) {
        fmk_let_sphere(order, l->pp_u, l->pp_w);
    } else {
        double ico[LET_PP][3];
        fmk_let_icosahedron(ico);
        memcpy(l->pp_u, ico, sizeof ico);
        for (int k = 0; k < LET_PP; k++)
            l->pp_w[k] = four_pi / LET_PP;
    }
    return 0;
}

/* The length the moments are taken in: the root's radius, so that r^n / (n+m)! of every node
 * (at most 21 levels below) stays within the doubles' range at any order and in any units. */
static double moment_unit(const fmk_mpi_let *l)
{
    return l->n_node > 0 && l->node[0].a > 0 ? l->node[0].a : 1;
}

/* Whether a node's moments come straight from its sources (P2M, about 4.5 (p+1)^2 operations
 * a source) rather than from its children's (M2M, about (p+1)^4 a child): the leaves, and the
 * nodes whose sources cost less that way. */
static int direct_p2m(const let_node *nd, int order)
{
    const int64_t p1 = order + 1;
    return nd->n_child == 0 || 9 * (nd->end - nd->begin) <= 2 * nd->n_child * p1 * p1;
}

/* The nodes whose moments the rows need: those sent, and the descendants of those computed by
 * M2M; slot[i] the node's moments' place, -1 where not needed, level[i] its depth. The count
 * of places. */
static int64_t needed_nodes(const fmk_mpi_let *l, int64_t n_sent, int32_t *slot, int8_t *level)
{
    const int32_t nn = l->n_node;
    for (int32_t i = 0; i < nn; i++)
        slot[i] = -1;
    for (int64_t k = 0; k < n_sent; k++)
        slot[l->nidx[k]] = 0;
    int64_t count = 0;
    level[0] = 0;
    for (int32_t i = 0; i < nn; i++) { /* children after their parents */
        const let_node *nd = &l->node[i];
        const int through = slot[i] >= 0 && !direct_p2m(nd, l->order);
        for (int32_t c = nd->child; c < nd->child + nd->n_child; c++) {
            level[c] = (int8_t)(level[i] + 1);
            if (through)
                slot[c] = 0;
        }
        if (slot[i] >= 0)
            slot[i] = (int32_t)count++;
    }
    return count;
}

/* The moments of the needed nodes (nd vectors each, T terms a vector), deepest level first:
 * P2M from their sources (qs: charges in key order, row per source) where direct_p2m, else
 * M2M from the children. -1 when out of memory. */
static int needed_moments(const fmk_mpi_let *l, int64_t nd, const double *qs, const int32_t *slot,
                          const int8_t *level, double complex *mom)
{
    const int order = l->order, T = fmk_let_pseudo_terms(order);
    const size_t per = (size_t)nd * (size_t)T;
    const double unit = moment_unit(l);
    int rc = 0;
    int32_t end = l->n_node;
    while (end > 0) { /* one level: [begin, end), breadth first */
        int32_t begin = end - 1;
        while (begin > 0 && level[begin - 1] == level[end - 1])
            begin--;
#pragma omp parallel reduction(min : rc) if (end - begin > 16 && l->n_own > 65536)
        {
            double complex *work = malloc((size_t)fmk_let_pseudo_work(order) * sizeof *work);
            if (!work)
                rc = -1;
#pragma omp for schedule(dynamic, 16)
            for (int32_t i = begin; i < end; i++) {
                if (slot[i] < 0 || !work)
                    continue;
                const let_node *n = &l->node[i];
                double complex *m = mom + (size_t)slot[i] * per;
                memset(m, 0, per * sizeof *m);
                if (direct_p2m(n, order)) {
                    fmk_let_p2m(order, n->c, unit, n->end - n->begin, l->xs + 3 * n->begin, nd,
                                qs + n->begin * nd, m, work);
                    continue;
                }
                for (int32_t c = n->child; c < n->child + n->n_child; c++) {
                    const let_node *ch = &l->node[c];
                    const double t[3] = {(ch->c[0] - n->c[0]) / unit, (ch->c[1] - n->c[1]) / unit,
                                         (ch->c[2] - n->c[2]) / unit};
                    for (int64_t v = 0; v < nd; v++)
                        fmk_let_m2m(order, t, mom + (size_t)slot[c] * per + (size_t)v * T,
                                    m + (size_t)v * T, work);
                }
            }
            free(work);
        }
        end = begin;
    }
    return rc;
}

int fmk_let_pseudo_rows(const fmk_mpi_let *l, int P, int64_t nd, const double *q, const double *qs,
                        double *send)
{
    const int order = l->order, K = l->n_pp, T = fmk_let_pseudo_terms(order);
    int64_t n_sent = 0;
    for (int r = 0; r < P; r++)
        n_sent += l->ncount[r];
    int32_t *slot = malloc((size_t)(l->n_node > 0 ? l->n_node : 1) * sizeof *slot);
    int8_t *level = malloc((size_t)(l->n_node > 0 ? l->n_node : 1));
    double complex *B = malloc((size_t)K * (size_t)T * sizeof *B);
    double complex *work = malloc((size_t)fmk_let_pseudo_work(order) * sizeof *work);
    const int64_t n_need = slot && level ? needed_nodes(l, n_sent, slot, level) : 0;
    double complex *mom =
        malloc((size_t)(n_need > 0 ? n_need : 1) * (size_t)nd * (size_t)T * sizeof *mom);
    int rc = slot && level && B && work && mom ? 0 : -1;
    if (rc == 0 && n_need > 0)
        rc = needed_moments(l, nd, qs, slot, level, mom);
    if (rc == 0)
        fmk_let_pseudo_table(order, K, l->pp_u, l->pp_w, B, work);
    free(level), free(work);
    int64_t ip = 0, in = 0, o = 0; /* this destination's first particle, node and row */
    for (int r = 0; r < P && rc == 0; r++) {
        const int64_t np = l->pcount[r], nn = l->ncount[r];
#pragma omp parallel for schedule(static) if (np > 65536)
        for (int64_t k = 0; k < np; k++)
            memcpy(send + (o + k) * nd, q + l->pidx[ip + k] * nd, (size_t)nd * sizeof *send);
        o += np;
#pragma omp parallel for schedule(static) if (nn > 64)
        for (int64_t k = 0; k < nn; k++) {
            const int32_t i = l->nidx[in + k];
            for (int64_t v = 0; v < nd; v++)
                fmk_let_pseudo_charges(order, K, B, l->node[i].a / moment_unit(l),
                                       mom + ((size_t)slot[i] * (size_t)nd + (size_t)v) * T,
                                       send + (o + K * k) * nd + v, nd);
        }
        ip += np, in += nn, o += (int64_t)K * nn;
    }
    free(slot), free(B), free(mom);
    return rc;
}
