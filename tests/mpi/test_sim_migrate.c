/* test_sim_migrate.c -- a distributed simulation's particles migrate to the ranks that evaluate
 * their forces (src/sim/migrate.c; docs/distributed.md, "The simulation under MPI"), on the
 * ranks mpirun gives (2, 3), CPU fp64, for the direct sum (the partition a slice of the global
 * order) and the treecode (its distributed sources: runs of the Morton curve). Each case runs
 * the same simulation twice, migrating and not (fmk_sim_set_migrate 0), from uneven shares
 * (the last rank empty), with every rank's measured cost set to 1 before each step
 * (fmk_mpi_set_costs: the partition then depends on the particles only, not on timings).
 * Checked:
 *   - the unsoftened direct sum (a Morton partition over replicated sources) migrates to runs
 *     of the global order with the partition's counts (the sources' order stays): then its
 *     weights are even and the partition moves nothing;
 *   - the first step evaluates the same particles elsewhere in both runs and migrates them;
 *     from then on the migrating run evaluates (nearly) none elsewhere (the direct sum: none;
 *     the treecode: the few that cross a boundary of the curve in a step), the other run about
 *     (P - 1) / P of them every step;
 *   - positions and velocities by id: bit for bit the other run's for the direct sum (the
 *     global order stays), within 1e-12 for the treecode (its local trees take their sources in
 *     another order); energies and momenta within rounding;
 *   - a snapshot written after migrations, read by one process: the particles by id, each
 *     bit for bit the ranks' state;
 *   - a restart written after a migration, continued on the same ranks: bit for bit the
 *     uninterrupted run.
 * Prints the particles evaluated elsewhere and the bytes the plan's set_points and eval sent,
 * per step (rank 0, summed over the ranks). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fmmkit_mpi.h"
#include "mpi/mpi_internal.h"
#include "mpi_test.h"
#include "sim/sim_hooks.h"

enum { N = 480, STEPS = 8, RESTART_AT = 4 };

/* Uneven shares: rank r of the first size - 1 gets a weight r + 1, the last none. */
static void share(int r, int64_t *count, int64_t *first)
{
    int64_t w = 0, before = 0, mine = 0;
    for (int k = 0; k < size; k++) {
        const int64_t wk = k == size - 1 ? 0 : k + 1;
        w += wk;
        before += k < r ? wk : 0;
        mine = k == r ? wk : mine;
    }
    *first = N * before / w;
    *count = N * (before + mine) / w - *first;
}

static void options(fmk_sim_opts *o, fmk_method method, double soft)
{
    fmk_sim_opts_default(o);
    o->plan.method = method;
    o->plan.backend = FMK_BACKEND_CPU;
    o->plan.precision = FMK_PRECISION_FP64;
    o->plan.threads = 1;
    o->soft = soft;
    o->dt = 2e-3;
    if (method == FMK_METHOD_TREE)
        o->eps = 1e-3;
}

/* One step with every rank's cost a target set to 1 (deterministic partitions). */
static void step(fmk_sim *sim)
{
    double *ones = malloc(sizeof(double) * (size_t)size);
    for (int r = 0; r < size; r++)
        ones[r] = 1;
    fmk_mpi_set_costs(fmk_sim_force_plan(sim), ones);
    free(ones);
    CHECK(fmk_sim_step(sim) == FMK_OK, "step: %s", fmk_sim_last_error(sim));
}

/* Every rank's particles by id (ids 1..N) into p and v (3N each) on every rank; 0 unless each
 * id is on exactly one rank. */
static int gather(fmk_sim *sim, double *p, double *v)
{
    fmk_sim_info info;
    fmk_sim_info_get(sim, &info);
    const int64_t n = info.n_local;
    double *pl = malloc(sizeof(double) * 3 * (n + 1)), *vl = malloc(sizeof(double) * 3 * (n + 1));
    uint64_t *id = malloc(sizeof(uint64_t) * (n + 1));
    double *seen = calloc(N, sizeof(double));
    memset(p, 0, sizeof(double) * 3 * N), memset(v, 0, sizeof(double) * 3 * N);
    fmk_sim_get_state(sim, NULL, pl, vl, NULL, NULL);
    fmk_sim_get_ids(sim, id);
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
        if (id[i] < 1 || id[i] > N) {
            ok = 0;
            continue;
        }
        const int64_t k = (int64_t)id[i] - 1;
        seen[k] += 1;
        memcpy(p + 3 * k, pl + 3 * i, 3 * sizeof(double));
        memcpy(v + 3 * k, vl + 3 * i, 3 * sizeof(double));
    }
    /* x + 0 is x: the sums are the holders' values, bit for bit */
    MPI_Allreduce(MPI_IN_PLACE, p, 3 * N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, v, 3 * N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, seen, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int64_t k = 0; k < N; k++)
        ok = ok && seen[k] == 1;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    free(pl), free(vl), free(id), free(seen);
    return ok;
}

