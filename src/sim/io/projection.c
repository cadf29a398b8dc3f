/* projection.c -- a mass projection as an image: the square (given, or fitted to 99% of the
 * mass), cloud-in-cell deposit, log scale over 4 decades, and a perceptual colour map. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/io/io.h"

/* The auto fit's histogram of log2 distances: 32 octaves below the largest in 4096 bins, so
 * the fitted half side is at most 2^(1/128) - 1 = 0.5% above the exact 99% quantile. */
#define FIT_BINS 4096
#define FIT_OCTAVES 32.0
#define FIT_FRACTION 0.99

static fmk_status check_input(int64_t n, const double *pos, const double *mass, int axis,
                              double extent, const double centre[2], char *msg, size_t cap)
{
    if (n < 1 || !pos || !mass)
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "a projection needs n >= 1 particles with positions and masses "
                              "(n = %lld, pos %s, mass %s)",
                              (long long)n, pos ? "given" : "NULL", mass ? "given" : "NULL");
    if (axis < 0 || axis > 2)
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "the projection axis is %d; it must be 0 (x), 1 (y) or 2 (z)", axis);
    if (isnan(extent) || isinf(extent))
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "the projection's extent is %g; give a side > 0, or <= 0 to fit "
                              "the square to the particles",
                              extent);
    if (centre && (!isfinite(centre[0]) || !isfinite(centre[1])))
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "the projection's centre (%g, %g) is not "
                              "finite",
                              centre[0], centre[1]);
    for (int64_t i = 0; i < n; i++) {
        const double *x = pos + 3 * i;
        if (!isfinite(x[0]) || !isfinite(x[1]) || !isfinite(x[2]))
            return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                                  "particle %lld's position is not finite; it cannot be "
                                  "projected",
                                  (long long)i);
        if (!isfinite(mass[i]) || mass[i] < 0)
            return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                                  "particle %lld's mass is %g; masses must be finite and >= 0",
                                  (long long)i, mass[i]);
    }
    return FMK_OK;
}

/* The particles' weight in the fit: their mass, or 1 each when the total mass is 0. */
static double fit_weight(const double *mass, int64_t i, int unit)
{
    return unit ? 1.0 : mass[i];
}

/* Centre of mass on (u, v), and the half side of the square about it that holds 99% of the
 * mass: a mass-weighted histogram of d = max(|du|, |dv|) in log2 bins, no sort. */
static fmk_status fit_square(int64_t n, const double *pos, const double *mass,
                             fmk_projection_frame *f, char *msg, size_t cap)
{
    double total = 0;
    for (int64_t i = 0; i < n; i++)
        total += mass[i];
    int unit = !(total > 0);
    double wsum = 0, cu = 0, cv = 0;
    for (int64_t i = 0; i < n; i++) {
        double w = fit_weight(mass, i, unit);
        wsum += w;
        cu += w * pos[3 * i + f->u];
        cv += w * pos[3 * i + f->v];
    }
    cu /= wsum;
    cv /= wsum;
    double dmax = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fmax(fabs(pos[3 * i + f->u] - cu), fabs(pos[3 * i + f->v] - cv));
        dmax = fmax(dmax, d);
    }
    f->centre[0] = cu;
    f->centre[1] = cv;
    if (!(dmax > 0)) { /* every particle on the centre: a square of side 1 */
        f->extent = 1;
        return FMK_OK;
    }
    double *hist = calloc(FIT_BINS, sizeof(double));
    if (!hist)
        return fmk_files_fail(msg, cap, FMK_ERR_NOMEM, "out of host memory fitting a projection");
    double top = log2(dmax), scale = FIT_BINS / FIT_OCTAVES;
    for (int64_t i = 0; i < n; i++) {
        double d = fmax(fabs(pos[3 * i + f->u] - cu), fabs(pos[3 * i + f->v] - cv));
        double b = d > 0 ? (log2(d) - (top - FIT_OCTAVES)) * scale : 0;
        int k = b <= 0 ? 0 : b >= FIT_BINS ? FIT_BINS - 1 : (int)b;
        hist[k] += fit_weight(mass, i, unit);
    }
    double want = FIT_FRACTION * wsum, sum = 0;
    int k = 0;
    for (; k < FIT_BINS - 1; k++) {
        sum += hist[k];
        if (sum >= want)
            break;
    }
    free(hist);
    /* The upper edge of bin k (bin FIT_BINS - 1 ends at dmax itself). */
    double half = k == FIT_BINS - 1 ? dmax : exp2(top - FIT_OCTAVES + (k + 1) / scale);
    f->extent = 2 * fmin(half, dmax);
    return FMK_OK;
}

