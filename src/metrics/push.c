/*
 * push.c: the Pushgateway client (see push.h), over core/http_client.
 */
#include "trainwatch/push.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../core/base64.h"
#include "../core/buffer.h"
#include "../core/http_client.h"
#include "trainwatch/error.h"

/* A label value as the Pushgateway's @base64 path segment expects it. */
static void base64url(tw_buffer *b, const char *s)
{
    size_t n = strlen(s);
    if (n == 0) {
        tw_buffer_putc(b, '='); /* the Pushgateway's spelling of an empty value */
        return;
    }
    if (!tw_buffer_reserve(b, tw_base64_length(n) + 1))
        return;
    b->len += tw_base64_encode(s, n, true, b->data + b->len);
}

static void url_escape(tw_buffer *b, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-._~", *p))
            tw_buffer_putc(b, (char)*p);
        else
            tw_buffer_printf(b, "%%%02X", *p);
    }
}

static bool valid_label(const char *s)
{
    if (!s || !*s)
        return false;
    for (const char *p = s; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' || (p != s && *p >= '0' && *p <= '9')))
            return false;
    }
    return true;
}

static void group_segment(tw_buffer *b, const char *name, const char *value)
{
    tw_buffer_putc(b, '/');
    tw_buffer_puts(b, name);
    if (!*value || strchr(value, '/')) {
        tw_buffer_puts(b, "@base64/");
        base64url(b, value);
    } else {
        tw_buffer_putc(b, '/');
        url_escape(b, value);
    }
}

int tw_push_url(const tw_push_options *o, char *out, size_t cap)
{
    if (!o->url || !o->job || !*o->job || o->grouping_count > TW_PUSH_GROUPING_MAX)
        return TW_EINVAL;
    for (size_t i = 0; i < o->grouping_count; i++) {
        if (!valid_label(o->grouping_names[i]) || !o->grouping_values[i] || strcmp(o->grouping_names[i], "job") == 0)
            return TW_EINVAL;
    }
    tw_buffer b;
    tw_buffer_init(&b);
    tw_buffer_puts(&b, o->url);
    while (b.len > 0 && b.data[b.len - 1] == '/')
        b.data[--b.len] = '\0';
    tw_buffer_puts(&b, "/metrics");
    group_segment(&b, "job", o->job);
    for (size_t i = 0; i < o->grouping_count; i++)
        group_segment(&b, o->grouping_names[i], o->grouping_values[i]);
    int rc = (!b.failed && b.len < cap) ? TW_OK : TW_EINVAL;
    if (rc == TW_OK)
        memcpy(out, b.data, b.len + 1);
    tw_buffer_free(&b);
    return rc;
}

static int attempt(const char *url, tw_push_method m, const char *body, size_t len, double timeout, char *err,
                   size_t errlen)
{
    static const char *const methods[] = {[TW_PUSH_REPLACE] = "PUT", [TW_PUSH_ADD] = "POST", [TW_PUSH_DELETE] = "DELETE"};
    bool del = m == TW_PUSH_DELETE;
    tw_http_request rq = {.method = methods[m], .url = url, .timeout = timeout,
                          .content_type = del ? NULL : "text/plain; version=0.0.4; charset=utf-8",
                          .body = del ? NULL : body, .body_len = del ? 0 : len};
    tw_http_answer answer;
    char why[256], shown[1024];
    tw_url_without_credentials(url, shown, sizeof shown); /* never user:password@ in a message */
    int rc = tw_http_send(&rq, &answer, why, sizeof why);
    if (rc != TW_OK) {
        snprintf(err, errlen, "%s: %s", shown, why);
        return rc == TW_EUNSUPPORTED ? rc : TW_ENET;
    }
    if (answer.status < 200 || answer.status >= 300) {
        /* the gateway says why in its body, already one line (redacted by the client) */
        snprintf(err, errlen, "%s: HTTP %ld: %.300s", shown, answer.status, answer.text);
        return TW_EHTTP;
    }
    return TW_OK;
}

