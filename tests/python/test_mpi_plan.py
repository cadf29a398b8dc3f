"""fmmkit.Plan(comm=...) under mpirun (ctest mpi_python_ranks_2 and _3, label mpi):

    mpirun --oversubscribe -np 3 python3 tests/python/test_mpi_plan.py

Every rank gives an uneven share of the points (the last rank none of the sources), and the
results at its targets must equal those of a one-rank fmmkit.Plan on the gathered points: bit for
bit for method="direct" in fp64, within eps for fmm and tree. A NaN on one rank raises the same
error class on every rank, a bad shape on one rank raises on every rank, and the plan goes on
working. Exit status 0: passed; 77: skipped (no mpi4py); 1: failed. Not a pytest module (pytest
would start MPI in its own process): conftest.py leaves it out of the pytest run.
"""
import os
import sys
import traceback

import numpy as np

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))


class Checks:
    def __init__(self, comm):
        self.comm, self.rank, self.size = comm, comm.Get_rank(), comm.Get_size()
        self.failures = 0

    def check(self, ok, what):
        """ok on this rank; the verdict is the same on every rank (all of them must be ok)."""
        every = self.comm.allreduce(bool(ok), op=self.MPI.LAND)
        if not every:
            self.failures += 1
            if not ok:
                print(f"rank {self.rank}: FAIL {what}", file=sys.stderr, flush=True)
        return every

    def expect(self, fn, cls, what):
        """fn() must raise cls on this rank; returns the exception (or None)."""
        try:
            fn()
        except cls as e:
            self.check(True, what)
            return e
        except Exception as e:  # another class: a failure, but keep going
            self.check(False, f"{what}: raised {type(e).__name__}: {e}")
            return None
        self.check(False, f"{what}: nothing raised")
        return None


