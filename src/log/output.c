/*
 * output.c: the bounded output buffer the formatters append to, and the
 * number and time writers they use. All of it is async-signal-safe (the
 * crash handler formats with it): no stdio, no locale, no allocation. Local
 * time uses a UTC offset cached by tw_log_clock_refresh (once an hour, on
 * the logging path), so a record costs no localtime_r call.
 */
#include <math.h>
#include <string.h>
#include <time.h>

#include "internal.h"

void tw_out_str(tw_log_out *o, const char *s)
{
    if (s)
        tw_out_mem(o, s, strlen(s));
}

void tw_out_uint_pad(tw_log_out *o, uint64_t v, int width)
{
    char text[24];
    char *end = text + sizeof text, *p = end;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (end - p < width && p > text)
        *--p = '0';
    tw_out_mem(o, p, (size_t)(end - p));
}

void tw_out_int(tw_log_out *o, int64_t v)
{
    if (v < 0) {
        tw_out_char(o, '-');
        tw_out_uint_pad(o, v == INT64_MIN ? (uint64_t)INT64_MAX + 1 : (uint64_t)-v, 1);
    } else {
        tw_out_uint_pad(o, (uint64_t)v, 1);
    }
}

static const double pow10_table[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* 15 significant digits of a finite positive v: digits in m (1e14 <= m <
 * 1e15), v ~= m * 10^(e - 14). Scaling by exact powers of ten keeps the
 * error below the 15th digit. */
/* floor(log10(v)) for v > 0, by the table where it reaches (most values a
 * training loop logs), so the common case costs no log10; off by one near a
 * power of ten is corrected by decompose as log10's rounding would be. */
static int exponent10(double v)
{
    int x = 0;
    if (v >= 1 && v < pow10_table[22]) {
        while (v >= pow10_table[x + 1])
            x++;
        return x;
    }
    if (v < 1 && v * pow10_table[22] >= 1) {
        do
            x--;
        while (v * pow10_table[-x] < 1);
        return x;
    }
    return (int)floor(log10(v));
}

/* Nearest integer of 0 <= v < 2^53, halves up: a cast, where nearbyint is
 * a libc call on baseline x86-64 (no SSE4.1 rounding instruction). */
static double round_positive(double v)
{
    return (double)(int64_t)(v + 0.5);
}

static void decompose(double v, int64_t *m, int *e)
{
    int x = exponent10(v);
    double scaled;
    int shift = 14 - x;
    if (shift >= 0 && shift <= 22)
        scaled = v * pow10_table[shift];
    else if (shift < 0 && -shift <= 22)
        scaled = v / pow10_table[-shift];
    else
        scaled = v * pow(10.0, shift);
    double r = round_positive(scaled);
    if (r >= 1e15) {
        r = round_positive(r / 10);
        x++;
    } else if (r < 1e14) {
        r = round_positive(scaled * 10);
        x--;
    }
    *m = (int64_t)r;
    *e = x;
}

/* The 15 decimal digits of 0 <= m < 10^15, two at a time. */
static void digits_15(int64_t m, char digits[16])
{
    static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                "8081828384858687888990919293949596979899";
    uint64_t u = (uint64_t)m;
    for (int i = 13; i >= 1; i -= 2, u /= 100)
        memcpy(digits + i, pairs + 2 * (u % 100), 2);
    digits[0] = (char)('0' + u);
}

void tw_out_double(tw_log_out *o, double v)
{
    if (isnan(v)) {
        tw_out_str(o, "nan");
        return;
    }
    if (isinf(v)) {
        tw_out_str(o, v < 0 ? "-inf" : "inf");
        return;
    }
    if (signbit(v)) {
        tw_out_char(o, '-');
        v = -v;
    }
    if (v == 0) {
        tw_out_str(o, "0.0");
        return;
    }
    int64_t m;
    int e;
    decompose(v, &m, &e);
    char digits[16];
    digits_15(m, digits);
    int n = 15;
    while (n > 1 && digits[n - 1] == '0')
        n--;
    if (e >= -5 && e < 15) { /* positional, as Python's repr does */
        if (e < 0) {
            tw_out_str(o, "0.");
            for (int i = -1; i > e; i--)
                tw_out_char(o, '0');
            tw_out_mem(o, digits, (size_t)n);
        } else {
            int whole = e + 1;
            tw_out_mem(o, digits, (size_t)(n < whole ? n : whole));
            for (int i = n; i < whole; i++)
                tw_out_char(o, '0');
            tw_out_char(o, '.');
            if (n > whole)
                tw_out_mem(o, digits + whole, (size_t)(n - whole));
            else
                tw_out_char(o, '0');
        }
        return;
    }
    tw_out_char(o, digits[0]);
    if (n > 1) {
        tw_out_char(o, '.');
        tw_out_mem(o, digits + 1, (size_t)(n - 1));
    }
    tw_out_char(o, 'e');
    tw_out_char(o, e < 0 ? '-' : '+');
    tw_out_uint_pad(o, (uint64_t)(e < 0 ? -e : e), 2);
}

static size_t utf8_length(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    }
    return len;
}