/* The largest |a - b| / max(|b|, 1) over count values. */
static double max_rel(const double *a, const double *b, int64_t count)
{
    double m = 0;
    for (int64_t i = 0; i < count; i++) {
        const double d = fabs(a[i] - b[i]) / (fabs(b[i]) > 1 ? fabs(b[i]) : 1);
        m = d > m || isnan(d) ? d : m;
    }
    return m;
}

/* Positions and velocities (tol 0: bit for bit), energies and momenta of a against b. */
static void compare(fmk_sim *a, fmk_sim *b, double tol, const char *what)
{
    double *pa = malloc(sizeof(double) * 3 * N), *va = malloc(sizeof(double) * 3 * N);
    double *pb = malloc(sizeof(double) * 3 * N), *vb = malloc(sizeof(double) * 3 * N);
    CHECK(gather(a, pa, va) && gather(b, pb, vb), "%s: every id once", what);
    const double dp = max_rel(pa, pb, 3 * N), dv = max_rel(va, vb, 3 * N);
    CHECK(tol > 0
              ? dp <= tol && dv <= tol
              : !memcmp(pa, pb, sizeof(double) * 3 * N) && !memcmp(va, vb, sizeof(double) * 3 * N),
          "%s: positions (%.3g) or velocities (%.3g) differ", what, dp, dv);
    fmk_sim_info x, y;
    fmk_sim_info_get(a, &x), fmk_sim_info_get(b, &y);
    CHECK(x.step == y.step && x.time == y.time, "%s: step %lld/%lld", what, (long long)x.step,
          (long long)y.step);
    CHECK(max_rel(&x.kinetic, &y.kinetic, 1) < 1e-13 + tol &&
              max_rel(&x.potential, &y.potential, 1) < 1e-13 + tol,
          "%s: energies %.17g %.17g vs %.17g %.17g", what, x.kinetic, x.potential, y.kinetic,
          y.potential);
    for (int k = 0; k < 3; k++)
        CHECK(fabs(x.momentum[k] - y.momentum[k]) < 1e-15 + tol &&
                  fabs(x.angular_momentum[k] - y.angular_momentum[k]) < 1e-15 + tol,
              "%s: momenta", what);
    free(pa), free(va), free(pb), free(vb);
}

