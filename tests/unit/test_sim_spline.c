/* test_sim_spline.c -- GADGET's spline softening (src/sim/spline.h, spline.c) against a
 * brute-force sum written from another statement of the same kernel: Hernquist & Katz (1989,
 * ApJS 70, 419, eqs. A1-A2), in u = 2 r / h on [0, 2), in long double; they are one kernel
 * (Springel 2005's W2 with h = 2.8 s is theirs with 2 epsilon = h).
 *
 *   - the correction alone: continuity at u = 1/2 and 1, phi_s(0) = 1/s, and g = -(1/r)
 *     dphi_s/dr by central differences;
 *   - the driver's accelerations and potentials at creation (laplace plan + correction) for a
 *     scalar s and for softening lengths per particle (pairs take the larger h), method direct
 *     (to rounding), tree (theta 0.5) and fmm (eps 1e-6) (to their accuracy);
 *   - coincident particles: each gets phi_s(0) = 1/s from the other and no force;
 *   - the cell list's hash: clusters far apart whose cells share buckets. */
#include "sim/spline.h"
#include "sim_check.h"

/* Hernquist & Katz (1989) A1-A2: phi (like 1/r) and g (acceleration per unit mass and offset). */
static void hk(long double r, long double h, long double *phi, long double *g)
{
    const long double dih = 2 / h, u = r * dih;
    if (u < 1) {
        *phi = dih * (1.4L - u * u * 2 / 3 + 0.3L * u * u * u * u - 0.1L * u * u * u * u * u);
        *g = dih * dih * dih * (4.0L / 3 - 1.2L * u * u + 0.5L * u * u * u);
    } else if (u < 2) {
        *phi = -1 / (15 * r) + dih * (1.6L - u * u * 4 / 3 + u * u * u - 0.3L * u * u * u * u +
                                      u * u * u * u * u / 30);
        *g = -1 / (15 * r * r * r) +
             dih * dih * dih * (8.0L / 3 - 3 * u + 1.2L * u * u - u * u * u / 6);
    } else {
        *phi = 1 / r;
        *g = 1 / (r * r * r);
    }
}

static void test_kernel(void)
{
    check_context("the spline's formulas");
    const double h = 0.7;
    double worst = 0;
    for (int k = 1; k < 1000; k++) {
        const double r = h * k / 1000.0;
        double dphi, dg;
        fmk_sim_spline_delta(r, h, &dphi, &dg);
        long double phi, g;
        hk(r, h, &phi, &g);
        /* the corrections against the reference's, relative to the larger term (phi_s - 1/r
         * cancels 1/r at small r) */
        const long double rinv = 1 / (long double)r, r3inv = rinv * rinv * rinv;
        worst = fmax(worst, (double)(fabsl(dphi - (phi - rinv)) / fmaxl(phi, rinv)));
        worst = fmax(worst, (double)(fabsl(dg - (g - r3inv)) / fmaxl(g, r3inv)));
    }
    CHECK_LE(worst, 1e-14, "GADGET's polynomials against Hernquist & Katz's, relative");
    double p0, g0;
    fmk_sim_spline_delta(0, h, &p0, &g0);
    CHECK_LE(fabs(p0 * h / 2.8 - 1), 1e-15, "phi_s(0) h / 2.8 - 1");
    double a, b, ga, gb;
    fmk_sim_spline_delta(0.5 * h * (1 - 1e-12), h, &a, &ga);
    fmk_sim_spline_delta(0.5 * h * (1 + 1e-12), h, &b, &gb);
    CHECK_LE(fabs(a - b) + fabs(ga - gb) * h * h, 1e-9, "jumps at u = 1/2");
    fmk_sim_spline_delta(h * (1 - 1e-12), h, &a, &ga);
    CHECK_LE(fabs(a) + fabs(ga) * h * h, 1e-9, "the correction at u = 1 (Newtonian beyond)");
    worst = 0;
    for (int k = 1; k < 100; k++) {
        const double r = h * (k + 0.5) / 100.0, d = 1e-6 * h;
        double pp, pm, gr, gd;
        fmk_sim_spline_delta(r + d, h, &pp, &gd);
        fmk_sim_spline_delta(r - d, h, &pm, &gd);
        fmk_sim_spline_delta(r, h, &gd, &gr);
        const double dphi_dr = ((pp + 1 / (r + d)) - (pm + 1 / (r - d))) / (2 * d);
        worst = fmax(worst, fabs(-dphi_dr / r / (gr + 1 / (r * r * r)) - 1));
    }
    CHECK_LE(worst, 1e-6, "g = -(1/r) dphi/dr (central differences)");
}

