/*
 * rule_loss.c: what the loss curve says: NaN/Inf (and what preceded it),
 * spikes, divergence, plateau. Shapes are judged on segment medians of the
 * downsampled series, which are robust to the noise of per-batch losses.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"

static const char *nan_word(double v)
{
    return isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf");
}

static void nan_for_rank(const tw_run *run, const tw_rank *rk, tw_findings *out, int other_ranks)
{
    const tw_point *p = &rk->nan_point;
    char where[600], buf[64];
    const char *part = rk->nan_component;
    /* no record before it: the loss was never finite (the evaluation set's
     * broken-from-start-insightface-2262, 'Loss nan' from its first line) */
    bool from_start = rk->before_nan_count == 0;
    tw_finding *f = from_start ? tw_finding_add(out, "nan_loss", TW_SEV_ERROR,
                                                "%s is %s from the first logged step (%.0f): the run never had a "
                                                "finite loss",
                                                part[0] ? part : "Loss", nan_word(p->loss), p->pos)
                    : part[0]  ? tw_finding_add(out, "nan_loss", TW_SEV_ERROR,
                                                "Loss component %s became %s at step %.0f", part, nan_word(p->loss),
                                                p->pos)
                               : tw_finding_add(out, "nan_loss", TW_SEV_ERROR, "Loss became %s at step %.0f",
                                                nan_word(p->loss), p->pos);
    if (!f)
        return;
    tw_finding_at(f, run, p, rk->rank);
    f->value = p->pos;
    tw_finding_evidence(f, "first non-finite %s: %s at step %.0f (%s%s%s)", part[0] ? part : "loss",
                        nan_word(p->loss), p->pos,
                        tw_where(run, p->file, p->line, where, sizeof where), isnan(p->time) ? "" : ", ",
                        isnan(p->time) ? "" : tw_fmt_time(p->time, buf, sizeof buf));
    if (other_ranks > 0)
        tw_finding_evidence(f, "%d other rank(s) also reached a non-finite loss", other_ranks);
    double lr_first = NAN, loss_first = NAN, loss_max = NAN;
    char line[TW_TEXT_MAX] = "";
    size_t used = 0;
    for (int i = 0; i < rk->before_nan_count; i++) {
        const tw_point *b = &rk->before_nan[i];
        if (b->fields & TW_F_LOSS) {
            if (isnan(loss_first))
                loss_first = b->loss;
            if (isnan(loss_max) || b->loss > loss_max)
                loss_max = b->loss;
            used += (size_t)snprintf(line + used, sizeof line - used, "%s%.0f:%.4g", used ? ", " : "", b->pos, b->loss);
            if (used >= sizeof line)
                break;
        }
        if ((b->fields & TW_F_LR) && isnan(lr_first))
            lr_first = b->lr;
    }
    if (used)
        tw_finding_evidence(f, "loss before it (step:loss): %s", line);
    bool lr_spike = false, loss_rise = false;
    /* the largest jump of the learning rate between consecutive records */
    double jump = 1;
    const tw_point *jump_from = NULL, *jump_to = NULL;
    for (int i = 0; i < rk->before_nan_count; i++) {
        const tw_point *a = &rk->before_nan[i];
        const tw_point *b = i + 1 < rk->before_nan_count ? &rk->before_nan[i + 1] : p;
        if ((a->fields & TW_F_LR) && (b->fields & TW_F_LR) && a->lr > 0 && b->lr / a->lr > jump) {
            jump = b->lr / a->lr;
            jump_from = a;
            jump_to = b;
        }
    }
    if (jump >= 2) {
        lr_spike = true;
        tw_finding_evidence(f, "learning rate jumped %.4gx from %.4g (step %.0f) to %.4g (step %.0f)", jump,
                            jump_from->lr, jump_from->pos, jump_to->lr, jump_to->pos);
    } else if ((p->fields & TW_F_LR) && from_start) {
        tw_finding_evidence(f, "learning rate at the NaN: %.4g", p->lr);
    } else if (p->fields & TW_F_LR) {
        tw_finding_evidence(f, "learning rate at the NaN: %.4g (%.4g %d records earlier)", p->lr,
                            isnan(lr_first) ? p->lr : lr_first, rk->before_nan_count);
    }
    if (from_start) {
        tw_finding_recommend(f, "No step ever had a finite loss, so the set-up is at fault, not training. Run a few steps in fp32 (no AMP) to "
                                "see whether the loss is finite, check the inputs and labels (normalised, labels "
                                "within the class count), the model's head and the loss on the first batch before "
                                "backward; then re-enable mixed precision.");
        return;
    }
    if (!isnan(loss_first) && loss_max > 3 * loss_first && loss_first > 0) {
        loss_rise = true;
        char rise[32];
        tw_finding_evidence(f, "the loss rose %sx in the steps before (%.4g -> %.4g)",
                            tw_fmt_number(loss_max / loss_first, 1, rise, sizeof rise), loss_first, loss_max);
    }
    if (lr_spike)
        tw_finding_recommend(f,
                             "The learning rate rose %.4gx just before: check the schedule (or the config) that raised "
                             "it; lower it or lengthen warm-up.",
                             jump);
    if (loss_rise || lr_spike)
        tw_finding_recommend(f, "Clip gradients (paddle.nn.ClipGradByGlobalNorm / torch.nn.utils.clip_grad_norm_).");
    else
        tw_finding_recommend(f, "Lower the learning rate or clip gradients (paddle.nn.ClipGradByGlobalNorm / "
                                "torch.nn.utils.clip_grad_norm_).");
    tw_finding_recommend(f, "Find the first op producing NaN/Inf with FLAGS_check_nan_inf=1 (Paddle) or "
                            "torch.autograd.set_detect_anomaly(True); with AMP check the loss scaler; check the batch "
                            "at this step for bad samples.");
    tw_finding_recommend(f, "Resume from the last checkpoint before step %.0f.", p->pos);
}

