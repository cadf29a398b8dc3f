/* fmm2d_tree.c -- the 2D FMM's pyramid and its directed interaction lists on the CPU (the
 * definitions are in fmm2d.h; cuda/fmm2d.cu builds the same arrays on the GPU). */
#include <stdlib.h>
#include <string.h>

#include "fmm2d/fmm2d.h"
#include "tree/tree3d.h"

typedef struct key_pos {
    uint64_t key;
    int64_t pos;
} key_pos;

/* (key, position): a stable sort by key, the order CUB's radix sort gives. */
static int cmp_key_pos(const void *a, const void *b)
{
    const key_pos *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static void bbox(const double *x, const double *y, int64_t a, int64_t e, double lo[2], double hi[2])
{
    lo[0] = lo[1] = 1.5, hi[0] = hi[1] = 1.5;
    if (a < e)
        lo[0] = hi[0] = x[a], lo[1] = hi[1] = y[a];
    for (int64_t i = a + 1; i < e; i++) {
        lo[0] = x[i] < lo[0] ? x[i] : lo[0], hi[0] = x[i] > hi[0] ? x[i] : hi[0];
        lo[1] = y[i] < lo[1] ? y[i] : lo[1], hi[1] = y[i] > hi[1] ? y[i] : hi[1];
    }
}

int64_t fmk_fmm2d_tree_bytes(int64_t ns, int64_t nt, int self, int levels, int64_t n_weak,
                             int64_t n_near)
{
    const int64_t leaves = (int64_t)1 << (2 * levels), boxes = fmk_fmm2d_first(levels + 1);
    const int64_t pts = self ? ns : ns + nt;
    /* saturating (fmk_bytes_plus): sizes no machine holds give FMK_BYTES_OVERFLOW */
    int64_t b = fmk_bytes_mul(24, pts);                    /* orders and coordinates */
    b = fmk_bytes_plus(b, (self ? 1 : 2) * 8, leaves + 1); /* starts */
    b = fmk_bytes_plus(b, 8, boxes + 1);                   /* weak_begin */
    b = fmk_bytes_plus(b, 24, boxes);                      /* center, radius */
    b = fmk_bytes_plus(b, 24, leaves + 1);                 /* lists */
    b = fmk_bytes_plus(b, 4, fmk_bytes_add(n_weak, n_near));
    return b;
}

void fmk_fmm2d_tree_free(fmk_fmm2d_tree *t)
{
    if (t->trg_start != t->src_start)
        free(t->trg_start);
    if (t->trg_order != t->src_order)
        free(t->trg_order);
    if (t->trg_xy != t->src_xy)
        free(t->trg_xy);
    free(t->src_start), free(t->src_order), free(t->src_xy);
    free(t->center), free(t->radius), free(t->weak_begin), free(t->weak);
    free(t->p2p_begin), free(t->m2p_begin), free(t->p2l_begin);
    free(t->p2p), free(t->m2p), free(t->p2l);
    memset(t, 0, sizeof *t);
}

/* Segments of at least this many points are sorted by the project's radix sort on the key's
 * bits (fmk_tree3d_sort_ws, 11-bit digits) instead of qsort; the same (key, position) order.
 * (The tree of 2^20 uniform points on 2 cores: 1.18 -> 0.44 s; docs/fmm2d.md.) */
enum { RADIX_MIN = 256 };

/* Sorts n points (x, y, id) into box order over 2L splits and records each level's
 * bounding boxes (box_lo, box_hi: 2 per box, global index). Every array is allocated once
 * here (fresh pages per segment cost more than the sorts where page faults are slow). */
static int sort_points(int64_t n, int L, double *x, double *y, int64_t *id, double *box_lo,
                       double *box_hi, int threads)
{
    const size_t n1 = (size_t)(n > 0 ? n : 1);
    key_pos *kp = malloc(sizeof *kp * n1);
    double *x2 = malloc(sizeof(double) * n1), *y2 = malloc(sizeof(double) * n1);
    int64_t *id2 = malloc(sizeof(int64_t) * n1);
    uint64_t *keys = malloc(sizeof(uint64_t) * n1), *keys2 = malloc(sizeof(uint64_t) * n1);
    int64_t *pos = malloc(sizeof(int64_t) * n1), *pos2 = malloc(sizeof(int64_t) * n1);
    int64_t *hist = malloc(sizeof(int64_t) * (size_t)threads * FMK_TREE3D_SORT_RADIX);
    if (!kp || !x2 || !y2 || !id2 || !keys || !keys2 || !pos || !pos2 || !hist) {
        free(kp), free(x2), free(y2), free(id2), free(keys), free(keys2), free(pos), free(pos2);
        free(hist);
        return -1;
    }
    for (int s = 0; s <= 2 * L; s++) {
        const int64_t nseg = (int64_t)1 << s;
        /* segments in parallel once there are enough of them; before, each big segment's sort
         * uses the threads */
        const int outer = nseg >= threads;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (outer)
        for (int64_t g = 0; g < nseg; g++) {
            const int64_t a = fmk_fmm2d_seg_begin(n, s, g), e = fmk_fmm2d_seg_begin(n, s, g + 1);
            double lo[2], hi[2];
            bbox(x, y, a, e, lo, hi);
            if (s % 2 == 0) {
                const int64_t gb = fmk_fmm2d_first(s / 2) + g;
                box_lo[2 * gb] = lo[0], box_lo[2 * gb + 1] = lo[1];
                box_hi[2 * gb] = hi[0], box_hi[2 * gb + 1] = hi[1];
            }
            if (s == 2 * L)
                continue;
            const int axis = fmk_fmm2d_axis(lo, hi);
            const double *c = axis == 0 ? x : y;
            const int64_t *order;
            if (e - a >= RADIX_MIN) {
                /* large segments: the radix sort (stable, so the same (key, position) order as
                 * the comparison sort), with the threads while segments are few */
                for (int64_t i = a; i < e; i++)
                    keys[i] = fmk_fmm2d_key(c[i], lo[axis], hi[axis], s), pos[i] = i;
                fmk_tree3d_sort_ws(
                    keys + a, pos + a, e - a, outer ? 1 : threads, fmk_fmm2d_key_bits(s), keys2 + a,
                    pos2 + a,
                    hist + (outer ? (size_t)fmk_thread_num() * FMK_TREE3D_SORT_RADIX : 0));
                order = pos + a;
            } else {
                for (int64_t i = a; i < e; i++)
                    kp[i].key = fmk_fmm2d_key(c[i], lo[axis], hi[axis], s), kp[i].pos = i;
                qsort(kp + a, (size_t)(e - a), sizeof *kp, cmp_key_pos);
                for (int64_t i = a; i < e; i++)
                    pos[i] = kp[i].pos;
                order = pos + a;
            }
            for (int64_t i = a; i < e; i++) {
                const int64_t j = order[i - a];
                x2[i] = x[j], y2[i] = y[j], id2[i] = id[j];
            }
            memcpy(x + a, x2 + a, sizeof(double) * (size_t)(e - a));
            memcpy(y + a, y2 + a, sizeof(double) * (size_t)(e - a));
            memcpy(id + a, id2 + a, sizeof(int64_t) * (size_t)(e - a));
        }
    }
    free(kp), free(x2), free(y2), free(id2), free(keys), free(keys2), free(pos), free(pos2);
    free(hist);
    return 0;
}

/* A growable list of int32 box indices. */
typedef struct ilist {
    int32_t *v;
    int64_t n, cap;
} ilist;

static int ilist_reserve(ilist *l, int64_t n)
{
    if (n <= l->cap)
        return 0;
    int64_t cap = l->cap * 2 > n ? l->cap * 2 : n;
    int32_t *v = realloc(l->v, sizeof(int32_t) * (size_t)(cap > 0 ? cap : 1));
    if (!v)
        return -1;
    l->v = v, l->cap = cap;
    return 0;
}

/* Sources / targets of box b at level l. */
static int64_t count_in(const int64_t *start, int L, int l, int64_t b)
{
    int64_t a, e;
    fmk_fmm2d_range(start, L, l, b, &a, &e);
    return e - a;
}

/* The lists of level l from the strong lists of level l - 1 (prev_begin, prev). Pass 0 counts
 * (weak, strong) per box into cnt; pass 1 fills at the offsets off. */
static void connect_level(const fmk_fmm2d_tree *t, int l, const int64_t *prev_begin,
                          const int32_t *prev, int pass, int64_t *cnt_weak, int64_t *cnt_strong,
                          const int64_t *off_weak, const int64_t *off_strong, int32_t *weak,
                          int32_t *strong, int threads)
{
    const int L = t->levels;
    const int64_t nb = (int64_t)1 << (2 * l), f = fmk_fmm2d_first(l);
    (void)threads;
#pragma omp parallel for schedule(dynamic, 64) num_threads(threads)
    for (int64_t b = 0; b < nb; b++) {
        int64_t nw = 0, nsg = 0;
        if (count_in(t->trg_start, L, l, b) > 0) {
            const double *cb = t->center + 2 * (f + b);
            const double rb = t->radius[f + b];
            const int64_t P = b >> 2;
            for (int64_t e = prev_begin[P]; e < prev_begin[P + 1]; e++)
                for (int64_t c = 4 * (int64_t)prev[e]; c < 4 * (int64_t)prev[e] + 4; c++) {
                    if (count_in(t->src_start, L, l, c) == 0)
                        continue;
                    const int sep =
                        fmk_fmm2d_separated(cb, rb, t->center + 2 * (f + c), t->radius[f + c], 0);
                    if (sep) {
                        if (pass)
                            weak[off_weak[b] + nw] = (int32_t)(f + c);
                        nw++;
                    } else {
                        if (pass)
                            strong[off_strong[b] + nsg] = (int32_t)c;
                        nsg++;
                    }
                }
        }
        if (!pass)
            cnt_weak[b] = nw, cnt_strong[b] = nsg;
    }
}

static void exclusive_scan(const int64_t *cnt, int64_t n, int64_t *off)
{
    int64_t s = 0;
    for (int64_t i = 0; i < n; i++)
        off[i] = s, s += cnt[i];
    off[n] = s;
}

static int build_lists(fmk_fmm2d_tree *t, int threads)
{
    const int L = t->levels;
    const int64_t leaves = (int64_t)1 << (2 * L);
    int rc = -1;
    ilist weak = {0}, strong_prev = {0}, strong = {0};
    int64_t *cw = malloc(sizeof(int64_t) * (size_t)leaves);
    int64_t *cs = malloc(sizeof(int64_t) * (size_t)leaves);
    int64_t *ow = malloc(sizeof(int64_t) * (size_t)(leaves + 1));
    int64_t *sb_prev = malloc(sizeof(int64_t) * (size_t)(leaves + 1));
    int64_t *sb = malloc(sizeof(int64_t) * (size_t)(leaves + 1));
    t->weak_begin = malloc(sizeof(int64_t) * (size_t)(t->n_boxes + 1));
    t->p2p_begin = calloc((size_t)leaves + 1, sizeof(int64_t));
    t->m2p_begin = calloc((size_t)leaves + 1, sizeof(int64_t));
    t->p2l_begin = calloc((size_t)leaves + 1, sizeof(int64_t));
    if (!cw || !cs || !ow || !sb_prev || !sb || !t->weak_begin || !t->p2p_begin || !t->m2p_begin ||
        !t->p2l_begin || ilist_reserve(&strong_prev, 1))
        goto done;
    /* level 0: the root is strongly coupled to itself when it has sources and targets */
    t->weak_begin[0] = 0, t->weak_begin[1] = 0;
    sb_prev[0] = 0;
    sb_prev[1] = t->n_sources > 0 && t->n_targets > 0;
    strong_prev.v[0] = 0, strong_prev.n = sb_prev[1];
    for (int l = 1; l <= L; l++) {
        const int64_t nb = (int64_t)1 << (2 * l), f = fmk_fmm2d_first(l);
        connect_level(t, l, sb_prev, strong_prev.v, 0, cw, cs, NULL, NULL, NULL, NULL, threads);
        exclusive_scan(cw, nb, ow);
        exclusive_scan(cs, nb, sb);
        if (ilist_reserve(&weak, weak.n + ow[nb]) || ilist_reserve(&strong, sb[nb]))
            goto done;
        for (int64_t b = 0; b <= nb; b++)
            ow[b] += weak.n;
        connect_level(t, l, sb_prev, strong_prev.v, 1, cw, cs, ow, sb, weak.v, strong.v, threads);
        for (int64_t b = 0; b < nb; b++)
            t->weak_begin[f + b] = ow[b];
        weak.n = ow[nb];
        t->weak_begin[f + nb] = weak.n;
        strong.n = sb[nb];
        ilist tmp = strong_prev;
        strong_prev = strong, strong = tmp;
        memcpy(sb_prev, sb, sizeof(int64_t) * (size_t)(nb + 1));
    }
    /* the finest level: strong pairs that pass the interchanged test are shortcut */
    {
        const int64_t f = fmk_fmm2d_first(L);
        ilist lists[3] = {{0}, {0}, {0}}; /* p2p, m2p, p2l */
        int64_t *begin[3] = {t->p2p_begin, t->m2p_begin, t->p2l_begin};
        int ok = 1;
        for (int64_t b = 0; b < leaves && ok; b++) {
            for (int k = 0; k < 3; k++)
                begin[k][b] = lists[k].n;
            for (int64_t e = sb_prev[b]; e < sb_prev[b + 1] && ok; e++) {
                const int32_t c = strong_prev.v[e];
                int k = 0;
                if (c != b && fmk_fmm2d_separated(t->center + 2 * (f + b), t->radius[f + b],
                                                  t->center + 2 * (f + c), t->radius[f + c], 1))
                    k = t->radius[f + c] < t->radius[f + b] ? 1 : 2;
                if (ilist_reserve(&lists[k], lists[k].n + 1))
                    ok = 0;
                else
                    lists[k].v[lists[k].n++] = c;
            }
        }
        for (int k = 0; k < 3; k++)
            begin[k][leaves] = lists[k].n;
        t->p2p = lists[0].v, t->m2p = lists[1].v, t->p2l = lists[2].v;
        if (!ok)
            goto done;
    }
    t->weak = weak.v, weak.v = NULL;
    rc = 0;
done:
    free(weak.v), free(strong_prev.v), free(strong.v);
    free(cw), free(cs), free(ow), free(sb_prev), free(sb);
    return rc;
}

fmk_status fmk_fmm2d_tree_build(fmk_fmm2d_tree *t, int64_t ns, const double *sources, int self,
                                int64_t nt, const double *targets, int64_t n_d, int threads)
{
    memset(t, 0, sizeof *t);
    const int64_t n = self ? ns : ns + nt;
    const int L = fmk_fmm2d_levels(n, n_d);
    const int64_t leaves = (int64_t)1 << (2 * L);
    t->levels = L;
    t->n_points = n, t->n_sources = ns, t->n_targets = self ? ns : nt, t->self = self;
    t->n_boxes = fmk_fmm2d_first(L + 1);
    const size_t n1 = (size_t)(n > 0 ? n : 1);
    double *x = malloc(sizeof(double) * n1), *y = malloc(sizeof(double) * n1);
    int64_t *id = malloc(sizeof(int64_t) * n1);
    double *lo = malloc(sizeof(double) * 2 * (size_t)t->n_boxes);
    double *hi = malloc(sizeof(double) * 2 * (size_t)t->n_boxes);
    int64_t *before = malloc(sizeof(int64_t) * (n1 + 1));
    t->center = malloc(sizeof(double) * 2 * (size_t)t->n_boxes);
    t->radius = malloc(sizeof(double) * (size_t)t->n_boxes);
    t->src_start = malloc(sizeof(int64_t) * (size_t)(leaves + 1));
    t->trg_start = self ? t->src_start : malloc(sizeof(int64_t) * (size_t)(leaves + 1));
    t->src_order = malloc(sizeof(int64_t) * (size_t)(ns > 0 ? ns : 1));
    t->src_xy = malloc(sizeof(double) * 2 * (size_t)(ns > 0 ? ns : 1));
    t->trg_order = self ? t->src_order : malloc(sizeof(int64_t) * (size_t)(nt > 0 ? nt : 1));
    t->trg_xy = self ? t->src_xy : malloc(sizeof(double) * 2 * (size_t)(nt > 0 ? nt : 1));
    int bad = !x || !y || !id || !lo || !hi || !before || !t->center || !t->radius ||
              !t->src_start || !t->trg_start || !t->src_order || !t->src_xy || !t->trg_order ||
              !t->trg_xy;
    if (!bad) {
        for (int64_t i = 0; i < n; i++) {
            const double *p = i < ns ? sources + 2 * i : targets + 2 * (i - ns);
            x[i] = p[0], y[i] = p[1], id[i] = i;
        }
        bad = sort_points(n, L, x, y, id, lo, hi, threads) != 0;
    }
    if (!bad) {
        for (int64_t g = 0; g < t->n_boxes; g++)
            t->radius[g] = fmk_fmm2d_box(lo[2 * g], lo[2 * g + 1], hi[2 * g], hi[2 * g + 1],
                                         t->center + 2 * g, t->center + 2 * g + 1);
        /* sources and targets apart, each in box order */
        int64_t is = 0, it = 0;
        for (int64_t i = 0; i < n; i++) {
            before[i] = is;
            if (self || id[i] < ns) {
                t->src_order[is] = id[i];
                t->src_xy[2 * is] = x[i], t->src_xy[2 * is + 1] = y[i];
                is++;
            } else {
                t->trg_order[it] = id[i] - ns;
                t->trg_xy[2 * it] = x[i], t->trg_xy[2 * it + 1] = y[i];
                it++;
            }
        }
        before[n] = is;
        for (int64_t b = 0; b <= leaves; b++) {
            const int64_t pos = fmk_fmm2d_seg_begin(n, 2 * L, b);
            t->src_start[b] = before[pos];
            if (!self)
                t->trg_start[b] = pos - before[pos];
        }
        bad = build_lists(t, threads) != 0;
    }
    free(x), free(y), free(id), free(lo), free(hi), free(before);
    if (bad) {
        fmk_fmm2d_tree_free(t);
        return FMK_ERR_NOMEM;
    }
    return FMK_OK;
}
