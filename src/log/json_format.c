/*
 * json_format.c: one record as one JSON object in Elastic Common Schema
 * names (docs/logging.md), so Filebeat, Fluent Bit or Vector ship it to
 * Elasticsearch or Loki with no parser configuration: @timestamp (RFC 3339,
 * ms, zone), log.level, log.logger, message, log.origin.file.name,
 * log.origin.function, log.origin.file.line (when the call site is known),
 * host.name, process.pid,
 * ecs.version, then trainwatch's own under "trainwatch": rank, world_size
 * and the fields as members of their own type. A field named rank or
 * world_size is written with a leading underscore, so every key appears
 * once. trainwatch reads it back as its own format (trainwatch-log).
 */
#include <math.h>
#include <string.h>

#include "internal.h"

#define ECS_VERSION "8.11.0"

static const char *const fixed_keys[] = {"rank", "world_size", "truncated"};

static void out_key(tw_log_out *o, const char *key)
{
    tw_out_str(o, ",\"");
    for (size_t i = 0; i < sizeof fixed_keys / sizeof fixed_keys[0]; i++) {
        if (strcmp(key, fixed_keys[i]) == 0) {
            tw_out_char(o, '_');
            break;
        }
    }
    tw_out_json_text(o, key, strlen(key));
    tw_out_str(o, "\":");
}

static void out_string(tw_log_out *o, const char *s)
{
    if (!s) {
        tw_out_str(o, "null");
        return;
    }
    tw_out_char(o, '"');
    tw_out_json_text(o, s, strlen(s));
    tw_out_char(o, '"');
}

static void out_value(tw_log_out *o, const tw_log_field *f)
{
    switch (f->type) {
    case TW_FIELD_INT:
        tw_out_int(o, f->v.i);
        break;
    case TW_FIELD_DOUBLE: /* as trainwatch.record/1 writes what JSON cannot hold */
        if (isnan(f->v.d))
            tw_out_str(o, "\"NaN\"");
        else if (isinf(f->v.d))
            tw_out_str(o, f->v.d < 0 ? "\"-Infinity\"" : "\"Infinity\"");
        else
            tw_out_double(o, f->v.d);
        break;
    case TW_FIELD_STRING:
        out_string(o, f->v.s);
        break;
    case TW_FIELD_BOOL:
        tw_out_str(o, f->v.b ? "true" : "false");
        break;
    case TW_FIELD_SUMMARY:
        tw_out_str(o, "{\"type\":");
        out_string(o, f->v.summary.type_name ? f->v.summary.type_name : "value");
        if (f->v.summary.shape && f->v.summary.ndim) {
            tw_out_str(o, ",\"shape\":[");
            for (size_t i = 0; i < f->v.summary.ndim; i++) {
                if (i)
                    tw_out_char(o, ',');
                tw_out_int(o, f->v.summary.shape[i]);
            }
            tw_out_char(o, ']');
        }
        if (f->v.summary.size >= 0) {
            tw_out_str(o, ",\"size\":");
            tw_out_int(o, f->v.summary.size);
        }
        tw_out_char(o, '}');
        break;
    }
}

static void render(const tw_log_rec *r, tw_log_out *o, size_t message_max, bool with_fields)
{
    const tw_log_process *proc = tw_log_process_info();
    tw_out_str(o, "{\"@timestamp\":\"");
    tw_out_rfc3339(o, r->ns);
    tw_out_str(o, "\",\"log.level\":\"");
    const char *level = tw_log_level_name(r->level);
    if (level)
        tw_out_str(o, level);
    else
        tw_out_int(o, r->level);
    tw_out_str(o, "\",\"log.logger\":\"");
    const char *logger = r->logger[0] ? r->logger : "root"; /* as %(name)s says it */
    tw_out_json_text(o, logger, strlen(logger));
    tw_out_str(o, "\",\"message\":\"");
    tw_out_json_text(o, r->message, r->message_len < message_max ? r->message_len : message_max);
    tw_out_char(o, '"');
    if (r->file) { /* a record logged without its call site has none */
        tw_out_str(o, ",\"log.origin.file.name\":");
        out_string(o, r->file);
        tw_out_str(o, ",\"log.origin.function\":");
        out_string(o, r->func);
        tw_out_str(o, ",\"log.origin.file.line\":");
        tw_out_int(o, r->line);
    }
    tw_out_str(o, ",\"host.name\":");
    out_string(o, proc->host);
    tw_out_str(o, ",\"process.pid\":");
    tw_out_int(o, proc->pid);
    tw_out_str(o, ",\"ecs.version\":\"" ECS_VERSION "\",\"trainwatch\":{\"rank\":");
    tw_out_int(o, proc->rank);
    tw_out_str(o, ",\"world_size\":");
    tw_out_int(o, proc->world_size);
    for (size_t i = 0; with_fields && i < r->field_count; i++) {
        if (!r->fields[i].key)
            continue;
        out_key(o, r->fields[i].key);
        out_value(o, &r->fields[i]);
    }
    if (!with_fields)
        tw_out_str(o, ",\"truncated\":true");
    tw_out_str(o, "}}");
}

/* A record too long for the line is written again with a shorter message
 * and no fields, so that every line stays one valid object. */
void tw_log_json_format(const tw_log_rec *r, tw_log_out *o)
{
    size_t start = o->len;
    render(r, o, r->message_len, true);
    if (!o->cut)
        return;
    o->len = start;
    o->cut = false;
    render(r, o, (o->cap - start) / 8, false);
}
