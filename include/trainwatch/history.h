/*
 * history.h: the runs trainwatch has seen, kept in one SQLite file.
 *
 * Every analyze, run and watch records the run it diagnosed (docs/history.md):
 * who it was (name, job, host, command, inputs), when, how it ended, the
 * summary figures, the findings, the environment and configuration the log
 * stated, and downsampled series (loss, learning rate, step time, data wait,
 * throughput, memory, evaluation metrics) for comparing runs later. The file
 * is in WAL mode so the runs of one node can record at once; writers wait
 * up to a few seconds for each other and then give up with an error, never
 * blocking a run for longer.
 *
 * Errors are returned with a one-line reason in err; recording is never a
 * reason for a command to fail (the CLI says the line and goes on).
 *
 * Ownership: tw_history_open/tw_history_close; the lists and views the
 * queries return are the caller's, freed with the matching _free.
 */
#ifndef TRAINWATCH_HISTORY_H
#define TRAINWATCH_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trainwatch/analyze.h"

#define TW_HISTORY_SCHEMA 3          /* the schema this trainwatch writes */
#define TW_HISTORY_SERIES_POINTS 600 /* points kept per series of a run */

typedef struct tw_history tw_history;

/* The default file: $XDG_DATA_HOME/trainwatch/runs.db, else
 * $HOME/.local/share/trainwatch/runs.db. TW_EINVAL when neither is set. */
int tw_history_default_path(char *buf, size_t cap);

/* Opens (creating it and its folders when absent) and brings the schema up
 * to TW_HISTORY_SCHEMA. A file that is no SQLite database, or one written
 * by a newer trainwatch, is refused with the reason. */
int tw_history_open(const char *path, tw_history **out, char *err, size_t errlen);
/* As tw_history_open, creating a new file at an older schema (tests of the
 * migrations); schema 1..TW_HISTORY_SCHEMA. */
int tw_history_open_schema(const char *path, int schema, tw_history **out, char *err, size_t errlen);
void tw_history_close(tw_history *h);
/* The schema version of the open file. */
int tw_history_schema(const tw_history *h);

/* One GPU utilisation sample: seconds since the epoch, percent. */
typedef struct tw_history_gpu_point {
    double time, util;
} tw_history_gpu_point;

/* What the report does not say about a run. Strings are borrowed; NULL
 * where unknown. */
typedef struct tw_history_identity {
    const char *source;  /* "analyze", "run", "watch" */
    const char *name;    /* the run name */
    const char *job;     /* runs of one job are compared with each other */
    const char *command; /* the command line run, or NULL */
    const char *inputs;  /* the log files read, space separated */
    double started, ended; /* seconds since the epoch; NAN: from the log's timestamps */
    const char *outcome;   /* how it ended when the log does not say ("exit 0"); NULL: the report's */
    /* GPU utilisation the caller sampled itself (run's NVML), any GPU, any
     * order; NULL: the GPU telemetry logs the run read, if any */
    const tw_history_gpu_point *gpu;
    size_t gpu_count;
} tw_history_identity;

/* The job a command line (argv, NULL-terminated) is, into buf: its
 * program's name and the script it runs, "python train.py" ("python -m
 * pkg.train"); the program alone without one. Returns buf. */
const char *tw_history_job_of(char *const *argv, char *buf, size_t cap);
/* How a command ended, from its exit status as a shell gives it (128+N:
 * killed by signal N): "exit 0", "signal 9", into buf. Returns buf. */
const char *tw_history_outcome_of(int status, char *buf, size_t cap);

/* Records a diagnosed run: report from tw_diagnose*() over run. *id gets
 * the new run's id. */
int tw_history_record(tw_history *h, const tw_history_identity *who, const tw_report *report, const tw_run *run,
                      int64_t *id, char *err, size_t errlen);

/* One recorded run, as the runs table keeps it. Unknown figures are NAN
 * (doubles) or -1 (counts). */
typedef struct tw_history_entry {
    int64_t id;
    double recorded; /* when it was recorded */
    char source[16], name[128], job[256], host[128], command[512], inputs[512];
    double started, ended;
    int ranks, launches, launch;
    char outcome[32], outcome_detail[256];
    int healthy;
    double health;
    int64_t step_records, first_step, last_step, epoch_total, last_epoch;
    double duration, step_p50, step_p95, data_share, throughput, peak_memory;
    double first_loss, best_loss, final_loss, final_lr;
    int64_t best_loss_step;
    int final_loss_nan; /* the last loss logged was NaN or infinite */
    int findings, errors, warnings;
    char environment[512];
    /* schema 3: the GPU time and money (run: NVML; analyze: GPU logs);
     * gpus -1 and the rest NAN where none was counted, cost NAN without a
     * price, budget NAN without one */
    int gpus;
    double gpu_seconds, idle_seconds, idle_below, cost, idle_cost, budget;
    char price_source[160];
} tw_history_entry;

