/*
 * record_json.c: a record as one line of JSON, schema "trainwatch.record/1".
 * This is the format `analyze --records` writes, the "trainwatch" parser reads,
 * and the library's logger will write. docs/records.md documents each key.
 * Keys a record does not carry are left out rather than written as null.
 */
#include "trainwatch/record_json.h"

#include <math.h>
#include <time.h>

#include "json.h"

static void key(FILE *out, const char *name)
{
    fputs(",\"", out);
    fputs(name, out);
    fputs("\":", out);
}

static void int_field(FILE *out, const char *name, int64_t v)
{
    if (v < 0)
        return;
    key(out, name);
    fprintf(out, "%lld", (long long)v);
}

static void double_field(FILE *out, const tw_record *r, unsigned bit, const char *name, double v)
{
    if (!tw_has(r, bit))
        return;
    key(out, name);
    tw_json_number(out, v);
}

/* The record as one JSON object, without a newline. */
static void write_object(FILE *out, const tw_record *r)
{
    fputs("{\"schema\":\"" TW_RECORD_SCHEMA "\",\"kind\":\"", out);
    fputs(tw_record_kind_name(r->kind), out);
    fputc('"', out);
    if (r->source.file) {
        key(out, "file");
        tw_json_cstring(out, r->source.file);
        key(out, "line");
        fprintf(out, "%llu", (unsigned long long)r->source.line);
    }
    key(out, "rank");
    fprintf(out, "%d", r->rank < 0 ? 0 : r->rank);
    double_field(out, r, TW_F_TIME, "time", r->time);
    int_field(out, "epoch", r->epoch);
    int_field(out, "epoch_total", r->epoch_total);
    int_field(out, "step", r->step);
    int_field(out, "step_total", r->step_total);
    int_field(out, "global_step", r->global_step);
    double_field(out, r, TW_F_LOSS, "loss", r->loss);
    double_field(out, r, TW_F_LR, "lr", r->lr);
    double_field(out, r, TW_F_BATCH_TIME, "batch_time", r->batch_time);
    double_field(out, r, TW_F_DATA_TIME, "data_time", r->data_time);
    double_field(out, r, TW_F_SAMPLES_PER_SEC, "samples_per_sec", r->samples_per_sec);
    double_field(out, r, TW_F_ETA, "eta", r->eta);
    double_field(out, r, TW_F_MEM, "mem_bytes", r->mem_bytes);
    if (r->metric_count > 0) {
        key(out, "metrics");
        fputc('{', out);
        for (int i = 0; i < r->metric_count; i++) {
            if (i)
                fputc(',', out);
            tw_json_cstring(out, r->metrics[i].name);
            fputc(':', out);
            tw_json_number(out, r->metrics[i].value);
        }
        fputc('}', out);
    }
    if (r->kind == TW_REC_EVENT) {
        key(out, "event");
        tw_json_cstring(out, tw_event_name(r->event));
        key(out, "message");
        tw_json_cstring(out, r->message);
        if (r->detail[0]) {
            key(out, "detail");
            tw_json_cstring(out, r->detail);
        }
        if (r->exit_code) {
            key(out, "code");
            fprintf(out, "%d", r->exit_code);
        }
    }
    fputc('}', out);
}

void tw_record_write_json(FILE *out, const tw_record *r)
{
    write_object(out, r);
    fputc('\n', out);
}

/* ---- the ECS envelope ----------------------------------------------------- */

/* error: what ended or broke a run; warn: warnings; info: the rest. */
static const char *ecs_level(const tw_record *r)
{
    if (r->kind != TW_REC_EVENT)
        return "info";
    switch (r->event) {
    case TW_EV_OOM:
    case TW_EV_NAN:
    case TW_EV_EXCEPTION:
    case TW_EV_SIGNAL:
        return "error";
    case TW_EV_EXIT:
        return r->exit_code ? "error" : "info";
    case TW_EV_WARNING:
        return "warn";
    default:
        return "info";
    }
}

/* A one-line summary for the log store's message column. */
static void ecs_message(FILE *out, const tw_record *r)
{
    char text[TW_MESSAGE_MAX + 64];
    size_t n = 0;
    if (r->kind == TW_REC_EVENT) {
        n = (size_t)snprintf(text, sizeof text, "%s: %s", tw_event_name(r->event), r->message);
    } else {
        int64_t step = r->global_step >= 0 ? r->global_step : r->step;
        n = (size_t)snprintf(text, sizeof text, "%s", r->kind == TW_REC_EVAL ? "eval" : "step");
        if (step >= 0)
            n += (size_t)snprintf(text + n, sizeof text - n, " %lld", (long long)step);
        if (tw_has(r, TW_F_LOSS))
            n += (size_t)snprintf(text + n, sizeof text - n, " loss %.6g", r->loss);
        for (int i = 0; i < r->metric_count && i < 4 && n < sizeof text; i++)
            n += (size_t)snprintf(text + n, sizeof text - n, " %s %.6g", r->metrics[i].name, r->metrics[i].value);
    }
    tw_json_string(out, text, n < sizeof text ? n : sizeof text - 1);
}

void tw_record_write_ecs(FILE *out, const tw_record *r, const tw_record_ecs *who, double now)
{
    double t = tw_has(r, TW_F_TIME) && isfinite(r->time) ? r->time : now;
    time_t secs = (time_t)floor(t);
    int ms = (int)((t - (double)secs) * 1000);
    struct tm tm;
    char stamp[40] = "1970-01-01T00:00:00";
    if (gmtime_r(&secs, &tm))
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(out, "{\"@timestamp\":\"%s.%03dZ\",\"event.dataset\":\"" TW_RECORD_ECS_DATASET "\",\"log.level\":\"%s\"",
            stamp,
            ms < 0     ? 0
            : ms > 999 ? 999
                       : ms,
            ecs_level(r));
    fputs(",\"message\":", out);
    ecs_message(out, r);
    fputs(",\"ecs.version\":\"" TW_ECS_VERSION "\",\"host.name\":", out);
    tw_json_cstring(out, who && who->host ? who->host : "");
    fprintf(out, ",\"process.pid\":%ld", who ? who->pid : 0L);
    if (r->source.file) {
        fputs(",\"log.file.path\":", out);
        tw_json_cstring(out, r->source.file);
    }
    fputs(",\"trainwatch\":", out);
    write_object(out, r);
    fputs("}\n", out);
}
