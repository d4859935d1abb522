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
 * static, the small steps inlined where they are called (TW_HOT). It
 * hands nothing over: events.c does, whichever path read the event.
 *
 * Shapes: a profiler writes millions of events of a few hundred names, and
 * the events of one name are written alike but for their numbers. After an
 * event's name (or after a ph nothing reads past), the rest is matched
 * against the shape learned from the last event read member by member with
 * a name of that hash: its bytes between the numbers compared as text, its
 * numbers read (or passed) as the member-by-member reading reads them. The
 * same bytes in the same place are read the same way, so a match comes to
 * the same event; anything else is read member by member and the shape is
 * learned again. The shapes are the reader's (tw_trace_shapes_new).
 */
#include "reader.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TW_FAST_DEPTH 48

/* The small steps of the fast path are inlined into their callers: a call
 * per string or number costs as much as reading it. */
#if defined(__GNUC__)
#define TW_HOT static inline __attribute__((always_inline))
#else
#define TW_HOT static inline
#endif

/* The first " or \\ or NUL at or after p, or end. */
TW_HOT const char *qfind(tw_trace_fast_in *in, const char *p)
{
    for (;;) {
        if (in->block && (uintptr_t)p - (uintptr_t)in->block < 64) {
            uint64_t m = in->bits >> ((uintptr_t)p - (uintptr_t)in->block);
            if (m)
                return p + __builtin_ctzll(m);
            p = in->block + 64;
        }
        if (in->end - p < 64)
            return tw_jfind(p, in->end, true);
        in->block = p;
        in->bits = tw_jspecial64(p);
    }
}

/* What each byte may be outside strings, looked up once rather than
 * compared against each candidate: white space (JSON's four), a byte of a
 * number's text (tw_jnumber_char), a byte a skipped container may hold
 * between its strings (as the token path's skippable()). */
enum { B_SPACE = 1, B_NUMBER = 2, B_SKIPPABLE = 4 };
static const unsigned char byte_class[256] = {
    [' '] = B_SPACE | B_SKIPPABLE,
    ['\t'] = B_SPACE | B_SKIPPABLE,
    ['\n'] = B_SPACE | B_SKIPPABLE,
    ['\r'] = B_SPACE | B_SKIPPABLE,
    ['0'] = B_NUMBER | B_SKIPPABLE,
    ['1'] = B_NUMBER | B_SKIPPABLE,
    ['2'] = B_NUMBER | B_SKIPPABLE,
    ['3'] = B_NUMBER | B_SKIPPABLE,
    ['4'] = B_NUMBER | B_SKIPPABLE,
    ['5'] = B_NUMBER | B_SKIPPABLE,
    ['6'] = B_NUMBER | B_SKIPPABLE,
    ['7'] = B_NUMBER | B_SKIPPABLE,
    ['8'] = B_NUMBER | B_SKIPPABLE,
    ['9'] = B_NUMBER | B_SKIPPABLE,
    ['-'] = B_NUMBER | B_SKIPPABLE,
    ['+'] = B_NUMBER | B_SKIPPABLE,
    ['.'] = B_NUMBER | B_SKIPPABLE,
    ['e'] = B_NUMBER | B_SKIPPABLE,
    ['E'] = B_NUMBER | B_SKIPPABLE,
    [','] = B_SKIPPABLE,
    [':'] = B_SKIPPABLE,
    ['a'] = B_SKIPPABLE,
    ['b'] = B_SKIPPABLE,
    ['c'] = B_SKIPPABLE,
    ['d'] = B_SKIPPABLE,
    ['f'] = B_SKIPPABLE,
    ['g'] = B_SKIPPABLE,
    ['h'] = B_SKIPPABLE,
    ['i'] = B_SKIPPABLE,
    ['j'] = B_SKIPPABLE,
    ['k'] = B_SKIPPABLE,
    ['l'] = B_SKIPPABLE,
    ['m'] = B_SKIPPABLE,
    ['n'] = B_SKIPPABLE,
    ['o'] = B_SKIPPABLE,
    ['p'] = B_SKIPPABLE,
    ['q'] = B_SKIPPABLE,
    ['r'] = B_SKIPPABLE,
    ['s'] = B_SKIPPABLE,
    ['t'] = B_SKIPPABLE,
    ['u'] = B_SKIPPABLE,
    ['v'] = B_SKIPPABLE,
    ['w'] = B_SKIPPABLE,
    ['x'] = B_SKIPPABLE,
    ['y'] = B_SKIPPABLE,
    ['z'] = B_SKIPPABLE,
    ['A'] = B_SKIPPABLE,
    ['B'] = B_SKIPPABLE,
    ['C'] = B_SKIPPABLE,
    ['D'] = B_SKIPPABLE,
    ['F'] = B_SKIPPABLE,
    ['G'] = B_SKIPPABLE,
    ['H'] = B_SKIPPABLE,
    ['I'] = B_SKIPPABLE,
    ['J'] = B_SKIPPABLE,
    ['K'] = B_SKIPPABLE,
    ['L'] = B_SKIPPABLE,
    ['M'] = B_SKIPPABLE,
    ['N'] = B_SKIPPABLE,
    ['O'] = B_SKIPPABLE,
    ['P'] = B_SKIPPABLE,
    ['Q'] = B_SKIPPABLE,
    ['R'] = B_SKIPPABLE,
    ['S'] = B_SKIPPABLE,
    ['T'] = B_SKIPPABLE,
    ['U'] = B_SKIPPABLE,
    ['V'] = B_SKIPPABLE,
    ['W'] = B_SKIPPABLE,
    ['X'] = B_SKIPPABLE,
    ['Y'] = B_SKIPPABLE,
    ['Z'] = B_SKIPPABLE,
};

