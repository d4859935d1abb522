/*
 * run_steps.c: a step record into its rank's facts (see run.h).
 *
 * The position of a step is its global step when the log prints one;
 * otherwise it is rebuilt from epoch and step (epoch * steps-per-epoch, or an
 * offset that grows at each epoch change when the total is not printed).
 * Points at the same position (progress-bar rewrites) replace each other;
 * the very same record printed twice is counted once. Each step adds to the
 * exact facts (first NaN and what preceded it, spikes, the longest gap,
 * pauses, step-time histogram, restarts) and to the downsampled series.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "run_internal.h"

/* Notes an epoch and step of rank rk: the epoch offset grows at each epoch
 * change (by the last step seen before it), and a step that went on just
 * past the previous epoch's last into the next epoch, instead of starting
 * again, counts across epochs (RITM's "Epoch=11, Step=1330/40001" after
 * "Epoch=10, Step=1320/40001": the total is the run's, not the epoch's).
 * Not a log cut between epochs: "Epoch [2][350/30045]" then "Epoch
 * [11][29900/30045]" skips epochs, and a step far on is no next step. */
static bool step_goes_on(const tw_rank *rk, const tw_record *r)
{
    double on = (double)r->step - rk->last_step_in_epoch;
    return r->epoch == rk->last_epoch + 1 && on > 0 && (r->step_total <= 0 || on <= 0.1 * (double)r->step_total);
}

static void note_epoch_step(tw_rank *rk, const tw_record *r)
{
    if (rk->last_epoch >= 0 && r->epoch > rk->last_epoch) {
        /* decided at the first epoch change (a later one that goes on is a
         * log cut: the epochs before it counted their own steps), undone by
         * one that starts its count over */
        bool first_change = rk->epoch_offset == 0;
        rk->steps_span_epochs = first_change ? step_goes_on(rk, r)
                                             : rk->steps_span_epochs && (double)r->step > rk->last_step_in_epoch;
        rk->epoch_offset += rk->last_step_in_epoch + 1;
    } else if (rk->last_epoch >= 0 && r->epoch < rk->last_epoch) {
        rk->epoch_offset = 0;
        rk->steps_span_epochs = false;
    }
    rk->last_epoch = r->epoch;
    rk->last_step_in_epoch = (double)r->step;
}

static double position(tw_rank *rk, const tw_record *r)
{
    if (r->global_step >= 0)
        return (double)r->global_step;
    if (r->step >= 0) {
        if (r->epoch >= 0) {
            if (rk->epoch_base < 0)
                rk->epoch_base = r->epoch;
            note_epoch_step(rk, r);
            if (rk->steps_span_epochs)
                return (double)r->step;
            if (r->step_total > 0 && r->epoch >= rk->epoch_base)
                return (double)(r->epoch - rk->epoch_base) * (double)r->step_total + (double)r->step;
        }
        return rk->epoch_offset + (double)r->step;
    }
    if (r->epoch >= 0)
        return (double)r->epoch;
    return rk->have_last ? rk->last.pos + 1 : 0;
}

static void to_point(tw_point *p, const tw_record *r, double pos, uint32_t file)
{
    p->pos = pos;
    p->time = (r->fields & TW_F_TIME) ? r->time : NAN;
    p->loss = r->loss;
    p->lr = r->lr;
    p->batch = r->batch_time;
    p->data = r->data_time;
    p->ips = r->samples_per_sec;
    p->mem = r->mem_bytes;
    p->fields = r->fields;
    p->metric_set = 0;
    p->epoch = r->epoch;
    p->epoch_total = r->epoch_total;
    p->step = r->step;
    p->step_total = r->step_total;
    p->file = file;
    p->line = r->source.line;
}

/* The k-th smallest of v[0..n) (Hoare's selection; reorders v). */
static double select_kth(double *v, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = v[(lo + hi) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break;
    }
    return v[k];
}

/* The mean absolute difference of successive losses in the ring: the
 * series' own step-to-step noise, which a spike must stand well above (a
 * plain loop: it runs with the median, every eighth loss). */
