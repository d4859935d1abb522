/*
 * prometheus.c: the history read from a Prometheus instead of the SQLite
 * file (`runs --prometheus`, `compare --prometheus`): the runs that `run`
 * and `watch` exported and a Prometheus (or Thanos, Mimir: any Prometheus
 * HTTP API) scraped, made into the entries and views the rest of the
 * history lists and compares (trainwatch/history.h).
 *
 * A run is a label selector (run="a", or any matchers over the series of
 * docs/metrics.md). Its span is when its ranks last saw progress
 * (trainwatch_last_progress_timestamp_seconds: its smallest value in the
 * look-back is the first step seen, its largest the last); its series are
 * query_range answers over that span at TW_HISTORY_SERIES_POINTS points,
 * the same resolution the SQLite history keeps; its step-time quantiles
 * come from the step-duration histogram's buckets over the whole span. The
 * trade-off: what Prometheus holds is what was scraped, so a figure is as
 * fine as the scrape interval, and a run's findings are not there (only
 * its health score).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/http_client.h"
#include "../remote/prom_query.h"
#include "trainwatch/error.h"
#include "trainwatch/history.h"

/* What a query is about: the selector's matchers and the span. */
typedef struct asking {
    const tw_history_prometheus *p;
    tw_prom_server srv; /* p's URL and headers */
    char matchers[512]; /* inside the braces */
    double until, start, end, step;
    char *err;
    size_t errlen;
} asking;

static tw_prom_server server_of(const tw_history_prometheus *p)
{
    return (tw_prom_server){p->url, p->headers, p->header_count};
}

static int matchers_of(const char *selector, char *out, size_t cap, char *err, size_t errlen)
{
    while (*selector == ' ')
        selector++;
    size_t n = strlen(selector);
    while (n && selector[n - 1] == ' ')
        n--;
    if (n >= 2 && selector[0] == '{' && selector[n - 1] == '}') {
        selector++;
        n -= 2;
    }
    if (n == 0 || n >= cap || memchr(selector, '{', n) || memchr(selector, '}', n)) {
        snprintf(err, errlen, "%s is not a label selector such as run=\"a\"", selector);
        return TW_EUSAGE;
    }
    snprintf(out, cap, "%.*s", (int)n, selector);
    return TW_OK;
}

/* An instant query's one value (the first series'), NAN when it has none. */
static int scalar_at(asking *a, const char *fmt, double *value)
{
    char q[1200];
    snprintf(q, sizeof q, fmt, a->matchers, a->p->since);
    tw_prom_result r;
    int rc = tw_prom_query(&a->srv, q, a->until, &r, a->err, a->errlen);
    *value = NAN;
    if (rc == TW_OK && r.count && r.series[0].count)
        *value = r.series[0].v[r.series[0].count - 1];
    tw_prom_result_free(&r);
    return rc;
}

static int range_of(asking *a, const char *fmt, tw_prom_result *out)
{
    char q[1200];
    snprintf(q, sizeof q, fmt, a->matchers, fmax(3 * a->step, 30.0));
    return tw_prom_query_range(&a->srv, q, a->start, a->end, a->step, out, a->err, a->errlen);
}

/* The value of series s at time t (its points are on the query's grid), or NAN. */
static double at_time(const tw_prom_series *s, double t)
{
    if (!s)
        return NAN;
    size_t lo = 0, hi = s->count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->t[mid] < t - 1e-3)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->count && fabs(s->t[lo] - t) < 1e-3 ? s->v[lo] : NAN;
}

/* Adds a view series from a Prometheus one, each point placed at the step
 * the run was at then (NAN where steps are unknown: then the time). */
