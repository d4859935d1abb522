/*
 * minmax.h: a bounded series of samples over time that keeps, per bucket of
 * consecutive samples, the minimum and the maximum (and when each was
 * taken). When the buckets are full, neighbours are merged in pairs and each
 * bucket then takes twice as many samples, so memory is fixed, the series
 * spans the whole sampling evenly and every extreme survives (`run`'s GPU
 * sampling, drawn by the HTML report).
 *
 * Ownership: plain value; nothing allocated.
 */
#ifndef TW_CORE_MINMAX_H
#define TW_CORE_MINMAX_H

#include <stddef.h>
#include <stdint.h>

#define TW_MINMAX_BUCKETS 512

typedef struct tw_minmax_bucket {
    double t_min, v_min, t_max, v_max;
    uint64_t n; /* samples in the bucket */
} tw_minmax_bucket;

typedef struct tw_minmax {
    tw_minmax_bucket b[TW_MINMAX_BUCKETS];
    int count;
    uint64_t per_bucket; /* samples a bucket takes: 1, 2, 4 ... (0: not started) */
    uint64_t samples;    /* added in all */
} tw_minmax;

/* Adds value v taken at time t (values that are not finite are skipped). */
void tw_minmax_add(tw_minmax *s, double t, double v);

/* The points to draw, in time order: per bucket its minimum and its
 * maximum (one point when they are the same sample). out holds at least
 * 2 * s->count; returns the number written. t and v are parallel. */
size_t tw_minmax_points(const tw_minmax *s, double *t, double *v);

#endif
