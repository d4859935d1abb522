/*
 * internal.h: what the files of src/log/ share: the record as it travels
 * from a call to the sinks, the output buffer every formatter appends to,
 * the sink table, and the hooks between logger, sinks, async queue and
 * crash handling.
 *
 * Everything a formatter calls is async-signal-safe (no malloc, no locks,
 * no stdio, no locale): the fatal-signal handler formats the records still
 * queued with the same code.
 */
#ifndef TW_LOG_INTERNAL_H
#define TW_LOG_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rotate.h"
#include "trainwatch/log.h"

/* The longest formatted record; longer ones are cut and end in "...". */
#define TW_LOG_LINE_MAX   16384
#define TW_LOG_FIELDS_MAX 64

/* ---- the output buffer -------------------------------------------------- */

typedef struct tw_log_out {
    char *p;
    size_t len, cap; /* cap keeps one byte for the newline */
    bool cut;
} tw_log_out;

/* Inline: a record is made of many small pieces. Pieces of up to 16
 * bytes are copied with two fixed-size moves that may overlap, not a libc
 * call (both read before either writes). */
static inline void tw_out_mem(tw_log_out *o, const char *s, size_t n)
{
    size_t room = o->cap - o->len;
    if (n > room) {
        n = room;
        o->cut = true;
    }
    char *d = o->p + o->len;
    if (n >= 8 && n <= 16) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4 && n < 8) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    } else if (n > 0 && n < 4) {
        char a = s[0], b = s[n / 2], c = s[n - 1];
        d[0] = a;
        d[n / 2] = b;
        d[n - 1] = c;
    } else if (n > 16) {
        memcpy(d, s, n);
    }
    o->len += n;
}

static inline void tw_out_char(tw_log_out *o, char c)
{
    if (o->len < o->cap)
        o->p[o->len++] = c;
    else
        o->cut = true;
}

void tw_out_str(tw_log_out *o, const char *s);
void tw_out_int(tw_log_out *o, int64_t v);
/* Zero-padded to width digits. */
void tw_out_uint_pad(tw_log_out *o, uint64_t v, int width);
/* 15 significant digits, shortest form ("2.134", "1e-07", "3.0"); nan/inf
 * as "nan", "inf", "-inf". */
void tw_out_double(tw_log_out *o, double v);
/* A JSON string body (no quotes) with escapes; invalid UTF-8 bytes become
 * U+FFFD. */
void tw_out_json_text(tw_log_out *o, const char *s, size_t n);
/* Ends the line: "..." if cut, then a newline (always room for it). */
void tw_out_end(tw_log_out *o);

/* "2024-04-05 10:25:30.123" local time. */
void tw_out_asctime(tw_log_out *o, int64_t ns);
/* "2024-04-05T10:25:30.123+08:00" local time (RFC 3339, ms, zone). */
void tw_out_rfc3339(tw_log_out *o, int64_t ns);
/* Refreshes the cached UTC offset (not signal-safe; the log path calls it). */
void tw_log_clock_refresh(int64_t ns);

/* ---- records ------------------------------------------------------------ */

typedef struct tw_log_rec {
    int64_t ns; /* CLOCK_REALTIME */
    int level;
    const char *logger;
    const char *message;
    size_t message_len;
    const char *file, *func;
    int line;
    long thread;
    const tw_log_field *fields;
    size_t field_count;
} tw_log_rec;

/* The process facts every record carries, read once. */
typedef struct tw_log_process {
    int rank, local_rank, world_size;
    int pid;
    char host[256];
    const char *rank_source;
} tw_log_process;
const tw_log_process *tw_log_process_info(void);
/* Sets the rank facts (tw_log_set_rank, which also updates the gates). */
void tw_log_process_set(int rank, int local_rank, int world_size);

/* Writes a field value as text: 42, 2.134, true, the string as is,
 * <type shape=[..] size=N>. */
void tw_out_field_text(tw_log_out *o, const tw_log_field *f);

/* ---- formats ------------------------------------------------------------ */

typedef struct tw_log_pattern tw_log_pattern;
/* Compiles a Python logging pattern. On error returns TW_EINVAL and says
 * where in error (if given). */
int tw_log_pattern_compile(const char *text, tw_log_pattern **out, char *error, size_t error_len);
void tw_log_pattern_free(tw_log_pattern *p);
/* TW_LOG_DEFAULT_PATTERN, compiled once; never NULL after a first call that
 * had the memory. */
const tw_log_pattern *tw_log_pattern_default(void);
/* Formats the record (no newline). Signal-safe. */
void tw_log_pattern_format(const tw_log_pattern *p, const tw_log_rec *r, tw_log_out *o);
/* The message with its fields: "Step 100 loss=2.134". */
void tw_log_message_text(const tw_log_rec *r, tw_log_out *o);
/* One JSON object (no newline). Signal-safe. */
void tw_log_json_format(const tw_log_rec *r, tw_log_out *o);

/* ---- redaction ---------------------------------------------------------- */

