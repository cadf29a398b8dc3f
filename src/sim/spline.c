/* spline.c -- GADGET's cubic spline softening on the CPU (formulas in spline.h): the plan's
 * Newtonian result is corrected, for every pair closer than h_ij = max(h_i, h_j) (h = 2.8 s),
 * by G m_j (phi_s - 1/r) in the potential and G m_j (g - 1/r^3) (x_j - x_i) in the
 * acceleration (the potential's part left out where the evaluation did not ask for it).
 *
 * The pairs come from a hashed cell list of side h_max (spline.h): the particles are sorted by
 * bucket with a stable counting sort, then each particle (one OpenMP thread each, no shared
 * writes) visits the buckets of its 27 neighbour cells in a fixed order. Each particle's sum
 * therefore runs in the same order whatever the thread count: the results are reproducible
 * bit for bit, which restarts need. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_internal.h"
#include "sim/spline.h"

void fmk_sim_cells_free(fmk_sim_cells *c)
{
    free(c->start);
    free(c->order);
    free(c->bucket);
    memset(c, 0, sizeof *c);
}

/* The particles whose pairs are corrected: this rank's first (the ones corrected), then, in a
 * distributed run, the other ranks' near them (the halo: sources only). */
typedef struct spline_set {
    int64_t n, n_all;
    const double *pos, *charge, *soft; /* soft NULL: soft_all for every particle */
    double soft_all;
} spline_set;

static fmk_status cells_make(fmk_sim *sim, int64_t n_all)
{
    fmk_sim_cells *c = &sim->cells;
    if (c->start && c->cap >= n_all)
        return FMK_OK;
    fmk_sim_cells_free(c);
    c->cap = n_all + n_all / 4 + 64; /* a halo that grows a little keeps the arrays */
    c->table = fmk_sim_cell_table(c->cap);
    c->start = malloc((size_t)(c->table + 1) * sizeof *c->start);
    c->order = malloc((size_t)c->cap * sizeof *c->order);
    c->bucket = malloc((size_t)c->cap * sizeof *c->bucket);
    if (!c->start || !c->order || !c->bucket) {
        fmk_sim_cells_free(c);
        return fmk_sim_fail(sim, FMK_ERR_NOMEM,
                            "the spline correction: out of host memory for the cell list of %lld "
                            "particles",
                            (long long)n_all);
    }
    return FMK_OK;
}

/* Buckets, then the stable counting sort: order lists the particles bucket by bucket, start[b]
 * is bucket b's first place in it (start[table] = n). */
static void cells_sort(fmk_sim *sim, const double *pos, int64_t n, double inv_cell)
{
    fmk_sim_cells *c = &sim->cells;
    const int64_t table = c->table;
    const uint64_t mask = (uint64_t)table - 1;
    const int threads = fmk_sim_threads(sim);
#pragma omp parallel for schedule(static) num_threads(threads) if (n > 8192)
    for (int64_t i = 0; i < n; i++)
        c->bucket[i] = fmk_sim_cell_bucket(fmk_sim_cell_coord(pos[3 * i], inv_cell),
                                           fmk_sim_cell_coord(pos[3 * i + 1], inv_cell),
                                           fmk_sim_cell_coord(pos[3 * i + 2], inv_cell), mask);
    memset(c->start, 0, (size_t)(table + 1) * sizeof *c->start);
    for (int64_t i = 0; i < n; i++)
        c->start[c->bucket[i] + 1]++;
    for (int64_t b = 0; b < table; b++)
        c->start[b + 1] += c->start[b];
    for (int64_t i = 0; i < n; i++) /* start[b] moves to bucket b + 1's start */
        c->order[c->start[c->bucket[i]]++] = i;
    for (int64_t b = table; b > 0; b--)
        c->start[b] = c->start[b - 1];
    c->start[0] = 0;
}

/* Particle i's correction, its 27 neighbour cells' buckets in a fixed order, each bucket once. */
static void correct_one(const fmk_sim *sim, const spline_set *p, int64_t i, double inv_cell,
                        double *acc, double *pot)
{
    const fmk_sim_cells *c = &sim->cells;
    const uint64_t mask = (uint64_t)c->table - 1;
    const double *pos = p->pos, *xi = pos + 3 * i;
    const double hi = FMK_SIM_SPLINE_H * (p->soft ? p->soft[i] : p->soft_all);
    const int64_t cx = fmk_sim_cell_coord(xi[0], inv_cell),
                  cy = fmk_sim_cell_coord(xi[1], inv_cell),
                  cz = fmk_sim_cell_coord(xi[2], inv_cell);
    uint32_t seen[27];
    int n_seen = 0;
    double dp = 0, da[3] = {0, 0, 0};
    for (int o = 0; o < 27; o++) {
        const uint32_t b =
            fmk_sim_cell_bucket(cx + o % 3 - 1, cy + (o / 3) % 3 - 1, cz + o / 9 - 1, mask);
        int repeat = 0;
        for (int k = 0; k < n_seen; k++)
            repeat |= seen[k] == b;
        if (repeat)
            continue;
        seen[n_seen++] = b;
        for (int64_t s = c->start[b]; s < c->start[b + 1]; s++) {
            const int64_t j = c->order[s];
            const double d[3] = {pos[3 * j] - xi[0], pos[3 * j + 1] - xi[1],
                                 pos[3 * j + 2] - xi[2]};
            const double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
            const double hj = FMK_SIM_SPLINE_H * (p->soft ? p->soft[j] : p->soft_all);
            const double h = hi > hj ? hi : hj;
            if (j == i || !(r2 < h * h))
                continue;
            double dphi, dg;
            fmk_sim_spline_delta(sqrt(r2), h, &dphi, &dg);
            const double q = p->charge[j];
            dp += q * dphi;
            for (int k = 0; k < 3; k++)
                da[k] += q * dg * d[k];
        }
    }
    if (pot) /* NULL: the accelerations alone (a step that does not ask for the potential) */
        pot[i] += dp;
    for (int k = 0; k < 3; k++)
        acc[3 * i + k] += da[k];
}