typedef struct tw_history_filter {
    const char *job; /* NULL: every job */
    int limit;       /* the newest this many; 0: all */
    int64_t before;  /* only runs with a smaller id; 0: no bound */
} tw_history_filter;

/* The runs matching filter, newest first; *entries is the caller's (free()). */
int tw_history_list(tw_history *h, const tw_history_filter *filter, tw_history_entry **entries, size_t *count,
                    char *err, size_t errlen);
/* The run with this id, or the newest named so (its name or job). TW_ENOENT when none. */
int tw_history_find(tw_history *h, const char *id_or_name, tw_history_entry *out, char *err, size_t errlen);

/* A downsampled series of a run: metric is "loss", "lr", "step_time",
 * "data_wait", "throughput", "memory", "gpu_util" (the mean over the GPUs
 * at each sample time, placed at the step the run was at) or "eval:NAME". */
typedef struct tw_history_series {
    char metric[80];
    size_t count;
    double *pos, *time, *value; /* count each; time NAN where the log had none */
} tw_history_series;

typedef struct tw_history_fact {
    char key[32], value[80];
    int rank;
} tw_history_fact;

typedef struct tw_history_finding {
    char rule[48], severity[8], title[256];
    int64_t step;
    int rank;
    double value;
} tw_history_finding;

/* Everything kept of one run, for `runs show` and `compare`. */
typedef struct tw_history_view {
    tw_history_entry entry;
    tw_history_series *series;
    size_t series_count;
    tw_history_fact *facts;
    size_t fact_count;
    tw_history_finding *findings;
    size_t finding_count;
} tw_history_view;

int tw_history_view_load(tw_history *h, int64_t id, tw_history_view *out, char *err, size_t errlen);
/* The series of a view with this metric, or NULL. */
const tw_history_series *tw_history_view_series(const tw_history_view *v, const char *metric);
void tw_history_view_free(tw_history_view *v);

/* Builds a view of a run not recorded (compare of a log file read on the
 * fly): the same figures tw_history_record would keep. */
int tw_history_view_of(const tw_history_identity *who, const tw_report *report, const tw_run *run,
                       tw_history_view *out);

/* Output shared by `runs` and `compare` (src/history/output.c). Unknown
 * figures are JSON null; a NaN final loss is "NaN". */
#define TW_HISTORY_RUNS_SCHEMA "trainwatch.runs/1"
#define TW_HISTORY_RUN_SCHEMA "trainwatch.run/1"
void tw_history_entry_write_json(FILE *out, const tw_history_entry *e);
/* The entry's members and its findings, facts and series, as one object. */
void tw_history_view_write_json(FILE *out, const tw_history_view *v);
/* "3h04m", "12m05s", "41s", "?" for an unknown one. */
const char *tw_history_duration_text(double seconds, char *buf, size_t cap);
/* The entry's GPU time in GPU-hours ("0.0111", "12.5") and its money
 * ("3.42", "0.004111"); "-" where none was counted (or no price). */
const char *tw_history_gpu_hours_text(const tw_history_entry *e, char *buf, size_t cap);
const char *tw_history_cost_text(const tw_history_entry *e, char *buf, size_t cap);
/* "2026-12-06 19:21" in local time, "?" when unknown. */
const char *tw_history_time_text(double epoch_seconds, char *buf, size_t cap);

/* Comparing runs (src/history/compare.c); the first run is the reference
 * the others are judged against. */
#define TW_HISTORY_COMPARE_SCHEMA "trainwatch.compare/1"
#define TW_HISTORY_COMPARE_MAX 8

/* Where two loss curves part: the first step from which the other's loss
 * (interpolated at the reference's steps) stays off the reference's by
 * more than three times the larger of the two runs' own noise (the median
 * change between successive logged losses) for five points running. */
typedef struct tw_history_parting {
    bool overlap;      /* the curves share steps (from, to) */
    double from, to;
    bool parted;       /* they part at step */
    double step, ref, other; /* the step and the two losses there */
    double threshold;  /* the difference counted as apart */
} tw_history_parting;

void tw_history_loss_parting(const tw_history_view *ref, const tw_history_view *other, tw_history_parting *out);
/* The parting in one sentence, the other run named by its letter (A is
 * the reference): "B parts from A at step 1200: ..." or "B follows A
 * within the runs' noise ...". Returns buf. */
