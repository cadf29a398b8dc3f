/* cmd_sim.c -- `fmmkit sim`: the N-body simulation driver (include/fmmkit_sim.h,
 * docs/simulation.md) from the command line. Initial conditions (Plummer sphere, cold uniform
 * sphere, Kepler pair, or a GADGET-style HDF5 file), or a restart file to continue; a run of
 * --steps steps writing snapshots, PNGs, diagnostics and restart files into --out through
 * fmk_sim_set_output; a summary (a table, or one JSON object with --json). Ctrl-C stops the
 * run after the current whole step (fmk_sim_interrupt), then the command ends by the signal. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_sim_cosmo.h"
#include "cli_mpi.h"
#include "sim_mpi.h"

#define GIVEN_IN(opts, n_opts, name) (args_find(opts, n_opts, name)->given)
#include "fmmkit_sim.h"

static const char *const cmd = "sim";

static const char usage[] =
    "Usage: fmmkit sim --ic plummer|cold|kepler|FILE.hdf5 --steps S --dt DT [options]\n"
    "       fmmkit sim --ic cosmo --steps S --z-start Z0 --z-end Z1 [options]\n"
    "       fmmkit sim --restart FILE --steps S [--out DIR and output options]\n"
    "\n"
    "Integrates N gravitating particles (G = 1, kick-drift-kick leapfrog) with the forces of an\n"
    "fmmkit plan, writes snapshots (GADGET-4 HDF5), PNG projections, diagnostics and restart\n"
    "files into DIR, and prints the steps, the time, steps/s and the energy error.\n"
    "\n"
    "Initial conditions:\n"
    "  --ic IC             plummer (mass 1, Henon units), cold (uniform sphere of radius 1 at\n"
    "                      rest), kepler (two bodies of mass 0.5, a = 1, at apocentre), or an\n"
    "                      HDF5 snapshot (GADGET-4 layout, PartType1) or restart file\n"
    "  --n N               particles for plummer and cold (default 1024)\n"
    "  --seed K            the random stream of plummer and cold (default 1)\n"
    "  --e E               kepler: the eccentricity, 0 <= E < 1 (default 0.5)\n"
    "  --restart FILE      continue a restart file (DIR/restart.h5) bit for bit, with the\n"
    "                      options stored in it (no --ic nor force or step options)\n"
    "\n"
    "Comoving runs (docs/cosmology.md; units Mpc, 1e10 Msun, km/s; the time is a):\n"
    "  --ic cosmo          a sphere cut from a Gaussian random field (Eisenstein & Hu power,\n"
    "                      Zel'dovich or 2LPT), about --n particles, --seed its noise\n"
    "  --comoving          comoving integration of an HDF5 file's particles (Time = a)\n"
    "  --cosmology C       wmap (default) or planck18; --omega-m, --omega-l, --omega-b,\n"
    "                      --hubble (h), --sigma8, --ns override its values\n"
    "  --radius R          --ic cosmo: the sphere's comoving radius in Mpc (default 45)\n"
    "  --z-start Z         --ic cosmo: the initial redshift (default 49)\n"
    "  --lpt 1|2           --ic cosmo: Zel'dovich (1, default) or 2LPT\n"
    "  --z-end Z           the final redshift: the --steps steps span it (or give --dt)\n"
    "  --spacing S         the steps uniform in time (default), a or loga; --dt is in it\n"
    "  --soft-mode M       comoving (default: --softening is comoving) or physical (comoving\n"
    "                      s = softening / a, at most --soft-max)\n"
    "  --snap-times LIST   snapshots at these times (a in comoving runs), e.g. 0.1,0.5,1\n"
    "  --snap-z LIST       comoving: snapshots at these redshifts, e.g. 9,3,1,0\n"
    "  --png-extent W      the PNGs' square side (comoving Mpc; default: fitted), and\n"
    "  --png-pixels P      their pixels (default 512)\n"
    "\n"
    "Steps and forces:\n"
    "  --steps S           steps to take, >= 0 (required)\n"
    "  --dt DT             the step, > 0 (required unless --adaptive; its cap with it)\n"
    "  --adaptive          one global step eta sqrt(s / max|a|) (needs --softening)\n"
    "  --integrator I      leapfrog (default: kick-drift-kick, second order) or yoshida4\n"
    "                      (fourth order, three force evaluations a step; CPU backend)\n"
    "  --eta X             the adaptive step's factor (default 0.025)\n"
    "  --softening H       the softening length s (default 0: plain 1/r)\n"
    "  --spline            GADGET's cubic spline softening (Newtonian beyond 2.8 s) instead of\n"
    "                      Plummer's 1/sqrt(r^2 + s^2)\n"
    "  --method M          auto (default; tree when --theta is given), direct, tree, fmm\n"
    "  --backend B         auto (default), cpu, cuda\n"
    "  --precision P       fp64 (default; fp32 with --ic cosmo) or fp32: the forces' precision\n"
    "  --theta T           tree: the opening angle, 0 < T < 1 (default: from eps)\n"
    "  --eps E             the forces' relative accuracy, 0 < E < 1 (default 1e-6 in fp64)\n"
    "  --threads N         CPU threads (default 0: OpenMP's default)\n"
    "\n"
    "Output (into --out DIR, created if missing; default sim-out):\n"
    "  --out DIR           DIR/snapshot_NNN.hdf5, DIR/diagnostics.csv, DIR/restart.h5, PNGs\n"
    "  --snap-every K      a snapshot every K steps (default 0: none)\n"
    "  --png               a PNG density projection of each snapshot (needs --snap-every)\n"
    "  --diag-every K      a row of diagnostics.csv every K steps (default 0: none; 1 in\n"
    "                      comoving runs)\n"
    "  --restart-every K   DIR/restart.h5 every K steps (default 0: none)\n"
    "\n"
    "  --quiet             no progress bar (it shows only when stderr is a terminal)\n"
    "  --json              print one JSON object instead of the table\n"
    "  -h, --help          show this help\n"
    "\n"
    "Ctrl-C stops after the current whole step (with --restart-every, DIR/restart.h5 is then\n"
    "written for the step reached) and ends the command by the signal.\n";

typedef struct {
    const char *ic, *restart, *out, *method, *backend, *precision;
    int64_t n, steps, seed, snap_every, diag_every, restart_every, threads;
    double dt, e, theta, eps, softening, eta;
    int spline, adaptive, png, quiet, json;
    const char *integrator;
    sim_cosmo_args c;
} sim_args;

/* What the run measured. */
typedef struct {
    fmk_sim_info start, end;
    double wall;
    int interrupted;
} sim_run;

