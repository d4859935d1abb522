/*
 * emit.c: records leaving the parser. tw_parser_emit() stamps a record a
 * format produced with its file, line, rank and time and hands it to the
 * parser's consumer; the helpers above it are what the format modules share
 * to turn "key: value" text into step and eval records (formats.h).
 */
#include <string.h>
#include <strings.h>

#include "formats.h"
#include "parser.h"

void tw_parser_emit(tw_parser *p, const tw_line *line, tw_record *r)
{
    if (!r->source.file) {
        r->source.file = p->path;
        r->source.line = line ? line->source.line : p->line_no;
    }
    if (r->rank < 0)
        r->rank = line && line->rank >= 0 ? line->rank : p->rank;
    if (!(r->fields & TW_F_TIME) && line && line->has_time) {
        r->time = line->time;
        r->fields |= TW_F_TIME;
    }
    switch (r->kind) {
    case TW_REC_STEP:
        p->stats.steps++;
        p->emitted_data = true;
        break;
    case TW_REC_EVAL:
        p->stats.evals++;
        p->emitted_data = true;
        break;
    case TW_REC_EVENT:
        p->stats.events++;
        break;
    case TW_REC_LINE: /* not a record of the training: not counted */
        break;
    }
    if (p->fn)
        p->fn(p->arg, r);
}

int tw_emit_step(tw_parser *p, const tw_line *line, tw_record *r, int otherwise)
{
    if (!tw_record_is_step_like(r))
        return otherwise;
    r->kind = TW_REC_STEP;
    tw_parser_emit(p, line, r);
    return 1;
}

void tw_record_step_is_global(tw_record *r)
{
    if (r->global_step < 0 && r->step >= 0) {
        r->global_step = r->step;
        r->step = -1;
    }
}

int tw_emit_eval(tw_parser *p, const tw_line *line, tw_record *r)
{
    if (r->metric_count == 0 && !tw_has(r, TW_F_LOSS))
        return 0;
    r->kind = TW_REC_EVAL;
    tw_parser_emit(p, line, r);
    return 1;
}

/* Names of evaluation results: accuracy, top-k, AP, F1... */
static bool is_quality_metric(const char *name)
{
    static const char *const prefixes[] = {"top",  "acc", "ap",   "map",   "f1",  "precision", "recall", "hmean",
                                           "miou", "iou", "bleu", "rouge", "auc", "dice",      "kappa"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t n = strlen(prefixes[i]);
        if (strncasecmp(name, prefixes[i], n) == 0 &&
            (name[n] == '\0' || name[n] == '_' || name[n] == '@' || name[n] == '-' || tw_is_digit(name[n])))
            return true;
    }
    return false;
}

static bool only_quality_metrics(const tw_record *r)
{
    if (r->metric_count == 0 || r->fields || r->step >= 0 || r->global_step >= 0)
        return false;
    for (int i = 0; i < r->metric_count; i++) {
        if (!is_quality_metric(r->metrics[i].name))
            return false;
    }
    return true;
}

int tw_emit_fields(tw_parser *p, const tw_line *line, tw_record_kind kind, const char *text, size_t len)
{
    tw_record r;
    tw_record_init(&r);
    if (tw_fields_scan(&r, text, len) == 0)
        return 0;
    if (kind == TW_REC_EVAL) {
        if (tw_has(&r, TW_F_LOSS))
            tw_record_set_metric(&r, "loss", 4, r.loss);
        return tw_emit_eval(p, line, &r);
    }
    if (!tw_record_is_step_like(&r))
        return only_quality_metrics(&r) ? tw_emit_eval(p, line, &r) : 0;
    return tw_emit_step(p, line, &r, 0);
}

static bool word_at(const char *s, size_t len, size_t i, const char *w)
{
    size_t n = strlen(w);
    if (i + n > len || strncasecmp(s + i, w, n) != 0)
        return false;
    bool left = i == 0 || !(tw_is_alpha(s[i - 1]) || s[i - 1] == '_');
    bool right = i + n == len || !(tw_is_alpha(s[i + n]) || s[i + n] == '_');
    return left && right;
}

bool tw_text_is_eval(const char *s, size_t len)
{
    static const char *const words[] = {"eval", "evaluation", "val", "validation", "test"};
    /* The first word, after brackets and decoration: "[EVAL] ...", "Eval at
     * epoch 3: ...", "** Validation: ...". Later words are too often config. */
    size_t i = 0;
    while (i < len && !tw_is_alpha(s[i]) && s[i] != ':' && s[i] != '=')
        i++;
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        if (word_at(s, len, i, words[w]))
            return true;
    }
    return false;
}

size_t tw_scan_fraction(const char *s, const char *end, long long *a, long long *b)
{
    const char *p = s;
    while (p < end && *p == ' ')
        p++;
    size_t n = tw_scan_uint(p, end, a);
    if (!n)
        return 0;
    p += n;
    while (p < end && *p == ' ')
        p++;
    if (p >= end || *p != '/')
        return 0;
    p++;
    while (p < end && *p == ' ')
        p++;
    n = tw_scan_uint(p, end, b);
    if (!n)
        return 0;
    return (size_t)(p + n - s);
}

int tw_events_emit(tw_parser *p, const tw_line *line, tw_event_kind kind, const char *msg, size_t len,
                   const char *detail, int code)
{
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_EVENT;
    r.event = kind;
    r.exit_code = code;
    tw_record_set_text(r.message, msg, len);
    if (detail)
        tw_record_set_text(r.detail, detail, strlen(detail));
    tw_parser_emit(p, line, &r);
    return 1;
}
