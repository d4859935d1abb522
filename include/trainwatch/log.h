/*
 * log.h: libtrainwatch logging: structured, rotating, rank-aware, redacting,
 * crash-safe logging from inside a training process.
 *
 *   tw_log_options o = tw_log_options_default();
 *   o.file_path = "logs/train_rank_{rank}.log";      // 10 MB x 5 by default
 *   tw_log_setup(&o);                                 // twice: no duplicate lines
 *   tw_logger *log = tw_logger_get("trainer.data");
 *   TW_LOG_INFO(log, "Step", tw_field_int("step", 100), tw_field_double("loss", 2.134));
 *
 * Loggers are named by dots ("trainer.data" is a child of "trainer", every
 * logger a child of the root ""); a logger without its own level inherits its
 * parent's. Sinks (console, rotating file, JSON lines, callback) hang on a
 * logger, each with its own level; a record goes to the sinks of its logger
 * and of all its ancestors, as Python's propagation does. Adding a sink the
 * logger or an ancestor already has (the same console, the same path) returns
 * the one there: configuring twice never duplicates lines.
 *
 * Costs: a call below the logger's level is one load and one branch (the
 * TW_LOG_* macros test tw_log_enabled before building anything). An enabled
 * call redacts, formats once per format and writes, with no allocation; in
 * async mode it only copies the record into a bounded lock-free queue, and
 * a full queue drops the record and counts it, never blocking.
 *
 * Failures never reach the training process: an unwritable file or a full
 * disk drops whole records, counts them and says so once on stderr.
 *
 * Ownership: loggers and sinks belong to the library (borrowed handles, valid
 * until tw_log_shutdown). Strings passed to a log call are borrowed for the
 * call only (async mode copies them).
 */
#ifndef TRAINWATCH_LOG_H
#define TRAINWATCH_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Python's numbers, so a binding maps levels one to one. */
typedef enum tw_log_level {
    TW_LEVEL_NOTSET = 0,
    TW_LEVEL_DEBUG = 10,
    TW_LEVEL_INFO = 20,
    TW_LEVEL_WARNING = 30,
    TW_LEVEL_ERROR = 40,
    TW_LEVEL_CRITICAL = 50,
    TW_LEVEL_OFF = 100,
} tw_log_level;

/* "DEBUG" ... "CRITICAL"; NULL for other numbers. */
const char *tw_log_level_name(int level);
/* Parses a level name (any case, "WARN" too) or number; TW_EINVAL if not one. */
int tw_log_level_parse(const char *text, int *level);

/* ---- fields ------------------------------------------------------------ */

typedef enum tw_field_type {
    TW_FIELD_INT,
    TW_FIELD_DOUBLE,
    TW_FIELD_STRING,
    TW_FIELD_BOOL,
    TW_FIELD_SUMMARY, /* a value described by type and shape, not content */
} tw_field_type;

typedef struct tw_field_summary_value {
    const char *type_name; /* "tensor float32", "dict", "str" */
    const int64_t *shape;  /* ndim numbers, borrowed */
    size_t ndim;
    int64_t size; /* elements or bytes, -1: unknown */
} tw_field_summary_value;

typedef struct tw_log_field {
    const char *key;
    tw_field_type type;
    union {
        int64_t i;
        double d;
        const char *s; /* NULL is written as null */
        bool b;
        tw_field_summary_value summary;
    } v;
} tw_log_field;

static inline tw_log_field tw_field_int(const char *key, int64_t v)
{
    tw_log_field f = {key, TW_FIELD_INT, {.i = v}};
    return f;
}
static inline tw_log_field tw_field_double(const char *key, double v)
{
    tw_log_field f = {key, TW_FIELD_DOUBLE, {.d = v}};
    return f;
}
static inline tw_log_field tw_field_str(const char *key, const char *v)
{
    tw_log_field f = {key, TW_FIELD_STRING, {.s = v}};
    return f;
}
static inline tw_log_field tw_field_bool(const char *key, bool v)
{
    tw_log_field f = {key, TW_FIELD_BOOL, {.b = v}};
    return f;
}
/* The seed's safe_log_data: a value's type and size/shape instead of its
 * content ("batch=<tensor float32 shape=[32,3,224,224] size=4816896>"). */
