/*
 * http.h: the /metrics endpoint, served with libmicrohttpd.
 *
 * Paths: /metrics (content negotiated: text 0.0.4 or OpenMetrics, gzip when
 * accepted), /-/healthy, and a small landing page at /; 404 elsewhere; only
 * GET and HEAD. Binds 127.0.0.1:9464 unless told otherwise. TLS and basic
 * auth come from an exporter-toolkit web configuration file, as for any
 * Prometheus exporter, checked off the event loop (a pool of bcrypt
 * workers with a cache of recent successful checks).
 *
 * Slow or malformed clients: a connection cap (N), at most N/2 from one
 * address, an idle timeout, a header size cap, and a header deadline (a
 * connection must complete its request headers within header_timeout
 * seconds of its accept, however it trickles). Connections still sending
 * headers are recycled oldest first when one address holds N/4 of them or
 * all hold N - N/8, so a newcomer (a Prometheus scrape, which sends its
 * headers at once) gets in even when it shares its address with the slow
 * clients; it is never refused for them.
 */
#ifndef TRAINWATCH_HTTP_H
#define TRAINWATCH_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trainwatch/metrics.h"

#define TW_HTTP_DEFAULT_ADDRESS "127.0.0.1:9464"

typedef struct tw_http_server tw_http_server;

typedef struct tw_http_options {
    const char *listen_address;   /* host:port, [v6]:port, :port (all interfaces); NULL: default */
    const char *web_config_file;  /* NULL: plain HTTP, no authentication */
    tw_registry *registry;        /* NULL: the default registry */
    bool text_only;               /* never answer OpenMetrics */
    unsigned connection_limit;    /* 0: 64 */
    unsigned timeout_seconds;     /* idle timeout; 0: 10 */
    unsigned header_timeout_seconds; /* accept to complete headers; 0: 10 */
    unsigned auth_workers;        /* bcrypt threads; 0: 2 */
    size_t max_request_bytes;     /* header size cap; 0: 16 KiB */
    /* More pages (trainwatch's /alerts): called, on the server's thread, for
     * a path not served above, with the request's `format` query argument
     * (or NULL); returns a malloc'd body the server frees and sets *type,
     * or NULL for a 404. NULL: none. */
    char *(*page)(void *arg, const char *path, const char *format, size_t *len, const char **type);
    void *page_arg;
} tw_http_options;

/* Starts serving in a background thread. On failure returns a TW_E* code
 * and writes a one-line reason (naming the address or file) into err. */
int tw_http_start(const tw_http_options *o, tw_http_server **out, char *err, size_t errlen);
/* The /metrics requests served so far: how many, the monotonic time
 * (tw_monotonic_clock's) the latest began, and the longest gap between
 * the last TW_HTTP_SCRAPES_KEPT of them (the scrape interval of the
 * slowest regular scraper; 0 with fewer than two). */
#define TW_HTTP_SCRAPES_KEPT 5
typedef struct tw_http_scrape_stats {
    uint64_t count;
    double last, interval;
} tw_http_scrape_stats;
void tw_http_scrapes(tw_http_server *s, tw_http_scrape_stats *out);
/* The port actually bound (useful with port 0). */
uint16_t tw_http_port(const tw_http_server *s);
/* Whether it serves HTTPS (the web configuration gave a certificate). */
bool tw_http_uses_tls(const tw_http_server *s);
/* Stops serving and frees the server. */
void tw_http_stop(tw_http_server *s);

/* Splits "host:port" / "[v6]:port" / ":port"; returns 0 or TW_EINVAL. */
int tw_parse_listen_address(const char *address, char *host, size_t hostlen, char *port, size_t portlen);

#endif
