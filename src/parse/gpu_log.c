/*
 * gpu_log.c: GPU telemetry logs (nvidia-smi CSV, dmon, pmon, -q) to samples.
 *
 * Each dialect is a row in `dialects[]`: header() recognises the line that
 * names the columns (or opens a -q snapshot) and sets the reader up; row()
 * reads a data line of the dialect set up last. Columns are mapped to roles
 * once per header, so a row costs one split and a few number conversions.
 * Values nvidia-smi cannot give ("[N/A]", "-") are left out of the sample,
 * not read as zero: a zero utilisation is evidence, a missing one is not.
 */
#include "gpu_log.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scan.h"
#include "trainwatch/error.h"

#define COLUMNS_MAX 512 /* nvidia-smi --query-gpu with every field has about 250 */
#define MIB         1048576.0

typedef enum role {
    ROLE_NONE,
    ROLE_GPU,
    ROLE_TIME,  /* a whole timestamp: 2024/03/11 16:02:37.871 */
    ROLE_DATE,  /* dmon -o D: 20251205 */
    ROLE_CLOCK, /* dmon -o T: 10:58:45 */
    ROLE_UTIL,
    ROLE_MEM_USED,
    ROLE_MEM_TOTAL,
} role;

typedef struct dialect dialect;

struct tw_gpu_reader {
    const dialect *current;
    uint8_t roles[COLUMNS_MAX];
    int columns;
    /* -q snapshots */
    double q_time;
    int q_gpu;
    enum { Q_OTHER, Q_FB, Q_UTIL } q_section;
    double q_used, q_total;
    uint64_t lines, samples;
};

struct dialect {
    const char *name;
    bool (*header)(tw_gpu_reader *r, const char *s, size_t len);
    /* Fills *out from a data line; false when the line is not one. */
    bool (*row)(tw_gpu_reader *r, const char *s, size_t len, tw_gpu_sample *out);
};

enum { DIALECT_CSV = 3, DIALECT_COUNT = 4 }; /* rows of dialects[] */
static const dialect dialects[DIALECT_COUNT];

/* ---- fields ------------------------------------------------------------ */