/* Redacts the record's message and fields into storage (fields into
 * fields_out, TW_LOG_FIELDS_MAX of them; scratch for PCRE2's output).
 * Returns r itself when nothing needed changing, else a copy pointing into
 * storage. */
const tw_log_rec *tw_log_redact_record(const tw_log_rec *r, tw_log_rec *copy, tw_log_field *fields_out, char *storage,
                                       size_t storage_len, char *scratch, size_t scratch_len);
/* From now on (a fatal signal) PCRE2 runs on preallocated match data only. */
void tw_log_redact_signal_mode(void);

/* ---- sinks -------------------------------------------------------------- */

typedef enum tw_sink_kind { TW_SINK_CONSOLE, TW_SINK_FILE, TW_SINK_CALLBACK } tw_sink_kind;

struct tw_log_sink {
    tw_sink_kind kind;
    int level;
    bool json;
    bool color;
    int other_ranks_level;
    int flush_level;
    tw_log_pattern *pattern;
    char *path; /* files: expanded */
    tw_rotating_file *file;
    tw_log_callback callback;
    void *callback_arg;
    pthread_mutex_t lock;
    _Atomic uint64_t dropped;
    bool failing; /* said once on stderr, said again when it works */
    struct tw_log_sink *next;
};

/* The lowest level a sink takes on this rank. */
int tw_log_sink_threshold(const tw_log_sink *s);
int tw_log_sink_new_console(const tw_log_sink_options *o, tw_log_sink **out);
/* Opens the file; on failure the sink is made all the same (it drops and
 * counts its records) and the error returned. */
int tw_log_sink_new_file(const char *expanded_path, const tw_log_sink_options *o, tw_log_sink **out);
int tw_log_sink_new_callback(tw_log_callback fn, void *arg, const tw_log_sink_options *o, tw_log_sink **out);
/* "{rank}" replaced by the rank (malloc'd). */
char *tw_log_expand_path(const char *path);
/* Is s the sink these would make? (the duplicate guard) */
bool tw_log_sink_same(const tw_log_sink *s, tw_sink_kind kind, const char *path, tw_log_callback fn, void *arg);
/* Writes one formatted line (ending in its newline). in_signal: no waiting
 * on locks, no rotation, no stderr chatter, no callbacks. */
void tw_log_sink_write(tw_log_sink *s, const tw_log_rec *r, const char *line, size_t len, bool in_signal);
void tw_log_sink_flush(tw_log_sink *s, bool in_signal);
void tw_log_sink_free(tw_log_sink *s);

/* ---- the logger tree ---------------------------------------------------- */

struct tw_logger {
    struct tw_logger_gate gate; /* first: read by tw_log_enabled */
    char *name;
    struct tw_logger *parent;
    int level;                    /* own, TW_LEVEL_NOTSET: inherit */
    _Atomic(tw_log_sink *) sinks; /* pushed at the front, never removed before shutdown */
};

/* Calls fn on every sink of every logger (the crash handler, flush). */
void tw_log_each_sink(void (*fn)(tw_log_sink *s, void *arg), void *arg);
/* Delivers a record to the sinks of l and its ancestors (sync path; the
 * async writer calls it too). */
void tw_log_dispatch(const tw_logger *l, const tw_log_rec *r, bool in_signal);
/* Delivers an already redacted record, formatting into lines (3 x
 * TW_LOG_LINE_MAX bytes). */
void tw_log_dispatch_with(const tw_logger *l, const tw_log_rec *r, bool in_signal, char *lines);
/* Counts a record dropped. */
void tw_log_count_drop(uint64_t n);
/* Recomputes every logger's gate after a level or sink change. */
void tw_log_gates_update(void);

/* ---- async -------------------------------------------------------------- */

/* True when the record was queued (or dropped and counted) by the async
 * queue; false when async mode is off. */
bool tw_log_async_push(const tw_logger *l, const tw_log_rec *r);
/* How the async writer delivers what it dequeues: the logger's functions,
 * handed over at start so the queue depends on nothing above it. */
typedef struct tw_log_delivery {
    void (*dispatch)(const tw_logger *l, const tw_log_rec *r, bool in_signal);
    void (*dispatch_with)(const tw_logger *l, const tw_log_rec *r, bool in_signal, char *lines);
    void (*each_sink)(void (*fn)(tw_log_sink *s, void *arg), void *arg);
    const tw_logger *drops; /* where "records dropped" is said */
} tw_log_delivery;
/* Tells the queue and the crash handler how to deliver (logger.c, before
 * either can run). */
void tw_log_set_delivery(const tw_log_delivery *d);
/* Starts the queue of capacity records (0: 8192) and its writer thread. */
int tw_log_queue_start(size_t capacity);
/* The fatal-signal handlers (tw_log_install_crash_handlers sets the
 * delivery first). */
void tw_log_install_signal_handlers(void);
void tw_log_async_flush(void);
void tw_log_async_stop(void);
/* For the crash handler: writes what is queued, signal-safe. */
void tw_log_async_drain_in_signal(void);

#endif