static void sleep_seconds(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int tw_push(const tw_push_options *o, tw_registry *r, tw_push_method m, char *err, size_t errlen)
{
    char url[4096];
    if (tw_push_url(o, url, sizeof url) != TW_OK) {
        snprintf(err, errlen, "invalid Pushgateway URL, job or grouping labels");
        return TW_EINVAL;
    }
    char *body = NULL;
    size_t len = 0;
    if (m != TW_PUSH_DELETE && tw_registry_expose(r ? r : tw_registry_default(), TW_EXPOSE_TEXT, &body, &len) != TW_OK) {
        snprintf(err, errlen, "out of memory");
        return TW_ENOMEM;
    }
    double timeout = o->timeout_seconds > 0 ? o->timeout_seconds : 5;
    int retries = o->retries < 0 ? 0 : (o->retries ? o->retries : 2);
    double wait = o->backoff_seconds > 0 ? o->backoff_seconds : 0.5;
    int rc = TW_OK;
    for (int i = 0; i <= retries; i++) {
        rc = attempt(url, m, body, len, timeout, err, errlen);
        /* a 4xx is the request's fault: sending it again will not help */
        if (rc == TW_OK || (rc == TW_EHTTP && strstr(err, ": HTTP 4")))
            break;
        if (i < retries) {
            sleep_seconds(wait);
            wait *= 2;
        }
    }
    free(body);
    return rc;
}

/* ---- background pusher --------------------------------------------- */

struct tw_pusher {
    tw_push_options options;
    char *url, *job;
    char *names[TW_PUSH_GROUPING_MAX], *values[TW_PUSH_GROUPING_MAX];
    tw_registry *registry;
    double interval;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool requested, stopping;
    int last_status;
    char last_error[512];
};

static void *pusher_main(void *arg)
{
    tw_pusher *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stopping) {
        if (!p->requested) {
            if (p->interval > 0) {
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                double t = (double)until.tv_sec + until.tv_nsec / 1e9 + p->interval;
                until.tv_sec = (time_t)t;
                until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
                if (pthread_cond_timedwait(&p->wake, &p->lock, &until) == ETIMEDOUT)
                    p->requested = true;
            } else {
                pthread_cond_wait(&p->wake, &p->lock);
            }
            continue;
        }
        p->requested = false;
        pthread_mutex_unlock(&p->lock);
        char err[512] = "";
        int rc = tw_push(&p->options, p->registry, TW_PUSH_REPLACE, err, sizeof err);
        pthread_mutex_lock(&p->lock);
        p->last_status = rc;
        snprintf(p->last_error, sizeof p->last_error, "%s", err);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void pusher_free(tw_pusher *p)
{
    free(p->url);
    free(p->job);
    for (size_t i = 0; i < TW_PUSH_GROUPING_MAX; i++) {
        free(p->names[i]);
        free(p->values[i]);
    }
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    free(p);
}

int tw_pusher_start(const tw_push_options *o, tw_registry *r, double interval_seconds, tw_pusher **out)
{
    char url[4096];
    if (tw_push_url(o, url, sizeof url) != TW_OK)
        return TW_EINVAL;
    tw_pusher *p = calloc(1, sizeof *p);
    if (!p)
        return TW_ENOMEM;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    /* own copies: the caller's strings may not outlive the pusher */
    p->options = *o;
    p->options.url = p->url = strdup(o->url);
    p->options.job = p->job = strdup(o->job);
    bool ok = p->url && p->job;
    for (size_t i = 0; i < o->grouping_count && ok; i++) {
        p->options.grouping_names[i] = p->names[i] = strdup(o->grouping_names[i]);
        p->options.grouping_values[i] = p->values[i] = strdup(o->grouping_values[i]);
        ok = p->names[i] && p->values[i];
    }
    p->registry = r ? r : tw_registry_default();
    p->interval = interval_seconds;
    if (!ok || pthread_create(&p->thread, NULL, pusher_main, p) != 0) {
        pusher_free(p);
        return TW_ENOMEM;
    }
    *out = p;
    return TW_OK;
}

void tw_pusher_request(tw_pusher *p)
{
    pthread_mutex_lock(&p->lock);
    p->requested = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
}

int tw_pusher_stop(tw_pusher *p, bool final_push, char *err, size_t errlen)
{
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    int rc = p->last_status;
    snprintf(err, errlen, "%s", p->last_error);
    if (final_push)
        rc = tw_push(&p->options, p->registry, TW_PUSH_REPLACE, err, errlen);
    pusher_free(p);
    return rc;
}

int tw_push_run_end(const char *url, const char *job, int rank, tw_registry *r, char *err, size_t errlen)
{
    char host[256] = "", rank_text[16];
    gethostname(host, sizeof host - 1);
    snprintf(rank_text, sizeof rank_text, "%d", rank);
    tw_push_options p = {.url = url,
                         .job = job,
                         .grouping_count = 2,
                         .grouping_names = {"rank", "instance"},
                         .grouping_values = {rank_text, host}};
    return tw_push(&p, r, TW_PUSH_REPLACE, err, errlen);
}
