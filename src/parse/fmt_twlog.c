/*
 * fmt_twlog.c: the logs libtrainwatch logging writes (trainwatch/log.h,
 * docs/logging.md), in both of its encodings:
 *
 *   text:  2024-04-05 10:25:30.123 | INFO | trainer | train_step:87 | Step 100 loss=2.134 time=0.42
 *   JSON:  {"@timestamp":"2024-04-05T10:25:30.123+08:00","log.level":"INFO",
 *           "log.logger":"trainer","message":"Step 100",...,"ecs.version":"8.11.0",
 *           "trainwatch":{"rank":0,"world_size":1,"loss":2.134,"time":0.42}}
 *          (Elastic Common Schema names; the fields under "trainwatch"), and
 *          the JSON of earlier versions, {"time":...,"level":...} with the
 *          fields at the top level.
 *
 * Either way the message and the fields become one "message key=value ..."
 * text that goes through the shared key/value scanner, so the two encodings
 * of a record give the same step. A leading "Step N" is the step. A record
 * at ERROR or above with an `exception` field is an exception event; one at
 * WARNING that is no step is a warning event. A "stacks" field (a stack
 * dump) is not a field of the record: the event reader reads it.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../core/json.h"
#include "formats.h"
#include "stacks.h"

#define SCAN_MAX 4096

static bool is_text(const tw_line *l)
{
    const char *s = l->text;
    return l->len > 30 && s[4] == '-' && s[7] == '-' && s[10] == ' ' && s[13] == ':' && s[19] == '.' &&
           memcmp(s + 23, " | ", 3) == 0;
}

#define ECS_START "{\"@timestamp\":\""

/* ECS: log.level right after @timestamp (trainwatch's records put
 * event.dataset there, fmt_trainwatch.c). */
static bool is_ecs(const tw_line *l)
{
    size_t n = sizeof ECS_START - 1;
    if (l->len < 48 || memcmp(l->text, ECS_START, n) != 0)
        return false;
    const char *quote = memchr(l->text + n, '"', l->len - n < 40 ? l->len - n : 40);
    return quote && (size_t)(l->text + l->len - quote) > 15 && memcmp(quote, "\",\"log.level\":\"", 15) == 0;
}

static bool is_json(const tw_line *l)
{
    return (l->len > 40 && memcmp(l->text, "{\"time\":\"", 9) == 0 &&
            tw_find(l->text, l->len < 64 ? l->len : 64, "\",\"level\":\"")) ||
           is_ecs(l);
}

static bool detect(const tw_line *line)
{
    return is_text(line) || is_json(line);
}

typedef struct scan_text {
    char text[SCAN_MAX];
    size_t len;
} scan_text;

static void add(scan_text *t, const char *s, size_t n)
{
    if (n > SCAN_MAX - 1 - t->len)
        n = SCAN_MAX - 1 - t->len;
    memcpy(t->text + t->len, s, n);
    t->len += n;
}

/* "Step 100 ..." -> "step=100 " in front of the rest. */
static void add_message(scan_text *t, const char *m, size_t n)
{
    if (n > 5 && (m[0] == 'S' || m[0] == 's') && strncmp(m + 1, "tep ", 4) == 0 && m[5] >= '0' && m[5] <= '9') {
        add(t, "step=", 5);
        m += 5;
        n -= 5;
    }
    add(t, m, n);
}

static bool is_error(const char *level, size_t n)
{
    return (n == 5 && memcmp(level, "ERROR", 5) == 0) || (n == 8 && memcmp(level, "CRITICAL", 8) == 0);
}

static int emit_exception(tw_parser *p, const tw_line *line, const char *text, size_t n)
{
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_EVENT;
    r.event = TW_EV_EXCEPTION;
    tw_record_set_text(r.message, text, n);
    tw_parser_emit(p, line, &r);
    return 1;
}

/* Where the key=value field holding s[at] starts ("input0=<ndarray float32
 * shape=[64000,16]>": at "input0"), or at itself. */
static size_t field_before(const char *s, size_t at)
{
    for (size_t i = at; i-- > 0;) {
        if (i > 0 && s[i - 1] != ' ')
            continue;
        size_t k = i;
        while (tw_is_alpha(s[k]) || tw_is_digit(s[k]) || s[k] == '_' || s[k] == '.')
            k++;
        if (k > i && s[k] == '=' && !(k - i == 5 && memcmp(s + i, "shape", 5) == 0))
            return i;
    }
    return at;
}

