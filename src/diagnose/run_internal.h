/*
 * run_internal.h: what the files that build a tw_run share (run.c and the
 * run_*.c it hands records to; see run.c's comment for which does what).
 * The rules never include this: they read run.h.
 */
#ifndef TW_DIAGNOSE_RUN_INTERNAL_H
#define TW_DIAGNOSE_RUN_INTERNAL_H

#include <math.h>

#include "run.h"

/* ---- run.c: files and ranks ------------------------------------------- */

/* The index of file name in run's interned names, interned at first sight
 * (records borrow names from their parser); 0 when out of memory. */
uint32_t tw_run_intern_file(tw_run *run, const char *name);
/* The rank's state, made at its first record; NULL when out of memory or
 * past the limit of distinct ranks. An unknown rank (-1) is rank 0. */
tw_rank *tw_run_rank_of(tw_run *run, int rank);
uint64_t tw_run_name_hash(const char *s); /* FNV-1a of a string */

/* ---- run_launches.c: which launch a record goes to ------------------------ */

/* The cursor of a rank (made at its first record); NULL when out of memory. */
tw_cursor *tw_run_cursor_of(tw_run *run, int rank);
/* The launch (0-based) a rank is in now, without making its cursor. */
int tw_run_launch_of(const tw_run *run, int rank);
/* Launch i, made when a rank first gets there; NULL past TW_LAUNCHES_MAX. */
tw_run *tw_run_launch_at(tw_run *run, int i);
/* Moves the rank of cursor c on to its next launch, started by r (before:
 * the rank's last point, for a step counter that went back); NULL when
 * launches are no longer kept apart. */
tw_run *tw_run_next_launch(tw_run *run, tw_cursor *c, tw_launch_start why, const tw_record *r, const tw_point *before);
/* Whether event r ends a launch's start: a start line after it is a new launch. */
bool tw_run_ends_start(const tw_record *r);
/* A start line r of the rank of c: the launch its records go to from now. */
tw_run *tw_run_start_line(tw_run *root, tw_run *run, tw_cursor *c, const tw_record *r);

/* ---- the records, by kind ------------------------------------------------- */

void tw_run_add_step(tw_run *root, tw_run *run, tw_cursor *c, const tw_record *r);  /* run_steps.c */
void tw_run_add_eval(tw_run *root, tw_run *run, const tw_record *r);                /* run_metrics.c */
void tw_run_add_event(tw_run *root, tw_run *run, tw_cursor *c, const tw_record *r); /* run_events.c */

/* The index of name in notes (hint: where it was in the last record), or -1 (run_metrics.c). */
int tw_run_metric_index(const tw_metric_notes *notes, int hint, const char *name);

/* ---- run_series.c: histograms and series ---------------------------------- */

#define HIST_MIN_LOG10       (-6.0)
#define HIST_BINS_PER_DECADE 100.0

/* Adds p (with its named metrics by slot) to the series: a rewrite of the
 * last position replaces it; a full series halves itself. */
void tw_run_series_add(tw_series *s, const tw_point *p, const double *metric);

/* tw_hist_add, inlined on the per-step path. */
static inline int tw_hist_bin(double seconds)
{
    if (!(seconds > 0))
        return 0;
    double b = (log10(seconds) - HIST_MIN_LOG10) * HIST_BINS_PER_DECADE;
    if (b < 0)
        return 0;
    if (b >= TW_HIST_BINS)
        return TW_HIST_BINS - 1;
    return (int)b;
}

static inline void tw_hist_add_inline(tw_hist *h, double seconds)
{
    if (!(seconds >= 0) || isinf(seconds))
        return;
    if (h->count == 0 || seconds < h->min)
        h->min = seconds;
    if (h->count == 0 || seconds > h->max)
        h->max = seconds;
    h->bins[tw_hist_bin(seconds)]++;
    h->count++;
}

#endif
