/*
 * internal.h: the data structures behind metrics.h, shared by the registry
 * (registry.c), the exposition writers (expose.c) and the collectors.
 *
 * A cell is one series. A gauge is one atomic double (`bits`): set is a
 * store, add a compare-and-swap. Counters and histograms are striped: each
 * updating thread owns one of TW_STRIPES cache lines and updates it with a
 * plain load and store (a single writer needs no locked instruction), and a
 * scrape sums the stripes. Threads beyond TW_STRIPES share one last stripe
 * with atomic read-modify-write. A counter stripe keeps integer increments in
 * `count` and fractional adds in `bits`; a histogram stripe keeps its sum in
 * `bits` and one count per bucket (+Inf last) in the cell's bucket rows. A
 * histogram's total is the sum of its buckets, so `_count` always equals the
 * +Inf bucket in what a scrape sees.
 */
#ifndef TW_METRICS_INTERNAL_H
#define TW_METRICS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "trainwatch/metrics.h"

#define TW_STRIPES 8             /* threads with a stripe of their own */

typedef struct tw_stripe {
    _Atomic uint64_t count;
    _Atomic uint64_t bits;
    char pad[48];                 /* one cache line per stripe */
} tw_stripe;

struct tw_cell {
    tw_family *family;
    _Atomic uint64_t bits;        /* gauges and info */
    tw_stripe *stripes;           /* counters and histograms: TW_STRIPES + 1 (shared) */
    _Atomic uint64_t *buckets;    /* histograms: (TW_STRIPES + 1) rows of bucket_count + 1 */
    size_t bucket_row;            /* row length, padded to whole cache lines */
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
uint64_t tw_histogram_bucket(const tw_cell *c, size_t i);  /* summed over stripes */
double tw_histogram_sum(const tw_cell *c);

#endif
