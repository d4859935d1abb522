/*
 * cmd_analyze.c: `trainwatch analyze [options] FILE...` reads training logs
 * (files, .gz, or - for stdin), parses them into records, and prints the
 * diagnosis. With --records it prints the records instead (JSON lines,
 * schema trainwatch.record/1). Threshold options come from one table that
 * also writes their help.
 */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "trainwatch/analyze.h"
#include "trainwatch/error.h"
#include "trainwatch/parse.h"
#include "trainwatch/record_json.h"

typedef struct threshold_option {
    const char *name;
    size_t offset;
    double scale;            /* value on the command line times scale */
    const char *help;
} threshold_option;

static const threshold_option thresholds[] = {
    {"data-share", offsetof(tw_thresholds, data_share), 1, "data wait share of step time that is data-loading bound (0.30)"},
    {"stall-seconds", offsetof(tw_thresholds, stall_seconds), 1, "shortest gap between steps reported as a stall (60)"},
    {"stall-factor", offsetof(tw_thresholds, stall_factor), 1, "a stall is also this many times the usual gap (10)"},
    {"spike-factor", offsetof(tw_thresholds, spike_factor), 1, "loss above this x its recent median is a spike (3)"},
    {"divergence-factor", offsetof(tw_thresholds, divergence_factor), 1, "late loss this x above its best is divergence (1.5)"},
    {"plateau", offsetof(tw_thresholds, plateau_rel), 1, "less relative loss improvement than this is a plateau (0.01)"},
    {"throughput-drop", offsetof(tw_thresholds, throughput_drop), 1, "throughput falling by this share is reported (0.30)"},
    {"jitter", offsetof(tw_thresholds, jitter_ratio), 1, "p99/p50 step time above this is jitter (3)"},
    {"mem-growth", offsetof(tw_thresholds, mem_growth), 1, "relative device memory growth that is a leak (0.10)"},
    {"device-memory", offsetof(tw_thresholds, device_memory), 1073741824.0, "device memory in GiB, to project when it runs out"},
    {"straggler", offsetof(tw_thresholds, straggler_factor), 1, "a rank this x slower than the others is a straggler (1.2)"},
    {"early-stop", offsetof(tw_thresholds, early_stop_share), 1, "a rank stopping before this share of the others' steps (0.9)"},
};

#define THRESHOLD_COUNT (sizeof thresholds / sizeof thresholds[0])

enum { OPT_FORMAT = 1000, OPT_JSON, OPT_RECORDS, OPT_COLOR, OPT_NO_COLOR, OPT_JOBS, OPT_BLOCK_SIZE, OPT_HELP, OPT_THRESHOLD };

typedef struct analyze_options {
    const tw_format *format;
    bool json, records;
    int colour;              /* -1 auto, 0 never, 1 always */
    int jobs;                /* threads per large plain file */
    size_t block_size;       /* their block size, 0: the default */
    tw_thresholds th;
} analyze_options;

static void print_usage(FILE *out)
{
    fprintf(out, "usage: trainwatch analyze [OPTIONS] FILE... (- for stdin; .gz is read as is)\n\n"
                 "Reads training logs and diagnoses the run, with evidence.\n\n"
                 "options:\n"
                 "  --format NAME          use this format instead of detecting (trainwatch formats)\n"
                 "  --json                 print the report as JSON (schema " TW_ANALYSIS_SCHEMA ")\n"
                 "  --records              print the parsed records as JSON lines (schema " TW_RECORD_SCHEMA ")\n"
                 "  --color=auto|always|never, --no-color\n"
                 "  --jobs N               threads reading one large plain file (default: one per core)\n"
                 "  --block-size BYTES     bytes each thread reads at a time (default 2 MiB, at least 256)\n"
                 "thresholds:\n");
    for (size_t i = 0; i < THRESHOLD_COUNT; i++)
        fprintf(out, "  --%-20s %s\n", thresholds[i].name, thresholds[i].help);
    fprintf(out, "\nexit status: 0 no errors found, 1 errors found, 2 bad usage or unreadable input\n");
}

