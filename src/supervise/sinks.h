/*
 * sinks.h: where the records of a live run go, shared by `run` and `watch`:
 * the run's aggregation (for the diagnosis at the end), the live metrics,
 * and optionally a JSON-lines records file whose size the follower's state
 * file remembers (commit) and cuts back to after a crash (restore).
 */
#ifndef TW_SUPERVISE_SINKS_H
#define TW_SUPERVISE_SINKS_H

#include <stdint.h>
#include <stdio.h>

#include "trainwatch/analyze.h"
#include "trainwatch/live.h"
#include "trainwatch/record.h"

typedef struct tw_sinks {
    tw_run *run;
    tw_live *live;
    FILE *records; /* NULL: none */
} tw_sinks;

/* A tw_record_fn: hands r to every sink. */
void tw_sinks_record(void *sinks, const tw_record *r);
/* The records file flushed to disk; returns its size (0 without one). */
uint64_t tw_sinks_commit(void *sinks);
/* Cuts the records file back to size; 0 on success. */
int tw_sinks_restore(void *sinks, uint64_t size);

#endif