static int add_series(tw_history_view *v, const char *metric, const tw_prom_series *s, const tw_prom_series *steps)
{
    tw_history_series *grown = realloc(v->series, (v->series_count + 1) * sizeof *grown);
    if (!grown)
        return TW_ENOMEM;
    v->series = grown;
    tw_history_series *out = &v->series[v->series_count];
    memset(out, 0, sizeof *out);
    snprintf(out->metric, sizeof out->metric, "%s", metric);
    out->pos = malloc((s->count ? s->count : 1) * sizeof *out->pos);
    out->time = malloc((s->count ? s->count : 1) * sizeof *out->time);
    out->value = malloc((s->count ? s->count : 1) * sizeof *out->value);
    if (!out->pos || !out->time || !out->value) {
        free(out->pos), free(out->time), free(out->value);
        return TW_ENOMEM;
    }
    for (size_t i = 0; i < s->count; i++) {
        double step = at_time(steps, s->t[i]);
        if (steps && !isfinite(step))
            continue; /* before the first step was seen */
        out->pos[out->count] = steps ? step : s->t[i];
        out->time[out->count] = s->t[i];
        out->value[out->count++] = s->v[i];
    }
    v->series_count++;
    return TW_OK;
}

static int add_fact(tw_history_view *v, const char *key, const char *value)
{
    if (!value || !*value)
        return TW_OK;
    tw_history_fact *grown = realloc(v->facts, (v->fact_count + 1) * sizeof *grown);
    if (!grown)
        return TW_ENOMEM;
    v->facts = grown;
    tw_history_fact *f = &v->facts[v->fact_count++];
    snprintf(f->key, sizeof f->key, "%s", key);
    snprintf(f->value, sizeof f->value, "%s", value);
    f->rank = -1;
    return TW_OK;
}

/* The job of a command line as the SQLite history names it. */
static void job_of(const char *command, char *out, size_t cap)
{
    char copy[512], *argv[32];
    size_t n = 0;
    snprintf(copy, sizeof copy, "%s", command);
    for (char *save, *w = strtok_r(copy, " ", &save); w && n < 31; w = strtok_r(NULL, " ", &save))
        argv[n++] = w;
    argv[n] = NULL;
    if (n)
        tw_history_job_of(argv, out, cap);
    else
        snprintf(out, cap, "%.200s", command);
}

/* Identity from trainwatch_run_info: name, host, command, ranks; and the facts. */
static int identity(asking *a, tw_history_view *v)
{
    char q[700];
    snprintf(q, sizeof q, "last_over_time(trainwatch_run_info{%s}[%.0fs])", a->matchers, a->p->since);
    tw_prom_result r;
    int rc = tw_prom_query(&a->srv, q, a->until, &r, a->err, a->errlen);
    if (rc != TW_OK)
        return rc;
    tw_history_entry *e = &v->entry;
    e->ranks = (int)r.count;
    const tw_prom_series *first = NULL;
    for (size_t i = 0; i < r.count; i++) {
        const char *rank = tw_prom_label_value(&r.series[i], "rank");
        if (!first || (rank && strcmp(rank, "0") == 0))
            first = &r.series[i];
    }
    if (first) {
        const char *run = tw_prom_label_value(first, "run"), *host = tw_prom_label_value(first, "host");
        const char *command = tw_prom_label_value(first, "command");
        snprintf(e->name, sizeof e->name, "%s", run ? run : "");
        snprintf(e->host, sizeof e->host, "%s", host ? host : "");
        snprintf(e->command, sizeof e->command, "%s", command ? command : "");
        job_of(e->command, e->job, sizeof e->job);
        static const char *const kept[] = {"command", "host", "world_size", "version"};
        for (size_t k = 0; k < sizeof kept / sizeof kept[0] && rc == TW_OK; k++)
            rc = add_fact(v, kept[k], tw_prom_label_value(first, kept[k]));
    }
    tw_prom_result_free(&r);
    return rc;
}

static void summarise_loss(tw_history_entry *e, const tw_history_series *loss)
{
    e->best_loss = NAN;
    for (size_t i = 0; loss && i < loss->count; i++) {
        double x = loss->value[i];
        if (!isfinite(e->first_loss) && isfinite(x))
            e->first_loss = x;
        if (isfinite(x) && !(x >= e->best_loss)) {
            e->best_loss = x;
            e->best_loss_step = (int64_t)loss->pos[i];
        }
    }
    if (loss && loss->count && isnan(e->final_loss)) /* no last sample answered: the curve's */
        e->final_loss = loss->value[loss->count - 1];
    e->final_loss_nan = loss && loss->count && !isfinite(e->final_loss);
}

static double mean_of(const tw_history_series *s)
{
    double sum = 0;
    size_t n = 0;
    for (size_t i = 0; s && i < s->count; i++)
        if (isfinite(s->value[i]))
            sum += s->value[i], n++;
    return n ? sum / (double)n : NAN;
}

