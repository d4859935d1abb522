/*
 * cmd_trace.c: `trainwatch trace [options] FILE...` reads profiler traces
 * (Kineto / PyTorch profiler and paddle.profiler chrome traces, .json or
 * .json.gz, and paddle.profiler summary text) and says where the time went.
 * Options and output choice only: the reading, the rules, the progress
 * line (progress_line.c) and the handler for a file cut while mapped
 * (cut_files.c) are src/trace/, behind trainwatch/trace.h.
 */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/outfile.h"
#include "../core/stream.h"
#include "cli.h"
#include "trainwatch/error.h"
#include "trainwatch/html.h"
#include "trainwatch/trace.h"

static const char usage_text[] =
    "usage: trainwatch trace [OPTIONS] FILE...   (- for stdin; .gz is read as is)\n\n"
    "Explains a profiler trace in numbers: per step, the GPU's time split into compute,\n"
    "communication, memcpy and idle, the idle time's causes (DataLoader, synchronisation,\n"
    "kernel gaps, host), top kernels and operators, copies, launches; then findings.\n"
    "Reads Kineto (PyTorch profiler) and paddle.profiler chrome traces, streaming, in\n"
    "bounded memory, and paddle.profiler summary text. Several files are several ranks\n"
    "(from distributedInfo, else the file name, else the order).\n\n"
    "options:\n"
    "  --json                 print the report as JSON (schema " TW_TRACE_SCHEMA ")\n"
    "  --html FILE            also write the report as one self-contained HTML page with charts\n"
    "                         (- : to standard output, instead of the text report)\n"
    "  --fail-on SEVERITY     exit 1 when a finding is at least this severe: error (default),\n"
    "                         warning or info\n"
    "  --color=WHEN           colours: auto (on a terminal, without NO_COLOR), always, never\n"
    "  --no-color             the same as --color=never\n"
    "  --progress=WHEN        a progress line on stderr: auto (on a terminal), always, never\n"
    "  --data-share F         GPU idle inside DataLoader spans above this share of step time\n"
    "                         is data-loading bound (0.10)\n"
    "  --idle-share F         GPU idle above this share of step time is reported (0.30)\n"
    "  --reader-ratio F       a Paddle summary's Reader Ratio above this share (0.30)\n"
    "  --short-kernel US      kernels shorter than this many microseconds are short (10)\n"
    "  --gap US               idle gaps between GPU work up to this are kernel gaps (10)\n"
    "  --straggler F          a rank whose median step is this x the ranks' median (1.2)\n"
    "  --threads N            threads reading a large plain (not gzip) trace file: 1 to 16;\n"
    "                         0, the default, one per core\n"
    "  -h, --help             show this help\n\n"
    "exit status:\n"
    "  0  analysed; no finding at or above the --fail-on severity\n"
    "  1  analysed; a finding at or above the --fail-on severity\n"
    "  2  bad usage, an input that could not be read at all, or the report could not be written\n";

enum {
    OPT_JSON = 1000,
    OPT_HTML,
    OPT_FAIL_ON,
    OPT_COLOR,
    OPT_NO_COLOR,
    OPT_PROGRESS,
    OPT_THREADS,
    OPT_HELP,
    OPT_NUMBER
};

typedef struct number_option {
    const char *name;
    size_t offset;
} number_option;

static const number_option numbers[] = {
    {"data-share", offsetof(tw_trace_options, data_share)},
    {"idle-share", offsetof(tw_trace_options, idle_share)},
    {"reader-ratio", offsetof(tw_trace_options, reader_ratio)},
    {"short-kernel", offsetof(tw_trace_options, short_kernel_us)},
    {"gap", offsetof(tw_trace_options, gap_us)},
    {"straggler", offsetof(tw_trace_options, straggler)},
};
#define NUMBER_COUNT (sizeof numbers / sizeof numbers[0])

typedef struct trace_cli {
    bool json;
    const char *html;     /* --html FILE, "-": stdout; NULL: none */
    int colour, progress; /* -1 auto, 0 never, 1 always */
    tw_severity fail_on;
    tw_trace_options o;
} trace_cli;

