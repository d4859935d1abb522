/*
 * events.c: the chrome-trace document reader, tw_trace_read. It walks the
 * document with the tokenizer: top-level keys other than traceEvents and
 * distributedInfo are skipped whole; in an event only ph, cat, name, ts,
 * dur, pid, tid and a few args are kept, deeper values are skipped without
 * recursion. Trailing commas and the {} sentinel Paddle writes are accepted
 * (the sentinel is an event without ph: skipped). B/E pairs are joined here
 * into complete events, per (pid, tid) stack.
 *
 * Each event is read by one of two paths. The fast path (fastpath.c) reads
 * an event that lies whole in the tokenizer's buffer where it lies; when it
 * gives up, having consumed nothing, the token path below reads the event
 * from the tokens: any input, and the reference the fast path is held to
 * (tests/unit/test_trace.c). Either way the event is handed over by
 * finish_event, classified (classify.c) on the way. A large file's events
 * array may instead be read in pieces by several threads (parallel.c):
 * there each thread reads its piece with the same two paths and packs its
 * events (pack_event, classified unless half of a B/E pair), and this
 * reader unpacks them in the file's order into finish_event (read_pieces).
 */
#include "events.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/cut.h"
#include "../core/grow.h"
#include "reader.h"
#include "trainwatch/error.h"

/* A B event waiting for its E: what the complete event will need. */
typedef struct open_span {
    double ts;
    char name[TW_TRACE_NAME_MAX];
    char cat[48];
    int64_t correlation, external_id;
    double bytes, device, stream;
} open_span;

typedef struct span_stack {
    int64_t pid, tid;
    int depth;
    open_span *v; /* TW_PAIR_DEPTH, allocated at the thread's first B */
} span_stack;

typedef struct reader {
    tw_jstream *s;
    tw_trace_event_fn fn;
    void *arg;
    tw_trace_reader_stats *st;
    tw_trace_event ev, paired;
    span_stack stacks[TW_PAIR_THREADS];
    int stack_count;
    tw_trace_fast_in in;               /* the fast path's place in the buffer */
    void (*deliver)(struct reader *r); /* r->ev read: finish_event, or pack_event into chunk */
    tw_trace_chunk *chunk;
    tw_trace_kind_memo *kinds; /* the reader's (or the chunk's) own; NULL: each name worked out */
    const tw_trace_par *par;   /* the events array by several threads, or NULL */
    bool ev_classified;        /* r->ev came classified from a piece */
} reader;

static bool fail(reader *r, const char *why)
{
    if (!r->s->error)
        r->s->error = why;
    return false;
}

/* A number, or a string holding one ("123(Python)", "stream 7", "1.5"). */
static bool read_number(reader *r, double *out, bool *is_string)
{
    tw_jtok t = tw_jstream_next(r->s);
    *is_string = false;
    if (t == TW_JT_NUMBER) {
        *out = r->s->num;
        return true;
    }
    if (t == TW_JT_STRING) {
        *is_string = true;
        const char *p = r->s->str;
        while (*p && !(*p >= '0' && *p <= '9') && *p != '-')
            p++;
        char *end;
        double v = strtod(p, &end);
        *out = end == p ? NAN : v;
        return true;
    }
    *out = NAN;
    return tw_jstream_skip(r->s, t);
}

static bool read_string(reader *r, char *out, size_t cap, size_t *len)
{
    tw_jtok t = tw_jstream_next(r->s);
    if (t != TW_JT_STRING) {
        out[0] = '\0';
        if (len)
            *len = 0;
        return tw_jstream_skip(r->s, t);
    }
    size_t n = r->s->str_len < cap - 1 ? r->s->str_len : cap - 1;
    memcpy(out, r->s->str, n);
    out[n] = '\0';
    if (len)
        *len = n;
    return true;
}

