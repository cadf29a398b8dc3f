/*
 * bh_local.h -- written by tools/bh_local.py (the math is there); do not edit by hand.
 * The treecode's cell-to-group terms: a node's field (its moments of order 0..2, as in
 * bh_terms.h's M2P) as a Taylor expansion of order 2, 3 or 4 about a group's centre (M2L),
 * and the expansion's value and gradient at a target (L2P). Included like bh_terms.h:
 * once per precision, with REAL, RSQRT and BH(name) defined; needs bh_terms.h's FMK_HD.
 */
#ifndef FMK_BH_LOCAL2_INDEX
/* the multi-index (bx, by, bz) of each coefficient, as one int bx*100 + by*10 + bz */
#define FMK_BH_LOCAL2_INDEX {0, 100, 10, 1, 200, 110, 101, 20, 11, 2}
#define FMK_BH_LOCAL2 10 /* coefficients */
#endif
/* M2L: sets L[10] (the order-2 expansion about c, table FMK_BH_LOCAL2_INDEX) to the field of a node
 * with packed moments m (bh_terms.h, order 0..2) at r = c - xc, keeping |a| + |b| <= 3. */
FMK_HD void BH(m2l2)(int order, REAL rx, REAL ry, REAL rz, REAL eps2, const REAL *m, REAL *L)
{
    const REAL A000 = RSQRT(rx * rx + ry * ry + rz * rz + eps2);
    const REAL iR2 = A000 * A000;
    const REAL M000 = m[0];
    const REAL M100 = -m[1];
    const REAL M010 = -m[2];
    const REAL M001 = -m[3];
    const REAL M200 = m[4];
    const REAL M110 = m[5];
    const REAL M101 = m[6];
    const REAL M020 = m[7];
    const REAL M011 = m[8];
    const REAL M002 = m[9];
    REAL L000 = M000 * A000;
    const REAL A100 = -iR2 * ((REAL)1 * (rx * A000));
    const REAL A010 = -iR2 * ((REAL)1 * (ry * A000));
    const REAL A001 = -iR2 * ((REAL)1 * (rz * A000));
    REAL L100 = M000 * A100;
    REAL L010 = M000 * A010;
    REAL L001 = M000 * A001;
    if (order >= 1) {
        L000 += M100 * A100;
        L000 += M010 * A010;
        L000 += M001 * A001;
    }
    const REAL A200 = -iR2 * ((REAL)1.5 * (rx * A100) + (REAL)0.5 * (A000));
    const REAL A110 = -iR2 * ((REAL)1.5 * (rx * A010 + ry * A100));
    const REAL A101 = -iR2 * ((REAL)1.5 * (rx * A001 + rz * A100));
    const REAL A020 = -iR2 * ((REAL)1.5 * (ry * A010) + (REAL)0.5 * (A000));
    const REAL A011 = -iR2 * ((REAL)1.5 * (ry * A001 + rz * A010));
    const REAL A002 = -iR2 * ((REAL)1.5 * (rz * A001) + (REAL)0.5 * (A000));
    REAL L200 = M000 * A200;
    REAL L110 = M000 * A110;
    REAL L101 = M000 * A101;
    REAL L020 = M000 * A020;
    REAL L011 = M000 * A011;
    REAL L002 = M000 * A002;
    if (order >= 1) {
        L100 += (REAL)2 * M100 * A200;
        L100 += M010 * A110;
        L100 += M001 * A101;
        L010 += M100 * A110;
        L010 += (REAL)2 * M010 * A020;
        L010 += M001 * A011;
        L001 += M100 * A101;
        L001 += M010 * A011;
        L001 += (REAL)2 * M001 * A002;
    }
    if (order >= 2) {
        L000 += M200 * A200;
        L000 += M110 * A110;
        L000 += M101 * A101;
        L000 += M020 * A020;
        L000 += M011 * A011;
        L000 += M002 * A002;
    }
    if (order >= 1) {
        const REAL A300 = -iR2 * ((REAL)1.6666666666666667 * (rx * A200) + (REAL)0.66666666666666663 * (A100));
        const REAL A210 = -iR2 * ((REAL)1.6666666666666667 * (rx * A110 + ry * A200) + (REAL)0.66666666666666663 * (A010));
        const REAL A201 = -iR2 * ((REAL)1.6666666666666667 * (rx * A101 + rz * A200) + (REAL)0.66666666666666663 * (A001));
        const REAL A120 = -iR2 * ((REAL)1.6666666666666667 * (rx * A020 + ry * A110) + (REAL)0.66666666666666663 * (A100));
        const REAL A111 = -iR2 * ((REAL)1.6666666666666667 * (rx * A011 + ry * A101 + rz * A110));
        const REAL A102 = -iR2 * ((REAL)1.6666666666666667 * (rx * A002 + rz * A101) + (REAL)0.66666666666666663 * (A100));
        const REAL A030 = -iR2 * ((REAL)1.6666666666666667 * (ry * A020) + (REAL)0.66666666666666663 * (A010));
        const REAL A021 = -iR2 * ((REAL)1.6666666666666667 * (ry * A011 + rz * A020) + (REAL)0.66666666666666663 * (A001));
        const REAL A012 = -iR2 * ((REAL)1.6666666666666667 * (ry * A002 + rz * A011) + (REAL)0.66666666666666663 * (A010));
        const REAL A003 = -iR2 * ((REAL)1.6666666666666667 * (rz * A002) + (REAL)0.66666666666666663 * (A001));
        L200 += (REAL)3 * M100 * A300;
        L200 += M010 * A210;
        L200 += M001 * A201;
        L110 += (REAL)2 * M100 * A210;
        L110 += (REAL)2 * M010 * A120;
        L110 += M001 * A111;
        L101 += (REAL)2 * M100 * A201;
        L101 += M010 * A111;
        L101 += (REAL)2 * M001 * A102;
        L020 += M100 * A120;
        L020 += (REAL)3 * M010 * A030;
        L020 += M001 * A021;
        L011 += M100 * A111;
        L011 += (REAL)2 * M010 * A021;
        L011 += (REAL)2 * M001 * A012;
        L002 += M100 * A102;
        L002 += M010 * A012;
        L002 += (REAL)3 * M001 * A003;
        if (order >= 2) {
            L100 += (REAL)3 * M200 * A300;
            L100 += (REAL)2 * M110 * A210;
            L100 += (REAL)2 * M101 * A201;
            L100 += M020 * A120;
            L100 += M011 * A111;
            L100 += M002 * A102;
            L010 += M200 * A210;
            L010 += (REAL)2 * M110 * A120;
            L010 += M101 * A111;
            L010 += (REAL)3 * M020 * A030;
            L010 += (REAL)2 * M011 * A021;
            L010 += M002 * A012;
            L001 += M200 * A201;
            L001 += M110 * A111;
            L001 += (REAL)2 * M101 * A102;
            L001 += M020 * A021;
            L001 += (REAL)2 * M011 * A012;
            L001 += (REAL)3 * M002 * A003;
        }
    }
    L[0] = L000;
    L[1] = L100;
    L[2] = L010;
    L[3] = L001;
    L[4] = L200;
    L[5] = L110;
    L[6] = L101;
    L[7] = L020;
    L[8] = L011;
    L[9] = L002;
}