static inline bool space(char c)
{
    return byte_class[(unsigned char)c] & B_SPACE;
}

static inline bool number_byte(char c)
{
    return byte_class[(unsigned char)c] & B_NUMBER;
}

static inline const char *ws(const char *p, const char *end)
{
    while (p < end && space(*p))
        p++;
    return p;
}

/* A kept string, its quote at p: the body in *body, *n; the byte after the
 * closing quote, or NULL (an escape, a NUL, longer than the tokenizer
 * keeps, or the buffer's end). */
TW_HOT const char *fast_string(const char *p, tw_trace_fast_in *in, const char **body, size_t *n)
{
    const char *end = in->end;
    const char *b = p + 1, *q = qfind(in, b);
    if (q == end || *q != '"' || q - b > TW_JSTR_MAX)
        return NULL;
    *body = b;
    *n = (size_t)(q - b);
    return q + 1;
}

/* A skipped string, its quote at p: the byte after it, or NULL. */
TW_HOT const char *fast_skip_string(const char *p, tw_trace_fast_in *in)
{
    const char *end = in->end;
    for (p++;;) {
        p = qfind(in, p);
        if (p == end)
            return NULL;
        if (*p == '"')
            return p + 1;
        p += *p == '\\' ? 2 : 1; /* a backslash and the byte it escapes, or a NUL */
        if (p > end)
            return NULL;
    }
}

/* How many of the eight bytes at p are digits before the first that is
 * not (0-8), and the value of those digits in *value. */