/* Reads "key": and leaves the value next; false at the object's end. */
static int member_key(reader *r, bool first, char *key, size_t cap)
{
    int fast;
    if (tw_jstream_key_fast(r->s, first, &fast)) {
        if (fast == 1) {
            size_t n = r->s->str_len < cap - 1 ? r->s->str_len : cap - 1;
            memcpy(key, r->s->str, n);
            key[n] = '\0';
        }
        return fast;
    }
    tw_jtok t = tw_jstream_next(r->s);
    if (!first) {
        if (t == TW_JT_OBJECT_END)
            return 0;
        if (t != TW_JT_COMMA)
            return fail(r, "expected , or } in an object") ? -1 : -1;
        t = tw_jstream_next(r->s);
    }
    if (t == TW_JT_OBJECT_END)
        return 0; /* {} or a trailing comma */
    if (t != TW_JT_STRING)
        return fail(r, t == TW_JT_EOF ? "unexpected end of input" : "expected a key"), -1;
    size_t n = r->s->str_len < cap - 1 ? r->s->str_len : cap - 1;
    memcpy(key, r->s->str, n);
    key[n] = '\0';
    if (tw_jstream_next(r->s) != TW_JT_COLON)
        return fail(r, "expected : after a key"), -1;
    return 1;
}

static bool read_args(reader *r)
{
    char key[64];
    bool first = true, str;
    double v;
    tw_trace_event *e = &r->ev;
    for (;;) {
        int k = member_key(r, first, key, sizeof key);
        first = false;
        if (k <= 0)
            return k == 0;
        double *target = NULL;
        int64_t *itarget = NULL;
        switch (strlen(key)) { /* by length first: most args are none of these */
        case 5:
            target = strcmp(key, "bytes") == 0 ? &e->bytes : NULL;
            break;
        case 6:
            target = strcmp(key, "device") == 0 ? &e->device : strcmp(key, "stream") == 0 ? &e->stream : NULL;
            break;
        case 11:
            itarget = strcasecmp(key, "correlation") == 0   ? &e->correlation
                      : strcasecmp(key, "external id") == 0 ? &e->external_id
                                                            : NULL;
            break;
        case 14:
            itarget = strcasecmp(key, "correlation id") == 0 ? &e->correlation : NULL;
            target = strcmp(key, "Total Reserved") == 0 ? &e->reserved : NULL;
            break;
        case 15:
            target = strcmp(key, "Total Allocated") == 0 ? &e->allocated : NULL;
            break;
        case 16:
            target = strcmp(key, "current_reserved") == 0 ? &e->reserved : NULL;
            break;
        case 17:
            target = strcmp(key, "current_allocated") == 0 ? &e->allocated : NULL;
            break;
        default:
            break;
        }
        if (!target && !itarget) {
            if (!tw_jstream_skip_next(r->s))
                return false;
            continue;
        }
        if (!read_number(r, &v, &str))
            return false;
        if (target)
            *target = v;
        else if (v == v && v >= 0 && v < 9e18)
            *itarget = (int64_t)v;
    }
}

static span_stack *stack_of(reader *r, int64_t pid, int64_t tid, bool create)
{
    for (int i = 0; i < r->stack_count; i++) {
        if (r->stacks[i].pid == pid && r->stacks[i].tid == tid)
            return &r->stacks[i];
    }
    if (!create || r->stack_count == TW_PAIR_THREADS)
        return NULL;
    open_span *v = malloc(TW_PAIR_DEPTH * sizeof *v);
    if (!v)
        return NULL;
    r->stacks[r->stack_count] = (span_stack){pid, tid, 0, v};
    return &r->stacks[r->stack_count++];
}

static void begin_span(reader *r, const tw_trace_event *e)
{
    span_stack *k = e->has_ts ? stack_of(r, e->pid, e->tid, true) : NULL;
    if (!k || k->depth == TW_PAIR_DEPTH) {
        r->st->unpaired++;
        return;
    }
    open_span *o = &k->v[k->depth++];
    *o = (open_span){.ts = e->ts,
                     .correlation = e->correlation,
                     .external_id = e->external_id,
                     .bytes = e->bytes,
                     .device = e->device,
                     .stream = e->stream};
    tw_copy_cut(o->name, sizeof o->name, e->name, e->name_len);
    tw_copy_cut(o->cat, sizeof o->cat, e->cat, strlen(e->cat));
}

