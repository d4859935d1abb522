/*
 * templates.h: the template miner over the lines no format read
 * (templates.c): Drain-style grouping, the unusual ones, the --templates
 * table.
 *
 * Ownership: the first tw_run owns its tw_templates (tw_run_free frees it).
 */
#ifndef TW_DIAGNOSE_TEMPLATES_H
#define TW_DIAGNOSE_TEMPLATES_H

#include <stdio.h>

#include "run.h"

#define TW_TEMPLATES_MAX          4096 /* templates kept; lines that would start more are counted as other */
#define TW_TEMPLATES_LEAF_MAX     128  /* templates in one parse-tree leaf; more are grouped by exact text */
#define TW_TEMPLATES_CHILDREN_MAX 100  /* children of a parse-tree node, the last the wildcard (Drain3's) */
#define TW_TEMPLATES_SIMILARITY   50   /* percent of a template's tokens a line must share to join it */

/* Adds one TW_REC_LINE record (file: its interned index; launch: 0-based,
 * the launch its rank is in); *t is made on first use. */
int tw_templates_add(tw_templates **t, const tw_record *r, uint32_t file, int launch);
void tw_templates_free(tw_templates *t);
/* The unusual lines of the run, in file and line order, at most
 * TW_UNUSUAL_MAX (allocated; the caller frees *out). After the last step
 * counts only when the report is not healthy. */
int tw_templates_unusual(const tw_run *run, bool healthy, tw_unusual_line **out, int *count);
/* The whole table (--templates). */
void tw_templates_write(FILE *out, const tw_run *run);
/* "says trouble, after the last step" */
const char *tw_unusual_why(unsigned why, char *buf, size_t cap);

#endif
