/*
 * fmt_ppocr.c: PaddleOCR trainer lines (tools/program.py), both eras:
 *
 *   ppocr INFO: epoch: [3/500], global_step: 500, lr: 0.005000, loss: 0.609742,
 *     loss_shrink_maps: ..., avg_reader_cost: 1.81 s, avg_batch_cost: 2.03 s,
 *     avg_samples: 16.0, ips: 7.86 samples/s, eta: 2 days, 20:01:28,
 *     max_mem_reserved: 11326 MB
 *   root INFO: epoch: [0/500], iter: 10, lr: 0.001000, ..., reader_cost: ...
 *   ppocr INFO: cur metric, precision: 0.5, recall: 0.4, hmean: 0.45, fps: ...
 *
 * In the 2.0 era "iter" counts across epochs, so it is the global step.
 * "best metric" lines repeat an earlier evaluation and are not new results.
 */
#include <string.h>

#include "formats.h"

static int parse_step(tw_parser *p, const tw_line *line, const char *e, size_t n);

static bool detect(const tw_line *line)
{
    const char *s = line->body;
    size_t n = line->body_len;
    if (!memchr(s, ':', n))
        return false;
    return (tw_find(s, n, "epoch: [") &&
            (tw_find(s, n, "global_step: ") || tw_find(s, n, "iter: "))) ||
           tw_find(s, n, "cur metric") || tw_find(s, n, "cur metirc") ||
           tw_find(s, n, "best metric") || tw_find(s, n, "best metirc");
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    const char *s = line->body;
    size_t n = line->body_len;
    const char *e = tw_find(s, n, "epoch: [");
    if (e)
        return parse_step(p, line, e, n - (size_t)(e - s));
    /* "cur metric" and "best metric" (and the 2.0 era's "metirc") */
    const char *m = tw_find(s, n, " met");
    if (!m || m + 7 > s + n || !(memcmp(m + 4, "ric", 3) == 0 || memcmp(m + 4, "irc", 3) == 0))
        return 0;
    if (m - 3 >= s && memcmp(m - 3, "cur", 3) == 0)
        return tw_emit_fields(p, line, TW_REC_EVAL, m + 7, n - (size_t)(m + 7 - s));
    if (m - 4 >= s && memcmp(m - 4, "best", 4) == 0)
        return -1;
    return 0;
}

static int parse_step(tw_parser *p, const tw_line *line, const char *e, size_t n)
{
    tw_record r;
    tw_record_init(&r);
    tw_fields_scan(&r, e, n);
    tw_record_step_is_global(&r);
    return tw_emit_step(p, line, &r, 0);
}

static const char *const anchors[] = {"epoch: [", "cur metric", "cur metirc", "best metric", "best metirc", NULL};

const tw_format tw_format_ppocr = {
    .name = "ppocr",
    .summary = "PaddleOCR trainer lines (epoch: [a/b], global_step/iter, avg_reader_cost, cur metric)",
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
};
