/*
 * buffer.c: the growable buffer of buffer.h, and fast number formatting for
 * the exposition hot loop (integers without printf, doubles in their
 * shortest round-trip form).
 */
#include "buffer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tw_buffer_init(tw_buffer *b) { memset(b, 0, sizeof *b); }

void tw_buffer_free(tw_buffer *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

void tw_buffer_reset(tw_buffer *b)
{
    b->len = 0;
    b->failed = false;
}

bool tw_buffer_reserve(tw_buffer *b, size_t extra)
{
    if (b->failed)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *data = realloc(b->data, cap);
    if (!data) {
        b->failed = true;
        return false;
    }
    b->data = data;
    b->cap = cap;
    return true;
}

void tw_buffer_append(tw_buffer *b, const char *s, size_t n)
{
    if (!tw_buffer_reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void tw_buffer_puts(tw_buffer *b, const char *s) { tw_buffer_append(b, s, strlen(s)); }

void tw_buffer_putc(tw_buffer *b, char c)
{
    if (!tw_buffer_reserve(b, 1))
        return;
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

void tw_buffer_printf(tw_buffer *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        tw_buffer_append(b, small, (size_t)n);
        return;
    }
    if (!tw_buffer_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void tw_buffer_uint(tw_buffer *b, unsigned long long v)
{
    char tmp[24];
    int i = (int)sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    tw_buffer_append(b, tmp + i, sizeof tmp - (size_t)i);
}

size_t tw_format_double(char *out, double v)
{
    if (isnan(v))
        return (size_t)snprintf(out, TW_DOUBLE_CHARS, "NaN");
    if (isinf(v))
        return (size_t)snprintf(out, TW_DOUBLE_CHARS, v > 0 ? "+Inf" : "-Inf");
    if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        /* integers without printf: the common case in counters and buckets */
        char tmp[24];
        int i = (int)sizeof tmp;
        unsigned long long u = (unsigned long long)fabs(v);
        do {
            tmp[--i] = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        size_t n = 0;
        if (signbit(v))
            out[n++] = '-';
        memcpy(out + n, tmp + i, sizeof tmp - (size_t)i);
        n += sizeof tmp - (size_t)i;
        out[n] = '\0';
        return n;
    }
    /* few decimals (0.25, 61.5, 0.001): scale to an integer and check that it
     * divides back to exactly v, which is what strtod of the text would give */
    static const double p10[] = {1e1, 1e2, 1e3, 1e4, 1e5, 1e6};
    double a = fabs(v);
    if (a >= 1e-6 && a < 1e9) {
        for (int k = 0; k < 6; k++) {
            double scaled = a * p10[k];
            if (scaled != floor(scaled) || scaled / p10[k] != a)
                continue;
            unsigned long long n = (unsigned long long)scaled, ip = n / (unsigned long long)p10[k];
            unsigned long long fp = n % (unsigned long long)p10[k];
            char tmp[48];
            int len = 0;
            if (v < 0)
                tmp[len++] = '-';
            len += snprintf(tmp + len, sizeof tmp - (size_t)len, "%llu.", ip);
            for (int d = k; d >= 0; d--) {
                unsigned long long div = 1;
                for (int e = 0; e < d; e++)
                    div *= 10;
                tmp[len++] = (char)('0' + (fp / div) % 10);
            }
            while (tmp[len - 1] == '0')
                len--;
            memcpy(out, tmp, (size_t)len);
            out[len] = '\0';
            return (size_t)len;
        }
    }
    int n = snprintf(out, TW_DOUBLE_CHARS, "%.15g", v);
    if (strtod(out, NULL) != v)
        n = snprintf(out, TW_DOUBLE_CHARS, "%.17g", v);
    return (size_t)n;
}

void tw_buffer_double(tw_buffer *b, double v)
{
    char tmp[TW_DOUBLE_CHARS];
    tw_buffer_append(b, tmp, tw_format_double(tmp, v));
}
