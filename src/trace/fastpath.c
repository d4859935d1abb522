/*
 * fastpath.c: the chrome-trace reader's fast path. An event that lies whole
 * in the tokenizer's buffer and is plain JSON (no escapes or NUL bytes in
 * the strings it keeps, numbers as numbers or short strings, nothing deeper
 * than TW_FAST_DEPTH inside skipped values) is read where it lies: string
 * ends by bit scans over a 64-byte block's quote/backslash/NUL mask, keys
 * told by length and bytes, numbers parsed as they are scanned, skipped
 * values passed without tokens. On anything else (escapes, NUL bytes in
 * kept strings, words, deep nesting, bad input, the buffer's end) it gives
 * up having consumed nothing, and the token path (events.c) reads the
 * event: that one is the reference, the fast path must come to the same
 * event, and tests/unit/test_trace.c holds the two to it. The one entry,
 * tw_trace_fast_event, is declared in reader.h; everything else here is
 * static, the small steps inlined where they are called (TW_HOT): the
 * byte-level ones (strings, numbers, skipped values, keys) are in
 * fastpath_scan.h. It hands nothing over: events.c does, whichever path
 * read the event.
 *
 * Shapes: a profiler writes millions of events of a few hundred names, and
 * the events of one name are written alike but for their numbers. After an
 * event's name (or after a ph nothing reads past), the rest is matched
 * against the shape learned from the last event read member by member with
 * a name of that hash: its bytes between the numbers compared as text, its
 * numbers read (or passed) as the member-by-member reading reads them. The
 * same bytes in the same place are read the same way, so a match comes to
 * the same event; anything else is read member by member and the shape is
 * learned again (shape.c; shape.h holds what a shape is). The shapes are
 * the reader's (tw_trace_shapes_new).
 */
#include "fastpath_scan.h"
#include "shape.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A number read for target into e, as the token path stores it. */
TW_HOT void number_into(tw_trace_event *e, int target, double v, bool str)
{
    switch (target) {
    case T_TS:
        e->ts = v, e->has_ts = !str && isfinite(v);
        break;
    case T_DUR:
        e->dur = v, e->has_dur = !str && isfinite(v) && v >= 0;
        break;
    case T_PID:
        e->pid = tw_trace_as_id(v);
        break;
    case T_TID:
        e->tid = tw_trace_as_id(v);
        break;
    case T_BYTES:
        e->bytes = v;
        break;
    case T_DEVICE:
        e->device = v;
        break;
    case T_STREAM:
        e->stream = v;
        break;
    case T_ALLOCATED:
        e->allocated = v;
        break;
    case T_RESERVED:
        e->reserved = v;
        break;
    case T_CORRELATION:
    case T_EXTERNAL_ID:
        if (v == v && v >= 0 && v < 9e18)
            *(target == T_CORRELATION ? &e->correlation : &e->external_id) = (int64_t)v;
        break;
    default:
        break;
    }
}

/* What a member of args, its key k, n, is read into: as read_args. */
static inline int arg_target(const char *k, size_t n)
{
    switch (n) { /* by length first: most args are none of these */
    case 5:
        return key_is(k, n, "bytes", 5) ? T_BYTES : T_NONE;
    case 6:
        return key_is(k, n, "device", 6) ? T_DEVICE : key_is(k, n, "stream", 6) ? T_STREAM : T_NONE;
    case 11: /* Kineto's spellings first */
        return memcmp(k, "External id", 11) == 0          ? T_EXTERNAL_ID
               : memcmp(k, "correlation", 11) == 0        ? T_CORRELATION
               : key_is_nocase(k, n, "correlation", 11) ? T_CORRELATION
               : key_is_nocase(k, n, "external id", 11) ? T_EXTERNAL_ID
                                                          : T_NONE;
    case 14:
        return key_is_nocase(k, n, "correlation id", 14) ? T_CORRELATION
               : key_is(k, n, "Total Reserved", 14)      ? T_RESERVED
                                                         : T_NONE;
    case 15:
        return key_is(k, n, "Total Allocated", 15) ? T_ALLOCATED : T_NONE;
    case 16:
        return key_is(k, n, "current_reserved", 16) ? T_RESERVED : T_NONE;
    case 17:
        return key_is(k, n, "current_allocated", 17) ? T_ALLOCATED : T_NONE;
    default:
        return T_NONE;
    }
}

