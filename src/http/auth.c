/*
 * auth.c: the verification pool and its cache (see auth.h).
 *
 * One mutex guards the queue, the cache and the stopping flag; bcrypt runs
 * outside it. The cache is a small table with least-recently-used
 * replacement; keys are compared in constant time, and a key is an HMAC
 * under a random key, so the table holds nothing a password can be tested
 * against offline.
 */
#include "auth.h"

#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "trainwatch/error.h"

#define CACHE_ENTRIES 64
#define WORKERS_MAX   16

typedef struct cache_entry {
    uint8_t key[32];
    uint64_t used; /* 0: empty */
} cache_entry;

struct tw_auth {
    const tw_web_config *config;
    uint8_t hmac_key[32];
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t threads[WORKERS_MAX];
    unsigned workers;
    bool stopping;
    tw_auth_job *head, *tail;
    cache_entry cache[CACHE_ENTRIES];
    uint64_t clock;
};

static void put_field(struct hmac_sha256_ctx *c, const char *s)
{
    uint8_t len[4];
    size_t n = strlen(s);
    for (int i = 0; i < 4; i++)
        len[i] = (uint8_t)(n >> (24 - 8 * i));
    hmac_sha256_update(c, sizeof len, len);
    hmac_sha256_update(c, n, (const uint8_t *)s);
}

static void cache_key(const tw_auth *a, const char *user, const char *password, const char *hash, uint8_t out[32])
{
    struct hmac_sha256_ctx c;
    hmac_sha256_set_key(&c, sizeof a->hmac_key, a->hmac_key);
    put_field(&c, user);
    put_field(&c, hash);
    put_field(&c, password);
    hmac_sha256_digest(&c, 32, out);
    memset(&c, 0, sizeof c);
}

/* With the lock held: every entry is compared, hit or not. */
static bool cache_find(tw_auth *a, const uint8_t key[32])
{
    cache_entry *hit = NULL;
    for (size_t i = 0; i < CACHE_ENTRIES; i++) {
        if (a->cache[i].used && memeql_sec(a->cache[i].key, key, 32))
            hit = &a->cache[i];
    }
    if (hit)
        hit->used = ++a->clock;
    return hit != NULL;
}

/* With the lock held. */
static void cache_add(tw_auth *a, const uint8_t key[32])
{
    if (cache_find(a, key))
        return;
    cache_entry *slot = &a->cache[0];
    for (size_t i = 1; i < CACHE_ENTRIES; i++) {
        if (a->cache[i].used < slot->used)
            slot = &a->cache[i];
    }
    memcpy(slot->key, key, 32);
    slot->used = ++a->clock;
}

tw_auth_verdict tw_auth_check(tw_auth *a, const char *user, const char *password, tw_auth_job *job,
                              tw_auth_done_fn done, void *arg)
{
    if (!user)
        return TW_AUTH_DENIED;
    memset(job, 0, sizeof *job);
    for (size_t i = 0; i < a->config->user_count; i++) {
        if (strcmp(a->config->user_names[i], user) == 0) {
            job->hash = a->config->user_hashes[i];
            job->known = true;
        }
    }
    if (!job->hash)
        job->hash = a->config->dummy_hash;
    if (!password)
        password = "";
    cache_key(a, user, password, job->hash, job->key);
    pthread_mutex_lock(&a->lock);
    bool hit = job->known && cache_find(a, job->key);
    pthread_mutex_unlock(&a->lock);
    if (hit)
        return TW_AUTH_GRANTED;
    job->password = strdup(password);
    job->done = done;
    job->arg = arg;
    return TW_AUTH_QUEUED;
}

static void finish(tw_auth_job *job, bool granted)
{
    if (job->password) {
        explicit_bzero(job->password, strlen(job->password));
        free(job->password);
        job->password = NULL;
    }
    job->done(job->arg, granted);
}

void tw_auth_submit(tw_auth *a, tw_auth_job *job)
{
    pthread_mutex_lock(&a->lock);
    bool stopping = a->stopping || !job->password; /* no copy: out of memory, denied */
    if (!stopping) {
        job->next = NULL;
        if (a->tail)
            a->tail->next = job;
        else
            a->head = job;
        a->tail = job;
        pthread_cond_signal(&a->wake);
    }
    pthread_mutex_unlock(&a->lock);
    if (stopping)
        finish(job, false);
}

static void *work(void *arg)
{
    tw_auth *a = arg;
    pthread_mutex_lock(&a->lock);
    for (;;) {
        while (!a->stopping && !a->head)
            pthread_cond_wait(&a->wake, &a->lock);
        if (a->stopping)
            break;
        tw_auth_job *job = a->head;
        a->head = job->next;
        if (!a->head)
            a->tail = NULL;
        pthread_mutex_unlock(&a->lock);
        bool granted = tw_password_matches(job->hash, job->password) && job->known;
        pthread_mutex_lock(&a->lock);
        if (granted)
            cache_add(a, job->key);
        pthread_mutex_unlock(&a->lock);
        finish(job, granted);
        pthread_mutex_lock(&a->lock);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

int tw_auth_new(const tw_web_config *config, unsigned workers, tw_auth **out)
{
    tw_auth *a = calloc(1, sizeof *a);
    if (!a)
        return TW_ENOMEM;
    a->config = config;
    if (getrandom(a->hmac_key, sizeof a->hmac_key, 0) != (ssize_t)sizeof a->hmac_key) {
        free(a);
        return TW_EINVAL;
    }
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->wake, NULL);
    workers = workers ? workers : 2;
    workers = workers > WORKERS_MAX ? WORKERS_MAX : workers;
    for (; a->workers < workers; a->workers++) {
        if (pthread_create(&a->threads[a->workers], NULL, work, a) != 0)
            break;
    }
    if (a->workers == 0) {
        tw_auth_free(a);
        return TW_ENOMEM;
    }
    *out = a;
    return TW_OK;
}

void tw_auth_stop(tw_auth *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->lock);
    bool joined = a->stopping;
    a->stopping = true;
    pthread_cond_broadcast(&a->wake);
    tw_auth_job *queued = a->head;
    a->head = a->tail = NULL;
    pthread_mutex_unlock(&a->lock);
    if (!joined) {
        for (unsigned i = 0; i < a->workers; i++)
            pthread_join(a->threads[i], NULL);
    }
    while (queued) {
        tw_auth_job *next = queued->next;
        finish(queued, false);
        queued = next;
    }
}

void tw_auth_free(tw_auth *a)
{
    if (!a)
        return;
    tw_auth_stop(a);
    explicit_bzero(a->cache, sizeof a->cache);
    explicit_bzero(a->hmac_key, sizeof a->hmac_key);
    pthread_cond_destroy(&a->wake);
    pthread_mutex_destroy(&a->lock);
    free(a);
}
