/*
 * metrics.h: libtrainwatch's Prometheus metrics: a registry of counters,
 * gauges, histograms and info metrics, exposed in the Prometheus text format
 * 0.0.4 or OpenMetrics 1.0.0.
 *
 * Two paths with different costs:
 *   - registration and series lookup (tw_family_*, tw_*_new) validate names,
 *     allocate and lock; do them once, outside the training loop;
 *   - updates on a held series handle (tw_counter_inc, tw_gauge_set,
 *     tw_histogram_observe, ...) are lock-free atomics: no allocation, no
 *     lock, no system call, safe from any number of threads.
 *
 * Guards: at most TW_LABELS_MAX label names per family; at most
 * series_limit series per family (default TW_SERIES_LIMIT_DEFAULT), past
 * which a new label combination is refused with TW_ELIMIT and counted in the
 * registry's trainwatch_dropped_series_total, never silently.
 *
 * Ownership: a registry owns its families, a family its series. Handles are
 * borrowed: valid until the family is unregistered or the registry freed.
 */
#ifndef TRAINWATCH_METRICS_H
#define TRAINWATCH_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TW_LABELS_MAX           8
#define TW_SERIES_LIMIT_DEFAULT 1000

typedef struct tw_registry tw_registry;
typedef struct tw_family tw_family;
typedef struct tw_cell tw_cell;

/* Series handles: one cell type underneath, named for what you may do. */
typedef tw_cell tw_counter;
typedef tw_cell tw_gauge;
typedef tw_cell tw_histogram;

typedef enum tw_metric_type {
    TW_METRIC_COUNTER,
    TW_METRIC_GAUGE,
    TW_METRIC_HISTOGRAM,
    TW_METRIC_INFO,
} tw_metric_type;

/* ---- registries ---------------------------------------------------- */

int tw_registry_new(tw_registry **out);
void tw_registry_free(tw_registry *r);
/* The process-wide registry (created on first use, never freed). */
tw_registry *tw_registry_default(void);

/* A collector runs before each exposition, to refresh gauges from outside
 * state (the process collector reads /proc). */
typedef void (*tw_collector_fn)(tw_registry *r, void *arg);
/* release (may be NULL) is called on arg when the registry is freed. */
int tw_registry_add_collector(tw_registry *r, tw_collector_fn fn, void *arg, void (*release)(void *arg));

/* Registers the standard process_* metrics (cpu, memory, fds, start time). */
int tw_process_collector_register(tw_registry *r);

/* ---- families ------------------------------------------------------ */

typedef struct tw_family_options {
    const char *name;                /* [a-zA-Z_:][a-zA-Z0-9_:]*; counters may end in _total */
    const char *help;
    tw_metric_type type;
    size_t label_count;              /* at most TW_LABELS_MAX */
    const char *const *label_names;  /* [a-zA-Z_][a-zA-Z0-9_]*, not __*, le, quantile */
    const double *buckets;           /* histograms: upper bounds, increasing; NULL: defaults */
    size_t bucket_count;
    size_t series_limit;             /* 0: TW_SERIES_LIMIT_DEFAULT */
} tw_family_options;

int tw_family_register(tw_registry *r, const tw_family_options *o, tw_family **out);
/* Removes the family from its registry and frees it and all its series. */
void tw_family_unregister(tw_family *f);

/* The series for these label values (label_count of them), created on first
 * use. May lock and allocate: look handles up once, keep them. On failure
 * *out is set to NULL (past the series limit: TW_ELIMIT, counted). */
int tw_family_series(tw_family *f, const char *const *label_values, tw_cell **out);

/* Label-less shortcuts: register a family and return its only series. */
int tw_counter_new(tw_registry *r, const char *name, const char *help, tw_counter **out);
int tw_gauge_new(tw_registry *r, const char *name, const char *help, tw_gauge **out);
int tw_histogram_new(tw_registry *r, const char *name, const char *help, const double *buckets,
                     size_t count, tw_histogram **out);
/* An info metric NAME_info{labels} 1 (name given without _info). */
int tw_info_new(tw_registry *r, const char *name, const char *help, size_t label_count,
                const char *const *label_names, const char *const *label_values);

/* ---- updates (lock-free) ------------------------------------------- */

/* Every update takes NULL and does nothing: a caller that keeps the handle
 * of a refused series (NULL after TW_ELIMIT) loses that series' values, which
 * trainwatch_dropped_series_total counted, and nothing else. */

void tw_counter_inc(tw_counter *c);
/* Adds v >= 0; negative or NaN is refused (TW_EINVAL), counters never go back. */
int tw_counter_add(tw_counter *c, double v);
void tw_gauge_set(tw_gauge *g, double v);
void tw_gauge_add(tw_gauge *g, double v);
void tw_gauge_inc(tw_gauge *g);
void tw_gauge_dec(tw_gauge *g);
void tw_histogram_observe(tw_histogram *h, double v);

double tw_cell_value(const tw_cell *c);  /* counters and gauges */

/* ---- buckets ------------------------------------------------------- */

/* Defaults suited to training step times: 5 ms .. 10 min. */
extern const double tw_step_time_buckets[];
extern const size_t tw_step_time_bucket_count;
/* count bounds start, start+width, ...; returns count or 0 on bad input. */
size_t tw_buckets_linear(double start, double width, size_t count, double *out);
/* count bounds start, start*factor, ...; returns count or 0 on bad input. */
size_t tw_buckets_exponential(double start, double factor, size_t count, double *out);

/* ---- exposition ---------------------------------------------------- */

typedef enum tw_expose_format {
    TW_EXPOSE_TEXT,         /* text/plain; version=0.0.4 */
    TW_EXPOSE_OPENMETRICS,  /* application/openmetrics-text; version=1.0.0 */
} tw_expose_format;

/* Picks the format a scrape's Accept header asks for, as Prometheus'
 * client_golang does: the highest-q supported media type; text when none. */
tw_expose_format tw_negotiate_format(const char *accept);
/* True when an Accept-Encoding header allows gzip (q > 0). */
bool tw_accepts_gzip(const char *accept_encoding);
const char *tw_expose_content_type(tw_expose_format f);

/* Writes the registry in format f into a malloc'ed buffer (*out, *len; the
 * caller frees). Runs collectors first. Returns 0 or TW_ENOMEM. */
int tw_registry_expose(tw_registry *r, tw_expose_format f, char **out, size_t *len);

/* One sample as the text format names it: counters with _total, histograms
 * as _bucket (with le), _sum and _count, info with _info. */
typedef struct tw_sample_view {
    const char *name;
    size_t label_count;
    const char *const *label_names;
    const char *const *label_values;
    double value;
} tw_sample_view;

/* Runs the collectors, then calls fn for every sample of every family whose
 * sample names want() accepts (want gets the family's base name and type;
 * NULL: all). The registry is locked during the walk: fn must not update it. */
int tw_registry_visit(tw_registry *r, bool (*want)(const char *family, tw_metric_type type, void *arg),
                      void (*fn)(const tw_sample_view *s, void *arg), void *arg);

#endif
