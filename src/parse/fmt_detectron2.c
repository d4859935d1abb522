/*
 * fmt_detectron2.c: detectron2 CommonMetricPrinter lines.
 *
 *   [01/01 12:00:00 d2.utils.events]:  eta: 0:10:00  iter: 19  total_loss: 2.0
 *     loss_cls: 0.9  loss_box_reg: 0.4  time: 0.5012  data_time: 0.0100
 *     lr: 0.00019981  max_mem: 3012M
 *
 * "iter" counts across the run. metrics.json is handled by the json format.
 */
#include "formats.h"

static bool detect(const tw_line *line)
{
    const char *s = line->text;
    size_t n = line->len;
    return tw_find(s, n, "d2.utils.events") ||
           (tw_find(s, n, "iter: ") && tw_find(s, n, "total_loss: "));
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    if (!detect(line))
        return 0;
    tw_record r;
    tw_record_init(&r);
    tw_fields_scan(&r, line->body, line->body_len);
    tw_record_step_is_global(&r);
    /* the loop's closing line after a failure in the first iteration has no
     * loss and no time, only "iter: 0  lr: N/A  max_mem: 22043M": still a
     * step report (where it failed, and its memory) */
    if (r.global_step >= 0 && tw_has(&r, TW_F_MEM) && !tw_record_is_step_like(&r) &&
        tw_find(line->text, line->len, "d2.utils.events")) {
        r.kind = TW_REC_STEP;
        tw_parser_emit(p, line, &r);
        return 1;
    }
    return tw_emit_step(p, line, &r, -1);
}

static const char *const anchors[] = {"d2.utils.events", "total_loss: ", NULL};

const tw_format tw_format_detectron2 = {
    .name = "detectron2",
    .summary = "detectron2 event lines (d2.utils.events: iter: N total_loss: ... time: ...)",
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
};