/* A number read for target at p into e (number_into), noted in rec: the
 * byte after it, or NULL. */
TW_HOT const char *fast_number_into(tw_trace_event *e, int target, const char *p, tw_trace_fast_in *in,
                                    tw_shape_rec *rec)
{
    double v = NAN;
    bool str;
    const char *after = fast_value_number(p, in, &v, &str);
    if (after) {
        number_into(e, target, v, str);
        if (rec)
            tw_shape_rec_value(rec, p, after, target, v, str);
    }
    return after;
}

/* A skipped value at p (fast_skip), noted in rec: a number, an object or
 * an array as an op (the shape passes any other there), a string as text. */
TW_HOT const char *fast_skip_noted(const char *p, tw_trace_fast_in *in, tw_shape_rec *rec)
{
    const char *after = fast_skip(p, in);
    if (rec && after && *p != '"')
        tw_shape_rec_value(rec, p, after, *p == '{' || *p == '[' ? T_SKIP : T_NONE, 0, false);
    return after;
}

/* The value of one member of args, its key k, n: as read_args. */
static const char *fast_arg(tw_trace_event *e, const char *k, size_t n, const char *p, tw_trace_fast_in *in,
                            tw_shape_rec *rec)
{
    int target = arg_target(k, n);
    return target == T_NONE ? fast_skip_noted(p, in, rec) : fast_number_into(e, target, p, in, rec);
}

/* The members of args, its { at p: the byte after its }, or NULL. */
static const char *fast_args(tw_trace_event *e, const char *p, tw_trace_fast_in *in, tw_shape_rec *rec)
{
    bool more;
    const char *k;
    size_t n;
    for (p = fast_first(p + 1, in, &more); p && more; p = fast_next(p, in, &more)) {
        p = fast_key(p, in, &k, &n);
        if (p)
            p = fast_arg(e, k, n, p, in, rec);
        if (!p)
            return NULL;
    }
    return p;
}

/* A kept string value at p into out (cap bytes with its NUL), or NULL. */
TW_HOT const char *fast_copy(const char *p, tw_trace_fast_in *in, char *out, size_t cap, size_t *len)
{
    const char *body;
    size_t n;
    if (*p != '"' || !(p = fast_string(p, in, &body, &n)))
        return NULL;
    if (n > cap - 1)
        n = cap - 1;
    memcpy(out, body, n);
    out[n] = '\0';
    if (len)
        *len = n;
    return p;
}

/* The name's value at p into e (fast_copy), with its hash (namehash.h)
 * taken from the bytes where they lie: read where they were just written,
 * a long name would wait for its copy to land. */
TW_HOT const char *fast_name(tw_trace_event *e, const char *p, tw_trace_fast_in *in)
{
    const char *after = fast_copy(p, in, e->name_buf, sizeof e->name_buf, &e->name_len);
    if (after) {
        e->name = e->name_buf;
        e->name_hash = tw_name_hash(p + 1, e->name_len); /* the body follows the quote */
        e->name_hashed = true;
    }
    return after;
}

/* A ph or cat member's value at p, read into e: as a shape learned holds
 * them (its text), it holds their values. */
TW_HOT const char *fast_ph(tw_trace_event *e, const char *p, tw_trace_fast_in *in, tw_shape_rec *rec)
{
    if (in->end - p >= 3 && p[0] == '"' && p[2] == '"' && p[1] != '\\' && p[1] != '"' && p[1] != '\0') {
        e->ph = p[1]; /* one letter, as every ph is written: as fast_copy reads it */
        p += 3;
    } else {
        char ph[8] = "";
        p = fast_copy(p, in, ph, sizeof ph, NULL);
        e->ph = ph[0];
    }
    if (rec)
        rec->shape->sets_ph = true, rec->shape->ph = e->ph;
    return p;
}

TW_HOT const char *fast_cat(tw_trace_event *e, const char *p, tw_trace_fast_in *in, tw_shape_rec *rec)
{
    p = fast_copy(p, in, e->cat, sizeof e->cat, NULL);
    if (rec && p)
        rec->shape->sets_cat = true, memcpy(rec->shape->cat, e->cat, sizeof e->cat);
    return p;
}

