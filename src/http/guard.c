/*
 * guard.c: header deadlines and room for newcomers (see guard.h).
 *
 * The connections are a list under one mutex; the server holds at most a
 * few dozen, so every decision is a linear scan. A thread sleeps until the
 * earliest header deadline. Closing is shutdown(2) under the mutex, and the
 * owner reports a connection closed (taking the mutex) before it closes the
 * socket, so a descriptor is never shut down after it was reused.
 */
#include "guard.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainwatch/error.h"

struct tw_guard_conn {
    tw_guard_conn *prev, *next;
    int fd;
    unsigned char ip[16]; /* IPv6, or IPv4 mapped into it */
    bool waiting, shut;
    double since; /* monotonic seconds: when it began waiting */
};

struct tw_guard {
    tw_guard_options o;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    bool stopping;
    tw_guard_conn *head;
    size_t closed;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void address(const struct sockaddr *addr, unsigned char ip[16])
{
    memset(ip, 0, 16);
    if (addr && addr->sa_family == AF_INET6) {
        memcpy(ip, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
    } else if (addr && addr->sa_family == AF_INET) {
        ip[10] = ip[11] = 0xff;
        memcpy(ip + 12, &((const struct sockaddr_in *)addr)->sin_addr, 4);
    }
}

/* With the lock held. */
static void shut(tw_guard *g, tw_guard_conn *c)
{
    shutdown(c->fd, SHUT_RDWR);
    c->shut = true;
    c->waiting = false;
    g->closed++;
}

static size_t waiting_from(tw_guard *g, const unsigned char ip[16], tw_guard_conn **oldest)
{
    size_t n = 0;
    *oldest = NULL;
    for (tw_guard_conn *c = g->head; c; c = c->next) {
        if (c->waiting && (!ip || memcmp(c->ip, ip, 16) == 0)) {
            n++;
            if (!*oldest || c->since < (*oldest)->since)
                *oldest = c;
        }
    }
    return n;
}

/* With the lock held: the oldest waiting connection of the address that has the most. */
static tw_guard_conn *busiest_oldest(tw_guard *g)
{
    tw_guard_conn *best = NULL;
    size_t most = 0;
    for (tw_guard_conn *c = g->head; c; c = c->next) {
        tw_guard_conn *oldest;
        size_t n = c->waiting ? waiting_from(g, c->ip, &oldest) : 0;
        if (n > most || (n == most && n && oldest->since < best->since)) {
            most = n;
            best = oldest;
        }
    }
    return best;
}

/* With the lock held: connections of ip the guard has not shut down. */
static size_t open_from(tw_guard *g, const unsigned char ip[16])
{
    size_t n = 0;
    for (tw_guard_conn *c = g->head; c; c = c->next)
        n += !c->shut && memcmp(c->ip, ip, 16) == 0;
    return n;
}

bool tw_guard_admit(tw_guard *g, const struct sockaddr *addr)
{
    unsigned char ip[16];
    address(addr, ip);
    pthread_mutex_lock(&g->lock);
    tw_guard_conn *oldest;
    if (waiting_from(g, ip, &oldest) >= g->o.per_ip_waiting && oldest)
        shut(g, oldest);
    if (waiting_from(g, NULL, &oldest) >= g->o.waiting_max && (oldest = busiest_oldest(g)))
        shut(g, oldest);
    size_t open_now = g->o.per_ip_max ? open_from(g, ip) : 0;
    if (g->o.per_ip_max && open_now >= g->o.per_ip_max && waiting_from(g, ip, &oldest) > 0) {
        shut(g, oldest); /* full of its own: its oldest idle one makes room */
        open_now--;
    }
    bool admitted = !g->o.per_ip_max || open_now < g->o.per_ip_max;
    pthread_mutex_unlock(&g->lock);
    return admitted;
}

tw_guard_conn *tw_guard_opened(tw_guard *g, int fd, const struct sockaddr *addr)
{
    tw_guard_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fd = fd;
    address(addr, c->ip);
    c->waiting = true;
    c->since = now();
    pthread_mutex_lock(&g->lock);
    c->next = g->head;
    if (g->head)
        g->head->prev = c;
    g->head = c;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    return c;
}

void tw_guard_headers_done(tw_guard *g, tw_guard_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->lock);
    c->waiting = false;
    pthread_mutex_unlock(&g->lock);
}

void tw_guard_request_done(tw_guard *g, tw_guard_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->lock);
    if (!c->shut) {
        c->waiting = true;
        c->since = now();
        pthread_cond_signal(&g->wake);
    }
    pthread_mutex_unlock(&g->lock);
}

void tw_guard_closed(tw_guard *g, tw_guard_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        g->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&g->lock);
    free(c);
}

size_t tw_guard_closed_count(tw_guard *g)
{
    pthread_mutex_lock(&g->lock);
    size_t n = g->closed;
    pthread_mutex_unlock(&g->lock);
    return n;
}

/* Closes what passed its header deadline, then sleeps until the next one. */
static void *deadlines(void *arg)
{
    tw_guard *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stopping) {
        double t = now(), next = 0;
        for (tw_guard_conn *c = g->head; c; c = c->next) {
            if (!c->waiting)
                continue;
            double due = c->since + g->o.header_timeout;
            if (due <= t)
                shut(g, c);
            else if (next == 0 || due < next)
                next = due;
        }
        if (next == 0) {
            pthread_cond_wait(&g->wake, &g->lock);
            continue;
        }
        /* the condition variable waits on CLOCK_MONOTONIC (see tw_guard_new) */
        struct timespec ts = {.tv_sec = (time_t)next, .tv_nsec = (long)((next - (double)(time_t)next) * 1e9)};
        pthread_cond_timedwait(&g->wake, &g->lock, &ts);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

int tw_guard_new(const tw_guard_options *o, tw_guard **out)
{
    tw_guard *g = calloc(1, sizeof *g);
    if (!g)
        return TW_ENOMEM;
    g->o = *o;
    if (g->o.per_ip_waiting == 0)
        g->o.per_ip_waiting = 1;
    if (g->o.waiting_max == 0)
        g->o.waiting_max = 1;
    pthread_mutex_init(&g->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&g->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&g->thread, NULL, deadlines, g) != 0) {
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->lock);
        free(g);
        return TW_ENOMEM;
    }
    *out = g;
    return TW_OK;
}

void tw_guard_free(tw_guard *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->stopping = true;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    while (g->head) {
        tw_guard_conn *c = g->head;
        g->head = c->next;
        free(c);
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g);
}
