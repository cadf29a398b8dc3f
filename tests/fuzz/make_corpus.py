#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses: tests/fuzz/corpus/npy/ (small .npy files, valid
and broken) and tests/fuzz/corpus/api/ (inputs for fuzz_api's decoder). Standard library only;
run it again after changing fuzz_api.c's decoder. Usage: python3 tests/fuzz/make_corpus.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def npy(descr, shape, data, version=1, order="False", raw_header=None):
    shape_text = "(" + "".join(f"{d}, " if len(shape) > 1 else f"{d}," for d in shape).rstrip(" ") + ")"
    head = raw_header if raw_header is not None else \
        f"{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape_text}, }}"
    len_bytes = 2 if version == 1 else 4
    total = (6 + 2 + len_bytes + len(head) + 1 + 63) // 64 * 64
    head = head + " " * (total - 6 - 2 - len_bytes - len(head) - 1) + "\n"
    size = struct.pack("<H" if version == 1 else "<I", len(head))
    return b"\x93NUMPY" + bytes([version, 0]) + size + head.encode() + data


def f8(*v):
    return struct.pack(f"<{len(v)}d", *v)


def f4(*v):
    return struct.pack(f"<{len(v)}f", *v)


NPY = {
    "points_3x3.npy": npy("<f8", (3, 3), f8(0, 0, 0, 1, 0, 0, 0, 1, 0)),
    "points_2x2_f4.npy": npy("<f4", (2, 2), f4(0.5, 0.25, -1, 2)),
    "charges_4.npy": npy("<f8", (4,), f8(1, -1, 0.5, 2)),
    "complex_2.npy": npy("<c16", (2,), f8(1, 0, 0, 1)),
    "complex64_3.npy": npy("<c8", (3,), f4(1, 2, 3, 4, 5, 6)),
    "scalar.npy": npy("<f8", (), f8(3.0)),
    "empty_0x3.npy": npy("<f8", (0, 3), b""),
    "v2_nan_inf.npy": npy("<f8", (3,), f8(float("nan"), float("inf"), -0.0), version=2),
    "v3_3d.npy": npy("<f8", (1, 2, 1), f8(1, 2), version=3),
    "big_endian.npy": npy(">f8", (1,), struct.pack(">d", 1.0)),
    "fortran.npy": npy("<f8", (2, 1), f8(1, 2), order="True"),
    "truncated.npy": npy("<f8", (1000,), f8(1, 2, 3)),
    "huge_shape.npy": npy("<f8", (1 << 40, 1 << 20), b""),
    "bad_dict.npy": npy("", (), b"", raw_header="{'descr': '<f8', 'shape': (2,), 'shape': (2,)}"),
}


class Api:
    """Builds fuzz_api inputs byte by byte, in decode()'s order (see fuzz_api.c)."""

    def __init__(self, dim_sel, kernel, eps_sel, method, precision=0, threads_sel=1,
                 order=0, leaf=0, soft_sel=0, theta_sel=0, walk=0, ns=8, nt_byte=0, nvec=1):
        # 35 % 7 == 0: the kernel byte is >= 32 (dimension from the kernel) and picks kernel
        self.b = bytearray([dim_sel, 35 + kernel, eps_sel, method, precision, threads_sel,
                            order, leaf, soft_sel])
        if kernel in (2, 3):
            self.b.append(0)  # keep the default softening 0.1 when soft_sel picks 0
        self.b += bytes([theta_sel, walk, ns, nt_byte, nvec])

    def moderate(self, v):  # value() with sel < 176: int8/16 + byte/4096
        whole = max(-128, min(127, int(v * 16)))
        self.b += bytes([0, whole & 0xFF, 0])

    def hostile(self, index):  # value() with a table entry
        self.b += bytes([176, index])

    def point(self, coords):
        self.b.append(0)
        for v in coords:
            self.moderate(v) if isinstance(v, (int, float)) else self.hostile(v[1])

    def duplicate(self, of):
        self.b.append(224 + of)


def api_seeds():
    seeds = {}
    grid = lambda i, d: [((i * 7 + k * 3) % 11) / 3.0 - 1.5 for k in range(d)]
    # (name, dim_sel, kernel, eps_sel (index of epss), method, precision, order byte, leaf byte)
    cases = [("direct_laplace", 1, 1, 2, 1, 0, 0, 0), ("fmm_laplace", 1, 1, 2, 3, 0, 0, 0),
             ("fmm_laplace_tight", 1, 1, 4, 3, 0, 0, 130), ("tree_laplace", 1, 1, 1, 2, 0, 0, 0),
             ("fmm_plummer", 1, 2, 2, 3, 0, 0, 0), ("direct_regularized_fp32", 1, 3, 13, 1, 1, 0, 0),
             ("fmm_log2d", 0, 4, 2, 3, 0, 0, 0), ("fmm_cauchy2d", 0, 5, 3, 3, 0, 0, 0),
             ("direct_cauchy2d", 0, 5, 2, 1, 0, 0, 0), ("fmm_order_12", 1, 1, 2, 3, 0, 140, 130),
             ("tree_plummer_walk", 1, 2, 1, 2, 0, 0, 0)]
    for name, dim_sel, kernel, eps_sel, method, prec, order, leaf in cases:
        dim = 2 if kernel >= 4 else 3
        a = Api(dim_sel, kernel, eps_sel, method, prec, order=order, leaf=leaf,
                walk=2 if "walk" in name else 0, ns=24, nt_byte=130 + 5)  # 135 % 65 = 5 targets
        for i in range(24):
            a.point(grid(i, dim))
        for i in range(5):
            a.point(grid(i + 50, dim))
        for i in range(2 * 24 * (2 if kernel == 5 else 1)):
            a.moderate(((i * 5) % 9 - 4) / 2.0)
        seeds[name] = bytes(a.b)
    # hostile: a NaN coordinate, duplicates, tiny and huge values; self-evaluation
    a = Api(1, 1, 2, 3, ns=6, nt_byte=0)
    a.point([0.5, ("h", 3), 1.0])
    a.duplicate(0)
    a.point([("h", 5), ("h", 1), ("h", 12)])
    a.point([1.0, 2.0, 3.0])
    a.duplicate(3)
    a.point([("h", 8), 0, 0])
    for i in range(12):
        a.moderate(1.0)
    seeds["hostile_points"] = bytes(a.b)
    return seeds


def main():
    for sub, files in (("npy", NPY), ("api", api_seeds())):
        out = os.path.join(HERE, "corpus", sub)
        os.makedirs(out, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)
        print(f"{out}: {len(files)} files")


if __name__ == "__main__":
    main()
