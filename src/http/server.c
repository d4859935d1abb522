/*
 * server.c: the metrics HTTP server (see http.h).
 *
 * We bind the listening socket ourselves (getaddrinfo, IPv4 and IPv6, a
 * clear "address already in use") and hand it to libmicrohttpd, which runs
 * one epoll event loop thread. Nothing slow runs on it: a password check
 * that the cache cannot answer suspends the connection while a worker runs
 * bcrypt (auth.c), and slow clients are bounded by the guard (guard.c: a
 * header deadline, and room made for newcomers) and libmicrohttpd's limits
 * (connections, per address, idle timeout, header size). Scrape bodies are
 * built per request from the registry; the registry's own locks keep
 * concurrent scrapes consistent.
 */
#include "trainwatch/http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include "../core/clock.h"
#include "auth.h"
#include "guard.h"
#include "trainwatch/error.h"
#include "webconfig.h"

struct tw_http_server {
    struct MHD_Daemon *daemon;
    tw_registry *registry;
    bool text_only;
    tw_web_config config;
    char *cert_pem, *key_pem;
    char priorities[512]; /* GnuTLS's, from the web configuration */
    uint16_t port;
    int fd;
    tw_auth *auth; /* NULL without basic_auth_users */
    tw_guard *guard;
    char *(*page)(void *arg, const char *path, const char *format, size_t *len, const char **type);
    void *page_arg;
    /* the /metrics requests answered: the server's thread writes, the
     * owner reads (tw_http_scrapes) */
    pthread_mutex_t scrape_lock;
    uint64_t scrapes;
    double scrape_at[TW_HTTP_SCRAPES_KEPT]; /* monotonic start times, a ring */
};

/* Notes a /metrics request, at the time its exposition is made. */
static void note_scrape(tw_http_server *s)
{
    double t = tw_monotonic_clock();
    pthread_mutex_lock(&s->scrape_lock);
    s->scrape_at[s->scrapes % TW_HTTP_SCRAPES_KEPT] = t;
    s->scrapes++;
    pthread_mutex_unlock(&s->scrape_lock);
}

static const char landing_page[] =
    "<!doctype html>\n<html><head><title>trainwatch</title></head><body>\n"
    "<h1>trainwatch</h1>\n<p>Observability for training runs.</p>\n"
    "<ul><li><a href=\"/metrics\">/metrics</a></li><li><a href=\"/-/healthy\">/-/healthy</a></li></ul>\n"
    "</body></html>\n";

int tw_parse_listen_address(const char *address, char *host, size_t hostlen, char *port, size_t portlen)
{
    const char *colon;
    const char *h = address;
    size_t hlen;
    if (address[0] == '[') {
        const char *close = strchr(address, ']');
        if (!close || close[1] != ':')
            return TW_EINVAL;
        h = address + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(address, ':');
        if (!colon)
            return TW_EINVAL;
        hlen = (size_t)(colon - address);
    }
    const char *p = colon + 1;
    if (!*p || hlen >= hostlen || strlen(p) >= portlen || strspn(p, "0123456789") != strlen(p))
        return TW_EINVAL;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    strcpy(port, p);
    return TW_OK;
}

/* Binds and listens; returns the socket, or a (negative) TW_E* code with err filled. */
static int listen_socket(const char *address, uint16_t *bound_port, char *err, size_t errlen)
{
    char host[256], port[16];
    if (tw_parse_listen_address(address, host, sizeof host, port, sizeof port) != TW_OK) {
        snprintf(err, errlen, "%s: not a listen address (want host:port, [ipv6]:port or :port)", address);
        return TW_EINVAL;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res;
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "%s: %s", address, gai_strerror(gai));
        return TW_EINVAL;
    }
    int fd = -1, status = TW_ENET, saved = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 128) == 0) {
            struct sockaddr_storage ss;
            socklen_t len = sizeof ss;
            getsockname(fd, (struct sockaddr *)&ss, &len);
            *bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                         : ((struct sockaddr_in *)&ss)->sin_port);
            break;
        }
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        status = saved == EADDRINUSE ? TW_EBUSY : TW_ENET;
        snprintf(err, errlen, "%s: %s", address, saved ? strerror(saved) : "no usable address");
        return status;
    }
    return fd;
}

