/*
 * internal.h: the data structures behind metrics.h, shared by the registry
 * (registry.c), the exposition writers (expose.c) and the collectors.
 *
 * A cell is one series. Its numbers are atomics: a counter keeps integer
 * increments in `count` (fetch-add, the common case) and fractional adds in
 * `bits` (a double, compare-and-swap); a gauge keeps its double in `bits`; a
 * histogram keeps one count per bucket (+Inf last) and its sum in `bits`, and
 * its total count is the sum of the buckets, so `_count` always equals the
 * +Inf bucket in what a scrape sees.
 */
#ifndef TW_METRICS_INTERNAL_H
#define TW_METRICS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "trainwatch/metrics.h"

struct tw_cell {
    tw_family *family;
    _Atomic uint64_t count;
    _Atomic uint64_t bits;
    _Atomic uint64_t *buckets;    /* histograms: bucket_count + 1 */
    double created;               /* seconds since the epoch */
    uint64_t hash;
    tw_cell *next;                /* hash chain */
    char *labels[TW_LABELS_MAX];  /* owned */
};

struct tw_family {
    tw_registry *registry;
    tw_metric_type type;
    char *name;                   /* counters without _total, info without _info */
    char *help;
    size_t label_count;
    char *label_names[TW_LABELS_MAX];
    double *bounds;               /* histograms, increasing, without +Inf */
    size_t bound_count;
    size_t series_limit;
    pthread_mutex_t lock;         /* guards the table and the order list */
    tw_cell **table;
    size_t table_size;
    tw_cell **order;              /* insertion order, for stable output */
    size_t count, order_cap;
};

#define TW_COLLECTORS_MAX 16

struct tw_registry {
    pthread_mutex_t lock;         /* guards the family list and collectors */
    pthread_mutex_t collect_lock; /* one exposition's collectors at a time */
    tw_family **families;
    size_t family_count, family_cap;
    struct {
        tw_collector_fn fn;
        void *arg;
        void (*release)(void *arg);
    } collectors[TW_COLLECTORS_MAX];
    size_t collector_count;
    tw_counter *dropped;          /* trainwatch_dropped_series_total */
};

double tw_bits_to_double(uint64_t bits);
uint64_t tw_double_to_bits(double v);
uint64_t tw_histogram_bucket(const tw_cell *c, size_t i);
double tw_wall_seconds(void);

#endif
