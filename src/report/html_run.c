/*
 * html_run.c: the HTML page of an analysed run (analyze --html, run --html).
 *
 * The charts are drawn from the run's own downsampled series (run.h: at
 * most TW_SERIES_MAX points per rank, evenly spread over the run), every
 * launch of the log on one x axis with the launches as shaded bands: over
 * time they follow each other, over steps a launch whose step counter went
 * back is laid after the one before (its steps offset, said under the
 * chart). The findings link to a highlighted region around their step in
 * the chart of their theme (the loss for anything else with a step).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../diagnose/diagnose.h"
#include "../diagnose/gpu.h"
#include "chart.h"
#include "html.h"
#include "html_run.h"
#include "trainwatch/error.h"
#include "trainwatch/html.h"

#define RANKS_DRAWN 8 /* ranks in the per-rank overlay: the fastest, the slowest and evenly between */

#define EVAL_CHARTS  4           /* evaluation metrics with a chart of their own; all are in the metrics table */
#define METRIC_LINES 8           /* training metrics drawn per chart (the palette); all are in the metrics table */
#define GPU_LINES    8           /* GPUs drawn (by index): the palette */
#define GPU_SLACK    60.0        /* seconds of GPU log drawn around the steps' span (as gpu.c aligns) */
#define F_METRIC     0x80000000u /* F_METRIC | k: a rank's named metric k (tw_point.metric), not a record field */

enum {
    CH_LOSS,
    CH_PARTS,
    CH_LR,
    CH_STEP,
    CH_IPS,
    CH_MEM,
    CH_GPU_UTIL,
    CH_GPU_MEM,
    CH_SCALARS,
    CH_RANKS,
    CH_EVAL,
    CH_COUNT = CH_EVAL + EVAL_CHARTS
};

typedef struct page {
    const tw_report *report;
    const tw_run *run;
    int launches;
    double offset[TW_LAUNCHES_MAX + 1]; /* added to the steps of launch i */
    tw_chart charts[CH_COUNT];
    const tw_html_gpu *sampled; /* what run sampled, or NULL */
} page;

/* ---- the x axis over launches ------------------------------------- */

static bool launch_span(const tw_run *l, double *lo, double *hi)
{
    *lo = INFINITY, *hi = -INFINITY;
    for (int r = 0; r < l->rank_count; r++) {
        const tw_series *s = &l->ranks[r]->series;
        for (size_t k = 0; k < s->count; k++) {
            *lo = fmin(*lo, s->points[k].pos);
            *hi = fmax(*hi, s->points[k].pos);
        }
    }
    return *lo <= *hi;
}

static bool place_launches(page *p)
{
    double end = -INFINITY;
    bool moved = false;
    for (int i = 0; i < p->launches; i++) {
        double lo, hi;
        p->offset[i] = 0;
        if (!launch_span(tw_run_launch(p->run, i), &lo, &hi))
            continue;
        if (lo <= end) {
            p->offset[i] = end - lo + 1;
            moved = true;
        }
        end = hi + p->offset[i];
    }
    return moved;
}

static void add_bands(page *p, tw_chart *c)
{
    if (p->launches < 2)
        return;
    for (int i = 0; i < p->launches; i++) {
        const tw_run *l = tw_run_launch(p->run, i);
        double lo, hi;
        if (!launch_span(l, &lo, &hi))
            continue;
        char label[48];
        snprintf(label, sizeof label, "launch %d", i + 1);
        tw_chart_band_add(c, lo + p->offset[i], hi + p->offset[i], l->launch.first_time, l->launch.last_time, label);
    }
}

/* ---- series from the run ------------------------------------------ */

static double field(const tw_point *pt, unsigned f)
{
    switch (f) {
    case TW_F_LOSS:
        return pt->loss;
    case TW_F_LR:
        return pt->lr;
    case TW_F_BATCH_TIME:
        return pt->batch;
    case TW_F_DATA_TIME:
        return pt->data;
    case TW_F_SAMPLES_PER_SEC:
        return pt->ips;
    case TW_F_MEM:
        return pt->mem;
    }
    return NAN;
}

/* The value of field f at point k of rk's series (compute: step time minus
 * data wait); false when the point lacks it. */
static bool series_value(const tw_rank *rk, size_t k, unsigned f, bool compute, double *y)
{
    const tw_point *pt = &rk->series.points[k];
    if (f & F_METRIC) {
        unsigned slot = f & ~F_METRIC;
        if (slot >= TW_POINT_METRICS || !(pt->metric_set & (1u << slot)) || !rk->series.metric)
            return false;
        *y = rk->series.metric[k][slot];
        return true;
    }
    if (!(pt->fields & f) || (compute && !(pt->fields & TW_F_DATA_TIME)))
        return false;
    *y = compute ? pt->batch - pt->data : field(pt, f);
    return true;
}

/* The same of a point kept apart (first, last, worst spike...): a record
 * field, not a named metric (the series alone keeps those). */
