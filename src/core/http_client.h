/*
 * http_client.h: one outgoing HTTP request (the Pushgateway client and the
 * alert receivers use it), on libcurl loaded with dlopen at the first
 * request. A process that never sends anything (analyze, or watch without
 * receivers) never maps libcurl and its TLS and Kerberos dependencies,
 * about 6 MiB of resident memory.
 */
#ifndef TW_CORE_HTTP_CLIENT_H
#define TW_CORE_HTTP_CLIENT_H

#include <stddef.h>

typedef struct tw_http_request {
    const char *method;          /* "POST", "PUT", "DELETE" */
    const char *url;
    const char *content_type;    /* NULL: no body */
    const char *body;
    size_t body_len;
    double timeout;              /* seconds, for connecting and for the whole request */
} tw_http_request;

typedef struct tw_http_answer {
    long status;                 /* the HTTP status */
    char text[512];              /* the start of the answer's body, NUL-terminated, newlines as spaces */
} tw_http_answer;

/* Loads libcurl now (once); TW_EUNSUPPORTED with why when it cannot be, so
 * a command can say so before it starts rather than at the first send. */
int tw_http_client_load(char *why, size_t cap);

/* Sends the request. TW_OK when an answer came (whatever its status);
 * TW_ENET when none did (why says what curl said); TW_EUNSUPPORTED when
 * libcurl cannot be loaded (why says so). */
int tw_http_send(const tw_http_request *rq, tw_http_answer *answer, char *why, size_t cap);

#endif
