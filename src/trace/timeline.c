/*
 * timeline.c: interval sets, the watermark flush and the per-window
 * accounting. A window's split is computed from merged walks over the sets:
 * compute = |C|, communication = |C u K| - |C|, memcpy = |C u K u M| -
 * |C u K|, idle = the rest, so the four add up to the window and work under
 * compute counts as compute (HTA's temporal breakdown). Each idle gap is
 * then attributed: inside DataLoader spans first, then synchronisation,
 * then a short gap between two GPU activities (kernel-to-kernel), else the
 * host not launching work.
 */
#include "timeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/error.h"

void tw_timeline_init(tw_timeline *t, double gap_us)
{
    memset(t, 0, sizeof *t);
    t->watermark = -INFINITY;
    t->gap_us = gap_us;
    t->gpu_first = INFINITY;
    t->gpu_last = -INFINITY;
}

void tw_timeline_free(tw_timeline *t)
{
    for (int k = 0; k < TW_SET_COUNT; k++)
        free(t->sets[k].v);
    free(t->steps);
    memset(t, 0, sizeof *t);
}

/* First interval whose end is above x. */
static size_t first_ending_after(const tw_ivset *s, double x)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->v[2 * mid + 1] > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* First interval whose start is above x. */
static size_t first_starting_after(const tw_ivset *s, double x)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->v[2 * mid] > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static int ivset_add(tw_ivset *s, double a, double b)
{
    if (s->n > 0) {
        double *last = &s->v[2 * (s->n - 1)];
        if (a >= last[0] && a <= last[1]) { /* the common case: extends the last */
            if (b > last[1])
                last[1] = b;
            return TW_OK;
        }
    }
    size_t lo, hi;
    if (s->n == 0 || a > s->v[2 * s->n - 1]) {
        lo = hi = s->n; /* the next most common: after the last, apart from it */
    } else {
        lo = first_ending_after(s, a - 0.0); /* intervals before lo end at or before a */
        if (lo > 0 && s->v[2 * (lo - 1) + 1] == a)
            lo--; /* touching: merge */
        hi = first_starting_after(s, b);
    }
    if (lo < hi) { /* overlaps [lo, hi): merge into lo */
        s->v[2 * lo] = tw_dmin(s->v[2 * lo], a);
        s->v[2 * lo + 1] = tw_dmax(s->v[2 * (hi - 1) + 1], b);
        memmove(&s->v[2 * (lo + 1)], &s->v[2 * hi], (s->n - hi) * 2 * sizeof(double));
        s->n -= hi - lo - 1;
        return TW_OK;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        double *v = realloc(s->v, cap * 2 * sizeof(double));
        if (!v)
            return TW_ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    memmove(&s->v[2 * (lo + 1)], &s->v[2 * lo], (s->n - lo) * 2 * sizeof(double));
    s->v[2 * lo] = a;
    s->v[2 * lo + 1] = b;
    s->n++;
    return TW_OK;
}

/* ---- merged walks ------------------------------------------------------ */

typedef struct walk {
    const tw_ivset *s[3];
    size_t i[3];
    int k;
    double lo, hi;
} walk;

static void walk_init(walk *w, const tw_ivset *const *sets, int k, double lo, double hi)
{
    w->k = k;
    w->lo = lo;
    w->hi = hi;
    for (int j = 0; j < k; j++) {
        w->s[j] = sets[j];
        w->i[j] = first_ending_after(sets[j], lo);
    }
}

/* The next merged interval starting below hi, unclipped. */
static bool walk_merge(walk *w, double *a, double *b)
{
    bool have = false;
    for (;;) {
        int best = -1;
        double bs = INFINITY;
        for (int j = 0; j < w->k; j++) {
            if (w->i[j] < w->s[j]->n && w->s[j]->v[2 * w->i[j]] < bs) {
                bs = w->s[j]->v[2 * w->i[j]];
                best = j;
            }
        }
        if (best < 0 || bs >= w->hi || (have && bs > *b))
            break;
        double be = w->s[best]->v[2 * w->i[best] + 1];
        if (!have) {
            *a = bs;
            *b = be;
            have = true;
        } else if (be > *b) {
            *b = be;
        }
        w->i[best]++;
    }
    return have;
}

/* The next merged interval within [lo, hi); false when there is none. */
static bool walk_next(walk *w, double *a, double *b)
{
    for (;;) {
        bool more = walk_merge(w, a, b);
        if (!more)
            return false;
        *a = tw_dmax(*a, w->lo);
        *b = tw_dmin(*b, w->hi);
        if (*b > *a)
            return true;
    }
}

static double walk_sum(walk *w)
{
    double a, b, sum = 0;
    while (walk_next(w, &a, &b))
        sum += b - a;
    return sum;
}

static double cover(const tw_ivset *const *sets, int k, double lo, double hi)
{
    walk w;
    walk_init(&w, sets, k, lo, hi);
    return walk_sum(&w);
}

/* As cover, for windows that come in order: at[j] is where the last window
 * of sets[j] began (an interval at or before the first ending after lo),
 * and moves on to this one's, so a window's gaps cost a step each rather
 * than a search each. */
static double cover_on(const tw_ivset *const *sets, int k, double lo, double hi, size_t *at)
{
    walk w = {.k = k, .lo = lo, .hi = hi};
    for (int j = 0; j < k; j++) {
        const tw_ivset *s = sets[j];
        while (at[j] < s->n && !(s->v[2 * at[j] + 1] > lo))
            at[j]++;
        w.s[j] = s;
        w.i[j] = at[j];
    }
    return walk_sum(&w);
}

static void account(tw_timeline *t, double lo, double hi, tw_trace_split *sp)
{
    if (!(hi > lo))
        return;
    const tw_ivset *c = &t->sets[TW_SET_COMPUTE], *k = &t->sets[TW_SET_COMM], *m = &t->sets[TW_SET_MEMCPY];
    const tw_ivset *d = &t->sets[TW_SET_DATA], *y = &t->sets[TW_SET_SYNC];
    const tw_ivset *ck[] = {c, k}, *all[] = {c, k, m}, *dy[] = {d, y};
    double wall = hi - lo, C = cover(&c, 1, lo, hi), CK = cover(ck, 2, lo, hi);
    double K = cover(&k, 1, lo, hi);
    sp->wall += wall;
    sp->compute += C;
    sp->comm += CK - C;
    sp->comm_total += K;
    sp->comm_overlap += K - (CK - C);
    sp->data_span += cover(&d, 1, lo, hi);
    /* the gaps of all GPU work within the window */
    walk w;
    walk_init(&w, all, 3, lo, hi);
    double a, b, prev = lo, busy = 0;
    bool first = true;
    size_t at_d = first_ending_after(d, lo), at_dy[2] = {at_d, first_ending_after(y, lo)};
    for (;;) {
        bool more = walk_next(&w, &a, &b);
        double ga = prev, gb = more ? a : hi;
        if (gb > ga) {
            double data = cover_on(&d, 1, ga, gb, &at_d), either = cover_on(dy, 2, ga, gb, at_dy);
            double rest = (gb - ga) - either;
            sp->idle_data += data;
            sp->idle_sync += either - data;
            if (!first && more && gb - ga <= t->gap_us)
                sp->idle_gap += rest;
            else
                sp->idle_host += rest;
        }
        if (!more)
            break;
        busy += b - a;
        prev = b;
        first = false;
    }
    sp->memcpy += busy - CK;
    sp->idle += wall - busy;
}

/* Accounts [lo, hi) into the steps, or the stepless window. */
static void settle(tw_timeline *t, double lo, double hi)
{
    if (t->step_count == 0) {
        account(t, fmax(lo, t->gpu_first), fmin(hi, t->gpu_last), &t->nostep);
        return;
    }
    for (size_t i = 0; i < t->step_count; i++) {
        tw_trace_step *s = &t->steps[i];
        if (s->end > lo && s->start < hi)
            account(t, fmax(lo, s->start), fmin(hi, s->end), &s->split);
    }
}

static void flush(tw_timeline *t, double upto)
{
    settle(t, t->watermark, upto);
    for (int k = 0; k < TW_SET_COUNT; k++) {
        tw_ivset *s = &t->sets[k];
        size_t i = first_ending_after(s, upto);
        if (i == 0)
            continue; /* nothing before the watermark (or an empty set) */
        memmove(s->v, &s->v[2 * i], (s->n - i) * 2 * sizeof(double));
        s->n -= i;
    }
    for (int k = 0; k < TW_SET_COUNT; k++) {
        tw_ivset *s = &t->sets[k];
        if (s->n > 0 && s->v[0] < upto)
            s->v[0] = upto;
    }
    t->watermark = upto;
}

/* A set is over the cap: flush up to its median interval. A host set
 * flushes no further than the GPU work seen so far, and waits (up to
 * TW_TIMELINE_HOST_CAP) while that would free less than a quarter of it. */
static void overflow(tw_timeline *t, tw_set_kind k)
{
    tw_ivset *s = &t->sets[k];
    double upto = s->v[2 * (s->n / 2)];
    if (k == TW_SET_DATA || k == TW_SET_SYNC) {
        double gpu = fmin(upto, t->gpu_last);
        if (first_ending_after(s, gpu) >= s->n / 4 && gpu > t->watermark)
            upto = gpu;
        else if (s->n <= TW_TIMELINE_HOST_CAP)
            return;
        else
            t->forced++;
    }
    t->flushes++;
    flush(t, upto);
}

void tw_timeline_add(tw_timeline *t, tw_set_kind k, double start, double end)
{
    if (!(end > start))
        return; /* empty: takes no time */
    if (k <= TW_SET_MEMCPY) {
        t->gpu_first = tw_dmin(t->gpu_first, start);
        t->gpu_last = tw_dmax(t->gpu_last, end);
    }
    if (end <= t->watermark) {
        t->late++;
        return;
    }
    if (start < t->watermark) {
        t->late++;
        start = t->watermark;
    }
    tw_ivset *s = &t->sets[k];
    if (ivset_add(s, start, end) != TW_OK) {
        t->error = TW_ENOMEM;
        return;
    }
    if (s->n > TW_TIMELINE_CAP)
        overflow(t, k);
}

void tw_timeline_add_step(tw_timeline *t, int64_t id, double start, double end)
{
    if (end <= t->watermark) {
        t->late++;
        return;
    }
    if (t->step_count == TW_TIMELINE_STEPS) {
        t->steps_over++;
        return;
    }
    if (t->step_count == t->step_cap) {
        size_t cap = t->step_cap ? t->step_cap * 2 : 64;
        tw_trace_step *v = realloc(t->steps, cap * sizeof *v);
        if (!v) {
            t->error = TW_ENOMEM;
            return;
        }
        t->steps = v;
        t->step_cap = cap;
    }
    size_t i = t->step_count;
    while (i > 0 && t->steps[i - 1].start > start) { /* kept sorted by start */
        t->steps[i] = t->steps[i - 1];
        i--;
    }
    t->steps[i] = (tw_trace_step){.id = id, .start = start, .end = end, .peak_allocated = NAN, .peak_reserved = NAN};
    t->step_count++;
}

tw_trace_step *tw_timeline_step_at(tw_timeline *t, double ts)
{
    size_t lo = 0, hi = t->step_count;
    while (lo < hi) { /* the last step starting at or before ts */
        size_t mid = (lo + hi) / 2;
        if (t->steps[mid].start <= ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    tw_trace_step *s = &t->steps[lo - 1];
    return ts < s->end ? s : NULL;
}

void tw_timeline_finish(tw_timeline *t)
{
    flush(t, INFINITY);
}

static void add_split(tw_trace_split *to, const tw_trace_split *s)
{
    to->wall += s->wall;
    to->compute += s->compute;
    to->comm += s->comm;
    to->memcpy += s->memcpy;
    to->idle += s->idle;
    to->idle_data += s->idle_data;
    to->idle_sync += s->idle_sync;
    to->idle_gap += s->idle_gap;
    to->idle_host += s->idle_host;
    to->data_span += s->data_span;
    to->comm_total += s->comm_total;
    to->comm_overlap += s->comm_overlap;
}

void tw_timeline_total(const tw_timeline *t, tw_trace_split *out)
{
    memset(out, 0, sizeof *out);
    if (t->step_count == 0) {
        *out = t->nostep;
        return;
    }
    for (size_t i = 0; i < t->step_count; i++)
        add_split(out, &t->steps[i].split);
}