static bool value_of(const tw_point *pt, unsigned f, bool compute, double *y)
{
    if (f & F_METRIC)
        return false;
    if (!(pt->fields & f) || (compute && !(pt->fields & TW_F_DATA_TIME)))
        return false;
    *y = compute ? pt->batch - pt->data : field(pt, f);
    return true;
}

static bool has_field(const tw_rank *rk, unsigned f)
{
    double y;
    for (size_t k = 0; k < rk->series.count; k++) {
        if (series_value(rk, k, f, false, &y))
            return true;
    }
    return false;
}

/* The first rank of launch l that logged field f, or NULL. */
static const tw_rank *rank_with(const tw_run *l, unsigned f)
{
    for (int r = 0; r < l->rank_count; r++) {
        if (l->ranks[r]->used && has_field(l->ranks[r], f))
            return l->ranks[r];
    }
    return NULL;
}

/* compute: f is the step time and data wait is subtracted. */
static int add_points(tw_chart_series *s, const tw_rank *rk, unsigned f, double offset, bool compute)
{
    for (size_t k = 0; k < rk->series.count; k++) {
        const tw_point *pt = &rk->series.points[k];
        double y;
        if (!series_value(rk, k, f, compute, &y))
            continue;
        if (tw_chart_point_add(s, pt->pos + offset, pt->time, y) != TW_OK)
            return TW_ENOMEM;
    }
    return TW_OK;
}

/* The points the run keeps exactly whatever its series dropped (its worst
 * loss spike, its first NaN, its slowest step, its first and last), put
 * back where the series lacks them: a long run's series keeps one record
 * in every stride, and these are the ones a reader must see. */
static int add_extremes(tw_chart_series *s, const tw_rank *rk, unsigned f, double offset, bool compute)
{
    const tw_point *kept[5] = {&rk->first, &rk->last, NULL, NULL, NULL};
    if (rk->spikes)
        kept[2] = &rk->worst_spike;
    if (rk->have_nan)
        kept[3] = &rk->nan_point;
    if (rk->step_times.count)
        kept[4] = &rk->batch_max_point;
    if (rk->series.stride <= 1)
        return TW_OK; /* the series has every record */
    for (int i = 0; i < 5; i++) {
        const tw_point *pt = kept[i];
        double y;
        if (!pt || !value_of(pt, f, compute, &y))
            continue;
        if (tw_chart_point_insert(s, pt->pos + offset, pt->time, y) != TW_OK)
            return TW_ENOMEM;
    }
    return TW_OK;
}

/* One series over every launch: per launch the first rank that logged it. */
static int series_of(page *p, tw_chart *c, const char *name, int colour, unsigned f, bool compute)
{
    int ranks = -1;
    bool any = false;
    for (int i = 0; i < p->launches; i++) {
        const tw_rank *rk = rank_with(tw_run_launch(p->run, i), compute ? TW_F_DATA_TIME : f);
        if (rk) {
            any = true;
            ranks = ranks == -1 || ranks == rk->rank ? rk->rank : -2;
        }
    }
    if (!any)
        return TW_OK;
    char label[64];
    if (p->report->summary.ranks > 1 && ranks >= 0)
        snprintf(label, sizeof label, "%s (rank %d)", name, ranks);
    else
        snprintf(label, sizeof label, "%s", name);
    tw_chart_series *s = tw_chart_series_add(c, label, colour);
    if (!s)
        return TW_ENOMEM;
    for (int i = 0; i < p->launches; i++) {
        const tw_rank *rk = rank_with(tw_run_launch(p->run, i), compute ? TW_F_DATA_TIME : f);
        if (rk && (add_points(s, rk, f, p->offset[i], compute) != TW_OK ||
                   add_extremes(s, rk, f, p->offset[i], compute) != TW_OK))
            return TW_ENOMEM;
    }
    return TW_OK;
}

/* The device-memory line and, where the memory rule found steady growth,
 * the projection it computed (the finding's), drawn from the last point of
 * the series it fitted to where it reaches the device's size (at most twice
 * as far again as the run went, so a slow leak does not squash the chart). */
