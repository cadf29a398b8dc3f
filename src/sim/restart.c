/* restart.c -- the state blob, checkpoints (a restart in memory) and restart files.
 *
 * A restart holds everything the next step reads: positions, velocities, masses, ids,
 * softening lengths, and the accelerations and potentials of the last force evaluation (so a
 * continued run recomputes no force: its next step is the very step the uninterrupted run
 * takes), plus the blob: step, time, the last dt, the options and the output counters, every
 * double stored as its 64 bits. fmk_sim_create_from_checkpoint with opts NULL therefore
 * continues bit for bit (same method, backend and device: the plan's results must be
 * reproducible, which every CPU method and the GPU direct sum and treecode are). The file path
 * (fmk_sim_write_restart, fmk_sim_create_from_file) is the same checkpoint through sim_io.h.
 *
 * A distributed simulation's restart file holds every rank's particles in rank order (rank 0
 * gathers and writes them) and a blob whose n is the global count, followed by an extension:
 * the number of ranks R and each rank's count. Read back on R ranks, each rank gets its own
 * particles again (bit for bit); on another count, or by one process, the particles keep their
 * global order in equal shares (dist_file.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_internal.h"

/* The blob: 8-byte words in the host's byte order, the first a magic that reads differently
 * in the other order. */
#define BLOB_MAGIC 0x31304d49534b4d46ull /* "FMKSIM01" on a little-endian host */
#define BLOB_VERSION 2 /* 2: the comoving options and state; version 1 (Newtonian) still read */
/* The record's words, a group a line. */
/* clang-format off */
enum {
    W_MAGIC, W_VERSION, W_WORDS, W_N, W_STEP, W_TIME, W_DT, W_HAS_SOFT,
    W_SNAP_COUNT, W_SNAP_LAST, W_DIAG_LAST, W_RESTART_LAST,
    W_G, W_SOFTENING, W_SOFT, W_STEPPING, W_DT_OPT, W_ETA, W_DT_MIN, W_DT_MAX, W_VERBOSE, W_EPS,
    W_P_METHOD, W_P_BACKEND, W_P_PRECISION, W_P_THREADS, W_P_DEVICE, W_P_ORDER, W_P_LEAF,
    W_P_SOFTENING, W_P_THETA, W_P_VERBOSE, W_P_WALK, W_P_VECTORS,
    W_COUNT_V1,
    W_COMOVING = W_COUNT_V1, W_OMEGA_M, W_OMEGA_L, W_OMEGA_B, W_HUBBLE, W_N_S, W_SIGMA_8, W_T_CMB,
    W_SPACING, W_SOFT_MODE, W_SOFT_MAX, W_A_START, W_RADIUS,
    W_U, W_LI_K, W_LI_INT, W_LI_START, W_LI_MAX, W_INTERACTIONS, W_U_REF_SET, W_U_REF,
    W_INTEGRATOR,
    W_COUNT
};
/* clang-format on */