static inline int eight_digits(const char *p, uint64_t *value)
{
    uint64_t w;
    memcpy(&w, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w); /* the first byte lowest, as below */
#endif
    /* a byte is a digit when its high nibble is 3 and adding 6 keeps it 3 */
    uint64_t odd = ((w & 0xf0f0f0f0f0f0f0f0ull) | (((w + 0x0606060606060606ull) & 0xf0f0f0f0f0f0f0f0ull) >> 4)) ^
                   0x3333333333333333ull;
    int k = odd ? __builtin_ctzll(odd) >> 3 : 8;
    if (k == 0)
        return *value = 0, 0;
    /* the k digits to the top bytes, zeros (leading zeros) below them */
    w = (w & 0x0f0f0f0f0f0f0f0full) << (8 * (8 - k));
    w = (w * 10 + (w >> 8)) & 0x00ff00ff00ff00ffull;
    w = (w * 100 + (w >> 16)) & 0x0000ffff0000ffffull;
    *value = (w * 10000 + (w >> 32)) & 0xffffffffull;
    return k;
}

/* A run of digits at p into *m (m * 10 per digit): the byte after it; its
 * length in *n. Eight at a time while eight bytes remain. */
static inline const char *digits(const char *p, const char *end, uint64_t *m, long *n)
{
    static const uint64_t pow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
    const char *start = p;
    while (end - p >= 8) {
        uint64_t v;
        int k = eight_digits(p, &v);
        *m = *m * pow10[k] + v;
        p += k;
        if (k < 8 || p - start > 19) {
            *n = p - start;
            return p;
        }
    }
    for (; p < end && (unsigned)(*p - '0') < 10; p++)
        *m = *m * 10 + (uint64_t)(*p - '0');
    *n = p - start;
    return p;
}

/* A number's text at p (a digit or a - not before I or N): its value in
 * *v, the byte after it, or NULL. As the tokenizer reads one: the common
 * [-]digits[.digits] of up to 19 digits is parsed as it is scanned, with
 * the arithmetic of tw_jstream_number; anything else goes there. */
TW_HOT const char *fast_number(const char *p, const char *end, double *v)
{
    static const double p10[] = {1,    1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,
                                 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19};
    if (*p == '-' && (p + 1 == end || p[1] == 'I' || p[1] == 'N'))
        return NULL;
    uint64_t m = 0;
    long whole, frac = 0;
    const char *q = digits(p + (*p == '-'), end, &m, &whole);
    if (q < end && *q == '.')
        q = digits(q + 1, end, &m, &frac);
    long n = whole + frac;
    if (q < end && !number_byte(*q) && n > 0 && n <= 19) {
        double x = frac ? (double)m / p10[frac] : (double)m; /* x / 1 is x */
        *v = *p == '-' ? -x : x;
        return q;
    }
    while (q < end && number_byte(*q))
        q++;
    if (q == end || q - p >= 72)
        return NULL;
    *v = tw_jstream_number(p, (size_t)(q - p));
    return q;
}

/* A string value read as a number (read_number): skipped to its first
 * digit or -, then strtod; NULL for a long one. A string of 1 to 19
 * digits alone (a thread id as Kineto writes it) is that integer, rounded
 * to a double as strtod rounds it. */
static const char *fast_string_number(const char *p, tw_trace_fast_in *in, double *v)
{
    const char *body;
    size_t n;
    char tmp[64];
    const char *after = fast_string(p, in, &body, &n);
    if (!after || n >= sizeof tmp)
        return NULL;
    uint64_t m = 0;
    long run;
    if (n >= 1 && n <= 19 && digits(body, body + n, &m, &run) == body + n) {
        *v = (double)m;
        return after;
    }
    memcpy(tmp, body, n);
    tmp[n] = '\0';
    const char *t = tmp;
    while (*t && !(*t >= '0' && *t <= '9') && *t != '-')
        t++;
    char *stop;
    double x = strtod(t, &stop);
    *v = stop == t ? NAN : x;
    return after;
}

/* A value read as a number (read_number): a number, or a short string
 * holding one; is_string as there. NULL for anything else. */
TW_HOT const char *fast_value_number(const char *p, tw_trace_fast_in *in, double *v, bool *is_string)
{
    const char *end = in->end;
    *is_string = *p == '"';
    if ((*p >= '0' && *p <= '9') || *p == '-')
        return fast_number(p, end, v);
    return *p == '"' ? fast_string_number(p, in, v) : NULL;
}

