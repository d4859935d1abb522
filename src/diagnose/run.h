/*
 * run.h: what a tw_run keeps, visible to the rules (not to library users).
 *
 * Per rank: streaming facts that must be exact (counts, sums, first NaN and
 * what preceded it, the longest gap, step-time histogram, restarts) and a
 * downsampled series for shapes (trends, medians, regressions). Downsampling
 * halves the series and doubles the stride when it fills, so memory is fixed
 * and the series always spans the whole run evenly.
 */
#ifndef TW_DIAGNOSE_RUN_H
#define TW_DIAGNOSE_RUN_H

#include "trainwatch/analyze.h"

#define TW_RANKS_MAX    65536 /* distinct ranks kept; steps of more are counted, not kept */
#define TW_RECENT       32    /* recent losses kept for spike detection */
#define TW_HIST_BINS    1200  /* log-spaced step-time bins, 1 us .. 1e6 s */
#define TW_EVENTS_KEPT  256
#define TW_SHAPE_NOTES  16 /* events naming input shapes, for a memory spike's batch */
#define TW_EVENTS_TAIL  16 /* of which the last slots keep the latest events that are not routine */
#define TW_LAUNCHES_MAX 64 /* launches kept apart; later ones are analysed with the last kept */

/* Durations (seconds) in log-spaced bins, with the exact extremes so that a
 * quantile never reads outside what was observed. */
typedef struct tw_hist {
    uint32_t bins[TW_HIST_BINS];
    uint64_t count;
    double min, max; /* valid when count > 0 */
} tw_hist;

/* A named metric over all the records that carry it: the last value, the
 * best finite one (NAN and step -1 until there is one) and the count. */
typedef struct tw_templates tw_templates;

typedef struct tw_metric_note {
    tw_metric_summary s;
    bool lower_is_better; /* from the name: loss, error, time ... */
} tw_metric_note;

typedef struct tw_metric_notes {
    tw_metric_note items[TW_SUMMARY_METRICS]; /* in the order first seen; more are not kept */
    int count;
} tw_metric_notes;

/* Notes the named metrics of one record at step; count: false when the
 * record rewrites the last one (a progress bar redrawn). */
void tw_metric_notes_add(tw_metric_notes *notes, const tw_metric *metrics, int n, int64_t step, bool count);

/* Named training metrics kept per point (loss parts, accuracy, grad_norm)
 * in slots a rank gives out as it first sees each name: TW_POINT_LOSS_PARTS
 * to loss parts (loss_*), the rest to the others, so a dozen loss parts do
 * not crowd out the accuracy; names without a slot are in the rank's
 * train_metrics (last, best) only. */
#define TW_POINT_METRICS    12
#define TW_POINT_LOSS_PARTS 8

typedef struct tw_point {
    double pos;  /* progress position (global step) */
    double time; /* NAN without a timestamp */
    double loss, lr, batch, data, ips, mem;
    unsigned fields;
    unsigned metric_set; /* bit i: the slot i of its named metrics was logged (tw_series.metric) */
    int64_t epoch, epoch_total, step, step_total;
    uint32_t file; /* index into run->files */
    uint64_t line;
} tw_point;

typedef struct tw_series {
    tw_point *points; /* grown on demand up to TW_SERIES_MAX; owned */
    /* the named metrics of each point, by slot (tw_rank.metric_slot):
     * parallel to points, allocated with the first point that has one
     * (NULL before: a log without them pays nothing); owned */
    double (*metric)[TW_POINT_METRICS];
    size_t count, cap;
    uint64_t stride, seen; /* keep one point in every stride seen */
} tw_series;

/* Evaluation results over the run, for drawing (src/report/): each result
 * of a metric eval_metrics notes, at the position of its rank's last step.
 * Up to TW_EVALS_KEPT points; when full, every other evaluation is dropped
 * and then one in every stride kept, as for the step series. */
#define TW_EVALS_KEPT 2048

typedef struct tw_eval_point {
    double pos, time; /* time: NAN without a timestamp */
    double value;
    int metric; /* index into eval_metrics.items */
    int rank;
    uint64_t ordinal; /* of the evaluation record, from 0 */
    uint32_t file;    /* where the result was logged */
    uint64_t line;
} tw_eval_point;

typedef struct tw_eval_series {
    tw_eval_point *points; /* owned */
    size_t count, cap;
    uint64_t stride, seen;
} tw_eval_series;

typedef struct tw_gap {
    double seconds;
    tw_point before, after;
    bool across_eval; /* an evaluation or checkpoint happened in the gap */
} tw_gap;

