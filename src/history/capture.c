/*
 * capture.c: a diagnosed run as the history keeps it. tw_history_view_of
 * takes the figures of the launch the report shows (its summary, findings,
 * stated environment) and the run's downsampled series (run.h: at most
 * TW_SERIES_MAX points per rank, here cut to TW_HISTORY_SERIES_POINTS);
 * tw_history_record writes that view as rows in one transaction.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../diagnose/gpu.h"
#include "../diagnose/run.h"
#include "history_internal.h"
#include "trainwatch/error.h"

static void copy_text(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}
#define COPY(dst, src) copy_text((dst), sizeof(dst), (src))

/* ---- the figures ---------------------------------------------------- */

static const tw_launch_report *launch_shown(const tw_report *r)
{
    if (!r->launch_count)
        return NULL;
    int i = r->launch >= 1 && r->launch <= r->launch_count ? r->launch - 1 : r->launch_count - 1;
    return &r->launches[i];
}

static void fill_entry(tw_history_entry *e, const tw_history_identity *who, const tw_report *r)
{
    const tw_summary *s = &r->summary;
    const tw_launch_report *l = launch_shown(r);
    *e = (tw_history_entry){.id = -1, .recorded = (double)time(NULL)};
    COPY(e->source, who->source);
    COPY(e->name, who->name);
    COPY(e->job, who->job);
    COPY(e->command, who->command);
    COPY(e->inputs, who->inputs);
    char host[128] = "";
    gethostname(host, sizeof host - 1);
    COPY(e->host, host);
    e->started = isfinite(who->started) ? who->started : l ? l->span.first_time : NAN;
    e->ended = isfinite(who->ended) ? who->ended : l ? l->span.last_time : NAN;
    e->ranks = s->ranks;
    e->launches = r->launch_count;
    e->launch = l ? l->span.index : 0;
    const char *outcome = l ? l->span.outcome : "";
    if (who->outcome && (!outcome || !*outcome || strcmp(outcome, "ended") == 0))
        outcome = who->outcome; /* the log stops; the supervisor saw how */
    COPY(e->outcome, outcome);
    COPY(e->outcome_detail, l ? l->span.outcome_detail : "");
    e->healthy = r->healthy;
    e->health = r->health.score;
    e->step_records = (int64_t)s->step_records;
    e->first_step = s->first_step;
    e->last_step = s->last_step;
    e->epoch_total = s->epoch_total;
    e->last_epoch = s->last_epoch;
    e->duration = s->duration;
    e->step_p50 = s->step_time_p50;
    e->step_p95 = s->step_time_p95;
    e->data_share = s->data_share;
    e->throughput = s->samples_per_sec;
    e->peak_memory = s->peak_mem_bytes;
    e->first_loss = s->first_loss;
    e->best_loss = s->best_loss;
    e->best_loss_step = s->best_loss_step;
    e->final_loss = s->final_loss_known ? s->final_loss : NAN;
    e->final_loss_nan = s->final_loss_known && !isfinite(s->final_loss);
    e->final_lr = s->final_lr;
    e->findings = r->finding_count;
    for (int i = 0; i < r->finding_count; i++) {
        e->errors += r->findings[i].severity == TW_SEV_ERROR;
        e->warnings += r->findings[i].severity == TW_SEV_WARNING;
    }
    COPY(e->environment, s->environment);
    const tw_gpu_cost *g = &s->gpu_cost;
    bool counted = g->gpu_seconds > 0;
    e->gpus = counted ? g->gpus : -1;
    e->gpu_seconds = counted ? g->gpu_seconds : NAN;
    e->idle_seconds = counted ? g->idle_seconds : NAN;
    e->idle_below = counted ? g->idle_below : NAN;
    e->cost = counted && g->priced ? g->cost : NAN;
    e->idle_cost = counted && g->priced ? g->idle_cost : NAN;
    e->budget = g->budget > 0 ? g->budget : NAN;
    COPY(e->price_source, counted ? g->price_source : "");
}

/* ---- the series ----------------------------------------------------- */