/* A skipped object or array, its bracket at p: as skip_container in the
 * token path, up to TW_FAST_DEPTH deep. */
static const char *fast_skip_container(const char *p, tw_trace_fast_in *in)
{
    const char *end = in->end;
    char c = *p;
    uint64_t kinds = c == '{'; /* bit i: level i+1 is an object */
    int depth = 1;
    for (p++; p < end; p++) {
        c = *p;
        if (c == '"') {
            p = fast_skip_string(p, in);
            if (!p)
                return NULL;
            p--;
        } else if (c == '{' || c == '[') {
            if (depth == TW_FAST_DEPTH)
                return NULL;
            kinds = (kinds & ~(1ull << depth)) | ((uint64_t)(c == '{') << depth);
            depth++;
        } else if (c == '}' || c == ']') {
            depth--;
            if ((kinds >> depth & 1) != (c == '}'))
                return NULL;
            if (depth == 0)
                return p + 1;
        } else if (!(byte_class[(unsigned char)c] & B_SKIPPABLE)) {
            return NULL;
        }
    }
    return NULL;
}

/* A skipped value at p (tw_jstream_skip_next): the byte after it, or NULL
 * where the token path would fail or look further. */
TW_HOT const char *fast_skip(const char *p, tw_trace_fast_in *in)
{
    const char *end = in->end;
    char c = *p;
    if (c == '"')
        return fast_skip_string(p, in);
    if ((c >= '0' && c <= '9') || (c == '-' && p + 1 < end && p[1] >= '0' && p[1] <= '9')) {
        const char *q = p + 1;
        while (q < end && number_byte(*q))
            q++;
        return q < end ? q : NULL;
    }
    return c == '{' || c == '[' ? fast_skip_container(p, in) : NULL;
}

/* After a member's value: the next key's quote (*more), or the byte after
 * the object's } (a trailing comma allowed, as member_key does). */
TW_HOT const char *fast_next(const char *p, tw_trace_fast_in *in, bool *more)
{
    const char *end = in->end;
    if (end - p >= 3 && p[0] == ',' && p[1] == ' ' && p[2] == '"') /* how Kineto writes it */
        return *more = true, p + 2;
    p = ws(p, end);
    if (p == end)
        return NULL;
    if (*p == '}')
        return *more = false, p + 1;
    if (*p != ',')
        return NULL;
    p = ws(p + 1, end);
    if (p == end)
        return NULL;
    if (*p == '}')
        return *more = false, p + 1;
    return *p == '"' ? (*more = true, p) : NULL;
}

/* A key at its quote p: the body in *k, *n; the byte after its colon and
 * white space (a value's first byte, never end), or NULL. */
TW_HOT const char *fast_key(const char *p, tw_trace_fast_in *in, const char **k, size_t *n)
{
    const char *end = in->end;
    p = fast_string(p, in, k, n);
    if (!p)
        return NULL;
    if (end - p >= 3 && p[0] == ':' && p[1] == ' ' && !space(p[2])) /* how Kineto writes it */
        return p + 2;
    p = ws(p, end);
    if (p == end || *p != ':')
        return NULL;
    p = ws(p + 1, end);
    return p == end ? NULL : p;
}

static inline bool key_is(const char *k, size_t n, const char *want, size_t wn)
{
    return n == wn && memcmp(k, want, wn) == 0;
}

/* want in lower case; ASCII letters only are folded, as strcasecmp does
 * in the C locale. */
static inline bool key_is_nocase(const char *k, size_t n, const char *want, size_t wn)
{
    if (n != wn || (k[0] | 0x20) != want[0])
        return false;
    for (size_t i = 1; i < n; i++) {
        unsigned char c = (unsigned char)k[i];
        if ((c >= 'A' && c <= 'Z' ? c | 0x20 : c) != (unsigned char)want[i])
            return false;
    }
    return true;
}

