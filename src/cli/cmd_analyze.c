/*
 * cmd_analyze.c: `trainwatch analyze [options] FILE...` reads training logs
 * (files, .gz, or - for stdin), parses them into records, and prints the
 * diagnosis. With --records it prints the records instead (JSON lines,
 * schema trainwatch.record/1). With --html it also writes the report as one
 * self-contained HTML page (to a file, or - for stdout instead of the text).
 * Threshold options come from one table that also writes their help.
 */
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/outfile.h"
#include "../core/stream.h"
#include "../parse/gpu_log.h"
#include "../parse/user_formats.h"
#include "cli.h"
#include "explain.h"
#include "history.h"
#include "progress.h"
#include "trainwatch/analyze.h"
#include "trainwatch/error.h"
#include "trainwatch/parse.h"
#include "trainwatch/record_json.h"

// clang-format off
typedef struct threshold_option {
    const char *name;
    size_t offset;
    double scale; /* value on the command line times scale */
} threshold_option;

#define THRESHOLD_ROW(field, name, def, scale, arg, help) {name, offsetof(tw_thresholds, field), scale},
static const threshold_option thresholds[] = {TW_THRESHOLD_LIST(THRESHOLD_ROW)};
#undef THRESHOLD_ROW
// clang-format on

#define THRESHOLD_COUNT (sizeof thresholds / sizeof thresholds[0])

enum {
    OPT_FORMAT = 1000,
    OPT_JSON,
    OPT_RECORDS,
    OPT_COLOR,
    OPT_NO_COLOR,
    OPT_JOBS,
    OPT_BLOCK_SIZE,
    OPT_FAIL_ON,
    OPT_LAUNCH,
    OPT_HTML,
    OPT_PATTERN,
    OPT_FORMATS,
    OPT_EXPLAIN,
    OPT_QUIET,
    OPT_TEMPLATES,
    OPT_GPU_COLUMNS,
    OPT_HELP,
    OPT_THRESHOLD
};

typedef struct analyze_options {
    const tw_format *format;
    bool json, records, explain, quiet, templates;
    int colour;          /* -1 auto, 0 never, 1 always */
    int jobs;            /* threads per large plain file */
    size_t block_size;   /* their block size, 0: the default */
    tw_severity fail_on; /* exit 1 when a finding is at least this severe */
    int launch;          /* TW_LAUNCH_LAST, TW_LAUNCH_ALL or 1-based */
    const char *html;    /* --html FILE, "-": stdout; NULL: none */
    tw_thresholds th;
    tw_user_formats *user;   /* --pattern, --formats (tw_cli_user_format's) */
    const char *gpu_columns; /* --gpu-columns: a headerless nvidia-smi CSV's --query-gpu list */
    tw_cli_history history;  /* --history, --no-history, --history-job */
} analyze_options;

