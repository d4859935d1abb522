/*
 * fmt_ppdet.c: PaddleDetection (ppdet) trainer lines and COCO eval output.
 *
 *   ppdet.engine INFO: Epoch: [0] [200/464] learning_rate: 0.000010
 *     loss_class: 0.17 ... loss: 34.68 eta: 4:07:18 batch_cost: 0.4416
 *     data_cost: 0.0002 ips: 4.5291 images/s, max_mem_reserved: 42653 MB
 *   Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.026
 *   ppdet.engine INFO: Best test bbox ap is 0.026.
 *
 * Pairs are space-separated; the step is the second bracket, not a key.
 */
#include <string.h>

#include "formats.h"

static const char coco_ap[] = "Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all";
static const char best_ap[] = "Best test bbox ap is ";

/* "Epoch: [0] [200/464]": the step bracket follows the epoch's. */
static bool step_line(const char *s, size_t n, const char *e)
{
    const char *close = memchr(e, ']', n - (size_t)(e - s));
    return close && close + 2 < s + n && close[1] == ' ' && close[2] == '[';
}

static bool detect(const tw_line *line)
{
    const char *s = line->body;
    size_t n = line->body_len;
    const char *e = tw_find(s, n, "Epoch: [");
    if (e)
        return step_line(s, n, e);
    return tw_find(s, n, coco_ap) || tw_find(s, n, best_ap);
}

static int parse_step(tw_parser *p, const tw_line *line, const char *q, const char *end)
{
    tw_record r;
    tw_record_init(&r);
    long long epoch, a, b;
    if (!tw_scan_uint(q, end, &epoch))
        return 0;
    r.epoch = epoch;
    const char *second = memchr(q, '[', (size_t)(end - q));
    if (second) {
        size_t m = tw_scan_fraction(second + 1, end, &a, &b);
        if (m) {
            r.step = a;
            r.step_total = b;
            q = second + 1 + m;
        }
    }
    tw_fields_scan(&r, q, (size_t)(end - q));
    return tw_emit_step(p, line, &r, 0);
}

static int parse_eval(tw_parser *p, const tw_line *line, const char *name, const char *num)
{
    double v;
    if (!tw_scan_number(num, line->text + line->len, &v))
        return 0;
    tw_record r;
    tw_record_init(&r);
    tw_record_set_metric(&r, name, strlen(name), v);
    return tw_emit_eval(p, line, &r);
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    const char *s = line->body;
    size_t n = line->body_len;
    const char *end = s + n;
    /* the step line first: it is most lines, and one search decides it */
    const char *at = tw_find(s, n, "Epoch: [");
    if (at && step_line(s, n, at))
        return parse_step(p, line, at + 8, end);
    at = tw_find(s, n, coco_ap);
    if (at) {
        const char *eq = memchr(at, '=', (size_t)(end - at));
        eq = eq ? tw_find(eq, (size_t)(end - eq), "] = ") : NULL;
        return eq ? parse_eval(p, line, "bbox_mAP", eq + 4) : 0;
    }
    at = tw_find(s, n, best_ap);
    return at ? parse_eval(p, line, "best_bbox_ap", at + strlen(best_ap)) : 0;
}

static const char *const anchors[] = {"Epoch: [", "Average Precision", "Best test bbox", NULL};

const tw_format tw_format_ppdet = {
    .name = "ppdet",
    .summary = "PaddleDetection trainer lines (Epoch: [e] [i/n] ... data_cost) and COCO AP",
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
};