static double successive_noise(const tw_rank *rk)
{
    int count = rk->recent_loss_count, first = (rk->recent_loss_head + TW_RECENT - count) % TW_RECENT;
    double sum = 0;
    for (int i = 1; i < count; i++)
        sum += fabs(rk->recent_loss[(first + i) % TW_RECENT] - rk->recent_loss[(first + i - 1) % TW_RECENT]);
    return count > 1 ? sum / (count - 1) : 0;
}

/* A smoothed loss the log prints beside the per-batch one (VinVL's avg_loss,
 * a running mean): spikes are judged on it, so that per-batch noise near
 * zero is not hundreds of spikes. NAN without one. */
static double smoothed_loss(const tw_record *r)
{
    static const char *const names[] = {"avg_loss", "loss_avg", "smooth_loss", "smoothed_loss", "running_loss"};
    for (int i = 0; i < r->metric_count; i++) {
        const char *name = r->metrics[i].name;
        /* this runs on every step: most names are out at their first bytes */
        bool maybe = (name[0] == 'a' && name[1] == 'v') ||
                     (name[0] == 'l' && name[1] == 'o' && name[2] == 's' && name[3] == 's' && name[4] == '_') ||
                     (name[0] == 's' && name[1] == 'm') || (name[0] == 'r' && name[1] == 'u');
        for (size_t k = 0; maybe && k < sizeof names / sizeof names[0]; k++) {
            if (strcmp(name, names[k]) == 0 && isfinite(r->metrics[i].value))
                return r->metrics[i].value;
        }
    }
    return NAN;
}

/* "loss_cls", "CELoss", "lm loss": the name says it is a loss. */
static bool names_a_loss(const char *name)
{
    for (const char *s = name; s[0] && s[1] && s[2] && s[3]; s++) {
        if (strncasecmp(s, "loss", 4) == 0)
            return true;
    }
    return false;
}

/* A loss component of the record ("loss_cls: nan") that is not finite, or
 * NULL: a component can go first while the total still prints a number. */
static const tw_metric *nonfinite_component(const tw_record *r)
{
    for (int i = 0; i < r->metric_count; i++) {
        const tw_metric *m = &r->metrics[i];
        if (!isfinite(m->value) && names_a_loss(m->name))
            return m;
    }
    return NULL;
}

/* The first non-finite loss of the rank, or of one of its components, with
 * the records before it. Every record counts, a rewrite of its step too: a
 * log that prints no counter must not hide a NaN. */
static void note_nonfinite(tw_rank *rk, const tw_point *p, const tw_record *r)
{
    if (rk->have_nan)
        return;
    bool total = (p->fields & TW_F_LOSS) && !isfinite(p->loss);
    const tw_metric *part = total || !r->metric_count ? NULL : nonfinite_component(r);
    if (!total && !part)
        return;
    rk->have_nan = true;
    rk->nan_point = *p;
    if (part) {
        rk->nan_point.loss = part->value;
        snprintf(rk->nan_component, sizeof rk->nan_component, "%s", part->name);
    }
    int n = rk->recent_count;
    rk->before_nan_count = n;
    for (int i = 0; i < n; i++)
        rk->before_nan[i] = rk->recent[(rk->recent_head + 8 - n + i) % 8];
}

/* A spike: above spike_factor x the recent median, and by more than six
 * times the series' mean step-to-step noise and a minimum absolute change (a
 * twentieth of the first loss), so noisy per-batch losses near zero do not
 * count. */
