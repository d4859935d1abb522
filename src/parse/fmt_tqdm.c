/*
 * fmt_tqdm.c: tqdm progress bars, including PyTorch Lightning's.
 *
 *   Epoch 0:  45%|████▌     | 450/1000 [00:30<00:37, 14.92it/s, loss=0.123, v_num=0]
 *   Validation DataLoader 0: 100%|██████████| 50/50 [00:01<00:00, 40.1it/s]
 *   45%|████▌     | 450/1000 [00:30<00:37,  1.49s/it, loss=0.5]
 *
 * The parser splits '\r' rewrites into separate lines before this sees them.
 * A bar becomes a step record only when it carries a loss; validation bars
 * are progress, not results. A training bar without a loss (HuggingFace
 * Trainer's, whose losses come as dict lines, fmt_json.c) leaves its step
 * with the parser for the next record that has no counter.
 */
#include <string.h>

#include "formats.h"

static bool detect(const tw_line *line)
{
    const char *s = line->body;
    size_t n = line->body_len;
    return tw_find(s, n, "%|") && (tw_find(s, n, "it/s") || tw_find(s, n, "s/it"));
}

static void parse_rate(tw_record *r, const char *s, const char *end)
{
    const char *u = tw_find(s, (size_t)(end - s), "it/s");
    bool per_second = u != NULL;
    if (!u)
        u = tw_find(s, (size_t)(end - s), "s/it");
    if (!u)
        return;
    const char *num = u;
    while (num > s && (tw_is_digit(num[-1]) || num[-1] == '.'))
        num--;
    double v;
    if (num == u || !tw_scan_number(num, u, &v) || v <= 0)
        return;
    r->batch_time = per_second ? 1.0 / v : v;
    r->fields |= TW_F_BATCH_TIME;
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    const char *s = line->body;
    size_t n = line->body_len;
    const char *end = s + n;
    const char *bar = tw_find(s, n, "%|");
    if (!bar)
        return 0;
    if (tw_find_ci(s, (size_t)(bar - s), "validat") || tw_find_ci(s, (size_t)(bar - s), "test") ||
        tw_find_ci(s, (size_t)(bar - s), "predict"))
        return -1;
    tw_record r;
    tw_record_init(&r);
    long long a, b;
    const char *ep = tw_find(s, (size_t)(bar - s), "Epoch ");
    if (ep && tw_scan_uint(ep + 6, bar, &a))
        r.epoch = a;
    const char *pipe = memchr(bar + 2, '|', (size_t)(end - bar - 2));
    if (!pipe)
        return -1;
    size_t m = tw_scan_fraction(pipe + 1, end, &a, &b);
    if (m) {
        r.step = a;
        r.step_total = b;
    }
    const char *br = memchr(pipe, '[', (size_t)(end - pipe));
    if (br) {
        parse_rate(&r, br, end);
        const char *comma = memchr(br, ',', (size_t)(end - br));
        if (comma)
            tw_fields_scan(&r, comma, (size_t)(end - comma));
    }
    if (!tw_has(&r, TW_F_LOSS)) {
        /* HF Trainer's bar: its loss comes in a dict line after it */
        if (m)
            tw_parser_bar_step_hint(p, a);
        return -1;
    }
    tw_parser_emit(p, line, &r);
    return 1;
}

static const char *const anchors[] = {"%|", NULL};

const tw_format tw_format_tqdm = {
    .name = "tqdm",
    .summary = "tqdm / PyTorch Lightning progress bars with loss=... postfix",
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
};
