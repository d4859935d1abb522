/*
 * progress.h: analyze's progress line on a terminal (progress.c): bytes and
 * files read, MB/s and ETA, redrawn in place on stderr from a thread of its
 * own and cleared at the end. Ownership: tw_progress_start/tw_progress_stop.
 */
#ifndef TW_ANALYZE_PROGRESS_H
#define TW_ANALYZE_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "trainwatch/parse.h"

#define TW_PROGRESS_MIN_BYTES (100ull << 20) /* inputs smaller than this ... */
#define TW_PROGRESS_MIN_FILES 20             /* ... and fewer files get no line */

typedef struct tw_progress tw_progress;

/* Whether a line is wanted: stderr a terminal, not quiet, CI unset, and the
 * inputs large enough. */
bool tw_progress_wanted(bool quiet, uint64_t total_bytes, int files);
/* NULL when it could not start (the work goes on without a line). */
tw_progress *tw_progress_start(uint64_t total_bytes, int files);
/* The parser now reading (NULL between files); `done` counts finished files. */
void tw_progress_reading(tw_progress *g, const tw_parser *p, uint64_t bytes_before, int done);
void tw_progress_stop(tw_progress *g);

#endif
