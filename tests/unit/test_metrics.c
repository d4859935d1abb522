/*
 * test_metrics.c: the registry and its exposition: every metric type in both
 * formats byte for byte, escaping, name and label guards, the series limit,
 * exact totals under concurrent updates, and content negotiation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buffer.h"
#include "trainwatch/error.h"
#include "trainwatch/metrics.h"

/* Exposes r and drops lines with _created (they carry the wall clock). */
static char *expose(tw_registry *r, tw_expose_format fmt)
{
    char *text;
    size_t len;
    assert_int_equal(tw_registry_expose(r, fmt, &text, &len), 0);
    assert_int_equal(strlen(text), len);
    char *out = malloc(len + 1), *o = out;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strstr(line, "_created") && line[0] != '#')
            continue;
        o += sprintf(o, "%s\n", line);
    }
    *o = '\0';
    free(text);
    return out;
}

static tw_registry *registry_with_one_of_each(void)
{
    tw_registry *r;
    assert_int_equal(tw_registry_new(&r), 0);
    const char *labels[] = {"job", "rank"};
    tw_family *steps;
    tw_family_options o = {.name = "train_steps_total", .help = "Steps done.", .type = TW_METRIC_COUNTER,
                           .label_count = 2, .label_names = labels};
    assert_int_equal(tw_family_register(r, &o, &steps), 0);
    tw_counter *c;
    const char *values[] = {"demo \"x\"\\y\nz", "0"};
    assert_int_equal(tw_family_series(steps, values, &c), 0);
    tw_counter_add(c, 41);
    tw_counter_inc(c);
    tw_gauge *loss;
    assert_int_equal(tw_gauge_new(r, "train_loss", "Loss \\ with \"quotes\"\nand a newline.", &loss), 0);
    tw_gauge_set(loss, NAN);
    tw_gauge *lr;
    assert_int_equal(tw_gauge_new(r, "learning_rate", "LR.", &lr), 0);
    tw_gauge_set(lr, -INFINITY);
    double bounds[] = {0.1, 1, 2.5};
    tw_histogram *h;
    assert_int_equal(tw_histogram_new(r, "step_seconds", "Step time.", bounds, 3, &h), 0);
    tw_histogram_observe(h, 0.05);
    tw_histogram_observe(h, 0.5);
    tw_histogram_observe(h, 0.5);
    tw_histogram_observe(h, 100);
    const char *info_names[] = {"version"};
    const char *info_values[] = {"1.2"};
    assert_int_equal(tw_info_new(r, "build_info", "Build.", 1, info_names, info_values), 0);
    return r;
}

static void test_text_format_exactly(void **state)
{
    (void)state;
    tw_registry *r = registry_with_one_of_each();
    char *out = expose(r, TW_EXPOSE_TEXT);
    assert_string_equal(out,
                        "# HELP trainwatch_dropped_series_total Series refused because a family reached its series limit.\n"
                        "# TYPE trainwatch_dropped_series_total counter\n"
                        "trainwatch_dropped_series_total 0\n"
                        "# HELP train_steps_total Steps done.\n"
                        "# TYPE train_steps_total counter\n"
                        "train_steps_total{job=\"demo \\\"x\\\"\\\\y\\nz\",rank=\"0\"} 42\n"
                        "# HELP train_loss Loss \\\\ with \"quotes\"\\nand a newline.\n"
                        "# TYPE train_loss gauge\n"
                        "train_loss NaN\n"
                        "# HELP learning_rate LR.\n"
                        "# TYPE learning_rate gauge\n"
                        "learning_rate -Inf\n"
                        "# HELP step_seconds Step time.\n"
                        "# TYPE step_seconds histogram\n"
                        "step_seconds_bucket{le=\"0.1\"} 1\n"
                        "step_seconds_bucket{le=\"1.0\"} 3\n"
                        "step_seconds_bucket{le=\"2.5\"} 3\n"
                        "step_seconds_bucket{le=\"+Inf\"} 4\n"
                        "step_seconds_sum 101.05\n"
                        "step_seconds_count 4\n"
                        "# HELP build_info Build.\n"
                        "# TYPE build_info gauge\n"
                        "build_info{version=\"1.2\"} 1\n");
    free(out);
    tw_registry_free(r);
}

