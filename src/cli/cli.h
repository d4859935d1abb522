/*
 * cli.h: the subcommand table shared by main.c and each src/cli/cmd_*.c.
 * Adding a subcommand is one file plus one row in main.c's table; `--help`
 * is generated from the table.
 */
#ifndef TW_CLI_CLI_H
#define TW_CLI_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "trainwatch/analyze.h"
#include "trainwatch/html.h"
#include "trainwatch/supervise.h"

typedef struct tw_command {
    const char *name;
    const char *summary;
    const char *usage;       /* full help text, printed by `trainwatch help NAME` */
    int (*run)(int argc, char **argv);
} tw_command;

extern const tw_command tw_cmd_analyze;
extern const tw_command tw_cmd_formats;
extern const tw_command tw_cmd_watch;
extern const tw_command tw_cmd_run;
extern const tw_command tw_cmd_rules;
extern const tw_command tw_cmd_trace;
extern const tw_command tw_cmd_grafana;
extern const tw_command tw_cmd_prometheus_config;
extern const tw_command tw_cmd_runs;
extern const tw_command tw_cmd_compare;

/* Reads a non-negative number for --flag; says what is wrong and returns -1. */
int tw_cli_number(const char *command, const char *flag, const char *arg, double *out);
/* The GPU cost options run and analyze share, as getopt_long codes:
 * --gpu-hour-cost PRICE ('C'), --gpu-prices FILE ('G'), --budget AMOUNT
 * ('U', run only), --gpu-idle-below PCT ('I'). Stores the value in o: 0;
 * -1 on a bad value (said on stderr, naming command); 1 when code is none
 * of them. */
int tw_cli_cost_option(const char *command, int code, const char *arg, tw_cost_options *o);
/* A Prometheus duration (10m, 1h30m) or seconds into *seconds; -1 when it
 * is neither (said, naming --flag). */
int tw_cli_duration(const char *command, const char *flag, const char *arg, double *seconds);
/* The options of runs kept in a Prometheus that `runs` and `compare`
 * share, as getopt_long codes and the rows of their long option tables:
 * --prometheus URL, --prometheus-header 'Name: value' (repeatable, at most
 * TW_CLI_PROMETHEUS_HEADERS, kept in store), --since D. Stores code's
 * value in p: 0; -1 on a bad value (said on stderr, naming command); 1
 * when code is none of them. */
#define TW_CLI_PROMETHEUS_HEADERS 8
enum { TW_CLI_OPT_PROMETHEUS = 2000, TW_CLI_OPT_PROMETHEUS_HEADER, TW_CLI_OPT_SINCE };
#define TW_CLI_PROMETHEUS_LONGOPTS                                                                                     \
    {"prometheus", 1, 0, TW_CLI_OPT_PROMETHEUS}, {"prometheus-header", 1, 0, TW_CLI_OPT_PROMETHEUS_HEADER},           \
        {"since", 1, 0, TW_CLI_OPT_SINCE}
struct tw_history_prometheus;
int tw_cli_prometheus_option(const char *command, int code, const char *arg, struct tw_history_prometheus *p,
                             const char **store);

/* --FLAG=auto|always|never (colours, a progress line) into *out: -1, 1, 0;
 * says what is wrong and returns -1. */
int tw_cli_when(const char *command, const char *flag, const char *arg, int *out);
/* Whether colours go to standard output: when (as tw_cli_when gives) says,
 * or on auto a terminal without NO_COLOR. */
bool tw_cli_colour(int when);
/* --fail-on SEVERITY (info, warning, error) into *out; says what is wrong
 * and returns -1. */
int tw_cli_severity(const char *command, const char *arg, tw_severity *out);

/* Flushes standard output; on a write error says so ("could not write WHAT
 * to standard output: why") and returns -1. */
int tw_cli_finish_stdout(const char *command, const char *what);
/* A command's help on standard output, longer than a pipe's buffer: a write
 * error is said with the errno of the write that failed. Returns 0 or -1. */
int tw_cli_write_help(const char *command, const char *text);

/* words (NULL-terminated) joined by spaces into buf, cut to fit; returns buf
 * (run's command line and watch's files, for trainwatch_run_info). */
const char *tw_cli_join_words(char **words, char *buf, size_t len);

/* Writes a page with write(out, arg) to path ("-": stdout), a file whole
 * or not at all (--html of analyze, run and trace). Returns 0, or -1 when
 * it could not be written, said on stderr as "trainwatch COMMAND: --html
 * reason". */
int tw_cli_write_html(const char *command, const char *path, int (*write)(FILE *out, const void *arg),
                      const void *arg);
/* The same for the report page of analyze and run (report/html.h), with
 * the GPU series run sampled (NULL: none). */
int tw_cli_write_report_html(const char *command, const char *path, const tw_report *report, const tw_run *run,
                             const char *title, const tw_html_gpu *gpu);

/* The report as JSON to path (--report of run), a file whole or not at
 * all. Returns 0, or -1 when it could not be written (said). */
int tw_cli_write_report_json(const char *command, const char *path, const tw_report *report);

/* --pattern REGEX or --formats FILE (flag "pattern" or "formats") into
 * *set, made on first use and freed when the process exits (one set per
 * process).
 * Says what is wrong, with the position, and returns -1. */
struct tw_user_formats;
int tw_cli_user_format(struct tw_user_formats **set, const char *flag, const char *arg, const char *command);

/* Exit statuses shared by the subcommands. */
enum {
    TW_EXIT_OK = 0,
    TW_EXIT_PROBLEMS = 1,   /* the job ran and found errors */
    TW_EXIT_USAGE = 2,      /* bad usage or unreadable input */
    TW_EXIT_LINT = 3,       /* rules check: a lint found something, with --lint-fatal (as promtool) */
};

#endif