static int memory_projection(page *p, tw_chart *c)
{
    double cap = p->run->th.device_memory;
    if (!(cap > 0))
        return TW_OK;
    c->hline = cap;
    snprintf(c->hline_label, sizeof c->hline_label, "device memory %.1f GiB", cap / TW_HTML_GIB);
    for (int i = 0; i < p->report->finding_count; i++) {
        const tw_finding *f = &p->report->findings[i];
        const struct tw_projection *pr = &f->projection;
        if (strcmp(f->rule, "memory_growth") != 0 || !pr->projected || !(pr->slope > 0))
            continue;
        int li = f->launch > 0 ? f->launch - 1 : 0;
        if (li >= p->launches)
            continue;
        const tw_rank *rk = tw_run_rank(tw_run_launch(p->run, li), f->rank);
        double first = rk ? rk->first.pos : 0, limit = pr->from_step + 2 * (pr->from_step - first + 1);
        double x = pr->to_step < limit ? pr->to_step : limit;
        tw_chart_series *s = tw_chart_series_add(c, "projected growth", 3);
        if (!s)
            return TW_ENOMEM;
        s->dashed = true;
        if (tw_chart_point_add(s, pr->from_step + p->offset[li], NAN, pr->from_value) != TW_OK ||
            tw_chart_point_add(s, x + p->offset[li], NAN, pr->from_value + pr->slope * (x - pr->from_step)) != TW_OK)
            return TW_ENOMEM;
        snprintf(c->note, sizeof c->note,
                 "At the growth the memory rule measured on rank %d, the %.1f GiB device is full around step %.0f.",
                 f->rank, pr->to_value / TW_HTML_GIB, pr->to_step);
        break;
    }
    return TW_OK;
}

typedef struct rank_order {
    const tw_rank *rank;
    int launch;
    double median;
} rank_order;

static int by_median(const void *a, const void *b)
{
    const rank_order *x = a, *y = b;
    return x->median < y->median ? -1 : x->median > y->median;
}

/* Step time of each rank (of every launch), at most RANKS_DRAWN of them:
 * sorted by median step time, the fastest, the slowest and evenly between. */
static int rank_overlay(page *p, tw_chart *c)
{
    int total = 0;
    for (int i = 0; i < p->launches; i++)
        total += tw_run_launch(p->run, i)->rank_count;
    int ranks = 0;
    rank_order *o = calloc((size_t)(total ? total : 1), sizeof *o);
    if (!o)
        return TW_ENOMEM;
    int distinct = 0;
    for (int i = 0; i < p->launches; i++) {
        const tw_run *l = tw_run_launch(p->run, i);
        for (int r = 0; r < l->rank_count; r++) {
            if (!l->ranks[r]->used || !has_field(l->ranks[r], TW_F_BATCH_TIME))
                continue;
            o[ranks++] = (rank_order){l->ranks[r], i, tw_hist_quantile(&l->ranks[r]->step_times, 0.5)};
            bool seen = false;
            for (int k = 0; k < ranks - 1 && !seen; k++)
                seen = o[k].rank->rank == l->ranks[r]->rank;
            distinct += !seen;
        }
    }
    int rc = TW_OK;
    if (distinct > 1) {
        qsort(o, (size_t)ranks, sizeof *o, by_median);
        int shown = ranks < RANKS_DRAWN ? ranks : RANKS_DRAWN;
        if (ranks > shown)
            snprintf(c->note, sizeof c->note,
                     "%d ranks logged step times; %d drawn: the fastest, the slowest and evenly between (by median).",
                     distinct, shown);
        for (int k = 0; k < shown && rc == TW_OK; k++) {
            const rank_order *r = &o[shown == 1 ? 0 : (size_t)k * (size_t)(ranks - 1) / (size_t)(shown - 1)];
            char name[64];
            if (p->launches > 1)
                snprintf(name, sizeof name, "rank %d (launch %d)", r->rank->rank, r->launch + 1);
            else
                snprintf(name, sizeof name, "rank %d", r->rank->rank);
            tw_chart_series *s = tw_chart_series_add(c, name, k);
            rc = s ? add_points(s, r->rank, TW_F_BATCH_TIME, p->offset[r->launch], false) : TW_ENOMEM;
            if (rc == TW_OK)
                rc = add_extremes(s, r->rank, TW_F_BATCH_TIME, p->offset[r->launch], false);
        }
    }
    free(o);
    return rc;
}

/* One chart per evaluation metric (the first EVAL_CHARTS names of every
 * launch, in the order first seen), from the run's evaluation series: per
 * launch the results of the first rank that reported the metric (ranks
 * come one after another in a log; their steps would go back). */
static int eval_charts(page *p)
{
    int charts = 0;
    for (int i = 0; i < p->launches; i++) {
        const tw_run *l = tw_run_launch(p->run, i);
        int rank_of_chart[EVAL_CHARTS];
        for (int c = 0; c < EVAL_CHARTS; c++)
            rank_of_chart[c] = INT32_MIN;
        for (size_t k = 0; k < l->eval_series.count; k++) {
            const tw_eval_point *e = &l->eval_series.points[k];
            const char *name = l->eval_metrics.items[e->metric].s.name;
            int c = 0;
            while (c < charts && strcmp(p->charts[CH_EVAL + c].series[0].name, name) != 0)
                c++;
            if (c == charts) {
                if (charts == EVAL_CHARTS)
                    continue;
                char id[32], title[96];
                snprintf(id, sizeof id, "chart-eval-%d", charts + 1);
                snprintf(title, sizeof title, "Evaluation: %s", name);
                tw_chart_init(&p->charts[CH_EVAL + c], id, title, name);
                if (!tw_chart_series_add(&p->charts[CH_EVAL + c], name, 4 + c))
                    return TW_ENOMEM;
                charts++;
            }
            if (rank_of_chart[c] == INT32_MIN)
                rank_of_chart[c] = e->rank;
            if (e->rank != rank_of_chart[c])
                continue;
            if (tw_chart_point_add(&p->charts[CH_EVAL + c].series[0], e->pos + p->offset[i], e->time, e->value) !=
                TW_OK)
                return TW_ENOMEM;
        }
    }
    return TW_OK;
}

