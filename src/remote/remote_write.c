/*
 * remote_write.c: the remote-write senders (see trainwatch/remote_write.h).
 *
 * Each URL has a ring of queued samples under a mutex: the collecting
 * thread encodes every series' labels once (encode.c) and pushes a copy of
 * each sample into every ring, dropping the oldest when one is full; the
 * URL's sender thread pops up to a batch, builds and compresses the body
 * outside the lock and POSTs it (core/http_client.c), retrying with
 * backoff on what a later try may fix (no answer, 429, 5xx). The
 * collecting thread never waits on the network: the only lock it takes is
 * held for queue pushes.
 */
#include "trainwatch/remote_write.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/base64.h"
#include "../core/buffer.h"
#include "../core/clock.h"
#include "../core/http_client.h"
#include "../core/say.h"
#include "encode.h"
#include "trainwatch/error.h"

#define AUTH_MAX 4096

typedef struct endpoint {
    struct tw_remote_write *owner;
    char *url;
    char shown[256]; /* for logs and the remote label: the origin only */
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    tw_rw_sample *ring;
    size_t head, count, cap;
    bool stopping, failing;
    double drain_until; /* monotonic; set when stopping */
    tw_counter *sent, *retries, *dropped_full, *dropped_rejected, *dropped_shutdown;
    tw_gauge *queued;
} endpoint;

struct tw_remote_write {
    tw_remote_write_options o;
    endpoint *endpoints[TW_REMOTE_WRITE_MAX];
    size_t count;
    char authorization[AUTH_MAX * 2]; /* the header line, or "" (base64 of AUTH_MAX bytes fits) */
    FILE *log;
    tw_family *f_sent, *f_retries, *f_dropped, *f_queued;
    tw_buffer labels; /* collect's scratch */
};

static void note(tw_remote_write *w, tw_say_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void note(tw_remote_write *w, tw_say_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tw_vsay_to(w->log, level, "remote-write", fmt, ap);
    va_end(ap);
}

/* ---- credentials ----------------------------------------------------------- */

/* The file's contents without trailing newlines, at most AUTH_MAX bytes. */
static int read_secret(const char *path, char *out, size_t cap, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return TW_EIO;
    }
    size_t n = fread(out, 1, cap - 1, f);
    bool more = fgetc(f) != EOF, failed = ferror(f) != 0;
    fclose(f);
    out[n] = '\0';
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = '\0';
    if (failed || more || n == 0 || strpbrk(out, "\r\n")) {
        snprintf(err, errlen, "%s: %s", path,
                 failed ? "read error"
                 : more ? "longer than 4 KiB"
                 : n    ? "more than one line"
                        : "empty");
        return TW_EINVAL;
    }
    return TW_OK;
}

static int load_authorization(tw_remote_write *w, char *err, size_t errlen)
{
    char secret[AUTH_MAX];
    const tw_remote_write_options *o = &w->o;
    if (o->bearer_token_file && o->basic_auth_file) {
        snprintf(err, errlen, "a bearer token and basic auth: choose one");
        return TW_EINVAL;
    }
    int rc = TW_OK;
    if (o->bearer_token_file && (rc = read_secret(o->bearer_token_file, secret, sizeof secret, err, errlen)) == TW_OK)
        snprintf(w->authorization, sizeof w->authorization, "Authorization: Bearer %s", secret);
    if (o->basic_auth_file && (rc = read_secret(o->basic_auth_file, secret, sizeof secret, err, errlen)) == TW_OK) {
        if (!strchr(secret, ':')) {
            snprintf(err, errlen, "%s: expected USER:PASSWORD", o->basic_auth_file);
            rc = TW_EINVAL;
        } else {
            char encoded[AUTH_MAX * 4 / 3 + 8];
            tw_base64_encode(secret, strlen(secret), false, encoded);
            snprintf(w->authorization, sizeof w->authorization, "Authorization: Basic %s", encoded);
        }
    }
    explicit_bzero(secret, sizeof secret);
    return rc;
}

/* ---- the queue ------------------------------------------------------------- */

static void push(endpoint *e, const char *labels, size_t len, double value, int64_t ms)
{
    char *copy = malloc(len ? len : 1);
    if (!copy) {
        tw_counter_inc(e->dropped_full);
        return;
    }
    memcpy(copy, labels, len);
    if (e->count == e->cap) { /* full: the oldest goes */
        free(e->ring[e->head].labels);
        e->head = (e->head + 1) % e->cap;
        e->count--;
        tw_counter_inc(e->dropped_full);
    }
    e->ring[(e->head + e->count) % e->cap] = (tw_rw_sample){copy, len, value, ms};
    e->count++;
}

