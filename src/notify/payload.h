/*
 * payload.h: the request bodies of each receiver format, as a table of small
 * vtables (payload.c). notify.c owns queues and delivery; a format only says
 * what to POST for a batch of alerts.
 */
#ifndef TW_NOTIFY_PAYLOAD_H
#define TW_NOTIFY_PAYLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An alert as the queue keeps it: owned copies. */
typedef struct tw_queued_alert {
    char **label_names, **label_values;
    size_t label_count;
    char **annotation_names, **annotation_values;
    size_t annotation_count;
    bool resolved;
    double starts_at, ends_at, value;
    char *generator_url;
    uint64_t fingerprint;
} tw_queued_alert;

typedef struct tw_payload_context {
    const char *host;
    const char *external_url;
    const char *secret;      /* NULL: no signature */
    double now;              /* unix seconds, for signatures */
} tw_payload_context;

typedef struct tw_payload_format tw_payload_format;

struct tw_payload_format {
    const char *name;
    bool every_send;         /* true: re-sends too (Alertmanager API); false: state changes only */
    size_t batch_max;        /* alerts per request */
    bool can_sign;
    /* Builds the body (malloc'd, *len set) and, if the format signs requests
     * in the URL, a new URL in *url_out (malloc'd; else NULL). */
    int (*build)(const tw_payload_format *self, const tw_payload_context *c, const tw_queued_alert *a, size_t n,
                 const char *url, char **body, size_t *len, char **url_out);
    const void *style;       /* the format's own data (chat formats: where title and text go) */
};

const tw_payload_format *tw_payload_format_find(const char *name);
extern const tw_payload_format *const tw_payload_formats[];

const char *tw_queued_label(const tw_queued_alert *a, const char *name);
const char *tw_queued_annotation(const tw_queued_alert *a, const char *name);

#endif
