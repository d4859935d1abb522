/*
 * events_scaler.c: a dynamic loss scaler's overflow lines, read by the
 * event reader (fmt_events.c) at its "kipping step" keyword:
 *
 *   apex:      Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0
 *   DeepSpeed: [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768
 *   Megatron-DeepSpeed: Overflow detected. Skipping step. Attempted loss scale: 1, reducing to 1
 *
 * Each becomes one TW_EV_OVERFLOW event carrying the scale it reduced to
 * (metric "loss_scale") and, where printed, the one that overflowed
 * ("attempted_loss_scale"). A reduction proves the scaler is dynamic, so
 * the loss-scale rule (diagnose/rule_precision.c) may call a scale at 1 or
 * below a floor even when no reading above 1 was logged.
 */
#include <string.h>

#include "events.h"
#include "scan.h"

/* The number after the first of needles found in s (NAN-free: false when none). */
static bool number_after(const char *s, const char *end, const char *const *needles, double *out)
{
    for (const char *const *n = needles; *n; n++) {
        const char *at = tw_find(s, (size_t)(end - s), *n);
        if (at && tw_scan_number(at + strlen(*n), end, out))
            return true;
    }
    return false;
}

/* A "Rank N" in the line: the rank whose scaler it is (DeepSpeed names it). */
static void rank_in(tw_record *r, const char *s, const char *end)
{
    const char *at = tw_find(s, (size_t)(end - s), "Rank ");
    long long rank;
    if (at && tw_scan_uint(at + 5, end, &rank))
        r->rank = tw_rank_value(rank);
}

int tw_events_scaler_overflow(tw_parser *p, events_state *st, const tw_line *line, const char *at)
{
    (void)st;
    const char *s = line->text, *end = s + line->len;
    /* the line speaks of an overflow before its "Skipping step" */
    if (!at || (!tw_find_ci(s, (size_t)(at - s), "overflow")))
        return 0;
    static const char *const reduced_to[] = {"reducing loss scale to ", "reducing to ", "lower loss scale to ", NULL};
    static const char *const attempted[] = {"Attempted loss scale: ", NULL};
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_EVENT;
    r.event = TW_EV_OVERFLOW;
    tw_record_set_text(r.message, s, line->len);
    rank_in(&r, s, end);
    double v;
    if (number_after(at, end, attempted, &v) && v >= 0)
        tw_record_set_metric(&r, "attempted_loss_scale", strlen("attempted_loss_scale"), v);
    if (number_after(at, end, reduced_to, &v) && v >= 0)
        tw_record_set_metric(&r, "loss_scale", strlen("loss_scale"), v);
    tw_parser_emit(p, line, &r);
    return 1;
}