/* Moves up to n samples from the front of the ring into out; returns how many. */
static size_t pop(endpoint *e, tw_rw_sample *out, size_t n)
{
    size_t taken = 0;
    while (taken < n && e->count) {
        out[taken++] = e->ring[e->head];
        e->head = (e->head + 1) % e->cap;
        e->count--;
    }
    return taken;
}

static void free_samples(tw_rw_sample *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(s[i].labels);
}

/* ---- sending --------------------------------------------------------------- */

typedef enum outcome { SENT, REJECTED, RETRY } outcome;

static outcome send_batch(endpoint *e, const tw_buffer *body)
{
    const char *headers[] = {"Content-Encoding: snappy", "X-Prometheus-Remote-Write-Version: 0.1.0",
                             e->owner->authorization};
    tw_http_request rq = {.method = "POST",
                          .url = e->url,
                          .content_type = "application/x-protobuf",
                          .body = body->data,
                          .body_len = body->len,
                          .timeout = e->owner->o.timeout,
                          .headers = headers,
                          .header_count = e->owner->authorization[0] ? 3 : 2};
    tw_http_answer answer;
    char why[256] = "";
    int rc = tw_http_send(&rq, &answer, why, sizeof why);
    outcome result = rc != TW_OK                                    ? RETRY
                     : answer.status >= 200 && answer.status < 300  ? SENT
                     : answer.status == 429 || answer.status >= 500 ? RETRY
                                                                    : REJECTED;
    if (result == SENT && e->failing) {
        e->failing = false;
        note(e->owner, TW_SAY_INFO, "remote write to %s works again", e->shown);
    } else if (result == RETRY && !e->failing) {
        e->failing = true;
        if (rc != TW_OK)
            note(e->owner, TW_SAY_WARN, "remote write to %s failed: %s; retrying with backoff", e->shown, why);
        else
            note(e->owner, TW_SAY_WARN, "remote write to %s failed: HTTP %ld %s; retrying with backoff", e->shown, answer.status,
                 answer.text);
    } else if (result == REJECTED) {
        note(e->owner, TW_SAY_ERROR, "remote write to %s refused a batch: HTTP %ld %s; its samples are dropped", e->shown,
             answer.status, answer.text);
    }
    return result;
}

/* Waits on the endpoint's condition for at most seconds (lock held). */
static void timed_wait(endpoint *e, double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double end = (double)ts.tv_sec + ts.tv_nsec / 1e9 + seconds;
    ts.tv_sec = (time_t)end;
    ts.tv_nsec = (long)((end - (double)ts.tv_sec) * 1e9);
    pthread_cond_timedwait(&e->wake, &e->lock, &ts);
}

/* Sends one batch until it is sent, refused, or the drain time is over.
 * Called and returns with the lock held; encoding and each try run without
 * it, so collecting never waits on them. */
static void deliver(endpoint *e, tw_rw_sample *batch, size_t n, tw_buffer *raw, tw_buffer *body, double *backoff)
{
    const tw_remote_write_options *o = &e->owner->o;
    pthread_mutex_unlock(&e->lock);
    tw_buffer_reset(raw);
    tw_rw_encode_request(batch, n, raw);
    bool ok = !raw->failed && tw_rw_compress(raw, body) == TW_OK;
    for (;;) {
        outcome r = ok ? send_batch(e, body) : REJECTED;
        pthread_mutex_lock(&e->lock);
        if (r == SENT) {
            tw_counter_add(e->sent, (double)n);
            *backoff = o->backoff_initial;
            return;
        }
        if (r == REJECTED) {
            tw_counter_add(e->dropped_rejected, (double)n);
            return;
        }
        tw_counter_inc(e->retries);
        if (e->stopping && tw_monotonic_clock() >= e->drain_until) {
            tw_counter_add(e->dropped_shutdown, (double)n);
            return;
        }
        double until = tw_monotonic_clock() + *backoff;
        if (e->stopping && until > e->drain_until)
            until = e->drain_until;
        while (tw_monotonic_clock() < until)
            timed_wait(e, until - tw_monotonic_clock());
        *backoff = *backoff * 2 < o->backoff_max ? *backoff * 2 : o->backoff_max;
        pthread_mutex_unlock(&e->lock);
    }
}

