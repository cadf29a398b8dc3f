"""mpi_plan.py -- a distributed plan under mpirun: the time of set_points and eval, where it
went (fmk_plan_mpi_info: partition, sending tree, exchanges, the local plan), the bytes each
rank sent, and the error against the direct sum on a sample of targets.

    mpirun -np P python3 bench/mpi_plan.py [--log2 22] [--dist plummer] [--method tree]
        [--backend cuda] [--precision fp32] [--theta 0.6] [--eps 1e-2] [--repeat 3] [--json]
        [--replicated]

(PYTHONPATH=python and FMMKIT_LIBRARY=<build>/libfmmkit.so for a build tree.) The points: N =
2^log2 of a Plummer sphere (radius capped at 50) or a unit cube, in chunks of 2^18 drawn with
the chunk's own seed, chunk j on rank j P / chunks: every run of the same N has the same
points whatever P. Targets are the sources. Times: the largest over the ranks, after a barrier;
eval: the best of --repeat. The check: 1000 of rank 0's targets, the direct sum over every
rank's sources summed by allreduce, relative l2 of the potential and of the gradient.
--replicated: the sources replicated on every rank instead of distributed by locally essential
trees (the tree and the 3D FMM; fmk_mpi_set_let, a test knob of src/mpi/mpi_internal.h), the
reference of the distributed path.
"""
import argparse
import json
import sys
import time

import numpy as np

import fmmkit

CHUNK = 1 << 18


def chunk_points(j, dist):
    rng = np.random.default_rng(1000003 + j)
    if dist == "uniform":
        return rng.random((CHUNK, 3))
    r = 1.0 / np.sqrt((0.01 + 0.98 * rng.random(CHUNK)) ** (-2.0 / 3.0) - 1.0)
    r = np.minimum(r, 50.0)
    c = 2 * rng.random(CHUNK) - 1
    phi = 2 * np.pi * rng.random(CHUNK)
    s = np.sqrt(1 - c * c)
    return np.stack([r * s * np.cos(phi), r * s * np.sin(phi), r * c], axis=1)


def spread3(v):
    """The bits of v (uint64, < 2^21) at every third place (the library's Morton bit spreading)."""
    v = v & np.uint64(0x1FFFFF)
    for shift, mask in ((32, 0x1F00000000FFFF), (16, 0x1F0000FF0000FF), (8, 0x100F00F00F00F00F),
                        (4, 0x10C30C30C30C30C3), (2, 0x1249249249249249)):
        v = (v | (v << np.uint64(shift))) & np.uint64(mask)
    return v


