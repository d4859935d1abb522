/*
 * query.c: reading the history back: the runs table as entries (`runs`,
 * the baselines), one run by id or name, and a run's whole view (its
 * series, facts and findings) for `runs show` and `compare`.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "history_internal.h"
#include "trainwatch/error.h"

#define ENTRY_COLUMNS                                                                                              \
    "id, recorded, source, name, job, host, command, inputs, started, ended, ranks, launches, launch, outcome,"     \
    " outcome_detail, healthy, health, step_records, first_step, last_step, epoch_total, last_epoch, duration,"    \
    " step_p50, step_p95, data_share, throughput, peak_memory, first_loss, best_loss, best_loss_step, final_loss," \
    " final_loss_nan, final_lr, environment,"                                                                      \
    " (SELECT count(*) FROM findings f WHERE f.run = runs.id),"                                                   \
    " (SELECT count(*) FROM findings f WHERE f.run = runs.id AND f.severity = 'error'),"                          \
    " (SELECT count(*) FROM findings f WHERE f.run = runs.id AND f.severity = 'warning'),"                        \
    " gpus, gpu_seconds, idle_seconds, idle_below, cost, idle_cost, price_source, budget"

static void column_text(sqlite3_stmt *st, int c, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(st, c);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

static int64_t column_count(sqlite3_stmt *st, int c)
{
    return sqlite3_column_type(st, c) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, c);
}

static void read_entry(sqlite3_stmt *st, tw_history_entry *e)
{
    int c = 0;
    *e = (tw_history_entry){.id = sqlite3_column_int64(st, c++)};
    e->recorded = tw_history_column_number(st, c++);
    column_text(st, c++, e->source, sizeof e->source);
    column_text(st, c++, e->name, sizeof e->name);
    column_text(st, c++, e->job, sizeof e->job);
    column_text(st, c++, e->host, sizeof e->host);
    column_text(st, c++, e->command, sizeof e->command);
    column_text(st, c++, e->inputs, sizeof e->inputs);
    e->started = tw_history_column_number(st, c++);
    e->ended = tw_history_column_number(st, c++);
    e->ranks = sqlite3_column_int(st, c++);
    e->launches = sqlite3_column_int(st, c++);
    e->launch = sqlite3_column_int(st, c++);
    column_text(st, c++, e->outcome, sizeof e->outcome);
    column_text(st, c++, e->outcome_detail, sizeof e->outcome_detail);
    e->healthy = sqlite3_column_int(st, c++);
    e->health = tw_history_column_number(st, c++);
    e->step_records = column_count(st, c++);
    e->first_step = column_count(st, c++);
    e->last_step = column_count(st, c++);
    e->epoch_total = column_count(st, c++);
    e->last_epoch = column_count(st, c++);
    e->duration = tw_history_column_number(st, c++);
    e->step_p50 = tw_history_column_number(st, c++);
    e->step_p95 = tw_history_column_number(st, c++);
    e->data_share = tw_history_column_number(st, c++);
    e->throughput = tw_history_column_number(st, c++);
    e->peak_memory = tw_history_column_number(st, c++);
    e->first_loss = tw_history_column_number(st, c++);
    e->best_loss = tw_history_column_number(st, c++);
    e->best_loss_step = column_count(st, c++);
    e->final_loss = tw_history_column_number(st, c++);
    e->final_loss_nan = sqlite3_column_int(st, c++);
    if (e->final_loss_nan)
        e->final_loss = NAN;
    e->final_lr = tw_history_column_number(st, c++);
    column_text(st, c++, e->environment, sizeof e->environment);
    e->findings = sqlite3_column_int(st, c++);
    e->errors = sqlite3_column_int(st, c++);
    e->warnings = sqlite3_column_int(st, c++);
    e->gpus = (int)column_count(st, c++);
    e->gpu_seconds = tw_history_column_number(st, c++);
    e->idle_seconds = tw_history_column_number(st, c++);
    e->idle_below = tw_history_column_number(st, c++);
    e->cost = tw_history_column_number(st, c++);
    e->idle_cost = tw_history_column_number(st, c++);
    column_text(st, c++, e->price_source, sizeof e->price_source);
    e->budget = tw_history_column_number(st, c++);
}

int tw_history_list(tw_history *h, const tw_history_filter *filter, tw_history_entry **entries, size_t *count,
                    char *err, size_t errlen)
{
    *entries = NULL;
    *count = 0;
    const char *sql = "SELECT " ENTRY_COLUMNS " FROM runs WHERE (?1 IS NULL OR job = ?1) AND (?2 <= 0 OR id < ?2)"
                      " ORDER BY id DESC LIMIT ?3";
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h->db, sql, -1, &st, NULL) != SQLITE_OK)
        return tw_history_fail(h, "listing the runs", err, errlen);
    if (filter && filter->job)
        sqlite3_bind_text(st, 1, filter->job, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, filter ? filter->before : 0);
    sqlite3_bind_int64(st, 3, filter && filter->limit > 0 ? filter->limit : -1);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*count == cap) {
            size_t n = cap ? cap * 2 : 16;
            tw_history_entry *grown = realloc(*entries, n * sizeof *grown);
            if (!grown) {
                sqlite3_finalize(st);
                free(*entries);
                *entries = NULL;
                *count = 0;
                snprintf(err, errlen, "out of memory");
                return TW_ENOMEM;
            }
            *entries = grown;
            cap = n;
        }
        read_entry(st, &(*entries)[(*count)++]);
    }
    int result = rc == SQLITE_DONE ? TW_OK : tw_history_fail(h, "listing the runs", err, errlen);
    sqlite3_finalize(st);
    return result;
}

/* id_or_name as a whole number, or -1. */
static int64_t as_id(const char *s)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    return *s && !*end && !errno && v > 0 ? v : -1;
}

