/*
 * server.c: the metrics HTTP server (see http.h).
 *
 * We bind the listening socket ourselves (getaddrinfo, IPv4 and IPv6, a
 * clear "address already in use") and hand it to libmicrohttpd, which runs
 * one epoll event loop thread: a client that sends slowly only holds its own
 * connection until the timeout. Scrape bodies are built per request from the
 * registry; the registry's own locks keep concurrent scrapes consistent.
 */
#include "trainwatch/http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

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
};

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

static enum MHD_Result respond(struct MHD_Connection *conn, tw_http_server *s, unsigned status, void *body,
                               size_t len, enum MHD_ResponseMemoryMode mode, const char *type)
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

static bool authorized(struct MHD_Connection *conn, tw_http_server *s)
{
    if (s->config.user_count == 0)
        return true;
    char *password = NULL;
    char *user = MHD_basic_auth_get_username_password(conn, &password);
    bool ok = false;
    const char *hash = NULL;
    for (size_t i = 0; user && i < s->config.user_count; i++) {
        if (strcmp(s->config.user_names[i], user) == 0)
            hash = s->config.user_hashes[i];
    }
    /* unknown users cost a bcrypt too, so timing does not reveal who exists */
    static const char dummy[] = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";
    if (user)
        ok = tw_password_matches(hash ? hash : dummy, password ? password : "") && hash;
    if (password) {
        explicit_bzero(password, strlen(password));
        MHD_free(password);
    }
    if (user)
        MHD_free(user);
    return ok;
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

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_size, void **state)
{
    (void)version;
    (void)upload_data;
    tw_http_server *s = cls;
    static int first_call_marker;
    if (*state == NULL) {
        *state = &first_call_marker; /* headers are in; wait for the (empty) body */
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0; /* a body on GET/HEAD: read and ignored */
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return text(conn, s, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    if (!authorized(conn, s)) {
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
    return text(conn, s, MHD_HTTP_NOT_FOUND, "not found\n");
}

int tw_http_start(const tw_http_options *o, tw_http_server **out, char *err, size_t errlen)
{
    tw_http_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return TW_ENOMEM;
    }
    s->registry = o->registry ? o->registry : tw_registry_default();
    s->text_only = o->text_only;
    s->fd = -1;
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
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
    if (s->cert_pem)
        flags |= MHD_USE_TLS;
    tw_web_config_priorities(&s->config, s->priorities, sizeof s->priorities);
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, s->cert_pem},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, s->key_pem},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, s->priorities},
        {MHD_OPTION_END, 0, NULL},
    };
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, handle, s, MHD_OPTION_LISTEN_SOCKET, s->fd, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(o->connection_limit ? o->connection_limit : 64), MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)(o->timeout_seconds ? o->timeout_seconds : 10), MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)(o->max_request_bytes ? o->max_request_bytes : 16384), MHD_OPTION_ARRAY,
        s->cert_pem ? tls : tls + 3, MHD_OPTION_END);
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

uint16_t tw_http_port(const tw_http_server *s) { return s->port; }

void tw_http_stop(tw_http_server *s)
{
    if (!s)
        return;
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    if (s->fd >= 0)
        close(s->fd);
    tw_web_config_free(&s->config);
    if (s->key_pem)
        explicit_bzero(s->key_pem, strlen(s->key_pem));
    free(s->cert_pem);
    free(s->key_pem);
    free(s);
}
