/* test_poisson_rings.c -- the test problem of van Rees et al. (fmk_poisson_rings, src/poisson/
 * rings.c): its closed-form omega and u against fourth-order central differences of its Psi.
 *
 * At points inside both rings' supports (random, and on the ring cores):
 *   omega = -laplacian Psi           (Psi is divergence-free, so this is curl curl Psi),
 *   u     = curl Psi,   omega = curl u,   div Psi = div u = 0,
 * each difference taken with step 1e-3 (truncation about 1e-6 of the field's largest value;
 * rounding 1e-13), and compared in the max norm relative to the largest value of the field.
 * Then: zero outside the supports, the second ring as the first rotated by pi/2 about x, and
 * the bad inputs of fmk_poisson_rings. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fmmkit_poisson.h"
#include "testutil.h"

enum { N_POINTS = 400 };
static const double STEP = 1e-3;

/* omega, Psi, u at one point (3 each). */
static void rings_at(const double x[3], double w[3], double p[3], double u[3])
{
    if (fmk_poisson_rings(1, x, w, p, u) != FMK_OK)
        printf("fmk_poisson_rings: %s\n", fmk_poisson_last_error(NULL));
}

/* Fourth-order central differences along axis k of the 3-vector fields Psi and u at x:
 * first derivatives dp[a], du[a] and the second derivative d2p[a] of each component a. */
static void differences(const double x[3], int k, double dp[3], double d2p[3], double du[3])
{
    static const double off[4] = {-2, -1, 1, 2}, w1[4] = {1, -8, 8, -1}, w2[4] = {-1, 16, 16, -1};
    double w[3], p0[3], u0[3];
    rings_at(x, w, p0, u0);
    for (int a = 0; a < 3; a++)
        dp[a] = 0, d2p[a] = -30 * p0[a], du[a] = 0;
    for (int t = 0; t < 4; t++) {
        double y[3] = {x[0], x[1], x[2]}, p[3], u[3];
        y[k] += off[t] * STEP;
        rings_at(y, w, p, u);
        for (int a = 0; a < 3; a++) {
            dp[a] += w1[t] * p[a];
            d2p[a] += w2[t] * p[a];
            du[a] += w1[t] * u[a];
        }
    }
    for (int a = 0; a < 3; a++) {
        dp[a] /= 12 * STEP;
        du[a] /= 12 * STEP;
        d2p[a] /= 12 * STEP * STEP;
    }
}

/* Sample points: half on the two ring cores (angle and a small offset at random), half
 * uniform in the two supports' bounding cubes. */
static void sample_points(double *x)
{
    test_rng rng = test_rng_seed(2024);
    for (int i = 0; i < N_POINTS; i++) {
        const int ring = i % 2;
        const double c = ring ? 0.75 : 0.25;
        double *p = x + 3 * i;
        if (i < N_POINTS / 2) {
            const double phi = 6.283185307179586 * test_uniform(&rng),
                         a = 0.125 + 0.06 * (test_uniform(&rng) - 0.5);
            const double along = 0.06 * (test_uniform(&rng) - 0.5);
            /* ring 0: axis z; ring 1: axis -y, plane x-z */
            const double u = a * cos(phi), v = a * sin(phi);
            if (!ring)
                p[0] = c + u, p[1] = c + v, p[2] = c + along;
            else
                p[0] = c + u, p[1] = c - along, p[2] = c + v;
        } else {
            for (int k = 0; k < 3; k++)
                p[k] = c - 0.25 + 0.5 * test_uniform(&rng);
        }
    }
}

