/*
 * health.c: the health score as a live gauge (see health.h). A diagnosis of
 * the run so far costs about what a report at the end costs (bounded:
 * per-rank statistics and series of at most TW_SERIES_MAX points), so it is
 * made every HEALTH_INTERVAL seconds, not per record.
 */
#include "health.h"

#include <stddef.h>

#include "trainwatch/error.h"

#define HEALTH_INTERVAL 15.0

int tw_health_gauge_init(tw_health_gauge *h, tw_registry *r, const char *run)
{
    static const char *const labels[] = {"run"};
    tw_family_options o = {.name = "trainwatch_health_score",
                           .help = "Training health 0-100 (trainwatch analyze's score) of the run so far.",
                           .type = TW_METRIC_GAUGE,
                           .label_count = 1,
                           .label_names = labels};
    *h = (tw_health_gauge){.run = run};
    return tw_family_register(r, &o, &h->family);
}

void tw_health_gauge_set(tw_health_gauge *h, const tw_report *report)
{
    if (!h->family || (report->summary.step_records == 0 && report->summary.eval_records == 0))
        return;
    const char *values[] = {h->run};
    if (!h->gauge && tw_family_series(h->family, values, &h->gauge) != TW_OK)
        return;
    tw_gauge_set(h->gauge, report->health.score);
}

void tw_health_gauge_tick(tw_health_gauge *h, const tw_run *run, double now)
{
    if (h->gauge && now < h->next)
        return; /* before the first score, every tick tries (cheap while the run is empty) */
    h->next = now + HEALTH_INTERVAL;
    tw_thresholds th;
    tw_thresholds_default(&th);
    tw_report *report;
    if (tw_diagnose(run, &th, &report) != TW_OK)
        return;
    tw_health_gauge_set(h, report);
    tw_report_free(report);
}
