/*
 * analyze.h: from a stream of records to a diagnosis.
 *
 * tw_run accumulates records from any number of inputs (one per rank, or
 * several per rank) in bounded memory: per-rank streaming statistics plus a
 * downsampled series of at most TW_SERIES_MAX points, so a week-long log costs
 * the same as an hour-long one. tw_diagnose() runs the table of rules over it
 * and returns a tw_report: a summary and findings, worst first, each with its
 * evidence (steps, values, file:line) and a recommendation.
 *
 * A log may hold several launches of the job one after another (a restarted
 * job, attempts while debugging): the run splits them where a launch starts
 * (a start line such as a config dump or "init nccl context", the step
 * counter going back), and every statistic and finding belongs to one
 * launch. The report has each launch's span, summary and findings, and
 * shows the ones selected (the last by default).
 *
 * Ownership: tw_run_new/tw_run_free; tw_diagnose allocates the report, which
 * the caller frees with tw_report_free. A report borrows file names from the
 * run, so free the run last.
 */
#ifndef TRAINWATCH_ANALYZE_H
#define TRAINWATCH_ANALYZE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "trainwatch/parse.h"
#include "trainwatch/record.h"

#define TW_SERIES_MAX 4096 /* points kept per rank before downsampling */

/* Thresholds of the rules, one row each: the field, the command-line option
 * that overrides it, the default, the option's value times scale is the
 * field's, what the help shows after the option (padded to line up), and
 * the help. The one place defaults live: tw_thresholds_default() and
 * `analyze`'s options and help are made from it. */
// clang-format off
#define TW_THRESHOLD_LIST(X) \
    X(data_share, "data-share", 0.30, 1, " F         ", "data wait above this share of step time is data-loading bound") \
    X(stall_seconds, "stall-seconds", 60, 1, " S      ", "a gap between steps at least this long ...") \
    X(stall_factor, "stall-factor", 10, 1, " F       ", "... and this many times the usual gap is a stall") \
    X(pause_seconds, "pause-seconds", 1, 1, " S      ", "a one-off pause in a run at least this long ...") \
    X(pause_factor, "pause-factor", 10, 1, " F       ", "... and this x its p95 step time or gap is a stall") \
    X(spike_factor, "spike-factor", 3, 1, " F       ", "a loss above this x its recent median is a spike") \
    X(spike_warn, "spike-warn", 100, 1, " F         ", "a spike this x its median, above the first loss, warns") \
    X(divergence_factor, "divergence-factor", 1.5, 1, " F  ", "late loss this x above its best is divergence") \
    X(plateau_rel, "plateau", 0.01, 1, " F            ", "less relative loss improvement than this is a plateau") \
    X(throughput_drop, "throughput-drop", 0.30, 1, " F    ", "throughput falling by this share is reported") \
    X(jitter_ratio, "jitter", 3, 1, " F             ", "p99/p50 step time above this is jitter") \
    X(mem_growth, "mem-growth", 0.10, 1, " F         ", "relative device memory growth that is a leak") \
    X(device_memory, "device-memory", 0, 1073741824.0, " GIB    ", "device memory in GiB, to project when it runs out; 0: unknown") \
    X(straggler_factor, "straggler", 1.2, 1, " F          ", "a rank this x slower than the others is a straggler") \
    X(early_stop_share, "early-stop", 0.9, 1, " F         ", "a rank stopping before this share of the others' steps") \
    X(max_steps, "max-steps", 0, 1, " N          ", "the planned global steps, for the time left; 0: the plan the log prints")
// clang-format on

typedef struct tw_thresholds {
#define TW_THRESHOLD_FIELD(field, name, def, scale, arg, help) double field;
    TW_THRESHOLD_LIST(TW_THRESHOLD_FIELD)
#undef TW_THRESHOLD_FIELD
} tw_thresholds;

void tw_thresholds_default(tw_thresholds *t);
/* The rows of TW_THRESHOLD_LIST as options: how many, row i's option name
 * ("data-share"), and setting row i's field to value (the option's unit,
 * times its scale). */
