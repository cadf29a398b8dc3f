/* dist.c -- distributed simulations (sim_hooks.h; docs/distributed.md, "The simulation under
 * MPI"): agreed statuses, reductions, the particles gathered on rank 0 for the files, and
 * create over a communicator.
 *
 * Each rank keeps its own particles on the host (a distributed plan takes host arrays); the
 * force plan is distributed over the simulation's communicator, so a rank's forces are those
 * of every rank's particles. Everything else that needs the other ranks is a reduction of a few
 * doubles (energies, momenta, the adaptive step's bound, the interaction counts, interrupts) or
 * a gather on rank 0 (snapshots, PNGs, restarts), which writes the files. A call that fails on
 * one rank returns the same status on every rank (the checks are followed by an agreement
 * before the next collective step), so no rank waits for another that returned. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_internal.h"

fmk_status fmk_sim_comm_agree(const fmk_sim_comm *comm, fmk_sim *sim, fmk_status st)
{
    if (!comm || !comm->hooks)
        return st;
    char msg[FMK_SIM_ERROR_LEN];
    snprintf(msg, sizeof msg, "%s", st == FMK_OK ? "" : fmk_sim_last_error(sim));
    st = comm->hooks->agree(comm->state, st, msg, sizeof msg);
    return st == FMK_OK ? FMK_OK : fmk_sim_fail(sim, st, "%s", msg);
}

fmk_status fmk_sim_dist_agree(fmk_sim *sim, fmk_status st)
{
    return fmk_sim_comm_agree(&sim->comm, sim, st);
}

void fmk_sim_dist_reduce(const fmk_sim *sim, double *x, int count, fmk_sim_reduce_op op)
{
    if (sim->comm.hooks)
        sim->comm.hooks->reduce(sim->comm.state, x, count, op);
}

int fmk_sim_dist_stopped(fmk_sim *sim)
{
    double stop = atomic_load(&sim->stop);
    fmk_sim_dist_reduce(sim, &stop, 1, FMK_SIM_REDUCE_MAX);
    return stop != 0;
}

int fmk_sim_is_root(const fmk_sim *sim)
{
    return sim->comm.rank == 0;
}

fmk_status fmk_sim_hook_error(fmk_status status, const char *message)
{
    return fmk_sim_fail(NULL, status, "%s", message ? message : "");
}

int fmk_sim_has_hooks(const fmk_sim *sim, const fmk_sim_hooks *hooks)
{
    return sim && hooks && sim->comm.hooks == hooks;
}

void fmk_sim_dist_share(int64_t n, int rank, int size, int64_t *count, int64_t *first)
{
    const int64_t q = n / size, r = n % size;
    *count = q + (rank < r);
    *first = q * rank + (rank < r ? rank : r);
}

/* counts[r] * width, into words[] (FMK_ERR_ARG when a rank's exceeds one message's int). */
static fmk_status words_of(const int64_t *counts, int size, int width, int64_t *words)
{
    for (int r = 0; r < size; r++) {
        if (counts[r] > INT_MAX / width)
            return FMK_ERR_ARG;
        words[r] = counts[r] * width;
    }
    return FMK_OK;
}

void fmk_sim_dist_free(const fmk_sim *sim, fmk_sim_particles *all, double *acc_all, double *pot_all)
{
    if (!sim->comm.hooks) /* views of the simulation's own arrays */
        return;
    free(all->pos), free(all->vel), free(all->mass), free(all->id);
    free(acc_all), free(pot_all);
    memset(all, 0, sizeof *all);
}

