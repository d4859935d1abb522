/*
 * rule_fields.c: fields the log prints that do not mean what their names
 * say.
 *
 * A "time" or "elapsed" field that only grows is the time since the start,
 * not a step time: run.c finds it (ten records in a row rising to five
 * times the first value) and from then on takes step times from its
 * differences; this says so. And the step times a log prints are checked
 * against its own timestamps: the median gap between records, per step the
 * records stand for, against the median step time printed. A field that is
 * an average over a window, a per-sample time, or a unit misread shows as a
 * factor of several between the two.
 */
#include <math.h>

#include "diagnose.h"

#define TW_TIME_DISAGREE 3.0 /* printed step time and timestamps this many times apart disagree */

static void check_cumulative(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk->used || !rk->cumulative)
            continue;
        char where[600], a[32];
        tw_finding *f =
            tw_finding_add(out, "cumulative_time", TW_SEV_INFO,
                           "Rank %d's step-time field is a running total: step times are its differences", rk->rank);
        if (!f)
            return;
        tw_finding_at(f, run, &rk->cumulative_point, rk->rank);
        tw_finding_evidence(f, "it rose in every record, from %.4g to %.4g by %s", rk->total_first, rk->total_last,
                            tw_where(run, rk->cumulative_point.file, rk->cumulative_point.line, where, sizeof where));
        double p50 = tw_hist_quantile(&rk->step_times, 0.5);
        if (!isnan(p50))
            tw_finding_evidence(f, "its differences give a median step time of %s", tw_fmt_duration(p50, a, sizeof a));
        tw_finding_recommend(f, "Print the time of the last step (or interval) rather than the time since the start, "
                                "or name the field elapsed so readers know it is a total.");
    }
}

const tw_rule tw_rule_cumulative_time = {"cumulative_time", "a step-time field that is a running total",
                                         check_cumulative};

static void check_against_timestamps(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk->used || rk->gaps.count < 20 || rk->step_times.count < 20 || rk->steps == 0)
            continue;
        double per_record = (double)rk->step_span / (double)rk->steps;
        double gap = tw_hist_quantile(&rk->gaps, 0.5);
        double printed = tw_hist_quantile(&rk->step_times, 0.5);
        if (!(per_record >= 1) || !(gap > 0) || !(printed > 0))
            continue;
        double by_time = gap / per_record, ratio = printed / by_time;
        if (ratio < TW_TIME_DISAGREE && ratio > 1 / TW_TIME_DISAGREE)
            continue;
        char a[32], b[32], r[32];
        tw_finding *f = tw_finding_add(out, "step_time_mismatch", TW_SEV_WARNING,
                                       "Rank %d's printed step time is %sx what its timestamps say", rk->rank,
                                       tw_fmt_number(ratio, 2, r, sizeof r));
        if (!f)
            return;
        tw_finding_at(f, run, &rk->last, rk->rank);
        f->value = ratio;
        tw_finding_evidence(f,
                            "median printed step time %s; the timestamps: a record every %s, %.0f steps each, "
                            "%s a step",
                            tw_fmt_duration(printed, a, sizeof a), tw_fmt_duration(gap, b, sizeof b), per_record,
                            tw_fmt_duration(by_time, r, sizeof r));
        tw_finding_recommend(f, "The step time this report uses is the printed one: check what the field measures "
                                "(an average over a window, per sample, a unit) before trusting its throughput and "
                                "data-wait figures.");
    }
}

const tw_rule tw_rule_step_time_mismatch = {"step_time_mismatch", "printed step times against the log's timestamps",
                                            check_against_timestamps};
