/*
 * html.h: the reports as one self-contained HTML page (docs/report.md).
 *
 * The page has the findings first, worst first, each linking to the region
 * of the chart it is about and quoting the log line it cites; then the
 * summary, the inputs and their formats, and charts drawn as inline SVG
 * (loss, learning rate, step time split into data wait and compute,
 * throughput, device memory with the projection to the device's size, the
 * step time of each rank, launches as shaded bands; for traces the split
 * of each step and the top kernels and operators). It fetches nothing:
 * CSS, SVG and a small script are inline and a content security policy
 * forbids any request.
 *
 * Ownership: everything is borrowed; the writers only read.
 */
#ifndef TRAINWATCH_HTML_H
#define TRAINWATCH_HTML_H

#include <stdio.h>

#include "trainwatch/analyze.h"
#include "trainwatch/trace.h"

/* The page of an analysed run: report from tw_diagnose*() over run; title
 * names the run (the job, the log). TW_OK, or TW_ENOMEM. Write errors are
 * the stream's (check it after). */
int tw_report_write_html(FILE *out, const tw_report *report, const tw_run *run, const char *title);

/* GPU samples the caller took itself (run's NVML sampling), reduced to the
 * minimum and the maximum of each bucket of time: per point one GPU, its
 * time (seconds since the epoch) and a utilisation (percent) or a memory
 * used (bytes), the other NAN. */
typedef struct tw_html_gpu_point {
    int gpu;
    double time, util, mem_used;
} tw_html_gpu_point;

typedef struct tw_html_gpu {
    tw_html_gpu_point *points; /* in time order per GPU; owned by whoever filled it */
    size_t count;
    double mem_total; /* bytes, a GPU's size (the last read), for a line; NAN or 0 when unknown */
} tw_html_gpu;

/* The same page with sampled GPU charts (NULL: none, as tw_report_write_html). */
int tw_report_write_html_gpu(FILE *out, const tw_report *report, const tw_run *run, const char *title,
                             const tw_html_gpu *sampled);

/* The page of a finished trace (tw_trace_finish). */
int tw_trace_write_html(FILE *out, const tw_trace *t, const char *title);

#endif
