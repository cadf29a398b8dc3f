/* diag.c -- energies, momentum and angular momentum at the current time, and the rows of
 * dir/diagnostics.csv.
 *
 *   kinetic   K = 1/2 sum_i m_i |v_i|^2
 *   potential W = -1/2 sum_i m_i psi_i = -G sum_{i<j} m_i m_j phi_s(r_ij), psi from the last
 *             force evaluation when it computed the potential, else from one evaluation of it
 *             at the current positions now (fmk_sim_potential)
 *   momentum  P = sum_i m_i v_i;  angular momentum L = sum_i m_i x_i x v_i (about the origin)
 *
 * On the host the sums run in index order with Neumaier's compensation (reproducible, and
 * accurate to a few ulps whatever n); on the GPU they are device reductions (cuda/reduce.cu)
 * computed only when a row, fmk_sim_info_get or a caller asks. A distributed simulation sums
 * each rank's compensated sum and its compensation over the ranks (the sums therefore agree
 * with one process's within rounding, not bit for bit); rank 0 writes the CSV. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_internal.h"

/* Neumaier's compensated sum. */
typedef struct ksum {
    double s, c;
} ksum;

static void ksum_add(ksum *k, double x)
{
    const double t = k->s + x;
    k->c += fabs(k->s) >= fabs(x) ? (k->s - t) + x : (x - t) + k->s;
    k->s = t;
}

enum { D_KIN, D_POT, D_PX, D_PY, D_PZ, D_LX, D_LY, D_LZ, D_COUNT };

fmk_status fmk_sim_diagnostics(const fmk_sim *sim, fmk_sim_diag *d)
{
    fmk_status st = fmk_sim_potential(sim); /* collective, as the sums are */
    if (st != FMK_OK)
        return st;
    if (sim->dev)
        return fmk_sim_dev_diagnostics(sim, d);
    ksum k[D_COUNT];
    memset(k, 0, sizeof k);
    for (int64_t i = 0; i < sim->n; i++) {
        const double m = sim->mass[i], *x = sim->pos + 3 * i, *v = sim->vel + 3 * i;
        ksum_add(&k[D_KIN], 0.5 * m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]));
        ksum_add(&k[D_POT], -0.5 * m * sim->pot[i]);
        for (int c = 0; c < 3; c++)
            ksum_add(&k[D_PX + c], m * v[c]);
        ksum_add(&k[D_LX], m * (x[1] * v[2] - x[2] * v[1]));
        ksum_add(&k[D_LY], m * (x[2] * v[0] - x[0] * v[2]));
        ksum_add(&k[D_LZ], m * (x[0] * v[1] - x[1] * v[0]));
    }
    fmk_sim_dist_reduce(sim, (double *)k, 2 * D_COUNT, FMK_SIM_REDUCE_SUM);
    d->kinetic = k[D_KIN].s + k[D_KIN].c;
    d->potential = k[D_POT].s + k[D_POT].c;
    for (int c = 0; c < 3; c++) {
        d->momentum[c] = k[D_PX + c].s + k[D_PX + c].c;
        d->angular_momentum[c] = k[D_LX + c].s + k[D_LX + c].c;
    }
    return FMK_OK;
}

fmk_status fmk_sim_comoving_sums(const fmk_sim *sim, double sums[3])
{
    fmk_status st = fmk_sim_potential(sim);
    if (st != FMK_OK)
        return st;
    if (sim->dev)
        return fmk_sim_dev_comoving_sums(sim, sums);
    ksum k[3];
    memset(k, 0, sizeof k);
    for (int64_t i = 0; i < sim->n; i++) {
        const double m = sim->mass[i], *x = sim->pos + 3 * i, *v = sim->vel + 3 * i;
        ksum_add(&k[0], 0.5 * m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]));
        ksum_add(&k[1], -0.5 * m * sim->pot[i]);
        ksum_add(&k[2], m * (x[0] * x[0] + x[1] * x[1] + x[2] * x[2]));
    }
    fmk_sim_dist_reduce(sim, (double *)k, 6, FMK_SIM_REDUCE_SUM);
    for (int c = 0; c < 3; c++)
        sums[c] = k[c].s + k[c].c;
    return FMK_OK;
}