static int point_add(tw_history_series *s, size_t *cap, double pos, double t, double v)
{
    if (s->count == *cap) {
        size_t n = *cap ? *cap * 2 : 64;
        double *p = realloc(s->pos, n * sizeof *p), *tm, *val;
        if (!p)
            return TW_ENOMEM;
        s->pos = p;
        if (!(tm = realloc(s->time, n * sizeof *tm)))
            return TW_ENOMEM;
        s->time = tm;
        if (!(val = realloc(s->value, n * sizeof *val)))
            return TW_ENOMEM;
        s->value = val;
        *cap = n;
    }
    s->pos[s->count] = pos;
    s->time[s->count] = t;
    s->value[s->count] = v;
    s->count++;
    return TW_OK;
}

/* Keeps TW_HISTORY_SERIES_POINTS of s, evenly spread, the first and the
 * last among them. */
static void thin(tw_history_series *s)
{
    size_t n = s->count, keep = TW_HISTORY_SERIES_POINTS;
    if (n <= keep)
        return;
    for (size_t k = 0; k < keep; k++) {
        size_t from = (size_t)((double)k * (double)(n - 1) / (double)(keep - 1) + 0.5);
        s->pos[k] = s->pos[from];
        s->time[k] = s->time[from];
        s->value[k] = s->value[from];
    }
    s->count = keep;
}

