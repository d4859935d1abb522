/*
 * test_http.c: the pieces of the HTTP side that need no network: the web
 * configuration parser, password checks, listen addresses and Pushgateway
 * group URLs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <crypt.h>
#include <gnutls/gnutls.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/auth.h"
#include "http/guard.h"
#include "http/webconfig.h"
#include "trainwatch/error.h"
#include "trainwatch/http.h"
#include "trainwatch/push.h"

static int parse(const char *yaml, tw_web_config *c, char *err)
{
    return tw_web_config_parse(yaml, strlen(yaml), "/etc/tw", c, err, 256);
}

static const char hash[] = "$2y$04$abcdefghijklmnopqrstuu5MGN4mmIhXlR8bM7Mo6A1yRA5oqYQWa";

static void test_full_config(void **state)
{
    (void)state;
    tw_web_config c;
    char err[256] = "";
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "tls_server_config:\n  cert_file: tls/a.crt\n  key_file: /abs/a.key\n  min_version: TLS13\n"
             "  client_auth_type: NoClientCert\n"
             "http_server_config:\n  http2: true\n  headers:\n    X-Frame-Options: deny\n"
             "basic_auth_users:\n  alice: %s\n  bob: '%s'\n", hash, hash);
    assert_int_equal(parse(yaml, &c, err), 0);
    assert_string_equal(c.cert_file, "/etc/tw/tls/a.crt");
    assert_string_equal(c.key_file, "/abs/a.key");
    assert_string_equal(c.min_version, "TLS13");
    assert_int_equal(c.user_count, 2);
    assert_string_equal(c.user_names[1], "bob");
    assert_int_equal(c.header_count, 1);
    assert_string_equal(c.header_values[0], "deny");
    tw_web_config_free(&c);
}

static void test_errors_name_the_line(void **state)
{
    (void)state;
    struct {
        const char *yaml, *want;
    } cases[] = {
        {"tls_server_config:\n  cert_file: a\n", "needs both cert_file and key_file"},
        {"foo: 1\n", "line 1: unknown key foo"},
        {"tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: ca.crt\n",
         "line 4: tls_server_config.client_ca_file is not supported"},
        {"tls_server_config:\n  min_version: SSL3\n", "line 2: min_version must be one of"},
        {"basic_auth_users:\n  bob: plain\n", "line 2: basic_auth_users.bob must be a bcrypt hash"},
        {"basic_auth_users:\n  bob: $2b$24$abcdefghijklmnopqrstuu5MGN4mmIhXlR8bM7Mo6A1yRA5oqYQWa\n", "bcrypt cost 24 is outside"},
        {"basic_auth_users: [a, b]\n", "basic_auth_users must be a mapping"},
        {"a: [\n", "line 2:"},
        {"http_server_config:\n  headers:\n    \"X-Bad: x\": y\n", "must be a single-line string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tw_web_config c;
        char err[256] = "";
        assert_int_equal(parse(cases[i].yaml, &c, err), TW_ECONFIG);
        if (!strstr(err, cases[i].want))
            fail_msg("case %zu: '%s' does not contain '%s'", i, err, cases[i].want);
    }
}

static void test_empty_config_is_plain_http(void **state)
{
    (void)state;
    tw_web_config c;
    char err[256];
    assert_int_equal(parse("", &c, err), 0);
    assert_null(c.cert_file);
    assert_int_equal(c.user_count, 0);
    assert_int_equal(parse("basic_auth_users:\n", &c, err), 0);
    tw_web_config_free(&c);
}

static void test_password_matches(void **state)
{
    (void)state;
    char salt[64];
    assert_non_null(crypt_gensalt_rn("$2b$", 4, NULL, 0, salt, sizeof salt));
    struct crypt_data data = {0};
    char good[128];
    snprintf(good, sizeof good, "%s", crypt_r("s3cret", salt, &data));
    assert_true(tw_password_matches(good, "s3cret"));
    assert_false(tw_password_matches(good, "s3creT"));
    assert_false(tw_password_matches(good, ""));
    assert_false(tw_password_matches("not a hash", "s3cret"));
}

static void test_listen_addresses(void **state)
{
    (void)state;
    char host[64], port[16];
    assert_int_equal(tw_parse_listen_address("127.0.0.1:9464", host, sizeof host, port, sizeof port), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_string_equal(port, "9464");
    assert_int_equal(tw_parse_listen_address("[::1]:80", host, sizeof host, port, sizeof port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(tw_parse_listen_address(":9464", host, sizeof host, port, sizeof port), 0);
    assert_string_equal(host, "");
    assert_int_equal(tw_parse_listen_address("9464", host, sizeof host, port, sizeof port), TW_EINVAL);
    assert_int_equal(tw_parse_listen_address("host:", host, sizeof host, port, sizeof port), TW_EINVAL);
    assert_int_equal(tw_parse_listen_address("host:12a", host, sizeof host, port, sizeof port), TW_EINVAL);
    assert_int_equal(tw_parse_listen_address("[::1]80", host, sizeof host, port, sizeof port), TW_EINVAL);
}

static void test_push_urls(void **state)
{
    (void)state;
    tw_push_options o = {.url = "http://gw:9091/", .job = "train job", .grouping_count = 3,
                         .grouping_names = {"rank", "path", "empty"}, .grouping_values = {"0", "a/b", ""}};
    char url[512];
    assert_int_equal(tw_push_url(&o, url, sizeof url), 0);
    assert_string_equal(url, "http://gw:9091/metrics/job/train%20job/rank/0/path@base64/YS9i/empty@base64/=");
    o.job = "x/y";
    o.grouping_count = 0;
    assert_int_equal(tw_push_url(&o, url, sizeof url), 0);
    assert_string_equal(url, "http://gw:9091/metrics/job@base64/eC95");
    o.grouping_count = 1;
    o.grouping_names[0] = "bad-label";
    assert_int_equal(tw_push_url(&o, url, sizeof url), TW_EINVAL);
    o.grouping_names[0] = "job";
    assert_int_equal(tw_push_url(&o, url, sizeof url), TW_EINVAL);
    o.job = "";
    o.grouping_count = 0;
    assert_int_equal(tw_push_url(&o, url, sizeof url), TW_EINVAL);
}

static void test_tls_defaults_are_exporter_toolkits(void **state)
{
    (void)state;
    tw_web_config c;
    char err[256] = "", prio[512];
    assert_int_equal(parse("tls_server_config:\n  cert_file: a\n  key_file: b\n", &c, err), 0);
    assert_string_equal(tw_web_config_priorities(&c, prio, sizeof prio),
                        "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:%SERVER_PRECEDENCE");
    tw_web_config_free(&c);
}

/* What GnuTLS itself enables for the priority string: TLS 1.2 suites, versions, groups. */
static void enabled(const char *prio, char *suites, char *versions, char *groups, size_t cap)
{
    gnutls_priority_t p;
    assert_int_equal(gnutls_priority_init(&p, prio, NULL), GNUTLS_E_SUCCESS);
    suites[0] = versions[0] = groups[0] = '\0';
    for (unsigned i = 0;; i++) {
        unsigned idx;
        int rc = gnutls_priority_get_cipher_suite_index(p, i, &idx);
        if (rc == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
            break;
        gnutls_protocol_t min;
        const char *name = rc == 0 ? gnutls_cipher_suite_info(idx, NULL, NULL, NULL, NULL, &min) : NULL;
        if (name && min != GNUTLS_TLS1_3)
            snprintf(suites + strlen(suites), cap - strlen(suites), "%s ", name);
    }
    const unsigned *list;
    int n = gnutls_priority_protocol_list(p, &list);
    for (int i = 0; i < n; i++)
        snprintf(versions + strlen(versions), cap - strlen(versions), "%s ", gnutls_protocol_get_name(list[i]));
    n = gnutls_priority_group_list(p, &list);
    for (int i = 0; i < n; i++)
        snprintf(groups + strlen(groups), cap - strlen(groups), "%s ", gnutls_group_get_name(list[i]));
    gnutls_priority_deinit(p);
}

static void test_tls_versions_suites_and_curves_are_honoured(void **state)
{
    (void)state;
    tw_web_config c;
    char err[256] = "", prio[512], suites[1024], versions[128], groups[256];
    assert_int_equal(parse("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS12\n"
                           "  max_version: TLS12\n  prefer_server_cipher_suites: false\n  cipher_suites:\n"
                           "    - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n    - TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384\n"
                           "    - TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305\n"
                           "  curve_preferences: [X25519, CurveP256]\n",
                           &c, err),
                     0);
    enabled(tw_web_config_priorities(&c, prio, sizeof prio), suites, versions, groups, sizeof suites);
    assert_string_equal(suites, "TLS_ECDHE_RSA_AES_128_GCM_SHA256 TLS_ECDHE_RSA_AES_256_GCM_SHA384 "
                                "TLS_ECDHE_RSA_CHACHA20_POLY1305 ");
    assert_string_equal(versions, "TLS1.2 ");
    assert_string_equal(groups, "X25519 SECP256R1 ");
    assert_null(strstr(prio, "SERVER_PRECEDENCE"));
    tw_web_config_free(&c);
    assert_int_equal(parse("tls_server_config:\n  min_version: TLS13\n", &c, err), 0);
    enabled(tw_web_config_priorities(&c, prio, sizeof prio), suites, versions, groups, sizeof suites);
    assert_string_equal(versions, "TLS1.3 ");
    tw_web_config_free(&c);
    /* every suite Go calls secure: GnuTLS enables exactly those, from a list of four items each */
    assert_int_equal(parse("tls_server_config:\n  max_version: TLS12\n  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA, "
                           "TLS_RSA_WITH_AES_256_CBC_SHA, TLS_RSA_WITH_AES_128_GCM_SHA256, "
                           "TLS_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, "
                           "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, "
                           "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, "
                           "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, "
                           "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, "
                           "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256]\n",
                           &c, err),
                     0);
    enabled(tw_web_config_priorities(&c, prio, sizeof prio), suites, versions, groups, sizeof suites);
    size_t count = 0;
    for (const char *p = suites; (p = strchr(p, ' ')); p++)
        count++;
    assert_int_equal(count, 14);
    tw_web_config_free(&c);
}

static void test_tls_settings_not_supported_are_refused(void **state)
{
    (void)state;
    struct {
        const char *yaml, *want;
    } cases[] = {
        {"tls_server_config:\n  cipher_suites: [TLS_FOO]\n", "line 2: cipher_suites: unknown cipher suite TLS_FOO"},
        {"tls_server_config:\n  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n", "not supported by trainwatch (insecure)"},
        {"tls_server_config:\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n", "TLS 1.3 suites are not configurable"},
        {"tls_server_config:\n  cipher_suites:\n    - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n"
         "    - TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384\n",
         "line 2: cipher_suites: GnuTLS enables a suite when"},
        {"tls_server_config:\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA]\n", "which TLS 1.3 needs"},
        {"tls_server_config:\n  min_version: TLS13\n  max_version: TLS12\n", "min_version TLS13 is above max_version TLS12"},
        {"tls_server_config:\n  curve_preferences: [CurveP256, X448]\n", "line 2: curve_preferences: unknown or unsupported curve X448"},
        {"tls_server_config:\n  prefer_server_cipher_suites: maybe\n", "must be true or false"},
        {"tls_server_config:\n  cipher_suites: TLS_RSA_WITH_AES_128_GCM_SHA256\n", "cipher_suites must be a list"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tw_web_config c;
        char err[256] = "";
        assert_int_equal(parse(cases[i].yaml, &c, err), TW_ECONFIG);
        if (!strstr(err, cases[i].want))
            fail_msg("case %zu: '%s' does not contain '%s'", i, err, cases[i].want);
    }
}

static void make_hash(int cost, char *out, size_t cap)
{
    char salt[64];
    assert_non_null(crypt_gensalt_rn("$2b$", (unsigned long)cost, NULL, 0, salt, sizeof salt));
    struct crypt_data data = {0};
    snprintf(out, cap, "%s", crypt_r("pw", salt, &data));
}

/* Unknown users are checked against a hash of the users' cost, which costs a real bcrypt. */
static void test_dummy_hash_has_the_users_cost(void **state)
{
    (void)state;
    char h5[64], h6[64], yaml[512], err[256];
    make_hash(5, h5, sizeof h5);
    make_hash(6, h6, sizeof h6);
    snprintf(yaml, sizeof yaml, "basic_auth_users:\n  a: '%s'\n  b: '%s'\n  c: '%s'\n", h6, h5, h6);
    tw_web_config c;
    assert_int_equal(parse(yaml, &c, err), 0);
    assert_int_equal(strlen(c.dummy_hash), 60);
    assert_memory_equal(c.dummy_hash, "$2b$06$", 7);
    struct crypt_data data = {0};
    const char *out = crypt_r("anything", c.dummy_hash, &data);
    assert_non_null(out);
    assert_int_equal(strlen(out), 60);
    assert_memory_equal(out, c.dummy_hash, 29); /* a bcrypt of cost 6 ran */
    assert_false(tw_password_matches(c.dummy_hash, "anything"));
    tw_web_config_free(&c);
    snprintf(yaml, sizeof yaml, "basic_auth_users:\n  a: '%s'\n", h5);
    assert_int_equal(parse(yaml, &c, err), 0);
    assert_memory_equal(c.dummy_hash, "$2b$05$", 7);
    tw_web_config_free(&c);
}

/* ---- the connection guard, on socket pairs ------------------------------ */

typedef struct pair {
    int server, client;
    tw_guard_conn *conn;
} pair;

static struct sockaddr_in ipv4(const char *dotted)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, dotted, &a.sin_addr), 1);
    return a;
}