static const char diag_header[] = "step,time,dt,kinetic,potential,total,px,py,pz,Lx,Ly,Lz,wall_s\n";
/* comoving runs: a, z, the step in the stepping variable, the peculiar K and W, U, the
 * Layzer-Irvine C and its relative error, the momenta sum m p and sum m x x p, the work */
static const char diag_header_comoving[] =
    "step,a,z,dt,kinetic,potential,total,U,layzer_irvine,li_error,px,py,pz,Lx,Ly,Lz,"
    "interactions,interactions_total,wall_s\n";

fmk_status fmk_sim_diag_open(fmk_sim *sim, const char *dir, FILE **out)
{
    const size_t len = strlen(dir) + sizeof "/diagnostics.csv";
    char *path = malloc(len);
    if (!path)
        return fmk_sim_fail(sim, FMK_ERR_NOMEM, "fmk_sim_set_output: out of host memory");
    snprintf(path, len, "%s/diagnostics.csv", dir);
    /* a continued run appends to the rows written before its restart */
    FILE *f = fopen(path, sim->from_restart ? "a" : "w");
    int ok = f && fseek(f, 0, SEEK_END) == 0;
    if (ok && ftell(f) == 0)
        ok = fputs(sim->opts.comoving ? diag_header_comoving : diag_header, f) >= 0 &&
             fflush(f) == 0;
    if (!ok) {
        fmk_sim_fail(sim, FMK_ERR_INTERNAL, "fmk_sim_set_output: cannot %s %s: %s",
                     f ? "write" : "open", path, strerror(errno));
        if (f)
            fclose(f);
        free(path);
        return FMK_ERR_INTERNAL;
    }
    free(path);
    *out = f;
    return FMK_OK;
}

fmk_status fmk_sim_diag_row(fmk_sim *sim)
{
    fmk_sim_diag d;
    fmk_status st = fmk_sim_diagnostics(sim, &d);
    if (st != FMK_OK)
        return st;
    const double wall = sim->diag_steps > 0 ? sim->diag_wall / (double)sim->diag_steps : 0;
    errno = 0;
    fmk_sim_cdiag c;
    if (sim->opts.comoving && (st = fmk_sim_comoving_diag(sim, &c)) != FMK_OK)
        return st;
    const int64_t interactions = sim->opts.comoving ? fmk_sim_interactions(sim) : 0;
    const int ok =
        !sim->diag /* the ranks other than 0 of a distributed simulation */ ||
        (sim->opts.comoving
             ? fprintf(sim->diag,
                       "%lld,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.6g,%.17g,%.17g,"
                       "%.17g,%.17g,%.17g,%.17g,%lld,%lld,%.6g\n",
                       (long long)sim->step, sim->time, 1 / sim->time - 1, sim->dt_last, c.kinetic,
                       c.potential, c.kinetic + c.potential, c.u, c.c_li, c.li_error, d.momentum[0],
                       d.momentum[1], d.momentum[2], d.angular_momentum[0], d.angular_momentum[1],
                       d.angular_momentum[2], (long long)interactions,
                       (long long)sim->interactions_total, wall) > 0 &&
                   fflush(sim->diag) == 0
             : fprintf(sim->diag,
                       "%lld,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,"
                       "%.17g,%.6g\n",
                       (long long)sim->step, sim->time, sim->dt_last, d.kinetic, d.potential,
                       d.kinetic + d.potential, d.momentum[0], d.momentum[1], d.momentum[2],
                       d.angular_momentum[0], d.angular_momentum[1], d.angular_momentum[2],
                       wall) > 0 &&
                   fflush(sim->diag) == 0);
    st = ok ? FMK_OK
            : fmk_sim_fail(sim, FMK_ERR_INTERNAL, "writing %s/diagnostics.csv failed: %s",
                           sim->out_dir, errno ? strerror(errno) : "I/O error");
    if ((st = fmk_sim_dist_agree(sim, st)) != FMK_OK)
        return st;
    sim->diag_wall = 0;
    sim->diag_steps = 0;
    sim->diag_last_step = sim->step;
    return FMK_OK;
}
