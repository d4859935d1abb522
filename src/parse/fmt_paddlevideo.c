/*
 * fmt_paddlevideo.c: PaddleVideo trainer lines.
 *
 *   epoch:[  1/25 ] train step:100  loss: 3.45068 lr: 0.010000 top1: 0.23438
 *     top5: 0.45312 batch_cost: 1.94236 sec, reader_cost: 1.53779 sec,
 *     ips: 32.94963 instance/sec.
 *   epoch:[  1/25 ] val step:0    loss: 3.27431 top1: 0.12500 ...
 *   END epoch:1   val loss_avg: 3.62249 top1_avg: 0.14896 top5_avg: 0.38984 ...
 *
 * Per-batch "val step" lines are progress; the "END epoch:N val" summary is
 * the evaluation result. "END epoch:N train" repeats the epoch's steps.
 */
#include "formats.h"

static bool detect(const tw_line *line)
{
    const char *s = line->body;
    size_t n = line->body_len;
    return (tw_find(s, n, "epoch:[") && tw_find(s, n, " step:")) || tw_find(s, n, "END epoch:");
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    const char *s = line->body;
    size_t n = line->body_len;
    const char *end = s + n;
    const char *at = tw_find(s, n, "END epoch:");
    if (at) {
        tw_record r;
        tw_record_init(&r);
        tw_fields_scan(&r, at + 4, (size_t)(end - at - 4));
        if (!tw_find(at, (size_t)(end - at), " val "))
            return -1;
        r.fields &= ~(unsigned)(TW_F_BATCH_TIME | TW_F_DATA_TIME | TW_F_SAMPLES_PER_SEC);
        return tw_emit_eval(p, line, &r);
    }
    at = tw_find(s, n, "epoch:[");
    if (!at)
        return 0;
    if (tw_find(at, (size_t)(end - at), " val step:") || tw_find(at, (size_t)(end - at), " test step:"))
        return -1;
    tw_record r;
    tw_record_init(&r);
    tw_fields_scan(&r, at, (size_t)(end - at));
    return tw_emit_step(p, line, &r, 0);
}

static const char *const anchors[] = {"epoch:[", "END epoch:", NULL};

const tw_format tw_format_paddlevideo = {
    .name = "paddlevideo",
    .summary = "PaddleVideo trainer lines (epoch:[e/n] train step:i ..., END epoch:e val ...)",
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
};
