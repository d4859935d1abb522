/*
 * baseline.c: a run judged against the last runs of its job in the
 * history. slower_than_history: its step time (p50) 25% over their median
 * and beyond their robust spread; loss_behind_history: its loss at its last
 * step above what every one of them had at that step, by more than their
 * noise. Either needs TW_HISTORY_BASELINE_MIN earlier runs, so a new job
 * or a first experiment is never judged; the findings name the runs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/error.h"
#include "history_internal.h"

#define SLOWER_MEDIAN 1.25 /* 25% over their median ... */
#define SLOWER_SPREAD 3    /* ... and this many robust deviations (1.4826 x MAD) over it */
#define LOSS_NOISE 3       /* loss above every earlier run's by this x their noise */

/* "12, 13 and 15" of the runs used. */
static void run_list(const tw_history_entry *runs, const bool *used, size_t n, char *buf, size_t cap)
{
    size_t len = 0, shown = 0, total = 0;
    for (size_t i = 0; i < n; i++)
        total += used[i];
    buf[0] = '\0';
    for (size_t j = n; j-- > 0 && len < cap;) { /* oldest first: runs are newest first */
        size_t i = j;
        if (!used[i])
            continue;
        const char *sep = !shown ? "" : shown + 1 == total ? " and " : ", ";
        int w = snprintf(buf + len, cap - len, "%s%lld", sep, (long long)runs[i].id);
        len += w > 0 ? (size_t)w : 0;
        shown++;
    }
}

/* The step times (p50) of the runs that logged one: their median and
 * robust deviation (1.4826 x MAD), the fastest and slowest; used[i] marks
 * the runs counted. The number counted. */
typedef struct step_stats {
    size_t count;
    double median, spread, p95_median, fastest, slowest;
    size_t fastest_at;
} step_stats;

static void step_stats_of(const tw_history_entry *runs, size_t n, bool *used, step_stats *st)
{
    double p50s[TW_HISTORY_BASELINE_RUNS], p95s[TW_HISTORY_BASELINE_RUNS], dev[TW_HISTORY_BASELINE_RUNS];
    size_t k = 0, k95 = 0;
    *st = (step_stats){.median = NAN, .spread = NAN, .p95_median = NAN, .fastest = INFINITY};
    for (size_t i = 0; i < n && i < TW_HISTORY_BASELINE_RUNS; i++) {
        used[i] = isfinite(runs[i].step_p50) && runs[i].step_p50 > 0;
        if (!used[i])
            continue;
        p50s[k++] = runs[i].step_p50;
        if (isfinite(runs[i].step_p95) && runs[i].step_p95 > 0)
            p95s[k95++] = runs[i].step_p95;
        if (runs[i].step_p50 < st->fastest) {
            st->fastest = runs[i].step_p50;
            st->fastest_at = i;
        }
        st->slowest = fmax(st->slowest, runs[i].step_p50);
    }
    st->count = k;
    if (!k)
        return;
    st->median = tw_history_median(p50s, k);
    for (size_t i = 0; i < k; i++)
        dev[i] = fabs(p50s[i] - st->median);
    st->spread = 1.4826 * tw_history_median(dev, k);
    st->p95_median = k95 ? tw_history_median(p95s, k95) : NAN;
}

/* The step time over which a run is slower than its job's runs. */
static double slower_limit(const step_stats *st)
{
    return fmax(st->median * SLOWER_MEDIAN, st->median + SLOWER_SPREAD * st->spread);
}

static int slower(const tw_history_view *now, const tw_history_entry *runs, size_t n, tw_report *report)
{
    bool used[TW_HISTORY_BASELINE_RUNS] = {false};
    step_stats st;
    step_stats_of(runs, n, used, &st);
    size_t k = st.count, fastest_at = st.fastest_at;
    double med = st.median, fastest = st.fastest, slowest = st.slowest;
    double p50 = now->entry.step_p50;
    if (k < TW_HISTORY_BASELINE_MIN || !isfinite(p50))
        return TW_OK;
    if (p50 <= slower_limit(&st))
        return TW_OK; /* one slow run among them does not make the next slow one normal */
    tw_finding f = {.rule = "slower_than_history", .severity = TW_SEV_WARNING, .launch = 0, .rank = -1,
                    .step = -1, .value = p50 / med};
    char how[40];
    if (p50 >= 2 * med)
        snprintf(how, sizeof how, "%.1fx their median", p50 / med);
    else
        snprintf(how, sizeof how, "%.0f%% over their median", 100 * (p50 / med - 1));
    snprintf(f.title, sizeof f.title, "Slower than the last %zu runs of job %.60s: step time p50 %.4g s, %s", k,
             now->entry.job, p50, how);
    char list[256];
    run_list(runs, used, n, list, sizeof list);
    char wait[64] = "";
    if (isfinite(now->entry.data_share))
        snprintf(wait, sizeof wait, "\ndata wait %.0f%% of step time here", 100 * now->entry.data_share);
    snprintf(f.evidence, sizeof f.evidence,
             "step time p50 %.4g s against a median of %.4g s over runs %s (from %.4g s to %.4g s)%s", p50, med, list,
             fastest, slowest, wait);
    snprintf(f.recommendation, sizeof f.recommendation,
             "Lay it beside the fastest of them, `trainwatch compare %lld %.200s`: it says what changed (data wait, "
             "stated settings, versions).",
             (long long)runs[fastest_at].id, now->entry.name);
    return tw_report_append(report, &f);
}