/* L2P: adds the expansion L[10] about c at delta = y - c to phi and g[3]. */
FMK_HD void BH(l2p2)(const REAL *L, REAL dx, REAL dy, REAL dz, REAL *phi, REAL *g)
{
    const REAL x1 = dx;
    const REAL x2 = x1 * dx;
    const REAL y1 = dy;
    const REAL y2 = y1 * dy;
    const REAL z1 = dz;
    const REAL z2 = z1 * dz;
    *phi += L[0] + L[1] * x1 + L[2] * y1 + L[3] * z1 + L[4] * x2 + L[5] * x1 * y1 + L[6] * x1 * z1 + L[7] * y2 + L[8] * y1 * z1 + L[9] * z2;
    g[0] += L[1] + (REAL)2 * L[4] * x1 + L[5] * y1 + L[6] * z1;
    g[1] += L[2] + L[5] * x1 + (REAL)2 * L[7] * y1 + L[8] * z1;
    g[2] += L[3] + L[6] * x1 + L[8] * y1 + (REAL)2 * L[9] * z1;
}

#ifndef FMK_BH_LOCAL3_INDEX
/* the multi-index (bx, by, bz) of each coefficient, as one int bx*100 + by*10 + bz */
#define FMK_BH_LOCAL3_INDEX {0, 100, 10, 1, 200, 110, 101, 20, 11, 2, 300, 210, 201, 120, 111, 102, 30, 21, 12, 3}
#define FMK_BH_LOCAL3 20 /* coefficients */
#endif
/* M2L: sets L[20] (the order-3 expansion about c, table FMK_BH_LOCAL3_INDEX) to the field of a node
 * with packed moments m (bh_terms.h, order 0..2) at r = c - xc, keeping |a| + |b| <= 4. */