static bool is_warning(const char *level, size_t n)
{
    return (n == 7 && memcmp(level, "WARNING", 7) == 0) || (n == 4 && memcmp(level, "WARN", 4) == 0);
}

/* A record of ours without a step or metric is still ours: -1 keeps the
 * generic formats from reading the environment record's numbers as a step.
 * One at WARNING is a warning event with its text (the hooks' "memory
 * spike at step 50 ... input0=<ndarray float32 shape=[64000,16]>"). */
static int emit(tw_parser *p, const tw_line *line, const scan_text *t, const char *level, size_t level_len)
{
    bool eval = tw_text_is_eval(t->text, t->len);
    if (tw_emit_fields(p, line, eval ? TW_REC_EVAL : TW_REC_STEP, t->text, t->len) > 0)
        return 1;
    if (!is_warning(level, level_len))
        return -1;
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_EVENT;
    r.event = TW_EV_WARNING;
    tw_record_set_text(r.message, t->text, t->len);
    const char *shape = tw_find(t->text, t->len, "shape");
    if (shape) { /* the inputs it describes, which a long message would lose */
        size_t at = field_before(t->text, (size_t)(shape - t->text));
        tw_record_set_text(r.detail, t->text + at, t->len - at);
    }
    tw_parser_emit(p, line, &r);
    return 1;
}

/* ---- text ------------------------------------------------------------------ */

static int parse_text(tw_parser *p, const tw_line *line)
{
    const char *s = line->text + 26, *end = line->text + line->len;
    const char *fields[3];
    for (int k = 0; k < 3; k++) { /* level, name, func:line */
        fields[k] = s;
        const char *bar = tw_find(s, (size_t)(end - s), " | ");
        if (!bar)
            return 0;
        s = bar + 3;
    }
    size_t level_len = (size_t)(tw_find(fields[0], (size_t)(end - fields[0]), " | ") - fields[0]);
    const char *exc = tw_find(s, (size_t)(end - s), " exception=");
    if (exc && is_error(fields[0], level_len))
        return emit_exception(p, line, exc + 11, (size_t)(end - exc - 11));
    scan_text t = {.len = 0};
    add_message(&t, s, (size_t)(end - s));
    return emit(p, line, &t, fields[0], level_len);
}

/* ---- JSON ------------------------------------------------------------------- */

/* The members that are not fields: at the top level of the earlier JSON,
 * and under "trainwatch" in the ECS one. */
static const char *const fixed[] = {"time", "level", "logger",     "message", "file", "func",
                                    "line", "rank",  "world_size", "host",    "pid",  "stacks", NULL};
static const char *const ecs_fixed[] = {"rank", "world_size", "truncated", "stacks", NULL};

static bool is_fixed(const char *const *list, const char *key)
{
    for (size_t i = 0; list[i]; i++) {
        if (strcmp(key, list[i]) == 0)
            return true;
    }
    return false;
}

/* "2024-04-05T10:25:30.123+08:00" (or Z) -> seconds since the epoch. */
static bool rfc3339(const char *s, double *out)
{
    int y, mo, d, h, mi, sec, ms, n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%3d%n", &y, &mo, &d, &h, &mi, &sec, &ms, &n) != 7 || n != 23)
        return false;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi, .tm_sec = sec};
    double t = (double)timegm(&tm) + ms / 1000.0;
    int oh, om;
    if (s[23] == 'Z')
        ;
    else if ((s[23] == '+' || s[23] == '-') && sscanf(s + 24, "%2d:%2d", &oh, &om) == 2)
        t -= (s[23] == '+' ? 1 : -1) * (oh * 3600.0 + om * 60.0);
    else
        return false;
    *out = t;
    return true;
}

