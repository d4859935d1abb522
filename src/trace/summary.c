/*
 * summary.c: the tables paddle.profiler prints (prof.summary(), and the
 * timer_only "Perf Summary"), read back so that a user who kept only the
 * printed text still gets a verdict. What is read: each Perf Summary's
 * "Reader Ratio: 53.514%" and its ips row; from the Model or Overview
 * Summary the CPU totals of ProfileStep and Dataloader; and the tables
 * themselves (Device, Overview, Model, Distribution, Operator, Kernel
 * Summary) into tw_trace_summary and the rank's top tables. A table starts
 * at its dashed title line and ends at a blank line or its Note; its rows
 * are split into columns at runs of two or more spaces, so prose around
 * the tables (as in the docs the corpus excerpts come from) is ignored.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

bool tw_trace_summary_detect(const char *head, size_t len)
{
    size_t i = 0;
    while (i < len && isspace((unsigned char)head[i]))
        i++;
    if (i < len && (head[i] == '{' || head[i] == '[' || head[i] == 0x1f))
        return false;
    return memmem(head, len, "Summary", 7) || memmem(head, len, "Reader Ratio", 12);
}

/* "  Dataloader     11      141.49 / 12.86 ..." -> 141.49 (name, calls, total). */
static bool row_total(const char *line, const char *name, double *out)
{
    while (*line == ' ' || *line == '\t')
        line++;
    size_t n = strlen(name);
    if (strncmp(line, name, n) != 0 || (line[n] != ' ' && line[n] != '\t'))
        return false;
    char *end;
    const char *p = line + n;
    strtol(p, &end, 10); /* calls */
    if (end == p)
        return false;
    double v = strtod(end, &end);
    if (end == p)
        return false;
    *out = v;
    return true;
}

/* ---- the tables ------------------------------------------------------ */

typedef enum table { T_NONE, T_DEVICE, T_OVERVIEW, T_MODEL, T_DISTRIBUTION, T_OPERATOR, T_KERNEL, T_OTHER } table;

typedef struct table_state {
    table t;
    double scale; /* the table's time unit in µs */
    int base;     /* indentation of its first row, -1 before it */
    bool gpu;     /* Overview: past the "Calls GPU Time" header */
} table_state;

static table table_title(const char *line)
{
    static const struct {
        const char *title;
        table t;
    } titles[] = {
        {"Device Summary", T_DEVICE},
        {"Overview Summary", T_OVERVIEW},
        {"Model Summary", T_MODEL},
        {"Distribution Summary", T_DISTRIBUTION},
        {"Distributed Summary", T_DISTRIBUTION},
        {"Operator Summary", T_OPERATOR},
        {"Kernel Summary", T_KERNEL},
    };
    const char *p = line;
    while (*p == ' ')
        p++;
    if ((*p != '-' && *p != '=') || !strstr(p, "Summary"))
        return T_NONE;
    for (size_t i = 0; i < sizeof titles / sizeof titles[0]; i++) {
        if (strstr(p, titles[i].title))
            return titles[i].t;
    }
    return T_OTHER; /* Memory Manipulation, UserDefined, Memory Summary: not read */
}

/* Splits at runs of two or more spaces; returns the column count. */
static int columns(char *line, char **col, int max)
{
    int n = 0;
    char *p = line;
    while (*p == ' ')
        p++;
    while (*p && n < max) {
        col[n++] = p;
        char *gap = strstr(p, "  ");
        if (!gap) {
            p += strlen(p);
            break;
        }
        *gap = '\0';
        p = gap + 2;
        while (*p == ' ')
            p++;
    }
    /* a trailing single space is not part of a value */
    for (int i = 0; i < n; i++) {
        size_t k = strlen(col[i]);
        while (k > 0 && (col[i][k - 1] == ' ' || col[i][k - 1] == '\r'))
            col[i][--k] = '\0';
    }
    return n;
}

static double value(const char *s)
{
    while (*s == ' ')
        s++;
    if (*s == '-' && (s[1] == '\0' || s[1] == ' '))
        return NAN;
    char *end;
    double v = strtod(s, &end);
    return end == s ? NAN : v;
}