/* After an object's {: its first key's quote (*more), or the byte after an
 * empty object's }. */
TW_HOT const char *fast_first(const char *p, tw_trace_fast_in *in, bool *more)
{
    const char *end = in->end;
    p = ws(p, end);
    if (p == end)
        return NULL;
    if (*p == '}')
        return *more = false, p + 1;
    return *p == '"' ? (*more = true, p) : NULL;
}

/* The fields a number is read into (number_into): T_NONE for a number
 * passed unread; T_SKIP (a shape's op only) for an object or array passed
 * unread. */
enum {
    T_NONE,
    T_TS,
    T_DUR,
    T_PID,
    T_TID,
    T_BYTES,
    T_DEVICE,
    T_STREAM,
    T_ALLOCATED,
    T_RESERVED,
    T_CORRELATION,
    T_EXTERNAL_ID,
    T_SKIP
};

/* The shape of an event after its name, learned from one the fast path
 * read: the bytes between the values (keys, punctuation, the strings),
 * and the values: numbers, each to be read into its field or passed, and
 * objects and arrays passed unread (a kernel's grid, an operator's input
 * dims). An event whose bytes after its name match a shape, but for those
 * values, is read by matching (shape_replay): the same bytes read the
 * same way, the numbers read as the fast path reads them, the objects and
 * arrays passed as it passes them, whatever they hold. */
enum { SHAPE_OPS = 40, SHAPE_TEXT = 448 };

typedef struct shape_op {
    uint16_t len;   /* bytes of text to match before the number (or the end) */
    uint16_t vlen;  /* the number's bytes in the event it was learned from */
    uint8_t target; /* T_NONE: a number passed; T_SKIP: an object or array passed; else read into that field */
    bool end;       /* the last: text to match and nothing after it */
    bool varies;    /* any's: seen to differ from the event learned, so same reads it too */
} shape_op;

/* Text and numbers, in turn. */
typedef struct shape_ops {
    uint16_t nops, ntext;
    shape_op ops[SHAPE_OPS];
    char text[SHAPE_TEXT + 16]; /* 16 to spare, for same_text */
} shape_ops;

/* A number of the event's lane (pid, tid, device, stream) as learned. */
typedef struct shape_lane {
    uint8_t target;
    uint8_t op; /* its op in any */
    bool str;
    double v;
} shape_lane;

struct tw_trace_shape {
    bool ok;                /* learned whole */
    bool exact;             /* try same first (it can be built: the event learned fits, no lane read twice) */
    bool sets_ph, sets_cat; /* the text holds a ph or a cat member: their values */
    char ph;
    char cat[48];
    shape_ops any;  /* every number and every object or array passed an op */
    shape_ops same; /* those passed, and the lane's numbers, as text where they have not varied: fewer ops */
    uint8_t nlanes, nsame_lanes;
    shape_lane lanes[4];      /* as learned, in the order read */
    shape_lane same_lanes[4]; /* those same holds as text: stored after it matches */
    char learned[SHAPE_TEXT]; /* the bytes of the event learned, after its name (any's ops measure them) */
};

/* A shape being learned: the text so far ends where from points. */
typedef struct shape_rec {
    tw_trace_shape *shape;
    const char *start; /* where it begins in the event */
    const char *from;
    bool unread; /* learned after a ph nothing reads past: names are text */
    bool bad;    /* too long, or a member a shape cannot hold (a second name) */
} shape_rec;

/* The bytes from rec->from to at as text, and op after them. */
static void rec_op(shape_rec *rec, const char *at, shape_op op)
{
    shape_ops *o = &rec->shape->any;
    size_t len = (size_t)(at - rec->from);
    if (rec->bad || o->nops == SHAPE_OPS || len > (size_t)(SHAPE_TEXT - o->ntext)) {
        rec->bad = true;
        return;
    }
    memcpy(o->text + o->ntext, rec->from, len);
    o->ntext = (uint16_t)(o->ntext + len);
    op.len = (uint16_t)len;
    o->ops[o->nops++] = op;
}

