/* png.c -- fmk_sim_io_write_png: the projection of projection.c, encoded by libpng (8-bit RGB)
 * in memory, then written atomically by fmk_files_write. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/io/io.h"

#ifdef FMK_HAVE_PNG
#include <png.h>

/* The encoded file, grown in memory, and libpng's message when it fails (libpng never prints
 * here). */
typedef struct png_sink {
    unsigned char *data;
    size_t size, capacity;
    int nomem;
    char reason[128];
} png_sink;

static void on_error(png_structp png, png_const_charp text)
{
    png_sink *sink = png_get_error_ptr(png);
    snprintf(sink->reason, sizeof sink->reason, "%s", text ? text : "libpng error");
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp text)
{
    (void)png;
    (void)text;
}

static void on_write(png_structp png, png_bytep data, size_t length)
{
    png_sink *sink = png_get_io_ptr(png);
    if (sink->size + length > sink->capacity) {
        size_t capacity = 2 * sink->capacity + length;
        unsigned char *grown = realloc(sink->data, capacity);
        if (!grown) {
            sink->nomem = 1;
            png_error(png, "out of memory");
        }
        sink->data = grown;
        sink->capacity = capacity;
    }
    memcpy(sink->data + sink->size, data, length);
    sink->size += length;
}

static void on_flush(png_structp png)
{
    (void)png;
}

/* Encodes rgb (width x width, top row first) into sink; 0 on success. Everything this
 * function changes after setjmp lives in libpng's structs, so no local needs volatile. */
static int encode(png_sink *sink, const unsigned char *rgb, int width, const char *comment)
{
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, sink, on_error, on_warning);
    if (!png)
        return -1;
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        return -1;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return -1;
    }
    png_set_write_fn(png, sink, on_write, on_flush);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)width, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_text text[2];
    memset(text, 0, sizeof text);
    text[0].compression = text[1].compression = PNG_TEXT_COMPRESSION_NONE;
    text[0].key = (png_charp) "Software";
    text[0].text = (png_charp) "fmmkit";
    text[1].key = (png_charp) "Description";
    text[1].text = (png_charp)comment;
    png_set_text(png, info, text, 2);
    png_write_info(png, info);
    for (int row = 0; row < width; row++)
        png_write_row(png, (png_const_bytep)(rgb + (size_t)row * width * 3));
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    return 0;
}

fmk_status fmk_sim_io_write_png(const char *path, int64_t n, const double *pos, const double *mass,
                                int axis, int width, double extent, const double centre[2],
                                char *msg, size_t cap)
{
    fmk_status st = fmk_files_check_path(path, "fmk_sim_io_write_png", msg, cap);
    if (st != FMK_OK)
        return st;
    if (width < 1 || width > FMK_PROJECTION_WIDTH_MAX)
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "%s: the image width is %d pixels; it must be 1..%d", path, width,
                              FMK_PROJECTION_WIDTH_MAX);
    fmk_projection_frame frame;
    st = fmk_projection_frame_make(n, pos, mass, axis, extent, centre, &frame, msg, cap);
    if (st != FMK_OK)
        return st;
    size_t pixels = (size_t)width * (size_t)width;
    double *grid = malloc(pixels * sizeof(double));
    unsigned char *rgb = malloc(pixels * 3);
    png_sink sink = {0};
    if (!grid || !rgb) {
        st = fmk_files_fail(msg, cap, FMK_ERR_NOMEM,
                            "out of host memory for a %d x %d projection ('%s')", width, width,
                            path);
    } else {
        fmk_projection_deposit(n, pos, mass, &frame, width, grid);
        fmk_projection_image(grid, width, rgb);
        const char axes[3] = {'x', 'y', 'z'};
        char comment[320];
        snprintf(comment, sizeof comment,
                 "mass of %lld particles projected along %c onto the square of side %.9g "
                 "centred at %c = %.9g, %c = %.9g (horizontal %c, vertical %c upward); "
                 "cloud in cell, log10 over 4 decades below the brightest pixel",
                 (long long)n, axes[frame.axis], frame.extent, axes[frame.u], frame.centre[0],
                 axes[frame.v], frame.centre[1], axes[frame.u], axes[frame.v]);
        if (encode(&sink, rgb, width, comment) != 0)
            st = sink.nomem ? fmk_files_fail(msg, cap, FMK_ERR_NOMEM,
                                             "out of host memory encoding PNG '%s'", path)
                            : fmk_files_fail(msg, cap, FMK_ERR_INTERNAL,
                                             "encoding PNG '%s' failed: libpng: %s", path,
                                             sink.reason[0] ? sink.reason : "error");
        else
            st = fmk_files_write(path, "PNG", sink.data, sink.size, msg, cap);
    }
    free(sink.data);
    free(grid);
    free(rgb);
    return st;
}

#else /* !FMK_HAVE_PNG */

fmk_status fmk_sim_io_write_png(const char *path, int64_t n, const double *pos, const double *mass,
                                int axis, int width, double extent, const double centre[2],
                                char *msg, size_t cap)
{
    (void)path, (void)n, (void)pos, (void)mass, (void)axis, (void)width, (void)extent, (void)centre;
    return fmk_files_fail(msg, cap, FMK_ERR_UNAVAILABLE, "%s", FMK_SIM_IO_NO_PNG);
}

#endif /* FMK_HAVE_PNG */
