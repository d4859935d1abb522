/*
 * rule_precision.c: fp16 mixed-precision health. A dynamic loss scaler
 * halves its scale and skips the step on each overflow and grows it back
 * after a run of clean steps. A start-up burst of overflows (DeepSpeed
 * starts at 2^32 and halves to a workable scale in its first steps) is
 * normal; a scale pinned at its floor, or a large share of steps thrown
 * away, means the gradients themselves overflow and the model is not
 * training. run_precision.c notes the counters of each step record
 * (tw_precision_note) and the scaler's overflow lines (apex's "Gradient
 * overflow. Skipping step, ... reducing loss scale to X", DeepSpeed's
 * "OVERFLOW! ... Attempted loss scale: A, reducing to B"), which prove the
 * scale dynamic; the rule reads them per rank.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "diagnose.h"

/* The overflows a healthy start-up may skip: halvings from 2^32 to 1. */
#define STARTUP_SKIPS 32.0
/* Skipped steps beyond the start-up, as a share of all steps: a warning
 * from the first, an error from the second. */
#define SKIPPED_WARN_SHARE  0.05
#define SKIPPED_ERROR_SHARE 0.25
#define SKIPPED_MIN         20.0

/* "1586 of 2500 steps (63%)" into buf; false when the counts say nothing. */
static bool skipped_words(const tw_precision *pr, char *buf, size_t cap, double *share)
{
    *share = 0;
    if (!pr->have_skipped || pr->skipped.pos <= 0)
        return false;
    *share = pr->skipped.value / pr->skipped.pos;
    snprintf(buf, cap, "%.0f of %.0f steps (%.0f%%)", pr->skipped.value, pr->skipped.pos, *share * 100);
    return true;
}

static void recommend(tw_finding *f)
{
    tw_finding_recommend(f, "The gradients overflow fp16 even at a small scale: train in bf16 where the GPU has it "
                            "(Ampere or later; DeepSpeed \"bf16\": {\"enabled\": true}, Megatron --bf16, Paddle "
                            "amp dtype='bfloat16'), or lower the learning rate / lengthen the warm-up, clip "
                            "gradients, and keep softmax and layer norm in fp32.");
    tw_finding_recommend(f, "Treat a scale at its floor as fatal (stop and resume from the last checkpoint with "
                            "the fix) rather than training on skipped steps.");
}

/* Non-finite values before the scale reached its floor (the framework's
 * NaN/Inf check, or the rank's own loss), in the same file: a loss or
 * forward pass that is NaN overflows at every scale, so the scaler halves
 * it on every step; the scale is the symptom (the evaluation set's
 * loss-scale-collapse-factseg-issue-6-denormal: "Warning: NaN or Inf found
 * in input tensor." twice, then apex down to 2e-320). On an earlier line:
 * a NaN on the line of the first low reading may as well be its result.
 * Its file and line into *file and *line; the message, or NULL. */
static const char *nan_before_floor(const tw_run *run, const tw_rank *rk, uint32_t *file, uint64_t *line)
{
    const tw_precision *pr = &rk->precision;
    const tw_event_note *e = tw_first_event(run, TW_EV_NAN);
    if (e && e->file == pr->scale_floor.file && e->line < pr->scale_floor.line) {
        *file = e->file;
        *line = e->line;
        return e->message;
    }
    const tw_point *p = &rk->nan_point;
    if (rk->have_nan && p->file == pr->scale_floor.file && p->line < pr->scale_floor.line) {
        *file = p->file;
        *line = p->line;
        return "the logged loss is not finite";
    }
    return NULL;
}

static void recommend_nan_first(tw_finding *f)
{
    tw_finding_recommend(f, "Find where the first NaN/Inf comes from before touching the scaler: the inputs and "
                            "labels of that batch (empty or NaN samples), the forward pass in fp32 for a few steps "
                            "(an activation beyond fp16's 65504), torch.autograd.detect_anomaly; then lower the "
                            "learning rate if the model itself diverged.");
    tw_finding_recommend(f, "Give the scale a floor so that a run like this stops at once instead of skipping every "
                            "step (apex: amp.initialize(..., min_loss_scale=1); DeepSpeed: \"fp16\": "
                            "{\"min_loss_scale\": 1}; torch's GradScaler has none: stop when scaler.get_scale() "
                            "falls below 1).");
}

/* The title of a scale at its floor: from a higher scale, reduced by the
 * scaler's own overflow lines, or at 0 from the start. */
static void floor_title(const tw_precision *pr, int rank, char *buf, size_t cap)
{
    if (pr->scale_max.value > 1)
        snprintf(buf, cap, "The fp16 loss scale collapsed to %g on rank %d (from %g)", pr->scale_floor.value, rank,
                 pr->scale_max.value);
    else if (pr->overflows)
        snprintf(buf, cap, "The fp16 loss scale collapsed to %g on rank %d, and the scaler still skips steps on "
                 "overflow", pr->scale_floor.value, rank);
    else
        snprintf(buf, cap, "The fp16 loss scale is %g on rank %d: the scaler halved it on every overflow until "
                 "nothing was left", pr->scale_max.value, rank);
}