/* An exception that says the model went non-finite, where no printed loss
 * did: detectron2's "FloatingPointError: Loss became infinite or NaN at
 * iteration=5878!" and "Predicted boxes or scores contain Inf/NaN. Training
 * has diverged.", torch's anomaly mode "returned nan values". */
static bool says_non_finite(const char *m)
{
    static const char *const words[] = {"FloatingPointError", "infinite or NaN", "Inf/NaN", "NaN or Inf",
                                        "nan or inf", "returned nan values", "non-finite loss"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (strstr(m, words[i]))
            return true;
    }
    return false;
}

static void nan_from_exception(const tw_run *run, tw_findings *out)
{
    for (int i = 0; i < run->events_kept_count; i++) {
        const tw_event_note *e = &run->events_kept[i];
        if (e->kind != TW_EV_EXCEPTION || !says_non_finite(e->message))
            continue;
        char where[600];
        tw_finding *f = tw_finding_add(out, "nan_loss", TW_SEV_ERROR, "Training went non-finite (NaN/Inf)%s",
                                       e->last_pos >= 0 ? "" : " before the first step");
        if (!f)
            return;
        tw_finding_at_event(f, run, e);
        if (f->step >= 0)
            snprintf(f->title + strlen(f->title), sizeof f->title - strlen(f->title), " at step %lld",
                     (long long)f->step);
        tw_finding_evidence(f, "the framework raised: %s (%s)", e->message,
                            tw_where(run, e->file, e->line, where, sizeof where));
        if (e->last_pos >= 0)
            tw_finding_evidence(f, "last step logged before it: %.0f, with a finite loss: the blow-up came between "
                                   "two printed steps",
                                e->last_pos);
        tw_finding_recommend(f, "Lower the learning rate or clip gradients (detectron2: SOLVER.CLIP_GRADIENTS; "
                                "torch.nn.utils.clip_grad_norm_); check the data at that step for degenerate "
                                "boxes or labels; resume from the last checkpoint before it.");
        return;
    }
}

static void check_nan(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    const tw_rank *first = NULL;
    int count = 0;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk || !rk->have_nan)
            continue;
        count++;
        if (!first || rk->nan_point.pos < first->nan_point.pos)
            first = rk;
    }
    if (first)
        nan_for_rank(run, first, out, count - 1);
    else
        nan_from_exception(run, out);
    const tw_event_note *e = tw_first_event(run, TW_EV_NAN);
    if (e) {
        char where[600];
        tw_finding *f = tw_finding_add(
            out, "nan_check", TW_SEV_ERROR, "NaN/Inf reported by the framework's check (%llu time%s)",
            (unsigned long long)run->event_counts[TW_EV_NAN], run->event_counts[TW_EV_NAN] == 1 ? "" : "s");
        if (!f)
            return;
        tw_finding_at_event(f, run, e);
        tw_finding_evidence(f, "first report: %s (%s)", e->message,
                            tw_where(run, e->file, e->line, where, sizeof where));
        tw_finding_recommend(f, "The op and tensor named there produced the first NaN/Inf: check its inputs, lower the "
                                "learning rate, clip gradients, or run it in fp32.");
    }
}

