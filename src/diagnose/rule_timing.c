/*
 * rule_timing.c: where the time goes: data-loading bound steps, stalls
 * (long gaps between steps), step-time jitter, and throughput falling over
 * the run.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"

/* Below this mean step time the split between data and compute is timer
 * noise, not a bottleneck anyone can act on. */
#define TW_DATA_BOUND_MIN_STEP_SECONDS 0.001

/* Median of data/batch over the series points that carry both. */
static double median_data_share(const tw_rank *rk, size_t *count, const tw_point **worst)
{
    double *v = malloc(sizeof(double) * TW_SERIES_MAX);
    if (!v)
        return NAN;
    size_t n = 0;
    double worst_ratio = -1;
    for (size_t i = 0; i < rk->series.count; i++) {
        const tw_point *p = &rk->series.points[i];
        if ((p->fields & TW_F_DATA_TIME) && (p->fields & TW_F_BATCH_TIME) && p->batch > 0) {
            double r = p->data / p->batch;
            v[n++] = r;
            if (r > worst_ratio) {
                worst_ratio = r;
                *worst = p;
            }
        }
    }
    *count = n;
    double m = tw_median(v, n);
    free(v);
    return m;
}

/* What hiding the data wait (loading the next batch while the GPU computes
 * this one) would save: per step, then for the steps the log says are left,
 * else over the steps it logged; in GPU-hours over the ranks that train. */
static void what_if(tw_finding *f, const tw_run *run, const tw_rank *rk)
{
    double step = rk->sum_batch / rk->sum_weight, wait = rk->sum_data / rk->sum_weight;
    int gpus = 0;
    for (int i = 0; i < run->rank_count; i++)
        gpus += run->ranks[i] && run->ranks[i]->used;
    gpus = gpus > 0 ? gpus : 1;
    char a[32], b[32], c[32];
    tw_finding_evidence(f, "with the data wait hidden behind compute, a step would take %.3fs instead of %.3fs",
                        step - wait, step);
    double left = tw_run_steps_left(run, rk);
    if (isfinite(left) && left > 0)
        tw_finding_evidence(f, "the %.0f steps left would take %s instead of %s: %s of GPU time saved on %d GPU%s",
                            left, tw_fmt_duration(left * (step - wait), a, sizeof a),
                            tw_fmt_duration(left * step, b, sizeof b), tw_fmt_duration(left * wait * gpus, c, sizeof c),
                            gpus, gpus == 1 ? "" : "s");
    else
        tw_finding_evidence(f, "over the %.0f steps logged it waited %s of %s: %s of GPU time on %d GPU%s",
                            rk->sum_weight, tw_fmt_duration(rk->sum_data, a, sizeof a),
                            tw_fmt_duration(rk->sum_batch, b, sizeof b), tw_fmt_duration(rk->sum_data * gpus, c, sizeof c),
                            gpus, gpus == 1 ? "" : "s");
}

