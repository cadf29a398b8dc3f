/* snapshot.c -- snapshots in GADGET-4's HDF5 layout (docs/simulation.md, "Files").
 *
 * The attribute types are GADGET-4's (src/io/snap_io.cc, write_header_fields):
 * NumPart_ThisFile and NumPart_Total 6 x uint64, MassTable 6 x double, Time, Redshift and
 * BoxSize double, NumFilesPerSnapshot int32. Reading also takes what GADGET-4 and GADGET-2
 * write: float32 datasets, 32-bit IDs or none, masses in MassTable, NumPart_Total_HighWord,
 * units in /Parameters or /Units. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/io/io.h"

#ifdef FMK_HAVE_HDF5
#include "sim/io/h5.h"
#endif

fmk_status fmk_snapshot_check_values(const double *v, int64_t n, int nonneg, const char *what,
                                     const char *path, char *msg, size_t cap)
{
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(v[i]))
            return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                                  "%s: %s[%lld] is %s; every value must be finite", path, what,
                                  (long long)i, isnan(v[i]) ? "NaN" : "infinite");
        if (nonneg && v[i] < 0)
            return fmk_files_fail(msg, cap, FMK_ERR_ARG, "%s: %s[%lld] is %g; it must be >= 0",
                                  path, what, (long long)i, v[i]);
    }
    return FMK_OK;
}

fmk_status fmk_snapshot_check(const fmk_sim_particles *p, const char *path, char *msg, size_t cap)
{
    if (!p)
        return fmk_files_fail(msg, cap, FMK_ERR_ARG, "%s: the particles are NULL", path);
    if (p->n < 1 || p->n > INT64_MAX / 64)
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "%s: n = %lld particles; a snapshot holds at least one", path,
                              (long long)p->n);
    if (!p->pos || !p->vel || !p->mass || !p->id)
        return fmk_files_fail(msg, cap, FMK_ERR_ARG, "%s: the particles' %s array is NULL", path,
                              !p->pos    ? "pos"
                              : !p->vel  ? "vel"
                              : !p->mass ? "mass"
                                         : "id");
    const double header[6] = {p->time,           p->redshift,    p->box_size,
                              p->unit_length_cm, p->unit_mass_g, p->unit_velocity_cm_per_s};
    const char *names[6] = {"Time",          "Redshift",
                            "BoxSize",       "UnitLength_in_cm",
                            "UnitMass_in_g", "UnitVelocity_in_cm_per_s"};
    for (int k = 0; k < 6; k++)
        if (!isfinite(header[k]) || (k >= 2 && header[k] < 0))
            return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                                  "%s: the header's %s is %g; it must be finite%s", path, names[k],
                                  header[k], k >= 2 ? " and >= 0" : "");
    fmk_status st = fmk_snapshot_check_values(p->pos, 3 * p->n, 0, "pos", path, msg, cap);
    if (st == FMK_OK)
        st = fmk_snapshot_check_values(p->vel, 3 * p->n, 0, "vel", path, msg, cap);
    if (st == FMK_OK)
        st = fmk_snapshot_check_values(p->mass, p->n, 1, "mass", path, msg, cap);
    if (st == FMK_OK && p->soft)
        st = fmk_snapshot_check_values(p->soft, p->n, 1, "soft", path, msg, cap);
    return st;
}

void fmk_sim_particles_free(fmk_sim_particles *p)
{
    if (!p)
        return;
    free(p->pos);
    free(p->vel);
    free(p->mass);
    free(p->id);
    free(p->soft);
    memset(p, 0, sizeof *p);
}

#ifdef FMK_HAVE_HDF5

/* GADGET's particle types: type 1 holds the particles. */
#define NTYPES 6
#define NTYPES_MAX 64

static const char *const unit_names[3] = {"UnitLength_in_cm", "UnitMass_in_g",
                                          "UnitVelocity_in_cm_per_s"};

static const char *const cosmo_names[3] = {"Omega0", "OmegaLambda", "HubbleParam"};

static double *unit_field(fmk_sim_particles *p, int k)
{
    return k == 0 ? &p->unit_length_cm : k == 1 ? &p->unit_mass_g : &p->unit_velocity_cm_per_s;
}

