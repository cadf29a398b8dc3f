/* test_sim_potential.c -- the potential is evaluated only where it is read (docs/simulation.md,
 * "When the potential is computed").
 *
 *   - cadence: a run with diagnostics every K steps against the same run whose caller asks for
 *     the energy (fmk_sim_info_get, fmk_sim_get_state with pot) after every step: positions,
 *     velocities and accelerations equal bit for bit (the query's evaluation never writes the
 *     state's accelerations), the CSV rows equal; against a run with a row every step (the
 *     potential on every evaluation): the rows of the steps both write equal to 1e-12;
 *   - on demand: after fmk_sim_step (no potential) the potential is not current (pot_ok 0), a
 *     query computes it (pot_ok 1, the accelerations untouched), and the potential energy equals
 *     a brute-force sum at the current positions (Plummer softening, the spline with softening
 *     lengths per particle, the fourth-order integrator); the trajectory equals that of the
 *     same steps without queries bit for bit. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sim/sim_internal.h"
#include "sim/spline.h"
#include "sim_check.h"

enum { N = 300, STEPS = 12, K = 4 };

static double rel(double a, double b)
{
    const double s = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    return s > 0 ? fabs(a - b) / s : 0;
}

/* pos, vel, acc of a (9n doubles). */
static double *pva(const fmk_sim *sim, int64_t n)
{
    double *s = calloc((size_t)(9 * n), sizeof *s);
    if (!s)
        exit(2);
    CHECK_SIM(fmk_sim_get_state(sim, NULL, s, s + 3 * n, s + 6 * n, NULL), sim);
    return s;
}