fmk_status fmk_projection_frame_make(int64_t n, const double *pos, const double *mass, int axis,
                                     double extent, const double centre[2],
                                     fmk_projection_frame *frame, char *msg, size_t cap)
{
    fmk_status st = check_input(n, pos, mass, axis, extent, centre, msg, cap);
    if (st != FMK_OK)
        return st;
    frame->axis = axis;
    frame->u = axis == 0 ? 1 : 0;
    frame->v = axis == 2 ? 1 : 2;
    if (extent <= 0)
        return fit_square(n, pos, mass, frame, msg, cap);
    frame->extent = extent;
    if (centre) {
        frame->centre[0] = centre[0];
        frame->centre[1] = centre[1];
        return FMK_OK;
    }
    /* No centre: the centre of mass, then the given side. */
    st = fit_square(n, pos, mass, frame, msg, cap);
    frame->extent = extent;
    return st;
}

/* Pixel coordinate of x (pixel centres at integers), or a value outside (-1, width) when the
 * particle's cloud misses the image. */
static double pixel_of(double x, double lo, double inv_h)
{
    return (x - lo) * inv_h - 0.5;
}

void fmk_projection_deposit(int64_t n, const double *pos, const double *mass,
                            const fmk_projection_frame *frame, int width, double *grid)
{
    memset(grid, 0, (size_t)width * (size_t)width * sizeof(double));
    double inv_h = width / frame->extent;
    double lo_u = frame->centre[0] - 0.5 * frame->extent;
    double lo_v = frame->centre[1] - 0.5 * frame->extent;
    for (int64_t i = 0; i < n; i++) {
        double gu = pixel_of(pos[3 * i + frame->u], lo_u, inv_h);
        double gv = pixel_of(pos[3 * i + frame->v], lo_v, inv_h);
        if (!(gu > -1 && gu < width && gv > -1 && gv < width) || mass[i] == 0)
            continue;
        int iu = (int)floor(gu), iv = (int)floor(gv);
        double fu = gu - iu, fv = gv - iv;
        /* Cloud in cell: the particle's pixel-sized cloud shared among the 4 nearest
         * pixels, each getting its overlap (Hockney & Eastwood, ch. 5). */
        double w[2][2] = {{(1 - fu) * (1 - fv), (1 - fu) * fv}, {fu * (1 - fv), fu * fv}};
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) {
                int ju = iu + a, jv = iv + b;
                if (ju >= 0 && ju < width && jv >= 0 && jv < width)
                    grid[(size_t)jv * width + ju] += mass[i] * w[a][b];
            }
    }
}

void fmk_projection_colour(double t, unsigned char rgb[3])
{
    /* Green's cubehelix (Bull. Astr. Soc. India 39, 289, 2011): brightness rises linearly
     * from black to white while the hue turns, so the map reads in grey and is
     * perceptually ordered. start 0, rotations 0.6, hue 1.8, gamma 1: black, purple, red,
     * orange, pale yellow (near matplotlib's magma; every channel stays within [0, 1]). */
    const double start = 0.0, rotations = 0.6, hue = 1.8;
    const double pi = 3.14159265358979323846;
    double l = t < 0 ? 0 : t > 1 ? 1 : t;
    double amp = hue * l * (1 - l) / 2;
    double phi = 2 * pi * (start / 3 + rotations * l);
    double c = cos(phi), s = sin(phi);
    double channel[3] = {l + amp * (-0.14861 * c + 1.78277 * s),
                         l + amp * (-0.29227 * c - 0.90649 * s), l + amp * (1.97294 * c)};
    for (int k = 0; k < 3; k++) {
        double x = channel[k] < 0 ? 0 : channel[k] > 1 ? 1 : channel[k];
        rgb[k] = (unsigned char)(255 * x + 0.5);
    }
}

void fmk_projection_image(const double *grid, int width, unsigned char *rgb)
{
    unsigned char table[256][3];
    for (int k = 0; k < 256; k++)
        fmk_projection_colour(k / 255.0, table[k]);
    size_t pixels = (size_t)width * (size_t)width;
    double top = 0;
    for (size_t k = 0; k < pixels; k++)
        top = fmax(top, grid[k]);
    for (int row = 0; row < width; row++) {
        const double *line = grid + (size_t)(width - 1 - row) * width; /* top row: largest v */
        unsigned char *out = rgb + (size_t)row * width * 3;
        for (int i = 0; i < width; i++) {
            double t = line[i] > 0 && top > 0 ? 1 + log10(line[i] / top) / 4 : 0;
            int k = t <= 0 ? 0 : t >= 1 ? 255 : (int)(255 * t + 0.5);
            memcpy(out + 3 * i, table[k], 3);
        }
    }
}