// clang-format off
/* The whole help: `trainwatch analyze --help`, `-h` and `trainwatch help analyze`. */
#define THRESHOLD_HELP(field, name, def, scale, arg, help) "  --" name arg help " (" #def ")\n"
static const char usage_text[] =
    "usage: trainwatch analyze [OPTIONS] FILE...   (- for stdin; .gz is read as is)\n\n"
    "Reads training logs and diagnoses the run, with evidence. Several files are\n"
    "several ranks (the rank comes from the file name, else the content, else the\n"
    "order of the files).\n\n"
    "options:\n"
    "  --format NAME          use this format instead of detecting (see trainwatch formats)\n"
    "  --pattern REGEX        a line format of your own: PCRE2 with named groups (?<step>...),\n"
    "                         (?<loss>...), (?<lr>...), (?<epoch>...), (?<step_time>...),\n"
    "                         (?<data_time>...); other names become metrics (repeatable)\n"
    "  --formats FILE         line formats of your own from a YAML file (formats: a list of\n"
    "                         name, pattern, detect, kind); tried before the built-in ones\n"
    "  --templates            after the report, the table of the lines no format read, grouped\n"
    "                         into templates (numbers, hex, paths, quoted strings masked)\n"
    "  --gpu-columns LIST     the columns of a headerless nvidia-smi CSV given beside the logs\n"
    "                         (--format=csv,noheader): the --query-gpu list that made it\n"
    "  --quiet                no progress line (shown on a terminal for inputs over 100 MB or\n"
    "                         20 files, unless CI is set)\n"
    "  --explain              say on stderr what was read from each input: the format (and\n"
    "                         whether a fallback), the fields and metrics, the first step line\n"
    "  --json                 print the report as JSON (schema " TW_ANALYSIS_SCHEMA ")\n"
    "  --records              print the parsed records as JSON lines (schema " TW_RECORD_SCHEMA ")\n"
    "  --html FILE            also write the report as one self-contained HTML page with charts\n"
    "                         (- : to standard output, instead of the text report)\n"
    "  --fail-on SEVERITY     exit 1 when a finding is at least this severe: error (default),\n"
    "                         warning or info\n"
    "  --launch N|last|all    which launch of the log to report (default last; all: every one, the\n"
    "                         last first); the launches table lists them all\n"
    "  --color=WHEN           colours: auto (on a terminal, without NO_COLOR), always, never\n"
    "  --no-color             the same as --color=never\n"
    "  --jobs N               threads reading one large plain file (default: one per core, at most 64)\n"
    "  --block-size BYTES     bytes each thread reads at a time (default 2 MiB, at least 256)\n"
    "  --history FILE         the run history the run is recorded in (default\n"
    "                         $XDG_DATA_HOME/trainwatch/runs.db; see trainwatch runs)\n"
    "  --no-history           do not record the run\n"
    "  --history-job NAME     the job it is recorded under (default: the first file's name)\n"
    "  -h, --help             show this help\n\n"
    "thresholds of the rules (the default in parentheses):\n"
    TW_THRESHOLD_LIST(THRESHOLD_HELP)
    "\nexit status:\n"
    "  0  analysed; no finding at or above the --fail-on severity\n"
    "  1  analysed; a finding at or above the --fail-on severity (by default: an error)\n"
    "  2  bad usage, an input that could not be read, no training records in any input,\n"
    "     or the report could not be written\n";
#undef THRESHOLD_HELP
// clang-format on

static int parse_threshold(analyze_options *o, size_t index, const char *arg)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !(v >= 0)) {
        fprintf(stderr, "trainwatch analyze: --%s needs a non-negative number, not '%s'\n", thresholds[index].name,
                arg);
        return -1;
    }
    *(double *)((char *)&o->th + thresholds[index].offset) = v * thresholds[index].scale;
    return 0;
}

static bool parse_count(const char *arg, long long *out)
{
    char *end;
    errno = 0;
    *out = strtoll(arg, &end, 10);
    return errno == 0 && end != arg && *end == '\0';
}

static int parse_severity(const char *arg, tw_severity *out)
{
    for (tw_severity s = TW_SEV_INFO; s <= TW_SEV_ERROR; s++) {
        if (strcmp(arg, tw_severity_name(s)) == 0) {
            *out = s;
            return 0;
        }
    }
    return -1;
}

static int parse_launch(const char *arg, int *out)
{
    long long v;
    if (strcmp(arg, "last") == 0)
        *out = TW_LAUNCH_LAST;
    else if (strcmp(arg, "all") == 0)
        *out = TW_LAUNCH_ALL;
    else if (parse_count(arg, &v) && v >= 1 && v <= 1000000)
        *out = (int)v;
    else
        return -1;
    return 0;
}

/* Flushes stdout; on a write error says so in one line and returns -1. */
static int finish_stdout(const char *what)
{
    int rc = tw_stream_flush(stdout);
    if (rc == TW_OK)
        return 0;
    int err = errno;
    fprintf(stderr, "trainwatch analyze: could not write %s to standard output: %s\n", what,
            err ? strerror(err) : tw_strerror(rc));
    return -1;
}

/* The help on stdout. It is longer than a pipe's or a device's buffer: a
 * write error is said with the errno of the write that failed (a flush
 * after it would only find the stream's error flag). */
static int write_help(void)
{
    errno = 0;
    if (fputs(usage_text, stdout) == EOF) {
        int err = errno;
        fprintf(stderr, "trainwatch analyze: could not write the help to standard output: %s\n",
                strerror(err ? err : EIO));
        return -1;
    }
    return finish_stdout("the help");
}

