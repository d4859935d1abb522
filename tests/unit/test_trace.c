/*
 * test_trace.c: the pieces of `trainwatch trace`: the tokenizer across
 * chunk boundaries, the interval accounting, the reader's leniency, the
 * Paddle suffixes and summaries.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "trace/events.h"
#include "trace/jstream.h"
#include "trace/timeline.h"
#include "trainwatch/trace.h"

typedef struct drip {
    const char *s;
    size_t len, pos;
} drip;

/* One byte per read: every token straddles a chunk boundary. */
static long drip_read(void *arg, char *buf, size_t cap)
{
    drip *d = arg;
    (void)cap;
    if (d->pos == d->len)
        return 0;
    buf[0] = d->s[d->pos++];
    return 1;
}

static void test_tokens_survive_one_byte_chunks(void **state)
{
    (void)state;
    const char *text = "{\"a\\u00e9\\n\": [12.5, -3, 1e3, NaN, true, null, \"x\\\"y\"]}";
    drip d = {text, strlen(text), 0};
    tw_jstream s;
    assert_int_equal(tw_jstream_init(&s, drip_read, &d), 0);
    assert_int_equal(tw_jstream_next(&s), TW_JT_OBJECT);
    assert_int_equal(tw_jstream_next(&s), TW_JT_STRING);
    assert_string_equal(s.str, "a\xc3\xa9\n");
    assert_int_equal(tw_jstream_next(&s), TW_JT_COLON);
    assert_int_equal(tw_jstream_next(&s), TW_JT_ARRAY);
    double want[] = {12.5, -3, 1000};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tw_jstream_next(&s), TW_JT_NUMBER);
        assert_true(s.num == want[i]);
        assert_int_equal(tw_jstream_next(&s), TW_JT_COMMA);
    }
    assert_int_equal(tw_jstream_next(&s), TW_JT_NUMBER);
    assert_true(isnan(s.num));
    assert_int_equal(tw_jstream_next(&s), TW_JT_COMMA);
    assert_int_equal(tw_jstream_next(&s), TW_JT_TRUE);
    assert_int_equal(tw_jstream_next(&s), TW_JT_COMMA);
    assert_int_equal(tw_jstream_next(&s), TW_JT_NULL);
    assert_int_equal(tw_jstream_next(&s), TW_JT_COMMA);
    assert_int_equal(tw_jstream_next(&s), TW_JT_STRING);
    assert_string_equal(s.str, "x\"y");
    assert_int_equal(tw_jstream_next(&s), TW_JT_ARRAY_END);
    assert_int_equal(tw_jstream_next(&s), TW_JT_OBJECT_END);
    assert_int_equal(tw_jstream_next(&s), TW_JT_EOF);
    tw_jstream_free(&s);
}

static void test_long_string_is_cut_and_counted(void **state)
{
    (void)state;
    static char text[5000];
    text[0] = '"';
    memset(text + 1, 'a', 4000);
    strcpy(text + 4001, "\" 7");
    drip d = {text, strlen(text), 0};
    tw_jstream s;
    assert_int_equal(tw_jstream_init(&s, drip_read, &d), 0);
    assert_int_equal(tw_jstream_next(&s), TW_JT_STRING);
    assert_int_equal(s.str_len, TW_JSTR_MAX);
    assert_int_equal(s.strings_cut, 1);
    assert_int_equal(tw_jstream_next(&s), TW_JT_NUMBER);
    assert_true(s.num == 7);
    tw_jstream_free(&s);
}

static void test_split_counts_overlap_once(void **state)
{
    (void)state;
    tw_timeline t;
    tw_timeline_init(&t, 10);
    tw_timeline_add_step(&t, 1, 0, 100);
    tw_timeline_add(&t, TW_SET_COMPUTE, 10, 30);
    tw_timeline_add(&t, TW_SET_COMPUTE, 20, 40); /* overlaps: 10..40 once */
    tw_timeline_add(&t, TW_SET_COMM, 35, 60);    /* 35..40 under compute */
    tw_timeline_add(&t, TW_SET_MEMCPY, 65, 70);
    tw_timeline_add(&t, TW_SET_DATA, 70, 90);    /* idle 70..90 inside a DataLoader span */
    tw_timeline_add(&t, TW_SET_COMPUTE, 95, 98); /* 70..95 is one 25 us gap: not a kernel gap */
    tw_timeline_finish(&t);
    tw_trace_split s;
    tw_timeline_total(&t, &s);
    assert_true(s.wall == 100);
    assert_true(s.compute == 33);
    assert_true(s.comm == 20);
    assert_true(s.memcpy == 5);
    assert_true(s.idle == 42);
    assert_true(s.idle_data == 20);
    assert_true(s.idle_gap == 5);   /* 60..65 */
    assert_true(s.idle_host == 17); /* 0..10, 90..95 (the rest of a 25 us gap), 98..100 */
    assert_true(s.comm_total == 25 && s.comm_overlap == 5);
    tw_timeline_free(&t);
}