static void check_data_bound(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    const tw_rank *worst_rank = NULL;
    double worst_share = -1, worst_median = 0;
    const tw_point *worst_point = NULL;
    size_t worst_n = 0;
    int bound_ranks = 0;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk || rk->both_count < 3 || rk->sum_batch / rk->sum_weight < TW_DATA_BOUND_MIN_STEP_SECONDS)
            continue;
        size_t n = 0;
        const tw_point *wp = NULL;
        double median = median_data_share(rk, &n, &wp);
        double share = rk->sum_data / rk->sum_batch;
        if (share < t->data_share)
            continue;
        bound_ranks++;
        if (share > worst_share) {
            worst_share = share;
            worst_median = median;
            worst_rank = rk;
            worst_point = wp;
            worst_n = n;
        }
    }
    if (!worst_rank)
        return;
    const tw_rank *rk = worst_rank;
    tw_finding *f = tw_finding_add(out, "data_loading_bound", TW_SEV_WARNING,
                                   "Data loading bound: steps wait for data %.0f%% of the time", worst_share * 100);
    /* (the share is weighted by the steps each logged record stands for) */
    if (!f)
        return;
    f->value = worst_share;
    f->rank = rk->rank;
    char where[600];
    tw_finding_evidence(f,
                        "rank %d: reader/data time is %.0f%% of step time over %llu logged records (%.3fs of %.3fs per "
                        "step on average); median per record %.0f%%",
                        rk->rank, worst_share * 100, (unsigned long long)rk->both_count, rk->sum_data / rk->sum_weight,
                        rk->sum_batch / rk->sum_weight, worst_median * 100);
    if (worst_point) {
        tw_finding_at(f, run, worst_point, rk->rank);
        tw_finding_evidence(f, "worst record: step %.0f waited %.3fs of %.3fs (%s)", worst_point->pos,
                            worst_point->data, worst_point->batch,
                            tw_where(run, worst_point->file, worst_point->line, where, sizeof where));
    }
    (void)worst_n;
    if (bound_ranks > 1)
        tw_finding_evidence(f, "%d ranks are above the %.0f%% threshold", bound_ranks, t->data_share * 100);
    tw_finding_evidence(f, "threshold: data wait above %.0f%% of step time", t->data_share * 100);
    what_if(f, run, rk);
    tw_finding_recommend(f, "Raise DataLoader num_workers (Paddle: paddle.io.DataLoader(num_workers=N, "
                            "use_shared_memory=True, persistent_workers=True); PyTorch: num_workers=N, "
                            "pin_memory=True, persistent_workers=True, prefetch_factor=4).");
    tw_finding_recommend(f, "Make decoding and augmentation cheaper: decode with cv2/DALI instead of PIL, pre-resize "
                            "or pre-decode the dataset, move heavy transforms to the GPU.");
    tw_finding_recommend(f, "Check the storage the dataset is read from (network filesystems, cold caches).");
}

const tw_rule tw_rule_data_bound = {"data_loading_bound", "steps waiting for the data loader", check_data_bound};

static const char *const stall_advice =
    "Look at what ran in that window: a hung collective (NCCL timeouts, a dead rank), a blocked data loader "
    "worker, a slow checkpoint write, or the node being preempted. For hangs set NCCL_DEBUG=INFO and a "
    "collective timeout; `trainwatch run` warns live when progress stops.";

/* What the record that ends a pause says its window waited for: input,
 * when the loader's wait (data_time) is most of a step time that is itself
 * WAIT_SLOW x the run's median (mmdet's "time: 4.911, data_time: 4.283"
 * after four silent minutes). True when it said so. */
#define WAIT_SLOW 3.0
static bool say_input_wait(tw_finding *f, const tw_run *run, const tw_rank *rk, const tw_point *after)
{
    unsigned both = TW_F_DATA_TIME | TW_F_BATCH_TIME;
    double usual = tw_hist_quantile(&rk->step_times, 0.5);
    if ((after->fields & both) != both || !(after->batch > 0) || !(after->data > 0.5 * after->batch) ||
        !(usual > 0 && after->batch >= WAIT_SLOW * usual))
        return false;
    char where[600];
    tw_finding_evidence(f, "the window waited for input: data_time %.3gs of %.3gs per step at step %.0f (%.0f%%; the "
                        "run's median step %.3gs) (%s)",
                        after->data, after->batch, after->pos, 100 * after->data / after->batch, usual,
                        tw_where(run, after->file, after->line, where, sizeof where));
    tw_finding_recommend(f, "The time went to reading input: use DataLoader workers (mmdet workers_per_gpu >= 2, "
                            "PyTorch/Paddle num_workers), and check the storage the data is read from (a network "
                            "filesystem, a cold cache, another job reading the same disk).");
    return true;
}

/* The limit a one-off pause must reach in a distribution of step times or
 * gaps: pause_factor x its p95 and pause_seconds; NAN when the
 * distribution is too short to know, or when PAUSE_RECURRING values reach
 * it (work the run does again and again, such as an unlogged checkpoint
 * every N steps: jitter, not a stall). */
