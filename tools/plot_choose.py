"""Draws docs/choosing-time.png, time against N of the direct sum and the FMM per backend, from
the tables bench_choose printed (bench/history/choose-*.md). Needs matplotlib.

    python3 tools/plot_choose.py bench/history/choose-cpu-2026-11-28.md \
        bench/history/choose-gpu-2026-11-28.md docs/choosing-time.png
"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(path):
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0] in ("cpu", "cuda"):
            yield cells[0], int(cells[1]), cells[2], float(cells[3]), int(cells[4]), \
                float(cells[5]), float(cells[6])


def main(paths, out):
    data = [r for p in paths for r in rows(p)]
    panels = [("cpu", 3, "fp64"), ("cpu", 2, "fp64"), ("cuda", 3, "fp64"), ("cuda", 3, "fp32"),
              ("cuda", 2, "fp64")]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.6))
    for ax, (b, d, p) in zip(axes, panels):
        sel = [r for r in data if r[0] == b and r[1] == d and r[2] == p]
        ns = sorted({r[4] for r in sel})
        direct = {r[4]: r[5] for r in sel if r[5] > 0}
        ax.loglog([n for n in ns if n in direct], [direct[n] for n in ns if n in direct],
                  "k-o", ms=3, label="direct")
        for eps, style in ((1e-3, "b-s"), (1e-6, "g-^"), (1e-9, "r-v")):
            pts = [(r[4], r[6]) for r in sel if r[3] == eps and r[6] > 0]
            if pts:
                ax.loglog(*zip(*sorted(pts)), style, ms=3, label=f"fmm eps {eps:g}")
        ax.set_title(f"{b} {d}D {p}")
        ax.set_xlabel("N (targets = sources)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("one-shot call, ms")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=90)


if __name__ == "__main__":
    main(sys.argv[1:-1], sys.argv[-1])