/* ---------------------------------------------------------------------------------------------
 * Ctrl-C. A handler reaches no state but a global: the simulation being run (set only while
 * fmk_sim_run runs) and the signal caught. fmk_sim_interrupt is safe in a signal handler.
 * SA_RESETHAND: a second Ctrl-C ends the command at once.
 * ------------------------------------------------------------------------------------------ */
static fmk_sim *volatile running;
static volatile sig_atomic_t caught;

static void on_sigint(int signo)
{
    caught = signo;
    fmk_sim *s = running;
    if (s)
        fmk_sim_interrupt(s);
}

static int sim_error(fmk_sim *s, fmk_status st)
{
    const char *msg = fmk_sim_last_error(s);
    if (cli_mpi_rank() == 0) /* under mpirun every rank has the same status and message */
        cli_error(cmd, "%s", msg && msg[0] ? msg : fmk_status_string(st));
    return cli_exit_status(st);
}

static int check_args(const sim_args *a, args_opt *opts, int n_opts)
{
#define GIVEN(name) (args_find(opts, n_opts, name)->given)
    static const char *const physics[] = {
        "method", "backend", "precision", "theta", "eps",  "softening", "spline",    "adaptive",
        "eta",    "dt",      "threads",   "n",     "seed", "e",         "integrator"};
    if (a->restart) {
        if (a->ic)
            return cli_usage(cmd, "--restart and --ic exclude each other");
        const int rc = args_refuse(cmd, opts, n_opts, physics, sizeof physics / sizeof *physics,
                                   "a --restart continues with the options stored in the file");
        if (rc != CLI_OK)
            return rc;
    } else if (!a->ic)
        return cli_usage(cmd, "--ic is required (plummer, cold, kepler, cosmo or an HDF5 file), "
                              "or --restart FILE");
    if (!GIVEN("steps"))
        return cli_usage(cmd, "--steps is required");
    const int cosmo_ic = a->ic && strcmp(a->ic, "cosmo") == 0;
    const int file_ic = a->ic && strcmp(a->ic, "plummer") != 0 && strcmp(a->ic, "cold") != 0 &&
                        strcmp(a->ic, "kepler") != 0 && !cosmo_ic;
    if (file_ic && access(a->ic, R_OK) != 0)
        return cli_input_error(cmd,
                               "--ic: '%s' is neither plummer, cold nor kepler, nor a "
                               "readable file",
                               a->ic);
    if ((file_ic || (a->ic && strcmp(a->ic, "kepler") == 0)) && (GIVEN("n") || GIVEN("seed")))
        return cli_usage(cmd, "--n and --seed are for --ic plummer and cold");
    if (GIVEN("e") && !(a->ic && strcmp(a->ic, "kepler") == 0))
        return cli_usage(cmd, "--e is for --ic kepler");
    if (!(a->e >= 0 && a->e < 1))
        return cli_usage(cmd, "--e: %g; the eccentricity must be in [0, 1)", a->e);
    if (!a->restart && !a->adaptive && !GIVEN("dt") && !cosmo_ic && !a->c.comoving)
        return cli_usage(cmd, "--dt is required (or --adaptive)");
    if (GIVEN("dt") && !(a->dt > 0))
        return cli_usage(cmd, "--dt: %g; the step must be > 0", a->dt);
    if (a->adaptive && !(a->softening > 0))
        return cli_usage(cmd, "--adaptive needs --softening H > 0 (the step is eta sqrt(s/|a|))");
    if (GIVEN("eta") && !a->adaptive)
        return cli_usage(cmd, "--eta is for --adaptive");
    if (!(a->eta > 0 && a->eta <= 1))
        return cli_usage(cmd, "--eta: %g; it must be in (0, 1]", a->eta);
    if (a->softening < 0)
        return cli_usage(cmd, "--softening: %g; it must be >= 0", a->softening);
    if (a->spline && !(a->softening > 0))
        return cli_usage(cmd, "--spline needs --softening H > 0");
    if (GIVEN("theta") && !(a->theta > 0 && a->theta < 1))
        return cli_usage(cmd, "--theta: %g; it must be in (0, 1)", a->theta);
    if (GIVEN("eps") && !(a->eps > 0 && a->eps < 1))
        return cli_usage(cmd, "--eps: %g; it must be in (0, 1)", a->eps);
    const int listed = a->c.snap_times || a->c.snap_z;
    if (a->png && a->snap_every == 0 && !listed)
        return cli_usage(cmd, "--png draws each snapshot: give --snap-every K too");
    /* a comoving run writes diagnostics every step unless --diag-every says otherwise */
    const int comoving_diag = (cosmo_ic || a->c.comoving) && !GIVEN("diag-every");
    if (GIVEN("out") && a->snap_every == 0 && a->diag_every == 0 && a->restart_every == 0 &&
        !listed && !comoving_diag)
        return cli_usage(cmd, "--out: nothing to write there; give --snap-every, --diag-every "
                              "or --restart-every");
    if (a->threads > 4096 || a->n > ((int64_t)1 << 40))
        return cli_usage(cmd, "--threads is at most 4096 and --n 2^40");
    return CLI_OK;
#undef GIVEN
}

