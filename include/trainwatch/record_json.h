/*
 * record_json.h: trainwatch's own JSON-lines record format.
 *
 * One record per line, schema "trainwatch.record/1" (docs/records.md):
 *   {"schema":"trainwatch.record/1","kind":"step","file":"train.log","line":12,
 *    "rank":0,"time":1700000000.5,"epoch":1,"step":10,"loss":0.54,"lr":0.001,
 *    "batch_time":0.023,"metrics":{"acc":0.82}}
 * Written by `trainwatch analyze --records`, read back by the "trainwatch"
 * format, and by any tool that wants trainwatch's view of a log.
 */
#ifndef TRAINWATCH_RECORD_JSON_H
#define TRAINWATCH_RECORD_JSON_H

#include <stdio.h>

#include "trainwatch/record.h"

#define TW_RECORD_SCHEMA "trainwatch.record/1"

/* Writes r as one JSON line (with the trailing newline). */
void tw_record_write_json(FILE *out, const tw_record *r);

#endif
