/*
 * timeline.h: where a rank's wall time went, in bounded memory.
 *
 * GPU work goes into three interval sets (compute, communication,
 * memcpy/memset) and host spans into two (DataLoader, synchronisation),
 * each a sorted array of disjoint intervals merged on insert, so
 * overlapping work of one kind is counted once. When a set holds more than
 * TW_TIMELINE_CAP intervals, the time before the median interval's start
 * (the watermark) is accounted into the steps and dropped from every set.
 * Traces write each kind roughly in time order (Kineto per device, Paddle
 * per stream), so this is exact for them; an interval that arrives after
 * the watermark passed it is counted as late and only its part after the
 * watermark is used.
 */
#ifndef TW_TRACE_TIMELINE_H
#define TW_TRACE_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "trainwatch/trace.h"

#define TW_TIMELINE_CAP (1u << 15) /* intervals per set before a flush */
/* Host spans (DataLoader, sync) may come long before the GPU work they
 * explain (Kineto writes every host event first): their sets wait for the
 * GPU work up to this many intervals before a flush is forced. */
#define TW_TIMELINE_HOST_CAP (1u << 19)
#define TW_TIMELINE_STEPS    (1u << 16) /* steps accounted per rank */

typedef enum tw_set_kind {
    TW_SET_COMPUTE,
    TW_SET_COMM,
    TW_SET_MEMCPY,
    TW_SET_DATA,
    TW_SET_SYNC,
    TW_SET_COUNT
} tw_set_kind;

typedef struct tw_ivset {
    double *v; /* start, end pairs */
    size_t n, cap;
} tw_ivset;

typedef struct tw_timeline {
    tw_ivset sets[TW_SET_COUNT];
    double watermark;
    double gap_us;
    double gpu_first, gpu_last;
    tw_trace_step *steps;
    size_t step_count, step_cap;
    uint64_t steps_over, late;
    uint64_t flushes, forced; /* watermark flushes; host-set flushes ahead of the GPU work */
    tw_trace_split nostep;    /* accounted when there are no steps */
    int error;                /* TW_ENOMEM once an allocation failed */
} tw_timeline;

void tw_timeline_init(tw_timeline *t, double gap_us);
void tw_timeline_free(tw_timeline *t);
void tw_timeline_add(tw_timeline *t, tw_set_kind k, double start, double end);
void tw_timeline_add_step(tw_timeline *t, int64_t id, double start, double end);
/* The step whose window holds ts, or NULL. */
tw_trace_step *tw_timeline_step_at(tw_timeline *t, double ts);
/* Accounts everything left; the steps (or nostep) then hold the figures. */
void tw_timeline_finish(tw_timeline *t);
/* Sum of the steps' splits, or the stepless window's. */
void tw_timeline_total(const tw_timeline *t, tw_trace_split *out);

/* The larger and the smaller of a and b, where b is never NaN (a NaN a
 * gives b, as fmax and fmin do): a compare, where fmax and fmin are a call
 * to keep their other NaN and signed-zero rules. */
static inline double tw_dmax(double a, double b)
{
    return a > b ? a : b;
}

static inline double tw_dmin(double a, double b)
{
    return a < b ? a : b;
}

#endif
