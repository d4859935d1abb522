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
#include <stdio.h>
#include <string.h>

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
        {"tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
         "line 4: tls_server_config.cipher_suites is not supported"},
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_config),
        cmocka_unit_test(test_errors_name_the_line),
        cmocka_unit_test(test_empty_config_is_plain_http),
        cmocka_unit_test(test_password_matches),
        cmocka_unit_test(test_listen_addresses),
        cmocka_unit_test(test_push_urls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
