/* restart.c -- the restart file: a snapshot (snapshot.c) plus /Restart/Accelerations (n x 3),
 * /Restart/Potential (n) and /Restart/State (the driver's opaque bytes). Doubles are stored
 * as IEEE little-endian doubles, as they are in memory on the machines fmmkit runs on, so
 * they come back bit for bit. */
#include <stdlib.h>
#include <string.h>

#include "sim/io/io.h"

#ifdef FMK_HAVE_HDF5
#include "sim/io/h5.h"

typedef struct restart_arrays {
    int64_t n;
    const double *acc, *pot;
    const void *state;
    size_t state_bytes;
} restart_arrays;

static herr_t write_restart_group(hid_t file, const void *ctx)
{
    const restart_arrays *r = ctx;
    hid_t g = H5Gcreate2(file, "Restart", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return -1;
    hsize_t n = (hsize_t)r->n;
    herr_t rc =
        fmk_h5_dataset_write(g, "Accelerations", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 3, r->acc);
    if (rc >= 0)
        rc = fmk_h5_dataset_write(g, "Potential", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 0, r->pot);
    /* An empty state is a dataset of 0 bytes (a NULL buffer is fine for HDF5 then, but a
     * pointer it can read is safer). */
    static const unsigned char none = 0;
    if (rc >= 0)
        rc = fmk_h5_dataset_write(g, "State", H5T_STD_U8LE, H5T_NATIVE_UINT8,
                                  (hsize_t)r->state_bytes, 0,
                                  r->state_bytes ? r->state : (const void *)&none);
    if (fmk_h5_close(g) != 0)
        rc = -1;
    return rc;
}

fmk_status fmk_sim_io_write_restart(const char *path, const fmk_sim_particles *p, const double *acc,
                                    const double *pot, const void *state, size_t state_bytes,
                                    char *msg, size_t cap)
{
    fmk_status st = fmk_files_check_path(path, "fmk_sim_io_write_restart", msg, cap);
    if (st != FMK_OK)
        return st;
    if (!p || !acc || !pot || (!state && state_bytes))
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "%s: the %s passed to "
                              "fmk_sim_io_write_restart is NULL",
                              path,
                              !p     ? "particles"
                              : !acc ? "accelerations"
                              : !pot ? "potential"
                                     : "state");
    st = fmk_snapshot_check(p, path, msg, cap);
    if (st == FMK_OK)
        st = fmk_snapshot_check_values(acc, 3 * p->n, 0, "acc", path, msg, cap);
    if (st == FMK_OK)
        st = fmk_snapshot_check_values(pot, p->n, 0, "pot", path, msg, cap);
    if (st != FMK_OK)
        return st;
    restart_arrays r = {p->n, acc, pot, state, state_bytes};
    size_t extra_bytes = (size_t)p->n * 4 * sizeof(double) + state_bytes;
    return fmk_snapshot_write_file(path, p, "restart file", write_restart_group, &r, extra_bytes,
                                   msg, cap);
}

typedef struct restart_out {
    double *acc, *pot;
    unsigned char *state;
    size_t state_bytes;
} restart_out;