static void trim(const char **s, size_t *len)
{
    while (*len && tw_is_blank(**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len && tw_is_blank((*s)[*len - 1]))
        (*len)--;
}

static bool same_word(const char *s, size_t len, const char *word)
{
    return strlen(word) == len && strncasecmp(s, word, len) == 0;
}

/* A number with an optional unit: "31 %", "9337 MiB", "9337"; NAN for
 * "[N/A]", "-" or anything else. Memory without a unit is MiB (nounits). */
static double field_number(const char *s, size_t len, bool memory)
{
    char buf[64];
    trim(&s, &len);
    if (len == 0 || len >= sizeof buf)
        return NAN;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (end == buf || errno || !isfinite(v) || v < 0)
        return NAN;
    while (tw_is_blank(*end))
        end++;
    if (!memory)
        return (*end == '\0' || strcmp(end, "%") == 0) ? v : NAN;
    if (*end == '\0' || strcmp(end, "MiB") == 0 || strcmp(end, "MB") == 0)
        return v * MIB;
    if (strcmp(end, "GiB") == 0 || strcmp(end, "GB") == 0)
        return v * 1024 * MIB;
    if (strcmp(end, "KiB") == 0 || strcmp(end, "KB") == 0)
        return v * 1024;
    return NAN;
}

static int field_int(const char *s, size_t len)
{
    long long v;
    trim(&s, &len);
    if (len == 0 || tw_scan_uint(s, s + len, &v) != len || v > 1000000)
        return -1;
    return (int)v;
}

/* Splits s at sep (',' or, with sep 0, runs of blanks) into at most max
 * fields; returns how many, or max + 1 when there are more. */
static int split(const char *s, size_t len, char sep, const char **starts, size_t *lens, int max)
{
    const char *p = s, *end = s + len;
    int n = 0;
    if (sep == 0) {
        for (;;) {
            while (p < end && tw_is_blank(*p))
                p++;
            if (p == end)
                return n;
            const char *q = p;
            while (q < end && !tw_is_blank(*q))
                q++;
            if (n == max)
                return max + 1;
            starts[n] = p;
            lens[n++] = (size_t)(q - p);
            p = q;
        }
    }
    for (;;) {
        const char *q = memchr(p, sep, (size_t)(end - p));
        if (n == max)
            return max + 1;
        starts[n] = p;
        lens[n++] = (size_t)((q ? q : end) - p);
        if (!q)
            return n;
        p = q + 1;
    }
}

/* Applies the column roles to the fields of a row. */
static void fill(const tw_gpu_reader *r, const char **starts, const size_t *lens, tw_gpu_sample *out)
{
    double date = NAN, clock = NAN;
    for (int i = 0; i < r->columns; i++) {
        const char *s = starts[i];
        size_t len = lens[i];
        switch ((role)r->roles[i]) {
        case ROLE_GPU:
            out->gpu = field_int(s, len);
            break;
        case ROLE_TIME:
            trim(&s, &len);
            if (!tw_scan_timestamp(s, len, &out->time))
                out->time = NAN;
            break;
        case ROLE_DATE: {
            long long v = 0;
            trim(&s, &len);
            if (len == 8 && tw_scan_uint(s, s + len, &v) == 8 && v >= 19700101 && v <= 29991231)
                date = tw_civil_seconds((int)(v / 10000), (int)(v / 100 % 100), (int)(v % 100), 0, 0, 0);
            break;
        }
        case ROLE_CLOCK: {
            int h, m, sec;
            char tail;
            char buf[16];
            trim(&s, &len);
            if (len < sizeof buf) {
                memcpy(buf, s, len);
                buf[len] = '\0';
                if (sscanf(buf, "%2d:%2d:%2d%c", &h, &m, &sec, &tail) == 3 && h < 24 && m < 60 && sec < 61)
                    clock = h * 3600.0 + m * 60.0 + sec;
            }
            break;
        }
        case ROLE_UTIL:
            out->util = field_number(s, len, false);
            if (out->util > 100)
                out->util = NAN;
            break;
        case ROLE_MEM_USED:
            out->mem_used = field_number(s, len, true);
            break;
        case ROLE_MEM_TOTAL:
            out->mem_total = field_number(s, len, true);
            break;
        case ROLE_NONE:
            break;
        }
    }
    if (!isnan(date) && !isnan(clock))
        out->time = date + clock;
}

/* ---- CSV: paddle's default.gpu.log and nvidia-smi --format=csv ---------- */

/* "utilization.gpu [%]" and paddle's "utilization_gpu" name the same thing. */
static role csv_role(const char *s, size_t len)
{
    trim(&s, &len);
    const char *bracket = memchr(s, '[', len);
    if (bracket) {
        len = (size_t)(bracket - s);
        trim(&s, &len);
    }
    char name[32];
    if (len >= sizeof name)
        return ROLE_NONE;
    for (size_t i = 0; i < len; i++)
        name[i] = s[i] == '_' ? '.' : s[i];
    name[len] = '\0';
    static const struct {
        const char *name;
        role role;
    } names[] = {{"index", ROLE_GPU},
                 {"timestamp", ROLE_TIME},
                 {"utilization.gpu", ROLE_UTIL},
                 {"memory.used", ROLE_MEM_USED},
                 {"memory.total", ROLE_MEM_TOTAL}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcasecmp(name, names[i].name) == 0)
            return names[i].role;
    }
    return ROLE_NONE;
}

/* A header field is a query name, "memory.used [MiB]"; a row field never is
 * all of them at once (it holds numbers, or names with blanks). */
