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
    *n = (tw_alert_notice){.labels = labels, .label_count = 1, .resolved = resolved, .changed = true,
                           .starts_at = 1000, .ends_at = 1240, .fingerprint = fp};
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
    tw_notifier_options o = {.registry = reg, .queue_limit = 3, .timeout = 0.5, .backoff_initial = 60, .backoff_max = 60};
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
    tw_receiver_options ok = {.url = "https://oapi.dingtalk.com/robot/send?access_token=x", .format = "dingtalk",
                              .secret = "SEC1"};
    assert_int_equal(tw_notifier_add(n, &ok, err, sizeof err), TW_OK);
    const char *const *formats = tw_notify_formats();
    size_t count = 0;
    while (formats[count])
        count++;
    assert_int_equal(count, 6);
    assert_int_equal(tw_notifier_flush(n, 0.1), 0);
    tw_notifier_free(n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_keeps_one_entry_per_alert_and_a_limit),
        cmocka_unit_test(test_receiver_options_are_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
