/* migrate.c -- a distributed simulation's particles follow the force partition (sim_hooks.h;
 * docs/distributed.md, "The simulation under MPI").
 *
 * The distributed force plan evaluates each target on the rank whose run of the space-filling
 * curve (or, for the direct sum, of the global order) it falls in. A particle that lives on
 * another rank crosses twice an evaluation (its position there, its force back). After a step
 * the plan still knows where it evaluated each of this rank's particles (the owners hook), so
 * the driver moves every particle, with all of its state, to that rank: the next step's
 * partition then finds (nearly) all of its targets at home and moves only the few that crossed
 * a boundary of the curve.
 *
 * A migration runs where the particles evaluated elsewhere are more than 1/MIGRATE_FRACTION
 * of all (summed over the ranks), never on one rank, never between the sub-steps of a step.
 * Each rank sends its particles in their order, and receives them in rank order (MPI's
 * Alltoallv): where the partition is a slice of the global order (the direct sum with a
 * smooth kernel) the global order therefore stays as it was, only the counts a rank change.
 * Where the plan replicates its sources (every rank sums all of them in the ranks' order) and
 * the partition is by Morton key, following it would reorder the sources and with them the
 * sums' rounding (the fp64 direct sum would no longer be the one-process sum bit for bit).
 * Such a plan moves targets only while the ranks' weights are uneven, so there the particles
 * go instead to the runs of the global order with the partition's count a rank: the order
 * stays, the weights are even, and the next partition moves nothing. The state moves bit for
 * bit (positions, velocities, accelerations, potentials, masses, charges, ids, softenings), so
 * the dynamics do not change where the forces do not depend on the order; sums over the ranks
 * (energies, momenta) are taken in another order. A migration that cannot be made (memory) is
 * left out on every rank: the state is as before. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_internal.h"

/* A migration runs once more than 1/MIGRATE_FRACTION (5%) of the particles are evaluated
 * elsewhere. An evaluation sends each of those twice (8 words), a migration once (13 words),
 * so it pays where they would stay elsewhere for two steps: the particles that drift across a
 * boundary of the curve do; those that the partition moves because the ranks' measured costs
 * jitter often come back. 5% is the plan's own tolerance of imbalance (its balance, 1.05);
 * below it, with measured costs on busy cores, migrating chased the timings' noise (more
 * particles evaluated elsewhere than without migration, in runs of 3000 particles on 2 and 3
 * ranks at 1%; fewer at 5%). */
enum { MIGRATE_FRACTION = 20 };

void fmk_sim_migration_get(const fmk_sim *sim, fmk_sim_migration *m)
{
    if (!m)
        return;
    memset(m, 0, sizeof *m);
    if (sim)
        *m = sim->migration;
}

void fmk_sim_set_migrate(fmk_sim *sim, int on)
{
    if (sim)
        sim->migrate_off = !on;
}

fmk_plan *fmk_sim_force_plan(fmk_sim *sim)
{
    return sim ? sim->plan : NULL;
}

/* The words a particle: pos 3, vel 3, acc 3, pot, mass, charge, id, and soft where there. */
static int row_width(const fmk_sim *sim)
{
    return 13 + (sim->soft != NULL);
}

static void pack(const fmk_sim *sim, int64_t i, uint64_t *row)
{
    double d[14];
    memcpy(d, sim->pos + 3 * i, 3 * sizeof(double));
    memcpy(d + 3, sim->vel + 3 * i, 3 * sizeof(double));
    memcpy(d + 6, sim->acc + 3 * i, 3 * sizeof(double));
    d[9] = sim->pot[i], d[10] = sim->mass[i], d[11] = sim->charge[i];
    memcpy(row, d, 12 * sizeof(double));
    row[12] = sim->id[i];
    if (sim->soft)
        memcpy(row + 13, sim->soft + i, sizeof(double));
}