/* Writing --------------------------------------------------------------------------------- */

/* The units (those > 0) and, when hubble_param > 0, the cosmology as attributes of h: the same
 * in /Header and /Parameters. */
static herr_t write_cosmology(hid_t h, const fmk_sim_particles *p)
{
    const double units[3] = {p->unit_length_cm, p->unit_mass_g, p->unit_velocity_cm_per_s};
    const double cosmo[3] = {p->omega0, p->omega_lambda, p->hubble_param};
    herr_t rc = 0;
    for (int k = 0; k < 3 && rc >= 0; k++)
        if (units[k] > 0)
            rc = fmk_h5_attr_scalar(h, unit_names[k], H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &units[k]);
    for (int k = 0; k < 3 && rc >= 0 && p->hubble_param > 0; k++)
        rc = fmk_h5_attr_scalar(h, cosmo_names[k], H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &cosmo[k]);
    return rc;
}

static herr_t write_header(hid_t file, const fmk_sim_particles *p)
{
    hid_t h = H5Gcreate2(file, "Header", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (h < 0)
        return -1;
    uint64_t npart[NTYPES] = {0, (uint64_t)p->n, 0, 0, 0, 0};
    double mass_table[NTYPES] = {0};
    int32_t nfiles = 1;
    herr_t rc =
        fmk_h5_attr_vector(h, "NumPart_ThisFile", H5T_STD_U64LE, H5T_NATIVE_UINT64, NTYPES, npart);
    if (rc >= 0)
        rc =
            fmk_h5_attr_vector(h, "NumPart_Total", H5T_STD_U64LE, H5T_NATIVE_UINT64, NTYPES, npart);
    if (rc >= 0)
        rc = fmk_h5_attr_vector(h, "MassTable", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, NTYPES,
                                mass_table);
    const double scalars[3] = {p->time, p->redshift, p->box_size};
    const char *names[3] = {"Time", "Redshift", "BoxSize"};
    for (int k = 0; k < 3 && rc >= 0; k++)
        rc = fmk_h5_attr_scalar(h, names[k], H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &scalars[k]);
    if (rc >= 0)
        rc = fmk_h5_attr_scalar(h, "NumFilesPerSnapshot", H5T_STD_I32LE, H5T_NATIVE_INT32, &nfiles);
    if (rc >= 0)
        rc = write_cosmology(h, p);
    if (fmk_h5_close(h) != 0)
        rc = -1;
    return rc;
}

/* A comoving run's /Parameters (GADGET-4 writes its parameter file there): the cosmology, the
 * units and ComovingIntegrationOn = 1. */
static herr_t write_parameters(hid_t file, const fmk_sim_particles *p)
{
    hid_t g = H5Gcreate2(file, "Parameters", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return -1;
    const int32_t on = 1;
    herr_t rc =
        fmk_h5_attr_scalar(g, "ComovingIntegrationOn", H5T_STD_I32LE, H5T_NATIVE_INT32, &on);
    if (rc >= 0)
        rc = write_cosmology(g, p);
    if (fmk_h5_close(g) != 0)
        rc = -1;
    return rc;
}

static herr_t write_particles(hid_t file, const fmk_sim_particles *p)
{
    hid_t g = H5Gcreate2(file, "PartType1", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return -1;
    hsize_t n = (hsize_t)p->n;
    herr_t rc =
        fmk_h5_dataset_write(g, "Coordinates", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 3, p->pos);
    if (rc >= 0)
        rc = fmk_h5_dataset_write(g, "Velocities", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 3, p->vel);
    if (rc >= 0)
        rc = fmk_h5_dataset_write(g, "ParticleIDs", H5T_STD_U64LE, H5T_NATIVE_UINT64, n, 0, p->id);
    if (rc >= 0)
        rc = fmk_h5_dataset_write(g, "Masses", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 0, p->mass);
    if (rc >= 0 && p->soft)
        rc =
            fmk_h5_dataset_write(g, "Softenings", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 0, p->soft);
    if (fmk_h5_close(g) != 0)
        rc = -1;
    return rc;
}

fmk_status fmk_snapshot_write_file(const char *path, const fmk_sim_particles *p, const char *what,
                                   fmk_snapshot_extra_write extra, const void *ctx,
                                   size_t extra_bytes, char *msg, size_t cap)
{
    fmk_status st = fmk_snapshot_check(p, path, msg, cap);
    if (st != FMK_OK)
        return st;
    char what_writing[64];
    snprintf(what_writing, sizeof what_writing, "writing %s", what);
    /* The whole file in memory first, then to disk in one piece (io.h). */
    size_t data_bytes = (size_t)p->n * (p->soft ? 9 : 8) * sizeof(double);
    fmk_h5_quiet quiet;
    fmk_h5_quiet_begin(&quiet);
    fmk_h5_image image;
    hid_t file = fmk_h5_create_in_memory(data_bytes + extra_bytes + (64u << 10), &image);
    herr_t rc = file < 0 ? -1 : write_header(file, p);
    if (rc >= 0 && p->hubble_param > 0)
        rc = write_parameters(file, p);
    if (rc >= 0)
        rc = write_particles(file, p);
    if (rc >= 0 && extra)
        rc = extra(file, ctx);
    if (file >= 0 && fmk_h5_close_in_memory(file, rc < 0, &image) < 0)
        rc = -1;
    if (rc < 0 && image.nomem)
        st = fmk_files_fail(msg, cap, FMK_ERR_NOMEM,
                            "out of host memory writing %s '%s' (%lld particles)", what, path,
                            (long long)p->n);
    else if (rc < 0)
        st = fmk_h5_fail(FMK_ERR_INTERNAL, what_writing, path, msg, cap);
    H5Eclear2(H5E_DEFAULT);
    fmk_h5_quiet_end(&quiet);
    if (st == FMK_OK)
        st = fmk_files_write(path, what, image.data, image.size, msg, cap);
    free(image.data);
    return st;
}

fmk_status fmk_sim_io_write_snapshot(const char *path, const fmk_sim_particles *p, char *msg,
                                     size_t cap)
{
    fmk_status st = fmk_files_check_path(path, "fmk_sim_io_write_snapshot", msg, cap);
    if (st != FMK_OK)
        return st;
    return fmk_snapshot_write_file(path, p, "snapshot", NULL, NULL, 0, msg, cap);
}

/* Reading --------------------------------------------------------------------------------- */

static const char *class_name(H5T_class_t cls)
{
    switch (cls) {
    case H5T_INTEGER: return "integers";
    case H5T_FLOAT: return "floating-point numbers";
    case H5T_STRING: return "strings";
    default: return "a compound or other non-numeric type";
    }
}

fmk_status fmk_snapshot_expect(hid_t group, const char *group_name, const char *name,
                               H5T_class_t cls, int64_t rows, int64_t cols, int required,
                               int *found, const char *path, char *msg, size_t cap)
{
    fmk_h5_shape s;
    int rc = fmk_h5_dataset_shape(group, name, &s);
    *found = rc == 1;
    if (rc < 0)
        return fmk_h5_fail(FMK_ERR_ARG, "reading the shape of a dataset of", path, msg, cap);
    if (rc == 0)
        return required ? fmk_files_fail(msg, cap, FMK_ERR_ARG, "%s: the dataset /%s/%s is missing",
                                         path, group_name, name)
                        : FMK_OK;
    if (s.cls != cls)
        return fmk_files_fail(msg, cap, FMK_ERR_ARG, "%s: /%s/%s holds %s; it must hold %s", path,
                              group_name, name, class_name(s.cls), class_name(cls));
    int rank = cols ? 2 : 1;
    if (s.rank != rank || (cols && (int64_t)s.dims[1] != cols))
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "%s: /%s/%s has the wrong shape (rank %d, %llu x %llu); it must "
                              "be %s",
                              path, group_name, name, s.rank, (unsigned long long)s.dims[0],
                              (unsigned long long)(s.rank > 1 ? s.dims[1] : 1),
                              cols ? "n x 3" : "n (one value per particle)");
    if ((int64_t)s.dims[0] != rows)
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "%s: /%s/%s has %llu rows but the header's NumPart_ThisFile[1] "
                              "says n = %lld",
                              path, group_name, name, (unsigned long long)s.dims[0],
                              (long long)rows);
    return FMK_OK;
}

/* A numeric attribute of one value (scalar or one element): 1 read, 0 absent, else a
 * message. */
static int read_number(hid_t obj, const char *obj_name, const char *name, double *value,
                       const char *path, char *msg, size_t cap, fmk_status *st)
{
    fmk_h5_shape s;
    int rc = fmk_h5_attr_shape(obj, name, &s);
    if (rc == 0)
        return 0;
    if (rc < 0) {
        *st = fmk_h5_fail(FMK_ERR_ARG, "reading an attribute of", path, msg, cap);
        return -1;
    }
    if ((s.cls != H5T_FLOAT && s.cls != H5T_INTEGER) || s.rank > 1 ||
        (s.rank == 1 && s.dims[0] != 1)) {
        *st = fmk_files_fail(msg, cap, FMK_ERR_ARG,
                             "%s: the attribute %s of /%s must be one number; it holds %s "
                             "(rank %d)",
                             path, name, obj_name, class_name(s.cls), s.rank);
        return -1;
    }
    if (fmk_h5_attr_read(obj, name, H5T_NATIVE_DOUBLE, value) < 0) {
        *st = fmk_h5_fail(FMK_ERR_ARG, "reading an attribute of", path, msg, cap);
        return -1;
    }
    if (!isfinite(*value)) {
        *st = fmk_files_fail(msg, cap, FMK_ERR_ARG, "%s: the attribute %s of /%s is %s", path, name,
                             obj_name, isnan(*value) ? "NaN" : "infinite");
        return -1;
    }
    return 1;
}

/* An attribute of one entry per particle type (NumPart_*, MassTable): 1 read (*count
 * entries), 0 absent, else a message. */
static int read_per_type(hid_t h, const char *name, H5T_class_t cls, hid_t mem_type, void *values,
                         int *count, const char *path, char *msg, size_t cap, fmk_status *st)
{
    fmk_h5_shape s;
    int rc = fmk_h5_attr_shape(h, name, &s);
    if (rc == 0)
        return 0;
    if (rc < 0) {
        *st = fmk_h5_fail(FMK_ERR_ARG, "reading /Header of", path, msg, cap);
        return -1;
    }
    if (s.cls != cls || s.rank != 1 || s.dims[0] < 2 || s.dims[0] > NTYPES_MAX ||
        (*count && (int)s.dims[0] != *count)) {
        *st = fmk_files_fail(msg, cap, FMK_ERR_ARG,
                             "%s: /Header's %s must be %s, one per particle type (GADGET-4 "
                             "writes 6%s); it holds %s of rank %d with %llu entries",
                             path, name, class_name(cls),
                             *count ? ", the length of NumPart_ThisFile" : "", class_name(s.cls),
                             s.rank, (unsigned long long)s.dims[0]);
        return -1;
    }
    *count = (int)s.dims[0];
    if (fmk_h5_attr_read(h, name, mem_type, values) < 0) {
        *st = fmk_h5_fail(FMK_ERR_ARG, "reading /Header of", path, msg, cap);
        return -1;
    }
    return 1;
}

/* What /Header says: n, the mass of type 1 from MassTable (0 when absent), the scalars. */
static fmk_status read_header(hid_t h, const char *path, fmk_sim_particles *p, double *mass1,
                              char *msg, size_t cap)
{
    fmk_status st = FMK_OK;
    uint64_t this_file[NTYPES_MAX] = {0}, total[NTYPES_MAX] = {0}, high[NTYPES_MAX] = {0};
    double table[NTYPES_MAX] = {0};
    int ntypes = 0;
    int rc = read_per_type(h, "NumPart_ThisFile", H5T_INTEGER, H5T_NATIVE_UINT64, this_file,
                           &ntypes, path, msg, cap, &st);
    if (rc == 0)
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "%s: /Header has no NumPart_ThisFile attribute", path);
    if (rc < 0 ||
        read_per_type(h, "NumPart_Total", H5T_INTEGER, H5T_NATIVE_UINT64, total, &ntypes, path, msg,
                      cap, &st) < 0 ||
        read_per_type(h, "NumPart_Total_HighWord", H5T_INTEGER, H5T_NATIVE_UINT64, high, &ntypes,
                      path, msg, cap, &st) < 0 ||
        read_per_type(h, "MassTable", H5T_FLOAT, H5T_NATIVE_DOUBLE, table, &ntypes, path, msg, cap,
                      &st) < 0)
        return st;
    double nfiles = 1;
    if (read_number(h, "Header", "NumFilesPerSnapshot", &nfiles, path, msg, cap, &st) < 0)
        return st;
    if (nfiles != 1)
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "%s is one file of a snapshot in %g files (NumFilesPerSnapshot); "
                              "fmmkit reads single-file snapshots: join the files first",
                              path, nfiles);
    for (int t = 0; t < ntypes; t++) {
        uint64_t all = total[t] + (high[t] << 32); /* GADGET-2's high words */
        if (t != 1 && (this_file[t] != 0 || all != 0))
            return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                                  "%s holds %llu particles of type %d; fmmkit reads particle "
                                  "type 1 only (PartType1)",
                                  path, (unsigned long long)(this_file[t] ? this_file[t] : all), t);
        if (t == 1 && all != 0 && all != this_file[1])
            return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                                  "%s: /Header says NumPart_ThisFile[1] = %llu but "
                                  "NumPart_Total[1] = %llu in a single-file snapshot",
                                  path, (unsigned long long)this_file[1], (unsigned long long)all);
        if (!isfinite(table[t]) || table[t] < 0)
            return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                                  "%s: /Header's MassTable[%d] is %g; masses must be finite "
                                  "and >= 0",
                                  path, t, table[t]);
    }
    if (this_file[1] == 0 || this_file[1] > (uint64_t)(INT64_MAX / 64))
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "%s: /Header says NumPart_ThisFile[1] = %llu particles of type 1; "
                              "a snapshot must hold at least one",
                              path, (unsigned long long)this_file[1]);
    p->n = (int64_t)this_file[1];
    *mass1 = table[1];
    double *scalars[3] = {&p->time, &p->redshift, &p->box_size};
    const char *names[3] = {"Time", "Redshift", "BoxSize"};
    for (int k = 0; k < 3; k++)
        if (read_number(h, "Header", names[k], scalars[k], path, msg, cap, &st) < 0)
            return st;
    if (p->box_size < 0)
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "%s: /Header's BoxSize is %g; it must be "
                              ">= 0",
                              path, p->box_size);
    return FMK_OK;
}

