/*
 * alerts.c: the alerting options of `run` and `watch` (see alerts.h); what
 * they configure runs in supervise/alerting.c.
 */
#include "alerts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trainwatch/error.h"

const char tw_cli_alerts_usage[] =
    "alerting (Prometheus rule files, evaluated here):\n"
    "  --rules FILE                a rule file (repeatable); see trainwatch rules check\n"
    "  --no-default-rules          without the built-in rules (trainwatch rules defaults)\n"
    "  --eval-interval SECONDS     for groups without an interval (default 5)\n"
    "  --alertmanager URL          send alerts to this Alertmanager (API v2; repeatable)\n"
    "  --webhook URL               send firing/resolved messages here (repeatable)\n"
    "  --webhook-format FORMAT     for the last --webhook: alertmanager (default), dingtalk,\n"
    "                              slack, feishu, wecom\n"
    "  --webhook-secret-file FILE  for the last --webhook: the signing secret (dingtalk, feishu)\n"
    "  --webhook-secret-env NAME   the same, from an environment variable\n"
    "  --external-url URL          base of each alert's generatorURL (e.g. your Prometheus; default:\n"
    "                              this run's /alerts page)\n"
    "  --external-label NAME=VALUE added to each alert sent, as Prometheus's global external_labels\n"
    "                              (repeatable; give the central Prometheus's, so Alertmanager dedups)\n"
    "  URLs may be given as env:NAME or file:PATH to keep tokens off the command line.\n"
    "actions (docs/actions.md):\n"
    "  --on-alert 'ALERT[{matchers}]=ACTION'\n"
    "                              when the alert starts firing, do ACTION (repeatable): signal:SIG\n"
    "                              [:rank=N|all], exec:COMMAND (no shell; the alert in TW_ALERT_*),\n"
    "                              checkpoint, stop, lr:FACTOR (run: asks the trainer through the\n"
    "                              trainwatch package), dump-stacks (every rank's Python stacks)\n"
    "  --action-cooldown DURATION  an action fires again for the same alert only after this (5m)\n"
    "  --action-timeout DURATION   an exec: command is killed after this (60s)\n"
    "  --dry-run-actions           say what each action would do, do nothing\n"
    "  --no-stack-dumps            run: no dump-stacks on a stall unless --on-alert asks\n";

/* NAME=VALUE, NAME a Prometheus label name. */
static int external_label(tw_alerts_config *a, const char *command, const char *arg)
{
    const char *eq = strchr(arg, '=');
    bool valid = eq && eq != arg && !(arg[0] >= '0' && arg[0] <= '9');
    for (const char *p = arg; valid && p < eq; p++)
        valid = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_';
    if (!valid || !eq[1]) {
        fprintf(stderr, "trainwatch %s: --external-label '%s': expected NAME=VALUE with NAME a label name\n", command,
                arg);
        return -1;
    }
    if (a->external_label_count == TW_EXTERNAL_LABELS_MAX) {
        fprintf(stderr, "trainwatch %s: at most %d --external-label\n", command, TW_EXTERNAL_LABELS_MAX);
        return -1;
    }
    /* both point into argv, which lives as long as the process: the '='
     * becomes the name's end (so ps shows NAME VALUE from here on) */
    ((char *)arg)[eq - arg] = '\0';
    a->external_labels[a->external_label_count++] = (tw_alert_label){arg, eq + 1};
    return 1;
}

int tw_cli_alerts_option(tw_alerts_config *a, const char *command, int code, const char *arg)
{
    tw_webhook_config *last = a->webhook_count ? &a->webhooks[a->webhook_count - 1] : NULL;
    switch (code - TW_CLI_ALERT_OPT) {
    case 0:
        if (a->rule_file_count == TW_RULE_FILES_MAX) {
            fprintf(stderr, "trainwatch %s: at most %d --rules files\n", command, TW_RULE_FILES_MAX);
            return -1;
        }
        a->rule_files[a->rule_file_count++] = arg;
        return 1;
    case 1:
        a->no_defaults = true;
        return 1;
    case 2:
        if (tw_cli_number(command, "eval-interval", arg, &a->eval_interval))
            return -1;
        if (a->eval_interval < 0.1) {
            fprintf(stderr, "trainwatch %s: --eval-interval must be at least 0.1 seconds\n", command);
            return -1;
        }
        return 1;
    case 3:
        if (a->alertmanager_count == TW_RECEIVERS_MAX) {
            fprintf(stderr, "trainwatch %s: at most %d --alertmanager URLs\n", command, TW_RECEIVERS_MAX);
            return -1;
        }
        a->alertmanagers[a->alertmanager_count++] = arg;
        return 1;
    case 4:
        if (a->webhook_count == TW_RECEIVERS_MAX) {
            fprintf(stderr, "trainwatch %s: at most %d --webhook URLs\n", command, TW_RECEIVERS_MAX);
            return -1;
        }
        a->webhooks[a->webhook_count++] = (tw_webhook_config){.url = arg, .format = "alertmanager"};
        return 1;
    case 5:
    case 6:
    case 7:
        if (!last) {
            fprintf(stderr, "trainwatch %s: --webhook-format and --webhook-secret-* follow a --webhook URL\n", command);
            return -1;
        }
        if (code - TW_CLI_ALERT_OPT == 5)
            last->format = arg;
        else if (code - TW_CLI_ALERT_OPT == 6)
            last->secret_file = arg;
        else
            last->secret_env = arg;
        return 1;
    case 8:
        a->external_url = arg;
        return 1;
    case 9:
        return external_label(a, command, arg);
    case 10:
        if (a->on_alert_count == TW_ON_ALERT_MAX) {
            fprintf(stderr, "trainwatch %s: at most %d --on-alert\n", command, TW_ON_ALERT_MAX);
            return -1;
        }
        a->on_alert[a->on_alert_count++] = arg;
        return 1;
    case 11:
        if (tw_cli_duration(command, "action-cooldown", arg, &a->action_cooldown))
            return -1;
        if (a->action_cooldown == 0)
            a->action_cooldown = 1e-9; /* 0: every firing acts (the field's 0 is the default) */
        return 1;
    case 12:
        if (tw_cli_duration(command, "action-timeout", arg, &a->action_timeout))
            return -1;
        return 1;
    case 13:
        a->dry_run_actions = true;
        return 1;
    case 14:
        a->no_stack_dumps = true;
        return 1;
    default:
        return 0;
    }
}
