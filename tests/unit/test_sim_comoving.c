/* test_sim_comoving.c -- comoving integration (docs/cosmology.md, "Comoving integration").
 *
 *   - linear growth in Einstein-de Sitter: a sphere of lattice particles at the mean density
 *     (masses rho_m d^3) with a uniform compression x = q (1 - eps D(a) / D(a0)), momenta of
 *     the growing mode p = a^2 dD/dt psi, integrated from a = 0.1 to 1 beside the same
 *     lattice unperturbed; the difference of the two, projected on q, grows as D = a within
 *     2% (a top-hat perturbation: linear theory is exact for it in the continuum, and the
 *     lattice's own residual forces cancel in the difference to first order), for the three
 *     step spacings; the Layzer-Irvine integral is kept within 1%;
 *   - restarts in memory continue bit for bit in comoving mode (tree, Plummer softening,
 *     comoving and physical: a new plan as s changes), the Layzer-Irvine state included;
 *   - listed output times: the run lands on each (fmk_sim_set_output_times);
 *   - the energy reference (fmk_sim_set_energy_reference): the unperturbed lattice's U makes
 *     W of the unperturbed lattice itself zero, restarts keep it bit for bit, and bad calls
 *     (a Newtonian run, another n, after a step, NaN) fail with a status;
 *   - bad options: NaN omega_m, negative h, the adaptive step, another G, no a_start. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <math.h>

#include "sim/sim_internal.h"
#include "sim_check.h"
#include "sim_io_check.h"

/* The lattice points q (spacing d) inside radius r, centred on the origin. */
static particles lattice_sphere(double r, double d, double rho)
{
    const int g = (int)ceil(2 * r / d) + 1;
    int64_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        particles p = pass ? particles_new(n) : (particles){0};
        int64_t k = 0;
        for (int i = 0; i < g; i++)
            for (int j = 0; j < g; j++)
                for (int l = 0; l < g; l++) {
                    const double q[3] = {d * (i - 0.5 * (g - 1)), d * (j - 0.5 * (g - 1)),
                                         d * (l - 0.5 * (g - 1))};
                    if (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] >= r * r)
                        continue;
                    if (pass) {
                        p.mass[k] = rho * d * d * d;
                        for (int c = 0; c < 3; c++)
                            p.pos[3 * k + c] = q[c], p.vel[3 * k + c] = 0;
                    }
                    k++;
                }
        if (pass)
            return p;
        n = k;
    }
    return (particles){0};
}

static fmk_sim_cosmology eds(void)
{
    fmk_sim_cosmology c;
    fmk_sim_cosmology_preset(&c, "wmap");
    c.omega_m = 1, c.omega_lambda = 0, c.omega_b = 0.04, c.h = 0.7;
    return c;
}

static fmk_sim_opts comoving_opts(fmk_method m, fmk_sim_spacing spacing, double a0, double a1,
                                  int64_t steps, double soft)
{
    fmk_sim_opts o = sim_opts(m, soft, 0);
    o.comoving = 1;
    o.cosmology = eds();
    o.spacing = spacing;
    o.a_start = a0;
    fmk_sim_comoving_dt(&o.cosmology, spacing, a0, a1, steps, &o.dt);
    return o;
}

/* sum (x_eps - x_0) . q / sum |q|^2 */
static double compression(fmk_sim *a, fmk_sim *b, const particles *q)
{
    double *xa = malloc(sizeof(double) * 3 * (size_t)q->n);
    double *xb = malloc(sizeof(double) * 3 * (size_t)q->n);
    fmk_sim_get_state(a, NULL, xa, NULL, NULL, NULL);
    fmk_sim_get_state(b, NULL, xb, NULL, NULL, NULL);
    double num = 0, den = 0;
    for (int64_t k = 0; k < 3 * q->n; k++)
        num += (xa[k] - xb[k]) * q->pos[k], den += q->pos[k] * q->pos[k];
    free(xa), free(xb);
    return num / den;
}

