/*
 * lpt.h -- the periodic grid of the cosmological initial conditions (docs/cosmology.md,
 * "Initial conditions"), shared by field.c (the public calls, the lattice, the sphere cut) and
 * lpt.c (the Gaussian field and the Lagrangian perturbation theory's fields, through FFTW).
 *
 * A grid has g points per side at spacing d (box g d) and up to four fields of g * g * row
 * doubles (row = 2 (g / 2 + 1): FFTW's padded in-place layout). A real field's point (x, y, z)
 * is field[(x g + y) row + z]; after a forward transform the complex mode (x, y, kz) is the
 * pair at 2 ((x g + y) (g / 2 + 1) + kz), with wavenumbers 2 pi / box times x or x - g (above
 * g / 2), likewise y, and kz in 0..g/2. Modes on a Nyquist plane (an index g / 2, g even)
 * and the mean are zero in every field made here.
 */
#ifndef FMMKIT_SIM_COSMO_LPT_H
#define FMMKIT_SIM_COSMO_LPT_H

#include <stdint.h>

#include "sim/cosmo/cosmo.h"

#define FMK_COSMO_FIELDS 4

typedef struct fmk_cosmo_grid {
    int64_t g, row; /* points per side; padded row length in doubles */
    double spacing; /* Mpc */
    double box;     /* g spacing */
    int threads;    /* OpenMP threads of the loops and (with libfftw3_omp) of FFTW */
    double *field[FMK_COSMO_FIELDS];
    void *forward, *inverse; /* FFTW plans: in place, made on field[0], run on any field */
} fmk_cosmo_grid;

/* Allocates n_fields fields and the plans (FFTW_ESTIMATE: the same plan on every run, so the
 * same arithmetic); FMK_ERR_NOMEM or FMK_ERR_UNAVAILABLE (no FFTW in this build) with a
 * sentence in msg. A failed create leaves nothing to destroy; destroy of a zeroed grid is a
 * no-op. */
fmk_status fmk_cosmo_grid_create(fmk_cosmo_grid *grid, int64_t g, double spacing, int n_fields,
                                 int threads, char *msg, size_t cap);
void fmk_cosmo_grid_destroy(fmk_cosmo_grid *grid);

/* field[0] := the linear density contrast today, delta(k) on the grid in FFTW's
 * unnormalised convention divided by g^3 (an inverse transform gives delta(x)): unit white
 * noise from the seed's stream in real space (splitmix64 + Box-Muller, cell (x, y, z) drawn
 * from the stream's numbers 2 floor(m / 2) and 2 floor(m / 2) + 1, m = (x g + y) g + z),
 * transformed, times sqrt(P(k) / spacing^3) / g^3; the mean and Nyquist modes zeroed. */
void fmk_cosmo_grid_delta(fmk_cosmo_grid *grid, const fmk_cosmo_spectrum *s, uint64_t seed);

/* field[dst] := scale times the real field whose modes are op(k) field[src](k): with a < 0,
 * op = 1 (the field itself); with b < 0,
 * op = i k_a / k^2, component a of the displacement Psi with div Psi = -src; with b >= 0,
 * op = k_a k_b / k^2, the second derivative phi_ab of phi with del^2 phi = src. src holds modes
 * (it is kept); dst != src. */
void fmk_cosmo_grid_derive(fmk_cosmo_grid *grid, int src, int dst, int a, int b, double scale);

/* field[3] := the modes of the second-order source sum_{i<j} phi_ii phi_jj - phi_ij^2 of
 * del^2 phi = field[0] (Scoccimarro 1998; Crocce, Pueblas & Scoccimarro 2006 eq. 6), divided
 * by g^3 as field[0] is; uses field[1] and field[2]. */
void fmk_cosmo_grid_source2(fmk_cosmo_grid *grid);

/* Internal, for tests: the periodic fields before the sphere cut at the initial redshift, in
 * lattice order without padding: delta (g^3; may be NULL) and the first-order displacement
 * D1 Psi1 (3 g^3, component-major: psi[c g^3 + m]; may be NULL). */
fmk_status fmk_cosmo_ic_linear(const fmk_sim_cosmo_ic *p, double *delta, double *psi);

#endif /* FMMKIT_SIM_COSMO_LPT_H */