/* The complete event for an E, in r->paired; false when nothing is open. */
static bool end_span(reader *r, const tw_trace_event *e)
{
    span_stack *k = stack_of(r, e->pid, e->tid, false);
    if (!k || k->depth == 0 || !e->has_ts) {
        r->st->unpaired++;
        return false;
    }
    const open_span *o = &k->v[--k->depth];
    tw_trace_event *x = &r->paired;
    *x = *e; /* the E's args count where the B had none (chrome's merge) */
    x->ph = 'X';
    x->name = x->name_buf;
    tw_copy_cut(x->name_buf, sizeof x->name_buf, o->name, strlen(o->name));
    x->name_len = strlen(x->name);
    x->name_hashed = false;
    tw_copy_cut(x->cat, sizeof x->cat, o->cat, strlen(o->cat));
    x->ts = o->ts;
    x->dur = e->ts - o->ts;
    x->has_ts = true;
    x->has_dur = x->dur >= 0;
    x->correlation = o->correlation >= 0 ? o->correlation : e->correlation;
    x->external_id = o->external_id >= 0 ? o->external_id : e->external_id;
    x->bytes = o->bytes == o->bytes ? o->bytes : e->bytes;
    x->device = o->device == o->device ? o->device : e->device;
    x->stream = o->stream == o->stream ? o->stream : e->stream;
    return true;
}

/* The members of an event whose { was read, token by token: any input. */
static bool parse_event(reader *r)
{
    tw_trace_event *e = &r->ev;
    tw_trace_event_reset(e);
    char key[32], ph[8];
    bool first = true, str;
    double v;
    for (;;) {
        int k = member_key(r, first, key, sizeof key);
        first = false;
        if (k < 0)
            return false;
        if (k == 0)
            break;
        bool ok = true;
        if (strcmp(key, "ph") == 0) {
            ok = read_string(r, ph, sizeof ph, NULL);
            e->ph = ph[0];
        } else if (strcmp(key, "name") == 0) {
            ok = read_string(r, e->name_buf, sizeof e->name_buf, &e->name_len);
        } else if (strcmp(key, "cat") == 0) {
            ok = read_string(r, e->cat, sizeof e->cat, NULL);
        } else if (strcmp(key, "ts") == 0 || strcmp(key, "dur") == 0) {
            ok = read_number(r, &v, &str);
            if (key[0] == 't')
                e->ts = v, e->has_ts = !str && isfinite(v);
            else
                e->dur = v, e->has_dur = !str && isfinite(v) && v >= 0;
        } else if (strcmp(key, "pid") == 0 || strcmp(key, "tid") == 0) {
            ok = read_number(r, &v, &str);
            *(key[0] == 'p' ? &e->pid : &e->tid) = tw_trace_as_id(v);
        } else if (strcmp(key, "args") == 0) {
            tw_jtok t = tw_jstream_next(r->s);
            ok = t == TW_JT_OBJECT ? read_args(r) : tw_jstream_skip(r->s, t);
        } else {
            ok = tw_jstream_skip_next(r->s);
        }
        if (!ok)
            return false;
    }
    return true;
}

