/*
 * internal.h: what the modules of src/trace/ share: the per-rank
 * accumulator (rank.c), the Paddle summary-text reader (summary.c) and the
 * rules (findings.c). tw_trace itself is in trace.c.
 */
#ifndef TW_TRACE_INTERNAL_H
#define TW_TRACE_INTERNAL_H

#include <stddef.h>

#include "events.h"
#include "trainwatch/trace.h"

typedef struct tw_rank_acc tw_rank_acc;

/* out is filled as the events come; its strings are set by the caller. */
int tw_rank_acc_new(tw_rank_acc **out, tw_trace_rank *rank, const tw_trace_options *o);
void tw_rank_acc_event(void *acc, const tw_trace_event *e);
/* Accounts what is left and fills the rank's tables; frees nothing. */
int tw_rank_acc_finish(tw_rank_acc *a);
void tw_rank_acc_free(tw_rank_acc *a);

/* Reads a paddle.profiler summary text (Perf Summary, Model/Overview
 * Summary) held in text; false when it has none of them. */
bool tw_trace_summary_read(tw_trace_rank *rank, const char *text, size_t len);
/* Whether the start of a file looks like a summary rather than JSON. */
bool tw_trace_summary_detect(const char *head, size_t len);

/* The rules: findings for the ranks, worst first. */
typedef struct tw_finding_list {
    tw_finding *v;
    int n, cap;
} tw_finding_list;

int tw_trace_rules(const tw_trace_rank *ranks, int n, const tw_trace_options *o, tw_finding_list *out);

#endif
