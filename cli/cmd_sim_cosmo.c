/* cmd_sim_cosmo.c -- `fmmkit sim`'s comoving options (cmd_sim_cosmo.h; docs/cosmology.md,
 * "Comoving integration"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_sim_cosmo.h"
#include "sim_mpi.h"

void sim_cosmo_init(sim_cosmo_args *c, args_opt *out)
{
    memset(c, 0, sizeof *c);
    c->cosmology = "wmap", c->spacing = "time", c->soft_mode = "comoving";
    c->z_start = 49, c->radius = 45, c->lpt = 1, c->png_pixels = 512;
    const args_opt t[SIM_COSMO_N_OPTS] = {
        {"comoving", ARGS_FLAG, &c->comoving, 0, 0},
        {"cosmology", ARGS_STRING, &c->cosmology, 0, 0},
        {"omega-m", ARGS_DOUBLE, &c->omega_m, 0, 0},
        {"omega-l", ARGS_DOUBLE, &c->omega_l, 0, 0},
        {"omega-b", ARGS_DOUBLE, &c->omega_b, 0, 0},
        {"hubble", ARGS_DOUBLE, &c->hubble, 0, 0},
        {"sigma8", ARGS_DOUBLE, &c->sigma_8, 0, 0},
        {"ns", ARGS_DOUBLE, &c->n_s, 0, 0},
        {"z-start", ARGS_DOUBLE, &c->z_start, 0, 0},
        {"z-end", ARGS_DOUBLE, &c->z_end, 0, 0},
        {"radius", ARGS_DOUBLE, &c->radius, 0, 0},
        {"spacing", ARGS_STRING, &c->spacing, 0, 0},
        {"lpt", ARGS_INT, &c->lpt, 1, 0},
        {"snap-times", ARGS_STRING, &c->snap_times, 0, 0},
        {"snap-z", ARGS_STRING, &c->snap_z, 0, 0},
        {"png-extent", ARGS_DOUBLE, &c->png_extent, 0, 0},
        {"png-pixels", ARGS_INT, &c->png_pixels, 8, 0},
        {"soft-mode", ARGS_STRING, &c->soft_mode, 0, 0},
        {"soft-max", ARGS_DOUBLE, &c->soft_max, 0, 0},
    };
    memcpy(out, t, sizeof t);
}

#define GIVEN(name) (args_find(opts, n_opts, name)->given)

int sim_cosmo_apply(const char *cmd, sim_cosmo_args *c, args_opt *opts, int n_opts, const char *ic,
                    int64_t steps, fmk_sim_opts *so)
{
    static const char *const only[] = {"cosmology", "omega-m", "omega-l", "omega-b",   "hubble",
                                       "sigma8",    "ns",      "z-start", "z-end",     "radius",
                                       "spacing",   "lpt",     "snap-z",  "soft-mode", "soft-max"};
    const int cosmo_ic = ic && strcmp(ic, "cosmo") == 0;
    if (cosmo_ic)
        c->comoving = 1;
    if (!ic) { /* --restart: the file holds the options */
        static const char *const physics[] = {
            "comoving", "cosmology", "omega-m", "omega-l", "omega-b",   "hubble",   "sigma8",
            "ns",       "z-start",   "spacing", "lpt",     "soft-mode", "soft-max", "radius"};
        return args_refuse(cmd, opts, n_opts, physics, sizeof physics / sizeof *physics,
                           "a --restart continues with the options stored in the file");
    }
    if (!c->comoving) {
        for (size_t i = 0; i < sizeof only / sizeof only[0]; i++)
            if (GIVEN(only[i]))
                return cli_usage(cmd, "--%s is for comoving runs (--ic cosmo, or --comoving)",
                                 only[i]);
        return CLI_OK;
    }
    if (!cosmo_ic && (GIVEN("z-start") || GIVEN("lpt") || GIVEN("radius")))
        return cli_usage(cmd, "--z-start, --lpt and --radius are for --ic cosmo (a file's Time "
                              "is its start)");
    if (fmk_sim_cosmology_preset(&so->cosmology, c->cosmology) != FMK_OK)
        return cli_usage(cmd, "--cosmology: '%s'; it must be wmap or planck18", c->cosmology);
    fmk_sim_cosmology *k = &so->cosmology;
    if (GIVEN("omega-m"))
        k->omega_m = c->omega_m;
    if (GIVEN("omega-l"))
        k->omega_lambda = c->omega_l;
    if (GIVEN("omega-b"))
        k->omega_b = c->omega_b;
    if (GIVEN("hubble"))
        k->h = c->hubble;
    if (GIVEN("sigma8"))
        k->sigma_8 = c->sigma_8;
    if (GIVEN("ns"))
        k->n_s = c->n_s;
    so->comoving = 1;
    if (strcmp(c->spacing, "time") == 0)
        so->spacing = FMK_SIM_SPACING_TIME;
    else if (strcmp(c->spacing, "a") == 0)
        so->spacing = FMK_SIM_SPACING_A;
    else if (strcmp(c->spacing, "loga") == 0)
        so->spacing = FMK_SIM_SPACING_LOGA;
    else
        return cli_usage(cmd, "--spacing: '%s'; it must be time, a or loga", c->spacing);
    if (strcmp(c->soft_mode, "physical") == 0) {
        so->soft_mode = FMK_SIM_SOFT_PHYSICAL;
        so->soft_max_comoving = c->soft_max;
    } else if (strcmp(c->soft_mode, "comoving") != 0)
        return cli_usage(cmd, "--soft-mode: '%s'; it must be comoving or physical", c->soft_mode);
    if (!(c->z_start > 0) || (GIVEN("z-end") && !(c->z_end >= 0 && c->z_end < c->z_start)))
        return cli_usage(cmd, "--z-start %g, --z-end %g: they need z_start > z_end >= 0",
                         c->z_start, c->z_end);
    if (!(c->radius > 0))
        return cli_usage(cmd, "--radius: %g; it must be > 0", c->radius);
    if (c->lpt != 1 && c->lpt != 2)
        return cli_usage(cmd, "--lpt: %lld; it must be 1 or 2", (long long)c->lpt);
    if (c->png_extent < 0)
        return cli_usage(cmd, "--png-extent: %g; it must be >= 0", c->png_extent);
    so->a_start = 1 / (1 + c->z_start);
    c->a_end = GIVEN("z-end") ? 1 / (1 + c->z_end) : 0;
    if (cosmo_ic)
        so->radius = 0; /* the sphere at the mean density: R from the mass */
    if (!GIVEN("dt")) {
        if (!c->a_end)
            return cli_usage(cmd, "a comoving run needs --z-end (the steps then span it) or "
                                  "--dt");
        if (fmk_sim_comoving_dt(&so->cosmology, so->spacing, so->a_start, c->a_end, steps,
                                &so->dt) != FMK_OK)
            return cli_usage(cmd, "%s", fmk_sim_last_error(NULL));
    }
    return CLI_OK;
}