FMK_HD void BH(m2l3)(int order, REAL rx, REAL ry, REAL rz, REAL eps2, const REAL *m, REAL *L)
{
    const REAL A000 = RSQRT(rx * rx + ry * ry + rz * rz + eps2);
    const REAL iR2 = A000 * A000;
    const REAL M000 = m[0];
    const REAL M100 = -m[1];
    const REAL M010 = -m[2];
    const REAL M001 = -m[3];
    const REAL M200 = m[4];
    const REAL M110 = m[5];
    const REAL M101 = m[6];
    const REAL M020 = m[7];
    const REAL M011 = m[8];
    const REAL M002 = m[9];
    REAL L000 = M000 * A000;
    const REAL A100 = -iR2 * ((REAL)1 * (rx * A000));
    const REAL A010 = -iR2 * ((REAL)1 * (ry * A000));
    const REAL A001 = -iR2 * ((REAL)1 * (rz * A000));
    REAL L100 = M000 * A100;
    REAL L010 = M000 * A010;
    REAL L001 = M000 * A001;
    if (order >= 1) {
        L000 += M100 * A100;
        L000 += M010 * A010;
        L000 += M001 * A001;
    }
    const REAL A200 = -iR2 * ((REAL)1.5 * (rx * A100) + (REAL)0.5 * (A000));
    const REAL A110 = -iR2 * ((REAL)1.5 * (rx * A010 + ry * A100));
    const REAL A101 = -iR2 * ((REAL)1.5 * (rx * A001 + rz * A100));
    const REAL A020 = -iR2 * ((REAL)1.5 * (ry * A010) + (REAL)0.5 * (A000));
    const REAL A011 = -iR2 * ((REAL)1.5 * (ry * A001 + rz * A010));
    const REAL A002 = -iR2 * ((REAL)1.5 * (rz * A001) + (REAL)0.5 * (A000));
    REAL L200 = M000 * A200;
    REAL L110 = M000 * A110;
    REAL L101 = M000 * A101;
    REAL L020 = M000 * A020;
    REAL L011 = M000 * A011;
    REAL L002 = M000 * A002;
    if (order >= 1) {
        L100 += (REAL)2 * M100 * A200;
        L100 += M010 * A110;
        L100 += M001 * A101;
        L010 += M100 * A110;
        L010 += (REAL)2 * M010 * A020;
        L010 += M001 * A011;
        L001 += M100 * A101;
        L001 += M010 * A011;
        L001 += (REAL)2 * M001 * A002;
    }
    if (order >= 2) {
        L000 += M200 * A200;
        L000 += M110 * A110;
        L000 += M101 * A101;
        L000 += M020 * A020;
        L000 += M011 * A011;
        L000 += M002 * A002;
    }
    const REAL A300 = -iR2 * ((REAL)1.6666666666666667 * (rx * A200) + (REAL)0.66666666666666663 * (A100));
    const REAL A210 = -iR2 * ((REAL)1.6666666666666667 * (rx * A110 + ry * A200) + (REAL)0.66666666666666663 * (A010));
    const REAL A201 = -iR2 * ((REAL)1.6666666666666667 * (rx * A101 + rz * A200) + (REAL)0.66666666666666663 * (A001));
    const REAL A120 = -iR2 * ((REAL)1.6666666666666667 * (rx * A020 + ry * A110) + (REAL)0.66666666666666663 * (A100));
    const REAL A111 = -iR2 * ((REAL)1.6666666666666667 * (rx * A011 + ry * A101 + rz * A110));
    const REAL A102 = -iR2 * ((REAL)1.6666666666666667 * (rx * A002 + rz * A101) + (REAL)0.66666666666666663 * (A100));
    const REAL A030 = -iR2 * ((REAL)1.6666666666666667 * (ry * A020) + (REAL)0.66666666666666663 * (A010));
    const REAL A021 = -iR2 * ((REAL)1.6666666666666667 * (ry * A011 + rz * A020) + (REAL)0.66666666666666663 * (A001));
    const REAL A012 = -iR2 * ((REAL)1.6666666666666667 * (ry * A002 + rz * A011) + (REAL)0.66666666666666663 * (A010));
    const REAL A003 = -iR2 * ((REAL)1.6666666666666667 * (rz * A002) + (REAL)0.66666666666666663 * (A001));
    REAL L300 = M000 * A300;
    REAL L210 = M000 * A210;
    REAL L201 = M000 * A201;
    REAL L120 = M000 * A120;
    REAL L111 = M000 * A111;
    REAL L102 = M000 * A102;
    REAL L030 = M000 * A030;
    REAL L021 = M000 * A021;
    REAL L012 = M000 * A012;
    REAL L003 = M000 * A003;
    if (order >= 1) {
        L200 += (REAL)3 * M100 * A300;
        L200 += M010 * A210;
        L200 += M001 * A201;
        L110 += (REAL)2 * M100 * A210;
        L110 += (REAL)2 * M010 * A120;
        L110 += M001 * A111;
        L101 += (REAL)2 * M100 * A201;
        L101 += M010 * A111;
        L101 += (REAL)2 * M001 * A102;
        L020 += M100 * A120;
        L020 += (REAL)3 * M010 * A030;
        L020 += M001 * A021;
        L011 += M100 * A111;
        L011 += (REAL)2 * M010 * A021;
        L011 += (REAL)2 * M001 * A012;
        L002 += M100 * A102;
        L002 += M010 * A012;
        L002 += (REAL)3 * M001 * A003;
    }
    if (order >= 2) {
        L100 += (REAL)3 * M200 * A300;
        L100 += (REAL)2 * M110 * A210;
        L100 += (REAL)2 * M101 * A201;
        L100 += M020 * A120;
        L100 += M011 * A111;
        L100 += M002 * A102;
        L010 += M200 * A210;
        L010 += (REAL)2 * M110 * A120;
        L010 += M101 * A111;
        L010 += (REAL)3 * M020 * A030;
        L010 += (REAL)2 * M011 * A021;
        L010 += M002 * A012;
        L001 += M200 * A201;
        L001 += M110 * A111;
        L001 += (REAL)2 * M101 * A102;
        L001 += M020 * A021;
        L001 += (REAL)2 * M011 * A012;
        L001 += (REAL)3 * M002 * A003;
    }
    if (order >= 1) {
        const REAL A400 = -iR2 * ((REAL)1.75 * (rx * A300) + (REAL)0.75 * (A200));
        const REAL A310 = -iR2 * ((REAL)1.75 * (rx * A210 + ry * A300) + (REAL)0.75 * (A110));
        const REAL A301 = -iR2 * ((REAL)1.75 * (rx * A201 + rz * A300) + (REAL)0.75 * (A101));
        const REAL A220 = -iR2 * ((REAL)1.75 * (rx * A120 + ry * A210) + (REAL)0.75 * (A020 + A200));
        const REAL A211 = -iR2 * ((REAL)1.75 * (rx * A111 + ry * A201 + rz * A210) + (REAL)0.75 * (A011));
        const REAL A202 = -iR2 * ((REAL)1.75 * (rx * A102 + rz * A201) + (REAL)0.75 * (A002 + A200));
        const REAL A130 = -iR2 * ((REAL)1.75 * (rx * A030 + ry * A120) + (REAL)0.75 * (A110));
        const REAL A121 = -iR2 * ((REAL)1.75 * (rx * A021 + ry * A111 + rz * A120) + (REAL)0.75 * (A101));
        const REAL A112 = -iR2 * ((REAL)1.75 * (rx * A012 + ry * A102 + rz * A111) + (REAL)0.75 * (A110));
        const REAL A103 = -iR2 * ((REAL)1.75 * (rx * A003 + rz * A102) + (REAL)0.75 * (A101));
        const REAL A040 = -iR2 * ((REAL)1.75 * (ry * A030) + (REAL)0.75 * (A020));
        const REAL A031 = -iR2 * ((REAL)1.75 * (ry * A021 + rz * A030) + (REAL)0.75 * (A011));
        const REAL A022 = -iR2 * ((REAL)1.75 * (ry * A012 + rz * A021) + (REAL)0.75 * (A002 + A020));
        const REAL A013 = -iR2 * ((REAL)1.75 * (ry * A003 + rz * A012) + (REAL)0.75 * (A011));
        const REAL A004 = -iR2 * ((REAL)1.75 * (rz * A003) + (REAL)0.75 * (A002));
        L300 += (REAL)4 * M100 * A400;
        L300 += M010 * A310;
        L300 += M001 * A301;
        L210 += (REAL)3 * M100 * A310;
        L210 += (REAL)2 * M010 * A220;
        L210 += M001 * A211;
        L201 += (REAL)3 * M100 * A301;
        L201 += M010 * A211;
        L201 += (REAL)2 * M001 * A202;
        L120 += (REAL)2 * M100 * A220;
        L120 += (REAL)3 * M010 * A130;
        L120 += M001 * A121;
        L111 += (REAL)2 * M100 * A211;
        L111 += (REAL)2 * M010 * A121;
        L111 += (REAL)2 * M001 * A112;
        L102 += (REAL)2 * M100 * A202;
        L102 += M010 * A112;
        L102 += (REAL)3 * M001 * A103;
        L030 += M100 * A130;
        L030 += (REAL)4 * M010 * A040;
        L030 += M001 * A031;
        L021 += M100 * A121;
        L021 += (REAL)3 * M010 * A031;
        L021 += (REAL)2 * M001 * A022;
        L012 += M100 * A112;
        L012 += (REAL)2 * M010 * A022;
        L012 += (REAL)3 * M001 * A013;
        L003 += M100 * A103;
        L003 += M010 * A013;
        L003 += (REAL)4 * M001 * A004;
        if (order >= 2) {
            L200 += (REAL)6 * M200 * A400;
            L200 += (REAL)3 * M110 * A310;
            L200 += (REAL)3 * M101 * A301;
            L200 += M020 * A220;
            L200 += M011 * A211;
            L200 += M002 * A202;
            L110 += (REAL)3 * M200 * A310;
            L110 += (REAL)4 * M110 * A220;
            L110 += (REAL)2 * M101 * A211;
            L110 += (REAL)3 * M020 * A130;
            L110 += (REAL)2 * M011 * A121;
            L110 += M002 * A112;
            L101 += (REAL)3 * M200 * A301;
            L101 += (REAL)2 * M110 * A211;
            L101 += (REAL)4 * M101 * A202;
            L101 += M020 * A121;
            L101 += (REAL)2 * M011 * A112;
            L101 += (REAL)3 * M002 * A103;
            L020 += M200 * A220;
            L020 += (REAL)3 * M110 * A130;
            L020 += M101 * A121;
            L020 += (REAL)6 * M020 * A040;
            L020 += (REAL)3 * M011 * A031;
            L020 += M002 * A022;
            L011 += M200 * A211;
            L011 += (REAL)2 * M110 * A121;
            L011 += (REAL)2 * M101 * A112;
            L011 += (REAL)3 * M020 * A031;
            L011 += (REAL)4 * M011 * A022;
            L011 += (REAL)3 * M002 * A013;
            L002 += M200 * A202;
            L002 += M110 * A112;
            L002 += (REAL)3 * M101 * A103;
            L002 += M020 * A022;
            L002 += (REAL)3 * M011 * A013;
            L002 += (REAL)6 * M002 * A004;
        }
    }
    L[0] = L000;
    L[1] = L100;
    L[2] = L010;
    L[3] = L001;
    L[4] = L200;
    L[5] = L110;
    L[6] = L101;
    L[7] = L020;
    L[8] = L011;
    L[9] = L002;
    L[10] = L300;
    L[11] = L210;
    L[12] = L201;
    L[13] = L120;
    L[14] = L111;
    L[15] = L102;
    L[16] = L030;
    L[17] = L021;
    L[18] = L012;
    L[19] = L003;
}