/* The units, from /Header (this layout), /Parameters (GADGET-4) or /Units (SWIFT, AREPO), and
 * the cosmology (Omega0, OmegaLambda, HubbleParam) from /Header or /Parameters. */
static fmk_status read_units(hid_t file, const char *path, fmk_sim_particles *p, char *msg,
                             size_t cap)
{
    const char *groups[3] = {"Header", "Parameters", "Units"};
    fmk_status st = FMK_OK;
    for (int k = 0; k < 6; k++)
        for (int g = 0; g < (k < 3 ? 3 : 2); g++) {
            if (!fmk_h5_exists(file, groups[g]))
                continue;
            hid_t grp = H5Gopen2(file, groups[g], H5P_DEFAULT);
            if (grp < 0)
                return fmk_h5_fail(FMK_ERR_ARG, "reading", path, msg, cap);
            const char *name = k < 3 ? unit_names[k] : cosmo_names[k - 3];
            double *field = k < 3    ? unit_field(p, k)
                            : k == 3 ? &p->omega0
                            : k == 4 ? &p->omega_lambda
                                     : &p->hubble_param;
            int rc = read_number(grp, groups[g], name, field, path, msg, cap, &st);
            fmk_h5_close(grp);
            if (rc < 0)
                return st;
            if (rc == 0)
                continue;
            if (k < 3 || k == 5 ? *field <= 0 : *field < 0)
                return fmk_files_fail(msg, cap, FMK_ERR_ARG, "%s: /%s's %s is %g; it must be %s",
                                      path, groups[g], name, *field,
                                      k < 3 || k == 5 ? "> 0" : ">= 0");
            break;
        }
    return FMK_OK;
}

