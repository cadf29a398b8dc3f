/* test_sim_mpi.c -- distributed simulations (fmmkit_mpi.h: fmk_sim_create_mpi and kin) on the
 * ranks mpirun gives (1..3), CPU, method direct fp64. Each rank runs the one-process
 * simulation of all the particles itself (small N) as the reference. Checked:
 *   - uneven shares, the last rank empty when there are several: positions and velocities bit
 *     for bit after fixed and adaptive steps (the distributed direct sum is the one-process
 *     sum, bit for bit, and the global dt the same minimum), diagnostics within rounding
 *     (sums over ranks in another order), interaction counts equal;
 *   - the particles migrate to the ranks that evaluate them (test_sim_migrate.c checks how):
 *     every comparison goes by id;
 *   - a snapshot written by rank 0 read back by one process: NumPart_Total global, the
 *     particles by id, which is the global order here;
 *   - a restart written at step 5, continued on the same ranks: bit for bit the uninterrupted
 *     run; continued by rank 0 alone (another rank count: equal shares): the same positions;
 *   - fmk_sim_create_root_mpi (rank 0's particles scattered) equals the rest;
 *   - a NaN mass on one rank: the same status on every rank, the failing rank named.
 * With FMK_TEST_BACKEND=gpu (make gpu-test's run under mpirun) the force plans, the reference's
 * and the ranks', are the GPU's: the state stays on the host, and "bit for bit" becomes
 * within 1e-12 (the GPU's self term is removed after the sum, not left out of it). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fmmkit_mpi.h"
#include "mpi_test.h"

static int gpu;

enum { N = 240, STEPS = 10 };

/* Uneven shares: rank r of the first size - 1 gets a weight r + 1, the last none (size > 1). */
static void share(int r, int64_t *count, int64_t *first)
{
    int64_t w = 0, before = 0, mine = 0;
    for (int k = 0; k < size; k++) {
        const int64_t wk = size > 1 && k == size - 1 ? 0 : k + 1;
        w += wk;
        if (k < r)
            before += wk;
        if (k == r)
            mine = wk;
    }
    *first = N * before / w;
    *count = N * (before + mine) / w - *first;
}

static void options(fmk_sim_opts *o, int adaptive)
{
    fmk_sim_opts_default(o);
    o->plan.method = FMK_METHOD_DIRECT;
    o->plan.backend = gpu ? FMK_BACKEND_CUDA : FMK_BACKEND_CPU;
    o->plan.precision = FMK_PRECISION_FP64;
    o->plan.threads = 1;
    o->soft = 0.02;
    o->dt = 2e-3;
    if (adaptive)
        o->stepping = FMK_SIM_STEP_ADAPTIVE, o->eta = 0.05;
}

static int same_bits(const double *a, const double *b, int64_t count)
{
    if (gpu) {
        for (int64_t i = 0; i < count; i++)
            if (!(fabs(a[i] - b[i]) <= 1e-12 * (fabs(b[i]) > 1 ? fabs(b[i]) : 1)))
                return 0;
        return 1;
    }
    return count == 0 || memcmp(a, b, (size_t)count * sizeof(double)) == 0;
}

static double rel(double a, double b)
{
    return fabs(a - b) / (fabs(b) > 1e-300 ? fabs(b) : 1);
}

/* The state of this rank's particles by id (ids 1..N: the global index + 1) into the places of
 * the full arrays p and v (3N each, NaN where another rank holds the particle); the count. */
static int64_t by_id(fmk_sim *sim, double *p, double *v)
{
    fmk_sim_info info;
    if (fmk_sim_info_get(sim, &info) != FMK_OK)
        return -1;
    const int64_t n = info.n_local;
    double *pl = malloc(sizeof(double) * 3 * (n + 1)), *vl = malloc(sizeof(double) * 3 * (n + 1));
    uint64_t *id = malloc(sizeof(uint64_t) * (n + 1));
    for (int64_t k = 0; k < 3 * N; k++)
        p[k] = v ? (v[k] = NAN) : NAN;
    int ok = fmk_sim_get_state(sim, NULL, pl, vl, NULL, NULL) == FMK_OK &&
             fmk_sim_get_ids(sim, id) == FMK_OK;
    for (int64_t i = 0; ok && i < n; i++) {
        ok = id[i] >= 1 && id[i] <= N;
        for (int k = 0; ok && k < 3; k++) {
            p[3 * (id[i] - 1) + k] = pl[3 * i + k];
            if (v)
                v[3 * (id[i] - 1) + k] = vl[3 * i + k];
        }
    }
    free(pl), free(vl), free(id);
    return ok ? n : -1;
}

