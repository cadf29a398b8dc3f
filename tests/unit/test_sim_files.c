/* test_sim_files.c -- the simulation's files through the file layer (src/sim/io/, sim_io.h):
 *
 *   - a restart file continues bit for bit (write_restart, create_from_file with opts NULL);
 *   - fmk_sim_run's output: dir/snapshot_NNN.hdf5 every snap_every steps from 000, a row of
 *     dir/diagnostics.csv every diag_every steps, dir/restart.h5 every restart_every steps, no
 *     temporary file left behind; a run continued from dir/restart.h5 numbers its snapshots on
 *     and writes the same snapshots as the uninterrupted run (read back bit for bit), and
 *     appends to the CSV;
 *   - a snapshot as initial conditions: its particles and time;
 *   - a missing file: a status and a message.
 * Skipped (exit 77, "skipped: no HDF5") when the file layer says FMK_ERR_UNAVAILABLE: a build
 * without HDF5, or before the file layer is merged. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <unistd.h>

#include "sim_check.h"

#define N 300

static char dir_a[64], dir_b[64];

static fmk_sim *make(const particles *p)
{
    fmk_sim_opts o = sim_opts(FMK_METHOD_DIRECT, 0.05, 0.01);
    fmk_sim *sim = NULL;
    CHECK_SIM(fmk_sim_create(&sim, p->n, p->mass, p->pos, p->vel, NULL, NULL, &o), NULL);
    return sim;
}

static int exists(const char *dir, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* Files under dir whose name holds ".tmp." (the layer's temporary names). */
static int temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    int count = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        count += strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return count;
}

