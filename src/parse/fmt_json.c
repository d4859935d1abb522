/*
 * fmt_json.c: one JSON object (or Python dict) per line.
 *
 *   HF Trainer:        {'loss': 0.1856, 'learning_rate': 4.5e-05, 'epoch': 2.0}
 *                      {'eval_loss': 0.41, 'eval_accuracy': 0.87, 'epoch': 2.0}
 *   mmdet .log.json:   {"mode": "train", "epoch": 1, "iter": 50, "lr": 0.02,
 *                       "memory": 3000, "data_time": 0.1, "loss": 2.0, "time": 0.5}
 *   detectron2 metrics.json: {"data_time": 0.01, "iteration": 19, "lr": 0.0002,
 *                       "time": 0.5, "total_loss": 2.0, ...}  and  {"bbox/AP": 37.9, ...}
 *
 * The key/value scanner understands quoted keys, so these need no JSON tree:
 * string values are skipped, nested objects flatten to their keys. A line is
 * an evaluation when it says "mode": "val", or its keys start with eval_ or
 * carry COCO "/AP" results.
 *
 * HF Trainer's stdout dicts have no step: each is one logging interval
 * later than the one before. They take the step of the training progress
 * bar drawn before them when the log has one (tw_parser_bar_step), else
 * their order (1, 2, 3 ...), so that they are steps of a curve and not
 * one step rewritten.
 */
#include <string.h>

#include "formats.h"

typedef struct json_state {
    int64_t last_step; /* the step given to the last dict without a counter */
} json_state;

static bool detect(const tw_line *line)
{
    const char *s = line->text;
    size_t n = line->len;
    return n > 2 && s[0] == '{' && s[n - 1] == '}' && (s[1] == '"' || s[1] == '\'');
}

static bool is_eval(const char *s, size_t n)
{
    return tw_find(s, n, "\"mode\": \"val\"") || tw_find(s, n, "\"mode\":\"val\"") ||
           tw_find(s, n, "'eval_") || tw_find(s, n, "\"eval_") || tw_find(s, n, "/AP");
}

/* A step for a dict without a counter: the bar's when it moved on since
 * the last one, else one more than the last. */
static void count_step(tw_parser *p, json_state *st, tw_record *r)
{
    if (r->step >= 0 || r->global_step >= 0)
        return;
    int64_t bar = tw_parser_bar_step(p);
    st->last_step = bar > st->last_step ? bar : st->last_step + 1;
    r->global_step = st->last_step;
    r->epoch = -1; /* HF's epoch is a fraction ('epoch': 0.25), kept as the metric, not the whole epoch 0 */
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    if (!detect(line))
        return 0;
    const char *s = line->text;
    size_t n = line->len;
    if (tw_find(s, n, "train_runtime"))
        return -1; /* HF's end-of-training summary repeats the run's averages */
    if (is_eval(s, n)) {
        tw_record r;
        tw_record_init(&r);
        tw_fields_scan(&r, s, n);
        r.fields &= ~(unsigned)(TW_F_LR | TW_F_BATCH_TIME | TW_F_DATA_TIME | TW_F_ETA | TW_F_MEM);
        if (tw_has(&r, TW_F_LOSS))
            tw_record_set_metric(&r, "loss", 4, r.loss);
        return tw_emit_eval(p, line, &r);
    }
    tw_record r;
    tw_record_init(&r);
    tw_fields_scan(&r, s, n);
    /* Only mmdet (which has "mode") counts iterations within an epoch. */
    if (!tw_find(s, n, "\"mode\""))
        tw_record_step_is_global(&r);
    if (tw_record_is_step_like(&r))
        count_step(p, state, &r);
    return tw_emit_step(p, line, &r, -1);
}

const tw_format tw_format_json = {
    .name = "json",
    .summary = "JSON / Python-dict lines: HF Trainer, mmdet .log.json, detectron2 metrics.json",
    .state_size = sizeof(json_state),
    .detect = detect,
    .parse = parse,
};