static void test_growth(fmk_sim_spacing spacing, const char *name)
{
    check_context("EdS linear growth, spacing %s", name);
    const fmk_sim_cosmology c = eds();
    const double rho =
        3 * pow(100 * c.h, 2) * c.omega_m / (8 * 3.14159265358979323846 * FMK_SIM_COSMO_G);
    const double r = 7.5, d = 1, a0 = 0.1, a1 = 1, eps = 1e-3;
    particles q = lattice_sphere(r, d, rho), p = particles_new(q.n);
    /* growing mode: x = q + D psi, D = a, psi = -eps q / a0; p = a^2 dD/dt psi = a^3 H psi */
    const double h0 = 100 * c.h, hub = h0 * pow(a0, -1.5);
    for (int64_t k = 0; k < 3 * q.n; k++) {
        p.pos[k] = q.pos[k] * (1 - eps);
        p.vel[k] = a0 * a0 * a0 * hub * (-eps * q.pos[k] / a0);
    }
    memcpy(p.mass, q.mass, sizeof(double) * (size_t)q.n);
    const int64_t steps = 64;
    fmk_sim_opts o = comoving_opts(FMK_METHOD_DIRECT, spacing, a0, a1, steps, 0.02 * d);
    fmk_sim *sp = NULL, *s0 = NULL;
    CHECK_SIM(fmk_sim_create(&sp, q.n, p.mass, p.pos, p.vel, NULL, NULL, &o), NULL);
    CHECK_SIM(fmk_sim_create(&s0, q.n, q.mass, q.pos, q.vel, NULL, NULL, &o), NULL);
    double worst = 0, li = 0;
    const double checks[3] = {0.3, 0.6, 1.0};
    for (int k = 0; k < 3 && sp && s0; k++) {
        CHECK_SIM(fmk_sim_run(sp, checks[k], 0), sp);
        CHECK_SIM(fmk_sim_run(s0, checks[k], 0), s0);
        fmk_sim_info info;
        fmk_sim_info_get(sp, &info);
        const double growth = compression(sp, s0, &q) / -eps, want = info.time / a0;
        worst = fmax(worst, fabs(growth / want - 1));
        li = fmax(li, fabs(info.layzer_irvine_error));
        printf("  %s: n %lld, a %.4f (step %lld): growth %.5f, D(a)/D(a0) %.5f, error %.2e; "
               "Layzer-Irvine %.2e\n",
               name, (long long)q.n, info.time, (long long)info.step, growth, want,
               growth / want - 1, info.layzer_irvine_error);
        CHECK(info.time == checks[k]);
    }
    CHECK_MSG(worst < 0.02, "linear growth off by %.3g", worst);
    CHECK_MSG(li < 0.01, "Layzer-Irvine error %.3g", li);
    fmk_sim_destroy(sp), fmk_sim_destroy(s0);
    particles_free(&p), particles_free(&q);
}

static int same_bits(const double *a, const double *b, int64_t n)
{
    return memcmp(a, b, sizeof(double) * (size_t)n) == 0;
}

