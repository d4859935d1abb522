/*
 * test_remote.c: the remote-write body: protobuf bytes of a WriteRequest as
 * the wire format spells them, labels sorted with __name__, empty values
 * left out, duplicates refused, and snappy that decompresses to the same
 * bytes. (The e2e test has a real Prometheus read them.) And the answers of
 * a Prometheus HTTP API as prom_query.c parses them: labels with escapes,
 * NaN and Inf samples, scalars, the server's error, broken text.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <snappy-c.h>

#include "remote/encode.h"
#include "remote/prom_query.h"
#include "trainwatch/error.h"

static void labels_are_sorted_with_the_name_and_empty_ones_left_out(void **state)
{
    (void)state;
    tw_buffer b;
    tw_buffer_init(&b);
    tw_rw_label labels[] = {{"run", "r"}, {"empty", ""}, {"job", "j"}};
    assert_int_equal(tw_rw_encode_labels("m", labels, 3, &b), TW_OK);
    /* Label{1:"__name__",2:"m"}, Label{1:"job",2:"j"}, Label{1:"run",2:"r"}, each as TimeSeries field 1 */
    static const char want[] = "\x0a\x0d\x0a\x08__name__\x12\x01m"
                               "\x0a\x08\x0a\x03job\x12\x01j"
                               "\x0a\x08\x0a\x03run\x12\x01r";
    assert_int_equal(b.len, sizeof want - 1);
    assert_memory_equal(b.data, want, sizeof want - 1);
    tw_buffer_reset(&b);
    tw_rw_label dup[] = {{"a", "1"}, {"a", "2"}};
    assert_int_equal(tw_rw_encode_labels("m", dup, 2, &b), TW_EINVAL);
    tw_buffer_free(&b);
}

static void a_request_holds_one_series_per_sample(void **state)
{
    (void)state;
    tw_buffer b;
    tw_buffer_init(&b);
    char labels[] = "\x0a\x07\x0a\x01x\x12\x02yz";
    /* 1.5 is 0x3FF8000000000000; 1000 ms is the varint e8 07 */
    tw_rw_sample s = {labels, sizeof labels - 1, 1.5, 1000};
    tw_rw_encode_request(&s, 1, &b);
    static const char want[] = "\x0a\x17"                             /* WriteRequest.timeseries, 23 bytes */
                               "\x0a\x07\x0a\x01x\x12\x02yz"          /* the labels as given */
                               "\x12\x0c"                             /* TimeSeries.samples, 12 bytes */
                               "\x09\x00\x00\x00\x00\x00\x00\xf8\x3f" /* value, fixed64 little-endian */
                               "\x10\xe8\x07";                        /* timestamp, varint */
    assert_int_equal(b.len, sizeof want - 1);
    assert_memory_equal(b.data, want, sizeof want - 1);
    tw_buffer_free(&b);
}

static void snappy_round_trips(void **state)
{
    (void)state;
    tw_buffer raw, packed;
    tw_buffer_init(&raw);
    tw_buffer_init(&packed);
    for (int i = 0; i < 1000; i++)
        tw_buffer_puts(&raw, "trainwatch_train_loss run=demo rank=0 ");
    assert_int_equal(tw_rw_compress(&raw, &packed), TW_OK);
    assert_true(packed.len < raw.len / 10);
    size_t len = 0;
    assert_int_equal(snappy_uncompressed_length(packed.data, packed.len, &len), SNAPPY_OK);
    assert_int_equal(len, raw.len);
    char *back = malloc(len);
    assert_int_equal(snappy_uncompress(packed.data, packed.len, back, &len), SNAPPY_OK);
    assert_memory_equal(back, raw.data, raw.len);
    free(back);
    tw_buffer_free(&raw);
    tw_buffer_free(&packed);
}

/* ---- the answers of a Prometheus HTTP API (prom_query.c) ---------------- */

static void a_range_answer_gives_each_series_its_labels_and_points(void **state)
{
    (void)state;
    const char *text = "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":["
                       "{\"metric\":{\"run\":\"a\\\"b\",\"name\":\"caf\\u00e9\"},"
                       "\"values\":[[1700000000.5,\"1.5\"],[1700000001,\"NaN\"],[1700000002,\"+Inf\"]]},"
                       "{\"metric\":{},\"values\":[]}]},\"warnings\":[\"x\",{\"deep\":[1,2,{}]}]}";
    tw_prom_result r;
    char err[256];
    assert_int_equal(tw_prom_parse(text, strlen(text), &r, err, sizeof err), TW_OK);
    assert_int_equal(r.count, 2);
    assert_string_equal(tw_prom_label_value(&r.series[0], "run"), "a\"b");
    assert_string_equal(tw_prom_label_value(&r.series[0], "name"), "caf\xc3\xa9");
    assert_null(tw_prom_label_value(&r.series[0], "job"));
    assert_int_equal(r.series[0].count, 3);
    assert_true(r.series[0].t[0] == 1700000000.5 && r.series[0].v[0] == 1.5);
    assert_true(isnan(r.series[0].v[1]) && isinf(r.series[0].v[2]));
    assert_int_equal(r.series[1].count, 0);
    tw_prom_result_free(&r);
}

static void an_instant_answer_and_a_scalar(void **state)
{
    (void)state;
    const char *vector = "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":"
                         "[{\"metric\":{\"rank\":\"0\"},\"value\":[1700000000,\"42\"]}]}}";
    const char *scalar = "{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1,\"7\"]}}";
    tw_prom_result r;
    char err[256];
    assert_int_equal(tw_prom_parse(vector, strlen(vector), &r, err, sizeof err), TW_OK);
    assert_int_equal(r.count, 1);
    assert_true(r.series[0].count == 1 && r.series[0].v[0] == 42);
    tw_prom_result_free(&r);
    assert_int_equal(tw_prom_parse(scalar, strlen(scalar), &r, err, sizeof err), TW_OK);
    assert_true(r.count == 1 && r.series[0].v[0] == 7);
    tw_prom_result_free(&r);
}

static void errors_and_broken_answers_are_a_reason_and_no_result(void **state)
{
    (void)state;
    static const struct {
        const char *text, *said;
    } cases[] = {
        {"{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"parse error at char 5\"}",
         "bad_data: parse error at char 5"},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[{\"metric\":{}",
         "breaks off"},
        {"<html>502 Bad Gateway</html>", "not the API's JSON"},
        {"{\"status\":\"success\",\"data\":{}}", "no result"},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":"
         "[{\"value\":[1,\"abc\"]}]}}",
         "not a number"},
        {"{\"status\":\"success\",\"data\":{\"result\":[]}} trailing", "text after"},
        {"{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
         "too deep"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tw_prom_result r;
        char err[256] = "";
        assert_int_equal(tw_prom_parse(cases[i].text, strlen(cases[i].text), &r, err, sizeof err), TW_EHTTP);
        assert_non_null(strstr(err, cases[i].said));
        assert_int_equal(r.count, 0);
        assert_null(r.series);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(labels_are_sorted_with_the_name_and_empty_ones_left_out),
        cmocka_unit_test(a_request_holds_one_series_per_sample),
        cmocka_unit_test(snappy_round_trips),
        cmocka_unit_test(a_range_answer_gives_each_series_its_labels_and_points),
        cmocka_unit_test(an_instant_answer_and_a_scalar),
        cmocka_unit_test(errors_and_broken_answers_are_a_reason_and_no_result),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
