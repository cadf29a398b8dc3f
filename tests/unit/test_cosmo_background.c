/* test_cosmo_background.c -- the background cosmology (src/sim/cosmo/background.c):
 *
 *   - Einstein-de Sitter (omega_m 1): D = a, f = 1, t = 2 a^(3/2) / (3 H0), the drift
 *     2 (a0^(-1/2) - a1^(-1/2)) / H0 and the kick 2 (a1^(1/2) - a0^(1/2)) / H0;
 *   - flat LCDM: t(a) = 2 / (3 H0 sqrt(OL)) asinh(sqrt(OL / Om) a^(3/2)); D(a) against a
 *     Runge-Kutta integration of the growth equation; f against finite differences of ln D;
 *   - open and closed models: t, D, drift, kick against brute-force composite Simpson sums in
 *     long double (2^17 panels in u = sqrt(a));
 *   - a_of_time(time(a)) = a to 1e-13;
 *   - the presets and bad parameters (with their messages). */
#include <math.h>

#include "sim/cosmo/cosmo.h"
#include "sim_check.h"

static fmk_sim_cosmology model(double om, double ol)
{
    fmk_sim_cosmology c;
    fmk_sim_cosmology_preset(&c, "wmap");
    c.omega_m = om;
    c.omega_lambda = ol;
    c.omega_b = 0.1 * om;
    return c;
}

static double rel(double x, double ref)
{
    return fabs(x - ref) / fabs(ref);
}

static void test_eds(void)
{
    check_context("Einstein-de Sitter");
    const fmk_sim_cosmology c = model(1, 0);
    CHECK(fmk_cosmo_check(&c, NULL, 0) == FMK_OK);
    const double h0 = fmk_cosmo_h0(&c);
    double worst_d = 0, worst_f = 0, worst_t = 0, worst_dk = 0;
    for (double a = 1e-4; a <= 2; a *= 1.37) {
        worst_d = fmax(worst_d, rel(fmk_cosmo_growth(&c, a), a));
        worst_f = fmax(worst_f, rel(fmk_cosmo_growth_rate(&c, a), 1));
        worst_t = fmax(worst_t, rel(fmk_cosmo_time(&c, a), 2 / (3 * h0) * pow(a, 1.5)));
        const double a1 = a * 1.9;
        worst_dk =
            fmax(worst_dk, rel(fmk_cosmo_drift(&c, a, a1), 2 / h0 * (1 / sqrt(a) - 1 / sqrt(a1))));
        worst_dk = fmax(worst_dk, rel(fmk_cosmo_kick(&c, a, a1), 2 / h0 * (sqrt(a1) - sqrt(a))));
        worst_dk = fmax(worst_dk, rel(-fmk_cosmo_kick(&c, a1, a), 2 / h0 * (sqrt(a1) - sqrt(a))));
    }
    printf("EdS: D %.1e, f %.1e, t %.1e, drift/kick %.1e\n", worst_d, worst_f, worst_t, worst_dk);
    CHECK_LE(worst_d, 1e-14, "D(a) / a - 1");
    CHECK_LE(worst_f, 1e-13, "f - 1");
    CHECK_LE(worst_t, 1e-14, "t(a), relative");
    CHECK_LE(worst_dk, 1e-13, "drift and kick, relative");
    CHECK(fmk_cosmo_drift(&c, 0.5, 0.5) == 0);
    CHECK_LE(rel(fmk_cosmo_hubble(&c, 0.25), h0 * 8), 1e-15, "H(1/4) = 8 H0");
    /* rho_crit = 3 H0^2 / (8 pi G) = 2.775e11 h^2 Msun / Mpc^3 */
    CHECK_LE(rel(fmk_cosmo_rho_m(&c), 27.7536627 * c.h * c.h), 1e-6, "rho_m (1e10 Msun/Mpc^3)");
}

/* The growth equation in x = ln a, y = (D, dD/dx):
 * D'' + (2 + dln E / dx) D' - 1.5 omega_m / (a^3 E^2) D = 0 */
static void growth_rhs(const fmk_sim_cosmology *c, double x, const double *y, double *dy)
{
    const double a = exp(x), ok = 1 - c->omega_m - c->omega_lambda;
    const double e2 = c->omega_m / (a * a * a) + ok / (a * a) + c->omega_lambda;
    const double dlne = -(3 * c->omega_m / (a * a * a) + 2 * ok / (a * a)) / (2 * e2);
    dy[0] = y[1];
    dy[1] = -(2 + dlne) * y[1] + 1.5 * c->omega_m / (a * a * a * e2) * y[0];
}