static inline tw_log_field tw_log_summary(const char *key, const char *type_name, const int64_t *shape, size_t ndim,
                                          int64_t size)
{
    tw_log_field f = {key, TW_FIELD_SUMMARY, {.summary = {type_name, shape, ndim, size}}};
    return f;
}

/* ---- loggers ----------------------------------------------------------- */

typedef struct tw_logger tw_logger;

/* The logger of this dotted name, created on first use ("" or NULL: the
 * root). Never NULL except when out of memory or past TW_LOGGERS_MAX. */
#define TW_LOGGERS_MAX 1024
tw_logger *tw_logger_get(const char *name);
const char *tw_logger_name(const tw_logger *l);
/* TW_LEVEL_NOTSET: inherit the parent's (the root's default is INFO). */
void tw_logger_set_level(tw_logger *l, int level);
/* The level in force (own or inherited). */
int tw_logger_level(const tw_logger *l);

/* Every tw_logger starts with this: the lowest level any of its sinks would
 * take, raised to its level. Read by tw_log_enabled only. */
struct tw_logger_gate {
    int threshold;
};

static inline bool tw_log_enabled(const tw_logger *l, int level)
{
    return l &&
           level >= __atomic_load_n(&((const struct tw_logger_gate *)(const void *)l)->threshold, __ATOMIC_RELAXED);
}

/* Logs one record. file/func/line: the call site (NULL/0: none). */
void tw_log_write(tw_logger *l, int level, const char *file, const char *func, int line, const char *message,
                  const tw_log_field *fields, size_t field_count);

/* For bindings: as tw_log_write, but the record is named `name` (NULL: l's
 * own name) while it goes to l's sinks and its ancestors': a Python handler
 * routes records of any logger through its own tw_logger. */
void tw_log_write_as(tw_logger *l, const char *name, int level, const char *file, const char *func, int line,
                     const char *message, const tw_log_field *fields, size_t field_count);

#define TW_LOG_AT(logger, level, message, ...)                                                                         \
    do {                                                                                                               \
        tw_logger *tw_log_l_ = (logger);                                                                               \
        if (tw_log_enabled(tw_log_l_, (level))) {                                                                      \
            const tw_log_field tw_log_f_[] = {{0}, __VA_ARGS__};                                                       \
            tw_log_write(tw_log_l_, (level), __FILE__, __func__, __LINE__, (message), tw_log_f_ + 1,                   \
                         sizeof tw_log_f_ / sizeof tw_log_f_[0] - 1);                                                  \
        }                                                                                                              \
    } while (0)
#define TW_LOG_DEBUG(logger, message, ...)    TW_LOG_AT(logger, TW_LEVEL_DEBUG, message, __VA_ARGS__)
#define TW_LOG_INFO(logger, message, ...)     TW_LOG_AT(logger, TW_LEVEL_INFO, message, __VA_ARGS__)
#define TW_LOG_WARNING(logger, message, ...)  TW_LOG_AT(logger, TW_LEVEL_WARNING, message, __VA_ARGS__)
#define TW_LOG_ERROR(logger, message, ...)    TW_LOG_AT(logger, TW_LEVEL_ERROR, message, __VA_ARGS__)
#define TW_LOG_CRITICAL(logger, message, ...) TW_LOG_AT(logger, TW_LEVEL_CRITICAL, message, __VA_ARGS__)

/* ---- sinks ------------------------------------------------------------- */

typedef struct tw_log_sink tw_log_sink;