/* Returns the index of the first file argument, or -1 on a usage error. */
static int parse_options(int argc, char **argv, analyze_options *o)
{
    struct option longopts[THRESHOLD_COUNT + 18 + TW_CLI_HISTORY_LONGOPT_COUNT];
    static const struct option history_options[] = {TW_CLI_HISTORY_LONGOPTS};
    size_t n = 0;
    longopts[n++] = (struct option){"format", required_argument, NULL, OPT_FORMAT};
    longopts[n++] = (struct option){"json", no_argument, NULL, OPT_JSON};
    longopts[n++] = (struct option){"records", no_argument, NULL, OPT_RECORDS};
    longopts[n++] = (struct option){"color", required_argument, NULL, OPT_COLOR};
    longopts[n++] = (struct option){"no-color", no_argument, NULL, OPT_NO_COLOR};
    longopts[n++] = (struct option){"jobs", required_argument, NULL, OPT_JOBS};
    longopts[n++] = (struct option){"block-size", required_argument, NULL, OPT_BLOCK_SIZE};
    longopts[n++] = (struct option){"fail-on", required_argument, NULL, OPT_FAIL_ON};
    longopts[n++] = (struct option){"launch", required_argument, NULL, OPT_LAUNCH};
    longopts[n++] = (struct option){"html", required_argument, NULL, OPT_HTML};
    longopts[n++] = (struct option){"pattern", required_argument, NULL, OPT_PATTERN};
    longopts[n++] = (struct option){"formats", required_argument, NULL, OPT_FORMATS};
    longopts[n++] = (struct option){"explain", no_argument, NULL, OPT_EXPLAIN};
    longopts[n++] = (struct option){"quiet", no_argument, NULL, OPT_QUIET};
    longopts[n++] = (struct option){"templates", no_argument, NULL, OPT_TEMPLATES};
    longopts[n++] = (struct option){"gpu-columns", required_argument, NULL, OPT_GPU_COLUMNS};
    longopts[n++] = (struct option){"help", no_argument, NULL, OPT_HELP};
    for (size_t i = 0; i < TW_CLI_HISTORY_LONGOPT_COUNT; i++)
        longopts[n++] = history_options[i];
    for (size_t i = 0; i < THRESHOLD_COUNT; i++)
        longopts[n++] = (struct option){thresholds[i].name, required_argument, NULL, OPT_THRESHOLD + (int)i};
    longopts[n] = (struct option){0, 0, 0, 0};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_FORMAT:
            o->format = tw_format_find(optarg);
            if (!o->format) {
                fprintf(stderr, "trainwatch analyze: unknown format '%s' (see trainwatch formats)\n", optarg);
                return -1;
            }
            break;
        case OPT_JSON:
            o->json = true;
            break;
        case OPT_RECORDS:
            o->records = true;
            break;
        case OPT_COLOR:
            if (strcmp(optarg, "auto") == 0)
                o->colour = -1;
            else if (strcmp(optarg, "always") == 0)
                o->colour = 1;
            else if (strcmp(optarg, "never") == 0)
                o->colour = 0;
            else {
                fprintf(stderr, "trainwatch analyze: --color takes auto, always or never\n");
                return -1;
            }
            break;
        case OPT_NO_COLOR:
            o->colour = 0;
            break;
        case OPT_JOBS:
        case OPT_BLOCK_SIZE: {
            long long v;
            if (!parse_count(optarg, &v) || (c == OPT_JOBS && (v < 1 || v > TW_PARSE_JOBS_MAX)) ||
                (c == OPT_BLOCK_SIZE && v < TW_PARSE_BLOCK_MIN)) {
                fprintf(stderr, "trainwatch analyze: --%s takes a whole number %s, not '%s'\n",
                        c == OPT_JOBS ? "jobs" : "block-size", c == OPT_JOBS ? "from 1 to 64" : "of at least 256",
                        optarg);
                return -1;
            }
            if (c == OPT_JOBS)
                o->jobs = (int)v;
            else
                o->block_size = (size_t)v;
            break;
        }
        case OPT_FAIL_ON:
            if (parse_severity(optarg, &o->fail_on) != 0) {
                fprintf(stderr, "trainwatch analyze: --fail-on takes error, warning or info, not '%s'\n", optarg);
                return -1;
            }
            break;
        case OPT_LAUNCH:
            if (parse_launch(optarg, &o->launch) != 0) {
                fprintf(stderr,
                        "trainwatch analyze: --launch takes a launch number (1, 2, ...), last or all, not '%s'\n",
                        optarg);
                return -1;
            }
            break;
        case OPT_HTML:
            o->html = optarg;
            break;
        case OPT_EXPLAIN:
            o->explain = true;
            break;
        case OPT_QUIET:
            o->quiet = true;
            break;
        case OPT_TEMPLATES:
            o->templates = true;
            break;
        case OPT_GPU_COLUMNS: {
            tw_gpu_reader *probe;
            int rc = tw_gpu_reader_new(&probe);
            if (rc == TW_OK) {
                rc = tw_gpu_reader_set_columns(probe, optarg);
                tw_gpu_reader_free(probe);
            }
            if (rc != TW_OK) {
                fprintf(stderr,
                        "trainwatch analyze: --gpu-columns takes the --query-gpu list (names separated by commas, "
                        "with utilization.gpu or memory.used), not '%s'\n",
                        optarg);
                return -1;
            }
            o->gpu_columns = optarg;
            break;
        }
        case OPT_PATTERN:
        case OPT_FORMATS:
            if (tw_cli_user_format(&o->user, c == OPT_PATTERN ? "pattern" : "formats", optarg, "analyze") != 0)
                return -1;
            break;
        case 'h':
        case OPT_HELP:
            exit(write_help() == 0 ? TW_EXIT_OK : TW_EXIT_USAGE);
        case '?':
            fprintf(stderr, "trainwatch analyze: unknown or incomplete option '%s' (see trainwatch help analyze)\n",
                    argv[optind - 1]);
            return -1;
        default:
            if (tw_cli_history_option(&o->history, c, optarg))
                break;
            if (c >= OPT_THRESHOLD && parse_threshold(o, (size_t)(c - OPT_THRESHOLD), optarg) != 0)
                return -1;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "trainwatch analyze: no input files (use - for stdin)\n");
        return -1;
    }
    return optind;
}