static void note_loss(tw_rank *rk, const tw_point *p, double spike_factor)
{
    if (!(p->fields & TW_F_LOSS) || !isfinite(p->loss))
        return; /* a non-finite loss is note_nonfinite's */
    /* Spike: well above the median of the recent losses. */
    if (rk->recent_loss_count >= 8) {
        /* The median moves slowly: recompute it every 8 losses, not every step. */
        if (rk->recent_median_age++ % 8 == 0) {
            double tmp[TW_RECENT];
            memcpy(tmp, rk->recent_loss, sizeof(double) * (size_t)rk->recent_loss_count);
            rk->recent_median = select_kth(tmp, rk->recent_loss_count, rk->recent_loss_count / 2);
            rk->recent_noise = successive_noise(rk);
        }
        double med = rk->recent_median;
        double jump = p->loss - med;
        double least = isnan(rk->loss_first) ? 0 : 0.05 * fabs(rk->loss_first);
        if (med > 0 && p->loss > spike_factor * med && jump > least && jump > 6 * rk->recent_noise) {
            rk->spikes++;
            double ratio = p->loss / med;
            if (ratio > rk->worst_spike_ratio) {
                rk->worst_spike_ratio = ratio;
                rk->worst_spike = *p;
                rk->worst_spike_median = med;
            }
        }
    }
    rk->recent_loss[rk->recent_loss_head] = p->loss;
    rk->recent_loss_head = (rk->recent_loss_head + 1) % TW_RECENT;
    if (rk->recent_loss_count < TW_RECENT)
        rk->recent_loss_count++;
}

/* Can a slow step at p be a stall rather than the run's ordinary work? Not
 * in the first PAUSE_WARMUP records (start-up, compilation, autotuning),
 * not at the first record of an epoch (the loader's workers starting
 * again), not with an evaluation or checkpoint since the last step. */
#define PAUSE_WARMUP 3
static bool may_pause(const tw_rank *rk, const tw_point *p)
{
    return rk->have_last && rk->steps >= PAUSE_WARMUP && !rk->event_since_last && p->epoch == rk->last.epoch;
}

static void note_gap(tw_rank *rk, const tw_point *p)
{
    if (!rk->have_last || isnan(p->time) || isnan(rk->last.time))
        return;
    double gap = p->time - rk->last.time;
    if (gap < 0)
        return;
    double steps = p->pos - rk->last.pos;
    if (!rk->event_since_last && steps > 0)
        tw_hist_add_inline(&rk->gaps, gap);
    if (!rk->have_gap || gap > rk->longest_gap.seconds) {
        rk->have_gap = true;
        rk->longest_gap.seconds = gap;
        rk->longest_gap.before = rk->last;
        rk->longest_gap.after = *p;
        rk->longest_gap.across_eval = rk->event_since_last;
    }
    if (p->time != floor(p->time))
        rk->fine_times = true;
    if (may_pause(rk, p) && (!rk->have_pause_gap || gap > rk->pause_gap.seconds)) {
        rk->have_pause_gap = true;
        rk->pause_gap = (tw_gap){gap, rk->last, *p, false};
    }
}

/* The longest logged step time that may_pause allows (a step time that is
 * a running total is not one step's). */
static void note_pause_step(tw_rank *rk, const tw_point *p, double batch_time)
{
    if (isnan(batch_time) || rk->cumulative || !may_pause(rk, p))
        return;
    if (!rk->have_pause_step || batch_time > rk->pause_step.batch) {
        rk->have_pause_step = true;
        rk->pause_step = *p;
        rk->pause_step.batch = batch_time;
    }
}

/* How many steps a record at p stands for: the distance from the last one;
 * the first of an epoch-counted log also stands for the steps of its epoch
 * before it ("step 7/7" after "Epoch 1/60" is seven steps). After a restart
 * the distance is unknown and counts nothing. */
static double steps_since_last(const tw_rank *rk, const tw_point *p)
{
    if (rk->have_last)
        return p->pos > rk->last.pos ? p->pos - rk->last.pos : 0;
    if (p->epoch >= 0 && p->step_total > 0 && p->step >= 1 && p->step <= p->step_total)
        return (double)p->step;
    return 1;
}

/* Exact facts of the loss and memory, which the downsampled series may miss. */
static void note_extremes(tw_rank *rk, const tw_point *p)
{
    if ((p->fields & TW_F_LOSS) && isfinite(p->loss)) {
        if (isnan(rk->loss_first))
            rk->loss_first = p->loss;
        if (isnan(rk->loss_best) || p->loss < rk->loss_best) {
            rk->loss_best = p->loss;
            rk->loss_best_pos = p->pos;
        }
    }
    if ((p->fields & TW_F_MEM) && isfinite(p->mem) && (isnan(rk->mem_max) || p->mem > rk->mem_max))
        rk->mem_max = p->mem;
}

