/*
 * cmd_compare.c: `trainwatch compare A B [C...]` lays runs side by side:
 * recorded ones (an ID or a name from `trainwatch runs`) and log files read
 * on the fly (one file each, diagnosed as analyze would, not recorded). The
 * comparison itself is the library's (trainwatch/history.h), the --html
 * page report/html_compare.c.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "history.h"
#include "../core/outfile.h"
#include "../report/html.h"
#include "trainwatch/error.h"
#include "trainwatch/parse.h"

static const char usage_text[] =
    "usage: trainwatch compare [--json] [--html FILE] [--history FILE] A B [C...]\n"
    "       trainwatch compare --prometheus URL [--since D] [--json] [--html FILE] 'run=\"a\"' 'run=\"b\"' ...\n\n"
    "Lays two to eight runs side by side, the first as the reference: step time,\n"
    "data-wait share, throughput, memory, losses and evaluation metrics; where the\n"
    "loss curves part (the first step where they differ beyond the runs' own\n"
    "noise); what differs in the environment and configuration the logs state;\n"
    "and a verdict in words on each run against the first. A run is an ID or a\n"
    "name from `trainwatch runs`, or a log file (read now, not recorded).\n\n"
    "options:\n"
    "  --json               as JSON (schema " TW_HISTORY_COMPARE_SCHEMA ")\n"
    "  --html FILE          also write the comparison as one self-contained HTML page with the\n"
    "                       runs' loss, step time and throughput overlaid (\"-\": stdout, instead)\n"
    "  --history FILE       the history file (default $XDG_DATA_HOME/trainwatch/runs.db)\n"
    "  --prometheus URL     read the runs from a Prometheus HTTP API instead (Prometheus, Thanos,\n"
    "                       Mimir): each run a label selector over trainwatch's series\n"
    "  --prometheus-header 'NAME: VALUE'\n"
    "                       with --prometheus: a request header (X-Scope-OrgID for Mimir), up to 8\n"
    "  --since D            with --prometheus: look this far back for the runs (default 15d)\n"
    "  -h, --help           show this help\n";

enum { OPT_JSON = 1000, OPT_HTML, OPT_HISTORY, OPT_HELP };

#define DEFAULT_SINCE (15 * 86400.0) /* Prometheus's default retention */

typedef struct compare_options {
    bool json;
    const char *html; /* --html FILE, "-": stdout; NULL: none */
    const char *history;
    tw_history_prometheus prometheus; /* --prometheus URL, --since D; url NULL: not from a Prometheus */
    const char *prometheus_headers[TW_CLI_PROMETHEUS_HEADERS]; /* --prometheus-header values */
} compare_options;

static int parse(int argc, char **argv, compare_options *o)
{
    static const struct option longopts[] = {
        {"json", 0, 0, OPT_JSON},       {"html", 1, 0, OPT_HTML},   {"history", 1, 0, OPT_HISTORY},
        TW_CLI_PROMETHEUS_LONGOPTS,     {"help", 0, 0, OPT_HELP},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_JSON:
            o->json = true;
            break;
        case OPT_HTML:
            o->html = optarg;
            break;
        case OPT_HISTORY:
            o->history = optarg;
            break;
        case 'h':
        case OPT_HELP:
            fputs(usage_text, stdout);
            exit(TW_EXIT_OK);
        default: {
            int taken = tw_cli_prometheus_option("compare", c, optarg, &o->prometheus, o->prometheus_headers);
            if (taken < 0)
                return -1;
            if (taken == 0)
                break;
            fprintf(stderr, "trainwatch compare: unknown or incomplete option '%s' (see trainwatch help compare)\n",
                    argv[optind - 1]);
            return -1;
        }
        }
    }
    int n = argc - optind;
    if (n < 2 || n > TW_HISTORY_COMPARE_MAX) {
        fprintf(stderr, "trainwatch compare: give two to %d runs (IDs, names or log files), not %d\n",
                TW_HISTORY_COMPARE_MAX, n);
        return -1;
    }
    char err[600];
    if (o->html && strcmp(o->html, "-") != 0 && tw_outfile_check(o->html, err, sizeof err) != 0) {
        fprintf(stderr, "trainwatch compare: --html %s\n", err);
        return -1;
    }
    return optind;
}

