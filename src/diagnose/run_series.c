/*
 * run_series.c: the statistics a rank keeps in fixed memory: the
 * log-spaced histograms of durations (step times, gaps) and the
 * downsampled series of step points (see run.h), which halves itself and
 * doubles its stride when full, so it always spans the whole run.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run_internal.h"

void tw_hist_add(tw_hist *h, double seconds)
{
    tw_hist_add_inline(h, seconds);
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
    for (int i = tw_hist_bin(x); i < TW_HIST_BINS; i++)
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
void tw_run_series_add(tw_series *s, const tw_point *p, const double *metric)
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
