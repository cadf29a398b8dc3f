/* sum.c -- methods direct and fmm: the grid sum of docs/poisson.md as an fmmkit N-body sum, on
 * the solver's backend (the plan's: CPU or GPU).
 *
 * Sources are the grid points where any component of omega is nonzero, with one charge vector
 * per component, omega times the point's cell volume in grid units (h^3 with h the box's
 * spacing: 1 on the finest level); targets are every grid point, passed as their own array so
 * that the term j = i stays in (G(0) = 3/(2 eps), docs/kernels.md). Points are in grid units
 * (poisson.h: multiples of 1/2, which the plan's frame maps exactly whatever h_min is), with
 * softening e = eps/h_min; the results are scaled back, Psi = h_min^2/(4 pi) pot and
 * grad Psi = h_min/(4 pi) grad. The plan gets new sources only when the support of omega
 * changes. */
#include <stdlib.h>
#include <string.h>

#include "poisson/poisson.h"

struct fmk_sum_state {
    double *targets; /* n_points * 3: every grid point, in grid units */
    double *volume;  /* n_points: h^3 of each point's box, in grid units */
    fmk_plan *plan;  /* made at the first solve; again when the component count changes */
    int plan_components;
    int has_points;   /* the plan holds the sources of support[0 .. n_support) */
    int64_t *support; /* n_points: indices of the plan's sources */
    int64_t n_support;
    int64_t *next; /* n_points: the support of the omega being solved */
    double *sources, *charges, *pot, *grad;
    int64_t sources_cap, charges_cap, pot_cap, grad_cap; /* doubles allocated */
};

static fmk_method plan_method(fmk_poisson_method m)
{
    return m == FMK_POISSON_DIRECT ? FMK_METHOD_DIRECT : FMK_METHOD_FMM;
}

static fmk_status make_plan(fmk_plan **plan, const fmk_poisson_opts *po, double eps,
                            double softening, int32_t threads, int n_vectors)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = plan_method(po->method);
    o.backend = po->backend;
    o.device = po->device;
    o.softening = softening;
    o.threads = threads;
    o.n_vectors = n_vectors;
    o.verbose = po->verbose;
    return fmk_plan_create(plan, 3, FMK_KERNEL_REGULARIZED, eps, &o);
}

fmk_status fmk_sum_check(const fmk_poisson_opts *opts, double eps)
{
    fmk_plan *plan = NULL;
    const fmk_status st = make_plan(&plan, opts, eps, 1, opts->threads, 1);
    fmk_plan_destroy(plan); /* the message, if any, is the calling thread's */
    return st;
}

void fmk_sum_release(fmk_poisson *s)
{
    struct fmk_sum_state *m = s->state;
    if (!m)
        return;
    fmk_plan_destroy(m->plan);
    free(m->targets);
    free(m->volume);
    free(m->support);
    free(m->next);
    free(m->sources);
    free(m->charges);
    free(m->pot);
    free(m->grad);
    free(m);
    s->state = NULL;
}

int64_t fmk_sum_bytes(const fmk_poisson *s)
{
    const struct fmk_sum_state *m = s->state;
    if (!m)
        return 0;
    int64_t b =
        (int64_t)sizeof *m + (int64_t)(sizeof(double) * 4 + sizeof(int64_t) * 2) * s->n_points;
    b += (int64_t)sizeof(double) * (m->sources_cap + m->charges_cap + m->pot_cap + m->grad_cap);
    fmk_info in;
    if (m->plan && fmk_plan_info(m->plan, &in) == FMK_OK)
        b += in.bytes_host;
    return b;
}

static fmk_status out_of_memory(fmk_poisson *s, int64_t doubles)
{
    return fmk_solver_fail(s, FMK_ERR_NOMEM, "method %s: out of host memory (%lld bytes)",
                           fmk_poisson_method_name(s->info.method),
                           (long long)(sizeof(double) * (size_t)doubles));
}

/* *p holds at least n doubles (its contents need not survive). */
static int ensure(double **p, int64_t *cap, int64_t n)
{
    if (n <= *cap)
        return 0;
    free(*p);
    *cap = 0;
    *p = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!*p)
        return -1;
    *cap = n;
    return 0;
}

fmk_status fmk_sum_setup(fmk_poisson *s)
{
    fmk_sum_release(s);
    struct fmk_sum_state *m = calloc(1, sizeof *m);
    if (!m)
        return out_of_memory(s, 0);
    s->state = m;
    const int64_t n = s->n_points;
    m->targets = malloc(sizeof(double) * 3 * (size_t)n);
    m->volume = malloc(sizeof(double) * (size_t)n);
    m->support = malloc(sizeof(int64_t) * (size_t)n);
    m->next = malloc(sizeof(int64_t) * (size_t)n);
    if (!m->targets || !m->volume || !m->support || !m->next)
        return out_of_memory(s, 6 * n);
    double *x = m->targets, *v = m->volume;
    for (int64_t k = 0; k < s->n_boxes; k++) {
        const struct fmk_poisson_box *b = &s->boxes[k];
        const int64_t nb = (int64_t)b->n[0] * b->n[1] * b->n[2];
        const double vol = b->h * b->h * b->h;
#pragma omp parallel for schedule(static) num_threads(s->threads)
        for (int64_t q = 0; q < nb; q++) {
            const int64_t p = b->offset + q;
            x[3 * p] = b->corner[0] + b->h * (double)(q % b->n[0]);
            x[3 * p + 1] = b->corner[1] + b->h * (double)(q / b->n[0] % b->n[1]);
            x[3 * p + 2] = b->corner[2] + b->h * (double)(q / ((int64_t)b->n[0] * b->n[1]));
            v[p] = vol;
        }
    }
    return FMK_OK;
}