const tw_rule tw_rule_nan = {"nan_loss", "loss NaN/Inf, with the steps before it", check_nan};

/* A learning rate stepped up at once after a flat stretch (the end of a
 * constant warm-up, a resume or a stage at a higher rate) and the loss
 * jumping with it, too little for a spike against the median and too
 * short for divergence (the evaluation set's
 * loss-spikes-zhaoyang-mmdet-fcos-swxdata-warmup-end: warmup='constant',
 * lr 4.167e-4 -> 1.25e-3 at iter 550, loss 2.44 -> 5.22 at 600, back by
 * 850; nan-loss-zhaoyang-mmdet-fcos-moco-gradnorm steps up the same way
 * with its loss 2.31 -> 2.37, no jump; the same repository's other FCOS
 * logs, four of five that jump 1.5-2.2x found and four that rise 1.1-1.45x
 * quiet). A linear warm-up doubles its rate between its first
 * records but is not flat before them. */
#define LR_STEP_UP 2.0
#define LR_FLAT 0.01
#define LR_JUMP_LOSS 1.5
#define LR_JUMP_WINDOW 4

/* The rate of the LR_FLAT_RECORDS records before pts[i] the same (a
 * linear warm-up that moves every few records is a ramp, not a step). */
#define LR_FLAT_RECORDS 6
static bool flat_before(const tw_point *const *pts, size_t i)
{
    double lr = pts[i - 1]->lr;
    for (size_t k = i - LR_FLAT_RECORDS; k < i; k++) {
        if (fabs(pts[k]->lr - lr) > LR_FLAT * lr)
            return false;
    }
    return true;
}

/* The median and the highest loss of those records: the jump must clear
 * both, not the noise of one batch. */
static void loss_before(const tw_point *const *pts, size_t i, double *level, double *highest)
{
    double v[LR_FLAT_RECORDS];
    *highest = -INFINITY;
    for (size_t k = 0; k < LR_FLAT_RECORDS; k++) {
        v[k] = pts[i - LR_FLAT_RECORDS + k]->loss;
        *highest = fmax(*highest, v[k]);
    }
    *level = tw_median(v, LR_FLAT_RECORDS);
}

/* The peak loss of the LR_JUMP_WINDOW records from pts[i], or NULL. */
static const tw_point *jump_peak(const tw_point *const *pts, size_t n, size_t i)
{
    const tw_point *peak = NULL;
    for (size_t k = i; k < n && k < i + LR_JUMP_WINDOW; k++) {
        if (!peak || pts[k]->loss > peak->loss)
            peak = pts[k];
    }
    return peak;
}

static void report_lr_jump(const tw_run *run, const tw_rank *rk, const tw_point *const *pts, size_t n, size_t i,
                           double level, const tw_point *peak, tw_findings *out)
{
    const tw_point *before = pts[i - 1], *step = pts[i];
    tw_finding *f = tw_finding_add(out, "loss_spikes", TW_SEV_WARNING,
                                   "The loss jumped %.1fx when the learning rate stepped up %.1fx at once on rank %d "
                                   "(step %.0f)",
                                   peak->loss / level, step->lr / before->lr, rk->rank, step->pos);
    if (!f)
        return;
    tw_finding_at(f, run, peak, rk->rank);
    f->value = peak->loss / level;
    char w1[600], w2[600];
    tw_finding_evidence(f, "learning rate %g -> %g at step %.0f (%s), flat before it", before->lr, step->lr,
                        step->pos, tw_where(run, step->file, step->line, w1, sizeof w1));
    tw_finding_evidence(f, "loss %.4g (median of the %d records to step %.0f) -> %.4g at step %.0f (%s)", level,
                        LR_FLAT_RECORDS, before->pos, peak->loss, peak->pos,
                        tw_where(run, peak->file, peak->line, w2, sizeof w2));
    const tw_point *back = NULL;
    for (size_t k = i; k < n && !back; k++) {
        if (pts[k]->pos > peak->pos && pts[k]->loss <= level * 1.1)
            back = pts[k];
    }
    if (back)
        tw_finding_evidence(f, "back to %.4g by step %.0f (%s)", back->loss, back->pos,
                            tw_where(run, back->file, back->line, w1, sizeof w1));
    else
        tw_finding_evidence(f, "not back to %.4g by the last step", level * 1.1);
    tw_finding_recommend(f, "Ramp the learning rate to its full value instead of stepping it (mmdet: "
                            "warmup='linear'; a linear warm-up scheduler), or lower the target rate; a jump that "
                            "does not come back down means the new rate is too high for this model.");
}

