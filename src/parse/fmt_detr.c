/*
 * fmt_detr.c: the log.txt of DETR's training engine and of the detectors
 * built on it (Deformable, Conditional, DAB, DN, DINO DETR): one JSON
 * object per epoch, written by main.py after the epoch's evaluation:
 *
 *   {"train_lr": 0.0001, "train_class_error": 41.6, "train_loss": 18.22,
 *    "train_loss_ce": 1.04, ..., "test_loss": 14.36, ...,
 *    "test_coco_eval_bbox": [0.043, 0.101, ...], "epoch": 0, "n_parameters": 43196001}
 *
 * Each line is a step at its epoch (the train_ averages: loss, lr and the
 * loss terms) and an evaluation (the test_ losses and the first COCO value,
 * bbox AP). The per-decoder-layer copies (loss_ce_0 ... loss_ce_4) and the
 * unscaled twins are left out: the record keeps the terms of the last layer,
 * which the model's output is.
 */
#include <stdlib.h>
#include <string.h>

#include "../core/json.h"
#include "formats.h"

static bool detect(const tw_line *line)
{
    return line->len > 16 && tw_starts_with(line->text, line->len, "{\"train_") &&
           line->text[line->len - 1] == '}';
}

/* A term worth a metric: not a layer's copy ("_3") nor an unscaled twin. */
static bool kept_term(const char *name)
{
    size_t n = strlen(name);
    if (n > 9 && strcmp(name + n - 9, "_unscaled") == 0)
        return false;
    return !(n > 2 && name[n - 2] == '_' && tw_is_digit(name[n - 1]));
}

static void add_term(tw_record *r, const char *name, double value)
{
    if (strcmp(name, "loss") == 0) {
        r->loss = value;
        r->fields |= TW_F_LOSS;
        if (r->kind == TW_REC_EVAL) /* an evaluation keeps its loss as a result */
            tw_record_set_metric(r, name, 4, value);
    } else if (strcmp(name, "lr") == 0) {
        r->lr = value;
        r->fields |= r->kind == TW_REC_STEP ? TW_F_LR : 0;
    } else if (kept_term(name)) {
        tw_record_set_metric(r, name, strlen(name), value);
    }
}

/* The first number of "KEY": [ ... ] in the line, as metric name on r. */
static void first_of_list(tw_record *r, const tw_line *line, const char *key, const char *name)
{
    const char *at = tw_find(line->text, line->len, key);
    if (!at)
        return;
    const char *end = line->text + line->len, *p = at + strlen(key);
    while (p < end && (*p == ' ' || *p == ':' || *p == '['))
        p++;
    char *stop;
    double v = strtod(p, &stop);
    if (stop != p && stop < end)
        tw_record_set_metric(r, name, strlen(name), v);
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    if (!detect(line))
        return 0;
    tw_json_reader reader;
    tw_json_member m;
    if (!tw_json_begin(&reader, line->text, line->len))
        return 0;
    tw_record step, eval;
    tw_record_init(&step);
    tw_record_init(&eval);
    step.kind = TW_REC_STEP;
    eval.kind = TW_REC_EVAL;
    int64_t epoch = -1;
    for (tw_json_type t; (t = tw_json_next(&reader, &m)) != TW_JSON_END && t != TW_JSON_ERROR;) {
        if (t == TW_JSON_OBJECT)
            return 0; /* not DETR's flat object */
        if (t != TW_JSON_NUMBER)
            continue;
        if (strncmp(m.key, "train_", 6) == 0)
            add_term(&step, m.key + 6, m.number);
        else if (strncmp(m.key, "test_", 5) == 0)
            add_term(&eval, m.key + 5, m.number);
        else if (strcmp(m.key, "epoch") == 0 && m.number >= 0 && m.number < 1e9)
            epoch = (int64_t)m.number;
    }
    if (epoch < 0 || !(step.fields & TW_F_LOSS))
        return 0;
    first_of_list(&eval, line, "\"test_coco_eval_bbox\"", "bbox/AP");
    step.epoch = eval.epoch = epoch;
    step.global_step = eval.global_step = epoch;
    int n = tw_emit_step(p, line, &step, 0);
    return n + tw_emit_eval(p, line, &eval);
}

static const char *const anchors[] = {"{\"train_", NULL};

const tw_format tw_format_detr = {
    .name = "detr",
    .summary = "DETR-family log.txt (DETR, Deformable/Conditional/DAB/DINO DETR): one JSON object per epoch",
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
};
