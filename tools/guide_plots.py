#!/usr/bin/env python3
"""The user guide's plots, from benchmark JSON (docs/data/*.json), never drawn by hand.

    tools/guide_plots.py measure BUILD/cli/fmmkit docs/data/bench-cpu.json   # runs fmmkit bench
    tools/guide_plots.py plot docs/data/bench-cpu.json [docs/data/bench-gpu.json] --out docs

measure runs `fmmkit bench --json` over a small grid (laplace, uniform cube, targets = sources:
time against N per method, and error against time per eps at one N) and writes the JSON it
printed, one object per run, with the machine and the date. plot draws, per JSON file,
guide-time-vs-n-<label>.png and guide-error-vs-time-<label>.png (matplotlib, Agg).

A JSON file is {"label", "machine", "date", "source", "runs": [...]}; each run has at least
method, n_sources, eps, eval_time (seconds) and error_pot (the fields of `fmmkit bench --json`),
and series ("time-vs-n" or "error-vs-time"); an optional name is its curve's legend. The direct
sum's error (0: it is the reference) is drawn at 1e-16.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

SIZES = [1000, 2000, 4000, 8000, 16000, 32000]
TIME_EPS = {"direct": 1e-6, "tree": 1e-3, "fmm": 1e-6}
SWEEP_N = 16000
SWEEP = {"fmm": [1e-2, 1e-3, 1e-4, 1e-6, 1e-8, 1e-10], "tree": [1e-2, 3e-3, 1e-3],
         "direct": [1e-6]}


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores ({platform.system()} {platform.machine()})"


def bench(exe, method, n, eps):
    cmd = [exe, "bench", "--json", "--method", method, "--backend", "cpu", "--dist", "uniform",
           "--n", str(n), "--eps", repr(eps), "--repeats", "5", "--sample", "500",
           "--threads", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    run = json.loads(out.stdout)
    run["command"] = " ".join(["fmmkit"] + cmd[1:])
    return run


def measure(exe, path):
    runs = []
    for method, eps in TIME_EPS.items():
        for n in SIZES:
            runs.append(dict(bench(exe, method, n, eps), series="time-vs-n"))
            print(method, n, runs[-1]["eval_time"], file=sys.stderr)
    for method, sweep in SWEEP.items():
        for eps in sweep:
            runs.append(dict(bench(exe, method, SWEEP_N, eps), series="error-vs-time"))
            print(method, eps, runs[-1]["eval_time"], runs[-1]["error_pot"], file=sys.stderr)
    doc = {"label": "cpu", "machine": machine() + ", --threads 1",
           "date": datetime.date.today().isoformat(),
           "source": "measured by tools/guide_plots.py measure (fmmkit bench --json, CPU "
                     "backend, laplace, uniform cube, targets = sources, one thread, median of 5 "
                     "evals); "
                     "a shared 2-core machine under load from other jobs, so the "
                     "times are indicative only",
           "runs": runs}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


MARK = {"direct": "s", "tree": "^", "fmm": "o"}
FLOOR = 1e-16  # an error of 0 (the direct sum is its own reference) is drawn here


def name_of(run):
    """The legend of a run's curve: its own "name", else method and eps."""
    if run.get("name"):
        return run["name"]
    if run["method"] == "direct" or run.get("eps") is None:
        return run["method"]
    return f"{run['method']} (eps {run['eps']:g})"


def plot(paths, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        label, runs = doc["label"], doc["runs"]
        title = f"{doc['machine']}\n{doc['date']}"

        fig, ax = plt.subplots(figsize=(6, 4.2))
        series = {}
        for r in runs:
            if r.get("series", "time-vs-n") == "time-vs-n":
                key = name_of(r)
                series.setdefault(key, []).append((r["n_sources"], r["eval_time"]))
        for key, pts in sorted(series.items()):
            pts.sort()
            ax.loglog([p[0] for p in pts], [p[1] for p in pts], marker=MARK.get(key.split()[0]),
                      label=key)
        ax.set_xlabel("N (sources = targets)")
        ax.set_ylabel("eval time [s]")
        ax.set_title(f"eval time against N: {title}", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        out = os.path.join(outdir, f"guide-time-vs-n-{label}.png")
        fig.savefig(out, dpi=100)
        plt.close(fig)
        written.append(out)

        sweep = [r for r in runs if r.get("series") == "error-vs-time"]
        if not sweep:
            continue
        fig, ax = plt.subplots(figsize=(6, 4.2))
        for method in sorted({r["method"] for r in sweep}):
            pts = sorted((r["eval_time"], max(r["error_pot"], FLOOR), r["eps"]) for r in sweep
                         if r["method"] == method and r.get("error_pot") is not None)
            ax.loglog([p[0] for p in pts], [p[1] for p in pts], marker=MARK.get(method),
                      label=f"{method}, N = {sweep[0]['n_sources']}")
            for t, e, eps in pts:
                text = "exact" if method == "direct" else f"{eps:g}"
                ax.annotate(text, (t, e), textcoords="offset points", xytext=(4, 3),
                            fontsize=7)
        ax.set_xlabel("eval time [s]")
        ax.set_ylabel("relative l2 error of the potential")
        ax.set_title(f"error against time (labels: eps): {title}", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        out = os.path.join(outdir, f"guide-error-vs-time-{label}.png")
        fig.savefig(out, dpi=100)
        plt.close(fig)
        written.append(out)
    return written


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("fmmkit")
    m.add_argument("json")
    q = sub.add_parser("plot")
    q.add_argument("json", nargs="+")
    q.add_argument("--out", default="docs")
    a = p.parse_args()
    if a.cmd == "measure":
        measure(a.fmmkit, a.json)
    else:
        for out in plot(a.json, a.out):
            print(out)


if __name__ == "__main__":
    main()
