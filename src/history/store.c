/*
 * store.c: the history file itself: where it lives, opening it (WAL, a
 * busy timeout so the runs of one node can write at once), the schema and
 * its migrations, pruning. capture.c writes runs into it and query.c reads
 * them; both go through the helpers here for transactions and errors.
 *
 * The schema's version is SQLite's user_version. Each entry of migrations[]
 * takes a file one version up, inside the transaction that checks the
 * version, so two processes opening an old file at once migrate it once.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "history_internal.h"
#include "trainwatch/error.h"

#define BUSY_TIMEOUT_MS 5000

// clang-format off
static const char *const migrations[TW_HISTORY_SCHEMA] = {
    /* 1: the runs and their findings */
    "CREATE TABLE runs ("
    " id INTEGER PRIMARY KEY, recorded REAL NOT NULL, source TEXT NOT NULL, name TEXT, job TEXT, host TEXT,"
    " command TEXT, inputs TEXT, started REAL, ended REAL, ranks INTEGER, launches INTEGER, launch INTEGER,"
    " outcome TEXT, outcome_detail TEXT, healthy INTEGER, health REAL, step_records INTEGER, first_step INTEGER,"
    " last_step INTEGER, epoch_total INTEGER, last_epoch INTEGER, duration REAL, step_p50 REAL, step_p95 REAL,"
    " data_share REAL, throughput REAL, peak_memory REAL, first_loss REAL, best_loss REAL, best_loss_step INTEGER,"
    " final_loss REAL, final_loss_nan INTEGER, final_lr REAL, environment TEXT);"
    "CREATE INDEX runs_job ON runs(job, id);"
    "CREATE INDEX runs_recorded ON runs(recorded);"
    "CREATE TABLE findings ("
    " run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, ord INTEGER NOT NULL, rule TEXT NOT NULL,"
    " severity TEXT NOT NULL, title TEXT, evidence TEXT, step INTEGER, rank INTEGER, value REAL);"
    "CREATE INDEX findings_run ON findings(run);",
    /* 2: what compare reads: the stated environment, the series, the named metrics */
    "CREATE TABLE facts ("
    " run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, key TEXT NOT NULL, value TEXT, rank INTEGER);"
    "CREATE INDEX facts_run ON facts(run);"
    "CREATE TABLE series ("
    " run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, metric TEXT NOT NULL, count INTEGER NOT NULL,"
    " pos BLOB, time BLOB, value BLOB);"
    "CREATE INDEX series_run ON series(run);"
    "CREATE TABLE metrics ("
    " run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, kind TEXT NOT NULL, name TEXT NOT NULL,"
    " last REAL, best REAL, best_step INTEGER, count INTEGER);"
    "CREATE INDEX metrics_run ON metrics(run);",
    /* 3: the GPU time and money of a run (cost.c's counts; analyze: GPU logs) */
    "ALTER TABLE runs ADD COLUMN gpus INTEGER;"
    "ALTER TABLE runs ADD COLUMN gpu_seconds REAL;"
    "ALTER TABLE runs ADD COLUMN idle_seconds REAL;"
    "ALTER TABLE runs ADD COLUMN idle_below REAL;"
    "ALTER TABLE runs ADD COLUMN cost REAL;"
    "ALTER TABLE runs ADD COLUMN idle_cost REAL;"
    "ALTER TABLE runs ADD COLUMN price_source TEXT;"
    "ALTER TABLE runs ADD COLUMN budget REAL;",
};
// clang-format on

int tw_history_default_path(char *buf, size_t cap)
{
    const char *data = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    int n;
    if (data && data[0] == '/')
        n = snprintf(buf, cap, "%s/trainwatch/runs.db", data);
    else if (home && *home)
        n = snprintf(buf, cap, "%s/.local/share/trainwatch/runs.db", home);
    else
        return TW_EINVAL;
    return n < 0 || (size_t)n >= cap ? TW_EINVAL : TW_OK;
}