typedef struct tw_restart {
    tw_point before, after; /* last point before, first point after */
} tw_restart;

/* One reading of a mixed-precision counter, where it was logged. */
typedef struct tw_scale_note {
    double value, pos;
    uint32_t file;
    uint64_t line;
} tw_scale_note;

/* fp16 loss-scaling health of a rank (rule_precision.c): the dynamic loss
 * scale its records print ("loss scale: 1.0", "loss_scale 8") and the steps
 * skipped on overflow (DeepSpeed's running "skipped=1585", Megatron's
 * per-interval "number of skipped iterations"). */
typedef struct tw_precision {
    uint64_t scale_count;
    tw_scale_note scale_first, scale_max, scale_last;
    tw_scale_note scale_floor; /* the first reading at or below 1 */
    bool have_floor;
    uint64_t floor_count; /* readings at or below 1 */
    bool have_skipped;
    double skipped_sum;       /* Megatron's counts, summed */
    tw_scale_note skipped;    /* the last running count (value) or sum, at its record */
    uint64_t overflows;       /* the scaler's "Skipping step" lines: it is dynamic */
    tw_scale_note first_overflow; /* where the first was (value unused) */
} tw_precision;

/* Notes a step record's loss-scale and skipped-step counters (run_precision.c). */
void tw_precision_note(tw_precision *pr, const tw_record *r, const tw_point *p);
/* Notes a loss scaler's overflow event: the scale it tried and the one it
 * reduced to, at p (the rank's position then) (run_precision.c). */
void tw_precision_overflow(tw_precision *pr, const tw_record *r, const tw_point *p);

typedef struct tw_rank {
    int rank;
    bool used;
    uint64_t steps;
    tw_point first, last;
    tw_point before_last; /* the record before last (valid when steps > 1) */
    tw_precision precision;
    bool have_last;
    /* position bookkeeping */
    int64_t epoch_base;
    double epoch_offset, last_step_in_epoch;
    int64_t last_epoch;
    bool steps_span_epochs; /* the step went on across an epoch change: it counts the run's steps */
    /* exact streaming facts */
    double sum_batch, sum_data; /* over records with both, weighted by steps they stand for */
    double sum_weight;
    uint64_t both_count;
    uint64_t step_span;           /* steps the logged records stand for (estimated) */
    double loss_first, loss_best; /* finite losses: NAN until one */
    double loss_best_pos;
    double mem_max;           /* device memory reported: NAN until one */
    tw_hist step_times;       /* logged step times */
    tw_point batch_max_point; /* where step_times.max was logged */
    bool have_nan;
    tw_point nan_point;       /* its loss: the non-finite value */
    char nan_component[TW_NAME_MAX]; /* a loss component that went first ("loss_cls"), "" for the loss */
    tw_point before_nan[8];
    int before_nan_count;
    tw_point recent[8]; /* ring of the last points */
    int recent_count, recent_head;
    double recent_loss[TW_RECENT];
    int recent_loss_count, recent_loss_head;
    double recent_median; /* of recent_loss, refreshed every 8 losses */
    double recent_noise;  /* mean absolute difference of successive recent losses, with it */
    bool spikes_smoothed; /* spikes judged on the smoothed loss the log prints (avg_loss ...) */
    unsigned recent_median_age;
    uint64_t spikes;
    double worst_spike_ratio;
    tw_point worst_spike;
    double worst_spike_median;
    tw_gap longest_gap;
    bool have_gap;
    /* the longest gap and the longest logged step time that can be a pause
     * of a healthy-looking run: not in its first steps, not at an epoch's
     * start, no evaluation or checkpoint in it (rule_timing.c's stalls) */
    tw_gap pause_gap;
    bool have_pause_gap;
    tw_point pause_step; /* its batch: the step time */
    bool have_pause_step;
    bool fine_times;     /* a timestamp with a fraction of a second was seen */
    tw_hist gaps;          /* time between steps, without evaluation in between */
    bool event_since_last; /* eval/checkpoint since the last step */
    int restarts;
    tw_restart first_restart, last_restart;
    tw_record last_step_record; /* the last step as parsed (for metrics) */
    uint64_t duplicates;        /* step records that repeated the one before exactly, not counted */
    /* a step-time field that is a running total ("time: 512.3" growing) */
    double total_first, total_last; /* the field's value at the start of the rising run and now */
    int total_rises;                /* records in a row where it rose */
    bool cumulative;                /* found so: step times are its differences */
    tw_point cumulative_point;      /* where that was decided */
    tw_point first_duplicate;
    tw_metric_notes train_metrics; /* the named metrics of its steps */
    /* the slot in tw_point.metric of each train_metrics item: -1 none,
     * -2 not decided yet (tw_run_new's ranks start all -2) */
    signed char metric_slot[TW_SUMMARY_METRICS];
    int metric_slots, loss_part_slots; /* given out */
    tw_series series;
} tw_rank;