static void test_restart(int physical)
{
    check_context("comoving restart in memory%s", physical ? ", physical softening" : "");
    const fmk_sim_cosmology c = eds();
    const double rho =
        3 * pow(100 * c.h, 2) * c.omega_m / (8 * 3.14159265358979323846 * FMK_SIM_COSMO_G);
    particles p = lattice_sphere(5, 1, rho);
    for (int64_t k = 0; k < 3 * p.n; k++) /* a perturbation with some shear */
        p.pos[k] += 0.01 * sin(1.3 * p.pos[3 * (k / 3) + (k + 1) % 3]);
    const int64_t n = p.n;
    fmk_sim_opts o = comoving_opts(FMK_METHOD_TREE, FMK_SIM_SPACING_TIME, 0.05, 1, 100, 0.05);
    if (physical) /* comoving s = min(0.01 / a, 0.1): it changes from a = 0.1 on */
        o.soft_mode = FMK_SIM_SOFT_PHYSICAL, o.soft = 0.01, o.soft_max_comoving = 0.1;
    fmk_sim *a = NULL, *b = NULL, *r = NULL;
    CHECK_SIM(fmk_sim_create(&a, n, p.mass, p.pos, p.vel, NULL, NULL, &o), NULL);
    CHECK_SIM(fmk_sim_create(&b, n, p.mass, p.pos, p.vel, NULL, NULL, &o), NULL);
    if (a && b) {
        CHECK_SIM(fmk_sim_run(a, 0, 30), a);
        CHECK_SIM(fmk_sim_run(b, 0, 12), b);
        fmk_sim_checkpoint cp;
        CHECK_SIM(fmk_sim_checkpoint_take(b, &cp), b);
        CHECK_SIM(fmk_sim_create_from_checkpoint(&r, &cp, NULL), NULL);
        fmk_sim_checkpoint_free(&cp);
        if (r) {
            CHECK_SIM(fmk_sim_run(r, 0, 18), r);
            CHECK(same_bits(a->pos, r->pos, 3 * n) && same_bits(a->vel, r->vel, 3 * n) &&
                  same_bits(a->acc, r->acc, 3 * n) && same_bits(a->pot, r->pot, n));
            fmk_sim_info ia, ir;
            fmk_sim_info_get(a, &ia), fmk_sim_info_get(r, &ir);
            CHECK(ia.time == ir.time && ia.step == ir.step && ia.dt == ir.dt);
            CHECK(ia.layzer_irvine == ir.layzer_irvine &&
                  ia.layzer_irvine_error == ir.layzer_irvine_error);
            CHECK(a->u == r->u);
            if (physical)
                CHECK(a->soft_now == 0.01 / ia.time && r->soft_now == a->soft_now);
            printf("  restart: a = %.6f after 30 steps (softening %g), bit for bit\n", ia.time,
                   a->soft_now);
        }
    }
    fmk_sim_destroy(a), fmk_sim_destroy(b), fmk_sim_destroy(r);
    particles_free(&p);
}

static void test_output_times(void)
{
    check_context("listed output times");
    const fmk_sim_cosmology c = eds();
    const double rho =
        3 * pow(100 * c.h, 2) * c.omega_m / (8 * 3.14159265358979323846 * FMK_SIM_COSMO_G);
    particles p = lattice_sphere(3, 1, rho);
    fmk_sim_opts o = comoving_opts(FMK_METHOD_DIRECT, FMK_SIM_SPACING_LOGA, 0.1, 1, 10, 0.05);
    fmk_sim *s = NULL;
    CHECK_SIM(fmk_sim_create(&s, p.n, p.mass, p.pos, p.vel, NULL, NULL, &o), NULL);
    if (s) {
        const double times[3] = {0.15, 0.5, 0.77};
        const double bad[2] = {0.5, 0.4};
        CHECK_SIM_STATUS(fmk_sim_set_output_times(s, 2, bad), FMK_ERR_ARG, s);
        CHECK_SIM(fmk_sim_set_output_times(s, 3, times), s);
        /* listed snapshots with nowhere to write them: refused, not silently dropped */
        CHECK_SIM_STATUS(fmk_sim_run(s, 0, 1), FMK_ERR_STATE, s);
        CHECK(s->step == 0);
        char dir[256];
        scratch_make(dir, sizeof dir, "comoving_times");
        CHECK_SIM(fmk_sim_set_output(s, dir, 0, 0, 0, 0), s);
        /* single steps land on each listed time (and write its snapshot) */
        int hit = 0;
        fmk_status st = FMK_OK;
        for (int k = 0; k < 40 && s->time < 1 && st == FMK_OK; k++) {
            st = fmk_sim_run(s, 0, 1);
            for (int j = 0; j < 3; j++)
                hit += s->time == times[j];
        }
        if (st == FMK_ERR_UNAVAILABLE) {
            printf("  listed times: no HDF5 in this build, the landing checks are skipped\n");
        } else {
            CHECK_SIM(st, s);
            CHECK(hit == 3);
            CHECK(count_names(dir, "snapshot_") == 3);
            /* and a run to a_end lands on it */
            CHECK_SIM(fmk_sim_run(s, 1.5, 0), s);
            CHECK(s->time == 1.5);
        }
        scratch_remove(dir);
    }
    fmk_sim_destroy(s);
    particles_free(&p);
}

