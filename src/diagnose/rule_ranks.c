/*
 * rule_ranks.c: comparing ranks of a distributed run: a straggler (its step
 * time against the median of the others) and a rank that stopped reporting
 * steps while the others went on. Ranks that never log steps (many suites
 * log on rank 0 only) are not compared.
 */
#include <math.h>
#include <stdlib.h>

#include "diagnose.h"

static void check_straggler(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    double med[TW_MAX_RANKS];
    const tw_rank *rk[TW_MAX_RANKS];
    int n = 0;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *r = run->ranks[i];
        if (!r || r->hist_count < 5)
            continue;
        rk[n] = r;
        med[n++] = tw_hist_quantile(r->hist, r->hist_count, 0.5);
    }
    if (n < 2)
        return;
    double *others = malloc(sizeof(double) * (size_t)n);
    if (!others)
        return;
    for (int i = 0; i < n; i++) {
        int m = 0;
        for (int j = 0; j < n; j++) {
            if (j != i)
                others[m++] = med[j];
        }
        double base = tw_median(others, (size_t)m);
        if (!(base > 0 && med[i] > t->straggler_factor * base))
            continue;
        char a[32], b[32];
        tw_finding *f = tw_finding_add(out, "straggler", TW_SEV_WARNING, "Rank %d is a straggler: its steps take %.2fx the others'",
                                       rk[i]->rank, med[i] / base);
        if (!f)
            break;
        tw_finding_at(f, run, &rk[i]->last, rk[i]->rank);
        f->value = med[i] / base;
        tw_finding_evidence(f, "median step time %s on rank %d against %s, the median of the other %d ranks",
                            tw_fmt_duration(med[i], a, sizeof a), rk[i]->rank, tw_fmt_duration(base, b, sizeof b), n - 1);
        tw_finding_recommend(f, "In synchronous data parallel every rank waits for the slowest: check that rank's GPU (clocks, throttling, ECC errors), its data shard (larger or slower files), its host (other processes, NUMA placement) and its network link.");
    }
    free(others);
}

const tw_rule tw_rule_straggler = {"straggler", "a rank whose steps are slower than the others'", check_straggler};

static void check_rank_stopped(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    const tw_rank *lead = NULL;
    int ranks = 0;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *r = run->ranks[i];
        if (!r || !r->used)
            continue;
        ranks++;
        if (!lead || r->last.pos > lead->last.pos)
            lead = r;
    }
    if (ranks < 2)
        return;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *r = run->ranks[i];
        if (!r || !r->used || r == lead || !(r->last.pos < t->early_stop_share * lead->last.pos))
            continue;
        char w[600], b1[64], b2[64];
        tw_finding *f = tw_finding_add(out, "rank_stopped", TW_SEV_ERROR, "Rank %d stopped at step %.0f while rank %d reached step %.0f",
                                       r->rank, r->last.pos, lead->rank, lead->last.pos);
        if (!f)
            return;
        tw_finding_at(f, run, &r->last, r->rank);
        f->value = r->last.pos;
        tw_finding_evidence(f, "last step of rank %d: %.0f at %s (%s)", r->rank, r->last.pos,
                            tw_fmt_time(r->last.time, b1, sizeof b1), tw_where(run, r->last.file, r->last.line, w, sizeof w));
        tw_finding_evidence(f, "rank %d went on to step %.0f (%s)", lead->rank, lead->last.pos, tw_fmt_time(lead->last.time, b2, sizeof b2));
        tw_finding_recommend(f, "Read the end of that rank's log for its error; a lost worker makes the others hang in their next collective.");
    }
}

const tw_rule tw_rule_rank_stopped = {"rank_stopped", "a rank that stopped while others went on", check_rank_stopped};