static uint64_t from_f(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static double to_f(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint64_t byte_swap(uint64_t u)
{
    uint64_t r = 0;
    for (int k = 0; k < 8; k++, u >>= 8)
        r = r << 8 | (u & 0xff);
    return r;
}

/* The comoving words of a version-1 record: the options' defaults, the state zero. */
/* The comoving options' words (W_COMOVING .. W_RADIUS). */
static void blob_write_cosmology(const fmk_sim_opts *o, uint64_t *w)
{
    const fmk_sim_cosmology *c = &o->cosmology;
    w[W_COMOVING] = (uint64_t)(int64_t)o->comoving;
    w[W_OMEGA_M] = from_f(c->omega_m), w[W_OMEGA_L] = from_f(c->omega_lambda);
    w[W_OMEGA_B] = from_f(c->omega_b), w[W_HUBBLE] = from_f(c->h), w[W_N_S] = from_f(c->n_s);
    w[W_SIGMA_8] = from_f(c->sigma_8), w[W_T_CMB] = from_f(c->t_cmb);
    w[W_SPACING] = (uint64_t)o->spacing, w[W_SOFT_MODE] = (uint64_t)o->soft_mode;
    w[W_SOFT_MAX] = from_f(o->soft_max_comoving), w[W_A_START] = from_f(o->a_start);
    w[W_RADIUS] = from_f(o->radius);
}

static void blob_write_comoving_defaults(const fmk_sim_opts *o, uint64_t *w)
{
    blob_write_cosmology(o, w);
    w[W_COMOVING] = 0;
    for (int k = W_U; k < W_COUNT; k++)
        w[k] = 0;
}

static void blob_write(const fmk_sim *sim, uint64_t *w)
{
    const fmk_sim_opts *o = &sim->opts;
    const fmk_opts *p = &o->plan;
    w[W_MAGIC] = BLOB_MAGIC, w[W_VERSION] = BLOB_VERSION, w[W_WORDS] = W_COUNT;
    w[W_N] = (uint64_t)sim->n, w[W_STEP] = (uint64_t)sim->step;
    w[W_TIME] = from_f(sim->time), w[W_DT] = from_f(sim->dt_last);
    w[W_HAS_SOFT] = sim->soft != NULL;
    w[W_SNAP_COUNT] = (uint64_t)sim->snap_count, w[W_SNAP_LAST] = (uint64_t)sim->snap_last_step;
    w[W_DIAG_LAST] = (uint64_t)sim->diag_last_step;
    w[W_RESTART_LAST] = (uint64_t)sim->restart_last_step;
    w[W_G] = from_f(o->G), w[W_SOFTENING] = (uint64_t)o->softening, w[W_SOFT] = from_f(o->soft);
    w[W_STEPPING] = (uint64_t)o->stepping, w[W_DT_OPT] = from_f(o->dt);
    w[W_ETA] = from_f(o->eta), w[W_DT_MIN] = from_f(o->dt_min), w[W_DT_MAX] = from_f(o->dt_max);
    w[W_VERBOSE] = (uint64_t)(int64_t)o->verbose, w[W_EPS] = from_f(o->eps);
    w[W_P_METHOD] = (uint64_t)p->method, w[W_P_BACKEND] = (uint64_t)p->backend;
    w[W_P_PRECISION] = (uint64_t)p->precision, w[W_P_THREADS] = (uint64_t)(int64_t)p->threads;
    w[W_P_DEVICE] = (uint64_t)(int64_t)p->device, w[W_P_ORDER] = (uint64_t)(int64_t)p->order;
    w[W_P_LEAF] = (uint64_t)p->leaf_size, w[W_P_SOFTENING] = from_f(p->softening);
    w[W_P_THETA] = from_f(p->theta), w[W_P_VERBOSE] = (uint64_t)(int64_t)p->verbose;
    w[W_P_WALK] = (uint64_t)p->walk, w[W_P_VECTORS] = (uint64_t)(int64_t)p->n_vectors;
    blob_write_cosmology(o, w);
    w[W_U] = from_f(sim->u), w[W_LI_K] = from_f(sim->li_kinetic);
    w[W_LI_INT] = from_f(sim->li_integral), w[W_LI_START] = from_f(sim->li_start);
    w[W_LI_MAX] = from_f(sim->li_max_aw), w[W_INTERACTIONS] = (uint64_t)sim->interactions_total;
    w[W_U_REF_SET] = (uint64_t)sim->u_ref_set, w[W_U_REF] = from_f(sim->u_ref);
    w[W_INTEGRATOR] = (uint64_t)o->integrator;
}

/* What a blob holds besides the options. */
typedef struct blob_counters {
    int64_t n, step, snap_count, snap_last, diag_last, restart_last;
    double time, dt;
    int has_soft;
    double u, li_k, li_int, li_start, li_max;
    int64_t interactions;
    int u_ref_set;
    double u_ref;
} blob_counters;

/* The ranks of a distributed restart's extension (0: none, or malformed), and a pointer to
 * its counts (unaligned: read with memcpy). */
static int64_t blob_ranks(const void *state, size_t bytes, const unsigned char **counts)
{
    const size_t base = W_COUNT * sizeof(uint64_t);
    uint64_t r;
    if (bytes <= base + sizeof r || bytes % sizeof r != 0)
        return 0;
    memcpy(&r, (const unsigned char *)state + base, sizeof r);
    if (r < 1 || r > (1u << 24) || bytes != base + (1 + r) * sizeof r)
        return 0;
    if (counts)
        *counts = (const unsigned char *)state + base + sizeof r;
    return (int64_t)r;
}

static fmk_status blob_read(const void *state, size_t bytes, fmk_sim_opts *o, blob_counters *c)
{
    uint64_t w[W_COUNT];
    if (!state || bytes < 3 * sizeof(uint64_t))
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "restart: the state record is missing or short "
                            "(%zu bytes)",
                            bytes);
    memcpy(w, state, 3 * sizeof(uint64_t));
    if (w[W_MAGIC] != BLOB_MAGIC)
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "restart: the state record is not fmmkit's%s",
                            byte_swap(w[W_MAGIC]) == BLOB_MAGIC
                                ? " (it was written on a machine of the other byte order)"
                                : "");
    const int v1 =
        w[W_VERSION] == 1 && w[W_WORDS] == W_COUNT_V1 && bytes == W_COUNT_V1 * sizeof(uint64_t);
    if (!v1 && (w[W_VERSION] != BLOB_VERSION || w[W_WORDS] != W_COUNT ||
                (bytes != sizeof w && !blob_ranks(state, bytes, NULL))))
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "restart: the state record has version %llu and %zu bytes; this "
                            "fmmkit reads version %d of %zu bytes (and version 1 of %zu)",
                            (unsigned long long)w[W_VERSION], bytes, BLOB_VERSION, sizeof w,
                            W_COUNT_V1 * sizeof(uint64_t));
    fmk_sim_opts_default(o);
    memcpy(w, state, v1 ? W_COUNT_V1 * sizeof(uint64_t) : sizeof w); /* (not the extension) */
    if (v1) { /* a Newtonian run of an earlier fmmkit: the comoving words as their defaults */
        blob_write_comoving_defaults(o, w);
    }
    fmk_opts *p = &o->plan;
    c->n = (int64_t)w[W_N], c->step = (int64_t)w[W_STEP];
    c->time = to_f(w[W_TIME]), c->dt = to_f(w[W_DT]);
    c->has_soft = w[W_HAS_SOFT] != 0;
    c->snap_count = (int64_t)w[W_SNAP_COUNT], c->snap_last = (int64_t)w[W_SNAP_LAST];
    c->diag_last = (int64_t)w[W_DIAG_LAST], c->restart_last = (int64_t)w[W_RESTART_LAST];
    o->G = to_f(w[W_G]), o->softening = (fmk_sim_softening)w[W_SOFTENING];
    o->soft = to_f(w[W_SOFT]), o->stepping = (fmk_sim_stepping)w[W_STEPPING];
    o->dt = to_f(w[W_DT_OPT]), o->eta = to_f(w[W_ETA]);
    o->dt_min = to_f(w[W_DT_MIN]), o->dt_max = to_f(w[W_DT_MAX]);
    o->verbose = (int32_t)(int64_t)w[W_VERBOSE], o->eps = to_f(w[W_EPS]);
    p->method = (fmk_method)w[W_P_METHOD], p->backend = (fmk_backend)w[W_P_BACKEND];
    p->precision = (fmk_precision)w[W_P_PRECISION], p->threads = (int32_t)(int64_t)w[W_P_THREADS];
    p->device = (int32_t)(int64_t)w[W_P_DEVICE], p->order = (int32_t)(int64_t)w[W_P_ORDER];
    p->leaf_size = (int64_t)w[W_P_LEAF], p->softening = to_f(w[W_P_SOFTENING]);
    p->theta = to_f(w[W_P_THETA]), p->verbose = (int32_t)(int64_t)w[W_P_VERBOSE];
    p->walk = (fmk_walk)w[W_P_WALK], p->n_vectors = (int32_t)(int64_t)w[W_P_VECTORS];
    fmk_sim_cosmology *cm = &o->cosmology;
    o->comoving = (int32_t)(int64_t)w[W_COMOVING];
    cm->omega_m = to_f(w[W_OMEGA_M]), cm->omega_lambda = to_f(w[W_OMEGA_L]);
    cm->omega_b = to_f(w[W_OMEGA_B]), cm->h = to_f(w[W_HUBBLE]), cm->n_s = to_f(w[W_N_S]);
    cm->sigma_8 = to_f(w[W_SIGMA_8]), cm->t_cmb = to_f(w[W_T_CMB]);
    o->spacing = (fmk_sim_spacing)w[W_SPACING], o->soft_mode = (fmk_sim_soft_mode)w[W_SOFT_MODE];
    o->soft_max_comoving = to_f(w[W_SOFT_MAX]), o->a_start = to_f(w[W_A_START]);
    o->radius = to_f(w[W_RADIUS]);
    o->integrator = (fmk_sim_integrator)w[W_INTEGRATOR];
    c->u = to_f(w[W_U]), c->li_k = to_f(w[W_LI_K]), c->li_int = to_f(w[W_LI_INT]);
    c->li_start = to_f(w[W_LI_START]), c->li_max = to_f(w[W_LI_MAX]);
    c->interactions = (int64_t)w[W_INTERACTIONS];
    c->u_ref_set = w[W_U_REF_SET] == 1, c->u_ref = to_f(w[W_U_REF]);
    if (c->n < 1 || c->step < 0 || !isfinite(c->time) || c->snap_count < 0)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "restart: the state record is damaged (n %lld, step %lld, time %g)",
                            (long long)c->n, (long long)c->step, c->time);
    return FMK_OK;
}

