/*
 * test_notify.c: the notifier's queues, without a network: a receiver on a
 * port where nothing listens keeps failing, so what stays queued shows the
 * queue's rules (one entry per alert, the oldest dropped past the limit),
 * and receiver options are checked before anything starts. Delivery itself
 * is tested against real receivers in tests/e2e/test_alerts.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/http_client.h"
#include "notify/sign.h"
#include "trainwatch/error.h"
#include "trainwatch/metrics.h"
#include "trainwatch/notify.h"

/* A port nothing listens on: bound, never listened to, then closed. */
static int dead_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &len);
    close(s);
    return ntohs(a.sin_port);
}

static void notice(tw_alert_notice *n, tw_alert_label *labels, const char *name, uint64_t fp, bool resolved)
{
    labels[0] = (tw_alert_label){"alertname", name};
    *n = (tw_alert_notice){.labels = labels,
                           .label_count = 1,
                           .resolved = resolved,
                           .changed = true,
                           .starts_at = 1000,
                           .ends_at = 1240,
                           .fingerprint = fp};
}

static double metric(tw_registry *r, const char *name)
{
    char *text;
    size_t len;
    assert_int_equal(tw_registry_expose(r, TW_EXPOSE_TEXT, &text, &len), TW_OK);
    const char *at = strstr(text, name);
    double v = at ? strtod(strchr(at, ' ') + 1, NULL) : -1;
    free(text);
    return v;
}