static double max_of(const tw_history_series *s)
{
    double m = NAN;
    for (size_t i = 0; s && i < s->count; i++)
        if (isfinite(s->value[i]) && !(s->value[i] <= m))
            m = s->value[i];
    return m;
}

/* The series a view keeps, each a query_range over the run's span. */
static const struct {
    const char *metric, *query; /* query: %s the matchers, %g the rate window */
} ranged[] = {
    {"loss", "avg(trainwatch_train_loss{%s})"},
    {"lr", "avg(trainwatch_learning_rate{%s})"},
    {"step_time", "max(rate(trainwatch_step_duration_seconds_sum{%1$s}[%2$.0fs]) / "
                  "rate(trainwatch_step_duration_seconds_count{%1$s}[%2$.0fs]))"},
    {"data_wait", "max(rate(trainwatch_data_wait_seconds_sum{%1$s}[%2$.0fs]) / "
                  "rate(trainwatch_data_wait_seconds_count{%1$s}[%2$.0fs]))"},
    {"throughput", "sum(trainwatch_samples_per_second{%s})"},
    {"memory", "max(sum by (rank) (trainwatch_gpu_process_memory_bytes{%s}))"},
    {"gpu_util", "avg(DCGM_FI_DEV_GPU_UTIL{%s})"},
};

static int series(asking *a, tw_history_view *v)
{
    tw_prom_result steps;
    int rc = range_of(a, "max(trainwatch_train_step{%s})", &steps);
    if (rc != TW_OK)
        return rc;
    const tw_prom_series *at = steps.count ? &steps.series[0] : NULL;
    for (size_t i = 0; i < sizeof ranged / sizeof ranged[0] && rc == TW_OK; i++) {
        tw_prom_result r;
        if ((rc = range_of(a, ranged[i].query, &r)) == TW_OK && r.count)
            rc = add_series(v, ranged[i].metric, &r.series[0], at);
        tw_prom_result_free(&r);
    }
    tw_prom_result evals;
    if (rc == TW_OK && (rc = range_of(a, "max by (name) (trainwatch_eval_metric{%s})", &evals)) == TW_OK) {
        for (size_t i = 0; i < evals.count && rc == TW_OK; i++) {
            char metric[80];
            const char *name = tw_prom_label_value(&evals.series[i], "name");
            snprintf(metric, sizeof metric, "eval:%s", name ? name : "?");
            rc = add_series(v, metric, &evals.series[i], at);
        }
        tw_prom_result_free(&evals);
    }
    tw_history_entry *e = &v->entry;
    for (size_t i = 0; at && i < at->count; i++) {
        int64_t s = (int64_t)at->v[i];
        if (e->first_step < 0 || s < e->first_step)
            e->first_step = s;
        if (s > e->last_step)
            e->last_step = s;
    }
    tw_prom_result_free(&steps);
    return rc;
}

