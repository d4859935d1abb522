/*
 * trace.h: profiler traces explained in numbers (`trainwatch trace`).
 *
 * A tw_trace reads chrome-trace JSON as the PyTorch profiler (Kineto, both
 * the cpu_op/kernel and the older Operator/Kernel/Runtime schema) and
 * paddle.profiler write it, plain or gzip, and the Paddle profiler's printed
 * summaries. Each file is one rank. Events are handled as they stream past:
 * per-step accumulators, interval sets flushed behind a time watermark and
 * name tables with a cap keep memory bounded whatever the trace's size.
 * tw_trace_finish() turns the ranks into findings (tw_finding, the same
 * objects `analyze` reports), which the writers print as text or JSON
 * (schema "trainwatch.trace/1", docs/trace.md).
 *
 * Ownership: tw_trace_new/tw_trace_free; everything a tw_trace returns is
 * borrowed from it. Times are microseconds, as in the traces.
 */
#ifndef TRAINWATCH_TRACE_H
#define TRAINWATCH_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "trainwatch/analyze.h"

#define TW_TRACE_SCHEMA   "trainwatch.trace/1"
#define TW_TRACE_TOP      10  /* rows of each top table */
#define TW_TRACE_NAME_MAX 256 /* bytes of a name kept in the tables */
#define TW_TRACE_STREAMS  16  /* (device, stream) rows kept per rank */

typedef struct tw_trace_options {
    double short_kernel_us; /* kernels shorter than this are short (10) */
    double gap_us;          /* idle gaps between GPU work up to this are kernel-to-kernel gaps (10) */
    double data_share;      /* GPU idle inside DataLoader spans above this share of step time (0.10) */
    double reader_ratio;    /* a Paddle summary's Reader Ratio above this (0.30) */
    double straggler;       /* a rank's median step time this x the median of the ranks (1.2) */
    double idle_share;      /* GPU idle above this share of step time is reported (0.30) */
    int threads;            /* threads reading a large plain file: 0 one per core (at most 16), 1 one */
    uint64_t chunk_bytes;   /* bytes a thread reads at a time (0: 4 MiB); tests make it small */
    bool map_files;         /* read plain files through read-only mappings, not copies: faster,
                             * but a file cut shorter meanwhile raises SIGBUS, which the caller
                             * must handle (trainwatch trace does) */
} tw_trace_options;

void tw_trace_options_default(tw_trace_options *o);

/* Where one step's (or the whole trace's) wall time went. */
typedef struct tw_trace_split {
    double wall;                                      /* the window */
    double compute, comm, memcpy, idle;               /* sum to wall: comm/memcpy under compute count as compute */
    double idle_data, idle_sync, idle_gap, idle_host; /* idle attributed; sum to idle */
    double data_span;                                 /* host time inside DataLoader spans */
    double comm_total, comm_overlap;                  /* communication time, and the part under compute */
} tw_trace_split;

typedef struct tw_trace_step {
    int64_t id; /* N of ProfilerStep#N */
    double start, end;
    tw_trace_split split;
    double peak_allocated, peak_reserved; /* bytes, NAN when not profiled */
} tw_trace_step;

typedef struct tw_trace_stat {
    char name[TW_TRACE_NAME_MAX];
    uint64_t count;
    double total, self, max, min;
    uint64_t short_count; /* kernels shorter than short_kernel_us */
    double short_total;
    char issuer[TW_TRACE_NAME_MAX]; /* kernels: the operator that launched the first one */
} tw_trace_stat;

typedef enum tw_copy_dir {
    TW_COPY_HTOD,
    TW_COPY_DTOH,
    TW_COPY_DTOD,
    TW_COPY_HTOH,
    TW_COPY_PTOP,
    TW_COPY_OTHER,
    TW_COPY_MEMSET,
    TW_COPY_COUNT
} tw_copy_dir;

const char *tw_copy_dir_name(tw_copy_dir d);

typedef struct tw_trace_copy {
    uint64_t count;
    double bytes, time;
} tw_trace_copy;

/* One (device, stream): its GPU work by kind. A stream runs one thing at a
 * time, so durations are summed; idle is the stream's span (its first
 * start to its last end) less its busy time. */
typedef struct tw_trace_stream {
    int64_t device, stream;
    uint64_t kernels, copies;     /* kernels (compute and communication); memcpy/memset */
    double busy;                  /* compute + comm + memcpy */
    double compute, comm, memcpy; /* sums of durations */
    double first, last;           /* the span of its work */
} tw_trace_stream;

/* A row of a Paddle summary table (prof.summary()): times in µs, ratios as
 * shares; NAN where the table has "-" or no such column. */
typedef struct tw_trace_summary_row {
    char name[96];
    int depth;       /* indentation under the table's first row, in steps of two spaces */
    long long calls; /* -1: "-" */
    double cpu_total, cpu_avg, cpu_max, cpu_min, cpu_ratio;
    double gpu_total, gpu_avg, gpu_max, gpu_min, gpu_ratio;
} tw_trace_summary_row;

#define TW_SUMMARY_ROWS 24

/* The tables of a Paddle summary text beyond the Perf Summary. Overview
 * rows carry their time as cpu_* (host event types) or gpu_* (device
 * ones); the Operator Summary's top-level operators and the Kernel
 * Summary's kernels go into the rank's top_ops and top_kernels. */
typedef struct tw_trace_summary {
    int device_count;
    tw_trace_summary_row devices[8]; /* Device Summary: utilisation share in cpu_ratio */
    int overview_count;
    tw_trace_summary_row overview[TW_SUMMARY_ROWS];
    int model_count;
    tw_trace_summary_row model[TW_SUMMARY_ROWS];
    double step, communication, computation, overlap; /* Distribution Summary, µs; NAN if absent */
    int operators, kernels;                           /* rows read (the top ones kept) */
} tw_trace_summary;