/* One member of an event, its key k, n and its value at p: as parse_event. */
static const char *fast_member(tw_trace_event *e, const char *k, size_t n, const char *p, tw_trace_fast_in *in,
                               tw_shape_rec *rec)
{
    switch (n) {
    case 2:
        if (k[0] == 'p' && k[1] == 'h')
            return fast_ph(e, p, in, rec);
        if (k[0] == 't' && k[1] == 's')
            return fast_number_into(e, T_TS, p, in, rec);
        break;
    case 3:
        if (memcmp(k, "cat", 3) == 0)
            return fast_cat(e, p, in, rec);
        if (memcmp(k, "dur", 3) == 0)
            return fast_number_into(e, T_DUR, p, in, rec);
        if ((k[0] == 'p' || k[0] == 't') && k[1] == 'i' && k[2] == 'd')
            return fast_number_into(e, k[0] == 'p' ? T_PID : T_TID, p, in, rec);
        break;
    case 4:
        if (memcmp(k, "name", 4) == 0) {
            if (rec && !rec->unread)
                rec->bad = true;
            return fast_name(e, p, in);
        }
        if (memcmp(k, "args", 4) == 0)
            return *p == '{' ? fast_args(e, p, in, rec) : NULL;
        break;
    default:
        break;
    }
    return fast_skip_noted(p, in, rec);
}

/* Whether the len (at most 8) bytes at p are text's: one masked 8-byte
 * compare where a call to memcmp would cost more than the compare (the
 * caller has at least 9 bytes at p; text is zero-padded to 8). */
