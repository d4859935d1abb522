/*
 * jstream.c: the chunked JSON tokenizer. Strings are found with memchr
 * (the quote, then whether a backslash comes before it), so the common
 * name without escapes costs two scans and one copy; numbers of up to 19
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
    s->buf = malloc(TW_JSTREAM_BUFFER);
    return s->buf ? TW_OK : TW_ENOMEM;
}

void tw_jstream_free(tw_jstream *s)
{
    free(s->buf);
    s->buf = NULL;
}

/* Makes at least one unread byte available; false at the end or on error. */
static bool fill(tw_jstream *s)
{
    if (s->pos < s->len)
        return true;
    if (s->eof)
        return false;
    s->base += s->len;
    s->pos = s->len = 0;
    long n = s->read(s->src, s->buf, TW_JSTREAM_BUFFER);
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

static tw_jtok string(tw_jstream *s)
{
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

static bool number_char(int c)
{
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* Digits with an optional fraction, no exponent, up to 19 digits: exact
 * integer arithmetic and one division. Else strtod. */
static double parse_number(const char *t, size_t n)
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

static tw_jtok number(tw_jstream *s)
{
    char tmp[72];
    size_t n = 0;
    bool overlong = false;
    for (;;) {
        if (!fill(s))
            break;
        int c = (unsigned char)s->buf[s->pos];
        if (!number_char(c))
            break;
        if (n < sizeof tmp)
            tmp[n++] = (char)c;
        else
            overlong = true;
        s->pos++;
    }
    s->num = overlong ? NAN : parse_number(tmp, n);
    return TW_JT_NUMBER;
}

static tw_jtok word(tw_jstream *s)
{
    char w[16];
    size_t n = 0;
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
            s->pos++;
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
            if ((c >= '0' && c <= '9') || c == '-') {
                if (c == '-' && s->pos + 1 < s->len && (s->buf[s->pos + 1] == 'I' || s->buf[s->pos + 1] == 'N'))
                    return word(s);
                return number(s);
            }
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
                return word(s);
            s->error = "not JSON";
            return TW_JT_ERROR;
        }
    }
}

bool tw_jstream_skip(tw_jstream *s, tw_jtok t)
{
    uint64_t depth = 0;
    for (;;) {
        switch (t) {
        case TW_JT_OBJECT:
        case TW_JT_ARRAY:
            depth++;
            break;
        case TW_JT_OBJECT_END:
        case TW_JT_ARRAY_END:
            if (depth == 0) {
                s->error = "unbalanced brackets";
                return false;
            }
            depth--;
            break;
        case TW_JT_EOF:
            s->error = "unexpected end of input";
            return false;
        case TW_JT_ERROR:
            return false;
        default:
            break;
        }
        if (depth == 0)
            return true;
        t = tw_jstream_next(s);
    }
}