static void open_pair(tw_guard *g, pair *p, const char *ip)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    p->server = sv[0];
    p->client = sv[1];
    struct sockaddr_in a = ipv4(ip);
    assert_true(tw_guard_admit(g, (struct sockaddr *)&a));
    p->conn = tw_guard_opened(g, p->server, (struct sockaddr *)&a);
    assert_non_null(p->conn);
}

/* Whether the server side was shut down: the client reads end of stream (waits up to ms). */
static bool shut_down(pair *p, int ms)
{
    struct pollfd pfd = {.fd = p->client, .events = POLLIN};
    char c;
    return poll(&pfd, 1, ms) == 1 && recv(p->client, &c, 1, MSG_DONTWAIT) == 0;
}

static void close_pair(tw_guard *g, pair *p)
{
    tw_guard_closed(g, p->conn);
    close(p->server);
    close(p->client);
}

static void test_guard_recycles_the_oldest_waiting_of_an_address(void **state)
{
    (void)state;
    tw_guard *g;
    tw_guard_options o = {.per_ip_waiting = 2, .waiting_max = 100, .header_timeout = 3600};
    assert_int_equal(tw_guard_new(&o, &g), TW_OK);
    pair p[5];
    open_pair(g, &p[0], "10.0.0.1");
    open_pair(g, &p[1], "10.0.0.1");
    open_pair(g, &p[2], "10.0.0.2"); /* another address: its own room */
    assert_false(shut_down(&p[0], 0));
    open_pair(g, &p[3], "10.0.0.1"); /* a third waiting from 10.0.0.1: the oldest goes */
    assert_true(shut_down(&p[0], 1000));
    assert_false(shut_down(&p[1], 0));
    assert_false(shut_down(&p[2], 0));
    /* a connection whose headers are complete is not waiting: never recycled */
    tw_guard_headers_done(g, p[1].conn);
    open_pair(g, &p[4], "10.0.0.1");
    assert_false(shut_down(&p[1], 0));
    assert_false(shut_down(&p[3], 0));
    assert_int_equal(tw_guard_closed_count(g), 1);
    for (int i = 0; i < 5; i++)
        close_pair(g, &p[i]);
    tw_guard_free(g);
}

