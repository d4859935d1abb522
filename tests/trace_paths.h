/*
 * trace_paths.h: the trace reader's fast path held to its token path, for
 * the unit test (tests/unit/test_trace.c) and the differential fuzz target
 * (fuzz/fuzz_trace_paths.c), so both compare the same way and a field
 * added to tw_trace_event is compared in one place. A document is read
 * whole from one buffer, where every event that lies in it goes through
 * the fast path (src/trace/fastpath.c), and one byte per read, where none
 * does (the token path, src/trace/events.c). Header-only: each includer
 * gets its own static copies.
 */
#ifndef TW_TESTS_TRACE_PATHS_H
#define TW_TESTS_TRACE_PATHS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "trace/events.h"
#include "trace/jstream.h"

typedef struct drip {
    const char *s;
    size_t len, pos;
} drip;

/* One byte per read: every token straddles a chunk boundary. */
static long drip_read(void *arg, char *buf, size_t cap)
{
    drip *d = arg;
    (void)cap;
    if (d->pos == d->len)
        return 0;
    buf[0] = d->s[d->pos++];
    return 1;
}

#define SEEN_MAX 512 /* events kept for comparing; the rest are counted */

typedef struct seen {
    tw_trace_event v[SEEN_MAX];
    int n;
} seen;

static void keep_event(void *arg, const tw_trace_event *e)
{
    seen *s = arg;
    if (s->n < SEEN_MAX) {
        tw_trace_event *c = &s->v[s->n];
        *c = *e;
        memcpy(c->name_buf, e->name, e->name_len + 1); /* the name where the copy keeps it */
        c->name = c->name_buf;
    }
    s->n++;
}

static bool same_double(double a, double b)
{
    return (a != a && b != b) || memcmp(&a, &b, sizeof a) == 0; /* -0 and 0 told apart */
}

static bool same_event(const tw_trace_event *x, const tw_trace_event *y)
{
    return x->ph == y->ph && x->kind == y->kind && x->name_len == y->name_len &&
           memcmp(x->name, y->name, x->name_len + 1) == 0 && strcmp(x->cat, y->cat) == 0 && same_double(x->ts, y->ts) &&
           same_double(x->dur, y->dur) && x->has_ts == y->has_ts && x->has_dur == y->has_dur && x->pid == y->pid &&
           x->tid == y->tid && x->correlation == y->correlation && x->external_id == y->external_id &&
           same_double(x->bytes, y->bytes) && same_double(x->device, y->device) && same_double(x->stream, y->stream) &&
           same_double(x->allocated, y->allocated) && same_double(x->reserved, y->reserved);
}

/* Reads doc (len bytes, at most TW_JSTREAM_BUFFER) whole and one byte per
 * read: NULL when both hand over the same events and end the same way (the
 * same result and error, the same bytes read when it succeeds, the same
 * cut strings and reader stats), else what differs, in a static buffer.
 * An error's byte may differ: a skipped container reports where the read
 * that held its start began. */
static const char *paths_differ(const char *doc, size_t len)
{
    static seen a, b;
    static char why[256];
    tw_trace_reader_stats sa, sb;
    const char *ea = NULL, *eb = NULL;
    tw_jstream s;
    a.n = b.n = 0;
    if (len > TW_JSTREAM_BUFFER || tw_jstream_init(&s, NULL, NULL) != 0)
        return "cannot be read whole";
    memcpy(s.own, doc, len);
    s.len = len;
    s.eof = true;
    int ra = tw_trace_read(&s, keep_event, &a, &sa, &ea);
    uint64_t at_a = tw_jstream_offset(&s), cut_a = s.strings_cut;
    tw_jstream_free(&s);
    drip d = {doc, len, 0};
    if (tw_jstream_init(&s, drip_read, &d) != 0)
        return "no memory";
    int rb = tw_trace_read(&s, keep_event, &b, &sb, &eb);
    uint64_t at_b = tw_jstream_offset(&s), cut_b = s.strings_cut;
    tw_jstream_free(&s);
    if (ra != rb || a.n != b.n)
        snprintf(why, sizeof why, "rc %d/%d, events %d/%d", ra, rb, a.n, b.n);
    else if (ra != 0 && strcmp(ea, eb) != 0)
        snprintf(why, sizeof why, "%s at %llu / %s at %llu", ea, (unsigned long long)at_a, eb,
                 (unsigned long long)at_b);
    else if (ra == 0 && at_a != at_b)
        snprintf(why, sizeof why, "read %llu / %llu bytes", (unsigned long long)at_a, (unsigned long long)at_b);
    else if (cut_a != cut_b)
        snprintf(why, sizeof why, "cut strings %llu / %llu", (unsigned long long)cut_a, (unsigned long long)cut_b);
    else if (sa.unpaired != sb.unpaired || sa.legacy != sb.legacy || sa.paddle != sb.paddle || sa.kineto != sb.kineto ||
             sa.rank != sb.rank)
        snprintf(why, sizeof why, "reader stats (unpaired %llu / %llu)", (unsigned long long)sa.unpaired,
                 (unsigned long long)sb.unpaired);
    else
        why[0] = '\0';
    for (int i = 0; !why[0] && i < a.n && i < SEEN_MAX; i++) {
        const tw_trace_event *x = &a.v[i], *y = &b.v[i];
        if (!same_event(x, y))
            snprintf(why, sizeof why, "event %d differs (ts %g/%g, pid %lld/%lld, corr %lld/%lld)", i, x->ts, y->ts,
                     (long long)x->pid, (long long)y->pid, (long long)x->correlation, (long long)y->correlation);
    }
    return why[0] ? why : NULL;
}

#endif
