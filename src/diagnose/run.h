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

#define TW_MAX_RANKS 1024
#define TW_RECENT 32          /* recent losses kept for spike detection */
#define TW_HIST_BINS 1200     /* log-spaced step-time bins, 1 us .. 1e6 s */
#define TW_EVENTS_KEPT 256
#define TW_FILES_MAX 4096

typedef struct tw_point {
    double pos;               /* progress position (global step) */
    double time;              /* NAN without a timestamp */
    double loss, lr, batch, data, ips, mem;
    unsigned fields;
    int64_t epoch, epoch_total, step, step_total;
    uint32_t file;            /* index into run->files */
    uint64_t line;
} tw_point;

typedef struct tw_series {
    tw_point points[TW_SERIES_MAX];
    size_t count;
    uint64_t stride, seen;    /* keep one point in every stride seen */
} tw_series;

typedef struct tw_gap {
    double seconds;
    tw_point before, after;
    bool across_eval;         /* an evaluation or checkpoint happened in the gap */
} tw_gap;

typedef struct tw_restart {
    tw_point before, after;   /* last point before, first point after */
} tw_restart;

typedef struct tw_rank {
    int rank;
    bool used;
    uint64_t steps;
    tw_point first, last;
    bool have_last;
    /* position bookkeeping */
    int64_t epoch_base;
    double epoch_offset, last_step_in_epoch;
    int64_t last_epoch;
    /* exact streaming facts */
    double sum_batch, sum_data;    /* over records with both, weighted by steps they stand for */
    double sum_weight;
    uint64_t both_count;
    uint32_t hist[TW_HIST_BINS];
    uint64_t hist_count;
    double batch_max;
    tw_point batch_max_point;
    bool have_nan;
    tw_point nan_point;
    tw_point before_nan[8];
    int before_nan_count;
    tw_point recent[8];            /* ring of the last points */
    int recent_count, recent_head;
    double recent_loss[TW_RECENT];
    int recent_loss_count, recent_loss_head;
    double recent_median;          /* of recent_loss, refreshed every 8 losses */
    unsigned recent_median_age;
    uint64_t spikes;
    double worst_spike_ratio;
    tw_point worst_spike;
    double worst_spike_median;
    tw_gap longest_gap;
    bool have_gap;
    uint32_t gap_hist[TW_HIST_BINS];
    uint64_t gap_count;
    bool event_since_last;         /* eval/checkpoint since the last step */
    int restarts;
    tw_restart first_restart, last_restart;
    tw_record last_step_record;    /* the last step as parsed (for metrics) */
    tw_series series;
} tw_rank;

typedef struct tw_event_note {
    tw_event_kind kind;
    int rank;
    uint32_t file;
    uint64_t line;
    double time;
    bool has_time;
    double last_pos;               /* progress of that rank when it happened */
    int code;
    char message[TW_MESSAGE_MAX];
    char detail[TW_MESSAGE_MAX];
} tw_event_note;

typedef struct tw_eval_note {
    char name[TW_NAME_MAX];
    double last, best;
    bool lower_is_better;
    int64_t best_step, last_step;
    uint32_t file;
    uint64_t line;
    uint64_t count;
} tw_eval_note;

/* An evaluation result that cannot be true: a top-k accuracy (or recall@k)
 * above the same metric at a larger k, in one record. The first is kept. */
typedef struct tw_contradiction {
    char low_name[TW_NAME_MAX], high_name[TW_NAME_MAX]; /* smaller k, larger k */
    double low, high;                                   /* low > high: the contradiction */
    int rank;
    uint32_t file;
    uint64_t line;
    uint64_t count;                                     /* records with one */
} tw_contradiction;

typedef struct tw_input_note {
    char *path;
    char *format;
    char *error;
    uint64_t lines, records;
} tw_input_note;

struct tw_run {
    tw_thresholds th;
    tw_rank *ranks[TW_MAX_RANKS];
    int rank_count;                /* highest used index + 1 */
    char *files[TW_FILES_MAX];
    uint32_t file_count;
    uint64_t steps, evals, events;
    uint64_t event_counts[TW_EV_COUNT];
    tw_event_note events_kept[TW_EVENTS_KEPT];
    int events_kept_count;
    tw_event_note last_exception;  /* the last one, even past the kept ones */
    bool have_last_exception;
    tw_eval_note evals_kept[TW_SUMMARY_METRICS];
    int eval_count;
    tw_contradiction contradiction;
    tw_input_note inputs[256];
    int input_count;
};

/* Median of the histogram (seconds), or NAN when empty. */
double tw_hist_quantile(const uint32_t *hist, uint64_t count, double q);

/* Copies out one field of the series' points (those that carry it). Returns
 * the count; values go to out (sized TW_SERIES_MAX). */
size_t tw_series_values(const tw_series *s, unsigned field, double *out, double *pos);

double tw_median(double *values, size_t n); /* reorders values */

#endif
