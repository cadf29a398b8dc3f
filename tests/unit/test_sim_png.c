/* test_sim_png.c -- the simulation driver's PNG projections (src/sim/io/projection.c, png.c):
 * the colour map, the square fitted to 99% of the mass, the cloud-in-cell deposit, the log
 * scale; a PNG written and read back with libpng (header, size, every pixel); refused and
 * failed writes (a full disk) leave no file. Built without libpng: FMK_ERR_UNAVAILABLE. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sim_io_check.h"
#include "sim/io/io.h"

#ifdef FMK_HAVE_PNG
#include <png.h>
#endif

static char dir[256];

static double luminance(const unsigned char c[3])
{
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
}

static void test_colour_map(void)
{
    check_context("colour map");
    unsigned char c[3], prev[3];
    fmk_projection_colour(0, c);
    CHECK(c[0] == 0 && c[1] == 0 && c[2] == 0);
    fmk_projection_colour(1, c);
    CHECK(c[0] == 255 && c[1] == 255 && c[2] == 255);
    fmk_projection_colour(-3, prev);
    CHECK(prev[0] == 0 && prev[1] == 0 && prev[2] == 0);
    /* Brightness rises all the way (perceptually ordered), and the hue is not grey. */
    int rising = 1, coloured = 0;
    fmk_projection_colour(0, prev);
    for (int k = 1; k <= 64; k++) {
        fmk_projection_colour(k / 64.0, c);
        rising &= luminance(c) > luminance(prev);
        coloured |= abs(c[0] - c[2]) > 60;
        memcpy(prev, c, 3);
    }
    CHECK(rising && coloured);
    check_context("");
}

static void test_frame(void)
{
    char msg[512];
    check_context("auto-fit square: 99%% of the mass");
    /* x = +-k/500 (k = 1..500), equal masses: 990 of 1000 lie within |x| <= 0.99. */
    enum { N = 1000 };
    static double pos[3 * N], mass[N];
    for (int i = 0; i < N; i++) {
        int k = i / 2 + 1;
        pos[3 * i] = (i % 2 ? -1 : 1) * k / 500.0;
        pos[3 * i + 1] = 0;
        pos[3 * i + 2] = 1e6 * i; /* along the projection axis: irrelevant */
        mass[i] = 2;
    }
    fmk_projection_frame f;
    CHECK_IO(fmk_projection_frame_make(N, pos, mass, 2, 0, NULL, &f, msg, sizeof msg), FMK_OK, msg);
    CHECK(f.u == 0 && f.v == 1 && f.axis == 2);
    CHECK_MSG(f.extent >= 1.98 && f.extent <= 1.98 * 1.006, "extent %.6f, want 1.98 (+0.6%%)",
              f.extent);
    CHECK(fabs(f.centre[0]) < 1e-12 && fabs(f.centre[1]) < 1e-12);
    /* Two far outliers, 0.25% of the mass each, on either side: the centre of mass stays, and
     * the square does not stretch to them. */
    mass[0] = mass[1] = 0.0025 * 2 * N;
    pos[0] = 1e4;
    pos[3] = -1e4;
    CHECK_IO(fmk_projection_frame_make(N, pos, mass, 2, -1, NULL, &f, msg, sizeof msg), FMK_OK,
             msg);
    CHECK_MSG(f.extent < 2.2, "extent %.3g with an outlier", f.extent);
    check_context("given square, axes");
    const double centre[2] = {3, -4};
    CHECK_IO(fmk_projection_frame_make(N, pos, mass, 0, 5, centre, &f, msg, sizeof msg), FMK_OK,
             msg);
    CHECK(f.u == 1 && f.v == 2 && f.extent == 5 && f.centre[0] == 3 && f.centre[1] == -4);
    CHECK_IO(fmk_projection_frame_make(N, pos, mass, 1, 5, NULL, &f, msg, sizeof msg), FMK_OK, msg);
    CHECK(f.u == 0 && f.v == 2 && f.extent == 5); /* centre of mass */
    check_context("every particle on one point");
    double one[3] = {1, 2, 3}, m = 1;
    CHECK_IO(fmk_projection_frame_make(1, one, &m, 2, 0, NULL, &f, msg, sizeof msg), FMK_OK, msg);
    CHECK(f.extent == 1 && f.centre[0] == 1 && f.centre[1] == 2);
    check_context("");
}