/* Whether target is of the event's lane (pid, tid, device, stream): the
 * numbers that repeat from one event of a name to the next. */
static inline bool lane_target(int target)
{
    return target == T_PID || target == T_TID || target == T_DEVICE || target == T_STREAM;
}

/* Whether same may hold op's value as text: a value passed, or one of
 * the lane's read once in the shape (its value stored after the match, as
 * learned, can then be overwritten by no later member). */
static bool as_text(const tw_trace_shape *sh, const shape_op *op)
{
    if (op->target == T_NONE || op->target == T_SKIP)
        return true;
    if (!lane_target(op->target))
        return false;
    int times = 0;
    for (const shape_op *o = sh->any.ops; !o->end; o++)
        times += o->target == op->target;
    return times == 1;
}

/* Whether same holds op's value as text: one that has not varied since
 * the shape was learned, passed or of the lane. */
static bool folded(const tw_trace_shape *sh, const shape_op *op)
{
    return !op->end && !op->varies && as_text(sh, op);
}

/* same, from the event learned: the values that may be text (folded) as
 * they were in it, every other value an op as in any; the lanes it holds
 * as text, to be stored after a match. */
static void build_same(tw_trace_shape *sh)
{
    shape_ops *o = &sh->same;
    const char *from = sh->learned, *at = sh->learned;
    o->nops = o->ntext = 0;
    sh->nsame_lanes = 0;
    for (const shape_op *op = sh->any.ops;; op++) {
        at += op->len;
        if (folded(sh, op)) {
            for (int i = 0; i < sh->nlanes; i++)
                if (sh->lanes[i].op == op - sh->any.ops)
                    sh->same_lanes[sh->nsame_lanes++] = sh->lanes[i];
            at += op->vlen;
            continue;
        }
        size_t len = (size_t)(at - from);
        memcpy(o->text + o->ntext, from, len);
        o->ntext = (uint16_t)(o->ntext + len);
        o->ops[o->nops++] = (shape_op){.len = (uint16_t)len, .target = op->target, .end = op->end};
        if (op->end)
            return;
        from = at += op->vlen;
    }
}

/* The shape learned to the event's end at: its ops, the event's bytes,
 * and same built from them. */
static void rec_end(shape_rec *rec, const char *at)
{
    rec_op(rec, at, (shape_op){.end = true});
    tw_trace_shape *sh = rec->shape;
    if (rec->bad)
        return;
    size_t ntext = (size_t)(at - rec->start);
    sh->ok = true;
    sh->exact = ntext <= SHAPE_TEXT;
    for (const shape_op *op = sh->any.ops; !op->end; op++)
        if (lane_target(op->target) && !as_text(sh, op))
            sh->exact = false; /* a lane's number twice: same would store the one learned over the one read */
    if (!sh->exact)
        return;
    memcpy(sh->learned, rec->start, ntext);
    build_same(sh);
}

/* After same missed and any matched an event: the values folded into
 * same that differ in it (span[2i], span[2i + 1]: op i's value) now vary,
 * and same is built again with them as ops; false when none differs
 * (same cannot match this event: it is not tried again). */
static bool vary_same(tw_trace_shape *sh, const char *const *span)
{
    bool changed = false;
    const char *at = sh->learned;
    for (shape_op *op = sh->any.ops; !op->end; op++, span += 2) {
        at += op->len;
        size_t n = (size_t)(span[1] - span[0]);
        if (folded(sh, op) && (n != op->vlen || memcmp(at, span[0], n) != 0))
            op->varies = changed = true;
        at += op->vlen;
    }
    if (changed)
        build_same(sh);
    return changed;
}

/* A value at [at, after) for target: a number read as v (str: from a
 * string), or passed (T_NONE, T_SKIP). */
