/*
 * run.c: accumulating records into per-rank facts (see run.h).
 *
 * The position of a step is its global step when the log prints one;
 * otherwise it is rebuilt from epoch and step (epoch * steps-per-epoch, or an
 * offset that grows at each epoch change when the total is not printed).
 * Points at the same position (progress-bar rewrites) replace each other.
 *
 * Launches: a log may hold several launches of a job one after another (a
 * restarted job, attempts while debugging). Each rank has a cursor, the
 * launch its records go to; a start line (TW_EV_LAUNCH) after the rank did
 * something in its launch, or a step counter that goes back, moves it to the
 * next launch. Launch k of every rank is the same launch: the ranks of a job
 * start and restart together. The check costs a compare per record.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/grow.h"
#include "run.h"
#include "trainwatch/error.h"

#define HIST_MIN_LOG10       (-6.0)
#define HIST_BINS_PER_DECADE 100.0

int tw_run_new_with(tw_run **out, const tw_thresholds *t, const tw_run_hooks *hooks)
{
    tw_run *run = calloc(1, sizeof *run);
    if (!run)
        return TW_ENOMEM;
    run->rank_limit = TW_RANKS_MAX;
    if (t)
        run->th = *t;
    else
        tw_thresholds_default(&run->th);
    run->launch.first_time = run->launch.last_time = NAN;
    run->hooks = hooks;
    *out = run;
    return TW_OK;
}

static void rotation_free(tw_rotation *r)
{
    if (r) {
        free(r->gen_files);
        free(r->offsets);
        free(r);
    }
}

void tw_run_free(tw_run *run)
{
    if (!run)
        return;
    for (int i = 0; i < run->launch_count; i++)
        tw_run_free(run->launches[i]);
    free(run->launches);
    free(run->cursors);
    for (int i = 0; i < run->rank_count; i++) {
        free(run->ranks[i]->series.points);
        free(run->ranks[i]->series.metric);
        free(run->ranks[i]);
    }
    free(run->ranks);
    free(run->eval_series.points);
    for (uint32_t i = 0; i < run->file_count; i++)
        free(run->files[i]);
    free(run->files);
    rotation_free(run->rotation);
    free(run->file_slots);
    for (int i = 0; i < run->input_count; i++) {
        free(run->inputs[i].path);
        free(run->inputs[i].format);
        free(run->inputs[i].error);
    }
    free(run->inputs);
    if (run->hooks && run->hooks->free)
        run->hooks->free(run);
    free(run);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

void tw_run_note_input(tw_run *run, const char *path, const char *format, uint64_t lines, uint64_t records,
                       const char *error)
{
    if (TW_GROW(run->inputs, run->input_count, run->input_cap, 16) != TW_OK)
        return; /* out of memory: the input is missing from the report's list, nothing else */
    tw_input_note *in = &run->inputs[run->input_count++];
    in->path = dup_or_null(path);
    in->format = dup_or_null(format);
    in->error = dup_or_null(error);
    in->lines = lines;
    in->records = records;
    in->cut = false;
}

static uint32_t intern_file(tw_run *run, const char *name);

int tw_run_note_rotation(tw_run *run, const char *path, const int64_t *offsets, unsigned count)
{
    rotation_free(run->rotation);
    run->rotation = NULL;
    tw_rotation *r = calloc(1, sizeof *r);
    size_t n = strlen(path) + 24;
    char *name = malloc(n);
    if (!r || !name || !(r->gen_files = calloc(count ? count : 1, sizeof *r->gen_files)) ||
        !(r->offsets = calloc(count ? count : 1, sizeof *r->offsets))) {
        free(name);
        rotation_free(r);
        return TW_ENOMEM;
    }
    r->file = intern_file(run, path);
    for (unsigned k = 0; k < count; k++) {
        if (k == 0)
            snprintf(name, n, "%s", path);
        else
            snprintf(name, n, "%s.%u", path, k);
        r->gen_files[k] = intern_file(run, name);
        r->offsets[k] = offsets[k];
    }
    r->count = count;
    free(name);
    run->rotation = r;
    return TW_OK;
}

tw_source tw_run_source(const tw_run *run, uint32_t file, uint64_t line)
{
    const tw_rotation *r = run->rotation;
    if (r && file == r->file) {
        for (unsigned k = 0; k < r->count; k++) {
            if ((int64_t)line > r->offsets[k])
                return (tw_source){run->files[r->gen_files[k]], (uint64_t)((int64_t)line - r->offsets[k])};
        }
        return (tw_source){NULL, line}; /* rotated away */
    }
    return (tw_source){file < run->file_count ? run->files[file] : NULL, line};
}

