/* power.c -- the linear matter power spectrum: the Eisenstein & Hu (1998, ApJ 496, 605)
 * transfer function with baryon acoustic oscillations, P(k) = A k^n_s T(k)^2 and A from
 * sigma_8 (docs/cosmology.md). Wavenumbers in 1/Mpc (no h); equation numbers are the paper's. */
#include <math.h>

#include "sim/cosmo/cosmo.h"

#define PI 3.14159265358979323846

/* Eq. 19 with q = k / (13.41 k_eq) (eq. 10): the CDM-like shape T0~(k, alpha_c, beta_c) */
static double t0_tilde(double q, double alpha_c, double beta_c)
{
    const double l = log(2.718281828459045 + 1.8 * beta_c * q);
    const double c = 14.2 / alpha_c + 386 / (1 + 69.9 * pow(q, 1.08)); /* eq. 20 */
    return l / (l + c * q * q);
}

void fmk_cosmo_spectrum_init(fmk_cosmo_spectrum *s, const fmk_sim_cosmology *c)
{
    s->c = *c;
    const double h2 = c->h * c->h, theta = c->t_cmb / 2.7, theta2 = theta * theta;
    const double wm = c->omega_m * h2, wb = c->omega_b * h2;
    s->f_b = c->omega_b / c->omega_m;
    s->f_c = 1 - s->f_b;
    const double z_eq = 2.50e4 * wm / (theta2 * theta2); /* eq. 2 */
    s->k_eq = 7.46e-2 * wm / theta2;                     /* eq. 3 */
    const double b1 = 0.313 * pow(wm, -0.419) * (1 + 0.607 * pow(wm, 0.674));
    const double b2 = 0.238 * pow(wm, 0.223);
    const double z_d =
        1291 * pow(wm, 0.251) / (1 + 0.659 * pow(wm, 0.828)) * (1 + b1 * pow(wb, b2)); /* eq. 4 */
    /* eq. 5: R = 31.5 omega_b h^2 theta^-4 (z / 1000)^-1 */
    const double r_d = 31.5 * wb / (theta2 * theta2) * 1000 / z_d;
    const double r_eq = 31.5 * wb / (theta2 * theta2) * 1000 / z_eq;
    /* eq. 6, the sound horizon at the drag epoch; its limit without baryons where wb = 0 */
    if (wb > 0) {
        const double num = sqrt(1 + r_d) + sqrt(r_d + r_eq), den = 1 + sqrt(r_eq);
        s->s = 2 / (3 * s->k_eq) * sqrt(6 / r_eq) * log1p((num - den) / den);
    } else {
        s->s = 2 / (3 * s->k_eq) * sqrt(6.0) * (sqrt(1 + z_eq / z_d) - 1);
    }
    s->k_silk = 1.6 * pow(wb, 0.52) * pow(wm, 0.73) * (1 + pow(10.4 * wm, -0.95)); /* eq. 7 */
    /* eq. 11 */
    const double a1 = pow(46.9 * wm, 0.670) * (1 + pow(32.1 * wm, -0.532));
    const double a2 = pow(12.0 * wm, 0.424) * (1 + pow(45.0 * wm, -0.582));
    s->alpha_c = pow(a1, -s->f_b) * pow(a2, -s->f_b * s->f_b * s->f_b);
    /* eq. 12 */
    const double bb1 = 0.944 / (1 + pow(458 * wm, -0.708));
    const double bb2 = pow(0.395 * wm, -0.0266);
    s->beta_c = 1 / (1 + bb1 * (pow(s->f_c, bb2) - 1));
    /* eqs. 14-15 */
    const double y = (1 + z_eq) / (1 + z_d), sy = sqrt(1 + y);
    const double g = y * (-6 * sy + (2 + 3 * y) * log((sy + 1) / (sy - 1)));
    s->alpha_b = 2.07 * s->k_eq * s->s * pow(1 + r_d, -0.75) * g;
    s->beta_node = 8.41 * pow(wm, 0.435);                                      /* eq. 23 */
    s->beta_b = 0.5 + s->f_b + (3 - 2 * s->f_b) * sqrt(pow(17.2 * wm, 2) + 1); /* eq. 24 */
    s->amplitude = 1;
    const double sig = fmk_cosmo_spectrum_sigma(s, 8 / c->h);
    s->amplitude = c->sigma_8 * c->sigma_8 / (sig * sig);
}

