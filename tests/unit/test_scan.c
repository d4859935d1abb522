/*
 * test_scan.c: the lexical helpers every format relies on: numbers,
 * timestamps, durations, the key/value tokenizer and the synonym table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "parse/scan.h"

static double num(const char *s, size_t *used)
{
    double v = -12345;
    *used = tw_scan_number(s, s + strlen(s), &v);
    return v;
}

static void test_number_plain_and_exponent(void **state)
{
    (void)state;
    size_t n;
    assert_true(num("0.5420 - acc", &n) == 0.5420);
    assert_int_equal(n, 6);
    assert_true(num("1.500E-04 |", &n) == 1.5e-4);
    assert_true(num("-3", &n) == -3);
    assert_true(num("4e-08,", &n) == 4e-08);
    assert_true(num("626.317383", &n) == 626.317383);
}

static void test_number_units_stop_the_number(void **state)
{
    (void)state;
    size_t n;
    assert_true(num("0.61280s,", &n) == 0.6128);
    assert_int_equal(n, 7);
    assert_true(num("23ms/step", &n) == 23);
    assert_int_equal(n, 2);
}

static void test_number_nan_and_inf(void **state)
{
    (void)state;
    size_t n;
    assert_true(isnan(num("nan,", &n)));
    assert_int_equal(n, 3);
    assert_true(isnan(num("-nan", &n)));
    assert_true(isinf(num("inf", &n)) && num("inf", &n) > 0);
    assert_true(isinf(num("-Infinity", &n)) && num("-Infinity", &n) < 0);
    assert_true(isnan(num("NaN", &n)));
    num("info", &n);
    assert_int_equal(n, 0); /* a word, not a number */
    num("nanoseconds", &n);
    assert_int_equal(n, 0);
}

static void test_number_thousands_groups(void **state)
{
    (void)state;
    size_t n;
    assert_true(num("105,488", &n) == 105488);
    assert_true(num("151,879,680 params", &n) == 151879680);
    assert_true(num("0.5, lr", &n) == 0.5);
    assert_true(num("12,34", &n) == 12); /* not a thousands group */
    assert_true(num("1,234.5", &n) == 1234.5);
}

static void test_number_long_mantissa_uses_exact_path(void **state)
{
    (void)state;
    size_t n;
    assert_true(num("1.2721305766223456e-17", &n) == 1.2721305766223456e-17);
    assert_true(num("0.010690423162583519", &n) == 0.010690423162583519);
    assert_true(num("12345678901234567890123", &n) == 12345678901234567890123.0);
}

static double ts(const char *s, size_t *used)
{
    double t = 0;
    *used = tw_scan_timestamp(s, strlen(s), &t);
    return t;
}

static void test_timestamps_of_each_layout(void **state)
{
    (void)state;
    size_t n;
    double base = tw_civil_seconds(2024, 3, 9, 15, 15, 33);
    assert_true(ts("[2024/03/09 15:15:33] ppocr INFO: x", &n) == base);
    assert_int_equal(n, strlen("[2024/03/09 15:15:33] "));
    assert_true(ts("2024-03-09 15:15:33 [INFO]", &n) == base);
    assert_true(fabs(ts("[2024-03-09 15:15:33,568] [ INFO]", &n) - (base + 0.568)) < 1e-6);
    assert_true(ts("03/09/2024 15:15:33 - INFO - x", &n) == base);
    assert_true(ts("[03/09 15:15:33] x", &n) == tw_civil_seconds(1970, 3, 9, 15, 15, 33));
    assert_true(fabs(ts("I0309 15:15:33.500000  4094 a.cc:1] x", &n) - (tw_civil_seconds(1970, 3, 9, 15, 15, 33) + 0.5)) < 1e-6);
    assert_true(ts("[01/01 12:00:00 d2.utils.events]:  eta: 0:10:00", &n) == tw_civil_seconds(1970, 1, 1, 12, 0, 0));
    assert_int_equal(n, strlen("[01/01 12:00:00 d2.utils.events]:  "));
}