/* ---- GPU utilisation and memory -------------------------------------- */

/* The steps' timestamps over every launch (NAN, NAN without). */
static void steps_time_span(const page *p, double *lo, double *hi)
{
    *lo = *hi = NAN;
    for (int i = 0; i < p->launches; i++) {
        const tw_run *l = tw_run_launch(p->run, i);
        for (int r = 0; r < l->rank_count; r++) {
            const tw_rank *rk = l->ranks[r];
            if (!rk->used)
                continue;
            if (isfinite(rk->first.time) && !(rk->first.time >= *lo))
                *lo = rk->first.time;
            if (isfinite(rk->last.time) && !(rk->last.time <= *hi))
                *hi = rk->last.time;
        }
    }
}

/* A clean mapping from time to step: one launch, and a rank whose series
 * has timestamps that never go back; NULL (and why) otherwise. */
static const tw_rank *step_clock(const page *p, const char **why)
{
    if (p->launches > 1) {
        *why = "the log holds several launches";
        return NULL;
    }
    const tw_run *l = tw_run_launch(p->run, 0);
    for (int r = 0; r < l->rank_count; r++) {
        const tw_series *s = &l->ranks[r]->series;
        size_t timed = 0;
        double last = -INFINITY;
        bool ordered = true;
        for (size_t k = 0; k < s->count && ordered; k++) {
            if (!isfinite(s->points[k].time))
                continue;
            ordered = s->points[k].time >= last;
            last = s->points[k].time;
            timed++;
        }
        if (l->ranks[r]->used && ordered && timed >= 2)
            return l->ranks[r];
    }
    *why = "the steps carry no ordered timestamps";
    return NULL;
}

/* The step at time t on rk's clock, interpolated between its points; false
 * outside the span of its timestamped points. */
static bool step_at(const tw_rank *rk, double t, double *step)
{
    const tw_point *before = NULL;
    for (size_t k = 0; k < rk->series.count; k++) {
        const tw_point *pt = &rk->series.points[k];
        if (!isfinite(pt->time))
            continue;
        if (pt->time == t) {
            *step = pt->pos;
            return true;
        }
        if (pt->time > t) {
            if (!before)
                return false;
            *step = before->pos + (pt->pos - before->pos) * (t - before->time) / (pt->time - before->time);
            return true;
        }
        before = pt;
    }
    return false;
}

/* One GPU sample, from a GPU log or from run's sampling. */
typedef struct gpu_sample {
    int gpu;
    double time, util, mem;
} gpu_sample;

static tw_chart_series *gpu_line(tw_chart *c, int gpu)
{
    char name[32];
    snprintf(name, sizeof name, "GPU %d", gpu < 0 ? 0 : gpu);
    for (int i = 0; i < c->series_count; i++) {
        if (strcmp(c->series[i].name, name) == 0)
            return &c->series[i];
    }
    if (c->series_count >= GPU_LINES)
        return NULL;
    tw_chart_series *s = tw_chart_series_add(c, name, c->series_count);
    if (s)
        s->dashed = c->series_count > 4;
    return s;
}

/* Draws the samples: on the step axis too when every one maps to a step. */
static int gpu_draw(page *p, const gpu_sample *g, size_t n, const char *source)
{
    tw_chart *util = &p->charts[CH_GPU_UTIL], *mem = &p->charts[CH_GPU_MEM];
    const char *why = NULL;
    const tw_rank *clock = step_clock(p, &why);
    double step;
    for (size_t i = 0; i < n && clock; i++) {
        if (!step_at(clock, g[i].time, &step)) {
            clock = NULL;
            why = "some samples fall outside the steps' timestamps";
        }
    }
    int gpus = 0;
    for (size_t i = 0; i < n; i++) {
        double x = g[i].time;
        if (clock)
            step_at(clock, g[i].time, &x);
        tw_chart_series *s;
        if (!isnan(g[i].util) && (s = gpu_line(util, g[i].gpu)) &&
            tw_chart_point_add(s, x, g[i].time, g[i].util) != TW_OK)
            return TW_ENOMEM;
        if (!isnan(g[i].mem) && (s = gpu_line(mem, g[i].gpu)) && tw_chart_point_add(s, x, g[i].time, g[i].mem) != TW_OK)
            return TW_ENOMEM;
        gpus = gpus > g[i].gpu + 1 ? gpus : g[i].gpu + 1;
    }
    for (int k = 0; k < 2; k++) {
        tw_chart *c = k ? mem : util;
        c->time_only = clock == NULL;
        int len = snprintf(c->note, sizeof c->note, "%s", source);
        if (!clock && len > 0 && (size_t)len < sizeof c->note)
            len += snprintf(c->note + len, sizeof c->note - (size_t)len, " Drawn over time only: %s.", why);
        if (gpus > GPU_LINES && len > 0 && (size_t)len < sizeof c->note)
            snprintf(c->note + len, sizeof c->note - (size_t)len, " GPUs 0 to %d of %d drawn.", GPU_LINES - 1, gpus);
    }
    return TW_OK;
}

