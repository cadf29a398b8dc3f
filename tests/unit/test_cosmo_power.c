/* test_cosmo_power.c -- the Eisenstein & Hu (1998, ApJ 496, 605) power spectrum
 * (src/sim/cosmo/power.c):
 *
 *   - T(k -> 0) -> 1 and P(0) = 0;
 *   - T(k) against a second implementation of the paper's equations written here in long
 *     double, term by term from eqs. 2-24 (no shared code);
 *   - the sound horizon against the paper's fit (eq. 26, good to 2% by E&H's own account);
 *   - omega_b -> 0: T approaches E&H's zero-baryon shape (eqs. 28-29) to 2%;
 *   - the wiggles: maxima of T / T_nowiggle (E&H eqs. 29-31, the smooth fit) spaced by
 *     2 pi / s, at k s near (2 m + 1/2) pi;
 *   - sigma(8/h Mpc) = sigma_8 to 1e-6 by a separate quadrature (trapezoid in ln k) of P(k). */
#include <math.h>

#include "sim/cosmo/cosmo.h"
#include "sim_check.h"

#define PI_L 3.14159265358979323846264338327950288L
#define M_PI_ 3.14159265358979323846
#define M_E_ 2.718281828459045

/* Eisenstein & Hu (1998) eqs. 2-24 again, in long double */
static long double eh_reference(const fmk_sim_cosmology *c, long double k, long double *sound)
{
    const long double th = c->t_cmb / 2.7L, om = c->omega_m, ob = c->omega_b, h = c->h;
    const long double omh2 = om * h * h, obh2 = ob * h * h, fb = ob / om, fc = (om - ob) / om;
    const long double zeq = 2.50e4L * omh2 * powl(th, -4), keq = 7.46e-2L * omh2 * powl(th, -2);
    const long double b1 = 0.313L * powl(omh2, -0.419L) * (1 + 0.607L * powl(omh2, 0.674L));
    const long double b2 = 0.238L * powl(omh2, 0.223L);
    const long double zd =
        1291 * powl(omh2, 0.251L) / (1 + 0.659L * powl(omh2, 0.828L)) * (1 + b1 * powl(obh2, b2));
    const long double rd = 31.5L * obh2 * powl(th, -4) / (zd / 1000),
                      req = 31.5L * obh2 * powl(th, -4) / (zeq / 1000);
    const long double s =
        2 / (3 * keq) * sqrtl(6 / req) * logl((sqrtl(1 + rd) + sqrtl(rd + req)) / (1 + sqrtl(req)));
    *sound = s;
    const long double ksilk =
        1.6L * powl(obh2, 0.52L) * powl(omh2, 0.73L) * (1 + powl(10.4L * omh2, -0.95L));
    const long double q = k / (13.41L * keq);
    const long double a1 = powl(46.9L * omh2, 0.670L) * (1 + powl(32.1L * omh2, -0.532L));
    const long double a2 = powl(12.0L * omh2, 0.424L) * (1 + powl(45.0L * omh2, -0.582L));
    const long double alpha_c = powl(a1, -fb) * powl(a2, -fb * fb * fb);
    const long double bc1 = 0.944L / (1 + powl(458 * omh2, -0.708L)),
                      bc2 = powl(0.395L * omh2, -0.0266L);
    const long double beta_c = 1 / (1 + bc1 * (powl(fc, bc2) - 1));
    long double t0[3]; /* T0~(k, 1, beta_c), T0~(k, alpha_c, beta_c), T0~(k, 1, 1) */
    const long double ac[3] = {1, alpha_c, 1}, bc[3] = {beta_c, beta_c, 1};
    for (int i = 0; i < 3; i++) {
        const long double l = logl(expl(1) + 1.8L * bc[i] * q);
        t0[i] = l / (l + (14.2L / ac[i] + 386 / (1 + 69.9L * powl(q, 1.08L))) * q * q);
    }
    const long double f = 1 / (1 + powl(k * s / 5.4L, 4));
    const long double tc = f * t0[0] + (1 - f) * t0[1];
    const long double y = (1 + zeq) / (1 + zd);
    const long double gy =
        y * (-6 * sqrtl(1 + y) + (2 + 3 * y) * logl((sqrtl(1 + y) + 1) / (sqrtl(1 + y) - 1)));
    const long double alpha_b = 2.07L * keq * s * powl(1 + rd, -0.75L) * gy;
    const long double beta_b = 0.5L + fb + (3 - 2 * fb) * sqrtl(powl(17.2L * omh2, 2) + 1);
    const long double beta_node = 8.41L * powl(omh2, 0.435L);
    const long double st = s / powl(1 + powl(beta_node / (k * s), 3), 1.0L / 3);
    const long double tb =
        (t0[2] / (1 + powl(k * s / 5.2L, 2)) +
         alpha_b / (1 + powl(beta_b / (k * s), 3)) * expl(-powl(k / ksilk, 1.4L))) *
        sinl(k * st) / (k * st);
    return fb * tb + fc * tc;
}

