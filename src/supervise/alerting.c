/*
 * alerting.c: rules and receivers of a live run (see alerting.h).
 */
#include "alerting.h"
#include "../core/say.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/error.h"

#define SECRET_MAX 4096

static void print_problem(void *arg, const char *text, bool unsupported)
{
    const char *command = arg;
    tw_say(TW_SAY_ERROR, command, "%s%s", text, unsupported ? " (trainwatch rules check lists all)" : "");
}

/* Reads a secret or URL from file:PATH / env:NAME (or a plain value); malloc'd. */
static char *resolve(const char *command, const char *what, const char *value, const char *file, const char *env)
{
    if (value && !strncmp(value, "env:", 4))
        env = value + 4, value = NULL;
    else if (value && !strncmp(value, "file:", 5))
        file = value + 5, value = NULL;
    if (value)
        return strdup(value);
    if (env) {
        const char *v = getenv(env);
        if (!v || !*v) {
            tw_say(TW_SAY_ERROR, command, "the environment variable %s (%s) is not set", env, what);
            return NULL;
        }
        return strdup(v);
    }
    FILE *f = fopen(file, "r");
    if (!f) {
        tw_say(TW_SAY_ERROR, command, "%s (%s): %s", file, what, strerror(errno));
        return NULL;
    }
    char *buf = calloc(1, SECRET_MAX + 1);
    size_t n = buf ? fread(buf, 1, SECRET_MAX, f) : 0;
    fclose(f);
    while (buf && n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    if (buf && !n) {
        tw_say(TW_SAY_ERROR, command, "%s (%s) is empty", file, what);
        free(buf);
        return NULL;
    }
    return buf;
}

static int add_receiver(tw_alerts *a, const char *command, const char *url_arg, const char *format,
                        const char *secret_file, const char *secret_env)
{
    char *url = resolve(command, "receiver URL", url_arg, NULL, NULL);
    char *secret = NULL;
    if (url && (secret_file || secret_env))
        secret = resolve(command, "webhook secret", NULL, secret_file, secret_env);
    int rc = TW_EUSAGE;
    if (url && (secret || !(secret_file || secret_env))) {
        char err[256];
        tw_receiver_options r = {.url = url, .format = format, .secret = secret};
        rc = tw_notifier_add(a->notifier, &r, err, sizeof err);
        if (rc != TW_OK)
            tw_say(TW_SAY_ERROR, command, "--%s %s: %s",
                    strcmp(format, "alertmanager-api") ? "webhook" : "alertmanager",
                    strncmp(url_arg, "env:", 4) && strncmp(url_arg, "file:", 5) ? "(given)" : url_arg, err);
    }
    if (secret)
        memset(secret, 0, strlen(secret));
    free(secret);
    free(url);
    return rc;
}

/* Every alert to the receivers and to the actions. */
static void deliver(void *arg, const tw_alert_notice *alerts, size_t count)
{
    tw_alerts *a = arg;
    if (a->notifier)
        tw_notifier_sink(a->notifier, alerts, count);
    if (a->actions)
        tw_actions_sink(a->actions, alerts, count);
}

/* The actions of --on-alert and of the rule files; each bad one is said. */
static int start_actions(tw_alerts *a, const tw_alerts_config *c, const char *command, const char *run,
                         tw_registry *registry, const tw_ruleset *rs)
{
    const tw_rule_action *from_files;
    size_t file_count = tw_ruleset_actions(rs, &from_files);
    if (!c->on_alert_count && !file_count && !c->control)
        return TW_OK;
    tw_actions_options o = {.registry = registry,
                            .name = command,
                            .run = run,
                            .cooldown = c->action_cooldown,
                            .exec_timeout = c->action_timeout,
                            .dry_run = c->dry_run_actions,
                            .stack_dumps_on_stall = c->control && !c->no_stack_dumps,
                            .exec_only = !c->control};
    int rc = tw_actions_new(&o, &a->actions);
    char err[512];
    for (size_t i = 0; rc != TW_ENOMEM && i < c->on_alert_count + file_count; i++) {
        bool cli = i < c->on_alert_count;
        const tw_rule_action *f = cli ? NULL : &from_files[i - c->on_alert_count];
        int r = tw_actions_add(a->actions, cli ? c->on_alert[i] : f->spec, cli ? "--on-alert" : f->where,
                               cli ? -1 : f->cooldown, err, sizeof err);
        if (r != TW_OK) {
            tw_say(TW_SAY_ERROR, command, "%s", r == TW_ENOMEM ? "out of memory" : err);
            rc = r;
        }
    }
    if (rc == TW_OK && c->control && (rc = tw_actions_open_control(a->actions, err, sizeof err)) != TW_OK)
        tw_say(TW_SAY_ERROR, command, "%s", err);
    return rc;
}

int tw_alerts_start(tw_alerts *a, const tw_alerts_config *c, const char *command, const char *run,
                    tw_registry *registry, const tw_alerts_target *target)
{
    static const tw_alerts_target none = {0};
    if (!target)
        target = &none;
    tw_ruleset *rs;
    if (tw_ruleset_new(&rs) != TW_OK)
        return TW_ENOMEM;
    int rc = TW_OK;
    if (!c->no_defaults) {
        const char *text = tw_default_rules();
        rc = tw_ruleset_load_text(rs, "<default rules>", text, strlen(text), print_problem, (void *)command);
    }
    for (size_t i = 0; i < c->rule_file_count; i++) {
        int r = tw_ruleset_load_file(rs, c->rule_files[i], print_problem, (void *)command);
        if (r != TW_OK)
            rc = r;
    }
    if (rc != TW_OK) {
        tw_ruleset_free(rs);
        return rc;
    }
    bool receivers = c->alertmanager_count || c->webhook_count;
    if (receivers) {
        tw_notifier_options no = {.registry = registry, .external_url = c->external_url, .log = stderr};
        if ((rc = tw_notifier_new(&no, &a->notifier)) != TW_OK) {
            tw_ruleset_free(rs);
            return rc;
        }
        for (size_t i = 0; i < c->alertmanager_count && rc == TW_OK; i++) {
            /* the API endpoint under the Alertmanager's base URL */
            char url[2048];
            const char *base = c->alertmanagers[i];
            char *resolved = resolve(command, "Alertmanager URL", base, NULL, NULL);
            if (!resolved) {
                rc = TW_EUSAGE;
                break;
            }
            size_t n = strlen(resolved);
            while (n && resolved[n - 1] == '/')
                n--;
            snprintf(url, sizeof url, "%.*s%s", (int)n, resolved,
                     strstr(resolved, "/api/v2/alerts") ? "" : "/api/v2/alerts");
            free(resolved);
            rc = add_receiver(a, command, url, "alertmanager-api", NULL, NULL);
        }
        for (size_t i = 0; i < c->webhook_count && rc == TW_OK; i++) {
            const tw_webhook_config *w = &c->webhooks[i];
            rc = add_receiver(a, command, w->url, w->format, w->secret_file, w->secret_env);
        }
        if (rc != TW_OK) {
            tw_ruleset_free(rs);
            return rc;
        }
    }
    if ((rc = start_actions(a, c, command, run, registry, rs)) != TW_OK) {
        tw_ruleset_free(rs);
        return rc;
    }
    const tw_rule_action *unused;
    size_t configured = c->on_alert_count + tw_ruleset_actions(rs, &unused);
    size_t rules = tw_ruleset_rule_count(rs);
    tw_alerting_options ao = {.registry = registry,
                              .default_interval = c->eval_interval > 0 ? c->eval_interval : 5,
                              .generator_url = c->external_url,
                              .log = stderr,
                              .sink = receivers || a->actions ? deliver : NULL,
                              .sink_arg = a,
                              .target_labels = target->labels,
                              .target_label_count = target->label_count,
                              .honor_labels = target->honor_labels,
                              .external_labels = c->external_labels,
                              .external_label_count = c->external_label_count,
                              .page_url = c->external_url ? NULL : target->page_url};
    rc = tw_alerting_new(rs, &ao, &a->alerting);
    if (rc == TW_OK && rules)
        tw_say(TW_SAY_INFO, command, "evaluating %zu alerting/recording rules%s", rules,
                receivers ? "" : " (no --alertmanager or --webhook: alerts are logged here)");
    if (rc == TW_OK && configured)
        tw_say(TW_SAY_INFO, command, "%zu alert action%s%s", configured, configured == 1 ? "" : "s",
                c->dry_run_actions ? " (dry run: said, not done)" : "");
    return rc;
}

void tw_alerts_tick(tw_alerts *a, double now)
{
    if (a->actions)
        tw_actions_tick(a->actions);
    if (a->alerting)
        tw_alerting_tick(a->alerting, now);
}

void tw_alerts_finish(tw_alerts *a, const char *command, double now)
{
    if (!a->alerting)
        return;
    tw_alerting_evaluate_all(a->alerting, now);
    if (a->notifier) {
        size_t left = tw_notifier_flush(a->notifier, 5);
        if (left)
            tw_say(TW_SAY_WARN, command, "%zu alert notification%s not delivered", left,
                    left == 1 ? "" : "s");
    }
    if (tw_alerting_fired_total(a->alerting))
        tw_say(TW_SAY_INFO, command, "%zu alert%s fired, %zu firing at the end",
                tw_alerting_fired_total(a->alerting), tw_alerting_fired_total(a->alerting) == 1 ? "" : "s",
                tw_alerting_firing(a->alerting));
}

void tw_alerts_free(tw_alerts *a)
{
    tw_alerting_free(a->alerting);
    tw_notifier_free(a->notifier);
    tw_actions_free(a->actions);
    a->alerting = NULL;
    a->notifier = NULL;
    a->actions = NULL;
}
