"""The fmmkit command under mpirun (docs/distributed.md, "The command under mpirun").

ctest runs this file once for each rank count (mpi_cli_ranks_2, mpi_cli_ranks_3): FMMKIT_CLI
names the executable, FMK_MPIEXEC the launcher, FMK_NP the ranks. Each test starts one job of
FMK_NP ranks and compares it with a one-process run of the same command: `fmmkit eval` writes the
same files (bit for bit for --method direct in fp64, within eps for fmm), --per-rank files round
trip, a bad input ends every rank with the same status and one message, `fmmkit bench --json`
reports the ranks. Skipped when the launcher is absent.
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
CLI = os.environ.get("FMMKIT_CLI") or str(HERE.parents[1] / "build" / "cli" / "fmmkit")
MPIEXEC = os.environ.get("FMK_MPIEXEC", "mpirun")
NP = int(os.environ.get("FMK_NP", "2"))
NP_FLAG = os.environ.get("FMK_NP_FLAG", "-np")

pytestmark = pytest.mark.skipif(shutil.which(MPIEXEC) is None, reason=f"{MPIEXEC} not found")

# Each rank's exit status into DIR/rc.RANK, so that a test sees every rank's, not only the
# launcher's (the first nonzero one); the wrapper itself exits 0, else the launcher would kill
# the other ranks before they record theirs.
RECORD = ('"$0" "$@"; s=$?; r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-$PMIX_RANK}}; '
          'echo $s > "$FMK_RC_DIR/rc.$r"')


def env():
    e = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
             OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    return e


def one(*args):
    """The command on one process, without a launcher."""
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=60,
                          env=env())


def job(tmp, *args, np_=NP):
    """The command under the launcher; returns (the launcher's result, each rank's status)."""
    rc_dir = tmp / f"rc{np_}"
    rc_dir.mkdir(exist_ok=True)
    for f in rc_dir.iterdir():
        f.unlink()
    e = env()
    e["FMK_RC_DIR"] = str(rc_dir)
    cmd = [MPIEXEC, "--oversubscribe", NP_FLAG, str(np_), "sh", "-c", RECORD, CLI,
           *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=e)
    statuses = sorted(int(f.name.split(".")[1]) for f in rc_dir.iterdir())
    assert statuses == list(range(np_)), (statuses, r.stderr)
    codes = [int((rc_dir / f"rc.{k}").read_text()) for k in range(np_)]
    return r, codes


def messages(r, cmd="eval"):
    """The command's own lines on stderr (the launcher adds its own)."""
    return [line for line in r.stderr.splitlines() if line.startswith(f"fmmkit {cmd}:")]


def save_problem(tmp, n, m, dim=3, complex_q=False, seed=7):
    rng = np.random.default_rng(seed)
    np.save(tmp / "S.npy", rng.random((n, dim)))
    q = rng.uniform(-1, 1, n)
    if complex_q:
        q = q + 1j * rng.uniform(-1, 1, n)
    np.save(tmp / "Q.npy", q)
    if m:
        np.save(tmp / "T.npy", rng.random((m, dim)))


def eval_args(tmp, tag, targets, *extra):
    args = ["eval", "--sources", tmp / "S.npy", "--charges", tmp / "Q.npy",
            "--out-pot", tmp / f"P{tag}.npy", "--out-grad", tmp / f"G{tag}.npy", *extra]
    return args + (["--targets", tmp / "T.npy"] if targets else [])


# --------------------------------------------------------------------------------------------
# Rank 0's files: the one-process outputs
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel,n,m", [("laplace", 1001, 0), ("plummer", 700, 333),
                                        ("log2d", 500, 0), ("cauchy2d", 400, 151),
                                        ("laplace", 2, 0)])
def test_eval_direct_bitwise(tmp_path, kernel, n, m):
    dim = 2 if kernel in ("log2d", "cauchy2d") else 3
    save_problem(tmp_path, n, m, dim, kernel == "cauchy2d")
    extra = ["--kernel", kernel, "--method", "direct"]
    if kernel == "plummer":
        extra += ["--softening", "0.05"]
    r1 = one(*eval_args(tmp_path, "1", m, *extra))
    assert r1.returncode == 0, r1.stderr
    r, codes = job(tmp_path, *eval_args(tmp_path, "K", m, *extra))
    assert codes == [0] * NP, r.stderr
    assert not messages(r), r.stderr
    for out in "PG":
        assert (tmp_path / f"{out}1.npy").read_bytes() == (tmp_path / f"{out}K.npy").read_bytes()