static bool csv_name(const char *s, size_t len)
{
    trim(&s, &len);
    if (len == 0 || !tw_is_alpha(s[0]))
        return false;
    size_t i = 0;
    while (i < len && (tw_is_alpha(s[i]) || tw_is_digit(s[i]) || s[i] == '_' || s[i] == '.'))
        i++;
    if (i == len)
        return true;
    return s[i] == ' ' && i + 1 < len && s[i + 1] == '[' && s[len - 1] == ']';
}

static bool csv_header(tw_gpu_reader *r, const char *s, size_t len)
{
    if (!memchr(s, ',', len))
        return false;
    const char *starts[COLUMNS_MAX];
    size_t lens[COLUMNS_MAX];
    int n = split(s, len, ',', starts, lens, COLUMNS_MAX);
    if (n > COLUMNS_MAX)
        return false;
    for (int i = 0; i < n; i++) {
        if (!csv_name(starts[i], lens[i]))
            return false;
    }
    /* Any header takes over, even one without a column we read (paddle's
     * "index,uuid,driver_version,..."), so its rows are not misread. */
    r->columns = n;
    for (int i = 0; i < n; i++)
        r->roles[i] = (uint8_t)csv_role(starts[i], lens[i]);
    return true;
}

/* --gpu-columns: the roles of a headerless CSV's columns come from the
 * --query-gpu list the user gave nvidia-smi, as they would from its header. */
int tw_gpu_reader_set_columns(tw_gpu_reader *r, const char *list)
{
    const char *starts[COLUMNS_MAX];
    size_t lens[COLUMNS_MAX];
    int n = split(list, strlen(list), ',', starts, lens, COLUMNS_MAX);
    if (n > COLUMNS_MAX)
        return TW_EINVAL;
    bool reads = false;
    for (int i = 0; i < n; i++) {
        if (!csv_name(starts[i], lens[i]))
            return TW_EINVAL;
        role ro = csv_role(starts[i], lens[i]);
        reads |= ro == ROLE_UTIL || ro == ROLE_MEM_USED;
        r->roles[i] = (uint8_t)ro;
    }
    if (!reads)
        return TW_EINVAL;
    r->columns = n;
    r->current = &dialects[DIALECT_CSV];
    return TW_OK;
}

/* A field of nvidia-smi's CSV rows that only it writes: a number with its
 * unit ("31 %", "9337 MiB", "70.53 W") or a timestamp. */
static bool typed_field(const char *s, size_t len)
{
    trim(&s, &len);
    double v;
    if (len >= 19 && tw_is_digit(s[0]) && tw_scan_timestamp(s, len, &v))
        return true;
    size_t n = tw_scan_number(s, s + len, &v);
    if (n == 0 || n == len || s[n] != ' ')
        return false;
    static const char *const units[] = {"%", "MiB", "GiB", "KiB", "W", "MHz", "C", NULL};
    for (const char *const *u = units; *u; u++) {
        if (same_word(s + n + 1, len - n - 1, *u))
            return true;
    }
    return false;
}

/* A field nvidia-smi could have written: a timestamp, a PCI bus id
 * (00000000:01:00.0), or anything without a ':' or '=' (numbers, units,
 * names, [N/A]). A log line split at its commas has "key: value" parts. */
static bool plain_field(const char *s, size_t len)
{
    trim(&s, &len);
    double v;
    if (len >= 19 && tw_is_digit(s[0]) && tw_scan_timestamp(s, len, &v))
        return true;
    bool bus_id = len > 0;
    for (size_t i = 0; i < len && bus_id; i++)
        bus_id = isxdigit((unsigned char)s[i]) || s[i] == ':' || s[i] == '.';
    return bus_id || (!memchr(s, ':', len) && !memchr(s, '=', len));
}

/* The first lines all split at ", " (nvidia-smi's separator) into the same
 * number of fields; *typed: some of them hold a unit or a timestamp. When
 * `r` has columns, the utilisation and memory ones must hold numbers. */
