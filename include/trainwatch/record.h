/*
 * record.h: the record model every trainwatch component consumes.
 *
 * A log line becomes zero or more tw_record values. There are three kinds:
 *
 *   TW_REC_STEP   one training step (or one logging interval of steps): epoch,
 *                 step, loss and its named parts, learning rate, step time,
 *                 data-loader time, throughput, memory, ETA, other metrics.
 *   TW_REC_EVAL   an evaluation result: metrics by name, at a step or epoch.
 *   TW_REC_EVENT  something that happened: an OOM, a NaN/Inf check, an
 *                 exception, a checkpoint, a resume, a warning, a process exit,
 *                 a launch starting (a config dump, "init nccl context"), the
 *                 launcher's report of the rank that failed.
 *
 * Records are plain values with fixed-size storage: a parser fills one on the
 * stack and hands it to a callback, so parsing allocates nothing per line.
 * Which numeric fields a line carried is kept in a bit set (TW_F_*): a loss
 * of NaN is information, so NAN cannot double as "absent". Integer counters
 * that were not printed are -1. Every record carries its source (file name and
 * 1-based line number) so that a diagnosis can cite the evidence.
 *
 * The same model is written as JSON lines by `trainwatch analyze --records`
 * (schema "trainwatch.record/1", documented in docs/records.md) and read back
 * by the "trainwatch" format.
 */
#ifndef TRAINWATCH_RECORD_H
#define TRAINWATCH_RECORD_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#define TW_NAME_MAX 48      /* longest metric name kept, including NUL */
#define TW_METRICS_MAX 24   /* named metrics kept per record */
#define TW_METRICS_LOSS_SLOTS 4 /* of which the last are for names with "loss" */
#define TW_MESSAGE_MAX 240  /* event message kept, including NUL */
#define TW_USER_FRAME " | in your code: " /* in an exception's detail, before the user's deepest frame */

typedef enum tw_record_kind {
    TW_REC_STEP,
    TW_REC_EVAL,
    TW_REC_EVENT,
    TW_REC_LINE, /* a line no format read: only from a parser asked for them (tw_parser_set_unparsed) */
} tw_record_kind;

/* Event kinds; tw_event_name() gives the stable lower-case name used in JSON. */
#define TW_EVENT_LIST(X)                                                       \
    X(TW_EV_NONE, "none")                                                      \
    X(TW_EV_OOM, "oom")                                                        \
    X(TW_EV_NAN, "nan")                                                        \
    X(TW_EV_EXCEPTION, "exception")                                            \
    X(TW_EV_CHECKPOINT, "checkpoint")                                          \
    X(TW_EV_RESUME, "resume")                                                  \
    X(TW_EV_WARNING, "warning")                                                \
    X(TW_EV_EXIT, "exit")                                                      \
    X(TW_EV_SIGNAL, "signal")                                                  \
    X(TW_EV_FINISHED, "finished")                                              \
    X(TW_EV_LAUNCH, "launch")                                                  \
    X(TW_EV_ENVIRONMENT, "environment")                                        \
    X(TW_EV_LAUNCHER, "launcher")                                              \
    X(TW_EV_RANKS, "rank-assignment")                                          \
    X(TW_EV_STACKS, "stacks")                                                  \
    X(TW_EV_OVERFLOW, "overflow")

typedef enum tw_event_kind {
#define TW_EVENT_ENUM(name, text) name,
    TW_EVENT_LIST(TW_EVENT_ENUM)
#undef TW_EVENT_ENUM
        TW_EV_COUNT
} tw_event_kind;

/* Presence bits for the double fields of a record. */
enum tw_field {
    TW_F_LOSS = 1u << 0,
    TW_F_LR = 1u << 1,
    TW_F_BATCH_TIME = 1u << 2,
    TW_F_DATA_TIME = 1u << 3,
    TW_F_SAMPLES_PER_SEC = 1u << 4,
    TW_F_ETA = 1u << 5,
    TW_F_MEM = 1u << 6,
    TW_F_TIME = 1u << 7,
};

typedef struct tw_metric {
    char name[TW_NAME_MAX];
    double value;
} tw_metric;

