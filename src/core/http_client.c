/*
 * http_client.c: outgoing requests on a libcurl loaded at first use (see
 * http_client.h). The handful of curl functions used are resolved once, into
 * a table; curl's headers give the types and constants, so nothing here
 * differs from a linked libcurl but the time the library is mapped.
 * TW_CURL_LIBRARY names another file (tests use it to see a missing one).
 */
#include "http_client.h"

#include <ctype.h>
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
        {"curl_global_init", (void **)&curl.global_init},       {"curl_easy_init", (void **)&curl.easy_init},
        {"curl_easy_setopt", (void **)&curl.easy_setopt},       {"curl_easy_perform", (void **)&curl.easy_perform},
        {"curl_easy_getinfo", (void **)&curl.easy_getinfo},     {"curl_easy_cleanup", (void **)&curl.easy_cleanup},
        {"curl_easy_strerror", (void **)&curl.easy_strerror},   {"curl_slist_append", (void **)&curl.slist_append},
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

/* What the write callback collects: the body's first bytes, and its
 * length; with a whole buffer, all of it up to its cap. */
typedef struct body_sink {
    char raw[TW_HTTP_ANSWER_PREFIX];
    size_t kept, total;
    tw_buffer *whole;
    size_t whole_cap;
    bool over; /* the whole answer passed whole_cap (the transfer was stopped) */
} body_sink;

static size_t keep_answer(char *data, size_t size, size_t nmemb, void *arg)
{
    body_sink *b = arg;
    size_t n = size * nmemb, room = sizeof b->raw - b->kept;
    memcpy(b->raw + b->kept, data, n < room ? n : room);
    b->kept += n < room ? n : room;
    b->total += n;
    if (b->whole) {
        if (b->whole->len + n > b->whole_cap) {
            b->over = true;
            return 0; /* curl stops the transfer with CURLE_WRITE_ERROR */
        }
        tw_buffer_append(b->whole, data, n);
    }
    return n;
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
    bool headers_ok = true;
    if (rq->content_type) {
        snprintf(content_type, sizeof content_type, "Content-Type: %s", rq->content_type);
        headers_ok = (headers = curl.slist_append(NULL, content_type)) != NULL;
    }
    for (size_t i = 0; i < rq->header_count && headers_ok; i++) {
        struct curl_slist *more = curl.slist_append(headers, rq->headers[i]);
        headers_ok = more != NULL;
        headers = more ? more : headers;
    }
    if (!c || !headers_ok) {
        curl.slist_free_all(headers);
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
    body_sink *sink = calloc(1, sizeof *sink);
    if (!sink) {
        curl.slist_free_all(headers);
        curl.easy_cleanup(c);
        snprintf(why, cap, "out of memory");
        return TW_ENOMEM;
    }
    sink->whole = rq->whole;
    sink->whole_cap = rq->whole_cap;
    curl.easy_setopt(c, CURLOPT_WRITEDATA, sink);
    if (headers)
        curl.easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    if (rq->body) {
        curl.easy_setopt(c, CURLOPT_POSTFIELDS, rq->body);
        curl.easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
    }
    if (strcmp(rq->method, "GET") == 0)
        curl.easy_setopt(c, CURLOPT_HTTPGET, 1L);
    else if (strcmp(rq->method, "POST") != 0)
        curl.easy_setopt(c, CURLOPT_CUSTOMREQUEST, rq->method);
    CURLcode cc = curl.easy_perform(c);
    curl.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &answer->status);
    rc = TW_OK;
    if (sink->over) {
        snprintf(why, cap, "the answer is over %zu bytes", rq->whole_cap);
        rc = TW_ELIMIT;
    } else if (rq->whole && rq->whole->failed) {
        snprintf(why, cap, "out of memory for the answer");
        rc = TW_ENOMEM;
    } else if (cc != CURLE_OK) {
        snprintf(why, cap, "%s", curl.easy_strerror(cc));
        rc = TW_ENET;
    }
    answer->length = sink->total;
    tw_redact(sink->raw, sink->kept, answer->text, sizeof answer->text);
    if (sink->total > sink->kept)
        strncat(answer->text, "...", sizeof answer->text - strlen(answer->text) - 1);
    explicit_bzero(sink, sizeof *sink);
    free(sink);
    curl.slist_free_all(headers);
    curl.easy_cleanup(c);
    return rc;
}

/* ---- what logs may show ------------------------------------------------ */

char *tw_url_origin(const char *url, char *out, size_t cap)
{
    const char *scheme_end = strstr(url, "://");
    const char *host = scheme_end ? scheme_end + 3 : url;
    size_t authority = strcspn(host, "/?#");
    const char *at = memchr(host, '@', authority);
    /* the last '@' ends the userinfo (a password may contain '@' escaped or not) */
    for (const char *p = at; p && p < host + authority; p = memchr(p + 1, '@', (size_t)(host + authority - p - 1)))
        at = p;
    if (at) {
        authority -= (size_t)(at + 1 - host);
        host = at + 1;
    }
    snprintf(out, cap, "%.*s%.*s", scheme_end ? (int)(scheme_end + 3 - url) : 0, url, (int)authority, host);
    return out;
}

char *tw_url_without_credentials(const char *url, char *out, size_t cap)
{
    const char *scheme_end = strstr(url, "://");
    const char *host = scheme_end ? scheme_end + 3 : url;
    size_t authority = strcspn(host, "/?#");
    tw_url_origin(url, out, cap);
    size_t len = strlen(out);
    snprintf(out + len, cap > len ? cap - len : 0, "%.*s", (int)strcspn(host + authority, "?#"), host + authority);
    return out;
}

