/*
 * guard.h: keeps slow clients (slowloris) from holding the metrics server's
 * connections, without refusing a scraper that shares their address.
 *
 * A connection is "waiting" from its accept (or the end of its previous
 * request) until its request headers are complete. Two rules bound waiting
 * connections:
 *   - a header deadline: one still waiting after header_timeout seconds is
 *     closed, however steadily it trickles bytes (the idle timeout alone is
 *     reset by each byte);
 *   - room for newcomers: when a new connection would put its address over
 *     per_ip_waiting waiting connections, or all addresses over
 *     waiting_max, the oldest waiting connection of that address (or of the
 *     address with the most) is closed to make room.
 * So a Prometheus that scrapes from the same address as 70 trickling
 * clients still gets in at once: its headers arrive in microseconds and it
 * is never the oldest waiting. Closed means shutdown(2) on the socket; its
 * owner (libmicrohttpd) sees the end of stream and closes it.
 *
 * The cap on one address's connections (per_ip_max) is the guard's too, and
 * counts only connections not yet closed by it: one it has shut down may
 * take libmicrohttpd a moment to close, and a burst of newcomers must not
 * find their address full of connections that are already on their way
 * out (libmicrohttpd's own per-address limit counted them, and refused a
 * scrape at the end of a burst of 70 trickling clients).
 *
 * The guard knows sockets and addresses only (no libmicrohttpd), so it can
 * be tested on socket pairs. Every function is thread-safe.
 */
#ifndef TW_HTTP_GUARD_H
#define TW_HTTP_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

typedef struct tw_guard tw_guard;
typedef struct tw_guard_conn tw_guard_conn;

typedef struct tw_guard_options {
    unsigned per_ip_max;     /* connections one address may hold (0: no cap) */
    unsigned per_ip_waiting; /* waiting connections one address may hold */
    unsigned waiting_max;    /* waiting connections in all */
    double header_timeout;   /* seconds from accept (or the previous request's end) to complete headers */
} tw_guard_options;

/* Starts the deadline thread. TW_OK or TW_ENOMEM. */
int tw_guard_new(const tw_guard_options *o, tw_guard **out);
/* Stops the deadline thread and frees; every connection must be closed. */
void tw_guard_free(tw_guard *g);

/* Before a connection from addr is accepted: makes room for it (see
 * above). False: its address holds per_ip_max connections that are not
 * waiting (each busy with a request), and it is refused. */
bool tw_guard_admit(tw_guard *g, const struct sockaddr *addr);
/* A connection was accepted: it is waiting. Returns its handle (NULL: out
 * of memory, and the connection goes unguarded). */
tw_guard_conn *tw_guard_opened(tw_guard *g, int fd, const struct sockaddr *addr);
/* Its request headers are complete: no longer waiting. */
void tw_guard_headers_done(tw_guard *g, tw_guard_conn *c);
/* Its request was answered: waiting for the next one (keep-alive). */
void tw_guard_request_done(tw_guard *g, tw_guard_conn *c);
/* It is closed (before its socket is): forgets and frees the handle. */
void tw_guard_closed(tw_guard *g, tw_guard_conn *c);

/* Connections closed by the guard so far (deadline, room). */
size_t tw_guard_closed_count(tw_guard *g);

#endif