/* Hands r->ev over, read by either path. */
static void finish_event(reader *r)
{
    tw_trace_event *e = &r->ev;
    if (e->ph == 0)
        return; /* Paddle's {} sentinel, or not an event */
    if (!r->st->legacy && (e->cat[0] == 'O' || e->cat[0] == 'R'))
        r->st->legacy = strcmp(e->cat, "Operator") == 0 || strcmp(e->cat, "Runtime") == 0;
    if (!r->st->paddle && (e->cat[0] == 'C' || e->cat[0] == 'P'))
        r->st->paddle = strcmp(e->cat, "CudaRuntime") == 0 || strcmp(e->cat, "ProfileStep") == 0;
    if (!r->st->kineto && (e->cat[0] == 'c' || e->cat[0] == 'k'))
        r->st->kineto = strcmp(e->cat, "cpu_op") == 0 || strcmp(e->cat, "kernel") == 0;
    if (e->ph == 'E') { /* handed over as the complete event it ends */
        if (!end_span(r, e))
            return;
        e = &r->paired;
    } else if (e->ph == 'B') {
        begin_span(r, e);
    }
    if (e != &r->ev || !r->ev_classified)
        tw_trace_classify_memo(r->kinds, e);
    r->st->events++;
    r->fn(r->arg, e);
}

/* r->ev as either path read it to r->deliver: an event of a ph nothing
 * reads past as its ph alone (the fast path leaves its numbers unread). */
static void deliver(reader *r)
{
    tw_trace_event_keep_ph(&r->ev);
    r->deliver(r);
}

/* Reads the items of an events array (its [ read; first: no comma before
 * the next item) until its ] (1), or, with a limit, until an item begins
 * at or past it (2: the tokenizer stands at that item's first byte); 0 on
 * an error. Each event goes to r->deliver. */
static int read_items(reader *r, bool first, uint64_t limit)
{
    for (;;) {
        int c = tw_jstream_peek(r->s);
        if (!first && c == ',') {
            r->s->pos++;
            first = true;
            c = tw_jstream_peek(r->s);
        }
        if (first && c >= 0 && c != ']') { /* an item begins here */
            if (tw_jstream_offset(r->s) >= limit)
                return 2;
            if (c == '{' && tw_trace_fast_event(r->s, &r->in, &r->ev, true)) {
                first = false;
                deliver(r);
                continue;
            }
        }
        tw_jtok t = tw_jstream_next(r->s);
        if (!first) {
            if (t == TW_JT_ARRAY_END)
                return 1;
            if (t != TW_JT_COMMA)
                return fail(r, t == TW_JT_EOF ? "unexpected end of input" : "expected , or ] between events");
            t = tw_jstream_next(r->s);
        }
        first = false;
        if (t == TW_JT_ARRAY_END)
            return 1;
        if (t == TW_JT_OBJECT) {
            if (!parse_event(r))
                return 0;
            deliver(r);
        } else if (t == TW_JT_EOF) {
            return fail(r, "unexpected end of input");
        } else if (!tw_jstream_skip(r->s, t)) {
            return 0;
        }
    }
}

/* ---- the events array in pieces, by several threads --------------------- */

/* r->ev into r->chunk, classified unless it is half of a B/E pair (a
 * worker's part: pairing and handing over are the reading thread's, in
 * order). An event without ph is
 * dropped here as finish_event drops it; out of memory fails the piece. */
