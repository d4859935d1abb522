/*
 * alerts.h: the alerting options `run` and `watch` share (--rules,
 * --alertmanager, --webhook...), and their life cycle around the main loop:
 * start (load rules, start receivers; fails before anything runs), tick
 * (evaluate due groups), finish (a last evaluation, deliveries flushed).
 */
#ifndef TW_CLI_ALERTS_H
#define TW_CLI_ALERTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

#include "trainwatch/metrics.h"
#include "trainwatch/notify.h"
#include "trainwatch/rules.h"

#define TW_CLI_RULE_FILES_MAX 32
#define TW_CLI_RECEIVERS_MAX 8

typedef struct tw_cli_webhook {
    const char *url, *format, *secret_file, *secret_env;
} tw_cli_webhook;

typedef struct tw_cli_alerts {
    const char *rule_files[TW_CLI_RULE_FILES_MAX];
    size_t rule_file_count;
    bool no_defaults;
    double eval_interval;
    const char *alertmanagers[TW_CLI_RECEIVERS_MAX];
    size_t alertmanager_count;
    tw_cli_webhook webhooks[TW_CLI_RECEIVERS_MAX];
    size_t webhook_count;
    const char *external_url;
    tw_alerting *alerting;
    tw_notifier *notifier;
} tw_cli_alerts;

/* getopt_long entries; their codes are TW_CLI_ALERT_OPT and up. */
#define TW_CLI_ALERT_OPT 1000
#define TW_CLI_ALERT_LONGOPTS                                                                                   \
    {"rules", 1, 0, TW_CLI_ALERT_OPT}, {"no-default-rules", 0, 0, TW_CLI_ALERT_OPT + 1},                        \
        {"eval-interval", 1, 0, TW_CLI_ALERT_OPT + 2}, {"alertmanager", 1, 0, TW_CLI_ALERT_OPT + 3},            \
        {"webhook", 1, 0, TW_CLI_ALERT_OPT + 4}, {"webhook-format", 1, 0, TW_CLI_ALERT_OPT + 5},                \
        {"webhook-secret-file", 1, 0, TW_CLI_ALERT_OPT + 6}, {"webhook-secret-env", 1, 0, TW_CLI_ALERT_OPT + 7}, \
        {"external-url", 1, 0, TW_CLI_ALERT_OPT + 8}

extern const char tw_cli_alerts_usage[];

/* 1: the option was ours and is stored; 0: not ours; -1: bad (said why). */
int tw_cli_alerts_option(tw_cli_alerts *a, const char *command, int code, const char *arg);
int tw_cli_alerts_start(tw_cli_alerts *a, const char *command, tw_registry *registry);
void tw_cli_alerts_tick(tw_cli_alerts *a, double now);
void tw_cli_alerts_finish(tw_cli_alerts *a, const char *command, double now);
void tw_cli_alerts_free(tw_cli_alerts *a);

#endif