static void test_guard_makes_room_from_the_busiest_address(void **state)
{
    (void)state;
    tw_guard *g;
    tw_guard_options o = {.per_ip_waiting = 10, .waiting_max = 3, .header_timeout = 3600};
    assert_int_equal(tw_guard_new(&o, &g), TW_OK);
    pair p[4];
    open_pair(g, &p[0], "10.0.0.9"); /* a scraper's keep-alive connection, oldest of all */
    open_pair(g, &p[1], "10.0.0.1");
    open_pair(g, &p[2], "10.0.0.1");
    open_pair(g, &p[3], "10.0.0.3"); /* all full: 10.0.0.1 has the most, its oldest goes */
    assert_true(shut_down(&p[1], 1000));
    assert_false(shut_down(&p[0], 0));
    assert_false(shut_down(&p[2], 0));
    for (int i = 0; i < 4; i++)
        close_pair(g, &p[i]);
    tw_guard_free(g);
}

static bool admit_from(tw_guard *g, const char *ip)
{
    struct sockaddr_in a = ipv4(ip);
    return tw_guard_admit(g, (struct sockaddr *)&a);
}

static void test_guard_caps_an_address_counting_only_what_it_has_not_shut(void **state)
{
    (void)state;
    tw_guard *g;
    tw_guard_options o = {.per_ip_max = 2, .per_ip_waiting = 1, .waiting_max = 100, .header_timeout = 3600};
    assert_int_equal(tw_guard_new(&o, &g), TW_OK);
    pair p[4];
    open_pair(g, &p[0], "10.0.0.1");
    tw_guard_headers_done(g, p[0].conn); /* busy with a request */
    open_pair(g, &p[1], "10.0.0.1");     /* waiting */
    /* full (two open): its waiting one is shut down to make room, and the
     * newcomer is admitted while that one is still open, not yet closed by
     * its owner (libmicrohttpd's own per-address limit counted it) */
    open_pair(g, &p[2], "10.0.0.1");
    assert_true(shut_down(&p[1], 1000));
    assert_false(shut_down(&p[0], 0));
    /* two busy and nothing waiting to recycle: refused; other addresses are not */
    tw_guard_headers_done(g, p[2].conn);
    assert_false(admit_from(g, "10.0.0.1"));
    assert_false(shut_down(&p[0], 0));
    assert_false(shut_down(&p[2], 0));
    open_pair(g, &p[3], "10.0.0.2");
    /* one busy connection closed: room again */
    close_pair(g, &p[0]);
    assert_true(admit_from(g, "10.0.0.1"));
    for (int i = 1; i < 4; i++)
        close_pair(g, &p[i]);
    tw_guard_free(g);
}

