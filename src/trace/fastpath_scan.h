/*
 * fastpath_scan.h: the byte-level steps of the fast path (fastpath.c):
 * where a string ends (bit scans over a 64-byte block's quote, backslash
 * and NUL mask), strings kept or skipped, numbers parsed as they are
 * scanned, values and containers passed without tokens, keys and the
 * commas between members. Each gives up (NULL) where the token path
 * (events.c) would read differently, so that the fast path can hand the
 * event to it having consumed nothing.
 *
 * The steps are static and inlined where they are called (TW_HOT): a call
 * per string or number costs as much as reading it, so they live in a
 * header rather than behind calls into another file. fastpath.c is the
 * one file that includes it.
 */
#ifndef TW_TRACE_FASTPATH_SCAN_H
#define TW_TRACE_FASTPATH_SCAN_H

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

#endif
