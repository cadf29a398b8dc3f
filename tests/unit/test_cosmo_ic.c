/* test_cosmo_ic.c -- cosmological initial conditions (fmk_sim_ic_cosmo*, src/sim/cosmo/field.c
 * and lpt.c):
 *
 *   - the default case's size (radius 45 Mpc, n 2874551, wmap): the count within 1% of n and
 *     the particle mass rho_m spacing^3;
 *   - bad input, each with FMK_ERR_NULL or FMK_ERR_ARG and a message;
 *   - on a 64^3 periodic grid (fmk_cosmo_ic_linear, before the sphere cut): the power of delta
 *     in shells of k against D^2 P(k) within 4 sigma of cosmic variance (a DFT written here,
 *     no FFTW), the rms displacement against the sum of D^2 P(k) / k^2 over the grid's modes,
 *     the periodic mean of the displacement zero;
 *   - the same seed gives the same arrays bit for bit, another seed others; momenta
 *     p = a^2 H f D1 Psi1; the sphere's mean momentum small against the rms;
 *   - 2LPT: the change of the positions small, and its divergence (finite differences on the
 *     lattice) anti-correlated with the second-order source built from the first-order
 *     displacements, as D2 < 0 demands. */
#include <math.h>

#include "sim/cosmo/lpt.h"
#include "sim_check.h"

#define TWO_PI 6.28318530717958647692

static void test_size(void)
{
    check_context("the default size");
    fmk_sim_cosmo_ic p;
    fmk_sim_cosmo_ic_default(&p);
    int64_t n = 0, g = 0;
    double mass = 0, box = 0;
    CHECK_SIM(fmk_sim_ic_cosmo_size(&p, &n, &mass, &g, &box), NULL);
    printf("radius 45, n 2874551: %lld particles of %.6f 1e10 Msun, grid %lld^3, box %.3f Mpc\n",
           (long long)n, mass, (long long)g, box);
    CHECK_LE(fabs((double)n / 2874551.0 - 1), 0.01, "particle count / n - 1");
    const double d = cbrt(4.18879020478639098 * 45 * 45 * 45 / 2874551.0);
    CHECK_LE(fabs(mass / (fmk_cosmo_rho_m(&p.cosmo) * d * d * d) - 1), 1e-12,
             "mass / (rho_m d^3) - 1");
    CHECK_LE(fabs(mass / 0.55 - 1), 0.03, "mass near 0.55e10 Msun");
    CHECK(g >= 2 * 45 / d + 4 && box == g * d);
    CHECK_SIM(fmk_sim_ic_cosmo_size(&p, NULL, NULL, NULL, NULL), NULL);
}

static void test_bad(void)
{
    check_context("bad input");
    fmk_sim_cosmo_ic p;
    double one[3];
    CHECK(fmk_sim_ic_cosmo_size(NULL, NULL, NULL, NULL, NULL) == FMK_ERR_NULL);
    for (int i = 0; i < 9; i++) {
        fmk_sim_cosmo_ic_default(&p);
        switch (i) {
        case 0: p.radius = 0; break;
        case 1: p.radius = NAN; break;
        case 2: p.n = 0; break;
        case 3: p.z_start = 0; break;
        case 4: p.lpt_order = 3; break;
        case 5: p.spacing = 0.01; break; /* 9004 points per side */
        case 6: p.cosmo.omega_m = -1; break;
        case 7: p.spacing = -1; break;
        case 8: p.threads = -2; break;
        }
        const fmk_status st = fmk_sim_ic_cosmo_size(&p, NULL, NULL, NULL, NULL);
        CHECK_MSG(st == FMK_ERR_ARG && fmk_sim_last_error(NULL)[0], "case %d: status %d", i,
                  (int)st);
        CHECK(fmk_sim_ic_cosmo(&p, 1, one, one, one) == FMK_ERR_ARG);
        if (i == 5)
            printf("a message: %s\n", fmk_sim_last_error(NULL));
    }
    fmk_sim_cosmo_ic_default(&p);
    p.radius = 5, p.spacing = 1;
    CHECK(fmk_sim_ic_cosmo(&p, 1, one, one, one) == FMK_ERR_ARG); /* n is not the size's */
    printf("a message: %s\n", fmk_sim_last_error(NULL));
    CHECK(fmk_sim_ic_cosmo(&p, 1, NULL, one, one) == FMK_ERR_NULL);
}