static void test_guard_closes_what_misses_the_header_deadline(void **state)
{
    (void)state;
    tw_guard *g;
    tw_guard_options o = {.per_ip_waiting = 10, .waiting_max = 10, .header_timeout = 0.2};
    assert_int_equal(tw_guard_new(&o, &g), TW_OK);
    pair slow, quick;
    open_pair(g, &slow, "10.0.0.1");
    open_pair(g, &quick, "10.0.0.1");
    tw_guard_headers_done(g, quick.conn);
    assert_true(shut_down(&slow, 10000)); /* bounded wait for the deadline thread */
    assert_false(shut_down(&quick, 0));
    /* after its request, a keep-alive connection is waiting again, with a new deadline */
    tw_guard_request_done(g, quick.conn);
    assert_true(shut_down(&quick, 10000));
    assert_int_equal(tw_guard_closed_count(g), 2);
    close_pair(g, &slow);
    close_pair(g, &quick);
    tw_guard_free(g);
}

/* ---- password checks off the caller's thread ----------------------------- */

typedef struct outcome {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done, granted;
} outcome;

static outcome outcomes = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static void record(void *arg, bool granted)
{
    (void)arg;
    pthread_mutex_lock(&outcomes.lock);
    outcomes.done++;
    outcomes.granted += granted;
    pthread_cond_broadcast(&outcomes.cond);
    pthread_mutex_unlock(&outcomes.lock);
}