/* The samples run took (min and max per bucket of time), else those of the
 * GPU logs given to analyze over the steps' span (60 s either side; all of
 * them when neither side has times and the log holds one launch). */
static int gpu_charts(page *p)
{
    tw_chart *c = p->charts;
    tw_chart_init(&c[CH_GPU_UTIL], "chart-gpu-util", "GPU utilisation", "%");
    tw_chart_init(&c[CH_GPU_MEM], "chart-gpu-memory", "GPU memory used", "GiB");
    c[CH_GPU_MEM].y_scale = TW_HTML_GIB;
    const tw_gpu_notes *notes = p->run->gpu;
    size_t n = p->sampled && p->sampled->count ? p->sampled->count : notes ? notes->count : 0;
    if (n == 0)
        return TW_OK;
    gpu_sample *g = malloc(sizeof *g * n);
    if (!g)
        return TW_ENOMEM;
    size_t kept = 0;
    char source[200];
    if (p->sampled && p->sampled->count) {
        for (size_t i = 0; i < n; i++) {
            const tw_html_gpu_point *s = &p->sampled->points[i];
            g[kept++] = (gpu_sample){s->gpu, s->time, s->util, s->mem_used};
        }
        snprintf(source, sizeof source,
                 "Sampled by run through NVML each second (the minimum and the maximum of each stretch of time).");
        if (isfinite(p->sampled->mem_total) && p->sampled->mem_total > 0) {
            c[CH_GPU_MEM].hline = p->sampled->mem_total;
            snprintf(c[CH_GPU_MEM].hline_label, sizeof c[CH_GPU_MEM].hline_label, "%.1f GiB",
                     p->sampled->mem_total / TW_HTML_GIB);
        }
    } else {
        double lo, hi, total = NAN;
        steps_time_span(p, &lo, &hi);
        bool by_time = isfinite(lo) && isfinite(hi);
        for (size_t i = 0; i < n; i++) {
            const tw_gpu_sample *s = &notes->items[i].s;
            if (by_time ? !(s->time >= lo - GPU_SLACK && s->time <= hi + GPU_SLACK) : p->launches > 1)
                continue;
            if (!isfinite(s->time))
                continue; /* nothing to place it by */
            g[kept++] = (gpu_sample){s->gpu, s->time, s->util, s->mem_used};
            total = isfinite(s->mem_total) && !(s->mem_total <= total) ? s->mem_total : total;
        }
        snprintf(source, sizeof source, "From the GPU log %.100s%s.", notes->files[0],
                 by_time ? ", over the steps' span and a minute either side" : "");
        if (isfinite(total)) {
            c[CH_GPU_MEM].hline = total;
            snprintf(c[CH_GPU_MEM].hline_label, sizeof c[CH_GPU_MEM].hline_label, "%.1f GiB", total / TW_HTML_GIB);
        }
    }
    int rc = kept ? gpu_draw(p, g, kept, source) : TW_OK;
    free(g);
    return rc;
}

/* ---- named training metrics ---------------------------------------- */

/* The slot of name among the metrics rk keeps per point, or -1. */
static int kept_metric(const tw_rank *rk, const char *name)
{
    for (int k = 0; k < rk->train_metrics.count; k++) {
        if (strcmp(rk->train_metrics.items[k].s.name, name) == 0)
            return rk->metric_slot[k] >= 0 ? rk->metric_slot[k] : -1;
    }
    return -1;
}

/* The first rank of launch l that kept metric name in its points, or NULL. */
static const tw_rank *rank_with_metric(const tw_run *l, const char *name, unsigned *f)
{
    for (int r = 0; r < l->rank_count; r++) {
        int k = l->ranks[r]->used ? kept_metric(l->ranks[r], name) : -1;
        if (k >= 0 && has_field(l->ranks[r], F_METRIC | (unsigned)k)) {
            *f = F_METRIC | (unsigned)k;
            return l->ranks[r];
        }
    }
    return NULL;
}

static bool is_loss_part(const char *name)
{
    return strncmp(name, "loss_", 5) == 0;
}