static bool headerless(const char *head, size_t len, const tw_gpu_reader *r, int *columns, bool *typed)
{
    const char *p = head, *end = head + len;
    int lines = 0, fields = 0;
    *typed = false;
    while (p < end && lines < 16) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break;
        size_t n = (size_t)(nl - p);
        if (n && p[n - 1] == '\r')
            n--;
        const char *starts[COLUMNS_MAX];
        size_t lens[COLUMNS_MAX];
        int k = split(p, n, ',', starts, lens, COLUMNS_MAX);
        if (k < 2 || k > COLUMNS_MAX || (fields && k != fields) || !memmem(p, n, ", ", 2))
            return false;
        for (int i = 0; i < k; i++) {
            if (!plain_field(starts[i], lens[i]))
                return false;
            *typed = *typed || typed_field(starts[i], lens[i]);
            bool numeric = r && i < r->columns && (r->roles[i] == ROLE_UTIL || r->roles[i] == ROLE_MEM_USED);
            if (numeric && isnan(field_number(starts[i], lens[i], r->roles[i] == ROLE_MEM_USED)))
                return false;
        }
        fields = k;
        lines++;
        p = nl + 1;
    }
    *columns = fields;
    return lines > 0;
}

bool tw_gpu_log_headerless(const char *head, size_t len)
{
    int columns;
    bool typed;
    return headerless(head, len, NULL, &columns, &typed) && typed;
}

bool tw_gpu_log_headerless_fits(const char *head, size_t len, const char *list)
{
    int columns = 0;
    bool typed;
    tw_gpu_reader probe = {.q_gpu = -1};
    return tw_gpu_reader_set_columns(&probe, list) == TW_OK && headerless(head, len, &probe, &columns, &typed) &&
           probe.columns == columns;
}

static bool columns_row(tw_gpu_reader *r, const char *s, size_t len, char sep, tw_gpu_sample *out)
{
    const char *starts[COLUMNS_MAX];
    size_t lens[COLUMNS_MAX];
    if (r->columns == 0 || split(s, len, sep, starts, lens, COLUMNS_MAX) != r->columns)
        return false;
    fill(r, starts, lens, out);
    return true;
}

static bool csv_row(tw_gpu_reader *r, const char *s, size_t len, tw_gpu_sample *out)
{
    return columns_row(r, s, len, ',', out);
}

/* ---- dmon and pmon: "# gpu pwr gtemp ... sm mem ..." -------------------- */

static role monitor_role(const char *s, size_t len)
{
    if (same_word(s, len, "gpu"))
        return ROLE_GPU;
    if (same_word(s, len, "sm"))
        return ROLE_UTIL;
    if (same_word(s, len, "fb"))
        return ROLE_MEM_USED;
    if (same_word(s, len, "Date"))
        return ROLE_DATE;
    if (same_word(s, len, "Time"))
        return ROLE_CLOCK;
    return ROLE_NONE;
}

/* The header names a "gpu" and an "sm" column; pmon's also a "pid". */
static int monitor_header(tw_gpu_reader *r, const char *s, size_t len)
{
    if (len < 2 || s[0] != '#')
        return 0;
    const char *starts[COLUMNS_MAX];
    size_t lens[COLUMNS_MAX];
    int n = split(s + 1, len - 1, 0, starts, lens, 64);
    if (n > 64)
        return 0;
    bool gpu = false, sm = false, pid = false;
    for (int i = 0; i < n; i++) {
        gpu |= same_word(starts[i], lens[i], "gpu");
        sm |= same_word(starts[i], lens[i], "sm");
        pid |= same_word(starts[i], lens[i], "pid");
    }
    if (!gpu || !sm)
        return 0;
    r->columns = n;
    for (int i = 0; i < n; i++)
        r->roles[i] = (uint8_t)monitor_role(starts[i], lens[i]);
    return pid ? 2 : 1;
}

static bool dmon_header(tw_gpu_reader *r, const char *s, size_t len)
{
    tw_gpu_reader probe = *r;
    if (monitor_header(&probe, s, len) != 1)
        return false;
    *r = probe;
    return true;
}

