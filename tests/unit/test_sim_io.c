/* test_sim_io.c -- the simulation driver's HDF5 files (src/sim/io/, sim/sim_io.h): snapshots
 * and restart files round trip bit for bit; files as GADGET-4 writes them are read; bad files
 * (made here with the HDF5 C API) and bad particles are refused with a message; a refused or
 * failed write (a full disk: a file-size limit) leaves no temporary file and the old target as
 * it was; HDF5's own error printing stays off and the caller's setting is restored.
 * Built without HDF5: every call says FMK_ERR_UNAVAILABLE and names the Debian package. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sim_io_check.h"

#ifdef FMK_HAVE_HDF5
#include <hdf5.h>
#endif

static char dir[256];

/* dir/name in buf. */
static const char *in_dir(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
    return buf;
}

#ifdef FMK_HAVE_HDF5

/* Doubles of every magnitude, both signs, -0 and a subnormal: what bit-exact storage must
 * survive. */
static uint64_t mix(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double awkward(uint64_t *s, int nonneg)
{
    uint64_t r = mix(s);
    double m = (double)(r >> 11) * 0x1p-53;
    double v = ldexp(m, (int)(r % 81) - 40);
    if (r % 97 == 0)
        v = 4.9e-320; /* subnormal */
    if (r % 89 == 0)
        v = -0.0;
    return nonneg ? fabs(v) : (r & 1024) ? -v : v;
}

typedef struct owned {
    fmk_sim_particles p;
    double *acc, *pot;
    unsigned char *state;
    size_t state_bytes;
} owned;

static owned make(int64_t n, int with_soft, uint64_t seed)
{
    owned o;
    memset(&o, 0, sizeof o);
    o.p.n = n;
    o.p.pos = malloc(3 * n * sizeof(double));
    o.p.vel = malloc(3 * n * sizeof(double));
    o.p.mass = malloc(n * sizeof(double));
    o.p.id = malloc(n * sizeof(uint64_t));
    o.p.soft = with_soft ? malloc(n * sizeof(double)) : NULL;
    o.acc = malloc(3 * n * sizeof(double));
    o.pot = malloc(n * sizeof(double));
    o.state_bytes = 1000;
    o.state = malloc(o.state_bytes);
    uint64_t s = seed | 1;
    for (int64_t i = 0; i < 3 * n; i++) {
        o.p.pos[i] = awkward(&s, 0);
        o.p.vel[i] = awkward(&s, 0);
        o.acc[i] = awkward(&s, 0);
    }
    for (int64_t i = 0; i < n; i++) {
        o.p.mass[i] = awkward(&s, 1);
        o.p.id[i] = mix(&s); /* all 64 bits */
        o.pot[i] = awkward(&s, 0);
        if (with_soft)
            o.p.soft[i] = awkward(&s, 1);
    }
    for (size_t k = 0; k < o.state_bytes; k++)
        o.state[k] = (unsigned char)mix(&s);
    o.p.time = 0.1 + 0x1p-40;
    o.p.redshift = 2.5;
    o.p.box_size = 100.0 / 3;
    o.p.unit_length_cm = 3.085678e21;
    o.p.unit_mass_g = 1.989e43;
    o.p.unit_velocity_cm_per_s = 1e5;
    return o;
}

static void drop(owned *o)
{
    fmk_sim_particles_free(&o->p);
    free(o->acc);
    free(o->pot);
    free(o->state);
}

static int same_bits(const void *a, const void *b, size_t bytes)
{
    return (a == NULL && b == NULL) || (a && b && memcmp(a, b, bytes) == 0);
}

static void check_same_particles(const fmk_sim_particles *a, const fmk_sim_particles *b)
{
    int64_t n = a->n;
    CHECK(b->n == n);
    if (b->n != n)
        return;
    CHECK(same_bits(a->pos, b->pos, 3 * n * sizeof(double)));
    CHECK(same_bits(a->vel, b->vel, 3 * n * sizeof(double)));
    CHECK(same_bits(a->mass, b->mass, n * sizeof(double)));
    CHECK(same_bits(a->id, b->id, n * sizeof(uint64_t)));
    CHECK(same_bits(a->soft, b->soft, n * sizeof(double)));
    CHECK(same_bits(&a->time, &b->time, sizeof(double)));
    CHECK(a->redshift == b->redshift && a->box_size == b->box_size);
    CHECK(a->unit_length_cm == b->unit_length_cm && a->unit_mass_g == b->unit_mass_g &&
          a->unit_velocity_cm_per_s == b->unit_velocity_cm_per_s);
}

static void test_round_trip(void)
{
    char path[512], msg[512] = "";
    for (int soft = 0; soft < 2; soft++) {
        check_context("snapshot round trip, softenings %s", soft ? "stored" : "none");
        owned o = make(1000 + soft, soft, 7 + soft);
        if (!soft) /* units 0: not written, read back as 0 */
            o.p.unit_length_cm = o.p.unit_mass_g = o.p.unit_velocity_cm_per_s = 0;
        in_dir(path, sizeof path, "snap.hdf5");
        CHECK_IO(fmk_sim_io_write_snapshot(path, &o.p, msg, sizeof msg), FMK_OK, msg);
        /* Writing again replaces the file. */
        CHECK_IO(fmk_sim_io_write_snapshot(path, &o.p, msg, sizeof msg), FMK_OK, msg);
        fmk_sim_particles back;
        CHECK_IO(fmk_sim_io_read_snapshot(path, &back, msg, sizeof msg), FMK_OK, msg);
        check_same_particles(&o.p, &back);
        CHECK(fmk_sim_io_is_restart(path) == 0);
        fmk_sim_particles_free(&back);
        CHECK(back.pos == NULL && back.n == 0);
        CHECK(count_names(dir, ".tmp.") == 0);
        drop(&o);
    }
    check_context("");
}

static void test_restart(void)
{
    char path[512], msg[512] = "";
    in_dir(path, sizeof path, "restart.hdf5");
    for (int empty = 0; empty < 2; empty++) {
        check_context("restart round trip, %s state", empty ? "empty" : "1000-byte");
        owned o = make(777, 1, 99);
        size_t bytes = empty ? 0 : o.state_bytes;
        CHECK_IO(fmk_sim_io_write_restart(path, &o.p, o.acc, o.pot, empty ? NULL : o.state, bytes,
                                          msg, sizeof msg),
                 FMK_OK, msg);
        CHECK(fmk_sim_io_is_restart(path) == 1);
        fmk_sim_particles back;
        double *acc = NULL, *pot = NULL;
        void *state = NULL;
        size_t state_bytes = 12345;
        CHECK_IO(
            fmk_sim_io_read_restart(path, &back, &acc, &pot, &state, &state_bytes, msg, sizeof msg),
            FMK_OK, msg);
        check_same_particles(&o.p, &back);
        CHECK(same_bits(acc, o.acc, 3 * 777 * sizeof(double)));
        CHECK(same_bits(pot, o.pot, 777 * sizeof(double)));
        CHECK(state_bytes == bytes && state != NULL);
        CHECK(state_bytes == 0 || same_bits(state, o.state, bytes));
        /* A restart file is also a snapshot. */
        fmk_sim_particles snap;
        CHECK_IO(fmk_sim_io_read_snapshot(path, &snap, msg, sizeof msg), FMK_OK, msg);
        check_same_particles(&o.p, &snap);
        fmk_sim_particles_free(&snap);
        fmk_sim_particles_free(&back);
        free(acc);
        free(pot);
        free(state);
        /* Refusals: NaN accelerations, NULL potential, a snapshot read as a restart file. */
        o.acc[5] = NAN;
        char other[512];
        in_dir(other, sizeof other, "restart_bad.hdf5");
        CHECK_IO(
            fmk_sim_io_write_restart(other, &o.p, o.acc, o.pot, o.state, bytes, msg, sizeof msg),
            FMK_ERR_ARG, msg);
        CHECK(message_has(msg, "acc[5]") && message_has(msg, "NaN") && !file_exists(other));
        CHECK_IO(
            fmk_sim_io_write_restart(other, &o.p, o.pot, NULL, o.state, bytes, msg, sizeof msg),
            FMK_ERR_ARG, msg);
        drop(&o);
    }
    char snap_path[512];
    in_dir(snap_path, sizeof snap_path, "snap.hdf5");
    fmk_sim_particles back;
    double *acc = (double *)1, *pot = (double *)1;
    void *state = (void *)1;
    size_t bytes = 1;
    CHECK_IO(fmk_sim_io_read_restart(snap_path, &back, &acc, &pot, &state, &bytes, msg, sizeof msg),
             FMK_ERR_ARG, msg);
    CHECK(message_has(msg, "/Restart"));
    CHECK(acc == NULL && pot == NULL && state == NULL && bytes == 0 && back.pos == NULL);
    CHECK(fmk_sim_io_is_restart("no/such/file.hdf5") == 0 && fmk_sim_io_is_restart(NULL) == 0);
    check_context("");
}

/* The HDF5 C API, for files made by hand. -------------------------------------------------- */

static void h5_attr(hid_t obj, const char *name, hid_t type, hsize_t count, const void *v)
{
    if (H5Aexists(obj, name) > 0)
        H5Adelete(obj, name);
    hid_t space = count ? H5Screate_simple(1, &count, NULL) : H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, type, v);
    H5Aclose(a);
    H5Sclose(space);
}