/* The new arrays of a migration (n particles), all or none. */
typedef struct arrays {
    double *pos, *vel, *acc, *pot, *pos_next, *acc_next, *pot_next, *mass, *charge, *soft;
    uint64_t *id;
} arrays;

static void arrays_free(arrays *a)
{
    free(a->pos), free(a->vel), free(a->acc), free(a->pot), free(a->pos_next);
    free(a->acc_next), free(a->pot_next), free(a->mass), free(a->charge), free(a->soft);
    free(a->id);
    memset(a, 0, sizeof *a);
}

static int arrays_make(arrays *a, int64_t n, int soft)
{
    memset(a, 0, sizeof *a);
    a->pos = fmk_sim_doubles(3 * n), a->vel = fmk_sim_doubles(3 * n);
    a->acc = fmk_sim_doubles(3 * n), a->pot = fmk_sim_doubles(n);
    a->pos_next = fmk_sim_doubles(3 * n), a->acc_next = fmk_sim_doubles(3 * n);
    a->pot_next = fmk_sim_doubles(n), a->mass = fmk_sim_doubles(n);
    a->charge = fmk_sim_doubles(n), a->soft = soft ? fmk_sim_doubles(n) : NULL;
    a->id = malloc((size_t)(n > 0 ? n : 1) * sizeof *a->id);
    if (a->pos && a->vel && a->acc && a->pot && a->pos_next && a->acc_next && a->pot_next &&
        a->mass && a->charge && (!soft || a->soft) && a->id)
        return 1;
    arrays_free(a);
    return 0;
}

static void unpack(arrays *a, int64_t i, const uint64_t *row)
{
    double d[12];
    memcpy(d, row, sizeof d);
    memcpy(a->pos + 3 * i, d, 3 * sizeof(double));
    memcpy(a->vel + 3 * i, d + 3, 3 * sizeof(double));
    memcpy(a->acc + 3 * i, d + 6, 3 * sizeof(double));
    a->pot[i] = d[9], a->mass[i] = d[10], a->charge[i] = d[11];
    a->id[i] = row[12];
    if (a->soft)
        memcpy(a->soft + i, row + 13, sizeof(double));
}

/* The new arrays become the state (the old ones freed); the scratch of the old count goes. */
static void install(fmk_sim *sim, arrays *a, int64_t n)
{
    free(sim->pos), free(sim->vel), free(sim->acc), free(sim->pot), free(sim->pos_next);
    free(sim->acc_next), free(sim->pot_next), free(sim->mass), free(sim->charge);
    free(sim->soft), free(sim->id);
    sim->pos = a->pos, sim->vel = a->vel, sim->acc = a->acc, sim->pot = a->pot;
    sim->pos_next = a->pos_next, sim->acc_next = a->acc_next, sim->pot_next = a->pot_next;
    sim->mass = a->mass, sim->charge = a->charge, sim->soft = a->soft, sim->id = a->id;
    memset(a, 0, sizeof *a);
    sim->n = n;
    free(sim->saved); /* the fourth-order step's copy: made anew at the next step */
    sim->saved = NULL;
    fmk_sim_cells_free(&sim->cells);
}

/* What the plan says of this rank's particles. */
typedef struct owners {
    int *owner;        /* n: the rank that evaluated each (malloc'ed), NULL: unknown */
    int64_t elsewhere; /* how many of them elsewhere */
    int distributed;   /* the plan's sources are distributed (the treecode's) */
} owners;

static void owners_of(fmk_sim *sim, owners *o)
{
    const int64_t n = sim->n;
    memset(o, 0, sizeof *o);
    o->owner = malloc((size_t)(n > 0 ? n : 1) * sizeof *o->owner);
    if (o->owner && sim->comm.hooks->owners(sim->comm.state, sim->plan, n, o->owner,
                                            &o->distributed) != FMK_OK) {
        free(o->owner);
        o->owner = NULL;
    }
    for (int64_t i = 0; o->owner && i < n; i++) {
        const int r = o->owner[i];
        if (r < 0 || r >= sim->comm.size) {
            free(o->owner);
            o->owner = NULL;
            break;
        }
        o->elsewhere += r != sim->comm.rank;
    }
}

