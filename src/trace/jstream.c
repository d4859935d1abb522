/*
 * jstream.c: the chunked JSON tokenizer. Strings are scanned for their
 * quote or a backslash sixteen bytes at a time (tw_jfind), so the common
 * name without escapes costs one scan and one copy; numbers of up to 19
 * significant digits are read without strtod. One buffer of
 * TW_JSTREAM_BUFFER bytes is refilled in place; nothing else is allocated.
 */
#include "jstream.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/error.h"

int tw_jstream_init(tw_jstream *s, tw_jstream_read_fn read, void *src)
{
    memset(s, 0, sizeof *s);
    s->read = read;
    s->src = src;
    s->buf = s->own = malloc(TW_JSTREAM_BUFFER);
    return s->own ? TW_OK : TW_ENOMEM;
}

void tw_jstream_free(tw_jstream *s)
{
    free(s->own);
    s->buf = s->own = NULL;
}

static bool refill(tw_jstream *s);

/* Makes at least one unread byte available; false at the end or on error. */
static inline bool fill(tw_jstream *s)
{
    return s->pos < s->len || refill(s);
}

static bool refill(tw_jstream *s)
{
    if (s->eof)
        return false;
    s->base += s->len;
    s->pos = s->len = 0;
    long n;
    if (s->view) {
        n = s->view(s->src, &s->buf);
    } else {
        s->buf = s->own;
        n = s->read(s->src, s->own, TW_JSTREAM_BUFFER);
    }
    if (n <= 0) {
        s->eof = true;
        s->read_error = n < 0;
        return false;
    }
    s->len = (size_t)n;
    return true;
}

static void str_add(tw_jstream *s, const char *p, size_t n)
{
    size_t room = TW_JSTR_MAX - s->str_len;
    if (n > room) {
        n = room;
        s->str_cut = true;
    }
    memcpy(s->str + s->str_len, p, n);
    s->str_len += n;
}

