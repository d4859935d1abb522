/*
 * notify.c: receivers, their queues and delivery threads (see notify.h).
 *
 * The evaluating thread calls tw_notifier_sink, which copies alerts into
 * each receiver's queue under its mutex and signals its thread. The thread
 * takes a batch, builds the body with the receiver's format (payload.c),
 * POSTs it (core/http_client) and, on failure, puts the batch back (unless newer
 * states of the same alerts arrived meanwhile) and sleeps with exponential
 * backoff. Nothing here ever blocks the caller on the network.
 */
#include "trainwatch/notify.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/http_client.h"
#include "../core/say.h"
#include "payload.h"
#include "trainwatch/error.h"

#define RECEIVERS_MAX 16

typedef struct receiver {
    struct tw_notifier *owner;
    const tw_payload_format *format;
    char *url, *secret;
    char shown[256]; /* for logs: the URL's origin only (tokens live in paths and queries) */
    char name[48];
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t wake, idle_cond;
    tw_queued_alert *queue;
    size_t count, cap;
    bool busy, stopping, failing;
    tw_counter *sent, *errors, *dropped;
    tw_gauge *queued;
} receiver;

struct tw_notifier {
    receiver *receivers[RECEIVERS_MAX];
    size_t count;
    char *host, *external_url;
    FILE *log;
    size_t queue_limit;
    double timeout, backoff_initial, backoff_max;
    tw_registry *registry;
    tw_family *f_sent, *f_errors, *f_dropped, *f_queued;
};

static void note(tw_notifier *n, tw_say_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void note(tw_notifier *n, tw_say_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tw_vsay_to(n->log, level, "notify", fmt, ap);
    va_end(ap);
}

const char *const *tw_notify_formats(void)
{
    static const char *names[8];
    for (size_t i = 0; tw_payload_formats[i] && i < 7; i++)
        names[i] = tw_payload_formats[i]->name;
    return names;
}

/* ---- queued alerts ---------------------------------------------------- */

static void free_queued(tw_queued_alert *a)
{
    for (size_t i = 0; i < a->label_count; i++) {
        free(a->label_names[i]);
        free(a->label_values[i]);
    }
    for (size_t i = 0; i < a->annotation_count; i++) {
        free(a->annotation_names[i]);
        free(a->annotation_values[i]);
    }
    free(a->label_names);
    free(a->label_values);
    free(a->annotation_names);
    free(a->annotation_values);
    free(a->generator_url);
    memset(a, 0, sizeof *a);
}

static bool copy_pairs(const tw_alert_label *from, size_t n, char ***names, char ***values)
{
    *names = calloc(n ? n : 1, sizeof **names);
    *values = calloc(n ? n : 1, sizeof **values);
    if (!*names || !*values)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!((*names)[i] = strdup(from[i].name)) || !((*values)[i] = strdup(from[i].value)))
            return false;
    }
    return true;
}

static bool copy_notice(const tw_alert_notice *x, tw_queued_alert *a)
{
    memset(a, 0, sizeof *a);
    a->label_count = x->label_count;
    a->annotation_count = x->annotation_count;
    a->resolved = x->resolved;
    a->starts_at = x->starts_at;
    a->ends_at = x->ends_at;
    a->value = x->value;
    a->fingerprint = x->fingerprint;
    bool ok = copy_pairs(x->labels, x->label_count, &a->label_names, &a->label_values) &&
              copy_pairs(x->annotations, x->annotation_count, &a->annotation_names, &a->annotation_values);
    if (ok && x->generator_url)
        ok = (a->generator_url = strdup(x->generator_url)) != NULL;
    if (!ok)
        free_queued(a);
    return ok;
}

/* With the lock held: adds a copy, replacing a queued state of the same alert. */
static void enqueue(receiver *r, const tw_queued_alert *a)
{
    for (size_t i = 0; i < r->count; i++) {
        if (r->queue[i].fingerprint == a->fingerprint) {
            free_queued(&r->queue[i]);
            r->queue[i] = *a;
            return;
        }
    }
    size_t limit = r->owner->queue_limit;
    if (r->count >= limit) {
        /* full: the oldest goes */
        free_queued(&r->queue[0]);
        memmove(r->queue, r->queue + 1, (r->count - 1) * sizeof *r->queue);
        r->count--;
        if (r->dropped)
            tw_counter_inc(r->dropped);
    }
    if (r->count == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        tw_queued_alert *grown = realloc(r->queue, cap * sizeof *grown);
        if (!grown) {
            tw_queued_alert copy = *a;
            free_queued(&copy);
            if (r->dropped)
                tw_counter_inc(r->dropped);
            return;
        }
        r->queue = grown;
        r->cap = cap;
    }
    r->queue[r->count++] = *a;
}