def test_eval_fmm_within_eps(tmp_path):
    save_problem(tmp_path, 3000, 0)
    extra = ["--method", "fmm", "--eps", "1e-6"]
    assert one(*eval_args(tmp_path, "D", 0, "--method", "direct")).returncode == 0
    assert one(*eval_args(tmp_path, "1", 0, *extra)).returncode == 0
    r, codes = job(tmp_path, *eval_args(tmp_path, "K", 0, *extra))
    assert codes == [0] * NP, r.stderr
    exact = np.load(tmp_path / "PD.npy")
    for tag in "1K":
        p = np.load(tmp_path / f"P{tag}.npy")
        assert np.linalg.norm(p - exact) / np.linalg.norm(exact) < 1e-5


@pytest.mark.parametrize("fmt", ["npz", "h5"])
def test_eval_containers_as_one_process(tmp_path, fmt):
    """.npz and HDF5 files through rank 0 and through --per-rank: the same arrays as the
    one-process run with .npy files (direct, fp64: bit for bit)."""
    if fmt == "h5":
        h5py = pytest.importorskip("h5py")
    save_problem(tmp_path, 300, 0)
    x, q = np.load(tmp_path / "S.npy"), np.load(tmp_path / "Q.npy")
    assert one(*eval_args(tmp_path, "1", 0, "--method", "direct")).returncode == 0
    for k in list(range(NP)) + ["all"]:
        part = slice(None) if k == "all" else slice(k * 300 // NP, (k + 1) * 300 // NP)
        if fmt == "npz":
            np.savez(tmp_path / f"in_{k}.npz", x=x[part], q=q[part])
        else:
            with h5py.File(tmp_path / f"in_{k}.h5", "w") as f:
                f["g/x"], f["g/q"] = x[part], q[part]
    sep, x_name, q_name = (":", "x", "q") if fmt == "npz" else (":", "/g/x", "/g/q")
    for tag, extra in (("all", []), ("{rank}", ["--per-rank"])):
        data = f"{tmp_path}/in_{tag}.{fmt}"
        r, codes = job(tmp_path, "eval", "--method", "direct", *extra, "--sources",
                       data + sep + x_name, "--charges", data + sep + q_name, "--out-pot",
                       f"{tmp_path}/out_{tag}.{fmt}:pot", "--out-grad",
                       f"{tmp_path}/out_{tag}.{fmt}:grad")
        assert codes == [0] * NP, r.stderr

    def read(k, name):
        if fmt == "npz":
            with np.load(tmp_path / f"out_{k}.npz") as z:
                return z[name]
        with h5py.File(tmp_path / f"out_{k}.h5", "r") as f:
            return f[name][()]
    for out, name in (("P", "pot"), ("G", "grad")):
        want = np.load(tmp_path / f"{out}1.npy")
        assert np.array_equal(read("all", name), want)
        assert np.array_equal(np.concatenate([read(k, name) for k in range(NP)]), want)


# --------------------------------------------------------------------------------------------
# --per-rank: each rank's own files
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("targets", [False, True])
def test_per_rank_round_trip(tmp_path, targets):
    """Uneven shares (the last rank none): the concatenated outputs are the one-process run's
    on the concatenated inputs, bit for bit (direct, fp64)."""
    rng = np.random.default_rng(3)
    sizes = [300 + 200 * k for k in range(NP - 1)] + [0]
    t_sizes = [0] + [100 + 50 * k for k in range(NP - 1)]
    xs, qs, ys = [], [], []
    for k in range(NP):
        xs.append(rng.random((sizes[k], 3)))
        qs.append(rng.uniform(-1, 1, sizes[k]))
        ys.append(rng.random((t_sizes[k], 3)))
        np.save(tmp_path / f"S_{k}.npy", xs[k])
        np.save(tmp_path / f"Q_{k}.npy", qs[k])
        np.save(tmp_path / f"T_{k}.npy", ys[k])
    np.save(tmp_path / "S.npy", np.concatenate(xs))
    np.save(tmp_path / "Q.npy", np.concatenate(qs))
    np.save(tmp_path / "T.npy", np.concatenate(ys))
    args = ["eval", "--per-rank", "--method", "direct", "--sources", tmp_path / "S_{rank}.npy",
            "--charges", tmp_path / "Q_{rank}.npy", "--out-pot", tmp_path / "P_{rank}.npy",
            "--out-grad", tmp_path / "G_{rank}.npy"]
    if targets:
        args += ["--targets", tmp_path / "T_{rank}.npy"]
    r, codes = job(tmp_path, *args)
    assert codes == [0] * NP, r.stderr
    assert one(*eval_args(tmp_path, "1", targets, "--method", "direct")).returncode == 0
    for out in "PG":
        got = np.concatenate([np.load(tmp_path / f"{out}_{k}.npy") for k in range(NP)])
        assert np.array_equal(got, np.load(tmp_path / f"{out}1.npy"))


def test_per_rank_needs_rank_in_every_path(tmp_path):
    save_problem(tmp_path, 10, 0)
    r, codes = job(tmp_path, "eval", "--per-rank", "--sources", tmp_path / "S_{rank}.npy",
                   "--charges", tmp_path / "Q.npy", "--out-pot", tmp_path / "P_{rank}.npy")
    assert codes == [2] * NP
    assert len(messages(r)) == 1 and "--charges must contain {rank}" in r.stderr, r.stderr


def test_per_rank_missing_file_on_the_last_rank(tmp_path):
    for k in range(NP - 1):
        np.save(tmp_path / f"S_{k}.npy", np.random.default_rng(k).random((20, 3)))
        np.save(tmp_path / f"Q_{k}.npy", np.ones(20))
    np.save(tmp_path / f"S_{NP - 1}.npy", np.zeros((4, 3)))
    r, codes = job(tmp_path, "eval", "--per-rank", "--sources", tmp_path / "S_{rank}.npy",
                   "--charges", tmp_path / "Q_{rank}.npy", "--out-pot", tmp_path / "P_{rank}.npy")
    assert codes == [2] * NP
    lines = messages(r)
    assert len(lines) == 1 and f"Q_{NP - 1}.npy" in lines[0], r.stderr
    assert not list(tmp_path.glob("P_*")), "no rank writes when one failed"


# --------------------------------------------------------------------------------------------
# Bad input on rank 0: every rank the same status, one message, nothing written
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["missing", "nan", "shape"])
def test_bad_input_same_status_on_every_rank(tmp_path, case):
    save_problem(tmp_path, 50, 0)
    if case == "missing":
        (tmp_path / "Q.npy").unlink()
        want = "cannot open"
    elif case == "nan":
        q = np.load(tmp_path / "Q.npy")
        q[17] = np.nan
        np.save(tmp_path / "Q.npy", q)
        want = "element [17] is nan"
    else:
        np.save(tmp_path / "Q.npy", np.ones(49))
        want = "49 charges for 50 sources"
    r1 = one(*eval_args(tmp_path, "1", 0))
    r, codes = job(tmp_path, *eval_args(tmp_path, "K", 0))
    assert r1.returncode == 2 and codes == [2] * NP, r.stderr
    assert messages(r) == messages(r1) and want in messages(r)[0], (r.stderr, r1.stderr)
    assert not list(tmp_path.glob("PK*")) and not list(tmp_path.glob("GK*"))


