/*
 * chart.h: line charts drawn as inline SVG for the HTML reports.
 *
 * A chart holds series of (step, time, value) points, shaded bands (the
 * launches of a log), highlight regions (what a finding is about) and an
 * optional horizontal line (device memory). tw_chart_write() draws it twice,
 * over steps and, when the points carry timestamps, over time (the page
 * switches between the two), and writes a table of the points drawn as the
 * chart's text alternative. A series of more points than the plot is wide
 * is drawn from the minimum and the maximum of each bucket of steps, so a
 * one-step spike stays visible at any length; values that are not finite
 * (a NaN loss) are drawn as markers on the top edge, never dropped.
 *
 * Ownership: the chart is the caller's (tw_chart_init / tw_chart_free);
 * series and their points are owned by the chart.
 */
#ifndef TW_REPORT_CHART_H
#define TW_REPORT_CHART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The frame every chart and the trace page's bars are drawn in, in SVG
 * user units (the SVG scales to the page's width). */
#define TW_CHART_W      860.0
#define TW_CHART_H      230.0
#define TW_CHART_LEFT   72.0
#define TW_CHART_RIGHT  14.0
#define TW_CHART_TOP    12.0
#define TW_CHART_BOTTOM 34.0

#define TW_CHART_BUCKETS 300 /* buckets of steps a series is drawn with: at most two points each */
#define TW_CHART_BANDS   64
#define TW_CHART_MARKS   64
#define TW_CHART_PALETTE 8 /* Okabe-Ito colours, classes c0..c7 */

typedef struct tw_chart_point {
    double step, time, y; /* time: NAN without a timestamp */
} tw_chart_point;

typedef struct tw_chart_series {
    char name[64];
    int colour; /* 0 .. TW_CHART_PALETTE - 1 */
    bool dashed;
    tw_chart_point *points; /* finite values, in step order; owned */
    size_t count, cap;
    tw_chart_point *bad; /* NaN and Inf values; owned */
    size_t bad_count, bad_cap;
} tw_chart_series;

typedef struct tw_chart_band {
    double step0, step1, time0, time1; /* time: NAN when unknown */
    char label[48];
} tw_chart_band;

/* A region a finding is about: highlighted when its link is followed. */
typedef struct tw_chart_mark {
    int finding; /* 1-based, the id f-N the findings list links to */
    double step, time;
} tw_chart_mark;

typedef struct tw_chart {
    char id[32];    /* the element id, e.g. "chart-loss" */
    char title[96]; /* "Loss" */
    char unit[32];  /* the y axis: "s", "GiB", "" */
    char note[256]; /* a sentence under the title, or "" */
    double y_scale; /* values are divided by this when drawn and tabled (1: as they are) */
    bool log_y;     /* chosen by tw_chart_write when the values span three decades */
    tw_chart_series *series;
    int series_count, series_cap;
    tw_chart_band bands[TW_CHART_BANDS];
    int band_count;
    tw_chart_mark marks[TW_CHART_MARKS];
    int mark_count;
    double hline; /* drawn when finite (in the values' unit, before y_scale) */
    char hline_label[64];
    bool step_offsets; /* the steps are launches laid end to end, not the log's own numbers */
    bool time_only;    /* drawn over time only (no step view): a point's step is its time */
    double t0;         /* the time origin the page's charts share; NAN: this chart's first time */
} tw_chart;

void tw_chart_init(tw_chart *c, const char *id, const char *title, const char *unit);
void tw_chart_free(tw_chart *c);
/* A new empty series; NULL when out of memory. The pointer is valid until
 * the next tw_chart_series_add. */
tw_chart_series *tw_chart_series_add(tw_chart *c, const char *name, int colour);
/* Adds a point (a non-finite y goes to the markers). TW_ENOMEM or TW_OK. */
int tw_chart_point_add(tw_chart_series *s, double step, double time, double y);
/* Inserts a point in step order unless one at that step is there already
 * (an exact extreme the series' own downsampling may have dropped). */
int tw_chart_point_insert(tw_chart_series *s, double step, double time, double y);
void tw_chart_band_add(tw_chart *c, double step0, double step1, double time0, double time1, const char *label);
void tw_chart_mark_add(tw_chart *c, int finding, double step, double time);
/* Points in the chart (finite and not), to leave out an empty chart. */
size_t tw_chart_points(const tw_chart *c);

/* The chart as a <figure>: title, the SVG over steps, over time when the
 * points have timestamps, and the table of the points drawn. */
void tw_chart_write(FILE *out, tw_chart *c);

#endif