int tw_history_find(tw_history *h, const char *id_or_name, tw_history_entry *out, char *err, size_t errlen)
{
    const char *sql = "SELECT " ENTRY_COLUMNS " FROM runs WHERE id = ?1 OR name = ?2 OR job = ?2"
                      " ORDER BY id = ?1 DESC, id DESC LIMIT 1";
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h->db, sql, -1, &st, NULL) != SQLITE_OK)
        return tw_history_fail(h, "finding the run", err, errlen);
    sqlite3_bind_int64(st, 1, as_id(id_or_name));
    sqlite3_bind_text(st, 2, id_or_name, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st), result = TW_OK;
    if (rc == SQLITE_ROW) {
        read_entry(st, out);
    } else if (rc == SQLITE_DONE) {
        snprintf(err, errlen, "no run %s in the history", id_or_name);
        result = TW_ENOENT;
    } else {
        result = tw_history_fail(h, "finding the run", err, errlen);
    }
    sqlite3_finalize(st);
    return result;
}

/* ---- a run's view ---------------------------------------------------- */

static double *blob_doubles(sqlite3_stmt *st, int c, size_t count)
{
    double *out = malloc((count ? count : 1) * sizeof *out);
    if (!out)
        return NULL;
    const void *b = sqlite3_column_blob(st, c);
    size_t bytes = (size_t)sqlite3_column_bytes(st, c);
    for (size_t i = 0; i < count; i++)
        out[i] = NAN;
    if (b)
        memcpy(out, b, bytes < count * sizeof *out ? bytes : count * sizeof *out);
    return out;
}

static int load_series(tw_history *h, int64_t id, tw_history_view *v)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h->db, "SELECT metric, count, pos, time, value FROM series WHERE run = ? ORDER BY rowid",
                           -1, &st, NULL) != SQLITE_OK)
        return TW_EIO;
    sqlite3_bind_int64(st, 1, id);
    int rc = TW_OK, step;
    while (rc == TW_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        tw_history_series *grown = realloc(v->series, (v->series_count + 1) * sizeof *grown);
        if (!grown) {
            rc = TW_ENOMEM;
            break;
        }
        v->series = grown;
        tw_history_series *s = &v->series[v->series_count++];
        *s = (tw_history_series){.count = 0};
        column_text(st, 0, s->metric, sizeof s->metric);
        int64_t n = sqlite3_column_int64(st, 1);
        s->count = n > 0 ? (size_t)n : 0;
        s->pos = blob_doubles(st, 2, s->count);
        s->time = blob_doubles(st, 3, s->count);
        s->value = blob_doubles(st, 4, s->count);
        if (!s->pos || !s->time || !s->value)
            rc = TW_ENOMEM;
    }
    sqlite3_finalize(st);
    return rc;
}

