"""fmmkit.Simulation(comm=...) under mpirun (tests/mpi/CMakeLists.txt runs it on 2 and 3 ranks):
Simulation.plummer with comm, method direct fp64, against the one-process simulation each rank
runs itself: this rank's positions bit for bit after some steps (by id: the particles migrate
to the ranks that evaluate their forces), energies within rounding, info.n global and
info.n_local this rank's; a snapshot written by rank 0 holds every particle; a NaN mass on one
rank raises on every rank. Exit 77 (skipped) without mpi4py or libfmmkit_mpi. Not a pytest
module: conftest.py leaves it out of the pytest run."""
import os
import sys
import tempfile

import numpy as np

try:
    from mpi4py import MPI
except ImportError:
    print("mpi4py is not installed: skipped")
    sys.exit(77)

import fmmkit
from fmmkit._sim import _share

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
opts = dict(dt=2e-3, softening=0.02, method="direct", backend="cpu", precision="fp64", threads=1)
try:
    dist = fmmkit.Simulation.plummer(200, seed=4, comm=comm, **opts)
except fmmkit.FmkUnavailableError as e:
    print(f"skipped: {e}")
    sys.exit(77)
one = fmmkit.Simulation.plummer(200, seed=4, **opts)
dist.run(steps=6)
one.run(steps=6)
k = _share(200, comm)
a, b = dist.state(), one.state()
# the particles migrate to the ranks that evaluate their forces: by id (1..n, the global order)
ids = dist.ids().astype(np.int64) - 1
assert dist.info.n == 200 and dist.info.n_local == len(ids), dist.info
assert comm.allreduce(len(ids)) == 200 and len(set(ids)) == len(ids)
assert dist.info.ranks == comm.Get_size() and dist.info.rank == rank
assert np.array_equal(a.pos, b.pos[ids]) and np.array_equal(a.vel, b.vel[ids])
assert abs(dist.energy().total - one.energy().total) <= 1e-13 * abs(one.energy().total)

d = tempfile.mkdtemp() if rank == 0 else None
d = comm.bcast(d, root=0)
path = os.path.join(d, "snap.hdf5")
try:
    dist.snapshot(path)
    if rank == 0:
        back = fmmkit.Simulation.from_file(path, **opts)
        assert back.n == 200 and np.array_equal(back.state().pos, b.pos)
except fmmkit.FmkUnavailableError:
    pass  # built without HDF5

m, x, v = b.mass[k].copy(), b.pos[k].copy(), b.vel[k].copy()
if rank == 0:
    m[0] = np.nan
try:
    fmmkit.Simulation(m, x, v, comm=comm, **opts)
    raise AssertionError("a NaN mass on rank 0 was taken")
except fmmkit.FmkError as e:
    assert "rank 0" in str(e), e
dist.close()
comm.Barrier()
if rank == 0:
    import shutil
    shutil.rmtree(d, ignore_errors=True)
    print(f"test_mpi_sim on {comm.Get_size()} ranks: ok")