const char *tw_where(const tw_run *run, uint32_t file, uint64_t line, char *buf, size_t cap)
{
    tw_source s = tw_run_source(run, file, line);
    if (s.file)
        snprintf(buf, cap, "%s:%llu", s.file, (unsigned long long)s.line);
    else if (file < run->file_count)
        snprintf(buf, cap, "output line %llu, rotated out of %s", (unsigned long long)line, run->files[file]);
    else
        snprintf(buf, cap, "?:%llu", (unsigned long long)line);
    return buf;
}

void tw_run_note_cut(tw_run *run)
{
    if (run->input_count > 0)
        run->inputs[run->input_count - 1].cut = true;
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot of name in the hash table: where it is, or the empty one where
 * it would go. */
static uint32_t *file_slot(tw_run *run, const char *name)
{
    uint32_t mask = run->file_slot_count - 1;
    for (uint32_t i = (uint32_t)name_hash(name) & mask;; i = (i + 1) & mask) {
        uint32_t *slot = &run->file_slots[i];
        if (!*slot || strcmp(run->files[*slot - 1], name) == 0)
            return slot;
    }
}

static bool grow_files(tw_run *run)
{
    uint32_t cap = run->file_cap ? run->file_cap * 2 : 16;
    char **files = realloc(run->files, sizeof *files * cap);
    uint32_t *slots = calloc((size_t)cap * 2, sizeof *slots);
    if (!files || !slots) {
        if (files)
            run->files = files;
        free(slots);
        return false;
    }
    run->files = files;
    run->file_cap = cap;
    free(run->file_slots);
    run->file_slots = slots;
    run->file_slot_count = cap * 2;
    for (uint32_t i = 0; i < run->file_count; i++)
        *file_slot(run, run->files[i]) = i + 1;
    return true;
}

/* File names are interned: records borrow them from their parser, which may
 * be gone by the time a report cites them. Any number of files (a glob of
 * thousands of rank logs) keeps each its own name. */
static uint32_t intern_file(tw_run *run, const char *name)
{
    if (!name)
        name = "<unknown>";
    /* by content, not address: a parser freed and another allocated may
     * put a different name at the same address */
    if (run->file_count && strcmp(name, run->files[run->last_file]) == 0)
        return run->last_file;
    if (run->file_count == run->file_cap && !grow_files(run))
        return 0; /* out of memory: cited as the first file */
    uint32_t *slot = file_slot(run, name);
    if (!*slot) {
        char *copy = strdup(name);
        if (!copy)
            return 0;
        run->files[run->file_count++] = copy;
        *slot = run->file_count;
    }
    run->last_file = *slot - 1;
    return run->last_file;
}

/* Index of the first rank numbered rank or above (binary search over the
 * sorted ranks, after a look at the last one found). */
static int rank_index(const tw_run *run, int rank)
{
    int last = run->rank_last;
    if (last < run->rank_count && run->ranks[last]->rank == rank)
        return last;
    int lo = 0, hi = run->rank_count;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (run->ranks[mid]->rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const tw_rank *tw_run_rank(const tw_run *run, int rank)
{
    if (rank < 0)
        rank = 0;
    int i = rank_index(run, rank);
    return i < run->rank_count && run->ranks[i]->rank == rank ? run->ranks[i] : NULL;
}

static tw_rank *rank_new(int rank)
{
    tw_rank *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->rank = rank;
    r->series.stride = 1;
    r->epoch_base = -1;
    r->last_epoch = -1;
    r->last_step_in_epoch = -1;
    r->loss_first = r->loss_best = r->mem_max = NAN;
    memset(r->metric_slot, -2, sizeof r->metric_slot);
    return r;
}

/* The rank's state, made at its first record; NULL when out of memory or
 * past the limit of distinct ranks. An unknown rank (-1) is rank 0. */
static tw_rank *rank_of(tw_run *run, int rank)
{
    if (rank < 0)
        rank = 0;
    int i = rank_index(run, rank);
    if (i < run->rank_count && run->ranks[i]->rank == rank) {
        run->rank_last = i;
        return run->ranks[i];
    }
    if (run->rank_count >= run->rank_limit)
        return NULL;
    if (TW_GROW(run->ranks, run->rank_count, run->rank_cap, 16) != TW_OK)
        return NULL;
    tw_rank *r = rank_new(rank);
    if (!r)
        return NULL;
    memmove(&run->ranks[i + 1], &run->ranks[i], sizeof *run->ranks * (size_t)(run->rank_count - i));
    run->ranks[i] = r;
    run->rank_count++;
    run->rank_last = i;
    return r;
}

static int hist_bin(double seconds)
{
    if (!(seconds > 0))
        return 0;
    double b = (log10(seconds) - HIST_MIN_LOG10) * HIST_BINS_PER_DECADE;
    if (b < 0)
        return 0;
    if (b >= TW_HIST_BINS)
        return TW_HIST_BINS - 1;
    return (int)b;
}

static inline void hist_add(tw_hist *h, double seconds)
{
    if (!(seconds >= 0) || isinf(seconds))
        return;
    if (h->count == 0 || seconds < h->min)
        h->min = seconds;
    if (h->count == 0 || seconds > h->max)
        h->max = seconds;
    h->bins[hist_bin(seconds)]++;
    h->count++;
}

void tw_hist_add(tw_hist *h, double seconds)
{
    hist_add(h, seconds);
}

void tw_hist_merge(tw_hist *into, const tw_hist *from)
{
    if (from->count == 0)
        return;
    if (into->count == 0 || from->min < into->min)
        into->min = from->min;
    if (into->count == 0 || from->max > into->max)
        into->max = from->max;
    for (int i = 0; i < TW_HIST_BINS; i++)
        into->bins[i] += from->bins[i];
    into->count += from->count;
}

/* The middle of the bin that holds the q-quantile, kept within what was
 * observed: a bin's middle can lie above the largest value in it. */
double tw_hist_quantile(const tw_hist *h, double q)
{
    if (h->count == 0)
        return NAN;
    uint64_t target = (uint64_t)ceil(q * (double)h->count);
    if (target == 0)
        target = 1;
    uint64_t seen = 0;
    for (int i = 0; i < TW_HIST_BINS; i++) {
        seen += h->bins[i];
        if (seen >= target) {
            if (i == 0) /* the first bin also holds everything below it, zeros too */
                return h->min;
            double v = pow(10.0, HIST_MIN_LOG10 + (i + 0.5) / HIST_BINS_PER_DECADE);
            return v < h->min ? h->min : v > h->max ? h->max : v;
        }
    }
    return h->max;
}

uint64_t tw_hist_count_from(const tw_hist *h, double x)
{
    if (h->count == 0 || x > h->max)
        return 0;
    uint64_t n = 0;
    for (int i = hist_bin(x); i < TW_HIST_BINS; i++)
        n += h->bins[i];
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double tw_median(double *values, size_t n)
{
    if (n == 0)
        return NAN;
    qsort(values, n, sizeof *values, cmp_double);
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

size_t tw_series_values(const tw_series *s, unsigned field, double *out, double *pos)
{
    size_t n = 0;
    for (size_t i = 0; i < s->count; i++) {
        const tw_point *p = &s->points[i];
        if (!(p->fields & field))
            continue;
        double v;
        switch (field) {
        case TW_F_LOSS:
            v = p->loss;
            break;
        case TW_F_LR:
            v = p->lr;
            break;
        case TW_F_BATCH_TIME:
            v = p->batch;
            break;
        case TW_F_DATA_TIME:
            v = p->data;
            break;
        case TW_F_SAMPLES_PER_SEC:
            v = p->ips;
            break;
        case TW_F_MEM:
            v = p->mem;
            break;
        case TW_F_TIME:
            v = p->time;
            break;
        default:
            continue;
        }
        if (pos)
            pos[n] = p->pos;
        out[n++] = v;
    }
    return n;
}

static double position(tw_rank *rk, const tw_record *r)
{
    if (r->global_step >= 0)
        return (double)r->global_step;
    if (r->step >= 0) {
        if (r->epoch >= 0) {
            if (rk->epoch_base < 0)
                rk->epoch_base = r->epoch;
            if (r->step_total > 0 && r->epoch >= rk->epoch_base)
                return (double)(r->epoch - rk->epoch_base) * (double)r->step_total + (double)r->step;
            if (rk->last_epoch >= 0 && r->epoch > rk->last_epoch)
                rk->epoch_offset += rk->last_step_in_epoch + 1;
            else if (rk->last_epoch >= 0 && r->epoch < rk->last_epoch)
                rk->epoch_offset = 0;
            rk->last_epoch = r->epoch;
            rk->last_step_in_epoch = (double)r->step;
        }
        return rk->epoch_offset + (double)r->step;
    }
    if (r->epoch >= 0)
        return (double)r->epoch;
    return rk->have_last ? rk->last.pos + 1 : 0;
}

/* Grows the points towards TW_SERIES_MAX: a rank that logs a few steps costs
 * a few points, not the whole series (a run may have thousands of ranks). */
static bool series_grow(tw_series *s)
{
    if (s->cap >= TW_SERIES_MAX)
        return false;
    size_t cap = s->cap ? s->cap * 2 : 64;
    if (cap > TW_SERIES_MAX)
        cap = TW_SERIES_MAX;
    if (s->metric) {
        double(*metric)[TW_POINT_METRICS] = realloc(s->metric, sizeof *metric * cap);
        if (!metric)
            return false;
        s->metric = metric;
    }
    tw_point *points = realloc(s->points, sizeof *points * cap);
    if (!points)
        return false;
    s->points = points;
    s->cap = cap;
    return true;
}

/* The point's named metrics into slot i of the series (allocating the
 * array with the first point that has any); without memory they are lost,
 * not the point. */
static void series_metrics(tw_series *s, size_t i, tw_point *p, const double *metric)
{
    if (p->metric_set && !s->metric && !(s->metric = calloc(s->cap, sizeof *s->metric)))
        p->metric_set = 0;
    if (p->metric_set)
        memcpy(s->metric[i], metric, sizeof s->metric[i]);
}

/* metric: the point's named metrics by slot (p->metric_set says which). */
static void series_add(tw_series *s, const tw_point *p, const double *metric)
{
    tw_point q = *p;
    if (s->count > 0 && s->points[s->count - 1].pos == p->pos) {
        series_metrics(s, s->count - 1, &q, metric);
        s->points[s->count - 1] = q; /* a rewrite of the same step */
        return;
    }
    if (s->seen++ % s->stride != 0)
        return;
    if (s->count == s->cap && !series_grow(s)) {
        if (s->cap < 2)
            return; /* out of memory before the first points */
        /* full (or out of memory): keep every other point, from now on one in twice as many */
        for (size_t i = 0; i < s->count / 2; i++) {
            s->points[i] = s->points[2 * i];
            if (s->metric)
                memcpy(s->metric[i], s->metric[2 * i], sizeof s->metric[i]);
        }
        s->count /= 2;
        s->stride *= 2;
        s->seen = 1;
    }
    series_metrics(s, s->count, &q, metric);
    s->points[s->count++] = q;
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
        hist_add(&rk->gaps, gap);
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

const tw_run *tw_run_launch(const tw_run *run, int i)
{
    return i <= 0 ? run : i <= run->launch_count ? run->launches[i - 1] : NULL;
}

int tw_run_launches(const tw_run *run)
{
    return run->launch_count + 1;
}

/* Where rank's cursor is in the cursors sorted by rank, or would go. */
static int cursor_index(const tw_run *run, int rank)
{
    int lo = 0, hi = run->cursor_count;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (run->cursors[mid].rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The cursor of a rank, made at its first record in launch 0; NULL when out
 * of memory (its records then go to the first launch). */
static tw_cursor *cursor_of(tw_run *run, int rank)
{
    if (rank < 0)
        rank = 0;
    int last = run->cursor_last;
    if (last < run->cursor_count && run->cursors[last].rank == rank)
        return &run->cursors[last];
    int lo = cursor_index(run, rank);
    if (lo == run->cursor_count || run->cursors[lo].rank != rank) {
        if (TW_GROW(run->cursors, run->cursor_count, run->cursor_cap, 16) != TW_OK)
            return NULL;
        memmove(&run->cursors[lo + 1], &run->cursors[lo], sizeof *run->cursors * (size_t)(run->cursor_count - lo));
        run->cursors[lo] = (tw_cursor){.rank = rank, .last_time = NAN};
        run->cursor_count++;
    }
    run->cursor_last = lo;
    return &run->cursors[lo];
}

/* The launch (0-based) a rank is in now, without making its cursor. */
static int launch_of(const tw_run *run, int rank)
{
    if (rank < 0)
        rank = 0;
    int lo = cursor_index(run, rank);
    return lo < run->cursor_count && run->cursors[lo].rank == rank ? run->cursors[lo].launch : 0;
}

/* Launch i, made when a rank first gets there; past TW_LAUNCHES_MAX (or out
 * of memory) the last one kept. */
static tw_run *launch_at(tw_run *run, int i)
{
    if (i <= 0)
        return run;
    if (i <= run->launch_count)
        return run->launches[i - 1];
    if (i >= TW_LAUNCHES_MAX)
        return NULL;
    if (TW_GROW(run->launches, run->launch_count, run->launch_cap, 4) != TW_OK)
        return NULL;
    tw_run *l;
    if (tw_run_new_with(&l, &run->th, NULL) != TW_OK) /* a launch keeps no unread lines of its own */
        return NULL;
    l->rank_limit = run->rank_limit;
    l->launch.index = run->launch_count + 1;
    run->launches[run->launch_count++] = l;
    return l;
}

/* Moves a rank to its next launch, which starts at this record unless
 * another rank got there first. Returns the launch, or NULL when launches
 * are no longer kept apart (the record stays where it was). */
/* The launch a rank's new start goes to: the next one, or, when other ranks
 * already started later launches, the last of them that had begun by this
 * record's time (ranks of one launch start within seconds; a rank that
 * printed no start line for a launch, as a worker that only connects to the
 * store, must not shift its later launches by one). */
static int launch_for_start(const tw_run *run, const tw_cursor *c, const tw_record *r)
{
    int next = c->launch + 1;
    if (!(r->fields & TW_F_TIME))
        return next;
    for (int j = next + 1; j <= run->launch_count; j++) {
        double begun = run->launches[j - 1]->launch.first_time;
        if (isnan(begun) || begun > r->time + TW_LAUNCH_SLACK || r->time - begun > 30 * 86400.0)
            break;
        next = j;
    }
    return next;
}

static tw_run *next_launch(tw_run *run, tw_cursor *c, tw_launch_start why, const tw_record *r, const tw_point *before)
{
    int target = launch_for_start(run, c, r);
    tw_run *l = launch_at(run, target);
    if (!l) {
        run->launches_folded++;
        return NULL;
    }
    c->launch = target;
    c->content = false;
    c->start_count = 0;
    if (!l->launch.have_start) {
        l->launch.have_start = true;
        l->launch.start = why;
        l->launch.file = intern_file(run, r->source.file);
        l->launch.line = r->source.line;
        l->launch.rank = r->rank < 0 ? 0 : r->rank;
        if (before)
            l->launch.before = *before;
    }
    return l;
}

static int metric_index(const tw_metric_notes *notes, int hint, const char *name);

/* The slot of train_metrics item k of rk, given out the first time (see
 * run.h); -1 when it has none. */
static int metric_slot(tw_rank *rk, int k)
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
        int k = metric_index(&rk->train_metrics, i, r->metrics[i].name);
        int slot = k >= 0 ? metric_slot(rk, k) : -1;
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

static void add_step(tw_run *root, tw_run *run, tw_cursor *c, const tw_record *r)
{
    tw_rank *rk = rank_of(run, r->rank);
    if (!rk) {
        if (run->rank_count >= run->rank_limit && run->over_limit_steps++ == 0)
            run->over_limit_first = r->rank;
        return;
    }
    uint32_t file = intern_file(root, r->source.file);
    tw_point p;
    to_point(&p, r, position(rk, r), file);
    if (c && rk->have_last && p.pos < rk->last.pos) {
        /* the counter went back: a new launch, unless launches are no
         * longer kept apart (then it is a restart within this one) */
        tw_run *next = next_launch(root, c, TW_START_STEP_BACK, r, &rk->last);
        tw_rank *nrk = next ? rank_of(next, r->rank) : NULL;
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
            hist_add(&rk->step_times, batch_time);
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
    series_add(&rk->series, &p, metric);
    run->steps++;
}

static bool lower_is_better(const char *name)
{
    static const char *const lower[] = {"loss", "error", "err",  "perplexity", "ppl",  "wer", "cer",
                                        "mae",  "mse",   "rmse", "runtime",    "time", "cost"};
    for (size_t i = 0; i < sizeof lower / sizeof lower[0]; i++) {
        if (strstr(name, lower[i]))
            return true;
    }
    return false;
}

/* The index of name in notes, or -1. */
static int metric_index(const tw_metric_notes *notes, int hint, const char *name)
{
    if (hint < notes->count && strcmp(notes->items[hint].s.name, name) == 0)
        return hint; /* records usually list their metrics in the same order */
    for (int i = 0; i < notes->count; i++) {
        if (strcmp(notes->items[i].s.name, name) == 0)
            return i;
    }
    return -1;
}

#define LOSS_SLOTS 4

static tw_metric_note *metric_note(tw_metric_notes *notes, int hint, const char *name)
{
    if (hint < notes->count && strcmp(notes->items[hint].s.name, name) == 0)
        return &notes->items[hint]; /* records usually list their metrics in the same order */
    for (int i = 0; i < notes->count; i++) {
        if (strcmp(notes->items[i].s.name, name) == 0)
            return &notes->items[i];
    }
    /* the last slots are kept for losses: a result that lists a hundred
     * per-class scores before its eval_loss (HF sorts its keys) still has
     * the loss noted */
    if (notes->count >= TW_SUMMARY_METRICS ||
        (notes->count >= TW_SUMMARY_METRICS - LOSS_SLOTS && !strstr(name, "loss")))
        return NULL;
    tw_metric_note *e = &notes->items[notes->count++];
    memset(e, 0, sizeof *e);
    snprintf(e->s.name, sizeof e->s.name, "%s", name);
    e->s.best = NAN;
    e->s.best_step = -1;
    e->lower_is_better = lower_is_better(name);
    return e;
}

void tw_metric_notes_add(tw_metric_notes *notes, const tw_metric *metrics, int n, int64_t step, bool count)
{
    for (int i = 0; i < n; i++) {
        tw_metric_note *e = metric_note(notes, i, metrics[i].name);
        if (!e)
            continue;
        double v = metrics[i].value;
        if (count || e->s.count == 0)
            e->s.count++;
        e->s.last = v;
        bool better = isnan(e->s.best) || (e->lower_is_better ? v < e->s.best : v > e->s.best);
        if (better && isfinite(v)) {
            e->s.best = v;
            e->s.best_step = step;
        }
    }
}

/* The k of a top-k style name ("Top_5", "acc_top1", "recall@10", "hits@3"),
 * with the rest of the name (without the number) in family; 0 if none. */
static int topk(const char *name, char *family, size_t cap)
{
    static const char *const markers[] = {"top", "recall@", "hit@", "hits@"};
    for (size_t m = 0; m < sizeof markers / sizeof markers[0]; m++) {
        size_t n = strlen(markers[m]);
        for (const char *p = name; *p; p++) {
            if (strncasecmp(p, markers[m], n) != 0)
                continue;
            const char *d = p + n;
            if (*d == '_' || *d == '-' || *d == '@')
                d++;
            if (*d < '1' || *d > '9')
                continue;
            int k = 0;
            const char *e = d;
            while (*e >= '0' && *e <= '9' && k < 100000)
                k = k * 10 + (*e++ - '0');
            snprintf(family, cap, "%.*s#%s", (int)(d - name), name, e);
            return k;
        }
    }
    return 0;
}

/* Top-1 above top-5 in one result: a swapped or mislabeled metric. */
static void check_topk(tw_run *run, const tw_record *r, uint32_t file)
{
    char fa[TW_NAME_MAX + 8], fb[TW_NAME_MAX + 8];
    for (int i = 0; i < r->metric_count; i++) {
        int ka = topk(r->metrics[i].name, fa, sizeof fa);
        for (int j = 0; ka && j < r->metric_count; j++) {
            int kb = topk(r->metrics[j].name, fb, sizeof fb);
            if (!kb || kb <= ka || strcmp(fa, fb) != 0 || !(r->metrics[i].value > r->metrics[j].value))
                continue;
            tw_contradiction *c = &run->contradiction;
            if (c->count++ == 0) {
                snprintf(c->low_name, sizeof c->low_name, "%s", r->metrics[i].name);
                snprintf(c->high_name, sizeof c->high_name, "%s", r->metrics[j].name);
                c->low = r->metrics[i].value;
                c->high = r->metrics[j].value;
                c->rank = r->rank < 0 ? 0 : r->rank;
                c->file = file;
                c->line = r->source.line;
            }
            return;
        }
    }
}

/* Keeps the evaluation's results in eval_series (see run.h). */
static void note_eval_points(tw_run *run, const tw_metric *results, int n, int rank, double pos, double time,
                             uint32_t file, uint64_t line)
{
    tw_eval_series *s = &run->eval_series;
    uint64_t ordinal = s->seen++;
    if (s->stride == 0)
        s->stride = 1;
    if (ordinal % s->stride != 0)
        return;
    if (s->count + (size_t)n > TW_EVALS_KEPT) { /* drop every other evaluation kept */
        size_t kept = 0;
        for (size_t i = 0; i < s->count; i++) {
            if (s->points[i].ordinal % (2 * s->stride) == 0)
                s->points[kept++] = s->points[i];
        }
        s->count = kept;
        s->stride *= 2;
        if (ordinal % s->stride != 0 || s->count + (size_t)n > TW_EVALS_KEPT)
            return;
    }
    if (s->count + (size_t)n > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        while (cap < s->count + (size_t)n)
            cap *= 2;
        tw_eval_point *grown = realloc(s->points, sizeof *grown * cap);
        if (!grown)
            return; /* a chart with fewer points, not a failed run */
        s->points = grown;
        s->cap = cap;
    }
    for (int i = 0; i < n; i++) {
        for (int m = 0; m < run->eval_metrics.count; m++) {
            if (strcmp(run->eval_metrics.items[m].s.name, results[i].name) == 0) {
                s->points[s->count++] = (tw_eval_point){pos, time, results[i].value, m, rank, ordinal, file, line};
                break;
            }
        }
    }
}

static void add_eval(tw_run *root, tw_run *run, const tw_record *r)
{
    tw_rank *rk = rank_of(run, r->rank);
    if (rk)
        rk->event_since_last = true;
    uint32_t file = intern_file(root, r->source.file);
    check_topk(run, r, file);
    /* at the step the result names (HF's evaluation "step"), else the rank's last */
    int64_t step = r->global_step >= 0 ? r->global_step : rk && rk->have_last ? (int64_t)rk->last.pos : r->epoch;
    tw_metric results[TW_METRICS_MAX];
    int n = 0;
    for (int i = 0; i < r->metric_count; i++) {
        if (tw_metric_is_result(r->metrics[i].name))
            results[n++] = r->metrics[i];
    }
    tw_metric_notes_add(&run->eval_metrics, results, n, step, true);
    if (step >= 0)
        note_eval_points(run, results, n, r->rank, (double)step, tw_has(r, TW_F_TIME) ? r->time : NAN, file,
                         r->source.line);
    run->evals++;
}

/* Events after which a start line begins a new launch: the rank did
 * something that is no part of starting. */
static bool ends_start(const tw_record *r)
{
    switch (r->event) {
    case TW_EV_OOM:
    case TW_EV_NAN:
    case TW_EV_EXCEPTION:
    case TW_EV_SIGNAL:
    case TW_EV_EXIT:
    case TW_EV_FINISHED:
    case TW_EV_CHECKPOINT:
        return true;
    default:
        return false;
    }
}

/* A start line begins a new launch when the rank did something since its
 * launch began, printed this very line already in it, or was silent long
 * before it (a log that prints no year next to one that does is not
 * compared: more than 30 days apart). */
static tw_run *start_line(tw_run *root, tw_run *run, tw_cursor *c, const tw_record *r)
{
    uint64_t h = name_hash(r->message);
    bool again = false;
    for (int i = 0; i < c->start_count; i++)
        again |= c->starts[i] == h;
    double gap = (r->fields & TW_F_TIME) ? r->time - c->last_time : NAN;
    bool silent = gap > TW_START_GAP && gap < 30 * 86400.0;
    if (c->content || again || silent) {
        tw_run *next = next_launch(root, c, TW_START_BANNER, r, NULL);
        if (next)
            run = next;
    }
    if (c->start_count < TW_CURSOR_STARTS)
        c->starts[c->start_count++] = h;
    return run;
}

/* "GPUs used: 4" -> GPUs used = 4; "  sha: ed03..., status: ..." -> git commit
 * = ed03...; "... train with paddle 2.5.2 and device Place(gpu:0)" ->
 * PaddlePaddle = 2.5.2. Each distinct key and value once per launch. */
static void note_fact(tw_run *root, tw_run *run, const tw_record *r)
{
    const char *m = r->message;
    while (*m == ' ' || *m == '\t')
        m++;
    char key[32], value[80];
    const char *paddle = strstr(m, "train with paddle ");
    if (paddle) {
        snprintf(key, sizeof key, "PaddlePaddle");
        snprintf(value, sizeof value, "%.*s", (int)strcspn(paddle + 18, " "), paddle + 18);
    } else {
        const char *colon = strstr(m, ": ");
        if (!colon)
            return;
        bool sha = colon - m == 3 && strncmp(m, "sha", 3) == 0;
        snprintf(key, sizeof key, "%.*s", sha ? 10 : (int)(colon - m), sha ? "git commit" : m);
        snprintf(value, sizeof value, "%.*s", sha ? (int)strcspn(colon + 2, ",") : (int)strlen(colon + 2), colon + 2);
    }
    int rank = r->rank < 0 ? 0 : r->rank;
    for (int i = 0; i < run->fact_count; i++) {
        if (strcmp(run->facts[i].key, key) == 0 && strcmp(run->facts[i].value, value) == 0)
            return;
    }
    if (run->fact_count == TW_FACTS_MAX)
        return;
    tw_fact *f = &run->facts[run->fact_count++];
    memcpy(f->key, key, sizeof key);
    memcpy(f->value, value, sizeof value);
    f->rank = rank;
    f->file = intern_file(root, r->source.file);
    f->line = r->source.line;
}

/* Events a long run logs by the hundred (every epoch's checkpoint, every
 * skipped NaN step, deprecation warnings). */
static bool routine_event(tw_event_kind kind)
{
    return kind == TW_EV_WARNING || kind == TW_EV_CHECKPOINT || kind == TW_EV_RESUME || kind == TW_EV_NAN;
}

/* Keeps an event for the rules, in the order they came: the first ones
 * while there is room, routine ones in at most half of it and never in the
 * last TW_EVENTS_TAIL slots. Those keep the latest events that are not
 * routine: when all is full a new one slides the oldest of them out. So
 * neither hundreds of warnings nor hundreds of caught exceptions crowd out
 * the OOM, the crash or the launcher's report at the end (every event is
 * counted in event_counts either way). */
static void keep_event(tw_run *run, const tw_event_note *note)
{
    tw_event_note *kept = run->events_kept;
    if (routine_event(note->kind)) {
        if (run->routine_kept < TW_EVENTS_KEPT / 2 && run->events_kept_count < TW_EVENTS_KEPT - TW_EVENTS_TAIL) {
            kept[run->events_kept_count++] = *note;
            run->routine_kept++;
        } else {
            run->events_not_kept++;
        }
        return;
    }
    if (run->events_kept_count < TW_EVENTS_KEPT) {
        kept[run->events_kept_count++] = *note;
        return;
    }
    tw_event_note *tail = kept + TW_EVENTS_KEPT - TW_EVENTS_TAIL;
    memmove(tail, tail + 1, (TW_EVENTS_TAIL - 1) * sizeof *tail);
    kept[TW_EVENTS_KEPT - 1] = *note;
    run->events_not_kept++;
}

static void add_event(tw_run *root, tw_run *run, tw_cursor *c, const tw_record *r)
{
    if (c && r->event == TW_EV_LAUNCH)
        run = start_line(root, run, c, r);
    if (r->event == TW_EV_ENVIRONMENT) { /* a fact, counted, not kept as an event */
        note_fact(root, run, r);
        run->events++;
        run->event_counts[r->event]++;
        return;
    } else if (c && ends_start(r))
        c->content = true;
    tw_rank *rk = rank_of(run, r->rank);
    if (rk && (r->event == TW_EV_CHECKPOINT || r->event == TW_EV_RESUME))
        rk->event_since_last = true;
    run->events++;
    if ((unsigned)r->event < TW_EV_COUNT)
        run->event_counts[r->event]++;
    tw_event_note note = {
        .kind = r->event,
        .rank = r->rank < 0 ? 0 : r->rank,
        .file = intern_file(root, r->source.file),
        .line = r->source.line,
        .time = r->time,
        .has_time = (r->fields & TW_F_TIME) != 0,
        .last_pos = rk && rk->have_last ? rk->last.pos : -1,
        .code = r->exit_code,
    };
    memcpy(note.message, r->message, sizeof note.message);
    memcpy(note.detail, r->detail, sizeof note.detail);
    if (r->event == TW_EV_EXCEPTION) {
        run->last_exception = note;
        run->have_last_exception = true;
    }
    if (run->shape_note_count < TW_SHAPE_NOTES && (strstr(note.message, "shape") || strstr(note.detail, "shape")))
        run->shape_notes[run->shape_note_count++] = note;
    keep_event(run, &note);
}

static void note_time(tw_launch_info *l, const tw_record *r)
{
    if (!(r->fields & TW_F_TIME) || !isfinite(r->time))
        return;
    /* ranks come one file after another: the extremes, not the order */
    if (isnan(l->first_time) || r->time < l->first_time)
        l->first_time = r->time;
    if (isnan(l->last_time) || r->time > l->last_time)
        l->last_time = r->time;
}

void tw_run_add(void *arg, const tw_record *r)
{
    tw_run *root = arg;
    if (r->kind == TW_REC_LINE) { /* a line no format read: the template miner's, no rank's record */
        uint32_t file = intern_file(root, r->source.file);
        const tw_run_hooks *h = root->hooks;
        if (h && h->unread_line(root, r, file, launch_of(root, r->rank)) != TW_OK)
            root->lines_not_mined++;            /* out of memory: said under --templates */
        if (h && h->gpu_hint_maybe(r->message)) /* which GPU the rank uses (gpu.c) */
            h->gpu_hint(root, r, file, launch_of(root, r->rank));
        return;
    }
    tw_cursor *c = cursor_of(root, r->rank);
    tw_run *run = c ? launch_at(root, c->launch) : root;
    switch (r->kind) {
    case TW_REC_STEP:
        add_step(root, run, c, r);
        break;
    case TW_REC_EVAL:
        add_eval(root, run, r);
        break;
    case TW_REC_EVENT:
        add_event(root, run, c, r);
        if (root->hooks && root->hooks->gpu_hint_maybe(r->message)) /* after: a start line moves the rank on */
            root->hooks->gpu_hint(root, r, intern_file(root, r->source.file), launch_of(root, r->rank));
        break;
    case TW_REC_LINE:
        break;
    }
    if (r->fields & TW_F_TIME) {
        /* the launch the record went to: the cursor may have moved */
        note_time(c ? &launch_at(root, c->launch)->launch : &root->launch, r);
        if (c)
            c->last_time = r->time;
    }
}