void tw_notifier_sink(void *notifier, const tw_alert_notice *alerts, size_t count)
{
    tw_notifier *n = notifier;
    for (size_t k = 0; k < n->count; k++) {
        receiver *r = n->receivers[k];
        pthread_mutex_lock(&r->lock);
        for (size_t i = 0; i < count; i++) {
            if (!r->format->every_send && !alerts[i].changed)
                continue;
            tw_queued_alert a;
            if (copy_notice(&alerts[i], &a))
                enqueue(r, &a);
            else if (r->dropped)
                tw_counter_inc(r->dropped);
        }
        if (r->queued)
            tw_gauge_set(r->queued, (double)r->count);
        pthread_cond_signal(&r->wake);
        pthread_mutex_unlock(&r->lock);
    }
}

/* ---- delivery --------------------------------------------------------- */

/* POSTs one batch; returns true on a 2xx answer, else fills why. */
static bool post(receiver *r, const tw_queued_alert *batch, size_t n, char *why, size_t cap)
{
    tw_payload_context c = {
        .host = r->owner->host, .external_url = r->owner->external_url, .secret = r->secret, .now = tw_wall_clock()};
    char *body = NULL, *signed_url = NULL;
    size_t len = 0;
    if (r->format->build(r->format, &c, batch, n, r->url, &body, &len, &signed_url) != TW_OK) {
        snprintf(why, cap, "could not build the request");
        return false;
    }
    tw_http_request rq = {.method = "POST",
                          .url = signed_url ? signed_url : r->url,
                          .content_type = "application/json",
                          .body = body,
                          .body_len = len,
                          .timeout = r->owner->timeout};
    tw_http_answer answer;
    bool ok = tw_http_send(&rq, &answer, why, cap) == TW_OK;
    if (ok && (answer.status < 200 || answer.status > 299)) {
        /* the body only as the client redacted it: receivers echo tokens and signatures */
        snprintf(why, cap, "HTTP %ld (%zu bytes: %.200s)", answer.status, answer.length, answer.text);
        ok = false;
    }
    free(body);
    free(signed_url);
    return ok;
}

static void timed_wait(receiver *r, double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double end = (double)ts.tv_sec + ts.tv_nsec / 1e9 + seconds;
    ts.tv_sec = (time_t)end;
    ts.tv_nsec = (long)((end - (double)ts.tv_sec) * 1e9);
    pthread_cond_timedwait(&r->wake, &r->lock, &ts);
}

