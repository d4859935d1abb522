/*
 * scan.c: lexical helpers shared by all formats (see scan.h).
 *
 * These run on every byte of every log, so they are written for speed: no
 * allocation, no locale, a fast path for plain decimals that falls back to
 * strtod only for long mantissas or large exponents.
 */
#include "scan.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const double pow10_table[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static char lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c; }

static bool word_ci(const char *p, const char *end, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(end - p) < n)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (lower(p[i]) != w[i])
            return false;
    }
    return true;
}

static size_t scan_special(const char *p, const char *end, double *out)
{
    /* nan / inf / infinity, not followed by a letter ("info", "nanny"). */
    size_t n = 0;
    double v = 0;
    if (word_ci(p, end, "infinity")) {
        n = 8, v = INFINITY;
    } else if (word_ci(p, end, "inf")) {
        n = 3, v = INFINITY;
    } else if (word_ci(p, end, "nan")) {
        n = 3, v = NAN;
    }
    if (n == 0 || (p + n < end && (tw_is_alpha(p[n]) || p[n] == '_')))
        return 0;
    *out = v;
    return n;
}

static size_t scan_digits_group(const char *p, const char *end)
{
    size_t n = 0;
    while (p + n < end && tw_is_digit(p[n]))
        n++;
    return n;
}

size_t tw_scan_number(const char *s, const char *end, double *out)
{
    const char *p = s;
    bool neg = false;
    if (p < end && (*p == '-' || *p == '+')) {
        neg = (*p == '-');
        p++;
    }
    if (p < end && !tw_is_digit(*p) && *p != '.') {
        size_t n = scan_special(p, end, out);
        if (n == 0)
            return 0;
        if (neg)
            *out = -*out;
        return (size_t)(p - s) + n;
    }
    uint64_t mant = 0;
    int kept = 0, scale = 0, digits = 0, group = 0;
    bool thousands = false, exact = true;
    while (p < end) {
        if (tw_is_digit(*p)) {
            if (kept < 19) {
                mant = mant * 10 + (uint64_t)(*p - '0');
                if (mant || kept)
                    kept++;
            } else {
                scale++;
                exact = false;
            }
            digits++;
            group++;
            p++;
        } else if (*p == ',' && digits > 0 && (thousands ? group == 3 : group <= 3) &&
                   scan_digits_group(p + 1, end) == 3) {
            /* 105,488 is one number; "0.5, lr" and "1,23" are not. */
            thousands = true;
            group = 0;
            p++;
        } else {
            break;
        }
    }
    if (p < end && *p == '.') {
        const char *q = p + 1;
        size_t frac = scan_digits_group(q, end);
        if (frac > 0 || digits > 0) {
            for (size_t i = 0; i < frac; i++) {
                if (kept < 19) {
                    mant = mant * 10 + (uint64_t)(q[i] - '0');
                    if (mant || kept)
                        kept++;
                    scale--;
                } else {
                    exact = false;
                }
            }
            digits += (int)frac;
            p = q + frac;
        }
    }
    if (digits == 0)
        return 0;
    int exp10 = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        const char *q = p + 1;
        bool eneg = false;
        if (q < end && (*q == '-' || *q == '+')) {
            eneg = (*q == '-');
            q++;
        }
        size_t ed = scan_digits_group(q, end);
        if (ed > 0) {
            for (size_t i = 0; i < ed && exp10 < 100000; i++)
                exp10 = exp10 * 10 + (q[i] - '0');
            if (eneg)
                exp10 = -exp10;
            p = q + ed;
        }
    }
    int k = scale + exp10;
    double v;
    if (exact && mant < (1ull << 53) && k >= -22 && k <= 22) {
        v = (double)mant;
        v = (k < 0) ? v / pow10_table[-k] : v * pow10_table[k];
    } else {
        char buf[96];
        size_t n = 0;
        for (const char *c = s; c < p && n < sizeof buf - 1; c++) {
            if (*c != ',')
                buf[n++] = *c;
        }
        buf[n] = '\0';
        v = strtod(buf, NULL);
        neg = false; /* the sign is in buf */
    }
    *out = neg ? -v : v;
    return (size_t)(p - s);
}