static void test_deposit(void)
{
    check_context("cloud in cell");
    enum { W = 8 };
    double grid[W * W];
    fmk_projection_frame f = {2, 0, 1, {0, 0}, 8}; /* pixels of side 1, centres at +-0.5.. */
    double centred[3] = {0.5, 0.5, 7}, m = 3;
    fmk_projection_deposit(1, centred, &m, &f, W, grid);
    CHECK(grid[4 * W + 4] == 3);
    double corner[3] = {0, 0, 0};
    fmk_projection_deposit(1, corner, &m, &f, W, grid);
    CHECK(grid[3 * W + 3] == 0.75 && grid[3 * W + 4] == 0.75 && grid[4 * W + 3] == 0.75 &&
          grid[4 * W + 4] == 0.75);
    double row[3] = {1.5, -2.5, 0}; /* pixel (5, 1): column 5, row 1 from the bottom */
    fmk_projection_deposit(1, row, &m, &f, W, grid);
    CHECK(grid[1 * W + 5] == 3);
    double outside[3] = {100, 0, 0};
    fmk_projection_deposit(1, outside, &m, &f, W, grid);
    double sum = 0;
    for (int k = 0; k < W * W; k++)
        sum += grid[k];
    CHECK(sum == 0);
    /* Mass is conserved for particles whose clouds lie inside the image. */
    enum { N = 500 };
    static double pos[3 * N], mass[N];
    double total = 0;
    for (int i = 0; i < N; i++) {
        pos[3 * i] = -3.5 + 7.0 * ((i * 37) % N) / N;
        pos[3 * i + 1] = -3.5 + 7.0 * ((i * 91) % N) / N;
        pos[3 * i + 2] = i;
        mass[i] = 1 + i % 7;
        total += mass[i];
    }
    fmk_projection_deposit(N, pos, mass, &f, W, grid);
    sum = 0;
    for (int k = 0; k < W * W; k++)
        sum += grid[k];
    CHECK_MSG(fabs(sum - total) <= 1e-12 * total, "deposited %.17g of %.17g", sum, total);
    check_context("log scale");
    memset(grid, 0, sizeof grid);
    grid[0] = 1e-2;            /* bottom-left: two decades below the top, t = 0.5 */
    grid[(W - 1) * W + 1] = 1; /* top row, column 1: the top, t = 1 */
    grid[W + 2] = 1e-5;        /* below 4 decades: colour 0 */
    unsigned char rgb[W * W * 3], want[3];
    fmk_projection_image(grid, W, rgb);
    fmk_projection_colour(1, want);
    CHECK(memcmp(rgb + 3 * 1, want, 3) == 0); /* image row 0 is the top */
    fmk_projection_colour(128 / 255.0, want);
    CHECK(memcmp(rgb + 3 * ((W - 1) * W + 0), want, 3) == 0);
    fmk_projection_colour(0, want);
    CHECK(memcmp(rgb + 3 * ((W - 2) * W + 2), want, 3) == 0);
    CHECK(memcmp(rgb + 3 * (3 * W + 3), want, 3) == 0);
    check_context("");
}

#ifdef FMK_HAVE_PNG

/* A Plummer sphere about (1, 1, 1) (Aarseth, Henon & Wielen 1974: r = (X^(-2/3) - 1)^(-1/2)),
 * its outskirts cut at X = 0.95: what a snapshot's picture shows. */
