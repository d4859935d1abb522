/*
 * fmt_deepspeed.c: DeepSpeed engine log lines.
 *
 *   [2023-05-03 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=10,
 *     skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]
 *   [Rank 0] steps: 10 loss: 0.1234 iter time (s): 0.567 samples/sec: 56.4
 *
 * The rank comes from "[Rank N]"; "iter time (s)" is the step time.
 */
#include <string.h>

#include "formats.h"

static bool detect(const tw_line *line)
{
    const char *s = line->body;
    size_t n = line->body_len;
    return tw_find(s, n, "[Rank ") &&
           (tw_find(s, n, "step=") || tw_find(s, n, "steps: ") || tw_find(s, n, "loss"));
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    (void)state;
    const char *s = line->body;
    size_t n = line->body_len;
    const char *end = s + n;
    const char *at = tw_find(s, n, "[Rank ");
    if (!at)
        return 0;
    tw_record r;
    tw_record_init(&r);
    long long rank;
    if (tw_scan_uint(at + 6, end, &rank))
        r.rank = tw_rank_value(rank);
    const char *body = memchr(at, ']', (size_t)(end - at));
    if (!body)
        return 0;
    body++;
    tw_fields_scan(&r, body, (size_t)(end - body));
    const char *it = tw_find(body, (size_t)(end - body), "iter time (s): ");
    double v;
    if (it && tw_scan_number(it + 15, end, &v)) {
        r.batch_time = v;
        r.fields |= TW_F_BATCH_TIME;
    }
    const char *sps = tw_find(body, (size_t)(end - body), "samples/sec: ");
    if (sps && tw_scan_number(sps + 13, end, &v)) {
        r.samples_per_sec = v;
        r.fields |= TW_F_SAMPLES_PER_SEC;
    }
    /* a "[Rank N]" line that is no step record (an NCCL watchdog's timeout,
     * an overflow note) is left to the other formats: the events reader
     * must see the errors */
    return tw_emit_step(p, line, &r, 0);
}

static const char *const anchors[] = {"[Rank ", NULL};

const tw_format tw_format_deepspeed = {
    .name = "deepspeed",
    .summary = "DeepSpeed engine lines ([Rank N] step=..., steps: N loss: ... iter time (s))",
    .anchors = anchors,
    .detect = detect,
    .parse = parse,
};
