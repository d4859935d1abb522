/*
 * supervision.h: the options `run` and `watch` share: the log format (and
 * --pattern / --formats), the
 * job label, where and how the metrics are served (--web.listen-address,
 * --web.config.file), the stall threshold, the level and format of
 * trainwatch's own messages (--log.level, --log.format: core/say.h, set
 * as soon as read), and the alerting options of alerts.h, read into the supervision's options (trainwatch/supervise.h).
 * Each command reads its own options around them.
 */
#ifndef TW_CLI_SUPERVISION_H
#define TW_CLI_SUPERVISION_H

#include <stdbool.h>

#include "alerts.h"
#include "trainwatch/supervise.h"

/* getopt_long entries; their codes are TW_CLI_SUPERVISION_OPT and up, then
 * the alerting options' (TW_CLI_ALERT_OPT and up). */
#define TW_CLI_SUPERVISION_OPT 900
#define TW_CLI_SUPERVISION_LONGOPTS                                                                                    \
    {"format", 1, 0, TW_CLI_SUPERVISION_OPT}, {"job", 1, 0, TW_CLI_SUPERVISION_OPT + 1},                               \
        {"web.listen-address", 1, 0, TW_CLI_SUPERVISION_OPT + 2},                                                      \
        {"web.config.file", 1, 0, TW_CLI_SUPERVISION_OPT + 3}, {"stall-after", 1, 0, TW_CLI_SUPERVISION_OPT + 4},      \
        {"log.level", 1, 0, TW_CLI_SUPERVISION_OPT + 20}, {"log.format", 1, 0, TW_CLI_SUPERVISION_OPT + 21},           \
        {"pattern", 1, 0, TW_CLI_SUPERVISION_OPT + 5}, {"formats", 1, 0, TW_CLI_SUPERVISION_OPT + 6},                  \
        {"sd-file", 1, 0, TW_CLI_SUPERVISION_OPT + 7}, {"sd-job", 1, 0, TW_CLI_SUPERVISION_OPT + 8},                   \
        TW_CLI_ALERT_LONGOPTS

/* Sets up trainwatch's own messages as coming from command (text prefixes
 * them "trainwatch COMMAND: "), before any option is read. */
void tw_cli_say_as(const char *command);

/* The discovery options' help lines, for each command's usage. */
extern const char tw_cli_discovery_usage[];

/* Reads a getopt_long code that is not the command's own: 0 when it was one
 * of these options and is stored; -1 when its value is bad or the option is
 * unknown (as_given, the argument as typed), said on stderr naming the
 * command. */
int tw_cli_supervision_option(tw_supervision_options *s, const char *command, int code, const char *arg,
                              const char *as_given);

#endif
