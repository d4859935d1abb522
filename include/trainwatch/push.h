/*
 * push.h: pushing a registry to a Prometheus Pushgateway, for jobs too short
 * to be scraped (the end of a training run).
 *
 * PUT replaces the whole group, POST replaces only the metrics with the same
 * names, DELETE removes the group. The group is the job plus grouping labels;
 * values containing '/' (or empty) are sent base64url-encoded as the
 * Pushgateway requires (label@base64/...). Each attempt has a timeout; failed
 * attempts are retried with exponential backoff; an error answer from the
 * gateway is reported with its status and body.
 *
 * tw_push() blocks the calling thread for at most (retries + 1) * timeout plus
 * the backoff; tw_pusher runs pushes on its own thread so a training loop is
 * never held up by the network.
 */
#ifndef TRAINWATCH_PUSH_H
#define TRAINWATCH_PUSH_H

#include <stdbool.h>
#include <stddef.h>

#include "trainwatch/metrics.h"

#define TW_PUSH_GROUPING_MAX 8

typedef enum tw_push_method {
    TW_PUSH_REPLACE,   /* PUT */
    TW_PUSH_ADD,       /* POST */
    TW_PUSH_DELETE,    /* DELETE */
} tw_push_method;

typedef struct tw_push_options {
    const char *url;               /* http://host:9091 (a path prefix is kept) */
    const char *job;
    size_t grouping_count;
    const char *grouping_names[TW_PUSH_GROUPING_MAX];
    const char *grouping_values[TW_PUSH_GROUPING_MAX];
    double timeout_seconds;        /* per attempt; 0: 5 */
    int retries;                   /* after the first attempt; <0: none, 0: 2 */
    double backoff_seconds;        /* first wait between attempts; 0: 0.5, doubling */
} tw_push_options;

/* Builds the group URL (for tests and messages); returns 0 or TW_EINVAL. */
int tw_push_url(const tw_push_options *o, char *out, size_t cap);

/* Pushes (or deletes) now. On failure returns TW_ENET (no answer) or
 * TW_EHTTP (an error status) and writes a one-line reason into err. */
int tw_push(const tw_push_options *o, tw_registry *r, tw_push_method m, char *err, size_t errlen);

/* A run's metrics at its end (`run --pushgateway`): PUT, replacing the
 * group job=JOB (the run name), rank, instance (this host's name). */
int tw_push_run_end(const char *url, const char *job, int rank, tw_registry *r, char *err, size_t errlen);

/* A background pusher: tw_pusher_request() asks for a push and returns at
 * once; tw_pusher_stop() makes a final push (when asked) and joins. */
typedef struct tw_pusher tw_pusher;
int tw_pusher_start(const tw_push_options *o, tw_registry *r, double interval_seconds, tw_pusher **out);
void tw_pusher_request(tw_pusher *p);
/* Returns the status of the last push attempt (0 if it succeeded). */
int tw_pusher_stop(tw_pusher *p, bool final_push, char *err, size_t errlen);

#endif