size_t tw_scan_uint(const char *s, const char *end, long long *out)
{
    size_t n = 0;
    long long v = 0;
    while (s + n < end && tw_is_digit(s[n]) && n < 18) {
        v = v * 10 + (s[n] - '0');
        n++;
    }
    if (n > 0)
        *out = v;
    return n;
}

/* Reads exactly n digits. */
static bool fixed_digits(const char *p, const char *end, int n, int *out)
{
    if (end - p < n)
        return false;
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!tw_is_digit(p[i]))
            return false;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return true;
}

/* 1 or 2 digits. */
static size_t small_int(const char *p, const char *end, int *out)
{
    if (p >= end || !tw_is_digit(p[0]))
        return 0;
    if (p + 1 < end && tw_is_digit(p[1])) {
        *out = (p[0] - '0') * 10 + (p[1] - '0');
        return 2;
    }
    *out = p[0] - '0';
    return 1;
}

double tw_civil_seconds(int year, int month, int day, int hour, int min, double sec)
{
    /* Days from civil, after H. Hinnant's public-domain algorithm. */
    int y = year - (month <= 2);
    int era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (unsigned)((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1);
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    long days = (long)era * 146097 + (long)doe - 719468;
    return (double)days * 86400.0 + hour * 3600.0 + min * 60.0 + sec;
}

/* HH:MM:SS[.frac|,frac] */
static size_t scan_clock(const char *p, const char *end, int *h, int *m, double *sec)
{
    const char *q = p;
    int s;
    size_t n = small_int(q, end, h);
    if (!n)
        return 0;
    q += n;
    if (q >= end || *q != ':' || !fixed_digits(q + 1, end, 2, m))
        return 0;
    q += 3;
    if (q >= end || *q != ':' || !fixed_digits(q + 1, end, 2, &s))
        return 0;
    q += 3;
    *sec = s;
    if (q < end && (*q == '.' || *q == ',') && q + 1 < end && tw_is_digit(q[1])) {
        double frac = 0, scale = 0.1;
        q++;
        while (q < end && tw_is_digit(*q)) {
            frac += (*q - '0') * scale;
            scale *= 0.1;
            q++;
        }
        *sec += frac;
    }
    if (*h > 23 || *m > 59 || s > 60)
        return 0;
    return (size_t)(q - p);
}

static size_t scan_date_time(const char *p, const char *end, double *out)
{
    int y = 1970, mo, d, h, mi;
    double sec;
    const char *q = p;
    int a;
    if (q < end && (*q == 'I' || *q == 'W' || *q == 'E' || *q == 'F') &&
        fixed_digits(q + 1, end, 4, &a) && q + 5 < end && q[5] == ' ') {
        /* glog: Lmmdd hh:mm:ss.uuuuuu */
        mo = a / 100;
        d = a % 100;
        q += 6;
    } else if (fixed_digits(q, end, 4, &y) && q + 4 < end && (q[4] == '-' || q[4] == '/')) {
        char sep = q[4];
        q += 5;
        size_t n = small_int(q, end, &mo);
        if (!n || q + n >= end || q[n] != sep)
            return 0;
        q += n + 1;
        n = small_int(q, end, &d);
        if (!n)
            return 0;
        q += n;
        if (q >= end || (*q != ' ' && *q != 'T'))
            return 0;
        q++;
    } else {
        size_t n = small_int(q, end, &mo);
        if (!n || q + n >= end || q[n] != '/')
            return 0;
        q += n + 1;
        n = small_int(q, end, &d);
        if (!n || q + n >= end)
            return 0;
        q += n;
        if (*q == '/') {
            if (!fixed_digits(q + 1, end, 4, &y))
                return 0;
            q += 5;
        }
        if (q >= end || *q != ' ')
            return 0;
        q++;
    }
    size_t n = scan_clock(q, end, &h, &mi, &sec);
    if (!n || mo < 1 || mo > 12 || d < 1 || d > 31)
        return 0;
    q += n;
    *out = tw_civil_seconds(y, mo, d, h, mi, sec);
    return (size_t)(q - p);
}

size_t tw_scan_timestamp(const char *s, size_t len, double *out)
{
    const char *end = s + len;
    const char *p = s;
    bool bracket = false;
    if (p < end && *p == '[') {
        bracket = true;
        p++;
    }
    size_t n = scan_date_time(p, end, out);
    if (!n)
        return 0;
    p += n;
    if (bracket) {
        /* "[01/01 12:00:00 d2.utils.events]": a logger name may share the brackets. */
        const char *close = memchr(p, ']', (size_t)(end - p) < 80 ? (size_t)(end - p) : 80);
        if (!close)
            return 0;
        p = close + 1;
        if (p < end && *p == ':')
            p++;
    }
    while (p < end && tw_is_blank(*p))
        p++;
    return (size_t)(p - s);
}

size_t tw_scan_duration(const char *s, const char *end, double *out)
{
    const char *p = s;
    double days = 0;
    long long v;
    while (p < end && tw_is_blank(*p))
        p++;
    size_t n = tw_scan_uint(p, end, &v);
    if (!n)
        return 0;
    /* "3 days, 10:51:17" */
    const char *q = p + n;
    while (q < end && *q == ' ')
        q++;
    if (word_ci(q, end, "day")) {
        days = (double)v;
        q += 3;
        if (q < end && *q == 's')
            q++;
        if (q < end && *q == ',')
            q++;
        while (q < end && *q == ' ')
            q++;
        p = q;
        n = tw_scan_uint(p, end, &v);
        if (!n) {
            *out = days * 86400;
            return (size_t)(p - s);
        }
    }
    /* h:mm:ss, m:ss, or a number with a unit */
    double parts[3];
    int count = 0;
    q = p;
    while (count < 3) {
        double x;
        size_t m = tw_scan_number(q, end, &x);
        if (!m || isnan(x) || isinf(x))
            break;
        parts[count++] = x;
        q += m;
        if (q < end && *q == ':' && q + 1 < end && tw_is_digit(q[1]))
            q++;
        else
            break;
    }
    if (count == 0)
        return 0;
    double secs;
    if (count == 3)
        secs = parts[0] * 3600 + parts[1] * 60 + parts[2];
    else if (count == 2)
        secs = parts[0] * 60 + parts[1];
    else {
        secs = parts[0];
        if (q < end && *q == 'm' && !(q + 1 < end && q[1] == 's'))
            secs *= 60, q++;
        else if (q < end && *q == 'h')
            secs *= 3600, q++;
        else if (q + 1 < end && q[0] == 'm' && q[1] == 's')
            secs /= 1000, q += 2;
        else if (q < end && *q == 's')
            q++;
    }
    *out = days * 86400 + secs;
    return (size_t)(q - s);
}

/* Character classes for the tokenizer, one table lookup per byte. */
enum { CLASS_KEY = 1, CLASS_SEPARATOR = 2 };
static unsigned char char_class[256];

__attribute__((constructor)) static void build_char_classes(void)
{
    for (int c = 0; c < 256; c++) {
        bool key = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                   c == '.' || c == '/' || c == '(' || c == ')' || c == '@' || c == '-';
        char_class[c] = (unsigned char)((key ? CLASS_KEY : 0) | ((c == ':' || c == '=') ? CLASS_SEPARATOR : 0));
    }
}

static bool is_key_char(char c) { return char_class[(unsigned char)c] & CLASS_KEY; }

static bool is_unit_char(char c) { return tw_is_alpha(c) || c == '/'; }

/* Parses the value after a separator into kv; returns false if not numeric. */
static bool scan_value(const char *v, const char *end, tw_kv *kv)
{
    const char *p = v;
    while (p < end && tw_is_blank(*p))
        p++;
    bool bracket = false;
    if (p < end && (*p == '[' || *p == '(')) {
        bracket = true;
        p++;
        while (p < end && *p == ' ')
            p++;
    }
    kv->value = p;
    size_t n = tw_scan_number(p, end, &kv->number);
    if (!n)
        return false;
    p += n;
    kv->has_total = false;
    const char *q = p;
    while (q < end && *q == ' ')
        q++;
    if (q < end && *q == '/') {
        q++;
        while (q < end && *q == ' ')
            q++;
        double total;
        size_t m = tw_scan_number(q, end, &total);
        if (m) {
            kv->has_total = true;
            kv->total = total;
            p = q + m;
        }
    }
    if (bracket) {
        while (p < end && *p == ' ')
            p++;
        if (p < end && (*p == ']' || *p == ')'))
            p++;
    }
    /* A unit sticks to the number ("0.61280s") or follows one blank
     * ("0.5 s", "4.0 samples/s") as long as it is not the next key. */
    kv->unit = NULL;
    kv->unit_len = 0;
    q = p;
    if (q < end && *q == ' ')
        q++;
    size_t u = 0;
    while (q + u < end && is_unit_char(q[u]) && u < 24)
        u++;
    if (u > 0 && (q == p || !(q + u < end && (q[u] == ':' || q[u] == '=' || q[u] == '_')))) {
        kv->unit = q;
        kv->unit_len = u;
        p = q + u;
    }
    kv->value_len = (size_t)(p - kv->value);
    return true;
}

/* The next ':' or '=' in [p, end), or end: sixteen bytes at a time where
 * SSE2 is there (every x86-64), a byte at a time elsewhere and at the tail. */
static const char *next_separator(const char *p, const char *end)
{
#ifdef __SSE2__
    const __m128i colon = _mm_set1_epi8(':'), equals = _mm_set1_epi8('=');
    while (end - p >= 16) {
        __m128i chunk = _mm_loadu_si128((const __m128i *)(const void *)p);
        int mask = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(chunk, colon), _mm_cmpeq_epi8(chunk, equals)));
        if (mask)
            return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
#endif
    while (p < end && !(char_class[(unsigned char)*p] & CLASS_SEPARATOR))
        p++;
    return p;
}

