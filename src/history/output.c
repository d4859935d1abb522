/*
 * output.c: recorded runs as JSON and as the short texts the tables of
 * `runs` and `compare` show (durations, times).
 */
#include <math.h>
#include <stdio.h>
#include <time.h>

#include "../core/json.h"
#include "trainwatch/history.h"

static void key(FILE *out, const char *name, bool *first)
{
    if (!*first)
        fputc(',', out);
    *first = false;
    tw_json_cstring(out, name);
    fputc(':', out);
}

static void number(FILE *out, const char *name, double v, bool *first)
{
    key(out, name, first);
    if (isfinite(v))
        tw_json_number(out, v);
    else
        fputs("null", out);
}

static void count(FILE *out, const char *name, int64_t v, bool *first)
{
    key(out, name, first);
    if (v >= 0)
        fprintf(out, "%lld", (long long)v);
    else
        fputs("null", out);
}

static void text(FILE *out, const char *name, const char *s, bool *first)
{
    key(out, name, first);
    if (s && *s)
        tw_json_cstring(out, s);
    else
        fputs("null", out);
}

static void entry_members(FILE *out, const tw_history_entry *e, bool *first)
{
    count(out, "id", e->id, first);
    number(out, "recorded", e->recorded, first);
    text(out, "source", e->source, first);
    text(out, "name", e->name, first);
    text(out, "job", e->job, first);
    text(out, "host", e->host, first);
    text(out, "command", e->command, first);
    text(out, "inputs", e->inputs, first);
    number(out, "started", e->started, first);
    number(out, "ended", e->ended, first);
    count(out, "ranks", e->ranks, first);
    count(out, "launches", e->launches, first);
    count(out, "launch", e->launch, first);
    text(out, "outcome", e->outcome, first);
    text(out, "outcome_detail", e->outcome_detail, first);
    key(out, "healthy", first);
    fputs(e->healthy ? "true" : "false", out);
    number(out, "health", e->health, first);
    count(out, "step_records", e->step_records, first);
    count(out, "first_step", e->first_step, first);
    count(out, "last_step", e->last_step, first);
    count(out, "epoch_total", e->epoch_total, first);
    count(out, "last_epoch", e->last_epoch, first);
    number(out, "duration_seconds", e->duration, first);
    number(out, "step_time_p50", e->step_p50, first);
    number(out, "step_time_p95", e->step_p95, first);
    number(out, "data_share", e->data_share, first);
    number(out, "samples_per_second", e->throughput, first);
    number(out, "peak_memory_bytes", e->peak_memory, first);
    number(out, "first_loss", e->first_loss, first);
    number(out, "best_loss", e->best_loss, first);
    count(out, "best_loss_step", e->best_loss_step, first);
    if (e->final_loss_nan) {
        key(out, "final_loss", first);
        tw_json_number(out, NAN);
    } else {
        number(out, "final_loss", e->final_loss, first);
    }
    number(out, "final_lr", e->final_lr, first);
    count(out, "findings", e->findings, first);
    count(out, "errors", e->errors, first);
    count(out, "warnings", e->warnings, first);
    text(out, "environment", e->environment, first);
    count(out, "gpus", e->gpus, first);
    number(out, "gpu_seconds", e->gpu_seconds, first);
    number(out, "gpu_hours", e->gpu_seconds / 3600, first);
    number(out, "gpu_idle_seconds", e->idle_seconds, first);
    number(out, "gpu_idle_below", e->idle_below, first);
    number(out, "cost", e->cost, first);
    number(out, "cost_idle", e->idle_cost, first);
    text(out, "price_source", e->price_source, first);
    number(out, "budget", e->budget, first);
}

void tw_history_entry_write_json(FILE *out, const tw_history_entry *e)
{
    bool first = true;
    fputc('{', out);
    entry_members(out, e, &first);
    fputc('}', out);
}

static void write_series(FILE *out, const tw_history_series *s)
{
    bool first = true;
    fputc('{', out);
    text(out, "metric", s->metric, &first);
    key(out, "points", &first);
    fputc('[', out);
    for (size_t i = 0; i < s->count; i++) {
        fputs(i ? ",[" : "[", out);
        tw_json_number(out, s->pos[i]);
        fputc(',', out);
        tw_json_number(out, s->value[i]);
        fputc(']', out);
    }
    fputs("]}", out);
}

void tw_history_view_write_json(FILE *out, const tw_history_view *v)
{
    bool first = true;
    fputc('{', out);
    entry_members(out, &v->entry, &first);
    key(out, "finding_list", &first);
    fputc('[', out);
    for (size_t i = 0; i < v->finding_count; i++) {
        const tw_history_finding *f = &v->findings[i];
        bool ff = true;
        fputs(i ? ",{" : "{", out);
        text(out, "rule", f->rule, &ff);
        text(out, "severity", f->severity, &ff);
        text(out, "title", f->title, &ff);
        count(out, "step", f->step, &ff);
        count(out, "rank", f->rank, &ff);
        number(out, "value", f->value, &ff);
        fputc('}', out);
    }
    fputc(']', out);
    key(out, "facts", &first);
    fputc('[', out);
    for (size_t i = 0; i < v->fact_count; i++) {
        bool ff = true;
        fputs(i ? ",{" : "{", out);
        text(out, "key", v->facts[i].key, &ff);
        text(out, "value", v->facts[i].value, &ff);
        count(out, "rank", v->facts[i].rank, &ff);
        fputc('}', out);
    }
    fputc(']', out);
    key(out, "series", &first);
    fputc('[', out);
    for (size_t i = 0; i < v->series_count; i++) {
        if (i)
            fputc(',', out);
        write_series(out, &v->series[i]);
    }
    fputs("]}", out);
}

const char *tw_history_duration_text(double s, char *buf, size_t cap)
{
    if (!isfinite(s) || s < 0)
        snprintf(buf, cap, "?");
    else if (s >= 3600)
        snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60)
        snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else if (s >= 10)
        snprintf(buf, cap, "%.0fs", s);
    else
        snprintf(buf, cap, "%.1fs", s);
    return buf;
}

const char *tw_history_time_text(double t, char *buf, size_t cap)
{
    struct tm tm;
    time_t when = (time_t)t;
    if (!isfinite(t) || !localtime_r(&when, &tm) || !strftime(buf, cap, "%Y-%m-%d %H:%M", &tm))
        snprintf(buf, cap, "?");
    return buf;
}

const char *tw_history_gpu_hours_text(const tw_history_entry *e, char *buf, size_t cap)
{
    if (isfinite(e->gpu_seconds))
        snprintf(buf, cap, "%.3g", e->gpu_seconds / 3600);
    else
        snprintf(buf, cap, "-");
    return buf;
}

const char *tw_history_cost_text(const tw_history_entry *e, char *buf, size_t cap)
{
    if (isfinite(e->cost))
        snprintf(buf, cap, e->cost >= 1 || e->cost == 0 ? "%.2f" : "%.4g", e->cost); /* as cost.c's summary */
    else
        snprintf(buf, cap, "-");
    return buf;
}
