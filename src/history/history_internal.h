/*
 * history_internal.h: what the files of src/history/ share: the open
 * database and the way they report SQLite's errors. store.c opens and
 * migrates, capture.c turns a report into rows, query.c reads them back,
 * series_math.c has the statistics compare.c and baseline.c share.
 */
#ifndef TW_HISTORY_INTERNAL_H
#define TW_HISTORY_INTERNAL_H

#include <sqlite3.h>
#include <stdbool.h>

#include "trainwatch/history.h"

struct tw_history {
    sqlite3 *db;
    int schema;
    char path[4096];
};

/* err = "what: SQLite's message for the database's last error". Returns
 * the tw error code for it (TW_EIO; TW_EFORMAT for a file that is no
 * database). */
int tw_history_fail(tw_history *h, const char *what, char *err, size_t errlen);

/* BEGIN IMMEDIATE ... COMMIT around writes; on failure ROLLBACK. */
int tw_history_begin(tw_history *h, char *err, size_t errlen);
int tw_history_commit(tw_history *h, char *err, size_t errlen);
void tw_history_rollback(tw_history *h);

/* Binds a double, NULL when it is not finite (SQLite has no NaN). */
int tw_history_bind_number(sqlite3_stmt *st, int index, double v);
/* Reads a column bound with tw_history_bind_number: NAN for NULL. */
double tw_history_column_number(sqlite3_stmt *st, int column);

/* series_math.c. The median of v (sorted in place); NAN for none. */
double tw_history_median(double *v, size_t n);
/* The median absolute change between successive finite values; 0 when
 * fewer than three. */
double tw_history_noise(const tw_history_series *s);
/* s's value at pos, linear between its neighbours; NAN outside its steps.
 * hint (may be NULL) keeps the position for calls with rising pos. */
double tw_history_value_at(const tw_history_series *s, double pos, size_t *hint);

#endif