static void test_bad_options(void)
{
    check_context("bad comoving options");
    particles p = lattice_sphere(2, 1, 1);
    fmk_sim_opts o = comoving_opts(FMK_METHOD_DIRECT, FMK_SIM_SPACING_A, 0.1, 1, 10, 0.05);
    fmk_sim *s = (fmk_sim *)&s;
    fmk_sim_opts b = o;
    b.cosmology.omega_m = NAN;
    CHECK_SIM_STATUS(fmk_sim_create(&s, p.n, p.mass, p.pos, p.vel, NULL, NULL, &b), FMK_ERR_ARG,
                     NULL);
    b = o, b.cosmology.h = -0.7;
    CHECK_SIM_STATUS(fmk_sim_create(&s, p.n, p.mass, p.pos, p.vel, NULL, NULL, &b), FMK_ERR_ARG,
                     NULL);
    b = o, b.stepping = FMK_SIM_STEP_ADAPTIVE;
    CHECK_SIM_STATUS(fmk_sim_create(&s, p.n, p.mass, p.pos, p.vel, NULL, NULL, &b), FMK_ERR_ARG,
                     NULL);
    b = o, b.G = 6.674e-11;
    CHECK_SIM_STATUS(fmk_sim_create(&s, p.n, p.mass, p.pos, p.vel, NULL, NULL, &b), FMK_ERR_ARG,
                     NULL);
    b = o, b.a_start = 0;
    CHECK_SIM_STATUS(fmk_sim_create(&s, p.n, p.mass, p.pos, p.vel, NULL, NULL, &b), FMK_ERR_ARG,
                     NULL);
    b = o, b.spacing = (fmk_sim_spacing)7;
    CHECK_SIM_STATUS(fmk_sim_create(&s, p.n, p.mass, p.pos, p.vel, NULL, NULL, &b), FMK_ERR_ARG,
                     NULL);
    b = o, b.soft_mode = FMK_SIM_SOFT_PHYSICAL; /* no soft_max_comoving */
    CHECK_SIM_STATUS(fmk_sim_create(&s, p.n, p.mass, p.pos, p.vel, NULL, NULL, &b), FMK_ERR_ARG,
                     NULL);
    CHECK(s == NULL);
    double dt;
    CHECK_SIM_STATUS(fmk_sim_comoving_dt(&o.cosmology, FMK_SIM_SPACING_A, 1, 0.5, 10, &dt),
                     FMK_ERR_ARG, NULL);
    particles_free(&p);
}