static void *deliver(void *arg)
{
    receiver *r = arg;
    double backoff = r->owner->backoff_initial;
    pthread_mutex_lock(&r->lock);
    while (!r->stopping) {
        if (r->count == 0) {
            r->busy = false;
            pthread_cond_broadcast(&r->idle_cond);
            pthread_cond_wait(&r->wake, &r->lock);
            continue;
        }
        /* take a batch out of the queue, oldest first */
        size_t n = r->count < r->format->batch_max ? r->count : r->format->batch_max;
        tw_queued_alert *batch = malloc(n * sizeof *batch);
        if (!batch) {
            timed_wait(r, 1);
            continue;
        }
        memcpy(batch, r->queue, n * sizeof *batch);
        memmove(r->queue, r->queue + n, (r->count - n) * sizeof *r->queue);
        r->count -= n;
        r->busy = true;
        pthread_mutex_unlock(&r->lock);
        char why[400];
        bool ok = post(r, batch, n, why, sizeof why);
        pthread_mutex_lock(&r->lock);
        if (ok) {
            if (r->sent)
                tw_counter_add(r->sent, (double)n);
            if (r->failing)
                note(r->owner, TW_SAY_INFO, "notifications to %s (%s) delivered again", r->name, r->shown);
            r->failing = false;
            backoff = r->owner->backoff_initial;
            for (size_t i = 0; i < n; i++)
                free_queued(&batch[i]);
        } else {
            if (r->errors)
                tw_counter_inc(r->errors);
            if (!r->failing)
                note(r->owner, TW_SAY_WARN, "notifying %s (%s) failed: %s; retrying with backoff", r->name, r->shown, why);
            r->failing = true;
            /* back in the queue, unless a newer state of the same alert is there */
            for (size_t i = n; i-- > 0;) {
                bool newer = false;
                for (size_t k = 0; k < r->count && !newer; k++)
                    newer = r->queue[k].fingerprint == batch[i].fingerprint;
                if (newer) {
                    free_queued(&batch[i]);
                    continue;
                }
                if (r->count == r->cap) {
                    size_t cap = r->cap ? 2 * r->cap : 16;
                    tw_queued_alert *grown = realloc(r->queue, cap * sizeof *grown);
                    if (!grown) {
                        free_queued(&batch[i]);
                        continue;
                    }
                    r->queue = grown;
                    r->cap = cap;
                }
                memmove(r->queue + 1, r->queue, r->count * sizeof *r->queue);
                r->queue[0] = batch[i];
                r->count++;
            }
            /* nothing in flight while backing off; new alerts do not cut the wait short */
            r->busy = false;
            pthread_cond_broadcast(&r->idle_cond);
            double until = tw_monotonic_clock() + backoff;
            while (!r->stopping && tw_monotonic_clock() < until)
                timed_wait(r, until - tw_monotonic_clock());
            backoff = backoff * 2 < r->owner->backoff_max ? backoff * 2 : r->owner->backoff_max;
        }
        free(batch);
        if (r->queued)
            tw_gauge_set(r->queued, (double)r->count);
    }
    r->busy = false;
    pthread_cond_broadcast(&r->idle_cond);
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

/* ---- set-up ------------------------------------------------------------ */

int tw_notifier_new(const tw_notifier_options *o, tw_notifier **out)
{
    tw_notifier *n = calloc(1, sizeof *n);
    if (!n)
        return TW_ENOMEM;
    char host[256] = "";
    if (!o->host && gethostname(host, sizeof host) != 0)
        host[0] = '\0';
    host[sizeof host - 1] = '\0';
    n->host = strdup(o->host ? o->host : host);
    n->external_url = strdup(o->external_url ? o->external_url : "");
    n->log = o->log;
    n->queue_limit = o->queue_limit ? o->queue_limit : 1000;
    n->timeout = o->timeout > 0 ? o->timeout : 10;
    n->backoff_max = o->backoff_max > 0 ? o->backoff_max : 60;
    n->backoff_initial = o->backoff_initial > 0 ? o->backoff_initial : 0.5;
    if (n->backoff_initial > n->backoff_max)
        n->backoff_initial = n->backoff_max;
    n->registry = o->registry;
    int rc = n->host && n->external_url ? TW_OK : TW_ENOMEM;
    if (rc == TW_OK && n->registry) {
        const char *labels[] = {"receiver"};
        struct {
            const char *name, *help;
            tw_metric_type type;
            tw_family **f;
        } defs[] = {
            {"trainwatch_notifications_sent", "Alerts delivered, by receiver.", TW_METRIC_COUNTER, &n->f_sent},
            {"trainwatch_notifications_errors", "Failed deliveries (each retried), by receiver.", TW_METRIC_COUNTER,
             &n->f_errors},
            {"trainwatch_notifications_dropped", "Alerts dropped from a full queue, by receiver.", TW_METRIC_COUNTER,
             &n->f_dropped},
            {"trainwatch_notifications_queue_length", "Alerts waiting for delivery, by receiver.", TW_METRIC_GAUGE,
             &n->f_queued},
        };
        for (size_t i = 0; i < 4 && rc == TW_OK; i++) {
            tw_family_options fo = {.name = defs[i].name,
                                    .help = defs[i].help,
                                    .type = defs[i].type,
                                    .label_count = 1,
                                    .label_names = labels};
            rc = tw_family_register(n->registry, &fo, defs[i].f);
        }
    }
    if (rc != TW_OK) {
        tw_notifier_free(n);
        return rc;
    }
    *out = n;
    return TW_OK;
}

int tw_notifier_add(tw_notifier *n, const tw_receiver_options *o, char *err, size_t cap)
{
    const tw_payload_format *format = tw_payload_format_find(o->format ? o->format : "alertmanager");
    if (!format) {
        snprintf(err, cap, "unknown notification format '%s'", o->format);
        return TW_EUSAGE;
    }
    if (!o->url || (strncmp(o->url, "http://", 7) && strncmp(o->url, "https://", 8))) {
        snprintf(err, cap, "receiver URL must start with http:// or https://");
        return TW_EUSAGE;
    }
    if (tw_http_client_load(err, cap) != TW_OK)
        return TW_EUNSUPPORTED;
    if (o->secret && !format->can_sign) {
        snprintf(err, cap, "format '%s' does not sign requests: no secret is used", format->name);
        return TW_EUSAGE;
    }
    if (n->count == RECEIVERS_MAX) {
        snprintf(err, cap, "at most %d receivers", RECEIVERS_MAX);
        return TW_ELIMIT;
    }
    receiver *r = calloc(1, sizeof *r);
    if (!r)
        return TW_ENOMEM;
    r->owner = n;
    r->format = format;
    r->url = strdup(o->url);
    tw_url_origin(o->url, r->shown, sizeof r->shown);
    r->secret = o->secret ? strdup(o->secret) : NULL;
    size_t same = 1;
    for (size_t i = 0; i < n->count; i++)
        same += n->receivers[i]->format == format;
    snprintf(r->name, sizeof r->name, "%s-%zu", format->name, same);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->wake, NULL);
    pthread_cond_init(&r->idle_cond, NULL);
    if (!r->url || (o->secret && !r->secret)) {
        free(r->url);
        free(r->secret);
        free(r);
        return TW_ENOMEM;
    }
    if (n->registry) {
        const char *v[] = {r->name};
        tw_family_series(n->f_sent, v, &r->sent);
        tw_family_series(n->f_errors, v, &r->errors);
        tw_family_series(n->f_dropped, v, &r->dropped);
        tw_family_series(n->f_queued, v, &r->queued);
    }
    n->receivers[n->count++] = r;
    if (pthread_create(&r->thread, NULL, deliver, r) != 0) {
        snprintf(err, cap, "could not start a delivery thread");
        return TW_ENOMEM;
    }
    r->started = true;
    return TW_OK;
}

