/*
 * gpu_time.c: the GPU time in the GPU logs given beside the training logs,
 * counted by supervise/cost.c the way `run` counts NVML's samples: one
 * interval of each GPU's log at a time (diagnose/gpu.c), over the launch
 * the report shows, into the report's summary.
 */
#include "gpu_time.h"

#include <stdio.h>

#include "../diagnose/gpu.h"
#include "../supervise/cost.h"
#include "trainwatch/error.h"

static void count_interval(void *cost, int gpu, double util, double seconds)
{
    (void)gpu;
    tw_cost_gpu(cost, NULL, true, util, seconds); /* GPU logs name no model: --gpu-hour-cost prices them */
}

/* The launch the report shows (its last when it names none), or NULL. */
static const tw_run *shown_launch(const tw_run *run, const tw_report *report)
{
    int shown =
        report->launch >= 1 && report->launch <= report->launch_count ? report->launch - 1 : report->launch_count - 1;
    return tw_run_launch(run, report->launches[shown].span.index - 1);
}

int tw_analyze_gpu_time(const tw_run *run, const tw_cost_options *prices, tw_report *report, char *err, size_t errlen)
{
    if (!run->gpu || !report->launch_count)
        return TW_OK;
    const tw_run *view = shown_launch(run, report);
    tw_registry *scratch; /* cost.c keeps metrics: nobody serves them here */
    tw_cost *cost = NULL;
    if (tw_registry_new(&scratch) != TW_OK) {
        snprintf(err, errlen, "out of memory counting the GPU time");
        return TW_ENOMEM;
    }
    int rc = tw_cost_new(scratch, "analyze", 0, prices, &cost, err, errlen);
    if (rc == TW_OK) {
        int gpus = tw_gpu_each_interval(run, view ? view : run, count_interval, cost);
        if (gpus < 0) {
            snprintf(err, errlen, "out of memory counting the GPU time");
            rc = TW_ENOMEM;
        } else {
            tw_gpu_cost *g = &report->summary.gpu_cost;
            tw_cost_totals(cost, g);
            g->gpus = gpus;
            /* the GPUs of the launch at the money a GPU-second has cost, for the time left */
            if (g->priced && g->gpu_seconds > 0 && report->summary.eta_seconds > 0)
                g->projected_cost = g->cost + g->cost / g->gpu_seconds * gpus * report->summary.eta_seconds;
        }
    }
    tw_cost_free(cost);
    tw_registry_free(scratch);
    return rc;
}