/* One series of metric name: per launch the first rank that kept it. */
static int metric_series(page *p, tw_chart *c, const char *name)
{
    int ranks = -1;
    for (int i = 0; i < p->launches; i++) {
        unsigned f;
        const tw_rank *rk = rank_with_metric(tw_run_launch(p->run, i), name, &f);
        if (rk)
            ranks = ranks == -1 || ranks == rk->rank ? rk->rank : -2;
    }
    char label[64];
    if (p->report->summary.ranks > 1 && ranks >= 0)
        snprintf(label, sizeof label, "%.40s (rank %d)", name, ranks);
    else
        snprintf(label, sizeof label, "%s", name);
    tw_chart_series *s = tw_chart_series_add(c, label, c->series_count);
    if (!s)
        return TW_ENOMEM;
    s->dashed = c->series_count > 4; /* lines that may overlap are told apart by more than colour */
    for (int i = 0; i < p->launches; i++) {
        unsigned f;
        const tw_rank *rk = rank_with_metric(tw_run_launch(p->run, i), name, &f);
        if (rk && (add_points(s, rk, f, p->offset[i], false) != TW_OK ||
                   add_extremes(s, rk, f, p->offset[i], false) != TW_OK))
            return TW_ENOMEM;
    }
    return TW_OK;
}

static bool name_seen(char (*names)[TW_NAME_MAX], int n, const char *name)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i], name) == 0)
            return true;
    }
    return false;
}

/* The named metrics of the steps as two charts: the parts of the loss
 * (loss_*) and the other scalars, METRIC_LINES each at most, in the order
 * first seen; the rest (and those a rank logged past its first
 * TW_POINT_METRICS) are in the metrics table only, said under the chart. */
static int metric_charts(page *p)
{
    enum { NAMES = 4 * TW_SUMMARY_METRICS };
    char(*names)[TW_NAME_MAX] = calloc(NAMES, sizeof *names);
    if (!names)
        return TW_ENOMEM;
    int count = 0;
    bool more = false;
    for (int i = 0; i < p->launches; i++) {
        const tw_run *l = tw_run_launch(p->run, i);
        for (int r = 0; r < l->rank_count; r++) {
            const tw_metric_notes *m = &l->ranks[r]->train_metrics;
            for (int k = 0; k < m->count; k++) {
                if (name_seen(names, count, m->items[k].s.name))
                    continue;
                if (count == NAMES) {
                    more = true;
                    continue;
                }
                snprintf(names[count++], TW_NAME_MAX, "%s", m->items[k].s.name);
            }
        }
    }
    tw_chart *parts = &p->charts[CH_PARTS], *scalars = &p->charts[CH_SCALARS];
    int rc = TW_OK, drawn[2] = {0, 0}, named[2] = {0, 0};
    for (int i = 0; i < count && rc == TW_OK; i++) {
        int which = is_loss_part(names[i]) ? 0 : 1;
        tw_chart *c = which ? scalars : parts;
        named[which]++;
        bool kept = false;
        for (int l = 0; l < p->launches && !kept; l++) {
            unsigned f;
            kept = rank_with_metric(tw_run_launch(p->run, l), names[i], &f) != NULL;
        }
        if (!kept || c->series_count >= METRIC_LINES)
            continue;
        rc = metric_series(p, c, names[i]);
        drawn[which]++;
    }
    for (int w = 0; w < 2; w++) {
        tw_chart *c = w ? scalars : parts;
        if (drawn[w] && (drawn[w] < named[w] || more))
            snprintf(c->note, sizeof c->note,
                     "%d%s %s logged; %d drawn (the first seen); all are in the metrics table.", named[w],
                     more ? "+" : "", w ? "other training metrics" : "loss parts", drawn[w]);
    }
    free(names);
    return rc;
}

static int build_charts(page *p)
{
    tw_chart *c = p->charts;
    tw_chart_init(&c[CH_LOSS], "chart-loss", "Loss", "loss");
    tw_chart_init(&c[CH_PARTS], "chart-loss-parts", "Loss parts", "loss");
    tw_chart_init(&c[CH_SCALARS], "chart-train-metrics", "Other training metrics", "value");
    tw_chart_init(&c[CH_LR], "chart-lr", "Learning rate", "learning rate");
    tw_chart_init(&c[CH_STEP], "chart-step", "Step time: data wait and compute", "s");
    tw_chart_init(&c[CH_IPS], "chart-throughput", "Throughput", "samples/s");
    tw_chart_init(&c[CH_MEM], "chart-memory", "Device memory", "GiB");
    tw_chart_init(&c[CH_RANKS], "chart-ranks", "Step time per rank", "s");
    c[CH_MEM].y_scale = TW_HTML_GIB;
    bool moved = place_launches(p);
    int rc = series_of(p, &c[CH_LOSS], "loss", 0, TW_F_LOSS, false);
    if (rc == TW_OK)
        rc = series_of(p, &c[CH_LR], "learning rate", 2, TW_F_LR, false);
    if (rc == TW_OK)
        rc = series_of(p, &c[CH_STEP], "step time", 0, TW_F_BATCH_TIME, false);
    if (rc == TW_OK)
        rc = series_of(p, &c[CH_STEP], "data wait", 1, TW_F_DATA_TIME, false);
    if (rc == TW_OK)
        rc = series_of(p, &c[CH_STEP], "compute", 2, TW_F_BATCH_TIME, true);
    if (rc == TW_OK && c[CH_STEP].series_count == 3)
        c[CH_STEP].series[2].dashed = true; /* over the step time when data wait is small */
    if (rc == TW_OK)
        rc = series_of(p, &c[CH_IPS], "samples/s", 4, TW_F_SAMPLES_PER_SEC, false);
    if (rc == TW_OK)
        rc = series_of(p, &c[CH_MEM], "memory", 0, TW_F_MEM, false);
    if (rc == TW_OK && tw_chart_points(&c[CH_MEM]))
        rc = memory_projection(p, &c[CH_MEM]);
    if (rc == TW_OK)
        rc = metric_charts(p);
    if (rc == TW_OK)
        rc = gpu_charts(p);
    if (rc == TW_OK && p->report->summary.ranks > 1)
        rc = rank_overlay(p, &c[CH_RANKS]);
    if (rc == TW_OK)
        rc = eval_charts(p);
    for (int i = 0; i < CH_COUNT; i++) {
        add_bands(p, &c[i]);
        c[i].step_offsets = moved;
        if (moved && !c[i].note[0])
            snprintf(c[i].note, sizeof c[i].note,
                     "Launches are laid end to end: steps of a launch whose counter went back are offset.");
    }
    return rc;
}