/* Checks the shapes of /PartType1's datasets; *has_mass, *has_id, *has_soft say which of the
 * optional ones are there. */
static fmk_status check_particles(hid_t g, const char *path, int64_t n, double mass1, int *has_mass,
                                  int *has_id, int *has_soft, char *msg, size_t cap)
{
    int found;
    fmk_status st = fmk_snapshot_expect(g, "PartType1", "Coordinates", H5T_FLOAT, n, 3, 1, &found,
                                        path, msg, cap);
    if (st == FMK_OK)
        st = fmk_snapshot_expect(g, "PartType1", "Velocities", H5T_FLOAT, n, 3, 1, &found, path,
                                 msg, cap);
    if (st == FMK_OK)
        st = fmk_snapshot_expect(g, "PartType1", "Masses", H5T_FLOAT, n, 0, 0, has_mass, path, msg,
                                 cap);
    if (st == FMK_OK)
        st = fmk_snapshot_expect(g, "PartType1", "ParticleIDs", H5T_INTEGER, n, 0, 0, has_id, path,
                                 msg, cap);
    if (st == FMK_OK)
        st = fmk_snapshot_expect(g, "PartType1", "Softenings", H5T_FLOAT, n, 0, 0, has_soft, path,
                                 msg, cap);
    if (st == FMK_OK && !*has_mass && !(mass1 > 0))
        st = fmk_files_fail(msg, cap, FMK_ERR_ARG,
                            "%s: the dataset /PartType1/Masses is missing and /Header's "
                            "MassTable[1] is %s: the particles have no masses",
                            path, mass1 == 0 ? "0" : "absent");
    return st;
}

