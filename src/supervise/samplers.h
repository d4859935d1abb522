/*
 * samplers.h: what `trainwatch run` samples each second beside the log: the
 * command's whole process tree from /proc (CPU, memory, I/O, threads,
 * workers) and every GPU through NVML (DCGM exporter names), as metrics
 * labelled run and rank; at the end, a finding when the GPUs sat mostly idle
 * and the summary lines under the report.
 *
 * No NVML or no GPU is not an error: the GPU series are then absent and one
 * line says why.
 *
 * Ownership: tw_samplers_new() allocates; tw_samplers_free() frees (the
 * metrics stay in the registry, which owns them).
 */
#ifndef TW_SUPERVISE_SAMPLERS_H
#define TW_SUPERVISE_SAMPLERS_H

#include <stdio.h>
#include <sys/types.h>

#include "trainwatch/analyze.h"
#include "trainwatch/html.h"
#include "trainwatch/metrics.h"
#include "trainwatch/supervise.h"

typedef struct tw_samplers tw_samplers;

/* name prefixes messages ("trainwatch NAME: ..."); cost: what the GPUs
 * cost (cost.h). TW_EUSAGE, said, for a price table that cannot be read. */
int tw_samplers_new(tw_registry *r, const char *name, const char *run, int rank, const tw_cost_options *cost,
                    tw_samplers **out);
void tw_samplers_free(tw_samplers *s);
/* Samples the process tree under root (0: GPUs only) and the GPUs;
 * interval is the time since the last sample. */
void tw_samplers_sample(tw_samplers *s, pid_t root, double interval);
/* Adds what sampling saw to the report (GPUs mostly idle). */
void tw_samplers_add_findings(const tw_samplers *s, tw_report *report);
/* What the GPU sampling kept for drawing (a bounded series of each GPU's
 * utilisation and memory, min and max per bucket of time): out->points is
 * allocated (the caller frees it; NULL and 0 without NVML). TW_OK or
 * TW_ENOMEM. */
int tw_samplers_gpu_series(const tw_samplers *s, tw_html_gpu *out);
/* The GPU time and money counted (cost.h), for the report and the history. */
void tw_samplers_cost(const tw_samplers *s, tw_gpu_cost *out);
/* The summary lines under the report. */
void tw_samplers_write(const tw_samplers *s, const tw_report *report, FILE *out);

#endif
