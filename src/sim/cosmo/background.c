/* background.c -- the Friedmann-Lemaitre background (matter, Lambda, curvature; no
 * radiation): H(a), cosmic time and its inverse, the linear growth factor and rate, the
 * leapfrog's drift and kick factors, the preset parameter sets (docs/cosmology.md).
 *
 * With E(a)^2 = omega_m / a^3 + omega_k / a^2 + omega_lambda and
 * P(a) = a^3 E(a)^2 = omega_m + omega_k a + omega_lambda a^3, every integral here is
 * int a^(j/2) P(a)^(-m/2) da; the substitution a = u^2 makes the integrands smooth
 * polynomial-rooted functions of u down to u = 0, where adaptive Gauss-Kronrod (7-15) converges
 * to rounding. */
#include <math.h>
#include <string.h>

#include "sim/cosmo/cosmo.h"
#include "sim/sim_internal.h"

static double omega_k(const fmk_sim_cosmology *c)
{
    return 1 - c->omega_m - c->omega_lambda;
}

/* a^3 E(a)^2 */
static double poly(const fmk_sim_cosmology *c, double a)
{
    return c->omega_m + omega_k(c) * a + c->omega_lambda * a * a * a;
}

static double e_of_a(const fmk_sim_cosmology *c, double a)
{
    return sqrt(poly(c, a) / (a * a * a));
}

fmk_status fmk_cosmo_check(const fmk_sim_cosmology *c, char *msg, size_t cap)
{
    char scratch[8];
    if (!msg || cap == 0)
        msg = scratch, cap = sizeof scratch;
    msg[0] = 0;
    if (!c) {
        snprintf(msg, cap, "the cosmology is NULL");
        return FMK_ERR_NULL;
    }
    const struct {
        const char *name;
        double value;
    } all[7] = {{"omega_m", c->omega_m}, {"omega_lambda", c->omega_lambda},
                {"omega_b", c->omega_b}, {"h", c->h},
                {"n_s", c->n_s},         {"sigma_8", c->sigma_8},
                {"t_cmb", c->t_cmb}};
    for (int i = 0; i < 7; i++)
        if (!isfinite(all[i].value)) {
            snprintf(msg, cap, "cosmology: %s = %g; it must be finite", all[i].name, all[i].value);
            return FMK_ERR_ARG;
        }
    const char *bad = NULL;
    if (!(c->omega_m > 0))
        bad = "omega_m must be > 0";
    else if (!(c->omega_lambda >= 0))
        bad = "omega_lambda must be >= 0";
    else if (!(c->omega_b >= 0 && c->omega_b < c->omega_m))
        bad = "omega_b must be in [0, omega_m)";
    else if (!(c->h > 0))
        bad = "h must be > 0";
    else if (!(c->sigma_8 > 0))
        bad = "sigma_8 must be > 0";
    else if (!(c->t_cmb > 0))
        bad = "t_cmb must be > 0";
    if (bad) {
        snprintf(msg, cap,
                 "cosmology (omega_m %g, omega_lambda %g, omega_b %g, h %g, sigma_8 %g, "
                 "t_cmb %g): %s",
                 c->omega_m, c->omega_lambda, c->omega_b, c->h, c->sigma_8, c->t_cmb, bad);
        return FMK_ERR_ARG;
    }
    /* P(a) on (0, 1]: P(0) = omega_m > 0 and P(1) = 1; a minimum inside only where
     * omega_k < 0 < omega_lambda, at P'(a) = omega_k + 3 omega_lambda a^2 = 0. */
    const double ok = omega_k(c);
    if (ok < 0 && c->omega_lambda > 0) {
        const double a_min = sqrt(-ok / (3 * c->omega_lambda));
        if (a_min < 1 && !(poly(c, a_min) > 0)) {
            snprintf(msg, cap,
                     "cosmology: omega_m %g with omega_lambda %g has H(a)^2 <= 0 at a = %g "
                     "(a bounce before today); lower omega_lambda or raise omega_m",
                     c->omega_m, c->omega_lambda, a_min);
            return FMK_ERR_ARG;
        }
    }
    return FMK_OK;
}

double fmk_cosmo_h0(const fmk_sim_cosmology *c)
{
    return 100 * c->h;
}

double fmk_cosmo_hubble(const fmk_sim_cosmology *c, double a)
{
    return fmk_cosmo_h0(c) * e_of_a(c, a);
}

double fmk_cosmo_rho_m(const fmk_sim_cosmology *c)
{
    const double h0 = fmk_cosmo_h0(c);
    return 3 * h0 * h0 * c->omega_m / (8 * 3.14159265358979323846 * FMK_SIM_COSMO_G);
}