/* Readings are placed at their steps when the rank has steps; a rank with
 * only the scaler's lines has none to place them at. */
static void report_floor(const tw_run *run, const tw_rank *rk, tw_findings *out)
{
    const tw_precision *pr = &rk->precision;
    char title[256], where[600], skipped[96], at[48] = "", last_at[48] = "";
    double share;
    floor_title(pr, rk->rank, title, sizeof title);
    tw_finding *f = tw_finding_add(out, "loss_scale_collapse", TW_SEV_ERROR, "%s", title);
    if (!f)
        return;
    f->where = tw_run_source(run, pr->scale_floor.file, pr->scale_floor.line);
    f->rank = rk->rank;
    f->value = pr->scale_floor.value;
    if (rk->used) {
        f->step = (int64_t)pr->scale_floor.pos;
        snprintf(at, sizeof at, " at step %.0f", pr->scale_floor.pos);
        snprintf(last_at, sizeof last_at, " at step %.0f", pr->scale_last.pos);
    }
    tw_finding_evidence(f, "loss scale %g%s (%s); %llu of %llu readings at 1 or below, the last %g%s",
                        pr->scale_floor.value, at,
                        tw_where(run, pr->scale_floor.file, pr->scale_floor.line, where, sizeof where),
                        (unsigned long long)pr->floor_count, (unsigned long long)pr->scale_count, pr->scale_last.value,
                        last_at);
    if (rk->used)
        tw_finding_evidence(f, "highest scale: %g at step %.0f; first reading %g at step %.0f", pr->scale_max.value,
                            pr->scale_max.pos, pr->scale_first.value, pr->scale_first.pos);
    if (rk->used && skipped_words(pr, skipped, sizeof skipped, &share))
        tw_finding_evidence(f, "steps skipped on overflow: %s, by step %.0f (%s)", skipped, pr->skipped.pos,
                            tw_where(run, pr->skipped.file, pr->skipped.line, where, sizeof where));
    if (pr->overflows)
        tw_finding_evidence(f, "%llu overflow lines of the scaler ('Skipping step'), the first at %s",
                            (unsigned long long)pr->overflows,
                            tw_where(run, pr->first_overflow.file, pr->first_overflow.line, where, sizeof where));
    uint32_t nan_file;
    uint64_t nan_line;
    const char *nan = nan_before_floor(run, rk, &nan_file, &nan_line);
    if (!nan) {
        recommend(f);
        return;
    }
    tw_finding_evidence(f, "NaN/Inf came first: %s (%s); values that are not finite overflow at any scale, so "
                        "the scale is the symptom",
                        nan, tw_where(run, nan_file, nan_line, where, sizeof where));
    recommend_nan_first(f);
}

static void report_skipped(const tw_run *run, const tw_rank *rk, double share, tw_findings *out)
{
    const tw_precision *pr = &rk->precision;
    char where[600], skipped[96];
    skipped_words(pr, skipped, sizeof skipped, &share);
    tw_finding *f =
        tw_finding_add(out, "loss_scale_collapse", share >= SKIPPED_ERROR_SHARE ? TW_SEV_ERROR : TW_SEV_WARNING,
                       "fp16 overflow skipped %s on rank %d", skipped, rk->rank);
    if (!f)
        return;
    f->where = tw_run_source(run, pr->skipped.file, pr->skipped.line);
    f->step = (int64_t)pr->skipped.pos;
    f->rank = rk->rank;
    f->value = share;
    tw_finding_evidence(f, "skipped-step count %.0f at step %.0f (%s); a start-up burst of up to %.0f is normal",
                        pr->skipped.value, pr->skipped.pos,
                        tw_where(run, pr->skipped.file, pr->skipped.line, where, sizeof where), STARTUP_SKIPS);
    if (pr->scale_count)
        tw_finding_evidence(f, "loss scale: %g at step %.0f, highest %g", pr->scale_last.value, pr->scale_last.pos,
                            pr->scale_max.value);
    recommend(f);
}

static void check_loss_scale(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk || (!rk->used && !rk->precision.overflows))
            continue;
        const tw_precision *pr = &rk->precision;
        /* at the floor after having been above it, or reduced to it by the
         * scaler's own overflow lines: not a run that logs a constant
         * scale of 1 (fp32, bf16 or a static scale). A scale of 0 is no
         * static scale: a dynamic one that underflowed (the evaluation set's
         * broken-from-start-insightface-2262: "Fp16 Grad Scale:  0" from
         * the first line, the loss NaN) */
        if (pr->have_floor && (pr->scale_max.value > 1 || pr->overflows || pr->scale_max.value <= 0)) {
            report_floor(run, rk, out);
            continue;
        }
        if (!pr->have_skipped || pr->skipped.pos <= 0)
            continue;
        double excess = pr->skipped.value - STARTUP_SKIPS;
        if (excess >= SKIPPED_MIN && excess > SKIPPED_WARN_SHARE * pr->skipped.pos)
            report_skipped(run, rk, pr->skipped.value / pr->skipped.pos, out);
    }
}

const tw_rule tw_rule_loss_scale = {
    "loss_scale_collapse", "fp16 loss scale at its floor, or many steps skipped on overflow", check_loss_scale};
