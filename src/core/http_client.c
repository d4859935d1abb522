/*
 * http_client.c: outgoing requests on a libcurl loaded at first use (see
 * http_client.h). The handful of curl functions used are resolved once, into
 * a table; curl's headers give the types and constants, so nothing here
 * differs from a linked libcurl but the time the library is mapped.
 * TW_CURL_LIBRARY names another file (tests use it to see a missing one).
 */
#include "http_client.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/error.h"

static struct {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *c, CURLoption option, ...);
    CURLcode (*easy_perform)(CURL *c);
    CURLcode (*easy_getinfo)(CURL *c, CURLINFO info, ...);
    void (*easy_cleanup)(CURL *c);
    const char *(*easy_strerror)(CURLcode code);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *s);
    void (*slist_free_all)(struct curl_slist *list);
    char why[256];
    bool ok;
} curl;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void load_curl(void)
{
    const char *path = getenv("TW_CURL_LIBRARY");
    void *lib = dlopen(path && *path ? path : "libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(curl.why, sizeof curl.why, "cannot load libcurl (Debian package libcurl4): %s", dlerror());
        return;
    }
    struct {
        const char *name;
        void **slot;
    } symbols[] = {
        {"curl_global_init", (void **)&curl.global_init},     {"curl_easy_init", (void **)&curl.easy_init},
        {"curl_easy_setopt", (void **)&curl.easy_setopt},     {"curl_easy_perform", (void **)&curl.easy_perform},
        {"curl_easy_getinfo", (void **)&curl.easy_getinfo},   {"curl_easy_cleanup", (void **)&curl.easy_cleanup},
        {"curl_easy_strerror", (void **)&curl.easy_strerror}, {"curl_slist_append", (void **)&curl.slist_append},
        {"curl_slist_free_all", (void **)&curl.slist_free_all},
    };
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
        if (!(*symbols[i].slot = dlsym(lib, symbols[i].name))) {
            snprintf(curl.why, sizeof curl.why, "libcurl has no %s", symbols[i].name);
            return; /* the library stays mapped: nothing to gain from closing it */
        }
    }
    curl.ok = curl.global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    if (!curl.ok)
        snprintf(curl.why, sizeof curl.why, "libcurl failed to initialise");
}

static size_t keep_answer(char *data, size_t size, size_t nmemb, void *arg)
{
    tw_http_answer *a = arg;
    size_t have = strlen(a->text), room = sizeof a->text - 1 - have, n = size * nmemb;
    memcpy(a->text + have, data, n < room ? n : room);
    a->text[have + (n < room ? n : room)] = '\0';
    return size * nmemb;
}

int tw_http_client_load(char *why, size_t cap)
{
    pthread_once(&curl_once, load_curl);
    if (!curl.ok) {
        snprintf(why, cap, "%s", curl.why);
        return TW_EUNSUPPORTED;
    }
    return TW_OK;
}

int tw_http_send(const tw_http_request *rq, tw_http_answer *answer, char *why, size_t cap)
{
    memset(answer, 0, sizeof *answer);
    int rc = tw_http_client_load(why, cap);
    if (rc != TW_OK)
        return rc;
    CURL *c = curl.easy_init();
    struct curl_slist *headers = NULL;
    char content_type[128];
    if (rq->content_type) {
        snprintf(content_type, sizeof content_type, "Content-Type: %s", rq->content_type);
        headers = curl.slist_append(NULL, content_type);
    }
    if (!c || (rq->content_type && !headers)) {
        if (c)
            curl.easy_cleanup(c);
        snprintf(why, cap, "out of memory");
        return TW_ENOMEM;
    }
    long ms = (long)(rq->timeout * 1000);
    curl.easy_setopt(c, CURLOPT_URL, rq->url);
    curl.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl.easy_setopt(c, CURLOPT_TIMEOUT_MS, ms);
    curl.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms);
    curl.easy_setopt(c, CURLOPT_USERAGENT, "trainwatch");
    curl.easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_answer);
    curl.easy_setopt(c, CURLOPT_WRITEDATA, answer);
    if (headers)
        curl.easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    if (rq->body) {
        curl.easy_setopt(c, CURLOPT_POSTFIELDS, rq->body);
        curl.easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
    }
    if (strcmp(rq->method, "POST") != 0)
        curl.easy_setopt(c, CURLOPT_CUSTOMREQUEST, rq->method);
    CURLcode cc = curl.easy_perform(c);
    curl.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &answer->status);
    rc = TW_OK;
    if (cc != CURLE_OK) {
        snprintf(why, cap, "%s", curl.easy_strerror(cc));
        rc = TW_ENET;
    }
    for (char *p = answer->text; *p; p++) {
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    }
    curl.slist_free_all(headers);
    curl.easy_cleanup(c);
    return rc;
}