int tw_kv_scan(const char *s, size_t len, tw_kv_fn fn, void *arg)
{
    const char *end = s + len;
    int count = 0;
    const char *p = s;
    while (p < end) {
        const char *sep = next_separator(p, end);
        if (sep >= end)
            break;
        const char *kend = sep;
        if (*sep == ':' && kend > s && kend[-1] == ' ')
            kend--;
        if (kend > s && (kend[-1] == '"' || kend[-1] == '\''))
            kend--; /* JSON and Python dict keys */
        const char *kstart = kend;
        while (kstart > s && is_key_char(kstart[-1]))
            kstart--;
        /* Keys start with a letter; "paddle::x" and "a==b" are not pairs. */
        bool doubled = (sep + 1 < end && (sep[1] == ':' || sep[1] == '=')) ||
                       (sep > s && (sep[-1] == ':' || sep[-1] == '='));
        while (kstart < kend && !tw_is_alpha(*kstart))
            kstart++;
        /* "Top_1 (Non-reduced): 0.1" has no key we can name */
        bool unbalanced = kend > kstart && kend[-1] == ')' && !memchr(kstart, '(', (size_t)(kend - kstart));
        tw_kv kv;
        if (kstart < kend && !doubled && !unbalanced && scan_value(sep + 1, end, &kv)) {
            kv.key = kstart;
            kv.key_len = (size_t)(kend - kstart);
            kv.end = end;
            count++;
            if (!fn(arg, &kv))
                return count;
            p = kv.value + kv.value_len;
            if (p <= sep)
                p = sep + 1;
        } else {
            p = sep + 1;
        }
    }
    return count;
}