void fmk_sim_checkpoint_free(fmk_sim_checkpoint *cp)
{
    if (!cp)
        return;
    free(cp->p.pos), free(cp->p.vel), free(cp->p.mass), free(cp->p.id), free(cp->p.soft);
    free(cp->acc), free(cp->pot), free(cp->state);
    memset(cp, 0, sizeof *cp);
}

fmk_status fmk_sim_checkpoint_take(fmk_sim *sim, fmk_sim_checkpoint *cp)
{
    if (!sim || !cp)
        return fmk_sim_fail(sim, FMK_ERR_NULL, "checkpoint: sim or cp is NULL");
    memset(cp, 0, sizeof *cp);
    const int64_t n = sim->n;
    cp->p.n = n;
    cp->p.time = sim->time;
    cp->p.pos = fmk_sim_doubles(3 * n), cp->p.vel = fmk_sim_doubles(3 * n);
    cp->p.mass = fmk_sim_doubles(n), cp->acc = fmk_sim_doubles(3 * n);
    cp->pot = fmk_sim_doubles(n);
    cp->p.id = malloc((size_t)n * sizeof *cp->p.id);
    cp->p.soft = sim->soft ? fmk_sim_doubles(n) : NULL;
    cp->state_bytes = W_COUNT * sizeof(uint64_t);
    cp->state = malloc(cp->state_bytes);
    if (!cp->p.pos || !cp->p.vel || !cp->p.mass || !cp->acc || !cp->pot || !cp->p.id ||
        (sim->soft && !cp->p.soft) || !cp->state) {
        fmk_sim_checkpoint_free(cp);
        return fmk_sim_fail(sim, FMK_ERR_NOMEM,
                            "checkpoint: out of host memory for %lld "
                            "particles",
                            (long long)n);
    }
    fmk_status st = fmk_sim_get_state(sim, cp->p.mass, cp->p.pos, cp->p.vel, cp->acc, cp->pot);
    if (st != FMK_OK) {
        fmk_sim_checkpoint_free(cp);
        return st;
    }
    memcpy(cp->p.id, sim->id, (size_t)n * sizeof *cp->p.id);
    if (sim->soft)
        memcpy(cp->p.soft, sim->soft, (size_t)n * sizeof(double));
    uint64_t w[W_COUNT];
    blob_write(sim, w);
    memcpy(cp->state, w, sizeof w);
    return FMK_OK;
}

