/*
 * html_run.h: what the files of the run's report page share:
 * html_run_tables.c's tables, written into the page by html_run.c.
 */
#ifndef TW_REPORT_HTML_RUN_H
#define TW_REPORT_HTML_RUN_H

#include <stddef.h>
#include <stdio.h>

#include "trainwatch/analyze.h"

#define TW_HTML_GIB (1024.0 * 1024.0 * 1024.0)

void tw_html_summary_table(FILE *out, const tw_report *r);
void tw_html_metrics_table(FILE *out, const char *caption, const tw_metric_summary *m, int n);
void tw_html_launches_table(FILE *out, const tw_report *r);
void tw_html_inputs_table(FILE *out, const tw_report *r);
/* The line under the title: the run's span, steps and health, into buf. */
void tw_html_subtitle(const tw_report *r, char *buf, size_t cap);

#endif
