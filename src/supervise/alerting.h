/*
 * alerting.h: the alert rules of a live run and where their alerts go, for
 * the supervision engine: start (load every rule file and the built-in
 * rules, start the receivers; every problem is printed and nothing runs),
 * tick (evaluate the groups that are due), finish (a last evaluation,
 * deliveries flushed, what fired said).
 *
 * Alerts also go to the actions (trainwatch/actions.h) configured with
 * --on-alert and in the rule files' actions: sections.
 *
 * Receiver URLs may be given as env:NAME or file:PATH, and signing secrets
 * only from a file or an environment variable, so no token needs to be on a
 * command line (where ps shows it).
 */
#ifndef TW_SUPERVISE_ALERTING_H
#define TW_SUPERVISE_ALERTING_H

#include "trainwatch/actions.h"
#include "trainwatch/metrics.h"
#include "trainwatch/notify.h"
#include "trainwatch/rules.h"
#include "trainwatch/supervise.h"

typedef struct tw_alerts {
    tw_alerting *alerting;
    tw_notifier *notifier;
    tw_actions *actions; /* NULL: none configured and no control channel */
} tw_alerts;

/* How a Prometheus scraping this run sees it (tw_alerting_options): the
 * target labels, honor_labels, and the /alerts page for generatorURL. */
typedef struct tw_alerts_target {
    const tw_alert_label *labels;
    size_t label_count;
    bool honor_labels;
    const char *page_url; /* NULL: none */
} tw_alerts_target;

/* name prefixes messages ("trainwatch NAME: ..."); run is the run's name
 * (TW_RUN of exec: actions); target may be NULL. */
int tw_alerts_start(tw_alerts *a, const tw_alerts_config *c, const char *name, const char *run,
                    tw_registry *registry, const tw_alerts_target *target);
void tw_alerts_tick(tw_alerts *a, double now);
void tw_alerts_finish(tw_alerts *a, const char *name, double now);
void tw_alerts_free(tw_alerts *a);

#endif