/* The text formats: the default is
 *   2024-04-05 10:25:30.123 | INFO | trainer.data | load_batch:87 | Step 100 loss=2.134
 * i.e. "%(asctime)s | %(levelname)s | %(name)s | %(funcName)s:%(lineno)d | %(message)s".
 * A pattern uses Python logging's names: asctime, created, msecs, levelname,
 * levelno, name, message, funcName, lineno, filename, pathname, module,
 * process, thread, plus rank, local_rank, world_size, hostname; with
 * Python's %-flags (`%(levelname)-8s`), `%%` for a percent sign. The message
 * carries the fields as ` key=value`. */
#define TW_LOG_DEFAULT_PATTERN "%(asctime)s | %(levelname)s | %(name)s | %(funcName)s:%(lineno)d | %(message)s"

typedef struct tw_log_sink_options {
    int level;           /* the sink's own level (TW_LEVEL_NOTSET: everything its logger passes) */
    const char *pattern; /* text sinks: NULL for the default */
    bool json;           /* one JSON object per line instead of text */
    /* console: colour. -1 auto (a tty and no NO_COLOR), 0 never, 1 always */
    int color;
    /* console: on ranks other than 0 only records at or above this level
     * (default WARNING; TW_LEVEL_DEBUG: every rank writes everything) */
    int other_ranks_level;
    /* files: "{rank}" in the path becomes the rank; size rotation exactly as
     * Python's RotatingFileHandler(maxBytes, backupCount) */
    uint64_t max_bytes; /* 0: never rotate */
    unsigned backups;   /* 0: never rotate */
    /* files: records at or above this level are written at once; below it
     * they may wait in a 64 KiB buffer (written when full, at a higher
     * record, at tw_log_flush, at exit and on a fatal signal). The default
     * TW_LEVEL_DEBUG writes every record at once, as Python does. */
    int flush_level;
} tw_log_sink_options;

tw_log_sink_options tw_log_sink_options_default(void);

int tw_log_add_console(tw_logger *l, const tw_log_sink_options *o, tw_log_sink **out);
int tw_log_add_file(tw_logger *l, const char *path, const tw_log_sink_options *o, tw_log_sink **out);

/* A record as a callback sees it (all borrowed for the call). */
typedef struct tw_log_record {
    double time; /* seconds since the epoch */
    int level;
    const char *logger;
    const char *message; /* redacted, without the fields */
    const char *file, *func;
    int line;
    int rank, world_size;
    const tw_log_field *fields; /* redacted */
    size_t field_count;
    const char *text; /* the record in the sink's format (text or JSON), no newline */
    size_t text_len;
} tw_log_record;
typedef void (*tw_log_callback)(const tw_log_record *record, void *arg);
int tw_log_add_callback(tw_logger *l, tw_log_callback fn, void *arg, const tw_log_sink_options *o, tw_log_sink **out);

void tw_log_sink_set_level(tw_log_sink *s, int level);
/* Records this sink dropped (full disk, unwritable file, full queue). */
uint64_t tw_log_sink_dropped(const tw_log_sink *s);

/* ---- one-call setup ---------------------------------------------------- */

typedef struct tw_log_options {
    const char *logger;    /* where the sinks go; NULL: the root */
    int level;             /* the logger's level (default INFO) */
    bool console;          /* default true */
    int console_level;     /* default INFO; ranks other than 0: WARNING and up */
    const char *file_path; /* NULL: no file; "{rank}" expands */
    int file_level;        /* default DEBUG */
    uint64_t max_bytes;    /* default 10 MB */
    unsigned backups;      /* default 5 */
    const char *json_path; /* NULL: no JSON file; "{rank}" expands; rotates like file_path */
    const char *pattern;   /* NULL: the default text format */
    bool async;            /* default false */
} tw_log_options;

tw_log_options tw_log_options_default(void);
/* Sets the logger's level and adds the sinks asked for (existing ones are
 * kept, not added twice). Returns the first error (a file that cannot be
 * opened): the other sinks are set up all the same. */
int tw_log_setup(const tw_log_options *o);

/* ---- ranks ------------------------------------------------------------- */

typedef struct tw_log_rank_info {
    int rank, local_rank, world_size;
    const char *rank_source; /* the variable it came from, or NULL */
} tw_log_rank_info;

