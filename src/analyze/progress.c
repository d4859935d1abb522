/*
 * progress.c: the progress line (see progress.h). A thread wakes every
 * 250 ms and reads the current parser's progress counter (an atomic the
 * parser updates as it consumes input); the parser is swapped under a mutex
 * so the line never reads one that is being closed. Nothing of this runs
 * unless the line is wanted, so pipes, CI logs and --json output never see
 * a carriage return.
 */
#include "progress.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../core/clock.h"

struct tw_progress {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;
    const tw_parser *current;
    uint64_t before, total;
    int files, done;
    double start;
};

bool tw_progress_wanted(bool quiet, uint64_t total_bytes, int files)
{
    const char *ci = getenv("CI");
    return !quiet && !(ci && *ci) && isatty(STDERR_FILENO) &&
           (total_bytes >= TW_PROGRESS_MIN_BYTES || files >= TW_PROGRESS_MIN_FILES);
}

static void draw(tw_progress *g)
{
    uint64_t bytes = g->before + (g->current ? tw_parser_progress(g->current) : 0);
    double elapsed = tw_monotonic_clock() - g->start;
    double rate = elapsed > 0 ? (double)bytes / elapsed : 0;
    char eta[32] = "?";
    if (rate > 0 && g->total > bytes) {
        long s = (long)((double)(g->total - bytes) / rate);
        snprintf(eta, sizeof eta, "%ld:%02ld", s / 60, s % 60);
    } else if (g->total <= bytes) {
        snprintf(eta, sizeof eta, "0:00");
    }
    fprintf(stderr, "\r\033[Ktrainwatch analyze: %d/%d files, %.0f/%.0f MB, %.0f MB/s, ETA %s", g->done, g->files,
            (double)bytes / 1e6, (double)g->total / 1e6, rate / 1e6, eta);
    fflush(stderr);
}

static void *loop(void *arg)
{
    tw_progress *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        draw(g); /* at once, then every 250 ms: even a short read shows a line */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 250000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&g->wake, &g->lock, &until);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

tw_progress *tw_progress_start(uint64_t total_bytes, int files)
{
    tw_progress *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->total = total_bytes;
    g->files = files;
    g->start = tw_monotonic_clock();
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->wake, NULL);
    if (pthread_create(&g->thread, NULL, loop, g) != 0) {
        pthread_mutex_destroy(&g->lock);
        pthread_cond_destroy(&g->wake);
        free(g);
        return NULL;
    }
    return g;
}

void tw_progress_reading(tw_progress *g, const tw_parser *p, uint64_t bytes_before, int done)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->current = p;
    g->before = bytes_before;
    g->done = done;
    pthread_mutex_unlock(&g->lock);
}

void tw_progress_stop(tw_progress *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->stop = true;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    fputs("\r\033[K", stderr); /* cleared: the report follows on a clean line */
    fflush(stderr);
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->wake);
    free(g);
}