static void check_lr_jump(const tw_run *run, const tw_rank *rk, tw_findings *out)
{
    const tw_point **pts = malloc(sizeof *pts * (rk->series.count ? rk->series.count : 1));
    if (!pts)
        return;
    size_t n = 0;
    for (size_t i = 0; i < rk->series.count; i++) {
        const tw_point *q = &rk->series.points[i];
        unsigned both = TW_F_LOSS | TW_F_LR;
        if ((q->fields & both) == both && isfinite(q->loss) && isfinite(q->lr))
            pts[n++] = q;
    }
    for (size_t i = LR_FLAT_RECORDS; i < n; i++) {
        const tw_point *b = pts[i - 1], *c = pts[i];
        /* a step that goes back is a new launch ramping up, not a rate changed */
        if (!(b->lr > 0 && c->lr >= LR_STEP_UP * b->lr) || c->pos <= b->pos || !flat_before(pts, i))
            continue;
        double level, highest;
        loss_before(pts, i, &level, &highest);
        const tw_point *peak = jump_peak(pts, n, i);
        if (level > 0 && peak->loss >= LR_JUMP_LOSS * level && peak->loss > highest) {
            report_lr_jump(run, rk, pts, n, i, level, peak, out);
            break;
        }
    }
    free(pts);
}

static void check_spikes(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (rk && rk->used)
            check_lr_jump(run, rk, out);
        if (!rk || rk->spikes == 0)
            continue;
        /* Per-batch losses are noisy by nature; spikes are info findings, and the
         * NaN and divergence rules judge whether they did harm. One of two
         * orders of magnitude that also rises above the rank's first loss,
         * among other spikes, is no noise (one bad batch of a converged
         * fine-tune stays a note) (the evaluation set's loss-spikes-zhaoyang-mmdet-freeanchor-
         * swx-negbag: loss 1159.9 against a median of 3.4, negative_bag_loss
         * exploding; a converged per-batch loss near zero, 0.14 against 0.012
         * in the corpus's hapi epoch-5 excerpt, stays a note). */
        bool huge = rk->spikes >= 2 && rk->worst_spike_ratio >= t->spike_warn && (rk->first.fields & TW_F_LOSS) &&
                    rk->worst_spike.loss > rk->first.loss;
        tw_severity sev = huge ? TW_SEV_WARNING : TW_SEV_INFO;
        char where[600], ratio[32];
        tw_finding *f =
            tw_finding_add(out, "loss_spikes", sev, "%llu loss spike%s on rank %d (worst %sx the recent median)",
                           (unsigned long long)rk->spikes, rk->spikes == 1 ? "" : "s", rk->rank,
                           tw_fmt_number(rk->worst_spike_ratio, 1, ratio, sizeof ratio));
        if (!f)
            return;
        tw_finding_at(f, run, &rk->worst_spike, rk->rank);
        f->value = rk->worst_spike_ratio;
        tw_finding_evidence(f,
                            "worst: loss %.4g at step %.0f against a median of %.4g over the previous %d records (%s)",
                            rk->worst_spike.loss, rk->worst_spike.pos, rk->worst_spike_median, TW_RECENT,
                            tw_where(run, rk->worst_spike.file, rk->worst_spike.line, where, sizeof where));
        tw_finding_evidence(f,
                            "threshold: %.1fx the median of the last %d losses, and a rise above six times their "
                            "step-to-step noise and a twentieth of the first loss",
                            t->spike_factor, TW_RECENT);
        if (rk->spikes_smoothed)
            tw_finding_evidence(f, "judged on the smoothed loss the log prints beside the per-batch one");
        tw_finding_recommend(f, "Occasional spikes are bad batches or a too-high learning rate: clip gradients, lower "
                                "the peak learning rate, and look at the samples of the worst step.");
    }
}