def shares(n, size):
    """first[r]..first[r+1]: uneven shares, weights 1, 3, 2, 5, ..., none for the last rank."""
    weight = [1, 3, 2, 5, 4, 1, 2, 3]
    w = [0 if size > 1 and r == size - 1 else weight[r % 8] for r in range(size)]
    acc = np.concatenate([[0], np.cumsum(w)])
    return [n * int(a) // int(acc[-1]) for a in acc]


def points(rng, n, dim, kind):
    x = rng.random((n, dim))
    if kind == "clusters":
        x = 0.1 * x + 100.0 * (np.arange(n) % 2)[:, None]
    return x


def run_case(t, fmmkit, kernel, method, eps, self_eval, kind, seed):
    """One kernel/method: the distributed plan against the one-rank plan on the gathered
    points; each rank draws its own share with its own seed."""
    comm, rank, size = t.comm, t.rank, t.size
    dim = 2 if kernel in ("log2d", "cauchy2d") else 3
    cplx = kernel == "cauchy2d"
    rng = np.random.default_rng(1000 * seed + rank)
    ns_all, nt_all = 900, 400
    sf, tf = shares(ns_all, size), shares(nt_all, size)
    if size > 1:  # targets: the last rank has some, the first none
        tf = [nt_all - v for v in tf[::-1]]
    ns, nt = sf[rank + 1] - sf[rank], tf[rank + 1] - tf[rank]
    xs = points(rng, ns, dim, kind)
    xt = None if self_eval else points(rng, nt, dim, kind)
    q = rng.random(ns) - 0.3
    if cplx:
        q = q + 1j * (rng.random(ns) - 0.5)
    opts = dict(kernel=kernel, eps=eps, method=method, backend="cpu",
                softening=0.05 if kernel == "plummer" else None,
                leaf_size=None if method == "direct" else 16)
    with fmmkit.Plan(comm=comm, **opts) as plan:
        t.check(plan.distributed, "Plan(comm=...).distributed")
        plan.set_points(xs, xt)
        r = plan.eval(q)
        qq = np.stack([q, 2 * q])
        rm = plan.eval_many(qq, grad=False)
        # the treecode and the 3D FMM keep each rank's sources on it (3D, size > 1)
        mi = plan.mpi_info
        let = method == "tree" or (method == "fmm" and kernel in ("laplace", "plummer",
                                                                  "regularized"))
        t.check(mi["ranks"] == size and mi["distributed_sources"] == (let and size > 1 and
                                                                      dim == 3)
                and mi["local_sources"] >= 0 and mi["seconds_local_eval"] >= 0
                and 0 <= mi["targets_sent"] <= len(xs if xt is None else xt),
                f"{kernel} {method}: mpi_info {mi}")
    # the one-rank reference on the gathered points (every rank computes it: small N)
    gx = np.concatenate(comm.allgather(xs))
    gq = np.concatenate(comm.allgather(q))
    gt = None if self_eval else np.concatenate(comm.allgather(xt))
    mine = slice(sf[rank], sf[rank + 1]) if self_eval else slice(tf[rank], tf[rank + 1])
    with fmmkit.Plan(**opts) as one:
        one.set_points(gx, gt)
        ref = one.eval(gq)
    label = f"{kernel} {method} {kind} {'self' if self_eval else 'targets'}"
    if method == "direct":
        same = (np.array_equal(r.pot, ref.pot[mine]) and np.array_equal(r.grad, ref.grad[mine])
                and np.array_equal(rm.pot[0], ref.pot[mine])
                and np.array_equal(rm.pot[1], 2 * ref.pot[mine]))
        t.check(same, f"{label}: not bit for bit the one-rank direct sum")
        return
    with fmmkit.Plan(**dict(opts, method="direct", leaf_size=None)) as d:
        d.set_points(gx, gt)
        exact = d.eval(gq)

    def err(a, b):  # relative l2 over all the targets
        num = comm.allreduce(float(np.sum(np.abs(a - b) ** 2)))
        den = comm.allreduce(float(np.sum(np.abs(b) ** 2)))
        return np.sqrt(num / den) if den > 0 else np.sqrt(num)
    e_mpi = err(r.pot, exact.pot[mine])
    g_mpi = err(r.grad, exact.grad[mine])
    e_one = np.sqrt(np.sum(np.abs(ref.pot - exact.pot) ** 2) / np.sum(np.abs(exact.pot) ** 2))
    g_one = np.sqrt(np.sum(np.abs(ref.grad - exact.grad) ** 2) /
                    np.sum(np.abs(exact.grad) ** 2))
    if rank == 0:
        print(f"  {label}: pot err {e_mpi:.2e} (one rank {e_one:.2e}), grad err {g_mpi:.2e} "
              f"({g_one:.2e})", flush=True)
    # within eps, and near the one-rank plan's own error (the treecode's walk groups each
    # rank's targets apart, so its error differs a little with the share)
    floor = eps if method == "fmm" else 1e-2 * eps
    t.check(e_mpi <= eps and g_mpi <= 10 * eps and
            e_mpi <= 2 * e_one + floor and g_mpi <= 2 * g_one + 10 * floor,
            f"{label}: error {e_mpi:.3e} / {g_mpi:.3e} against one rank {e_one:.3e} / "
            f"{g_one:.3e}")


class FakeGpuArray:
    """Says it lives on a CUDA device (DLPack device type 2): refused before any use."""
    shape = (5, 3)

    def __dlpack_device__(self):
        return (2, 0)


def failures(t, fmmkit):
    """Failures on one rank only: the same error class on every rank; the plan stays usable."""
    comm, rank, size = t.comm, t.rank, t.size
    bad = size - 1 if size > 1 else 0
    rng = np.random.default_rng(7 + rank)
    n = 40 + 17 * rank
    x, q = rng.random((n, 3)), rng.random(n)
    with fmmkit.Plan(comm=comm, kernel="laplace", method="direct", backend="cpu") as plan:
        plan.set_points(x)
        before = plan.eval(q).pot
        # a NaN in the sources of one rank: FmkValueError everywhere, naming that rank
        xn = x.copy()
        if rank == bad:
            xn[n // 2, 1] = np.nan
        e = t.expect(lambda: plan.set_points(xn), fmmkit.FmkValueError, "NaN in sources")
        t.check(e is not None and e.status == fmmkit.Status.ERR_NONFINITE
                and f"rank {bad}" in str(e), f"NaN in sources: {e!r}")
        t.check(np.array_equal(plan.eval(q).pot, before), "points kept after a refused NaN")
        # a NaN in the charges of one rank
        qn = q.copy()
        if rank == bad:
            qn[0] = np.nan
        e = t.expect(lambda: plan.eval(qn), fmmkit.FmkValueError, "NaN in charges")
        t.check(e is not None and e.status == fmmkit.Status.ERR_NONFINITE,
                f"NaN in charges: {e!r}")
        # what Python refuses on one rank (a bad shape): a FmkValueError on every rank too
        qs = q[:-1] if rank == bad else q
        e = t.expect(lambda: plan.eval(qs), fmmkit.FmkValueError, "bad charge shape on one rank")
        t.check(e is not None and (rank == bad or f"rank {bad}" in str(e)),
                f"the others' message names rank {bad}: {e}")
        xs = x[:, :2] if rank == bad else x
        t.expect(lambda: plan.set_points(xs), fmmkit.FmkValueError, "bad point shape on one rank")
        qm = np.stack([q, q])[:, :-1] if rank == bad else np.stack([q, q])
        t.expect(lambda: plan.eval_many(qm), fmmkit.FmkValueError, "bad eval_many shape")
        t.check(np.array_equal(plan.eval(q).pot, before), "the plan works after the failures")
        # GPU arrays: not for distributed plans yet
        e = t.expect(lambda: plan.set_points(FakeGpuArray()), fmmkit.FmkUnavailableError,
                     "GPU array")
        t.check(e is not None and "GPU" in str(e), f"GPU array message: {e}")
        t.check(np.array_equal(plan.eval(q).pot, before), "the plan works after a GPU array")
    t.check(plan.closed, "closed by with")
    t.expect(lambda: plan.eval(q), fmmkit.FmkStateError, "eval after close")
    # arguments that differ between ranks, or are invalid on one: refused on every rank
    if size > 1:
        t.expect(lambda: fmmkit.Plan(comm=comm, eps=1e-5 if rank else 1e-6),
                 fmmkit.FmkValueError, "eps differing between ranks")
    t.expect(lambda: fmmkit.Plan(comm=comm, eps=2.0 if rank == bad else 1e-6),
             fmmkit.FmkValueError, "invalid eps on one rank")
    # a name Python refuses on one rank before any C call: every rank still fails, none waits
    t.expect(lambda: fmmkit.Plan(comm=comm, kernel="bogus" if rank == bad else "laplace"),
             fmmkit.FmkValueError, "unknown kernel name on one rank")
    t.expect(lambda: fmmkit.Plan(comm=comm, method="bogus" if rank == bad else "direct"),
             fmmkit.FmkValueError, "unknown method name on one rank")
    t.expect(lambda: fmmkit.Plan(comm="world"), fmmkit.FmkTypeError, "comm not a communicator")
    # a communicator of its own: Split into two halves, each its own sum
    sub = comm.Split(rank % 2, rank)
    with fmmkit.Plan(comm=sub, method="direct", backend="cpu") as plan:
        plan.set_points(x)
        p = plan.eval(q).pot
    gx, gq = np.concatenate(sub.allgather(x)), np.concatenate(sub.allgather(q))
    with fmmkit.Plan(method="direct", backend="cpu") as one:
        one.set_points(gx)
        off = sum(len(v) for v in sub.allgather(x)[:sub.Get_rank()])
        t.check(np.array_equal(p, one.eval(gq).pot[off:off + n]), "Split communicator")
    sub.Free()


def main():
    try:
        from mpi4py import MPI
    except ImportError as e:
        print(f"test_mpi_plan: skipped, no mpi4py ({e}; pip install mpi4py)")
        return SKIP
    import fmmkit
    comm = MPI.COMM_WORLD
    t = Checks(comm)
    Checks.MPI = MPI
    cases = [("laplace", "direct", 1e-6), ("plummer", "direct", 1e-6), ("log2d", "direct", 1e-6),
             ("cauchy2d", "direct", 1e-6), ("laplace", "fmm", 1e-5), ("plummer", "fmm", 1e-5),
             ("laplace", "tree", 1e-2)]
    seed = 0
    try:
        for kernel, method, eps in cases:
            for kind in ("uniform", "clusters"):
                for self_eval in (True, False):
                    seed += 1
                    run_case(t, fmmkit, kernel, method, eps, self_eval, kind, seed)
        failures(t, fmmkit)
    except Exception:  # one rank failing unexpectedly: the job is aborted, not left hanging
        traceback.print_exc()
        sys.stderr.flush()
        comm.Abort(1)
    total = comm.allreduce(t.failures)
    if t.rank == 0:
        print(f"test_mpi_plan on {t.size} rank{'s' if t.size > 1 else ''}: "
              f"{'FAILED' if total else 'ok'} ({total} failure{'' if total == 1 else 's'})")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