static int parse(int argc, char **argv, sim_args *a, fmk_sim_opts *so, int *done)
{
    memset(a, 0, sizeof *a);
    a->out = "sim-out", a->method = "auto", a->backend = "auto", a->precision = "fp64";
    a->n = 1024, a->seed = 1, a->e = 0.5, a->eta = 0.025;
    args_opt opts[] = {
        {"ic", ARGS_STRING, &a->ic, 0, 0},
        {"restart", ARGS_STRING, &a->restart, 0, 0},
        {"n", ARGS_INT, &a->n, 1, 0},
        {"steps", ARGS_INT, &a->steps, 0, 0},
        {"dt", ARGS_DOUBLE, &a->dt, 0, 0},
        {"e", ARGS_DOUBLE, &a->e, 0, 0},
        {"seed", ARGS_INT, &a->seed, 0, 0},
        {"method", ARGS_STRING, &a->method, 0, 0},
        {"backend", ARGS_STRING, &a->backend, 0, 0},
        {"precision", ARGS_STRING, &a->precision, 0, 0},
        {"theta", ARGS_DOUBLE, &a->theta, 0, 0},
        {"eps", ARGS_DOUBLE, &a->eps, 0, 0},
        {"softening", ARGS_DOUBLE, &a->softening, 0, 0},
        {"spline", ARGS_FLAG, &a->spline, 0, 0},
        {"adaptive", ARGS_FLAG, &a->adaptive, 0, 0},
        {"integrator", ARGS_STRING, &a->integrator, 0, 0},
        {"eta", ARGS_DOUBLE, &a->eta, 0, 0},
        {"threads", ARGS_INT, &a->threads, 0, 0},
        {"out", ARGS_STRING, &a->out, 0, 0},
        {"snap-every", ARGS_INT, &a->snap_every, 0, 0},
        {"png", ARGS_FLAG, &a->png, 0, 0},
        {"diag-every", ARGS_INT, &a->diag_every, 0, 0},
        {"restart-every", ARGS_INT, &a->restart_every, 0, 0},
        {"quiet", ARGS_FLAG, &a->quiet, 0, 0},
        {"json", ARGS_FLAG, &a->json, 0, 0},
#define SIM_OWN_OPTS \
    25 /* the entries above (checked below: the last is "json"); the
                         * comoving run's follow them */
        [SIM_OWN_OPTS + SIM_COSMO_N_OPTS - 1] = {0},
    };
    if (opts[SIM_OWN_OPTS - 1].name == NULL || strcmp(opts[SIM_OWN_OPTS - 1].name, "json") != 0)
        return cli_usage(cmd, "internal: the option table is out of order");
    sim_cosmo_init(&a->c, opts + SIM_OWN_OPTS);
#undef SIM_OWN_OPTS
    const int n_opts = (int)(sizeof opts / sizeof opts[0]);
    int rc = args_parse(cmd, argc, argv, opts, n_opts, usage, done);
    if (rc != CLI_OK || *done)
        return rc;
    if ((rc = check_args(a, opts, n_opts)) != CLI_OK)
        return rc;
    fmk_sim_opts_default(so);
    if ((rc = sim_cosmo_apply(cmd, &a->c, opts, n_opts, a->ic, a->steps, so)) != CLI_OK)
        return rc;
    /* --theta alone names the treecode (it is that method's parameter); a cosmological run's
     * forces are fp32 unless --precision says otherwise (the paper's run was single precision) */
    if (GIVEN_IN(opts, n_opts, "theta") && !GIVEN_IN(opts, n_opts, "method"))
        a->method = "tree";
    if (a->ic && strcmp(a->ic, "cosmo") == 0 && !GIVEN_IN(opts, n_opts, "precision"))
        a->precision = "fp32";
    /* a comoving run writes its Layzer-Irvine check and interactions every step by default */
    if (((a->ic && strcmp(a->ic, "cosmo") == 0) || a->c.comoving) &&
        !GIVEN_IN(opts, n_opts, "diag-every"))
        a->diag_every = 1;
    if ((rc = args_method(cmd, a->method, &so->plan.method)) != CLI_OK ||
        (rc = args_backend(cmd, a->backend, &so->plan.backend)) != CLI_OK ||
        (rc = args_precision(cmd, a->precision, &so->plan.precision)) != CLI_OK)
        return rc;
    so->plan.theta = a->theta;
    so->plan.threads = (int32_t)a->threads;
    so->eps = a->eps;
    so->soft = a->softening;
    so->softening = a->spline ? FMK_SIM_SOFT_SPLINE : FMK_SIM_SOFT_PLUMMER;
    so->stepping = a->adaptive ? FMK_SIM_STEP_ADAPTIVE : FMK_SIM_STEP_FIXED;
    if (a->integrator && strcmp(a->integrator, "yoshida4") == 0)
        so->integrator = FMK_SIM_YOSHIDA4;
    else if (a->integrator && strcmp(a->integrator, "leapfrog") != 0)
        return cli_usage(cmd, "--integrator: %s; it must be leapfrog or yoshida4", a->integrator);
    if (args_find(opts, n_opts, "dt")->given || !so->comoving)
        so->dt = a->dt;
    so->eta = a->eta;
    so->verbose = !a->quiet;
    return CLI_OK;
}