/* From the environment, first found wins: rank from PADDLE_TRAINER_ID,
 * PADDLE_GLOBAL_RANK, RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID
 * (else 0); world size from PADDLE_TRAINERS_NUM, PADDLE_GLOBAL_SIZE,
 * WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS (else 1); local
 * rank from PADDLE_LOCAL_RANK, LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
 * MPI_LOCALRANKID, SLURM_LOCALID (else the rank). Read once, at the first
 * logger or sink. */
tw_log_rank_info tw_log_rank(void);
/* Overrides what the environment said (bindings that know better). */
void tw_log_set_rank(int rank, int local_rank, int world_size);

/* ---- redaction --------------------------------------------------------- */

/* On by default, before any sink sees a record: values of fields whose key
 * has a secret word (password, passwd, pwd, secret, token, apikey,
 * authorization, auth, cookie, credential(s), session, bearer, jwt, or api/
 * private/access/secret + key; words split at non-alphanumerics and
 * camelCase: "hf_token" is secret, "tokens_per_sec" is not) become
 * "[REDACTED]"; in messages and string values, `Bearer X`, credentials in
 * URLs (scheme://user:pass@), `secretword=X` / `secretword: X`, and e-mail
 * addresses. docs/logging.md has the list. */
void tw_log_redact_enable(bool on);
/* Adds a PCRE2 pattern whose matches become "[REDACTED]" in messages and
 * string values. TW_EINVAL (and the reason in `error`, if given) when it
 * does not compile. */
int tw_log_redact_add(const char *pattern, char *error, size_t error_len);
/* Redacts text into out (always terminated); returns the length written.
 * What every record goes through; exported for bindings and tests. */
size_t tw_log_redact_text(const char *text, char *out, size_t cap);
/* True when a field key looks secret. */
bool tw_log_key_is_secret(const char *key);

/* ---- environment -------------------------------------------------------- */

/* Name/version pairs a binding adds to the environment record ("python",
 * "3.11.7"); copied. At most 32. */
int tw_log_environment_add(const char *name, const char *version);
/* Logs one INFO record "environment" on l (NULL: the root) with host, pid,
 * argv, cwd, user, start time, OS and kernel, CPU count, memory, git commit,
 * branch and dirty flag of the working tree around the current directory,
 * rank and world size, CUDA_VISIBLE_DEVICES, the NVIDIA driver and GPU names
 * (NVML, when present), and the added pairs. */
void tw_log_environment(tw_logger *l);
/* The same record named `name` (NULL: l's name) with the call site given
 * (file/func NULL, line 0: none), for bindings. */
void tw_log_environment_as(tw_logger *l, const char *name, const char *file, const char *func, int line);

/* ---- async mode, flushing, counts --------------------------------------- */

/* From now on records are copied into a bounded lock-free queue of
 * `capacity` records (0: 8192) and written by one thread. A full queue drops
 * the record and counts it; the count is logged when space returns. */
int tw_log_async_start(size_t capacity);
/* Waits until the queue is empty and every sink has written its lines. */
void tw_log_flush(void);
/* Records dropped so far: full queue, full disk, unwritable files. */
uint64_t tw_log_dropped_total(void);
/* Installs handlers for SIGSEGV, SIGBUS, SIGFPE, SIGABRT (tw_log_setup and
 * tw_log_async_start do it): queued and buffered records are written with
 * async-signal-safe calls, then the signal is raised again with its default
 * action. Handlers installed before are called instead of the default. */
void tw_log_install_crash_handlers(void);

struct tw_registry;
/* Registers trainwatch_log_dropped_total (a counter) in r. */
int tw_log_register_metrics(struct tw_registry *r);

/* Flushes, stops the writer thread, closes and frees every sink and resets
 * every level (logger handles stay valid; sink handles do not). Not to be
 * called while other threads log. */
void tw_log_shutdown(void);

#ifdef __cplusplus
}
#endif
#endif
