/*
 * remote_write.h: sending a registry's samples to Prometheus remote-write
 * 1.0 receivers (Prometheus with --web.enable-remote-write-receiver, Thanos
 * Receive, Mimir, Cortex, VictoriaMetrics), for runs no scrape reaches or
 * sites whose long-term store takes remote-write directly.
 *
 * tw_remote_write_collect() takes a sample of every series of a registry
 * now (on the caller's thread: no network, a bounded amount of work) and
 * queues it for each URL. One sender thread per URL takes batches from its
 * queue and POSTs them (protobuf WriteRequest, snappy, the remote-write
 * 1.0 headers); on a network error, 429 or 5xx it retries the batch with
 * exponential backoff while the queue goes on filling; any other 4xx drops
 * the batch (the receiver will not take it however often it is sent). A
 * full queue drops its oldest samples. Every dropped sample is counted in
 * trainwatch_remote_write_dropped_samples_total{remote, reason}
 * (queue_full, rejected, shutdown); sent ones in
 * trainwatch_remote_write_samples_total{remote}.
 *
 * Labels: a series keeps its own; it gets the options' target labels
 * (job, instance, run, rank, ...) when it has none of that name, as a
 * scrape with honor_labels gives its target's: a remote-written series has
 * no scrape to give them, and series without run and rank, process_* say,
 * would collide across runs. trainwatch run/watch give the labels a scrape
 * of the same run gets, so one run is one series whichever path it took.
 *
 * tw_remote_write_free() drains: the senders go on until their queues are
 * empty or drain_seconds have passed.
 */
#ifndef TRAINWATCH_REMOTE_WRITE_H
#define TRAINWATCH_REMOTE_WRITE_H

#include <stddef.h>
#include <stdio.h>

#include "trainwatch/metrics.h"

#define TW_REMOTE_WRITE_MAX 8
#define TW_REMOTE_WRITE_TARGET_MAX 8

typedef struct tw_remote_write_options {
    const char *urls[TW_REMOTE_WRITE_MAX];
    size_t url_count;
    const char *bearer_token_file;           /* "Authorization: Bearer" with its contents; NULL: none */
    const char *basic_auth_file;             /* "USER:PASSWORD" for basic auth; NULL: none */
    double interval;                         /* seconds between collections, the caller's to keep; 0: 15 */
    size_t queue_samples;                    /* per URL; 0: 100000 */
    size_t batch_samples;                    /* per request; 0: 2000 */
    double timeout;                          /* per request; 0: 10 s */
    double backoff_initial, backoff_max;     /* 0: 0.5 s and 30 s */
    double drain_seconds;                    /* at free; 0: 10 s */
    /* target labels, added when a series lacks them; a NULL or empty value
     * is not added */
    const char *target_names[TW_REMOTE_WRITE_TARGET_MAX], *target_values[TW_REMOTE_WRITE_TARGET_MAX];
    size_t target_count;
} tw_remote_write_options;

typedef struct tw_remote_write tw_remote_write;

/* Reads the credential files and starts the senders. registry is where the
 * senders' own metrics go (borrowed for the writer's life); log gets one
 * line when a URL starts failing and one when it works again. On failure
 * returns a TW_E* code and a one-line reason naming the file or URL in err. */
int tw_remote_write_new(const tw_remote_write_options *o, tw_registry *registry, FILE *log, tw_remote_write **out,
                        char *err, size_t errlen);
/* Queues a sample of every series of r, stamped now (unix seconds). */
void tw_remote_write_collect(tw_remote_write *w, tw_registry *r, double now);
/* Drains (at most drain_seconds), stops the senders, frees. */
void tw_remote_write_free(tw_remote_write *w);

#endif
