/*
 * fmt_olmo.c: OLMo / AI2 trainer logs, one header then indented metrics.
 *
 *   2025-12-27 22:14:36.270	host:0	olmo.train:990	INFO	[step=30/10000,epoch=0]
 *       optim/total_grad_norm=1.014
 *       train/CrossEntropyLoss=7.643
 *       throughput/device/tokens_per_second=105,488
 *       System/Peak GPU Memory (MB)=38,869
 *
 * The record is held in the per-input state until the next unindented line
 * (or the end of input) and then emitted; eval/ metrics form an eval record.
 * Keys keep their spaces, so a line is split at its '='.
 */
#include <string.h>

#include "formats.h"

typedef struct olmo_state {
    bool pending;
    tw_record step;
    tw_record eval;
    tw_line line;          /* header line's source and time */
} olmo_state;

static bool detect(const tw_line *line)
{
    return tw_find(line->text, line->len, "[step=") != NULL;
}

static int flush(tw_parser *p, olmo_state *st)
{
    if (!st->pending)
        return 0;
    st->pending = false;
    int n = 0;
    if (tw_has(&st->step, TW_F_LOSS)) {
        tw_parser_emit(p, &st->line, &st->step);
        n++;
    }
    if (st->eval.metric_count > 0)
        n += tw_emit_eval(p, &st->line, &st->eval);
    return n;
}

static void apply_metric(olmo_state *st, const char *s, size_t len)
{
    const char *eq = memchr(s, '=', len);
    if (!eq)
        return;
    const char *end = s + len;
    tw_kv kv = {.key = s, .key_len = (size_t)(eq - s), .value = eq + 1, .end = end};
    if (!tw_scan_number(eq + 1, end, &kv.number))
        return;
    if (tw_starts_with(s, len, "eval/")) {
        tw_record_set_metric(&st->eval, s + 5, kv.key_len - 5, kv.number);
        return;
    }
    if (kv.key_len == 36 && memcmp(s, "throughput/device/batches_per_second", 36) == 0 && kv.number > 0) {
        st->step.batch_time = 1.0 / kv.number;
        st->step.fields |= TW_F_BATCH_TIME;
        return;
    }
    if (tw_fields_apply(&st->step, &kv))
        return;
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    olmo_state *st = state;
    const char *s = line->text;
    size_t n = line->len;
    if (st->pending && n > 4 && memcmp(s, "    ", 4) == 0) {
        apply_metric(st, s + 4, n - 4);
        return -1;
    }
    int flushed = flush(p, st);
    const char *at = tw_find(s, n, "[step=");
    if (!at)
        return flushed;
    tw_record_init(&st->step);
    tw_record_init(&st->eval);
    const char *end = s + n;
    long long a, b;
    if (!tw_scan_fraction(at + 6, end, &a, &b))
        return flushed;
    st->step.global_step = a;
    st->step.step_total = b;
    st->eval.global_step = a;
    const char *ep = tw_find(at, (size_t)(end - at), "epoch=");
    if (ep && tw_scan_uint(ep + 6, end, &a))
        st->step.epoch = st->eval.epoch = a;
    st->line = *line;
    st->line.text = st->line.body = NULL; /* only the source and time outlive the line */
    st->line.len = st->line.body_len = 0;
    st->pending = true;
    return flushed > 0 ? flushed : -1;
}

static void finish(tw_parser *p, void *state) { flush(p, state); }

static const char *const anchors[] = {"[step=", NULL};

/* Records in the making hold old metric slots: only idle states compare. */
static bool same_state(const void *a, const void *b)
{
    const olmo_state *x = a, *y = b;
    return !x->pending && !y->pending;
}

const tw_format tw_format_olmo = {
    .name = "olmo",
    .summary = "OLMo trainer logs ([step=N/M,epoch=E] then indented key=value metrics)",
    .state_size = sizeof(olmo_state),
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
    .finish = finish,
    .same_state = same_state,
};