static void write_record(void *arg, const tw_record *r)
{
    tw_record_write_json(arg, r);
}

/* A plain file whose last byte is not a newline (not stdin, not gzip). */
static bool ends_without_newline(const char *path)
{
    size_t n = strlen(path);
    if (strcmp(path, "-") == 0 || (n > 3 && strcmp(path + n - 3, ".gz") == 0))
        return false;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    struct stat sb;
    char last = '\n';
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 && pread(fd, &last, 1, sb.st_size - 1) != 1)
        last = '\n';
    close(fd);
    return last != '\n' && last != '\r';
}

typedef struct explained {
    tw_explain *explain;
    tw_record_fn fn;
    void *arg;
} explained;

static void explain_record(void *arg, const tw_record *r)
{
    explained *x = arg;
    if (r->kind != TW_REC_LINE)
        tw_explain_record(x->explain, r);
    x->fn(x->arg, r);
}

/* Parses one input into the run (or onto stdout as records). Returns 0, or
 * -1 when the input could not be read at all. */
/* The progress line's view of the inputs: bytes and files finished. */
typedef struct progress_state {
    tw_progress *line; /* NULL: no line */
    uint64_t bytes;
    int files;
} progress_state;

static uint64_t input_size(const char *path)
{
    struct stat st;
    return strcmp(path, "-") != 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
}

