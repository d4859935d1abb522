/*
 * html.h: the parts every HTML report shares: the page (inline CSS, a small
 * inline script for hover values and highlighted findings, a content
 * security policy that forbids every fetch), text escaping, the findings
 * list with the log lines they cite, and key/value tables.
 */
#ifndef TW_REPORT_HTML_H
#define TW_REPORT_HTML_H

#include <stdint.h>
#include <stdio.h>

#include "trainwatch/analyze.h"
#include "trainwatch/history.h"

/* s with &, <, >, " and ' escaped; bytes below 0x20 but tab become spaces. */
void tw_html_text(FILE *out, const char *s);

/* The page up to <main>: title and a subtitle (escaped); time_axis: offer
 * the switch between step and time on the x axis. */
void tw_html_begin(FILE *out, const char *title, const char *subtitle, bool time_axis);
void tw_html_end(FILE *out);

/* A log line a finding cites, read back from its file. */
typedef struct tw_html_quote {
    const char *file; /* borrowed */
    uint64_t line;    /* 1-based; 0: none */
    char *text;       /* owned, NULL when it could not be read (stdin, a pipe, gone) */
} tw_html_quote;

/* Reads the lines (plain or gzip regular files, one pass per file). */
void tw_html_quotes_read(tw_html_quote *q, int n);
void tw_html_quotes_free(tw_html_quote *q, int n);

/* The findings, worst first as given; targets[i] is the element id finding
 * i links to ("f-3": a highlighted region, "chart-loss": a chart) or NULL;
 * quotes[i] the line it cites (may be NULL as a whole). */
void tw_html_findings(FILE *out, const tw_finding *f, int n, char (*targets)[32], const tw_html_quote *quotes);

/* <tr><th>key</th><td>value</td></tr>, value printf-style and escaped. */
void tw_html_row(FILE *out, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The page of `trainwatch compare --html` (html_compare.c): runs[0] is the
 * reference; n at most TW_HISTORY_COMPARE_MAX. TW_OK or TW_ENOMEM (then
 * nothing is written). */
int tw_html_compare_write(FILE *out, const tw_history_view *runs, size_t n);

#endif