typedef struct tw_source {
    const char *file;   /* borrowed: owned by the reader, valid while it lives */
    uint64_t line;      /* 1-based */
} tw_source;

typedef struct tw_record {
    tw_record_kind kind;
    tw_event_kind event;      /* TW_REC_EVENT only */
    tw_source source;
    int rank;                 /* -1: unknown (treated as rank 0) */
    unsigned fields;          /* TW_F_* bits: which doubles below are set */
    double time;              /* seconds since the epoch (TW_F_TIME) */

    int64_t epoch;            /* as the log counts it; -1 unknown */
    int64_t epoch_total;
    int64_t step;             /* step within the epoch, or the only counter */
    int64_t step_total;       /* steps per epoch (or in the run) if printed */
    int64_t global_step;      /* a run-wide counter, when the log has one */

    double loss;
    double lr;
    double batch_time;        /* seconds per step */
    double data_time;         /* seconds per step spent waiting for data */
    double samples_per_sec;
    double eta;               /* seconds */
    double mem_bytes;         /* device memory the framework reports */

    int metric_count;
    tw_metric metrics[TW_METRICS_MAX];

    int exit_code;            /* TW_EV_EXIT: the status; TW_EV_SIGNAL: the signal */
    char message[TW_MESSAGE_MAX]; /* events: the text (exception "Type: msg", path...) */
    char detail[TW_MESSAGE_MAX];  /* events: the last stack frame (then TW_USER_FRAME and the deepest
                                     frame of the user's own code, when another), op/tensor, ... */
} tw_record;

/* One sample of a GPU telemetry log (nvidia-smi CSV, dmon, pmon, -q) read
 * beside the training logs: not a record of the training, evidence about
 * the device it ran on. */
typedef struct tw_gpu_sample {
    int gpu;          /* the GPU's index; -1 when the output does not say */
    double time;      /* seconds since the epoch on the log clock (as step records), NAN without */
    double util;      /* GPU utilisation, percent; NAN when not given */
    double mem_used;  /* device memory used, bytes; NAN when not given */
    double mem_total; /* device memory in all, bytes; NAN when not given */
    uint64_t line;    /* 1-based */
} tw_gpu_sample;

static inline bool tw_has(const tw_record *r, unsigned field)
{
    return (r->fields & field) != 0;
}

/* Resets r to "nothing known": kind STEP, no fields, -1 counters, no metrics. */
void tw_record_init(tw_record *r);
/* The planned steps after r by its own counters (epoch E of N with step S
 * of M per epoch, or step S of M in all); epochs_from_zero: the log counts
 * epochs from 0. NAN when r does not say. */
double tw_record_steps_left(const tw_record *r, bool epochs_from_zero);
/* Where r is in the whole run, in steps: its run-wide counter, else epoch
 * times steps per epoch plus its step, else its step; NAN when it has none. */
double tw_record_position(const tw_record *r);
/* The steps left after r: planned_steps (a --max-steps) minus its
 * position when planned_steps > 0, else tw_record_steps_left. */
double tw_record_steps_to_plan(const tw_record *r, double planned_steps, bool epochs_from_zero);

/* Adds or replaces a named metric; names longer than TW_NAME_MAX-1 are cut.
 * Returns false when the record already holds TW_METRICS_MAX metrics (or
 * all but the TW_METRICS_LOSS_SLOTS kept for names with "loss", and this
 * name has none). */
bool tw_record_set_metric(tw_record *r, const char *name, size_t name_len, double value);

/* Returns the metric's value, or NAN when the record has no such metric. */
double tw_record_metric(const tw_record *r, const char *name);

/* Copies text into message or detail, cut to fit, control bytes replaced. */
void tw_record_set_text(char *dst, const char *text, size_t len);

/* False for the speed and bookkeeping numbers printed beside evaluation
 * results (fps, runtime, samples, *_cost, epoch...): "best" of them means
 * nothing and they are not results. */
bool tw_metric_is_result(const char *name);

const char *tw_event_name(tw_event_kind kind);
const char *tw_record_kind_name(tw_record_kind kind);

#endif