static bool pmon_header(tw_gpu_reader *r, const char *s, size_t len)
{
    tw_gpu_reader probe = *r;
    if (monitor_header(&probe, s, len) != 2)
        return false;
    *r = probe;
    return true;
}

static bool monitor_row(tw_gpu_reader *r, const char *s, size_t len, tw_gpu_sample *out)
{
    if (len && s[0] == '#')
        return false;
    return columns_row(r, s, len, 0, out) && out->gpu >= 0;
}

/* ---- nvidia-smi -q ------------------------------------------------------ */

static double q_timestamp(const char *s, size_t len)
{
    /* "Tue Jul 14 08:12:38 2026" */
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    char buf[48], wday[4], mon[4];
    int day, h, m, sec, year;
    trim(&s, &len);
    if (len >= sizeof buf)
        return NAN;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (sscanf(buf, "%3s %3s %d %d:%d:%d %d", wday, mon, &day, &h, &m, &sec, &year) != 7)
        return NAN;
    const char *at = strstr(months, mon);
    if (!at || (at - months) % 3 || day < 1 || day > 31 || h > 23 || m > 59 || sec > 60 || year < 1970 || year > 2999)
        return NAN;
    return tw_civil_seconds(year, (int)(at - months) / 3 + 1, day, h, m, sec);
}

static bool query_header(tw_gpu_reader *r, const char *s, size_t len)
{
    if (!tw_find(s, len, "NVSMI LOG"))
        return false;
    r->columns = 0;
    r->q_time = NAN;
    r->q_gpu = -1;
    r->q_section = Q_OTHER;
    return true;
}

/* "    Key    : value" with the key's indent; false for other lines. */
static bool q_pair(const char *s, size_t len, size_t *indent, const char **key, size_t *key_len, const char **value,
                   size_t *value_len)
{
    const char *colon = memchr(s, ':', len);
    size_t i = 0;
    while (i < len && s[i] == ' ')
        i++;
    *indent = i;
    if (!colon)
        return false;
    *key = s + i;
    *key_len = (size_t)(colon - s) - i;
    trim(key, key_len);
    *value = colon + 1;
    *value_len = len - (size_t)(colon + 1 - s);
    return true;
}

static bool query_row(tw_gpu_reader *r, const char *s, size_t len, tw_gpu_sample *out)
{
    size_t indent, key_len, value_len;
    const char *key, *value;
    if (tw_starts_with(s, len, "GPU ")) { /* "GPU 00000000:18:00.0" opens the next GPU */
        r->q_gpu++;
        r->q_used = r->q_total = NAN;
        r->q_section = Q_OTHER;
        return false;
    }
    if (!q_pair(s, len, &indent, &key, &key_len, &value, &value_len)) {
        if (indent == 4) {
            size_t n = len - indent;
            const char *t = s + indent;
            trim(&t, &n);
            r->q_section = same_word(t, n, "FB Memory Usage") ? Q_FB
                           : same_word(t, n, "Utilization")   ? Q_UTIL
                                                              : Q_OTHER;
        }
        return false;
    }
    if (indent == 0 && same_word(key, key_len, "Timestamp")) {
        r->q_time = q_timestamp(value, value_len);
        return false;
    }
    if (indent <= 4)
        r->q_section = Q_OTHER;
    if (r->q_gpu < 0)
        return false;
    if (r->q_section == Q_FB && same_word(key, key_len, "Total"))
        r->q_total = field_number(value, value_len, true);
    else if (r->q_section == Q_FB && same_word(key, key_len, "Used"))
        r->q_used = field_number(value, value_len, true);
    else if (r->q_section == Q_UTIL && same_word(key, key_len, "Gpu")) {
        /* The utilisation comes after the memory in every -q: one sample per GPU. */
        out->gpu = r->q_gpu;
        out->time = r->q_time;
        out->util = field_number(value, value_len, false);
        out->mem_used = r->q_used;
        out->mem_total = r->q_total;
        return true;
    }
    return false;
}