static int analyze_input(const char *path, int rank, const analyze_options *o, tw_run *run, progress_state *ps)
{
    tw_parser *p;
    int rc = tw_parser_open(&p, path, o->format, rank);
    if (rc == TW_OK)
        tw_progress_reading(ps->line, p, ps->bytes, ps->files);
    if (rc != TW_OK) {
        fprintf(stderr, "trainwatch: %s: %s\n", path, tw_strerror(rc));
        tw_run_note_input(run, path, NULL, 0, 0, tw_strerror(rc));
        return -1;
    }
    tw_parser_set_jobs(p, o->jobs, o->block_size);
    tw_parser_set_user_formats(p, o->user);
    tw_parser_set_unparsed(p, !o->records); /* the template miner's input */
    explained x = {o->explain ? tw_explain_new() : NULL, o->records ? write_record : tw_run_add,
                   o->records ? (void *)stdout : (void *)run};
    rc = x.explain ? tw_parser_run(p, explain_record, &x) : tw_parser_run(p, x.fn, x.arg);
    const tw_parse_stats *st = tw_parser_stats(p);
    if (x.explain)
        tw_explain_write(stderr, x.explain, tw_parser_path(p), st->format);
    tw_explain_free(x.explain);
    uint64_t records = st->steps + st->evals + st->events;
    int result = 0;
    if (rc != TW_OK) {
        if (st->lines > 0)
            fprintf(stderr, "trainwatch: %s: %s (after %llu lines)\n", tw_parser_path(p), tw_strerror(rc),
                    (unsigned long long)st->lines);
        else
            fprintf(stderr, "trainwatch: %s: %s\n", tw_parser_path(p), tw_strerror(rc));
        result = -1;
    } else if (records == 0) {
        fprintf(stderr, "trainwatch: %s: no training records recognised in %llu lines%s\n", tw_parser_path(p),
                (unsigned long long)st->lines, o->format ? "" : " (try --format; see trainwatch formats)");
    }
    if (st->lines_cut)
        fprintf(stderr, "trainwatch: %s: %llu lines longer than %u bytes were cut\n", tw_parser_path(p),
                (unsigned long long)st->lines_cut, TW_LINE_MAX);
    if (st->binary_lines)
        fprintf(stderr, "trainwatch: %s: skipped %llu lines with NUL bytes\n", tw_parser_path(p),
                (unsigned long long)st->binary_lines);
    tw_run_note_input(run, tw_parser_path(p), st->format, st->lines, records, rc == TW_OK ? NULL : tw_strerror(rc));
    if (rc == TW_OK && !o->records && ends_without_newline(path))
        tw_run_note_cut(run);
    tw_progress_reading(ps->line, NULL, ps->bytes += input_size(path), ++ps->files);
    tw_parser_close(p);
    return result;
}

/* The page's title: the first input, and how many more. */
static void html_title(char *buf, size_t cap, int argc, char **argv, int first)
{
    const char *name = strrchr(argv[first], '/');
    name = name ? name + 1 : argv[first];
    if (argc - first > 1)
        snprintf(buf, cap, "trainwatch: %s and %d more", name, argc - first - 1);
    else
        snprintf(buf, cap, "trainwatch: %s", name);
}

/* A GPU telemetry log given beside the training logs (nvidia-smi CSV, dmon,
 * pmon, -q; detected from its first lines, a headerless CSV by the number
 * of its columns with --gpu-columns): a plain file only. A headerless CSV
 * without --gpu-columns is said and counted as an input not read. */
typedef enum input_kind { INPUT_LOG, INPUT_GPU, INPUT_GPU_UNREAD } input_kind;

static input_kind input_kind_of(const char *path, const analyze_options *o)
{
    size_t n = strlen(path);
    if (strcmp(path, "-") == 0 || (n > 3 && strcmp(path + n - 3, ".gz") == 0))
        return INPUT_LOG;
    FILE *f = fopen(path, "r");
    if (!f)
        return INPUT_LOG;  /* the parser says why */
    enum { HEAD = 65536 }; /* a --query-gpu header with every field is about 7 KB */
    char *head = malloc(HEAD);
    size_t got = head ? fread(head, 1, HEAD, f) : 0;
    fclose(f);
    input_kind kind = INPUT_LOG;
    if (head && tw_gpu_log_detect(head, got))
        kind = INPUT_GPU;
    else if (head && o->gpu_columns && tw_gpu_log_headerless_fits(head, got, o->gpu_columns))
        kind = INPUT_GPU;
    else if (head && tw_gpu_log_headerless(head, got)) {
        kind = INPUT_GPU_UNREAD;
        fprintf(stderr,
                "trainwatch analyze: %s: a GPU log without its header (nvidia-smi --format=csv,noheader)%s: give "
                "its columns with --gpu-columns, the --query-gpu list that made it\n",
                path, o->gpu_columns ? " with another number of columns than --gpu-columns names" : "");
    }
    free(head);
    return kind;
}

