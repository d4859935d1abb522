/*
 * fmt_trainwatch.c: trainwatch's own JSON lines ("trainwatch.record/1"),
 * the exact inverse of tw_record_write_json(), bare (analyze --records) or
 * as the "trainwatch" member of the Elastic Common Schema envelope that
 * run and watch --records write (tw_record_write_ecs(); the envelope's
 * other members are for log stores and are not read). Source file and line
 * are taken from the record when present, so a stream of records
 * re-analysed still cites the original log.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "../core/json.h"
#include "formats.h"
#include "trainwatch/record_json.h"

#define ECS_START   "{\"@timestamp\":\""
#define ECS_DATASET "\"event.dataset\":\"" TW_RECORD_ECS_DATASET "\""

static bool is_ecs(const tw_line *line)
{
    return line->len > sizeof ECS_START && memcmp(line->text, ECS_START, sizeof ECS_START - 1) == 0 &&
           tw_find(line->text, line->len < 96 ? line->len : 96, ECS_DATASET);
}

static bool detect(const tw_line *line)
{
    return (line->len > 2 && line->text[0] == '{' &&
            tw_find(line->text, line->len < 64 ? line->len : 64, "\"" TW_RECORD_SCHEMA "\"")) ||
           is_ecs(line);
}

typedef struct file_name {
    char path[512];
} file_name;

static double member_number(const tw_json_member *m)
{
    if (m->type == TW_JSON_NUMBER || m->type == TW_JSON_BOOL)
        return m->number;
    if (m->type == TW_JSON_STRING) {
        if (strcmp(m->string, "NaN") == 0)
            return NAN;
        if (strcmp(m->string, "Infinity") == 0)
            return INFINITY;
        if (strcmp(m->string, "-Infinity") == 0)
            return -INFINITY;
    }
    return NAN;
}

static bool set_kind(tw_record *r, const char *s)
{
    if (strcmp(s, "step") == 0)
        r->kind = TW_REC_STEP;
    else if (strcmp(s, "eval") == 0)
        r->kind = TW_REC_EVAL;
    else if (strcmp(s, "event") == 0)
        r->kind = TW_REC_EVENT;
    else
        return false;
    return true;
}

static void set_event(tw_record *r, const char *s)
{
    for (int k = 0; k < TW_EV_COUNT; k++) {
        if (strcmp(tw_event_name((tw_event_kind)k), s) == 0)
            r->event = (tw_event_kind)k;
    }
}

typedef struct double_key {
    const char *name;
    unsigned bit;
    size_t offset;
} double_key;

static const double_key double_keys[] = {
    {"time", TW_F_TIME, offsetof(tw_record, time)},
    {"loss", TW_F_LOSS, offsetof(tw_record, loss)},
    {"lr", TW_F_LR, offsetof(tw_record, lr)},
    {"batch_time", TW_F_BATCH_TIME, offsetof(tw_record, batch_time)},
    {"data_time", TW_F_DATA_TIME, offsetof(tw_record, data_time)},
    {"samples_per_sec", TW_F_SAMPLES_PER_SEC, offsetof(tw_record, samples_per_sec)},
    {"eta", TW_F_ETA, offsetof(tw_record, eta)},
    {"mem_bytes", TW_F_MEM, offsetof(tw_record, mem_bytes)},
};

static const struct {
    const char *name;
    size_t offset;
} int_keys[] = {
    {"epoch", offsetof(tw_record, epoch)},         {"epoch_total", offsetof(tw_record, epoch_total)},
    {"step", offsetof(tw_record, step)},           {"step_total", offsetof(tw_record, step_total)},
    {"global_step", offsetof(tw_record, global_step)},
};

/* A JSON number that fits the integer field it goes to (-1 stands for
 * "unknown" in the record), else false: casting a double out of range is
 * undefined behaviour. */
static bool member_integer(const tw_json_member *m, double max, int64_t *out)
{
    if (m->type != TW_JSON_NUMBER || !(m->number >= -1 && m->number <= max))
        return false;
    *out = (int64_t)m->number;
    return true;
}

