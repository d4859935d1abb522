/*
 * health.h: `trainwatch_health_score{run}` while `run` or `watch` goes: the
 * analyze health score (src/diagnose/health.c) of the run so far, refreshed
 * every HEALTH_INTERVAL seconds on the supervision's timer and set from the
 * final diagnosis at the end (so a Pushgateway push carries the final one).
 *
 * Ownership: the gauge's series belongs to the registry.
 */
#ifndef TW_SUPERVISE_HEALTH_H
#define TW_SUPERVISE_HEALTH_H

#include "trainwatch/analyze.h"
#include "trainwatch/metrics.h"

typedef struct tw_health_gauge {
    tw_family *family;
    tw_gauge *gauge; /* NULL until the run has a training record */
    const char *run;
    double next; /* monotonic time of the next refresh */
} tw_health_gauge;

int tw_health_gauge_init(tw_health_gauge *h, tw_registry *r, const char *run);
/* Refreshes the score from the run when it is due. */
void tw_health_gauge_tick(tw_health_gauge *h, const tw_run *run, double now);
/* Sets it from a report (the final diagnosis). */
void tw_health_gauge_set(tw_health_gauge *h, const tw_report *report);

#endif
