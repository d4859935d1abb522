/*
 * record_json.h: trainwatch's own JSON-lines record format.
 *
 * One record per line, schema "trainwatch.record/1" (docs/records.md):
 *   {"schema":"trainwatch.record/1","kind":"step","file":"train.log","line":12,
 *    "rank":0,"time":1700000000.5,"epoch":1,"step":10,"loss":0.54,"lr":0.001,
 *    "batch_time":0.023,"metrics":{"acc":0.82}}
 * Written by `trainwatch analyze --records`, read back by the "trainwatch"
 * format, and by any tool that wants trainwatch's view of a log.
 *
 * `run` and `watch --records` write the same record inside an Elastic
 * Common Schema envelope, so log shippers send it to Elasticsearch or Loki
 * as is (tw_record_write_ecs):
 *   {"@timestamp":"2026-12-03T13:45:01.123Z","event.dataset":"trainwatch.record",
 *    "log.level":"info","message":"step 10 loss 0.54","ecs.version":"8.11.0",
 *    "host.name":"node1","process.pid":4242,"log.file.path":"train.log",
 *    "trainwatch":{"schema":"trainwatch.record/1",...}}
 * The "trainwatch" format reads both.
 */
#ifndef TRAINWATCH_RECORD_JSON_H
#define TRAINWATCH_RECORD_JSON_H

#include <stdio.h>

#include "trainwatch/record.h"

#define TW_RECORD_SCHEMA "trainwatch.record/1"

/* Writes r as one JSON line (with the trailing newline). */
void tw_record_write_json(FILE *out, const tw_record *r);

#define TW_RECORD_ECS_DATASET "trainwatch.record"
#define TW_ECS_VERSION        "8.11.0"

/* Who writes the ECS lines: host.name and process.pid. */
typedef struct tw_record_ecs {
    const char *host;
    long pid;
} tw_record_ecs;

/* Writes r as one ECS JSON line: @timestamp is the record's time, or now
 * (unix seconds) when it has none. */
void tw_record_write_ecs(FILE *out, const tw_record *r, const tw_record_ecs *who, double now);

#endif
