/*
 * json.c: JSON output with exact escaping, and a pull reader small enough to
 * fuzz exhaustively (see json.h). The reader handles the JSON trainwatch
 * itself writes: objects of strings, numbers, booleans, nulls and nested
 * objects; arrays are skipped.
 */
#include "json.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s, 0 when invalid. */
static size_t utf8_sequence(const unsigned char *s, size_t len)
{
    unsigned char c = s[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0)
        n = 2, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0)
        n = 3, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0)
        n = 4, cp = c & 0x07;
    else
        return 0;
    if (n > len)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

void tw_json_string(FILE *out, const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    fputc('"', out);
    for (size_t i = 0; i < len;) {
        unsigned char c = u[i];
        if (c == '"' || c == '\\') {
            fputc('\\', out);
            fputc(c, out);
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            switch (c) {
            case '\n':
                fputs("\\n", out);
                break;
            case '\t':
                fputs("\\t", out);
                break;
            case '\r':
                fputs("\\r", out);
                break;
            default:
                fprintf(out, "\\u%04x", c);
            }
            i++;
        } else {
            size_t n = utf8_sequence(u + i, len - i);
            if (n == 0) {
                fputs("\\ufffd", out);
                i++;
            } else {
                fwrite(u + i, 1, n, out);
                i += n;
            }
        }
    }
    fputc('"', out);
}

void tw_json_cstring(FILE *out, const char *s) { tw_json_string(out, s, strlen(s)); }