static tw_history_series *series_new(tw_history_view *v, const char *metric)
{
    tw_history_series *grown = realloc(v->series, (v->series_count + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    v->series = grown;
    tw_history_series *s = &v->series[v->series_count++];
    *s = (tw_history_series){.count = 0};
    COPY(s->metric, metric);
    return s;
}

static const struct {
    const char *metric;
    unsigned field;
} step_fields[] = {
    {"loss", TW_F_LOSS},           {"lr", TW_F_LR},
    {"step_time", TW_F_BATCH_TIME}, {"data_wait", TW_F_DATA_TIME},
    {"throughput", TW_F_SAMPLES_PER_SEC}, {"memory", TW_F_MEM},
};

static double field_value(const tw_point *p, unsigned field)
{
    switch (field) {
    case TW_F_LOSS: return p->loss;
    case TW_F_LR: return p->lr;
    case TW_F_BATCH_TIME: return p->batch;
    case TW_F_DATA_TIME: return p->data;
    case TW_F_SAMPLES_PER_SEC: return p->ips;
    default: return p->mem;
    }
}

/* The rank whose series stands for the launch: the lowest with steps. */
static const tw_rank *first_rank(const tw_run *l)
{
    for (int r = 0; r < l->rank_count; r++) {
        if (l->ranks[r]->used && l->ranks[r]->series.count)
            return l->ranks[r];
    }
    return NULL;
}

static int capture_series(tw_history_view *v, const tw_run *l)
{
    const tw_rank *rk = first_rank(l);
    for (size_t f = 0; rk && f < sizeof step_fields / sizeof step_fields[0]; f++) {
        tw_history_series *s = NULL;
        size_t cap = 0;
        for (size_t k = 0; k < rk->series.count; k++) {
            const tw_point *p = &rk->series.points[k];
            if (!(p->fields & step_fields[f].field))
                continue;
            if (!s && !(s = series_new(v, step_fields[f].metric)))
                return TW_ENOMEM;
            if (point_add(s, &cap, p->pos, p->time, field_value(p, step_fields[f].field)) != TW_OK)
                return TW_ENOMEM;
        }
        if (s)
            thin(s);
    }
    for (int m = 0; m < l->eval_metrics.count; m++) {
        char metric[80];
        snprintf(metric, sizeof metric, "eval:%s", l->eval_metrics.items[m].s.name);
        tw_history_series *s = NULL;
        size_t cap = 0;
        for (size_t k = 0; k < l->eval_series.count; k++) {
            const tw_eval_point *p = &l->eval_series.points[k];
            if (p->metric != m)
                continue;
            if (!s && !(s = series_new(v, metric)))
                return TW_ENOMEM;
            if (point_add(s, &cap, p->pos, p->time, p->value) != TW_OK)
                return TW_ENOMEM;
        }
        if (s)
            thin(s);
    }
    return TW_OK;
}

static int capture_facts(tw_history_view *v, const tw_run *l)
{
    if (!l->fact_count)
        return TW_OK;
    v->facts = calloc((size_t)l->fact_count, sizeof *v->facts);
    if (!v->facts)
        return TW_ENOMEM;
    for (int i = 0; i < l->fact_count; i++) {
        COPY(v->facts[i].key, l->facts[i].key);
        COPY(v->facts[i].value, l->facts[i].value);
        v->facts[i].rank = l->facts[i].rank;
    }
    v->fact_count = (size_t)l->fact_count;
    return TW_OK;
}

static int capture_findings(tw_history_view *v, const tw_report *r)
{
    if (!r->finding_count)
        return TW_OK;
    v->findings = calloc((size_t)r->finding_count, sizeof *v->findings);
    if (!v->findings)
        return TW_ENOMEM;
    for (int i = 0; i < r->finding_count; i++) {
        const tw_finding *f = &r->findings[i];
        tw_history_finding *h = &v->findings[i];
        COPY(h->rule, f->rule);
        COPY(h->severity, tw_severity_name(f->severity));
        COPY(h->title, f->title);
        h->step = f->step;
        h->rank = f->rank;
        h->value = f->value;
    }
    v->finding_count = (size_t)r->finding_count;
    return TW_OK;
}

/* ---- GPU utilisation ------------------------------------------------ */

typedef struct gpu_points {
    tw_history_gpu_point *items;
    size_t count, cap;
    bool failed;
} gpu_points;

static void gpu_point_take(void *arg, double time, double util)
{
    gpu_points *g = arg;
    if (g->count == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 256;
        tw_history_gpu_point *grown = realloc(g->items, cap * sizeof *grown);
        if (!grown) {
            g->failed = true;
            return;
        }
        g->items = grown;
        g->cap = cap;
    }
    g->items[g->count++] = (tw_history_gpu_point){time, util};
}

static int by_time(const void *a, const void *b)
{
    const tw_history_gpu_point *x = a, *y = b;
    return x->time < y->time ? -1 : x->time > y->time;
}

/* The step rk was at at time t, linear between its timed points; NAN
 * outside them. t only grows from call to call: *at is where the last
 * call left off (0 to start). */
static double step_at(const tw_rank *rk, double t, size_t *at)
{
    const tw_point *p = rk->series.points;
    size_t n = rk->series.count, prev = SIZE_MAX;
    for (size_t i = *at; i < n; i++) {
        if (!isfinite(p[i].time))
            continue;
        if (p[i].time >= t) {
            *at = prev == SIZE_MAX ? i : prev;
            if (p[i].time == t)
                return p[i].pos;
            return prev == SIZE_MAX
                       ? NAN /* before the first timed step */
                       : p[prev].pos + (p[i].pos - p[prev].pos) * (t - p[prev].time) / (p[i].time - p[prev].time);
        }
        prev = i;
    }
    if (prev != SIZE_MAX)
        *at = prev;
    return NAN; /* after the last timed step */
}

/* "gpu_util": the mean over the GPUs sampled at each time, at the step the
 * run was at then (samples outside its timed steps are left out). */
static int capture_gpu_util(tw_history_view *v, const tw_history_identity *who, const tw_run *run,
                            const tw_run *launch)
{
    const tw_rank *rk = first_rank(launch);
    if (!rk)
        return TW_OK;
    gpu_points g = {NULL, 0, 0, false};
    for (size_t i = 0; who->gpu && i < who->gpu_count; i++)
        if (isfinite(who->gpu[i].util))
            gpu_point_take(&g, who->gpu[i].time, who->gpu[i].util);
    if (!who->gpu && tw_gpu_each_util(run, launch, gpu_point_take, &g) != TW_OK)
        g.failed = true;
    int rc = g.failed ? TW_ENOMEM : TW_OK;
    if (rc == TW_OK && g.count)
        qsort(g.items, g.count, sizeof *g.items, by_time);
    tw_history_series *s = NULL;
    size_t cap = 0, at = 0;
    for (size_t i = 0; rc == TW_OK && i < g.count;) {
        size_t k = i;
        double sum = 0;
        for (; k < g.count && g.items[k].time == g.items[i].time; k++)
            sum += g.items[k].util;
        double step = step_at(rk, g.items[i].time, &at);
        if (isfinite(step)) {
            if (!s && !(s = series_new(v, "gpu_util")))
                rc = TW_ENOMEM;
            else
                rc = point_add(s, &cap, step, g.items[i].time, sum / (double)(k - i));
        }
        i = k;
    }
    if (s)
        thin(s);
    free(g.items);
    return rc;
}

int tw_history_view_of(const tw_history_identity *who, const tw_report *report, const tw_run *run,
                       tw_history_view *out)
{
    *out = (tw_history_view){.series = NULL};
    fill_entry(&out->entry, who, report);
    const tw_launch_report *l = launch_shown(report);
    const tw_run *launch = tw_run_launch(run, l ? l->span.index - 1 : 0);
    if (!launch)
        launch = run;
    if (capture_series(out, launch) != TW_OK || capture_gpu_util(out, who, run, launch) != TW_OK ||
        capture_facts(out, launch) != TW_OK ||
        capture_findings(out, report) != TW_OK) {
        tw_history_view_free(out);
        return TW_ENOMEM;
    }
    return TW_OK;
}

/* ---- the rows ------------------------------------------------------- */

static int bind_text(sqlite3_stmt *st, int i, const char *s)
{
    return s && *s ? sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
}

static int bind_count(sqlite3_stmt *st, int i, int64_t v)
{
    return v < 0 ? sqlite3_bind_null(st, i) : sqlite3_bind_int64(st, i, v);
}

static int insert_run(tw_history *h, const tw_history_entry *e, int64_t *id)
{
    const char *sql = "INSERT INTO runs (recorded, source, name, job, host, command, inputs, started, ended, ranks,"
                      " launches, launch, outcome, outcome_detail, healthy, health, step_records, first_step,"
                      " last_step, epoch_total, last_epoch, duration, step_p50, step_p95, data_share, throughput,"
                      " peak_memory, first_loss, best_loss, best_loss_step, final_loss, final_loss_nan, final_lr,"
                      " environment, gpus, gpu_seconds, idle_seconds, idle_below, cost, idle_cost, price_source,"
                      " budget) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                      "?,?,?,?,?,?,?,?)";
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h->db, sql, -1, &st, NULL) != SQLITE_OK)
        return TW_EIO;
    int i = 1;
    sqlite3_bind_double(st, i++, e->recorded);
    bind_text(st, i++, e->source);
    bind_text(st, i++, e->name);
    bind_text(st, i++, e->job);
    bind_text(st, i++, e->host);
    bind_text(st, i++, e->command);
    bind_text(st, i++, e->inputs);
    tw_history_bind_number(st, i++, e->started);
    tw_history_bind_number(st, i++, e->ended);
    sqlite3_bind_int(st, i++, e->ranks);
    sqlite3_bind_int(st, i++, e->launches);
    sqlite3_bind_int(st, i++, e->launch);
    bind_text(st, i++, e->outcome);
    bind_text(st, i++, e->outcome_detail);
    sqlite3_bind_int(st, i++, e->healthy);
    tw_history_bind_number(st, i++, e->health);
    bind_count(st, i++, e->step_records);
    bind_count(st, i++, e->first_step);
    bind_count(st, i++, e->last_step);
    bind_count(st, i++, e->epoch_total);
    bind_count(st, i++, e->last_epoch);
    tw_history_bind_number(st, i++, e->duration);
    tw_history_bind_number(st, i++, e->step_p50);
    tw_history_bind_number(st, i++, e->step_p95);
    tw_history_bind_number(st, i++, e->data_share);
    tw_history_bind_number(st, i++, e->throughput);
    tw_history_bind_number(st, i++, e->peak_memory);
    tw_history_bind_number(st, i++, e->first_loss);
    tw_history_bind_number(st, i++, e->best_loss);
    bind_count(st, i++, e->best_loss_step);
    tw_history_bind_number(st, i++, e->final_loss);
    sqlite3_bind_int(st, i++, e->final_loss_nan);
    tw_history_bind_number(st, i++, e->final_lr);
    bind_text(st, i++, e->environment);
    bind_count(st, i++, e->gpus);
    tw_history_bind_number(st, i++, e->gpu_seconds);
    tw_history_bind_number(st, i++, e->idle_seconds);
    tw_history_bind_number(st, i++, e->idle_below);
    tw_history_bind_number(st, i++, e->cost);
    tw_history_bind_number(st, i++, e->idle_cost);
    bind_text(st, i++, e->price_source);
    tw_history_bind_number(st, i++, e->budget);
    int rc = sqlite3_step(st) == SQLITE_DONE ? TW_OK : TW_EIO;
    sqlite3_finalize(st);
    *id = sqlite3_last_insert_rowid(h->db);
    return rc;
}

