/* sim_check.h -- what the simulation driver's tests share (tests/unit/test_sim_*.c, with
 * check.h): the CHECK of a call on a simulation, arrays of particles, Lagrangian radii and
 * bitwise comparisons. Public API only (fmmkit_sim.h). */
#ifndef FMMKIT_TESTS_SIM_CHECK_H
#define FMMKIT_TESTS_SIM_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmmkit_sim.h"

#include "check.h"

#include "sanitized.h" /* SANITIZED: the physics tests run smaller under ASan */

/* CHECK_SIM(call, sim): call succeeds; on failure prints the simulation's message. */
#define CHECK_SIM(call, sim)                                                                 \
    do {                                                                                     \
        fmk_status check_st_ = (call);                                                       \
        check_report(check_st_ == FMK_OK, __FILE__, __LINE__, "%s returned %d (%s): \"%s\"", \
                     #call, (int)check_st_, fmk_status_string(check_st_),                    \
                     fmk_sim_last_error(sim));                                               \
    } while (0)

/* CHECK_SIM_STATUS(call, expected, sim): call returns expected and leaves a message. */
#define CHECK_SIM_STATUS(call, expected, sim)                                             \
    do {                                                                                  \
        fmk_status check_st_ = (call), check_ex_ = (expected);                            \
        const char *check_msg_ = fmk_sim_last_error(sim);                                 \
        check_report(check_st_ == check_ex_ && check_msg_[0] != '\0', __FILE__, __LINE__, \
                     "%s returned %d (%s), expected %d (%s); message: \"%s\"", #call,     \
                     (int)check_st_, fmk_status_string(check_st_), (int)check_ex_,        \
                     fmk_status_string(check_ex_), check_msg_);                           \
    } while (0)

/* n particles: masses, positions, velocities (n, 3n, 3n). */
typedef struct particles {
    int64_t n;
    double *mass, *pos, *vel;
} particles;

static inline particles particles_new(int64_t n)
{
    particles p = {n, malloc((size_t)n * sizeof(double)), malloc((size_t)n * 3 * sizeof(double)),
                   malloc((size_t)n * 3 * sizeof(double))};
    if (!p.mass || !p.pos || !p.vel) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static inline void particles_free(particles *p)
{
    free(p->mass), free(p->pos), free(p->vel);
    memset(p, 0, sizeof *p);
}

/* Options on the CPU with method m (tree: theta 0.5). */
static inline fmk_sim_opts sim_opts(fmk_method m, double soft, double dt)
{
    fmk_sim_opts o;
    fmk_sim_opts_default(&o);
    o.plan.method = m;
    o.plan.backend = FMK_BACKEND_CPU;
    if (m == FMK_METHOD_TREE)
        o.plan.theta = 0.5;
    o.soft = soft;
    o.dt = dt;
    return o;
}

static inline int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The radii about the centre of mass that hold the fractions f[0..k) of the mass (equal
 * masses: the order statistics). */
static inline void lagrange_radii(const particles *p, const double *f, int k, double *r)
{
    double c[3] = {0, 0, 0}, m = 0;
    for (int64_t i = 0; i < p->n; i++) {
        m += p->mass[i];
        for (int a = 0; a < 3; a++)
            c[a] += p->mass[i] * p->pos[3 * i + a];
    }
    double *d = malloc((size_t)p->n * sizeof *d);
    if (!d)
        exit(2);
    for (int64_t i = 0; i < p->n; i++) {
        const double *x = p->pos + 3 * i;
        d[i] = sqrt((x[0] - c[0] / m) * (x[0] - c[0] / m) + (x[1] - c[1] / m) * (x[1] - c[1] / m) +
                    (x[2] - c[2] / m) * (x[2] - c[2] / m));
    }
    qsort(d, (size_t)p->n, sizeof *d, cmp_double);
    for (int j = 0; j < k; j++) {
        int64_t i = (int64_t)(f[j] * (double)p->n);
        r[j] = d[i < p->n ? i : p->n - 1];
    }
    free(d);
}

/* 1 when the two simulations' states are the same bit for bit. */
static inline int same_state(const fmk_sim *a, const fmk_sim *b, int64_t n)
{
    const size_t bytes = (size_t)n * 11 * sizeof(double);
    double *x = malloc(bytes), *y = malloc(bytes);
    if (!x || !y)
        exit(2);
    memset(x, 0, bytes), memset(y, 0, bytes);
    fmk_sim_get_state(a, x, x + n, x + 4 * n, x + 7 * n, x + 10 * n);
    fmk_sim_get_state(b, y, y + n, y + 4 * n, y + 7 * n, y + 10 * n);
    fmk_sim_info ia, ib;
    fmk_sim_info_get(a, &ia), fmk_sim_info_get(b, &ib);
    const int same =
        memcmp(x, y, bytes) == 0 && ia.step == ib.step && ia.time == ib.time && ia.dt == ib.dt;
    free(x), free(y);
    return same;
}

#endif /* FMMKIT_TESTS_SIM_CHECK_H */