/* L2P: adds the expansion L[20] about c at delta = y - c to phi and g[3]. */
FMK_HD void BH(l2p3)(const REAL *L, REAL dx, REAL dy, REAL dz, REAL *phi, REAL *g)
{
    const REAL x1 = dx;
    const REAL x2 = x1 * dx;
    const REAL x3 = x2 * dx;
    const REAL y1 = dy;
    const REAL y2 = y1 * dy;
    const REAL y3 = y2 * dy;
    const REAL z1 = dz;
    const REAL z2 = z1 * dz;
    const REAL z3 = z2 * dz;
    *phi += L[0] + L[1] * x1 + L[2] * y1 + L[3] * z1 + L[4] * x2 + L[5] * x1 * y1 + L[6] * x1 * z1 + L[7] * y2 + L[8] * y1 * z1 + L[9] * z2 + L[10] * x3 + L[11] * x2 * y1 + L[12] * x2 * z1 + L[13] * x1 * y2 + L[14] * x1 * y1 * z1 + L[15] * x1 * z2 + L[16] * y3 + L[17] * y2 * z1 + L[18] * y1 * z2 + L[19] * z3;
    g[0] += L[1] + (REAL)2 * L[4] * x1 + L[5] * y1 + L[6] * z1 + (REAL)3 * L[10] * x2 + (REAL)2 * L[11] * x1 * y1 + (REAL)2 * L[12] * x1 * z1 + L[13] * y2 + L[14] * y1 * z1 + L[15] * z2;
    g[1] += L[2] + L[5] * x1 + (REAL)2 * L[7] * y1 + L[8] * z1 + L[11] * x2 + (REAL)2 * L[13] * x1 * y1 + L[14] * x1 * z1 + (REAL)3 * L[16] * y2 + (REAL)2 * L[17] * y1 * z1 + L[18] * z2;
    g[2] += L[3] + L[6] * x1 + L[8] * y1 + (REAL)2 * L[9] * z1 + L[12] * x2 + L[14] * x1 * y1 + (REAL)2 * L[15] * x1 * z1 + L[17] * y2 + (REAL)2 * L[18] * y1 * z1 + (REAL)3 * L[19] * z2;
}

#ifndef FMK_BH_LOCAL4_INDEX
/* the multi-index (bx, by, bz) of each coefficient, as one int bx*100 + by*10 + bz */
#define FMK_BH_LOCAL4_INDEX {0, 100, 10, 1, 200, 110, 101, 20, 11, 2, 300, 210, 201, 120, 111, 102, 30, 21, 12, 3, 400, 310, 301, 220, 211, 202, 130, 121, 112, 103, 40, 31, 22, 13, 4}
#define FMK_BH_LOCAL4 35 /* coefficients */
#endif
/* M2L: sets L[35] (the order-4 expansion about c, table FMK_BH_LOCAL4_INDEX) to the field of a node
 * with packed moments m (bh_terms.h, order 0..2) at r = c - xc, keeping |a| + |b| <= 4. */