/* E&H eqs. 26 and 28-31: the sound horizon's fit and the smooth ("no-wiggle") shape; with
 * alpha_gamma = 1 (no baryons) it is the zero-baryon transfer function of eqs. 28-29. */
static double eh_smooth(const fmk_sim_cosmology *c, double k, int baryons, double *s_fit)
{
    const double th = c->t_cmb / 2.7, omh2 = c->omega_m * c->h * c->h,
                 obh2 = c->omega_b * c->h * c->h;
    const double fb = c->omega_b / c->omega_m;
    const double s = 44.5 * log(9.83 / omh2) / sqrt(1 + 10 * pow(obh2, 0.75));
    *s_fit = s;
    const double ag =
        baryons ? 1 - 0.328 * log(431 * omh2) * fb + 0.38 * log(22.3 * omh2) * fb * fb : 1;
    const double gamma = c->omega_m * c->h * (ag + (1 - ag) / (1 + pow(0.43 * k * s, 4)));
    const double q = k / c->h * th * th / gamma;
    const double l0 = log(2 * M_E_ + 1.8 * q), c0 = 14.2 + 731 / (1 + 62.5 * q);
    return l0 / (l0 + c0 * q * q);
}

static void test_reference(void)
{
    const char *names[2] = {"wmap", "planck18"};
    for (int m = 0; m < 2; m++) {
        fmk_sim_cosmology c;
        fmk_sim_cosmology_preset(&c, names[m]);
        check_context("%s", names[m]);
        fmk_cosmo_spectrum s;
        fmk_cosmo_spectrum_init(&s, &c);
        CHECK_LE(fabs(fmk_cosmo_transfer(&c, 1e-7) - 1), 1e-6, "T(1e-7 / Mpc) - 1");
        CHECK(fmk_cosmo_transfer(&c, 0) == 1 && fmk_cosmo_power(&c, 0) == 0);
        double worst = 0;
        long double sound = 0;
        for (double k = 1e-4; k < 50; k *= 1.13)
            worst = fmax(
                worst,
                fabs(fmk_cosmo_spectrum_transfer(&s, k) / (double)eh_reference(&c, k, &sound) - 1));
        double s_fit;
        eh_smooth(&c, 0.1, 1, &s_fit);
        printf(
            "%s: T against the long-double implementation %.1e; s = %.3f Mpc (eq. 26's fit %.3f); "
            "T(0.01) %.6f T(0.1) %.6f T(1) %.6f /Mpc\n",
            names[m], worst, s.s, s_fit, fmk_cosmo_spectrum_transfer(&s, 0.01),
            fmk_cosmo_spectrum_transfer(&s, 0.1), fmk_cosmo_spectrum_transfer(&s, 1));
        CHECK_LE(worst, 1e-11, "T against the reference, relative");
        CHECK_LE(fabs(s.s / (double)sound - 1), 1e-12, "s against the reference");
        CHECK_LE(fabs(s.s / s_fit - 1), 0.02, "s against the fit of eq. 26");
    }
}

