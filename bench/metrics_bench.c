/*
 * metrics_bench.c: the cost of the metrics library's hot path and of
 * exposition, printed as JSON lines for bench/metrics.py to compare with
 * python3-prometheus-client. Not a test: numbers only.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainwatch/metrics.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct job {
    tw_cell *cell;
    int kind;
    long n;
} job;

static void *run(void *arg)
{
    job *j = arg;
    for (long i = 0; i < j->n; i++) {
        switch (j->kind) {
        case 0: tw_counter_inc(j->cell); break;
        case 1: tw_gauge_set(j->cell, (double)i); break;
        default: tw_histogram_observe(j->cell, (double)(i & 1023) * 0.001); break;
        }
    }
    return NULL;
}

static double ns_per_op(tw_cell *cell, int kind, int threads, long n)
{
    pthread_t t[2];
    job j = {cell, kind, n};
    double start = now();
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, run, &j);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    return (now() - start) * 1e9 / (double)n; /* per op per thread */
}

int main(void)
{
    tw_registry *r;
    tw_registry_new(&r);
    tw_cell *c, *g, *h;
    tw_counter_new(r, "c_total", "c", &c);
    tw_gauge_new(r, "g", "g", &g);
    tw_histogram_new(r, "h", "h", NULL, 0, &h);
    const char *names[] = {"counter_inc", "gauge_set", "histogram_observe"};
    tw_cell *cells[] = {c, g, h};
    long n = 20000000;
    for (int k = 0; k < 3; k++) {
        for (int threads = 1; threads <= 2; threads++)
            printf("{\"op\":\"%s\",\"threads\":%d,\"ns\":%.3f}\n", names[k], threads, ns_per_op(cells[k], k, threads, n));
    }
    int sizes[] = {100, 1000, 10000};
    for (int s = 0; s < 3; s++) {
        tw_registry *big;
        tw_registry_new(&big);
        const char *labels[] = {"index"};
        tw_family *f;
        tw_family_options o = {.name = "series", .help = "x", .type = TW_METRIC_GAUGE, .label_count = 1,
                               .label_names = labels, .series_limit = 20000};
        tw_family_register(big, &o, &f);
        for (int i = 0; i < sizes[s]; i++) {
            char v[16];
            snprintf(v, sizeof v, "%d", i);
            const char *values[] = {v};
            tw_gauge *gg;
            tw_family_series(f, values, &gg);
            tw_gauge_set(gg, i * 0.5);
        }
        int reps = 200000 / sizes[s];
        double start = now();
        for (int i = 0; i < reps; i++) {
            char *text;
            size_t len;
            tw_registry_expose(big, TW_EXPOSE_TEXT, &text, &len);
            free(text);
        }
        printf("{\"op\":\"expose\",\"series\":%d,\"ms\":%.4f}\n", sizes[s], (now() - start) * 1e3 / reps);
        tw_registry_free(big);
    }
    tw_registry_free(r);
    return 0;
}