size_t tw_notifier_flush(tw_notifier *n, double timeout)
{
    double end = tw_monotonic_clock() + timeout;
    size_t left = 0;
    for (size_t i = 0; i < n->count; i++) {
        receiver *r = n->receivers[i];
        pthread_mutex_lock(&r->lock);
        if (!r->failing)
            pthread_cond_signal(&r->wake); /* a failing receiver keeps its backoff */
        while ((r->count || r->busy) && tw_monotonic_clock() < end) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 50 * 1000 * 1000;
            if (ts.tv_nsec >= 1000000000L)
                ts.tv_sec++, ts.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&r->idle_cond, &r->lock, &ts);
        }
        left += r->count + (r->busy ? 1 : 0);
        pthread_mutex_unlock(&r->lock);
    }
    return left;
}

void tw_notifier_free(tw_notifier *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->count; i++) {
        receiver *r = n->receivers[i];
        pthread_mutex_lock(&r->lock);
        r->stopping = true;
        pthread_cond_broadcast(&r->wake);
        pthread_mutex_unlock(&r->lock);
        if (r->started)
            pthread_join(r->thread, NULL);
        for (size_t k = 0; k < r->count; k++)
            free_queued(&r->queue[k]);
        free(r->queue);
        free(r->url);
        free(r->secret);
        pthread_mutex_destroy(&r->lock);
        pthread_cond_destroy(&r->wake);
        pthread_cond_destroy(&r->idle_cond);
        free(r);
    }
    tw_family *fams[] = {n->f_sent, n->f_errors, n->f_dropped, n->f_queued};
    for (size_t i = 0; i < 4; i++) {
        if (fams[i])
            tw_family_unregister(fams[i]);
    }
    free(n->host);
    free(n->external_url);
    free(n);
}
