/*
 * fmt_ppcls.c: PaddleClas trainer lines.
 *
 *   ppcls INFO: [Train][Epoch 24/120][Iter: 0/304]lr(PiecewiseDecay): 0.00100000,
 *     top1: 1.00000, CELoss: 0.01757, loss: 0.01757, batch_cost: 0.61280s,
 *     reader_cost: 0.12493, ips: 26.10981 samples/s, eta: 5:01:10
 *   ppcls INFO: [Eval][Epoch 24][Avg]CELoss: 0.3, loss: 0.3, top1: 0.91, top5: 0.99
 *
 * "[Train][...][Avg]" lines summarise an epoch already seen step by step.
 */
#include "formats.h"

static bool detect(const tw_line *line)
{
    return tw_find(line->body, line->body_len, "[Train][Epoch ") ||
           tw_find(line->body, line->body_len, "[Eval][Epoch ");
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    const char *s = line->body;
    size_t n = line->body_len;
    const char *end = s + n;
    const char *at = tw_find(s, n, "[Train][Epoch ");
    bool eval = false;
    if (!at) {
        at = tw_find(s, n, "[Eval][Epoch ");
        if (!at)
            return 0;
        eval = true;
    }
    const char *q = at + (eval ? 13 : 14);
    tw_record r;
    tw_record_init(&r);
    long long a, b;
    size_t m = tw_scan_fraction(q, end, &a, &b);
    if (m) {
        r.epoch = a;
        r.epoch_total = b;
    } else if (tw_scan_uint(q, end, &a)) {
        r.epoch = a;
    }
    bool avg = tw_find(q, (size_t)(end - q), "[Avg]") != NULL;
    if (eval && !avg)
        return -1; /* per-batch eval progress */
    if (!eval && avg)
        return -1;
    const char *iter = tw_find(q, (size_t)(end - q), "[Iter: ");
    if (iter && tw_scan_fraction(iter + 7, end, &a, &b)) {
        r.step = a;
        r.step_total = b;
    }
    const char *body = tw_find(q, (size_t)(end - q), "]");
    while (body && body + 1 < end && body[1] == '[') {
        const char *next = tw_find(body + 1, (size_t)(end - body - 1), "]");
        body = next;
    }
    if (!body)
        return 0;
    body++;
    tw_fields_scan(&r, body, (size_t)(end - body));
    if (eval) {
        if (tw_has(&r, TW_F_LOSS))
            tw_record_set_metric(&r, "loss", 4, r.loss);
        return tw_emit_eval(p, line, &r);
    }
    return tw_emit_step(p, line, &r, 0);
}

static const char *const anchors[] = {"[Train][Epoch ", "[Eval][Epoch ", NULL};

const tw_format tw_format_ppcls = {
    .name = "ppcls",
    .summary = "PaddleClas trainer lines ([Train][Epoch e/n][Iter: i/m] ..., [Eval][...][Avg])",
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
};
