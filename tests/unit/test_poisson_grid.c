/* test_poisson_grid.c -- block-structured grids (include/fmmkit_poisson.h, fmk_grid_*): every bad
 * argument of create and add_blocks gets its status and a message (misaligned corners, negative
 * indices, levels out of range, overlaps within a call, with earlier blocks, nested or
 * identical), a failed add leaves the grid as it was, blocks of any levels may sit side by side;
 * get, block and points return the documented values (cell centres anchor + h_l (b B + i +
 * 1/2), block-major, x fastest); and fmk_poisson_rings_grid: its checks, its counts at 64 and
 * 128, and that refine = 0 puts every point of nonzero omega in a fine block. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fmmkit_poisson.h"
#include "testutil.h"

/* call fails with status and leaves a message on the calling thread. */
#define CHECK_FAILS(call, status)                                                         \
    do {                                                                                  \
        CHECK_STATUS(call, status);                                                       \
        CHECK_MSG(strlen(fmk_poisson_last_error(NULL)) > 10, "no message for %s", #call); \
    } while (0)

static void test_create(void)
{
    check_context("fmk_grid_create");
    fmk_grid *g = (fmk_grid *)&g;
    CHECK_FAILS(fmk_grid_create(NULL, 16, 1, NULL), FMK_ERR_NULL);
    const int32_t bad_b[6] = {5, 15, 2, 3, 66, 0};
    for (int i = 0; i < 6; i++) {
        check_context("fmk_grid_create: b = %d", (int)bad_b[i]);
        g = (fmk_grid *)&g;
        CHECK_FAILS(fmk_grid_create(&g, bad_b[i], 1, NULL), FMK_ERR_ARG);
        CHECK(g == NULL);
        CHECK(strstr(fmk_poisson_last_error(NULL), "block_size") != NULL);
    }
    const double bad_h[4] = {0, -1, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        check_context("fmk_grid_create: h0 = %g", bad_h[i]);
        CHECK_FAILS(fmk_grid_create(&g, 16, bad_h[i], NULL), FMK_ERR_ARG);
        CHECK(g == NULL && strstr(fmk_poisson_last_error(NULL), "h0") != NULL);
    }
    check_context("fmk_grid_create: anchor NaN");
    CHECK_FAILS(fmk_grid_create(&g, 16, 1, (const double[3]){0, NAN, 0}), FMK_ERR_NONFINITE);
    CHECK(g == NULL && strstr(fmk_poisson_last_error(NULL), "anchor[1]") != NULL);
    CHECK_FAILS(fmk_grid_create(&g, 16, 1, (const double[3]){INFINITY, 0, 0}), FMK_ERR_NONFINITE);

    check_context("fmk_grid_create: good");
    const int32_t good_b[3] = {4, 16, 64};
    for (int i = 0; i < 3; i++) {
        CHECK_STATUS(fmk_grid_create(&g, good_b[i], 0.5, NULL), FMK_OK);
        int64_t nb = -1, np = -1;
        int32_t b = 0, finest = -1;
        double h0 = 0, anchor[3] = {1, 1, 1};
        CHECK_STATUS(fmk_grid_get(g, &nb, &np, &b, &h0, anchor, &finest), FMK_OK);
        CHECK(nb == 0 && np == 0 && b == good_b[i] && h0 == 0.5 && finest == 0);
        CHECK(anchor[0] == 0 && anchor[1] == 0 && anchor[2] == 0);
        fmk_grid_destroy(g);
    }
    fmk_grid_destroy(NULL);
}

/* What a grid holds, to compare before and after a refused call. */
typedef struct {
    int64_t n_blocks, n_points;
    int32_t finest;
    double points[3 * 64 * 64];
} snapshot;

static void snap(const fmk_grid *g, snapshot *s)
{
    fmk_grid_get(g, &s->n_blocks, &s->n_points, NULL, NULL, NULL, &s->finest);
    memset(s->points, 0, sizeof s->points);
    if (s->n_points <= 64 * 64)
        fmk_grid_points(g, s->points, NULL);
}

static int same(const snapshot *a, const snapshot *b)
{
    return a->n_blocks == b->n_blocks && a->n_points == b->n_points && a->finest == b->finest &&
           !memcmp(a->points, b->points, sizeof a->points);
}

static snapshot before, after;

/* add (levels, corners) of n blocks must fail with status, naming what (if not NULL), and leave
 * the grid as it was. */
static void add_fails(fmk_grid *g, int64_t n, const int32_t *levels, const double *corners,
                      const int64_t *index, fmk_status status, const char *what)
{
    snap(g, &before);
    if (corners)
        CHECK_FAILS(fmk_grid_add_blocks(g, n, levels, corners), status);
    else
        CHECK_FAILS(fmk_grid_add_blocks_index(g, n, levels, index), status);
    if (what)
        CHECK_MSG(strstr(fmk_poisson_last_error(NULL), what) != NULL, "message \"%s\" lacks \"%s\"",
                  fmk_poisson_last_error(NULL), what);
    snap(g, &after);
    CHECK_MSG(same(&before, &after), "a refused add changed the grid");
}

static void test_add(void)
{
    const double anchor[3] = {0.5, -1, 2}, h0 = 0.25, side = 4 * h0; /* b = 4 */
    fmk_grid *g = NULL;
    CHECK_STATUS(fmk_grid_create(&g, 4, h0, anchor), FMK_OK);
    const int32_t l0[1] = {0}, l1[1] = {1};

    check_context("add_blocks: NULL, n");
    const double c0[3] = {anchor[0], anchor[1], anchor[2]};
    const int64_t i0[3] = {0, 0, 0};
    CHECK_FAILS(fmk_grid_add_blocks(NULL, 1, l0, c0), FMK_ERR_NULL);
    CHECK_FAILS(fmk_grid_add_blocks(g, 1, NULL, c0), FMK_ERR_NULL);
    CHECK_FAILS(fmk_grid_add_blocks(g, 1, l0, NULL), FMK_ERR_NULL);
    CHECK_FAILS(fmk_grid_add_blocks_index(g, 1, l0, NULL), FMK_ERR_NULL);
    add_fails(g, 0, l0, c0, NULL, FMK_ERR_ARG, "n = 0");
    add_fails(g, -3, l0, NULL, i0, FMK_ERR_ARG, "n = -3");

    check_context("add_blocks: misaligned");
    const double half[3] = {anchor[0] + 0.5 * side, anchor[1], anchor[2]};
    add_fails(g, 1, l0, half, NULL, FMK_ERR_ARG, "not aligned");
    const double milli[3] = {anchor[0], anchor[1] + 1e-3 * side, anchor[2]};
    add_fails(g, 1, l0, milli, NULL, FMK_ERR_ARG, "not aligned");
    const double fine_half[3] = {anchor[0] + 0.5 * side / 2, anchor[1], anchor[2]};
    add_fails(g, 1, l1, fine_half, NULL, FMK_ERR_ARG, "corner[0]"); /* half a level-1 block */
    const double nan_corner[3] = {anchor[0], anchor[1], NAN};
    add_fails(g, 1, l0, nan_corner, NULL, FMK_ERR_NONFINITE, "corner[2]");

    check_context("add_blocks: negative index");
    const double below[3] = {anchor[0], anchor[1] - side, anchor[2]};
    add_fails(g, 1, l0, below, NULL, FMK_ERR_ARG, NULL);
    add_fails(g, 1, l0, NULL, (const int64_t[3]){0, 0, -1}, FMK_ERR_ARG, "axis 2");
    add_fails(g, 1, l0, NULL, (const int64_t[3]){FMK_GRID_INDEX_MAX, 0, 0}, FMK_ERR_ARG, NULL);

    check_context("add_blocks: level out of range");
    const int32_t lneg[1] = {-1}, lbig[1] = {FMK_GRID_MAX_LEVEL + 1};
    add_fails(g, 1, lneg, c0, NULL, FMK_ERR_ARG, "levels[0]");
    add_fails(g, 1, lbig, NULL, i0, FMK_ERR_ARG, "levels[0]");

    check_context("add_blocks: overlap within one call");
    const int32_t two0[2] = {0, 0};
    const double twice[6] = {c0[0], c0[1], c0[2], c0[0], c0[1], c0[2]};
    add_fails(g, 2, two0, twice, NULL, FMK_ERR_ARG, "overlap"); /* identical blocks */
    const int32_t l01[2] = {0, 1};
    add_fails(g, 2, l01, NULL, (const int64_t[6]){1, 1, 1, 3, 2, 3}, FMK_ERR_ARG, "overlap");

    check_context("add_blocks: blocks side by side at levels 0, 1, 2");
    /* level 0 B = (1, 1, 1) covers level-1 indices 2..3 and level-2 indices 4..7 per axis;
     * these touch it on faces, edges and corners */
    const int32_t lv[5] = {0, 1, 1, 2, 2};
    const int64_t ix[15] = {1, 1, 1, /**/ 4, 2, 2, /**/ 1, 1, 1, /**/ 8, 6, 4, /**/ 4, 8, 7};
    CHECK_STATUS(fmk_grid_add_blocks_index(g, 5, lv, ix), FMK_OK);
    const double next[3] = {anchor[0] + side, anchor[1] + side, anchor[2] + 2 * side};
    CHECK_STATUS(fmk_grid_add_blocks(g, 1, l0, next), FMK_OK); /* on top of (1, 1, 1) */

    check_context("add_blocks: overlap with earlier blocks");
    add_fails(g, 1, l0, NULL, (const int64_t[3]){1, 1, 1}, FMK_ERR_ARG,
              "block 6 (level 0, index 1 1 1, the call's block 0) overlaps block 0"); /* same */
    add_fails(g, 1, l1, NULL, (const int64_t[3]){3, 2, 3}, FMK_ERR_ARG, "overlap");   /* inside */
    const int32_t l2[1] = {2};
    add_fails(g, 1, l2, NULL, (const int64_t[3]){9, 5, 4}, FMK_ERR_ARG, "overlap"); /* in (4,2,2) */
    add_fails(g, 1, l0, NULL, (const int64_t[3]){0, 0, 0}, FMK_ERR_ARG,
              "overlap"); /* holds (1,1,1) l1 */
    /* all or nothing: two good blocks, then a bad one */
    const int32_t l000[3] = {0, 0, 0};
    add_fails(g, 3, l000, NULL, (const int64_t[9]){5, 5, 5, 6, 5, 5, 1, 1, 1}, FMK_ERR_ARG,
              "overlap");
    add_fails(g, 3, l000, NULL, (const int64_t[9]){5, 5, 5, 6, 5, 5, 1, -1, 1}, FMK_ERR_ARG,
              "block 2");
    const int32_t l00x[3] = {0, 0, 99};
    add_fails(g, 3, l00x, NULL, (const int64_t[9]){5, 5, 5, 6, 5, 5, 7, 7, 7}, FMK_ERR_ARG,
              "levels[2]");
    const double c_bad[9] = {anchor[0] + 5 * side,   anchor[1], anchor[2],
                             anchor[0] + 6 * side,   anchor[1], anchor[2],
                             anchor[0] + 7.5 * side, anchor[1], anchor[2]};
    add_fails(g, 3, l000, c_bad, NULL, FMK_ERR_ARG, "block 2");

    check_context("get, block");
    int64_t nb = 0, np = 0, B[3];
    int32_t b = 0, finest = -1, level = -1;
    double h = 0, a[3];
    CHECK_STATUS(fmk_grid_get(g, &nb, &np, &b, &h, a, &finest), FMK_OK);
    CHECK(nb == 6 && np == 6 * 64 && b == 4 && h == h0 && finest == 2);
    CHECK(a[0] == anchor[0] && a[1] == anchor[1] && a[2] == anchor[2]);
    CHECK_STATUS(fmk_grid_get(g, NULL, NULL, NULL, NULL, NULL, NULL), FMK_OK);
    CHECK_FAILS(fmk_grid_get(NULL, &nb, NULL, NULL, NULL, NULL, NULL), FMK_ERR_NULL);
    CHECK_STATUS(fmk_grid_block(g, 5, &level, B), FMK_OK);
    CHECK(level == 0 && B[0] == 1 && B[1] == 1 && B[2] == 2); /* the one added by its corner */
    CHECK_STATUS(fmk_grid_block(g, 4, &level, B), FMK_OK);
    CHECK(level == 2 && B[0] == 4 && B[1] == 8 && B[2] == 7);
    CHECK_FAILS(fmk_grid_block(g, 6, &level, B), FMK_ERR_ARG);
    CHECK_FAILS(fmk_grid_block(g, -1, &level, B), FMK_ERR_ARG);
    CHECK_FAILS(fmk_grid_block(NULL, 0, &level, B), FMK_ERR_NULL);
    CHECK_FAILS(fmk_grid_points(NULL, NULL, NULL), FMK_ERR_NULL);

    check_context("points");
    double *x = test_alloc(3 * np), *sp = test_alloc(np);
    CHECK_STATUS(fmk_grid_points(g, x, sp), FMK_OK);
    double worst = 0;
    int spacing_ok = 1;
    for (int64_t k = 0; k < nb; k++) {
        fmk_grid_block(g, k, &level, B);
        const double hl = ldexp(h0, -level);
        for (int m = 0; m < 4; m++)
            for (int j = 0; j < 4; j++)
                for (int i = 0; i < 4; i++) {
                    const int64_t p = k * 64 + i + 4 * (j + 4 * m);
                    const int ijm[3] = {i, j, m};
                    for (int c = 0; c < 3; c++) {
                        const double want = anchor[c] + hl * (4.0 * (double)B[c] + ijm[c] + 0.5);
                        const double d = fabs(x[3 * p + c] - want);
                        worst = d > worst ? d : worst;
                    }
                    spacing_ok &= sp[p] == hl;
                }
    }
    CHECK_LE(worst, 1e-15, "largest |point - anchor - h_l (b B + i + 1/2)|");
    CHECK(spacing_ok);
    CHECK_STATUS(fmk_grid_points(g, NULL, NULL), FMK_OK);
    free(x), free(sp);
    fmk_grid_destroy(g);
}

static void test_rings_grid(void)
{
    check_context("rings_grid: arguments");
    fmk_grid *g = (fmk_grid *)&g;
    CHECK_FAILS(fmk_poisson_rings_grid(NULL, 64, 16, 0), FMK_ERR_NULL);
    const struct {
        int32_t n, b;
        double refine;
    } bad[] = {{48, 16, 0},      {16, 16, 0}, {64, 15, 0},    {64, 2, 0},
               {1 << 15, 16, 0}, {64, 66, 0}, {64, 16, -0.1}, {64, 16, 1},
               {64, 16, NAN},    {0, 16, 0},  {-64, 16, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        check_context("rings_grid: n %d, b %d, refine %g", (int)bad[i].n, (int)bad[i].b,
                      bad[i].refine);
        g = (fmk_grid *)&g;
        CHECK_FAILS(fmk_poisson_rings_grid(&g, bad[i].n, bad[i].b, bad[i].refine), FMK_ERR_ARG);
        CHECK(g == NULL);
    }
    /* (resolution, refine): blocks, points. Refine 1e-4 (the command line's) at 64 and 128:
     * the regions that hold the rings; refine 0 also those their stencils reach. */
    const struct {
        int32_t n;
        double refine;
        int64_t blocks, points;
    } counts[] = {{64, 1e-4, 22, 90112},
                  {128, 1e-4, 176, 720896},
                  {64, 0, 50, 204800},
                  {128, 0, 288, 1179648},
                  {128, 0.5, 64, 262144}};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        check_context("rings_grid: %d, refine %g", (int)counts[i].n, counts[i].refine);
        CHECK_STATUS(fmk_poisson_rings_grid(&g, counts[i].n, 16, counts[i].refine), FMK_OK);
        int64_t nb = 0, np = 0;
        int32_t b = 0, finest = -1;
        double h0 = 0, a[3];
        fmk_grid_get(g, &nb, &np, &b, &h0, a, &finest);
        CHECK_MSG(nb == counts[i].blocks && np == counts[i].points, "%lld blocks, %lld points",
                  (long long)nb, (long long)np);
        CHECK(b == 16 && h0 == 2.0 / counts[i].n && a[0] == 0 && a[1] == 0 && a[2] == 0);
        CHECK(finest == (counts[i].refine < 0.5));
        double volume = 0;
        for (int64_t k = 0; k < nb; k++) {
            int32_t level;
            fmk_grid_block(g, k, &level, NULL);
            volume += pow(16 * ldexp(h0, -level), 3);
        }
        CHECK_LE(fabs(volume - 1), 1e-12, "|volume of the blocks - 1|");
        fmk_grid_destroy(g);
    }

    /* refine = 0: every fine point (the 64^3 lattice) of nonzero omega lies in a fine block;
     * equivalently omega is 0 at every fine point of each coarse block's cube */
    check_context("rings_grid: refine 0 holds the support");
    const int n = 64, b = 16;
    CHECK_STATUS(fmk_poisson_rings_grid(&g, n, b, 0), FMK_OK);
    int64_t nb = 0, outside = 0, coarse = 0;
    fmk_grid_get(g, &nb, NULL, NULL, NULL, NULL, NULL);
    const int64_t nf = 8 * b * b * b;
    double *x = test_alloc(3 * nf), *w = test_alloc(3 * nf);
    for (int64_t k = 0; k < nb; k++) {
        int32_t level;
        int64_t B[3];
        fmk_grid_block(g, k, &level, B);
        if (level == 1)
            continue;
        coarse++;
        for (int64_t q = 0; q < nf; q++) {
            const int64_t f[3] = {q % (2 * b), q / (2 * b) % (2 * b), q / (4 * b * b)};
            for (int c = 0; c < 3; c++)
                x[3 * q + c] = ((double)(2 * b * B[c] + f[c]) + 0.5) / n;
        }
        fmk_poisson_rings(nf, x, w, NULL, NULL);
        for (int64_t q = 0; q < 3 * nf; q++)
            outside += w[q] != 0;
    }
    CHECK(coarse > 0 && outside == 0);
    free(x), free(w);
    fmk_grid_destroy(g);
}

int main(void)
{
    test_create();
    test_add();
    test_rings_grid();
    return check_summary();
}
