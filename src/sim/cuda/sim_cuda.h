/*
 * sim_cuda.h -- the simulation's device-resident state (CUDA backend), reached from
 * src/sim/device.c through these C launchers. Nothing of it includes CUDA headers, and it
 * sees none of src/core: the plan is driven by device.c through include/fmmkit.h.
 *
 *   state.cu    the state's buffers (positions, accelerations and potentials double-buffered,
 *               velocities, masses, charges G m, softening lengths), uploads, downloads,
 *               device-to-device copies and the checks of device input
 *   step.cu     the drift and kick kernels, the check that the new forces are finite
 *   reduce.cu   the reductions: energies, momentum, angular momentum; the adaptive step's
 *               largest |a|^2 / l^2; the first bad value of device input
 *   spline.cu   GADGET's spline correction: the hashed cell list (CUB's radix sort) and the
 *               pair kernel (spline.h's formulas, as on the CPU)
 *
 * Every kernel runs on the default stream, where the plan's device calls run too, so the
 * order of a step is the order of its calls and nothing waits for the host except what must:
 * the finite check's flag (4 bytes a step) and the adaptive step's one double. Every launcher
 * selects the state's device first and returns FMK_OK or a status with a sentence in msg.
 */
#ifndef FMMKIT_SIM_CUDA_H
#define FMMKIT_SIM_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "fmmkit.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fmk_sim_cuda fmk_sim_cuda;

/* A state of n particles on device `device`; per_particle: a softening length per particle;
 * spline: the spline correction's buffers. */
fmk_status fmk_sim_cuda_create(fmk_sim_cuda **out, int device, int64_t n, int per_particle,
                               int spline, char *msg, size_t cap);
void fmk_sim_cuda_free(fmk_sim_cuda *d);
/* Device bytes the state holds. */
int64_t fmk_sim_cuda_bytes(const fmk_sim_cuda *d);

/* Host arrays up: mass, charge (n), soft (n, or NULL), pos, vel (3n; pos into both halves of
 * the double buffer), acc (3n) and pot (n) or NULL. */
fmk_status fmk_sim_cuda_upload(fmk_sim_cuda *d, const double *mass, const double *charge,
                               const double *soft, const double *pos, const double *vel,
                               const double *acc, const double *pot, char *msg, size_t cap);
/* Device arrays in (mass, pos, vel), the charges G m made on the device; bad[0..2]: the first
 * index (of n, 3n, 3n values) of a mass not finite and > 0, a position or a velocity not
 * finite, or -1. */
fmk_status fmk_sim_cuda_copy_in(fmk_sim_cuda *d, const double *d_mass, const double *d_pos,
                                const double *d_vel, double G, int64_t bad[3], char *msg,
                                size_t cap);
/* The state out to host (device = 0) or device (device = 1) arrays; any may be NULL. */
fmk_status fmk_sim_cuda_copy_out(const fmk_sim_cuda *d, int device, double *mass, double *pos,
                                 double *vel, double *acc, double *pot, char *msg, size_t cap);

/* The next buffers (the plan's set_points_device and eval_device arguments) and the charges. */
void fmk_sim_cuda_next(fmk_sim_cuda *d, double **d_pos, double **d_acc, double **d_pot);
/* The state's buffers (the potential computed on demand: device.c). */
void fmk_sim_cuda_current(fmk_sim_cuda *d, double **d_pos, double **d_acc, double **d_pot);
const double *fmk_sim_cuda_charge(const fmk_sim_cuda *d);

/* Waits for the state's work so far (so that the plan's calls are timed alone). */
fmk_status fmk_sim_cuda_sync(fmk_sim_cuda *d, char *msg, size_t cap);
/* pos_next = pos + (vel + acc k1) dd (Newtonian: k1 = dt/2, dd = dt). */
fmk_status fmk_sim_cuda_drift(fmk_sim_cuda *d, double k1, double dd, char *msg, size_t cap);
/* Comoving: acc_next += c pos_next (the background's attraction taken out). */
fmk_status fmk_sim_cuda_background(fmk_sim_cuda *d, double c, char *msg, size_t cap);
/* The spline correction at the positions pos (one of the state's buffers) added into acc and
 * pot (NULL: the accelerations alone): h_i = 2.8 soft_i (or 2.8 soft), cells of h_max. */
fmk_status fmk_sim_cuda_spline(fmk_sim_cuda *d, const double *pos, double *acc, double *pot,
                               double soft, double h_max, char *msg, size_t cap);
/* *bad: the first particle whose acceleration (3n values) or potential (n) is not finite, or
 * -1; either array may be NULL (not checked). */
fmk_status fmk_sim_cuda_check(fmk_sim_cuda *d, const double *acc, const double *pot, int64_t *bad,
                              char *msg, size_t cap);
/* vel = (vel + acc k1) + acc_next k2 (Newtonian: k1 = k2 = dt/2), then the next buffers
 * become the state. */
fmk_status fmk_sim_cuda_kick_swap(fmk_sim_cuda *d, double k1, double k2, char *msg, size_t cap);
void fmk_sim_cuda_swap(fmk_sim_cuda *d);

/* max_i |a_i|^2 / l_i^2 with l_i = scale soft_i (or scale soft). */
fmk_status fmk_sim_cuda_max_acc(fmk_sim_cuda *d, double scale, double soft, double *value,
                                char *msg, size_t cap);
/* out: 1/2 sum m |v|^2, -1/2 sum m psi, sum m |x|^2 (the comoving diagnostics' sums). */
fmk_status fmk_sim_cuda_comoving_sums(const fmk_sim_cuda *d, double out[3], char *msg, size_t cap);
/* out: kinetic, potential (-1/2 sum m psi), momentum (3), angular momentum (3). */
fmk_status fmk_sim_cuda_diagnostics(const fmk_sim_cuda *d, double out[8], char *msg, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_SIM_CUDA_H */