FMK_HD void BH(m2l4)(int order, REAL rx, REAL ry, REAL rz, REAL eps2, const REAL *m, REAL *L)
{
    const REAL A000 = RSQRT(rx * rx + ry * ry + rz * rz + eps2);
    const REAL iR2 = A000 * A000;
    const REAL M000 = m[0];
    const REAL M100 = -m[1];
    const REAL M010 = -m[2];
    const REAL M001 = -m[3];
    const REAL M200 = m[4];
    const REAL M110 = m[5];
    const REAL M101 = m[6];
    const REAL M020 = m[7];
    const REAL M011 = m[8];
    const REAL M002 = m[9];
    REAL L000 = M000 * A000;
    const REAL A100 = -iR2 * ((REAL)1 * (rx * A000));
    const REAL A010 = -iR2 * ((REAL)1 * (ry * A000));
    const REAL A001 = -iR2 * ((REAL)1 * (rz * A000));
    REAL L100 = M000 * A100;
    REAL L010 = M000 * A010;
    REAL L001 = M000 * A001;
    if (order >= 1) {
        L000 += M100 * A100;
        L000 += M010 * A010;
        L000 += M001 * A001;
    }
    const REAL A200 = -iR2 * ((REAL)1.5 * (rx * A100) + (REAL)0.5 * (A000));
    const REAL A110 = -iR2 * ((REAL)1.5 * (rx * A010 + ry * A100));
    const REAL A101 = -iR2 * ((REAL)1.5 * (rx * A001 + rz * A100));
    const REAL A020 = -iR2 * ((REAL)1.5 * (ry * A010) + (REAL)0.5 * (A000));
    const REAL A011 = -iR2 * ((REAL)1.5 * (ry * A001 + rz * A010));
    const REAL A002 = -iR2 * ((REAL)1.5 * (rz * A001) + (REAL)0.5 * (A000));
    REAL L200 = M000 * A200;
    REAL L110 = M000 * A110;
    REAL L101 = M000 * A101;
    REAL L020 = M000 * A020;
    REAL L011 = M000 * A011;
    REAL L002 = M000 * A002;
    if (order >= 1) {
        L100 += (REAL)2 * M100 * A200;
        L100 += M010 * A110;
        L100 += M001 * A101;
        L010 += M100 * A110;
        L010 += (REAL)2 * M010 * A020;
        L010 += M001 * A011;
        L001 += M100 * A101;
        L001 += M010 * A011;
        L001 += (REAL)2 * M001 * A002;
    }
    if (order >= 2) {
        L000 += M200 * A200;
        L000 += M110 * A110;
        L000 += M101 * A101;
        L000 += M020 * A020;
        L000 += M011 * A011;
        L000 += M002 * A002;
    }
    const REAL A300 = -iR2 * ((REAL)1.6666666666666667 * (rx * A200) + (REAL)0.66666666666666663 * (A100));
    const REAL A210 = -iR2 * ((REAL)1.6666666666666667 * (rx * A110 + ry * A200) + (REAL)0.66666666666666663 * (A010));
    const REAL A201 = -iR2 * ((REAL)1.6666666666666667 * (rx * A101 + rz * A200) + (REAL)0.66666666666666663 * (A001));
    const REAL A120 = -iR2 * ((REAL)1.6666666666666667 * (rx * A020 + ry * A110) + (REAL)0.66666666666666663 * (A100));
    const REAL A111 = -iR2 * ((REAL)1.6666666666666667 * (rx * A011 + ry * A101 + rz * A110));
    const REAL A102 = -iR2 * ((REAL)1.6666666666666667 * (rx * A002 + rz * A101) + (REAL)0.66666666666666663 * (A100));
    const REAL A030 = -iR2 * ((REAL)1.6666666666666667 * (ry * A020) + (REAL)0.66666666666666663 * (A010));
    const REAL A021 = -iR2 * ((REAL)1.6666666666666667 * (ry * A011 + rz * A020) + (REAL)0.66666666666666663 * (A001));
    const REAL A012 = -iR2 * ((REAL)1.6666666666666667 * (ry * A002 + rz * A011) + (REAL)0.66666666666666663 * (A010));
    const REAL A003 = -iR2 * ((REAL)1.6666666666666667 * (rz * A002) + (REAL)0.66666666666666663 * (A001));
    REAL L300 = M000 * A300;
    REAL L210 = M000 * A210;
    REAL L201 = M000 * A201;
    REAL L120 = M000 * A120;
    REAL L111 = M000 * A111;
    REAL L102 = M000 * A102;
    REAL L030 = M000 * A030;
    REAL L021 = M000 * A021;
    REAL L012 = M000 * A012;
    REAL L003 = M000 * A003;
    if (order >= 1) {
        L200 += (REAL)3 * M100 * A300;
        L200 += M010 * A210;
        L200 += M001 * A201;
        L110 += (REAL)2 * M100 * A210;
        L110 += (REAL)2 * M010 * A120;
        L110 += M001 * A111;
        L101 += (REAL)2 * M100 * A201;
        L101 += M010 * A111;
        L101 += (REAL)2 * M001 * A102;
        L020 += M100 * A120;
        L020 += (REAL)3 * M010 * A030;
        L020 += M001 * A021;
        L011 += M100 * A111;
        L011 += (REAL)2 * M010 * A021;
        L011 += (REAL)2 * M001 * A012;
        L002 += M100 * A102;
        L002 += M010 * A012;
        L002 += (REAL)3 * M001 * A003;
    }
    if (order >= 2) {
        L100 += (REAL)3 * M200 * A300;
        L100 += (REAL)2 * M110 * A210;
        L100 += (REAL)2 * M101 * A201;
        L100 += M020 * A120;
        L100 += M011 * A111;
        L100 += M002 * A102;
        L010 += M200 * A210;
        L010 += (REAL)2 * M110 * A120;
        L010 += M101 * A111;
        L010 += (REAL)3 * M020 * A030;
        L010 += (REAL)2 * M011 * A021;
        L010 += M002 * A012;
        L001 += M200 * A201;
        L001 += M110 * A111;
        L001 += (REAL)2 * M101 * A102;
        L001 += M020 * A021;
        L001 += (REAL)2 * M011 * A012;
        L001 += (REAL)3 * M002 * A003;
    }
    const REAL A400 = -iR2 * ((REAL)1.75 * (rx * A300) + (REAL)0.75 * (A200));
    const REAL A310 = -iR2 * ((REAL)1.75 * (rx * A210 + ry * A300) + (REAL)0.75 * (A110));
    const REAL A301 = -iR2 * ((REAL)1.75 * (rx * A201 + rz * A300) + (REAL)0.75 * (A101));
    const REAL A220 = -iR2 * ((REAL)1.75 * (rx * A120 + ry * A210) + (REAL)0.75 * (A020 + A200));
    const REAL A211 = -iR2 * ((REAL)1.75 * (rx * A111 + ry * A201 + rz * A210) + (REAL)0.75 * (A011));
    const REAL A202 = -iR2 * ((REAL)1.75 * (rx * A102 + rz * A201) + (REAL)0.75 * (A002 + A200));
    const REAL A130 = -iR2 * ((REAL)1.75 * (rx * A030 + ry * A120) + (REAL)0.75 * (A110));
    const REAL A121 = -iR2 * ((REAL)1.75 * (rx * A021 + ry * A111 + rz * A120) + (REAL)0.75 * (A101));
    const REAL A112 = -iR2 * ((REAL)1.75 * (rx * A012 + ry * A102 + rz * A111) + (REAL)0.75 * (A110));
    const REAL A103 = -iR2 * ((REAL)1.75 * (rx * A003 + rz * A102) + (REAL)0.75 * (A101));
    const REAL A040 = -iR2 * ((REAL)1.75 * (ry * A030) + (REAL)0.75 * (A020));
    const REAL A031 = -iR2 * ((REAL)1.75 * (ry * A021 + rz * A030) + (REAL)0.75 * (A011));
    const REAL A022 = -iR2 * ((REAL)1.75 * (ry * A012 + rz * A021) + (REAL)0.75 * (A002 + A020));
    const REAL A013 = -iR2 * ((REAL)1.75 * (ry * A003 + rz * A012) + (REAL)0.75 * (A011));
    const REAL A004 = -iR2 * ((REAL)1.75 * (rz * A003) + (REAL)0.75 * (A002));
    REAL L400 = M000 * A400;
    REAL L310 = M000 * A310;
    REAL L301 = M000 * A301;
    REAL L220 = M000 * A220;
    REAL L211 = M000 * A211;
    REAL L202 = M000 * A202;
    REAL L130 = M000 * A130;
    REAL L121 = M000 * A121;
    REAL L112 = M000 * A112;
    REAL L103 = M000 * A103;
    REAL L040 = M000 * A040;
    REAL L031 = M000 * A031;
    REAL L022 = M000 * A022;
    REAL L013 = M000 * A013;
    REAL L004 = M000 * A004;
    if (order >= 1) {
        L300 += (REAL)4 * M100 * A400;
        L300 += M010 * A310;
        L300 += M001 * A301;
        L210 += (REAL)3 * M100 * A310;
        L210 += (REAL)2 * M010 * A220;
        L210 += M001 * A211;
        L201 += (REAL)3 * M100 * A301;
        L201 += M010 * A211;
        L201 += (REAL)2 * M001 * A202;
        L120 += (REAL)2 * M100 * A220;
        L120 += (REAL)3 * M010 * A130;
        L120 += M001 * A121;
        L111 += (REAL)2 * M100 * A211;
        L111 += (REAL)2 * M010 * A121;
        L111 += (REAL)2 * M001 * A112;
        L102 += (REAL)2 * M100 * A202;
        L102 += M010 * A112;
        L102 += (REAL)3 * M001 * A103;
        L030 += M100 * A130;
        L030 += (REAL)4 * M010 * A040;
        L030 += M001 * A031;
        L021 += M100 * A121;
        L021 += (REAL)3 * M010 * A031;
        L021 += (REAL)2 * M001 * A022;
        L012 += M100 * A112;
        L012 += (REAL)2 * M010 * A022;
        L012 += (REAL)3 * M001 * A013;
        L003 += M100 * A103;
        L003 += M010 * A013;
        L003 += (REAL)4 * M001 * A004;
    }
    if (order >= 2) {
        L200 += (REAL)6 * M200 * A400;
        L200 += (REAL)3 * M110 * A310;
        L200 += (REAL)3 * M101 * A301;
        L200 += M020 * A220;
        L200 += M011 * A211;
        L200 += M002 * A202;
        L110 += (REAL)3 * M200 * A310;
        L110 += (REAL)4 * M110 * A220;
        L110 += (REAL)2 * M101 * A211;
        L110 += (REAL)3 * M020 * A130;
        L110 += (REAL)2 * M011 * A121;
        L110 += M002 * A112;
        L101 += (REAL)3 * M200 * A301;
        L101 += (REAL)2 * M110 * A211;
        L101 += (REAL)4 * M101 * A202;
        L101 += M020 * A121;
        L101 += (REAL)2 * M011 * A112;
        L101 += (REAL)3 * M002 * A103;
        L020 += M200 * A220;
        L020 += (REAL)3 * M110 * A130;
        L020 += M101 * A121;
        L020 += (REAL)6 * M020 * A040;
        L020 += (REAL)3 * M011 * A031;
        L020 += M002 * A022;
        L011 += M200 * A211;
        L011 += (REAL)2 * M110 * A121;
        L011 += (REAL)2 * M101 * A112;
        L011 += (REAL)3 * M020 * A031;
        L011 += (REAL)4 * M011 * A022;
        L011 += (REAL)3 * M002 * A013;
        L002 += M200 * A202;
        L002 += M110 * A112;
        L002 += (REAL)3 * M101 * A103;
        L002 += M020 * A022;
        L002 += (REAL)3 * M011 * A013;
        L002 += (REAL)6 * M002 * A004;
    }
    L[0] = L000;
    L[1] = L100;
    L[2] = L010;
    L[3] = L001;
    L[4] = L200;
    L[5] = L110;
    L[6] = L101;
    L[7] = L020;
    L[8] = L011;
    L[9] = L002;
    L[10] = L300;
    L[11] = L210;
    L[12] = L201;
    L[13] = L120;
    L[14] = L111;
    L[15] = L102;
    L[16] = L030;
    L[17] = L021;
    L[18] = L012;
    L[19] = L003;
    L[20] = L400;
    L[21] = L310;
    L[22] = L301;
    L[23] = L220;
    L[24] = L211;
    L[25] = L202;
    L[26] = L130;
    L[27] = L121;
    L[28] = L112;
    L[29] = L103;
    L[30] = L040;
    L[31] = L031;
    L[32] = L022;
    L[33] = L013;
    L[34] = L004;
}