static void remove_all(const char *dir)
{
    DIR *d = opendir(dir);
    char path[512];
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            remove(path);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

static void test_restart_file(const particles *p)
{
    check_context("restart file");
    fmk_sim *a = make(p), *b = make(p), *c = NULL;
    char path[128];
    snprintf(path, sizeof path, "%s/r.h5", dir_a);
    CHECK_SIM(fmk_sim_run(a, 0, 30), a);
    CHECK_SIM(fmk_sim_run(b, 0, 12), b);
    CHECK_SIM(fmk_sim_write_restart(b, path), b);
    fmk_sim_destroy(b);
    CHECK_SIM(fmk_sim_create_from_file(&c, path, NULL), NULL);
    if (c) {
        CHECK_SIM(fmk_sim_run(c, 0, 18), c);
        CHECK_MSG(same_state(a, c, N), "the run continued from a restart file differs");
    }
    CHECK(temporaries(dir_a) == 0);
    remove(path);
    fmk_sim_destroy(a), fmk_sim_destroy(c);
}

/* The state a snapshot holds, read back as initial conditions. */
static int read_snapshot(const char *dir, int k, particles *q, double *time)
{
    char path[128];
    snprintf(path, sizeof path, "%s/snapshot_%03d.hdf5", dir, k);
    fmk_sim_opts o = sim_opts(FMK_METHOD_DIRECT, 0.05, 0.01);
    fmk_sim *s = NULL;
    if (fmk_sim_create_from_file(&s, path, &o) != FMK_OK) {
        CHECK_MSG(0, "reading %s: %s", path, fmk_sim_last_error(NULL));
        return 0;
    }
    fmk_sim_info info;
    fmk_sim_info_get(s, &info);
    *time = info.time;
    fmk_sim_get_state(s, q->mass, q->pos, q->vel, NULL, NULL);
    fmk_sim_destroy(s);
    return 1;
}

static void test_run_output(const particles *p)
{
    check_context("fmk_sim_run's files");
    fmk_sim *a = make(p), *b = make(p), *c = NULL;
    CHECK_SIM(fmk_sim_set_output(a, dir_a, 5, 0, 5, 10), a);
    CHECK_SIM(fmk_sim_run(a, 0, 30), a);
    CHECK(exists(dir_a, "snapshot_000.hdf5") && exists(dir_a, "snapshot_006.hdf5"));
    CHECK(!exists(dir_a, "snapshot_007.hdf5") && exists(dir_a, "restart.h5"));
    CHECK(exists(dir_a, "diagnostics.csv") && temporaries(dir_a) == 0);

    /* b stops at step 20 (its restart.h5 is the one of step 20), then goes on from the file */
    CHECK_SIM(fmk_sim_set_output(b, dir_b, 5, 0, 5, 10), b);
    CHECK_SIM(fmk_sim_run(b, 0, 20), b);
    fmk_sim_destroy(b);
    char path[128];
    snprintf(path, sizeof path, "%s/restart.h5", dir_b);
    CHECK_SIM(fmk_sim_create_from_file(&c, path, NULL), NULL);
    if (c) {
        CHECK_SIM(fmk_sim_set_output(c, dir_b, 5, 0, 5, 10), c);
        CHECK_SIM(fmk_sim_run(c, 0, 10), c);
        CHECK_MSG(same_state(a, c, N), "the continued run's state differs");
    }
    particles qa = particles_new(N), qb = particles_new(N);
    for (int k = 0; k <= 6; k++) {
        double ta = -1, tb = -2;
        if (read_snapshot(dir_a, k, &qa, &ta) && read_snapshot(dir_b, k, &qb, &tb))
            CHECK_MSG(ta == tb && memcmp(qa.pos, qb.pos, 3 * N * sizeof(double)) == 0 &&
                          memcmp(qa.vel, qb.vel, 3 * N * sizeof(double)) == 0,
                      "snapshot %d differs between the runs", k);
        if (k == 2) { /* snapshots as initial conditions: the state at step 10 */
            CHECK(fabs(ta - 0.1) < 1e-15);
            CHECK(memcmp(qa.mass, p->mass, N * sizeof(double)) == 0);
        }
    }
    /* the CSV: the rows of steps 0..30, none twice (b's 20 was written before its restart) */
    snprintf(path, sizeof path, "%s/diagnostics.csv", dir_b);
    FILE *f = fopen(path, "r");
    char line[1024];
    int rows = -1;
    while (f && fgets(line, sizeof line, f))
        rows++;
    if (f)
        fclose(f);
    CHECK_MSG(rows == 7, "%s has %d rows, want 7 (steps 0, 5, ..., 30)", path, rows);
    particles_free(&qa), particles_free(&qb);
    fmk_sim_destroy(a), fmk_sim_destroy(c);
}

int main(void)
{
    particles p = particles_new(N);
    fmk_sim_ic_plummer(N, 4, p.mass, p.pos, p.vel);
    snprintf(dir_a, sizeof dir_a, "/tmp/fmk_sim_files_a_XXXXXX");
    snprintf(dir_b, sizeof dir_b, "/tmp/fmk_sim_files_b_XXXXXX");
    if (!mkdtemp(dir_a) || !mkdtemp(dir_b)) {
        printf("mkdtemp failed\n");
        return 1;
    }
    fmk_sim *probe = make(&p);
    char path[128];
    snprintf(path, sizeof path, "%s/probe.hdf5", dir_a);
    const fmk_status st = probe ? fmk_sim_write_snapshot(probe, path) : FMK_ERR_INTERNAL;
    char why[512];
    snprintf(why, sizeof why, "%s", fmk_sim_last_error(probe));
    fmk_sim_destroy(probe);
    if (st == FMK_ERR_UNAVAILABLE) {
        printf("skipped: no HDF5 (%s)\n", why);
        remove_all(dir_a), remove_all(dir_b);
        particles_free(&p);
        return 77;
    }
    CHECK_MSG(st == FMK_OK, "writing a snapshot failed (%d)", (int)st);
    remove(path);
    test_restart_file(&p);
    test_run_output(&p);

    check_context("missing files");
    fmk_sim *none = NULL;
    snprintf(path, sizeof path, "%s/missing.hdf5", dir_a);
    CHECK(fmk_sim_create_from_file(&none, path, NULL) != FMK_OK && none == NULL &&
          fmk_sim_last_error(NULL)[0] != '\0');
    remove_all(dir_a), remove_all(dir_b);
    particles_free(&p);
    return check_summary();
}