enum { NB = 4000 };
static void blob(double *pos, double *mass)
{
    uint64_t s = 12345;
    for (int i = 0; i < NB; i++) {
        double u[3];
        for (int k = 0; k < 3; k++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            u[k] = ((double)(s >> 11) + 0.5) * 0x1p-53;
        }
        double r = 1 / sqrt(pow(0.95 * u[0], -2.0 / 3) - 1);
        double z = 2 * u[1] - 1, phi = 2 * 3.14159265358979 * u[2], rho = sqrt(1 - z * z);
        pos[3 * i] = 1 + r * rho * cos(phi);
        pos[3 * i + 1] = 1 + r * rho * sin(phi);
        pos[3 * i + 2] = 1 + r * z;
        mass[i] = 1.0 / NB;
    }
}

/* The file's bytes contain needle (n bytes). */
static int file_contains(const char *path, const char *needle, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    static char buf[1 << 20];
    size_t got = fread(buf, 1, sizeof buf, f);
    fclose(f);
    for (size_t k = 0; k + n <= got; k++)
        if (memcmp(buf + k, needle, n) == 0)
            return 1;
    return 0;
}

static void test_png_file(void)
{
    check_context("PNG written and read back");
    static double pos[3 * NB], mass[NB];
    blob(pos, mass);
    char path[512], msg[512];
    snprintf(path, sizeof path, "%s/blob.png", dir);
    enum { W = 96 };
    CHECK_IO(fmk_sim_io_write_png(path, NB, pos, mass, 2, W, 0, NULL, msg, sizeof msg), FMK_OK,
             msg);
    CHECK(count_names(dir, ".tmp.") == 0);
    /* The header by hand: signature, IHDR width, height, 8 bits, colour type 2 (RGB). */
    unsigned char head[26] = {0};
    FILE *f = fopen(path, "rb");
    CHECK(f && fread(head, 1, sizeof head, f) == sizeof head);
    if (f)
        fclose(f);
    static const unsigned char signature[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    CHECK(memcmp(head, signature, 8) == 0 && memcmp(head + 12, "IHDR", 4) == 0);
    uint32_t w = (uint32_t)head[16] << 24 | head[17] << 16 | head[18] << 8 | head[19];
    uint32_t h = (uint32_t)head[20] << 24 | head[21] << 16 | head[22] << 8 | head[23];
    CHECK(w == W && h == W && head[24] == 8 && head[25] == 2);
    CHECK(file_contains(path, "Software\0fmmkit", 15));
    /* Every pixel, decoded by libpng, against the projection computed here. */
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    static unsigned char got[W * W * 3], want[W * W * 3];
    int read = png_image_begin_read_from_file(&image, path);
    if (read) {
        image.format = PNG_FORMAT_RGB;
        read = image.width == W && image.height == W &&
               png_image_finish_read(&image, NULL, got, 0, NULL);
    }
    CHECK_MSG(read, "libpng read: %s", image.message);
    png_image_free(&image);
    fmk_projection_frame frame;
    static double grid[W * W];
    CHECK_IO(fmk_projection_frame_make(NB, pos, mass, 2, 0, NULL, &frame, msg, sizeof msg), FMK_OK,
             msg);
    fmk_projection_deposit(NB, pos, mass, &frame, W, grid);
    fmk_projection_image(grid, W, want);
    CHECK(memcmp(got, want, sizeof want) == 0);
    /* Bright in the middle, dark in the corners. */
    unsigned char white[3];
    fmk_projection_colour(1, white);
    CHECK(luminance(got + 3 * (W / 2 * W + W / 2)) > 100 && luminance(got) < 60);
    check_context("");
}

static int write_png_when_full(void *ctx)
{
    const char *path = ctx;
    static double pos[3 * NB], mass[NB];
    blob(pos, mass);
    char msg[512] = "";
    fmk_status st = fmk_sim_io_write_png(path, NB, pos, mass, 1, 256, 0, NULL, msg, sizeof msg);
    int bad = st != FMK_ERR_INTERNAL || !message_has(msg, "File too large") ||
              !message_has(msg, path) || !file_holds(path, "old") || count_names(dir, ".tmp.") != 0;
    if (bad)
        printf("  PNG under a file-size limit: status %d, \"%s\"\n", (int)st, msg);
    return bad;
}

static void test_png_refused(void)
{
    static double pos[3 * NB], mass[NB];
    blob(pos, mass);
    char path[512], msg[512];
    snprintf(path, sizeof path, "%s/refused.png", dir);
    file_put(path, "old");
    const double centre[2] = {0, 0};
    struct {
        int64_t n;
        int axis, width;
        double extent;
        const char *what;
    } bad[] = {
        {NB, 2, 0, 0, "width"},          {NB, 2, 9000, 0, "width"}, {NB, 3, 64, 0, "axis"},
        {NB, -1, 64, 0, "axis"},         {0, 2, 64, 0, "n >= 1"},   {NB, 2, 64, NAN, "extent"},
        {NB, 2, 64, INFINITY, "extent"},
    };
    for (int k = 0; k < (int)(sizeof bad / sizeof bad[0]); k++) {
        check_context("refused PNG: %s", bad[k].what);
        CHECK_IO(fmk_sim_io_write_png(path, bad[k].n, pos, mass, bad[k].axis, bad[k].width,
                                      bad[k].extent, centre, msg, sizeof msg),
                 FMK_ERR_ARG, msg);
        CHECK(message_has(msg, bad[k].what) && file_holds(path, "old"));
    }
    check_context("refused PNG: bad particles");
    pos[301] = NAN;
    CHECK_IO(fmk_sim_io_write_png(path, NB, pos, mass, 2, 64, 0, NULL, msg, sizeof msg),
             FMK_ERR_ARG, msg);
    CHECK(message_has(msg, "particle 100"));
    pos[301] = 0;
    mass[7] = -1;
    CHECK_IO(fmk_sim_io_write_png(path, NB, pos, mass, 2, 64, 0, NULL, msg, sizeof msg),
             FMK_ERR_ARG, msg);
    CHECK(message_has(msg, "particle 7") && file_holds(path, "old"));
    mass[7] = 1.0 / NB;
    const double bad_centre[2] = {NAN, 0};
    CHECK_IO(fmk_sim_io_write_png(path, NB, pos, mass, 2, 64, 1, bad_centre, msg, sizeof msg),
             FMK_ERR_ARG, msg);
    CHECK_IO(fmk_sim_io_write_png(path, NB, NULL, mass, 2, 64, 1, NULL, msg, sizeof msg),
             FMK_ERR_ARG, msg);
    CHECK_IO(fmk_sim_io_write_png("", NB, pos, mass, 2, 64, 1, NULL, msg, sizeof msg), FMK_ERR_ARG,
             msg);
    check_context("failed PNG: no such directory");
    char missing[512];
    snprintf(missing, sizeof missing, "%s/nodir/a.png", dir);
    CHECK_IO(fmk_sim_io_write_png(missing, NB, pos, mass, 2, 64, 0, NULL, msg, sizeof msg),
             FMK_ERR_INTERNAL, msg);
    CHECK(message_has(msg, missing) && message_has(msg, "No such file"));
    const long limits[] = {0, 100, 2000};
    for (int k = 0; k < 3; k++) {
        check_context("failed PNG: file-size limit %ld", limits[k]);
        CHECK(with_file_limit(limits[k], write_png_when_full, path) == 0);
    }
    CHECK(file_holds(path, "old") && count_names(dir, ".tmp.") == 0);
    check_context("");
}

#else /* !FMK_HAVE_PNG */

static void test_png_unavailable(void)
{
    check_context("built without libpng");
    char msg[512];
    double x[3] = {0}, m = 1;
    CHECK_IO(fmk_sim_io_write_png("a.png", 1, x, &m, 2, 64, 0, NULL, msg, sizeof msg),
             FMK_ERR_UNAVAILABLE, msg);
    CHECK(message_has(msg, "libpng-dev"));
    check_context("");
}

#endif /* FMK_HAVE_PNG */

int main(void)
{
    scratch_make(dir, sizeof dir, "sim_png");
    test_colour_map();
    test_frame();
    test_deposit();
#ifdef FMK_HAVE_PNG
    test_png_file();
    test_png_refused();
#else
    test_png_unavailable();
#endif
    scratch_remove(dir);
    return check_summary();
}