static void wait_done(int n)
{
    pthread_mutex_lock(&outcomes.lock);
    while (outcomes.done < n)
        pthread_cond_wait(&outcomes.cond, &outcomes.lock);
    pthread_mutex_unlock(&outcomes.lock);
}

static int done_count(void)
{
    pthread_mutex_lock(&outcomes.lock);
    int n = outcomes.done;
    pthread_mutex_unlock(&outcomes.lock);
    return n;
}

static void config_with_alice(tw_web_config *c, int cost)
{
    char h[64], yaml[256], err[256];
    make_hash(cost, h, sizeof h);
    snprintf(yaml, sizeof yaml, "basic_auth_users:\n  alice: '%s'\n", h);
    assert_int_equal(parse(yaml, c, err), 0);
}

static void test_auth_checks_in_workers_and_caches_successes(void **state)
{
    (void)state;
    tw_web_config c;
    config_with_alice(&c, 5); /* crypt_r("pw") */
    tw_auth *a;
    assert_int_equal(tw_auth_new(&c, 1, &a), TW_OK);
    outcomes.done = outcomes.granted = 0;
    tw_auth_job job;
    assert_int_equal(tw_auth_check(a, NULL, NULL, &job, record, NULL), TW_AUTH_DENIED);
    assert_int_equal(tw_auth_check(a, "alice", "pw", &job, record, NULL), TW_AUTH_QUEUED);
    tw_auth_submit(a, &job);
    wait_done(1);
    assert_int_equal(outcomes.granted, 1);
    /* now cached: decided at once, nothing queued */
    assert_int_equal(tw_auth_check(a, "alice", "pw", &job, record, NULL), TW_AUTH_GRANTED);
    /* failures are not cached; unknown users are checked (against the dummy) and refused */
    const char *users[] = {"alice", "alice", "mallory"}, *passwords[] = {"wrong", "wrong", "pw"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tw_auth_check(a, users[i], passwords[i], &job, record, NULL), TW_AUTH_QUEUED);
        tw_auth_submit(a, &job);
        wait_done(2 + i);
    }
    assert_int_equal(outcomes.granted, 1);
    tw_auth_free(a);
    tw_web_config_free(&c);
}