static inline bool same_start(const char *p, const char text[9], size_t len)
{
    uint64_t a, b;
    memcpy(&a, p, 8);
    memcpy(&b, text, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    a = __builtin_bswap64(a), b = __builtin_bswap64(b); /* the first byte lowest, as below */
#endif
    uint64_t mask = len == 8 ? ~0ull : (1ull << (8 * len)) - 1;
    return ((a ^ b) & mask) == 0;
}

/* The eight keys an event is read for, in the order Kineto writes an X
 * event's; K_OTHER: any other key. */
enum { K_PH, K_CAT, K_NAME, K_PID, K_TID, K_TS, K_DUR, K_ARGS, K_OTHER };

static const struct {
    char text[9]; /* the key, its quotes, ": "; zeros after */
    size_t len;
} event_keys[K_OTHER] = {
    [K_PH] = {"\"ph\": ", 6},   [K_CAT] = {"\"cat\": ", 7}, [K_NAME] = {"\"name\": ", 8}, [K_PID] = {"\"pid\": ", 7},
    [K_TID] = {"\"tid\": ", 7}, [K_TS] = {"\"ts\": ", 6},   [K_DUR] = {"\"dur\": ", 7},   [K_ARGS] = {"\"args\": ", 8}};

/* Which of the eight keys the bytes at p (9 or more of them) spell. */
static inline int key_by_bytes(const char *p)
{
    switch (p[1]) {
    case 'p':
        return p[2] == 'h' ? K_PH : K_PID;
    case 't':
        return p[2] == 's' ? K_TS : K_TID;
    case 'c':
        return K_CAT;
    case 'd':
        return K_DUR;
    case 'n':
        return K_NAME;
    case 'a':
        return K_ARGS;
    default:
        return K_OTHER;
    }
}

/* A key of an event at its quote p, written as Kineto writes the eight an
 * event is read for ("ts": and a value): told from its bytes in one look,
 * without scanning for the closing quote, the key after *key in Kineto's
 * order tried first; *key is set to the key read (K_OTHER for any other,
 * or other spacing, which goes through fast_key with its text in k, n). */
TW_HOT const char *fast_event_key(const char *p, tw_trace_fast_in *in, int *key, const char **k, size_t *n)
{
    if (in->end - p >= 9) {
        int i = *key + 1 < K_OTHER ? *key + 1 : K_PH; /* the next, as Kineto writes them */
        bool known = same_start(p, event_keys[i].text, event_keys[i].len);
        if (!known) {
            i = key_by_bytes(p);
            known = i != K_OTHER && same_start(p, event_keys[i].text, event_keys[i].len);
        }
        if (known && !space(p[event_keys[i].len])) {
            *key = i;
            return p + event_keys[i].len;
        }
    }
    *key = K_OTHER;
    return fast_key(p, in, k, n);
}

/* The value of one of the eight keys at p: as fast_member. */
TW_HOT const char *fast_known(tw_trace_event *e, int key, const char *p, tw_trace_fast_in *in, tw_shape_rec *rec)
{
    switch (key) {
    case K_PH:
        return fast_ph(e, p, in, rec);
    case K_TS:
        return fast_number_into(e, T_TS, p, in, rec);
    case K_DUR:
        return fast_number_into(e, T_DUR, p, in, rec);
    case K_PID:
        return fast_number_into(e, T_PID, p, in, rec);
    case K_TID:
        return fast_number_into(e, T_TID, p, in, rec);
    case K_CAT:
        return fast_cat(e, p, in, rec);
    case K_NAME:
        if (rec && !rec->unread)
            rec->bad = true;
        return fast_name(e, p, in);
    default: /* K_ARGS */
        return *p == '{' ? fast_args(e, p, in, rec) : NULL;
    }
}

/* A member of an event after a ph nothing reads past (tw_trace_ph_read):
 * a number is passed unread, since only the ph is handed over; anything
 * else is read as ever (what the token path counts while reading it, a
 * cut string, is counted the same way); a second ph gives up, since it
 * could make the event one that is read. */
TW_HOT const char *fast_unread(tw_trace_event *e, int key, const char *k, size_t n, const char *p, tw_trace_fast_in *in,
                               tw_shape_rec *rec)
{
    if (key == K_PH || (key == K_OTHER && n == 2 && k[0] == 'p' && k[1] == 'h'))
        return NULL;
    bool number = key == K_TS || key == K_DUR || key == K_PID || key == K_TID;
    if (number && *p != '"')
        return fast_skip_noted(p, in, rec);
    return key == K_OTHER ? fast_member(e, k, n, p, in, rec) : fast_known(e, key, p, in, rec);
}

/* Whether the len bytes of text at t are the bytes at p (before end): 16
 * at a time, the last 16 masked (t has 16 bytes to spare past its text). */
static inline bool same_text(const char *p, const char *end, const char *t, size_t len)
{
    if ((size_t)(end - p) < len)
        return false;
#if defined(__SSE2__)
    if ((size_t)(end - p) >= len + 16) {
        for (;; p += 16, t += 16) {
            __m128i a = _mm_loadu_si128((const __m128i *)(const void *)p);
            __m128i b = _mm_loadu_si128((const __m128i *)(const void *)t);
            unsigned differ = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(a, b)) & 0xffff;
            if (len <= 16)
                return (differ & ((1u << len) - 1)) == 0;
            if (differ)
                return false;
            len -= 16;
        }
    }
#endif
    return memcmp(p, t, len) == 0;
}

/* The text and values of o matched at p: the byte after the last text,
 * or NULL. With span, where each op's value begins and ends, in turn. */
TW_HOT const char *match_ops(const tw_shape_ops *o, tw_trace_event *e, const char *p, tw_trace_fast_in *in,
                             const char **span)
{
    const char *t = o->text, *end = in->end;
    for (const tw_shape_op *op = o->ops;; op++) {
        if (!same_text(p, end, t, op->len))
            return NULL;
        p += op->len, t += op->len;
        if (op->end)
            return p;
        if (p == end)
            return NULL;
        if (span)
            *span++ = p;
        char c = *p;
        if (op->target == T_NONE) { /* a number, as fast_skip passes one */
            if (!((c >= '0' && c <= '9') || (c == '-' && p + 1 < end && p[1] >= '0' && p[1] <= '9')))
                return NULL;
            const char *q = p + 1;
            while (q < end && number_byte(*q))
                q++;
            if (q == end)
                return NULL;
            p = q;
        } else if (op->target == T_SKIP) { /* an object or array, as fast_skip passes one */
            if (c != '{' && c != '[')
                return NULL;
            p = fast_skip_container(p, in);
            if (!p)
                return NULL;
        } else {
            double v = NAN;
            bool str;
            const char *q = fast_value_number(p, in, &v, &str);
            if (!q)
                return NULL;
            number_into(e, op->target, v, str);
            p = q;
        }
        if (span)
            *span++ = p;
    }
}