typedef struct gpu_input {
    tw_run *run;
    const char *path;
    int rc;
} gpu_input;

static void add_gpu_sample(void *arg, const tw_gpu_sample *s)
{
    gpu_input *in = arg;
    if (in->rc == TW_OK)
        in->rc = tw_run_add_gpu(in->run, in->path, s);
}

/* Reads a GPU log into the run. Returns 0, or -1 when it could not be read. */
static int analyze_gpu_input(const char *path, const analyze_options *o, tw_run *run, bool alone)
{
    gpu_input in = {.run = run, .path = path};
    uint64_t lines = 0, samples = 0;
    int rc = o->records ? TW_OK : tw_gpu_log_read(path, o->gpu_columns, add_gpu_sample, &in, &lines, &samples);
    if (rc == TW_OK)
        rc = in.rc;
    if (rc != TW_OK)
        fprintf(stderr, "trainwatch: %s: %s\n", path, tw_strerror(rc));
    else if (!o->records && samples == 0)
        fprintf(stderr, "trainwatch: %s: a GPU log with no samples in %llu lines\n", path, (unsigned long long)lines);
    else if (alone)
        fprintf(stderr,
                "trainwatch: %s: GPU telemetry (%llu samples), no training records recognised: give the training "
                "logs beside it\n",
                path, (unsigned long long)samples);
    tw_run_note_input(run, path, "gpu-telemetry", lines, samples, rc == TW_OK ? NULL : tw_strerror(rc));
    return rc == TW_OK ? 0 : -1;
}

static bool use_colour(const analyze_options *o)
{
    if (o->colour >= 0)
        return o->colour == 1;
    const char *no = getenv("NO_COLOR");
    return isatty(STDOUT_FILENO) && !(no && *no);
}

/* Whether rank is among the n numbers of taken. */
static bool rank_taken(const int *taken, int n, int rank)
{
    for (int i = 0; i < n; i++) {
        if (taken[i] == rank)
            return true;
    }
    return false;
}

/* How many agents' (nodes') torchrun log directories the inputs come from. */
static int log_dir_nodes(int argc, char **argv, int first, const input_kind *kind)
{
    int nodes = 0;
    for (int i = first; i < argc; i++) {
        size_t node, other;
        if (kind[i] != INPUT_LOG || tw_rank_from_log_dir(argv[i], &node) < 0)
            continue;
        bool seen = false;
        for (int j = first; j < i && !seen; j++)
            seen = kind[j] == INPUT_LOG && tw_rank_from_log_dir(argv[j], &other) >= 0 && other == node &&
                   strncmp(argv[i], argv[j], node) == 0;
        nodes += !seen;
    }
    return nodes;
}

/* The length of path's directory part ("" for a bare name: 0). */
static size_t dir_len(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? (size_t)(slash - path) : 0;
}

/* The number a log input's file name gives (workerlog.3, rank3), not its
 * torchrun directory's (attempt_0/3/stderr.log); -1 when none. */
static int name_rank(const char *path, input_kind kind)
{
    size_t node;
    return kind == INPUT_LOG && tw_rank_from_log_dir(path, &node) < 0 ? tw_rank_from_path(path) : -1;
}

/* A number two inputs' names give (by_name[i]) from different directories
 * (node0/log/workerlog.0 and node1/log/workerlog.0: Paddle writes
 * workerlog.N by local rank on each node), or -1; *a, *b: the two inputs. */
static int repeated_name_rank(int argc, char **argv, int first, const int *by_name, int *a, int *b)
{
    for (int i = first; i < argc; i++) {
        for (int j = first; by_name[i] >= 0 && j < i; j++) {
            size_t dir = dir_len(argv[i]);
            bool same_dir = dir == dir_len(argv[j]) && strncmp(argv[i], argv[j], dir) == 0;
            if (by_name[j] == by_name[i] && !same_dir) {
                *a = j, *b = i;
                return by_name[i];
            }
        }
    }
    return -1;
}