static fmk_status read_restart_group(hid_t file, const char *path, int64_t n, void *ctx, char *msg,
                                     size_t cap)
{
    restart_out *r = ctx;
    if (!fmk_h5_exists(file, "Restart"))
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "%s has no /Restart group: it is a snapshot, not a restart file",
                              path);
    hid_t g = H5Gopen2(file, "Restart", H5P_DEFAULT);
    if (g < 0)
        return fmk_h5_fail(FMK_ERR_ARG, "reading /Restart of", path, msg, cap);
    int found;
    fmk_status st = fmk_snapshot_expect(g, "Restart", "Accelerations", H5T_FLOAT, n, 3, 1, &found,
                                        path, msg, cap);
    if (st == FMK_OK)
        st = fmk_snapshot_expect(g, "Restart", "Potential", H5T_FLOAT, n, 0, 1, &found, path, msg,
                                 cap);
    fmk_h5_shape s = {0};
    if (st == FMK_OK) {
        int rc = fmk_h5_dataset_shape(g, "State", &s);
        if (rc < 0)
            st = fmk_h5_fail(FMK_ERR_ARG, "reading /Restart/State of", path, msg, cap);
        else if (rc == 0 || s.cls != H5T_INTEGER || s.size != 1 || s.rank != 1)
            st = fmk_files_fail(msg, cap, FMK_ERR_ARG,
                                "%s: /Restart/State %s; it must be a 1-D array of bytes", path,
                                rc == 0 ? "is missing" : "has another type or shape");
    }
    if (st == FMK_OK) {
        r->state_bytes = (size_t)s.dims[0];
        r->acc = malloc((size_t)n * 3 * sizeof(double));
        r->pot = malloc((size_t)n * sizeof(double));
        r->state = malloc(r->state_bytes ? r->state_bytes : 1);
        if (!r->acc || !r->pot || !r->state)
            st = fmk_files_fail(msg, cap, FMK_ERR_NOMEM,
                                "out of host memory reading the restart file '%s'", path);
    }
    if (st == FMK_OK) {
        herr_t rc = fmk_h5_dataset_read(g, "Accelerations", H5T_NATIVE_DOUBLE, r->acc);
        if (rc >= 0)
            rc = fmk_h5_dataset_read(g, "Potential", H5T_NATIVE_DOUBLE, r->pot);
        if (rc >= 0 && r->state_bytes)
            rc = fmk_h5_dataset_read(g, "State", H5T_NATIVE_UINT8, r->state);
        if (rc < 0)
            st = fmk_h5_fail(FMK_ERR_INTERNAL, "reading /Restart of", path, msg, cap);
    }
    fmk_h5_close(g);
    if (st == FMK_OK)
        st = fmk_snapshot_check_values(r->acc, 3 * n, 0, "/Restart/Accelerations", path, msg, cap);
    if (st == FMK_OK)
        st = fmk_snapshot_check_values(r->pot, n, 0, "/Restart/Potential", path, msg, cap);
    return st;
}

fmk_status fmk_sim_io_read_restart(const char *path, fmk_sim_particles *p, double **acc,
                                   double **pot, void **state, size_t *state_bytes, char *msg,
                                   size_t cap)
{
    fmk_status st = fmk_files_check_path(path, "fmk_sim_io_read_restart", msg, cap);
    if (st != FMK_OK)
        return st;
    if (!p || !acc || !pot || !state || !state_bytes)
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "fmk_sim_io_read_restart: an output pointer is NULL");
    *acc = *pot = NULL;
    *state = NULL;
    *state_bytes = 0;
    restart_out r = {0};
    st = fmk_snapshot_read_file(path, p, "restart file", read_restart_group, &r, msg, cap);
    if (st != FMK_OK) {
        free(r.acc);
        free(r.pot);
        free(r.state);
        return st;
    }
    *acc = r.acc;
    *pot = r.pot;
    *state = r.state;
    *state_bytes = r.state_bytes;
    return FMK_OK;
}

int fmk_sim_io_is_restart(const char *path)
{
    if (!path || !path[0])
        return 0;
    fmk_h5_quiet quiet;
    fmk_h5_quiet_begin(&quiet);
    int yes = 0;
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT); /* fails quietly on other files */
    if (file >= 0) {
        yes = fmk_h5_exists(file, "Restart");
        H5Fclose(file);
    }
    H5Eclear2(H5E_DEFAULT);
    fmk_h5_quiet_end(&quiet);
    return yes;
}

#else /* !FMK_HAVE_HDF5 */

fmk_status fmk_sim_io_write_restart(const char *path, const fmk_sim_particles *p, const double *acc,
                                    const double *pot, const void *state, size_t state_bytes,
                                    char *msg, size_t cap)
{
    (void)path, (void)p, (void)acc, (void)pot, (void)state, (void)state_bytes;
    return fmk_files_fail(msg, cap, FMK_ERR_UNAVAILABLE, "%s", FMK_SIM_IO_NO_HDF5);
}

fmk_status fmk_sim_io_read_restart(const char *path, fmk_sim_particles *p, double **acc,
                                   double **pot, void **state, size_t *state_bytes, char *msg,
                                   size_t cap)
{
    (void)path;
    if (p)
        memset(p, 0, sizeof *p);
    if (acc)
        *acc = NULL;
    if (pot)
        *pot = NULL;
    if (state)
        *state = NULL;
    if (state_bytes)
        *state_bytes = 0;
    return fmk_files_fail(msg, cap, FMK_ERR_UNAVAILABLE, "%s", FMK_SIM_IO_NO_HDF5);
}

int fmk_sim_io_is_restart(const char *path)
{
    (void)path;
    return 0;
}

#endif /* FMK_HAVE_HDF5 */