/* The bytes the plan's last set_points and eval sent, summed over the ranks. */
static void plan_bytes(fmk_sim *sim, long long b[2])
{
    fmk_mpi_info info;
    b[0] = b[1] = 0;
    if (fmk_plan_mpi_info(fmk_sim_force_plan(sim), &info) == FMK_OK)
        b[0] = (long long)info.bytes_sent_points, b[1] = (long long)info.bytes_sent_eval;
    MPI_Allreduce(MPI_IN_PLACE, b, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
}

/* The snapshot of sim (after migrations), read by rank 0 alone: ids 1..N in order, each
 * particle the ranks' state bit for bit. */
static void check_snapshot(fmk_sim *sim, const char *dir, const fmk_sim_opts *o, const char *what)
{
    char path[160];
    snprintf(path, sizeof path, "%s/snap_%s.hdf5", dir, what);
    const fmk_status st = fmk_sim_write_snapshot(sim, path);
    if (st == FMK_ERR_UNAVAILABLE) /* built without HDF5 */
        return;
    CHECK(st == FMK_OK, "%s: snapshot: %s", what, fmk_sim_last_error(sim));
    double *p = malloc(sizeof(double) * 3 * N), *v = malloc(sizeof(double) * 3 * N);
    gather(sim, p, v);
    if (rank == 0) {
        fmk_sim *one = NULL;
        CHECK(fmk_sim_create_from_file(&one, path, o) == FMK_OK, "%s: read: %s", what,
              fmk_sim_last_error(NULL));
        double *q = malloc(sizeof(double) * 3 * N);
        uint64_t *id = malloc(sizeof(uint64_t) * N);
        int in_order = one != NULL;
        if (one) {
            fmk_sim_get_state(one, NULL, q, NULL, NULL, NULL);
            fmk_sim_get_ids(one, id);
            for (int64_t k = 0; k < N; k++)
                in_order = in_order && id[k] == (uint64_t)k + 1;
            CHECK(!memcmp(p, q, sizeof(double) * 3 * N), "%s: the snapshot's positions", what);
        }
        CHECK(in_order, "%s: the snapshot's particles are not by id", what);
        fmk_sim_destroy(one);
        free(q), free(id);
    }
    free(p), free(v);
}

/* soft 0 with the direct sum: a partition by Morton key over replicated sources (the
 * particles migrate to runs of the global order instead). */
static void run_case(fmk_method method, double soft, const char *what, const char *dir)
{
    double *mass = malloc(sizeof(double) * N), *pos = malloc(sizeof(double) * 3 * N),
           *vel = malloc(sizeof(double) * 3 * N);
    fmk_sim_ic_plummer(N, 11, mass, pos, vel);
    int64_t count, first;
    share(rank, &count, &first);
    fmk_sim_opts o;
    options(&o, method, soft);
    fmk_sim *mig = NULL, *still = NULL, *cont = NULL;
    CHECK(fmk_sim_create_mpi(&mig, MPI_COMM_WORLD, count, mass + first, pos + 3 * first,
                             vel + 3 * first, NULL, NULL, &o) == FMK_OK,
          "%s: create: %s", what, fmk_sim_last_error(NULL));
    CHECK(fmk_sim_create_mpi(&still, MPI_COMM_WORLD, count, mass + first, pos + 3 * first,
                             vel + 3 * first, NULL, NULL, &o) == FMK_OK,
          "%s: create: %s", what, fmk_sim_last_error(NULL));
    if (!mig || !still)
        goto done;
    fmk_sim_set_migrate(still, 0);
    char restart[160];
    snprintf(restart, sizeof restart, "%s/restart_%s.h5", dir, what);
    const double tol = method == FMK_METHOD_DIRECT ? 0 : 1e-12;
    fmk_sim_migration m, s;
    for (int k = 1; k <= STEPS; k++) {
        step(mig), step(still);
        fmk_sim_migration_get(mig, &m), fmk_sim_migration_get(still, &s);
        long long bm[2], bs[2];
        plan_bytes(mig, bm), plan_bytes(still, bs);
        if (rank == 0)
            printf("%s, %d ranks, step %d: evaluated elsewhere %lld (not migrating: %lld); the "
                   "plan sent %lld + %lld bytes (%lld + %lld)\n",
                   what, size, k, (long long)m.elsewhere_total, (long long)s.elsewhere_total, bm[0],
                   bm[1], bs[0], bs[1]);
        CHECK(s.elsewhere_total >= N / 4 && s.migrations == 0,
              "%s step %d: not migrating, %lld elsewhere", what, k, (long long)s.elsewhere_total);
        if (k == 1)
            CHECK(m.elsewhere_total == s.elsewhere_total && m.migrations == 1,
                  "%s: the first step: %lld elsewhere, %lld migrations", what,
                  (long long)m.elsewhere_total, (long long)m.migrations);
        else
            CHECK(method == FMK_METHOD_DIRECT ? m.elsewhere_total == 0
                                              : m.elsewhere_total <= N / 50,
                  "%s step %d: %lld evaluated elsewhere after migrating", what, k,
                  (long long)m.elsewhere_total);
        if (k == RESTART_AT)
            CHECK(fmk_sim_write_restart(mig, restart) == FMK_OK, "%s: restart: %s", what,
                  fmk_sim_last_error(mig));
    }
    CHECK(m.sent <= count, "%s: %lld sent of %lld", what, (long long)m.sent, (long long)count);
    compare(mig, still, tol, what);
    check_snapshot(mig, dir, &o, what);
    /* the restart (the migrated layout) continued on these ranks: bit for bit */
    const fmk_status st = fmk_sim_create_from_file_mpi(&cont, MPI_COMM_WORLD, restart, NULL);
    if (st != FMK_ERR_UNAVAILABLE) {
        CHECK(st == FMK_OK, "%s: from restart: %s", what, fmk_sim_last_error(NULL));
        for (int k = RESTART_AT; cont && k < STEPS; k++)
            step(cont);
        if (cont)
            compare(cont, mig, 0, "restart");
    }
done:
    fmk_sim_destroy(cont), fmk_sim_destroy(mig), fmk_sim_destroy(still);
    free(mass), free(pos), free(vel);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char dir[64] = "";
    if (rank == 0) {
        strcpy(dir, "/tmp/fmk_sim_migrate_XXXXXX");
        CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (size > 1) {
        run_case(FMK_METHOD_DIRECT, 0.02, "direct", dir);
        run_case(FMK_METHOD_TREE, 0.02, "tree", dir);
        run_case(FMK_METHOD_DIRECT, 0, "laplace", dir);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        char cmd[160];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_sim_migrate on %d ranks: %s (%d failures)\n", size, all ? "FAILED" : "ok",
               all);
    MPI_Finalize();
    return all ? 1 : 0;
}
