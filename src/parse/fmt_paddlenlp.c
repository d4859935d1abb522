/*
 * fmt_paddlenlp.c: PaddleNLP Trainer log lines.
 *
 *   [2024-03-03 18:06:33,568] [    INFO] - loss: 1.08327329, learning_rate: 4e-08,
 *     global_step: 1, interval_runtime: 4.8704, interval_samples_per_second: 6.57,
 *     interval_steps_per_second: 0.205, progress_or_epoch: 0.0008
 *   [2024-03-03 18:10:00,001] [    INFO] - eval_loss: 0.51, eval_accuracy: 0.83, ...
 *
 * Step time is 1 / interval_steps_per_second; memory is printed in GB.
 */
#include <string.h>

#include "formats.h"

static const char *message(const tw_line *line, size_t *len)
{
    const char *s = line->body;
    size_t n = line->body_len;
    const char *dash = tw_find(s, n, "] - ");
    if (!dash || s[0] != '[')
        return NULL;
    *len = n - (size_t)(dash + 4 - s);
    return dash + 4;
}

static bool detect(const tw_line *line)
{
    size_t len;
    const char *m = message(line, &len);
    return m && (tw_find(m, len, "global_step: ") || tw_starts_with(m, len, "eval_"));
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    size_t len;
    const char *m = message(line, &len);
    if (!m)
        return 0;
    if (tw_starts_with(m, len, "eval_")) {
        tw_record r;
        tw_record_init(&r);
        tw_fields_scan(&r, m, len);
        /* keep names as printed; eval_loss is the evaluation loss */
        r.fields = 0;
        return tw_emit_eval(p, line, &r);
    }
    if (!tw_find(m, len, "global_step: "))
        return 0;
    return tw_emit_fields(p, line, TW_REC_STEP, m, len);
}

static const char *const anchors[] = {"] - ", NULL};

const tw_format tw_format_paddlenlp = {
    .name = "paddlenlp",
    .summary = "PaddleNLP Trainer lines ([ INFO] - loss: ..., global_step: ..., eval_*)",
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
};