static int hex(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int next_byte(tw_jstream *s)
{
    if (!fill(s))
        return -1;
    return (unsigned char)s->buf[s->pos++];
}

/* After a backslash: appends the character it stands for. */
static bool escape(tw_jstream *s)
{
    int c = next_byte(s);
    char out[4];
    size_t n = 1;
    switch (c) {
    case -1:
        return false;
    case 'b':
        out[0] = '\b';
        break;
    case 'f':
        out[0] = '\f';
        break;
    case 'n':
        out[0] = '\n';
        break;
    case 'r':
        out[0] = '\r';
        break;
    case 't':
        out[0] = '\t';
        break;
    case 'u': {
        unsigned v = 0;
        for (int i = 0; i < 4; i++) {
            int h = hex(next_byte(s));
            if (h < 0)
                return false;
            v = v << 4 | (unsigned)h;
        }
        /* Surrogates stay U+FFFD: names never need them to be recognised. */
        if (v >= 0xd800 && v <= 0xdfff)
            v = 0xfffd;
        if (v < 0x80) {
            out[0] = (char)v;
        } else if (v < 0x800) {
            out[0] = (char)(0xc0 | v >> 6), out[1] = (char)(0x80 | (v & 0x3f)), n = 2;
        } else {
            out[0] = (char)(0xe0 | v >> 12), out[1] = (char)(0x80 | (v >> 6 & 0x3f));
            out[2] = (char)(0x80 | (v & 0x3f)), n = 3;
        }
        break;
    }
    default: /* \" \\ \/ and, leniently, any other byte */
        out[0] = (char)c;
    }
    str_add(s, out, n);
    return true;
}

/* A short string with no escape that ends in the buffer (most keys and
 * names): scanned and copied at once. False leaves pos where it was. */
static bool string_fast(tw_jstream *s)
{
    const char *p = s->buf + s->pos, *end = s->buf + s->len;
    if ((size_t)(end - p) > TW_JSTR_MAX)
        end = p + TW_JSTR_MAX;
    const char *q = p;
    q = tw_jfind(q, end, false);
    if (q == end || *q != '"')
        return false;
    size_t n = (size_t)(q - p);
    memcpy(s->str, p, n);
    s->str[n] = '\0';
    s->str_len = n;
    s->str_cut = false;
    s->pos += n + 1;
    return true;
}

static tw_jtok string(tw_jstream *s)
{
    if (string_fast(s))
        return TW_JT_STRING;
    s->str_len = 0;
    s->str_cut = false;
    for (;;) {
        if (!fill(s)) {
            s->error = "unterminated string";
            return TW_JT_ERROR;
        }
        const char *p = s->buf + s->pos, *end = s->buf + s->len;
        const char *q = memchr(p, '"', (size_t)(end - p));
        const char *stop = q ? q : end;
        const char *b = memchr(p, '\\', (size_t)(stop - p));
        if (b) {
            str_add(s, p, (size_t)(b - p));
            s->pos += (size_t)(b - p) + 1;
            if (!escape(s)) {
                s->error = "bad escape in a string";
                return TW_JT_ERROR;
            }
            continue;
        }
        str_add(s, p, (size_t)(stop - p));
        s->pos += (size_t)(stop - p);
        if (q) {
            s->pos++;
            s->str[s->str_len] = '\0';
            if (s->str_cut)
                s->strings_cut++;
            return TW_JT_STRING;
        }
    }
}

/* Digits with an optional fraction, no exponent, up to 19 digits: exact
 * integer arithmetic and one division. Else strtod. */
double tw_jstream_number(const char *t, size_t n)
{
    size_t i = 0;
    bool neg = false;
    if (i < n && t[i] == '-')
        neg = true, i++;
    uint64_t m = 0;
    int digits = 0, frac = 0;
    bool dot = false, simple = i < n;
    for (; i < n && simple; i++) {
        char c = t[i];
        if (c >= '0' && c <= '9') {
            m = m * 10 + (uint64_t)(c - '0');
            frac += dot;
            simple = ++digits <= 19;
        } else if (c == '.' && !dot) {
            dot = true;
        } else {
            simple = false;
        }
    }
    if (simple && digits > 0) {
        static const double p10[] = {1,    1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,
                                     1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19};
        double v = (double)m / p10[frac];
        return neg ? -v : v;
    }
    char tmp[72];
    if (n >= sizeof tmp)
        return NAN;
    memcpy(tmp, t, n);
    tmp[n] = '\0';
    char *end;
    double v = strtod(tmp, &end);
    return *end ? NAN : v;
}

/* A number read byte by byte across reads, after the bytes of prefix
 * already consumed (a '-' that ended the last read). */
static tw_jtok number_across(tw_jstream *s, const char *prefix)
{
    char tmp[72];
    size_t n = strlen(prefix);
    memcpy(tmp, prefix, n);
    bool overlong = false;
    for (;;) {
        if (!fill(s))
            break;
        int c = (unsigned char)s->buf[s->pos];
        if (!tw_jnumber_char(c))
            break;
        if (n < sizeof tmp)
            tmp[n++] = (char)c;
        else
            overlong = true;
        s->pos++;
    }
    s->num = overlong ? NAN : tw_jstream_number(tmp, n);
    return TW_JT_NUMBER;
}

static tw_jtok number(tw_jstream *s)
{
    /* fast: the number ends inside the buffer, read where it lies */
    const char *p = s->buf + s->pos, *end = s->buf + s->len, *q = p;
    while (q < end && tw_jnumber_char((unsigned char)*q))
        q++;
    if (q < end && q - p < 72) {
        s->num = tw_jstream_number(p, (size_t)(q - p));
        s->pos += (size_t)(q - p);
        return TW_JT_NUMBER;
    }
    return number_across(s, "");
}

/* A word (true, false, null, NaN, Infinity, -Infinity), after the bytes of
 * prefix already consumed. */
static tw_jtok word_after(tw_jstream *s, const char *prefix)
{
    char w[16];
    size_t n = strlen(prefix);
    memcpy(w, prefix, n);
    bool neg = false;
    for (;;) {
        if (!fill(s))
            break;
        int c = (unsigned char)s->buf[s->pos];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-'))
            break;
        if (n < sizeof w - 1)
            w[n++] = (char)c;
        s->pos++;
    }
    w[n] = '\0';
    const char *v = w;
    if (*v == '-')
        neg = true, v++;
    if (!neg && strcmp(v, "true") == 0)
        return TW_JT_TRUE;
    if (!neg && strcmp(v, "false") == 0)
        return TW_JT_FALSE;
    if (!neg && strcmp(v, "null") == 0)
        return TW_JT_NULL;
    if (strcmp(v, "NaN") == 0 || strcmp(v, "Infinity") == 0) {
        s->num = *v == 'N' ? NAN : neg ? -INFINITY : INFINITY;
        return TW_JT_NUMBER;
    }
    s->error = "not JSON";
    return TW_JT_ERROR;
}

tw_jtok tw_jstream_next(tw_jstream *s)
{
    for (;;) {
        if (!fill(s)) {
            if (s->read_error)
                s->error = "read error";
            return s->read_error ? TW_JT_ERROR : TW_JT_EOF;
        }
        int c = (unsigned char)s->buf[s->pos];
        switch (c) {
        case ' ':
        case '\t':
        case '\n':
        case '\r':
            while (++s->pos < s->len && (s->buf[s->pos] == ' ' || s->buf[s->pos] == '\n'))
                ;
            continue;
        case '{':
            s->pos++;
            return TW_JT_OBJECT;
        case '}':
            s->pos++;
            return TW_JT_OBJECT_END;
        case '[':
            s->pos++;
            return TW_JT_ARRAY;
        case ']':
            s->pos++;
            return TW_JT_ARRAY_END;
        case ':':
            s->pos++;
            return TW_JT_COLON;
        case ',':
            s->pos++;
            return TW_JT_COMMA;
        case '"':
            s->pos++;
            return string(s);
        default:
            if (c == '-' && s->pos + 1 == s->len) { /* what follows the - is in the next read */
                s->pos++;
                int next = fill(s) ? (unsigned char)s->buf[s->pos] : -1;
                return next == 'I' || next == 'N' ? word_after(s, "-") : number_across(s, "-");
            }
            if ((c >= '0' && c <= '9') || c == '-') {
                if (c == '-' && s->pos + 1 < s->len && (s->buf[s->pos + 1] == 'I' || s->buf[s->pos + 1] == 'N'))
                    return word_after(s, "");
                return number(s);
            }
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
                return word_after(s, "");
            s->error = "not JSON";
            return TW_JT_ERROR;
        }
    }
}

int tw_jstream_peek_slow(tw_jstream *s)
{
    for (;;) {
        if (!fill(s))
            return -1;
        char c = s->buf[s->pos];
        if (c != ' ' && c != '\n' && c != '\t' && c != '\r')
            return (unsigned char)c;
        s->pos++;
    }
}

void tw_jstream_restart(tw_jstream *s, uint64_t off)
{
    s->base = off;
    s->len = s->pos = 0;
    s->eof = s->read_error = false;
}

/* Passes over the rest of a string (its quote read) without keeping it. */
static bool skip_string(tw_jstream *s)
{
    for (;;) {
        if (!fill(s))
            return false;
        const char *end = s->buf + s->len, *q = tw_jfind(s->buf + s->pos, end, false);
        s->pos = (size_t)(q - s->buf);
        if (q == end)
            continue;
        s->pos++;
        if (*q == '"')
            return true;
        if (next_byte(s) < 0) /* the byte after a backslash is never the string's end */
            return false;
    }
}

/* The bytes that may stand outside strings in a value being skipped: the
 * brackets, the separators, white space and the letters of numbers and
 * literals (true, false, null, NaN, Infinity). */
static bool skippable(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == ',' || c == ':' ||
           c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '-' || c == '+' || c == '.';
}

/* Skips the rest of an object or array whose opening bracket was read, a
 * byte at a time without making tokens: strings are passed with memchr,
 * brackets counted (and matched up to 64 levels deep; deeper ones only
 * counted). The grammar between them is not checked: a skipped value only
 * has to be balanced, its strings closed and its other bytes ones JSON
 * uses. */
static bool skip_container(tw_jstream *s, bool object)
{
    uint64_t depth = 1, kinds = object; /* bit i: level i+1 is an object */
    for (;;) {
        if (!fill(s)) {
            s->error = s->read_error ? "read error" : "unexpected end of input";
            return false;
        }
        const char *p = s->buf + s->pos, *end = s->buf + s->len;
        for (; p < end; p++) {
            unsigned char c = (unsigned char)*p;
            if (c == '"') {
                s->pos = (size_t)(p + 1 - s->buf);
                if (!skip_string(s)) {
                    s->error = s->read_error ? "read error" : "unterminated string";
                    return false;
                }
                break; /* the buffer may have been refilled */
            }
            if (c == '{' || c == '[') {
                if (depth < 64)
                    kinds = (kinds & ~(1ull << depth)) | ((uint64_t)(c == '{') << depth);
                depth++;
            } else if (c == '}' || c == ']') {
                depth--;
                if (depth < 64 && ((kinds >> depth & 1) != (c == '}'))) {
                    s->error = "unbalanced brackets";
                    return false;
                }
                if (depth == 0) {
                    s->pos = (size_t)(p + 1 - s->buf);
                    return true;
                }
            } else if (!skippable(c)) {
                s->error = "not JSON";
                return false;
            }
        }
        if (p == end)
            s->pos = s->len;
    }
}

static inline const char *skip_space(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

bool tw_jstream_key_fast(tw_jstream *s, bool first, int *result)
{
    const char *p = s->buf + s->pos, *end = s->buf + s->len;
    p = skip_space(p, end);
    if (end - p < 8)
        return false;
    if (!first) {
        if (*p == '}') {
            s->pos = (size_t)(p + 1 - s->buf);
            return *result = 0, true;
        }
        if (*p != ',')
            return false;
        p = skip_space(p + 1, end);
        if (p == end)
            return false;
    }
    if (*p == '}') { /* {} or a trailing comma */
        s->pos = (size_t)(p + 1 - s->buf);
        return *result = 0, true;
    }
    if (*p != '"')
        return false;
    const char *k = ++p, *stop = end - k > TW_JSTR_MAX ? k + TW_JSTR_MAX : end;
    p = tw_jfind(p, stop, false);
    if (p == stop || *p != '"')
        return false;
    const char *colon = skip_space(p + 1, end);
    if (colon == end || *colon != ':')
        return false;
    size_t n = (size_t)(p - k);
    memcpy(s->str, k, n);
    s->str[n] = '\0';
    s->str_len = n;
    s->str_cut = false;
    s->pos = (size_t)(colon + 1 - s->buf);
    return *result = 1, true;
}

bool tw_jstream_skip_next(tw_jstream *s)
{
    if (tw_jstream_peek(s) < 0) /* white space passed, across reads */
        return tw_jstream_skip(s, tw_jstream_next(s));
    const char *p = s->buf + s->pos, *end = s->buf + s->len;
    char c = *p;
    if (c == '"') { /* passed, never kept: a long one is not counted as cut, wherever the reads end */
        s->pos++;
        if (skip_string(s))
            return true;
        s->error = s->read_error ? "read error" : "unterminated string";
        return false;
    }
    if (end - p < 2)
        return tw_jstream_skip(s, tw_jstream_next(s));
    if (c == '{' || c == '[') {
        s->pos = (size_t)(p + 1 - s->buf);
        return skip_container(s, c == '{');
    }
    if ((c >= '0' && c <= '9') || (c == '-' && p[1] >= '0' && p[1] <= '9')) { /* a number: passed, not parsed */
        const char *q = p + 1;
        while (q < end && tw_jnumber_char((unsigned char)*q))
            q++;
        if (q < end) {
            s->pos = (size_t)(q - s->buf);
            return true;
        }
    }
    return tw_jstream_skip(s, tw_jstream_next(s));
}

bool tw_jstream_skip(tw_jstream *s, tw_jtok t)
{
    switch (t) {
    case TW_JT_OBJECT:
    case TW_JT_ARRAY:
        return skip_container(s, t == TW_JT_OBJECT);
    case TW_JT_OBJECT_END:
    case TW_JT_ARRAY_END:
        s->error = "unbalanced brackets";
        return false;
    case TW_JT_EOF:
        s->error = "unexpected end of input";
        return false;
    case TW_JT_ERROR:
        return false;
    default:
        return true;
    }
}
