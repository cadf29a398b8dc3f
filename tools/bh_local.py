#!/usr/bin/env python3
"""bh_local.py -- writes bh_local.h, the treecode's cell-to-group terms (M2L into a Cartesian
Taylor expansion about a group's centre, and its evaluation L2P), as straight-line C for any
REAL (the conventions of bh_terms.h).  Run `python3 tools/bh_local.py > src/treecode/bh_local.h`.

Math (G(r) = (|r|^2 + eps2)^-1/2; multi-indices k = (kx, ky, kz), |k| = kx + ky + kz):
  Taylor coefficients A_k(r) = (1/k!) d^k G(r) from the recurrence of the Cartesian Taylor
  treecodes (Duan & Krasny 2001; Lindsay & Krasny 2001 for 1/sqrt(|r|^2 + eps2)), written here
  for derivatives in r (checked against M2P in tests/unit/test_tree.c):
      |k| R^2 A_k = -(2|k| - 1) sum_i r_i A_{k - e_i} - (|k| - 1) sum_i A_{k - 2 e_i},
      A_0 = R^-1, R^2 = |r|^2 + eps2.
  A node with raw moments M_a = sum_j q_j d_j^a (d = x - xc; M, D, S of tree3d.h, |a| <= 2)
  has the field phi(y) = sum_a (-1)^|a| M_a A_a(y - xc) (bh_terms.h's M2P).  Its Taylor
  expansion about a centre c, r0 = c - xc, to order P in delta = y - c:
      phi(c + delta) = sum_{|b| <= P} L_b delta^b,
      L_b = sum_a (-1)^|a| M_a C(a + b, a) A_{a + b}(r0),   C(a + b, a) = prod_i binom(a_i + b_i, a_i).
  Orders 2 and 3 keep the terms with |a| + |b| <= P + 1: those dropped (|a| = 2, |b| = P) are
  of the order of the expansion's own truncation, (s / |r0|)^2 (|delta| / |r0|)^P against
  (|delta| / |r0|)^(P + 1), s the node's size, and they would need the A_k of order P + 2.
  Order 4 keeps |a| + |b| <= 4, so it needs the A_k of order 4 only (those of order 3's
  M2L): the monopole's expansion to order 4, the dipole's to 3, the quadrupole's to 2. The
  dropped terms are (s / |r0|) (|delta| / |r0|)^4 (the dipole, zero for charges of one sign,
  whose expansion centre is their centre of mass) and (s / |r0|)^2 (|delta| / |r0|)^3, which
  order 3 drops as well; the monopole's truncation falls from (|delta| / |r0|)^4 to ^5.
  eps2 = 0 (laplace): A_k(r) = D_k G / k! with G harmonic, so D_{k + 2 e_z} = -D_{k + 2 e_x} -
  D_{k + 2 e_y}, and each degree of the expansion (for each a, the b of one |b|, all kept or all
  dropped) is a harmonic polynomial, whose coefficients with bz >= 2 follow from those with
  bz <= 1 (25 of order 4's 35):
      L_b = -[(bx + 2)(bx + 1) L_{b + 2 e_x - 2 e_z} + (by + 2)(by + 1) L_{b + 2 e_y - 2 e_z}]
            / (bz (bz - 1)),
  and the A_k likewise.  m2l4_harm computes only those 25 coefficients (and the A_k with kz >= 2
  by the relation: 2 terms instead of the recurrence's 6); local4_from_harm completes the 35.
  L2P: phi = sum_b L_b delta^b, grad_i = sum_b b_i L_b delta^(b - e_i).
"""
import sys
from math import comb

MOM = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1),
       (2, 0, 0), (1, 1, 0), (1, 0, 1), (0, 2, 0), (0, 1, 1), (0, 0, 2)]  # bh_terms.h's m[10]


def indices(n):
    """Multi-indices of degree n in a fixed order (x-major)."""
    return [(a, b, n - a - b) for a in range(n, -1, -1) for b in range(n - a, -1, -1)]


def name(k):
    return "A%d%d%d" % k


def harm_coef(k, i):
    """The factor of A_{k + 2 e_i - 2 e_z} in A_k = -sum_{i = x, y} f_i A_{k + 2 e_i - 2 e_z}
    (kz >= 2; Laplace's equation for the derivatives, D_k = k! A_k), the same for L_b."""
    return (k[i] + 2.0) * (k[i] + 1.0) / (k[2] * (k[2] - 1.0))


def harm_terms(k, nm):
    ks = []
    for i in (0, 1):
        kk = list(k)
        kk[i] += 2
        kk[2] -= 2
        ks.append("(REAL)%.17g * %s" % (harm_coef(k, i), nm(tuple(kk))))
    return "-(%s)" % " + ".join(ks)