int tw_history_fail(tw_history *h, const char *what, char *err, size_t errlen)
{
    int code = h && h->db ? sqlite3_errcode(h->db) : SQLITE_ERROR;
    snprintf(err, errlen, "%s: %s", what, h && h->db ? sqlite3_errmsg(h->db) : "no database");
    return code == SQLITE_NOTADB || code == SQLITE_CORRUPT ? TW_EFORMAT : TW_EIO;
}

int tw_history_begin(tw_history *h, char *err, size_t errlen)
{
    if (sqlite3_exec(h->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return tw_history_fail(h, "starting a write", err, errlen);
    return TW_OK;
}

int tw_history_commit(tw_history *h, char *err, size_t errlen)
{
    if (sqlite3_exec(h->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        int rc = tw_history_fail(h, "committing", err, errlen);
        tw_history_rollback(h);
        return rc;
    }
    return TW_OK;
}

void tw_history_rollback(tw_history *h)
{
    if (!sqlite3_get_autocommit(h->db))
        sqlite3_exec(h->db, "ROLLBACK", NULL, NULL, NULL);
}

int tw_history_bind_number(sqlite3_stmt *st, int index, double v)
{
    return isfinite(v) ? sqlite3_bind_double(st, index, v) : sqlite3_bind_null(st, index);
}

double tw_history_column_number(sqlite3_stmt *st, int column)
{
    return sqlite3_column_type(st, column) == SQLITE_NULL ? NAN : sqlite3_column_double(st, column);
}

/* mkdir -p of the folder holding path. */
static int make_parents(const char *path, char *err, size_t errlen)
{
    char dir[4096];
    size_t len = strlen(path);
    if (len >= sizeof dir) {
        snprintf(err, errlen, "the path is too long");
        return TW_EINVAL;
    }
    memcpy(dir, path, len + 1);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "making %s: %s", dir, strerror(errno));
            return TW_EIO;
        }
        *p = '/';
    }
    return TW_OK;
}

static int read_schema(tw_history *h, int *version, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
        return tw_history_fail(h, "reading the schema version", err, errlen);
    int rc = sqlite3_step(st);
    *version = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? TW_OK : tw_history_fail(h, "reading the schema version", err, errlen);
}

/* Brings the file to schema `target` (an empty file: created at it). */
static int migrate(tw_history *h, int target, char *err, size_t errlen)
{
    int rc = tw_history_begin(h, err, errlen);
    if (rc != TW_OK)
        return rc;
    int version;
    if ((rc = read_schema(h, &version, err, errlen)) != TW_OK)
        goto fail;
    if (version > TW_HISTORY_SCHEMA) {
        snprintf(err, errlen, "written by a newer trainwatch (schema %d; this one reads up to %d)", version,
                 TW_HISTORY_SCHEMA);
        rc = TW_EFORMAT;
        goto fail;
    }
    for (int v = version; v < target; v++) {
        char what[64];
        snprintf(what, sizeof what, "migrating the schema to version %d", v + 1);
        if (sqlite3_exec(h->db, migrations[v], NULL, NULL, NULL) != SQLITE_OK) {
            rc = tw_history_fail(h, what, err, errlen);
            goto fail;
        }
    }
    if (target > version) {
        char set[40];
        snprintf(set, sizeof set, "PRAGMA user_version = %d", target);
        if (sqlite3_exec(h->db, set, NULL, NULL, NULL) != SQLITE_OK) {
            rc = tw_history_fail(h, "setting the schema version", err, errlen);
            goto fail;
        }
    }
    h->schema = version > target ? version : target;
    return tw_history_commit(h, err, errlen);
fail:
    tw_history_rollback(h);
    return rc;
}

/* Switching a new database to WAL takes its lock, and SQLite answers
 * SQLITE_BUSY at once, without the busy handler, when another process is
 * switching it at the same moment (sixteen analyses recording into one new
 * history): tried again every WAL_RETRY_MS for BUSY_TIMEOUT_MS. */
