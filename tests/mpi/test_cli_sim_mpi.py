"""`mpirun -np K fmmkit sim` (docs/distributed.md, "The simulation under MPI"): the same run
on one process and on 2 and 3 ranks, method direct fp64: the same final time and step, the
energies within rounding, the snapshots' coordinates and ids bit for bit with NumPart_Total
global (h5py optional); a restart continued on 3 ranks gives the uninterrupted run's last
snapshot bit for bit. Run as `python3 test_cli_sim_mpi.py FMMKIT MPIEXEC`; exit 0 or 1.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CLI, MPIEXEC = sys.argv[1], sys.argv[2]
ARGS = ["sim", "--ic", "plummer", "--n", "300", "--seed", "5", "--dt", "0.002",
        "--softening", "0.02", "--method", "direct", "--backend", "cpu", "--threads", "1",
        "--quiet", "--json", "--snap-every", "4", "--diag-every", "4", "--restart-every", "4"]
failures = []


def run(np, *extra, args=ARGS):
    cmd = ([MPIEXEC, "--oversubscribe", "-np", str(np)] if np > 1 else []) + [CLI, *args, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        failures.append(f"{cmd}: exit {r.returncode}: {r.stderr[-2000:]}")
        return None
    return json.loads(r.stdout)


def check(cond, what):
    if not cond:
        failures.append(what)


try:
    import h5py
    import numpy as np
except ImportError:
    h5py = None


def snap(d, k):
    with h5py.File(Path(d) / f"snapshot_{k:03d}.hdf5", "r") as f:
        return (f["Header"].attrs["NumPart_Total"][1], f["PartType1/Coordinates"][:],
                f["PartType1/Velocities"][:], f["PartType1/ParticleIDs"][:])


with tempfile.TemporaryDirectory() as tmp:
    one = run(1, "--steps", "8", "--out", f"{tmp}/one")
    for k in (2, 3):
        d = f"{tmp}/r{k}"
        many = run(k, "--steps", "8", "--out", d)
        if one is None or many is None:
            continue
        check(many["step"] == one["step"] and many["time"] == one["time"], f"{k} ranks: time")
        for key in ("kinetic", "potential", "energy"):
            check(abs(many[key] - one[key]) <= 1e-13 * abs(one[key]), f"{k} ranks: {key}")
        rows = (Path(d) / "diagnostics.csv").read_text().splitlines()
        check(len(rows) == 4, f"{k} ranks: {len(rows)} lines in diagnostics.csv")
        if h5py:
            a, b = snap(f"{tmp}/one", 2), snap(d, 2)
            check(b[0] == 300, f"{k} ranks: NumPart_Total {b[0]}")
            check(all(np.array_equal(x, y) for x, y in zip(a[1:], b[1:])),
                  f"{k} ranks: the snapshot differs from one process's")
    # a 3-rank run of 4 steps (its restart file at step 4), continued on 3 ranks to step 8
    run(3, "--steps", "4", "--out", f"{tmp}/half")
    cont = run(3, "--restart", f"{tmp}/half/restart.h5", "--steps", "4", "--out", f"{tmp}/c3",
               "--snap-every", "4", "--quiet", "--json", args=["sim"])
    if h5py and cont is not None:
        a, b = snap(f"{tmp}/r3", 2), snap(f"{tmp}/c3", 2)
        check(all(np.array_equal(x, y) for x, y in zip(a[1:], b[1:])),
              "the restart continued on 3 ranks differs from the uninterrupted run")

for f in failures:
    print("FAIL", f)
print("test_cli_sim_mpi:", "FAILED" if failures else "ok")
sys.exit(1 if failures else 0)