/* In place: the 3D DFT (forward, unnormalised) of a g^3 complex array, axis by axis. */
static void dft3(int64_t g, double *re, double *im)
{
    double *cr = malloc(sizeof(double) * (size_t)g), *ci = malloc(sizeof(double) * (size_t)g);
    double *tr = malloc(sizeof(double) * (size_t)g), *ti = malloc(sizeof(double) * (size_t)g);
    for (int64_t k = 0; k < g; k++)
        cr[k] = cos(TWO_PI * (double)k / (double)g), ci[k] = -sin(TWO_PI * (double)k / (double)g);
    const int64_t stride[3] = {g * g, g, 1};
    for (int axis = 0; axis < 3; axis++)
        for (int64_t a = 0; a < g; a++)
            for (int64_t b = 0; b < g; b++) {
                /* the line through the other two axes' indices a, b */
                const int64_t s = stride[axis], o1 = stride[(axis + 1) % 3],
                              o2 = stride[(axis + 2) % 3];
                const int64_t base = a * o1 + b * o2;
                for (int64_t k = 0; k < g; k++) {
                    double sr = 0, si = 0;
                    for (int64_t x = 0; x < g; x++) {
                        const int64_t t = (k * x) % g;
                        const double vr = re[base + x * s], vi = im[base + x * s];
                        sr += vr * cr[t] - vi * ci[t];
                        si += vr * ci[t] + vi * cr[t];
                    }
                    tr[k] = sr, ti[k] = si;
                }
                for (int64_t k = 0; k < g; k++)
                    re[base + k * s] = tr[k], im[base + k * s] = ti[k];
            }
    free(cr), free(ci), free(tr), free(ti);
}

static double kof(int64_t i, int64_t g, double box)
{
    return TWO_PI / box * (double)(i <= g / 2 ? i : i - g);
}