static void pack_event(reader *r)
{
    tw_trace_event *e = &r->ev;
    tw_trace_chunk *c = r->chunk;
    if (e->ph == 0 || c->status == TW_CHUNK_FAIL)
        return;
    bool classified = e->ph != 'B' && e->ph != 'E'; /* a pair is classified as one, when it is one */
    if (classified)
        tw_trace_classify_memo(r->kinds, e);
    size_t cat_len = strlen(e->cat), need = e->name_len + 1 + cat_len; /* the name with its NUL */
    if ((c->count + 1) * sizeof *c->events + c->text.len + need > c->budget) {
        c->status = TW_CHUNK_FAIL; /* denser than a profiler's events: memory stays bounded */
        return;
    }
    if ((c->count == c->cap && TW_GROW_SIZE(c->events, c->count, c->cap, 4096) != TW_OK) ||
        !tw_buffer_reserve(&c->text, need)) {
        c->status = TW_CHUNK_FAIL;
        return;
    }
    c->events[c->count++] = (tw_trace_packed){.ts = e->ts,
                                              .dur = e->dur,
                                              .bytes = e->bytes,
                                              .device = e->device,
                                              .stream = e->stream,
                                              .allocated = e->allocated,
                                              .reserved = e->reserved,
                                              .pid = e->pid,
                                              .tid = e->tid,
                                              .correlation = e->correlation,
                                              .external_id = e->external_id,
                                              .text = c->text.len,
                                              .name_len = (uint16_t)e->name_len,
                                              .cat_len = (uint8_t)cat_len,
                                              .ph = e->ph,
                                              .kind = (uint8_t)e->kind,
                                              .classified = classified,
                                              .has_ts = e->has_ts,
                                              .has_dur = e->has_dur,
                                              .name_hash = e->name_hash,
                                              .name_hashed = e->name_hashed};
    tw_buffer_append(&c->text, e->name, e->name_len);
    tw_buffer_putc(&c->text, '\0');
    tw_buffer_append(&c->text, e->cat, cat_len);
}

/* A packed event of c back into r->ev, as the reader had read it; its
 * name stays where c keeps it. */
static void unpack_event(reader *r, tw_trace_chunk *c, const tw_trace_packed *p)
{
    tw_trace_event *e = &r->ev;
    e->ph = p->ph;
    e->kind = p->kind;
    r->ev_classified = p->classified;
    e->ts = p->ts, e->dur = p->dur;
    e->has_ts = p->has_ts, e->has_dur = p->has_dur;
    e->pid = p->pid, e->tid = p->tid;
    e->correlation = p->correlation, e->external_id = p->external_id;
    e->bytes = p->bytes, e->device = p->device, e->stream = p->stream;
    e->allocated = p->allocated, e->reserved = p->reserved;
    e->name = c->text.data + p->text; /* the piece's own copy, NUL-terminated: classify may cut it */
    e->name_len = p->name_len;
    e->name_hash = p->name_hash;
    e->name_hashed = p->name_hashed;
    memcpy(e->cat, c->text.data + p->text + p->name_len + 1, p->cat_len);
    e->cat[p->cat_len] = '\0';
}

void tw_trace_read_chunk(tw_jstream *s, uint64_t limit, tw_trace_chunk *c)
{
    tw_trace_reader_stats st = {.rank = -1};
    if (!c->kinds)
        c->kinds = tw_trace_kind_memo_new(); /* none: each name is worked out */
    if (!c->shapes)
        c->shapes = tw_trace_shapes_new(); /* none: each event read member by member */
    reader r = {.s = s, .st = &st, .deliver = pack_event, .chunk = c, .kinds = c->kinds, .in = {.shapes = c->shapes}};
    uint64_t cut = s->strings_cut;
    c->count = 0;
    tw_buffer_reset(&c->text);
    c->status = TW_CHUNK_MORE;
    int k = read_items(&r, true, limit);
    if (c->status == TW_CHUNK_FAIL || k == 0) {
        c->status = TW_CHUNK_FAIL;
        return;
    }
    c->status = k == 1 ? TW_CHUNK_END : TW_CHUNK_MORE;
    c->stop = tw_jstream_offset(s);
    c->strings_cut = s->strings_cut - cut;
}

/* The events array by the pieces parallel.c hands out: 1 read to its ],
 * 0 on an error, -1 when the one thread goes on (the tokenizer placed at
 * an item's first byte), or the array is too small to share. */
