/*
 * clock.h: the two clocks trainwatch reads: wall time (what metrics and
 * timestamps report) and monotonic time (what intervals and timeouts use).
 */
#ifndef TW_CORE_CLOCK_H
#define TW_CORE_CLOCK_H

#include <time.h>

static inline double tw_clock_read(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Seconds since the epoch. */
static inline double tw_wall_clock(void) { return tw_clock_read(CLOCK_REALTIME); }
/* Seconds on a clock that never jumps. */
static inline double tw_monotonic_clock(void) { return tw_clock_read(CLOCK_MONOTONIC); }

#endif