void tw_url_encode(tw_buffer *out, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || strchr("-._~", *p))
            tw_buffer_putc(out, (char)*p);
        else {
            char esc[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            tw_buffer_append(out, esc, 3);
        }
    }
}

static bool name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-';
}

/* characters of URL paths, base64 (both alphabets) and hex */
static bool opaque_char(char c)
{
    return name_char(c) || (c && strchr("+/=.~%", c) != NULL);
}

static bool sensitive_name(const char *s, size_t n)
{
    static const char *const words[] = {"token", "secret",     "sign",    "key",    "pass",
                                        "auth",  "credential", "session", "cookie", "ticket"};
    char lower[64];
    if (n >= sizeof lower)
        n = sizeof lower - 1;
    for (size_t i = 0; i < n; i++)
        lower[i] = (char)tolower((unsigned char)s[i]);
    lower[n] = '\0';
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (strstr(lower, words[i]))
            return true;
    }
    return false;
}

/* 16+ characters mixing letters and digits, or upper and lower case: a
 * token, a signature, a hashed path; ordinary words and numbers are not. */
static bool looks_opaque(const char *s, size_t n)
{
    bool digit = false, upper = false, lower = false;
    for (size_t i = 0; i < n; i++) {
        digit |= isdigit((unsigned char)s[i]) != 0;
        upper |= isupper((unsigned char)s[i]) != 0;
        lower |= islower((unsigned char)s[i]) != 0;
    }
    return n >= 16 && ((digit && (upper || lower)) || (upper && lower));
}

typedef struct redact_out {
    char *buf;
    size_t cap, len;
} redact_out;

static void put(redact_out *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n && o->len + 1 < o->cap; i++) {
        unsigned char c = (unsigned char)s[i];
        o->buf[o->len++] = c == '\n' || c == '\r' || c == '\t' ? ' ' : (c < 0x20 || c >= 0x7f ? '?' : (char)c);
    }
    o->buf[o->len] = '\0';
}

static void put_redacted(redact_out *o)
{
    put(o, "[redacted]", 10);
}

/* At text[i] == "://": the origin stays, userinfo, path, query and fragment go. */
static size_t redact_url(const char *text, size_t len, size_t i, redact_out *o)
{
    size_t end = i + 3;
    while (end < len && !isspace((unsigned char)text[end]) && !strchr("\"'<>()[]{},;|\\`", text[end]))
        end++;
    char url[512], origin[512];
    snprintf(url, sizeof url, "%.*s", (int)(end - i), text + i);
    tw_url_origin(url, origin, sizeof origin);
    put(o, origin, strlen(origin));
    if (strlen(origin) < end - i)
        put(o, "/[redacted]", 11);
    return end;
}

static bool ends_value(char c)
{
    return isspace((unsigned char)c) || strchr("&,;}])\"'", c);
}

/* After a sensitive name: separators, then the value, which is replaced. */
static size_t redact_value(const char *text, size_t len, size_t i, redact_out *o)
{
    size_t j = i;
    while (j < len && (text[j] == '"' || text[j] == '\'' || text[j] == ' '))
        j++;
    if (j >= len || (text[j] != ':' && text[j] != '='))
        return i; /* a word in a sentence ("sign not match"), not a key */
    j++;
    while (j < len && text[j] == ' ')
        j++;
    char quote = j < len && (text[j] == '"' || text[j] == '\'') ? text[j] : 0;
    put(o, text + i, j + (quote ? 1 : 0) - i);
    j += quote ? 1 : 0;
    size_t v = j;
    while (v < len && (quote ? text[v] != quote : !ends_value(text[v])))
        v++;
    /* "Authorization: Bearer TOKEN": the scheme's name, then the credential */
    if (!quote && v < len && text[v] == ' ' &&
        ((v - j == 6 && strncasecmp(text + j, "Bearer", 6) == 0) ||
         (v - j == 5 && strncasecmp(text + j, "Basic", 5) == 0))) {
        v++;
        while (v < len && !ends_value(text[v]))
            v++;
    }
    if (v > j)
        put_redacted(o);
    return v;
}

char *tw_redact(const char *text, size_t len, char *out, size_t cap)
{
    redact_out o = {.buf = out, .cap = cap, .len = 0};
    if (cap)
        out[0] = '\0';
    size_t i = 0;
    while (i < len && o.len + 1 < cap) {
        if (len - i >= 3 && memcmp(text + i, "://", 3) == 0) {
            i = redact_url(text, len, i, &o);
            continue;
        }
        if (!opaque_char(text[i])) {
            put(&o, text + i, 1);
            i++;
            continue;
        }
        size_t run = i;
        while (run < len && opaque_char(text[run]))
            run++;
        if (len - run >= 3 && memcmp(text + run, "://", 3) == 0) {
            put(&o, text + i, run - i); /* a scheme */
            i = run;
            continue;
        }
        if (looks_opaque(text + i, run - i)) {
            put_redacted(&o);
            i = run;
            continue;
        }
        size_t name = i;
        while (name < len && name_char(text[name]))
            name++;
        if (name == i) {
            put(&o, text + i, 1);
            i++;
            continue;
        }
        put(&o, text + i, name - i);
        size_t next = name;
        if (sensitive_name(text + i, name - i))
            next = redact_value(text, len, name, &o);
        i = next;
    }
    return out;
}