static void test_spectrum(void)
{
    check_context("the periodic field");
    fmk_sim_cosmo_ic p;
    fmk_sim_cosmo_ic_default(&p);
    p.radius = 60, p.spacing = 2, p.seed = 7;
    int64_t g;
    double box;
    CHECK_SIM(fmk_sim_ic_cosmo_size(&p, NULL, NULL, &g, &box), NULL);
    CHECK(g == 64);
    const int64_t g3 = g * g * g;
    double *delta = malloc(sizeof(double) * (size_t)g3), *im = calloc((size_t)g3, sizeof(double));
    double *psi = malloc(sizeof(double) * (size_t)(3 * g3));
    CHECK_SIM(fmk_cosmo_ic_linear(&p, delta, psi), NULL);
    const double a = 1 / (1 + p.z_start), d1 = fmk_cosmo_growth(&p.cosmo, a);
    /* rms displacement and its mean against the sum over the modes (the independent half:
     * kz > 0, or kz = 0 with (kx, ky) in a half plane) */
    fmk_cosmo_spectrum s;
    fmk_cosmo_spectrum_init(&s, &p.cosmo);
    double psi2 = 0, mean[3] = {0, 0, 0};
    for (int c = 0; c < 3; c++)
        for (int64_t m = 0; m < g3; m++)
            psi2 += psi[c * g3 + m] * psi[c * g3 + m], mean[c] += psi[c * g3 + m];
    psi2 /= (double)g3;
    double expect = 0, var = 0;
    const double v = box * box * box;
    for (int64_t x = 0; x < g; x++)
        for (int64_t y = 0; y < g; y++)
            for (int64_t z = 0; z < g; z++) {
                if (x == g / 2 || y == g / 2 || z == g / 2 || (x == 0 && y == 0 && z == 0))
                    continue;
                const double kx = kof(x, g, box), ky = kof(y, g, box), kz = kof(z, g, box);
                const double k2 = kx * kx + ky * ky + kz * kz;
                const double t = d1 * d1 * fmk_cosmo_spectrum_power(&s, sqrt(k2)) / (k2 * v);
                expect += t;
                var += t * t; /* |W|^2 is exponential: each Hermitian pair counts twice */
            }
    const double sd = sqrt(2 * var);
    printf("rms displacement^2 %.6e Mpc^2, expected %.6e (sd %.2e); means %.1e %.1e %.1e\n", psi2,
           expect, sd, mean[0] / g3, mean[1] / g3, mean[2] / g3);
    CHECK_LE(fabs(psi2 - expect) / sd, 4, "rms displacement^2 against the mode sum, in sigma");
    for (int c = 0; c < 3; c++)
        CHECK_LE(fabs(mean[c]) / (double)g3, 1e-12 * sqrt(psi2), "periodic mean of Psi");
    /* the power in shells of width 2 k_f up to the Nyquist frequency */
    dft3(g, delta, im);
    enum { SHELLS = 16 };
    double sum[SHELLS] = {0}, ref[SHELLS] = {0};
    int64_t count[SHELLS] = {0};
    const double kf = TWO_PI / box, cell = p.spacing * p.spacing * p.spacing;
    for (int64_t x = 0; x < g; x++)
        for (int64_t y = 0; y < g; y++)
            for (int64_t z = 1; z < g / 2; z++) { /* kz in 1..g/2-1: independent modes */
                if (x == g / 2 || y == g / 2)
                    continue;
                const double kx = kof(x, g, box), ky = kof(y, g, box), kz = kof(z, g, box);
                const double k = sqrt(kx * kx + ky * ky + kz * kz);
                const int b = (int)(k / (2 * kf));
                if (b >= SHELLS)
                    continue;
                const int64_t m = (x * g + y) * g + z;
                sum[b] += (delta[m] * delta[m] + im[m] * im[m]) * cell / (double)g3;
                ref[b] += d1 * d1 * fmk_cosmo_spectrum_power(&s, k);
                count[b]++;
            }
    double chi2 = 0, worst = 0;
    int used = 0;
    for (int b = 0; b < SHELLS; b++) {
        if (count[b] == 0)
            continue;
        const double r = sum[b] / ref[b], sig = (r - 1) * sqrt((double)count[b]);
        printf("shell %2d: k %.4f /Mpc, %6lld modes, P measured / expected %.4f (%+.2f sigma)\n", b,
               (b + 0.5) * 2 * kf, (long long)count[b], r, sig);
        chi2 += sig * sig, used++;
        worst = fmax(worst, fabs(sig));
    }
    printf("chi^2 %.2f for %d shells\n", chi2, used);
    CHECK_LE(worst, 4, "a shell's |P measured / expected - 1| in sigma");
    CHECK_LE(chi2, used + 5 * sqrt(2.0 * used), "chi^2 of the shells");
    free(delta), free(im), free(psi);
}

/* runs fmk_sim_ic_cosmo; returns n (0 on failure) with new arrays */
static int64_t make(const fmk_sim_cosmo_ic *p, double **mass, double **pos, double **vel)
{
    int64_t n = 0;
    CHECK_SIM(fmk_sim_ic_cosmo_size(p, &n, NULL, NULL, NULL), NULL);
    *mass = malloc(sizeof(double) * (size_t)n);
    *pos = malloc(sizeof(double) * (size_t)(3 * n));
    *vel = malloc(sizeof(double) * (size_t)(3 * n));
    CHECK_SIM(fmk_sim_ic_cosmo(p, n, *mass, *pos, *vel), NULL);
    return n;
}