/* The simulation from the initial conditions or the file. CLI_OK or the exit status. */
static int make_sim(const sim_args *a, const fmk_sim_opts *so, fmk_sim **sim)
{
    *sim = NULL;
    fmk_status st;
    if (a->restart) {
        if ((st = cli_sim_create_from_file(sim, a->restart, NULL)) != FMK_OK)
            return sim_error(NULL, st);
        return CLI_OK;
    }
    if (strcmp(a->ic, "cosmo") == 0)
        return sim_cosmo_make(cmd, &a->c, a->n, (uint64_t)a->seed, so, sim);
    const int kepler = strcmp(a->ic, "kepler") == 0;
    if (!kepler && strcmp(a->ic, "plummer") != 0 && strcmp(a->ic, "cold") != 0) {
        if ((st = cli_sim_create_from_file(sim, a->ic, so)) != FMK_OK)
            return sim_error(NULL, st);
        return CLI_OK;
    }
    const int64_t n = kepler ? 2 : a->n;
    double *mass = malloc(sizeof(double) * (size_t)n);
    double *pos = malloc(sizeof(double) * 3 * (size_t)n);
    double *vel = malloc(sizeof(double) * 3 * (size_t)n);
    if (!mass || !pos || !vel) {
        free(mass), free(pos), free(vel);
        cli_error(cmd, "out of host memory for %lld particles", (long long)n);
        return CLI_FAIL;
    }
    if (kepler)
        st = fmk_sim_ic_kepler(a->e, mass, pos, vel);
    else if (strcmp(a->ic, "plummer") == 0)
        st = fmk_sim_ic_plummer(n, (uint64_t)a->seed, mass, pos, vel);
    else
        st = fmk_sim_ic_cold(n, (uint64_t)a->seed, mass, pos, vel);
    if (st == FMK_OK)
        st = cli_sim_create(sim, n, mass, pos, vel, so);
    free(mass), free(pos), free(vel);
    return st == FMK_OK ? CLI_OK : sim_error(NULL, st);
}