/* The first index of x (count values) that is not finite, or -1. */
static int64_t first_nonfinite(const double *x, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        if (!isfinite(x[i]))
            return i;
    return -1;
}

/* A comoving restart continues its stepping variable and Layzer-Irvine bookkeeping when the
 * options keep the same variable and background (else they start afresh at the stored a). */
static int same_stepping(const fmk_sim_opts *a, const fmk_sim_opts *b)
{
    const fmk_sim_cosmology *x = &a->cosmology, *y = &b->cosmology;
    return a->comoving && b->comoving && a->spacing == b->spacing && x->omega_m == y->omega_m &&
           x->omega_lambda == y->omega_lambda && x->h == y->h;
}

fmk_status fmk_sim_create_from_checkpoint(fmk_sim **out, const fmk_sim_checkpoint *cp,
                                          const fmk_sim_opts *opts)
{
    return fmk_sim_checkpoint_build(out, cp, opts, NULL);
}

/* The checks of a checkpoint's particles (this rank's share when distributed). */
static fmk_status checkpoint_check(const fmk_sim_checkpoint *cp, const fmk_sim_opts *use,
                                   const double *soft, int keep_forces, int distributed)
{
    const int64_t n = cp->p.n;
    fmk_status st = fmk_sim_check_opts(use, soft != NULL);
    if (st == FMK_OK && distributed && use->softening == FMK_SIM_SOFT_SPLINE)
        st = fmk_sim_fail(NULL, FMK_ERR_UNAVAILABLE,
                          "restart: the spline softening (FMK_SIM_SOFT_SPLINE) is not "
                          "distributed yet; continue it on one process");
    if (st == FMK_OK)
        st = distributed ? fmk_sim_check_share(n, cp->p.mass, cp->p.pos, cp->p.vel, soft, use)
                         : fmk_sim_check_particles(n, cp->p.mass, cp->p.pos, cp->p.vel, soft, use);
    /* the stored forces serve only the stored options (others evaluate their own) */
    if (st != FMK_OK || !keep_forces || n == 0)
        return st;
    int64_t bad = !cp->acc || !cp->pot ? 0 : first_nonfinite(cp->acc, 3 * n);
    if (bad < 0)
        bad = first_nonfinite(cp->pot, n);
    if (bad >= 0)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "restart: the stored accelerations or potentials are missing or "
                            "not finite (value %lld)",
                            (long long)bad);
    return FMK_OK;
}