static void test_openmetrics_format_exactly(void **state)
{
    (void)state;
    tw_registry *r = registry_with_one_of_each();
    char *out = expose(r, TW_EXPOSE_OPENMETRICS);
    assert_string_equal(out,
                        "# HELP trainwatch_dropped_series Series refused because a family reached its series limit.\n"
                        "# TYPE trainwatch_dropped_series counter\n"
                        "trainwatch_dropped_series_total 0\n"
                        "# HELP train_steps Steps done.\n"
                        "# TYPE train_steps counter\n"
                        "train_steps_total{job=\"demo \\\"x\\\"\\\\y\\nz\",rank=\"0\"} 42\n"
                        "# HELP train_loss Loss \\\\ with \\\"quotes\\\"\\nand a newline.\n"
                        "# TYPE train_loss gauge\n"
                        "train_loss NaN\n"
                        "# HELP learning_rate LR.\n"
                        "# TYPE learning_rate gauge\n"
                        "learning_rate -Inf\n"
                        "# HELP step_seconds Step time.\n"
                        "# TYPE step_seconds histogram\n"
                        "step_seconds_bucket{le=\"0.1\"} 1\n"
                        "step_seconds_bucket{le=\"1.0\"} 3\n"
                        "step_seconds_bucket{le=\"2.5\"} 3\n"
                        "step_seconds_bucket{le=\"+Inf\"} 4\n"
                        "step_seconds_sum 101.05\n"
                        "step_seconds_count 4\n"
                        "# HELP build Build.\n"
                        "# TYPE build info\n"
                        "build_info{version=\"1.2\"} 1\n"
                        "# EOF\n");
    free(out);
    tw_registry_free(r);
}

static void test_created_samples_in_openmetrics_only(void **state)
{
    (void)state;
    tw_registry *r = registry_with_one_of_each();
    char *text;
    size_t len;
    assert_int_equal(tw_registry_expose(r, TW_EXPOSE_OPENMETRICS, &text, &len), 0);
    assert_non_null(strstr(text, "\ntrain_steps_created{job="));
    assert_non_null(strstr(text, "\nstep_seconds_created "));
    free(text);
    assert_int_equal(tw_registry_expose(r, TW_EXPOSE_TEXT, &text, &len), 0);
    assert_null(strstr(text, "_created"));
    free(text);
    tw_registry_free(r);
}