static void *sender(void *arg)
{
    endpoint *e = arg;
    const tw_remote_write_options *o = &e->owner->o;
    tw_rw_sample *batch = calloc(o->batch_samples, sizeof *batch);
    tw_buffer raw, body;
    tw_buffer_init(&raw);
    tw_buffer_init(&body);
    double backoff = o->backoff_initial;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        while (!e->count && !e->stopping)
            pthread_cond_wait(&e->wake, &e->lock);
        if (!e->count || !batch)
            break;
        if (e->stopping && tw_monotonic_clock() >= e->drain_until)
            break;
        size_t n = pop(e, batch, o->batch_samples);
        tw_gauge_set(e->queued, (double)e->count);
        deliver(e, batch, n, &raw, &body, &backoff);
        free_samples(batch, n);
        tw_gauge_set(e->queued, (double)e->count);
    }
    /* what is left at the end (drain time over, or no memory for a batch) */
    tw_counter_add(e->dropped_shutdown, (double)e->count);
    while (e->count) {
        free(e->ring[e->head].labels);
        e->head = (e->head + 1) % e->cap;
        e->count--;
    }
    tw_gauge_set(e->queued, 0);
    pthread_mutex_unlock(&e->lock);
    free(batch);
    tw_buffer_free(&raw);
    tw_buffer_free(&body);
    return NULL;
}

/* ---- collecting ------------------------------------------------------------ */

typedef struct collect_ctx {
    tw_remote_write *w;
    int64_t ms;
} collect_ctx;

static bool has_label(const tw_sample_view *s, const char *name)
{
    for (size_t i = 0; i < s->label_count; i++) {
        if (strcmp(s->label_names[i], name) == 0)
            return true;
    }
    return false;
}

static void collect_sample(const tw_sample_view *s, void *arg)
{
    collect_ctx *c = arg;
    tw_remote_write *w = c->w;
    tw_rw_label labels[TW_RW_LABELS_MAX];
    size_t n = 0;
    for (size_t i = 0; i < s->label_count && n < TW_RW_LABELS_MAX - TW_REMOTE_WRITE_TARGET_MAX; i++)
        labels[n++] = (tw_rw_label){s->label_names[i], s->label_values[i]};
    for (size_t i = 0; i < w->o.target_count; i++) {
        const char *value = w->o.target_values[i];
        if (value && *value && !has_label(s, w->o.target_names[i]))
            labels[n++] = (tw_rw_label){w->o.target_names[i], value};
    }
    tw_buffer_reset(&w->labels);
    if (tw_rw_encode_labels(s->name, labels, n, &w->labels) != TW_OK)
        return;
    for (size_t i = 0; i < w->count; i++) {
        endpoint *e = w->endpoints[i];
        pthread_mutex_lock(&e->lock);
        push(e, w->labels.data, w->labels.len, s->value, c->ms);
        pthread_mutex_unlock(&e->lock);
    }
}

void tw_remote_write_collect(tw_remote_write *w, tw_registry *r, double now)
{
    collect_ctx c = {w, (int64_t)(now * 1000)};
    tw_registry_visit(r, NULL, collect_sample, &c);
    for (size_t i = 0; i < w->count; i++) {
        endpoint *e = w->endpoints[i];
        pthread_mutex_lock(&e->lock);
        tw_gauge_set(e->queued, (double)e->count);
        pthread_cond_signal(&e->wake);
        pthread_mutex_unlock(&e->lock);
    }
}

/* ---- life cycle ------------------------------------------------------------ */

static int register_families(tw_remote_write *w, tw_registry *r)
{
    const char *one[] = {"remote"}, *two[] = {"remote", "reason"};
    struct {
        const char *name, *help;
        tw_metric_type type;
        size_t labels;
        tw_family **f;
    } defs[] = {
        {"trainwatch_remote_write_samples", "Samples a remote-write receiver accepted.", TW_METRIC_COUNTER, 1,
         &w->f_sent},
        {"trainwatch_remote_write_retries", "Remote-write requests retried (no answer, 429, 5xx).", TW_METRIC_COUNTER,
         1, &w->f_retries},
        {"trainwatch_remote_write_dropped_samples",
         "Samples never sent: queue_full (oldest dropped), rejected (a 4xx), shutdown (left at exit).",
         TW_METRIC_COUNTER, 2, &w->f_dropped},
        {"trainwatch_remote_write_queue_samples", "Samples waiting to be sent.", TW_METRIC_GAUGE, 1, &w->f_queued},
    };
    int rc = TW_OK;
    for (size_t i = 0; i < 4 && rc == TW_OK; i++) {
        tw_family_options fo = {.name = defs[i].name,
                                .help = defs[i].help,
                                .type = defs[i].type,
                                .label_count = defs[i].labels,
                                .label_names = defs[i].labels == 1 ? one : two};
        rc = tw_family_register(r, &fo, defs[i].f);
    }
    return rc;
}