static fmk_status release_comm(const fmk_sim_comm *comm, fmk_status st)
{
    if (comm && comm->hooks && comm->hooks->release)
        comm->hooks->release(comm->state);
    return st;
}

fmk_status fmk_sim_checkpoint_build(fmk_sim **out, const fmk_sim_checkpoint *cp,
                                    const fmk_sim_opts *opts, const fmk_sim_comm *comm)
{
    if (!out || !cp)
        return release_comm(
            comm, fmk_sim_fail(NULL, FMK_ERR_NULL, "restart: sim or the checkpoint is NULL"));
    *out = NULL;
    fmk_sim_opts stored, use;
    blob_counters c;
    memset(&c, 0, sizeof c);
    /* (distributed: every rank has the same blob, hence the same status) */
    fmk_status st = blob_read(cp->state, cp->state_bytes, &stored, &c);
    if (st != FMK_OK)
        return release_comm(comm, st);
    double n_all = (double)cp->p.n, soft_any = cp->p.soft != NULL;
    if (comm && comm->hooks) {
        comm->hooks->reduce(comm->state, &n_all, 1, FMK_SIM_REDUCE_SUM);
        comm->hooks->reduce(comm->state, &soft_any, 1, FMK_SIM_REDUCE_MIN);
    }
    if (c.n != (int64_t)n_all || (c.has_soft && !soft_any))
        return release_comm(comm,
                            fmk_sim_fail(NULL, FMK_ERR_ARG,
                                         "restart: the state record is for %lld particles%s; the "
                                         "particles are %lld%s",
                                         (long long)c.n, c.has_soft ? " with softenings" : "",
                                         (long long)n_all, soft_any ? " with softenings" : ""));
    use = opts ? *opts : stored;
    const double *soft = use.softening == FMK_SIM_SOFT_SPLINE && c.has_soft ? cp->p.soft : NULL;
    const int keep_forces = opts == NULL;
    st = checkpoint_check(cp, &use, soft, keep_forces, comm != NULL);
    if (comm) {
        st = fmk_sim_comm_agree(comm, NULL, st);
        if (st == FMK_OK)
            st = fmk_sim_comm_same_opts(comm, &use);
    }
    if (st != FMK_OK)
        return release_comm(comm, st);
    const fmk_sim_init in = {.n = cp->p.n,
                             .comm = comm,
                             .mass = cp->p.mass,
                             .pos = cp->p.pos,
                             .vel = cp->p.vel,
                             .soft = soft,
                             .ids = cp->p.id,
                             .acc = keep_forces ? cp->acc : NULL,
                             .pot = keep_forces ? cp->pot : NULL,
                             .step = c.step,
                             .time = c.time,
                             .dt_last = c.dt,
                             .resume = same_stepping(&stored, &use),
                             .u = c.u,
                             .li_kinetic = c.li_k,
                             .li_integral = c.li_int,
                             .li_start = c.li_start,
                             .li_max_aw = c.li_max,
                             .interactions_total = c.interactions,
                             .u_ref_set = c.u_ref_set,
                             .u_ref = c.u_ref};
    fmk_sim *sim = NULL;
    if ((st = fmk_sim_build(&sim, &in, &use)) != FMK_OK)
        return st;
    sim->snap_count = c.snap_count;
    sim->snap_last_step = c.snap_last;
    sim->diag_last_step = c.diag_last;
    sim->restart_last_step = c.restart_last;
    sim->from_restart = 1;
    *out = sim;
    return FMK_OK;
}