/* The rest of an event after its name, at p, read by matching shape sh:
 * the byte after the event's }, or NULL (the bytes are not of the shape;
 * e may then hold some of the members after the name, which the fast path
 * reads again). same is tried first; when it misses and any matches, the
 * values that differed become ops of same, so that same comes to hold as
 * text only the values that do not change from one event to the next. */
static const char *shape_replay(tw_trace_shape *sh, tw_trace_event *e, const char *p, tw_trace_fast_in *in)
{
    const char *after = sh->exact ? match_ops(&sh->same, e, p, in, NULL) : NULL;
    if (after) {
        for (int i = 0; i < sh->nsame_lanes; i++) /* as learned: the text held them as they were */
            number_into(e, sh->same_lanes[i].target, sh->same_lanes[i].v, sh->same_lanes[i].str);
    } else if (sh->exact) {
        const char *span[2 * SHAPE_OPS];
        after = match_ops(&sh->any, e, p, in, span);
        if (after && !tw_shape_vary_same(sh, span))
            sh->exact = false;
    } else {
        after = match_ops(&sh->any, e, p, in, NULL);
    }
    if (!after)
        return NULL;
    if (sh->sets_ph)
        e->ph = sh->ph;
    if (sh->sets_cat)
        memcpy(e->cat, sh->cat, sizeof e->cat);
    return after;
}

/* An event whose { is at p, whole in [p, end): read into e; the byte
 * after its }, or NULL (e then holds nothing the token path keeps). After
 * its name, the rest is matched against the shape learned for names of
 * that hash, when there is one; when it does not match, the rest is read
 * member by member and the shape learned from it. */
static const char *fast_event(tw_trace_event *e, const char *p, tw_trace_fast_in *in)
{
    tw_trace_event_reset(e);
    bool more, unread = false, anchored = false;
    const char *k = NULL;
    size_t n = 0;
    int key = K_ARGS; /* so that ph is tried first */
    tw_shape_rec learn = {0}, *rec = NULL;
    for (p = fast_first(p + 1, in, &more); p && more; p = fast_next(p, in, &more)) {
        p = fast_event_key(p, in, &key, &k, &n);
        if (p && unread) {
            p = fast_unread(e, key, k, n, p, in, rec);
        } else if (p) {
            p = key == K_OTHER ? fast_member(e, k, n, p, in, rec) : fast_known(e, key, p, in, rec);
            unread = key == K_PH && !tw_trace_ph_read(e->ph);
            if (p && !anchored && in->shapes && (key == K_NAME || unread)) {
                /* after the name, or after a ph nothing reads past */
                anchored = true;
                tw_trace_shape *sh = &in->shapes[unread ? TW_TRACE_SHAPES + (unsigned)(e->ph & 15) : e->name_hash % TW_TRACE_SHAPES];
                const char *after = sh->ok ? shape_replay(sh, e, p, in) : NULL;
                if (after)
                    return after;
                sh->ok = sh->sets_ph = sh->sets_cat = false;
                sh->any.nops = sh->any.ntext = sh->nlanes = 0;
                learn = (tw_shape_rec){.shape = sh, .start = p, .from = p, .unread = unread};
                rec = &learn;
            }
        }
        if (!p)
            return NULL;
    }
    if (rec && p)
        tw_shape_rec_end(rec, p);
    return p;
}

/* The next event read in place, when it lies whole in the buffer: [,] {
 * ... } consumed and read into e; false (nothing consumed) otherwise. */
bool tw_trace_fast_event(tw_jstream *s, tw_trace_fast_in *in, tw_trace_event *e, bool first)
{
    const char *end = s->buf + s->len, *p = ws(s->buf + s->pos, end);
    if (in->end != end || in->base != s->base) /* the buffer was refilled */
        *in = (tw_trace_fast_in){.end = end, .base = s->base, .shapes = in->shapes};
    if (!first) {
        if (p == end || *p != ',')
            return false;
        p = ws(p + 1, end);
    }
    if (p == end || *p != '{' || !(p = fast_event(e, p, in)))
        return false;
    s->pos = (size_t)(p - s->buf);
    return true;
}