fmk_status fmk_sim_dist_gather(fmk_sim *sim, const fmk_sim_particles *local, const double *acc,
                               const double *pot, fmk_sim_particles *all, double **acc_all,
                               double **pot_all)
{
    *all = *local;
    if (!sim->comm.hooks)
        return FMK_OK;
    const fmk_sim_hooks *h = sim->comm.hooks;
    const int size = sim->comm.size, root = fmk_sim_is_root(sim), forces = acc_all != NULL;
    all->n = 0;
    all->pos = all->vel = all->mass = all->soft = NULL; /* softenings: not gathered */
    all->id = NULL;
    if (forces)
        *acc_all = *pot_all = NULL;
    int64_t *counts = calloc((size_t)size * 3, sizeof *counts);
    fmk_status st = counts ? FMK_OK : FMK_ERR_NOMEM;
    if (counts)
        h->allgather(sim->comm.state, local->n, counts);
    int64_t *w1 = counts ? counts + size : NULL, *w3 = counts ? counts + 2 * size : NULL;
    if (st == FMK_OK &&
        (words_of(counts, size, 1, w1) != FMK_OK || words_of(counts, size, 3, w3) != FMK_OK))
        st = fmk_sim_fail(sim, FMK_ERR_ARG,
                          "gathering the particles on rank 0: a rank holds more than %d "
                          "particles, too many for one message",
                          INT_MAX / 3);
    const int64_t n = sim->n_total;
    if (st == FMK_OK && root) {
        all->n = n;
        all->pos = fmk_sim_doubles(3 * n), all->vel = fmk_sim_doubles(3 * n);
        all->mass = fmk_sim_doubles(n);
        all->id = malloc((size_t)(n > 0 ? n : 1) * sizeof *all->id);
        if (forces)
            *acc_all = fmk_sim_doubles(3 * n), *pot_all = fmk_sim_doubles(n);
        if (!all->pos || !all->vel || !all->mass || !all->id ||
            (forces && (!*acc_all || !*pot_all)))
            st = fmk_sim_fail(sim, FMK_ERR_NOMEM,
                              "gathering the particles on rank 0: out of host memory for %lld "
                              "particles",
                              (long long)n);
    }
    if (!counts)
        st = fmk_sim_fail(sim, FMK_ERR_NOMEM, "gathering the particles: out of host memory");
    if ((st = fmk_sim_dist_agree(sim, st)) == FMK_OK) {
        void *state = sim->comm.state;
        h->gather(state, local->pos, w3, all->pos);
        h->gather(state, local->vel, w3, all->vel);
        h->gather(state, local->mass, w1, all->mass);
        h->gather(state, local->id, w1, all->id);
        if (forces) {
            h->gather(state, acc, w3, *acc_all);
            h->gather(state, pot, w1, *pot_all);
        }
    }
    free(counts);
    if (st == FMK_OK && !forces) /* a snapshot's: by id, whatever ranks hold them */
        st = fmk_sim_dist_sort_ids(sim, all);
    if (st != FMK_OK)
        fmk_sim_dist_free(sim, all, forces ? *acc_all : NULL, forces ? *pot_all : NULL);
    return st;
}

fmk_status fmk_sim_comm_same_opts(const fmk_sim_comm *comm, const fmk_sim_opts *o)
{
    static const char *const names[] = {"G",
                                        "softening",
                                        "soft",
                                        "stepping",
                                        "dt",
                                        "eta",
                                        "dt_min",
                                        "dt_max",
                                        "eps",
                                        "integrator",
                                        "comoving",
                                        "spacing",
                                        "soft_mode",
                                        "soft_max_comoving",
                                        "a_start",
                                        "radius",
                                        "cosmology.omega_m",
                                        "cosmology.omega_lambda",
                                        "cosmology.h"};
    enum { N = sizeof names / sizeof names[0] };
    const fmk_sim_cosmology *c = &o->cosmology;
    const double v[N] = {o->G,
                         (double)o->softening,
                         o->soft,
                         (double)o->stepping,
                         o->dt,
                         o->eta,
                         o->dt_min,
                         o->dt_max,
                         o->eps,
                         (double)o->integrator,
                         (double)o->comoving,
                         (double)o->spacing,
                         (double)o->soft_mode,
                         o->soft_max_comoving,
                         o->a_start,
                         o->radius,
                         c->omega_m,
                         c->omega_lambda,
                         c->h};
    /* the least and (negated) the largest of each over the ranks in one reduction */
    double both[2 * N];
    for (int k = 0; k < N; k++) {
        both[k] = isnan(v[k]) ? -INFINITY : v[k];
        both[N + k] = isnan(v[k]) ? -INFINITY : -v[k];
    }
    comm->hooks->reduce(comm->state, both, 2 * N, FMK_SIM_REDUCE_MIN);
    for (int k = 0; k < N; k++)
        if (both[k] != -both[N + k])
            return fmk_sim_fail(NULL, FMK_ERR_ARG,
                                "fmk_sim_create_mpi: the ranks passed different values of "
                                "opts.%s (%g .. %g); every rank must pass the same",
                                names[k], both[k], -both[N + k]);
    return FMK_OK;
}