/* Replicated sources: the owners become those that keep the global order (every rank's
 * particles in rank order) with the partition's count a rank: rank r gets the r-th run of
 * the global order, as long as the partition gave it. 1: some particle moves (the same on
 * every rank). */
static int ordered_owners(fmk_sim *sim, owners *o)
{
    const int size = sim->comm.size;
    const int64_t n = sim->n;
    double *c = calloc((size_t)size, sizeof *c);
    int64_t *all_n = malloc((size_t)size * sizeof *all_n);
    double fail = !c || !all_n;
    fmk_sim_dist_reduce(sim, &fail, 1, FMK_SIM_REDUCE_MAX);
    if (fail != 0)
        return free(c), free(all_n), 0;
    for (int64_t i = 0; i < n; i++)
        c[o->owner[i]] += 1;
    fmk_sim_dist_reduce(sim, c, size, FMK_SIM_REDUCE_SUM); /* counts: exact in doubles */
    sim->comm.hooks->allgather(sim->comm.state, n, all_n);
    int64_t g = 0; /* this rank's first particle's global index */
    for (int r = 0; r < sim->comm.rank; r++)
        g += all_n[r];
    int r = 0;
    int64_t end = (int64_t)c[0];
    o->elsewhere = 0;
    for (int64_t i = 0; i < n; i++, g++) {
        while (g >= end && r < size - 1)
            end += (int64_t)c[++r];
        o->owner[i] = r;
        o->elsewhere += r != sim->comm.rank;
    }
    free(c), free(all_n);
    double moving = (double)o->elsewhere; /* none in all: nothing to do */
    fmk_sim_dist_reduce(sim, &moving, 1, FMK_SIM_REDUCE_SUM);
    return moving > 0;
}

/* 1 on every rank when each rank's ok is 1 (a reduction: the same answer everywhere). */
static int all_ok(const fmk_sim *sim, int ok)
{
    double fail = !ok;
    fmk_sim_dist_reduce(sim, &fail, 1, FMK_SIM_REDUCE_MAX);
    return fail == 0;
}

/* The exchange itself: counts agreed, rows packed by owner, sent, unpacked (1: done). */
static int exchange(fmk_sim *sim, const int *owner)
{
    const fmk_sim_hooks *h = sim->comm.hooks;
    const int size = sim->comm.size, width = row_width(sim);
    const int64_t n = sim->n;
    int64_t *c = calloc(3 * (size_t)size, sizeof *c); /* send counts, recv counts, places */
    if (!all_ok(sim, c && n <= INT_MAX))
        return free(c), 0;
    int64_t n_new = 0;
    for (int64_t i = 0; i < n; i++)
        c[owner[i]]++;
    h->alltoall(sim->comm.state, c, c + size);
    for (int r = 0; r < size; r++)
        c[2 * size + r] = r ? c[2 * size + r - 1] + c[r - 1] : 0, n_new += c[size + r];
    uint64_t *send = malloc((size_t)(n > 0 ? n : 1) * (size_t)width * sizeof *send);
    uint64_t *recv = n_new <= INT_MAX
                         ? malloc((size_t)(n_new > 0 ? n_new : 1) * (size_t)width * sizeof *recv)
                         : NULL;
    arrays a;
    const int made = n_new <= INT_MAX && arrays_make(&a, n_new, sim->soft != NULL);
    if (!all_ok(sim, send && recv && made)) {
        if (made)
            arrays_free(&a);
        free(c), free(send), free(recv);
        return 0;
    }
    int64_t *place = c + 2 * size;
    for (int64_t i = 0; i < n; i++) /* stable: each rank's rows in this rank's order */
        pack(sim, i, send + (size_t)width * (size_t)place[owner[i]]++);
    h->alltoallv(sim->comm.state, send, c, recv, c + size, width);
    for (int64_t i = 0; i < n_new; i++)
        unpack(&a, i, recv + (size_t)width * (size_t)i);
    free(c), free(send), free(recv);
    install(sim, &a, n_new);
    h->owners_here(sim->comm.state, sim->plan, n_new);
    sim->plan_here = 0; /* the plan's targets are in the order before the exchange */
    return 1;
}

