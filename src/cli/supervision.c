/*
 * supervision.c: the options `run` and `watch` share (see supervision.h).
 */
#include "supervision.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/rank_env.h"
#include "../core/say.h"
#include "../rules/ruleset.h"
#include "cli.h"

const char tw_cli_discovery_usage[] =
    "discovery (Prometheus file_sd_configs; see docs/fleet.md):\n"
    "  --sd-file FILE              add this run's target (labels run, rank, host) to this file_sd JSON\n"
    "                              file shared by the runs of a node; removed at exit\n"
    "  --sd-job NAME               the job_name of the scrape config reading --sd-file (default\n"
    "                              trainwatch): this run's own alerts carry it, as Prometheus's do\n"
    "  --web.linger DURATION       at the end keep serving /metrics up to this long (30s, 2m, 0), so\n"
    "                              Prometheus scrapes the final state (default: two scrape intervals\n"
    "                              when scraped or with --sd-file, else 0; 'auto')\n";

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

static int remote_write_option(tw_supervision_options *s, const char *command, int code, const char *arg);

/* --web.linger: a Prometheus duration, seconds, or auto. */
static int linger_option(tw_supervision_options *s, const char *command, const char *arg)
{
    int64_t ms;
    char *end;
    double seconds = strtod(arg, &end);
    if (!strcmp(arg, "auto"))
        s->linger = TW_LINGER_AUTO;
    else if (tw_parse_duration(arg, &ms))
        s->linger = (double)ms / 1000;
    else if (end != arg && !*end && seconds >= 0 && seconds <= 86400)
        s->linger = seconds;
    else {
        fprintf(stderr, "trainwatch %s: --web.linger must be a duration (30s, 2m, 0) or auto, not '%s'\n", command,
                arg);
        return -1;
    }
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
        if (!*arg) {
            fprintf(stderr, "trainwatch %s: --run-name must not be empty\n", command);
            return -1;
        }
        s->run = arg;
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
    case 5:
        s->address_file = arg;
        return 1;
    case 20:
    case 21:
        return store_say_option(command, code - TW_CLI_SUPERVISION_OPT == 20, arg);
    case 22:
    case 23:
        return tw_cli_user_format(&s->user_formats, code == TW_CLI_SUPERVISION_OPT + 22 ? "pattern" : "formats", arg,
                                  command)
                   ? -1
                   : 1;
    case 24:
        s->sd_file = arg;
        return 1;
    case 25:
        s->sd_job = arg;
        return 1;
    case 26:
        return linger_option(s, command, arg);
    case 27:
        return tw_cli_number(command, "max-steps", arg, &s->max_steps) ? -1 : 1;
    default:
        return remote_write_option(s, command, code - TW_CLI_SUPERVISION_OPT, arg);
    }
}

const char tw_cli_supervision_usage[] =
    "remote-write (Prometheus remote-write 1.0):\n"
    "  --remote-write URL          also send the metrics to this receiver (repeatable, up to 8)\n"
    "  --remote-write-interval S   seconds between samples sent (default 15)\n"
    "  --remote-write-queue N      samples kept per receiver while it cannot take them; the oldest\n"
    "                              are dropped past N (default 100000)\n"
    "  --remote-write-bearer-token-file FILE   send Authorization: Bearer with FILE's token\n"
    "  --remote-write-basic-auth-file FILE     basic auth with FILE's USER:PASSWORD\n"
    "  --remote-write-job NAME     the job label of the series sent (default: the one a scrape of this\n"
    "                              run gets: --sd-job, or trainwatch)\n"
    "  --remote-write-instance I   their instance label (default: the /metrics host:port a scrape\n"
    "                              gets, or this host's name when not serving)\n"
    "  (series sent carry the labels a scrape of the run gives it: use one path per Prometheus)\n\n";

/* The remote-write options (codes 6 to 12): 1 stored, 0 not one, -1 bad. */
static int remote_write_option(tw_supervision_options *s, const char *command, int code, const char *arg)
{
    tw_remote_write_options *r = &s->remote_write;
    double v;
    switch (code) {
    case 6:
        if (r->url_count == TW_REMOTE_WRITE_MAX) {
            fprintf(stderr, "trainwatch %s: at most %d --remote-write URLs\n", command, TW_REMOTE_WRITE_MAX);
            return -1;
        }
        r->urls[r->url_count++] = arg;
        return 1;
    case 7:
        if (tw_cli_number(command, "remote-write-interval", arg, &r->interval))
            return -1;
        if (r->interval <= 0) {
            fprintf(stderr, "trainwatch %s: --remote-write-interval must be more than 0\n", command);
            return -1;
        }
        return 1;
    case 8:
        if (tw_cli_number(command, "remote-write-queue", arg, &v))
            return -1;
        if (v < 1 || v > 1e8) {
            fprintf(stderr, "trainwatch %s: --remote-write-queue must be from 1 to 100000000\n", command);
            return -1;
        }
        r->queue_samples = (size_t)v;
        return 1;
    case 9:
        r->bearer_token_file = arg;
        return 1;
    case 10:
        r->basic_auth_file = arg;
        return 1;
    case 11:
    case 12:
        if (!*arg) {
            fprintf(stderr, "trainwatch %s: --remote-write-%s must not be empty\n", command, code == 11 ? "job" : "instance");
            return -1;
        }
        *(code == 11 ? &s->remote_job : &s->remote_instance) = arg;
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

/* The first of these variables that is set, as a number; -1 when none is. */
static int env_number(const char *const *names)
{
    int value;
    return tw_rank_env_get(names, 1L << 30, &value) ? value : -1;
}

void tw_cli_rank_env(int *rank, int *local_rank, int *world_size)
{
    *rank = env_number(tw_rank_env_vars);
    *local_rank = env_number(tw_local_rank_env_vars);
    *world_size = env_number(tw_world_size_env_vars);
}

/* The value of a port offset's name: the local rank or the rank, 0 when the
 * environment does not say; -1 for an unknown name. */
static int offset_value(const char *name)
{
    int rank, local, world;
    tw_cli_rank_env(&rank, &local, &world);
    if (strcasecmp(name, "LOCAL_RANK") == 0)
        return local < 0 ? 0 : local;
    if (strcasecmp(name, "RANK") == 0)
        return rank < 0 ? 0 : rank;
    return -1;
}

int tw_cli_supervision_finish(tw_supervision_options *s, const char *command)
{
    static char resolved[300];
    if (s->address_file && !s->serve) {
        fprintf(stderr, "trainwatch %s: --web.address-file needs /metrics served (not --web.listen-address none)\n",
                command);
        return -1;
    }
    const char *address = s->http.listen_address;
    const char *plus = address ? strrchr(address, '+') : NULL;
    if (!s->serve || !plus)
        return 0;
    const char *colon = strrchr(address, ':');
    char *end;
    long port = colon && colon < plus ? strtol(colon + 1, &end, 10) : -1;
    int offset = offset_value(plus + 1);
    if (port < 0 || end != plus || colon + 1 == plus || offset < 0) {
        fprintf(stderr, "trainwatch %s: --web.listen-address '%s': expected HOST:PORT+LOCAL_RANK or HOST:PORT+RANK\n",
                command, address);
        return -1;
    }
    if (port > 0)
        port += offset;
    if (port > 65535) {
        fprintf(stderr, "trainwatch %s: --web.listen-address '%s': port %ld is past 65535\n", command, address, port);
        return -1;
    }
    snprintf(resolved, sizeof resolved, "%.*s:%ld", (int)(colon - address), address, port);
    s->http.listen_address = resolved;
    return 0;
}