/* ---- findings to charts -------------------------------------------- */

static int chart_of(const char *rule)
{
    static const struct {
        const char *rule;
        int chart;
    } map[] = {
        {"nan_loss", CH_LOSS},          {"loss_spikes", CH_LOSS},          {"divergence", CH_LOSS},
        {"plateau", CH_LOSS},           {"data_loading_bound", CH_STEP},   {"stall", CH_STEP},
        {"step_time_jitter", CH_STEP},  {"epoch_start_wait", CH_STEP},     {"throughput_drop", CH_IPS},
        {"memory_growth", CH_MEM},      {"memory_spike", CH_MEM},          {"oom", CH_MEM},
        {"straggler", CH_RANKS},        {"rank_stopped", CH_RANKS},        {"eval_contradiction", CH_EVAL},
        {"gpu_underused", CH_GPU_UTIL}, {"gpu_memory_growth", CH_GPU_MEM}, {"gpu_log_not_aligned", CH_GPU_UTIL},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(map[i].rule, rule) == 0)
            return map[i].chart;
    }
    return CH_LOSS;
}

/* The time of the point nearest to step in the chart (NAN without). */
static double time_at(const tw_chart *c, double step)
{
    double best = INFINITY, t = NAN;
    for (int i = 0; i < c->series_count; i++) {
        for (size_t k = 0; k < c->series[i].count; k++) {
            const tw_chart_point *pt = &c->series[i].points[k];
            if (fabs(pt->step - step) < best && isfinite(pt->time))
                best = fabs(pt->step - step), t = pt->time;
        }
        for (size_t k = 0; k < c->series[i].bad_count; k++) {
            const tw_chart_point *pt = &c->series[i].bad[k];
            if (fabs(pt->step - step) < best && isfinite(pt->time))
                best = fabs(pt->step - step), t = pt->time;
        }
    }
    return t;
}

static void link_findings(page *p, char (*targets)[32])
{
    for (int i = 0; i < p->report->finding_count; i++) {
        const tw_finding *f = &p->report->findings[i];
        int ch = chart_of(f->rule);
        if (!tw_chart_points(&p->charts[ch]))
            ch = (ch == CH_RANKS && tw_chart_points(&p->charts[CH_STEP])) ? CH_STEP : CH_LOSS;
        tw_chart *c = &p->charts[ch];
        targets[i][0] = '\0';
        if (!tw_chart_points(c))
            continue;
        int li = f->launch > 0 && f->launch <= p->launches ? f->launch - 1 : p->launches - 1;
        if (f->step >= 0 && !c->time_only && c->mark_count < TW_CHART_MARKS) {
            double step = (double)f->step + p->offset[li];
            tw_chart_mark_add(c, i + 1, step, time_at(c, step));
            snprintf(targets[i], sizeof targets[i], "f-%d", i + 1);
        } else {
            snprintf(targets[i], sizeof targets[i], "%s", c->id);
        }
    }
}

/* ---- tables -------------------------------------------------------- */

/* The run's environment, in the order first seen (the tables of the
 * report are html_run_tables.c's). */