def emit(P, keep, fname=None, harmonic=False):
    """M2L and L2P of order P keeping the terms |a| + |b| <= keep (P <= keep <= P + 1); with
    fname, only the M2L, under that name.  harmonic (eps2 = 0): only the coefficients with
    bz <= 1 (table FMK_BH_HARM_INDEX's first ones), and the A_k with kz >= 2 from Laplace's
    equation instead of the recurrence."""
    out = []
    w = out.append
    locs = [k for n in range(P + 1) for k in indices(n) if not harmonic or k[2] <= 1]
    nl = len(locs)
    if harmonic:
        w("/* M2L for eps2 = 0: sets H[%d] (coefficients bz <= 1 of the order-%d expansion about c, "
          "the first" % (nl, P))
        w(" * of table FMK_BH_HARM_INDEX; local4_from_harm gives the others) to the field of a node with")
        w(" * packed moments m (bh_terms.h, order 0..2) at r = c - xc, keeping |a| + |b| <= %d. */" % keep)
        w("FMK_BH_FN void BH(%s)(int order, REAL rx, REAL ry, REAL rz, const REAL *m, REAL *L)" % fname)
    else:
        w("/* M2L: sets L[%d] (the order-%d expansion about c, table FMK_BH_LOCAL%d_INDEX) to the "
          "field of a node" % (nl, P, P))
        w(" * with packed moments m (bh_terms.h, order 0..2) at r = c - xc, keeping |a| + |b| <= %d. */" % keep)
        w("FMK_BH_FN void BH(%s)(int order, REAL rx, REAL ry, REAL rz, REAL eps2, const REAL *m, REAL *L)"
          % (fname or "m2l%d" % P))
    w("{")
    w("    const REAL A000 = RSQRT(rx * rx + ry * ry + rz * rz%s);" % ("" if harmonic else " + eps2"))
    w("    const REAL iR2 = A000 * A000;")
    # signed moments
    for j, a in enumerate(MOM):
        s = "-" if sum(a) % 2 else ""
        w("    const REAL M%d%d%d = %sm[%d];" % (a + (s, j)))
    # L_b sums, built per level of A as the A's appear
    terms = {b: [] for b in locs}
    for n in range(0, keep + 1):
        ks = indices(n)
        guard = None
        if n == P + 1:
            guard = "order >= 1"
        body = []
        if n > 0:
            for k in ks:
                if harmonic and k[2] > 3:
                    continue  # kz <= 1 + 2: no contribution needs it
                if harmonic and k[2] >= 2:
                    body.append("const REAL %s = %s;" % (name(k), harm_terms(k, name)))
                    continue
                parts1, parts2 = [], []
                for i, rn in enumerate(("rx", "ry", "rz")):
                    if k[i] >= 1:
                        km = list(k)
                        km[i] -= 1
                        parts1.append("%s * %s" % (rn, name(tuple(km))))
                    if k[i] >= 2:
                        km = list(k)
                        km[i] -= 2
                        parts2.append(name(tuple(km)))
                c1 = (2.0 * n - 1) / n
                c2 = (n - 1.0) / n
                e = "(REAL)%.17g * (%s)" % (c1, " + ".join(parts1))
                if parts2:
                    e += " + (REAL)%.17g * (%s)" % (c2, " + ".join(parts2))
                body.append("const REAL %s = -iR2 * (%s);" % (name(k), e))
        # contributions L_b += sign M_a C A_{a+b} with |a+b| = n
        contrib = []
        for b in locs:
            for j, a in enumerate(MOM):
                if sum(a) + sum(b) != n:
                    continue
                k = tuple(a[i] + b[i] for i in range(3))
                c = comb(k[0], a[0]) * comb(k[1], a[1]) * comb(k[2], a[2])
                ordneed = sum(a)
                contrib.append((b, ordneed, c, a, k))
        if guard:
            w("    " * (n - P) + "if (%s) {" % guard)
        ind = "    " * (1 + max(0, n - P))
        for line in body:
            w(ind + line)
        # group the contributions by the order of the moment they need
        for ordneed in range(3):
            cs = [t for t in contrib if t[1] == ordneed]
            if not cs:
                continue
            needs_guard = ordneed > 0 and (guard is None or (n == P + 1 and ordneed > 1))
            ind2 = ind
            if needs_guard:
                w(ind + "if (order >= %d) {" % ordneed)
                ind2 = ind + "    "
            for (b, _, c, a, k) in cs:
                cm = "M%d%d%d" % a if c == 1 else "(REAL)%d * M%d%d%d" % ((c,) + a)
                terms[b].append(True)
                if len(terms[b]) > 1:
                    w(ind2 + "L%d%d%d += %s * %s;" % (b + (cm, name(k))))
                else:
                    w(ind2 + "REAL L%d%d%d = %s * %s;" % (b + (cm, name(k))))
            if needs_guard:
                w(ind + "}")
    if keep > P:
        w("    }")
    for i, b in enumerate(locs):
        w("    L[%d] = L%d%d%d;" % ((i,) + b))
    w("}")
    w("")
    if fname:
        return out, locs
    # L2P
    w("/* L2P: adds the expansion L[%d] about c at delta = y - c to phi and g[3]. */" % nl)
    w("FMK_BH_FN void BH(l2p%d)(const REAL *L, REAL dx, REAL dy, REAL dz, REAL *phi, REAL *g)" % P)
    w("{")
    # Horner-free direct form: powers
    for v in ("x", "y", "z"):
        w("    const REAL %s1 = d%s;" % (v, v))
        for p in range(2, P + 1):
            w("    const REAL %s%d = %s%d * d%s;" % (v, p, v, p - 1, v))
    def mono(e):
        f = []
        for v, p in zip(("x", "y", "z"), e):
            if p > 0:
                f.append("%s%d" % (v, p))
        return " * ".join(f) if f else None
    ph = []
    gr = [[], [], []]
    for i, b in enumerate(locs):
        mm = mono(b)
        ph.append("L[%d]" % i if mm is None else "L[%d] * %s" % (i, mm))
        for d in range(3):
            if b[d] == 0:
                continue
            e = list(b)
            e[d] -= 1
            mm = mono(tuple(e))
            c = "" if b[d] == 1 else "(REAL)%d * " % b[d]
            gr[d].append("%sL[%d]" % (c, i) + ("" if mm is None else " * " + mm))
    w("    *phi += %s;" % " + ".join(ph))
    for d in range(3):
        w("    g[%d] += %s;" % (d, " + ".join(gr[d])))
    w("}")
    w("")
    return out, locs