static void add_member(scan_text *t, const tw_json_member *m, const char *const *fixed_keys)
{
    char value[64];
    int n = 0;
    if (m->type == TW_JSON_NUMBER)
        n = snprintf(value, sizeof value, "%.17g", m->number);
    else if (m->type == TW_JSON_BOOL)
        n = snprintf(value, sizeof value, "%s", m->number != 0 ? "true" : "false");
    else if (m->type != TW_JSON_STRING)
        return;
    const char *key =
        m->key[0] == '_' && is_fixed(fixed_keys, m->key + 1) ? m->key + 1 : m->key; /* "_rank": a field "rank" */
    add(t, " ", 1);
    add(t, key, strlen(key));
    add(t, "=", 1);
    if (m->type == TW_JSON_STRING)
        add(t, m->string, m->string_len);
    else
        add(t, value, (size_t)n);
}

/* One member of the record: the top level's (depth 1), or a field (depth
 * 1 in the earlier JSON, under "trainwatch" in the ECS one). */
static void json_member(tw_parser *p, const tw_json_member *m, bool field, const char *const *fixed_keys, tw_line *at,
                        char *level, size_t level_cap, char *exception, size_t exception_cap, scan_text *t)
{
    if (!field) {
        if ((strcmp(m->key, "time") == 0 || strcmp(m->key, "@timestamp") == 0) && m->type == TW_JSON_STRING)
            at->has_time = rfc3339(m->string, &at->time) || at->has_time;
        else if ((strcmp(m->key, "level") == 0 || strcmp(m->key, "log.level") == 0) && m->type == TW_JSON_STRING)
            snprintf(level, level_cap, "%.15s", m->string);
        else if (strcmp(m->key, "message") == 0 && m->type == TW_JSON_STRING)
            add_message(t, m->string, m->string_len);
        return;
    }
    if (strcmp(m->key, "rank") == 0 && m->type == TW_JSON_NUMBER && m->number >= 0 && m->number < 1e6)
        tw_parser_rank_hint(p, (int)m->number);
    else if (strcmp(m->key, "exception") == 0 && m->type == TW_JSON_STRING)
        snprintf(exception, exception_cap, "%.511s", m->string);
    else if (!is_fixed(fixed_keys, m->key))
        add_member(t, m, fixed_keys);
}

static int parse_json(tw_parser *p, const tw_line *line)
{
    tw_json_reader reader;
    if (!tw_json_begin(&reader, line->text, line->len))
        return 0;
    bool ecs = is_ecs(line);
    const char *const *fixed_keys = ecs ? ecs_fixed : fixed;
    tw_json_member m;
    scan_text t = {.len = 0};
    char level[16] = "", exception[512] = "";
    tw_line at = *line;
    int depth = 1;
    bool in_fields = false, stacks = false;
    for (;;) {
        tw_json_type type = tw_json_next(&reader, &m);
        if (type == TW_JSON_ERROR)
            return 0;
        if (type == TW_JSON_END) {
            if (--depth == 0)
                break;
            in_fields = false;
            continue;
        }
        if (type == TW_JSON_OBJECT) {
            depth++;
            in_fields = ecs && depth == 2 && strcmp(m.key, "trainwatch") == 0;
            continue;
        }
        stacks = stacks || (m.type == TW_JSON_STRING && strcmp(m.key, "stacks") == 0);
        if (depth == 1 && !ecs) { /* the earlier JSON: fields beside time, level and message */
            bool top = strcmp(m.key, "time") == 0 || strcmp(m.key, "level") == 0 || strcmp(m.key, "message") == 0;
            json_member(p, &m, !top, fixed_keys, &at, level, sizeof level, exception, sizeof exception, &t);
        } else if (depth == 1 || in_fields) {
            json_member(p, &m, in_fields, fixed_keys, &at, level, sizeof level, exception, sizeof exception, &t);
        }
    }
    if (exception[0] && is_error(level, strlen(level)))
        return emit_exception(p, &at, exception, strlen(exception));
    if (stacks && tw_stacks_emit_json(p, &at)) /* a faulthandler dump (stacks.h) */
        return 1;
    return emit(p, &at, &t, level, strlen(level));
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    if (is_json(line))
        return parse_json(p, line);
    return is_text(line) ? parse_text(p, line) : 0;
}

static const char *const anchors[] = {" | ", "{\"time\":\"", ECS_START, NULL};

const tw_format tw_format_twlog = {
    .name = "trainwatch-log",
    .summary =
        "libtrainwatch logging: '2024-04-05 10:25:30.123 | INFO | name | func:line | msg k=v' and its JSON lines",
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
};