size_t tw_threshold_count(void);
const char *tw_threshold_option(size_t i);
void tw_threshold_set(tw_thresholds *t, size_t i, double value);

typedef struct tw_run tw_run;

/* t configures the streaming detectors (loss spikes); NULL: defaults. */
int tw_run_new(tw_run **out, const tw_thresholds *t);
void tw_run_free(tw_run *run);
/* How many launches the records added so far hold (at least 1). */
int tw_run_launches(const tw_run *run);
/* Adds one record; matches tw_record_fn so a parser can feed a run directly. */
void tw_run_add(void *run, const tw_record *record);
/* The template table of the lines no format read (analyze --templates):
 * they reach the run when its parsers were asked for them
 * (tw_parser_set_unparsed). */
void tw_run_write_templates(FILE *out, const tw_run *run);
/* Notes an input that could not be read fully (shown in the report). */
void tw_run_note_input(tw_run *run, const char *path, const char *format, uint64_t lines, uint64_t records,
                       const char *error);
/* Says that the lines read as `path` were also copied to a rotating file
 * whose generations are now `path` itself, path.1, path.2 ...: line N as
 * read is line N - offsets[k] of the newest generation k where that is at
 * least 1 (log/rotate.h's tw_rotating_generations gives them, newest
 * first). Evidence then cites the generation that holds the line; a line
 * older than the oldest is cited as a line of the output, rotated away.
 * Returns TW_OK or TW_ENOMEM (then lines are cited as read). */
int tw_run_note_rotation(tw_run *run, const char *path, const int64_t *offsets, unsigned count);
/* Notes that the input noted last ends without a newline: its last line may
 * be a record cut off (the run or the copy of its log was interrupted). */
void tw_run_note_cut(tw_run *run);

/* Adds one sample of a GPU telemetry log read beside the training logs
 * (file is copied). Samples past TW_GPU_SAMPLES_MAX are counted, not kept.
 * Returns 0 or TW_ENOMEM. */
#define TW_GPU_SAMPLES_MAX (1u << 20)
int tw_run_add_gpu(tw_run *run, const char *file, const tw_gpu_sample *sample);

typedef enum tw_severity {
    TW_SEV_INFO,
    TW_SEV_WARNING,
    TW_SEV_ERROR,
} tw_severity;

const char *tw_severity_name(tw_severity s);

#define TW_TEXT_MAX 1024

typedef struct tw_finding {
    const char *rule; /* stable id, e.g. "data_loading_bound" */
    tw_severity severity;
    char title[256];
    char evidence[TW_TEXT_MAX]; /* one fact per line */
    char recommendation[TW_TEXT_MAX];
    tw_source where; /* the line to look at first */
    int launch;      /* 1-based; 0: about the log's launches as a whole */
    int rank;
    int64_t step; /* -1 when not tied to a step */
    double value; /* the measure the rule judged */
    /* A straight line the rule projected (memory_growth with a device size:
     * its least-squares growth from the last point to where the device is
     * full), in the launch's steps; projected false when none. */
    struct tw_projection {
        bool projected;
        double from_step, from_value; /* the last point of the series fitted */
        double slope;                 /* value per step */
        double to_step;               /* where the line reaches to_value */
        double to_value;              /* the device's size */
    } projection;
} tw_finding;

typedef struct tw_metric_summary {
    char name[TW_NAME_MAX];
    double last, best;
    int64_t best_step;
    uint64_t count;
} tw_metric_summary;

#define TW_SUMMARY_METRICS 24

/* The GPU telemetry of one launch: the samples whose time falls in the
 * launch's span (or all of them, when neither side has times and the log
 * holds one launch). Unknown values are NAN. */