/* "4945.15 / 618.14 / 839.15 / 386.34 / 100.00" into total, avg, max, min (µs) and ratio (a share). */
static bool group(const char *s, double scale, double *total, double *avg, double *max, double *min, double *ratio)
{
    double *out[5] = {total, avg, max, min, ratio};
    for (int i = 0; i < 5; i++) {
        *out[i] = value(s);
        if (i < 4)
            *out[i] *= scale;
        else
            *out[i] /= 100;
        const char *slash = strchr(s, '/');
        if (!slash)
            return i == 4;
        s = slash + 1;
    }
    return false;
}

static void row_init(tw_trace_summary_row *row, const char *name, int depth)
{
    memset(row, 0, sizeof *row);
    snprintf(row->name, sizeof row->name, "%s", name);
    row->depth = depth;
    row->calls = -1;
    row->cpu_total = row->cpu_avg = row->cpu_max = row->cpu_min = row->cpu_ratio = NAN;
    row->gpu_total = row->gpu_avg = row->gpu_max = row->gpu_min = row->gpu_ratio = NAN;
}

static long long calls(const char *s)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    return end == s ? -1 : v;
}

/* Keeps the TW_TRACE_TOP rows with the largest totals, largest first. */
static void top_add(tw_trace_stat *top, int *n, const char *name, long long count, double total, double max, double min)
{
    if (!(total == total))
        return;
    int i = *n < TW_TRACE_TOP ? (*n)++ : TW_TRACE_TOP;
    if (i == TW_TRACE_TOP && !(total > top[TW_TRACE_TOP - 1].total))
        return;
    if (i == TW_TRACE_TOP)
        i--;
    while (i > 0 && top[i - 1].total < total) {
        top[i] = top[i - 1];
        i--;
    }
    tw_trace_stat *s = &top[i];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->count = count > 0 ? (uint64_t)count : 0;
    s->total = total;
    s->self = NAN;
    s->max = max;
    s->min = min;
}

static void table_row(tw_trace_rank *r, table_state *ts, char *line)
{
    int indent = 0;
    while (line[indent] == ' ')
        indent++;
    if (ts->base < 0)
        ts->base = indent;
    int depth = indent > ts->base ? (indent - ts->base) / 2 : 0;
    char *col[6];
    int n = columns(line, col, 6);
    tw_trace_summary *sm = &r->summary;
    tw_trace_summary_row row;
    if (n < 2)
        return;
    row_init(&row, col[0], depth);
    switch (ts->t) {
    case T_DEVICE:
        if (sm->device_count < 8 && value(col[1]) == value(col[1])) {
            row.cpu_ratio = value(col[1]) / 100;
            sm->devices[sm->device_count++] = row;
        }
        break;
    case T_OVERVIEW:
        if (n >= 4 && sm->overview_count < TW_SUMMARY_ROWS) {
            row.calls = calls(col[1]);
            *(ts->gpu ? &row.gpu_total : &row.cpu_total) = value(col[2]) * ts->scale;
            *(ts->gpu ? &row.gpu_ratio : &row.cpu_ratio) = value(col[3]) / 100;
            sm->overview[sm->overview_count++] = row;
        }
        break;
    case T_MODEL:
    case T_OPERATOR:
        if (n < 4)
            break;
        row.calls = calls(col[1]);
        group(col[2], ts->scale, &row.cpu_total, &row.cpu_avg, &row.cpu_max, &row.cpu_min, &row.cpu_ratio);
        group(col[3], ts->scale, &row.gpu_total, &row.gpu_avg, &row.gpu_max, &row.gpu_min, &row.gpu_ratio);
        if (ts->t == T_MODEL && sm->model_count < TW_SUMMARY_ROWS)
            sm->model[sm->model_count++] = row;
        if (ts->t == T_OPERATOR && depth == 0) {
            sm->operators++;
            top_add(r->top_ops, &r->top_op_count, row.name, row.calls, row.cpu_total, row.cpu_max, row.cpu_min);
        }
        break;
    case T_KERNEL:
        if (n < 3)
            break;
        row.calls = calls(col[1]);
        group(col[2], ts->scale, &row.gpu_total, &row.gpu_avg, &row.gpu_max, &row.gpu_min, &row.gpu_ratio);
        sm->kernels++;
        top_add(r->top_kernels, &r->top_kernel_count, row.name, row.calls, row.gpu_total, row.gpu_max, row.gpu_min);
        break;
    case T_DISTRIBUTION: {
        double v = value(col[1]) * ts->scale;
        if (strcmp(col[0], "ProfileStep") == 0)
            sm->step = v;
        else if (strcmp(col[0], "Communication") == 0)
            sm->communication = v;
        else if (strcmp(col[0], "Computation") == 0)
            sm->computation = v;
        else if (strcmp(col[0], "Overlap") == 0)
            sm->overlap = v;
        break;
    }
    default:
        break;
    }
}