/* A distributed run's set: this rank's particles, then the other ranks' near them (the hook
 * halo), in arrays of their own (*owned, freed by the caller). */
static fmk_status with_halo(fmk_sim *sim, const double *pos, spline_set *p, double **owned)
{
    const int width = sim->soft ? 5 : 4; /* x, y, z, charge [, softening] */
    const int64_t n = sim->n;
    double *here = malloc((size_t)(n > 0 ? n : 1) * (size_t)width * sizeof *here);
    for (int64_t i = 0; here && i < n; i++) {
        double *r = here + (size_t)i * width;
        memcpy(r, pos + 3 * i, 3 * sizeof *r);
        r[3] = sim->charge[i];
        if (sim->soft)
            r[4] = sim->soft[i];
    }
    fmk_status st = fmk_sim_dist_agree(sim, here ? FMK_OK
                                                 : fmk_sim_fail(sim, FMK_ERR_NOMEM,
                                                                "the spline correction: out of "
                                                                "host memory"));
    double *rows = NULL;
    int64_t nh = 0;
    if (st == FMK_OK) {
        st = sim->comm.hooks->halo(sim->comm.state, n, width, here, sim->h_max, &rows, &nh);
        if (st != FMK_OK)
            st = fmk_sim_fail(sim, st, "%s", fmk_plan_last_error(NULL));
    }
    free(here);
    if (st != FMK_OK)
        return st;
    const int64_t all = n + nh;
    double *buf = malloc((size_t)(all > 0 ? all : 1) * (size_t)(sim->soft ? 5 : 4) * sizeof *buf);
    if (!buf) {
        free(rows);
        return fmk_sim_fail(sim, FMK_ERR_NOMEM, "the spline correction: out of host memory");
    }
    double *P = buf, *Q = buf + 3 * all, *S = sim->soft ? Q + all : NULL;
    memcpy(P, pos, (size_t)n * 3 * sizeof *P);
    memcpy(Q, sim->charge, (size_t)n * sizeof *Q);
    if (S)
        memcpy(S, sim->soft, (size_t)n * sizeof *S);
    for (int64_t k = 0; k < nh; k++) {
        const double *r = rows + (size_t)k * width;
        memcpy(P + 3 * (n + k), r, 3 * sizeof *P);
        Q[n + k] = r[3];
        if (S)
            S[n + k] = r[4];
    }
    free(rows);
    *p = (spline_set){n, all, P, Q, S, sim->opts.soft};
    *owned = buf;
    return FMK_OK;
}

fmk_status fmk_sim_spline_cpu(fmk_sim *sim, const double *pos, double *acc, double *pot)
{
    spline_set p = {sim->n, sim->n, pos, sim->charge, sim->soft, sim->opts.soft};
    double *owned = NULL;
    fmk_status st = FMK_OK;
    if (sim->comm.hooks && sim->comm.size > 1 && (st = with_halo(sim, pos, &p, &owned)) != FMK_OK)
        return st;
    if ((st = cells_make(sim, p.n_all)) != FMK_OK)
        return free(owned), st;
    const double inv_cell = 1 / sim->h_max;
    cells_sort(sim, p.pos, p.n_all, inv_cell);
    const int64_t n = p.n;
    atomic_int halted;
    atomic_init(&halted, 0);
    const int threads = fmk_sim_threads(sim);
#pragma omp parallel for schedule(dynamic, 256) num_threads(threads) if (n > 2048)
    for (int64_t i = 0; i < n; i++) {
        if (i % 1024 == 0 && atomic_load_explicit(&sim->stop, memory_order_relaxed))
            atomic_store_explicit(&halted, 1, memory_order_relaxed);
        if (!atomic_load_explicit(&halted, memory_order_relaxed))
            correct_one(sim, &p, i, inv_cell, acc, pot);
    }
    free(owned);
    if (atomic_load(&halted))
        return fmk_sim_fail(sim, FMK_ERR_INTERRUPTED, "interrupted");
    return FMK_OK;
}