void fmk_sim_dist_migrate(fmk_sim *sim)
{
    const fmk_sim_hooks *h = sim->comm.hooks;
    if (!h || sim->comm.size < 2 || sim->dev || !sim->plan)
        return;
    owners o;
    owners_of(sim, &o);
    /* the same decision on every rank: the count elsewhere in all, whether every rank knows
     * its owners (a rank that does not: none migrates), whether the sources are distributed */
    double x[3] = {(double)o.elsewhere, o.owner ? 0 : 1, o.distributed ? 0 : 1};
    fmk_sim_dist_reduce(sim, x, 3, FMK_SIM_REDUCE_SUM);
    sim->migration.elsewhere = o.elsewhere;
    sim->migration.elsewhere_total = (int64_t)x[0];
    const int pays = x[1] == 0 && x[0] * MIGRATE_FRACTION > (double)sim->n_total;
    /* replicated sources are summed in the ranks' order: a migration that keeps it */
    if (pays && !sim->migrate_off && (x[2] == 0 || ordered_owners(sim, &o)) &&
        exchange(sim, o.owner)) {
        sim->migration.sent += o.elsewhere;
        sim->migration.migrations++;
    }
    free(o.owner);
}

/* ids ascending, ties by the gathered order */
typedef struct keyed_id {
    uint64_t id;
    int64_t at;
} keyed_id;

static int by_id(const void *pa, const void *pb)
{
    const keyed_id *a = pa, *b = pb;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return a->at < b->at ? -1 : a->at > b->at;
}

fmk_status fmk_sim_dist_sort_ids(fmk_sim *sim, fmk_sim_particles *all)
{
    if (!sim->comm.hooks)
        return FMK_OK;
    const int64_t n = all->n;
    fmk_status st = FMK_OK;
    int sorted = 1;
    for (int64_t i = 1; i < n && sorted; i++)
        sorted = all->id[i - 1] <= all->id[i];
    keyed_id *k = NULL;
    double *d = NULL;
    uint64_t *u = NULL;
    if (fmk_sim_is_root(sim) && !sorted) {
        k = malloc((size_t)n * sizeof *k);
        d = fmk_sim_doubles(3 * n);
        u = malloc((size_t)n * sizeof *u);
        if (!k || !d || !u)
            st = fmk_sim_fail(sim, FMK_ERR_NOMEM,
                              "sorting %lld particles by id on rank 0: out of host memory",
                              (long long)n);
    }
    if (st == FMK_OK && k) {
        for (int64_t i = 0; i < n; i++)
            k[i].id = all->id[i], k[i].at = i;
        qsort(k, (size_t)n, sizeof *k, by_id);
        double *arr[3] = {all->pos, all->vel, all->mass};
        for (int a = 0; a < 3; a++) {
            const int w = a < 2 ? 3 : 1;
            for (int64_t i = 0; i < n; i++)
                memcpy(d + w * i, arr[a] + w * k[i].at, (size_t)w * sizeof(double));
            memcpy(arr[a], d, (size_t)(w * n) * sizeof(double));
        }
        for (int64_t i = 0; i < n; i++)
            u[i] = k[i].id;
        memcpy(all->id, u, (size_t)n * sizeof *u);
    }
    free(k), free(d), free(u);
    return fmk_sim_dist_agree(sim, st);
}