/* One input: a rank's trace, or a Paddle summary text. */
typedef struct tw_trace_rank {
    const char *path;
    int rank;
    const char *source;      /* "kineto", "kineto-legacy", "paddle", "chrome", "paddle-summary" */
    char error[160];         /* "" when read to the end */
    uint64_t bytes;          /* bytes read (uncompressed) */
    uint64_t events;         /* trace events read */
    uint64_t skipped;        /* events skipped: no or bad ts/dur (negative, NaN), unknown ph */
    uint64_t late;           /* GPU/host intervals that came after their time was accounted */
    uint64_t flushes;        /* interval sets past their bound, accounted up to a watermark and dropped */
    uint64_t flushes_forced; /* of which host-span flushes ahead of the GPU work read so far */
    uint64_t names_cut;      /* strings longer than the reader keeps */
    uint64_t names_over;     /* events of names past a table's cap, counted under "(other)" */

    int step_count;       /* steps kept (ProfilerStep#N / ProfileStep#N) */
    uint64_t steps_over;  /* steps past the cap, accounted in the total only */
    tw_trace_step *steps; /* sorted by start */
    tw_trace_split total; /* all steps, or the span of GPU work when there are none */

    uint64_t kernels;
    double kernel_time, short_kernel_time;
    uint64_t short_kernels;
    int kernel_names, op_names;
    int top_kernel_count, top_op_count, top_self_count;
    tw_trace_stat top_kernels[TW_TRACE_TOP]; /* by total time */
    tw_trace_stat top_ops[TW_TRACE_TOP];     /* by total time */
    tw_trace_stat top_self[TW_TRACE_TOP];    /* operators by self time */

    tw_trace_copy copies[TW_COPY_COUNT];
    double pageable_bytes;
    uint64_t pageable_count;

    uint64_t launches; /* kernels matched to their runtime call by correlation id */
    double launch_delay_sum, launch_delay_max, launch_time_sum;
    uint64_t launch_bound; /* kernels shorter than the call that launched them */

    int stream_count;
    tw_trace_stream streams[TW_TRACE_STREAMS];
    uint64_t streams_over; /* GPU events on streams past the cap (counted in the totals only) */
    uint64_t sync_calls;
    double sync_time;

    double peak_allocated, peak_reserved; /* NAN: no memory events */

    /* Paddle summary text */
    double reader_ratio;     /* Perf Summary "Reader Ratio", a share; NAN if absent */
    double dataloader_ratio; /* Model/Overview Summary Dataloader / ProfileStep, a share; NAN */
    double ips;              /* Perf Summary ips avg */
    int summary_blocks;      /* Perf Summary blocks read (several: one finding each) */
    double block_ratios[8];
    tw_trace_summary summary; /* the other tables */
} tw_trace_rank;

typedef struct tw_trace tw_trace;

int tw_trace_new(tw_trace **out, const tw_trace_options *o);
void tw_trace_free(tw_trace *t);

/* Called every ~16 MiB read: bytes read so far (compressed for .gz) of total
 * (the file size, 0 when unknown) and events so far. */
typedef void (*tw_trace_progress_fn)(void *arg, uint64_t done, uint64_t total, uint64_t events);

/* Reads one file (path "-": stdin) as one rank; rank < 0: from the trace's
 * distributedInfo, else the file name, else the order. Returns TW_OK, or an
 * error when nothing could be read (the rank then keeps its error). A file
 * that ends early or is not JSON from some point keeps what was read before,
 * with rank->error naming the byte offset. */
int tw_trace_add_file(tw_trace *t, const char *path, int rank, tw_trace_progress_fn progress, void *arg);
/* The same over bytes in memory (tests, fuzzing); path names it. */
int tw_trace_add_buffer(tw_trace *t, const char *path, const char *data, size_t len, int rank);

/* A progress line on stderr for one file (progress_line.c), "trace.json.gz
 * 312 MiB of 1024 MiB  4.1M events/s  ETA 0:12", redrawn in place:
 * tw_trace_progress_begin before the file, tw_trace_progress_show as
 * tw_trace_add_file's progress (arg: the line), tw_trace_progress_end after
 * it, which clears the line if one was drawn. */
typedef struct tw_trace_progress_line {
    const char *path; /* borrowed */
    struct timespec start;
    bool shown;
} tw_trace_progress_line;
void tw_trace_progress_begin(tw_trace_progress_line *p, const char *path);
void tw_trace_progress_show(void *arg, uint64_t done, uint64_t total, uint64_t events);
void tw_trace_progress_end(tw_trace_progress_line *p);

/* Plain files are read through mappings (map_files): one cut shorter while
 * it is read raises SIGBUS. tw_trace_catch_cut_files installs a
 * process-wide handler (cut_files.c) that says "trainwatch: PATH: the file
 * became shorter while it was read" and exits with exit_status; other
 * faults die as without it. tw_trace_reading names the input being read
 * (NULL between inputs; path borrowed until then). */
void tw_trace_catch_cut_files(int exit_status);
void tw_trace_reading(const char *path);

/* Runs the rules over the ranks read; call once, after the last add. */
int tw_trace_finish(tw_trace *t);

int tw_trace_rank_count(const tw_trace *t);
const tw_trace_rank *tw_trace_rank_at(const tw_trace *t, int i);
int tw_trace_finding_count(const tw_trace *t);
const tw_finding *tw_trace_finding_at(const tw_trace *t, int i);
bool tw_trace_healthy(const tw_trace *t);

void tw_trace_write_text(FILE *out, const tw_trace *t, bool colour);
void tw_trace_write_json(FILE *out, const tw_trace *t);

#endif
