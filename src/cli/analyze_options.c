/*
 * analyze_options.c: the options of `trainwatch analyze`: the help (with the
 * rules' thresholds from the one table, TW_THRESHOLD_LIST), the option
 * table and their reading into analyze_options (analyze_options.h), each
 * wrong value said in one line naming the option. cmd_analyze.c is the
 * command itself: it reads the inputs, diagnoses and writes what was asked.
 * (As curl keeps tool_getparam.c beside tool_operate.c.)
 */
#include "analyze_options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../parse/gpu_log.h"
#include "trainwatch/error.h"
#include "trainwatch/record_json.h"

// clang-format off
enum {
    OPT_FORMAT = 1000, OPT_JSON, OPT_RECORDS, OPT_COLOR, OPT_NO_COLOR, OPT_JOBS, OPT_BLOCK_SIZE, OPT_FAIL_ON,
    OPT_LAUNCH, OPT_HTML, OPT_PATTERN, OPT_FORMATS, OPT_EXPLAIN, OPT_QUIET, OPT_TEMPLATES, OPT_GPU_COLUMNS,
    OPT_HELP, OPT_THRESHOLD
};
// clang-format on

// clang-format off
/* The whole help: `trainwatch analyze --help`, `-h` and `trainwatch help analyze`. */
#define THRESHOLD_HELP(field, name, def, scale, arg, help) "  --" name arg help " (" #def ")\n"
const char tw_analyze_usage[] =
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
    "  --gpu-hour-cost PRICE  what one GPU-hour costs: the money of the GPU time in the GPU logs\n"
    "  --gpu-prices FILE      prices per GPU model: lines 'MODEL PRICE' (as run takes them)\n"
    "  --gpu-idle-below PCT   GPU time in the GPU logs under this utilisation is idle (default 10)\n"
    "  --history FILE         the run history the run is recorded in (default\n"
    "                         $XDG_DATA_HOME/trainwatch/runs.db; see trainwatch runs)\n"
    "  --no-history           do not record the run\n"
    "  --history-job NAME     the job it is recorded under (default: the first file's name)\n"
    "  -h, --help             show this help\n\n"
    "thresholds of the rules and the run's plan (the default in parentheses):\n"
    TW_THRESHOLD_LIST(THRESHOLD_HELP)
    "\nexit status:\n"
    "  0  analysed; no finding at or above the --fail-on severity\n"
    "  1  analysed; a finding at or above the --fail-on severity (by default: an error)\n"
    "  2  bad usage, an input that could not be read, no training records in any input,\n"
    "     or the report could not be written\n";
#undef THRESHOLD_HELP
// clang-format on

static void write_record(void *arg, const tw_record *r)
{
    tw_record_write_json(arg, r);
}

static bool parse_count(const char *arg, long long *out)
{
    char *end;
    errno = 0;
    *out = strtoll(arg, &end, 10);
    return errno == 0 && end != arg && *end == '\0';
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
    else {
        fprintf(stderr, "trainwatch analyze: --launch takes a launch number (1, 2, ...), last or all, not '%s'\n", arg);
        return -1;
    }
    return 0;
}

/* --jobs N or --block-size BYTES. */
static int parse_reading(analyze_options *o, int c, const char *arg)
{
    long long v;
    bool jobs = c == OPT_JOBS;
    if (!parse_count(arg, &v) || (jobs && (v < 1 || v > TW_PARSE_JOBS_MAX)) || (!jobs && v < TW_PARSE_BLOCK_MIN)) {
        fprintf(stderr, "trainwatch analyze: --%s takes a whole number %s, not '%s'\n", jobs ? "jobs" : "block-size",
                jobs ? "from 1 to 64" : "of at least 256", arg);
        return -1;
    }
    if (jobs)
        o->in.jobs = (int)v;
    else
        o->in.block_size = (size_t)v;
    return 0;
}

static int parse_gpu_columns(analyze_options *o, const char *arg)
{
    tw_gpu_reader *probe;
    int rc = tw_gpu_reader_new(&probe);
    if (rc == TW_OK) {
        rc = tw_gpu_reader_set_columns(probe, arg);
        tw_gpu_reader_free(probe);
    }
    if (rc != TW_OK) {
        fprintf(stderr,
                "trainwatch analyze: --gpu-columns takes the --query-gpu list (names separated by commas, with "
                "utilization.gpu or memory.used), not '%s'\n",
                arg);
        return -1;
    }
    o->in.gpu_columns = arg;
    return 0;
}

