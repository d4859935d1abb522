/*
 * rule_eval.c: what the evaluation results say. Results that cannot be
 * true: top-k accuracy (and recall@k, hits@k) never falls as k grows, so a
 * top-1 above the top-5 of the same result means the values were swapped or
 * mislabeled on their way to the log. Evaluations that found nothing (the
 * model predicts no box at all, as it does once its weights are NaN).
 * Over-fitting: the evaluation loss
 * rising for several evaluations after its best while the training loss
 * keeps falling.
 */
#include <math.h>
#include <string.h>

#include "diagnose.h"

static void check_eval_contradiction(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    const tw_contradiction *c = &run->contradiction;
    if (c->count == 0)
        return;
    tw_finding *f = tw_finding_add(out, "eval_contradiction", TW_SEV_WARNING,
                                   "Evaluation results contradict each other: %s %.4g above %s %.4g", c->low_name, c->low,
                                   c->high_name, c->high);
    if (!f)
        return;
    f->where = tw_run_source(run, c->file, c->line);
    f->rank = c->rank;
    f->step = -1;
    f->value = c->low - c->high;
    char where[512];
    tw_finding_evidence(f, "rank %d reported %s %.6g and %s %.6g in one result (%s); a metric at a smaller k can never be above the same metric at a larger k",
                        c->rank, c->low_name, c->low, c->high_name, c->high,
                        tw_where(run, c->file, c->line, where, sizeof where));
    if (c->count > 1)
        tw_finding_evidence(f, "%llu evaluation records like this", (unsigned long long)c->count);
    tw_finding_recommend(f, "The values are swapped or mislabeled between the metric and the log: check the order in which the evaluation code returns and prints them, and, in distributed evaluation, that every rank all-reduces the same metrics in the same order (compare this rank's line with rank 0's).");
}

const tw_rule tw_rule_eval_contradiction = {"eval_contradiction", "evaluation results that cannot both be true (top-1 above top-5)",
                                            check_eval_contradiction};

/* Over-fitting: after the best evaluation at least OVERFIT_AFTER more and a
 * fifth of all of them (a best near the end with a noisy last value is not
 * a trend: the corpus's hapi landmark run, eval loss 7e-4 then 1e-2 at its
 * last of 60), the last OVERFIT_RISE x the best and the median of those
 * after it OVERFIT_MEDIAN x the best (YOLOv5's val/obj_loss drifting 1.2x
 * up while mAP rises is not it), while the training loss went on falling. */
#define OVERFIT_MIN_EVALS 5
#define OVERFIT_AFTER 3
#define OVERFIT_RISE 1.5
#define OVERFIT_MEDIAN 1.2
#define OVERFIT_MAX 512

/* The training loss of a rank around pos: the median of the kept points
 * within the nearest eight before it (or at it); NAN when none. */
static double train_loss_near(const tw_rank *rk, double pos)
{
    double v[8];
    size_t n = 0, last = 0;
    bool found = false;
    for (size_t i = 0; i < rk->series.count && rk->series.points[i].pos <= pos; i++) {
        if ((rk->series.points[i].fields & TW_F_LOSS) && isfinite(rk->series.points[i].loss)) {
            last = i;
            found = true;
        }
    }
    for (size_t i = last + 1; found && i-- > 0 && n < 8;) {
        const tw_point *q = &rk->series.points[i];
        if ((q->fields & TW_F_LOSS) && isfinite(q->loss))
            v[n++] = q->loss;
    }
    return n ? tw_median(v, n) : NAN;
}

static bool is_loss_name(const char *name)
{
    return strstr(name, "loss") != NULL;
}