double fmk_cosmo_spectrum_transfer(const fmk_cosmo_spectrum *s, double k)
{
    if (!(k > 0))
        return 1;
    const double q = k / (13.41 * s->k_eq), ks = k * s->s;
    /* eqs. 17-18: the CDM part */
    const double f = 1 / (1 + pow(ks / 5.4, 4));
    const double t_c = f * t0_tilde(q, 1, s->beta_c) + (1 - f) * t0_tilde(q, s->alpha_c, s->beta_c);
    if (s->f_b == 0)
        return t_c;
    /* eqs. 21-22: the baryon part, with the node shift s~ */
    const double bn = s->beta_node / ks;
    const double s_tilde = s->s / cbrt(1 + bn * bn * bn);
    const double x = k * s_tilde, j0 = x < 1e-4 ? 1 - x * x / 6 : sin(x) / x;
    const double bk = s->beta_b / ks;
    const double t_b = (t0_tilde(q, 1, 1) / (1 + pow(ks / 5.2, 2)) +
                        s->alpha_b / (1 + bk * bk * bk) * exp(-pow(k / s->k_silk, 1.4))) *
                       j0;
    return s->f_b * t_b + s->f_c * t_c; /* eq. 16 */
}

double fmk_cosmo_spectrum_power(const fmk_cosmo_spectrum *s, double k)
{
    if (!(k > 0))
        return 0;
    const double t = fmk_cosmo_spectrum_transfer(s, k);
    return s->amplitude * pow(k, s->c.n_s) * t * t;
}

/* The top-hat window 3 (sin x - x cos x) / x^3 (its series where that cancels). */
static double top_hat(double x)
{
    if (x < 1e-2) {
        const double x2 = x * x;
        return 1 - x2 / 10 + x2 * x2 / 280;
    }
    return 3 * (sin(x) - x * cos(x)) / (x * x * x);
}

/* sigma^2(R) = int dln k k^3 P(k) W(kR)^2 / (2 pi^2) in x = k R from 1e-6 to 500 by
 * Gauss-Legendre (10 points) on panels of ln x no wider than 0.05 and than 1 / x (the
 * window's oscillations); the tail beyond, about 1e-11 of the whole (W^2 ~ 4.5 / x^4). */
double fmk_cosmo_spectrum_sigma(const fmk_cosmo_spectrum *s, double radius)
{
    static const double node[5] = {0.1488743389816312, 0.4333953941292472, 0.6794095682990244,
                                   0.8650633666889845, 0.9739065285171717};
    static const double weight[5] = {0.2955242247147529, 0.2692667193099963, 0.2190863625159820,
                                     0.1494513491505806, 0.0666713443086881};
    double sum = 0, lx = log(1e-6);
    const double end = log(500.0);
    while (lx < end) {
        const double width = fmin(fmin(0.05, 1 / exp(lx)), end - lx), mid = lx + 0.5 * width;
        for (int j = 0; j < 10; j++) {
            const double t = mid + 0.5 * width * (j < 5 ? -node[j] : node[j - 5]);
            const double x = exp(t), k = x / radius, w = top_hat(x);
            sum += 0.5 * width * weight[j % 5] * k * k * k * fmk_cosmo_spectrum_power(s, k) * w * w;
        }
        lx += width;
    }
    return sqrt(sum / (2 * PI * PI));
}

double fmk_cosmo_transfer(const fmk_sim_cosmology *c, double k)
{
    fmk_cosmo_spectrum s;
    fmk_cosmo_spectrum_init(&s, c);
    return fmk_cosmo_spectrum_transfer(&s, k);
}

double fmk_cosmo_power(const fmk_sim_cosmology *c, double k)
{
    fmk_cosmo_spectrum s;
    fmk_cosmo_spectrum_init(&s, c);
    return fmk_cosmo_spectrum_power(&s, k);
}

double fmk_cosmo_sigma(const fmk_sim_cosmology *c, double radius)
{
    fmk_cosmo_spectrum s;
    fmk_cosmo_spectrum_init(&s, c);
    return fmk_cosmo_spectrum_sigma(&s, radius);
}
