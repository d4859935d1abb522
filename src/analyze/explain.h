/*
 * explain.h: `analyze --explain`, what the parsers picked up from an input
 * (explain.c). Ownership: tw_explain_new/tw_explain_free, one per input.
 */
#ifndef TW_ANALYZE_EXPLAIN_H
#define TW_ANALYZE_EXPLAIN_H

#include <stdio.h>

#include "trainwatch/record.h"

typedef struct tw_explain tw_explain;

tw_explain *tw_explain_new(void);
void tw_explain_free(tw_explain *e);
void tw_explain_record(tw_explain *e, const tw_record *r);
/* Writes what e saw of the input at path, read by format (NULL: none). */
void tw_explain_write(FILE *out, const tw_explain *e, const char *path, const char *format);

#endif