static int insert_findings(tw_history *h, int64_t id, const tw_history_view *v)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h->db, "INSERT INTO findings VALUES (?,?,?,?,?,NULL,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return TW_EIO;
    int rc = TW_OK;
    for (size_t i = 0; i < v->finding_count && rc == TW_OK; i++) {
        const tw_history_finding *f = &v->findings[i];
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, (int64_t)i);
        bind_text(st, 3, f->rule);
        bind_text(st, 4, f->severity);
        bind_text(st, 5, f->title);
        bind_count(st, 6, f->step);
        sqlite3_bind_int(st, 7, f->rank);
        tw_history_bind_number(st, 8, f->value);
        rc = sqlite3_step(st) == SQLITE_DONE ? TW_OK : TW_EIO;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return rc;
}

static int insert_facts(tw_history *h, int64_t id, const tw_history_view *v)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h->db, "INSERT INTO facts VALUES (?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return TW_EIO;
    int rc = TW_OK;
    for (size_t i = 0; i < v->fact_count && rc == TW_OK; i++) {
        sqlite3_bind_int64(st, 1, id);
        bind_text(st, 2, v->facts[i].key);
        bind_text(st, 3, v->facts[i].value);
        sqlite3_bind_int(st, 4, v->facts[i].rank);
        rc = sqlite3_step(st) == SQLITE_DONE ? TW_OK : TW_EIO;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return rc;
}