static void environment_table(FILE *out, const page *p)
{
    const tw_report *r = p->report;
    int li = r->launch > 0 ? r->launch - 1 : r->launch_count - 1;
    if (li < 0 || li >= p->launches)
        return;
    const tw_run *l = tw_run_launch(p->run, li);
    if (l->fact_count == 0)
        return;
    fputs("<section id=\"environment\"><h2>Environment</h2>", out);
    if (r->launch_count > 1)
        fprintf(out, "<p class=\"note\">As launch %d states it.</p>", li + 1);
    fputs("<table id=\"environment-table\"><thead><tr><th>what</th><th>value</th><th>read at</th></tr></thead>\n",
          out);
    for (int i = 0; i < l->fact_count; i++) {
        const tw_fact *f = &l->facts[i];
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = strcmp(l->facts[j].key, f->key) == 0;
        if (seen)
            continue;
        fputs("<tr><td>", out);
        tw_html_text(out, f->key);
        fputs("</td><td>", out);
        tw_html_text(out, f->value);
        fputs("</td><td>", out);
        char at[320];
        tw_html_text(out, tw_where(p->run, f->file, f->line, at, sizeof at));
        fprintf(out, " (rank %d)</td></tr>\n", f->rank);
    }
    fputs("</table></section>\n", out);
}

static bool any_time(const page *p)
{
    for (int i = 0; i < CH_COUNT; i++) {
        const tw_chart *c = &p->charts[i];
        for (int k = 0; k < c->series_count; k++) {
            for (size_t j = 0; j < c->series[k].count; j++) {
                if (isfinite(c->series[k].points[j].time))
                    return true;
            }
        }
    }
    return false;
}

static void write_page(FILE *out, page *p, const char *title, char (*targets)[32], const tw_html_quote *quotes)
{
    const tw_report *r = p->report;
    char sub[256];
    tw_html_subtitle(r, sub, sizeof sub);
    tw_html_begin(out, title, sub, any_time(p));
    tw_html_findings(out, r->findings, r->finding_count, targets, quotes);
    fputs("<section id=\"charts\"><h2>Charts</h2>\n", out);
    int drawn = 0;
    for (int i = 0; i < CH_COUNT; i++) {
        if (tw_chart_points(&p->charts[i])) {
            tw_chart_write(out, &p->charts[i]);
            drawn++;
        }
    }
    if (!drawn)
        fputs("<p>No step in the log carried a value to draw.</p>\n", out);
    fputs("</section>\n", out);
    tw_html_summary_table(out, r);
    environment_table(out, p);
    if (r->summary.train_metric_count || r->summary.eval_metric_count) {
        fputs("<section id=\"metrics\"><h2>Metrics</h2>\n", out);
        tw_html_metrics_table(out, "training metrics", r->summary.train_metrics, r->summary.train_metric_count);
        tw_html_metrics_table(out, "evaluation metrics", r->summary.eval_metrics, r->summary.eval_metric_count);
        fputs("</section>\n", out);
    }
    tw_html_launches_table(out, r);
    tw_html_inputs_table(out, r);
    tw_html_end(out);
}

/* One time origin for every chart, so that their time views line up. */
static void share_t0(page *p)
{
    double t0 = INFINITY;
    for (int i = 0; i < CH_COUNT; i++) {
        const tw_chart *c = &p->charts[i];
        for (int k = 0; k < c->series_count; k++) {
            for (size_t j = 0; j < c->series[k].count; j++)
                t0 = fmin(t0, c->series[k].points[j].time);
            for (size_t j = 0; j < c->series[k].bad_count; j++)
                t0 = fmin(t0, c->series[k].bad[j].time);
        }
    }
    for (int i = 0; i < CH_COUNT && isfinite(t0); i++)
        p->charts[i].t0 = t0;
}

int tw_report_write_html(FILE *out, const tw_report *report, const tw_run *run, const char *title)
{
    return tw_report_write_html_gpu(out, report, run, title, NULL);
}

int tw_report_write_html_gpu(FILE *out, const tw_report *report, const tw_run *run, const char *title,
                             const tw_html_gpu *sampled)
{
    page *p = calloc(1, sizeof *p);
    int n = report->finding_count;
    char(*targets)[32] = calloc((size_t)(n ? n : 1), sizeof *targets);
    tw_html_quote *quotes = calloc((size_t)(n ? n : 1), sizeof *quotes);
    int rc = p && targets && quotes ? TW_OK : TW_ENOMEM;
    if (rc == TW_OK) {
        p->report = report;
        p->run = run;
        p->sampled = sampled;
        p->launches = tw_run_launches(run);
        if (p->launches > TW_LAUNCHES_MAX + 1)
            p->launches = TW_LAUNCHES_MAX + 1;
        rc = build_charts(p);
    }
    if (rc == TW_OK) {
        share_t0(p);
        link_findings(p, targets);
        for (int i = 0; i < n; i++)
            quotes[i] = (tw_html_quote){report->findings[i].where.file, report->findings[i].where.line, NULL};
        tw_html_quotes_read(quotes, n);
        write_page(out, p, title ? title : "trainwatch report", targets, quotes);
        tw_html_quotes_free(quotes, n);
    }
    if (p) {
        for (int i = 0; i < CH_COUNT; i++)
            tw_chart_free(&p->charts[i]);
    }
    free(p);
    free(targets);
    free(quotes);
    return rc;
}
