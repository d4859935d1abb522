/*
 * fmt_paddleseg.c: PaddleSeg trainer and evaluation lines.
 *
 *   2021-03-30 06:55:57 [INFO]	[TRAIN] epoch: 1, iter: 20/500, loss: 2.0859,
 *     lr: 0.009657, batch_cost: 0.5344, reader_cost: 0.07273, ips: 3.7425
 *     samples/sec | ETA 00:04:16
 *   2021-03-30 07:01:02 [INFO]	[EVAL] #Images: 500 mIoU: 0.3712 Acc: 0.8650 Kappa: 0.81
 *
 * "iter" counts across epochs (global); the ETA follows a '|' without a colon.
 */
#include "formats.h"

static bool detect(const tw_line *line)
{
    return tw_find(line->body, line->body_len, "[TRAIN] ") ||
           tw_find(line->body, line->body_len, "[EVAL] ");
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    const char *s = line->body;
    size_t n = line->body_len;
    const char *end = s + n;
    const char *at = tw_find(s, n, "[EVAL] ");
    if (at)
        return tw_emit_fields(p, line, TW_REC_EVAL, at + 7, (size_t)(end - at - 7));
    at = tw_find(s, n, "[TRAIN] ");
    if (!at)
        return 0;
    tw_record r;
    tw_record_init(&r);
    tw_fields_scan(&r, at + 8, (size_t)(end - at - 8));
    tw_record_step_is_global(&r);
    const char *eta = tw_find(at, (size_t)(end - at), "| ETA ");
    double secs;
    if (eta && tw_scan_duration(eta + 6, end, &secs)) {
        r.eta = secs;
        r.fields |= TW_F_ETA;
    }
    return tw_emit_step(p, line, &r, 0);
}

static const char *const anchors[] = {"[TRAIN] ", "[EVAL] ", NULL};

const tw_format tw_format_paddleseg = {
    .name = "paddleseg",
    .summary = "PaddleSeg trainer lines ([TRAIN] epoch: e, iter: i/n, ... | ETA) and [EVAL] results",
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
};
