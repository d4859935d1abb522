/*
 * fmt_kv.c: the fallback: any line of "key: value" or "key=value" pairs that
 * looks like a training step (a loss with a counter, or a counter with a
 * step time or learning rate).
 *
 *   epoch 3 step=120 loss=0.4312 lr=0.001 step_time=0.21
 *   Epoch: 1, Iter: 200/1000, loss: 0.53, time: 0.2s
 */
#include <string.h>

#include "formats.h"

/* A Python config dump (mmcv's Config.pretty_text, a dict printed at start):
 * "nms=dict(type='nms', iou_threshold=0.7)," carries settings, not results. */
static bool is_config_line(const tw_line *line)
{
    return tw_find(line->body, line->body_len, "dict(") != NULL;
}

static bool detect(const tw_line *line)
{
    return (memchr(line->body, ':', line->body_len) || memchr(line->body, '=', line->body_len)) &&
           !is_config_line(line);
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    bool eval = tw_text_is_eval(line->body, line->body_len);
    return tw_emit_fields(p, line, eval ? TW_REC_EVAL : TW_REC_STEP, line->body, line->body_len);
}

const tw_format tw_format_kv = {
    .name = "kv",
    .summary = "generic key: value / key=value lines that carry a loss and a step counter",
    .detect = detect,
    .parse = parse,
    .fallback = true,
};