static void apply_member(tw_record *r, file_name *file, const tw_json_member *m)
{
    int64_t v;
    for (size_t i = 0; i < sizeof double_keys / sizeof double_keys[0]; i++) {
        if (strcmp(m->key, double_keys[i].name) == 0) {
            *(double *)((char *)r + double_keys[i].offset) = member_number(m);
            r->fields |= double_keys[i].bit;
            return;
        }
    }
    for (size_t i = 0; i < sizeof int_keys / sizeof int_keys[0]; i++) {
        if (strcmp(m->key, int_keys[i].name) == 0) {
            if (member_integer(m, 1e15, &v))
                *(int64_t *)((char *)r + int_keys[i].offset) = v;
            return;
        }
    }
    if (strcmp(m->key, "kind") == 0 && m->type == TW_JSON_STRING)
        set_kind(r, m->string);
    else if (strcmp(m->key, "event") == 0 && m->type == TW_JSON_STRING)
        set_event(r, m->string);
    else if (strcmp(m->key, "message") == 0)
        tw_record_set_text(r->message, m->string, m->string_len);
    else if (strcmp(m->key, "detail") == 0)
        tw_record_set_text(r->detail, m->string, m->string_len);
    else if (strcmp(m->key, "rank") == 0 && member_integer(m, INT_MAX, &v))
        r->rank = (int)v;
    else if (strcmp(m->key, "code") == 0 && m->type == TW_JSON_NUMBER && m->number >= -1e6 && m->number <= 1e6)
        r->exit_code = (int)m->number;
    else if (strcmp(m->key, "line") == 0 && m->type == TW_JSON_NUMBER && m->number >= 1 &&
             m->number < (double)TW_LINE_NUMBER_MAX)
        r->source.line = (uint64_t)m->number; /* beyond: no file has that many lines */
    else if (strcmp(m->key, "file") == 0 && m->type == TW_JSON_STRING) {
        size_t n = m->string_len < sizeof file->path - 1 ? m->string_len : sizeof file->path - 1;
        memcpy(file->path, m->string, n);
        file->path[n] = '\0';
    }
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    file_name *file = state;
    if (!detect(line))
        return 0;
    tw_json_reader reader;
    if (!tw_json_begin(&reader, line->text, line->len))
        return 0;
    tw_record r;
    tw_record_init(&r);
    file->path[0] = '\0';
    tw_json_member m;
    /* the record's own members: depth 1, or 2 inside the envelope's "trainwatch" */
    int depth = 1, record_depth = is_ecs(line) ? 2 : 1;
    bool in_record = record_depth == 1, in_metrics = false;
    for (;;) {
        tw_json_type t = tw_json_next(&reader, &m);
        if (t == TW_JSON_ERROR)
            return 0;
        if (t == TW_JSON_END) {
            if (--depth == 0)
                break;
            in_metrics = false;
            in_record = in_record && depth >= record_depth;
            continue;
        }
        if (t == TW_JSON_OBJECT) {
            depth++;
            if (record_depth == 2 && depth == 2 && strcmp(m.key, "trainwatch") == 0)
                in_record = true;
            in_metrics = in_record && depth == record_depth + 1 && strcmp(m.key, "metrics") == 0;
            continue;
        }
        if (in_metrics)
            tw_record_set_metric(&r, m.key, strlen(m.key), member_number(&m));
        else if (in_record && depth == record_depth)
            apply_member(&r, file, &m);
    }
    if (file->path[0]) {
        r.source.file = file->path;
        if (r.source.line == 0)
            r.source.line = line->source.line;
    }
    tw_parser_emit(p, line, &r);
    return 1;
}

static bool same_state(const void *a, const void *b)
{
    const file_name *x = a, *y = b;
    return strcmp(x->path, y->path) == 0;
}

const tw_format tw_format_trainwatch = {
    .name = "trainwatch",
    .summary = "trainwatch's own JSON lines (schema trainwatch.record/1, bare or in run/watch's ECS envelope)",
    .state_size = sizeof(file_name),
    .detect = detect,
    .parse = parse,
    .same_state = same_state,
};