#define PAUSE_MIN_VALUES 10
#define PAUSE_RECURRING 3
static double pause_limit(const tw_hist *h, const tw_thresholds *t)
{
    if (h->count < PAUSE_MIN_VALUES)
        return NAN;
    double limit = fmax(t->pause_seconds, t->pause_factor * tw_hist_quantile(h, 0.95));
    return tw_hist_count_from(h, limit) >= PAUSE_RECURRING ? NAN : limit;
}

/* A stall that is short by the clock but far outside the run's own step
 * times: a 3 s hang in a run of 1 ms steps. From the logged step time, or
 * from the timestamps (whole-second ones can stretch a gap by a second, so
 * the gap less one second must reach the limit). */
static bool check_pause(const tw_run *run, const tw_rank *rk, const tw_thresholds *t, tw_findings *out)
{
    double step_limit = pause_limit(&rk->step_times, t), gap_limit = pause_limit(&rk->gaps, t);
    bool by_step = rk->have_pause_step && rk->pause_step.batch >= step_limit;
    double gap = rk->pause_gap.seconds - (rk->fine_times ? 0 : 1);
    bool by_gap = rk->have_pause_gap && gap >= gap_limit && !(by_step && rk->pause_step.batch >= gap);
    if (!by_step && !by_gap)
        return false;
    const tw_point *at = by_gap ? &rk->pause_gap.after : &rk->pause_step;
    double seconds = by_gap ? rk->pause_gap.seconds : rk->pause_step.batch;
    const tw_hist *h = by_gap ? &rk->gaps : &rk->step_times;
    char d[32], p50[32], p95[32], lim[32], where[600];
    tw_finding *f =
        tw_finding_add(out, "stall", TW_SEV_WARNING, "Training stalled for %s on rank %d at step %.0f",
                       tw_fmt_duration(seconds, d, sizeof d), rk->rank, at->pos);
    if (!f)
        return true;
    tw_finding_at(f, run, at, rk->rank);
    f->value = seconds;
    if (by_gap)
        tw_finding_evidence(f, "no step for %s between step %.0f (%s) and step %.0f", d, rk->pause_gap.before.pos,
                            tw_where(run, rk->pause_gap.before.file, rk->pause_gap.before.line, where, sizeof where),
                            at->pos);
    else
        tw_finding_evidence(f, "step %.0f took %s (%s)", at->pos, d, tw_where(run, at->file, at->line, where, sizeof where));
    tw_finding_evidence(f, "the run's %s are %s (p50), %s (p95) over %llu records; a stall is %s or longer",
                        by_gap ? "gaps between logged steps" : "step times",
                        tw_fmt_duration(tw_hist_quantile(h, 0.5), p50, sizeof p50),
                        tw_fmt_duration(tw_hist_quantile(h, 0.95), p95, sizeof p95), (unsigned long long)h->count,
                        tw_fmt_duration(by_gap ? gap_limit : step_limit, lim, sizeof lim));
    if (!say_input_wait(f, run, rk, at))
        tw_finding_recommend(f, stall_advice);
    return true;
}

/* A pause too short for a stall but long by the clock (stall_seconds) and
 * PAUSE_NOTE_FACTOR x the run's usual gap between logged steps, with no
 * line between its two steps: a note, with what the window waited for (the evaluation set's
 * stall-zhaoyang-mmdet-maskrcnn-r101-carafe3-io: 246 s with no line in a
 * run that logs every 36 s, data_time 4.283 of time 4.911 in the record
 * after it; shorter pauses of the same kind recur, so it is no one-off
 * hang). */
