/* test_sim_api.c -- the simulation driver's API (fmmkit_sim.h) on the CPU: defaults, every bad
 * input gets its status and a message with nothing created or changed, the initial conditions
 * (the same particles for the same seed, bit for bit on every machine: a recorded hash), the
 * fixed step landing on t_end, step counts, get_state and info, the diagnostics CSV. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <unistd.h>

#include "sim_check.h"

static uint64_t fnv1a(uint64_t h, const void *data, size_t bytes)
{
    const unsigned char *b = data;
    for (size_t k = 0; k < bytes; k++)
        h = (h ^ b[k]) * 0x100000001b3ull;
    return h;
}

static void test_defaults(void)
{
    check_context("defaults");
    fmk_sim_opts o;
    memset(&o, 0xff, sizeof o);
    fmk_sim_opts_default(&o);
    CHECK(o.G == 1 && o.softening == FMK_SIM_SOFT_PLUMMER && o.soft == 0);
    CHECK(o.stepping == FMK_SIM_STEP_FIXED && o.dt == 0 && o.eta == 0.025);
    CHECK(o.dt_min == 0 && o.dt_max == 0 && o.eps == 0 && o.verbose == 0);
    CHECK(o.plan.method == FMK_METHOD_AUTO && o.plan.softening == 0);
    fmk_sim_opts_default(NULL); /* a no-op */
    fmk_sim_destroy(NULL);
    CHECK(fmk_sim_interrupt(NULL) == FMK_ERR_NULL);
}

static void test_ic(void)
{
    check_context("initial conditions");
    particles a = particles_new(1000), b = particles_new(1000);
    CHECK_SIM(fmk_sim_ic_plummer(1000, 42, a.mass, a.pos, a.vel), NULL);
    CHECK_SIM(fmk_sim_ic_plummer(1000, 42, b.mass, b.pos, b.vel), NULL);
    CHECK(memcmp(a.pos, b.pos, 3000 * sizeof(double)) == 0);
    CHECK(memcmp(a.vel, b.vel, 3000 * sizeof(double)) == 0);
    /* the same bits on every machine: the generators use IEEE operations and sqrt only */
    uint64_t h = fnv1a(0xcbf29ce484222325ull, a.mass, 1000 * sizeof(double));
    h = fnv1a(h, a.pos, 3000 * sizeof(double));
    h = fnv1a(h, a.vel, 3000 * sizeof(double));
    CHECK_MSG(h == 0x60cfec0998fa6bb4ull, "plummer(1000, seed 42) hashes to 0x%016llx",
              (unsigned long long)h);
    CHECK_SIM(fmk_sim_ic_plummer(1000, 43, b.mass, b.pos, b.vel), NULL);
    CHECK(memcmp(a.pos, b.pos, 3000 * sizeof(double)) != 0);
    double m = 0, c[3] = {0, 0, 0}, p[3] = {0, 0, 0}, rmax = 0;
    for (int i = 0; i < 1000; i++) {
        m += a.mass[i];
        for (int k = 0; k < 3; k++)
            c[k] += a.mass[i] * a.pos[3 * i + k], p[k] += a.mass[i] * a.vel[3 * i + k];
        const double r = sqrt(a.pos[3 * i] * a.pos[3 * i] + a.pos[3 * i + 1] * a.pos[3 * i + 1] +
                              a.pos[3 * i + 2] * a.pos[3 * i + 2]);
        rmax = r > rmax ? r : rmax;
    }
    CHECK_LE(fabs(m - 1), 1e-14, "plummer: total mass - 1");
    CHECK_LE(fabs(c[0]) + fabs(c[1]) + fabs(c[2]), 1e-15, "plummer: centre of mass");
    CHECK_LE(fabs(p[0]) + fabs(p[1]) + fabs(p[2]), 1e-15, "plummer: momentum");
    CHECK_LE(rmax, 22.81 + 0.1, "plummer: the largest radius (the cut: 22.8 Henon units)");

    CHECK_SIM(fmk_sim_ic_cold(1000, 7, a.mass, a.pos, a.vel), NULL);
    int inside = 1, rest = 1;
    for (int i = 0; i < 1000; i++) {
        const double *x = a.pos + 3 * i;
        inside &= x[0] * x[0] + x[1] * x[1] + x[2] * x[2] < 1.1; /* centred: moved by ~0.02 */
        rest &= a.vel[3 * i] == 0 && a.vel[3 * i + 1] == 0 && a.vel[3 * i + 2] == 0;
    }
    CHECK(inside && rest);

    CHECK_SIM(fmk_sim_ic_kepler(0.5, a.mass, a.pos, a.vel), NULL);
    CHECK(a.mass[0] == 0.5 && a.mass[1] == 0.5 && a.pos[0] - a.pos[3] == 1.5);
    CHECK(fabs(a.vel[1] - a.vel[4] - sqrt(1.0 / 3)) < 1e-15);

    check_context("initial conditions, bad input");
    CHECK_SIM_STATUS(fmk_sim_ic_plummer(0, 1, a.mass, a.pos, a.vel), FMK_ERR_ARG, NULL);
    CHECK_SIM_STATUS(fmk_sim_ic_cold(-3, 1, a.mass, a.pos, a.vel), FMK_ERR_ARG, NULL);
    CHECK_SIM_STATUS(fmk_sim_ic_plummer(10, 1, NULL, a.pos, a.vel), FMK_ERR_NULL, NULL);
    CHECK_SIM_STATUS(fmk_sim_ic_kepler(1.0, a.mass, a.pos, a.vel), FMK_ERR_ARG, NULL);
    CHECK_SIM_STATUS(fmk_sim_ic_kepler(NAN, a.mass, a.pos, a.vel), FMK_ERR_ARG, NULL);
    CHECK_SIM_STATUS(fmk_sim_ic_kepler(-0.1, a.mass, a.pos, a.vel), FMK_ERR_ARG, NULL);
    particles_free(&a), particles_free(&b);
}