typedef struct tw_event_note {
    tw_event_kind kind;
    int rank;
    uint32_t file;
    uint64_t line;
    double time;
    bool has_time;
    double last_pos; /* progress of that rank when it happened */
    int code;
    char message[TW_MESSAGE_MAX];
    char detail[TW_MESSAGE_MAX];
} tw_event_note;

/* An evaluation result that cannot be true: a top-k accuracy (or recall@k)
 * above the same metric at a larger k, in one record. The first is kept. */
typedef struct tw_contradiction {
    char low_name[TW_NAME_MAX], high_name[TW_NAME_MAX]; /* smaller k, larger k */
    double low, high;                                   /* low > high: the contradiction */
    int rank;
    uint32_t file;
    uint64_t line;
    uint64_t count; /* records with one */
} tw_contradiction;

/* Why a launch begins where it does. */
typedef enum tw_launch_start {
    TW_START_LOG,       /* the first launch: the start of the log */
    TW_START_BANNER,    /* a start line (config dump, "init nccl context", launcher banner) */
    TW_START_STEP_BACK, /* the step counter (or epoch) went back */
} tw_launch_start;

/* Where a launch sits in the log; the first record of any rank decides. */
typedef struct tw_launch_info {
    int index; /* 0-based, in log order */
    tw_launch_start start;
    bool have_start;
    uint32_t file;
    uint64_t line;
    int rank;
    tw_point before;              /* TW_START_STEP_BACK: the last point of the launch before */
    double first_time, last_time; /* of its timestamped records, NAN without */
} tw_launch_info;

#define TW_CURSOR_STARTS 8
#define TW_START_GAP     120.0 /* seconds of silence before a start line that make it a new launch */
#define TW_LAUNCH_SLACK  60.0  /* seconds between the start lines of two ranks of one launch */

/* The launch a rank's records go to now, whether that launch has seen the
 * rank do anything a start line could not be part of (a step, a failure),
 * and the start lines it printed in it (hashes): a process prints each of
 * them once, so the same one again is a new launch, and so is one printed
 * long after the rank's last record (TW_START_GAP). Logs come rank by rank,
 * so the last one found is looked at first. */
typedef struct tw_cursor {
    int rank;
    int launch;
    bool content;
    int start_count;
    uint64_t starts[TW_CURSOR_STARTS];
    double last_time; /* of the rank's last timestamped record, NAN before one */
} tw_cursor;

/* A fact about the environment or configuration a log states ("GPUs used:
 * 4", "PaddlePaddle: 2.2.0", a git commit, batch_size), one per distinct
 * key and value in a launch. */
#define TW_FACTS_MAX 24
typedef struct tw_fact {
    char key[32];
    char value[80];
    int rank;
    uint32_t file;
    uint64_t line;
} tw_fact;

typedef struct tw_input_note {
    char *path;
    char *format;
    char *error;
    uint64_t lines, records;
    bool cut; /* its last line has no newline (tw_run_note_cut) */
} tw_input_note;

/* A file read while it was also copied to a rotating file (`run --log-file`):
 * line N as read is line N - offsets[k] of the newest generation k where
 * that is at least 1; generation k is named by files[gen_files[k]]. */
typedef struct tw_rotation {
    uint32_t file;
    unsigned count;
    uint32_t *gen_files;
    int64_t *offsets;
} tw_rotation;

/* A run is a list of launches, and each launch is a tw_run of its own: the
 * first launch is the run itself, each later one a tw_run in launches[]
 * that shares the first one's thresholds and cites its files (diagnose
 * lends it the file names). The rules see one launch at a time. */