int sim_cosmo_make(const char *cmd, const sim_cosmo_args *c, int64_t n, uint64_t seed,
                   const fmk_sim_opts *so, fmk_sim **sim)
{
    fmk_sim_cosmo_ic p;
    fmk_sim_cosmo_ic_default(&p);
    p.cosmo = so->cosmology;
    p.radius = c->radius;
    p.n = n;
    p.z_start = c->z_start;
    p.lpt_order = (int32_t)c->lpt;
    p.seed = seed;
    p.threads = so->plan.threads;
    int64_t count = 0;
    fmk_status st = fmk_sim_ic_cosmo_size(&p, &count, NULL, NULL, NULL);
    if (st != FMK_OK) {
        cli_error(cmd, "%s", fmk_sim_last_error(NULL));
        return cli_exit_status(st);
    }
    double *mass = malloc(sizeof(double) * (size_t)count);
    double *pos = malloc(sizeof(double) * 3 * (size_t)count);
    double *vel = malloc(sizeof(double) * 3 * (size_t)count);
    if (!mass || !pos || !vel)
        st = FMK_ERR_NOMEM;
    if (st == FMK_OK)
        st = fmk_sim_ic_cosmo(&p, count, mass, pos, vel);
    if (st == FMK_OK)
        st = cli_sim_create(sim, count, mass, pos, vel, so);
    /* the Layzer-Irvine check's W relative to the unperturbed lattice (the same particles,
     * at rest on their grid points) */
    if (st == FMK_OK) {
        p.lpt_order = 0;
        st = fmk_sim_ic_cosmo(&p, count, mass, pos, vel);
        if (st == FMK_OK) { /* this rank's share of the lattice (sim_mpi.h) */
            int64_t share, first;
            cli_sim_share(count, &share, &first);
            st = fmk_sim_set_energy_reference(*sim, share, pos + 3 * first);
        }
        if (st != FMK_OK) {
            cli_error(cmd, "%s", fmk_sim_last_error(*sim));
            fmk_sim_destroy(*sim);
            *sim = NULL;
            free(mass), free(pos), free(vel);
            return cli_exit_status(st);
        }
    }
    free(mass), free(pos), free(vel);
    if (st != FMK_OK) {
        cli_error(cmd, "%s",
                  st == FMK_ERR_NOMEM && !*sim ? "out of host memory" : fmk_sim_last_error(NULL));
        return cli_exit_status(st);
    }
    return CLI_OK;
}

/* A comma-separated list of numbers into a new array (sorted increasing); NULL on error. */
static double *parse_list(const char *s, int64_t *n)
{
    int64_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    double *v = malloc(sizeof(double) * (size_t)cap);
    if (!v)
        return NULL;
    int64_t k = 0;
    const char *p = s;
    while (*p) {
        char *end;
        const double x = strtod(p, &end);
        if (end == p || !isfinite(x) || (*end && *end != ',')) {
            free(v);
            return NULL;
        }
        v[k++] = x;
        p = *end ? end + 1 : end;
    }
    *n = k;
    return v;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int sim_cosmo_output(const char *cmd, const sim_cosmo_args *c, fmk_sim *sim)
{
    fmk_status st;
    if (c->png_extent > 0 || c->png_pixels != 512) {
        if ((st = fmk_sim_set_png(sim, 2, (int)c->png_pixels, c->png_extent)) != FMK_OK) {
            cli_error(cmd, "%s", fmk_sim_last_error(sim));
            return cli_exit_status(st);
        }
    }
    const char *list = c->snap_times ? c->snap_times : c->snap_z;
    if (!list)
        return CLI_OK;
    if (c->snap_times && c->snap_z)
        return cli_usage(cmd, "--snap-times and --snap-z exclude each other");
    if (c->snap_z && !c->comoving)
        return cli_usage(cmd, "--snap-z is for comoving runs");
    int64_t n = 0;
    double *t = parse_list(list, &n);
    if (!t)
        return cli_usage(cmd, "--snap-%s: '%s'; give numbers separated by commas",
                         c->snap_z ? "z" : "times", list);
    for (int64_t k = 0; c->snap_z && k < n; k++)
        t[k] = 1 / (1 + t[k]); /* redshifts to scale factors */
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    st = fmk_sim_set_output_times(sim, n, t);
    free(t);
    if (st != FMK_OK) {
        cli_error(cmd, "%s", fmk_sim_last_error(sim));
        return cli_exit_status(st);
    }
    return CLI_OK;
}
