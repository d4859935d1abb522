/*
 * rule_eval.c: evaluation results that cannot be true. Top-k accuracy (and
 * recall@k, hits@k) never falls as k grows, so a top-1 above the top-5 of the
 * same result means the values were swapped or mislabeled on their way to
 * the log: the evaluation the run is judged by is wrong.
 */
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
