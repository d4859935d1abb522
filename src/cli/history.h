/*
 * history.h (cli): the history options analyze, run and watch share
 * (--history PATH, --no-history, --history-job NAME) and recording the
 * run at the end through trainwatch/history.h. Recording never changes a
 * command's output or exit status: a history that cannot be written is one
 * line on stderr and the command goes on.
 */
#ifndef TW_CLI_HISTORY_H
#define TW_CLI_HISTORY_H

#include <stdbool.h>

#include "trainwatch/history.h"
#include "trainwatch/live.h"

typedef struct tw_cli_history {
    const char *path; /* --history FILE; NULL: the default file */
    bool off;         /* --no-history */
    const char *job;  /* --history-job NAME; NULL: the command's default */
} tw_cli_history;

#define TW_CLI_HISTORY_OPT 1200
#define TW_CLI_HISTORY_LONGOPTS                                                                                    \
    {"history", 1, 0, TW_CLI_HISTORY_OPT}, {"no-history", 0, 0, TW_CLI_HISTORY_OPT + 1},                           \
        {"history-job", 1, 0, TW_CLI_HISTORY_OPT + 2}
#define TW_CLI_HISTORY_LONGOPT_COUNT 3

/* The help lines of the options. */
extern const char tw_cli_history_usage[];

/* Stores a getopt_long code of these options; false when code is none of them. */
bool tw_cli_history_option(tw_cli_history *h, int code, const char *arg);

/* Opens the history file path names (NULL: the default one). NULL, said on
 * stderr as "trainwatch COMMAND: history FILE: why", when it cannot. */
tw_history *tw_cli_history_open(const char *command, const char *path);

/* Unless --no-history: judges the diagnosed run against the last runs of
 * its job (findings appended to report: call it before printing the
 * report) and records it. */
void tw_cli_history_record(const char *command, const tw_cli_history *h, const tw_history_identity *who,
                           tw_report *report, const tw_run *run);

/* Unless --no-history: the step time of the last runs of job in the
 * history, for the live baseline gauges of a run starting (runs 0 in *out
 * when there are too few, no history file yet, or it cannot be read: said
 * on stderr, and the run goes on). Creates no file. */
void tw_cli_history_baseline(const char *command, const tw_cli_history *h, const char *job, tw_live_baseline *out);

#endif