/* The reference compared with the distributed simulation's state, particle by particle (by id:
 * the particles migrate to the ranks that evaluate their forces); the ranks' particles are N
 * in all. */
static void compare(fmk_sim *dist, fmk_sim *ref, const char *what)
{
    double *p = malloc(sizeof(double) * 3 * N), *v = malloc(sizeof(double) * 3 * N);
    double *pd = malloc(sizeof(double) * 3 * N), *vd = malloc(sizeof(double) * 3 * N);
    CHECK(fmk_sim_get_state(ref, NULL, p, v, NULL, NULL) == FMK_OK, "%s: get_state", what);
    const int64_t count = by_id(dist, pd, vd);
    int64_t seen = 0, total = count;
    for (int64_t k = 0; k < N; k++)
        if (!isnan(pd[3 * k])) {
            seen++;
            CHECK(same_bits(pd + 3 * k, p + 3 * k, 3) && same_bits(vd + 3 * k, v + 3 * k, 3),
                  "%s: particle %lld differs from the one-process run", what, (long long)k + 1);
        }
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    CHECK(count >= 0 && seen == count && total == N,
          "%s: %lld particles here (%lld ids), %lld in all", what, (long long)count,
          (long long)seen, (long long)total);
    fmk_sim_info a, b;
    CHECK(fmk_sim_info_get(dist, &a) == FMK_OK, "%s: info", what);
    CHECK(fmk_sim_info_get(ref, &b) == FMK_OK, "%s: info", what);
    CHECK(a.n == N && a.n_local == count && a.ranks == size && a.rank == rank,
          "%s: n %lld n_local %lld ranks %d", what, (long long)a.n, (long long)a.n_local,
          (int)a.ranks);
    const double tol = gpu ? 1e-11 : 0; /* the GPU: rounding apart (above) */
    CHECK(a.step == b.step && rel(a.time, b.time) <= tol && rel(a.dt, b.dt) <= tol,
          "%s: step %lld/%lld time %.17g/%.17g", what, (long long)a.step, (long long)b.step, a.time,
          b.time);
    CHECK(rel(a.kinetic, b.kinetic) < 1e-13 + tol && rel(a.potential, b.potential) < 1e-13 + tol,
          "%s: energies %.17g %.17g vs %.17g %.17g", what, a.kinetic, a.potential, b.kinetic,
          b.potential);
    for (int k = 0; k < 3; k++)
        CHECK(fabs(a.momentum[k] - b.momentum[k]) < 1e-15 + tol &&
                  fabs(a.angular_momentum[k] - b.angular_momentum[k]) < 1e-15 + tol,
              "%s: momenta", what);
    /* the GPU's distributed sum evaluates each rank's targets as separate targets: it counts
     * the coincident pair it then removes, N an evaluation more than the one-process sum (a
     * step and the first forces) */
    const int64_t extra = gpu ? N : 0;
    CHECK((a.interactions == b.interactions || a.interactions == b.interactions + extra) &&
              a.interactions_total <= b.interactions_total + extra * (a.step + 2),
          "%s: interactions %lld vs %lld", what, (long long)a.interactions,
          (long long)b.interactions);
    free(p), free(v), free(pd), free(vd);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *backend = getenv("FMK_TEST_BACKEND");
    gpu = backend && strcmp(backend, "gpu") == 0;
    double *mass = malloc(sizeof(double) * N), *pos = malloc(sizeof(double) * 3 * N),
           *vel = malloc(sizeof(double) * 3 * N);
    fmk_sim_ic_plummer(N, 7, mass, pos, vel);
    int64_t count, first;
    share(rank, &count, &first);
    char dir[64] = "";
    if (rank == 0) {
        strcpy(dir, "/tmp/fmk_sim_mpi_XXXXXX");
        CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    char restart[128], snap[128];
    snprintf(restart, sizeof restart, "%s/r5.h5", dir);
    snprintf(snap, sizeof snap, "%s/snapshot_002.hdf5", dir);

    for (int adaptive = 0; adaptive < 2; adaptive++) {
        fmk_sim_opts o;
        options(&o, adaptive);
        fmk_sim *ref = NULL, *dist = NULL;
        CHECK(fmk_sim_create(&ref, N, mass, pos, vel, NULL, NULL, &o) == FMK_OK, "ref: %s",
              fmk_sim_last_error(NULL));
        fmk_status st = fmk_sim_create_mpi(&dist, MPI_COMM_WORLD, count, mass + first,
                                           pos + 3 * first, vel + 3 * first, NULL, NULL, &o);
        CHECK(st == FMK_OK && fmk_sim_is_mpi(dist), "create_mpi: %s", fmk_sim_last_error(NULL));
        if (!ref || !dist)
            break;
        if (!adaptive) /* snapshots and diagnostics every 5 steps, a restart at 5 */
            CHECK(fmk_sim_set_output(dist, dir, 5, 0, 5, 0) == FMK_OK, "set_output: %s",
                  fmk_sim_last_error(dist));
        CHECK(fmk_sim_run(ref, 0, 5) == FMK_OK, "ref run");
        CHECK(fmk_sim_run(dist, 0, 5) == FMK_OK, "run: %s", fmk_sim_last_error(dist));
        if (!adaptive)
            CHECK(fmk_sim_write_restart(dist, restart) == FMK_OK, "restart: %s",
                  fmk_sim_last_error(dist));
        CHECK(fmk_sim_run(ref, 0, STEPS - 5) == FMK_OK, "ref run");
        CHECK(fmk_sim_run(dist, 0, STEPS - 5) == FMK_OK, "run: %s", fmk_sim_last_error(dist));
        compare(dist, ref, adaptive ? "adaptive" : "fixed");
        if (!adaptive) {
            /* the restart continued on these ranks: bit for bit */
            fmk_sim *cont = NULL;
            st = fmk_sim_create_from_file_mpi(&cont, MPI_COMM_WORLD, restart, NULL);
            CHECK(st == FMK_OK, "from restart: %s", fmk_sim_last_error(NULL));
            if (cont) {
                CHECK(fmk_sim_run(cont, 0, STEPS - 5) == FMK_OK, "continued run");
                compare(cont, ref, "restart, same ranks");
                fmk_sim_destroy(cont);
            }
            /* the snapshot at step 10, and the restart on rank 0 alone (another count) */
            if (rank == 0) {
                fmk_sim *one = NULL, *back = NULL;
                CHECK(fmk_sim_create_from_file(&one, snap, &o) == FMK_OK, "snapshot: %s",
                      fmk_sim_last_error(NULL));
                CHECK(fmk_sim_create_from_file_mpi(&back, MPI_COMM_SELF, restart, NULL) == FMK_OK,
                      "restart on one rank: %s", fmk_sim_last_error(NULL));
                if (back)
                    CHECK(fmk_sim_run(back, 0, STEPS - 5) == FMK_OK, "continued on one rank");
                double *p = malloc(sizeof(double) * 3 * N), *q = malloc(sizeof(double) * 3 * N);
                fmk_sim_info info;
                if (one && fmk_sim_info_get(one, &info) == FMK_OK) {
                    CHECK(info.n == N, "snapshot n %lld", (long long)info.n);
                    /* the file lists the particles by id, as the one-process run holds them */
                    fmk_sim_get_state(one, NULL, q, NULL, NULL, NULL);
                    fmk_sim_get_state(ref, NULL, p, NULL, NULL, NULL);
                    CHECK(same_bits(p, q, 3 * N), "snapshot positions in global order");
                }
                if (back) { /* a restart lists them as the ranks held them: by id here */
                    CHECK(by_id(back, q, NULL) == N, "restart on one rank: ids");
                    CHECK(same_bits(p, q, 3 * N), "restart on one rank: positions");
                }
                free(p), free(q);
                fmk_sim_destroy(one);
                fmk_sim_destroy(back);
            }
        }
        fmk_sim_destroy(dist);
        fmk_sim_destroy(ref);
    }

    /* rank 0's particles scattered in equal shares: the same first step */
    {
        fmk_sim_opts o;
        options(&o, 0);
        fmk_sim *a = NULL, *ref = NULL;
        CHECK(fmk_sim_create_root_mpi(&a, MPI_COMM_WORLD, rank == 0 ? N : 0,
                                      rank == 0 ? mass : NULL, rank == 0 ? pos : NULL,
                                      rank == 0 ? vel : NULL, &o) == FMK_OK,
              "create_root_mpi: %s", fmk_sim_last_error(NULL));
        fmk_sim_create(&ref, N, mass, pos, vel, NULL, NULL, &o);
        if (a && ref) {
            fmk_sim_step(a), fmk_sim_step(ref);
            compare(a, ref, "root scatter");
        }
        fmk_sim_destroy(a), fmk_sim_destroy(ref);
    }

    /* the spline softening: each rank's correction takes the other ranks' particles near its
     * own (the hook halo); within rounding of the one-process run (the pairs' sums run in
     * another order), for a softening whose h holds many pairs */
    {
        fmk_sim_opts o;
        options(&o, 0);
        o.softening = FMK_SIM_SOFT_SPLINE, o.soft = 0.12;
        int64_t pairs = 0; /* h = 2.8 s (GADGET) */
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < i; j++) {
                double r2 = 0;
                for (int k = 0; k < 3; k++)
                    r2 += (pos[3 * i + k] - pos[3 * j + k]) * (pos[3 * i + k] - pos[3 * j + k]);
                pairs += r2 < (2.8 * 0.12) * (2.8 * 0.12);
            }
        fmk_sim *a = NULL, *ref = NULL;
        fmk_status st = fmk_sim_create_mpi(&a, MPI_COMM_WORLD, count, mass + first, pos + 3 * first,
                                           vel + 3 * first, NULL, NULL, &o);
        CHECK(st == FMK_OK, "spline: create_mpi: %s", fmk_sim_last_error(NULL));
        CHECK(fmk_sim_create(&ref, N, mass, pos, vel, NULL, NULL, &o) == FMK_OK, "spline: ref");
        if (a && ref) {
            CHECK(fmk_sim_run(a, 0, STEPS) == FMK_OK, "spline run: %s", fmk_sim_last_error(a));
            CHECK(fmk_sim_run(ref, 0, STEPS) == FMK_OK, "spline ref run");
            double *p = malloc(sizeof(double) * 3 * N), *v = malloc(sizeof(double) * 3 * N);
            double *pd = malloc(sizeof(double) * 3 * N), *vd = malloc(sizeof(double) * 3 * N);
            fmk_sim_get_state(ref, NULL, p, v, NULL, NULL);
            const int64_t here = by_id(a, pd, vd);
            double worst = 0;
            for (int64_t k = 0; k < 3 * N; k++)
                if (!isnan(pd[k])) {
                    const double e = fabs(pd[k] - p[k]) + fabs(vd[k] - v[k]);
                    worst = e > worst ? e : worst;
                }
            MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            fmk_sim_info ia, ib;
            fmk_sim_info_get(a, &ia), fmk_sim_info_get(ref, &ib);
            if (rank == 0)
                printf("  spline (%lld pairs within h): largest difference %.2e, potential "
                       "%.17g vs %.17g\n",
                       (long long)pairs, worst, ia.potential, ib.potential);
            CHECK(here >= 0 && worst < 1e-11 && rel(ia.potential, ib.potential) < 1e-12 &&
                      pairs > N,
                  "spline: difference %.3e, potential %.17g vs %.17g, %lld pairs", worst,
                  ia.potential, ib.potential, (long long)pairs);
            free(p), free(v), free(pd), free(vd);
        }
        fmk_sim_destroy(a), fmk_sim_destroy(ref);
    }

    /* a NaN mass on one rank: every rank fails alike */
    {
        fmk_sim_opts o;
        options(&o, 0);
        const int bad = size > 1 ? size - 2 : 0; /* a rank with particles */
        const double saved = rank == bad ? mass[first] : 0;
        if (rank == bad)
            mass[first] = NAN;
        fmk_sim *s = NULL;
        const fmk_status st = fmk_sim_create_mpi(&s, MPI_COMM_WORLD, count, mass + first,
                                                 pos + 3 * first, vel + 3 * first, NULL, NULL, &o);
        if (rank == bad)
            mass[first] = saved;
        char expect[32];
        snprintf(expect, sizeof expect, "rank %d:", bad);
        CHECK(st == FMK_ERR_NONFINITE && s == NULL, "NaN mass: status %d", (int)st);
        CHECK(strstr(fmk_sim_last_error(NULL), expect) != NULL, "NaN mass: message '%s'",
              fmk_sim_last_error(NULL));
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
        printf("test_sim_mpi on %d ranks: %s (%d failures)\n", size, all ? "FAILED" : "ok", all);
    free(mass), free(pos), free(vel);
    MPI_Finalize();
    return all ? 1 : 0;
}
