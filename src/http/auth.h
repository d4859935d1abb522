/*
 * auth.h: basic-auth verification off the server's event-loop thread.
 *
 * bcrypt is slow on purpose (cost 12: about 250 ms), so the server must not
 * run it on the thread that answers scrapes. A check first looks in a cache
 * of recent successful verifications, keyed by HMAC-SHA256 (with a random
 * per-process key) of user, password and configured hash, as
 * exporter-toolkit caches them: a scraper that already authenticated is
 * answered at once, whatever is queued. Otherwise the check is queued for a
 * small pool of worker threads, which call back when done; the queue holds
 * one entry per connection waiting, so the server's connection limit bounds
 * it. Unknown users are checked against the configuration's dummy hash (of
 * the users' cost), so they take as long as known ones.
 */
#ifndef TW_HTTP_AUTH_H
#define TW_HTTP_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "webconfig.h"

typedef struct tw_auth tw_auth;

typedef enum tw_auth_verdict { TW_AUTH_DENIED, TW_AUTH_GRANTED, TW_AUTH_QUEUED } tw_auth_verdict;

typedef void (*tw_auth_done_fn)(void *arg, bool granted);

/* One check; the caller owns it (it lives in the request's state) and keeps
 * it until done is called. Opaque but for its size. */
typedef struct tw_auth_job {
    struct tw_auth_job *next;
    char *password;   /* a copy, wiped after the check */
    const char *hash; /* the user's, or the dummy */
    bool known;
    uint8_t key[32]; /* cache key */
    tw_auth_done_fn done;
    void *arg;
} tw_auth_job;

/* Starts workers threads (0: 2). The configuration must outlive the pool. */
int tw_auth_new(const tw_web_config *config, unsigned workers, tw_auth **out);

/* Decides from the cache when it can (TW_AUTH_GRANTED); a missing user is
 * TW_AUTH_DENIED at once. Otherwise fills job and returns TW_AUTH_QUEUED
 * without queuing yet: the caller then calls tw_auth_submit (after it has
 * made ready for done, e.g. suspended its connection). */
tw_auth_verdict tw_auth_check(tw_auth *a, const char *user, const char *password, tw_auth_job *job,
                              tw_auth_done_fn done, void *arg);
/* Queues a job filled by tw_auth_check; done(arg, granted) comes from a
 * worker thread (or, once the pool is stopping, from this call). */
void tw_auth_submit(tw_auth *a, tw_auth_job *job);

/* Stops the workers: a check in progress finishes, queued ones are denied
 * (each done called). Later submits are denied at once. */
void tw_auth_stop(tw_auth *a);
/* Frees a stopped pool. */
void tw_auth_free(tw_auth *a);

#endif
