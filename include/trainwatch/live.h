/*
 * live.h: what a live run exports and warns about, from its records.
 *
 * tw_live turns the record stream of a running job (followed log files, or
 * a supervised child's output) into the Prometheus series below, labelled
 * run and rank (never job or instance: those are the scraper's target labels), and watches for trouble as it happens: a
 * NaN loss, an OOM, an exception, and a stall (no new training step for stall_after seconds; derived from the observed
 * step interval when not given: ten times the median, at least 60 s; a rank that logged its end is not stalled).
 * Warnings go to a stream (stderr) as one line each. Any rank number works
 * (up to 65536 distinct ranks); a series refused at its family's series
 * limit is counted in trainwatch_dropped_series_total and skipped.
 *
 *   trainwatch_train_loss, trainwatch_train_step, trainwatch_train_epoch,
 *   trainwatch_learning_rate, trainwatch_samples_per_second (gauges);
 *   trainwatch_step_duration_seconds, trainwatch_data_wait_seconds
 *   (histograms); trainwatch_last_progress_timestamp_seconds,
 *   trainwatch_stalled (gauges); trainwatch_nan_loss_total,
 *   trainwatch_stalls_total, trainwatch_log_events_total{event},
 *   trainwatch_records_total{kind}, trainwatch_train_steps_total (counters);
 *   trainwatch_train_metric{name}, trainwatch_eval_metric{name} (gauges: every
 *   other scalar of step and evaluation records, up to the family's series
 *   limit).
 *
 * Given a baseline (the last runs of the job in the history, run and watch):
 * trainwatch_baseline_step_seconds{stat="p50|p95|limit"} and
 * trainwatch_baseline_runs (gauges, labelled run), and per rank
 * trainwatch_step_time_vs_baseline: its recent step time (the median of the
 * last 32 the log reports, else the step rate of the last 32 steps) over the
 * baseline's p50. Without one, none of the three.
 */
#ifndef TRAINWATCH_LIVE_H
#define TRAINWATCH_LIVE_H

#include <stdio.h>

#include "trainwatch/analyze.h"
#include "trainwatch/metrics.h"
#include "trainwatch/record.h"

#define TW_STALL_MIN_SECONDS 60.0
#define TW_STALL_FACTOR 10.0

typedef struct tw_live tw_live;

/* The step time of the job's last runs (tw_history_step_baseline); runs 0: none. */
typedef struct tw_live_baseline {
    int runs;
    double p50, p95, limit; /* seconds; limit: over it the run is slower than they were */
} tw_live_baseline;

typedef struct tw_live_options {
    tw_registry *registry;     /* NULL: the default registry */
    const char *run;           /* the run label */
    double stall_after;        /* seconds; 0: derived from the step interval */
    FILE *warnings;            /* NULL: no warnings printed */
    double max_steps;          /* the planned global steps (--max-steps); 0: from the log */
    tw_live_baseline baseline; /* runs 0: no baseline gauges */
} tw_live_options;

int tw_live_new(const tw_live_options *o, tw_live **out);
void tw_live_free(tw_live *l);
/* Consumes one record (a tw_record_fn). now is taken from the wall clock. */
void tw_live_record(void *live, const tw_record *r);
/* Checks for stalls; call about once a second. */
void tw_live_tick(tw_live *l, double now);
/* The stalls seen live, as a finding for the report at the end (the log's
 * timestamps may not show them): false when there was none. now ends a
 * stall still going on. */
bool tw_live_stall_finding(tw_live *l, double now, tw_finding *f);
/* The furthest global step any rank has logged, and that rank's recent
 * seconds per step (NAN each when not known): where requests to the ranks
 * are due (trainwatch/actions.h). */
void tw_live_progress(const tw_live *l, double *step, double *seconds_per_step);
/* How many stalls (no step for the stall time) have begun so far. */
unsigned long tw_live_stalls(const tw_live *l);
/* Number of warnings printed so far (for tests and summaries). */
unsigned long tw_live_warnings(const tw_live *l);

#endif