/* fmk_sim_create with one thing wrong: status, message, and *sim NULL. */
static void expect_create(const char *what, fmk_status want, int64_t n, const double *m,
                          const double *x, const double *v, const double *soft,
                          const fmk_sim_opts *o)
{
    check_context("bad create: %s", what);
    fmk_sim *sim = (fmk_sim *)&sim; /* anything but NULL */
    CHECK_SIM_STATUS(fmk_sim_create(&sim, n, m, x, v, soft, NULL, o), want, NULL);
    CHECK(sim == NULL);
}

static void test_bad_create(void)
{
    particles p = particles_new(64);
    fmk_sim_ic_plummer(64, 3, p.mass, p.pos, p.vel);
    double soft[64];
    for (int i = 0; i < 64; i++)
        soft[i] = 0.01;
    const fmk_sim_opts good = sim_opts(FMK_METHOD_DIRECT, 0.01, 0.01);
    fmk_sim_opts o = good;
    expect_create("n 0", FMK_ERR_ARG, 0, p.mass, p.pos, p.vel, NULL, &o);
    expect_create("n -1", FMK_ERR_ARG, -1, p.mass, p.pos, p.vel, NULL, &o);
    expect_create("mass NULL", FMK_ERR_NULL, 64, NULL, p.pos, p.vel, NULL, &o);
    expect_create("pos NULL", FMK_ERR_NULL, 64, p.mass, NULL, p.vel, NULL, &o);
    check_context("bad create: sim NULL");
    CHECK_SIM_STATUS(fmk_sim_create(NULL, 64, p.mass, p.pos, p.vel, NULL, NULL, &o), FMK_ERR_NULL,
                     NULL);
    const double saved_mass = p.mass[5], saved_pos = p.pos[7], saved_vel = p.vel[11];
    p.mass[5] = NAN;
    expect_create("NaN mass", FMK_ERR_NONFINITE, 64, p.mass, p.pos, p.vel, NULL, &o);
    p.mass[5] = -1;
    expect_create("negative mass", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    p.mass[5] = 0;
    expect_create("zero mass", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    p.mass[5] = saved_mass;
    p.pos[7] = INFINITY;
    expect_create("infinite position", FMK_ERR_NONFINITE, 64, p.mass, p.pos, p.vel, NULL, &o);
    p.pos[7] = saved_pos;
    p.vel[11] = NAN;
    expect_create("NaN velocity", FMK_ERR_NONFINITE, 64, p.mass, p.pos, p.vel, NULL, &o);
    p.vel[11] = saved_vel;

    o = good, o.dt = 0;
    expect_create("fixed step with dt 0", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    o = good, o.dt = -0.1;
    expect_create("negative dt", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    o = good, o.dt = NAN;
    expect_create("NaN dt", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    o = good, o.G = 0;
    expect_create("G 0", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    o = good, o.G = NAN;
    expect_create("G NaN", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    o = good, o.softening = (fmk_sim_softening)7;
    expect_create("softening 7", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    o = good, o.stepping = (fmk_sim_stepping)-1;
    expect_create("stepping -1", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    o = good, o.soft = -0.01;
    expect_create("negative soft", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    o = good, o.eps = 2;
    expect_create("eps 2", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    o = good, o.verbose = 3;
    expect_create("verbose 3", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    o = good, o.plan.method = (fmk_method)99;
    expect_create("plan method 99", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    o = good, o.plan.softening = 0.1;
    expect_create("plan softening set", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    o = good, o.stepping = FMK_SIM_STEP_ADAPTIVE, o.soft = 0;
    expect_create("adaptive without softening", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    o = good, o.stepping = FMK_SIM_STEP_ADAPTIVE, o.eta = 0;
    expect_create("adaptive with eta 0", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    o = good, o.stepping = FMK_SIM_STEP_ADAPTIVE, o.dt_min = 1, o.dt_max = 0.5;
    expect_create("dt_min above dt_max", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, NULL, &o);
    o = good;
    expect_create("softening per particle with plummer", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel,
                  soft, &o);
    o = good, o.softening = FMK_SIM_SOFT_SPLINE;
    soft[9] = 0;
    expect_create("softening per particle 0", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, soft, &o);
    soft[9] = NAN;
    expect_create("softening per particle NaN", FMK_ERR_ARG, 64, p.mass, p.pos, p.vel, soft, &o);
    soft[9] = 0.01;
    o = good, o.plan.backend = FMK_BACKEND_CUDA;
    if (fmk_cuda_device_count() == 0)
        expect_create("backend cuda without a GPU", FMK_ERR_UNAVAILABLE, 64, p.mass, p.pos, p.vel,
                      NULL, &o);
    o = good, o.plan.method = FMK_METHOD_TREE, o.plan.theta = 0;
    expect_create("tree without theta at eps 1e-6", FMK_ERR_UNAVAILABLE, 64, p.mass, p.pos, p.vel,
                  NULL, &o);

    check_context("bad create_device");
    fmk_sim *sim = NULL;
    o = good;
    CHECK_SIM_STATUS(fmk_sim_create_device(&sim, 64, NULL, p.pos, p.vel, &o), FMK_ERR_NULL, NULL);
    if (fmk_cuda_device_count() == 0) /* the plan runs on the CPU: host arrays only */
        CHECK_SIM_STATUS(fmk_sim_create_device(&sim, 64, p.mass, p.pos, p.vel, &o), FMK_ERR_ARG,
                         NULL);
    CHECK(sim == NULL);
    particles_free(&p);
}

static void test_run(void)
{
    check_context("run: steps, landing on t_end, state and info");
    particles p = particles_new(200);
    fmk_sim_ic_plummer(200, 5, p.mass, p.pos, p.vel);
    fmk_sim_opts o = sim_opts(FMK_METHOD_DIRECT, 0.05, 0.1);
    fmk_sim *sim = NULL;
    CHECK_SIM(fmk_sim_create(&sim, 200, p.mass, p.pos, p.vel, NULL, NULL, &o), NULL);
    if (!sim)
        return;
    fmk_sim_info info;
    CHECK_SIM(fmk_sim_info_get(sim, &info), sim);
    CHECK(info.n == 200 && info.step == 0 && info.time == 0 &&
          info.plan.method == FMK_METHOD_DIRECT);
    CHECK(info.potential < 0 && info.kinetic > 0 && info.total == info.kinetic + info.potential);
    CHECK(info.interactions == 200 * 199);
    /* the potential energy is -1/2 sum m psi, psi the pot of get_state */
    double *pot = malloc(200 * sizeof *pot), w = 0;
    CHECK_SIM(fmk_sim_get_state(sim, NULL, NULL, NULL, NULL, pot), sim);
    for (int i = 0; i < 200; i++)
        w -= 0.5 * p.mass[i] * pot[i];
    CHECK_LE(fabs(w - info.potential), 1e-14, "potential energy against -1/2 sum m pot");
    free(pot);

    CHECK_SIM(fmk_sim_run(sim, 0, 7), sim); /* t_end not ahead: 7 steps */
    fmk_sim_info_get(sim, &info);
    CHECK(info.step == 7 && fabs(info.time - 0.7) < 1e-15 && info.dt == 0.1);
    CHECK_SIM(fmk_sim_run(sim, 1.75, 0), sim); /* 10 steps to 1.7, then 0.05 lands on 1.75 */
    fmk_sim_info_get(sim, &info);
    CHECK_MSG(info.step == 18 && info.time == 1.75 && fabs(info.dt - 0.05) < 1e-12,
              "step %lld time %.17g dt %.17g", (long long)info.step, info.time, info.dt);
    CHECK_SIM(fmk_sim_step(sim), sim);
    fmk_sim_info_get(sim, &info);
    CHECK(info.step == 19 && info.dt == 0.1 && info.seconds_step >= info.seconds_force);
    CHECK_SIM(fmk_sim_run(sim, 0, 0), sim); /* nothing to do */

    check_context("run: bad input");
    CHECK_SIM_STATUS(fmk_sim_run(NULL, 1, 1), FMK_ERR_NULL, NULL);
    CHECK_SIM_STATUS(fmk_sim_run(sim, NAN, 1), FMK_ERR_ARG, sim);
    CHECK_SIM_STATUS(fmk_sim_run(sim, INFINITY, 1), FMK_ERR_ARG, sim);
    CHECK_SIM_STATUS(fmk_sim_run(sim, 0, -1), FMK_ERR_ARG, sim);
    CHECK_SIM_STATUS(fmk_sim_step(NULL), FMK_ERR_NULL, NULL);
    CHECK_SIM_STATUS(fmk_sim_info_get(sim, NULL), FMK_ERR_NULL, sim);
    CHECK_SIM_STATUS(fmk_sim_get_state(NULL, NULL, NULL, NULL, NULL, NULL), FMK_ERR_NULL, NULL);
    double d[3];
    CHECK_SIM_STATUS(fmk_sim_get_state_device(sim, d, NULL, NULL, NULL, NULL), FMK_ERR_ARG, sim);
    CHECK_SIM_STATUS(fmk_sim_write_png(sim, "x.png", 3, 256), FMK_ERR_ARG, sim);
    CHECK_SIM_STATUS(fmk_sim_write_png(sim, "x.png", 0, 2), FMK_ERR_ARG, sim);
    CHECK_SIM_STATUS(fmk_sim_write_snapshot(sim, NULL), FMK_ERR_NULL, sim);
    CHECK_SIM_STATUS(fmk_sim_write_restart(sim, NULL), FMK_ERR_NULL, sim);
    CHECK_SIM_STATUS(fmk_sim_set_output(sim, "out", -1, 0, 0, 0), FMK_ERR_ARG, sim);
    CHECK_SIM_STATUS(fmk_sim_set_output(sim, "out", 1, 2, 0, 0), FMK_ERR_ARG, sim);
    CHECK_SIM_STATUS(fmk_sim_set_output(sim, NULL, 1, 0, 0, 0), FMK_ERR_NULL, sim);
    CHECK_SIM_STATUS(fmk_sim_set_output(sim, "", 0, 0, 1, 0), FMK_ERR_ARG, sim);
    CHECK_SIM(fmk_sim_set_output(sim, NULL, 0, 0, 0, 0), sim); /* output off */
    fmk_sim *none = (fmk_sim *)&none;
    CHECK_SIM_STATUS(fmk_sim_create_from_file(&none, NULL, NULL), FMK_ERR_NULL, NULL);
    none = (fmk_sim *)&none;
    CHECK(fmk_sim_create_from_file(&none, "/nonexistent/x.hdf5", NULL) != FMK_OK &&
          fmk_sim_last_error(NULL)[0] != '\0' && none == NULL);
    /* the failures changed nothing */
    fmk_sim_info after;
    fmk_sim_info_get(sim, &after);
    CHECK(after.step == 19 && after.time == info.time);
    fmk_sim_destroy(sim);
    particles_free(&p);
}

/* The diagnostics CSV: a header and a row every diag_every steps, from step 0. */
static void test_csv(void)
{
    check_context("diagnostics.csv");
    char dir[] = "/tmp/fmk_sim_api_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK_MSG(0, "mkdtemp failed");
        return;
    }
    particles p = particles_new(100);
    fmk_sim_ic_plummer(100, 9, p.mass, p.pos, p.vel);
    fmk_sim_opts o = sim_opts(FMK_METHOD_DIRECT, 0.05, 0.01);
    fmk_sim *sim = NULL;
    CHECK_SIM(fmk_sim_create(&sim, 100, p.mass, p.pos, p.vel, NULL, NULL, &o), NULL);
    CHECK_SIM(fmk_sim_set_output(sim, dir, 0, 0, 5, 0), sim);
    CHECK_SIM(fmk_sim_run(sim, 0, 12), sim);
    CHECK_SIM(fmk_sim_run(sim, 0, 8), sim); /* step 20 gets its row; step 12 none */
    fmk_sim_info info;
    fmk_sim_info_get(sim, &info);
    fmk_sim_destroy(sim);
    char path[256], line[1024];
    snprintf(path, sizeof path, "%s/diagnostics.csv", dir);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "%s missing", path);
    int rows = 0, good = 1;
    long long step = -1;
    double total = 0;
    if (f && fgets(line, sizeof line, f))
        CHECK(strcmp(line, "step,time,dt,kinetic,potential,total,px,py,pz,Lx,Ly,Lz,wall_s\n") == 0);
    while (f && fgets(line, sizeof line, f)) {
        int commas = 0;
        for (char *c = line; *c; c++)
            commas += *c == ',';
        good &= commas == 12;
        double t, dt, k, w;
        good &= sscanf(line, "%lld,%lf,%lf,%lf,%lf,%lf", &step, &t, &dt, &k, &w, &total) == 6 &&
                step == 5 * rows && total == k + w;
        rows++;
    }
    CHECK_MSG(rows == 5 && good, "%d rows (want 5: steps 0, 5, 10, 15, 20), well formed %d", rows,
              good);
    CHECK(total == info.total);
    if (f)
        fclose(f);
    remove(path);
    rmdir(dir);
    particles_free(&p);
}

int main(void)
{
    test_defaults();
    test_ic();
    test_bad_create();
    test_run();
    test_csv();
    return check_summary();
}
