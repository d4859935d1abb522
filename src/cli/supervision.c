/*
 * supervision.c: the options `run` and `watch` share (see supervision.h).
 */
#include "supervision.h"

#include <stdio.h>
#include <string.h>

#include "../core/say.h"
#include "cli.h"

const char tw_cli_discovery_usage[] =
    "discovery (Prometheus file_sd_configs; see docs/fleet.md):\n"
    "  --sd-file FILE              add this run's target (labels run, rank, host) to this file_sd JSON\n"
    "                              file shared by the runs of a node; removed at exit\n"
    "  --sd-job NAME               the job_name of the scrape config reading --sd-file (default\n"
    "                              trainwatch): this run's own alerts carry it, as Prometheus's do\n";

/* --log.level and --log.format: kept here so either can come first. */
static tw_say_level said_level = TW_SAY_INFO;
static tw_say_format said_format = TW_SAY_TEXT;

static int store_say_option(const char *command, bool is_level, const char *arg)
{
    int rc = is_level ? tw_say_level_from_name(arg, &said_level) : tw_say_format_from_name(arg, &said_format);
    if (rc != 0) {
        fprintf(stderr, "trainwatch %s: --log.%s must be %s, not '%s'\n", command, is_level ? "level" : "format",
                is_level ? "debug, info, warn or error" : "text, logfmt or json", arg);
        return -1;
    }
    tw_say_setup(said_level, said_format, command);
    return 1;
}

/* 1: stored; 0: not one of these; -1: a bad value (said). */
static int store_option(tw_supervision_options *s, const char *command, int code, const char *arg)
{
    if (code >= TW_CLI_ALERT_OPT)
        return tw_cli_alerts_option(&s->alerts, command, code, arg);
    switch (code - TW_CLI_SUPERVISION_OPT) {
    case 0:
        if (!(s->format = tw_format_find(arg))) {
            fprintf(stderr, "trainwatch %s: unknown format '%s' (see trainwatch formats)\n", command, arg);
            return -1;
        }
        return 1;
    case 1:
        s->job = arg;
        return 1;
    case 2:
        s->serve = strcmp(arg, "none") != 0;
        s->http.listen_address = arg;
        return 1;
    case 3:
        s->http.web_config_file = arg;
        return 1;
    case 4:
        return tw_cli_number(command, "stall-after", arg, &s->stall_after) ? -1 : 1;
    case 20:
    case 21:
        return store_say_option(command, code - TW_CLI_SUPERVISION_OPT == 20, arg);
    case 5:
    case 6:
        return tw_cli_user_format(&s->user_formats, code == TW_CLI_SUPERVISION_OPT + 5 ? "pattern" : "formats", arg,
                                  command)
                   ? -1
                   : 1;
    case 7:
        s->sd_file = arg;
        return 1;
    case 8:
        s->sd_job = arg;
        return 1;
    default:
        return 0;
    }
}

void tw_cli_say_as(const char *command)
{
    tw_say_setup(said_level, said_format, command);
}

int tw_cli_supervision_option(tw_supervision_options *s, const char *command, int code, const char *arg,
                              const char *as_given)
{
    int stored = store_option(s, command, code, arg);
    if (stored == 0)
        fprintf(stderr, "trainwatch %s: unknown or incomplete option '%s' (see trainwatch %s --help)\n", command,
                as_given, command);
    return stored > 0 ? 0 : -1;
}