static char *read_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *data = malloc(1 << 20);
    size_t n = data ? fread(data, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (!data) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    data[n] = '\0';
    return data;
}

static enum MHD_Result respond(struct MHD_Connection *conn, tw_http_server *s, unsigned status, void *body, size_t len,
                               enum MHD_ResponseMemoryMode mode, const char *type)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    if (!r)
        return MHD_NO;
    if (type)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    for (size_t i = 0; i < s->config.header_count; i++)
        MHD_add_response_header(r, s->config.header_names[i], s->config.header_values[i]);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result text(struct MHD_Connection *conn, tw_http_server *s, unsigned status, const char *body)
{
    return respond(conn, s, status, (void *)body, strlen(body), MHD_RESPMEM_PERSISTENT, "text/plain; charset=utf-8");
}

/* What a request keeps between the handler's calls. */
typedef struct request {
    tw_auth_job job;
    struct MHD_Connection *conn;
    _Atomic int verdict; /* tw_auth_verdict; TW_AUTH_QUEUED while a worker checks */
    bool checked;
} request;

/* From a worker: the verdict, then the connection back into the event loop. */
static void auth_done(void *arg, bool granted)
{
    request *rq = arg;
    atomic_store(&rq->verdict, granted ? TW_AUTH_GRANTED : TW_AUTH_DENIED);
    MHD_resume_connection(rq->conn);
}

/* TW_AUTH_QUEUED: the connection is suspended until a worker decides. */
static tw_auth_verdict authorize(struct MHD_Connection *conn, tw_http_server *s, request *rq)
{
    if (s->config.user_count == 0)
        return TW_AUTH_GRANTED;
    if (rq->checked)
        return (tw_auth_verdict)atomic_load(&rq->verdict);
    rq->checked = true;
    char *password = NULL;
    char *user = MHD_basic_auth_get_username_password(conn, &password);
    tw_auth_verdict v = tw_auth_check(s->auth, user, password, &rq->job, auth_done, rq);
    if (password) {
        explicit_bzero(password, strlen(password));
        MHD_free(password);
    }
    if (user)
        MHD_free(user);
    atomic_store(&rq->verdict, v);
    if (v == TW_AUTH_QUEUED) {
        MHD_suspend_connection(conn); /* before the worker can resume it */
        tw_auth_submit(s->auth, &rq->job);
    }
    return v;
}