/* ---- adaptive Gauss-Kronrod 7-15 ---- */

/* The integrand in u = sqrt(a): 2 u^(2 j + 1) ... written as u^power P(u^2)^(-half_m / 2) * 2. */
typedef struct integrand {
    const fmk_sim_cosmology *c;
    int power;  /* of u, after da = 2 u du */
    int half_m; /* P^(-half_m / 2) */
} integrand;

static double eval(const integrand *f, double u)
{
    const double p = poly(f->c, u * u);
    double v = 2 / sqrt(p);
    if (f->half_m == 3)
        v /= p;
    for (int k = 0; k < f->power; k++)
        v *= u;
    for (int k = 0; k > f->power; k--)
        v /= u;
    return v;
}

/* Kronrod nodes (the odd-indexed ones are the 7-point Gauss nodes) and weights. */
static const double xgk[8] = {
    0.991455371120812639206854697526329, 0.949107912342758524526189684047851,
    0.864864423359769072789712788640926, 0.741531185599394439863864773280788,
    0.586087235467691130294144845693013, 0.405845151377397166906606412076961,
    0.207784955007898467600689403773245, 0.0};
static const double wgk[8] = {
    0.022935322010529224963732008058970, 0.063092092629978553290700663189204,
    0.104790010322250183839876322541518, 0.140653259715525918745189590510238,
    0.169004726639267902826583426598550, 0.190350578064785409913256402421014,
    0.204432940075298892414161999234649, 0.209482141084727828012999174891714};
static const double wg[4] = {
    0.129484966168869693270611432679082, 0.279705391489276667901467771423780,
    0.381830050505118944950369775488975, 0.417959183673469387755102040816327};

static double gk15(const integrand *f, double lo, double hi, double *diff)
{
    const double mid = 0.5 * (lo + hi), half = 0.5 * (hi - lo);
    const double fc = eval(f, mid);
    double k = wgk[7] * fc, g = wg[3] * fc;
    for (int j = 0; j < 7; j++) {
        const double dx = half * xgk[j];
        const double s = eval(f, mid - dx) + eval(f, mid + dx);
        k += wgk[j] * s;
        if (j & 1)
            g += wg[j / 2] * s;
    }
    *diff = fabs(half * (k - g));
    return half * k;
}

/* Splits until the Kronrod and Gauss estimates of a piece agree to tol times its share of the
 * whole: Kronrod's own error is then far below tol (it is exact to degree 22, Gauss to 13). */
static double adapt(const integrand *f, double lo, double hi, double whole, double width, int depth)
{
    double diff;
    const double k = gk15(f, lo, hi, &diff);
    /* the floor 1e-14 |k|: a piece whose estimates differ by rounding alone is done */
    if (diff <= fmax(2e-15 * whole * (hi - lo) / width, 1e-14 * fabs(k)) || depth >= 30)
        return k;
    const double mid = 0.5 * (lo + hi);
    return adapt(f, lo, mid, whole, width, depth + 1) + adapt(f, mid, hi, whole, width, depth + 1);
}

/* int_{u0}^{u1} of the integrand, u0 < u1 */
static double integrate(const fmk_sim_cosmology *c, int power, int half_m, double u0, double u1)
{
    const integrand f = {c, power, half_m};
    double diff;
    const double first = gk15(&f, u0, u1, &diff);
    if (diff <= 1e-16 * fabs(first))
        return first;
    /* a coarse estimate of the whole on 8 pieces, for the tolerance */
    double whole = 0;
    for (int i = 0; i < 8; i++)
        whole += fabs(gk15(&f, u0 + (u1 - u0) * i / 8, u0 + (u1 - u0) * (i + 1) / 8, &diff));
    return adapt(&f, u0, u1, whole, u1 - u0, 0);
}

double fmk_cosmo_time(const fmk_sim_cosmology *c, double a)
{
    if (!(a > 0))
        return a == 0 ? 0 : NAN;
    /* da / (a H) = a^(1/2) P^(-1/2) da / H0 = 2 u^2 P^(-1/2) du / H0 */
    return integrate(c, 2, 1, 0, sqrt(a)) / fmk_cosmo_h0(c);
}

