/*
 * test_remote.c: the remote-write body: protobuf bytes of a WriteRequest as
 * the wire format spells them, labels sorted with __name__, empty values
 * left out, duplicates refused, and snappy that decompresses to the same
 * bytes. (The e2e test has a real Prometheus read them.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <snappy-c.h>

#include "remote/encode.h"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(labels_are_sorted_with_the_name_and_empty_ones_left_out),
        cmocka_unit_test(a_request_holds_one_series_per_sample),
        cmocka_unit_test(snappy_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
