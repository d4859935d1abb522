/*
 * log_fields.h: what the files of the logging half of trainwatch._native
 * share: a record's fields (log_fields.c builds them, router.c writes
 * them), the caller's site and the dropped-record errors.
 */
#ifndef TW_PY_LOG_FIELDS_H
#define TW_PY_LOG_FIELDS_H

#include "native.h"

#include <stdint.h>

#include "trainwatch/log.h"
#include "trainwatch/metrics.h"

#define FIELDS_MAX  48
#define SHAPE_MAX   8
#define MESSAGE_MAX 1024

/* The fields of one record, with the strings made for it. */
typedef struct field_set {
    tw_log_field f[FIELDS_MAX + 2];
    size_t n;
    char message[MESSAGE_MAX]; /* msg % args made by format_simple */
    int64_t shapes[FIELDS_MAX][SHAPE_MAX];
    PyObject *keep[FIELDS_MAX * 2]; /* strings made for this record */
    size_t kept;
} field_set;

/* The caller's site, per code object and instruction (see tw_py_call_site). */
#define LINE_SLOTS 16
typedef struct line_cache {
    PyObject *code;
    int lasti, line;
    const char *file, *func; /* code's co_filename and co_name */
} line_cache;

extern tw_counter *tw_py_log_errors_counter; /* set by tw_py_log_init */

/* Swallows the pending exception: counted, said once. */
void tw_py_log_failed(const char *what);
uint64_t tw_py_log_error_count(void); /* records dropped so far */

void tw_py_fields_release(field_set *fs);
/* owned's UTF-8, kept alive with the record (NULL: owned was NULL). */
const char *tw_py_keep_utf8(field_set *fs, PyObject *owned);
/* One extra= item into fs: 0, or -1 with an exception pending. */
int tw_py_field_add(tw_py_state *st, field_set *fs, PyObject *keyobj, PyObject *v);
/* The caller's file, function and line: the frame calling the C method
 * (up = 0) or the one `up` frames above it; *keep_code: a reference to
 * release once the names are no longer used. cache: LINE_SLOTS slots, or NULL. */
void tw_py_call_site(line_cache *cache, int up, const char **file, const char **func, int *line, PyObject **keep_code);

#endif