/* ---- the table ---------------------------------------------------------- */

static const dialect dialects[DIALECT_COUNT] = {
    {"query", query_header, query_row},
    {"pmon", pmon_header, monitor_row},
    {"dmon", dmon_header, monitor_row},
    {"csv", csv_header, csv_row},
};

int tw_gpu_reader_new(tw_gpu_reader **out)
{
    tw_gpu_reader *r = calloc(1, sizeof *r);
    if (!r)
        return TW_ENOMEM;
    r->q_time = r->q_used = r->q_total = NAN;
    r->q_gpu = -1;
    *out = r;
    return TW_OK;
}

void tw_gpu_reader_free(tw_gpu_reader *r)
{
    free(r);
}

uint64_t tw_gpu_reader_lines(const tw_gpu_reader *r)
{
    return r->lines;
}
uint64_t tw_gpu_reader_samples(const tw_gpu_reader *r)
{
    return r->samples;
}
const char *tw_gpu_reader_dialect(const tw_gpu_reader *r)
{
    return r->current ? r->current->name : NULL;
}

void tw_gpu_reader_line(tw_gpu_reader *r, const char *text, size_t len, tw_gpu_sample_fn fn, void *arg)
{
    r->lines++;
    if (len && text[len - 1] == '\r')
        len--;
    for (size_t i = 0; i < sizeof dialects / sizeof dialects[0]; i++) {
        if (dialects[i].header(r, text, len)) {
            r->current = &dialects[i];
            return;
        }
    }
    if (!r->current)
        return;
    tw_gpu_sample s = {.gpu = -1, .time = NAN, .util = NAN, .mem_used = NAN, .mem_total = NAN, .line = r->lines};
    if (r->current->row(r, text, len, &s) && (!isnan(s.util) || !isnan(s.mem_used))) {
        r->samples++;
        fn(arg, &s);
    }
}

/* A CSV header is only telemetry when it names a column we read: a metrics
 * CSV ("epoch,step,loss") is a training log. Paddle's first header names
 * none, but its second, a few lines on, does. */
static bool reads_something(const tw_gpu_reader *r, const dialect *d)
{
    if (d->header != csv_header)
        return true;
    for (int i = 0; i < r->columns; i++) {
        if (r->roles[i] == ROLE_UTIL || r->roles[i] == ROLE_MEM_USED)
            return true;
    }
    return false;
}

bool tw_gpu_log_detect(const char *head, size_t len)
{
    tw_gpu_reader probe = {.q_gpu = -1};
    const char *p = head, *end = head + len;
    for (int lines = 0; p < end && lines < 16; lines++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break; /* a cut line decides nothing */
        size_t n = (size_t)(nl - p);
        if (n && p[n - 1] == '\r')
            n--;
        for (size_t i = 0; i < sizeof dialects / sizeof dialects[0]; i++) {
            if (dialects[i].header(&probe, p, n) && reads_something(&probe, &dialects[i]))
                return true;
        }
        p = nl + 1;
    }
    return false;
}

int tw_gpu_log_read(const char *path, const char *columns, tw_gpu_sample_fn fn, void *arg, uint64_t *lines,
                    uint64_t *samples)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return tw_status_from_errno(errno);
    tw_gpu_reader *r;
    if (tw_gpu_reader_new(&r) != TW_OK) {
        fclose(f);
        return TW_ENOMEM;
    }
    if (columns && tw_gpu_reader_set_columns(r, columns) != TW_OK) {
        tw_gpu_reader_free(r);
        fclose(f);
        return TW_EINVAL;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        size_t len = (size_t)n;
        if (line[len - 1] == '\n')
            len--;
        tw_gpu_reader_line(r, line, len, fn, arg);
    }
    int rc = ferror(f) ? TW_EIO : TW_OK;
    *lines = r->lines;
    *samples = r->samples;
    free(line);
    tw_gpu_reader_free(r);
    fclose(f);
    return rc;
}