static void h5_dataset(hid_t loc, const char *name, hid_t type, int rank, hsize_t rows,
                       hsize_t cols, const void *v)
{
    if (H5Lexists(loc, name, H5P_DEFAULT) > 0)
        H5Ldelete(loc, name, H5P_DEFAULT);
    hsize_t dims[2] = {rows, cols};
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(d);
    H5Sclose(space);
}

/* A file as GADGET-4 (or GADGET-2 with its HDF5 header) writes it: float32 coordinates and
 * velocities, no IDs, no Masses (MassTable[1]), 32-bit counts with high words, units in
 * /Parameters, an empty /PartType0. */
static void test_gadget_file(void)
{
    check_context("a GADGET-style file: float32, MassTable masses, no IDs");
    char path[512], msg[512] = "";
    in_dir(path, sizeof path, "gadget.hdf5");
    enum { N = 50 };
    float pos[3 * N], vel[3 * N];
    for (int i = 0; i < 3 * N; i++) {
        pos[i] = 0.1f * (float)i - 3.3f;
        vel[i] = 1.0f / (float)(i + 3);
    }
    uint32_t npart[6] = {0, N, 0, 0, 0, 0}, high[6] = {0};
    double table[6] = {0, 0.25, 0, 0, 0, 0}, time = 1.0, z = 0, box = 0;
    double ul = 3.085678e21, um = 1.989e43, uv = 1e5;
    int32_t nfiles = 1;
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t h = H5Gcreate2(f, "Header", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    h5_attr(h, "NumPart_ThisFile", H5T_NATIVE_UINT32, 6, npart);
    h5_attr(h, "NumPart_Total", H5T_NATIVE_UINT32, 6, npart);
    h5_attr(h, "NumPart_Total_HighWord", H5T_NATIVE_UINT32, 6, high);
    h5_attr(h, "MassTable", H5T_NATIVE_DOUBLE, 6, table);
    h5_attr(h, "Time", H5T_NATIVE_DOUBLE, 0, &time);
    h5_attr(h, "Redshift", H5T_NATIVE_DOUBLE, 0, &z);
    h5_attr(h, "BoxSize", H5T_NATIVE_DOUBLE, 0, &box);
    h5_attr(h, "NumFilesPerSnapshot", H5T_NATIVE_INT32, 0, &nfiles);
    H5Gclose(h);
    hid_t par = H5Gcreate2(f, "Parameters", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    h5_attr(par, "UnitLength_in_cm", H5T_NATIVE_DOUBLE, 0, &ul);
    h5_attr(par, "UnitMass_in_g", H5T_NATIVE_DOUBLE, 0, &um);
    h5_attr(par, "UnitVelocity_in_cm_per_s", H5T_NATIVE_DOUBLE, 0, &uv);
    H5Gclose(par);
    H5Gclose(H5Gcreate2(f, "PartType0", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    hid_t g = H5Gcreate2(f, "PartType1", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    h5_dataset(g, "Coordinates", H5T_NATIVE_FLOAT, 2, N, 3, pos);
    h5_dataset(g, "Velocities", H5T_NATIVE_FLOAT, 2, N, 3, vel);
    H5Gclose(g);
    H5Fclose(f);

    fmk_sim_particles p;
    CHECK_IO(fmk_sim_io_read_snapshot(path, &p, msg, sizeof msg), FMK_OK, msg);
    int ok = p.n == N && p.soft == NULL;
    for (int i = 0; ok && i < 3 * N; i++)
        ok = p.pos[i] == (double)pos[i] && p.vel[i] == (double)vel[i];
    for (int i = 0; ok && i < N; i++)
        ok = p.mass[i] == 0.25 && p.id[i] == (uint64_t)i + 1;
    CHECK_MSG(ok, "float32 data, MassTable masses and IDs 1..n read back");
    CHECK(p.time == 1.0 && p.unit_length_cm == ul && p.unit_mass_g == um &&
          p.unit_velocity_cm_per_s == uv);
    fmk_sim_particles_free(&p);
    check_context("");
}

/* A bad file: a good snapshot, then one change made by change(file). */
typedef void (*mutation)(hid_t file);
static void no_coordinates(hid_t f)
{
    H5Ldelete(f, "PartType1/Coordinates", H5P_DEFAULT);
}
static void no_velocities(hid_t f)
{
    H5Ldelete(f, "PartType1/Velocities", H5P_DEFAULT);
}
static void no_group(hid_t f)
{
    H5Ldelete(f, "PartType1", H5P_DEFAULT);
}
static void no_header(hid_t f)
{
    H5Ldelete(f, "Header", H5P_DEFAULT);
}
static const double bad_rows[30];
static void coordinates_n_by_2(hid_t f)
{
    h5_dataset(f, "PartType1/Coordinates", H5T_NATIVE_DOUBLE, 2, 10, 2, bad_rows);
}
static void coordinates_9_rows(hid_t f)
{
    h5_dataset(f, "PartType1/Coordinates", H5T_NATIVE_DOUBLE, 2, 9, 3, bad_rows);
}
static void coordinates_integers(hid_t f)
{
    int32_t v[30] = {0};
    h5_dataset(f, "PartType1/Coordinates", H5T_NATIVE_INT32, 2, 10, 3, v);
}
static void coordinates_nan(hid_t f)
{
    double v[30] = {0};
    v[13] = NAN;
    h5_dataset(f, "PartType1/Coordinates", H5T_NATIVE_DOUBLE, 2, 10, 3, v);
}
static void velocities_inf(hid_t f)
{
    float v[30] = {0};
    v[29] = INFINITY;
    h5_dataset(f, "PartType1/Velocities", H5T_NATIVE_FLOAT, 2, 10, 3, v);
}
static void masses_negative(hid_t f)
{
    double m[10] = {1, 1, 1, -1, 1, 1, 1, 1, 1, 1};
    h5_dataset(f, "PartType1/Masses", H5T_NATIVE_DOUBLE, 1, 10, 0, m);
}
static void masses_nan(hid_t f)
{
    double m[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, NAN};
    h5_dataset(f, "PartType1/Masses", H5T_NATIVE_DOUBLE, 1, 10, 0, m);
}
static void masses_missing(hid_t f)
{
    H5Ldelete(f, "PartType1/Masses", H5P_DEFAULT);
}
static void ids_n_by_2(hid_t f)
{
    uint64_t v[20] = {0};
    h5_dataset(f, "PartType1/ParticleIDs", H5T_NATIVE_UINT64, 2, 10, 2, v);
}
static void header_attr(hid_t f, const char *name, hid_t type, hsize_t count, const void *v)
{
    hid_t h = H5Gopen2(f, "Header", H5P_DEFAULT);
    h5_attr(h, name, type, count, v);
    H5Gclose(h);
}
static void npart_11(hid_t f)
{
    uint64_t v[6] = {0, 11, 0, 0, 0, 0};
    header_attr(f, "NumPart_ThisFile", H5T_NATIVE_UINT64, 6, v);
    header_attr(f, "NumPart_Total", H5T_NATIVE_UINT64, 6, v);
}
static void total_20(hid_t f)
{
    uint64_t v[6] = {0, 20, 0, 0, 0, 0};
    header_attr(f, "NumPart_Total", H5T_NATIVE_UINT64, 6, v);
}
static void gas_particles(hid_t f)
{
    uint64_t v[6] = {5, 10, 0, 0, 0, 0};
    header_attr(f, "NumPart_ThisFile", H5T_NATIVE_UINT64, 6, v);
    header_attr(f, "NumPart_Total", H5T_NATIVE_UINT64, 6, v);
}
static void npart_one_entry(hid_t f)
{
    uint64_t v = 10;
    header_attr(f, "NumPart_ThisFile", H5T_NATIVE_UINT64, 1, &v);
}
static void four_files(hid_t f)
{
    int32_t v = 4;
    header_attr(f, "NumFilesPerSnapshot", H5T_NATIVE_INT32, 0, &v);
}
static void time_nan(hid_t f)
{
    double v = NAN;
    header_attr(f, "Time", H5T_NATIVE_DOUBLE, 0, &v);
}
static void restart_no_state(hid_t f)
{
    H5Ldelete(f, "Restart/State", H5P_DEFAULT);
}
static void restart_short_potential(hid_t f)
{
    h5_dataset(f, "Restart/Potential", H5T_NATIVE_DOUBLE, 1, 9, 0, bad_rows);
}

static void test_bad_files(void)
{
    const struct {
        mutation change;
        int restart; /* read as a restart file */
        const char *what, *words[2];
    } cases[] = {
        {no_coordinates, 0, "no Coordinates", {"Coordinates", "missing"}},
        {no_velocities, 0, "no Velocities", {"Velocities", "missing"}},
        {no_group, 0, "no PartType1", {"/PartType1", "missing"}},
        {no_header, 0, "no Header", {"/Header", "not a snapshot"}},
        {coordinates_n_by_2, 0, "Coordinates n x 2", {"Coordinates", "wrong shape"}},
        {coordinates_9_rows, 0, "9 rows, n = 10", {"9 rows", "n = 10"}},
        {coordinates_integers, 0, "integer Coordinates", {"Coordinates", "integers"}},
        {coordinates_nan, 0, "NaN coordinate", {"Coordinates[13]", "NaN"}},
        {velocities_inf, 0, "Inf velocity", {"Velocities[29]", "infinite"}},
        {masses_negative, 0, "negative mass", {"Masses[3]", ">= 0"}},
        {masses_nan, 0, "NaN mass", {"Masses[9]", "NaN"}},
        {masses_missing, 0, "no Masses, MassTable 0", {"Masses", "no masses"}},
        {ids_n_by_2, 0, "IDs n x 2", {"ParticleIDs", "wrong shape"}},
        {npart_11, 0, "header n 11, datasets 10", {"10 rows", "n = 11"}},
        {total_20, 0, "NumPart_Total differs", {"NumPart_Total[1] = 20", "NumPart_ThisFile"}},
        {gas_particles, 0, "gas particles", {"type 0", "type 1 only"}},
        {npart_one_entry, 0, "NumPart_ThisFile of 1 entry", {"NumPart_ThisFile", "1 entries"}},
        {four_files, 0, "one of 4 files", {"4 files", "single-file"}},
        {time_nan, 0, "Time NaN", {"Time", "NaN"}},
        {restart_no_state, 1, "restart without State", {"/Restart/State", "missing"}},
        {restart_short_potential, 1, "short Potential", {"Potential", "9 rows"}},
    };
    char path[512], msg[512];
    in_dir(path, sizeof path, "bad.hdf5");
    owned o = make(10, 0, 5);
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
        check_context("bad file: %s", cases[k].what);
        CHECK_IO(fmk_sim_io_write_restart(path, &o.p, o.acc, o.pot, o.state, 16, msg, sizeof msg),
                 FMK_OK, msg);
        hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
        cases[k].change(f);
        H5Fclose(f);
        fmk_sim_particles p;
        msg[0] = '\0';
        fmk_status st;
        double *acc = NULL, *pot = NULL;
        void *state = NULL;
        size_t bytes = 0;
        if (cases[k].restart)
            st = fmk_sim_io_read_restart(path, &p, &acc, &pot, &state, &bytes, msg, sizeof msg);
        else
            st = fmk_sim_io_read_snapshot(path, &p, msg, sizeof msg);
        CHECK_IO(st, FMK_ERR_ARG, msg);
        CHECK_MSG(message_has(msg, cases[k].words[0]) && message_has(msg, cases[k].words[1]),
                  "message \"%s\" should name '%s' and '%s'", msg, cases[k].words[0],
                  cases[k].words[1]);
        CHECK_MSG(message_has(msg, path), "message \"%s\" should name the file", msg);
        CHECK(p.n == 0 && p.pos == NULL && p.mass == NULL && acc == NULL && state == NULL);
    }
    drop(&o);
    check_context("files that are not snapshots");
    char text[512];
    in_dir(text, sizeof text, "text.hdf5");
    file_put(text, "not an HDF5 file\n");
    fmk_sim_particles p;
    CHECK_IO(fmk_sim_io_read_snapshot(text, &p, msg, sizeof msg), FMK_ERR_ARG, msg);
    CHECK(message_has(msg, text) && fmk_sim_io_is_restart(text) == 0);
    CHECK_IO(fmk_sim_io_read_snapshot("no/such/snapshot.hdf5", &p, msg, sizeof msg), FMK_ERR_ARG,
             msg);
    CHECK(message_has(msg, "no/such/snapshot.hdf5") && message_has(msg, "No such file"));
    CHECK_IO(fmk_sim_io_read_snapshot("", &p, msg, sizeof msg), FMK_ERR_ARG, msg);
    CHECK_IO(fmk_sim_io_read_snapshot(text, NULL, msg, sizeof msg), FMK_ERR_ARG, msg);
    check_context("");
}

/* Refused writes: nothing is created, an old file stays as it was. */
static void test_refused_writes(void)
{
    char path[512], msg[512];
    in_dir(path, sizeof path, "refused.hdf5");
    file_put(path, "old");
    owned o = make(20, 1, 11);
    struct {
        double *where, bad;
        const char *what;
    } values[] = {
        {&o.p.pos[7], NAN, "pos[7]"},      {&o.p.vel[59], INFINITY, "vel[59]"},
        {&o.p.mass[3], -1, "mass[3]"},     {&o.p.soft[0], NAN, "soft[0]"},
        {&o.p.soft[19], -0.5, "soft[19]"}, {&o.p.time, NAN, "Time"},
        {&o.p.box_size, -1, "BoxSize"},    {&o.p.unit_mass_g, INFINITY, "UnitMass_in_g"},
    };
    for (int k = 0; k < (int)(sizeof values / sizeof values[0]); k++) {
        check_context("refused write: bad %s", values[k].what);
        double saved = *values[k].where;
        *values[k].where = values[k].bad;
        CHECK_IO(fmk_sim_io_write_snapshot(path, &o.p, msg, sizeof msg), FMK_ERR_ARG, msg);
        CHECK_MSG(message_has(msg, values[k].what), "\"%s\" should name %s", msg, values[k].what);
        *values[k].where = saved;
        CHECK(file_holds(path, "old") && count_names(dir, ".tmp.") == 0);
    }
    check_context("refused write: bad arguments");
    fmk_sim_particles p = o.p;
    p.n = 0;
    CHECK_IO(fmk_sim_io_write_snapshot(path, &p, msg, sizeof msg), FMK_ERR_ARG, msg);
    p = o.p;
    p.id = NULL;
    CHECK_IO(fmk_sim_io_write_snapshot(path, &p, msg, sizeof msg), FMK_ERR_ARG, msg);
    CHECK_IO(fmk_sim_io_write_snapshot(path, NULL, msg, sizeof msg), FMK_ERR_ARG, msg);
    CHECK_IO(fmk_sim_io_write_snapshot(NULL, &o.p, msg, sizeof msg), FMK_ERR_ARG, msg);
    CHECK_IO(fmk_sim_io_write_snapshot("", &o.p, msg, sizeof msg), FMK_ERR_ARG, msg);
    /* msg NULL or tiny: the status alone, a terminated prefix. */
    CHECK_IO(fmk_sim_io_write_snapshot("", &o.p, NULL, 0), FMK_ERR_ARG, "");
    char tiny[8] = "xxxxxxx";
    CHECK_IO(fmk_sim_io_write_snapshot("", &o.p, tiny, 4), FMK_ERR_ARG, tiny);
    CHECK(strlen(tiny) == 3);
    CHECK(file_holds(path, "old") && count_names(dir, ".tmp.") == 0);

    check_context("failed write: no such directory");
    char missing[512];
    in_dir(missing, sizeof missing, "nodir/snap.hdf5");
    CHECK_IO(fmk_sim_io_write_snapshot(missing, &o.p, msg, sizeof msg), FMK_ERR_INTERNAL, msg);
    CHECK(message_has(msg, missing) && message_has(msg, "No such file"));
    check_context("failed write: the target is a directory (the rename fails)");
    char target[512];
    in_dir(target, sizeof target, "a_directory");
    CHECK_IO(fmk_sim_io_mkdir(target, msg, sizeof msg), FMK_OK, msg);
    CHECK_IO(fmk_sim_io_write_snapshot(target, &o.p, msg, sizeof msg), FMK_ERR_INTERNAL, msg);
    CHECK(message_has(msg, target) && message_has(msg, "renam") && count_names(dir, ".tmp.") == 0);
    drop(&o);
    check_context("");
}

/* A full disk: the write fails in a child process whose files cannot grow beyond a limit
 * (sim_io_check.h), at several points of the file. Each time: a status, a message naming the
 * file and the reason, no temporary file, the old target as it was, nothing left open in
 * HDF5. */
typedef struct full_case {
    const char *path;
    const owned *o;
    int restart, expect_ok;
} full_case;

static int write_when_full(void *ctx)
{
    const full_case *c = ctx;
    char msg[512] = "";
    fmk_status st = c->restart
                        ? fmk_sim_io_write_restart(c->path, &c->o->p, c->o->acc, c->o->pot,
                                                   c->o->state, c->o->state_bytes, msg, sizeof msg)
                        : fmk_sim_io_write_snapshot(c->path, &c->o->p, msg, sizeof msg);
    int bad = c->expect_ok ? st != FMK_OK
                           : st != FMK_ERR_INTERNAL || !message_has(msg, "File too large") ||
                                 !message_has(msg, c->path) || !file_holds(c->path, "old");
    bad |= count_names(dir, ".tmp.") != 0 || H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) != 0;
    if (bad)
        printf("  %s: status %d, \"%s\", %d temporary files, %ld open HDF5 objects\n",
               c->restart ? "restart" : "snapshot", (int)st, msg, count_names(dir, ".tmp."),
               (long)H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL));
    return bad;
}

static void test_disk_full(void)
{
    char path[512], msg[512];
    in_dir(path, sizeof path, "full.hdf5");
    owned o = make(2000, 1, 3);
    for (int restart = 0; restart < 2; restart++) {
        fmk_status st = restart ? fmk_sim_io_write_restart(path, &o.p, o.acc, o.pot, o.state,
                                                           o.state_bytes, msg, sizeof msg)
                                : fmk_sim_io_write_snapshot(path, &o.p, msg, sizeof msg);
        CHECK_IO(st, FMK_OK, msg);
        long size = file_size(path);
        const long limits[] = {0, 512, 4096, size / 2, size - 1, size};
        for (int k = 0; k < (int)(sizeof limits / sizeof limits[0]); k++) {
            check_context("%s on a disk with room for %ld of its %ld bytes",
                          restart ? "restart file" : "snapshot", limits[k], size);
            file_put(path, "old");
            full_case c = {path, &o, restart, limits[k] >= size};
            CHECK(with_file_limit(limits[k], write_when_full, &c) == 0);
        }
    }
    drop(&o);
    check_context("");
}

/* HDF5's automatic error printing is off during the calls, and the caller's handler is back
 * after them. */
static herr_t count_handler(hid_t stack, void *calls)
{
    (void)stack;
    (*(int *)calls)++;
    return 0;
}

static void test_quiet(void)
{
    check_context("HDF5 error printing");
    char msg[512];
    H5E_auto2_t saved_func;
    void *saved_data;
    H5Eget_auto2(H5E_DEFAULT, &saved_func, &saved_data);
    int calls = 0;
    H5Eset_auto2(H5E_DEFAULT, count_handler, &calls);
    fmk_sim_particles p;
    CHECK_IO(fmk_sim_io_read_snapshot("no/such/file.hdf5", &p, msg, sizeof msg), FMK_ERR_ARG, msg);
    CHECK(calls == 0);
    H5E_auto2_t func = NULL;
    H5Eget_auto2(H5E_DEFAULT, &func, NULL);
    CHECK(func == count_handler);
    H5Eset_auto2(H5E_DEFAULT, saved_func, saved_data);
    check_context("");
}

#else /* !FMK_HAVE_HDF5 */

static void test_unavailable(void)
{
    check_context("built without HDF5");
    char msg[512];
    double x[3] = {0}, m = 1;
    uint64_t id = 1;
    fmk_sim_particles p = {1, x, x, &m, &id, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK_IO(fmk_sim_io_write_snapshot("a.hdf5", &p, msg, sizeof msg), FMK_ERR_UNAVAILABLE, msg);
    CHECK(message_has(msg, "libhdf5-dev"));
    fmk_sim_particles q;
    CHECK_IO(fmk_sim_io_read_snapshot("a.hdf5", &q, msg, sizeof msg), FMK_ERR_UNAVAILABLE, msg);
    CHECK(message_has(msg, "libhdf5-dev") && q.pos == NULL);
    double *acc, *pot;
    void *state;
    size_t bytes;
    CHECK_IO(fmk_sim_io_write_restart("r.hdf5", &p, x, x, NULL, 0, msg, sizeof msg),
             FMK_ERR_UNAVAILABLE, msg);
    CHECK_IO(fmk_sim_io_read_restart("r.hdf5", &q, &acc, &pot, &state, &bytes, msg, sizeof msg),
             FMK_ERR_UNAVAILABLE, msg);
    CHECK(message_has(msg, "libhdf5-dev") && fmk_sim_io_is_restart("r.hdf5") == 0);
    check_context("");
}

#endif /* FMK_HAVE_HDF5 */

static void test_mkdir(void)
{
    check_context("fmk_sim_io_mkdir");
    char path[512], msg[512];
    in_dir(path, sizeof path, "out/a//b/c/");
    CHECK_IO(fmk_sim_io_mkdir(path, msg, sizeof msg), FMK_OK, msg);
    CHECK_IO(fmk_sim_io_mkdir(path, msg, sizeof msg), FMK_OK, msg); /* exists: fine */
    struct stat st;
    in_dir(path, sizeof path, "out/a/b/c");
    CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    char file[512];
    in_dir(file, sizeof file, "out/file");
    file_put(file, "x");
    in_dir(path, sizeof path, "out/file/d");
    CHECK_IO(fmk_sim_io_mkdir(path, msg, sizeof msg), FMK_ERR_ARG, msg);
    CHECK(message_has(msg, "not a directory"));
    CHECK_IO(fmk_sim_io_mkdir("", msg, sizeof msg), FMK_ERR_ARG, msg);
    CHECK_IO(fmk_sim_io_mkdir(NULL, msg, sizeof msg), FMK_ERR_ARG, msg);
    check_context("");
}

int main(void)
{
    scratch_make(dir, sizeof dir, "sim_io");
    test_mkdir();
#ifdef FMK_HAVE_HDF5
    test_round_trip();
    test_restart();
    test_gadget_file();
    test_bad_files();
    test_refused_writes();
    test_disk_full();
    test_quiet();
#else
    test_unavailable();
#endif
    scratch_remove(dir);
    return check_summary();
}
