/*
 * rule_ranks.c: comparing ranks of a distributed run: a straggler (its step
 * time against the median of the others) and a rank that stopped reporting
 * steps while the others went on; the straggler's finding says what the run
 * would save if it kept pace. Ranks that never log steps (many suites
 * log on rank 0 only) are not compared. Also: step records of ranks past the
 * limit of distinct ranks a run keeps, which are counted, not analysed.
 */
#include <math.h>
#include <stdlib.h>

#include "diagnose.h"
#include "trainwatch/error.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of sorted[0..n) without one element equal to v: found by
 * binary search, so comparing every rank with the others costs n log n. */
static double median_without(const double *sorted, int n, double v)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (sorted[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    int k = lo, m = n - 1;
#define OTHER(j) sorted[(j) < k ? (j) : (j) + 1]
    return m % 2 ? OTHER(m / 2) : (OTHER(m / 2 - 1) + OTHER(m / 2)) / 2;
#undef OTHER
}

/* What the run would save if the straggler kept pace with the others (in
 * synchronous data parallel every rank waits for it): per step its median
 * over theirs, then for the steps the log says are left, else over the
 * steps it logged; in GPU time over the ranks that train, all of which wait. */
static void straggler_what_if(tw_finding *f, const tw_run *run, const tw_rank *rk, double med, double base)
{
    int gpus = 0;
    for (int i = 0; i < run->rank_count; i++)
        gpus += run->ranks[i] && run->ranks[i]->used;
    gpus = gpus > 0 ? gpus : 1;
    char a[32], b[32], c[32];
    tw_finding_evidence(f, "if rank %d kept pace with the others, a step would take %.3fs instead of %.3fs", rk->rank,
                        base, med);
    double left = tw_run_steps_left(run, rk);
    double logged = rk->sum_weight > 0 ? rk->sum_weight : (double)rk->step_times.count;
    if (isfinite(left) && left > 0)
        tw_finding_evidence(f, "the %.0f steps left would take %s instead of %s: %s of GPU time saved on %d GPU%s",
                            left, tw_fmt_duration(left * base, a, sizeof a), tw_fmt_duration(left * med, b, sizeof b),
                            tw_fmt_duration(left * (med - base) * gpus, c, sizeof c), gpus, gpus == 1 ? "" : "s");
    else if (logged > 0)
        tw_finding_evidence(f, "over the %.0f steps logged that is %s of %s: %s of GPU time on %d GPU%s", logged,
                            tw_fmt_duration(logged * (med - base), a, sizeof a),
                            tw_fmt_duration(logged * med, b, sizeof b),
                            tw_fmt_duration(logged * (med - base) * gpus, c, sizeof c), gpus, gpus == 1 ? "" : "s");
}

static void report_straggler(const tw_run *run, tw_findings *out, const tw_rank *rk, double med, double base, int n)
{
    char a[32], b[32], ratio[32];
    tw_fmt_number(med / base, 2, ratio, sizeof ratio);
    tw_finding *f = tw_finding_add(out, "straggler", TW_SEV_WARNING,
                                   "Rank %d is a straggler: its steps take %sx the others'", rk->rank, ratio);
    if (!f)
        return;
    tw_finding_at(f, run, &rk->last, rk->rank);
    f->value = med / base;
    tw_finding_evidence(f, "median step time %s on rank %d against %s, the median of the other %d ranks",
                        tw_fmt_duration(med, a, sizeof a), rk->rank, tw_fmt_duration(base, b, sizeof b), n - 1);
    straggler_what_if(f, run, rk, med, base);
    tw_finding_recommend(f, "In synchronous data parallel every rank waits for the slowest: check that rank's GPU "
                            "(clocks, throttling, ECC errors), its data shard (larger or slower files), its host "
                            "(other processes, NUMA placement) and its network link.");
}

static void check_straggler(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    if (run->rank_count < 2)
        return;
    double *med = malloc(sizeof *med * (size_t)run->rank_count);
    double *sorted = malloc(sizeof *sorted * (size_t)run->rank_count);
    const tw_rank **rk = malloc(sizeof *rk * (size_t)run->rank_count);
    int n = 0;
    for (int i = 0; med && sorted && rk && i < run->rank_count; i++) {
        const tw_rank *r = run->ranks[i];
        if (r->step_times.count < 5)
            continue;
        rk[n] = r;
        med[n] = sorted[n] = tw_hist_quantile(&r->step_times, 0.5);
        n++;
    }
    if (n >= 2) {
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
        for (int i = 0; i < n; i++) {
            double base = median_without(sorted, n, med[i]);
            if (base > 0 && med[i] > t->straggler_factor * base)
                report_straggler(run, out, rk[i], med[i], base, n);
        }
    }
    free(med);
    free(sorted);
    free(rk);
}

const tw_rule tw_rule_straggler = {"straggler", "a rank whose steps are slower than the others'", check_straggler};

static void check_rank_stopped(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    const tw_rank *lead = NULL;
    int ranks = 0;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *r = run->ranks[i];
        if (!r->used)
            continue;
        ranks++;
        if (!lead || r->last.pos > lead->last.pos)
            lead = r;
    }
    if (ranks < 2)
        return;
    tw_root_cause rc;
    if (tw_root_cause_find(run, &rc) != TW_OK)
        return;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *r = run->ranks[i];
        if (!r->used || r == lead || !(r->last.pos < t->early_stop_share * lead->last.pos))
            continue;
        if (tw_root_cause_blames_other(&rc, r->rank))
            continue; /* another rank failed first: the crash finding names this one as its victim */
        char w[600], b1[64], b2[64];
        tw_finding *f = tw_finding_add(out, "rank_stopped", TW_SEV_ERROR,
                                       "Rank %d stopped at step %.0f while rank %d reached step %.0f", r->rank,
                                       r->last.pos, lead->rank, lead->last.pos);
        if (!f)
            break;
        tw_finding_at(f, run, &r->last, r->rank);
        f->value = r->last.pos;
        tw_finding_evidence(f, "last step of rank %d: %.0f at %s (%s)", r->rank, r->last.pos,
                            tw_fmt_time(r->last.time, b1, sizeof b1),
                            tw_where(run, r->last.file, r->last.line, w, sizeof w));
        tw_finding_evidence(f, "rank %d went on to step %.0f (%s)", lead->rank, lead->last.pos,
                            tw_fmt_time(lead->last.time, b2, sizeof b2));
        tw_finding_recommend(f, "Read the end of that rank's log for its error; a lost worker makes the others hang in "
                                "their next collective.");
    }
    tw_root_cause_free(&rc);
}

const tw_rule tw_rule_rank_stopped = {"rank_stopped", "a rank that stopped while others went on", check_rank_stopped};

/* Ranks past the limit of distinct ranks a run keeps are not analysed: say
 * so rather than fold them into another rank. */
static void check_over_limit(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    if (run->over_limit_steps == 0)
        return;
    tw_finding *f = tw_finding_add(out, "ranks_over_limit", TW_SEV_WARNING,
                                   "More than %d distinct ranks: %llu step records of further ranks were not analysed",
                                   run->rank_limit, (unsigned long long)run->over_limit_steps);
    if (!f)
        return;
    f->value = (double)run->over_limit_steps;
    tw_finding_evidence(f, "the first of them belongs to rank %d", run->over_limit_first);
    tw_finding_recommend(f, "Analyse the ranks in groups of at most %d (one trainwatch analyze per group).",
                         run->rank_limit);
}

const tw_rule tw_rule_ranks_over_limit = {"ranks_over_limit", "records of more distinct ranks than a run keeps",
                                          check_over_limit};