static void test_no_baryons(void)
{
    check_context("omega_b -> 0");
    fmk_sim_cosmology c;
    fmk_sim_cosmology_preset(&c, "wmap");
    double worst[2] = {0, 0};
    for (int z = 0; z < 2; z++) {
        c.omega_b = z ? 0 : 1e-7;
        for (double k = 1e-3; k < 10; k *= 1.2) {
            double s_fit;
            const double t0 = eh_smooth(&c, k, 0, &s_fit);
            worst[z] = fmax(worst[z], fabs(fmk_cosmo_transfer(&c, k) / t0 - 1));
        }
    }
    printf("omega_b 1e-7 and 0 against E&H's zero-baryon shape: worst relative %.4f, %.4f\n",
           worst[0], worst[1]);
    /* two fits of one shape: E&H quote eq. 29 as good to a few percent; measured 0.84% */
    CHECK_LE(worst[0], 0.02, "T with omega_b 1e-7 against eq. 29");
    CHECK_LE(worst[1], 0.02, "T with omega_b 0 against eq. 29");
    c.omega_b = 1e-7;
    const double t_small = fmk_cosmo_transfer(&c, 0.3);
    c.omega_b = 0;
    CHECK_LE(fabs(t_small / fmk_cosmo_transfer(&c, 0.3) - 1), 1e-4, "omega_b 1e-7 against 0");
}

static void test_wiggles(void)
{
    check_context("wiggles");
    fmk_sim_cosmology c;
    fmk_sim_cosmology_preset(&c, "planck18");
    fmk_cosmo_spectrum s;
    fmk_cosmo_spectrum_init(&s, &c);
    double s_fit, prev[2] = {0, 0}, peaks[8];
    int n = 0;
    for (double k = 0.02; k < 0.35 && n < 8; k += 1e-4) {
        const double r = fmk_cosmo_spectrum_transfer(&s, k) / eh_smooth(&c, k, 1, &s_fit);
        if (prev[1] > prev[0] && prev[1] > r && k > 0.0202)
            peaks[n++] = k - 1e-4;
        prev[0] = prev[1], prev[1] = r;
    }
    CHECK(n >= 4);
    for (int i = 0; i < n; i++) {
        const double m = (peaks[i] * s.s / M_PI_ - 0.5) / 2;
        printf("peak %d: k %.4f /Mpc, k s / pi = %.3f (m = %.2f)%s", i, peaks[i],
               peaks[i] * s.s / M_PI_, m, i + 1 < n ? "; spacing k s / 2 pi " : "\n");
        if (i + 1 < n)
            printf("%.3f\n", (peaks[i + 1] - peaks[i]) * s.s / (2 * M_PI_));
        CHECK_LE(fabs(m - round(m)), 0.15, "k s / pi of a maximum against 2 m + 1/2");
        if (i + 1 < n)
            CHECK_LE(fabs((peaks[i + 1] - peaks[i]) * s.s / (2 * M_PI_) - 1), 0.1,
                     "spacing of maxima / (2 pi / s) - 1");
    }
}

static void test_sigma8(void)
{
    const char *names[2] = {"wmap", "planck18"};
    for (int m = 0; m < 2; m++) {
        fmk_sim_cosmology c;
        fmk_sim_cosmology_preset(&c, names[m]);
        check_context("sigma_8, %s", names[m]);
        fmk_cosmo_spectrum s;
        fmk_cosmo_spectrum_init(&s, &c);
        /* trapezoid in ln k over [1e-6, 1e3] / R with 2e5 points */
        const double r = 8 / c.h, l0 = log(1e-6 / r), l1 = log(1e3 / r);
        const int n = 200000;
        long double sum = 0;
        for (int i = 0; i <= n; i++) {
            const double k = exp(l0 + (l1 - l0) * i / n), x = k * r;
            const double w = 3 * (sin(x) - x * cos(x)) / (x * x * x);
            const double term =
                k * k * k * fmk_cosmo_spectrum_power(&s, k) * (x < 1e-3 ? 1 : w * w);
            sum += (i == 0 || i == n ? 0.5L : 1) * term;
        }
        const double sigma = sqrt((double)(sum * (l1 - l0) / n) / (2 * M_PI_ * M_PI_));
        printf("%s: sigma(8/h) %.10f by trapezoid, %.10f by the library; sigma_8 %g; A = %.6e "
               "Mpc^(3+n_s)\n",
               names[m], sigma, fmk_cosmo_sigma(&c, r), c.sigma_8, s.amplitude);
        CHECK_LE(fabs(sigma / c.sigma_8 - 1), 1e-6, "sigma(8/h) / sigma_8 - 1 (trapezoid)");
        CHECK_LE(fabs(fmk_cosmo_sigma(&c, r) / c.sigma_8 - 1), 1e-12,
                 "sigma(8/h) / sigma_8 - 1 (library)");
    }
}

int main(void)
{
    test_reference();
    test_no_baryons();
    test_wiggles();
    test_sigma8();
    return check_summary();
}
