/*
 * fmt_detectron2.c: detectron2 CommonMetricPrinter lines.
 *
 *   [01/01 12:00:00 d2.utils.events]:  eta: 0:10:00  iter: 19  total_loss: 2.0
 *     loss_cls: 0.9  loss_box_reg: 0.4  time: 0.5012  data_time: 0.0100
 *     lr: 0.00019981  max_mem: 3012M
 *
 * "iter" counts across the run. metrics.json is handled by the json format.
 * Two lines of the launcher's own say where a launch starts and what it
 * starts from:
 *
 *   [11/16 04:44:52] detectron2 INFO: Rank of current process: 0. World size: 6
 *   [11/16 04:45:00] d2.engine.train_loop INFO: Starting training from iteration 5500
 *
 * the first a launch's start line, the second a resume when the iteration
 * is not 0 (the trainer loaded a checkpoint's iteration).
 */
#include "formats.h"

static const char rank_line[] = "Rank of current process: ";
static const char start_line[] = "Starting training from iteration ";

/* Where a launch or resume line's message starts, NULL when the line is none. */
static const char *launch_line(const tw_line *line, tw_event_kind *kind)
{
    const char *s = line->text;
    const char *at = tw_find(s, line->len, rank_line);
    *kind = TW_EV_LAUNCH;
    if (at && tw_find(s, (size_t)(at - s), "detectron2"))
        return at;
    at = tw_find(s, line->len, start_line);
    *kind = TW_EV_RESUME;
    return at && tw_find(s, (size_t)(at - s), "d2.engine.train_loop") ? at : NULL;
}

static bool step_line(const tw_line *line)
{
    const char *s = line->text;
    size_t n = line->len;
    return tw_find(s, n, "d2.utils.events") || (tw_find(s, n, "iter: ") && tw_find(s, n, "total_loss: "));
}

static bool detect(const tw_line *line)
{
    tw_event_kind kind;
    return step_line(line) || launch_line(line, &kind);
}

/* A resume from iteration 0 is a start from scratch: no event. */
static int emit_launch_line(tw_parser *p, const tw_line *line, const char *at, tw_event_kind kind)
{
    const char *end = line->text + line->len;
    long long iter = 0;
    if (kind == TW_EV_RESUME && (!tw_scan_uint(at + sizeof start_line - 1, end, &iter) || iter == 0))
        return -1;
    return tw_events_emit(p, line, kind, at, (size_t)(end - at), NULL, 0);
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    if (!step_line(line)) {
        tw_event_kind kind;
        const char *at = launch_line(line, &kind);
        return at ? emit_launch_line(p, line, at, kind) : 0;
    }
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

static const char *const anchors[] = {"d2.utils.events", "total_loss: ", rank_line, start_line, NULL};

const tw_format tw_format_detectron2 = {
    .name = "detectron2",
    .summary = "detectron2 event lines (d2.utils.events: iter: N total_loss: ... time: ...)",
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
};
