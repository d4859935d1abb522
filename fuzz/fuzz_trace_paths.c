/*
 * fuzz_trace_paths.c: libFuzzer target for the chrome-trace reader's two
 * paths (src/trace/fastpath.c against the token path in events.c),
 * differential: any input is read whole from one buffer, where every event
 * that lies in it goes through the fast path, and one byte per read, where
 * none does. Both must hand over the same events, field by field (NaNs
 * alike, -0 told from 0), stop at the same byte with the same error and
 * count the same cut strings; a difference aborts. The unit test
 * (tests/unit/test_trace.c) holds the two to it on chosen documents; this
 * looks for the documents nobody chose.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/events.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define KEPT 512 /* events compared; the rest are counted */

typedef struct kept {
    tw_trace_event v[KEPT];
    int n;
} kept;

typedef struct reading {
    int rc;
    const char *error;
    uint64_t at, cut;
    tw_trace_reader_stats st;
} reading;

typedef struct drip {
    const uint8_t *s;
    size_t len, pos;
} drip;

static long drip_read(void *arg, char *buf, size_t cap)
{
    drip *d = arg;
    (void)cap;
    if (d->pos == d->len)
        return 0;
    buf[0] = (char)d->s[d->pos++];
    return 1;
}

static void keep(void *arg, const tw_trace_event *e)
{
    kept *k = arg;
    if (k->n < KEPT) {
        tw_trace_event *c = &k->v[k->n];
        *c = *e;
        memcpy(c->name_buf, e->name, e->name_len + 1); /* the name where the copy keeps it */
        c->name = c->name_buf;
    }
    k->n++;
}

static void read_with(tw_jstream *s, kept *k, reading *r)
{
    r->rc = tw_trace_read(s, keep, k, &r->st, &r->error);
    r->at = tw_jstream_offset(s);
    r->cut = s->strings_cut;
    tw_jstream_free(s);
}

static bool same_double(double a, double b)
{
    return (a != a && b != b) || memcmp(&a, &b, sizeof a) == 0;
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

static void differ(const char *what, long i)
{
    fprintf(stderr, "fuzz_trace_paths: the fast and token paths differ: %s (%ld)\n", what, i);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static kept a, b;
    reading ra = {0}, rb = {0};
    tw_jstream s;
    if (size > TW_JSTREAM_BUFFER || tw_jstream_init(&s, NULL, NULL) != 0)
        return 0;
    memcpy(s.own, data, size);
    s.len = size;
    s.eof = true;
    a.n = b.n = 0;
    read_with(&s, &a, &ra);
    drip d = {data, size, 0};
    if (tw_jstream_init(&s, drip_read, &d) != 0)
        return 0;
    read_with(&s, &b, &rb);
    if (ra.rc != rb.rc || a.n != b.n)
        differ("result or event count", a.n - b.n);
    if (ra.rc != 0 && strcmp(ra.error, rb.error) != 0)
        differ("error", (long)ra.at);
    if (ra.rc == 0 && ra.at != rb.at)
        differ("bytes read", (long)ra.at);
    if (ra.cut != rb.cut)
        differ("cut strings", (long)ra.cut);
    if (ra.st.unpaired != rb.st.unpaired || ra.st.legacy != rb.st.legacy || ra.st.paddle != rb.st.paddle ||
        ra.st.kineto != rb.st.kineto || ra.st.rank != rb.st.rank)
        differ("reader stats", 0);
    for (int i = 0; i < a.n && i < KEPT; i++) {
        if (!same_event(&a.v[i], &b.v[i]))
            differ("event", i);
    }
    return 0;
}
