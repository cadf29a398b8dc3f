#!/usr/bin/env python3
"""Compares two runs of tests/golden/golden (before and after a change that must not change
behaviour): their stdout logs line by line (status and output hash of every case) and, where both
wrote DIR/<case>.bin, the largest relative difference of the outputs.

    tools/same-results.py OLD.log OLD_DIR NEW.log NEW_DIR

Prints one line per case that differs and a summary; exits 1 when any case differs."""
import os
import sys

import numpy as np


def read_log(path):
    cases = {}
    for line in open(path):
        name, _, rest = line.rstrip("\n").partition(": ")
        cases[name] = rest
    return cases


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    old, old_dir, new, new_dir = sys.argv[1:]
    a, b = read_log(old), read_log(new)
    same = differ = 0
    for name in sorted(set(a) | set(b)):
        ra, rb = a.get(name, "(missing)"), b.get(name, "(missing)")
        if ra == rb:
            same += 1
            continue
        differ += 1
        detail = ""
        fa, fb = os.path.join(old_dir, name + ".bin"), os.path.join(new_dir, name + ".bin")
        if os.path.exists(fa) and os.path.exists(fb):
            x, y = np.fromfile(fa), np.fromfile(fb)
            if x.shape == y.shape:
                scale = np.max(np.abs(x)) or 1.0
                detail = " max |diff| / max |old| = %.3e" % (np.max(np.abs(x - y)) / scale)
        print("DIFFERS %s\n  old: %s\n  new: %s%s" % (name, ra, rb, detail))
    print("same-results: %d cases identical, %d differ" % (same, differ))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