static int parse_options(int argc, char **argv, trace_cli *c)
{
    struct option longopts[NUMBER_COUNT + 10];
    size_t n = 0;
    longopts[n++] = (struct option){"json", no_argument, NULL, OPT_JSON};
    longopts[n++] = (struct option){"html", required_argument, NULL, OPT_HTML};
    longopts[n++] = (struct option){"fail-on", required_argument, NULL, OPT_FAIL_ON};
    longopts[n++] = (struct option){"color", required_argument, NULL, OPT_COLOR};
    longopts[n++] = (struct option){"no-color", no_argument, NULL, OPT_NO_COLOR};
    longopts[n++] = (struct option){"progress", required_argument, NULL, OPT_PROGRESS};
    longopts[n++] = (struct option){"threads", required_argument, NULL, OPT_THREADS};
    longopts[n++] = (struct option){"help", no_argument, NULL, OPT_HELP};
    for (size_t i = 0; i < NUMBER_COUNT; i++)
        longopts[n++] = (struct option){numbers[i].name, required_argument, NULL, OPT_NUMBER + (int)i};
    longopts[n] = (struct option){0, 0, 0, 0};
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case OPT_JSON:
            c->json = true;
            break;
        case OPT_HTML:
            c->html = optarg;
            break;
        case OPT_FAIL_ON:
            if (tw_cli_severity("trace", optarg, &c->fail_on) != 0)
                return -1;
            break;
        case OPT_COLOR:
            if (tw_cli_when("trace", "color", optarg, &c->colour) != 0)
                return -1;
            break;
        case OPT_NO_COLOR:
            c->colour = 0;
            break;
        case OPT_PROGRESS:
            if (tw_cli_when("trace", "progress", optarg, &c->progress) != 0)
                return -1;
            break;
        case OPT_THREADS: {
            double v;
            if (tw_cli_number("trace", "threads", optarg, &v) != 0)
                return -1;
            if (!(v >= 0 && v <= 16) || v != (int)v) { /* the range first: (int) of 1e30 is undefined */
                fprintf(stderr, "trainwatch trace: --threads takes a whole number from 0 to 16, not '%s'\n", optarg);
                return -1;
            }
            c->o.threads = (int)v;
            break;
        }
        case 'h':
        case OPT_HELP:
            fputs(usage_text, stdout);
            exit(tw_stream_flush(stdout) == TW_OK ? TW_EXIT_OK : TW_EXIT_USAGE);
        case '?':
            fprintf(stderr, "trainwatch trace: unknown or incomplete option '%s' (see trainwatch help trace)\n",
                    argv[optind - 1]);
            return -1;
        default: {
            size_t i = (size_t)(ch - OPT_NUMBER);
            double v;
            if (tw_cli_number("trace", numbers[i].name, optarg, &v) != 0)
                return -1;
            *(double *)((char *)&c->o + numbers[i].offset) = v;
        }
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "trainwatch trace: no input files (use - for stdin)\n");
        return -1;
    }
    return optind;
}

/* The progress line on standard error: as --progress says, or on auto a terminal. */
static bool show_progress(int setting)
{
    return setting >= 0 ? setting == 1 : isatty(STDERR_FILENO);
}

typedef struct html_trace {
    const tw_trace *trace;
    const char *title;
} html_trace;

static int write_page(FILE *out, const void *arg)
{
    const html_trace *p = arg;
    return tw_trace_write_html(out, p->trace, p->title);
}

static int run(int argc, char **argv)
{
    trace_cli c = {.colour = -1, .progress = -1, .fail_on = TW_SEV_ERROR};
    tw_trace_options_default(&c.o);
    c.o.map_files = true;
    tw_trace_catch_cut_files(TW_EXIT_USAGE);
    int first = parse_options(argc, argv, &c);
    if (first < 0)
        return TW_EXIT_USAGE;
    char err[600];
    if (c.html && strcmp(c.html, "-") != 0 && tw_outfile_check(c.html, err, sizeof err) != 0) {
        fprintf(stderr, "trainwatch trace: --html %s\n", err);
        return TW_EXIT_USAGE;
    }
    tw_trace *t;
    if (tw_trace_new(&t, &c.o) != TW_OK) {
        fprintf(stderr, "trainwatch: out of memory\n");
        return TW_EXIT_USAGE;
    }
    bool progress = show_progress(c.progress);
    int files = argc - first, unreadable = 0;
    for (int i = first; i < argc; i++) {
        tw_trace_progress_line line;
        tw_trace_progress_begin(&line, argv[i]);
        tw_trace_reading(argv[i]);
        int rc = tw_trace_add_file(t, argv[i], -1, progress ? tw_trace_progress_show : NULL, &line);
        tw_trace_reading(NULL);
        tw_trace_progress_end(&line);
        const tw_trace_rank *r = tw_trace_rank_at(t, tw_trace_rank_count(t) - 1);
        if (rc != TW_OK) {
            fprintf(stderr, "trainwatch: %s: %s\n", argv[i], r && r->error[0] ? r->error : tw_strerror(rc));
            unreadable++;
        } else if (r && r->error[0]) {
            fprintf(stderr, "trainwatch: %s: %s (after %llu events; what was read is analysed)\n", argv[i], r->error,
                    (unsigned long long)r->events);
        }
    }
    if (unreadable == files || tw_trace_finish(t) != TW_OK) {
        tw_trace_free(t);
        return TW_EXIT_USAGE;
    }
    bool html_stdout = c.html && strcmp(c.html, "-") == 0;
    if (c.json && !html_stdout)
        tw_trace_write_json(stdout, t);
    else if (!html_stdout)
        tw_trace_write_text(stdout, t, tw_cli_colour(c.colour));
    int status = unreadable ? TW_EXIT_USAGE : TW_EXIT_OK;
    if (c.html) {
        char title[256];
        const char *name = strrchr(argv[first], '/');
        snprintf(title, sizeof title, "trainwatch trace: %s%s", name ? name + 1 : argv[first],
                 files > 1 ? " and more" : "");
        html_trace page = {t, title};
        if (tw_cli_write_html("trace", c.html, write_page, &page) != 0)
            status = TW_EXIT_USAGE;
    }
    for (int i = 0; i < tw_trace_finding_count(t) && status == TW_EXIT_OK; i++) {
        if (tw_trace_finding_at(t, i)->severity >= c.fail_on)
            status = TW_EXIT_PROBLEMS;
    }
    tw_trace_free(t);
    if (tw_stream_flush(stdout) != TW_OK) {
        fprintf(stderr, "trainwatch trace: could not write the report to standard output: %s\n", strerror(errno));
        return TW_EXIT_USAGE;
    }
    return status;
}

const tw_command tw_cmd_trace = {
    .name = "trace",
    .summary = "explain a profiler trace (Kineto, paddle.profiler) in numbers",
    .usage = usage_text,
    .run = run,
};