static void test_differences(void)
{
    check_context("finite differences");
    double *x = test_alloc(3 * N_POINTS);
    sample_points(x);
    double w_max = 0, u_max = 0, p_max = 0;
    double err_lap = 0, err_curl_p = 0, err_curl_u = 0, div_p = 0, div_u = 0;
    int in_support = 0;
    for (int i = 0; i < N_POINTS; i++) {
        double dp[3][3], d2p[3][3], du[3][3]; /* [axis][component] */
        for (int k = 0; k < 3; k++)
            differences(x + 3 * i, k, dp[k], d2p[k], du[k]);
        double w[3], p[3], u[3];
        rings_at(x + 3 * i, w, p, u);
        in_support += p[0] != 0 || p[1] != 0 || p[2] != 0;
        for (int a = 0; a < 3; a++) {
            const int b = (a + 1) % 3, c = (a + 2) % 3;
            const double lap = d2p[0][a] + d2p[1][a] + d2p[2][a];
            const double curl_p = dp[b][c] - dp[c][b], curl_u = du[b][c] - du[c][b];
            w_max = fmax(w_max, fabs(w[a]));
            u_max = fmax(u_max, fabs(u[a]));
            p_max = fmax(p_max, fabs(p[a]));
            err_lap = fmax(err_lap, fabs(w[a] + lap));
            err_curl_p = fmax(err_curl_p, fabs(u[a] - curl_p));
            err_curl_u = fmax(err_curl_u, fabs(w[a] - curl_u));
        }
        div_p = fmax(div_p, fabs(dp[0][0] + dp[1][1] + dp[2][2]));
        div_u = fmax(div_u, fabs(du[0][0] + du[1][1] + du[2][2]));
    }
    printf("%d of %d points in the supports; max |omega| %.3e, |Psi| %.3e, |u| %.3e\n", in_support,
           N_POINTS, w_max, p_max, u_max);
    printf("relative max errors: omega + lap Psi %.2e, u - curl Psi %.2e, omega - curl u %.2e; "
           "div Psi %.2e, div u %.2e (per |u|, |omega|)\n",
           err_lap / w_max, err_curl_p / u_max, err_curl_u / w_max, div_p / u_max, div_u / w_max);
    CHECK(in_support > N_POINTS / 2);
    CHECK(w_max > 0 && u_max > 0 && p_max > 0);
    CHECK_LE(err_lap / w_max, 1e-5, "|omega + laplacian Psi| / max |omega|");
    CHECK_LE(err_curl_p / u_max, 1e-5, "|u - curl Psi| / max |u|");
    CHECK_LE(err_curl_u / w_max, 1e-5, "|omega - curl u| / max |omega|");
    CHECK_LE(div_p / u_max, 1e-5, "|div Psi| / max |u|");
    CHECK_LE(div_u / w_max, 1e-5, "|div u| / max |omega|");
    free(x);
}

/* Outside both supports everything is 0; the second ring is the first one, shifted by
 * (0.5, 0.5, 0.5) and rotated by pi/2 about x: (x, y, z) -> (x, -z, y). */
static void test_geometry(void)
{
    check_context("geometry");
    const double outside[4][3] = {
        {0.25, 0.25, 0.25}, {0.9, 0.1, 0.5}, {0.25, 0.25, 0.38}, {-3, 0, 7}};
    int zero = 1;
    for (int i = 0; i < 4; i++) {
        double w[3], p[3], u[3];
        rings_at(outside[i], w, p, u);
        for (int a = 0; a < 3; a++)
            zero &= w[a] == 0 && p[a] == 0 && u[a] == 0;
    }
    CHECK_MSG(zero, "the rings are nonzero outside their supports (axes, far away)");
    test_rng rng = test_rng_seed(5);
    /* each field's largest value (omega, Psi, u at the core): the errors are relative to it */
    const double core[3] = {0.375, 0.25, 0.25};
    double scale_of[3], wc[3], pc[3], uc[3];
    rings_at(core, wc, pc, uc);
    scale_of[0] = fabs(wc[1]), scale_of[1] = fabs(pc[1]), scale_of[2] = fabs(uc[2]);
    double worst = 0, scale = 0;
    for (int i = 0; i < 200; i++) {
        double d[3];
        for (int k = 0; k < 3; k++)
            d[k] = 0.5 * (test_uniform(&rng) - 0.5);
        const double x1[3] = {0.25 + d[0], 0.25 + d[1], 0.25 + d[2]};
        const double x2[3] = {0.75 + d[0], 0.75 - d[2], 0.75 + d[1]};
        double w1[3], p1[3], u1[3], w2[3], p2[3], u2[3];
        rings_at(x1, w1, p1, u1);
        rings_at(x2, w2, p2, u2);
        const double r1[3][3] = {
            {w1[0], -w1[2], w1[1]}, {p1[0], -p1[2], p1[1]}, {u1[0], -u1[2], u1[1]}};
        const double *v2[3] = {w2, p2, u2};
        for (int f = 0; f < 3; f++)
            for (int a = 0; a < 3; a++) {
                worst = fmax(worst, fabs(r1[f][a] - v2[f][a]) / scale_of[f]);
                scale = fmax(scale, fabs(r1[f][a]));
            }
    }
    CHECK(scale > 0);
    CHECK_LE(worst, 1e-12, "the second ring against the first rotated");
}

static void test_inputs(void)
{
    check_context("bad inputs");
    double x[6] = {0.3, 0.2, 0.25, 0.1, 0.1, 0.1}, w[6];
    CHECK_STATUS(fmk_poisson_rings(-1, x, w, NULL, NULL), FMK_ERR_ARG);
    CHECK_STATUS(fmk_poisson_rings(2, NULL, w, NULL, NULL), FMK_ERR_NULL);
    CHECK_STATUS(fmk_poisson_rings(0, NULL, NULL, NULL, NULL), FMK_OK);
    x[4] = NAN;
    memset(w, 0, sizeof w);
    CHECK_STATUS(fmk_poisson_rings(2, x, w, NULL, NULL), FMK_ERR_NONFINITE);
    CHECK(strstr(fmk_poisson_last_error(NULL), "points[1][1]") != NULL);
    CHECK(w[0] == 0 && w[3] == 0);
}

int main(void)
{
    test_differences();
    test_geometry();
    test_inputs();
    return check_summary();
}