static fmk_status read_particles(hid_t file, const char *path, fmk_sim_particles *p, double mass1,
                                 char *msg, size_t cap)
{
    if (!fmk_h5_exists(file, "PartType1"))
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "%s: the group /PartType1 is missing (the header says n = %lld)",
                              path, (long long)p->n);
    hid_t g = H5Gopen2(file, "PartType1", H5P_DEFAULT);
    if (g < 0)
        return fmk_h5_fail(FMK_ERR_ARG, "reading", path, msg, cap);
    int has_mass = 0, has_id = 0, has_soft = 0;
    int64_t n = p->n;
    fmk_status st = check_particles(g, path, n, mass1, &has_mass, &has_id, &has_soft, msg, cap);
    if (st == FMK_OK) {
        p->pos = malloc((size_t)n * 3 * sizeof(double));
        p->vel = malloc((size_t)n * 3 * sizeof(double));
        p->mass = malloc((size_t)n * sizeof(double));
        p->id = malloc((size_t)n * sizeof(uint64_t));
        p->soft = has_soft ? malloc((size_t)n * sizeof(double)) : NULL;
        if (!p->pos || !p->vel || !p->mass || !p->id || (has_soft && !p->soft))
            st = fmk_files_fail(msg, cap, FMK_ERR_NOMEM,
                                "out of host memory reading %lld particles from '%s'", (long long)n,
                                path);
    }
    /* HDF5 converts what is stored (float32, 32-bit IDs) to doubles and uint64. */
    herr_t rc = 0;
    if (st == FMK_OK) {
        rc = fmk_h5_dataset_read(g, "Coordinates", H5T_NATIVE_DOUBLE, p->pos);
        if (rc >= 0)
            rc = fmk_h5_dataset_read(g, "Velocities", H5T_NATIVE_DOUBLE, p->vel);
        if (rc >= 0 && has_mass)
            rc = fmk_h5_dataset_read(g, "Masses", H5T_NATIVE_DOUBLE, p->mass);
        if (rc >= 0 && has_id)
            rc = fmk_h5_dataset_read(g, "ParticleIDs", H5T_NATIVE_UINT64, p->id);
        if (rc >= 0 && has_soft)
            rc = fmk_h5_dataset_read(g, "Softenings", H5T_NATIVE_DOUBLE, p->soft);
        if (rc < 0)
            st = fmk_h5_fail(FMK_ERR_INTERNAL, "reading the particles of", path, msg, cap);
    }
    fmk_h5_close(g);
    if (st != FMK_OK)
        return st;
    for (int64_t i = 0; i < n; i++) {
        if (!has_mass)
            p->mass[i] = mass1;
        if (!has_id)
            p->id[i] = (uint64_t)i + 1;
    }
    st = fmk_snapshot_check_values(p->pos, 3 * n, 0, "/PartType1/Coordinates", path, msg, cap);
    if (st == FMK_OK)
        st = fmk_snapshot_check_values(p->vel, 3 * n, 0, "/PartType1/Velocities", path, msg, cap);
    if (st == FMK_OK)
        st = fmk_snapshot_check_values(p->mass, n, 1, "/PartType1/Masses", path, msg, cap);
    if (st == FMK_OK && has_soft)
        st = fmk_snapshot_check_values(p->soft, n, 1, "/PartType1/Softenings", path, msg, cap);
    return st;
}

