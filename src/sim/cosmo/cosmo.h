/*
 * cosmo.h -- the background cosmology, the linear power spectrum and the initial conditions'
 * grid (docs/cosmology.md). Units as in fmmkit_sim.h: Mpc, 1e10 Msun, km/s; time in
 * Mpc/(km/s); wavenumbers in 1/Mpc (no h).
 *
 *   background.c  H(a), t(a) and its inverse, the linear growth factor D(a) and rate f(a), the
 *                 leapfrog's drift and kick factors, preset parameter sets and their checks
 *   power.c       Eisenstein & Hu (1998) transfer function, sigma(R), P(k) normalised to
 *                 sigma_8
 *   field.c       the Gaussian random field on the periodic grid (FFTW), Zel'dovich and 2LPT
 *                 displacements, the sphere cut (fmk_sim_ic_cosmo*)
 *
 * All of it runs on the CPU in double precision. Nothing here keeps state between calls.
 */
#ifndef FMMKIT_SIM_COSMO_H
#define FMMKIT_SIM_COSMO_H

#include <stddef.h>

#include "fmmkit_sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FMK_OK, or FMK_ERR_ARG with a sentence in msg: every parameter finite, omega_m > 0,
 * omega_lambda >= 0, 0 <= omega_b < omega_m, h > 0, sigma_8 > 0, t_cmb > 0, and H(a)^2 > 0
 * for every a in (0, 1] (no bounce, no recollapse before today). */
fmk_status fmk_cosmo_check(const fmk_sim_cosmology *c, char *msg, size_t cap);

/* H0 = 100 h (km/s/Mpc = 1 / the time unit). */
double fmk_cosmo_h0(const fmk_sim_cosmology *c);
/* H(a) = H0 sqrt(omega_m / a^3 + omega_k / a^2 + omega_lambda). */
double fmk_cosmo_hubble(const fmk_sim_cosmology *c, double a);
/* rho_m today = 3 H0^2 omega_m / (8 pi G), 1e10 Msun per comoving Mpc^3. */
double fmk_cosmo_rho_m(const fmk_sim_cosmology *c);
/* Cosmic time since a = 0, t(a) = int_0^a da' / (a' H(a')), and its inverse (a > 0, t > 0;
 * relative accuracy 1e-13). */
double fmk_cosmo_time(const fmk_sim_cosmology *c, double a);
double fmk_cosmo_a_of_time(const fmk_sim_cosmology *c, double t);
/* The growing mode, normalised D(1) = 1: D(a) proportional to
 * H(a) int_0^a da' / (a' H(a'))^3 (exact for matter + Lambda + curvature), and its
 * logarithmic rate f = dln D / dln a. */
double fmk_cosmo_growth(const fmk_sim_cosmology *c, double a);
double fmk_cosmo_growth_rate(const fmk_sim_cosmology *c, double a);
/* The leapfrog's factors over [a0, a1] in comoving coordinates with momenta p = a^2 dx/dt:
 * drift int dt / a^2 = int da / (a^3 H), kick int dt / a = int da / (a^2 H) (relative
 * accuracy 1e-14; a0 <= a1 or reversed with the sign). */
double fmk_cosmo_drift(const fmk_sim_cosmology *c, double a0, double a1);
double fmk_cosmo_kick(const fmk_sim_cosmology *c, double a0, double a1);

/* The linear matter power spectrum today, P(k) in Mpc^3 (k in 1/Mpc, >= 0; P(0) = 0), with
 * the Eisenstein & Hu (1998) transfer function (baryon wiggles included) and the amplitude
 * that gives sigma_8; at scale factor a it is D(a)^2 P(k). */
double fmk_cosmo_power(const fmk_sim_cosmology *c, double k);
/* The Eisenstein & Hu (1998) transfer function T(k), T(0) = 1. */
double fmk_cosmo_transfer(const fmk_sim_cosmology *c, double k);
/* sigma(R) today: the rms linear density contrast in spheres of radius R Mpc. */
double fmk_cosmo_sigma(const fmk_sim_cosmology *c, double radius);

/* The power spectrum's constants, computed once (fmk_cosmo_power and fmk_cosmo_sigma compute
 * them on each call; the grid's loops use this). */
typedef struct fmk_cosmo_spectrum {
    fmk_sim_cosmology c;
    /* Eisenstein & Hu (1998): k_eq (1/Mpc), the sound horizon s (Mpc), k_silk (1/Mpc),
     * alpha_c, beta_c, alpha_b, beta_b, beta_node, the baryon and CDM fractions */
    double k_eq, s, k_silk, alpha_c, beta_c, alpha_b, beta_b, beta_node, f_b, f_c;
    double amplitude; /* A in P(k) = A k^n_s T(k)^2 */
} fmk_cosmo_spectrum;

/* Fills s for the cosmology c (checked by fmk_cosmo_check). */
void fmk_cosmo_spectrum_init(fmk_cosmo_spectrum *s, const fmk_sim_cosmology *c);
double fmk_cosmo_spectrum_transfer(const fmk_cosmo_spectrum *s, double k);
double fmk_cosmo_spectrum_power(const fmk_cosmo_spectrum *s, double k);
double fmk_cosmo_spectrum_sigma(const fmk_cosmo_spectrum *s, double radius);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_SIM_COSMO_H */
