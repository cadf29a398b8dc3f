/*
 * fftw_lock.h -- the one lock around FFTW's planner in fmmkit.
 *
 * FFTW's planner keeps process-wide state and is not thread-safe (only fftw_execute is):
 * every part of fmmkit that makes or destroys FFTW plans (the Poisson solver's fft method, the
 * cosmological initial conditions) does so between fmk_fftw_lock and fmk_fftw_unlock, so that
 * callers on different threads stay independent. fmk_fftw_lock also initialises FFTW's
 * threads once, in a build with libfftw3_omp. Without FFTW in the build these do nothing.
 */
#ifndef FMMKIT_FFTW_LOCK_H
#define FMMKIT_FFTW_LOCK_H

#ifdef __cplusplus
extern "C" {
#endif

void fmk_fftw_lock(void);
void fmk_fftw_unlock(void);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_FFTW_LOCK_H */
