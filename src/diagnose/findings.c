/*
 * findings.c: building findings, the one thing every rule does: a finding
 * with its title, evidence and advice, placed at a step or an event; the
 * words and number formats findings use (severity names, durations, times,
 * file:line); and the order of a report's findings (errors first). The rules
 * (rule_*.c), the launches (launches.c) and the report (diagnose.c) use it;
 * it uses none of them.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/grow.h"
#include "diagnose.h"
#include "trainwatch/error.h"

const char *tw_severity_name(tw_severity s)
{
    switch (s) {
    case TW_SEV_INFO:
        return "info";
    case TW_SEV_WARNING:
        return "warning";
    case TW_SEV_ERROR:
        return "error";
    }
    return "unknown";
}

tw_finding *tw_finding_add(tw_findings *out, const char *rule, tw_severity severity, const char *fmt, ...)
{
    if (TW_GROW(out->items, out->count, out->cap, 16) != TW_OK)
        return NULL;
    tw_finding *f = &out->items[out->count++];
    memset(f, 0, sizeof *f);
    f->rule = rule;
    f->severity = severity;
    f->launch = 0;
    f->rank = -1;
    f->step = -1;
    f->value = NAN;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->title, sizeof f->title, fmt, ap);
    va_end(ap);
    return f;
}

static void append(char *buf, size_t cap, const char *fmt, va_list ap)
{
    size_t used = strlen(buf);
    if (used + 2 >= cap)
        return;
    if (used > 0)
        buf[used++] = '\n';
    vsnprintf(buf + used, cap - used, fmt, ap);
}

void tw_finding_evidence(tw_finding *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    append(f->evidence, sizeof f->evidence, fmt, ap);
    va_end(ap);
}

void tw_finding_recommend(tw_finding *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    append(f->recommendation, sizeof f->recommendation, fmt, ap);
    va_end(ap);
}

void tw_finding_at(tw_finding *f, const tw_run *run, const tw_point *p, int rank)
{
    f->where = tw_run_source(run, p->file, p->line);
    f->step = (int64_t)p->pos;
    f->rank = rank;
}

/* How far after a failure's line its loop's closing record may come. */
#define CLOSING_RECORD_LINES 32

const tw_point *tw_closing_record(const tw_run *run, const tw_event_note *e)
{
    const tw_rank *rk = tw_run_rank(run, e->rank);
    if (!rk || !rk->used || e->file != rk->last.file || e->line >= rk->last.line ||
        rk->last.line - e->line > CLOSING_RECORD_LINES)
        return NULL;
    if (rk->steps > 1 && rk->before_last.file == e->file && rk->before_last.line > e->line)
        return NULL; /* two records after it: training went on */
    return &rk->last;
}

void tw_finding_at_event(tw_finding *f, const tw_run *run, const tw_event_note *e)
{
    f->where = tw_run_source(run, e->file, e->line);
    f->rank = e->rank;
    const tw_point *closing = tw_closing_record(run, e);
    f->step = closing ? (int64_t)closing->pos : e->last_pos >= 0 ? (int64_t)e->last_pos : -1;
}

void tw_finding_first_last(tw_finding *f, const tw_run *run, const tw_event_note *first, const tw_event_note *last)
{
    char where[600];
    tw_finding_evidence(f, "first: %s (%s)", first->message, tw_where(run, first->file, first->line, where, sizeof where));
    if (last && last != first)
        tw_finding_evidence(f, "last: %s (%s)", last->message, tw_where(run, last->file, last->line, where, sizeof where));
}

bool tw_run_ended(const tw_run *run)
{
    static const tw_event_kind ended[] = {TW_EV_FINISHED, TW_EV_EXCEPTION, TW_EV_OOM, TW_EV_SIGNAL, TW_EV_EXIT};
    for (size_t i = 0; i < sizeof ended / sizeof ended[0]; i++)
        if (run->event_counts[ended[i]])
            return true;
    return false;
}

double tw_run_steps_left(const tw_run *run, const tw_rank *rk)
{
    if (tw_run_ended(run))
        return NAN;
    bool from_zero = rk->series.count && rk->series.points[0].epoch == 0;
    return tw_record_steps_to_plan(&rk->last_step_record, run->th.max_steps, from_zero);
}

const tw_event_note *tw_first_event(const tw_run *run, tw_event_kind kind)
{
    for (int i = 0; i < run->events_kept_count; i++) {
        if (run->events_kept[i].kind == kind)
            return &run->events_kept[i];
    }
    return NULL;
}

const char *tw_fmt_duration(double s, char *buf, size_t cap)
{
    if (isnan(s) || s < 0)
        snprintf(buf, cap, "?");
    else if (s == 0)
        snprintf(buf, cap, "0s"); /* not "0us": nothing measured that small */
    else if (s < 0.001)
        snprintf(buf, cap, "%.0fus", s * 1e6);
    else if (s < 1)
        snprintf(buf, cap, "%.0fms", s * 1000);
    else if (s < 60)
        snprintf(buf, cap, "%.1fs", s);
    else if (s < 3600)
        snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else if (s < 86400 * 3)
        snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else {
        char days[32];
        snprintf(buf, cap, "%sd", tw_fmt_number(s / 86400, 1, days, sizeof days));
    }
    return buf;
}

const char *tw_fmt_number(double v, int decimals, char *buf, size_t cap)
{
    if (!isfinite(v))
        snprintf(buf, cap, "%s", isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf");
    else if (fabs(v) < 1e9)
        snprintf(buf, cap, "%.*f", decimals, v);
    else
        snprintf(buf, cap, "%.3g", v);
    return buf;
}

const char *tw_fmt_bytes(double v, char *buf, size_t cap)
{
    if (isnan(v))
        snprintf(buf, cap, "?");
    else if (v >= 1073741824.0)
        snprintf(buf, cap, "%.2f GiB", v / 1073741824.0);
    else
        snprintf(buf, cap, "%.1f MiB", v / 1048576.0);
    return buf;
}

const char *tw_fmt_time(double t, char *buf, size_t cap)
{
    if (isnan(t)) {
        snprintf(buf, cap, "?");
        return buf;
    }
    time_t secs = (time_t)t;
    struct tm tm;
    gmtime_r(&secs, &tm);
    if (tm.tm_year == 70) /* the log printed no year */
        strftime(buf, cap, "%m-%d %H:%M:%S", &tm);
    else
        strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

static int cmp_finding(const void *a, const void *b)
{
    const tw_finding *x = a, *y = b;
    if (x->severity != y->severity)
        return (int)y->severity - (int)x->severity;
    return 0;
}

/* Errors first; stable, so rules keep their table order within a severity. */
void tw_findings_sort(tw_finding *items, int count)
{
    for (int i = 1; i < count; i++) {
        tw_finding f = items[i];
        int j = i - 1;
        while (j >= 0 && cmp_finding(&items[j], &f) > 0) {
            items[j + 1] = items[j];
            j--;
        }
        items[j + 1] = f;
    }
}

bool tw_findings_healthy(const tw_finding *items, int count)
{
    for (int i = 0; i < count; i++) {
        if (items[i].severity >= TW_SEV_WARNING)
            return false;
    }
    return true;
}