static void test_timestamps_reject_non_times(void **state)
{
    (void)state;
    size_t n;
    ts("step 10/938 - loss", &n);
    assert_int_equal(n, 0);
    ts("[2024/13/09 15:15:33]", &n); /* month 13 */
    assert_int_equal(n, 0);
    ts("2024-03-09 25:15:33", &n);
    assert_int_equal(n, 0);
    ts("", &n);
    assert_int_equal(n, 0);
}

static double dur(const char *s)
{
    double v = -1;
    if (!tw_scan_duration(s, s + strlen(s), &v))
        return -1;
    return v;
}

static void test_durations(void **state)
{
    (void)state;
    assert_true(dur("3 days, 10:51:17") == 3 * 86400 + 10 * 3600 + 51 * 60 + 17);
    assert_true(dur("1 day, 0:00:01") == 86401);
    assert_true(dur("13:53:14") == 13 * 3600 + 53 * 60 + 14);
    assert_true(dur("1:23") == 83);
    assert_true(dur("35s") == 35);
    assert_true(dur("1.5s") == 1.5);
    assert_true(dur("2m") == 120);
    assert_true(dur("x") == -1);
}

typedef struct collected {
    int n;
    char keys[16][48];
    double values[16];
    double totals[16];
    char units[16][16];
} collected;

static bool collect(void *arg, const tw_kv *kv)
{
    collected *c = arg;
    if (c->n >= 16)
        return false;
    snprintf(c->keys[c->n], 48, "%.*s", (int)kv->key_len, kv->key);
    c->values[c->n] = kv->number;
    c->totals[c->n] = kv->has_total ? kv->total : -1;
    snprintf(c->units[c->n], 16, "%.*s", (int)kv->unit_len, kv->unit ? kv->unit : "");
    c->n++;
    return true;
}

static void test_kv_colon_pairs_with_units_and_totals(void **state)
{
    (void)state;
    collected c = {0};
    const char *s = "epoch: [3/500], global_step: 500, lr: 0.005000, avg_reader_cost: 1.81036 s, ips: 7.86 samples/s, eta: 2 days, 20:01:28";
    tw_kv_scan(s, strlen(s), collect, &c);
    assert_int_equal(c.n, 6);
    assert_string_equal(c.keys[0], "epoch");
    assert_true(c.values[0] == 3 && c.totals[0] == 500);
    assert_string_equal(c.keys[3], "avg_reader_cost");
    assert_string_equal(c.units[3], "s");
    assert_string_equal(c.units[4], "samples/s");
    assert_string_equal(c.keys[5], "eta");
}

static void test_kv_equals_quotes_and_brackets(void **state)
{
    (void)state;
    collected c = {0};
    const char *s = "{'loss': 0.1856, \"learning_rate\": 4.5e-05, step=[12], lr(PiecewiseDecay): 0.001}";
    tw_kv_scan(s, strlen(s), collect, &c);
    assert_int_equal(c.n, 4);
    assert_string_equal(c.keys[0], "loss");
    assert_string_equal(c.keys[1], "learning_rate");
    assert_string_equal(c.keys[2], "step");
    assert_true(c.values[2] == 12);
    assert_string_equal(c.keys[3], "lr(PiecewiseDecay)");
}

static void test_kv_skips_non_pairs(void **state)
{
    (void)state;
    collected c = {0};
    const char *s = "paddle::framework::x at 12:30:45 http://127.0.0.1:8080 Top_1 (Non-reduced): 0.3 name: bert";
    tw_kv_scan(s, strlen(s), collect, &c);
    assert_int_equal(c.n, 0);
}