// clang-format off
static const struct option named_options[] = {
    {"format", required_argument, NULL, OPT_FORMAT},         {"json", no_argument, NULL, OPT_JSON},
    {"records", no_argument, NULL, OPT_RECORDS},             {"color", required_argument, NULL, OPT_COLOR},
    {"no-color", no_argument, NULL, OPT_NO_COLOR},           {"jobs", required_argument, NULL, OPT_JOBS},
    {"block-size", required_argument, NULL, OPT_BLOCK_SIZE}, {"fail-on", required_argument, NULL, OPT_FAIL_ON},
    {"launch", required_argument, NULL, OPT_LAUNCH},         {"html", required_argument, NULL, OPT_HTML},
    {"pattern", required_argument, NULL, OPT_PATTERN},       {"formats", required_argument, NULL, OPT_FORMATS},
    {"explain", no_argument, NULL, OPT_EXPLAIN},             {"quiet", no_argument, NULL, OPT_QUIET},
    {"templates", no_argument, NULL, OPT_TEMPLATES},         {"gpu-columns", required_argument, NULL, OPT_GPU_COLUMNS},
    {"gpu-hour-cost", required_argument, NULL, 'C'},         {"gpu-prices", required_argument, NULL, 'G'},
    {"gpu-idle-below", required_argument, NULL, 'I'},
    {"help", no_argument, NULL, OPT_HELP},                   TW_CLI_HISTORY_LONGOPTS};
// clang-format on
#define NAMED_COUNT                                   (sizeof named_options / sizeof named_options[0])
#define COUNT_ROW(field, name, def, scale, arg, help) +1
enum { THRESHOLD_COUNT = 0 TW_THRESHOLD_LIST(COUNT_ROW) }; /* tw_threshold_count(), known here at compile time */
#undef COUNT_ROW

/* One option (c from getopt_long) into o; -1 on a usage error (said). */
static int store_option(analyze_options *o, int c, char *arg)
{
    switch (c) {
    case OPT_FORMAT:
        if (!(o->in.format = tw_format_find(arg)))
            fprintf(stderr, "trainwatch analyze: unknown format '%s' (see trainwatch formats)\n", arg);
        return o->in.format ? 0 : -1;
    case OPT_JSON:
        o->json = true;
        return 0;
    case OPT_RECORDS:
        o->in.records = write_record;
        o->in.records_arg = stdout;
        return 0;
    case OPT_COLOR:
        return tw_cli_when("analyze", "color", arg, &o->colour);
    case OPT_NO_COLOR:
        o->colour = 0;
        return 0;
    case OPT_JOBS:
    case OPT_BLOCK_SIZE:
        return parse_reading(o, c, arg);
    case OPT_FAIL_ON:
        return tw_cli_severity("analyze", arg, &o->fail_on);
    case OPT_LAUNCH:
        return parse_launch(arg, &o->launch);
    case OPT_HTML:
        o->html = arg;
        return 0;
    case OPT_EXPLAIN:
        o->in.explain = true;
        return 0;
    case OPT_QUIET:
        o->in.quiet = true;
        return 0;
    case OPT_TEMPLATES:
        o->templates = true;
        return 0;
    case OPT_GPU_COLUMNS:
        return parse_gpu_columns(o, arg);
    case OPT_PATTERN:
    case OPT_FORMATS:
        if (tw_cli_user_format(&o->user, c == OPT_PATTERN ? "pattern" : "formats", arg, "analyze") != 0)
            return -1;
        o->in.user = o->user;
        return 0;
    case 'h':
    case OPT_HELP:
        exit(tw_cli_write_help("analyze", tw_analyze_usage) == 0 ? TW_EXIT_OK : TW_EXIT_USAGE);
    case 'C':
    case 'G':
    case 'I':
        return tw_cli_cost_option("analyze", c, arg, &o->cost);
    default:
        if (tw_cli_history_option(&o->history, c, arg))
            return 0;
        double v;
        size_t row = (size_t)(c - OPT_THRESHOLD);
        if (c >= OPT_THRESHOLD && row < tw_threshold_count()) {
            if (tw_cli_number("analyze", tw_threshold_option(row), arg, &v) != 0)
                return -1;
            tw_threshold_set(&o->th, row, v);
        }
        return 0;
    }
}

/* Returns the index of the first file argument, or -1 on a usage error. */
int tw_analyze_parse_options(int argc, char **argv, analyze_options *o)
{
    struct option longopts[NAMED_COUNT + THRESHOLD_COUNT + 1];
    memcpy(longopts, named_options, sizeof named_options);
    for (size_t i = 0; i < THRESHOLD_COUNT; i++)
        longopts[NAMED_COUNT + i] =
            (struct option){tw_threshold_option(i), required_argument, NULL, OPT_THRESHOLD + (int)i};
    longopts[NAMED_COUNT + THRESHOLD_COUNT] = (struct option){0, 0, 0, 0};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == '?') {
            fprintf(stderr, "trainwatch analyze: unknown or incomplete option '%s' (see trainwatch help analyze)\n",
                    argv[optind - 1]);
            return -1;
        }
        if (store_option(o, c, optarg) != 0)
            return -1;
    }
    if (optind >= argc) {
        fprintf(stderr, "trainwatch analyze: no input files (use - for stdin)\n");
        return -1;
    }
    return optind;
}