/* The slot of train_metrics item k of rk, given out the first time (see
 * run.h); -1 when it has none. */
static int slot_of_metric(tw_rank *rk, int k)
{
    if (rk->metric_slot[k] != -2)
        return rk->metric_slot[k];
    bool part = strncmp(rk->train_metrics.items[k].s.name, "loss_", 5) == 0;
    int others = rk->metric_slots - rk->loss_part_slots;
    bool room = part ? rk->loss_part_slots < TW_POINT_LOSS_PARTS : others < TW_POINT_METRICS - TW_POINT_LOSS_PARTS;
    if (!room)
        return rk->metric_slot[k] = -1;
    rk->loss_part_slots += part;
    return rk->metric_slot[k] = (signed char)rk->metric_slots++;
}

/* The record's named metrics that have a slot on rk (noted already), into
 * metric by slot, with the point's metric_set. */
static void point_metrics(tw_point *p, double *metric, tw_rank *rk, const tw_record *r)
{
    p->metric_set = 0;
    for (int i = 0; i < r->metric_count; i++) {
        int k = tw_run_metric_index(&rk->train_metrics, i, r->metrics[i].name);
        int slot = k >= 0 ? slot_of_metric(rk, k) : -1;
        if (slot >= 0) {
            metric[slot] = r->metrics[i].value;
            p->metric_set |= 1u << slot;
        }
    }
}

