/*
 * notify.h: delivers alerts to Alertmanager and to chat webhooks.
 *
 * A tw_notifier has receivers, each with its own thread and bounded queue,
 * so a slow or dead receiver never blocks parsing, scraping or the other
 * receivers. tw_notifier_sink (a tw_alert_sink_fn, see rules.h) only copies
 * alerts into the queues. A queue keeps one entry per alert (a newer state
 * replaces an older one not yet sent), retries failed deliveries with
 * exponential backoff, and drops the oldest entries past its limit, counting
 * them. Each receiver logs one line when deliveries start failing and one
 * when they recover. Logs name a receiver and its URL's scheme://host:port
 * only (Slack and Feishu tokens live in the path, DingTalk's in the query,
 * user:password@ in the authority); an error answer's body appears only as
 * a short prefix with secret-looking values redacted; signing secrets are
 * never logged.
 *
 * Formats: "alertmanager-api" (POST /api/v2/alerts; every send, including
 * re-sends, so Alertmanager's grouping, silences and routing apply) and the
 * webhook formats "alertmanager" (Alertmanager's webhook payload, version 4),
 * "dingtalk" (robot markdown; optional signature), "slack", "feishu"
 * (optional signature) and "wecom", which get state changes only (firing,
 * resolved).
 */
#ifndef TRAINWATCH_NOTIFY_H
#define TRAINWATCH_NOTIFY_H

#include <stddef.h>
#include <stdio.h>

#include "trainwatch/metrics.h"
#include "trainwatch/rules.h"

typedef struct tw_notifier tw_notifier;

typedef struct tw_notifier_options {
    tw_registry *registry;    /* gets trainwatch_notifications_* metrics; NULL: none */
    const char *host;         /* shown in chat messages; NULL: gethostname() */
    const char *external_url; /* the webhook payload's externalURL */
    FILE *log;                /* failures and recoveries; NULL: quiet */
    size_t queue_limit;       /* per receiver; 0: 1000 */
    double timeout;           /* seconds per request; 0: 10 */
    double backoff_initial;   /* seconds before the first retry, doubling each time; 0: 0.5 */
    double backoff_max;       /* seconds; 0: 60 */
} tw_notifier_options;

typedef struct tw_receiver_options {
    const char *url;
    const char *format;       /* see above */
    const char *secret;       /* dingtalk/feishu signing secret, or NULL */
} tw_receiver_options;

int tw_notifier_new(const tw_notifier_options *o, tw_notifier **out);
/* Validates the receiver (format, URL scheme) and starts its thread. */
int tw_notifier_add(tw_notifier *n, const tw_receiver_options *r, char *err, size_t cap);
/* Queues alerts for every receiver; never blocks on the network. */
void tw_notifier_sink(void *notifier, const tw_alert_notice *alerts, size_t count);
/* Waits until every queue is delivered or timeout seconds pass; returns the
 * number of alerts still queued. */
size_t tw_notifier_flush(tw_notifier *n, double timeout);
/* Stops the threads (without waiting for deliveries) and frees. */
void tw_notifier_free(tw_notifier *n);
/* The known formats, for usage text; NULL-terminated. */
const char *const *tw_notify_formats(void);

#endif