static void test_flush_keeps_totals_exact_in_time_order(void **state)
{
    (void)state;
    tw_timeline t;
    tw_timeline_init(&t, 10);
    for (int i = 0; i < 10; i++)
        tw_timeline_add_step(&t, i, i * 1e6, (i + 1) * 1e6);
    for (int k = 0; k < 200000; k++) /* 200000 kernels of 20 us every 50 us: many flushes */
        tw_timeline_add(&t, TW_SET_COMPUTE, k * 50.0, k * 50.0 + 20);
    assert_true(t.watermark > 0); /* flushed */
    assert_true(t.sets[TW_SET_COMPUTE].n <= TW_TIMELINE_CAP + 1);
    tw_timeline_finish(&t);
    tw_trace_split s;
    tw_timeline_total(&t, &s);
    assert_true(s.wall == 1e7);
    assert_true(fabs(s.compute - 200000 * 20.0) < 1e-6);
    assert_int_equal(t.late, 0);
    tw_timeline_free(&t);
}

static void test_paddle_suffix_and_steps(void **state)
{
    (void)state;
    tw_trace_event e = {.ph = 'X'};
    strcpy(e.name, "ProfileStep#12[35.281 ms]");
    e.name_len = strlen(e.name);
    strcpy(e.cat, "ProfileStep");
    tw_trace_classify(&e);
    assert_string_equal(e.name, "ProfileStep#12");
    assert_int_equal(e.kind, TW_TK_STEP);
    assert_int_equal(tw_trace_step_id(e.name), 12);
    strcpy(e.name, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)[12.5 us]");
    e.name_len = strlen(e.name);
    strcpy(e.cat, "Kernel");
    tw_trace_classify(&e);
    assert_int_equal(e.kind, TW_TK_COMM);
    strcpy(e.name, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
    e.name_len = strlen(e.name);
    strcpy(e.cat, "Operator");
    tw_trace_classify(&e);
    assert_int_equal(e.kind, TW_TK_DATALOADER);
    assert_int_equal(tw_trace_step_id("ProfilerStep#"), -1);
}

static void test_trailing_sentinel_and_comma(void **state)
{
    (void)state;
    tw_trace *t;
    assert_int_equal(tw_trace_new(&t, NULL), 0);
    const char *doc = "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"Kernel\",\"name\":\"k[0.005 ms]\",\"pid\":0,"
                      "\"tid\":\"7\",\"ts\":1,\"dur\":5},{},],\"distributedInfo\":{\"rank\":3}}";
    assert_int_equal(tw_trace_add_buffer(t, "x.json", doc, strlen(doc), -1), 0);
    const tw_trace_rank *r = tw_trace_rank_at(t, 0);
    assert_string_equal(r->error, "");
    assert_int_equal(r->rank, 3);
    assert_int_equal(r->kernels, 1);
    assert_string_equal(r->top_kernels[0].name, "k");
    tw_trace_free(t);
}

static void test_summary_text(void **state)
{
    (void)state;
    tw_trace *t;
    assert_int_equal(tw_trace_new(&t, NULL), 0);
    const char *text = "=====Perf Summary=====\nReader Ratio: 53.514%\n|       ips       |     39.13907    |\n"
                       "  ProfileStep      11      294.53 / 26.78\n    Dataloader     11      141.49 / 12.86\n";
    assert_int_equal(tw_trace_add_buffer(t, "s.txt", text, strlen(text), -1), 0);
    assert_int_equal(tw_trace_finish(t), 0);
    const tw_trace_rank *r = tw_trace_rank_at(t, 0);
    assert_true(fabs(r->reader_ratio - 0.53514) < 1e-9);
    assert_true(fabs(r->ips - 39.13907) < 1e-9);
    assert_true(fabs(r->dataloader_ratio - 141.49 / 294.53) < 1e-9);
    assert_int_equal(tw_trace_finding_count(t), 1);
    assert_string_equal(tw_trace_finding_at(t, 0)->rule, "data_loading_bound");
    tw_trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens_survive_one_byte_chunks),
        cmocka_unit_test(test_long_string_is_cut_and_counted),
        cmocka_unit_test(test_split_counts_overlap_once),
        cmocka_unit_test(test_flush_keeps_totals_exact_in_time_order),
        cmocka_unit_test(test_paddle_suffix_and_steps),
        cmocka_unit_test(test_trailing_sentinel_and_comma),
        cmocka_unit_test(test_summary_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
