/*
 * rules.h: Prometheus rule files, evaluated inside trainwatch.
 *
 * A tw_ruleset holds rule groups loaded from Prometheus rule-file YAML
 * (groups of alerting and recording rules). Loading validates them the way
 * `promtool check rules` does and also refuses what trainwatch's evaluator
 * cannot run, each problem reported as "FILE:LINE: message".
 *
 * A tw_alerting evaluates a rule set over the samples of a metrics registry:
 * every group interval it samples the registry (the series the rules read),
 * keeps them in a bounded ring, evaluates the group's rules, moves alerts
 * through pending, firing and resolved as Prometheus does, and hands the
 * alerts that need sending to a sink (see notify.h), at the cadence
 * Prometheus sends to Alertmanager.
 */
#ifndef TRAINWATCH_RULES_H
#define TRAINWATCH_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trainwatch/metrics.h"

typedef struct tw_ruleset tw_ruleset;
typedef struct tw_alerting tw_alerting;

/* Called once per problem found while loading; text is "FILE:LINE: what". */
typedef void (*tw_rule_problem_fn)(void *arg, const char *text, bool unsupported);

int tw_ruleset_new(tw_ruleset **out);
void tw_ruleset_free(tw_ruleset *rs);
/* Adds the groups of one rule file. Returns TW_OK, TW_ECONFIG when the file
 * is invalid, TW_EUNSUPPORTED when it is valid Prometheus but uses PromQL
 * trainwatch does not evaluate, or an I/O error; problems go to report. */
int tw_ruleset_load_file(tw_ruleset *rs, const char *path, tw_rule_problem_fn report, void *arg);
int tw_ruleset_load_text(tw_ruleset *rs, const char *name, const char *text, size_t len,
                         tw_rule_problem_fn report, void *arg);
size_t tw_ruleset_rule_count(const tw_ruleset *rs);

/* promtool's duplicate-rules lint: rules (alerting or recording, in any
 * group) sharing a name and the same labels as written. fn (may be NULL) is
 * called once per such name and label set, in promtool's order, with the
 * labels sorted by name; *count receives how many. Returns TW_OK or
 * TW_ENOMEM. */
typedef void (*tw_rule_duplicate_fn)(void *arg, const char *name, const char *const *label_names,
                                     const char *const *label_values, size_t label_count);
int tw_ruleset_duplicates(const tw_ruleset *rs, tw_rule_duplicate_fn fn, void *arg, size_t *count);
size_t tw_ruleset_group_count(const tw_ruleset *rs);
/* Writes every group as one rule file Prometheus loads (YAML). */
int tw_ruleset_export(const tw_ruleset *rs, FILE *out);

/* The built-in rules, as rule-file YAML. */
const char *tw_default_rules(void);

/* An entry of a rule file's actions: section (trainwatch's own; see
 * trainwatch/actions.h), as 'SELECTOR=ACTION'. Export leaves the section
 * out, so the exported file is one Prometheus loads. */
typedef struct tw_rule_action {
    char *spec;
    char *where;     /* FILE:LINE */
    double cooldown; /* seconds; < 0: the default */
} tw_rule_action;

/* The actions of the files loaded, in their order. */
size_t tw_ruleset_actions(const tw_ruleset *rs, const tw_rule_action **out);

/* `rules check` of one file, printed as `promtool check rules` prints it
 * (stdout; the duplicate-rules lint, when lint is set, on stderr), with the
 * constructs trainwatch does not evaluate and the actions: section, each
 * entry given to check (tw_actions_check; NULL: not checked). Returns
 * promtool's exit statuses (and 4, ours): */