static void test_flat(void)
{
    check_context("flat LCDM");
    const fmk_sim_cosmology c = model(0.3, 0.7);
    const double h0 = fmk_cosmo_h0(&c), ol = 0.7, om = 0.3;
    double worst_t = 0, worst_inv = 0, worst_f = 0;
    for (double a = 1e-3; a <= 3; a *= 1.29) {
        const double t = 2 / (3 * h0 * sqrt(ol)) * asinh(sqrt(ol / om) * pow(a, 1.5));
        worst_t = fmax(worst_t, rel(fmk_cosmo_time(&c, a), t));
        worst_inv = fmax(worst_inv, rel(fmk_cosmo_a_of_time(&c, fmk_cosmo_time(&c, a)), a));
        /* f = dln D / dln a by a fourth-order central difference */
        const double s = 1e-3;
        const double d[4] = {
            log(fmk_cosmo_growth(&c, a * exp(-2 * s))), log(fmk_cosmo_growth(&c, a * exp(-s))),
            log(fmk_cosmo_growth(&c, a * exp(s))), log(fmk_cosmo_growth(&c, a * exp(2 * s)))};
        const double fd = (d[0] - 8 * d[1] + 8 * d[2] - d[3]) / (12 * s);
        worst_f = fmax(worst_f, rel(fmk_cosmo_growth_rate(&c, a), fd));
    }
    printf("flat: t %.1e, a(t(a)) %.1e, f vs differences %.1e\n", worst_t, worst_inv, worst_f);
    CHECK_LE(worst_t, 1e-14, "t(a) against the closed form, relative");
    CHECK_LE(worst_inv, 1e-13, "a_of_time(time(a)) / a - 1");
    CHECK_LE(worst_f, 1e-9, "f against finite differences");
    /* D(a) / D(1) from RK4 started in the matter era (D = a, D' = a there) */
    double x = log(1e-4), y[2] = {1e-4, 1e-4};
    const int steps = 20000;
    const double dx = -x / steps;
    double d_half = 0;
    for (int i = 0; i < steps; i++) {
        double k1[2], k2[2], k3[2], k4[2], t[2];
        growth_rhs(&c, x, y, k1);
        for (int j = 0; j < 2; j++)
            t[j] = y[j] + 0.5 * dx * k1[j];
        growth_rhs(&c, x + 0.5 * dx, t, k2);
        for (int j = 0; j < 2; j++)
            t[j] = y[j] + 0.5 * dx * k2[j];
        growth_rhs(&c, x + 0.5 * dx, t, k3);
        for (int j = 0; j < 2; j++)
            t[j] = y[j] + dx * k3[j];
        growth_rhs(&c, x + dx, t, k4);
        for (int j = 0; j < 2; j++)
            y[j] += dx / 6 * (k1[j] + 2 * k2[j] + 2 * k3[j] + k4[j]);
        x += dx;
        if (i == steps / 2 - 1)
            d_half = y[0]; /* a = exp(x) = 1e-2 */
    }
    const double ratio = d_half / y[0], a_half = exp(log(1e-4) / 2);
    printf("flat: D(0.01) %.12f, from the ODE %.12f; f(1) %.6f\n", fmk_cosmo_growth(&c, a_half),
           ratio, fmk_cosmo_growth_rate(&c, 1));
    CHECK_LE(rel(fmk_cosmo_growth(&c, a_half), ratio), 1e-8, "D(0.01) against the growth equation");
    CHECK_LE(rel(fmk_cosmo_growth_rate(&c, 1), y[1] / y[0]), 1e-8,
             "f(1) against the growth equation");
    /* f(1) ~ omega_m^0.55 (Linder 2005) to a percent */
    CHECK_LE(rel(fmk_cosmo_growth_rate(&c, 1), pow(0.3, 0.55)), 0.01, "f(1) against omega_m^0.55");
}

/* int_{u0}^{u1} 2 u^power P(u^2)^(-m/2) du by composite Simpson in long double */
static long double simpson(const fmk_sim_cosmology *c, int power, int m, double u0, double u1)
{
    const int n = 1 << 17;
    const long double h = ((long double)u1 - u0) / n, ok = 1.0L - c->omega_m - c->omega_lambda;
    long double sum = 0;
    for (int i = 0; i <= n; i++) {
        const long double u = u0 + h * i, a = u * u;
        const long double p = c->omega_m + ok * a + c->omega_lambda * a * a * a;
        long double f = 2 / sqrtl(p);
        for (int k = 1; k < m; k += 2)
            f /= p;
        for (int k = 0; k < power; k++)
            f *= u;
        for (int k = 0; k > power; k--)
            f /= u;
        sum += f * (i == 0 || i == n ? 1 : (i & 1) ? 4 : 2);
    }
    return sum * h / 3;
}

