/* dist_file.c -- fmk_sim_create_from_file over a communicator (sim_hooks.h): rank 0 reads the
 * file and the particles are scattered. A snapshot's go in equal shares in the file's order; a
 * restart's go back to the ranks that wrote them when the file was written on as many ranks
 * (restart.c: the blob's extension), so that the continuation is the uninterrupted run bit for
 * bit, and in equal shares in the file's (global) order otherwise. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_internal.h"

enum { WHAT_SNAPSHOT = 0, WHAT_RESTART = 1 };

/* What rank 0 read. */
typedef struct file_read {
    fmk_sim_particles p;
    double *acc, *pot;
    void *state;
    size_t state_bytes;
} file_read;

static void read_free(file_read *f)
{
    fmk_sim_particles_free(&f->p);
    free(f->acc), free(f->pot), free(f->state);
    memset(f, 0, sizeof *f);
}

/* Rank 0 reads path; the status agreed. A snapshot's comoving velocities become momenta. */
static fmk_status root_read(const fmk_sim_comm *comm, const char *path, const fmk_sim_opts *o,
                            file_read *f, double *what)
{
    fmk_status st = FMK_OK;
    char msg[FMK_SIM_ERROR_LEN] = "";
    *what = WHAT_SNAPSHOT;
    if (comm->rank == 0) {
        if (!path)
            st = fmk_sim_fail(NULL, FMK_ERR_NULL,
                              "fmk_sim_create_from_file_mpi: rank 0's path "
                              "is NULL");
        else if (fmk_sim_io_is_restart(path)) {
            *what = WHAT_RESTART;
            st = fmk_sim_io_read_restart(path, &f->p, &f->acc, &f->pot, &f->state, &f->state_bytes,
                                         msg, sizeof msg);
        } else {
            st = fmk_sim_io_read_snapshot(path, &f->p, msg, sizeof msg);
        }
        if (st != FMK_OK && msg[0])
            fmk_sim_fail(NULL, st, "%s", msg);
        if (st == FMK_OK && *what == WHAT_SNAPSHOT) {
            if (!isfinite(f->p.time) || (o->comoving && !(f->p.time > 0)))
                st = fmk_sim_fail(NULL, FMK_ERR_ARG,
                                  "the snapshot's Time is %g; it must be finite (and, a comoving "
                                  "run's scale factor, > 0)",
                                  f->p.time);
            else if (o->comoving) { /* GADGET's velocities p / a^(3/2) back to the momenta p */
                const double s = f->p.time * sqrt(f->p.time);
                for (int64_t k = 0; k < 3 * f->p.n; k++)
                    f->p.vel[k] *= s;
            }
        }
    }
    st = fmk_sim_comm_agree(comm, NULL, st);
    comm->hooks->bcast(comm->state, what, 1);
    return st;
}

/* Each rank's count: the stored ones when they are for this many ranks, else equal shares;
 * into counts[size] and the word counts of 1 and 3 words a particle. */
static fmk_status shares(const fmk_sim_comm *comm, int64_t n, int ranks, const int64_t *stored,
                         int64_t *w1, int64_t *w3)
{
    for (int r = 0; r < comm->size; r++) {
        int64_t c, first;
        fmk_sim_dist_share(n, r, comm->size, &c, &first);
        if (ranks == comm->size)
            c = stored[r];
        if (c < 0 || c > INT_MAX / 3)
            return fmk_sim_fail(NULL, FMK_ERR_ARG,
                                "fmk_sim_create_from_file_mpi: rank %d's share is %lld particles "
                                "(a damaged file, or too many for one message)",
                                r, (long long)c);
        w1[r] = c, w3[r] = 3 * c;
    }
    return FMK_OK;
}

/* The particles of f (rank 0) scattered by w1, w3 into cp (this rank's share; acc, pot when
 * forces). */
