/*
 * template.h: the part of Go's text/template that Prometheus rule labels and
 * annotations use.
 *
 * Supported: literal text; actions {{ X }} with trim markers {{- -}} and
 * comments; operands $labels.NAME (.Labels.NAME), $value (.Value),
 * $externalURL, $externalLabels.NAME, strings and numbers; pipelines with
 * humanize, humanize1024, humanizeDuration, humanizePercentage, printf,
 * toUpper, toLower, title. Control structures (if, range, with, define) are
 * refused when compiling, by name.
 */
#ifndef TW_RULES_TEMPLATE_H
#define TW_RULES_TEMPLATE_H

#include <stddef.h>

#include "labels.h"

/* Bounds that keep a template from printing without end: a printf width or
 * precision above the first is refused when compiling (TW_EUNSUPPORTED) and
 * printed as %!(BADWIDTH) or %!(BADPREC) when the format comes from a label;
 * a rendering is cut at the second. Go allows widths up to 1e6. */
#define TW_TEMPLATE_MAX_PRINTF_WIDTH 1000
#define TW_TEMPLATE_MAX_OUTPUT       (64 * 1024)

typedef struct tw_template tw_template;

typedef struct tw_template_data {
    const tw_lset *labels;
    double value;
    const char *external_url;
} tw_template_data;

/* TW_ECONFIG for a syntax error, TW_EUNSUPPORTED outside the subset. */
int tw_template_compile(const char *text, tw_template **out, char *err, size_t cap);
void tw_template_free(tw_template *t);
/* A malloc'd rendering of at most TW_TEMPLATE_MAX_OUTPUT bytes; NULL on no
 * memory. */
char *tw_template_render(const tw_template *t, const tw_template_data *d);

/* Go's %v for a float64 (shortest digits, exponent form outside [1e-4, 1e6)). */
void tw_format_go_float(double v, char *out, size_t cap);
/* Prometheus's humanize: 4 significant digits and an SI prefix. */
void tw_humanize(double v, char *out, size_t cap);

#endif