enum {
    TW_RULES_CHECK_OK = 0,
    TW_RULES_CHECK_FAILED = 1,      /* invalid, unreadable: promtool's failureExitCode */
    TW_RULES_CHECK_LINT = 3,        /* a lint found something, with --lint-fatal: promtool's lintErrExitCode */
    TW_RULES_CHECK_UNSUPPORTED = 4, /* valid for Prometheus, not evaluated by trainwatch */
};
/* An action's validator: TW_OK, or an error with the reason in err. */
typedef int (*tw_rule_action_check_fn)(const char *spec, const char *where, char *err, size_t cap);
/* TW_RULES_CHECK_OK, _FAILED or _UNSUPPORTED; *linted set when the lint found something. */
int tw_rules_check_file(const char *path, bool lint, tw_rule_action_check_fn check, bool *linted);

/* ---- evaluation ------------------------------------------------------ */

typedef struct tw_alert_label {
    const char *name;
    const char *value;
} tw_alert_label;

/* One alert to send: the state after an evaluation. Pointers are valid only
 * during the sink call. */
typedef struct tw_alert_notice {
    const tw_alert_label *labels;       /* sorted by name, alertname included */
    size_t label_count;
    const tw_alert_label *annotations;  /* sorted by name */
    size_t annotation_count;
    bool resolved;
    bool changed;          /* newly firing or newly resolved (not a re-send) */
    double starts_at;      /* unix seconds */
    double ends_at;        /* resolved: when; firing: valid until */
    double value;
    const char *generator_url;
    uint64_t fingerprint;  /* of the labels */
} tw_alert_notice;

typedef void (*tw_alert_sink_fn)(void *arg, const tw_alert_notice *alerts, size_t count);

typedef struct tw_alerting_options {
    tw_registry *registry;      /* sampled, and gets the trainwatch_alerts* metrics */
    double default_interval;    /* seconds, for groups without one; 0: 15 */
    double resend_delay;        /* seconds; 0: 60 (Prometheus's --rules.alert.resend-delay) */
    const char *generator_url;  /* base of each alert's generatorURL; NULL: none */
    tw_alert_sink_fn sink;
    void *sink_arg;
    FILE *log;                  /* one line per alert state change and per failing rule; NULL: quiet */
    /* The labels the scraping Prometheus gives this target (job, instance,
     * the file_sd labels), put on every sample as its scrape does: with
     * honor_labels a series' own label wins; without, the target's wins and
     * the series' value moves to exported_NAME. So an alert carries the
     * labels the same rule gives it in that Prometheus. */
    const tw_alert_label *target_labels;
    size_t target_label_count;
    bool honor_labels;
    /* Prometheus's global external_labels: added when sent to alerts that
     * lack them (notifier/alert.go relabelAlerts), not to ALERTS. */
    const tw_alert_label *external_labels;
    size_t external_label_count;
    /* When set, each alert's generatorURL (instead of generator_url's
     * /graph link): the /alerts page of whoever serves tw_alerting_page. */
    const char *page_url;
} tw_alerting_options;

/* Takes ownership of rs. */
int tw_alerting_new(tw_ruleset *rs, const tw_alerting_options *o, tw_alerting **out);
void tw_alerting_free(tw_alerting *a);
/* Evaluates the groups that are due at now (unix seconds). */
void tw_alerting_tick(tw_alerting *a, double now);
/* Evaluates every group at now, due or not (at the end of a run). */
void tw_alerting_evaluate_all(tw_alerting *a, double now);
/* Alerts now firing, and ever fired. */
size_t tw_alerting_firing(const tw_alerting *a);
size_t tw_alerting_fired_total(const tw_alerting *a);
/* The /alerts page: every rule with its state (inactive, pending, firing,
 * or failing for a rule whose evaluation failed) and its active alerts
 * (labels, annotations, state, activeAt, value), as JSON
 * ({"rules":[...]}, names as Prometheus's /api/v1/rules) or as an HTML
 * table. Safe to call from another thread than the one that ticks.
 * Returns a malloc'd text (*len bytes) or NULL on no memory. */
char *tw_alerting_page(tw_alerting *a, bool json, size_t *len);

#endif