static void test_names_are_validated(void **state)
{
    (void)state;
    tw_registry *r;
    assert_int_equal(tw_registry_new(&r), 0);
    tw_gauge *g;
    assert_int_equal(tw_gauge_new(r, "1bad", "x", &g), TW_ENAME);
    assert_int_equal(tw_gauge_new(r, "bad-name", "x", &g), TW_ENAME);
    assert_int_equal(tw_gauge_new(r, "", "x", &g), TW_ENAME);
    assert_int_equal(tw_gauge_new(r, "ok:name_1", "x", &g), 0);
    assert_int_equal(tw_gauge_new(r, "ok:name_1", "x", &g), TW_EEXIST);
    const char *reserved[][1] = {{"__x"}, {"le"}, {"quantile"}, {"a-b"}, {"9x"}};
    for (size_t i = 0; i < 5; i++) {
        tw_family *f;
        tw_family_options o = {.name = "fam", .type = TW_METRIC_GAUGE, .label_count = 1, .label_names = reserved[i]};
        assert_int_equal(tw_family_register(r, &o, &f), TW_ENAME);
    }
    const char *dup[] = {"a", "a"};
    tw_family *f;
    tw_family_options o = {.name = "fam", .type = TW_METRIC_GAUGE, .label_count = 2, .label_names = dup};
    assert_int_equal(tw_family_register(r, &o, &f), TW_ENAME);
    const char *nine[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
    o.label_count = TW_LABELS_MAX + 1;
    o.label_names = nine;
    assert_int_equal(tw_family_register(r, &o, &f), TW_ELIMIT);
    double bad[] = {1, 0.5};
    tw_histogram *h;
    assert_int_equal(tw_histogram_new(r, "h", "x", bad, 2, &h), TW_EINVAL);
    tw_registry_free(r);
}

static void test_series_limit_counts_dropped(void **state)
{
    (void)state;
    tw_registry *r;
    assert_int_equal(tw_registry_new(&r), 0);
    const char *labels[] = {"rank"};
    tw_family *f;
    tw_family_options o = {.name = "per_rank", .type = TW_METRIC_GAUGE, .label_count = 1, .label_names = labels,
                           .series_limit = 3};
    assert_int_equal(tw_family_register(r, &o, &f), 0);
    tw_gauge *g;
    const char *v[4][1] = {{"0"}, {"1"}, {"2"}, {"3"}};
    for (int i = 0; i < 3; i++)
        assert_int_equal(tw_family_series(f, v[i], &g), 0);
    assert_int_equal(tw_family_series(f, v[3], &g), TW_ELIMIT);
    assert_int_equal(tw_family_series(f, v[3], &g), TW_ELIMIT);
    assert_int_equal(tw_family_series(f, v[1], &g), 0); /* existing series still found */
    assert_int_equal(tw_family_series(f, NULL, &g), TW_ELABELS);
    char *text;
    size_t len;
    tw_registry_expose(r, TW_EXPOSE_TEXT, &text, &len);
    assert_non_null(strstr(text, "\ntrainwatch_dropped_series_total 2\n"));
    free(text);
    tw_registry_free(r);
}

static void test_same_series_same_handle_and_unregister(void **state)
{
    (void)state;
    tw_registry *r;
    assert_int_equal(tw_registry_new(&r), 0);
    const char *labels[] = {"event"};
    tw_family *f;
    tw_family_options o = {.name = "events", .type = TW_METRIC_COUNTER, .label_count = 1, .label_names = labels};
    assert_int_equal(tw_family_register(r, &o, &f), 0);
    tw_counter *a, *b;
    const char *oom[] = {"oom"};
    for (int i = 0; i < 100; i++) {
        char name[16];
        snprintf(name, sizeof name, "e%d", i);
        const char *v[] = {name};
        assert_int_equal(tw_family_series(f, v, &a), 0);
    }
    assert_int_equal(tw_family_series(f, oom, &a), 0);
    assert_int_equal(tw_family_series(f, oom, &b), 0);
    assert_ptr_equal(a, b);
    assert_int_equal(tw_counter_add(a, -1), TW_EINVAL);
    assert_int_equal(tw_counter_add(a, NAN), TW_EINVAL);
    assert_int_equal(tw_counter_add(a, 0.25), 0);
    tw_counter_inc(b);
    assert_true(tw_cell_value(a) == 1.25);
    tw_family_unregister(f);
    assert_int_equal(tw_family_register(r, &o, &f), 0); /* the name is free again */
    tw_registry_free(r);
}

#define THREADS 4
#define PER_THREAD 250000

static void *hammer(void *arg)
{
    tw_cell **cells = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        tw_counter_inc(cells[0]);
        tw_gauge_add(cells[1], 0.5);
        tw_histogram_observe(cells[2], (i % 10) * 0.1);
    }
    return NULL;
}

static void test_concurrent_updates_are_exact(void **state)
{
    (void)state;
    tw_registry *r;
    assert_int_equal(tw_registry_new(&r), 0);
    tw_cell *cells[3];
    assert_int_equal(tw_counter_new(r, "hits_total", "x", &cells[0]), 0);
    assert_int_equal(tw_gauge_new(r, "level", "x", &cells[1]), 0);
    assert_int_equal(tw_histogram_new(r, "obs", "x", NULL, 0, &cells[2]), 0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, hammer, cells);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_true(tw_cell_value(cells[0]) == (double)THREADS * PER_THREAD);
    assert_true(tw_cell_value(cells[1]) == 0.5 * THREADS * PER_THREAD);
    char *text;
    size_t len;
    tw_registry_expose(r, TW_EXPOSE_TEXT, &text, &len);
    char want[64];
    snprintf(want, sizeof want, "obs_count %d\n", THREADS * PER_THREAD);
    assert_non_null(strstr(text, want));
    snprintf(want, sizeof want, "obs_bucket{le=\"+Inf\"} %d\n", THREADS * PER_THREAD);
    assert_non_null(strstr(text, want));
    free(text);
    tw_registry_free(r);
}