/* The rank of each log input (ranks[i] for argv[i]): its name's
 * (workerlog.3, rank3), else its torchrun log directory's (attempt_0/3/
 * stderr.log) when every such input comes from one agent's directory. On
 * several nodes local ranks repeat and the path does not say which node is
 * which (its group_rank), so those are numbered like names without a rank:
 * in order, with the numbers no name took (a launcher's log among ranks'
 * logs must not take a rank's number). The same holds when two names in
 * different directories give one number (several nodes' workerlog.N): then
 * every input is numbered in order. A lone input keeps -1: the parser's
 * own hints decide. */
static int input_ranks(int argc, char **argv, int first, const input_kind *kind, int files, int *ranks)
{
    int nodes = log_dir_nodes(argc, argv, first, kind), taken = 0, a, b;
    for (int i = first; i < argc; i++)
        ranks[i] = name_rank(argv[i], kind[i]);
    int repeated = repeated_name_rank(argc, argv, first, ranks, &a, &b);
    if (repeated >= 0)
        fprintf(stderr,
                "trainwatch analyze: %s and %s both name rank %d from different directories: on several nodes "
                "these numbers are local ranks, which repeat, so the inputs are numbered in the order given\n",
                argv[a], argv[b], repeated);
    int *named = malloc(sizeof *named * (size_t)(argc - first + 1));
    if (!named)
        return TW_ENOMEM;
    if (nodes > 1)
        fprintf(stderr,
                "trainwatch analyze: the inputs come from the log directories of %d torchrun agents (nodes): "
                "their numbers are local ranks, which repeat from node to node, so the inputs are numbered in "
                "the order given\n",
                nodes);
    for (int i = first; i < argc; i++) {
        size_t node;
        int in_dir = kind[i] == INPUT_LOG ? tw_rank_from_log_dir(argv[i], &node) : -1;
        if (repeated >= 0 || (in_dir >= 0 && nodes > 1))
            ranks[i] = -1; /* numbered in order below */
        else if (in_dir >= 0)
            ranks[i] = in_dir;
        if (ranks[i] >= 0)
            named[taken++] = ranks[i];
    }
    for (int i = first, next = 0; i < argc && files > 1; i++) {
        if (kind[i] != INPUT_LOG || ranks[i] >= 0)
            continue;
        while (rank_taken(named, taken, next))
            next++;
        ranks[i] = next++;
    }
    free(named);
    return TW_OK;
}

/* The run in the history: job and name from the first input's file name
 * (stdin: "stdin"), the inputs as given. */
static void record_history(const analyze_options *o, tw_report *report, const tw_run *run, int argc,
                           char **argv, int first)
{
    const char *base = strrchr(argv[first], '/');
    base = strcmp(argv[first], "-") == 0 ? "stdin" : base ? base + 1 : argv[first];
    char inputs[512];
    tw_history_identity who = {.source = "analyze", .name = base, .job = base,
                               .inputs = tw_cli_join_words(argv + first, inputs, sizeof inputs),
                               .started = NAN, .ended = NAN};
    (void)argc;
    tw_cli_history_record("analyze", &o->history, &who, report, run);
}