static int read_pieces(reader *r)
{
    const tw_trace_par *par = r->par;
    uint64_t begin = tw_jstream_offset(r->s);
    tw_trace_pieces *p;
    tw_trace_pieces_cfg cfg = {.fd = par->fd,
                               .size = par->size,
                               .threads = par->threads,
                               .chunk = par->chunk,
                               .map = par->map,
                               .read = tw_trace_read_chunk};
    if (par->threads < 2 || par->size < begin || par->size - begin < 2 * par->chunk ||
        tw_trace_pieces_start(&p, &cfg, begin) != TW_OK)
        return -1;
    tw_trace_chunk *c;
    while ((c = tw_trace_pieces_next(p))) {
        for (size_t i = 0; i < c->count; i++) {
            unpack_event(r, c, &c->events[i]);
            finish_event(r);
        }
        r->s->strings_cut += c->strings_cut;
        if (par->progress)
            par->progress(par->progress_arg, c->stop);
        tw_trace_pieces_done(p);
    }
    r->ev_classified = false;
    uint64_t at;
    bool ended = tw_trace_pieces_end(p, &at);
    par->seek(par->src, at);
    tw_jstream_restart(r->s, at);
    r->in = (tw_trace_fast_in){.shapes = r->in.shapes};
    return ended ? 1 : -1;
}

/* An events array, its [ read. */
static bool read_events(reader *r)
{
    if (r->par) {
        int k = read_pieces(r);
        r->par = NULL; /* one array per document is shared out */
        if (k >= 0)
            return k == 1;
    }
    return read_items(r, true, UINT64_MAX) == 1;
}

static bool read_distributed(reader *r)
{
    char key[32];
    bool first = true, str;
    for (;;) {
        int k = member_key(r, first, key, sizeof key);
        first = false;
        if (k <= 0)
            return k == 0;
        if (strcmp(key, "rank") == 0) {
            double v;
            if (!read_number(r, &v, &str))
                return false;
            if (v == v && v >= 0 && v <= 1e9)
                r->st->rank = (int)v;
        } else if (!tw_jstream_skip_next(r->s)) {
            return false;
        }
    }
}

int tw_trace_read(tw_jstream *s, tw_trace_event_fn fn, void *arg, tw_trace_reader_stats *st, const char **error)
{
    return tw_trace_read_par(s, NULL, fn, arg, st, error);
}

int tw_trace_read_par(tw_jstream *s, const tw_trace_par *par, tw_trace_event_fn fn, void *arg,
                      tw_trace_reader_stats *st, const char **error)
{
    memset(st, 0, sizeof *st);
    st->rank = -1;
    reader *r = malloc(sizeof *r);
    if (!r)
        return TW_ENOMEM;
    *r = (reader){.s = s, .fn = fn, .arg = arg, .st = st, .deliver = finish_event, .par = par};
    r->kinds = tw_trace_kind_memo_new(); /* none: each name is worked out */
    r->in.shapes = tw_trace_shapes_new(); /* none: each event read member by member */
    bool ok;
    tw_jtok t = tw_jstream_next(s);
    if (t == TW_JT_ARRAY) {
        ok = read_events(r);
    } else if (t == TW_JT_OBJECT) {
        char key[32];
        bool first = true;
        ok = true;
        for (;;) {
            int k = member_key(r, first, key, sizeof key);
            first = false;
            if (k <= 0) {
                ok = k == 0;
                break;
            }
            tw_jtok v = tw_jstream_next(s);
            if (strcmp(key, "traceEvents") == 0 && v == TW_JT_ARRAY)
                ok = read_events(r);
            else if (strcmp(key, "distributedInfo") == 0 && v == TW_JT_OBJECT)
                ok = read_distributed(r);
            else
                ok = tw_jstream_skip(s, v);
            if (!ok)
                break;
        }
    } else {
        ok = fail(r, t == TW_JT_EOF ? "empty input" : "not a JSON object or array");
    }
    for (int i = 0; i < r->stack_count; i++) {
        st->unpaired += (uint64_t)r->stacks[i].depth; /* begun, never ended */
        free(r->stacks[i].v);
    }
    tw_trace_kind_memo_free(r->kinds);
    free(r->in.shapes);
    free(r);
    if (ok)
        return TW_OK;
    *error = s->error ? s->error : "not JSON";
    return TW_EFORMAT;
}