static void *gzip_body(const char *data, size_t len, size_t *out_len)
{
    z_stream z = {0};
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    size_t cap = deflateBound(&z, len);
    unsigned char *out = malloc(cap);
    if (!out) {
        deflateEnd(&z);
        return NULL;
    }
    z.next_in = (unsigned char *)data;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int rc = deflate(&z, Z_FINISH);
    *out_len = z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

static enum MHD_Result metrics(struct MHD_Connection *conn, tw_http_server *s)
{
    const char *accept = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    tw_expose_format fmt = s->text_only ? TW_EXPOSE_TEXT : tw_negotiate_format(accept);
    note_scrape(s);
    char *body;
    size_t len;
    if (tw_registry_expose(s->registry, fmt, &body, &len) != TW_OK)
        return text(conn, s, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    const char *encoding = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    bool gzip = false;
    if (tw_accepts_gzip(encoding)) {
        size_t zlen;
        void *z = gzip_body(body, len, &zlen);
        if (z) {
            free(body);
            body = z;
            len = zlen;
            gzip = true;
        }
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, tw_expose_content_type(fmt));
    if (gzip)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Accept, Accept-Encoding");
    for (size_t i = 0; i < s->config.header_count; i++)
        MHD_add_response_header(r, s->config.header_names[i], s->config.header_values[i]);
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static tw_guard_conn *guard_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_size, void **state)
{
    (void)version;
    (void)upload_data;
    tw_http_server *s = cls;
    if (*state == NULL) {
        /* headers are in; wait for the (empty) body */
        tw_guard_headers_done(s->guard, guard_of(conn));
        request *rq = calloc(1, sizeof *rq);
        if (!rq)
            return MHD_NO;
        rq->conn = conn;
        *state = rq;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0; /* a body on GET/HEAD: read and ignored */
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return text(conn, s, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    tw_auth_verdict v = authorize(conn, s, *state);
    if (v == TW_AUTH_QUEUED)
        return MHD_YES; /* called again once resumed */
    if (v == TW_AUTH_DENIED) {
        static const char body[] = "unauthorized\n";
        struct MHD_Response *r = MHD_create_response_from_buffer(sizeof body - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
        if (!r)
            return MHD_NO;
        enum MHD_Result ret = MHD_queue_basic_auth_fail_response(conn, "trainwatch", r);
        MHD_destroy_response(r);
        return ret;
    }
    if (strcmp(url, "/metrics") == 0)
        return metrics(conn, s);
    if (strcmp(url, "/-/healthy") == 0)
        return text(conn, s, MHD_HTTP_OK, "OK\n");
    if (strcmp(url, "/") == 0)
        return respond(conn, s, MHD_HTTP_OK, (void *)landing_page, sizeof landing_page - 1, MHD_RESPMEM_PERSISTENT,
                       "text/html; charset=utf-8");
    if (s->page) {
        size_t len = 0;
        const char *type = "text/plain; charset=utf-8";
        const char *format = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "format");
        char *body = s->page(s->page_arg, url, format, &len, &type);
        if (body)
            return respond(conn, s, MHD_HTTP_OK, body, len, MHD_RESPMEM_MUST_FREE, type);
    }
    return text(conn, s, MHD_HTTP_NOT_FOUND, "not found\n");
}

static enum MHD_Result admit(void *cls, const struct sockaddr *addr, socklen_t len)
{
    (void)len;
    tw_http_server *s = cls;
    return tw_guard_admit(s->guard, addr) ? MHD_YES : MHD_NO;
}

static void connection_event(void *cls, struct MHD_Connection *conn, void **socket_context,
                             enum MHD_ConnectionNotificationCode what)
{
    tw_http_server *s = cls;
    if (what == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *addr = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        *socket_context = fd ? tw_guard_opened(s->guard, fd->connect_fd, addr ? addr->client_addr : NULL) : NULL;
    } else if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
        tw_guard_closed(s->guard, *socket_context);
        *socket_context = NULL;
    }
}

static void request_done(void *cls, struct MHD_Connection *conn, void **state, enum MHD_RequestTerminationCode why)
{
    (void)why;
    tw_http_server *s = cls;
    free(*state);
    *state = NULL;
    tw_guard_request_done(s->guard, guard_of(conn));
}

/* Defaults and derived limits; see http.h for the reasoning. */
static void limits(const tw_http_options *o, tw_http_options *l, tw_guard_options *g)
{
    *l = *o;
    l->connection_limit = o->connection_limit ? o->connection_limit : 64;
    l->timeout_seconds = o->timeout_seconds ? o->timeout_seconds : 10;
    l->header_timeout_seconds = o->header_timeout_seconds ? o->header_timeout_seconds : 10;
    l->max_request_bytes = o->max_request_bytes ? o->max_request_bytes : 16384;
    unsigned n = l->connection_limit;
    *g = (tw_guard_options){.per_ip_max = n / 2 ? n / 2 : 1,
                            .per_ip_waiting = n / 4 ? n / 4 : 1,
                            .waiting_max = n - (n / 8 > 2 ? n / 8 : (n > 2 ? 2 : 0)),
                            .header_timeout = l->header_timeout_seconds};
}

int tw_http_start(const tw_http_options *options, tw_http_server **out, char *err, size_t errlen)
{
    tw_http_options lim, *o = &lim;
    tw_guard_options guard;
    limits(options, &lim, &guard);
    tw_http_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return TW_ENOMEM;
    }
    s->registry = o->registry ? o->registry : tw_registry_default();
    s->text_only = o->text_only;
    s->page = o->page;
    s->page_arg = o->page_arg;
    s->fd = -1;
    pthread_mutex_init(&s->scrape_lock, NULL);
    int rc = TW_OK;
    if (o->web_config_file) {
        rc = tw_web_config_load(o->web_config_file, &s->config, err, errlen);
        if (rc == TW_OK && s->config.cert_file) {
            s->cert_pem = read_file(s->config.cert_file, err, errlen);
            s->key_pem = s->cert_pem ? read_file(s->config.key_file, err, errlen) : NULL;
            if (!s->cert_pem || !s->key_pem)
                rc = TW_ECONFIG;
        }
    }
    if (rc == TW_OK && s->config.user_count && (rc = tw_auth_new(&s->config, o->auth_workers, &s->auth)) != TW_OK)
        snprintf(err, errlen, "could not start the password-checking threads");
    if (rc == TW_OK && (rc = tw_guard_new(&guard, &s->guard)) != TW_OK)
        snprintf(err, errlen, "could not start the connection guard");
    if (rc == TW_OK) {
        int fd = listen_socket(o->listen_address ? o->listen_address : TW_HTTP_DEFAULT_ADDRESS, &s->port, err, errlen);
        if (fd < 0)
            rc = fd;
        else
            s->fd = fd;
    }
    if (rc != TW_OK) {
        tw_http_stop(s);
        return rc;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
    if (s->cert_pem)
        flags |= MHD_USE_TLS;
    tw_web_config_priorities(&s->config, s->priorities, sizeof s->priorities);
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, s->cert_pem},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, s->key_pem},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, s->priorities},
        {MHD_OPTION_END, 0, NULL},
    };
    /* one address may hold half the connections (the guard counts them,
     * in admit: libmicrohttpd's own per-address limit would count those
     * the guard has shut down and refuse a newcomer while they close); at
     * the cap libmicrohttpd stops accepting, and newcomers wait in the
     * listen backlog rather than being refused */
    s->daemon = MHD_start_daemon(flags, 0, admit, s, handle, s, MHD_OPTION_LISTEN_SOCKET, s->fd,
                                 MHD_OPTION_CONNECTION_LIMIT, o->connection_limit, MHD_OPTION_CONNECTION_TIMEOUT,
                                 o->timeout_seconds, MHD_OPTION_CONNECTION_MEMORY_LIMIT, o->max_request_bytes,
                                 MHD_OPTION_NOTIFY_CONNECTION, connection_event, s, MHD_OPTION_NOTIFY_COMPLETED,
                                 request_done, s, MHD_OPTION_ARRAY, s->cert_pem ? tls : tls + 3, MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, errlen, "%s: could not start the HTTP server%s",
                 o->listen_address ? o->listen_address : TW_HTTP_DEFAULT_ADDRESS,
                 s->cert_pem ? " (check the TLS certificate and key)" : "");
        rc = s->cert_pem ? TW_ETLS : TW_ENET;
        tw_http_stop(s);
        return rc;
    }
    s->fd = -1; /* the daemon owns the listening socket now and closes it */
    *out = s;
    return TW_OK;
}

