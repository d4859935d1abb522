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
 * digit or -, then strtod; NULL for a long one. */
static const char *fast_string_number(const char *p, tw_trace_fast_in *in, double *v)
{
    const char *body;
    size_t n;
    char tmp[64];
    const char *after = fast_string(p, in, &body, &n);
    if (!after || n >= sizeof tmp)
        return NULL;
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

/* The value of one member of args, its key k, n: as read_args. */
static const char *fast_arg(tw_trace_event *e, const char *k, size_t n, const char *p, tw_trace_fast_in *in)
{
    double *target = NULL;
    int64_t *itarget = NULL;
    switch (n) { /* by length first: most args are none of these */
    case 5:
        target = key_is(k, n, "bytes", 5) ? &e->bytes : NULL;
        break;
    case 6:
        target = key_is(k, n, "device", 6) ? &e->device : key_is(k, n, "stream", 6) ? &e->stream : NULL;
        break;
    case 11: /* Kineto's spellings first */
        itarget = memcmp(k, "External id", 11) == 0        ? &e->external_id
                  : memcmp(k, "correlation", 11) == 0      ? &e->correlation
                  : key_is_nocase(k, n, "correlation", 11) ? &e->correlation
                  : key_is_nocase(k, n, "external id", 11) ? &e->external_id
                                                           : NULL;
        break;
    case 14:
        itarget = key_is_nocase(k, n, "correlation id", 14) ? &e->correlation : NULL;
        target = key_is(k, n, "Total Reserved", 14) ? &e->reserved : NULL;
        break;
    case 15:
        target = key_is(k, n, "Total Allocated", 15) ? &e->allocated : NULL;
        break;
    case 16:
        target = key_is(k, n, "current_reserved", 16) ? &e->reserved : NULL;
        break;
    case 17:
        target = key_is(k, n, "current_allocated", 17) ? &e->allocated : NULL;
        break;
    default:
        break;
    }
    if (!target && !itarget)
        return fast_skip(p, in);
    double v = NAN;
    bool str;
    p = fast_value_number(p, in, &v, &str);
    if (p && target)
        *target = v;
    else if (p && v == v && v >= 0 && v < 9e18)
        *itarget = (int64_t)v;
    return p;
}

/* The members of args, its { at p: the byte after its }, or NULL. */
static const char *fast_args(tw_trace_event *e, const char *p, tw_trace_fast_in *in)
{
    bool more;
    const char *k;
    size_t n;
    for (p = fast_first(p + 1, in, &more); p && more; p = fast_next(p, in, &more)) {
        p = fast_key(p, in, &k, &n);
        if (p)
            p = fast_arg(e, k, n, p, in);
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

/* One member of an event, its key k, n and its value at p: as parse_event. */
static const char *fast_member(tw_trace_event *e, const char *k, size_t n, const char *p, tw_trace_fast_in *in)
{
    double v = NAN;
    bool str;
    switch (n) {
    case 2:
        if (k[0] == 'p' && k[1] == 'h') {
            char ph[8] = "";
            p = fast_copy(p, in, ph, sizeof ph, NULL);
            e->ph = ph[0];
            return p;
        }
        if (k[0] == 't' && k[1] == 's') {
            p = fast_value_number(p, in, &v, &str);
            e->ts = v, e->has_ts = !str && isfinite(v);
            return p;
        }
        break;
    case 3:
        if (memcmp(k, "cat", 3) == 0)
            return fast_copy(p, in, e->cat, sizeof e->cat, NULL);
        if (memcmp(k, "dur", 3) == 0) {
            p = fast_value_number(p, in, &v, &str);
            e->dur = v, e->has_dur = !str && isfinite(v) && v >= 0;
            return p;
        }
        if ((k[0] == 'p' || k[0] == 't') && k[1] == 'i' && k[2] == 'd') {
            p = fast_value_number(p, in, &v, &str);
            *(k[0] == 'p' ? &e->pid : &e->tid) = tw_trace_as_id(v);
            return p;
        }
        break;
    case 4:
        if (memcmp(k, "name", 4) == 0)
            return fast_name(e, p, in);
        if (memcmp(k, "args", 4) == 0)
            return *p == '{' ? fast_args(e, p, in) : NULL;
        break;
    default:
        break;
    }
    return fast_skip(p, in);
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
TW_HOT const char *fast_known(tw_trace_event *e, int key, const char *p, tw_trace_fast_in *in)
{
    double v = NAN;
    bool str;
    switch (key) {
    case K_PH: {
        char ph[8] = "";
        p = fast_copy(p, in, ph, sizeof ph, NULL);
        e->ph = ph[0];
        return p;
    }
    case K_TS:
        p = fast_value_number(p, in, &v, &str);
        e->ts = v, e->has_ts = !str && isfinite(v);
        return p;
    case K_DUR:
        p = fast_value_number(p, in, &v, &str);
        e->dur = v, e->has_dur = !str && isfinite(v) && v >= 0;
        return p;
    case K_PID:
    case K_TID:
        p = fast_value_number(p, in, &v, &str);
        *(key == K_PID ? &e->pid : &e->tid) = tw_trace_as_id(v);
        return p;
    case K_CAT:
        return fast_copy(p, in, e->cat, sizeof e->cat, NULL);
    case K_NAME:
        return fast_name(e, p, in);
    default: /* K_ARGS */
        return *p == '{' ? fast_args(e, p, in) : NULL;
    }
}

/* A member of an event after a ph nothing reads past (tw_trace_ph_read):
 * a number is passed unread, since only the ph is handed over; anything
 * else is read as ever (what the token path counts while reading it, a
 * cut string, is counted the same way); a second ph gives up, since it
 * could make the event one that is read. */
TW_HOT const char *fast_unread(tw_trace_event *e, int key, const char *k, size_t n, const char *p, tw_trace_fast_in *in)
{
    if (key == K_PH || (key == K_OTHER && n == 2 && k[0] == 'p' && k[1] == 'h'))
        return NULL;
    bool number = key == K_TS || key == K_DUR || key == K_PID || key == K_TID;
    if (number && *p != '"')
        return fast_skip(p, in);
    return key == K_OTHER ? fast_member(e, k, n, p, in) : fast_known(e, key, p, in);
}

/* An event whose { is at p, whole in [p, end): read into e; the byte
 * after its }, or NULL (e then holds nothing the token path keeps). */
static const char *fast_event(tw_trace_event *e, const char *p, tw_trace_fast_in *in)
{
    tw_trace_event_reset(e);
    bool more, unread = false;
    const char *k = NULL;
    size_t n = 0;
    int key = K_ARGS; /* so that ph is tried first */
    for (p = fast_first(p + 1, in, &more); p && more; p = fast_next(p, in, &more)) {
        p = fast_event_key(p, in, &key, &k, &n);
        if (p && unread) {
            p = fast_unread(e, key, k, n, p, in);
        } else if (p) {
            p = key == K_OTHER ? fast_member(e, k, n, p, in) : fast_known(e, key, p, in);
            unread = key == K_PH && !tw_trace_ph_read(e->ph);
        }
        if (!p)
            return NULL;
    }
    return p;
}

/* The next event read in place, when it lies whole in the buffer: [,] {
 * ... } consumed and read into e; false (nothing consumed) otherwise. */
bool tw_trace_fast_event(tw_jstream *s, tw_trace_fast_in *in, tw_trace_event *e, bool first)
{
    const char *end = s->buf + s->len, *p = ws(s->buf + s->pos, end);
    if (in->end != end || in->base != s->base) /* the buffer was refilled */
        *in = (tw_trace_fast_in){.end = end, .base = s->base};
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