def main():
    print("/* Generated by tools/bh_local.py (python3 tools/bh_local.py > src/treecode/bh_local.h): edit")
    print(" * the generator, not this file; the math is there.")
    print(" *")
    print(" * bh_local.h -- the treecode's cell-to-group terms: a node's field (its moments of order")
    print(" * 0..2, as in bh_terms.h's M2P) as a Taylor expansion of order 2, 3 or 4 about a group's")
    print(" * centre (M2L), and the expansion's value and gradient at a target (L2P); for eps2 = 0,")
    print(" * order 4's M2L of the 25 coefficients that fix the harmonic expansion (m2l4_harm,")
    print(" * local4_from_harm). Included like bh_terms.h: once per precision, with REAL, RSQRT and")
    print(" * BH(name) defined; needs bh_terms.h's FMK_BH_FN.")
    print(" */")
    for P, keep in ((2, 3), (3, 4), (4, 4)):
        lines, locs = emit(P, keep)
        print("#ifndef FMK_BH_LOCAL%d_INDEX" % P)
        print("/* the multi-index (bx, by, bz) of each coefficient, as one int bx*100 + by*10 + bz */")
        print("#define FMK_BH_LOCAL%d_INDEX {%s}" % (P, ", ".join("%d" % (b[0] * 100 + b[1] * 10 + b[2]) for b in locs)))
        print("#define FMK_BH_LOCAL%d %d /* coefficients */" % (P, len(locs)))
        print("#endif")
        for l in lines:
            print(l)
    # eps2 = 0: the expansion is a harmonic polynomial, given by its coefficients with bz <= 1
    harm = [k for n in range(5) for k in indices(n) if k[2] <= 1]
    print("#ifndef FMK_BH_HARM_INDEX")
    print("/* eps2 = 0: the coefficients with bz <= 1 of the order-4 expansion, as bx*100 + by*10 + bz */")
    print("#define FMK_BH_HARM_INDEX {%s}" % ", ".join("%d" % (b[0] * 100 + b[1] * 10 + b[2]) for b in harm))
    print("#define FMK_BH_HARM4 %d /* coefficients */" % len(harm))
    print("#endif")
    lines, _ = emit(4, 4, "m2l4_harm", harmonic=True)
    for l in lines:
        print(l)
    # the other coefficients, by Laplace's equation
    loc4 = [k for n in range(5) for k in indices(n)]
    print("/* eps2 = 0: L[%d] (table FMK_BH_LOCAL4_INDEX) from H[%d] (FMK_BH_HARM_INDEX): the coefficients"
          % (len(loc4), len(harm)))
    print(" * with bz >= 2 from Laplace's equation (each degree of the expansion is harmonic). */")
    print("FMK_BH_FN void BH(local4_from_harm)(const REAL *H, REAL *L)")
    print("{")
    hn = lambda k: "L%d%d%d" % k
    for k in loc4:
        if k[2] <= 1:
            print("    const REAL %s = H[%d];" % (hn(k), harm.index(k)))
        else:
            print("    const REAL %s = %s;" % (hn(k), harm_terms(k, hn)))
    for i, k in enumerate(loc4):
        print("    L[%d] = %s;" % (i, hn(k)))
    print("}")
    print("")
    return 0


if __name__ == "__main__":
    sys.exit(main())