/* The rows of dir/diagnostics.csv: step, kinetic, potential, total (at most max rows). */
static int read_rows(const char *dir, double rows[][4], int max)
{
    char path[512];
    snprintf(path, sizeof path, "%s/diagnostics.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[1024];
    int k = 0;
    if (!fgets(line, sizeof line, f)) /* the header */
        k = -1;
    while (k >= 0 && k < max && fgets(line, sizeof line, f)) {
        double v[6];
        if (sscanf(line, "%lf,%lf,%lf,%lf,%lf,%lf", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
            break;
        rows[k][0] = v[0], rows[k][1] = v[3], rows[k][2] = v[4], rows[k][3] = v[5];
        k++;
    }
    fclose(f);
    return k;
}

static void cadence(void)
{
    check_context("diagnostics every %d steps", K);
    particles p = particles_new(N);
    fmk_sim_ic_plummer(N, 7, p.mass, p.pos, p.vel);
    const fmk_sim_opts o = sim_opts(FMK_METHOD_TREE, 0.02, 0.005);
    char dirs[3][64];
    fmk_sim *s[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        snprintf(dirs[k], sizeof dirs[k], "/tmp/fmk_simpot_XXXXXX");
        CHECK(mkdtemp(dirs[k]) != NULL);
        CHECK_SIM(fmk_sim_create(&s[k], N, p.mass, p.pos, p.vel, NULL, NULL, &o), NULL);
        if (s[k]) /* s[2]: a row every step, the potential on every evaluation */
            CHECK_SIM(fmk_sim_set_output(s[k], dirs[k], 0, 0, k == 2 ? 1 : K, 0), s[k]);
    }
    if (!s[0] || !s[1] || !s[2])
        goto done;
    CHECK_SIM(fmk_sim_run(s[0], 0, STEPS), s[0]);
    CHECK_SIM(fmk_sim_run(s[2], 0, STEPS), s[2]);
    double *pot = malloc(N * sizeof *pot);
    for (int k = 0; k < STEPS && pot; k++) { /* the same run, queried after every step */
        CHECK_SIM(fmk_sim_run(s[1], 0, 1), s[1]);
        fmk_sim_info info;
        CHECK_SIM(fmk_sim_info_get(s[1], &info), s[1]);
        CHECK_SIM(fmk_sim_get_state(s[1], NULL, NULL, NULL, NULL, pot), s[1]);
        CHECK(s[1]->pot_ok == 1 && isfinite(info.potential) && info.potential < 0);
    }
    free(pot);
    double *a = pva(s[0], N), *b = pva(s[1], N), *c = pva(s[2], N);
    CHECK_MSG(memcmp(a, b, 9 * N * sizeof *a) == 0, "queries of the energy changed the trajectory");
    double dx = 0;
    for (int i = 0; i < 9 * N; i++)
        dx = fmax(dx, fabs(a[i] - c[i]));
    printf("  the state against the run with the potential every step: largest difference %.3g\n",
           dx);
    CHECK(dx < 1e-12);
    free(a), free(b), free(c);
    fmk_sim_destroy(s[0]), fmk_sim_destroy(s[1]), fmk_sim_destroy(s[2]);
    s[0] = s[1] = s[2] = NULL;
    double ra[16][4], rb[16][4], rc[16][4];
    const int na = read_rows(dirs[0], ra, 16), nb = read_rows(dirs[1], rb, 16),
              nc = read_rows(dirs[2], rc, 16);
    CHECK_MSG(na == STEPS / K + 1 && nb == na && nc == STEPS + 1, "rows %d, %d, %d", na, nb, nc);
    double worst = 0;
    for (int r = 0; r < na && r < nb && nc == STEPS + 1; r++) {
        CHECK(ra[r][0] == r * K && memcmp(ra[r], rb[r], sizeof ra[r]) == 0);
        for (int c = 1; c < 4; c++)
            worst = fmax(worst, rel(ra[r][c], rc[r * K][c]));
    }
    printf("  rows every %d steps against rows every step: largest relative difference %.3g\n", K,
           worst);
    CHECK(worst < 1e-12);
done:
    for (int k = 0; k < 3; k++) {
        fmk_sim_destroy(s[k]);
        char path[512];
        snprintf(path, sizeof path, "%s/diagnostics.csv", dirs[k]);
        remove(path);
        rmdir(dirs[k]);
    }
    particles_free(&p);
}

/* -1/2 sum_i m_i psi_i by the brute-force pair sum (Plummer: 1/sqrt(r^2 + s^2); spline:
 * spline.h's phi_s with h = 2.8 max(s_i, s_j)). */
static double brute_potential(const fmk_sim *sim, const double *pos, const double *soft)
{
    const int64_t n = sim->n;
    double w = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i + 1; j < n; j++) {
            const double *x = pos + 3 * i, *y = pos + 3 * j;
            const double r = sqrt((x[0] - y[0]) * (x[0] - y[0]) + (x[1] - y[1]) * (x[1] - y[1]) +
                                  (x[2] - y[2]) * (x[2] - y[2]));
            double phi;
            if (sim->spline) {
                const double si = soft ? soft[i] : sim->opts.soft,
                             sj = soft ? soft[j] : sim->opts.soft;
                const double h = FMK_SIM_SPLINE_H * (si > sj ? si : sj);
                double dphi = 0, dg = 0;
                if (r < h)
                    fmk_sim_spline_delta(r, h, &dphi, &dg);
                phi = 1 / r + dphi;
            } else {
                const double s = sim->opts.soft;
                phi = 1 / sqrt(r * r + s * s);
            }
            w -= sim->opts.G * sim->mass[i] * sim->mass[j] * phi;
        }
    return w;
}

static void on_demand(const char *what, fmk_sim_opts o, const double *soft)
{
    check_context("the potential on demand, %s", what);
    particles p = particles_new(N);
    fmk_sim_ic_plummer(N, 11, p.mass, p.pos, p.vel);
    fmk_sim *a = NULL, *b = NULL;
    CHECK_SIM(fmk_sim_create(&a, N, p.mass, p.pos, p.vel, soft, NULL, &o), NULL);
    CHECK_SIM(fmk_sim_create(&b, N, p.mass, p.pos, p.vel, soft, NULL, &o), NULL);
    if (!a || !b)
        goto done;
    CHECK(a->pot_ok == 1); /* the first evaluation computes it */
    double worst = 0;
    for (int k = 0; k < 3; k++) {
        for (int s = 0; s < 3; s++) {
            CHECK_SIM(fmk_sim_step(a), a);
            CHECK_SIM(fmk_sim_step(b), b);
        }
        CHECK(a->pot_ok == 0);
        double *before = pva(a, N);
        fmk_sim_info info;
        CHECK_SIM(fmk_sim_info_get(a, &info), a);
        CHECK(a->pot_ok == 1 && a->plan_here == 1);
        double *after = pva(a, N);
        CHECK_MSG(memcmp(before, after, 9 * N * sizeof *before) == 0,
                  "the query changed the state");
        const double w = brute_potential(a, after, soft);
        worst = fmax(worst, rel(info.potential, w));
        free(before), free(after);
    }
    printf("  %s: potential energy on demand against the brute-force sum: %.3g\n", what, worst);
    CHECK(worst < 1e-12);
    double *x = pva(a, N), *y = pva(b, N);
    CHECK_MSG(memcmp(x, y, 9 * N * sizeof *x) == 0, "the queries changed the trajectory");
    free(x), free(y);
done:
    fmk_sim_destroy(a), fmk_sim_destroy(b);
    particles_free(&p);
}

int main(void)
{
    cadence();
    on_demand("plummer", sim_opts(FMK_METHOD_DIRECT, 0.02, 0.005), NULL);
    fmk_sim_opts o = sim_opts(FMK_METHOD_DIRECT, 0, 0.005);
    o.softening = FMK_SIM_SOFT_SPLINE;
    double soft[N];
    for (int i = 0; i < N; i++)
        soft[i] = 0.01 + 0.01 * (i % 3);
    on_demand("spline, softening lengths per particle", o, soft);
    o = sim_opts(FMK_METHOD_DIRECT, 0.02, 0.005);
    o.integrator = FMK_SIM_YOSHIDA4;
    on_demand("fourth-order integrator", o, NULL);
    return check_summary();
}