static double energy_error(const sim_run *r)
{
    const double e0 = r->start.total;
    return e0 != 0 ? (r->end.total - e0) / fabs(e0) : r->end.total - e0;
}

static void print_json(const sim_args *a, const sim_run *r)
{
    const fmk_sim_info *s = &r->start, *e = &r->end;
    const int64_t steps = e->step - s->step;
    printf("{\n  \"ic\": \"%s\",\n  \"n\": %lld,\n  \"method\": \"%s\",\n  \"backend\": \"%s\",\n"
           "  \"precision\": \"%s\",\n  \"eps\": %.6g,\n  \"theta\": %.6g,\n",
           a->restart ? "restart" : a->ic, (long long)e->n, fmk_method_name(e->plan.method),
           fmk_backend_name(e->plan.backend),
           e->plan.precision == FMK_PRECISION_FP32 ? "fp32" : "fp64", e->plan.eps, e->plan.theta);
    printf("  \"steps\": %lld,\n  \"step\": %lld,\n  \"time_start\": %.17g,\n  \"time\": %.17g,\n"
           "  \"dt\": %.17g,\n  \"wall_s\": %.6g,\n  \"steps_per_s\": %.6g,\n",
           (long long)steps, (long long)e->step, s->time, e->time, e->dt, r->wall,
           r->wall > 0 ? (double)steps / r->wall : 0.0);
    printf("  \"kinetic\": %.17g,\n  \"potential\": %.17g,\n  \"energy_start\": %.17g,\n"
           "  \"energy\": %.17g,\n  \"energy_error\": %.6g,\n  \"interrupted\": %s,\n",
           e->kinetic, e->potential, s->total, e->total, energy_error(r),
           r->interrupted ? "true" : "false");
    if (a->c.comoving)
        printf("  \"a\": %.17g,\n  \"z\": %.17g,\n  \"layzer_irvine\": %.17g,\n"
               "  \"layzer_irvine_error\": %.6g,\n  \"interactions_total\": %lld,\n",
               e->time, e->redshift, e->layzer_irvine, e->layzer_irvine_error,
               (long long)e->interactions_total);
    printf("  \"out\": ");
    if (a->snap_every || a->diag_every || a->restart_every)
        printf("\"%s\"\n}\n", a->out); /* a path with quotes or backslashes is the caller's */
    else
        printf("null\n}\n");
}