static int endpoint_new(tw_remote_write *w, const char *url, endpoint **out)
{
    endpoint *e = calloc(1, sizeof *e);
    if (!e)
        return TW_ENOMEM;
    *out = e;
    e->owner = w;
    e->cap = w->o.queue_samples;
    e->url = strdup(url);
    e->ring = calloc(e->cap, sizeof *e->ring);
    if (!e->url || !e->ring)
        return TW_ENOMEM;
    tw_url_origin(url, e->shown, sizeof e->shown);
    const char *v[] = {e->shown, NULL};
    int rc = tw_family_series(w->f_sent, v, &e->sent);
    if (rc == TW_OK)
        rc = tw_family_series(w->f_retries, v, &e->retries);
    if (rc == TW_OK)
        rc = tw_family_series(w->f_queued, v, &e->queued);
    const char *reasons[] = {"queue_full", "rejected", "shutdown"};
    tw_counter **cells[] = {&e->dropped_full, &e->dropped_rejected, &e->dropped_shutdown};
    for (size_t i = 0; i < 3 && rc == TW_OK; i++) {
        const char *dv[] = {e->shown, reasons[i]};
        rc = tw_family_series(w->f_dropped, dv, cells[i]);
    }
    if (rc != TW_OK)
        return rc;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->wake, NULL);
    if (pthread_create(&e->thread, NULL, sender, e) != 0)
        return TW_ENOMEM;
    e->started = true;
    return TW_OK;
}

int tw_remote_write_new(const tw_remote_write_options *o, tw_registry *registry, FILE *log, tw_remote_write **out,
                        char *err, size_t errlen)
{
    snprintf(err, errlen, "out of memory");
    if (o->url_count == 0 || o->url_count > TW_REMOTE_WRITE_MAX) {
        snprintf(err, errlen, "from 1 to %d remote-write URLs", TW_REMOTE_WRITE_MAX);
        return TW_EINVAL;
    }
    for (size_t i = 0; i < o->url_count; i++) {
        if (strncmp(o->urls[i], "http://", 7) != 0 && strncmp(o->urls[i], "https://", 8) != 0) {
            char shown[256];
            snprintf(err, errlen, "%s: not an http:// or https:// URL", tw_url_origin(o->urls[i], shown, sizeof shown));
            return TW_EINVAL;
        }
    }
    tw_remote_write *w = calloc(1, sizeof *w);
    if (!w)
        return TW_ENOMEM;
    w->o = *o;
    if (w->o.target_count > TW_REMOTE_WRITE_TARGET_MAX)
        w->o.target_count = TW_REMOTE_WRITE_TARGET_MAX;
    w->o.interval = o->interval > 0 ? o->interval : 15;
    w->o.queue_samples = o->queue_samples ? o->queue_samples : 100000;
    w->o.batch_samples = o->batch_samples ? o->batch_samples : 2000;
    w->o.timeout = o->timeout > 0 ? o->timeout : 10;
    w->o.backoff_max = o->backoff_max > 0 ? o->backoff_max : 30;
    w->o.backoff_initial = o->backoff_initial > 0 ? o->backoff_initial : 0.5;
    if (w->o.backoff_initial > w->o.backoff_max)
        w->o.backoff_initial = w->o.backoff_max;
    w->o.drain_seconds = o->drain_seconds > 0 ? o->drain_seconds : 10;
    w->log = log;
    tw_buffer_init(&w->labels);
    int rc = load_authorization(w, err, errlen);
    if (rc == TW_OK && (rc = tw_http_client_load(err, errlen)) == TW_OK) {
        snprintf(err, errlen, "out of memory");
        rc = register_families(w, registry);
    }
    for (size_t i = 0; i < o->url_count && rc == TW_OK; i++) {
        rc = endpoint_new(w, o->urls[i], &w->endpoints[i]);
        w->count += w->endpoints[i] != NULL;
    }
    if (rc != TW_OK) {
        tw_remote_write_free(w);
        return rc;
    }
    *out = w;
    return TW_OK;
}

void tw_remote_write_free(tw_remote_write *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->count; i++) {
        endpoint *e = w->endpoints[i];
        if (!e->started)
            continue;
        pthread_mutex_lock(&e->lock);
        e->stopping = true;
        e->drain_until = tw_monotonic_clock() + w->o.drain_seconds;
        pthread_cond_signal(&e->wake);
        pthread_mutex_unlock(&e->lock);
    }
    for (size_t i = 0; i < w->count; i++) {
        endpoint *e = w->endpoints[i];
        if (e->started) {
            pthread_join(e->thread, NULL);
            pthread_mutex_destroy(&e->lock);
            pthread_cond_destroy(&e->wake);
        }
        free(e->ring);
        free(e->url);
        free(e);
    }
    tw_family *families[] = {w->f_sent, w->f_retries, w->f_dropped, w->f_queued};
    for (size_t i = 0; i < 4; i++) {
        if (families[i])
            tw_family_unregister(families[i]);
    }
    tw_buffer_free(&w->labels);
    explicit_bzero(w->authorization, sizeof w->authorization);
    free(w);
}