/* Figures over the whole span from instant queries at its end. */
static int figures(asking *a, tw_history_entry *e)
{
    char window[32];
    snprintf(window, sizeof window, "%.0fs", e->ended - e->started + 120);
    double first_step = NAN, last_step = NAN, gpus = NAN;
    struct {
        const char *fmt;
        double *out;
    } asked[] = {
        {"histogram_quantile(0.5, sum by (le) (increase(trainwatch_step_duration_seconds_bucket{%s}[%s])))",
         &e->step_p50},
        {"histogram_quantile(0.95, sum by (le) (increase(trainwatch_step_duration_seconds_bucket{%s}[%s])))",
         &e->step_p95},
        {"sum(increase(trainwatch_data_wait_seconds_sum{%1$s}[%2$s])) / "
         "sum(increase(trainwatch_step_duration_seconds_sum{%1$s}[%2$s]))",
         &e->data_share},
        {"min(last_over_time(trainwatch_health_score{%s}[%s]))", &e->health},
        /* the ends from every sample, not the range query's grid */
        {"min(min_over_time(trainwatch_train_step{%s}[%s]))", &first_step},
        {"max(max_over_time(trainwatch_train_step{%s}[%s]))", &last_step},
        {"avg(last_over_time(trainwatch_train_loss{%s}[%s]))", &e->final_loss},
        /* what run's cost counters reached (docs/history.md#cost): counters, so their largest value */
        {"sum(max_over_time(trainwatch_gpu_seconds_total{%s}[%s]))", &e->gpu_seconds},
        {"sum(max_over_time(trainwatch_gpu_idle_seconds_total{%s}[%s]))", &e->idle_seconds},
        {"max(max_over_time(trainwatch_gpus_used{%s}[%s]))", &gpus},
        {"sum(max_over_time(trainwatch_cost_total{%s}[%s]))", &e->cost},
        {"sum(max_over_time(trainwatch_cost_idle_total{%s}[%s]))", &e->idle_cost},
        {"max(max_over_time(trainwatch_budget{%s}[%s]))", &e->budget},
    };
    double saved_until = a->until;
    a->until = a->end;
    int rc = TW_OK;
    for (size_t i = 0; i < sizeof asked / sizeof asked[0] && rc == TW_OK; i++) {
        char q[1200];
        snprintf(q, sizeof q, asked[i].fmt, a->matchers, window);
        tw_prom_result r;
        rc = tw_prom_query(&a->srv, q, a->until, &r, a->err, a->errlen);
        if (rc == TW_OK && r.count && r.series[0].count)
            *asked[i].out = r.series[0].v[r.series[0].count - 1];
        tw_prom_result_free(&r);
    }
    a->until = saved_until;
    if (isfinite(first_step))
        e->first_step = (int64_t)first_step;
    if (isfinite(last_step))
        e->last_step = (int64_t)last_step;
    if (gpus > 0 && isfinite(e->gpu_seconds)) {
        e->gpus = (int)gpus;
    } else { /* no GPU seen (the counters are there at 0 without NVML): unknown, as the file keeps it */
        e->gpu_seconds = e->idle_seconds = e->cost = e->idle_cost = NAN;
    }
    return rc;
}

static void entry_init(tw_history_entry *e)
{
    memset(e, 0, sizeof *e);
    e->ranks = e->launches = e->launch = e->healthy = -1;
    e->step_records = e->first_step = e->last_step = e->epoch_total = e->last_epoch = -1;
    e->best_loss_step = -1;
    e->findings = e->errors = e->warnings = -1;
    e->gpus = -1;
    double *nans[] = {&e->started,      &e->ended,      &e->health,     &e->duration,    &e->step_p50,
                      &e->step_p95,     &e->data_share, &e->throughput, &e->peak_memory, &e->first_loss,
                      &e->best_loss,    &e->final_loss, &e->final_lr,   &e->recorded,    &e->gpu_seconds,
                      &e->idle_seconds, &e->idle_below, &e->cost,       &e->idle_cost,   &e->budget};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++)
        *nans[i] = NAN;
    snprintf(e->source, sizeof e->source, "prometheus");
}

