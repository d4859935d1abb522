/*
 * cost.h: the GPU time and money of a `run`, fed by the GPU sampler
 * (samplers.c) one GPU at a time: GPU-seconds used (the GPUs the command's
 * processes hold memory on), the idle share of them (utilisation under a
 * threshold), and with a price (--gpu-hour-cost, or a price table of GPU
 * models, --gpu-prices) the money used, idle and per hour, and a budget to
 * alert on (the TrainingOverBudget rule projects cost_total with
 * trainwatch_eta_seconds). Metrics labelled run and rank.
 *
 * Ownership: tw_cost_new allocates, tw_cost_free frees; the metrics stay
 * in the registry.
 */
#ifndef TW_SUPERVISE_COST_H
#define TW_SUPERVISE_COST_H

#include <stdbool.h>
#include <stdio.h>

#include "trainwatch/analyze.h"
#include "trainwatch/metrics.h"
#include "trainwatch/supervise.h"

typedef struct tw_cost tw_cost;

/* Reads the price table; a bad one is TW_EINVAL with "FILE:LINE: why" in err. */
int tw_cost_new(tw_registry *r, const char *run, int rank, const tw_cost_options *o, tw_cost **out, char *err,
                size_t errlen);
void tw_cost_free(tw_cost *c);
/* One GPU of one sample: model is NVML's name; used: the command's
 * processes hold memory on it; util NAN when unknown; dt seconds since the
 * last sample. */
void tw_cost_gpu(tw_cost *c, const char *model, bool used, double util, double dt);
/* After the GPUs of one sample: the gauges of what is in use now. */
void tw_cost_sample_done(tw_cost *c);
/* The summary line under the report ("GPUs: 1.2 GPU-hours ..."); nothing
 * when no GPU was used. */
void tw_cost_write(const tw_cost *c, FILE *out);
/* What c counted so far, for the report and the history (NULL c: none). */
void tw_cost_totals(const tw_cost *c, tw_gpu_cost *out);
/* The summary line of g ("GPU time: 4 GPU-seconds, ..."), as run and
 * analyze print it; nothing when g counted no GPU time. */
void tw_gpu_cost_write(const tw_gpu_cost *g, FILE *out);
/* The same words without the "GPU time: " and the newline, into buf; ""
 * when no GPU time was counted. Returns buf. */
const char *tw_gpu_cost_text(const tw_gpu_cost *g, char *buf, size_t cap);

#endif