void tw_out_json_text(tw_log_out *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && u[run] >= 0x20 && u[run] < 0x80 && u[run] != '"' && u[run] != '\\')
            run++;
        tw_out_mem(o, s + i, run - i);
        i = run;
        if (i >= n)
            break;
        unsigned char c = u[i];
        if (c >= 0x80) {
            size_t len = utf8_length(u + i, n - i);
            if (len) {
                tw_out_mem(o, s + i, len);
                i += len;
            } else {
                tw_out_str(o, "\\ufffd");
                i++;
            }
            continue;
        }
        tw_out_char(o, '\\');
        if (c == '"' || c == '\\')
            tw_out_char(o, (char)c);
        else if (c == '\n')
            tw_out_char(o, 'n');
        else if (c == '\t')
            tw_out_char(o, 't');
        else if (c == '\r')
            tw_out_char(o, 'r');
        else {
            char esc[5] = {'u', '0', '0', hex[c >> 4], hex[c & 15]};
            tw_out_mem(o, esc, 5);
        }
        i++;
    }
}

void tw_out_end(tw_log_out *o)
{
    if (o->cut && o->cap >= 3) {
        if (o->len > o->cap - 3)
            o->len = o->cap - 3;
        memcpy(o->p + o->len, "...", 3);
        o->len += 3;
    }
    o->p[o->len++] = '\n'; /* cap keeps room for it */
}

/* ---- time ---------------------------------------------------------------- */

static _Atomic int64_t offset_seconds;   /* local time - UTC */
static _Atomic int64_t offset_until = 0; /* ns: refresh at or after this */

void tw_log_clock_refresh(int64_t ns)
{
    if (ns < atomic_load_explicit(&offset_until, memory_order_relaxed))
        return;
    time_t t = (time_t)(ns / 1000000000);
    struct tm local;
    if (localtime_r(&t, &local))
        atomic_store_explicit(&offset_seconds, (int64_t)local.tm_gmtoff, memory_order_relaxed);
    int64_t hour = (int64_t)3600 * 1000000000;
    atomic_store_explicit(&offset_until, (ns / hour + 1) * hour, memory_order_relaxed);
}

typedef struct civil {
    int64_t year;
    unsigned month, day, hour, minute, second, milli;
} civil;

/* Howard Hinnant's days-to-civil, valid for any day count. */
static civil to_civil(int64_t ns, int64_t offset)
{
    int64_t ms = ns / 1000000 + offset * 1000;
    int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
    civil c;
    c.milli = (unsigned)(ms - secs * 1000);
    int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
    int64_t rest = secs - days * 86400;
    c.hour = (unsigned)(rest / 3600);
    c.minute = (unsigned)(rest / 60 % 60);
    c.second = (unsigned)(rest % 60);
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    c.day = doy - (153 * mp + 2) / 5 + 1;
    c.month = mp < 10 ? mp + 3 : mp - 9;
    c.year = (int64_t)yoe + era * 400 + (c.month <= 2);
    return c;
}

static void put2(char *p, unsigned v)
{
    p[0] = (char)('0' + v / 10 % 10);
    p[1] = (char)('0' + v % 10);
}

/* "YYYY-MM-DD?HH:MM:SS" of c into b (19 bytes). */
static void civil_seconds(char *b, const civil *c, char between)
{
    unsigned year = c->year < 0 ? 0 : c->year > 9999 ? 9999 : (unsigned)c->year;
    put2(b, year / 100);
    put2(b + 2, year % 100);
    b[4] = '-';
    put2(b + 5, c->month);
    b[7] = '-';
    put2(b + 8, c->day);
    b[10] = between;
    put2(b + 11, c->hour);
    b[13] = ':';
    put2(b + 14, c->minute);
    b[16] = ':';
    put2(b + 17, c->second);
}

/* The date and time to the second change once a second: each thread keeps
 * the last one it wrote (thread-local, so signal-safe) and writes only the
 * milliseconds anew. */
typedef struct second_cache {
    int64_t second, offset;
    char between;
    char text[19];
} second_cache;

static _Thread_local second_cache cached = {.second = INT64_MIN};

static void out_civil(tw_log_out *o, int64_t ns, int64_t offset, char between)
{
    int64_t ms = ns / 1000000 + offset * 1000;
    int64_t second = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
    if (cached.second != second || cached.offset != offset || cached.between != between) {
        civil c = to_civil(ns, offset);
        civil_seconds(cached.text, &c, between);
        cached.second = second;
        cached.offset = offset;
        cached.between = between;
    }
    char b[23];
    memcpy(b, cached.text, 19);
    unsigned milli = (unsigned)(ms - second * 1000);
    b[19] = '.';
    b[20] = (char)('0' + milli / 100);
    put2(b + 21, milli % 100);
    tw_out_mem(o, b, sizeof b);
}

void tw_out_asctime(tw_log_out *o, int64_t ns)
{
    out_civil(o, ns, atomic_load_explicit(&offset_seconds, memory_order_relaxed), ' ');
}

void tw_out_rfc3339(tw_log_out *o, int64_t ns)
{
    int64_t off = atomic_load_explicit(&offset_seconds, memory_order_relaxed);
    out_civil(o, ns, off, 'T');
    if (off == 0) {
        tw_out_char(o, 'Z');
        return;
    }
    tw_out_char(o, off < 0 ? '-' : '+');
    int64_t a = off < 0 ? -off : off;
    tw_out_uint_pad(o, (uint64_t)(a / 3600), 2);
    tw_out_char(o, ':');
    tw_out_uint_pad(o, (uint64_t)(a / 60 % 60), 2);
}
