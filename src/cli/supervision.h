/*
 * supervision.h: the options `run` and `watch` share: the log format (and
 * --pattern / --formats), the run label (--run-name; --job is its old
 * name), where and how the metrics are served (--web.listen-address,
 * --web.config.file, --web.address-file), remote-write (--remote-write...),
 * the stall threshold, the level and format of trainwatch's own messages
 * (--log.level, --log.format: core/say.h, set as soon as read), and the
 * alerting options of alerts.h, read into the supervision's options
 * (trainwatch/supervise.h).
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
    {"format", 1, 0, TW_CLI_SUPERVISION_OPT}, {"run-name", 1, 0, TW_CLI_SUPERVISION_OPT + 1},                          \
        {"job", 1, 0, TW_CLI_SUPERVISION_OPT + 1}, {"web.listen-address", 1, 0, TW_CLI_SUPERVISION_OPT + 2},           \
        {"web.config.file", 1, 0, TW_CLI_SUPERVISION_OPT + 3}, {"stall-after", 1, 0, TW_CLI_SUPERVISION_OPT + 4},      \
        {"log.level", 1, 0, TW_CLI_SUPERVISION_OPT + 20}, {"log.format", 1, 0, TW_CLI_SUPERVISION_OPT + 21},           \
        {"pattern", 1, 0, TW_CLI_SUPERVISION_OPT + 22}, {"formats", 1, 0, TW_CLI_SUPERVISION_OPT + 23},                \
        {"web.address-file", 1, 0, TW_CLI_SUPERVISION_OPT + 5}, {"remote-write", 1, 0, TW_CLI_SUPERVISION_OPT + 6},    \
        {"remote-write-interval", 1, 0, TW_CLI_SUPERVISION_OPT + 7},                                                   \
        {"remote-write-queue", 1, 0, TW_CLI_SUPERVISION_OPT + 8},                                                      \
        {"remote-write-bearer-token-file", 1, 0, TW_CLI_SUPERVISION_OPT + 9},                                          \
        {"remote-write-basic-auth-file", 1, 0, TW_CLI_SUPERVISION_OPT + 10},                                           \
        {"remote-write-job", 1, 0, TW_CLI_SUPERVISION_OPT + 11},                                                       \
        {"remote-write-instance", 1, 0, TW_CLI_SUPERVISION_OPT + 12},                                                  \
        {"sd-file", 1, 0, TW_CLI_SUPERVISION_OPT + 24}, {"sd-job", 1, 0, TW_CLI_SUPERVISION_OPT + 25},        \
        {"web.linger", 1, 0, TW_CLI_SUPERVISION_OPT + 26}, {"max-steps", 1, 0, TW_CLI_SUPERVISION_OPT + 27},     \
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
extern const char tw_cli_supervision_usage[];

int tw_cli_supervision_option(tw_supervision_options *s, const char *command, int code, const char *arg,
                              const char *as_given);

/* The rank, local rank and world size the launchers' environment variables
 * give (PADDLE_*, torchrun's, Open MPI's, Slurm's); -1 each when unset. */
void tw_cli_rank_env(int *rank, int *local_rank, int *world_size);

/* After the options: resolves a "+LOCAL_RANK" or "+RANK" offset on the port
 * of --web.listen-address (so the ranks of a node each get their own port;
 * port 0 stays 0: any free port). -1 when the address or the offset is bad
 * (said). The resolved address lives in a buffer of this file. */
int tw_cli_supervision_finish(tw_supervision_options *s, const char *command);

#endif