static double unit_scale(const char *u)
{
    while (*u == ' ')
        u++;
    if (strncmp(u, "ms", 2) == 0)
        return 1e3;
    if (strncmp(u, "us", 2) == 0)
        return 1;
    if (strncmp(u, "ns", 2) == 0)
        return 1e-3;
    if (*u == 's')
        return 1e6;
    return 1e3; /* paddle's default */
}

/* Feeds one line to the table being read; true when it was part of one. */
static bool table_line(tw_trace_rank *r, table_state *ts, char *line)
{
    table t = table_title(line);
    if (t != T_NONE) {
        *ts = (table_state){.t = t, .scale = 1e3, .base = -1};
        return true;
    }
    if (ts->t == T_NONE)
        return false;
    const char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '\0' || *p == '\r' || strncmp(p, "```", 3) == 0 || strncmp(p, "Note:", 5) == 0) {
        ts->t = T_NONE;
        return false;
    }
    if (strncmp(p, "Time unit:", 10) == 0) {
        ts->scale = unit_scale(p + 10);
        return true;
    }
    if (*p == '-' || *p == '=' || *p == '|' || strncmp(p, "Name ", 5) == 0 || strncmp(p, "Event Type", 10) == 0 ||
        strncmp(p, "Device ", 7) == 0)
        return true;
    if (strncmp(p, "Calls", 5) == 0) { /* Overview's second part: device times */
        ts->gpu = strstr(p, "GPU") != NULL;
        return true;
    }
    if (ts->t != T_OTHER)
        table_row(r, ts, line);
    return true;
}

bool tw_trace_summary_read(tw_trace_rank *r, const char *text, size_t len)
{
    table_state ts = {.t = T_NONE};
    tw_trace_summary *sm = &r->summary;
    sm->step = sm->communication = sm->computation = sm->overlap = NAN;
    char line[1024];
    size_t pos = 0;
    bool found = false, in_perf = false;
    double step = NAN, data = NAN;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        size_t k = n < sizeof line - 1 ? n : sizeof line - 1;
        memcpy(line, text + pos, k);
        line[k] = '\0';
        pos += n + (nl != NULL);
        if (strstr(line, "Perf Summary")) {
            in_perf = true;
            ts.t = T_NONE;
            continue;
        }
        double tv;
        if (isnan(step) && row_total(line, "ProfileStep", &tv))
            step = tv, found = true;
        else if (isnan(data) && row_total(line, "Dataloader", &tv))
            data = tv;
        if (table_line(r, &ts, line)) { /* splits line */
            found |= ts.t != T_NONE && ts.t != T_OTHER;
            continue;
        }
        const char *rr = strstr(line, "Reader Ratio:");
        if (rr) {
            double v = strtod(rr + 13, NULL) / 100;
            if (r->summary_blocks < 8)
                r->block_ratios[r->summary_blocks++] = v;
            if (isnan(r->reader_ratio))
                r->reader_ratio = v;
            found = true;
            continue;
        }
        const char *ips = strstr(line, "|       ips");
        if (!ips)
            ips = in_perf ? strstr(line, " ips ") : NULL;
        if (ips && in_perf) {
            const char *bar = strchr(ips + 1, '|');
            if (bar && isnan(r->ips))
                r->ips = strtod(bar + 1, NULL);
            in_perf = false;
            continue;
        }
    }
    if (step > 0 && data == data)
        r->dataloader_ratio = data / step;
    return found;
}