static void overfit_metric(const tw_run *run, int metric, tw_findings *out)
{
    const tw_eval_point *pts[OVERFIT_MAX];
    size_t n = 0;
    int rank = -1;
    for (size_t i = 0; i < run->eval_series.count && n < OVERFIT_MAX; i++) {
        const tw_eval_point *e = &run->eval_series.points[i];
        if (e->metric != metric || !isfinite(e->value))
            continue;
        if (rank < 0)
            rank = e->rank;
        if (e->rank == rank)
            pts[n++] = e;
    }
    if (n < OVERFIT_MIN_EVALS)
        return;
    size_t best = 0;
    for (size_t i = 1; i < n; i++) {
        if (pts[i]->value < pts[best]->value)
            best = i;
    }
    size_t later = n - best - 1;
    if (later < OVERFIT_AFTER || later * 5 < n || !(pts[best]->value > 0))
        return;
    double after[OVERFIT_MAX];
    for (size_t i = best + 1; i < n; i++)
        after[i - best - 1] = pts[i]->value;
    double med = tw_median(after, n - best - 1);
    const tw_eval_point *last = pts[n - 1];
    if (!(last->value >= OVERFIT_RISE * pts[best]->value && med >= OVERFIT_MEDIAN * pts[best]->value))
        return;
    const tw_rank *rk = tw_run_rank(run, rank);
    double train_at_best = rk && rk->used ? train_loss_near(rk, pts[best]->pos) : NAN;
    double train_end = rk && rk->used ? train_loss_near(rk, last->pos) : NAN;
    if (!(train_end < train_at_best))
        return; /* both rising is divergence, not over-fitting; no train loss: cannot tell */
    const char *name = run->eval_metrics.items[metric].s.name;
    char where[600];
    tw_finding *f = tw_finding_add(out, "overfitting", TW_SEV_WARNING,
                                   "Over-fitting: %s rose %.1fx over the %zu evaluations after its best at step %.0f "
                                   "while the training loss kept falling",
                                   name, last->value / pts[best]->value, n - best - 1, pts[best]->pos);
    if (!f)
        return;
    f->where = tw_run_source(run, pts[best]->file, pts[best]->line);
    f->step = (int64_t)pts[best]->pos;
    f->rank = rank;
    f->value = last->value / pts[best]->value;
    tw_finding_evidence(f, "best %s: %.4g at step %.0f (%s)", name, pts[best]->value, pts[best]->pos,
                        tw_where(run, pts[best]->file, pts[best]->line, where, sizeof where));
    tw_finding_evidence(f, "last: %.4g at step %.0f (%s); median after the best %.4g", last->value, last->pos,
                        tw_where(run, last->file, last->line, where, sizeof where), med);
    tw_finding_evidence(f, "training loss over the same steps: %.4g -> %.4g", train_at_best, train_end);
    tw_finding_recommend(f, "Keep the checkpoint of step %.0f (HF Trainer: load_best_model_at_end=True with "
                            "metric_for_best_model=\"eval_loss\"; an early-stopping callback), and regularise: "
                            "weight decay, dropout, augmentation, a lower learning rate or fewer epochs.",
                         pts[best]->pos);
}

static void check_overfitting(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    for (int m = 0; m < run->eval_metrics.count; m++) {
        if (run->eval_metrics.items[m].lower_is_better && is_loss_name(run->eval_metrics.items[m].s.name))
            overfit_metric(run, m, out);
    }
}

const tw_rule tw_rule_overfitting = {"overfitting", "evaluation loss rising after its best while training loss falls",
                                     check_overfitting};

/* The evaluation said it found nothing: mmdet's "The testing results of the
 * whole dataset is empty.", detectron2's "No predictions from the model!". */
static bool says_eval_empty(const tw_event_note *e)
{
    return e->kind == TW_EV_WARNING &&
           (strstr(e->message, "results of the whole dataset is empty") ||
            strstr(e->message, "No predictions from the model"));
}

static void check_eval_empty(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    const tw_event_note *first = NULL, *last = NULL;
    int count = 0;
    for (int i = 0; i < run->events_kept_count; i++) {
        const tw_event_note *e = &run->events_kept[i];
        if (!says_eval_empty(e))
            continue;
        if (!first)
            first = e;
        last = e;
        count++;
    }
    if (!first)
        return;
    tw_finding *f = tw_finding_add(out, "eval_empty", TW_SEV_ERROR,
                                   "%s%d evaluation%s found nothing: the model predicted no result",
                                   run->events_not_kept ? "At least " : "", count, count == 1 ? "" : "s");
    if (!f)
        return;
    tw_finding_at_event(f, run, first);
    tw_finding_first_last(f, run, first, last);
    bool nan = false;
    for (int i = 0; i < run->rank_count; i++)
        nan |= run->ranks[i] && run->ranks[i]->have_nan;
    if (nan)
        tw_finding_evidence(f, "the loss was NaN before it: a model with NaN weights predicts nothing, so every "
                               "evaluation after that point is empty and the training after it is wasted");
    tw_finding_recommend(f, "Stop the run: an empty evaluation means the model outputs nothing usable. If the loss "
                            "went NaN, fix that first (lr, warm-up, gradient clipping) and restart from a checkpoint "
                            "before it; otherwise check the score threshold, the class count and that the "
                            "evaluation reads the right annotations.");
}

const tw_rule tw_rule_eval_empty = {"eval_empty", "evaluations that found nothing", check_eval_empty};