static void test_curved(void)
{
    const double models[2][2] = {{0.3, 0}, {0.5, 0.8}}; /* open; closed (omega_k -0.3) */
    for (int m = 0; m < 2; m++) {
        const fmk_sim_cosmology c = model(models[m][0], models[m][1]);
        check_context("%s: omega_m %g, omega_lambda %g", m ? "closed" : "open", c.omega_m,
                      c.omega_lambda);
        CHECK(fmk_cosmo_check(&c, NULL, 0) == FMK_OK);
        const double h0 = fmk_cosmo_h0(&c);
        const long double g1 = simpson(&c, 4, 3, 0, 1);
        double worst = 0;
        for (double a = 0.01; a <= 1.5; a *= 1.7) {
            const double u = sqrt(a), a1 = fmin(1.2 * a, 1.6);
            worst = fmax(worst, rel(fmk_cosmo_time(&c, a), (double)(simpson(&c, 2, 1, 0, u) / h0)));
            const double e = sqrt(c.omega_m / (a * a * a) +
                                  (1 - c.omega_m - c.omega_lambda) / (a * a) + c.omega_lambda);
            worst = fmax(worst,
                         rel(fmk_cosmo_growth(&c, a), (double)(e * simpson(&c, 4, 3, 0, u) / g1)));
            worst = fmax(worst, rel(fmk_cosmo_drift(&c, a, a1),
                                    (double)(simpson(&c, -2, 1, u, sqrt(a1)) / h0)));
            worst = fmax(worst, rel(fmk_cosmo_kick(&c, a, a1),
                                    (double)(simpson(&c, 0, 1, u, sqrt(a1)) / h0)));
            worst = fmax(worst, rel(fmk_cosmo_a_of_time(&c, fmk_cosmo_time(&c, a)), a));
        }
        printf("%s: worst relative difference %.1e\n", m ? "closed" : "open", worst);
        CHECK_LE(worst, 1e-13, "t, D, drift, kick, a(t(a)) against brute force");
    }
}

static void test_bad(void)
{
    check_context("presets and bad parameters");
    fmk_sim_cosmology c;
    CHECK(fmk_sim_cosmology_preset(&c, NULL) == FMK_OK && c.omega_m == 0.3 && c.sigma_8 == 0.9);
    CHECK(fmk_sim_cosmology_preset(&c, "planck18") == FMK_OK && c.h == 0.6766 && c.t_cmb == 2.7255);
    CHECK(fmk_cosmo_check(&c, NULL, 0) == FMK_OK);
    CHECK(fmk_sim_cosmology_preset(&c, "nope") == FMK_ERR_ARG);
    CHECK(strstr(fmk_sim_last_error(NULL), "planck18") != NULL);
    CHECK(fmk_sim_cosmology_preset(NULL, "wmap") == FMK_ERR_NULL);
    char msg[256];
    CHECK(fmk_cosmo_check(NULL, msg, sizeof msg) == FMK_ERR_NULL && msg[0]);
    struct {
        int field;
        double value;
        const char *word;
    } bad[] = {{0, 0, "omega_m"},    {0, NAN, "finite"}, {1, -0.1, "omega_lambda"},
               {2, 0.3, "omega_b"},  {2, -1, "omega_b"}, {3, 0, "h"},
               {4, INFINITY, "n_s"}, {5, 0, "sigma_8"},  {6, -2, "t_cmb"},
               {1, 2.5, "bounce"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fmk_sim_cosmology_preset(&c, "wmap");
        double *f[7] = {&c.omega_m, &c.omega_lambda, &c.omega_b, &c.h,
                        &c.n_s,     &c.sigma_8,      &c.t_cmb};
        *f[bad[i].field] = bad[i].value;
        if (bad[i].field == 1 && bad[i].value > 2)
            c.omega_m = 0.1, c.omega_b = 0.01;
        msg[0] = 0;
        CHECK_MSG(fmk_cosmo_check(&c, msg, sizeof msg) == FMK_ERR_ARG, "case %zu accepted", i);
        CHECK_MSG(strstr(msg, bad[i].word) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, msg,
                  bad[i].word);
    }
    printf("a message: %s\n", msg);
}

int main(void)
{
    test_eds();
    test_flat();
    test_curved();
    test_bad();
    return check_summary();
}
