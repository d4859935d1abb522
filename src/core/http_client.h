/*
 * http_client.h: one outgoing HTTP request (the Pushgateway client and the
 * alert receivers use it), on libcurl loaded with dlopen at the first
 * request. A process that never sends anything (analyze, or watch without
 * receivers) never maps libcurl and its TLS and Kerberos dependencies,
 * about 6 MiB of resident memory.
 *
 * Secrets: webhook URLs carry tokens in their path and query, Pushgateway
 * and Alertmanager URLs may carry user:password@, and receivers echo tokens
 * and signatures in error bodies. So nothing here ever puts a URL in `why`,
 * an answer's body is handed out only as a short redacted prefix, and logs
 * name a URL by tw_url_origin alone.
 */
#ifndef TW_CORE_HTTP_CLIENT_H
#define TW_CORE_HTTP_CLIENT_H

#include <stddef.h>

#include "buffer.h"

typedef struct tw_http_request {
    const char *method; /* "GET", "POST", "PUT", "DELETE" */
    const char *url;
    const char *content_type; /* NULL: no body */
    const char *body;
    size_t body_len;
    double timeout; /* seconds, for connecting and for the whole request */
    const char *const *headers; /* further "Name: value" lines (Content-Encoding, Authorization...) */
    size_t header_count;
    /* Where a reader of an API wants the whole answer: appended to `whole`
     * (the caller's) up to whole_cap bytes; past that the request fails with
     * TW_ELIMIT. NULL: only the redacted prefix is kept (answer->text). */
    tw_buffer *whole;
    size_t whole_cap;
} tw_http_request;

#define TW_HTTP_ANSWER_PREFIX 160 /* bytes of an answer's body that are kept (then redacted) */

typedef struct tw_http_answer {
    long status;   /* the HTTP status */
    size_t length; /* bytes of body received */
    /* the body's first TW_HTTP_ANSWER_PREFIX bytes as tw_redact leaves them:
     * one line, printable, values that look like secrets replaced */
    char text[512];
} tw_http_answer;

/* Loads libcurl now (once); TW_EUNSUPPORTED with why when it cannot be, so
 * a command can say so before it starts rather than at the first send. */
int tw_http_client_load(char *why, size_t cap);

/* Sends the request. TW_OK when an answer came (whatever its status);
 * TW_ENET when none did (why says what curl said); TW_EUNSUPPORTED when
 * libcurl cannot be loaded (why says so); TW_ELIMIT when the answer was
 * longer than rq->whole_cap; TW_ENOMEM. */
int tw_http_send(const tw_http_request *rq, tw_http_answer *answer, char *why, size_t cap);

/* Writes what a log may show of a URL: scheme://host[:port], without
 * user:password@, path, query or fragment. Returns out. */
char *tw_url_origin(const char *url, char *out, size_t cap);
/* The same with the path kept, for URLs whose path holds no secret (a
 * Pushgateway's job and labels): no user:password@, query or fragment. */
char *tw_url_without_credentials(const char *url, char *out, size_t cap);

/* Appends s percent-encoded as a form value or URL query component
 * (RFC 3986 unreserved characters kept, every other byte %XX). */
void tw_url_encode(tw_buffer *out, const char *s);

/* Copies at most len bytes of text into out (cap bytes, NUL-terminated) as
 * one printable line, with what looks secret replaced by "[redacted]": the
 * value after a name containing token, secret, sign, key, pass, auth,
 * credential, session, cookie or ticket (name=value, name: value,
 * "name":"value"); any run of 16 or more URL-safe or base64 characters
 * mixing letters with digits or upper with lower case; and the path and
 * query of a URL (its origin stays). Returns out. */
char *tw_redact(const char *text, size_t len, char *out, size_t cap);

#endif