/* L2P: adds the expansion L[35] about c at delta = y - c to phi and g[3]. */
FMK_HD void BH(l2p4)(const REAL *L, REAL dx, REAL dy, REAL dz, REAL *phi, REAL *g)
{
    const REAL x1 = dx;
    const REAL x2 = x1 * dx;
    const REAL x3 = x2 * dx;
    const REAL x4 = x3 * dx;
    const REAL y1 = dy;
    const REAL y2 = y1 * dy;
    const REAL y3 = y2 * dy;
    const REAL y4 = y3 * dy;
    const REAL z1 = dz;
    const REAL z2 = z1 * dz;
    const REAL z3 = z2 * dz;
    const REAL z4 = z3 * dz;
    *phi += L[0] + L[1] * x1 + L[2] * y1 + L[3] * z1 + L[4] * x2 + L[5] * x1 * y1 + L[6] * x1 * z1 + L[7] * y2 + L[8] * y1 * z1 + L[9] * z2 + L[10] * x3 + L[11] * x2 * y1 + L[12] * x2 * z1 + L[13] * x1 * y2 + L[14] * x1 * y1 * z1 + L[15] * x1 * z2 + L[16] * y3 + L[17] * y2 * z1 + L[18] * y1 * z2 + L[19] * z3 + L[20] * x4 + L[21] * x3 * y1 + L[22] * x3 * z1 + L[23] * x2 * y2 + L[24] * x2 * y1 * z1 + L[25] * x2 * z2 + L[26] * x1 * y3 + L[27] * x1 * y2 * z1 + L[28] * x1 * y1 * z2 + L[29] * x1 * z3 + L[30] * y4 + L[31] * y3 * z1 + L[32] * y2 * z2 + L[33] * y1 * z3 + L[34] * z4;
    g[0] += L[1] + (REAL)2 * L[4] * x1 + L[5] * y1 + L[6] * z1 + (REAL)3 * L[10] * x2 + (REAL)2 * L[11] * x1 * y1 + (REAL)2 * L[12] * x1 * z1 + L[13] * y2 + L[14] * y1 * z1 + L[15] * z2 + (REAL)4 * L[20] * x3 + (REAL)3 * L[21] * x2 * y1 + (REAL)3 * L[22] * x2 * z1 + (REAL)2 * L[23] * x1 * y2 + (REAL)2 * L[24] * x1 * y1 * z1 + (REAL)2 * L[25] * x1 * z2 + L[26] * y3 + L[27] * y2 * z1 + L[28] * y1 * z2 + L[29] * z3;
    g[1] += L[2] + L[5] * x1 + (REAL)2 * L[7] * y1 + L[8] * z1 + L[11] * x2 + (REAL)2 * L[13] * x1 * y1 + L[14] * x1 * z1 + (REAL)3 * L[16] * y2 + (REAL)2 * L[17] * y1 * z1 + L[18] * z2 + L[21] * x3 + (REAL)2 * L[23] * x2 * y1 + L[24] * x2 * z1 + (REAL)3 * L[26] * x1 * y2 + (REAL)2 * L[27] * x1 * y1 * z1 + L[28] * x1 * z2 + (REAL)4 * L[30] * y3 + (REAL)3 * L[31] * y2 * z1 + (REAL)2 * L[32] * y1 * z2 + L[33] * z3;
    g[2] += L[3] + L[6] * x1 + L[8] * y1 + (REAL)2 * L[9] * z1 + L[12] * x2 + L[14] * x1 * y1 + (REAL)2 * L[15] * x1 * z1 + L[17] * y2 + (REAL)2 * L[18] * y1 * z1 + (REAL)3 * L[19] * z2 + L[22] * x3 + L[24] * x2 * y1 + (REAL)2 * L[25] * x2 * z1 + L[27] * x1 * y2 + (REAL)2 * L[28] * x1 * y1 * z1 + (REAL)3 * L[29] * x1 * z2 + L[31] * y3 + (REAL)2 * L[32] * y2 * z1 + (REAL)3 * L[33] * y1 * z2 + (REAL)4 * L[34] * z3;
}