#define TW_GPU_RANKS_MAX 16
typedef struct tw_gpu_summary {
    uint64_t samples;     /* used for this launch; 0: none */
    uint64_t samples_all; /* in the GPU logs given; 0: no GPU log */
    int gpus;             /* distinct GPU indexes among the samples used */
    bool aligned;         /* chosen by time (false: all samples, no times to align) */
    double util_mean;     /* percent */
    double util_zero_share; /* share of samples at 0% */
    double mem_first, mem_last; /* bytes: median of the first and last quarter of the samples */
    double mem_max, mem_total;  /* bytes */
    double log_first_time, log_last_time; /* of all samples with a time */
    double steps_first_time, steps_last_time; /* the launch's steps, what samples are aligned with */
    tw_source first;      /* the first sample used (file borrowed from the run) */
    /* Which GPU each rank used, where its logs say (Place(gpu:N), gpu id,
     * cudaDev, FLAGS_selected_gpus, CUDA_VISIBLE_DEVICES, local rank), and
     * that GPU's samples among those used (src/diagnose/gpu.c). */
    int rank_count;       /* ranks with steps in the launch */
    int rank_gpu_count;   /* of them, with a known GPU (the first TW_GPU_RANKS_MAX listed) */
    struct tw_rank_gpu {
        int rank, gpu;
        char how[32];     /* what said it: "Place(gpu:N)", "gpu id", "cudaDev", "local rank" ... */
        tw_source from;   /* the line that said it (file borrowed from the run) */
        uint64_t samples; /* of that GPU among those used */
        double util_mean, util_zero_share;
    } rank_gpus[TW_GPU_RANKS_MAX];
} tw_gpu_summary;

/* A run's GPU time and what it cost: `run` counts it from NVML each
 * second (src/supervise/cost.c), `analyze` from the GPU telemetry logs given
 * beside the logs (each GPU's sampled span). gpu_seconds 0: none counted. */
typedef struct tw_gpu_cost {
    int gpus;                   /* GPUs counted (run: most in use at once) */
    double gpu_seconds;         /* GPU time */
    double idle_seconds;        /* of it, under idle_below utilisation */
    double idle_below;          /* percent */
    bool priced;                /* a price was given: cost and idle_cost hold */
    bool unpriced_left_out;     /* some GPU time had no price (a model the price table lacks) */
    double cost, idle_cost;     /* money, in the unit of the prices */
    double budget;              /* --budget; 0: none */
    double projected_cost;      /* the money at the end at this rate, while time is left (analyze); 0: unknown */
    char price_source[160];     /* "3.6 per GPU-hour", the price table's path; "" without a price */
} tw_gpu_cost;

typedef struct tw_summary {
    int ranks; /* ranks that reported steps */
    uint64_t step_records, eval_records, events;
    /* Unknown values are NAN (doubles) or -1 (counters). */
    int64_t first_step, last_step; /* positions (global step where known) */
    int64_t last_epoch, epoch_total;
    double duration; /* seconds: timestamps, else steps x median step time */
    bool duration_from_timestamps;
    double samples_per_sec; /* median */
    double step_time_p50, step_time_p95, step_time_p99, step_time_max;
    double data_share;                        /* sum data wait / sum step time, NAN if unknown */
    double final_loss, best_loss, first_loss; /* first and best: finite losses only */
    bool final_loss_known;                    /* final_loss may be a NaN the log printed */
    int64_t best_loss_step;
    double final_lr;
    double peak_mem_bytes;
    /* A log that ends mid-run (no finish, no failure): the planned steps
     * after its last (its epoch/step counters), the time they take at the
     * median step time (else the log's own ETA), and when that is by the
     * log's clock (NAN each: not known, or the run ended). */
    double steps_left, eta_seconds, eta_end;
    int train_metric_count;
    tw_metric_summary train_metrics[TW_SUMMARY_METRICS];
    int eval_metric_count;
    tw_metric_summary eval_metrics[TW_SUMMARY_METRICS];
    uint64_t event_counts[TW_EV_COUNT];
    tw_gpu_summary gpu;
    tw_gpu_cost gpu_cost; /* set by run (NVML) and analyze (GPU logs) after the diagnosis */
    char environment[TW_TEXT_MAX / 2]; /* what the log states of its environment and configuration:
                                          "PaddlePaddle 2.2.0, GPUs used 4, ...", "" none */
} tw_summary;