/* Each series as three blobs of doubles in this machine's byte order
 * (docs/history.md). */
static int insert_series(tw_history *h, int64_t id, const tw_history_view *v)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h->db, "INSERT INTO series VALUES (?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return TW_EIO;
    int rc = TW_OK;
    for (size_t i = 0; i < v->series_count && rc == TW_OK; i++) {
        const tw_history_series *s = &v->series[i];
        int bytes = (int)(s->count * sizeof(double));
        sqlite3_bind_int64(st, 1, id);
        bind_text(st, 2, s->metric);
        sqlite3_bind_int64(st, 3, (int64_t)s->count);
        sqlite3_bind_blob(st, 4, s->pos, bytes, SQLITE_STATIC);
        sqlite3_bind_blob(st, 5, s->time, bytes, SQLITE_STATIC);
        sqlite3_bind_blob(st, 6, s->value, bytes, SQLITE_STATIC);
        rc = sqlite3_step(st) == SQLITE_DONE ? TW_OK : TW_EIO;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return rc;
}

static int insert_metrics(tw_history *h, int64_t id, const tw_summary *s)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h->db, "INSERT INTO metrics VALUES (?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return TW_EIO;
    int rc = TW_OK;
    for (int kind = 0; kind < 2 && rc == TW_OK; kind++) {
        const tw_metric_summary *m = kind ? s->eval_metrics : s->train_metrics;
        int n = kind ? s->eval_metric_count : s->train_metric_count;
        for (int i = 0; i < n && rc == TW_OK; i++) {
            sqlite3_bind_int64(st, 1, id);
            bind_text(st, 2, kind ? "eval" : "train");
            bind_text(st, 3, m[i].name);
            tw_history_bind_number(st, 4, m[i].last);
            tw_history_bind_number(st, 5, m[i].best);
            bind_count(st, 6, m[i].best_step);
            sqlite3_bind_int64(st, 7, (int64_t)m[i].count);
            rc = sqlite3_step(st) == SQLITE_DONE ? TW_OK : TW_EIO;
            sqlite3_reset(st);
        }
    }
    sqlite3_finalize(st);
    return rc;
}

int tw_history_record(tw_history *h, const tw_history_identity *who, const tw_report *report, const tw_run *run,
                      int64_t *id, char *err, size_t errlen)
{
    tw_history_view v;
    if (tw_history_view_of(who, report, run, &v) != TW_OK) {
        snprintf(err, errlen, "out of memory");
        return TW_ENOMEM;
    }
    int rc = tw_history_begin(h, err, errlen);
    if (rc == TW_OK) {
        if (insert_run(h, &v.entry, id) != TW_OK || insert_findings(h, *id, &v) != TW_OK ||
            insert_facts(h, *id, &v) != TW_OK || insert_series(h, *id, &v) != TW_OK ||
            insert_metrics(h, *id, &report->summary) != TW_OK) {
            rc = tw_history_fail(h, "recording the run", err, errlen);
            tw_history_rollback(h);
        } else {
            rc = tw_history_commit(h, err, errlen);
        }
    }
    tw_history_view_free(&v);
    return rc;
}