static void rec_value(shape_rec *rec, const char *at, const char *after, int target, double v, bool str)
{
    tw_trace_shape *sh = rec->shape;
    if (after - at > UINT16_MAX) { /* longer than any shape's text: none is learned */
        rec->bad = true;
        return;
    }
    rec_op(rec, at, (shape_op){.target = (uint8_t)target, .vlen = (uint16_t)(after - at)});
    rec->from = after;
    if (lane_target(target) && !rec->bad) {
        if (sh->nlanes == 4)
            rec->bad = true;
        else
            sh->lanes[sh->nlanes++] =
                (shape_lane){.target = (uint8_t)target, .op = (uint8_t)(sh->any.nops - 1), .str = str, .v = v};
    }
}

tw_trace_shape *tw_trace_shapes_new(void)
{
    return calloc(TW_TRACE_SHAPES + 16, sizeof(tw_trace_shape));
}

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
TW_HOT const char *fast_number_into(tw_trace_event *e, int target, const char *p, tw_trace_fast_in *in, shape_rec *rec)
{
    double v = NAN;
    bool str;
    const char *after = fast_value_number(p, in, &v, &str);
    if (after) {
        number_into(e, target, v, str);
        if (rec)
            rec_value(rec, p, after, target, v, str);
    }
    return after;
}

/* A skipped value at p (fast_skip), noted in rec: a number, an object or
 * an array as an op (the shape passes any other there), a string as text. */
TW_HOT const char *fast_skip_noted(const char *p, tw_trace_fast_in *in, shape_rec *rec)
{
    const char *after = fast_skip(p, in);
    if (rec && after && *p != '"')
        rec_value(rec, p, after, *p == '{' || *p == '[' ? T_SKIP : T_NONE, 0, false);
    return after;
}

/* The value of one member of args, its key k, n: as read_args. */
static const char *fast_arg(tw_trace_event *e, const char *k, size_t n, const char *p, tw_trace_fast_in *in, shape_rec *rec)
{
    int target = arg_target(k, n);
    return target == T_NONE ? fast_skip_noted(p, in, rec) : fast_number_into(e, target, p, in, rec);
}

/* The members of args, its { at p: the byte after its }, or NULL. */
static const char *fast_args(tw_trace_event *e, const char *p, tw_trace_fast_in *in, shape_rec *rec)
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
TW_HOT const char *fast_ph(tw_trace_event *e, const char *p, tw_trace_fast_in *in, shape_rec *rec)
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

TW_HOT const char *fast_cat(tw_trace_event *e, const char *p, tw_trace_fast_in *in, shape_rec *rec)
{
    p = fast_copy(p, in, e->cat, sizeof e->cat, NULL);
    if (rec && p)
        rec->shape->sets_cat = true, memcpy(rec->shape->cat, e->cat, sizeof e->cat);
    return p;
}

/* One member of an event, its key k, n and its value at p: as parse_event. */
static const char *fast_member(tw_trace_event *e, const char *k, size_t n, const char *p, tw_trace_fast_in *in,
                               shape_rec *rec)
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
TW_HOT const char *fast_known(tw_trace_event *e, int key, const char *p, tw_trace_fast_in *in, shape_rec *rec)
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
                               shape_rec *rec)
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
TW_HOT const char *match_ops(const shape_ops *o, tw_trace_event *e, const char *p, tw_trace_fast_in *in,
                             const char **span)
{
    const char *t = o->text, *end = in->end;
    for (const shape_op *op = o->ops;; op++) {
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
        if (after && !vary_same(sh, span))
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
    shape_rec learn = {0}, *rec = NULL;
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
                learn = (shape_rec){.shape = sh, .start = p, .from = p, .unread = unread};
                rec = &learn;
            }
        }
        if (!p)
            return NULL;
    }
    if (rec && p)
        rec_end(rec, p);
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