static void print_table(const sim_args *a, const sim_run *r)
{
    const fmk_sim_info *s = &r->start, *e = &r->end;
    const int64_t steps = e->step - s->step;
    printf("%s of %lld particles, method %s on %s (%s, eps %.3g)\n", a->restart ? "restart" : a->ic,
           (long long)e->n, fmk_method_name(e->plan.method), fmk_backend_name(e->plan.backend),
           e->plan.precision == FMK_PRECISION_FP32 ? "fp32" : "fp64", e->plan.eps);
    printf("  steps          %lld%s (step %lld now)\n", (long long)steps,
           r->interrupted ? ", interrupted" : "", (long long)e->step);
    printf("  time           %.6g -> %.6g (last dt %.4g)\n", s->time, e->time, e->dt);
    printf("  wall           %.3f s, %.1f steps/s\n", r->wall,
           r->wall > 0 ? (double)steps / r->wall : 0.0);
    printf("  energy         %.10g -> %.10g (kinetic %.6g, potential %.6g)\n", s->total, e->total,
           e->kinetic, e->potential);
    if (a->c.comoving)
        printf("  a              %.6g -> %.6g (z %.4g -> %.4g)\n"
               "  peculiar       K %.6g, W %.6g; Layzer-Irvine error %.3e\n",
               s->time, e->time, s->redshift, e->redshift, e->kinetic, e->potential,
               e->layzer_irvine_error);
    else
        printf("  energy error   %.3e (relative, over this run)\n", energy_error(r));
    if (a->snap_every || a->diag_every || a->restart_every)
        printf("  output         %s\n", a->out);
}

/* Runs the steps with Ctrl-C caught; fills r. CLI_OK, or the exit status after the message. */
static int run_steps(const sim_args *a, fmk_sim *sim, sim_run *r)
{
    fmk_status st;
    int rc = sim_cosmo_output(cmd, &a->c, sim);
    if (rc != CLI_OK)
        return rc;
    const int listed = a->c.snap_times || a->c.snap_z;
    if ((a->snap_every || a->diag_every || a->restart_every || listed) &&
        (st = fmk_sim_set_output(sim, a->out, a->snap_every, a->png, a->diag_every,
                                 a->restart_every)) != FMK_OK)
        return sim_error(sim, st);
    if ((st = fmk_sim_info_get(sim, &r->start)) != FMK_OK)
        return sim_error(sim, st);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    caught = 0;
    running = sim;
    sigaction(SIGINT, NULL, &old);
    const int watch = old.sa_handler != SIG_IGN; /* an ignored SIGINT stays ignored */
    if (watch)
        sigaction(SIGINT, &sa, NULL);
    const double t0 = cli_now();
    /* a comoving run with --z-end runs to a_end (the steps span it); else --steps steps */
    const double t_end = a->c.a_end > 0 ? a->c.a_end : r->start.time;
    st = caught ? FMK_ERR_INTERRUPTED : fmk_sim_run(sim, t_end, a->steps);
    r->wall = cli_now() - t0;
    running = NULL;
    r->interrupted = st == FMK_ERR_INTERRUPTED && caught;
    if (watch && !caught)
        sigaction(SIGINT, &old, NULL);
    if (st != FMK_OK && !r->interrupted)
        return sim_error(sim, st);
    if ((st = fmk_sim_info_get(sim, &r->end)) != FMK_OK)
        return sim_error(sim, st);
    return CLI_OK;
}

int cmd_sim(int argc, char **argv)
{
    sim_args a;
    fmk_sim_opts so;
    int done = 0;
    int rc = parse(argc, argv, &a, &so, &done);
    if (rc != CLI_OK || done)
        return rc;
    fmk_sim *sim = NULL;
    if ((rc = make_sim(&a, &so, &sim)) != CLI_OK)
        return rc;
    sim_run r;
    memset(&r, 0, sizeof r);
    rc = run_steps(&a, sim, &r);
    if (rc == CLI_OK && cli_mpi_rank() == 0) { /* rank 0 speaks for a distributed run */
        if (a.json)
            print_json(&a, &r);
        else
            print_table(&a, &r);
        fflush(stdout);
    }
    if (rc == CLI_OK && r.interrupted) {
        char path[4096];
        const int wrote = a.restart_every > 0 &&
                          snprintf(path, sizeof path, "%s/restart.h5", a.out) < (int)sizeof path &&
                          fmk_sim_write_restart(sim, path) == FMK_OK;
        cli_error(cmd, "interrupted: stopped after step %lld (time %.17g), a whole step%s%s",
                  (long long)r.end.step, r.end.time, wrote ? "; restart file " : "",
                  wrote ? path : "");
    }
    fmk_sim_destroy(sim);
    if (rc == CLI_OK && r.interrupted) {
        raise(SIGINT); /* the handler was reset: end by the signal, as the shell expects */
        rc = CLI_FAIL;
    }
    return rc;
}