/* The plan's failure as the solver's: the same status and sentence. */
static fmk_status plan_failed(fmk_poisson *s, fmk_status st, const fmk_plan *plan)
{
    return fmk_solver_fail(s, st, "%s", fmk_plan_last_error(plan));
}

/* The plan for nc charge vectors, and its points for the support in m->next[0 .. ns). */
static fmk_status plan_points(fmk_poisson *s, struct fmk_sum_state *m, int nc, int64_t ns)
{
    if (!m->plan || m->plan_components != nc) {
        fmk_plan_destroy(m->plan);
        m->plan = NULL;
        m->has_points = 0;
        fmk_poisson_opts o = s->opts;
        o.method = s->info.method;
        o.backend = s->info.backend;
        fmk_status st = make_plan(&m->plan, &o, s->eps, s->e, s->threads, nc);
        if (st != FMK_OK)
            return plan_failed(s, st, NULL);
        fmk_plan_set_interrupt(m->plan, fmk_solver_check, s);
        m->plan_components = nc;
    }
    if (m->has_points && ns == m->n_support &&
        !memcmp(m->next, m->support, sizeof(int64_t) * (size_t)ns))
        return FMK_OK; /* the same sources: the plan's tree and lists serve again */
    m->has_points = 0;
    if (ensure(&m->sources, &m->sources_cap, 3 * ns))
        return out_of_memory(s, 3 * ns);
    for (int64_t j = 0; j < ns; j++)
        memcpy(m->sources + 3 * j, m->targets + 3 * m->next[j], sizeof(double) * 3);
    fmk_status st = fmk_plan_set_points(m->plan, ns, m->sources, s->n_points, m->targets);
    if (st != FMK_OK)
        return plan_failed(s, st, m->plan);
    int64_t *t = m->support;
    m->support = m->next, m->next = t;
    m->n_support = ns;
    m->has_points = 1;
    return FMK_OK;
}

fmk_status fmk_sum_solve(fmk_poisson *s, int nc, const double *omega, double *psi,
                             double *velocity)
{
    struct fmk_sum_state *m = s->state;
    const int64_t n = s->n_points;
    int64_t ns = 0;
    for (int64_t p = 0; p < n; p++) {
        int nonzero = 0;
        for (int a = 0; a < nc; a++)
            nonzero |= omega[nc * p + a] != 0;
        if (nonzero)
            m->next[ns++] = p;
    }
    s->info.n_sources = ns;
    if (ns == 0) { /* no vorticity: no flow (the plan is not needed) */
        if (psi)
            memset(psi, 0, sizeof(double) * (size_t)(n * nc));
        if (velocity)
            memset(velocity, 0, sizeof(double) * (size_t)(n * 3));
        return FMK_OK;
    }
    fmk_status st = plan_points(s, m, nc, ns);
    if (st != FMK_OK)
        return st;
    if (ensure(&m->charges, &m->charges_cap, nc * ns) ||
        (psi && ensure(&m->pot, &m->pot_cap, nc * n)) ||
        (velocity && ensure(&m->grad, &m->grad_cap, 3 * nc * n)))
        return out_of_memory(s, nc * ns + 4 * nc * n);
    for (int a = 0; a < nc; a++)
        for (int64_t j = 0; j < ns; j++)
            m->charges[a * ns + j] = omega[nc * m->support[j] + a] * m->volume[m->support[j]];
    st =
        fmk_plan_eval_many(m->plan, nc, m->charges, psi ? m->pot : NULL, velocity ? m->grad : NULL);
    if (st != FMK_OK)
        return plan_failed(s, st, m->plan);

    /* Grid units back to the caller's: G_eps(h m) h^3 = h^2 G_e(m), grad by one h less. */
    const double scale_psi = s->h * s->h * FMK_INV_4PI, scale_u = s->h * FMK_INV_4PI;
    const double *pot = m->pot, *grad = m->grad;
    if (psi) {
#pragma omp parallel for schedule(static) num_threads(s->threads)
        for (int64_t p = 0; p < n; p++)
            for (int a = 0; a < nc; a++)
                psi[nc * p + a] = scale_psi * pot[a * n + p];
    }
    if (velocity) {
        /* u = curl Psi: u_a = d_b Psi_c - d_c Psi_b, (a, b, c) cyclic; the gradient of charge
         * vector c is grad Psi_c, at (c n + p) * 3 + b. */
#pragma omp parallel for schedule(static) num_threads(s->threads)
        for (int64_t p = 0; p < n; p++)
            for (int a = 0; a < 3; a++) {
                const int b = (a + 1) % 3, c = (a + 2) % 3;
                velocity[3 * p + a] =
                    scale_u * (grad[(c * n + p) * 3 + b] - grad[(b * n + p) * 3 + c]);
            }
    }
    return FMK_OK;
}