/* A log file diagnosed now, as analyze would read one file. */
static int view_of_log(const char *path, tw_history_view *out)
{
    tw_thresholds th;
    tw_thresholds_default(&th);
    tw_run *run;
    if (tw_run_new(&run, &th) != TW_OK) {
        fprintf(stderr, "trainwatch compare: out of memory\n");
        return -1;
    }
    tw_parser *p;
    int rc = tw_parser_open(&p, path, NULL, tw_rank_from_path(path));
    if (rc == TW_OK) {
        rc = tw_parser_run(p, tw_run_add, run);
        tw_parser_close(p);
    }
    tw_report *report = NULL;
    if (rc == TW_OK)
        rc = tw_diagnose(run, &th, &report);
    if (rc == TW_OK && report->summary.step_records == 0) {
        fprintf(stderr, "trainwatch compare: %s: no training steps recognised\n", path);
        rc = TW_EFORMAT;
    } else if (rc != TW_OK) {
        fprintf(stderr, "trainwatch compare: %s: %s\n", path, tw_strerror(rc));
    }
    if (rc == TW_OK) {
        const char *base = strrchr(path, '/');
        tw_history_identity who = {.source = "analyze", .name = base ? base + 1 : path, .job = base ? base + 1 : path,
                                   .inputs = path, .started = NAN, .ended = NAN};
        if (tw_history_view_of(&who, report, run, out) != TW_OK) {
            fprintf(stderr, "trainwatch compare: out of memory\n");
            rc = TW_ENOMEM;
        }
    }
    tw_report_free(report);
    tw_run_free(run);
    return rc == TW_OK ? 0 : -1;
}

/* A run named on the command line: a file that exists is a log; anything
 * else an ID or a name in the history (opened on first use). */
static int load(const char *arg, const compare_options *o, tw_history **h, tw_history_view *out)
{
    char err[600];
    if (o->prometheus.url) {
        if (tw_history_prometheus_view(&o->prometheus, arg, out, err, sizeof err) == TW_OK)
            return 0;
        fprintf(stderr, "trainwatch compare: %s\n", err);
        return -1;
    }
    struct stat st;
    if (stat(arg, &st) == 0 && S_ISREG(st.st_mode))
        return view_of_log(arg, out);
    if (!*h && !(*h = tw_cli_history_open("compare", o->history)))
        return -1;
    tw_history_entry e;
    if (tw_history_find(*h, arg, &e, err, sizeof err) != TW_OK ||
        tw_history_view_load(*h, e.id, out, err, sizeof err) != TW_OK) {
        fprintf(stderr, "trainwatch compare: %s%s\n", err,
                strchr(arg, '/') ? " (and no such file)" : " (see trainwatch runs)");
        return -1;
    }
    return 0;
}

typedef struct compare_page {
    const tw_history_view *views;
    size_t n;
} compare_page;

static int write_page(FILE *out, const void *arg)
{
    const compare_page *p = arg;
    return tw_html_compare_write(out, p->views, p->n);
}

static int run(int argc, char **argv)
{
    compare_options o = {.prometheus = {.since = DEFAULT_SINCE, .until = NAN}};
    int first = parse(argc, argv, &o);
    if (first < 0)
        return TW_EXIT_USAGE;
    size_t n = (size_t)(argc - first);
    tw_history_view views[TW_HISTORY_COMPARE_MAX];
    tw_history *h = NULL;
    size_t loaded = 0;
    int status = TW_EXIT_OK;
    for (; loaded < n; loaded++) {
        if (load(argv[first + (int)loaded], &o, &h, &views[loaded]) != 0) {
            status = TW_EXIT_USAGE;
            break;
        }
    }
    bool html_stdout = o.html && strcmp(o.html, "-") == 0;
    if (status == TW_EXIT_OK && !html_stdout) {
        if (o.json)
            tw_history_compare_write_json(stdout, views, n);
        else
            tw_history_compare_write_text(stdout, views, n);
    }
    if (status == TW_EXIT_OK && o.html) {
        compare_page page = {views, n};
        if (tw_cli_write_html("compare", o.html, write_page, &page) != 0)
            status = TW_EXIT_USAGE;
    }
    if (status == TW_EXIT_OK && tw_cli_finish_stdout("compare", "the comparison") != 0)
        status = TW_EXIT_USAGE;
    for (size_t i = 0; i < loaded; i++)
        tw_history_view_free(&views[i]);
    tw_history_close(h);
    return status;
}

const tw_command tw_cmd_compare = {
    .name = "compare",
    .summary = "lay runs side by side: figures, where the loss curves part, what differs, a verdict",
    .usage = usage_text,
    .run = run,
};