static bool same_value(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

/* r says exactly what the rank's last step record said: the same fields,
 * values, time and named metrics. */
static bool same_record(const tw_record *last, const tw_record *r)
{
    if (last->fields != r->fields || last->metric_count != r->metric_count || last->step != r->step ||
        last->epoch != r->epoch || last->global_step != r->global_step)
        return false;
    if (!same_value(last->time, r->time) || !same_value(last->loss, r->loss) || !same_value(last->lr, r->lr) ||
        !same_value(last->batch_time, r->batch_time) || !same_value(last->data_time, r->data_time) ||
        !same_value(last->samples_per_sec, r->samples_per_sec) || !same_value(last->mem_bytes, r->mem_bytes))
        return false;
    for (int i = 0; i < r->metric_count; i++) {
        if (!same_value(last->metrics[i].value, r->metrics[i].value) ||
            strcmp(last->metrics[i].name, r->metrics[i].name) != 0)
            return false;
    }
    /* a bare counter redrawn (a progress bar) is not a copy: it says too little */
    return r->metric_count + __builtin_popcount(r->fields) >= 3;
}

/* The step time a record gives, in seconds per step. A field that only
 * grows (ten records in a row, to five times its first value) is a running
 * total of time, not a step time: once that is seen the statistics it fed
 * start again, and step times are its differences over the steps between
 * records. NAN: none. */
static double step_time(tw_rank *rk, const tw_record *r, const tw_point *p)
{
    if (!(r->fields & TW_F_BATCH_TIME))
        return NAN;
    double v = r->batch_time;
    double before = rk->total_last;
    rk->total_last = v;
    if (rk->cumulative) {
        double steps = rk->have_last ? p->pos - rk->last.pos : 0;
        return steps >= 1 && v >= before ? (v - before) / steps : NAN;
    }
    if (rk->have_last && (rk->last.fields & TW_F_BATCH_TIME) && v > before && before > 0) {
        if (++rk->total_rises >= 10 && v > 5 * rk->total_first) {
            rk->cumulative = true;
            rk->cumulative_point = *p;
            memset(&rk->step_times, 0, sizeof rk->step_times);
            rk->sum_batch = rk->sum_data = rk->sum_weight = 0;
            rk->both_count = 0;
            double steps = p->pos - rk->last.pos;
            return steps >= 1 ? (v - before) / steps : NAN;
        }
    } else {
        rk->total_rises = 0;
        rk->total_first = v;
    }
    return v;
}

void tw_run_add_step(tw_run *root, tw_run *run, tw_cursor *c, const tw_record *r)
{
    tw_rank *rk = tw_run_rank_of(run, r->rank);
    if (!rk) {
        if (run->rank_count >= run->rank_limit && run->over_limit_steps++ == 0)
            run->over_limit_first = r->rank;
        return;
    }
    uint32_t file = tw_run_intern_file(root, r->source.file);
    tw_point p;
    to_point(&p, r, position(rk, r), file);
    if (c && rk->have_last && p.pos < rk->last.pos) {
        /* the counter went back: a new launch, unless launches are no
         * longer kept apart (then it is a restart within this one) */
        tw_run *next = tw_run_next_launch(root, c, TW_START_STEP_BACK, r, &rk->last);
        tw_rank *nrk = next ? tw_run_rank_of(next, r->rank) : NULL;
        if (nrk) {
            run = next;
            rk = nrk;
            to_point(&p, r, position(rk, r), file);
        }
    }
    if (c)
        c->content = true;
    bool rewrite = rk->have_last && p.pos == rk->last.pos;
    if (rewrite && same_record(&rk->last_step_record, r)) {
        /* the same record printed again (a logger with two handlers, every
         * rank writing into one file): counted once */
        if (rk->duplicates++ == 0)
            rk->first_duplicate = p;
        return;
    }
    tw_metric_notes_add(&rk->train_metrics, r->metrics, r->metric_count, (int64_t)p.pos, !rewrite);
    double metric[TW_POINT_METRICS];
    point_metrics(&p, metric, rk, r);
    if (rk->have_last && p.pos < rk->last.pos) {
        if (rk->restarts == 0)
            rk->first_restart = (tw_restart){rk->last, p};
        rk->last_restart = (tw_restart){rk->last, p};
        rk->restarts++;
        rk->event_since_last = true; /* the gap of a restart is not a stall */
    }
    note_extremes(rk, &p);
    note_nonfinite(rk, &p, r);
    tw_precision_note(&rk->precision, r, &p);
    if (!rewrite) {
        double span = steps_since_last(rk, &p);
        if (span <= 1e15)
            rk->step_span += (uint64_t)span;
        note_gap(rk, &p);
        rk->steps++;
        double batch_time = step_time(rk, r, &p);
        if (rk->cumulative) { /* the series gets the step time, not the running total */
            p.batch = batch_time;
            if (isnan(batch_time))
                p.fields &= ~(unsigned)TW_F_BATCH_TIME;
        }
        note_pause_step(rk, &p, batch_time);
        if (!isnan(batch_time)) {
            double max = rk->step_times.count ? rk->step_times.max : -1;
            tw_hist_add_inline(&rk->step_times, batch_time);
            if (rk->step_times.max > max) {
                rk->batch_max_point = p;
            }
            if (r->fields & TW_F_DATA_TIME) {
                /* A logged record usually averages the steps since the last
                 * one: weigh it by how many steps it stands for, so the one
                 * slow first step of an epoch does not count like ten. */
                double steps = rk->have_last ? p.pos - rk->last.pos : 1;
                double w = (steps >= 1 && steps <= 100000) ? steps : 1;
                rk->sum_batch += w * batch_time;
                rk->sum_data += w * r->data_time;
                rk->sum_weight += w;
                rk->both_count++;
            }
        }
        double smooth = smoothed_loss(r);
        if (!isnan(smooth) && (p.fields & TW_F_LOSS) && isfinite(p.loss)) {
            tw_point judged = p;
            judged.loss = smooth;
            rk->spikes_smoothed = true;
            note_loss(rk, &judged, root->th.spike_factor);
        } else {
            note_loss(rk, &p, root->th.spike_factor);
        }
        rk->recent[rk->recent_head] = p;
        rk->recent_head = (rk->recent_head + 1) % 8;
        if (rk->recent_count < 8)
            rk->recent_count++;
    }
    if (!rk->used)
        rk->first = p;
    rk->used = true;
    if (rk->have_last)
        rk->before_last = rk->last;
    rk->last = p;
    rk->have_last = true;
    rk->event_since_last = false;
    /* only the used part: a record's text and unused metric slots are large */
    memcpy(&rk->last_step_record, r, offsetof(tw_record, metrics));
    memcpy(rk->last_step_record.metrics, r->metrics, sizeof r->metrics[0] * (size_t)r->metric_count);
    tw_run_series_add(&rk->series, &p, metric);
    run->steps++;
}