#define PAUSE_NOTE_FACTOR 5.0
static void note_pause(const tw_run *run, const tw_rank *rk, const tw_thresholds *t, tw_findings *out)
{
    const tw_gap *g = &rk->pause_gap;
    double usual = tw_hist_quantile(&rk->gaps, 0.5);
    if (!rk->have_pause_gap || rk->gaps.count < PAUSE_MIN_VALUES || !(usual > 0) || g->seconds < t->stall_seconds ||
        g->seconds < PAUSE_NOTE_FACTOR * usual)
        return;
    /* silent: the two step lines are neighbours (a line between them is
     * work the run logged, such as RITM's "mean iou of iter 14000") */
    if (g->before.file != g->after.file || g->after.line != g->before.line + 1)
        return;
    char d[32], u[32], where[600];
    tw_finding *f = tw_finding_add(out, "stall", TW_SEV_INFO,
                                   "Training paused for %s on rank %d before step %.0f (%.1fx the usual gap)",
                                   tw_fmt_duration(g->seconds, d, sizeof d), rk->rank, g->after.pos,
                                   g->seconds / usual);
    if (!f)
        return;
    tw_finding_at(f, run, &g->after, rk->rank);
    f->value = g->seconds;
    tw_finding_evidence(f, "no step for %s after step %.0f (%s); the usual gap between logged steps is %s", d,
                        g->before.pos, tw_where(run, g->before.file, g->before.line, where, sizeof where),
                        tw_fmt_duration(usual, u, sizeof u));
    if (!say_input_wait(f, run, rk, &g->after))
        tw_finding_recommend(f, stall_advice);
}

static void check_stalls(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk->have_gap || rk->gaps.count < 3) {
            check_pause(run, rk, t, out);
            continue;
        }
        const tw_gap *g = &rk->longest_gap;
        double usual = tw_hist_quantile(&rk->gaps, 0.5);
        double limit = fmax(t->stall_seconds, t->stall_factor * usual);
        if (g->across_eval || g->seconds < limit) {
            if (!check_pause(run, rk, t, out))
                note_pause(run, rk, t, out);
            continue;
        }
        char b1[64], b2[64], d[32], u[32], w1[600], w2[600];
        tw_finding *f =
            tw_finding_add(out, "stall", TW_SEV_WARNING, "Training stalled for %s on rank %d after step %.0f",
                           tw_fmt_duration(g->seconds, d, sizeof d), rk->rank, g->before.pos);
        if (!f)
            return;
        tw_finding_at(f, run, &g->after, rk->rank);
        f->value = g->seconds;
        tw_finding_evidence(f, "no step between %s (step %.0f, %s) and %s (step %.0f, %s)",
                            tw_fmt_time(g->before.time, b1, sizeof b1), g->before.pos,
                            tw_where(run, g->before.file, g->before.line, w1, sizeof w1),
                            tw_fmt_time(g->after.time, b2, sizeof b2), g->after.pos,
                            tw_where(run, g->after.file, g->after.line, w2, sizeof w2));
        tw_finding_evidence(f, "the usual gap between logged steps is %s; stall threshold %s",
                            tw_fmt_duration(usual, u, sizeof u), tw_fmt_duration(limit, d, sizeof d));
        if (!say_input_wait(f, run, rk, &g->after))
            tw_finding_recommend(f, stall_advice);
    }
}

/* The first step of each epoch waits while the loader's workers start again:
 * cheap to fix (persistent workers) and easy to miss in an average. */
static void check_epoch_start(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    double *starts = malloc(sizeof(double) * TW_SERIES_MAX);
    double *others = malloc(sizeof(double) * TW_SERIES_MAX);
    if (!starts || !others)
        goto done;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk || rk->both_count < 6)
            continue;
        size_t ns = 0, no = 0;
        const tw_point *example = NULL;
        for (size_t k = 1; k < rk->series.count; k++) {
            const tw_point *p = &rk->series.points[k], *prev = &rk->series.points[k - 1];
            if (!(p->fields & TW_F_DATA_TIME) || p->epoch < 0)
                continue;
            if (p->epoch != prev->epoch) {
                starts[ns++] = p->data;
                if (!example || p->data > example->data)
                    example = p;
            } else {
                others[no++] = p->data;
            }
        }
        if (ns < 3 || no < 3)
            continue;
        double s = tw_median(starts, ns), o = tw_median(others, no);
        if (!(s >= 0.5 && s > 10 * o))
            continue;
        char where[600];
        tw_finding *f = tw_finding_add(out, "epoch_start_wait", TW_SEV_INFO,
                                       "The first step of each epoch waits %.2fs for data on rank %d (%.4fs otherwise)",
                                       s, rk->rank, o);
        if (!f)
            break;
        tw_finding_at(f, run, example, rk->rank);
        f->value = s;
        tw_finding_evidence(f, "median data wait at %zu epoch starts: %.3fs; at other logged steps: %.4fs", ns, s, o);
        tw_finding_evidence(f, "longest: %.3fs at step %.0f (%s)", example->data, example->pos,
                            tw_where(run, example->file, example->line, where, sizeof where));
        tw_finding_recommend(f, "The data loader's worker processes are started again every epoch: keep them (Paddle "
                                "and PyTorch DataLoader: persistent_workers=True) and prefetch the first batches.");
    }