typedef struct tw_input_summary {
    const char *path;
    const char *format;
    uint64_t lines, records;
    const char *error; /* NULL when read fully */
} tw_input_summary;

/* A 0-100 training-health score: 100 minus weighted penalties (each 0-1)
 * of eight components, capped at 84 with a warning finding and at 59 with
 * an error one, so a run with a problem never outranks one without
 * (docs/analyze.md#health-score has the weights). */
#define TW_HEALTH_COMPONENTS 8
#define TW_HEALTH_CAP_WARNING 84.0
#define TW_HEALTH_CAP_ERROR 59.0

typedef struct tw_health_component {
    const char *name; /* "failures", "nan", "data_loading", "gpu_idle", "stalls_jitter", "memory",
                         "loss_trend", "rank_balance" */
    double weight;    /* points it can take off; the weights sum to 100 */
    double penalty;   /* 0..1 */
    char why[96];     /* what set the penalty ("crash", "data wait 35% of step time"), "" when 0 */
} tw_health_component;

typedef struct tw_health {
    double score; /* 0..100 */
    const char *cap; /* NULL, "warning" or "error": the cap that applied */
    tw_health_component components[TW_HEALTH_COMPONENTS];
} tw_health;

/* One launch: where it starts, how far it went, how it ended. */
typedef struct tw_launch_span {
    int index;         /* 1-based, in log order */
    const char *start; /* why it starts there: "log" (the first), "start line", "step counter went back" */
    tw_source where;   /* its start line; file NULL for the first launch */
    double first_time, last_time; /* its timestamped records, NAN without */
    int64_t first_step, last_step; /* -1 without steps */
    uint64_t step_records;
    int ranks;           /* with training steps */
    const char *outcome; /* "finished", "crashed", "killed", "out of memory", "nan loss",
                            "exit status", "ended" (none of these: the log goes on or stops) */
    char outcome_detail[TW_TEXT_MAX / 4]; /* the error that ended it, or "" */
    int errors, warnings;
} tw_launch_span;

typedef struct tw_launch_report {
    tw_launch_span span;
    tw_summary summary;
    int finding_count;
    tw_finding *findings; /* errors first */
    bool healthy;
    tw_health health;
} tw_launch_report;

#define TW_LAUNCH_LAST (-1) /* the launch a report shows by default */
#define TW_LAUNCH_ALL  0

/* A rare line no format read that looks like trouble (src/diagnose/templates.c). */
#define TW_UNUSUAL_MAX 10
#define TW_UNUSUAL_LAUNCHES 64 /* launches kept apart (TW_LAUNCHES_MAX) */
enum {
    TW_UNUSUAL_TROUBLE = 1,         /* error, fatal, fail, timeout, killed, refused ... */
    TW_UNUSUAL_ONE_RANK = 2,        /* on one rank of several */
    TW_UNUSUAL_AFTER_LAST_STEP = 4, /* first seen after its rank's last step */
};
typedef struct tw_unusual_line {
    char template_text[200]; /* numbers, hex, paths and quoted strings masked */
    char example[TW_MESSAGE_MAX]; /* its first line as printed (after the timestamp) */
    unsigned why;             /* TW_UNUSUAL_* */
    uint64_t count;           /* lines of this template */
    int rank;                 /* of its first line */
    tw_source where;          /* its first line (file borrowed from the run) */
    int ranks;                /* ranks it appeared on (counted mod 64) */
    int launch;               /* 1-based, of its first line */
    int launch_count;         /* launch_lines[i]: its lines in launch i + 1, i < launch_count */
    uint64_t launch_lines[TW_UNUSUAL_LAUNCHES];
} tw_unusual_line;