fmk_status fmk_sim_dist_create(fmk_sim **out, const fmk_sim_comm *comm, int64_t n,
                               const double *mass, const double *pos, const double *vel,
                               const double *soft, const uint64_t *ids, const double *time,
                               const fmk_sim_opts *opts)
{
    fmk_status st = FMK_OK;
    if (!out)
        st = fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_create_mpi: sim (the output) is NULL");
    else
        *out = NULL;
    fmk_sim_opts o;
    if (opts)
        o = *opts;
    else
        fmk_sim_opts_default(&o);
    if (st == FMK_OK)
        st = fmk_sim_check_opts(&o, soft != NULL);
    if (st == FMK_OK && soft)
        st = fmk_sim_fail(NULL, FMK_ERR_UNAVAILABLE,
                          "fmk_sim_create_mpi: per-particle softening lengths are not "
                          "distributed yet (the ranks' snapshots and restarts do not gather "
                          "them); give one length, opts.soft");
    if (st == FMK_OK)
        st = fmk_sim_check_share(n, mass, pos, vel, soft, &o);
    if ((st = fmk_sim_comm_agree(comm, NULL, st)) == FMK_OK)
        st = fmk_sim_comm_same_opts(comm, &o);
    int64_t *counts = NULL;
    uint64_t *made = NULL;
    if (st == FMK_OK) {
        counts = malloc((size_t)comm->size * sizeof *counts);
        int64_t first = 0, total = 0;
        if (counts) {
            comm->hooks->allgather(comm->state, n, counts);
            for (int r = 0; r < comm->size; r++)
                first += r < comm->rank ? counts[r] : 0, total += counts[r];
        }
        if (!ids && counts && (made = malloc((size_t)(n > 0 ? n : 1) * sizeof *made)))
            for (int64_t i = 0; i < n; i++)
                made[i] = (uint64_t)(first + i + 1);
        if (!counts || (!ids && !made))
            st = fmk_sim_fail(NULL, FMK_ERR_NOMEM, "fmk_sim_create_mpi: out of host memory");
        else if (total < 1 || total > ((int64_t)1 << 40))
            st = fmk_sim_fail(NULL, FMK_ERR_ARG,
                              "fmk_sim_create_mpi: the ranks hold %lld particles in all; there "
                              "must be 1..2^40",
                              (long long)total);
        st = fmk_sim_comm_agree(comm, NULL, st);
    }
    free(counts);
    if (st != FMK_OK) {
        free(made);
        if (comm->hooks->release)
            comm->hooks->release(comm->state);
        return st;
    }
    const fmk_sim_init in = {.n = n,
                             .comm = comm,
                             .mass = mass,
                             .pos = pos,
                             .vel = vel,
                             .soft = soft,
                             .ids = ids ? ids : made,
                             .time = time         ? *time
                                     : o.comoving ? o.a_start
                                                  : 0};
    st = fmk_sim_build(out, &in, &o);
    free(made);
    return st;
}

fmk_status fmk_sim_create_comm(fmk_sim **sim, const fmk_sim_comm *comm, int64_t n,
                               const double *mass, const double *pos, const double *vel,
                               const double *soft_per_particle, const uint64_t *ids,
                               const fmk_sim_opts *opts)
{
    if (!comm || !comm->hooks)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_create_comm: no communicator");
    return fmk_sim_dist_create(sim, comm, n, mass, pos, vel, soft_per_particle, ids, NULL, opts);
}

fmk_status fmk_sim_create_root_comm(fmk_sim **sim, const fmk_sim_comm *comm, int64_t n,
                                    const double *mass, const double *pos, const double *vel,
                                    const fmk_sim_opts *opts)
{
    if (!comm || !comm->hooks)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_create_comm: no communicator");
    const fmk_sim_hooks *h = comm->hooks;
    const int root = comm->rank == 0, size = comm->size;
    fmk_status st = FMK_OK;
    if (root && (n < 1 || n > ((int64_t)1 << 40)))
        st = fmk_sim_fail(NULL, FMK_ERR_ARG,
                          "fmk_sim_create_mpi: n = %lld on rank 0; it must be "
                          "in 1..2^40",
                          (long long)n);
    else if (root && (!mass || !pos || !vel))
        st = fmk_sim_fail(NULL, FMK_ERR_NULL,
                          "fmk_sim_create_mpi: rank 0's mass, pos and vel must be arrays of n, "
                          "3n and 3n doubles");
    double total = root ? (double)n : 0;
    h->reduce(comm->state, &total, 1, FMK_SIM_REDUCE_SUM);
    int64_t count, first, *w = calloc(2 * (size_t)size, sizeof *w);
    fmk_sim_dist_share((int64_t)total, comm->rank, size, &count, &first);
    double *mine = fmk_sim_doubles(7 * count);
    if (st == FMK_OK && (!w || !mine))
        st = fmk_sim_fail(NULL, FMK_ERR_NOMEM, "fmk_sim_create_mpi: out of host memory");
    for (int r = 0; w && st == FMK_OK && r < size; r++) {
        int64_t c, f;
        fmk_sim_dist_share((int64_t)total, r, size, &c, &f);
        if (c > INT_MAX / 3)
            st = fmk_sim_fail(NULL, FMK_ERR_ARG,
                              "fmk_sim_create_mpi: %lld particles a rank are too many for one "
                              "message",
                              (long long)c);
        w[r] = c, w[size + r] = 3 * c;
    }
    if ((st = fmk_sim_comm_agree(comm, NULL, st)) == FMK_OK) {
        h->scatter(comm->state, mass, w, mine);
        h->scatter(comm->state, pos, w + size, mine + count);
        h->scatter(comm->state, vel, w + size, mine + 4 * count);
    }
    free(w);
    if (st != FMK_OK) {
        free(mine);
        if (h->release)
            h->release(comm->state);
        return st;
    }
    st = fmk_sim_dist_create(sim, comm, count, mine, mine + count, mine + 4 * count, NULL, NULL,
                             NULL, opts);
    free(mine);
    return st;
}