static void test_energy_reference(void)
{
    check_context("energy reference");
    const fmk_sim_cosmology c = eds();
    const double rho =
        3 * pow(100 * c.h, 2) * c.omega_m / (8 * 3.14159265358979323846 * FMK_SIM_COSMO_G);
    particles q = lattice_sphere(5, 1, rho), p = lattice_sphere(5, 1, rho);
    for (int64_t k = 0; k < 3 * p.n; k++)
        p.pos[k] += 0.01 * sin(1.3 * p.pos[3 * (k / 3) + (k + 1) % 3]);
    const int64_t n = p.n;
    fmk_sim_opts o = comoving_opts(FMK_METHOD_DIRECT, FMK_SIM_SPACING_TIME, 0.05, 1, 100, 0.05);
    fmk_sim *a = NULL, *z = NULL, *r = NULL;
    CHECK_SIM(fmk_sim_create(&a, n, p.mass, p.pos, p.vel, NULL, NULL, &o), NULL);
    CHECK_SIM(fmk_sim_create(&z, n, q.mass, q.pos, q.vel, NULL, NULL, &o), NULL);
    if (a && z) {
        fmk_sim_info before, after, zero;
        fmk_sim_info_get(a, &before);
        CHECK(fmk_sim_set_energy_reference(a, n - 1, q.pos) == FMK_ERR_ARG);
        CHECK(fmk_sim_set_energy_reference(a, n, NULL) == FMK_ERR_NULL);
        CHECK_SIM(fmk_sim_set_energy_reference(a, n, q.pos), a);
        CHECK_SIM(fmk_sim_set_energy_reference(z, n, q.pos), z);
        fmk_sim_info_get(a, &after), fmk_sim_info_get(z, &zero);
        /* the lattice's own W is zero to rounding; the perturbed one's is its peculiar energy */
        CHECK_MSG(fabs(zero.potential) <= 1e-12 * fabs(before.potential) + 1e-300,
                  "W of the lattice %g", zero.potential);
        CHECK(after.potential != before.potential && after.layzer_irvine_error == 0);
        CHECK(after.kinetic == before.kinetic);
        printf("  W at a = 0.05: %.6e (uniform sphere reference) -> %.6e (lattice); lattice "
               "itself %.1e\n",
               before.potential, after.potential, zero.potential);
        CHECK_SIM(fmk_sim_run(a, 0, 5), a);
        CHECK(fmk_sim_set_energy_reference(a, n, q.pos) == FMK_ERR_STATE);
        fmk_sim_checkpoint cp;
        CHECK_SIM(fmk_sim_checkpoint_take(a, &cp), a);
        CHECK_SIM(fmk_sim_create_from_checkpoint(&r, &cp, NULL), NULL);
        fmk_sim_checkpoint_free(&cp);
        if (r) {
            CHECK(r->u_ref == a->u_ref && r->u_ref_set == 1);
            CHECK_SIM(fmk_sim_run(a, 0, 5), a);
            CHECK_SIM(fmk_sim_run(r, 0, 5), r);
            fmk_sim_info ia, ir;
            fmk_sim_info_get(a, &ia), fmk_sim_info_get(r, &ir);
            CHECK(ia.potential == ir.potential && ia.layzer_irvine == ir.layzer_irvine);
        }
    }
    fmk_sim_destroy(a), fmk_sim_destroy(z), fmk_sim_destroy(r);
    q.pos[7] = NAN;
    fmk_sim *s = NULL;
    CHECK_SIM(fmk_sim_create(&s, n, p.mass, p.pos, p.vel, NULL, NULL, &o), NULL);
    if (s)
        CHECK(fmk_sim_set_energy_reference(s, n, q.pos) == FMK_ERR_NONFINITE);
    fmk_sim_destroy(s);
    fmk_sim_opts newton = sim_opts(FMK_METHOD_DIRECT, 0.05, 0);
    newton.dt = 0.01;
    s = NULL;
    CHECK_SIM(fmk_sim_create(&s, n, p.mass, p.pos, p.vel, NULL, NULL, &newton), NULL);
    if (s)
        CHECK(fmk_sim_set_energy_reference(s, n, p.pos) == FMK_ERR_ARG);
    fmk_sim_destroy(s);
    particles_free(&p), particles_free(&q);
}

int main(void)
{
    test_bad_options();
    test_growth(FMK_SIM_SPACING_LOGA, "ln a");
    test_growth(FMK_SIM_SPACING_A, "a");
    test_growth(FMK_SIM_SPACING_TIME, "time");
    test_restart(0);
    test_restart(1);
    test_output_times();
    test_energy_reference();
    return check_summary();
}