/* ---- the synonym table ------------------------------------------------ */

typedef enum field_id {
    FIELD_LOSS,
    FIELD_LR,
    FIELD_BATCH,
    FIELD_DATA,
    FIELD_IPS,
    FIELD_ETA,
    FIELD_MEM,
    FIELD_EPOCH,
    FIELD_STEP,
    FIELD_GLOBAL,
    FIELD_STEPS_PER_SEC,
} field_id;

typedef struct synonym {
    const char *key;      /* lower case, "(...)" suffixes stripped */
    size_t len;
    field_id field;
    bool strong;          /* overrides a weaker synonym already seen */
    double scale;         /* default unit: seconds, bytes */
} synonym;

#define MB (1024.0 * 1024.0)
#define GB (1024.0 * 1024.0 * 1024.0)

static const synonym synonyms[] = {
    {"loss", sizeof "loss" - 1, FIELD_LOSS, true, 1},
    {"total_loss", sizeof "total_loss" - 1, FIELD_LOSS, false, 1},
    {"train_loss", sizeof "train_loss" - 1, FIELD_LOSS, false, 1},
    {"train/loss", sizeof "train/loss" - 1, FIELD_LOSS, false, 1},
    {"lm loss", sizeof "lm loss" - 1, FIELD_LOSS, false, 1},
    {"lm_loss", sizeof "lm_loss" - 1, FIELD_LOSS, false, 1},
    {"batch_loss", sizeof "batch_loss" - 1, FIELD_LOSS, false, 1},
    {"train/crossentropyloss", sizeof "train/crossentropyloss" - 1, FIELD_LOSS, false, 1},
    {"avg_loss", sizeof "avg_loss" - 1, FIELD_LOSS, false, 1},
    {"lr", sizeof "lr" - 1, FIELD_LR, true, 1},
    {"learning_rate", sizeof "learning_rate" - 1, FIELD_LR, true, 1},
    {"learning rate", sizeof "learning rate" - 1, FIELD_LR, true, 1},
    {"train/lr", sizeof "train/lr" - 1, FIELD_LR, false, 1},
    {"optim/learning_rate_group0", sizeof "optim/learning_rate_group0" - 1, FIELD_LR, false, 1},
    {"batch_cost", sizeof "batch_cost" - 1, FIELD_BATCH, true, 1},
    {"avg_batch_cost", sizeof "avg_batch_cost" - 1, FIELD_BATCH, true, 1},
    {"batch_time", sizeof "batch_time" - 1, FIELD_BATCH, true, 1},
    {"step_time", sizeof "step_time" - 1, FIELD_BATCH, true, 1},
    {"iter_time", sizeof "iter_time" - 1, FIELD_BATCH, true, 1},
    {"time", sizeof "time" - 1, FIELD_BATCH, false, 1},
    {"interval_steps_per_second", sizeof "interval_steps_per_second" - 1, FIELD_STEPS_PER_SEC, false, 1},
    {"reader_cost", sizeof "reader_cost" - 1, FIELD_DATA, true, 1},
    {"avg_reader_cost", sizeof "avg_reader_cost" - 1, FIELD_DATA, true, 1},
    {"data_cost", sizeof "data_cost" - 1, FIELD_DATA, true, 1},
    {"data_time", sizeof "data_time" - 1, FIELD_DATA, true, 1},
    {"data_wait", sizeof "data_wait" - 1, FIELD_DATA, true, 1},
    {"dataloader_time", sizeof "dataloader_time" - 1, FIELD_DATA, true, 1},
    {"ips", sizeof "ips" - 1, FIELD_IPS, true, 1},
    {"avg_ips", sizeof "avg_ips" - 1, FIELD_IPS, false, 1},
    {"samples_per_second", sizeof "samples_per_second" - 1, FIELD_IPS, false, 1},
    {"interval_samples_per_second", sizeof "interval_samples_per_second" - 1, FIELD_IPS, false, 1},
    {"samples/sec", sizeof "samples/sec" - 1, FIELD_IPS, false, 1},
    {"throughput", sizeof "throughput" - 1, FIELD_IPS, false, 1},
    {"eta", sizeof "eta" - 1, FIELD_ETA, true, 1},
    {"eta_seconds", sizeof "eta_seconds" - 1, FIELD_ETA, true, 1},
    {"max_mem_reserved", sizeof "max_mem_reserved" - 1, FIELD_MEM, true, MB},
    {"max_mem_allocated", sizeof "max_mem_allocated" - 1, FIELD_MEM, false, MB},
    {"max_memory_reserved", sizeof "max_memory_reserved" - 1, FIELD_MEM, true, GB},
    {"max_memory_allocated", sizeof "max_memory_allocated" - 1, FIELD_MEM, false, GB},
    {"current_memory_reserved", sizeof "current_memory_reserved" - 1, FIELD_MEM, false, GB},
    {"current_memory_allocated", sizeof "current_memory_allocated" - 1, FIELD_MEM, false, GB},
    {"memory", sizeof "memory" - 1, FIELD_MEM, false, MB},
    {"max_mem", sizeof "max_mem" - 1, FIELD_MEM, false, MB},
    {"mem", sizeof "mem" - 1, FIELD_MEM, false, MB},
    {"gpu_mem", sizeof "gpu_mem" - 1, FIELD_MEM, false, GB},
    {"system/peak gpu memory (mb)", sizeof "system/peak gpu memory (mb)" - 1, FIELD_MEM, false, MB},
    {"epoch", sizeof "epoch" - 1, FIELD_EPOCH, true, 1},
    {"step", sizeof "step" - 1, FIELD_STEP, true, 1},
    {"iter", sizeof "iter" - 1, FIELD_STEP, true, 1},
    {"steps", sizeof "steps" - 1, FIELD_STEP, false, 1},
    {"global_step", sizeof "global_step" - 1, FIELD_GLOBAL, true, 1},
    {"iteration", sizeof "iteration" - 1, FIELD_GLOBAL, true, 1},
};