/* The reference sum: acc and pot (psi = G sum m phi_s) at every particle. */
static void reference(const particles *p, const double *soft, double s, double *acc, double *pot)
{
    for (int64_t i = 0; i < p->n; i++) {
        long double a[3] = {0, 0, 0}, q = 0;
        const double hi = 2.8 * (soft ? soft[i] : s);
        for (int64_t j = 0; j < p->n; j++) {
            if (j == i)
                continue;
            const double hj = 2.8 * (soft ? soft[j] : s), h = hi > hj ? hi : hj;
            long double d[3], r2 = 0;
            for (int k = 0; k < 3; k++) {
                d[k] = (long double)p->pos[3 * j + k] - p->pos[3 * i + k];
                r2 += d[k] * d[k];
            }
            long double phi, g;
            if (r2 == 0) {
                q += p->mass[j] * 2.8L / h;
                continue;
            }
            hk(sqrtl(r2), h, &phi, &g);
            q += p->mass[j] * phi;
            for (int k = 0; k < 3; k++)
                a[k] += p->mass[j] * g * d[k];
        }
        pot[i] = (double)q;
        for (int k = 0; k < 3; k++)
            acc[3 * i + k] = (double)a[k];
    }
}

/* Relative l2 errors of the driver's acc and pot against the reference. */
static void compare(const char *what, const particles *p, const double *soft, double s,
                    fmk_method method, double tol)
{
    check_context("spline forces, %s, %s", what, fmk_method_name(method));
    fmk_sim_opts o = sim_opts(method, s, 0.01);
    o.softening = FMK_SIM_SOFT_SPLINE;
    fmk_sim *sim = NULL;
    CHECK_SIM(fmk_sim_create(&sim, p->n, p->mass, p->pos, p->vel, soft, NULL, &o), NULL);
    if (!sim)
        return;
    const int64_t n = p->n;
    double *acc = malloc(3 * n * sizeof *acc), *pot = malloc(n * sizeof *pot);
    double *ra = malloc(3 * n * sizeof *ra), *rp = malloc(n * sizeof *rp);
    fmk_sim_get_state(sim, NULL, NULL, NULL, acc, pot);
    reference(p, soft, s, ra, rp);
    double ea = 0, na = 0, ep = 0, np = 0;
    for (int64_t i = 0; i < 3 * n; i++)
        ea += (acc[i] - ra[i]) * (acc[i] - ra[i]), na += ra[i] * ra[i];
    for (int64_t i = 0; i < n; i++)
        ep += (pot[i] - rp[i]) * (pot[i] - rp[i]), np += rp[i] * rp[i];
    printf("%-28s %-6s acceleration %.2e, potential %.2e (relative l2)\n", what,
           fmk_method_name(method), sqrt(ea / na), sqrt(ep / np));
    CHECK_LE(sqrt(ea / na), tol, "acceleration, relative l2");
    CHECK_LE(sqrt(ep / np), tol, "potential, relative l2");
    free(acc), free(pot), free(ra), free(rp);
    fmk_sim_destroy(sim);
}

int main(void)
{
    test_kernel();
    const int64_t n = 1500;
    particles p = particles_new(n);
    fmk_sim_ic_plummer(n, 77, p.mass, p.pos, p.vel);
    double *soft = malloc(n * sizeof *soft);
    for (int64_t i = 0; i < n; i++) /* 0.005 .. 0.08, a spread of 16 */
        soft[i] = 0.005 * pow(16.0, (double)((i * 7919) % n) / (double)n);
    const fmk_method methods[3] = {FMK_METHOD_DIRECT, FMK_METHOD_TREE, FMK_METHOD_FMM};
    const double tol[3] = {1e-13, 2e-3, 1e-5};
    for (int m = 0; m < 3; m++) {
        compare("one softening 0.03", &p, NULL, 0.03, methods[m], tol[m]);
        compare("softening per particle", &p, soft, 0, methods[m], tol[m]);
    }

    /* coincident particles, and clusters far apart (their cells share hash buckets) */
    particles q = particles_new(64);
    for (int i = 0; i < 64; i++) {
        q.mass[i] = 1.0 / 64;
        const double far = (i % 4) * 1e6;
        q.pos[3 * i] = far + 0.01 * (i / 4 % 4), q.pos[3 * i + 1] = 0.01 * (i / 16);
        q.pos[3 * i + 2] = i % 2 == 0 ? 0 : 0.004 * (i % 8);
        q.vel[3 * i] = q.vel[3 * i + 1] = q.vel[3 * i + 2] = 0;
    }
    q.pos[3 * 1] = q.pos[3 * 0], q.pos[3 * 1 + 1] = q.pos[3 * 0 + 1], q.pos[3 * 1 + 2] = 0;
    compare("coincident, far clusters", &q, NULL, 0.01, FMK_METHOD_DIRECT, 1e-12);
    particles_free(&q);
    particles_free(&p);
    free(soft);
    return check_summary();
}