def placed(comm, x):
    """The points moved to the ranks whose runs of the Morton curve they fall in, as the plan's
    partition cuts it at set_points when no cost is measured yet (equal counts, ties by global
    index; keys as src/mpi/partition.c makes them): a simulation's particles after it migrates
    them, so that the timed set_points moves no target. Not timed."""
    from mpi4py import MPI
    lo, hi = np.empty(3), np.empty(3)
    comm.Allreduce(x.min(axis=0) if len(x) else np.full(3, np.inf), lo, op=MPI.MIN)
    comm.Allreduce(x.max(axis=0) if len(x) else np.full(3, -np.inf), hi, op=MPI.MAX)
    w = float(np.max(hi - lo))
    scale = float(1 << 21) / w if w > 0 else 0.0
    t = (x - lo) * scale
    c = np.where(t <= 0, 0, np.where(t >= (1 << 21) - 1, (1 << 21) - 1, t)).astype(np.uint64)
    key = spread3(c[:, 0]) << np.uint64(2) | spread3(c[:, 1]) << np.uint64(1) | spread3(c[:, 2])
    counts = comm.allgather(len(x))
    first = sum(counts[:comm.rank])
    total = sum(counts)
    keys = np.concatenate(comm.allgather(key))  # every rank's, in global index order
    order = np.argsort(keys, kind="stable")  # (key, global index)
    where = np.empty(total, dtype=np.int64)
    where[order] = np.arange(total)
    # the owner of sorted position k is the r with k in [r total / P, (r + 1) total / P)
    bounds = [(r * total) // comm.size for r in range(comm.size + 1)]
    dest = np.searchsorted(bounds, where[first:first + len(x)], side="right") - 1
    send = np.ascontiguousarray(x[np.argsort(dest, kind="stable")])
    sc = np.bincount(dest, minlength=comm.size) * 3
    rc = np.empty(comm.size, dtype=np.int64)
    comm.Alltoall(sc, rc)
    recv = np.empty(int(rc.sum()), dtype=np.float64)
    comm.Alltoallv([send, sc], [recv, rc])
    return recv.reshape(-1, 3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log2", type=int, default=20)
    ap.add_argument("--dist", choices=("plummer", "uniform"), default="plummer")
    ap.add_argument("--method", default="tree")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--theta", type=float, default=0.6)
    ap.add_argument("--eps", type=float, default=1e-2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--placed", action="store_true",
                    help="each rank's points moved first to its run of the curve (not timed): "
                         "the timed set_points moves no target, as in a simulation's steps")
    ap.add_argument("--plain", action="store_true",
                    help="one rank: time the ordinary (non-distributed) plan, the reference")
    ap.add_argument("--replicated", action="store_true",
                    help="the sources replicated on every rank (no locally essential trees)")
    a = ap.parse_args()
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    n = 1 << a.log2
    chunks = max(1, n // CHUNK)
    mine = [j for j in range(chunks) if j * size // chunks == rank]
    x = np.concatenate([chunk_points(j, a.dist) for j in mine]) if mine else np.zeros((0, 3))
    if chunks == 1:  # fewer points than a chunk: rank 0 has them all
        x = x[:n]
    if a.placed and not a.plain:
        x = placed(comm, x)
    q = np.full(len(x), 1.0 / n)
    opts = dict(kernel="laplace", eps=a.eps, method=a.method, backend=a.backend,
                precision=a.precision)
    if a.method == "tree":
        opts["theta"] = a.theta
    if a.plain and size != 1:
        sys.exit("--plain needs one rank")
    with (fmmkit.Plan(**opts) if a.plain else fmmkit.Plan(comm=comm, **opts)) as plan:
        if a.replicated and not a.plain:
            from fmmkit._lib import mpi_lib
            mpi_lib().fmk_mpi_set_let(plan._handle, 0)
        comm.Barrier()
        t0 = time.perf_counter()
        plan.set_points(x)
        t_set = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
        set_info = plan.mpi_info if not a.plain else None
        best = None
        for _ in range(max(1, a.repeat)):
            comm.Barrier()
            t0 = time.perf_counter()
            r = plan.eval(q)
            dt = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
            best = dt if best is None or dt < best else best
        info = plan.mpi_info if not a.plain else None
        method = plan.info.method
        times = {k: v for k, v in plan.info.times.items() if v > 0}
    # the check: rank 0's first targets against the direct sum over every rank's sources
    ns = min(1000, len(x)) if rank == 0 else 0
    sample = comm.bcast(x[:ns].copy() if rank == 0 else None)
    with fmmkit.Plan(kernel="laplace", method="direct", backend=a.backend) as d:
        d.set_points(x if len(x) else np.zeros((0, 3)), sample)
        part = d.eval(q)
    pot = comm.allreduce(part.pot)
    grad = comm.allreduce(part.grad)
    row = None
    if rank == 0:
        ep = float(np.linalg.norm(r.pot[:ns] - pot) / np.linalg.norm(pot))
        eg = float(np.linalg.norm(r.grad[:ns] - grad) / np.linalg.norm(grad))
        row = dict(ranks=size, n=n, dist=a.dist, method=method, precision=a.precision,
                   theta=a.theta if a.method == "tree" else None, eps=a.eps,
                   set_points_s=t_set, eval_s=best, pot_err=ep, grad_err=eg)
    if a.plain:
        if rank == 0:
            print(json.dumps(row) if a.json else
                  f"plain plan, N = 2^{a.log2} {a.dist}, {method} {a.precision}: set_points "
                  f"{t_set * 1e3:.1f} ms, eval {best * 1e3:.1f} ms; pot err "
                  f"{row['pot_err']:.2e}, grad err {row['grad_err']:.2e}")
            print("  phases: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in times.items()))
        return 0
    phases = ("seconds_partition", "seconds_tree", "seconds_exchange_points",
              "seconds_local_set_points")
    ephases = ("seconds_exchange_charges", "seconds_moments", "seconds_local_eval",
               "seconds_results_home")
    mx = {k: comm.allreduce(set_info[k], op=MPI.MAX) for k in phases}
    mx.update({k: comm.allreduce(info[k], op=MPI.MAX) for k in ephases})
    for k in ("local_sources", "sources_kept", "bytes_sent_points", "bytes_sent_eval",
              "targets_sent"):
        mx[k] = comm.allreduce(set_info[k] if k in ("bytes_sent_points", "targets_sent")
                               else info[k], op=MPI.MAX)
    if rank == 0:
        row.update(mx)
        row["distributed_sources"] = bool(info["distributed_sources"])
        if a.json:
            print(json.dumps(row))
        else:
            print(f"{size} rank(s), N = 2^{a.log2} {a.dist}, {method} {a.precision}: "
                  f"set_points {t_set * 1e3:.1f} ms, eval {best * 1e3:.1f} ms; "
                  f"pot err {row['pot_err']:.2e}, grad err {row['grad_err']:.2e}")
            print(f"  a rank keeps <= {mx['sources_kept']} sources, its local plan has <= "
                  f"{mx['local_sources']} (kept + received); <= {mx['targets_sent']} of a "
                  f"rank's targets evaluated elsewhere")
            print("  set_points (max over ranks): " + ", ".join(
                f"{k[8:]} {mx[k] * 1e3:.1f} ms" for k in phases))
            print("  eval (max over ranks):       " + ", ".join(
                f"{k[8:]} {mx[k] * 1e3:.1f} ms" for k in ephases))
            print("  rank 0's local plan: " + ", ".join(
                f"{k} {v * 1e3:.1f} ms" for k, v in times.items()))
            print(f"  bytes sent by a rank: set_points {mx['bytes_sent_points'] / 1e6:.1f} MB, "
                  f"eval {mx['bytes_sent_eval'] / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