static int analyze(analyze_options o, int argc, char **argv, int first)
{
    char err[600];
    if (o.html && o.records) {
        fprintf(stderr, "trainwatch analyze: --html and --records do not go together (records are not a report)\n");
        return TW_EXIT_USAGE;
    }
    if (o.html && strcmp(o.html, "-") != 0 && tw_outfile_check(o.html, err, sizeof err) != 0) {
        fprintf(stderr, "trainwatch analyze: --html %s\n", err);
        return TW_EXIT_USAGE;
    }
    tw_run *trun;
    if (tw_run_new(&trun, &o.th) != TW_OK) {
        fprintf(stderr, "trainwatch: out of memory\n");
        return TW_EXIT_USAGE;
    }
    input_kind *gpu = calloc((size_t)argc, sizeof *gpu);
    if (!gpu) {
        fprintf(stderr, "trainwatch: out of memory\n");
        tw_run_free(trun);
        return TW_EXIT_USAGE;
    }
    int files = 0, failed = 0;
    uint64_t total = 0;
    for (int i = first; i < argc; i++) {
        files += (gpu[i] = input_kind_of(argv[i], &o)) == INPUT_LOG;
        total += gpu[i] ? 0 : input_size(argv[i]);
    }
    int *ranks = malloc(sizeof *ranks * (size_t)argc);
    if (!ranks || input_ranks(argc, argv, first, gpu, files, ranks) != TW_OK) {
        free(ranks);
        fprintf(stderr, "trainwatch: out of memory\n");
        free(gpu);
        tw_run_free(trun);
        return TW_EXIT_USAGE;
    }
    progress_state ps = {tw_progress_wanted(o.quiet, total, files) ? tw_progress_start(total, files) : NULL, 0, 0};
    for (int i = first; i < argc; i++) {
        if (gpu[i] == INPUT_GPU_UNREAD) {
            failed++;
            tw_run_note_input(trun, argv[i], "gpu-telemetry", 0, 0, "a headerless GPU log: --gpu-columns needed");
            continue;
        }
        if (gpu[i]) {
            failed += analyze_gpu_input(argv[i], &o, trun, files == 0) != 0;
            continue;
        }
        if (analyze_input(argv[i], ranks[i], &o, trun, &ps) != 0)
            failed++;
    }
    tw_progress_stop(ps.line);
    free(ranks);
    free(gpu);
    files = argc - first;
    int status = failed ? TW_EXIT_USAGE : TW_EXIT_OK;
    if (o.records) {
        tw_run_free(trun);
        return finish_stdout("the records") == 0 ? status : TW_EXIT_USAGE;
    }
    tw_report *report;
    int rc = tw_diagnose_launch(trun, &o.th, o.launch, &report);
    if (rc == TW_EINVAL) {
        fprintf(stderr, "trainwatch analyze: --launch %d: the log holds %d launch%s\n", o.launch, tw_run_launches(trun),
                tw_run_launches(trun) == 1 ? "" : "es");
        tw_run_free(trun);
        return TW_EXIT_USAGE;
    }
    if (rc != TW_OK) {
        fprintf(stderr, "trainwatch: out of memory\n");
        tw_run_free(trun);
        return TW_EXIT_USAGE;
    }
    bool nothing =
        report->summary.step_records == 0 && report->summary.eval_records == 0 && report->summary.events == 0;
    if (failed == files && nothing) {
        tw_report_free(report);
        tw_run_free(trun);
        return TW_EXIT_USAGE;
    }
    if (!nothing)
        record_history(&o, report, trun, argc, argv, first); /* adds the baselines' findings */
    bool html_stdout = o.html && strcmp(o.html, "-") == 0;
    if (o.json && !html_stdout)
        tw_report_write_json(stdout, report);
    else if (!html_stdout)
        tw_report_write_text(stdout, report, use_colour(&o));
    if (o.html) {
        char title[256];
        html_title(title, sizeof title, argc, argv, first);
        if (tw_cli_write_report_html("analyze", o.html, report, trun, title, NULL) != 0)
            status = TW_EXIT_USAGE;
    }
    if (o.templates && !o.json && !html_stdout)
        tw_run_write_templates(stdout, trun);
    if (status == TW_EXIT_OK) {
        if (nothing)
            status = TW_EXIT_USAGE;
        for (int i = 0; i < report->finding_count && status == TW_EXIT_OK; i++) {
            if (report->findings[i].severity >= o.fail_on)
                status = TW_EXIT_PROBLEMS;
        }
    }
    tw_report_free(report);
    tw_run_free(trun);
    if (finish_stdout("the report") != 0)
        return TW_EXIT_USAGE;
    return status;
}

static int run(int argc, char **argv)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    analyze_options o = {.colour = -1,
                         .fail_on = TW_SEV_ERROR,
                         .launch = TW_LAUNCH_LAST,
                         .jobs = cores < 1                   ? 1
                                 : cores > TW_PARSE_JOBS_MAX ? TW_PARSE_JOBS_MAX
                                                             : (int)cores};
    tw_thresholds_default(&o.th);
    int first = parse_options(argc, argv, &o);
    return first < 0 ? TW_EXIT_USAGE : analyze(o, argc, argv, first);
}

const tw_command tw_cmd_analyze = {
    .name = "analyze",
    .summary = "read training logs and diagnose the run, with evidence",
    .usage = usage_text,
    .run = run,
};