static void test_negotiation(void **state)
{
    (void)state;
    /* what Prometheus 2.x sends */
    assert_int_equal(tw_negotiate_format("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                                         "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
                     TW_EXPOSE_OPENMETRICS);
    assert_int_equal(tw_negotiate_format("text/plain;version=0.0.4;q=1,application/openmetrics-text;q=0.5"), TW_EXPOSE_TEXT);
    assert_int_equal(tw_negotiate_format("application/openmetrics-text; version=0.0.1"), TW_EXPOSE_OPENMETRICS);
    assert_int_equal(tw_negotiate_format("application/openmetrics-text; version=9.9.9"), TW_EXPOSE_TEXT);
    assert_int_equal(tw_negotiate_format("application/openmetrics-text;q=0"), TW_EXPOSE_TEXT);
    assert_int_equal(tw_negotiate_format(NULL), TW_EXPOSE_TEXT);
    assert_int_equal(tw_negotiate_format("*/*"), TW_EXPOSE_TEXT);
    assert_int_equal(tw_negotiate_format(";;;,,=q"), TW_EXPOSE_TEXT);
    assert_true(tw_accepts_gzip("gzip, deflate"));
    assert_true(tw_accepts_gzip("deflate;q=1, gzip;q=0.5"));
    assert_false(tw_accepts_gzip("gzip;q=0"));
    assert_false(tw_accepts_gzip("identity"));
    assert_false(tw_accepts_gzip(NULL));
}

static void test_bucket_helpers(void **state)
{
    (void)state;
    double b[5];
    assert_int_equal(tw_buckets_linear(1, 0.5, 4, b), 4);
    assert_true(b[0] == 1 && b[3] == 2.5);
    assert_int_equal(tw_buckets_exponential(0.01, 10, 5, b), 5);
    assert_true(fabs(b[4] - 100) < 1e-9);
    assert_int_equal(tw_buckets_exponential(0, 2, 3, b), 0);
    assert_int_equal(tw_buckets_linear(0, -1, 3, b), 0);
}

static void test_number_text_reads_back_exactly(void **state)
{
    (void)state;
    struct {
        double v;
        const char *text;
    } fixed[] = {{0.5, "0.5"}, {61.5, "61.5"}, {0.001, "0.001"}, {-2.25, "-2.25"}, {0.1, "0.1"}, {3, "3"},
                 {-0.0, "-0"}, {1e-7, "1e-07"}, {123456.789, "123456.789"}, {0.1 + 0.2, "0.30000000000000004"},
                 {1e300, "1e+300"}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        char out[TW_DOUBLE_CHARS];
        tw_format_double(out, fixed[i].v);
        assert_string_equal(out, fixed[i].text);
    }
    unsigned long long x = 88172645463325252ull;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double v;
        switch (i % 3) {
        case 0: v = (double)(x % 100000000) / 1000.0; break;       /* few decimals */
        case 1: v = (double)(x >> 11) / 9007199254740992.0; break;  /* full mantissa */
        default: memcpy(&v, &x, sizeof v); break;                    /* any bits */
        }
        if (isnan(v) || isinf(v))
            continue;
        char out[TW_DOUBLE_CHARS];
        tw_format_double(out, v);
        assert_true(strtod(out, NULL) == v);
    }
}

static void test_process_collector(void **state)
{
    (void)state;
    tw_registry *r;
    assert_int_equal(tw_registry_new(&r), 0);
    assert_int_equal(tw_process_collector_register(r), 0);
    char *text;
    size_t len;
    assert_int_equal(tw_registry_expose(r, TW_EXPOSE_TEXT, &text, &len), 0);
    const char *names[] = {"\nprocess_cpu_seconds_total ", "\nprocess_resident_memory_bytes ",
                           "\nprocess_virtual_memory_bytes ", "\nprocess_open_fds ", "\nprocess_max_fds ",
                           "\nprocess_start_time_seconds "};
    for (size_t i = 0; i < 6; i++)
        assert_non_null(strstr(text, names[i]));
    double rss = strtod(strstr(text, names[1]) + strlen(names[1]), NULL);
    assert_true(rss > 1e5);
    free(text);
    tw_registry_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_format_exactly),
        cmocka_unit_test(test_openmetrics_format_exactly),
        cmocka_unit_test(test_created_samples_in_openmetrics_only),
        cmocka_unit_test(test_names_are_validated),
        cmocka_unit_test(test_series_limit_counts_dropped),
        cmocka_unit_test(test_same_series_same_handle_and_unregister),
        cmocka_unit_test(test_concurrent_updates_are_exact),
        cmocka_unit_test(test_negotiation),
        cmocka_unit_test(test_bucket_helpers),
        cmocka_unit_test(test_number_text_reads_back_exactly),
        cmocka_unit_test(test_process_collector),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
