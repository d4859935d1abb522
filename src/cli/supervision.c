/*
 * supervision.c: the options `run` and `watch` share (see supervision.h).
 */
#include "supervision.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"

/* 1: stored; 0: not one of these; -1: a bad value (said). */
static int store_option(tw_cli_supervision *s, const char *command, int code, const char *arg)
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
    default:
        return 0;
    }
}

int tw_cli_supervision_option(tw_cli_supervision *s, const char *command, int code, const char *arg,
                              const char *as_given)
{
    int stored = store_option(s, command, code, arg);
    if (stored == 0)
        fprintf(stderr, "trainwatch %s: unknown or incomplete option '%s' (see trainwatch %s --help)\n", command,
                as_given, command);
    return stored > 0 ? 0 : -1;
}

int tw_cli_supervision_serve(tw_cli_supervision *s, const char *command, const char *not_starting,
                             tw_registry *registry, tw_http_server **out)
{
    *out = NULL;
    if (!s->serve)
        return 0;
    char err[512], host[256] = "", port[16] = "";
    s->http.registry = registry;
    if (tw_http_start(&s->http, out, err, sizeof err) != 0) {
        fprintf(stderr, "trainwatch %s: %s%s%s%s\n", command, err, not_starting ? " (not starting " : "",
                not_starting ? not_starting : "", not_starting ? ")" : "");
        return -1;
    }
    const char *address = s->http.listen_address ? s->http.listen_address : TW_HTTP_DEFAULT_ADDRESS;
    if (tw_parse_listen_address(address, host, sizeof host, port, sizeof port) != 0 || !host[0])
        snprintf(host, sizeof host, "0.0.0.0");
    bool v6 = strchr(host, ':') != NULL;
    fprintf(stderr, "trainwatch %s: serving /metrics on %s%s%s:%u\n", command, v6 ? "[" : "", host, v6 ? "]" : "",
            tw_http_port(*out));
    return 0;
}