#define SYNONYM_COUNT (sizeof synonyms / sizeof synonyms[0])
#define SYNONYM_MAX_LEN 40
_Static_assert(SYNONYM_COUNT <= 64, "synonym sets are 64-bit masks");

static uint64_t synonym_by_length[SYNONYM_MAX_LEN];
static uint64_t synonym_by_first[256];
static pthread_once_t synonym_once = PTHREAD_ONCE_INIT;

static void build_synonym_index(void)
{
    for (size_t i = 0; i < SYNONYM_COUNT; i++) {
        if (synonyms[i].len < SYNONYM_MAX_LEN)
            synonym_by_length[synonyms[i].len] |= 1ull << i;
        synonym_by_first[(unsigned char)synonyms[i].key[0]] |= 1ull << i;
    }
}

static const synonym *find_synonym(const char *key, size_t len)
{
    /* Strip a "(Scheduler)" suffix: PaddleClas prints lr(PiecewiseDecay). */
    if (len > 2 && key[len - 1] == ')') {
        const char *open = memchr(key, '(', len);
        if (open && open > key && open[-1] != ' ')
            len = (size_t)(open - key);
    }
    if (len == 0 || len >= SYNONYM_MAX_LEN)
        return NULL;
    pthread_once(&synonym_once, build_synonym_index);
    /* candidates share the key's length and first letter */
    uint64_t candidates = synonym_by_length[len] & synonym_by_first[(unsigned char)lower(key[0])];
    while (candidates) {
        int i = __builtin_ctzll(candidates);
        candidates &= candidates - 1;
        /* the table is lower case: fold the key's letters only */
        const char *k = synonyms[i].key;
        size_t j = 1;
        while (j < len && lower(key[j]) == k[j])
            j++;
        if (j == len)
            return &synonyms[i];
    }
    return NULL;
}