def test_launcher_status(tmp_path):
    """Without the recording wrapper: the launcher itself ends with the command's status."""
    save_problem(tmp_path, 50, 0)
    (tmp_path / "S.npy").write_bytes(b"not a .npy file")
    cmd = [MPIEXEC, "--oversubscribe", NP_FLAG, str(NP), CLI,
           *map(str, eval_args(tmp_path, "K", 0))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env())
    assert r.returncode == 2 and len(messages(r)) == 1, r.stderr


def test_library_error_said_once(tmp_path):
    """A status the distributed plan agrees (eps out of range) ends every rank alike."""
    save_problem(tmp_path, 50, 0)
    r, codes = job(tmp_path, *eval_args(tmp_path, "K", 0, "--eps", "2"))
    assert codes == [2] * NP and len(messages(r)) == 1, r.stderr


# --------------------------------------------------------------------------------------------
# bench
# --------------------------------------------------------------------------------------------
def test_bench_json_reports_ranks(tmp_path):
    args = ["bench", "--n", "2500", "--m", "700", "--method", "fmm", "--repeats", "1",
            "--sample", "200", "--json"]
    r, codes = job(tmp_path, *args)
    assert codes == [0] * NP, r.stderr
    rep = json.loads(r.stdout)  # rank 0 alone prints: one object
    assert rep["ranks"] == NP and rep["n_sources"] == 2500 and rep["n_targets"] == 700
    assert rep["sample"] == 200 and rep["error_pot"] < 1e-5 and rep["error_grad"] < 1e-4
    assert rep["eval_time"] > 0 and rep["phase_time"]["setup"] > 0
    assert rep["bytes_host"] >= rep["bytes_host_mean"] > 0
    single = json.loads(one(*args).stdout)
    assert "ranks" not in single and single["n_sources"] == 2500


def test_bench_direct_matches_the_global_sum(tmp_path):
    """The reference is the direct sum over every rank's sources: the distributed direct sum
    agrees with it to rounding, and the table is printed once."""
    r, codes = job(tmp_path, "bench", "--n", "1500", "--method", "direct", "--kernel",
                   "plummer", "--repeats", "1", "--sample", "100")
    assert codes == [0] * NP, r.stderr
    assert r.stdout.count("fmmkit bench:") == 1 and f"ranks                      {NP}" in r.stdout
    err = [float(line.split()[1]) for line in r.stdout.splitlines()
           if line.strip().startswith(("potential", "gradient"))]
    assert len(err) == 2 and max(err) < 1e-13, r.stdout