static fmk_status scatter(const fmk_sim_comm *comm, const file_read *f, const int64_t *w1,
                          const int64_t *w3, int forces, int soft, fmk_sim_checkpoint *cp)
{
    const int64_t n = w1[comm->rank];
    cp->p.n = n;
    cp->p.pos = fmk_sim_doubles(3 * n), cp->p.vel = fmk_sim_doubles(3 * n);
    cp->p.mass = fmk_sim_doubles(n);
    cp->p.id = malloc((size_t)(n > 0 ? n : 1) * sizeof *cp->p.id);
    cp->p.soft = soft ? fmk_sim_doubles(n) : NULL;
    cp->acc = forces ? fmk_sim_doubles(3 * n) : NULL;
    cp->pot = forces ? fmk_sim_doubles(n) : NULL;
    fmk_status st = FMK_OK;
    if (!cp->p.pos || !cp->p.vel || !cp->p.mass || !cp->p.id || (soft && !cp->p.soft) ||
        (forces && (!cp->acc || !cp->pot)))
        st = fmk_sim_fail(NULL, FMK_ERR_NOMEM,
                          "fmk_sim_create_from_file_mpi: out of host memory for %lld particles",
                          (long long)n);
    if ((st = fmk_sim_comm_agree(comm, NULL, st)) != FMK_OK)
        return st;
    const fmk_sim_hooks *h = comm->hooks;
    h->scatter(comm->state, f->p.pos, w3, cp->p.pos);
    h->scatter(comm->state, f->p.vel, w3, cp->p.vel);
    h->scatter(comm->state, f->p.mass, w1, cp->p.mass);
    h->scatter(comm->state, f->p.id, w1, cp->p.id);
    if (soft)
        h->scatter(comm->state, f->p.soft, w1, cp->p.soft);
    if (forces) {
        h->scatter(comm->state, f->acc, w3, cp->acc);
        h->scatter(comm->state, f->pot, w1, cp->pot);
    }
    return FMK_OK;
}

/* The blob from rank 0 to every rank (into cp->state), its layout read. */
static fmk_status share_blob(const fmk_sim_comm *comm, const file_read *f, fmk_sim_checkpoint *cp,
                             int64_t *n, int *has_soft, int *ranks, int64_t **counts)
{
    double words = (double)((f->state_bytes + 7) / 8);
    comm->hooks->bcast(comm->state, &words, 1);
    cp->state_bytes = (size_t)words * 8;
    fmk_status st = FMK_OK;
    if (!(cp->state = calloc((size_t)words + 1, 8)))
        st = fmk_sim_fail(NULL, FMK_ERR_NOMEM, "restart: out of host memory");
    if ((st = fmk_sim_comm_agree(comm, NULL, st)) != FMK_OK)
        return st;
    if (comm->rank == 0)
        memcpy(cp->state, f->state, f->state_bytes);
    comm->hooks->bcast(comm->state, cp->state, (int64_t)words);
    /* the same blob everywhere: the same status everywhere */
    return fmk_sim_blob_layout(cp->state, cp->state_bytes, n, has_soft, ranks, counts);
}

fmk_status fmk_sim_create_from_file_comm(fmk_sim **out, const fmk_sim_comm *comm, const char *path,
                                         const fmk_sim_opts *opts)
{
    if (!comm || !comm->hooks)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_create_from_file_comm: no communicator");
    fmk_sim_opts o;
    if (opts)
        o = *opts;
    else
        fmk_sim_opts_default(&o);
    file_read f;
    memset(&f, 0, sizeof f);
    fmk_sim_checkpoint cp;
    memset(&cp, 0, sizeof cp);
    double what;
    int64_t n = 0, *counts = NULL, *w = calloc(2 * (size_t)comm->size, sizeof *w);
    int has_soft = 0, ranks = 0;
    fmk_status st = fmk_sim_comm_agree(
        comm, NULL, w ? FMK_OK : fmk_sim_fail(NULL, FMK_ERR_NOMEM, "out of host memory"));
    if (st == FMK_OK)
        st = root_read(comm, path, &o, &f, &what);
    const int restart = st == FMK_OK && what == WHAT_RESTART;
    double head[2] = {(double)f.p.n, f.p.time}; /* a snapshot's n and time, from rank 0 */
    if (st == FMK_OK && restart)
        st = share_blob(comm, &f, &cp, &n, &has_soft, &ranks, &counts);
    else if (st == FMK_OK) {
        comm->hooks->bcast(comm->state, head, 2);
        n = (int64_t)head[0];
    }
    if (st == FMK_OK)
        st = shares(comm, n, ranks, counts, w, w + comm->size); /* the same on every rank */
    if (st == FMK_OK)
        st = scatter(comm, &f, w, w + comm->size, restart, restart && has_soft, &cp);
    read_free(&f);
    free(counts), free(w);
    if (st != FMK_OK) {
        fmk_sim_checkpoint_free(&cp);
        if (comm->hooks->release)
            comm->hooks->release(comm->state);
        if (out)
            *out = NULL;
        return st;
    }
    if (restart)
        st = fmk_sim_checkpoint_build(out, &cp, opts, comm);
    else /* a snapshot's softening lengths serve the spline only, which is not distributed */
        st = fmk_sim_dist_create(out, comm, cp.p.n, cp.p.mass, cp.p.pos, cp.p.vel, NULL, cp.p.id,
                                 &head[1], &o);
    fmk_sim_checkpoint_free(&cp);
    return st;
}