done:
    free(starts);
    free(others);
}

const tw_rule tw_rule_epoch_start = {"epoch_start_wait", "the first step of every epoch waiting for data",
                                     check_epoch_start};

const tw_rule tw_rule_stalls = {"stall", "long gaps with no training progress", check_stalls};

static void check_jitter(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (rk->step_times.count < 20)
            continue;
        double p50 = tw_hist_quantile(&rk->step_times, 0.50);
        double p95 = tw_hist_quantile(&rk->step_times, 0.95);
        double p99 = tw_hist_quantile(&rk->step_times, 0.99);
        if (!(p99 > t->jitter_ratio * p50))
            continue;
        char a[32], b[32], c[32], d[32], w[600], ratio[32];
        tw_finding *f = tw_finding_add(out, "step_time_jitter", TW_SEV_INFO,
                                       "Step time varies a lot on rank %d: p99 is %sx the median", rk->rank,
                                       tw_fmt_number(p99 / p50, 1, ratio, sizeof ratio));
        if (!f)
            return;
        tw_finding_at(f, run, &rk->batch_max_point, rk->rank);
        f->value = p99 / p50;
        tw_finding_evidence(f, "step time p50 %s, p95 %s, p99 %s, max %s over %llu records",
                            tw_fmt_duration(p50, a, sizeof a), tw_fmt_duration(p95, b, sizeof b),
                            tw_fmt_duration(p99, c, sizeof c), tw_fmt_duration(rk->step_times.max, d, sizeof d),
                            (unsigned long long)rk->step_times.count);
        tw_finding_evidence(f, "slowest at step %.0f (%s)", rk->batch_max_point.pos,
                            tw_where(run, rk->batch_max_point.file, rk->batch_max_point.line, w, sizeof w));
        tw_finding_recommend(f, "Slow outliers usually come from the first steps after each epoch (worker start-up: "
                                "persistent_workers=True), evaluation or checkpointing inside the step timer, garbage "
                                "collection, or varying input shapes.");
    }
}

const tw_rule tw_rule_jitter = {"step_time_jitter", "p99 step time far above the median", check_jitter};

/* Where a drop from early to late began, when it was sudden and lasting:
 * after the last stretch of w values above halfway between the two levels,
 * the first value below it, with the run's rest (a tenth of it at least)
 * below halfway too. n when there is none (a slow decline has no onset to
 * point at; a slow patch that recovered is not where the drop began). */
static size_t drop_onset(const double *v, size_t n, double early, double late, double *scratch)
{
    double mid = (early + late) / 2;
    size_t w = n / 50 > 3 ? n / 50 : 3, run = 0, k = n;
    for (size_t i = 0; i < n; i++) {
        run = v[i] > mid ? run + 1 : 0;
        if (run >= w)
            k = i + 1; /* the first value after the latest fast stretch */
    }
    while (k < n && v[k] > mid)
        k++;
    if (k >= n || n - k < n / 10)
        return n;
    memcpy(scratch, v + k, (n - k) * sizeof *v);
    return tw_median(scratch, n - k) <= mid ? k : n;
}

