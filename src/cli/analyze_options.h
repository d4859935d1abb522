/*
 * analyze_options.h: `trainwatch analyze`'s options, as analyze_options.c
 * reads them and cmd_analyze.c uses them.
 */
#ifndef TW_CLI_ANALYZE_OPTIONS_H
#define TW_CLI_ANALYZE_OPTIONS_H

#include "../parse/user_formats.h"
#include "cli.h"
#include "history.h"
#include "trainwatch/analyze.h"

typedef struct analyze_options {
    tw_analyze_input_options in; /* how the inputs are read (--format, --jobs, --explain, --records ...) */
    bool json, templates;
    int colour;          /* -1 auto, 0 never, 1 always */
    tw_severity fail_on; /* exit 1 when a finding is at least this severe */
    int launch;          /* TW_LAUNCH_LAST, TW_LAUNCH_ALL or 1-based */
    const char *html;    /* --html FILE, "-": stdout; NULL: none */
    tw_thresholds th;
    tw_user_formats *user;  /* --pattern, --formats (tw_cli_user_format's) */
    tw_cli_history history; /* --history, --no-history, --history-job */
    tw_cost_options cost;   /* --gpu-hour-cost, --gpu-prices, --gpu-idle-below: GPU time from GPU logs */
} analyze_options;

/* The whole help: `trainwatch analyze --help`, `-h` and `trainwatch help analyze`. */
extern const char tw_analyze_usage[];

/* Reads the options into o (its defaults set by the caller); --help writes
 * the help and exits. Returns the index of the first input, or -1 on a
 * usage error (said). */
int tw_analyze_parse_options(int argc, char **argv, analyze_options *o);

#endif