double fmk_cosmo_a_of_time(const fmk_sim_cosmology *c, double t)
{
    if (!(t > 0))
        return t == 0 ? 0 : NAN;
    /* bracket [lo, hi] with t(lo) <= t <= t(hi); start from Einstein-de Sitter */
    const double h0 = fmk_cosmo_h0(c);
    double a = pow(1.5 * h0 * sqrt(c->omega_m) * t, 2.0 / 3.0);
    double lo = 0, hi = INFINITY;
    for (int it = 0; it < 200; it++) {
        if (!(poly(c, a) > 0)) /* beyond a recollapse or bounce: no a has this t */
            return NAN;
        const double r = fmk_cosmo_time(c, a) - t;
        if (r == 0)
            return a;
        if (r < 0)
            lo = a;
        else
            hi = a;
        double next = a - r * a * fmk_cosmo_hubble(c, a); /* dt/da = 1 / (a H) */
        if (!(next > lo && next < hi))
            next = isfinite(hi) ? 0.5 * (lo + hi) : 2 * a;
        if (fabs(next - a) <= 2e-16 * a || fabs(r) <= 1e-16 * t)
            return next;
        a = next;
    }
    return a;
}

/* int_0^a da' / (a' E)^3 = int a^(3/2) P^(-3/2) da = int 2 u^4 P^(-3/2) du */
static double growth_integral(const fmk_sim_cosmology *c, double a)
{
    return integrate(c, 4, 3, 0, sqrt(a));
}

double fmk_cosmo_growth(const fmk_sim_cosmology *c, double a)
{
    if (!(a > 0))
        return a == 0 ? 0 : NAN;
    /* Heath (1977): D proportional to E(a) int_0^a da' / (a' E)^3; E(1) = 1 */
    return e_of_a(c, a) * growth_integral(c, a) / growth_integral(c, 1);
}

double fmk_cosmo_growth_rate(const fmk_sim_cosmology *c, double a)
{
    if (!(a > 0))
        return a == 0 ? 1 : NAN;
    /* f = dln E / dln a + a (a E)^(-3) / I(a), and dln E / dln a =
     * -(3 omega_m / a^3 + 2 omega_k / a^2) / (2 E^2) */
    const double e = e_of_a(c, a), e2 = e * e;
    const double dlne = -(3 * c->omega_m / (a * a * a) + 2 * omega_k(c) / (a * a)) / (2 * e2);
    const double ae = a * e;
    return dlne + a / (ae * ae * ae * growth_integral(c, a));
}

/* int_{a0}^{a1} in u = sqrt(a), with the sign of a1 - a0 */
static double signed_integral(const fmk_sim_cosmology *c, int power, double a0, double a1)
{
    if (!(a0 > 0 && a1 > 0))
        return NAN;
    if (a0 == a1)
        return 0;
    const double u0 = sqrt(fmin(a0, a1)), u1 = sqrt(fmax(a0, a1));
    const double v = integrate(c, power, 1, u0, u1) / fmk_cosmo_h0(c);
    return a1 > a0 ? v : -v;
}

double fmk_cosmo_drift(const fmk_sim_cosmology *c, double a0, double a1)
{
    /* da / (a^3 H) = a^(-3/2) P^(-1/2) da / H0 = 2 u^(-2) P^(-1/2) du / H0 */
    return signed_integral(c, -2, a0, a1);
}

double fmk_cosmo_kick(const fmk_sim_cosmology *c, double a0, double a1)
{
    /* da / (a^2 H) = a^(-1/2) P^(-1/2) da / H0 = 2 P^(-1/2) du / H0 */
    return signed_integral(c, 0, a0, a1);
}

fmk_status fmk_sim_cosmology_preset(fmk_sim_cosmology *c, const char *name)
{
    if (!c)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_cosmology_preset: c is NULL");
    if (!name || !name[0] || !strcmp(name, "wmap")) {
        /* the concordance model of the WMAP era (Spergel et al. 2003 rounded), as in
         * Hamada et al. (2009) */
        *c = (fmk_sim_cosmology){0.3, 0.7, 0.04, 0.7, 1.0, 0.9, 2.7255};
        return FMK_OK;
    }
    if (!strcmp(name, "planck18")) {
        /* Planck 2018 VI, table 2, TT,TE,EE+lowE+lensing+BAO; T_CMB: Fixsen (2009) */
        *c = (fmk_sim_cosmology){0.3111, 0.6889, 0.04897, 0.6766, 0.9665, 0.8102, 2.7255};
        return FMK_OK;
    }
    return fmk_sim_fail(NULL, FMK_ERR_ARG,
                        "fmk_sim_cosmology_preset: unknown name \"%.64s\"; the presets are "
                        "\"wmap\" (the default) and \"planck18\"",
                        name);
}