struct tw_run {
    tw_thresholds th;
    tw_launch_info launch;        /* this launch's place in the log */
    struct tw_run **launches;     /* the later launches (the first run only) */
    int launch_count, launch_cap; /* later launches: launch_count + 1 in all */
    uint64_t launches_folded;     /* launch starts past TW_LAUNCHES_MAX, not kept apart */
    tw_cursor *cursors;           /* one per rank seen, sorted by rank (the first run only) */
    int cursor_count, cursor_cap, cursor_last;
    tw_rank **ranks; /* the ranks seen, sorted by rank number */
    int rank_count, rank_cap;
    int rank_limit;            /* distinct ranks kept: TW_RANKS_MAX */
    int rank_last;             /* index of the last one found: logs come rank by rank */
    uint64_t over_limit_steps; /* step records of ranks past the limit, not analysed */
    int over_limit_first;      /* the first such rank */
    char **files;              /* file names, interned: records cite them by index */
    tw_rotation *rotation;     /* the first run's, lent to the launches' views like files; NULL: none */
    uint32_t file_count, file_cap;
    uint32_t *file_slots;     /* open addressing over files by name hash: index + 1, 0 empty */
    uint32_t file_slot_count; /* a power of two, at least twice file_count */
    uint32_t last_file;       /* the file interned last: records come one parser at a time */
    uint64_t steps, evals, events;
    uint64_t event_counts[TW_EV_COUNT];
    tw_event_note events_kept[TW_EVENTS_KEPT];
    int events_kept_count;
    int routine_kept;             /* of which warnings, checkpoints, resumes, NaN lines: at most half */
    uint64_t events_not_kept;     /* events the rules do not see (all are in event_counts) */
    tw_event_note shape_notes[TW_SHAPE_NOTES]; /* the first events that describe input shapes */
    int shape_note_count;
    tw_event_note last_exception; /* the last one, even past the kept ones */
    bool have_last_exception;
    tw_metric_notes eval_metrics;
    tw_contradiction contradiction;
    tw_fact facts[TW_FACTS_MAX]; /* the launch's environment and configuration, in the order first seen */
    int fact_count;
    tw_input_note *inputs;
    int input_count, input_cap;
    tw_eval_series eval_series;
    const struct tw_run_hooks *hooks;  /* the root's: what is done with unread lines and GPU hints */
    struct tw_gpu_notes *gpu;          /* GPU telemetry beside the logs (gpu.c); the first run owns it */
    const tw_gpu_summary *gpu_summary; /* this launch's share of it, set on the view the rules see */
    struct tw_templates *templates;    /* lines no format read, as templates (templates.c); the first run's */
    uint64_t lines_not_mined;          /* of those, lines the miner had no memory for */
};

/* What the root run does with what no rank's record holds: a line no
 * format read (the template miner, templates.c) and a record that may say
 * which GPU a rank uses (gpu.c); free releases what they keep in the run.
 * diagnose.c's tw_run_new hands them in, so run.c depends on neither. */
typedef struct tw_run_hooks {
    int (*unread_line)(tw_run *root, const tw_record *r, uint32_t file, int launch);
    bool (*gpu_hint_maybe)(const char *message);
    void (*gpu_hint)(tw_run *root, const tw_record *r, uint32_t file, int launch);
    void (*free)(tw_run *root);
} tw_run_hooks;

/* A run whose root hands unread lines and GPU hints to hooks (NULL: kept
 * nowhere); tw_run_new is this with diagnose.c's. */
int tw_run_new_with(tw_run **out, const tw_thresholds *t, const tw_run_hooks *hooks);

/* Where line `line` read from file is now: the generation of a rotated copy
 * that holds it (tw_run_note_rotation), file NULL when rotated away. */
tw_source tw_run_source(const tw_run *run, uint32_t file, uint64_t line);
/* "file:line" of a line read, for evidence text (where it is now, as above;
 * "output line N, rotated out of FILE" when it is gone). */
const char *tw_where(const tw_run *run, uint32_t file, uint64_t line, char *buf, size_t cap);

/* Launch i (0-based) of the run: i == 0 is the run itself. */
const tw_run *tw_run_launch(const tw_run *run, int i);

/* The rank numbered rank (rank numbers are sparse: 0, 5000, 7000 ...), or
 * NULL when none of its records was kept. */
const tw_rank *tw_run_rank(const tw_run *run, int rank);

/* Adds a duration; values that are not finite and >= 0 are not counted. */
void tw_hist_add(tw_hist *h, double seconds);
void tw_hist_merge(tw_hist *into, const tw_hist *from);
/* The q-quantile (seconds) within [min, max], or NAN when empty. */
double tw_hist_quantile(const tw_hist *h, double q);
/* How many values were at least x (by bins: those in x's bin count too). */
uint64_t tw_hist_count_from(const tw_hist *h, double x);

/* Copies out one field of the series' points (those that carry it). Returns
 * the count; values go to out (sized TW_SERIES_MAX). */
size_t tw_series_values(const tw_series *s, unsigned field, double *out, double *pos);

double tw_median(double *values, size_t n); /* reorders values */

#endif