static const tw_point *point_at(const tw_rank *rk, double pos)
{
    for (size_t i = 0; i < rk->series.count; i++)
        if (rk->series.points[i].pos == pos)
            return &rk->series.points[i];
    return NULL;
}

/* The finding's place and words for a sudden drop at onset k. */
static void say_onset(tw_finding *f, const tw_run *run, const tw_rank *rk, const double *v, const double *pos,
                      size_t n, size_t k, bool ips, double *scratch)
{
    const tw_point *p = point_at(rk, pos[k]);
    if (!p)
        return;
    tw_finding_at(f, run, p, rk->rank);
    memcpy(scratch, v, k * sizeof *v);
    double before = tw_median(scratch, k);
    memcpy(scratch, v + k, (n - k) * sizeof *v);
    double after = tw_median(scratch, n - k);
    char where[600];
    tw_where(run, p->file, p->line, where, sizeof where);
    if (ips)
        tw_finding_evidence(f, "a sudden, lasting drop at step %.0f (%s): a median %.4g samples/s before, %.4g after "
                               "(%.2fx slower), and it stays there", pos[k], where, before, after, before / after);
    else
        tw_finding_evidence(f, "a sudden, lasting drop at step %.0f (%s): the median step takes %.3g s before, %.3g s "
                               "after (%.2fx slower), and it stays there", pos[k], where, 1 / before, 1 / after,
                            before / after);
}

static void check_throughput(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    double *v = malloc(sizeof(double) * TW_SERIES_MAX);
    double *pos = malloc(sizeof(double) * TW_SERIES_MAX);
    double *sorted = malloc(sizeof(double) * TW_SERIES_MAX);
    double *scratch = malloc(sizeof(double) * TW_SERIES_MAX);
    if (!v || !pos || !sorted || !scratch)
        goto done;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk || !rk->used)
            continue;
        bool ips = true;
        size_t n = tw_series_values(&rk->series, TW_F_SAMPLES_PER_SEC, v, pos);
        if (n < 20) {
            ips = false;
            n = tw_series_values(&rk->series, TW_F_BATCH_TIME, v, pos);
            for (size_t k = 0; k < n; k++)
                v[k] = v[k] > 0 ? 1.0 / v[k] : 0;
        }
        if (n < 20)
            continue;
        size_t a = n / 20, b = n / 4, c = n - n / 5;
        double early_end = pos[b - 1], late_start = pos[c];
        memcpy(sorted, v, n * sizeof *v); /* the medians reorder; v stays in step order */
        double early = tw_median(sorted + a, b - a);
        double late = tw_median(sorted + c, n - c);
        if (!(early > 0 && late < early * (1 - t->throughput_drop)))
            continue;
        tw_finding *f =
            tw_finding_add(out, "throughput_drop", TW_SEV_WARNING, "Throughput fell %.0f%% over the run on rank %d",
                           (1 - late / early) * 100, rk->rank);
        if (!f)
            break;
        tw_finding_at(f, run, &rk->last, rk->rank);
        f->value = late / early;
        if (ips)
            tw_finding_evidence(
                f, "median %.4g samples/s early (to step %.0f) against %.4g samples/s late (from step %.0f)", early,
                early_end, late, late_start);
        else
            tw_finding_evidence(f,
                                "median %.4g steps/s early (to step %.0f) against %.4g steps/s late (from step %.0f)",
                                early, early_end, late, late_start);
        size_t onset = drop_onset(v, n, early, late, scratch);
        if (onset < n)
            say_onset(f, run, rk, v, pos, n, onset, ips, scratch);
        tw_finding_recommend(
            f, "Check for growing memory (fragmentation, tensors kept alive across steps), thermal or power throttling "
               "(GPU clocks), other jobs on the node, and inputs that grow over the run (sequence lengths, caches).");
    }
done:
    free(v);
    free(pos);
    free(sorted);
    free(scratch);
}

const tw_rule tw_rule_throughput = {"throughput_drop", "throughput falling from early to late in the run",
                                    check_throughput};