const char *tw_history_parting_text(const tw_history_parting *p, char letter, char *buf, size_t cap);
/* The verdict on other against ref, in words ("B is 31% slower per step:
 * data wait rose from 12% to 48%; num_workers 8 -> 2"); name: other's letter. */
void tw_history_verdict(const tw_history_view *ref, const tw_history_view *other, const char *name, char *buf,
                        size_t cap);
void tw_history_compare_write_text(FILE *out, const tw_history_view *runs, size_t n);
/* The side-by-side table as rows of cells, one per run (n at most
 * TW_HISTORY_COMPARE_MAX), for the text and the HTML page alike: the
 * figures (outcome, health, steps, ... and the last value of each
 * evaluation metric), then, separately, the facts of the environment and
 * configuration that differ ("-" where a run's log did not state it).
 * Cells are borrowed for the call. */
enum { TW_HISTORY_ROW_FIGURE, TW_HISTORY_ROW_DIFFERENCE };
typedef void (*tw_history_compare_row_fn)(int kind, const char *label, const char *const *cells, size_t n,
                                          void *arg);
void tw_history_compare_figures(const tw_history_view *runs, size_t n, tw_history_compare_row_fn each, void *arg);
void tw_history_compare_differences(const tw_history_view *runs, size_t n, tw_history_compare_row_fn each,
                                    void *arg);
void tw_history_compare_write_json(FILE *out, const tw_history_view *runs, size_t n);

/* ---- from a Prometheus (history/prometheus.c) ----------------------------
 * The runs `run` and `watch` exported, read back through a Prometheus HTTP
 * API (/api/v1/query, /api/v1/query_range): for `runs --prometheus` and
 * `compare --prometheus` at fleet scale. A run is a label selector over
 * trainwatch's series (run="a", {run="a",host="n1"}). Entries have id 0,
 * source "prometheus", no findings (-1) and outcome "running" or "ended". */
typedef struct tw_history_prometheus {
    const char *url; /* the API's base: http://prometheus:9090 (a path prefix kept) */
    double since;    /* how far back from until to look, seconds */
    double until;    /* seconds since the epoch; NAN: now */
    const char *const *headers; /* further request headers ("X-Scope-OrgID: team"), header_count of them */
    size_t header_count;
} tw_history_prometheus;

/* The run the selector picks, as a view: TW_ENOENT (err says so) when no
 * series with training steps match in the look-back; TW_ENET, TW_EHTTP
 * with the server's reason. */
int tw_history_prometheus_view(const tw_history_prometheus *p, const char *selector, tw_history_view *out, char *err,
                               size_t errlen);
/* Every run (each value of the run label) with training steps in the
 * look-back, selector NULL or narrowing them, newest first; *entries the
 * caller's (free()). */
int tw_history_prometheus_list(const tw_history_prometheus *p, const char *selector, tw_history_entry **entries,
                               size_t *count, char *err, size_t errlen);

/* Judges a run (its view, tw_history_view_of) against the last
 * TW_HISTORY_BASELINE_RUNS recorded runs of its job, at least
 * TW_HISTORY_BASELINE_MIN of them: appends slower_than_history and
 * loss_behind_history findings to report when it is outside their spread
 * (src/history/baseline.c, docs/history.md#baselines). */
#define TW_HISTORY_BASELINE_RUNS 10
#define TW_HISTORY_BASELINE_MIN 3
int tw_history_baseline(tw_history *h, const tw_history_view *now, tw_report *report, char *err, size_t errlen);

/* The same runs' step time, for the live baseline of a run starting
 * (run, watch: trainwatch_baseline_step_seconds): the median of their step
 * time p50s and p95s, the step time over which slower_than_history would
 * judge a run slower (25% over the median and three robust deviations),
 * and how many runs it is from; runs 0 (the rest NAN) with fewer than
 * TW_HISTORY_BASELINE_MIN of them. */
typedef struct tw_history_step_times {
    size_t runs;
    double p50, p95, limit; /* seconds */
} tw_history_step_times;

int tw_history_step_baseline(tw_history *h, const char *job, tw_history_step_times *out, char *err,
                             size_t errlen);

/* Deletes all but the newest keep runs (keep < 0: no bound) and those
 * recorded more than older_than seconds ago (older_than <= 0: no bound);
 * *removed gets how many went. */
int tw_history_prune(tw_history *h, long keep, double older_than, int64_t *removed, char *err, size_t errlen);

#endif
