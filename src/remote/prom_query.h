/*
 * prom_query.h: reading a Prometheus HTTP API (Prometheus itself, Thanos,
 * Mimir, Cortex, VictoriaMetrics: anything that answers /api/v1/query and
 * /api/v1/query_range). The history's fleet-scale side (`runs --prometheus`,
 * `compare --prometheus`) asks its questions here.
 *
 * A query is POSTed as a form (no URL length limit for long selectors); the
 * answer is read whole (up to TW_PROM_ANSWER_MAX) and parsed into series of
 * (time, value) points with their labels. An answer that is not the API's
 * JSON, an error the server reports ("bad_data: parse error ..."), a dead
 * server or a 5xx are a one-line err naming the server by its origin (never
 * the credentials or the query string of the URL).
 *
 * Ownership: a tw_prom_result is the caller's, freed with tw_prom_result_free.
 */
#ifndef TW_REMOTE_PROM_QUERY_H
#define TW_REMOTE_PROM_QUERY_H

#include <stddef.h>

#define TW_PROM_ANSWER_MAX (64u << 20) /* bytes of one answer read at most */

typedef struct tw_prom_label {
    char *name, *value;
} tw_prom_label;

typedef struct tw_prom_series {
    tw_prom_label *labels;
    size_t label_count;
    double *t, *v; /* count each: seconds since the epoch, the value (NaN, +-Inf kept) */
    size_t count, cap;
} tw_prom_series;

typedef struct tw_prom_result {
    tw_prom_series *series;
    size_t count;
} tw_prom_result;

/* The server asked: the API's base URL (a path prefix kept) and further
 * request headers ("X-Scope-OrgID: tenant" for Mimir and Cortex,
 * "Authorization: Bearer ..."), borrowed. */
typedef struct tw_prom_server {
    const char *url;
    const char *const *headers;
    size_t header_count;
} tw_prom_server;

#define TW_PROM_HEADERS_MAX 8

/* An instant query at time (seconds since the epoch). */
int tw_prom_query(const tw_prom_server *srv, const char *query, double time, tw_prom_result *out, char *err,
                  size_t errlen);
/* A range query from start to end every step seconds. */
int tw_prom_query_range(const tw_prom_server *srv, const char *query, double start, double end, double step,
                        tw_prom_result *out, char *err, size_t errlen);

/* Parses an API answer (exposed for the tests and the fuzz target): TW_OK
 * with out filled for a success; TW_EHTTP with the server's error type and
 * message, or what is wrong with the text, in err. */
int tw_prom_parse(const char *text, size_t len, tw_prom_result *out, char *err, size_t errlen);

/* The value of a series' label, or NULL. */
const char *tw_prom_label_value(const tw_prom_series *s, const char *name);
void tw_prom_result_free(tw_prom_result *r);

#endif