/* Slow checks in flight do not hold up one the cache can answer; stopping denies what is queued. */
static void test_cached_check_is_answered_while_others_are_in_flight(void **state)
{
    (void)state;
    tw_web_config c;
    config_with_alice(&c, 12);
    tw_auth *a;
    assert_int_equal(tw_auth_new(&c, 1, &a), TW_OK);
    outcomes.done = outcomes.granted = 0;
    tw_auth_job first, wrong[4];
    assert_int_equal(tw_auth_check(a, "alice", "pw", &first, record, NULL), TW_AUTH_QUEUED);
    tw_auth_submit(a, &first);
    wait_done(1);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(tw_auth_check(a, "alice", "guess", &wrong[i], record, NULL), TW_AUTH_QUEUED);
        tw_auth_submit(a, &wrong[i]);
    }
    tw_auth_job again;
    assert_int_equal(tw_auth_check(a, "alice", "pw", &again, record, NULL), TW_AUTH_GRANTED);
    assert_true(done_count() < 5); /* one worker, four cost-12 checks: not all done */
    tw_auth_stop(a);
    assert_int_equal(done_count(), 5); /* the rest denied, each told */
    assert_int_equal(outcomes.granted, 1);
    tw_auth_free(a);
    tw_web_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_config),
        cmocka_unit_test(test_errors_name_the_line),
        cmocka_unit_test(test_empty_config_is_plain_http),
        cmocka_unit_test(test_password_matches),
        cmocka_unit_test(test_listen_addresses),
        cmocka_unit_test(test_push_urls),
        cmocka_unit_test(test_tls_defaults_are_exporter_toolkits),
        cmocka_unit_test(test_tls_versions_suites_and_curves_are_honoured),
        cmocka_unit_test(test_tls_settings_not_supported_are_refused),
        cmocka_unit_test(test_dummy_hash_has_the_users_cost),
        cmocka_unit_test(test_guard_recycles_the_oldest_waiting_of_an_address),
        cmocka_unit_test(test_guard_makes_room_from_the_busiest_address),
        cmocka_unit_test(test_guard_caps_an_address_counting_only_what_it_has_not_shut),
        cmocka_unit_test(test_guard_closes_what_misses_the_header_deadline),
        cmocka_unit_test(test_auth_checks_in_workers_and_caches_successes),
        cmocka_unit_test(test_cached_check_is_answered_while_others_are_in_flight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