static double unit_scale(const tw_kv *kv, field_id field, double dflt)
{
    if (!kv->unit)
        return dflt;
    const char *u = kv->unit;
    size_t n = kv->unit_len;
    if (field == FIELD_MEM) {
        switch (lower(u[0])) {
        case 'k':
            return 1024.0;
        case 'm':
            return MB;
        case 'g':
            return GB;
        case 'b':
            return 1;
        default:
            return dflt;
        }
    }
    if (n >= 2 && lower(u[0]) == 'm' && lower(u[1]) == 's')
        return 1e-3;
    if (n >= 2 && lower(u[0]) == 'u' && lower(u[1]) == 's')
        return 1e-6;
    if (n >= 3 && strncasecmp(u, "min", 3) == 0)
        return 60;
    return dflt;
}

static void set_double(tw_record *r, unsigned bit, double *field, double v, bool strong)
{
    if (strong || !(r->fields & bit)) {
        *field = v;
        r->fields |= bit;
    }
}

static bool key_is_loss_part(const char *key, size_t len)
{
    return tw_find_ci(key, len, "loss") != NULL;
}

/* A total ("[3/500]") as a count, -1 when it is none: converting a double
 * beyond int64_t is undefined behaviour. */
static int64_t count_or_unknown(double v)
{
    return v >= 0 && v < 1e15 ? (int64_t)v : -1;
}

