"""cosmo_figures.py -- the figures of docs/cosmology.md's "The paper's run" from a comoving run's
output: the time and interactions per step and the Layzer-Irvine error over the run (from
DIR/diagnostics.csv), and the density projections at the paper's redshifts side by side.

    python3 tools/cosmo_figures.py --diag DIR/diagnostics.csv --png z8.9.png z2.5.png \
        z0.93.png z0.png --labels 8.9 2.5 0.93 0 --out docs/

Writes OUT/cosmo-run.png and OUT/cosmo-projections.png (matplotlib; Pillow reads the PNGs).
The cosmology for the time axis: --omega-m 0.3 --hubble 0.7 (flat; the run's own)."""
import argparse
import csv
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402


def cosmic_time_gyr(a, omega_m, h):
    """Flat Lambda-CDM t(a) in Gyr (the closed form)."""
    ol = 1 - omega_m
    h0 = 100 * h / 977.792  # km/s/Mpc to 1/Gyr
    return 2 / (3 * h0 * math.sqrt(ol)) * np.arcsinh(math.sqrt(ol / omega_m) * a ** 1.5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--diag", required=True)
    ap.add_argument("--png", nargs="*", default=[])
    ap.add_argument("--labels", nargs="*", default=[])
    ap.add_argument("--out", default="docs")
    ap.add_argument("--omega-m", type=float, default=0.3)
    ap.add_argument("--hubble", type=float, default=0.7)
    args = ap.parse_args()

    rows = list(csv.DictReader(open(args.diag)))
    a = np.array([float(r["a"]) for r in rows])
    ms = 1e3 * np.array([float(r["wall_s"]) for r in rows])
    inter = np.array([float(r["interactions"]) for r in rows])
    li = np.array([float(r["li_error"]) for r in rows])
    t = cosmic_time_gyr(a, args.omega_m, args.hubble)

    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    ax[0].plot(t[1:], ms[1:], lw=0.6)
    ax[0].set(xlabel="cosmic time (Gyr)", ylabel="ms per step", title="Time per step")
    ax[0].set_ylim(0, None)
    ax[1].plot(t, inter / 1e9, lw=0.8)
    ax[1].set(xlabel="cosmic time (Gyr)", ylabel="interactions per step (1e9)",
              title="Interactions per step")
    ax[1].set_ylim(0, None)
    ax[2].plot(a, 100 * li, lw=0.8)
    ax[2].axhline(1, color="grey", ls="--", lw=0.6)
    ax[2].axhline(-1, color="grey", ls="--", lw=0.6)
    ax[2].set(xlabel="scale factor a", ylabel="Layzer-Irvine error (%)",
              title="(C - C_start) / max |a W|")
    fig.tight_layout()
    os.makedirs(args.out, exist_ok=True)
    fig.savefig(os.path.join(args.out, "cosmo-run.png"), dpi=90)

    if args.png:
        fig, ax = plt.subplots(1, len(args.png), figsize=(4 * len(args.png), 4.3))
        ax = np.atleast_1d(ax)
        for k, path in enumerate(args.png):
            ax[k].imshow(np.asarray(Image.open(path)))
            ax[k].set_axis_off()
            if k < len(args.labels):
                ax[k].set_title(f"z = {args.labels[k]}")
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "cosmo-projections.png"), dpi=55)


if __name__ == "__main__":
    main()
