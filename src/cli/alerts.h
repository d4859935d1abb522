/*
 * alerts.h: the alerting options `run` and `watch` share (--rules,
 * --alertmanager, --webhook..., and what alerts do: --on-alert...), read into a tw_alerts_config
 * (trainwatch/supervise.h) that the supervision engine runs.
 */
#ifndef TW_CLI_ALERTS_H
#define TW_CLI_ALERTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

#include "trainwatch/supervise.h"

/* getopt_long entries; their codes are TW_CLI_ALERT_OPT and up. */
#define TW_CLI_ALERT_OPT 1000
#define TW_CLI_ALERT_LONGOPTS                                                                                          \
    {"rules", 1, 0, TW_CLI_ALERT_OPT}, {"no-default-rules", 0, 0, TW_CLI_ALERT_OPT + 1},                               \
        {"eval-interval", 1, 0, TW_CLI_ALERT_OPT + 2}, {"alertmanager", 1, 0, TW_CLI_ALERT_OPT + 3},                   \
        {"webhook", 1, 0, TW_CLI_ALERT_OPT + 4}, {"webhook-format", 1, 0, TW_CLI_ALERT_OPT + 5},                       \
        {"webhook-secret-file", 1, 0, TW_CLI_ALERT_OPT + 6}, {"webhook-secret-env", 1, 0, TW_CLI_ALERT_OPT + 7},       \
        {"external-url", 1, 0, TW_CLI_ALERT_OPT + 8}, {"external-label", 1, 0, TW_CLI_ALERT_OPT + 9},                  \
        {"on-alert", 1, 0, TW_CLI_ALERT_OPT + 10}, {"action-cooldown", 1, 0, TW_CLI_ALERT_OPT + 11},                   \
        {"action-timeout", 1, 0, TW_CLI_ALERT_OPT + 12}, {"dry-run-actions", 0, 0, TW_CLI_ALERT_OPT + 13},             \
        {"no-stack-dumps", 0, 0, TW_CLI_ALERT_OPT + 14}

extern const char tw_cli_alerts_usage[];

/* 1: the option was ours and is stored; 0: not ours; -1: bad (said why). */
int tw_cli_alerts_option(tw_alerts_config *a, const char *command, int code, const char *arg);

#endif