const tw_rule tw_rule_spikes = {"loss_spikes", "loss far above its recent median", check_spikes};

/* Medians of `parts` equal segments of the finite losses, with their lower
 * and upper quartiles where q1 and q3 are not NULL. */
static int segment_medians(const tw_rank *rk, int parts, double *med, double *pos_end, size_t min_per_part,
                           double *q1, double *q3)
{
    double *v = malloc(sizeof(double) * TW_SERIES_MAX);
    double *pos = malloc(sizeof(double) * TW_SERIES_MAX);
    if (!v || !pos) {
        free(v);
        free(pos);
        return 0;
    }
    size_t n = tw_series_values(&rk->series, TW_F_LOSS, v, pos);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (isfinite(v[i])) {
            pos[m] = pos[i];
            v[m++] = v[i];
        }
    }
    if (m < (size_t)parts * min_per_part) {
        free(v);
        free(pos);
        return 0;
    }
    for (int s = 0; s < parts; s++) {
        size_t a = m * (size_t)s / (size_t)parts, b = m * (size_t)(s + 1) / (size_t)parts;
        pos_end[s] = pos[b - 1];
        med[s] = tw_median(v + a, b - a); /* sorts the segment */
        if (q1 && q3) {
            q1[s] = v[a + (b - a) / 4];
            q3[s] = v[a + (b - a) * 3 / 4];
        }
    }
    free(v);
    free(pos);
    return parts;
}

/* Tenths of 20 losses and more; eighths of 5 and more for shorter runs. */
#define LONG_PARTS 10
#define LONG_PER_PART 20
#define SHORT_PARTS 8
#define SHORT_PER_PART 5
/* Losses the short-run checks hold: a run of this many has tenths
 * (LONG_PARTS x LONG_PER_PART) and is judged there. */
#define SHORT_RUN_MAX (LONG_PARTS * LONG_PER_PART)

/* A run too short for tenths (fewer than 200 losses) whose loss ended far
 * above where it began: a learning rate that blew the model up in its first
 * updates (the evaluation set's divergence-qlora-zephyr-lr5: lr 5, loss
 * 1.637 at step 1, 11.8 at step 2, then flat at ln(32000) = 10.37). */
#define BLOWUP_FACTOR 2.5
#define BLOWUP_MIN_POINTS 5
/* Or, over many steps, ended above where it began: every loss of the last
 * third above the median of the first third, their median by this much
 * (the evaluation set's loss-scale-collapse-llm-action-megatron-ds-llama:
 * lm loss 10.66 at iteration 1, 12.5-13.4 at 2498-2500, the middle of the
 * log elided). The first third, not the first loss, so that a noisy loss
 * whose first value happens to be low is not said to have risen. */
#define ENDED_ABOVE_FACTOR 1.15
#define ENDED_ABOVE_EACH 1.05
#define ENDED_ABOVE_MIN_STEPS 100

/* The losses of the last third (tail, k of them) all above the first
 * third's median (into *start) by ENDED_ABOVE_EACH and their median by
 * ENDED_ABOVE_FACTOR, over at least ENDED_ABOVE_MIN_STEPS steps. */
static bool ended_above_start(const tw_point *const *pts, size_t m, const double *tail, size_t k, double end,
                              double *start)
{
    double head[SHORT_RUN_MAX];
    size_t h = m / 3 ? m / 3 : 1;
    for (size_t i = 0; i < h; i++)
        head[i] = pts[i]->loss;
    *start = tw_median(head, h);
    if (!(*start > 0) || !(end > ENDED_ABOVE_FACTOR * *start) || pts[m - 1]->pos - pts[0]->pos < ENDED_ABOVE_MIN_STEPS)
        return false;
    for (size_t i = 0; i < k; i++) {
        if (!(tail[i] > ENDED_ABOVE_EACH * *start))
            return false;
    }
    return true;
}