void tw_http_scrapes(tw_http_server *s, tw_http_scrape_stats *out)
{
    pthread_mutex_lock(&s->scrape_lock);
    uint64_t n = s->scrapes;
    *out = (tw_http_scrape_stats){.count = n, .last = n ? s->scrape_at[(n - 1) % TW_HTTP_SCRAPES_KEPT] : 0};
    for (uint64_t i = n > TW_HTTP_SCRAPES_KEPT ? n - TW_HTTP_SCRAPES_KEPT + 1 : 1; i < n; i++) {
        double gap = s->scrape_at[i % TW_HTTP_SCRAPES_KEPT] - s->scrape_at[(i - 1) % TW_HTTP_SCRAPES_KEPT];
        if (gap > out->interval)
            out->interval = gap;
    }
    pthread_mutex_unlock(&s->scrape_lock);
}

uint16_t tw_http_port(const tw_http_server *s)
{
    return s->port;
}

bool tw_http_uses_tls(const tw_http_server *s)
{
    return s->cert_pem != NULL;
}

void tw_http_stop(tw_http_server *s)
{
    if (!s)
        return;
    /* queued checks are denied and their connections resumed: the daemon
     * cannot stop with suspended connections */
    tw_auth_stop(s->auth);
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    tw_auth_free(s->auth);
    tw_guard_free(s->guard);
    if (s->fd >= 0)
        close(s->fd);
    tw_web_config_free(&s->config);
    if (s->key_pem)
        explicit_bzero(s->key_pem, strlen(s->key_pem));
    free(s->cert_pem);
    free(s->key_pem);
    pthread_mutex_destroy(&s->scrape_lock);
    free(s);
}
