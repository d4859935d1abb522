/*
 * test_trace.c: the pieces of `trainwatch trace`: the tokenizer across
 * chunk boundaries, the interval accounting, the reader's leniency, the
 * Paddle suffixes and summaries.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
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

/* Kineto's order: every host span (steps, DataLoader) first, then the GPU
 * work. More DataLoader spans than a set holds must wait for the kernels,
 * not be flushed ahead of them (which made every kernel late). */
static void test_host_spans_first_wait_for_the_gpu(void **state)
{
    (void)state;
    tw_timeline t;
    tw_timeline_init(&t, 10);
    const int steps = 40000; /* > TW_TIMELINE_CAP DataLoader spans */
    for (int i = 0; i < steps; i++) {
        tw_timeline_add_step(&t, i, i * 100.0, i * 100.0 + 100);
        tw_timeline_add(&t, TW_SET_DATA, i * 100.0, i * 100.0 + 30);
    }
    for (int i = 0; i < steps; i++)
        tw_timeline_add(&t, TW_SET_COMPUTE, i * 100.0 + 50, i * 100.0 + 80);
    tw_timeline_finish(&t);
    tw_trace_split s;
    tw_timeline_total(&t, &s);
    assert_int_equal(t.late, 0);
    assert_int_equal(t.forced, 0);
    assert_true(t.flushes > 0);
    assert_true(fabs(s.compute - steps * 30.0) < 1e-6);
    assert_true(fabs(s.idle_data - steps * 30.0) < 1e-6);
    assert_true(fabs(s.idle - steps * 70.0) < 1e-6);
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

static bool skip_text(const char *text, bool drip_it, const char **error)
{
    drip d = {text, strlen(text), 0};
    tw_jstream s;
    assert_int_equal(tw_jstream_init(&s, drip_it ? drip_read : NULL, &d), 0);
    if (!drip_it) { /* the whole text in one read */
        memcpy(s.buf, text, strlen(text));
        s.len = strlen(text);
        s.eof = true;
    }
    bool ok = tw_jstream_skip(&s, tw_jstream_next(&s));
    if (ok) /* what follows the value is still there */
        ok = tw_jstream_next(&s) == TW_JT_COMMA;
    *error = s.error;
    tw_jstream_free(&s);
    return ok;
}

static void test_skip_passes_containers_byte_by_byte(void **state)
{
    (void)state;
    const char *error;
    static const char *good[] = {
        "{\"a\": [1, {\"b\": \"}]\\\"\\\\\"}, -2.5e3, true, null, NaN], \"c\": {}},",
        "[[[[[[[[]]]]]]]],",
        "\"just a string\",",
        "12,",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        assert_true(skip_text(good[i], false, &error));
        assert_true(skip_text(good[i], true, &error)); /* every byte its own read */
    }
    static const struct {
        const char *text, *error;
    } bad[] = {
        {"{\"a\": [1, 2}},", "unbalanced brackets"},
        {"[{]}", "unbalanced brackets"},
        {"{\"a\": \"open", "unterminated string"},
        {"[1, 2", "unexpected end of input"},
        {"[1, #]", "not JSON"},
        {"}", "unbalanced brackets"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int drip_it = 0; drip_it < 2; drip_it++) {
            assert_false(skip_text(bad[i].text, drip_it, &error));
            assert_string_equal(error, bad[i].error);
        }
    }
}

static void test_begin_end_pairs_and_bounds(void **state)
{
    (void)state;
    /* a kernel as B/E on stream 7, then TW_PAIR_DEPTH + 1 nested Bs on one
     * thread: the one past the bound and the Es left over are unpaired */
    char doc[16384];
    size_t n = (size_t)snprintf(doc, sizeof doc,
                                "[{\"ph\":\"B\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":10},"
                                "{\"ph\":\"E\",\"pid\":0,\"tid\":7,\"ts\":35}");
    for (int i = 0; i <= TW_PAIR_DEPTH; i++)
        n += (size_t)snprintf(doc + n, sizeof doc - n,
                              ",{\"ph\":\"B\",\"cat\":\"cpu_op\",\"name\":\"op\",\"pid\":1,\"tid\":1,\"ts\":%d}", i);
    for (int i = 0; i <= TW_PAIR_DEPTH + 1; i++)
        n += (size_t)snprintf(doc + n, sizeof doc - n, ",{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":%d}", 1000 - i);
    snprintf(doc + n, sizeof doc - n, "]");
    tw_trace *t;
    assert_int_equal(tw_trace_new(&t, NULL), 0);
    assert_int_equal(tw_trace_add_buffer(t, "be.json", doc, strlen(doc), -1), 0);
    const tw_trace_rank *r = tw_trace_rank_at(t, 0);
    assert_string_equal(r->error, "");
    assert_int_equal(r->kernels, 1);
    assert_true(r->kernel_time == 25);
    assert_int_equal(r->stream_count, 1);
    assert_int_equal(r->streams[0].stream, 7);
    assert_int_equal(r->top_ops[0].count, TW_PAIR_DEPTH);
    assert_int_equal(r->skipped, 3); /* the B past the bound, and two Es with nothing open */
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
        cmocka_unit_test(test_skip_passes_containers_byte_by_byte),
        cmocka_unit_test(test_begin_end_pairs_and_bounds),
        cmocka_unit_test(test_host_spans_first_wait_for_the_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
