/*
 * fmt_mmdet.c: OpenMMLab (mmdetection, mmcv runner and mmengine) text logs.
 *
 *   mmdet - INFO - Epoch [1][50/1000]	lr: 1.000e-02, eta: 1:00:00, time: 0.500,
 *     data_time: 0.100, memory: 3000, loss_cls: 1.0, loss: 2.0
 *   mmdet - INFO - Epoch(val) [1][500]	bbox_mAP: 0.3740, bbox_mAP_50: 0.5810
 *   Epoch(train)  [1][ 50/1000]  lr: 2.0e-02  eta: 0:30:00  time: 0.5  data_time: 0.1
 *     memory: 3000  loss: 2.0
 *   Iter(train) [  50/90000]  lr: ...  loss: 2.0
 *
 * memory is MB. The .log.json variant is handled by the json format.
 */
#include <string.h>

#include "formats.h"

static const char *find_marker(const char *s, size_t n, bool *eval, bool *iter_based)
{
    static const struct {
        const char *text;
        bool eval, iter;
    } markers[] = {{"Epoch(train)", false, false}, {"Epoch(val)", true, false},
                   {"Epoch(test)", true, false},   {"Iter(train)", false, true},
                   {"Iter(val)", true, true},      {"Epoch [", false, false}};
    for (size_t i = 0; i < sizeof markers / sizeof markers[0]; i++) {
        const char *at = tw_find(s, n, markers[i].text);
        if (at) {
            *eval = markers[i].eval;
            *iter_based = markers[i].iter;
            return at + strlen(markers[i].text) - (markers[i].text[6] == '[' ? 1 : 0);
        }
    }
    return NULL;
}

static bool detect(const tw_line *line)
{
    bool eval, iter;
    return find_marker(line->body, line->body_len, &eval, &iter) != NULL;
}

/* Reads "[a]" or "[a/b]"; returns the position after ']' or NULL. */
static const char *bracket(const char *s, const char *end, long long *a, long long *b)
{
    while (s < end && *s == ' ')
        s++;
    if (s >= end || *s != '[')
        return NULL;
    s++;
    *b = -1;
    size_t m = tw_scan_fraction(s, end, a, b);
    if (!m) {
        while (s < end && *s == ' ')
            s++;
        m = tw_scan_uint(s, end, a);
        if (!m)
            return NULL;
    }
    const char *close = memchr(s, ']', (size_t)(end - s));
    return close ? close + 1 : NULL;
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    const char *s = line->body;
    size_t n = line->body_len;
    const char *end = s + n;
    bool eval, iter_based;
    const char *q = find_marker(s, n, &eval, &iter_based);
    if (!q)
        return 0;
    tw_record r;
    tw_record_init(&r);
    long long a, b;
    const char *next = bracket(q, end, &a, &b);
    if (!next)
        return 0;
    if (iter_based) {
        r.global_step = a;
        r.step_total = b;
    } else {
        r.epoch = a;
        const char *after = bracket(next, end, &a, &b);
        if (after) {
            r.step = a;
            r.step_total = b;
            next = after;
        }
    }
    tw_fields_scan(&r, next, (size_t)(end - next));
    if (eval) {
        r.fields = 0;
        return tw_emit_eval(p, line, &r);
    }
    return tw_emit_step(p, line, &r, 0);
}

static const char *const anchors[] = {"Epoch(", "Iter(", "Epoch [", NULL};

const tw_format tw_format_mmdet = {
    .name = "mmdet",
    .summary = "OpenMMLab text logs (Epoch [e][i/n], Epoch(train)/(val), Iter(train))",
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
};