static int parse_threshold(analyze_options *o, size_t index, const char *arg)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !(v >= 0)) {
        fprintf(stderr, "trainwatch analyze: --%s needs a non-negative number, not '%s'\n", thresholds[index].name, arg);
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

/* Returns the index of the first file argument, or -1 on a usage error. */
static int parse_options(int argc, char **argv, analyze_options *o)
{
    struct option longopts[THRESHOLD_COUNT + 9];
    size_t n = 0;
    longopts[n++] = (struct option){"format", required_argument, NULL, OPT_FORMAT};
    longopts[n++] = (struct option){"json", no_argument, NULL, OPT_JSON};
    longopts[n++] = (struct option){"records", no_argument, NULL, OPT_RECORDS};
    longopts[n++] = (struct option){"color", required_argument, NULL, OPT_COLOR};
    longopts[n++] = (struct option){"no-color", no_argument, NULL, OPT_NO_COLOR};
    longopts[n++] = (struct option){"jobs", required_argument, NULL, OPT_JOBS};
    longopts[n++] = (struct option){"block-size", required_argument, NULL, OPT_BLOCK_SIZE};
    longopts[n++] = (struct option){"help", no_argument, NULL, OPT_HELP};
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
                        c == OPT_JOBS ? "jobs" : "block-size",
                        c == OPT_JOBS ? "from 1 to 64" : "of at least 256", optarg);
                return -1;
            }
            if (c == OPT_JOBS)
                o->jobs = (int)v;
            else
                o->block_size = (size_t)v;
            break;
        }
        case 'h':
        case OPT_HELP:
            print_usage(stdout);
            exit(TW_EXIT_OK);
        case '?':
            fprintf(stderr, "trainwatch analyze: unknown or incomplete option '%s' (see trainwatch help analyze)\n",
                    argv[optind - 1]);
            return -1;
        default:
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

static void write_record(void *arg, const tw_record *r) { tw_record_write_json(arg, r); }

/* Parses one input into the run (or onto stdout as records). Returns 0, or
 * -1 when the input could not be read at all. */
static int analyze_input(const char *path, int rank, const analyze_options *o, tw_run *run)
{
    tw_parser *p;
    int rc = tw_parser_open(&p, path, o->format, rank);
    if (rc != TW_OK) {
        fprintf(stderr, "trainwatch: %s: %s\n", path, tw_strerror(rc));
        tw_run_note_input(run, path, NULL, 0, 0, tw_strerror(rc));
        return -1;
    }
    tw_parser_set_jobs(p, o->jobs, o->block_size);
    rc = o->records ? tw_parser_run(p, write_record, stdout) : tw_parser_run(p, tw_run_add, run);
    const tw_parse_stats *st = tw_parser_stats(p);
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
    tw_parser_close(p);
    return result;
}

static bool use_colour(const analyze_options *o)
{
    if (o->colour >= 0)
        return o->colour == 1;
    const char *no = getenv("NO_COLOR");
    return isatty(STDOUT_FILENO) && !(no && *no);
}

static int run(int argc, char **argv)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    analyze_options o = {.colour = -1, .jobs = cores < 1 ? 1 : cores > TW_PARSE_JOBS_MAX ? TW_PARSE_JOBS_MAX : (int)cores};
    tw_thresholds_default(&o.th);
    int first = parse_options(argc, argv, &o);
    if (first < 0)
        return TW_EXIT_USAGE;
    tw_run *trun;
    if (tw_run_new(&trun, &o.th) != TW_OK) {
        fprintf(stderr, "trainwatch: out of memory\n");
        return TW_EXIT_USAGE;
    }
    int files = argc - first, failed = 0;
    for (int i = first; i < argc; i++) {
        int rank = tw_rank_from_path(argv[i]);
        if (rank < 0 && files > 1)
            rank = i - first; /* several files without rank names: one rank each */
        if (analyze_input(argv[i], rank, &o, trun) != 0)
            failed++;
    }
    int status = failed ? TW_EXIT_USAGE : TW_EXIT_OK;
    if (o.records) {
        tw_run_free(trun);
        return status;
    }
    tw_report *report;
    if (tw_diagnose(trun, &o.th, &report) != TW_OK) {
        fprintf(stderr, "trainwatch: out of memory\n");
        tw_run_free(trun);
        return TW_EXIT_USAGE;
    }
    bool nothing = report->summary.step_records == 0 && report->summary.eval_records == 0 &&
                   report->summary.events == 0;
    if (failed == files && nothing) {
        tw_report_free(report);
        tw_run_free(trun);
        return TW_EXIT_USAGE;
    }
    if (o.json)
        tw_report_write_json(stdout, report);
    else
        tw_report_write_text(stdout, report, use_colour(&o));
    if (status == TW_EXIT_OK) {
        if (nothing)
            status = TW_EXIT_USAGE;
        for (int i = 0; i < report->finding_count; i++) {
            if (report->findings[i].severity == TW_SEV_ERROR)
                status = TW_EXIT_PROBLEMS;
        }
    }
    tw_report_free(report);
    tw_run_free(trun);
    return status;
}

static const char usage_text[] =
    "usage: trainwatch analyze [OPTIONS] FILE...\n"
    "Reads training logs (files, .gz, - for stdin) and diagnoses the run.\n"
    "Run `trainwatch analyze --help` for every option.\n";

const tw_command tw_cmd_analyze = {
    .name = "analyze",
    .summary = "read training logs and diagnose the run, with evidence",
    .usage = usage_text,
    .run = run,
};
