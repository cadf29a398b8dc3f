/*
 * device.h -- the device side of fmk_poisson_solve_device (solve_device.c), CUDA builds only
 * (device.cu): the checks and copies of the caller's device arrays. Every function returns FMK_OK
 * or a status with the solver's message (FMK_ERR_ARG for a pointer the GPU does not hold,
 * FMK_ERR_DEVICE for a failed CUDA call).
 */
#ifndef FMMKIT_POISSON_DEVICE_H
#define FMMKIT_POISSON_DEVICE_H

#include <stdint.h>

#include "poisson/poisson.h"

#ifdef __cplusplus
extern "C" {
#endif

/* p is memory of CUDA device `device` (device or managed memory); name is the argument's. */
fmk_status fmk_poisson_dev_pointer(struct fmk_poisson *s, int device, const void *p,
                                   const char *name);

/* The first index i < n with d[i] NaN or Inf (*first = -1: none) and its value. */
fmk_status fmk_poisson_dev_first_nonfinite(struct fmk_poisson *s, int device, const double *d,
                                           int64_t n, int64_t *first, double *value);

/* Copies bytes from src to dst: dir 0 host to device, 1 device to host, 2 device to device.
 * Returns when the copy is done. */
enum { FMK_POISSON_H2D = 0, FMK_POISSON_D2H = 1, FMK_POISSON_D2D = 2 };
fmk_status fmk_poisson_dev_copy(struct fmk_poisson *s, int device, void *dst, const void *src,
                                int64_t bytes, int dir, const char *what);

/* dst (device) = the points of n_ranges ranges of src (device), width values per point, one
 * range after the other: ranges (host) holds 2 per range, its first point and its points. */
fmk_status fmk_poisson_dev_gather(struct fmk_poisson *s, int device, double *dst, const double *src,
                                  int width, int64_t n_ranges, const int64_t *ranges);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_POISSON_DEVICE_H */
