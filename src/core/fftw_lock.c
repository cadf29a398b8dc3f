/* fftw_lock.c -- the lock around FFTW's planner (fftw_lock.h). The mutex and the once flag are
 * the process-wide objects FFTW's own process-wide planner state asks for. */
#include "core/fftw_lock.h"

#ifdef FMK_HAVE_FFTW
#include <fftw3.h>
#include <pthread.h>

static pthread_mutex_t planner_lock = PTHREAD_MUTEX_INITIALIZER;
#ifdef FMK_HAVE_FFTW_OMP
static pthread_once_t threads_once = PTHREAD_ONCE_INIT;
static void threads_init(void)
{
    fftw_init_threads();
}
#endif

void fmk_fftw_lock(void)
{
    pthread_mutex_lock(&planner_lock);
#ifdef FMK_HAVE_FFTW_OMP
    pthread_once(&threads_once, threads_init);
#endif
}

void fmk_fftw_unlock(void)
{
    pthread_mutex_unlock(&planner_lock);
}
#else
void fmk_fftw_lock(void) {}

void fmk_fftw_unlock(void) {}
#endif