static void test_queue_keeps_one_entry_per_alert_and_a_limit(void **state)
{
    (void)state;
    tw_registry *reg;
    assert_int_equal(tw_registry_new(&reg), TW_OK);
    /* after the first failure, no retry for 60 s: what is queued stays put */
    tw_notifier_options o = {
        .registry = reg, .queue_limit = 3, .timeout = 0.5, .backoff_initial = 60, .backoff_max = 60};
    tw_notifier *n;
    assert_int_equal(tw_notifier_new(&o, &n), TW_OK);
    char url[64], err[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/hook", dead_port());
    tw_receiver_options r = {.url = url, .format = "alertmanager"};
    assert_int_equal(tw_notifier_add(n, &r, err, sizeof err), TW_OK);
    tw_alert_label l[1];
    tw_alert_notice a;
    /* the same alert three times (firing, firing, resolved): one entry */
    for (int i = 0; i < 3; i++) {
        notice(&a, l, "A", 42, i == 2);
        tw_notifier_sink(n, &a, 1);
    }
    /* whatever the first attempt took, its failure leaves the latest state alone */
    size_t left = tw_notifier_flush(n, 1.0);
    assert_int_equal(left, 1);
    /* five more distinct alerts into a queue of three: the oldest are dropped */
    const char *names[] = {"B", "C", "D", "E", "F"};
    for (int i = 0; i < 5; i++) {
        notice(&a, l, names[i], 100 + (uint64_t)i, false);
        tw_notifier_sink(n, &a, 1);
    }
    left = tw_notifier_flush(n, 0.2);
    assert_int_equal(left, 3);
    assert_true(metric(reg, "trainwatch_notifications_dropped_total{receiver=\"alertmanager-1\"}") == 3);
    assert_true(metric(reg, "trainwatch_notifications_queue_length{receiver=\"alertmanager-1\"}") == 3);
    assert_true(metric(reg, "trainwatch_notifications_errors_total{receiver=\"alertmanager-1\"}") == 1);
    assert_true(metric(reg, "trainwatch_notifications_sent_total{receiver=\"alertmanager-1\"}") == 0);
    tw_notifier_free(n);
    tw_registry_free(reg);
}

static void test_receiver_options_are_checked(void **state)
{
    (void)state;
    tw_notifier_options o = {0};
    tw_notifier *n;
    assert_int_equal(tw_notifier_new(&o, &n), TW_OK);
    char err[256];
    tw_receiver_options bad_format = {.url = "http://127.0.0.1:1/", .format = "telegram"};
    assert_int_equal(tw_notifier_add(n, &bad_format, err, sizeof err), TW_EUSAGE);
    assert_non_null(strstr(err, "unknown notification format 'telegram'"));
    tw_receiver_options bad_url = {.url = "127.0.0.1:9093", .format = "alertmanager-api"};
    assert_int_equal(tw_notifier_add(n, &bad_url, err, sizeof err), TW_EUSAGE);
    tw_receiver_options unsigned_secret = {.url = "http://127.0.0.1:1/", .format = "slack", .secret = "s"};
    assert_int_equal(tw_notifier_add(n, &unsigned_secret, err, sizeof err), TW_EUSAGE);
    assert_non_null(strstr(err, "does not sign"));
    tw_receiver_options ok = {
        .url = "https://oapi.dingtalk.com/robot/send?access_token=x", .format = "dingtalk", .secret = "SEC1"};
    assert_int_equal(tw_notifier_add(n, &ok, err, sizeof err), TW_OK);
    const char *const *formats = tw_notify_formats();
    size_t count = 0;
    while (formats[count])
        count++;
    assert_int_equal(count, 6);
    assert_int_equal(tw_notifier_flush(n, 0.1), 0);
    tw_notifier_free(n);
}

static void test_logged_urls_keep_only_the_origin(void **state)
{
    (void)state;
    char out[128];
    assert_string_equal(tw_url_origin("https://hooks.slack.com/services/T0/B0/XyZsecret", out, sizeof out),
                        "https://hooks.slack.com");
    assert_string_equal(tw_url_origin("http://user:p%40ss@gw:9091/metrics/job/x?token=1#f", out, sizeof out),
                        "http://gw:9091");
    assert_string_equal(tw_url_origin("http://u:p@ss@[::1]:9093?access_token=abc", out, sizeof out),
                        "http://[::1]:9093");
    assert_string_equal(tw_url_origin("https://oapi.dingtalk.com/robot/send?access_token=abc", out, sizeof out),
                        "https://oapi.dingtalk.com");
    assert_string_equal(tw_url_without_credentials("http://user:pw@gw:9091/metrics/job/x?token=1#f", out, sizeof out),
                        "http://gw:9091/metrics/job/x");
    assert_string_equal(tw_url_without_credentials("https://gw/metrics/job/x", out, sizeof out),
                        "https://gw/metrics/job/x");
}

/* Each secret must be gone from the redacted text, each kept word still there. */
static void test_error_bodies_are_redacted(void **state)
{
    (void)state;
    struct {
        const char *body, *secret, *kept;
    } cases[] = {
        {"{\"errcode\":300001,\"errmsg\":\"token is not exist\",\"access_token\":\"abc\"}", "abc",
         "token is not exist"},
        {"{\"code\":19021,\"msg\":\"sign match fail\",\"sign\":\"q1w2e3\"}", "q1w2e3", "sign match fail"},
        {"invalid_token: xoxb-1234-5678-AbCdEfGhIjKl", "AbCdEfGhIjKl", "invalid_token"},
        {"no route for POST /services/T0AAA/B0BBB/zzzSECRETzzz", "SECRET", "no route for POST"},
        {"see https://user:pw@hook.example:8443/x/tok?k=v for details", "pw", "https://hook.example:8443"},
        {"see https://hook.example/hooks/abcdefgh", "abcdefgh", "https://hook.example/[redacted]"},
        {"api_key=plainvalue&page=2", "plainvalue", "page=2"},
        {"Authorization: Bearer eyJhbGciOi", "eyJhbGciOi", "Authorization"},
        {"signature: c2VjcmV0c2lnbg==\r\nnext", "c2VjcmV0", "next"},
        {"password = 'hunter2'", "hunter2", "password"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[256];
        tw_redact(cases[i].body, strlen(cases[i].body), out, sizeof out);
        if (strstr(out, cases[i].secret) || !strstr(out, cases[i].kept))
            fail_msg("case %zu: '%s'", i, out);
        assert_null(strpbrk(out, "\r\n"));
    }
    /* binary bytes become '?', the output is bounded */
    char out[8];
    tw_redact("\x01\xff"
              "abcdefghijkl",
              14, out, sizeof out);
    assert_string_equal(out, "??abcde");
}

static void hex(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

/* RFC 4231, section 4: all seven HMAC-SHA-256 test cases. */
static void test_hmac_sha256_rfc4231(void **state)
{
    (void)state;
    uint8_t k1[20], k3[20], k4[25], k5[20], k6[131], d3[50], d4[50];
    memset(k1, 0x0b, sizeof k1);
    memset(k3, 0xaa, sizeof k3);
    memset(d3, 0xdd, sizeof d3);
    for (size_t i = 0; i < sizeof k4; i++)
        k4[i] = (uint8_t)(i + 1);
    memset(d4, 0xcd, sizeof d4);
    memset(k5, 0x0c, sizeof k5);
    memset(k6, 0xaa, sizeof k6);
    const char *m7 = "This is a test using a larger than block-size key and a larger than block-size data. The key "
                     "needs to be hashed before being used by the HMAC algorithm.";
    struct {
        const void *key;
        size_t key_len;
        const void *msg;
        size_t msg_len;
        const char *want;
    } cases[] = {
        {k1, 20, "Hi There", 8, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        {"Jefe", 4, "what do ya want for nothing?", 28,
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
        {k3, 20, d3, 50, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
        {k4, 25, d4, 50, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
        {k5, 20, "Test With Truncation", 20, "a3b6167473100ee06e0c796c2955552b"}, /* truncated to 128 bits */
        {k6, 131, "Test Using Larger Than Block-Size Key - Hash Key First", 54,
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
        {k6, 131, m7, strlen(m7), "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t mac[32];
        char text[65];
        tw_hmac_sha256(cases[i].key, cases[i].key_len, cases[i].msg, cases[i].msg_len, mac);
        hex(mac, 32, text);
        if (strncmp(text, cases[i].want, strlen(cases[i].want)) != 0)
            fail_msg("test case %zu: %s", i + 1, text);
    }
    uint8_t digest[32];
    char text[65];
    tw_sha256("abc", 3, digest);
    hex(digest, 32, text);
    assert_string_equal(text, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_keeps_one_entry_per_alert_and_a_limit),
        cmocka_unit_test(test_receiver_options_are_checked),
        cmocka_unit_test(test_logged_urls_keep_only_the_origin),
        cmocka_unit_test(test_error_bodies_are_redacted),
        cmocka_unit_test(test_hmac_sha256_rfc4231),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