void tw_json_number(FILE *out, double v)
{
    if (isnan(v)) {
        fputs("\"NaN\"", out);
        return;
    }
    if (isinf(v)) {
        fputs(v > 0 ? "\"Infinity\"" : "\"-Infinity\"", out);
        return;
    }
    if (v == floor(v) && fabs(v) < 1e15) {
        fprintf(out, "%.0f", v);
        return;
    }
    char buf[40];
    for (int precision = 6; precision <= 17; precision++) {
        snprintf(buf, sizeof buf, "%.*g", precision, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, out);
}

/* ---- reader ----------------------------------------------------------- */

static void skip_ws(tw_json_reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

bool tw_json_begin(tw_json_reader *r, const char *s, size_t len)
{
    r->p = s;
    r->end = s + len;
    r->error = false;
    skip_ws(r);
    if (r->p >= r->end || *r->p != '{')
        return false;
    r->p++;
    return true;
}

static int hex4(const char *p, const char *end, uint32_t *out)
{
    if (end - p < 4)
        return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

static size_t put_utf8(char *dst, size_t room, uint32_t cp)
{
    char tmp[4];
    size_t n;
    if (cp < 0x80)
        tmp[0] = (char)cp, n = 1;
    else if (cp < 0x800)
        tmp[0] = (char)(0xc0 | (cp >> 6)), tmp[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
    else if (cp < 0x10000)
        tmp[0] = (char)(0xe0 | (cp >> 12)), tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3f)),
        tmp[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
    else
        tmp[0] = (char)(0xf0 | (cp >> 18)), tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3f)),
        tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), tmp[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
    if (n > room)
        return 0;
    memcpy(dst, tmp, n);
    return n;
}

/* Reads a string at r->p (after the opening quote) into dst, cut to cap-1. */
static bool read_string(tw_json_reader *r, char *dst, size_t cap, size_t *out_len)
{
    size_t n = 0;
    while (r->p < r->end && *r->p != '"') {
        char c = *r->p++;
        if (c == '\\') {
            if (r->p >= r->end)
                return false;
            char e = *r->p++;
            uint32_t cp = 0;
            switch (e) {
            case 'n': cp = '\n'; break;
            case 't': cp = '\t'; break;
            case 'r': cp = '\r'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case '/': case '\\': case '"': cp = (uint32_t)e; break;
            case 'u':
                if (!hex4(r->p, r->end, &cp))
                    return false;
                r->p += 4;
                if (cp >= 0xd800 && cp <= 0xdbff && r->end - r->p >= 6 && r->p[0] == '\\' &&
                    r->p[1] == 'u') {
                    uint32_t lo;
                    if (hex4(r->p + 2, r->end, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
                        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                        r->p += 6;
                    }
                }
                if (cp >= 0xd800 && cp <= 0xdfff)
                    cp = 0xfffd;
                break;
            default:
                return false;
            }
            n += put_utf8(dst + n, cap - 1 - n, cp);
        } else if (n + 1 < cap) {
            dst[n++] = c;
        }
    }
    if (r->p >= r->end)
        return false;
    r->p++;
    dst[n] = '\0';
    *out_len = n;
    return true;
}

static bool skip_value(tw_json_reader *r);

static bool skip_container(tw_json_reader *r, char open, char close)
{
    (void)open;
    r->p++;
    int guard = 0;
    for (;;) {
        skip_ws(r);
        if (r->p >= r->end || ++guard > 100000)
            return false;
        if (*r->p == close) {
            r->p++;
            return true;
        }
        if (*r->p == ',' || *r->p == ':') {
            r->p++;
            continue;
        }
        if (!skip_value(r))
            return false;
    }
}

static bool skip_value(tw_json_reader *r)
{
    skip_ws(r);
    if (r->p >= r->end)
        return false;
    char c = *r->p;
    if (c == '"') {
        char tmp[8];
        size_t n;
        r->p++;
        return read_string(r, tmp, sizeof tmp, &n);
    }
    if (c == '[')
        return skip_container(r, '[', ']');
    if (c == '{')
        return skip_container(r, '{', '}');
    const char *start = r->p;
    while (r->p < r->end && *r->p != ',' && *r->p != '}' && *r->p != ']' && *r->p != ' ' &&
           *r->p != '\n')
        r->p++;
    return r->p > start;
}

static tw_json_type fail(tw_json_reader *r)
{
    r->error = true;
    return TW_JSON_ERROR;
}

tw_json_type tw_json_next(tw_json_reader *r, tw_json_member *m)
{
    if (r->error)
        return TW_JSON_ERROR;
    skip_ws(r);
    if (r->p < r->end && *r->p == ',') {
        r->p++;
        skip_ws(r);
    }
    if (r->p >= r->end)
        return TW_JSON_END;
    if (*r->p == '}') {
        r->p++;
        return TW_JSON_END;
    }
    if (*r->p != '"')
        return fail(r);
    r->p++;
    size_t klen;
    if (!read_string(r, m->key, sizeof m->key, &klen))
        return fail(r);
    skip_ws(r);
    if (r->p >= r->end || *r->p != ':')
        return fail(r);
    r->p++;
    skip_ws(r);
    if (r->p >= r->end)
        return fail(r);
    char c = *r->p;
    m->string[0] = '\0';
    m->string_len = 0;
    m->number = 0;
    if (c == '"') {
        r->p++;
        if (!read_string(r, m->string, sizeof m->string, &m->string_len))
            return fail(r);
        return m->type = TW_JSON_STRING;
    }
    if (c == '{') {
        r->p++;
        return m->type = TW_JSON_OBJECT;
    }
    if (c == '[') {
        if (!skip_container(r, '[', ']'))
            return fail(r);
        return m->type = TW_JSON_ARRAY;
    }
    if (r->end - r->p >= 4 && memcmp(r->p, "true", 4) == 0) {
        r->p += 4;
        m->number = 1;
        return m->type = TW_JSON_BOOL;
    }
    if (r->end - r->p >= 5 && memcmp(r->p, "false", 5) == 0) {
        r->p += 5;
        return m->type = TW_JSON_BOOL;
    }
    if (r->end - r->p >= 4 && memcmp(r->p, "null", 4) == 0) {
        r->p += 4;
        return m->type = TW_JSON_NULL;
    }
    char buf[64];
    size_t n = 0;
    while (r->p < r->end && n < sizeof buf - 1 &&
           (strchr("+-.eE", *r->p) || (*r->p >= '0' && *r->p <= '9')))
        buf[n++] = *r->p++;
    buf[n] = '\0';
    char *endp;
    m->number = strtod(buf, &endp);
    if (n == 0 || *endp != '\0')
        return fail(r);
    return m->type = TW_JSON_NUMBER;
}