static void check_short_blowup(const tw_run *run, const tw_rank *rk, tw_findings *out)
{
    const tw_point *pts[SHORT_RUN_MAX];
    size_t m = 0;
    for (size_t i = 0; i < rk->series.count && m < SHORT_RUN_MAX; i++) {
        const tw_point *q = &rk->series.points[i];
        if ((q->fields & TW_F_LOSS) && isfinite(q->loss))
            pts[m++] = q;
    }
    if (m < BLOWUP_MIN_POINTS || m >= SHORT_RUN_MAX || !(pts[0]->loss > 0))
        return;
    double tail[SHORT_RUN_MAX];
    size_t k = 0;
    for (size_t i = m - m / 3; i < m; i++)
        tail[k++] = pts[i]->loss;
    double end = tw_median(tail, k); /* sorts tail */
    /* the rise must stand above the last third's own spread: a noisy loss
     * whose first value happens to be its lowest has not risen (it binds on
     * ended_above; a 2.5x blow-up is above all but the widest spreads) */
    double spread = tail[k * 3 / 4] - tail[k / 4];
    double start = pts[0]->loss;
    bool blowup = end > BLOWUP_FACTOR * start && end - start > spread;
    if (!blowup && !(ended_above_start(pts, m, tail, k, end, &start) && end - start > spread))
        return;
    size_t jump = 1; /* the largest rise between consecutive losses */
    for (size_t i = 2; i < m; i++) {
        if (pts[i]->loss / pts[i - 1]->loss > pts[jump]->loss / pts[jump - 1]->loss)
            jump = i;
    }
    char where[600];
    tw_finding *f = tw_finding_add(out, "divergence", TW_SEV_WARNING,
                                   "Loss %s on rank %d: %.4g at the end against %.4g at the start",
                                   blowup ? "blew up" : "ended above where it started", rk->rank, end, start);
    if (!f)
        return;
    tw_finding_at(f, run, pts[jump], rk->rank);
    f->value = end / start;
    tw_finding_evidence(f, "the loss rose %.1fx from step %.0f to step %.0f: %.4g -> %.4g (%s)",
                        pts[jump]->loss / pts[jump - 1]->loss, pts[jump - 1]->pos, pts[jump]->pos,
                        pts[jump - 1]->loss, pts[jump]->loss,
                        tw_where(run, pts[jump]->file, pts[jump]->line, where, sizeof where));
    tw_finding_evidence(f, "median of the last third of the %zu losses: %.4g (to step %.0f, %s)", m, end,
                        pts[m - 1]->pos, tw_where(run, pts[m - 1]->file, pts[m - 1]->line, where, sizeof where));
    if ((pts[jump]->fields & TW_F_LR) && isfinite(pts[jump]->lr))
        tw_finding_evidence(f, "learning rate there: %g", pts[jump]->lr);
    if (blowup)
        tw_finding_recommend(f, "The first updates broke the model: check the learning rate (its value and units, "
                                "the warm-up) and the loss scale; a loss that then sits still at one value is a "
                                "collapsed model (for a classifier, ln(classes) is the loss of a uniform guess).");
    else
        tw_finding_recommend(f, "Training made the model worse than it began: check the learning rate and its "
                                "schedule, the loss scale (steps skipped on overflow) and the data; resume from a "
                                "checkpoint from before the rise.");
}

/* A loss that went back up this share of the way from its best to where
 * it began has undone its training even if it ends below its first value
 * (the evaluation set's divergence-wav2vec2-ctc-stressdetection: CTC loss
 * 25446 -> 2114 at step 1100, back to 8546 from step 1700 on, eval WER
 * 0.34 -> 1.0). A loss near zero that doubles (a memorised training set)
 * gives back a sliver of its fall and is not it. */
#define UNDONE_SHARE 0.5
#define CROSS_WINDOW 5

/* The best of all but the last two segments, and whether both of those sit
 * factor x above it and above the start, or gave back UNDONE_SHARE of the
 * fall, and stand clear of its noise: their lower quartiles above its
 * upper one (a converged per-batch loss near zero, 0.0005 to 0.14 in the
 * corpus's hapi epoch-5 excerpt, moves its medians 2x by chance). */
static bool diverged(const double *med, const double *q1, const double *q3, int parts, double factor, int *best)
{
    int b = 0;
    for (int s = 1; s < parts - 2; s++) {
        if (med[s] < med[b])
            b = s;
    }
    *best = b;
    double last = med[parts - 1], before = med[parts - 2];
    if (!(med[b] > 0 && last > factor * med[b] && before > factor * med[b]))
        return false;
    if (!(q1[parts - 1] > q3[b] && q1[parts - 2] > q3[b]))
        return false;
    return last > med[0] || last - med[b] >= UNDONE_SHARE * (med[0] - med[b]);
}