static int load_facts(tw_history *h, int64_t id, tw_history_view *v)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h->db, "SELECT key, value, rank FROM facts WHERE run = ? ORDER BY rowid", -1, &st, NULL) !=
        SQLITE_OK)
        return TW_EIO;
    sqlite3_bind_int64(st, 1, id);
    int rc = TW_OK;
    while (rc == TW_OK && sqlite3_step(st) == SQLITE_ROW) {
        tw_history_fact *grown = realloc(v->facts, (v->fact_count + 1) * sizeof *grown);
        if (!grown) {
            rc = TW_ENOMEM;
            break;
        }
        v->facts = grown;
        tw_history_fact *f = &v->facts[v->fact_count++];
        column_text(st, 0, f->key, sizeof f->key);
        column_text(st, 1, f->value, sizeof f->value);
        f->rank = sqlite3_column_int(st, 2);
    }
    sqlite3_finalize(st);
    return rc;
}

static int load_findings(tw_history *h, int64_t id, tw_history_view *v)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h->db, "SELECT rule, severity, title, step, rank, value FROM findings WHERE run = ?"
                                  " ORDER BY ord", -1, &st, NULL) != SQLITE_OK)
        return TW_EIO;
    sqlite3_bind_int64(st, 1, id);
    int rc = TW_OK;
    while (rc == TW_OK && sqlite3_step(st) == SQLITE_ROW) {
        tw_history_finding *grown = realloc(v->findings, (v->finding_count + 1) * sizeof *grown);
        if (!grown) {
            rc = TW_ENOMEM;
            break;
        }
        v->findings = grown;
        tw_history_finding *f = &v->findings[v->finding_count++];
        column_text(st, 0, f->rule, sizeof f->rule);
        column_text(st, 1, f->severity, sizeof f->severity);
        column_text(st, 2, f->title, sizeof f->title);
        f->step = column_count(st, 3);
        f->rank = sqlite3_column_int(st, 4);
        f->value = tw_history_column_number(st, 5);
    }
    sqlite3_finalize(st);
    return rc;
}

int tw_history_view_load(tw_history *h, int64_t id, tw_history_view *out, char *err, size_t errlen)
{
    *out = (tw_history_view){.series = NULL};
    char key[32];
    snprintf(key, sizeof key, "%lld", (long long)id);
    int rc = tw_history_find(h, key, &out->entry, err, errlen);
    if (rc != TW_OK)
        return rc;
    if ((rc = load_series(h, id, out)) != TW_OK || (rc = load_facts(h, id, out)) != TW_OK ||
        (rc = load_findings(h, id, out)) != TW_OK) {
        rc = rc == TW_ENOMEM ? TW_ENOMEM : tw_history_fail(h, "reading the run", err, errlen);
        if (rc == TW_ENOMEM)
            snprintf(err, errlen, "out of memory");
        tw_history_view_free(out);
    }
    return rc;
}

const tw_history_series *tw_history_view_series(const tw_history_view *v, const char *metric)
{
    for (size_t i = 0; i < v->series_count; i++) {
        if (strcmp(v->series[i].metric, metric) == 0)
            return &v->series[i];
    }
    return NULL;
}

void tw_history_view_free(tw_history_view *v)
{
    for (size_t i = 0; i < v->series_count; i++) {
        free(v->series[i].pos);
        free(v->series[i].time);
        free(v->series[i].value);
    }
    free(v->series);
    free(v->facts);
    free(v->findings);
    *v = (tw_history_view){.series = NULL};
}
