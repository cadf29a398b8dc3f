#!/usr/bin/env python3
"""Compares runs of tests/golden/golden (before and after a change that must not change
behaviour): their stdout logs line by line (status and output hash of every case) and, from
DIR/<case>.bin, the largest difference of the outputs relative to the largest |old| value.

    tools/same-results.py OLD.log OLD_DIR NEW.log NEW_DIR [OLD2.log OLD2_DIR]

With a second run of the old build (OLD2), a case whose old outputs differ from run to run is
not deterministic (atomic sums on the GPU): it passes when the new outputs are as close to the
old as the two old runs are to each other (within 10x, or 1e-14 relative). Prints one line per
case that differs and a summary; exits 1 when any case fails."""
import os
import sys

import numpy as np


def read_log(path):
    cases = {}
    for line in open(path):
        name, _, rest = line.rstrip("\n").partition(": ")
        cases[name] = rest
    return cases


def rel_diff(dir_a, dir_b, name):
    fa, fb = os.path.join(dir_a, name + ".bin"), os.path.join(dir_b, name + ".bin")
    if not (os.path.exists(fa) and os.path.exists(fb)):
        return None
    x, y = np.fromfile(fa), np.fromfile(fb)
    if x.shape != y.shape:
        return None
    scale = np.max(np.abs(x)) if x.size else 0.0
    return float(np.max(np.abs(x - y)) / (scale or 1.0)) if x.size else 0.0


def main():
    if len(sys.argv) not in (5, 7):
        print(__doc__)
        return 2
    old, old_dir, new, new_dir = sys.argv[1:5]
    a, b = read_log(old), read_log(new)
    a2 = read_log(sys.argv[5]) if len(sys.argv) == 7 else None
    same = spread = fail = 0
    for name in sorted(set(a) | set(b)):
        ra, rb = a.get(name, "(missing)"), b.get(name, "(missing)")
        if ra == rb:
            same += 1
            continue
        d_new = rel_diff(old_dir, new_dir, name)
        if a2 is not None and a2.get(name) != ra and ra.startswith("ok") and rb.startswith("ok"):
            d_old = rel_diff(old_dir, sys.argv[6], name)
            if d_new is not None and d_old is not None and d_new <= max(10 * d_old, 1e-14):
                spread += 1
                continue
            print("DIFFERS (not deterministic) %s\n  old: %s\n  new: %s\n  old/old2 %s, old/new %s"
                  % (name, ra, rb, d_old, d_new))
            fail += 1
            continue
        fail += 1
        print("DIFFERS %s\n  old: %s\n  new: %s%s" % (name, ra, rb,
              "" if d_new is None else "\n  max |diff| / max |old| = %.3e" % d_new))
    print("same-results: %d cases identical, %d within the old build's run-to-run spread, "
          "%d differ" % (same, spread, fail))
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