static int behind(tw_history *h, const tw_history_view *now, const tw_history_entry *runs, size_t n,
                  tw_report *report)
{
    const tw_history_series *mine = tw_history_view_series(now, "loss");
    if (!mine || mine->count < 3)
        return TW_OK;
    double at = mine->pos[mine->count - 1], loss = mine->value[mine->count - 1];
    if (!isfinite(loss))
        return TW_OK; /* a NaN has its own finding */
    double worst = -INFINITY, noise = tw_history_noise(mine), values[TW_HISTORY_BASELINE_RUNS];
    bool used[TW_HISTORY_BASELINE_RUNS] = {false};
    size_t k = 0;
    char err[600];
    for (size_t i = 0; i < n; i++) {
        tw_history_view v;
        if (tw_history_view_load(h, runs[i].id, &v, err, sizeof err) != TW_OK)
            continue;
        const tw_history_series *theirs = tw_history_view_series(&v, "loss");
        double then = tw_history_value_at(theirs, at, NULL);
        if (isfinite(then)) {
            used[i] = true;
            values[k++] = then;
            worst = fmax(worst, then);
            noise = fmax(noise, tw_history_noise(theirs));
        }
        tw_history_view_free(&v);
    }
    if (k < TW_HISTORY_BASELINE_MIN || loss <= worst + LOSS_NOISE * noise)
        return TW_OK;
    double med = tw_history_median(values, k);
    tw_finding f = {.rule = "loss_behind_history", .severity = TW_SEV_WARNING, .launch = 0, .rank = -1,
                    .step = (int64_t)at, .value = loss - med};
    snprintf(f.title, sizeof f.title, "Loss behind the last %zu runs of job %.60s: %.4g at step %.0f, where they had %.4g (median)",
             k, now->entry.job, loss, at, med);
    char list[256];
    run_list(runs, used, n, list, sizeof list);
    snprintf(f.evidence, sizeof f.evidence,
             "loss %.4g at step %.0f; runs %s had %.4g at most there (the runs' noise %.3g)", loss, at, list, worst,
             noise);
    snprintf(f.recommendation, sizeof f.recommendation,
             "trainwatch compare with one of those runs shows where the curves part and which stated settings "
             "(learning rate, batch size, versions) differ.");
    return tw_report_append(report, &f);
}

int tw_history_baseline(tw_history *h, const tw_history_view *now, tw_report *report, char *err, size_t errlen)
{
    if (!now->entry.job[0])
        return TW_OK;
    tw_history_filter filter = {.job = now->entry.job, .limit = TW_HISTORY_BASELINE_RUNS};
    tw_history_entry *runs;
    size_t n;
    int rc = tw_history_list(h, &filter, &runs, &n, err, errlen);
    if (rc != TW_OK)
        return rc;
    if (n >= TW_HISTORY_BASELINE_MIN) {
        rc = slower(now, runs, n, report);
        if (rc == TW_OK)
            rc = behind(h, now, runs, n, report);
        if (rc == TW_ENOMEM)
            snprintf(err, errlen, "out of memory");
    }
    free(runs);
    return rc;
}

int tw_history_step_baseline(tw_history *h, const char *job, tw_history_step_times *out, char *err,
                             size_t errlen)
{
    *out = (tw_history_step_times){.p50 = NAN, .p95 = NAN, .limit = NAN};
    if (!job || !job[0])
        return TW_OK;
    tw_history_filter filter = {.job = job, .limit = TW_HISTORY_BASELINE_RUNS};
    tw_history_entry *runs;
    size_t n;
    int rc = tw_history_list(h, &filter, &runs, &n, err, errlen);
    if (rc != TW_OK)
        return rc;
    bool used[TW_HISTORY_BASELINE_RUNS] = {false};
    step_stats st;
    step_stats_of(runs, n, used, &st);
    free(runs);
    if (st.count < TW_HISTORY_BASELINE_MIN)
        return TW_OK; /* a new job or a first experiment is never judged */
    *out = (tw_history_step_times){
        .runs = st.count, .p50 = st.median, .p95 = st.p95_median, .limit = slower_limit(&st)};
    return TW_OK;
}