/* Where the rise began: the first loss after the best segment from which
 * the median of CROSS_WINDOW losses is above limit; NULL when none. */
static const tw_point *rise_start(const tw_rank *rk, double after, double limit)
{
    const tw_point *win[CROSS_WINDOW];
    size_t n = 0;
    for (size_t i = 0; i < rk->series.count; i++) {
        const tw_point *q = &rk->series.points[i];
        if (q->pos <= after || !(q->fields & TW_F_LOSS) || !isfinite(q->loss))
            continue;
        if (n == CROSS_WINDOW) {
            memmove(win, win + 1, sizeof win[0] * (CROSS_WINDOW - 1));
            n--;
        }
        win[n++] = q;
        if (n < CROSS_WINDOW || !(win[0]->loss > limit))
            continue;
        double v[CROSS_WINDOW];
        for (size_t k = 0; k < n; k++)
            v[k] = win[k]->loss;
        if (tw_median(v, n) > limit)
            return win[0];
    }
    return NULL;
}

/* An evaluation loss of the rank that rose with the training loss: its best
 * before the rise and the first result after it EVAL_RISE x above; the
 * evidence that the model, not only the batches, got worse. */
#define EVAL_RISE 1.5
static void eval_rose_too(const tw_run *run, const tw_rank *rk, double from, tw_finding *f)
{
    for (int m = 0; m < run->eval_metrics.count; m++) {
        const tw_metric_note *note = &run->eval_metrics.items[m];
        if (!note->lower_is_better || !strstr(note->s.name, "loss"))
            continue;
        const tw_eval_point *best = NULL, *worse = NULL;
        for (size_t i = 0; i < run->eval_series.count; i++) {
            const tw_eval_point *e = &run->eval_series.points[i];
            if (e->metric != m || tw_run_rank(run, e->rank) != rk || !isfinite(e->value))
                continue;
            if (e->pos <= from && (!best || e->value < best->value))
                best = e;
            else if (e->pos > from && best && best->value > 0 && e->value >= EVAL_RISE * best->value) {
                worse = e;
                break;
            }
        }
        if (!worse)
            continue;
        char w1[600], w2[600];
        tw_finding_evidence(f, "%s rose with it: %.4g at step %.0f (%s), %.4g at step %.0f (%s)", note->s.name,
                            best->value, best->pos, tw_where(run, best->file, best->line, w1, sizeof w1),
                            worse->value, worse->pos, tw_where(run, worse->file, worse->line, w2, sizeof w2));
        return;
    }
}

/* Judged on tenths, or on eighths for a run of 40 to 199 losses; true when
 * it reported. */
static bool divergence_for_rank(const tw_run *run, const tw_rank *rk, const tw_thresholds *t, tw_findings *out)
{
    double med[LONG_PARTS], end[LONG_PARTS], q1[LONG_PARTS], q3[LONG_PARTS];
    int parts = segment_medians(rk, LONG_PARTS, med, end, LONG_PER_PART, q1, q3);
    if (!parts)
        parts = segment_medians(rk, SHORT_PARTS, med, end, SHORT_PER_PART, q1, q3);
    int best;
    if (!parts || !diverged(med, q1, q3, parts, t->divergence_factor, &best))
        return false;
    double last = med[parts - 1], limit = t->divergence_factor * med[best];
    tw_finding *f = tw_finding_add(out, "divergence", TW_SEV_WARNING,
                                   "Loss is diverging on rank %d: %.4g at the end against %.4g at best", rk->rank,
                                   last, med[best]);
    if (!f)
        return true;
    const tw_point *rise = rise_start(rk, end[best], limit);
    tw_finding_at(f, run, rise ? rise : &rk->last, rk->rank);
    f->value = last / med[best];
    const char *part = parts == LONG_PARTS ? "tenth" : "eighth";
    char where[600];
    if (rise)
        tw_finding_evidence(f, "the loss rose above %.4g (%.1fx the best) from step %.0f: %.4g (%s)", limit,
                            t->divergence_factor, rise->pos, rise->loss,
                            tw_where(run, rise->file, rise->line, where, sizeof where));
    tw_finding_evidence(f, "median loss of the last %s of the run (to step %.0f): %.4g", part, end[parts - 1], last);
    tw_finding_evidence(f, "best %s ended at step %.0f with a median of %.4g; first %s %.4g", part, end[best],
                        med[best], part, med[0]);
    eval_rose_too(run, rk, end[best], f);
    tw_finding_recommend(f,
                         "Lower the learning rate or check its schedule after step %.0f; clip gradients; resume "
                         "from a checkpoint near step %.0f.",
                         end[best], end[best]);
    return true;
}