bool tw_fields_apply(tw_record *r, const tw_kv *kv)
{
    const synonym *syn = find_synonym(kv->key, kv->key_len);
    if (!syn) {
        tw_record_set_metric(r, kv->key, kv->key_len, kv->number);
        return false;
    }
    double v = kv->number;
    switch (syn->field) {
    case FIELD_LOSS:
        set_double(r, TW_F_LOSS, &r->loss, v, syn->strong);
        if (!syn->strong && key_is_loss_part(kv->key, kv->key_len))
            tw_record_set_metric(r, kv->key, kv->key_len, v);
        break;
    case FIELD_LR:
        set_double(r, TW_F_LR, &r->lr, v, syn->strong);
        break;
    case FIELD_BATCH:
        set_double(r, TW_F_BATCH_TIME, &r->batch_time, v * unit_scale(kv, syn->field, 1), syn->strong);
        break;
    case FIELD_STEPS_PER_SEC:
        if (v > 0)
            set_double(r, TW_F_BATCH_TIME, &r->batch_time, 1.0 / v, false);
        break;
    case FIELD_DATA:
        set_double(r, TW_F_DATA_TIME, &r->data_time, v * unit_scale(kv, syn->field, 1), syn->strong);
        break;
    case FIELD_IPS:
        set_double(r, TW_F_SAMPLES_PER_SEC, &r->samples_per_sec, v, syn->strong);
        break;
    case FIELD_ETA: {
        double secs;
        if (tw_scan_duration(kv->value, kv->end, &secs))
            set_double(r, TW_F_ETA, &r->eta, secs, syn->strong);
        break;
    }
    case FIELD_MEM:
        set_double(r, TW_F_MEM, &r->mem_bytes, v * unit_scale(kv, syn->field, syn->scale), syn->strong);
        break;
    case FIELD_EPOCH:
        if (v >= 0 && v < 1e12) {
            r->epoch = (int64_t)v;
            if (kv->has_total)
                r->epoch_total = count_or_unknown(kv->total);
            if (v != floor(v))
                tw_record_set_metric(r, "epoch", 5, v);
        }
        break;
    case FIELD_STEP:
        if (v >= 0 && v < 1e15) {
            r->step = (int64_t)v;
            if (kv->has_total)
                r->step_total = count_or_unknown(kv->total);
        }
        break;
    case FIELD_GLOBAL:
        if (v >= 0 && v < 1e15) {
            r->global_step = (int64_t)v;
            if (kv->has_total)
                r->step_total = count_or_unknown(kv->total);
        }
        break;
    }
    return true;
}