/* M2L: sets L[20] (the order-3 expansion about c, table FMK_BH_LOCAL3_INDEX) to the field of a node
 * with packed moments m (bh_terms.h, order 0..2) at r = c - xc, keeping |a| + |b| <= 3. */
FMK_HD void BH(m2l3_far)(int order, REAL rx, REAL ry, REAL rz, REAL eps2, const REAL *m, REAL *L)
{
    const REAL A000 = RSQRT(rx * rx + ry * ry + rz * rz + eps2);
    const REAL iR2 = A000 * A000;
    const REAL M000 = m[0];
    const REAL M100 = -m[1];
    const REAL M010 = -m[2];
    const REAL M001 = -m[3];
    const REAL M200 = m[4];
    const REAL M110 = m[5];
    const REAL M101 = m[6];
    const REAL M020 = m[7];
    const REAL M011 = m[8];
    const REAL M002 = m[9];
    REAL L000 = M000 * A000;
    const REAL A100 = -iR2 * ((REAL)1 * (rx * A000));
    const REAL A010 = -iR2 * ((REAL)1 * (ry * A000));
    const REAL A001 = -iR2 * ((REAL)1 * (rz * A000));
    REAL L100 = M000 * A100;
    REAL L010 = M000 * A010;
    REAL L001 = M000 * A001;
    if (order >= 1) {
        L000 += M100 * A100;
        L000 += M010 * A010;
        L000 += M001 * A001;
    }
    const REAL A200 = -iR2 * ((REAL)1.5 * (rx * A100) + (REAL)0.5 * (A000));
    const REAL A110 = -iR2 * ((REAL)1.5 * (rx * A010 + ry * A100));
    const REAL A101 = -iR2 * ((REAL)1.5 * (rx * A001 + rz * A100));
    const REAL A020 = -iR2 * ((REAL)1.5 * (ry * A010) + (REAL)0.5 * (A000));
    const REAL A011 = -iR2 * ((REAL)1.5 * (ry * A001 + rz * A010));
    const REAL A002 = -iR2 * ((REAL)1.5 * (rz * A001) + (REAL)0.5 * (A000));
    REAL L200 = M000 * A200;
    REAL L110 = M000 * A110;
    REAL L101 = M000 * A101;
    REAL L020 = M000 * A020;
    REAL L011 = M000 * A011;
    REAL L002 = M000 * A002;
    if (order >= 1) {
        L100 += (REAL)2 * M100 * A200;
        L100 += M010 * A110;
        L100 += M001 * A101;
        L010 += M100 * A110;
        L010 += (REAL)2 * M010 * A020;
        L010 += M001 * A011;
        L001 += M100 * A101;
        L001 += M010 * A011;
        L001 += (REAL)2 * M001 * A002;
    }
    if (order >= 2) {
        L000 += M200 * A200;
        L000 += M110 * A110;
        L000 += M101 * A101;
        L000 += M020 * A020;
        L000 += M011 * A011;
        L000 += M002 * A002;
    }
    const REAL A300 = -iR2 * ((REAL)1.6666666666666667 * (rx * A200) + (REAL)0.66666666666666663 * (A100));
    const REAL A210 = -iR2 * ((REAL)1.6666666666666667 * (rx * A110 + ry * A200) + (REAL)0.66666666666666663 * (A010));
    const REAL A201 = -iR2 * ((REAL)1.6666666666666667 * (rx * A101 + rz * A200) + (REAL)0.66666666666666663 * (A001));
    const REAL A120 = -iR2 * ((REAL)1.6666666666666667 * (rx * A020 + ry * A110) + (REAL)0.66666666666666663 * (A100));
    const REAL A111 = -iR2 * ((REAL)1.6666666666666667 * (rx * A011 + ry * A101 + rz * A110));
    const REAL A102 = -iR2 * ((REAL)1.6666666666666667 * (rx * A002 + rz * A101) + (REAL)0.66666666666666663 * (A100));
    const REAL A030 = -iR2 * ((REAL)1.6666666666666667 * (ry * A020) + (REAL)0.66666666666666663 * (A010));
    const REAL A021 = -iR2 * ((REAL)1.6666666666666667 * (ry * A011 + rz * A020) + (REAL)0.66666666666666663 * (A001));
    const REAL A012 = -iR2 * ((REAL)1.6666666666666667 * (ry * A002 + rz * A011) + (REAL)0.66666666666666663 * (A010));
    const REAL A003 = -iR2 * ((REAL)1.6666666666666667 * (rz * A002) + (REAL)0.66666666666666663 * (A001));
    REAL L300 = M000 * A300;
    REAL L210 = M000 * A210;
    REAL L201 = M000 * A201;
    REAL L120 = M000 * A120;
    REAL L111 = M000 * A111;
    REAL L102 = M000 * A102;
    REAL L030 = M000 * A030;
    REAL L021 = M000 * A021;
    REAL L012 = M000 * A012;
    REAL L003 = M000 * A003;
    if (order >= 1) {
        L200 += (REAL)3 * M100 * A300;
        L200 += M010 * A210;
        L200 += M001 * A201;
        L110 += (REAL)2 * M100 * A210;
        L110 += (REAL)2 * M010 * A120;
        L110 += M001 * A111;
        L101 += (REAL)2 * M100 * A201;
        L101 += M010 * A111;
        L101 += (REAL)2 * M001 * A102;
        L020 += M100 * A120;
        L020 += (REAL)3 * M010 * A030;
        L020 += M001 * A021;
        L011 += M100 * A111;
        L011 += (REAL)2 * M010 * A021;
        L011 += (REAL)2 * M001 * A012;
        L002 += M100 * A102;
        L002 += M010 * A012;
        L002 += (REAL)3 * M001 * A003;
    }
    if (order >= 2) {
        L100 += (REAL)3 * M200 * A300;
        L100 += (REAL)2 * M110 * A210;
        L100 += (REAL)2 * M101 * A201;
        L100 += M020 * A120;
        L100 += M011 * A111;
        L100 += M002 * A102;
        L010 += M200 * A210;
        L010 += (REAL)2 * M110 * A120;
        L010 += M101 * A111;
        L010 += (REAL)3 * M020 * A030;
        L010 += (REAL)2 * M011 * A021;
        L010 += M002 * A012;
        L001 += M200 * A201;
        L001 += M110 * A111;
        L001 += (REAL)2 * M101 * A102;
        L001 += M020 * A021;
        L001 += (REAL)2 * M011 * A012;
        L001 += (REAL)3 * M002 * A003;
    }
    L[0] = L000;
    L[1] = L100;
    L[2] = L010;
    L[3] = L001;
    L[4] = L200;
    L[5] = L110;
    L[6] = L101;
    L[7] = L020;
    L[8] = L011;
    L[9] = L002;
    L[10] = L300;
    L[11] = L210;
    L[12] = L201;
    L[13] = L120;
    L[14] = L111;
    L[15] = L102;
    L[16] = L030;
    L[17] = L021;
    L[18] = L012;
    L[19] = L003;
}