static double now_or(double until)
{
    if (isfinite(until))
        return until;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int tw_history_prometheus_view(const tw_history_prometheus *p, const char *selector, tw_history_view *out, char *err,
                               size_t errlen)
{
    memset(out, 0, sizeof *out);
    entry_init(&out->entry);
    asking a = {.p = p, .srv = server_of(p), .until = now_or(p->until), .err = err, .errlen = errlen};
    int rc = matchers_of(selector, a.matchers, sizeof a.matchers, err, errlen);
    double first = NAN, last = NAN;
    if (rc == TW_OK)
        rc = scalar_at(&a, "min(min_over_time(trainwatch_last_progress_timestamp_seconds{%s}[%.0fs]))", &first);
    if (rc == TW_OK)
        rc = scalar_at(&a, "max(max_over_time(trainwatch_last_progress_timestamp_seconds{%s}[%.0fs]))", &last);
    if (rc == TW_OK && !(isfinite(first) && isfinite(last))) {
        char origin[256];
        snprintf(err, errlen, "no run {%s} with training steps in the last %.0fs of %s", a.matchers, p->since,
                 tw_url_origin(p->url, origin, sizeof origin));
        rc = TW_ENOENT;
    }
    tw_history_entry *e = &out->entry;
    if (rc == TW_OK) {
        /* a little before the first step and past the last: the scrapes around them */
        a.start = first - 60;
        a.end = fmin(a.until, last + 60);
        a.step = fmax(1.0, ceil((a.end - a.start) / TW_HISTORY_SERIES_POINTS));
        e->started = e->recorded = first;
        e->ended = last;
        e->duration = last - first;
        /* still running when its step gauge has a value now: an ended run's
         * target is gone and its series are stale */
        double now_step = NAN;
        rc = scalar_at(&a, "max(trainwatch_train_step{%s})", &now_step);
        snprintf(e->outcome, sizeof e->outcome, "%s", isfinite(now_step) ? "running" : "ended");
        char origin[256];
        snprintf(e->inputs, sizeof e->inputs, "{%.300s} in %.200s", a.matchers,
                 tw_url_origin(p->url, origin, sizeof origin));
        if (rc == TW_OK)
            rc = identity(&a, out);
    }
    if (rc == TW_OK)
        rc = series(&a, out);
    if (rc == TW_OK)
        rc = figures(&a, e);
    if (rc == TW_OK) {
        if (!e->name[0])
            snprintf(e->name, sizeof e->name, "%.120s", a.matchers);
        summarise_loss(e, tw_history_view_series(out, "loss"));
        e->throughput = mean_of(tw_history_view_series(out, "throughput"));
        e->peak_memory = max_of(tw_history_view_series(out, "memory"));
        const tw_history_series *lr = tw_history_view_series(out, "lr");
        if (lr && lr->count)
            e->final_lr = lr->value[lr->count - 1];
    }
    if (rc == TW_ENOMEM)
        snprintf(err, errlen, "out of memory");
    if (rc != TW_OK)
        tw_history_view_free(out);
    return rc;
}

int tw_history_prometheus_list(const tw_history_prometheus *p, const char *selector, tw_history_entry **entries,
                               size_t *count, char *err, size_t errlen)
{
    *entries = NULL;
    *count = 0;
    char sel[512] = "run!=\"\""; /* every run */
    if (selector && matchers_of(selector, sel, sizeof sel, err, errlen) != TW_OK)
        return TW_EUSAGE;
    char q[800];
    snprintf(q, sizeof q, "max by (run) (max_over_time(trainwatch_last_progress_timestamp_seconds{%s}[%.0fs]))", sel,
             p->since);
    tw_prom_result r;
    tw_prom_server srv = server_of(p);
    int rc = tw_prom_query(&srv, q, now_or(p->until), &r, err, errlen);
    if (rc != TW_OK)
        return rc;
    /* newest first, as `runs` lists the SQLite history */
    tw_history_entry *list = calloc(r.count ? r.count : 1, sizeof *list);
    double *last = calloc(r.count ? r.count : 1, sizeof *last);
    if (!list || !last) {
        free(list), free(last);
        tw_prom_result_free(&r);
        snprintf(err, errlen, "out of memory");
        return TW_ENOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < r.count && rc == TW_OK; i++) {
        const char *run = tw_prom_label_value(&r.series[i], "run");
        if (!run)
            continue;
        char one[1100], quoted[520];
        size_t qn = 0;
        for (const char *c = run; *c && qn + 2 < sizeof quoted; c++) { /* a PromQL string: " and \ escaped */
            if (*c == '"' || *c == '\\')
                quoted[qn++] = '\\';
            quoted[qn++] = *c;
        }
        quoted[qn] = '\0';
        snprintf(one, sizeof one, "%s,run=\"%s\"", sel, quoted);
        tw_history_view v;
        rc = tw_history_prometheus_view(p, one, &v, err, errlen);
        if (rc == TW_ENOENT) { /* gone between the two queries */
            rc = TW_OK;
            continue;
        }
        if (rc == TW_OK) {
            size_t at = n;
            while (at > 0 && last[at - 1] < v.entry.ended) {
                list[at] = list[at - 1];
                last[at] = last[at - 1];
                at--;
            }
            list[at] = v.entry;
            last[at] = v.entry.ended;
            n++;
            tw_history_view_free(&v);
        }
    }
    tw_prom_result_free(&r);
    free(last);
    if (rc != TW_OK) {
        free(list);
        return rc;
    }
    *entries = list;
    *count = n;
    return TW_OK;
}
