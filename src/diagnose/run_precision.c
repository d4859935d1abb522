/*
 * run_precision.c: a step record's mixed-precision counters into its rank's
 * tw_precision (see run.h): the dynamic loss scale (first, highest, last,
 * at its floor) and the steps the scaler skipped (DeepSpeed's running
 * count, Megatron's per interval), and the scaler's own overflow lines
 * (TW_EV_OVERFLOW: the scale it reduced to). rule_precision.c judges them.
 */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "run_internal.h"

static bool is_scale_name(const char *name)
{
    static const char *const names[] = {"loss scale", "loss_scale", "loss-scale", "lossscale", "amp_scale"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcasecmp(name, names[i]) == 0)
            return true;
    }
    return false;
}

/* A cheap first test, run on every metric of every step record: the names
 * read here are "loss?scale", "lossscale", "amp_scale", "skipped" and
 * "number of skipped iterations" (so loss_cls, lr, samples go no further). */
static bool maybe_counter_name(const char *n)
{
    switch (n[0] | 0x20) { /* each test reads no byte past the name's end */
    case 'l':
        return strncasecmp(n, "loss", 4) == 0 && ((n[4] | 0x20) == 's' || (n[4] && (n[5] | 0x20) == 's'));
    case 'a':
        return strncasecmp(n, "am", 2) == 0;
    case 's':
        return n[1] == 'k';
    case 'n':
        return strncmp(n, "number o", 8) == 0;
    default:
        return false;
    }
}

static tw_scale_note note_of(double value, const tw_point *p)
{
    return (tw_scale_note){value, p->pos, p->file, p->line};
}

static void note_scale(tw_precision *pr, double value, const tw_point *p)
{
    tw_scale_note n = note_of(value, p);
    if (pr->scale_count++ == 0)
        pr->scale_first = pr->scale_max = n;
    if (value > pr->scale_max.value)
        pr->scale_max = n;
    pr->scale_last = n;
    if (value <= 1) {
        if (!pr->have_floor)
            pr->scale_floor = n;
        pr->have_floor = true;
        pr->floor_count++;
    }
}

void tw_precision_overflow(tw_precision *pr, const tw_record *r, const tw_point *p)
{
    if (pr->overflows++ == 0)
        pr->first_overflow = note_of(0, p);
    double attempted = tw_record_metric(r, "attempted_loss_scale");
    double reduced = tw_record_metric(r, "loss_scale");
    if (isfinite(attempted) && attempted >= 0)
        note_scale(pr, attempted, p);
    if (isfinite(reduced) && reduced >= 0)
        note_scale(pr, reduced, p);
}

void tw_precision_note(tw_precision *pr, const tw_record *r, const tw_point *p)
{
    for (int i = 0; i < r->metric_count; i++) {
        const tw_metric *m = &r->metrics[i];
        if (!maybe_counter_name(m->name) || !isfinite(m->value) || m->value < 0)
            continue;
        if (is_scale_name(m->name)) {
            note_scale(pr, m->value, p);
        } else if (strcmp(m->name, "skipped") == 0) { /* DeepSpeed: a running count */
            pr->skipped = note_of(m->value, p);
            pr->have_skipped = true;
        } else if (strcmp(m->name, "number of skipped iterations") == 0) { /* Megatron: per interval */
            pr->skipped_sum += m->value;
            if (pr->skipped_sum > 0 && (!pr->have_skipped || pr->skipped_sum > pr->skipped.value)) {
                pr->skipped = note_of(pr->skipped_sum, p);
                pr->have_skipped = true;
            }
        }
    }
}