typedef struct tw_report {
    tw_summary summary;   /* of the launch shown (the last one with TW_LAUNCH_ALL) */
    int finding_count;
    tw_finding *findings; /* sorted: errors first, then by rule order */
    int input_count;
    tw_input_summary *inputs;
    bool healthy; /* no warning or error finding */
    int launch;   /* the launch shown, 1-based, or TW_LAUNCH_ALL */
    int launch_count;
    tw_launch_report *launches; /* every launch, in log order */
    tw_health health;           /* of the summary and findings above */
    int rank_health_count;
    struct tw_rank_health {
        int rank;
        tw_health health; /* its findings, the run-wide ones and its own data wait */
    } *rank_health;             /* the ranks with steps in the launch shown, by rank */
    int unusual_count;
    tw_unusual_line *unusual;   /* over the whole log (all launches), when the parsers delivered unread lines */
} tw_report;

/* The report of the last launch, with what the launches before it say
 * (earlier failures, restarts). */
int tw_diagnose(const tw_run *run, const tw_thresholds *t, tw_report **out);
/* The report of launch (1-based), TW_LAUNCH_LAST or TW_LAUNCH_ALL;
 * TW_EINVAL when the log has no such launch (tw_run_launches says how many). */
int tw_diagnose_launch(const tw_run *run, const tw_thresholds *t, int launch, tw_report **out);
/* Adds a finding made outside the log rules (what `run` sampled), keeping
 * the order (errors first) and the healthy flag right. f is copied. */
int tw_report_append(tw_report *report, const tw_finding *f);
void tw_report_free(tw_report *report);

/* The health score of a summary and its findings (tw_diagnose fills the
 * report's and each launch's; tw_report_append updates the report's). */
void tw_health_compute(const tw_summary *s, const tw_finding *findings, int count, tw_health *out);

/* As trainwatch's own messages (text, logfmt or JSON lines, as `run` and
 * `watch` were told to say them): one per finding and one that sums the
 * report up, command naming the subcommand ("run"). */
void tw_report_say(const tw_report *report, const char *command);
/* Human text; colour adds ANSI colours (use only on a terminal). */
void tw_report_write_text(FILE *out, const tw_report *report, bool colour);
/* JSON, schema "trainwatch.analysis/2" (docs/analysis-json.md). */
/* One finding as the JSON object both analyze's and trace's reports hold. */
void tw_finding_write_json(FILE *out, const tw_finding *f);
void tw_report_write_json(FILE *out, const tw_report *report);

/* ---- reading the inputs (src/analyze/) ------------------------------------
 *
 * What `trainwatch analyze` does with its FILE arguments, for any program:
 * each input is a rank's training log (its rank from its file name,
 * workerlog.3 or rank3, or its torchrun log directory, else the order of
 * the inputs; a lone input's from its content) or a GPU telemetry log
 * (nvidia-smi CSV, dmon, pmon, -q) read beside them. An input that cannot
 * be read is said on stderr in one line naming it and noted in the run
 * (the report lists it); the others are read all the same. */
struct tw_user_formats; /* src/parse/user_formats.h */

typedef struct tw_analyze_input_options {
    const tw_format *format;            /* NULL: detected per input (see trainwatch/parse.h) */
    const struct tw_user_formats *user; /* formats of the user's own, tried first; NULL: none */
    const char *gpu_columns;            /* a headerless nvidia-smi CSV's --query-gpu list; NULL: none */
    int jobs;                           /* threads reading one large plain file (tw_parser_set_jobs) */
    size_t block_size;                  /* their block size; 0: the default */
    bool explain;                       /* say on stderr what was read from each log */
    bool quiet;                         /* no progress line (else one on a terminal for large inputs) */
    tw_record_fn records;               /* non-NULL: the records go here, not into the run; GPU logs unread */
    void *records_arg;
} tw_analyze_input_options;

typedef struct tw_analyze_tally {
    int inputs; /* given */
    int logs;   /* of which training logs (the others: GPU telemetry) */
    int failed; /* could not be read (said, and noted in the run) */
} tw_analyze_tally;

/* Reads paths[0..count) into run as above; *out says how many were read.
 * TW_OK, or TW_ENOMEM before any input was read. */
int tw_analyze_read(tw_run *run, char *const *paths, int count, const tw_analyze_input_options *o,
                    tw_analyze_tally *out);

#define TW_ANALYSIS_SCHEMA "trainwatch.analysis/2"

#endif