/* the lattice index of each particle (the rule of field.c), -1 outside */
static int64_t *lattice_map(int64_t g, double radius, double spacing)
{
    int64_t *map = malloc(sizeof(int64_t) * (size_t)(g * g * g)), n = 0;
    const double limit = (2 * radius / spacing) * (2 * radius / spacing);
    for (int64_t m = 0; m < g * g * g; m++) {
        const int64_t i = 2 * (m / (g * g)) + 1 - g, j = 2 * (m / g % g) + 1 - g,
                      k = 2 * (m % g) + 1 - g;
        map[m] = (double)(i * i + j * j + k * k) < limit ? n++ : -1;
    }
    return map;
}

static void test_particles(void)
{
    check_context("particles");
    fmk_sim_cosmo_ic p;
    fmk_sim_cosmo_ic_default(&p);
    p.radius = 40, p.spacing = 1.25, p.seed = 3, p.threads = 2; /* g = 72 */
    double *m[4], *x[4], *v[4];
    const int64_t n = make(&p, &m[0], &x[0], &v[0]);
    make(&p, &m[1], &x[1], &v[1]);
    p.seed = 4;
    make(&p, &m[2], &x[2], &v[2]);
    p.seed = 3, p.lpt_order = 2;
    make(&p, &m[3], &x[3], &v[3]);
    CHECK(n > 1000);
    CHECK(!memcmp(x[0], x[1], sizeof(double) * (size_t)(3 * n)) &&
          !memcmp(v[0], v[1], sizeof(double) * (size_t)(3 * n)) &&
          !memcmp(m[0], m[1], sizeof(double) * (size_t)n));
    CHECK(memcmp(x[0], x[2], sizeof(double) * (size_t)(3 * n)));
    int64_t g;
    double mass;
    fmk_sim_ic_cosmo_size(&p, NULL, &mass, &g, NULL);
    const fmk_sim_cosmology *c = &p.cosmo;
    const double a = 1 / (1 + p.z_start), d1 = fmk_cosmo_growth(c, a),
                 f1 = fmk_cosmo_growth_rate(c, a);
    const double a2hf = a * a * fmk_cosmo_hubble(c, a) * f1;
    int64_t *map = lattice_map(g, p.radius, p.spacing);
    double mean[3] = {0, 0, 0}, rms = 0, vratio = 0, dpsi = 0, dx2 = 0, qmax = 0;
    for (int64_t q = 0; q < g * g * g; q++) {
        const int64_t i = map[q];
        if (i < 0)
            continue;
        const double lat[3] = {(q / (g * g) + 0.5 - g / 2.0) * p.spacing,
                               (q / g % g + 0.5 - g / 2.0) * p.spacing,
                               (q % g + 0.5 - g / 2.0) * p.spacing};
        for (int k = 0; k < 3; k++) {
            const double s1 = x[0][3 * i + k] - lat[k];
            mean[k] += v[0][3 * i + k] / (double)n;
            rms += v[0][3 * i + k] * v[0][3 * i + k] / (double)n;
            vratio =
                fmax(vratio, fabs(v[0][3 * i + k] - a2hf * s1) / (1e-300 + fabs(a2hf * s1) + 1e-3));
            dpsi += s1 * s1;
            dx2 += (x[3][3 * i + k] - x[0][3 * i + k]) * (x[3][3 * i + k] - x[0][3 * i + k]);
        }
        qmax = fmax(qmax, sqrt(lat[0] * lat[0] + lat[1] * lat[1] + lat[2] * lat[2]));
    }
    rms = sqrt(rms);
    const double bulk = sqrt(mean[0] * mean[0] + mean[1] * mean[1] + mean[2] * mean[2]);
    printf(
        "%lld particles, mass %.4f; rms momentum %.3f km/s, mean %.3f km/s; rms D1 Psi1 %.4f Mpc; "
        "2LPT change rms %.2e Mpc\n",
        (long long)n, mass, rms, bulk, sqrt(dpsi / n), sqrt(dx2 / n));
    CHECK(m[0][0] == mass && m[0][n - 1] == mass && qmax < p.radius);
    CHECK_LE(vratio, 1e-9, "p - a^2 H f D1 Psi1, relative (Zel'dovich)");
    CHECK_LE(bulk / rms, 0.5, "the sphere's mean momentum / rms");
    CHECK(dx2 > 0);
    CHECK_LE(sqrt(dx2 / dpsi), 0.05, "2LPT change / first-order displacement (rms)");
    /* 2LPT's sign: div (x2 - x1) = D2 S and S from the first-order displacements by central
     * differences; D2 < 0 makes them anti-correlated */
    double cross = 0, s2 = 0, d2 = 0;
    for (int64_t q = 0; q < g * g * g; q++) {
        const int64_t i = map[q];
        const int64_t step[3] = {g * g, g, 1};
        int inside = i >= 0;
        for (int k = 0; k < 3 && inside; k++)
            inside = q + step[k] < g * g * g && q - step[k] >= 0 && map[q + step[k]] >= 0 &&
                     map[q - step[k]] >= 0;
        if (!inside)
            continue;
        double hess[3][3], div = 0;
        for (int k = 0; k < 3; k++) {
            const int64_t up = map[q + step[k]], dn = map[q - step[k]];
            for (int j = 0; j < 3; j++) /* d Psi_j / d q_k = -phi_jk */
                hess[j][k] =
                    -((x[0][3 * up + j] - x[0][3 * dn + j]) / (2 * p.spacing) - (k == j ? 1 : 0));
            div += ((x[3][3 * up + k] - x[0][3 * up + k]) - (x[3][3 * dn + k] - x[0][3 * dn + k])) /
                   (2 * p.spacing);
        }
        double src = 0;
        for (int j = 0; j < 3; j++)
            for (int k = j + 1; k < 3; k++)
                src += hess[j][j] * hess[k][k] - hess[j][k] * hess[k][j];
        cross += div * src, s2 += src * src, d2 += div * div;
    }
    const double corr = cross / sqrt(s2 * d2);
    printf(
        "2LPT: correlation of div(x2 - x1) with the source %.3f, slope %.3f (D2 / D1^2 ~ -3/7)\n",
        corr, cross / s2);
    CHECK_LE(corr, -0.5, "correlation of div(x2 - x1) with the second-order source");
    const double om_a = c->omega_m / (a * a * a) / pow(fmk_cosmo_hubble(c, a) / fmk_cosmo_h0(c), 2);
    CHECK_LE(fabs(cross / s2 / (-3.0 / 7.0 * pow(om_a, -1.0 / 143.0)) - 1), 0.1,
             "slope / (D2 / D1^2) - 1 (finite differences)");
    (void)d1;
    for (int r = 0; r < 4; r++)
        free(m[r]), free(x[r]), free(v[r]);
    free(map);
}

int main(void)
{
    test_size();
    test_bad();
    fmk_sim_cosmo_ic p;
    fmk_sim_cosmo_ic_default(&p);
    p.radius = 5, p.spacing = 1;
    int64_t n;
    fmk_sim_ic_cosmo_size(&p, &n, NULL, NULL, NULL);
    double *b = malloc(sizeof(double) * (size_t)(7 * n));
    const fmk_status st = fmk_sim_ic_cosmo(&p, n, b, b + n, b + 4 * n);
    free(b);
    if (st == FMK_ERR_UNAVAILABLE) {
        printf("no FFTW in this build: %s\n", fmk_sim_last_error(NULL));
        check_summary();
        return 77;
    }
    test_spectrum();
    test_particles();
    return check_summary();
}
