/*
 * record_json.c: a record as one line of JSON, schema "trainwatch.record/1".
 * This is the format `analyze --records` writes, the "trainwatch" parser reads,
 * and the library's logger will write. docs/records.md documents each key.
 * Keys a record does not carry are left out rather than written as null.
 */
#include "trainwatch/record_json.h"

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

void tw_record_write_json(FILE *out, const tw_record *r)
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
    fputs("}\n", out);
}
