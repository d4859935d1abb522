/*
 * store.h: the recent samples the rule evaluator reads, in memory.
 *
 * Samples are taken in rounds ("slots"): tw_store_begin opens a slot at a
 * timestamp, tw_store_put sets series values in it, and tw_store_end closes
 * it, marking series that disappeared as stale, the way a Prometheus scrape
 * does. Every series keeps one value per slot in a ring of `capacity` slots
 * shared by all, so memory is slots x series x 8 bytes and never grows with
 * the length of the run. A slot where a series has no sample holds
 * TW_STORE_NONE; an explicit end of a series holds TW_STORE_STALE. Both are
 * NaN payloads no arithmetic produces, so a real NaN (a NaN loss) is a value.
 *
 * Only series whose metric name tw_store_want() accepts are kept: the rule
 * set tells the store which names its selectors read.
 */
#ifndef TW_RULES_STORE_H
#define TW_RULES_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "labels.h"

typedef struct tw_store tw_store;

typedef struct tw_series {
    tw_lset labels;        /* with __name__ */
    char *key;             /* canonical text, the identity */
    const void *owner;     /* NULL: sampled; else the recording rule that writes it */
    double *values;        /* capacity slots, ring-aligned with the store's times */
    struct tw_series *next; /* hash chain */
} tw_series;

int tw_store_new(size_t capacity, tw_store **out);
void tw_store_free(tw_store *s);
/* Names the store keeps; with none added, it keeps every name. */
int tw_store_want(tw_store *s, const char *metric_name);
bool tw_store_wants(const tw_store *s, const char *metric_name);

/* Opens the slot at time t (milliseconds, not before the last slot). */
void tw_store_begin(tw_store *s, int64_t t);
/* Sets a series' value in the open slot; labels are copied on first sight. */
int tw_store_put(tw_store *s, const tw_lset *labels, double value, const void *owner);
/* Marks stale the series of this owner that had a value and got none now. */
void tw_store_end(tw_store *s, const void *owner);

/* Reading: the series, and per series the values at times in [from, to]. */
size_t tw_store_series_count(const tw_store *s);
tw_series *tw_store_series_at(const tw_store *s, size_t i);
typedef struct tw_point {
    int64_t t;
    double v;
} tw_point;
/* Fills out (cap points) with the samples in [from, to], oldest first;
 * returns the count. Stale markers end a series: samples before the last
 * stale marker in the window are kept, only the marker itself is skipped. */
size_t tw_store_range(const tw_store *s, const tw_series *series, int64_t from, int64_t to, tw_point *out,
                      size_t cap);
/* The latest sample in [t - lookback, t]; false if none or it is stale. */
bool tw_store_instant(const tw_store *s, const tw_series *series, int64_t t, int64_t lookback, tw_point *out);
size_t tw_store_capacity(const tw_store *s);

bool tw_store_is_marker(double v);
extern const uint64_t tw_store_none_bits, tw_store_stale_bits;
double tw_store_stale(void);
double tw_store_none(void);

#endif
