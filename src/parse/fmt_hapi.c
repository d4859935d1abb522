/*
 * fmt_hapi.c: PaddlePaddle hapi Model.fit ProgBarLogger output.
 *
 *   Epoch 1/10
 *   step  10/938 [====>....] - loss: 0.5420 - acc: 0.8203 - ETA: 13s - 23ms/step
 *   Eval begin...
 *   step 196/196 - loss: 0.5715 - acc: 0.7406 - 3ms/step
 *   Eval samples: 6250
 *
 * Verbose 1 rewrites the bar in place; in a notebook or a file the rewrites
 * can end up on one line ("...14ms/stepstep 938/938 ..."), so every "step
 * a/b" in a line starts its own record. Step lines between "Eval begin..."
 * and "Eval samples" are evaluation results.
 */
#include <string.h>

#include "formats.h"

typedef struct hapi_state {
    long long epoch, epoch_total;
    bool in_eval;
    bool in_predict;
} hapi_state;

static bool detect(const tw_line *line)
{
    const char *s = line->body;
    size_t n = line->body_len;
    return tw_starts_with(s, n, "step ") || tw_starts_with(s, n, "Epoch ") ||
           tw_starts_with(s, n, "Eval begin") || tw_starts_with(s, n, "Predict begin") ||
           tw_starts_with(s, n, "Eval samples") || tw_starts_with(s, n, "Predict samples");
}

/* "23ms/step", "1s/step", "622us/step": the last token of a step line. */
static void parse_step_time(tw_record *r, const char *s, const char *end)
{
    const char *slash = NULL;
    for (const char *p = s; p + 5 <= end; p++) {
        if (memcmp(p, "/step", 5) == 0)
            slash = p;
    }
    if (!slash)
        return;
    const char *num = slash;
    while (num > s && (tw_is_alpha(num[-1])))
        num--;
    const char *unit = num;
    while (num > s && (tw_is_digit(num[-1]) || num[-1] == '.'))
        num--;
    double v;
    if (num == unit || !tw_scan_number(num, unit, &v))
        return;
    size_t ulen = (size_t)(slash - unit);
    double scale = 1;
    if (ulen == 2 && memcmp(unit, "ms", 2) == 0)
        scale = 1e-3;
    else if (ulen == 2 && memcmp(unit, "us", 2) == 0)
        scale = 1e-6;
    r->batch_time = v * scale;
    r->fields |= TW_F_BATCH_TIME;
}

static int parse_one(tw_parser *p, hapi_state *st, const tw_line *line, const char *s,
                     const char *end)
{
    long long a, b;
    size_t n = tw_scan_fraction(s + 5, end, &a, &b);
    if (!n)
        return 0;
    if (st->in_predict)
        return -1;
    tw_record r;
    tw_record_init(&r);
    r.step = a;
    r.step_total = b;
    if (st->epoch > 0) {
        r.epoch = st->epoch;
        r.epoch_total = st->epoch_total;
    }
    const char *rest = s + 5 + n;
    tw_fields_scan(&r, rest, (size_t)(end - rest));
    parse_step_time(&r, rest, end);
    if (st->in_eval) {
        if (tw_has(&r, TW_F_LOSS))
            tw_record_set_metric(&r, "loss", 4, r.loss);
        return tw_emit_eval(p, line, &r);
    }
    r.kind = TW_REC_STEP;
    tw_parser_emit(p, line, &r);
    return 1;
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    hapi_state *st = state;
    const char *s = line->body;
    size_t len = line->body_len;
    const char *end = s + len;
    if (tw_starts_with(s, len, "Epoch ")) {
        long long a, b;
        if (!tw_scan_fraction(s + 6, end, &a, &b))
            return 0;
        st->epoch = a;
        st->epoch_total = b;
        st->in_eval = st->in_predict = false;
        return -1;
    }
    if (tw_starts_with(s, len, "Eval begin")) {
        st->in_eval = true;
        return -1;
    }
    if (tw_starts_with(s, len, "Predict begin")) {
        st->in_predict = true;
        return -1;
    }
    if (tw_starts_with(s, len, "Eval samples") || tw_starts_with(s, len, "Predict samples")) {
        st->in_eval = st->in_predict = false;
        return -1;
    }
    if (!tw_starts_with(s, len, "step "))
        return 0;
    int total = 0;
    const char *at = s;
    while (at) {
        const char *next = tw_find(at + 5, (size_t)(end - at - 5), "step ");
        /* "step " inside "ms/step " is a unit, not a new record */
        while (next && next[-1] == '/')
            next = tw_find(next + 5, (size_t)(end - next - 5), "step ");
        int n = parse_one(p, st, line, at, next ? next : end);
        if (n > 0)
            total += n;
        else if (n < 0 && total == 0)
            total = -1;
        at = next;
    }
    return total;
}

/* "Epoch e/n" resets all of the state: replaying the last one before a
 * block read on another thread gives that block its epoch. */
static const char *const state_lines[] = {"Epoch ", NULL};

const tw_format tw_format_hapi = {
    .name = "hapi",
    .summary = "PaddlePaddle hapi Model.fit progress (ProgBarLogger, verbose 1 and 2)",
    .state_size = sizeof(hapi_state),
    .detect = detect,
    .parse = parse,
    .state_lines = state_lines,
};
