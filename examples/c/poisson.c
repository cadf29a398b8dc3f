/* poisson.c -- the streamfunction and velocity of a vorticity field on a grid
 * (fmmkit_poisson.h, docs/poisson.md).
 *
 * The test problem of van Rees et al.: two vortex rings in the unit cube, whose exact omega,
 * Psi and u fmk_poisson_rings gives at any points. A solver is made once, given the grid once
 * (cell-centred, 32^3), and solves for Psi and u = curl Psi as often as needed; the result is
 * compared with the exact solution (the difference is the kernel's smoothing, eps = h).
 *
 * Build against an installed fmmkit:
 *     cc poisson.c $(pkg-config --cflags --libs fmmkit) -lm -o poisson
 * or with CMake: find_package(fmmkit) and link fmmkit::fmmkit (see CMakeLists.txt here). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <fmmkit_poisson.h>

enum { N = 32, NP = N * N * N };

static double rel_l2(const double *a, const double *b, long n)
{
    double num = 0, den = 0;
    for (long i = 0; i < n; i++)
        num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
    return sqrt(num / den);
}

int main(void)
{
    /* Point p = i + N (j + N k) sits at origin + h (i, j, k); fields have 3 values per point. */
    const double h = 1.0 / N, origin[3] = {h / 2, h / 2, h / 2};
    double *x = malloc(3 * NP * sizeof *x), *omega = malloc(3 * NP * sizeof *omega),
           *psi_exact = malloc(3 * NP * sizeof *psi_exact), *psi = malloc(3 * NP * sizeof *psi),
           *u = malloc(3 * NP * sizeof *u);
    if (!x || !omega || !psi_exact || !psi || !u)
        return 1;
    for (long p = 0; p < NP; p++) {
        x[3 * p] = origin[0] + h * (double)(p % N);
        x[3 * p + 1] = origin[1] + h * (double)(p / N % N);
        x[3 * p + 2] = origin[2] + h * (double)(p / (N * N));
    }
    fmk_status st = fmk_poisson_rings(NP, x, omega, psi_exact, NULL);

    /* Options: method auto is the FFT solver where fmmkit was built with FFTW, else the FMM. */
    fmk_poisson_opts opts;
    fmk_poisson_opts_default(&opts);
    fmk_poisson *solver = NULL;
    if (st == FMK_OK)
        st = fmk_poisson_create(&solver, 1e-6, &opts); /* eps: the FMM's accuracy */
    if (st == FMK_OK)
        st = fmk_poisson_set_grid(solver, N, N, N, h, origin);
    if (st == FMK_OK)
        st = fmk_poisson_solve(solver, 3, omega, psi, u); /* again for every new omega */
    if (st != FMK_OK) {
        fprintf(stderr, "failed: %s: %s\n", fmk_status_string(st), fmk_poisson_last_error(solver));
        return 1;
    }
    fmk_poisson_info info;
    fmk_poisson_get_info(solver, &info);
    printf("%s on %d^3: %lld grid points with vorticity, %.3f s; relative l2 error of Psi "
           "against the exact solution %.3f\n",
           fmk_poisson_method_name(info.method), N, (long long)info.n_sources, info.solve_time,
           rel_l2(psi, psi_exact, 3 * NP));
    fmk_poisson_destroy(solver);
    free(x), free(omega), free(psi_exact), free(psi), free(u);
    return 0;
}