static void test_fields_map_synonyms_and_units(void **state)
{
    (void)state;
    tw_record r;
    tw_record_init(&r);
    const char *s = "Epoch: [1], iter: 20/500, loss: 2.0859, lr(Cosine): 0.009657, batch_cost: 534ms, "
                    "data_cost: 0.07273, ips: 3.7425 images/s, max_mem_reserved: 11326 MB, loss_cls: 0.5, top1: 0.9";
    tw_fields_scan(&r, s, strlen(s));
    assert_true(tw_has(&r, TW_F_LOSS) && r.loss == 2.0859);
    assert_true(tw_has(&r, TW_F_LR) && r.lr == 0.009657);
    assert_true(fabs(r.batch_time - 0.534) < 1e-12);
    assert_true(r.data_time == 0.07273);
    assert_true(r.samples_per_sec == 3.7425);
    assert_true(r.mem_bytes == 11326.0 * 1024 * 1024);
    assert_int_equal(r.epoch, 1);
    assert_int_equal(r.step, 20);
    assert_int_equal(r.step_total, 500);
    assert_true(tw_record_metric(&r, "loss_cls") == 0.5);
    assert_true(tw_record_metric(&r, "top1") == 0.9);
    assert_true(tw_record_is_step_like(&r));
}

static void test_fields_first_synonym_wins_but_loss_overrides(void **state)
{
    (void)state;
    tw_record r;
    tw_record_init(&r);
    const char *s = "batch_loss: 0.5, avg_loss: 0.9, step: 3";
    tw_fields_scan(&r, s, strlen(s));
    assert_true(r.loss == 0.5);
    tw_record_init(&r);
    const char *t = "total_loss: 0.5, loss: 0.7, iter: 3";
    tw_fields_scan(&r, t, strlen(t));
    assert_true(r.loss == 0.7);
}

static void test_epoch_alone_is_not_a_step(void **state)
{
    (void)state;
    tw_record r;
    tw_record_init(&r);
    const char *s = "Epoch: 3 done! Training loss: 0.02";
    tw_fields_scan(&r, s, strlen(s));
    assert_false(tw_record_is_step_like(&r));
}

/* tw_find_n against glibc's memmem on every offset, length and needle
 * length around the sixteen-byte steps, matches placed at the very end. */
static void test_find_agrees_with_memmem(void **state)
{
    (void)state;
    char text[80];
    const char *needles[] = {"ab", "aab", "epoch: [", "abcabcabcabcabcabcab", "b"};
    unsigned seed = 7;
    for (int round = 0; round < 200; round++) {
        for (size_t i = 0; i < sizeof text; i++) {
            seed = seed * 1103515245u + 12345u;
            text[i] = "abc :[ehopx"[(seed >> 16) % 11];
        }
        for (size_t k = 0; k < sizeof needles / sizeof needles[0]; k++) {
            size_t n = strlen(needles[k]);
            if (round % 3 == 0 && n <= sizeof text)
                memcpy(text + sizeof text - n, needles[k], n); /* a match that ends the text */
            for (size_t len = 0; len <= sizeof text; len++) {
                for (size_t off = 0; off < 3 && off <= len; off++) {
                    const char *want = memmem(text + off, len - off, needles[k], n);
                    assert_ptr_equal(tw_find_n(text + off, len - off, needles[k], n), want);
                }
            }
        }
    }
    assert_null(tw_find("abc", 3, ""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_agrees_with_memmem),
        cmocka_unit_test(test_number_plain_and_exponent),
        cmocka_unit_test(test_number_units_stop_the_number),
        cmocka_unit_test(test_number_nan_and_inf),
        cmocka_unit_test(test_number_thousands_groups),
        cmocka_unit_test(test_number_long_mantissa_uses_exact_path),
        cmocka_unit_test(test_timestamps_of_each_layout),
        cmocka_unit_test(test_timestamps_reject_non_times),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_kv_colon_pairs_with_units_and_totals),
        cmocka_unit_test(test_kv_equals_quotes_and_brackets),
        cmocka_unit_test(test_kv_skips_non_pairs),
        cmocka_unit_test(test_fields_map_synonyms_and_units),
        cmocka_unit_test(test_fields_first_synonym_wins_but_loss_overrides),
        cmocka_unit_test(test_epoch_alone_is_not_a_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