static void check_divergence(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk || !rk->used)
            continue;
        if (!divergence_for_rank(run, rk, t, out) && !rk->have_nan)
            check_short_blowup(run, rk, out);
    }
}

const tw_rule tw_rule_divergence = {"divergence", "loss rising well above its best", check_divergence};

/* A log that begins late in its training (a resume, or a window cut from a
 * long run): its first record is past the second epoch, or a resume was
 * logged before it. Such a log shows the converged end of a schedule, where
 * a flat loss is expected. Writes the reason into why. */
static bool starts_late(const tw_run *run, const tw_rank *rk, char *why, size_t cap)
{
    const tw_event_note *resume = tw_first_event(run, TW_EV_RESUME);
    if (resume && resume->line <= rk->first.line && resume->file == rk->first.file) {
        snprintf(why, cap, "it resumes (%s)", resume->message);
        return true;
    }
    if (rk->first.epoch >= 2) {
        snprintf(why, cap, "it starts at epoch %lld", (long long)rk->first.epoch);
        return true;
    }
    return false;
}

static size_t finite_losses(const tw_rank *rk)
{
    size_t n = 0;
    for (size_t i = 0; i < rk->series.count; i++)
        n += (rk->series.points[i].fields & TW_F_LOSS) && isfinite(rk->series.points[i].loss);
    return n;
}

static void check_plateau(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk || !rk->used || rk->have_nan)
            continue;
        double med[4], end[4];
        if (!segment_medians(rk, 4, med, end, 5, NULL, NULL))
            continue;
        double rel = (med[0] - med[3]) / fabs(med[0]);
        /* rising, or (where divergence can judge it) fallen far in the
         * middle and come back: divergence's */
        bool judged = finite_losses(rk) >= SHORT_PARTS * SHORT_PER_PART;
        if (!(rel < t->plateau_rel) || med[3] > t->divergence_factor * med[0] ||
            (judged && med[3] > t->divergence_factor * fmin(med[1], med[2])))
            continue;
        char late[TW_MESSAGE_MAX + 32] = "";
        bool resumed = starts_late(run, rk, late, sizeof late);
        tw_finding *f = resumed ? tw_finding_add(out, "plateau", TW_SEV_INFO,
                                                 "Loss is flat on rank %d over a log that begins late in training "
                                                 "(%+.1f%% from the first to the last quarter)",
                                                 rk->rank, -rel * 100)
                                : tw_finding_add(out, "plateau", TW_SEV_WARNING,
                                                 "Loss is not improving on rank %d (%+.1f%% from the first to the "
                                                 "last quarter)",
                                                 rk->rank, -rel * 100);
        if (!f)
            return;
        tw_finding_at(f, run, &rk->last, rk->rank);
        f->value = rel;
        tw_finding_evidence(
            f,
            "median loss by quarter of the run: %.4g, %.4g, %.4g, %.4g (quarters end at steps %.0f, %.0f, %.0f, %.0f)",
            med[0], med[1], med[2], med[3], end[0], end[1], end[2], end[3]);
        tw_finding_evidence(f, "threshold: at least %.1f%% improvement expected", t->plateau_rel * 100);
        if (resumed) {
            tw_finding_evidence(f, "the log begins late: %s; a converged schedule's end is flat", late);
            tw_finding_recommend(f, "Nothing to do if the earlier part of the run learned: judge the curve on the "
                                    "whole run's logs.");
            continue;
        }
        tw_finding_recommend(
            f, "If the model should still be learning: check the learning rate (too low, or decayed to nothing), that "
               "labels match inputs, and that the parameters being trained are the ones in the optimizer.");
    }
}

const tw_rule tw_rule_plateau = {"plateau", "loss flat from the first to the last quarter", check_plateau};