fmk_status fmk_snapshot_read_file(const char *path, fmk_sim_particles *p, const char *what,
                                  fmk_snapshot_extra_read extra, void *ctx, char *msg, size_t cap)
{
    memset(p, 0, sizeof *p);
    fmk_h5_quiet quiet;
    fmk_h5_quiet_begin(&quiet);
    fmk_status st = FMK_OK;
    char what_reading[64];
    snprintf(what_reading, sizeof what_reading, "opening %s", what);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t file = -1;
    if (fapl < 0 || H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0 ||
        (file = H5Fopen(path, H5F_ACC_RDONLY, fapl)) < 0)
        st = fmk_h5_fail(FMK_ERR_ARG, what_reading, path, msg, cap);
    fmk_h5_close(fapl);
    if (st == FMK_OK && !fmk_h5_exists(file, "Header"))
        st = fmk_files_fail(msg, cap, FMK_ERR_ARG,
                            "%s has no /Header group: it is not a snapshot in GADGET's HDF5 "
                            "layout",
                            path);
    double mass1 = 0;
    if (st == FMK_OK) {
        hid_t h = H5Gopen2(file, "Header", H5P_DEFAULT);
        st = h < 0 ? fmk_h5_fail(FMK_ERR_ARG, "reading /Header of", path, msg, cap)
                   : read_header(h, path, p, &mass1, msg, cap);
        fmk_h5_close(h);
    }
    if (st == FMK_OK)
        st = read_units(file, path, p, msg, cap);
    if (st == FMK_OK)
        st = read_particles(file, path, p, mass1, msg, cap);
    if (st == FMK_OK && extra)
        st = extra(file, path, p->n, ctx, msg, cap);
    if (file >= 0 && fmk_h5_close(file) != 0 && st == FMK_OK)
        st = fmk_h5_fail(FMK_ERR_INTERNAL, "closing", path, msg, cap);
    H5Eclear2(H5E_DEFAULT);
    fmk_h5_quiet_end(&quiet);
    if (st != FMK_OK)
        fmk_sim_particles_free(p);
    return st;
}

fmk_status fmk_sim_io_read_snapshot(const char *path, fmk_sim_particles *p, char *msg, size_t cap)
{
    fmk_status st = fmk_files_check_path(path, "fmk_sim_io_read_snapshot", msg, cap);
    if (st != FMK_OK)
        return st;
    if (!p)
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "fmk_sim_io_read_snapshot: the particles to fill are NULL");
    return fmk_snapshot_read_file(path, p, "snapshot", NULL, NULL, msg, cap);
}

#else /* !FMK_HAVE_HDF5 */

fmk_status fmk_sim_io_write_snapshot(const char *path, const fmk_sim_particles *p, char *msg,
                                     size_t cap)
{
    (void)path;
    (void)p;
    return fmk_files_fail(msg, cap, FMK_ERR_UNAVAILABLE, "%s", FMK_SIM_IO_NO_HDF5);
}

fmk_status fmk_sim_io_read_snapshot(const char *path, fmk_sim_particles *p, char *msg, size_t cap)
{
    (void)path;
    if (p)
        memset(p, 0, sizeof *p);
    return fmk_files_fail(msg, cap, FMK_ERR_UNAVAILABLE, "%s", FMK_SIM_IO_NO_HDF5);
}

#endif /* FMK_HAVE_HDF5 */
