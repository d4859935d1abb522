/*
 * fmt_megatron.c: Megatron-LM training log lines.
 *
 *   iteration      100/  500000 | consumed samples: 51200 | elapsed time per
 *   iteration (ms): 1234.5 | learning rate: 1.500E-04 | global batch size: 512 |
 *   lm loss: 7.123E+00 | loss scale: 65536.0 | grad norm: 1.234 | number of
 *   skipped iterations: 0 | number of nan iterations: 0 |
 *
 * Fields are '|'-separated and keys contain spaces, so each segment is split
 * at its last ':' and the whole key goes through the synonym table.
 */
#include <string.h>

#include "formats.h"

static bool detect(const tw_line *line)
{
    const char *s = line->body;
    size_t n = line->body_len;
    return tw_find(s, n, "iteration ") && tw_find(s, n, " | ") &&
           (tw_find(s, n, "lm loss") || tw_find(s, n, "elapsed time per iteration"));
}

static void apply_segment(tw_record *r, const char *s, const char *end)
{
    while (s < end && *s == ' ')
        s++;
    const char *colon = NULL;
    for (const char *p = s; p < end; p++) {
        if (*p == ':')
            colon = p;
    }
    if (!colon)
        return;
    const char *kend = colon;
    while (kend > s && kend[-1] == ' ')
        kend--;
    tw_kv kv = {.key = s, .key_len = (size_t)(kend - s), .end = end};
    const char *v = colon + 1;
    while (v < end && *v == ' ')
        v++;
    kv.value = v;
    size_t n = tw_scan_number(v, end, &kv.number);
    if (!n)
        return;
    kv.value_len = n;
    if (kv.key_len == 31 && memcmp(s, "elapsed time per iteration (ms)", 31) == 0) {
        r->batch_time = kv.number / 1000.0;
        r->fields |= TW_F_BATCH_TIME;
        return;
    }
    if (kv.key_len == 24 && memcmp(s, "number of nan iterations", 24) == 0) {
        tw_record_set_metric(r, "nan_iterations", 14, kv.number);
        return;
    }
    tw_fields_apply(r, &kv);
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    const char *s = line->body;
    size_t n = line->body_len;
    const char *end = s + n;
    const char *at = tw_find(s, n, "iteration ");
    if (!at || !tw_find(s, n, " | "))
        return 0;
    tw_record r;
    tw_record_init(&r);
    long long a, b;
    const char *q = at + 10;
    size_t m = tw_scan_fraction(q, end, &a, &b);
    if (!m)
        return 0;
    r.global_step = a;
    r.step_total = b;
    q += m;
    while (q < end) {
        const char *bar = memchr(q, '|', (size_t)(end - q));
        const char *seg_end = bar ? bar : end;
        apply_segment(&r, q, seg_end);
        q = bar ? bar + 1 : end;
    }
    return tw_emit_step(p, line, &r, 0);
}

static const char *const anchors[] = {"iteration ", NULL};

const tw_format tw_format_megatron = {
    .name = "megatron",
    .summary = "Megatron-LM iteration lines (iteration N/ M | lm loss: ... | ...)",
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
};
