/*
 * sinks.h: where the records of a live run go, shared by `run` and `watch`:
 * the run's aggregation (for the diagnosis at the end), the live metrics,
 * and optionally a JSON-lines records file (each record in its Elastic
 * Common Schema envelope, trainwatch/record_json.h) whose size the
 * follower's state file remembers (commit) and cuts back to after a crash
 * (restore).
 */
#ifndef TW_SUPERVISE_SINKS_H
#define TW_SUPERVISE_SINKS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "trainwatch/analyze.h"
#include "trainwatch/live.h"
#include "trainwatch/record.h"
#include "trainwatch/record_json.h"

typedef struct tw_sinks {
    tw_run *run;
    tw_live *live;
    FILE *records; /* NULL: none */
    const char *records_path;
    tw_record_ecs writer; /* host.name and process.pid of the records */
    bool records_failed; /* a write failed: no more records are written */
} tw_sinks;

/* A tw_record_fn: hands r to every sink. */
void tw_sinks_record(void *sinks, const tw_record *r);
/* The records file flushed to disk; sets *size to its size (0 without one).
 * Returns 0, or -1 when a record could not be written (said once on stderr:
 * the records written are then no longer those of the lines read). */
int tw_sinks_commit(void *sinks, uint64_t *size);
/* Hands what is buffered to the records file; 0, or -1 as above. */
int tw_sinks_flush(tw_sinks *s);
/* Cuts the records file back to size; 0 on success. */
int tw_sinks_restore(void *sinks, uint64_t size);

#endif