fmk_status fmk_sim_blob_distributed(const void *blob, size_t bytes, int64_t n_total, int ranks,
                                    const int64_t *counts, void **out, size_t *out_bytes)
{
    const size_t base = W_COUNT * sizeof(uint64_t);
    uint64_t *w = bytes == base ? malloc(base + (1 + (size_t)ranks) * sizeof *w) : NULL;
    if (!w)
        return bytes == base ? FMK_ERR_NOMEM : FMK_ERR_INTERNAL;
    memcpy(w, blob, base);
    w[W_N] = (uint64_t)n_total;
    w[W_COUNT] = (uint64_t)ranks;
    for (int r = 0; r < ranks; r++)
        w[W_COUNT + 1 + r] = (uint64_t)counts[r];
    *out = w;
    *out_bytes = base + (1 + (size_t)ranks) * sizeof *w;
    return FMK_OK;
}

fmk_status fmk_sim_blob_layout(const void *blob, size_t bytes, int64_t *n, int *has_soft,
                               int *ranks, int64_t **counts)
{
    fmk_sim_opts o;
    blob_counters c;
    memset(&c, 0, sizeof c);
    *ranks = 0, *counts = NULL;
    fmk_status st = blob_read(blob, bytes, &o, &c);
    if (st != FMK_OK)
        return st;
    *n = c.n, *has_soft = c.has_soft;
    const unsigned char *at = NULL;
    const int64_t r = blob_ranks(blob, bytes, &at);
    if (r == 0)
        return FMK_OK;
    if (!(*counts = malloc((size_t)r * sizeof **counts)))
        return fmk_sim_fail(NULL, FMK_ERR_NOMEM, "restart: out of host memory");
    memcpy(*counts, at, (size_t)r * sizeof **counts);
    *ranks = (int)r;
    return FMK_OK;
}

/* A distributed simulation's restart file: every rank's checkpoint gathered on rank 0, which
 * writes it with the global blob (the file's comment). */
static fmk_status write_distributed(fmk_sim *sim, const char *path, fmk_sim_checkpoint *cp)
{
    fmk_sim_particles all;
    double *acc = NULL, *pot = NULL;
    fmk_status st = fmk_sim_dist_gather(sim, &cp->p, cp->acc, cp->pot, &all, &acc, &pot);
    if (st != FMK_OK) {
        fmk_sim_checkpoint_free(cp);
        return st;
    }
    const int ranks = sim->comm.size;
    int64_t *counts = malloc((size_t)ranks * sizeof *counts);
    if (counts)
        sim->comm.hooks->allgather(sim->comm.state, sim->n, counts);
    void *blob = NULL;
    size_t bytes = 0;
    char msg[FMK_SIM_ERROR_LEN] = "";
    if (fmk_sim_is_root(sim)) {
        st = counts ? fmk_sim_blob_distributed(cp->state, cp->state_bytes, sim->n_total, ranks,
                                               counts, &blob, &bytes)
                    : FMK_ERR_NOMEM;
        if (st == FMK_OK)
            st = fmk_sim_io_write_restart(path, &all, acc, pot, blob, bytes, msg, sizeof msg);
        else
            snprintf(msg, sizeof msg, "fmk_sim_write_restart: out of host memory");
        if (st != FMK_OK)
            fmk_sim_fail(sim, st, "%s", msg);
    }
    free(blob), free(counts);
    fmk_sim_dist_free(sim, &all, acc, pot);
    fmk_sim_checkpoint_free(cp);
    return fmk_sim_dist_agree(sim, st);
}

