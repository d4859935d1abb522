/*
 * gpu_time.h: the GPU time in the GPU logs given beside the training logs,
 * over the launch a report shows, and its money at the prices given
 * (gpu_time.c), for `trainwatch analyze`.
 */
#ifndef TW_ANALYZE_GPU_TIME_H
#define TW_ANALYZE_GPU_TIME_H

#include <stddef.h>

#include "trainwatch/analyze.h"
#include "trainwatch/supervise.h"

/* Counts into report->summary.gpu_cost (for the text, the JSON and the
 * history) the GPU-seconds and money of run's GPU logs over the launch the
 * report shows, with the money the time left would cost at the rate so
 * far. TW_OK, also when run has no GPU logs (nothing is counted); an error
 * with why in err (the GPU time left out of the report). */
int tw_analyze_gpu_time(const tw_run *run, const tw_cost_options *prices, tw_report *report, char *err, size_t errlen);

#endif