static bool apply_cb(void *arg, const tw_kv *kv)
{
    tw_fields_apply(arg, kv);
    return true;
}

/* "Step 30: loss=2.94, time=0.53s": a heading counter before the pairs,
 * "Step N:" or "Iter N:" with no '=' or ':' of its own, which the pair
 * scanner passes over (a DeepSpeed script's "[Rank 0] Step 30: ..."). */
static void heading_counter(tw_record *r, const char *s, size_t len)
{
    const char *end = s + len, *p = s;
    while (p < end && tw_is_blank(*p))
        p++;
    size_t rest = (size_t)(end - p), word = 5; /* "Step " and "Iter " alike */
    if (rest < word || (strncasecmp(p, "step ", word) != 0 && strncasecmp(p, "iter ", word) != 0))
        return;
    long long v;
    size_t n = tw_scan_uint(p + word, end, &v);
    if (n && p + word + n < end && p[word + n] == ':' && (p + word + n + 1 == end || tw_is_blank(p[word + n + 1])))
        r->step = (int64_t)v;
}

int tw_fields_scan(tw_record *r, const char *s, size_t len)
{
    int n = tw_kv_scan(s, len, apply_cb, r);
    if (r->step < 0)
        heading_counter(r, s, len);
    return n;
}

bool tw_record_is_step_like(const tw_record *r)
{
    /* An epoch alone does not make a step: "Epoch 3 done, loss 0.2" is a
     * summary of steps already seen. */
    bool counter = r->step >= 0 || r->global_step >= 0;
    if (tw_has(r, TW_F_LOSS))
        return counter || tw_has(r, TW_F_LR) || tw_has(r, TW_F_BATCH_TIME);
    return counter && (tw_has(r, TW_F_BATCH_TIME) || tw_has(r, TW_F_LR));
}

const char *tw_find_ci(const char *s, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    if (n == 0 || len < n)
        return NULL;
    char first = lower(needle[0]);
    for (size_t i = 0; i + n <= len; i++) {
        if (lower(s[i]) != first)
            continue;
        size_t j = 1;
        while (j < n && lower(s[i + j]) == lower(needle[j]))
            j++;
        if (j == n)
            return s + i;
    }
    return NULL;
}

/* Candidates are where both the needle's first and last bytes are in place:
 * sixteen positions per step with SSE2, each checked in full with memcmp.
 * Log text rarely has both at the right distance, so most of a line is
 * passed over in a few instructions per sixteen bytes (glibc's memmem
 * looks at about every byte for short needles). */
const char *tw_find_n(const char *s, size_t len, const char *needle, size_t n)
{
    if (n == 0 || len < n)
        return NULL;
    if (n == 1)
        return memchr(s, needle[0], len);
    size_t i = 0;
#ifdef __SSE2__
    const __m128i first = _mm_set1_epi8(needle[0]), last = _mm_set1_epi8(needle[n - 1]);
    for (; i + n - 1 + 16 <= len; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + i + n - 1));
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(a, first), _mm_cmpeq_epi8(b, last)));
        while (mask) {
            unsigned bit = (unsigned)__builtin_ctz(mask);
            if (memcmp(s + i + bit + 1, needle + 1, n - 2) == 0)
                return s + i + bit;
            mask &= mask - 1;
        }
    }
#endif
    for (; i + n <= len; i++) {
        if (s[i] == needle[0] && s[i + n - 1] == needle[n - 1] && memcmp(s + i + 1, needle + 1, n - 2) == 0)
            return s + i;
    }
    return NULL;
}