fmk_status fmk_sim_write_restart(fmk_sim *sim, const char *path)
{
    if (!sim || !path)
        return fmk_sim_fail(sim, FMK_ERR_NULL, "fmk_sim_write_restart: %s is NULL",
                            sim ? "path" : "sim");
    fmk_sim_checkpoint cp;
    fmk_status st = fmk_sim_dist_agree(sim, fmk_sim_checkpoint_take(sim, &cp));
    if (st != FMK_OK)
        return st;
    if (sim->comm.hooks)
        return write_distributed(sim, path, &cp);
    char msg[FMK_SIM_ERROR_LEN] = "";
    st = fmk_sim_io_write_restart(path, &cp.p, cp.acc, cp.pot, cp.state, cp.state_bytes, msg,
                                  sizeof msg);
    fmk_sim_checkpoint_free(&cp);
    return st == FMK_OK ? FMK_OK : fmk_sim_fail(sim, st, "%s", msg);
}

/* A restart file: its checkpoint, read by the file layer. */
static fmk_status from_restart_file(fmk_sim **out, const char *path, const fmk_sim_opts *opts)
{
    fmk_sim_checkpoint cp;
    memset(&cp, 0, sizeof cp);
    char msg[FMK_SIM_ERROR_LEN] = "";
    fmk_status st = fmk_sim_io_read_restart(path, &cp.p, &cp.acc, &cp.pot, &cp.state,
                                            &cp.state_bytes, msg, sizeof msg);
    if (st != FMK_OK)
        return fmk_sim_fail(NULL, st, "%s", msg);
    st = fmk_sim_create_from_checkpoint(out, &cp, opts);
    fmk_sim_particles_free(&cp.p);
    free(cp.acc), free(cp.pot), free(cp.state);
    return st;
}

fmk_status fmk_sim_create_from_file(fmk_sim **out, const char *path, const fmk_sim_opts *opts)
{
    if (!out || !path)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_create_from_file: %s is NULL",
                            out ? "path" : "sim");
    *out = NULL;
    if (fmk_sim_io_is_restart(path))
        return from_restart_file(out, path, opts);
    fmk_sim_particles p;
    memset(&p, 0, sizeof p);
    char msg[FMK_SIM_ERROR_LEN] = "";
    fmk_status st = fmk_sim_io_read_snapshot(path, &p, msg, sizeof msg);
    if (st != FMK_OK)
        return fmk_sim_fail(NULL, st, "%s", msg);
    fmk_sim_opts o;
    if (opts)
        o = *opts;
    else
        fmk_sim_opts_default(&o);
    /* a snapshot's softening lengths serve the spline; the plummer kernel takes opts.soft */
    const double *soft = o.softening == FMK_SIM_SOFT_SPLINE ? p.soft : NULL;
    if (!isfinite(p.time))
        st = fmk_sim_fail(NULL, FMK_ERR_ARG, "the snapshot's time is %g", p.time);
    else if (o.comoving && !(p.time > 0))
        st = fmk_sim_fail(NULL, FMK_ERR_ARG,
                          "the snapshot's Time is %g; a comoving run reads it as the scale "
                          "factor a > 0",
                          p.time);
    else if (o.comoving) { /* GADGET's velocities p / a^(3/2) back to the momenta p */
        const double f = p.time * sqrt(p.time);
        for (int64_t k = 0; k < 3 * p.n; k++)
            p.vel[k] *= f;
    }
    if (st == FMK_OK && (st = fmk_sim_check_opts(&o, soft != NULL)) == FMK_OK &&
        (st = fmk_sim_check_particles(p.n, p.mass, p.pos, p.vel, soft, &o)) == FMK_OK) {
        const fmk_sim_init in = {.n = p.n,
                                 .mass = p.mass,
                                 .pos = p.pos,
                                 .vel = p.vel,
                                 .soft = soft,
                                 .ids = p.id,
                                 .time = p.time};
        st = fmk_sim_build(out, &in, &o);
    }
    if (st != FMK_OK) /* the checks' messages name the function the caller did not call */
        fmk_sim_fail(NULL, st, "%s (particles from %s)", fmk_sim_last_error(NULL), path);
    fmk_sim_particles_free(&p);
    return st;
}
