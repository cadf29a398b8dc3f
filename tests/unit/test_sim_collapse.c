/* test_sim_collapse.c -- the cold collapse of a uniform sphere (issue 34's bar): M = 1, R = 1,
 * at rest, collapses at the free-fall time t_ff = pi/2 sqrt(R^3 / (2 G M)) = 1.1107; the time
 * of maximum compression (the most negative potential energy) must lie within 5% of it.
 *
 * Why these choices. A uniform sphere of point masses collapses homologously: every shell
 * arrives at the centre at t_ff. In an N-body model two things move the moment of deepest
 * potential: the Poisson noise of N particles (shells do not arrive together, the densest
 * moment is spread over a time ~ t_ff / sqrt(N)), and the softening s, which caps the depth and
 * makes the particles pass through the centre a little later. With N = 2048 and s = 0.02
 * (about a third of the mean spacing at the start) the minimum comes 2.7% to 2.8% after t_ff
 * with this seed (1.9% to 2.1% with another; s = 0.05 gives 3.2%), so the 5% bar holds with
 * room, and neither the noise nor the softening is tuned to hit t_ff. The steps: fixed dt = 0.002 (the
 * collapse's time of passage through the centre, s / v ~ 0.02 / 3, is ~3 steps), and the
 * adaptive step (eta 0.05, at most 0.01), which shortens its steps itself near the collapse. */
#include "sim_check.h"

#define N (SANITIZED ? 1024 : 2048) /* 1024: 1.025 t_ff (Plummer softening) */

static void collapse(const char *what, fmk_sim_opts o)
{
    check_context("cold collapse, %s", what);
    particles p = particles_new(N);
    fmk_sim_ic_cold(N, 11, p.mass, p.pos, p.vel);
    fmk_sim *sim = NULL;
    CHECK_SIM(fmk_sim_create(&sim, N, p.mass, p.pos, p.vel, NULL, NULL, &o), NULL);
    particles_free(&p);
    if (!sim)
        return;
    const double t_ff = 3.14159265358979323846 / 2 * sqrt(0.5);
    fmk_sim_info info;
    fmk_sim_info_get(sim, &info);
    const double e0 = info.total;
    double w_min = 0, t_min = 0;
    while (info.time < 1.4) {
        fmk_status st = fmk_sim_step(sim);
        CHECK_SIM(st, sim);
        if (st != FMK_OK)
            break;
        fmk_sim_info_get(sim, &info);
        if (info.potential < w_min)
            w_min = info.potential, t_min = info.time;
    }
    const double de = fabs(info.total / e0 - 1);
    printf("%-38s maximum compression at t = %.4f = %.4f t_ff (W = %.3f), %lld steps, |dE/E| "
           "%.1e\n",
           what, t_min, t_min / t_ff, w_min, (long long)info.step, de);
    CHECK_LE(fabs(t_min / t_ff - 1), 0.05, "the time of maximum compression against t_ff");
    CHECK_LE(de, 2e-3, "|dE/E| through the collapse");
    fmk_sim_destroy(sim);
}

int main(void)
{
    fmk_sim_opts o = sim_opts(FMK_METHOD_DIRECT, 0.02, 0.002);
    collapse("plummer s 0.02, direct, dt 0.002", o);
    o = sim_opts(FMK_METHOD_TREE, 0.02, 0);
    o.softening = FMK_SIM_SOFT_SPLINE;
    o.stepping = FMK_SIM_STEP_ADAPTIVE;
    o.eta = 0.05;
    o.dt_max = 0.01;
    collapse("spline s 0.02, tree 0.5, adaptive", o);
    return check_summary();
}
