/*
 * parse.h: turning log text into tw_record values.
 *
 * A tw_parser reads one input (a file, a .gz file, or stdin), splits it into
 * lines, and hands each line to a table of formats. Each format is one module
 * behind a small vtable (tw_format, in src/parse/formats.h): detect() says
 * whether a line looks like that format, parse() turns it into records. The first format that produces
 * a step or eval record is locked in for the input (auto-detection); lines it
 * does not understand still go through the rest of the table (per-line
 * fallback). The "events" format (tracebacks, OOM, NaN checks, checkpoints)
 * runs on every line whatever format is locked.
 *
 * Ownership: tw_parser_open() allocates, tw_parser_close() frees. Records
 * passed to the callback are borrowed for the duration of the call; their
 * source.file points into the parser and stays valid until it is closed.
 */
#ifndef TRAINWATCH_PARSE_H
#define TRAINWATCH_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trainwatch/record.h"

typedef struct tw_parser tw_parser;

/* A log format (one module of src/parse/ behind a small vtable). */
typedef struct tw_format tw_format;

typedef void (*tw_record_fn)(void *arg, const tw_record *record);

typedef struct tw_parse_stats {
    uint64_t bytes;
    uint64_t lines;
    uint64_t steps, evals, events;
    uint64_t lines_cut;        /* lines longer than TW_LINE_MAX, cut there */
    uint64_t binary_lines;     /* lines with NUL bytes, skipped */
    uint64_t blocks;           /* read in blocks on threads (tw_parser_set_jobs): how many */
    uint64_t blocks_reparsed;  /* of those, parsed again in order (their start state differed) */
    const char *format;        /* the format locked in, or NULL */
} tw_parse_stats;

#define TW_LINE_MAX (1u << 20)  /* longer lines are cut (and counted) */
/* Line numbers a record's content may give (trainwatch JSON lines) stay
 * below this; the parser's own numbering may use the range above. */
#define TW_LINE_NUMBER_MAX (1ull << 39)

/* The table of formats, in detection order; *count receives its length. */
const tw_format *const *tw_formats(size_t *count);
/* Looks a format up by name; NULL when there is none. */
const tw_format *tw_format_find(const char *name);
/* Its name (for --format and the JSON output) and a one-line summary. */
const char *tw_format_name(const tw_format *f);
const char *tw_format_summary(const tw_format *f);

/* Opens path for parsing ("-" is stdin; .gz files are inflated). forced may
 * name a format to use instead of detection (NULL: detect). rank is the rank
 * to give records that do not say theirs (-1: guess from the file name).
 * Returns 0 or a negative TW_E* code; *out is set only on success. */
int tw_parser_open(tw_parser **out, const char *path, const tw_format *forced, int rank);

/* Threads for tw_parser_run() on a large plain file (not stdin, not .gz):
 * with jobs > 1 a file of at least 4 blocks is read in blocks of block_size
 * bytes (0: the default) on that many threads, in file order, records as
 * if read by one. */
#define TW_PARSE_JOBS_MAX 64
#define TW_PARSE_BLOCK_DEFAULT (2u << 20)
#define TW_PARSE_BLOCK_MIN 256u
void tw_parser_set_jobs(tw_parser *p, int jobs, size_t block_size);

/* Parses the whole input, calling fn for each record. Returns 0, or a
 * negative TW_E* code on a read error (records before it were delivered). */
int tw_parser_run(tw_parser *p, tw_record_fn fn, void *arg);

/* Parses text already in memory as if it were the whole input (fuzzing, tests). */
int tw_parser_feed(tw_parser *p, const char *data, size_t len, tw_record_fn fn, void *arg);

const tw_parse_stats *tw_parser_stats(const tw_parser *p);
/* Also deliver each non-blank line no format read, as a TW_REC_LINE record
 * (its text after the timestamp in message, the rest past TW_MESSAGE_MAX in
 * detail): the input of the template miner. Off by default. */
void tw_parser_set_unparsed(tw_parser *p, bool on);

/* Bytes of the input consumed so far (compressed bytes for .gz): safe to
 * read from another thread while tw_parser_run() runs (a progress line). */
uint64_t tw_parser_progress(const tw_parser *p);
const char *tw_parser_path(const tw_parser *p);
void tw_parser_close(tw_parser *p);

/* Live input (a followed file): tw_parser_push() parses the complete lines of
 * data and keeps a partial last line for the next push; nothing is flushed,
 * so a line split across reads is parsed once, whole. tw_parser_pending()
 * says how many bytes of such a partial line are held (a follower commits
 * its offset minus these). tw_parser_set_line() sets the number of the line
 * before the next one (when resuming from a saved offset). */
void tw_parser_push(tw_parser *p, const char *data, size_t len, tw_record_fn fn, void *arg);
size_t tw_parser_pending(const tw_parser *p);
uint64_t tw_parser_line(const tw_parser *p);
void tw_parser_set_line(tw_parser *p, uint64_t line);
/* Forgets a held partial line (the file was truncated under it). */
void tw_parser_drop_pending(tw_parser *p);

/* Where a follower can resume after a restart so that a fresh parser goes
 * on exactly as this one: `back` bytes before the end of what was pushed,
 * at the start of a multi-line block still open (an OLMo metric block, a
 * traceback: a fresh parser from there reads the whole block again), else
 * of the partial last line. `line` is the number of the line before that
 * point; `skip_line` says it lies inside a line cut at TW_LINE_MAX, whose
 * rest is to be dropped up to its newline (tw_parser_skip_line). Records
 * delivered so far all come from lines before that point. */
typedef struct tw_parser_resume {
    uint64_t back;
    uint64_t line;
    bool skip_line;
} tw_parser_resume;
void tw_parser_resume_point(const tw_parser *p, tw_parser_resume *out);
/* Live input that stops (or a file that ends for good): formats deliver
 * the blocks they hold, as at the end of input; a partial line stays held. */
void tw_parser_end_blocks(tw_parser *p, tw_record_fn fn, void *arg);
/* Resuming inside a cut line: drops what comes up to the next newline. */
void tw_parser_skip_line(tw_parser *p);

/* Opens a parser on no file at all, for tw_parser_feed() (name is borrowed). */
int tw_parser_new(tw_parser **out, const char *name, const tw_format *forced, int rank);

/* Rank implied by a file name: workerlog.N, rank N, ...; else by torchrun's
 * --log-dir layout (tw_rank_from_log_dir); -1 when none. */
int tw_rank_from_path(const char *path);
/* torchrun --log-dir writes LOGDIR/<run_id>_<random>/attempt_<n>/<local
 * rank>/stdout.log and stderr.log, one run directory per agent (node): the
 * local rank of such a path, and in *node the length of its prefix up to the
 * run directory (the node's); -1 when the path is not so laid out. A local
 * rank is the job's rank only on a single-node job. */
int tw_rank_from_log_dir(const char *path, size_t *node);

#endif