#define WAL_RETRY_MS 20
static int journal_wal(tw_history *h)
{
    int rc = SQLITE_BUSY;
    for (int waited = 0; waited <= BUSY_TIMEOUT_MS; waited += WAL_RETRY_MS) {
        sqlite3_stmt *st;
        rc = sqlite3_prepare_v2(h->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
        if (rc == SQLITE_OK) {
            rc = sqlite3_step(st);
            sqlite3_finalize(st);
        }
        if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED)
            return rc;
        sqlite3_sleep(WAL_RETRY_MS);
    }
    return rc;
}

/* WAL, so readers never wait for the writer and writers wait for each
 * other only for the length of one transaction. */
static int configure(tw_history *h, char *err, size_t errlen)
{
    sqlite3_busy_timeout(h->db, BUSY_TIMEOUT_MS);
    if (journal_wal(h) != SQLITE_ROW)
        return tw_history_fail(h, "opening", err, errlen);
    if (sqlite3_exec(h->db, "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL", NULL, NULL, NULL) != SQLITE_OK)
        return tw_history_fail(h, "opening", err, errlen);
    return TW_OK;
}

int tw_history_open_schema(const char *path, int schema, tw_history **out, char *err, size_t errlen)
{
    *out = NULL;
    if (schema < 1 || schema > TW_HISTORY_SCHEMA) {
        snprintf(err, errlen, "no schema %d", schema);
        return TW_EINVAL;
    }
    int rc = make_parents(path, err, errlen);
    if (rc != TW_OK)
        return rc;
    tw_history *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return TW_ENOMEM;
    }
    snprintf(h->path, sizeof h->path, "%s", path);
    if (sqlite3_open_v2(path, &h->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        rc = tw_history_fail(h, "opening", err, errlen);
        tw_history_close(h);
        return rc;
    }
    if ((rc = configure(h, err, errlen)) != TW_OK || (rc = migrate(h, schema, err, errlen)) != TW_OK) {
        tw_history_close(h);
        return rc;
    }
    *out = h;
    return TW_OK;
}

int tw_history_open(const char *path, tw_history **out, char *err, size_t errlen)
{
    return tw_history_open_schema(path, TW_HISTORY_SCHEMA, out, err, errlen);
}

void tw_history_close(tw_history *h)
{
    if (!h)
        return;
    sqlite3_close(h->db);
    free(h);
}

int tw_history_schema(const tw_history *h)
{
    return h->schema;
}

int tw_history_prune(tw_history *h, long keep, double older_than, int64_t *removed, char *err, size_t errlen)
{
    *removed = 0;
    int rc = tw_history_begin(h, err, errlen);
    if (rc != TW_OK)
        return rc;
    sqlite3_stmt *st;
    const char *sql = "DELETE FROM runs WHERE (?1 >= 0 AND id NOT IN (SELECT id FROM runs ORDER BY id DESC LIMIT ?1))"
                      " OR (?2 > 0 AND recorded < ?3)";
    if (sqlite3_prepare_v2(h->db, sql, -1, &st, NULL) != SQLITE_OK) {
        rc = tw_history_fail(h, "pruning", err, errlen);
        tw_history_rollback(h);
        return rc;
    }
    sqlite3_bind_int64(st, 1, keep);
    sqlite3_bind_double(st, 2, older_than);
    sqlite3_bind_double(st, 3, (double)time(NULL) - older_than);
    if (sqlite3_step(st) != SQLITE_DONE) {
        rc = tw_history_fail(h, "pruning", err, errlen);
        sqlite3_finalize(st);
        tw_history_rollback(h);
        return rc;
    }
    *removed = sqlite3_changes(h->db);
    sqlite3_finalize(st);
    return tw_history_commit(h, err, errlen);
}
