/*
 * formats.c: the table of log formats, in detection order, and the helpers
 * the "key: value" formats share. Adding a format is one new file plus one
 * row here. Order matters only for detection: specific formats come before
 * the generic ones (pylogging, kv) that would also accept their lines.
 */
#include "formats.h"

#include <string.h>
#include <strings.h>

static const tw_format *const table[] = {
    &tw_format_trainwatch, &tw_format_events,    &tw_format_hf_state, &tw_format_json,
    &tw_format_hapi,       &tw_format_ppdet,     &tw_format_ppcls,    &tw_format_paddlevideo,
    &tw_format_paddleseg,  &tw_format_ppocr,     &tw_format_paddlenlp, &tw_format_megatron,
    &tw_format_deepspeed,  &tw_format_mmdet,     &tw_format_detectron2, &tw_format_tqdm,
    &tw_format_yolo,       &tw_format_olmo,      &tw_format_glog,     &tw_format_pylogging,
    &tw_format_kv,
};

_Static_assert(sizeof table / sizeof table[0] <= 64, "the dispatcher keeps format sets in 64-bit masks");

const tw_format *const *tw_formats(size_t *count)
{
    *count = sizeof table / sizeof table[0];
    return table;
}

const tw_format *tw_format_find(const char *name)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i]->name, name) == 0)
            return table[i];
    }
    return NULL;
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
    static const char *const prefixes[] = {"top", "acc", "ap", "map", "f1", "precision", "recall", "hmean",
                                           "miou", "iou", "bleu", "rouge", "auc", "dice", "kappa"};
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

int tw_emit_fields(tw_parser *p, const tw_line *line, tw_record_kind kind, const char *text,
                   size_t len)
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
