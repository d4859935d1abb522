/*
 * test_trace.c: the pieces of `trainwatch trace`: the tokenizer across
 * chunk boundaries, the interval accounting, the reader's leniency, the
 * Paddle suffixes and summaries, several threads reading as one.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "../trace_paths.h"
#include "trace/events.h"
#include "trace/jstream.h"
#include "trace/timeline.h"
#include "trainwatch/trace.h"

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
    e.name = e.name_buf;
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

/* The kinds' memo gives every name the kind classify gives it: names of
 * one slot (more names than slots), names longer than the memo keeps,
 * Paddle's suffixes (the hash taken before the cut is dropped), and the
 * same name under cats that classify it differently. */
static void test_kind_memo_agrees_with_classify(void **state)
{
    (void)state;
    static const struct {
        const char *cat, *name;
    } seed[] = {
        {"kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"},
        {"kernel", "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float> >(int)"},
        {"kernel", "Memcpy HtoD (Pageable -> Device)"},
        {"Kernel", "c_allreduce_sum[12.5 us]"},
        {"cuda_runtime", "cudaStreamSynchronize"},
        {"cuda_runtime", "cudaLaunchKernel"},
        {"cpu_op", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"},
        {"cpu_op", "ProfilerStep#7"},
        {"Operator", "ProfileStep#12[35.281 ms]"},
        {"user_annotation", "ProfilerStep#7"},
        {"cpu_op", "aten::conv2d"},
        {"", "aten::conv2d"},
    };
    const size_t seeds = sizeof seed / sizeof seed[0];
    static const char tail[] = "x1234567890123456789012345678901234567890123456789012345678901234567890123456789"
                               "01234567890123456789012345678901234567890123456789012345678901234567890123456789"
                               "0123456789012345678901234567890123456789012345678901234567890123456789";
    tw_trace_kind_memo *m = tw_trace_kind_memo_new();
    assert_non_null(m);
    static char name[2048];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 2000; i++) {
            size_t k = (size_t)i % seeds;
            int len = snprintf(name, sizeof name, "%s", seed[k].name);
            if ((size_t)i >= seeds) /* a variant: more names than slots, some longer than the memo keeps */
                len = snprintf(name, sizeof name, "%s%s%d%s", i % 7 == 0 ? "nccl" : "", seed[k].name, i,
                               i % 5 == 0 ? tail : "");
            tw_trace_event a = {.ph = 'X'}, b = {.ph = 'X'};
            a.name = a.name_buf, b.name = b.name_buf;
            memcpy(a.name_buf, name, (size_t)len + 1);
            memcpy(b.name_buf, name, (size_t)len + 1);
            a.name_len = b.name_len = (size_t)len;
            b.name_hash = tw_name_hash(name, (size_t)len); /* as the fast path hands it over */
            b.name_hashed = round == 1;
            strcpy(a.cat, seed[k].cat);
            strcpy(b.cat, seed[k].cat);
            tw_trace_classify(&a);
            tw_trace_classify_memo(m, &b);
            if (a.kind != b.kind || a.name_len != b.name_len || strcmp(a.name, b.name) != 0)
                fail_msg("%s / %s: kind %d, memo %d", seed[k].cat, name, a.kind, b.kind);
            assert_int_equal(tw_trace_event_hash(&b), tw_name_hash(b.name, b.name_len));
        }
    }
    tw_trace_kind_memo_free(m);
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

/* The correlation and External id caches start empty (zeroed pages, so a
 * small trace touches only what it uses): id 0 must find nothing until an
 * event with id 0 fills its slot, and a slot holds one id (65536 shares
 * 0's slot). Seen failing with empty slots taken for
 * id 0 (the kernel given the operator of row 0 as its issuer). */
static void test_empty_cache_slots_match_nothing(void **state)
{
    (void)state;
    const char *doc = "[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,\"ts\":1,"
                      "\"dur\":50,\"args\":{\"External id\":5}},"
                      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"orphan\",\"pid\":0,\"tid\":7,\"ts\":100,"
                      "\"dur\":5,\"args\":{\"External id\":0,\"correlation\":65536,\"stream\":7}},"
                      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::add\",\"pid\":1,\"tid\":1,\"ts\":200,"
                      "\"dur\":50,\"args\":{\"External id\":0}},"
                      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,"
                      "\"ts\":210,\"dur\":5,\"args\":{\"External id\":0,\"correlation\":0}},"
                      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"launched\",\"pid\":0,\"tid\":7,\"ts\":230,"
                      "\"dur\":5,\"args\":{\"External id\":0,\"correlation\":0,\"stream\":7}}]";
    tw_trace *t;
    assert_int_equal(tw_trace_new(&t, NULL), 0);
    assert_int_equal(tw_trace_add_buffer(t, "ids.json", doc, strlen(doc), -1), 0);
    assert_int_equal(tw_trace_finish(t), 0);
    const tw_trace_rank *r = tw_trace_rank_at(t, 0);
    assert_string_equal(r->error, "");
    assert_int_equal(r->kernels, 2);
    assert_int_equal(r->launches, 1); /* the second kernel and its call only */
    for (int i = 0; i < 2; i++) {
        const tw_trace_stat *k = &r->top_kernels[i];
        if (strcmp(k->name, "orphan") == 0)
            assert_string_equal(k->issuer, "");
        else
            assert_string_equal(k->issuer, "aten::add");
    }
    tw_trace_free(t);
}

static bool skip_text(const char *text, bool drip_it, const char **error)
{
    drip d = {text, strlen(text), 0};
    tw_jstream s;
    assert_int_equal(tw_jstream_init(&s, drip_it ? drip_read : NULL, &d), 0);
    if (!drip_it) { /* the whole text in one read */
        memcpy(s.own, text, strlen(text));
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

/* ---- the fast path against the token path ------------------------------ */

/* Reads doc whole (every event lies in the buffer: the fast path) and one
 * byte per read (no event ever does: the token path only); both must hand
 * over the same events and end the same way (trace_paths.h). */
static void read_both_ways(const char *doc, size_t len)
{
    const char *why = paths_differ(doc, len);
    if (why)
        fail_msg("%.80s: %s", doc, why);
}

/* Events read by matching the shape learned from an earlier event of
 * their name (or ph) come to what the token path reads: numbers that
 * change, lanes that change, a member more or less, values of another
 * kind where a number was, one value at a time (same reading what
 * varied), objects and arrays passed whatever they hold
 * (or not: another kind, too deep, not JSON), thread ids as strings, cats
 * and phs after the name, duplicates. */
static void test_shapes_read_as_the_token_path(void **state)
{
    (void)state;
#define KERNEL(ts, pid, tid, stream, extra)                                                                      \
    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k<1>\", \"pid\": " pid ", \"tid\": " tid ", \"ts\": " ts \
    ", \"dur\": 2.5, \"args\": {\"External id\": 3, \"queued\": 0, \"device\": 0, \"stream\": " stream        \
    ", \"correlation\": 9" extra ", \"grid\": [1, 1, 1]}}"
#define GRID(ts, grid)                                                                                           \
    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k<2>\", \"pid\": 0, \"tid\": 7, \"ts\": " ts                    \
    ", \"dur\": 1, \"args\": {\"External id\": 3, \"grid\": " grid ", \"block\": [128, 1, 1], \"correlation\": 9}}"
    static const char *docs[] = {
        /* the same kernel again and again: its numbers, then its lane, then its members change */
        "[" KERNEL("1", "0", "7", "7", "") "," KERNEL("2.25", "0", "7", "7", "") "," KERNEL("3", "1", "7", "7", "") ","
        KERNEL("4", "1", "8", "9", "") "," KERNEL("5", "1", "8", "9", ", \"bytes\": 64") "," KERNEL("-0", "1", "8", "9", "")
        "," KERNEL("1e3", "\"2 (Python)\"", "8", "\"stream 9\"", "") "," KERNEL("7", "1", "8", "9", ", \"x\": \"y\"") ","
        KERNEL("8", "1", "8", "9", ", \"x\": \"y\"") "," KERNEL("9", "1", "8", "9", ", \"x\": -1e-3") "]",
        /* a number where the shape has one, of every other kind */
        "[" KERNEL("1", "0", "7", "7", ", \"q\": 1") "," KERNEL("2", "0", "7", "7", ", \"q\": [1]") ","
        KERNEL("3", "0", "7", "7", ", \"q\": 1") "," KERNEL("4", "0", "7", "7", ", \"q\": \"1\"") ","
        KERNEL("5", "0", "7", "7", ", \"q\": 1") "," KERNEL("6", "0", "7", "7", ", \"q\": -Infinity") ","
        KERNEL("7", "0", "7", "7", ", \"q\": 1") "," KERNEL("8", "0", "7", "7", ", \"q\": 1.5.2") "]",
        "[" KERNEL("1", "0", "7", "7", "") "," KERNEL("NaN", "0", "7", "7", "") "]",
        "[" KERNEL("1", "0", "7", "7", "") "," KERNEL("2", "0", "7", "-", "") "]",
        /* Paddle's order: the ph and cat after the name */
        "[{\"name\": \"conv2d\", \"ph\": \"X\", \"cat\": \"Operator\", \"pid\": 1, \"tid\": \"7\", \"ts\": 1, \"dur\": 2},"
        "{\"name\": \"conv2d\", \"ph\": \"X\", \"cat\": \"Operator\", \"pid\": 1, \"tid\": \"7\", \"ts\": 3, \"dur\": 2},"
        "{\"name\": \"conv2d\", \"ph\": \"B\", \"cat\": \"Operator\", \"pid\": 1, \"tid\": \"7\", \"ts\": 5, \"dur\": 2},"
        "{\"name\": \"conv2d\", \"ph\": \"X\", \"cat\": \"Kernel\", \"pid\": 1, \"tid\": \"8\", \"ts\": 6, \"dur\": 2},"
        "{\"name\": \"conv2d\", \"ph\": \"X\", \"cat\": \"Kernel\", \"pid\": 1, \"tid\": \"8\", \"ts\": 7, \"dur\": 2},"
        "{\"name\": \"conv2d\", \"ph\": \"s\", \"cat\": \"Kernel\", \"pid\": 1, \"tid\": \"8\", \"ts\": 8, \"dur\": 2}]",
        /* a lane's key twice: the last one counts */
        "[{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"a\", \"pid\": 1, \"ts\": 1, \"pid\": 2, \"dur\": 1},"
        "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"a\", \"pid\": 1, \"ts\": 2, \"pid\": 3, \"dur\": 1},"
        "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"a\", \"pid\": 1, \"ts\": 3, \"pid\": 3, \"dur\": 1}]",
        /* flows again and again, then a string, an array, a second ph where a number was */
        "[{\"ph\": \"s\", \"id\": 1, \"pid\": 2, \"tid\": 3, \"ts\": 4, \"cat\": \"ac2g\", \"name\": \"ac2g\"},"
        "{\"ph\": \"s\", \"id\": 11, \"pid\": 2, \"tid\": 3, \"ts\": 4.5, \"cat\": \"ac2g\", \"name\": \"ac2g\"},"
        "{\"ph\": \"s\", \"id\": 12, \"pid\": 2, \"tid\": 3, \"ts\": \"4\", \"cat\": \"ac2g\", \"name\": \"ac2g\"},"
        "{\"ph\": \"s\", \"id\": 13, \"pid\": 2, \"tid\": 3, \"ts\": [4], \"cat\": \"ac2g\", \"name\": \"ac2g\"},"
        "{\"ph\": \"s\", \"id\": 16, \"pid\": 2, \"tid\": 3, \"ts\": {\"t\": [5]}, \"cat\": \"ac2g\", \"name\": \"ac2g\"},"
        "{\"ph\": \"s\", \"id\": 17, \"pid\": 2, \"tid\": 3, \"ts\": \"6\", \"cat\": \"ac2g\", \"name\": \"ac2g\"},"
        "{\"ph\": \"s\", \"id\": 18, \"pid\": 2, \"tid\": 3, \"ts\": [7], \"cat\": \"ac2g\", \"name\": \"ac2g\"},"
        "{\"ph\": \"s\", \"id\": 14, \"pid\": 2, \"tid\": 3, \"ts\": 4, \"cat\": \"ac2g\", \"name\": \"other\"},"
        "{\"ph\": \"s\", \"id\": 15, \"pid\": 2, \"tid\": 3, \"ph\": \"X\", \"cat\": \"ac2g\", \"name\": \"ac2g\"}]",
        /* one value at a time changes, the members staying: same comes to
         * read what varied (a passed number, the lane, an array) and to hold
         * the rest as text; a lane that varied is read, never stored */
        "[" KERNEL("1", "0", "7", "7", ", \"q\": 0, \"g\": [1]") "," KERNEL("2", "0", "7", "7", ", \"q\": 0, \"g\": [1]") ","
        KERNEL("3", "0", "7", "7", ", \"q\": 5, \"g\": [1]") "," KERNEL("4", "0", "7", "7", ", \"q\": 6, \"g\": [1]") ","
        KERNEL("5", "0", "7", "9", ", \"q\": 6, \"g\": [1]") "," KERNEL("6", "0", "7", "7", ", \"q\": 6, \"g\": [1]") ","
        KERNEL("7", "0", "8", "7", ", \"q\": 6, \"g\": [1]") "," KERNEL("8", "0", "7", "7", ", \"q\": 6, \"g\": [2, 3]") ","
        KERNEL("9", "0", "7", "3", ", \"q\": 60, \"g\": [2]") "," KERNEL("10", "1", "7", "7", ", \"q\": 6, \"g\": [1]") ","
        KERNEL("11", "0", "7", "7", ", \"q\": 6, \"g\": [1]") "," KERNEL("12", "0", "\"7\"", "7", ", \"q\": 6, \"g\": [1]") ","
        KERNEL("13", "0", "7", "7", ", \"q\": 6, \"g\": 1") "," KERNEL("14", "0", "7", "7", ", \"q\": 6, \"g\": [1]") "]",
        /* the objects and arrays passed unread change (a kernel's grid, an
         * operator's input dims): other contents, other kinds, nesting, a
         * string holding brackets, a value of another kind in their place,
         * one deeper than the fast path follows, one that is not JSON */
        "[" GRID("1", "[1, 1, 1]") "," GRID("2", "[2, 1, 1]") "," GRID("3", "[[3, 224], [], {\"a\": [2]}]") ","
        GRID("4", "{\"x\": 1, \"y\": \"]}\\\"[\"}") "," GRID("5", "[]") "," GRID("6", "{}") "," GRID("7", "5") ","
        GRID("8", "[1]") "," GRID("9", "\"[1]\"") "," GRID("10", "[1]") "," GRID("11", "null") "," GRID("12", "[1]") ","
        GRID("13", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]") ","
        GRID("14", "[1]") "," GRID("15", "[1 @ 2]") "]",
        "[" GRID("1", "[1]") "," GRID("2", "[1, [2, 3]") "]",
        /* thread ids as strings: digits alone (read as integers), and not */
        "[" KERNEL("1", "0", "\"7\"", "7", "") "," KERNEL("2", "0", "\"1890023232\"", "7", "") ","
        KERNEL("3", "0", "\"9999999999999999999\"", "7", "") "," KERNEL("4", "0", "\"99999999999999999999\"", "7", "") ","
        KERNEL("5", "0", "\"9007199254740993\"", "7", "") "," KERNEL("6", "0", "\"0012\"", "7", "") ","
        KERNEL("7", "0", "\"\"", "7", "") "," KERNEL("8", "0", "\"-5\"", "7", "") "," KERNEL("9", "0", "\"12a\"", "7", "") ","
        KERNEL("10", "0", "\" 5\"", "7", "") "," KERNEL("11", "0", "\"5e3\"", "7", "") "]",
        /* an event cut short where it matches the shape so far */
        "[" KERNEL("1", "0", "7", "7", "") "," KERNEL("2", "0", "7", "7", "") ",{\"ph\": \"X\", \"cat\": \"kernel\", "
        "\"name\": \"k<1>\", \"pid\": 0, \"tid\": 7, \"ts\": 3, \"dur\": 2.5, \"args\": {\"External id\": 3",
    };
#undef KERNEL
#undef GRID
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++)
        read_both_ways(docs[i], strlen(docs[i]));
}

typedef struct stepper {
    const char *s;
    size_t len, pos, step;
} stepper;

/* step bytes per read: the reads end at every offset in turn. */
static long step_read(void *arg, char *buf, size_t cap)
{
    stepper *d = arg;
    size_t n = d->len - d->pos < d->step ? d->len - d->pos : d->step;
    if (n > cap)
        n = cap;
    memcpy(buf, d->s + d->pos, n);
    d->pos += n;
    return (long)n;
}

/* Where the reads end must not change what is read: doc read whole and in
 * reads of 1 to 80 bytes hands over the same events, ends the same way and
 * counts the same strings cut (several threads' pieces and mapped windows
 * end reads anywhere, and their report must be one thread's). */
static void test_where_reads_end_changes_nothing(void **state)
{
    (void)state;
    static char long_skipped[2200];
    memset(long_skipped, 0, sizeof long_skipped);
    strcpy(long_skipped, "{\"traceEvents\": [{\"ph\": \"X\", \"args\": {\"foo\": \"");
    memset(long_skipped + strlen(long_skipped), 'x', 2000);
    strcat(long_skipped, "\", \"device\": -0}, \"ts\": 1, \"dur\": 2, \"name\": \"k\"}]}");
    static const char *docs[] = {
        "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1, \"dur\": -Infinity, \"name\": \"a\"}, {\"ph\": \"X\", "
        "\"ts\": -NaN, \"dur\": 2, \"pid\": -7, \"name\": \"b\"}, {\"ph\": \"X\", \"ts\": -5e-1, \"x\": -Infinity, "
        "\"y\": -12, \"z\": -NaN, \"dur\": 1}]}",
        "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 10, \"dur\": -", /* cut after a - */
        "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 10, \"dur\": -Inf}]}",
        "[{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1, \"dur\": 2, \"args\": {\"stream\": 7, "
        "\"note\": \"\\u00e9\\n\", \"grid\": [1, -2, 3], \"correlation\": -1}}, -Infinity, \"s\", {\"ph\": \"i\", "
        "\"name\": \"[memory]\", \"ts\": 3, \"args\": {\"Total Allocated\": -0.0}}]",
        long_skipped,
    };
    for (size_t d = 0; d < sizeof docs / sizeof *docs; d++) {
        const char *doc = docs[d];
        size_t len = strlen(doc);
        static seen a, b;
        memset(&a, 0, sizeof a);
        tw_trace_reader_stats sa, sb;
        const char *ea = NULL, *eb = NULL;
        tw_jstream s;
        assert_int_equal(tw_jstream_init(&s, NULL, NULL), 0);
        memcpy(s.own, doc, len);
        s.len = len;
        s.eof = true;
        int ra = tw_trace_read(&s, keep_event, &a, &sa, &ea);
        uint64_t cut_a = s.strings_cut;
        tw_jstream_free(&s);
        for (size_t step = 1; step <= 80; step++) {
            memset(&b, 0, sizeof b);
            stepper st = {doc, len, 0, step};
            assert_int_equal(tw_jstream_init(&s, step_read, &st), 0);
            int rb = tw_trace_read(&s, keep_event, &b, &sb, &eb);
            uint64_t cut_b = s.strings_cut;
            tw_jstream_free(&s);
            if (ra != rb || a.n != b.n || cut_a != cut_b || (ra != 0 && strcmp(ea, eb) != 0))
                fail_msg("doc %zu, reads of %zu bytes: rc %d/%d, events %d/%d, cut %llu/%llu, %s / %s", d, step, ra, rb,
                         a.n, b.n, (unsigned long long)cut_a, (unsigned long long)cut_b, ra ? ea : "-", rb ? eb : "-");
            for (int i = 0; i < a.n && i < SEEN_MAX; i++) {
                const tw_trace_event *x = &a.v[i], *y = &b.v[i];
                if (x->ph != y->ph || !same_double(x->ts, y->ts) || !same_double(x->dur, y->dur) ||
                    x->has_ts != y->has_ts || x->has_dur != y->has_dur || x->pid != y->pid ||
                    strcmp(x->name, y->name) != 0 || !same_double(x->allocated, y->allocated) ||
                    !same_double(x->stream, y->stream) || x->correlation != y->correlation)
                    fail_msg("doc %zu, reads of %zu bytes: event %d differs (ts %g/%g, dur %g/%g)", d, step, i, x->ts,
                             y->ts, x->dur, y->dur);
            }
        }
    }
}

static void test_fast_path_reads_as_the_token_path(void **state)
{
    (void)state;
    static const char *docs[] = {
        /* Kineto as it is written */
        "{\"traceEvents\": [\n  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void k<float>(int)\", \"pid\": 0, "
        "\"tid\": 7, \"ts\": 1012084.000, \"dur\": 40.965, \"args\": {\"External id\": 3, \"queued\": 0, \"device\": "
        "0, \"context\": 1, \"stream\": 7, \"correlation\": 1, \"blocks per SM\": 1.5, \"grid\": [256, 1, 1], "
        "\"block\": [128, 1, 1], \"est. achieved occupancy %\": 12}},\n  {\"ph\": \"s\", \"id\": 1, \"pid\": "
        "2910249, \"tid\": 2919752, \"ts\": 1012076, \"cat\": \"ac2g\", \"name\": \"ac2g\"},\n  {\"ph\": \"X\", "
        "\"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 2910249, \"tid\": 2919752, \"ts\": "
        "1012076, \"dur\": 6, \"args\": {\"External id\": 3, \"cbid\": 211, \"correlation\": 1}}\n],\n"
        "\"traceName\": \"x\"}",
        /* Kineto's spacing and near misses of it */
        "[{\"ph\":  \"X\", \"cat\": \"kernel\", \"name\":\t\"k\", \"pidx\": 1, \"t\": 2, \"ts\":  1, "
        "\"dur\": 2, \"tid\": 3, \"pid\": 4, \"args\": {\"device\": 1}, \"p\": 5, \"name\" : \"j\"}]",
        /* escapes and odd spellings of the keys the reader keeps */
        "[{\"p\\u0068\": \"X\", \"cat\": \"k\\u0065rnel\", \"name\": \"a\\\"b\\\\c\", \"ts\": 1, \"dur\": 2}]",
        "[{\"ph\":\"X\",\"cat\":\"Kernel\",\"name\":\"x\",\"ts\":1,\"dur\":2,\"args\":{\"Correlation ID\":5,"
        "\"external ID\":\"9\",\"Total Allocated\":1e3,\"Total Reserved\":\"7 B\",\"bytes\":-0}}]",
        /* duplicates: the last one counts */
        "[{\"ph\":\"B\",\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"a\",\"name\":\"b\",\"ts\":1,\"ts\":\"2\","
        "\"dur\":3,\"dur\":4}]",
        /* numbers the tokenizer reads in every way */
        "[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"n\",\"pid\":\"123(Python)\",\"tid\":\"stream 7\",\"ts\":-0,"
        "\"dur\":00012},{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"n\",\"ts\":1.,\"dur\":.5},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"n\",\"ts\":12345678901234567890123,\"dur\":1.5.2},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"n\",\"ts\":1e3,\"dur\":-,\"pid\":1234567890123456789},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"n\",\"ts\":NaN,\"dur\":-Infinity,\"tid\":Infinity},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"n\",\"ts\":123456789.123456789,\"dur\":0.000000000000000001}]",
        /* values skipped in every way */
        "[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1,\"dur\":2,\"x\":true,\"y\":null,\"z\":false,"
        "\"args\":{\"a\":{\"b\":[1,{\"c\":\"}]\\\"\"}],\"d\":-2.5e3},\"e\":\"\\u0000\",\"stream\":3}}]",
        /* white space of every kind, trailing commas, empty objects */
        "[\t{\r\n\"ph\"\t:\r\"X\" ,\n\"cat\" : \"kernel\",\"name\":\"k\",\"ts\":1,\"dur\":2,\"args\":{},},{},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1,\"dur\":2,\"args\":{\"device\":1,}},7,\"s\",]",
        /* events of a ph only counted (flows, metadata): their numbers passed unread, their strings
         * and args read; a second ph, read or not, counts */
        "[{\"ph\": \"f\", \"id\": 2, \"pid\": 0, \"tid\": 7, \"ts\": 1.5, \"cat\": \"ac2g\", \"name\": \"ac2g\", "
        "\"bp\": \"e\"},{\"ph\": \"s\", \"ts\": \"7\", \"dur\": 1e, \"args\": {\"correlation\": 3}},"
        "{\"ph\": \"M\", \"ts\": 5, \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"dur\": 2},"
        "{\"ph\": \"X\", \"ts\": 5, \"dur\": 2, \"ph\": \"C\", \"pid\": 9},"
        "{\"ph\": \"t\", \"ts\": tru, \"pid\": 1}]",
        "[{\"ph\": \"f\", \"ts\": [1, {\"a\": 2}], \"pid\": -, \"tid\": 1-2-3}, {\"ph\": \"s\", \"ts\": -Infinity}]",
        /* begin and end */
        "[{\"ph\":\"B\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":10,\"args\":{\"stream\":7}},"
        "{\"ph\":\"E\",\"pid\":0,\"tid\":7,\"ts\":35,\"args\":{\"correlation\":4}}]",
        /* bad input: each stops where the token path stops */
        "[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1},{\"ph\":\"X\",\"args\":{\"a\":[1}}]",
        "[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1},{\"ph\":\"X\",\"args\":{\"a\":[#]}}]",
        "[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1},{\"ph\":\"X\",\"args\":{,}}]",
        "[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1},{\"ph\":\"X\",\"name\":\"open",
        "[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1},{\"ph\":\"X\" \"cat\":\"kernel\"}]",
        "[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1},{\"ph\":\"X\",\"x\":tru}]",
        "[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1},{\"ph\":X}]",
        "[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1}{\"ph\":\"X\"}]",
        "[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1},{\"ph\":\"X\",\"ts\":1",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++)
        read_both_ways(docs[i], strlen(docs[i]));

    /* raw NUL bytes in a name, a key and a skipped value */
    static const char nul[] = "[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"a\0b\",\"ts\":1,\"dur\":2},"
                              "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\0\":1,\"dur\":2,\"x\":\"\0\"}]";
    read_both_ways(nul, sizeof nul - 1);

    /* names of 1024 bytes (kept whole) and 1025 (cut and counted), args 100 deep */
    static char big[8192];
    size_t n = 0;
    for (int len = 1023; len <= 1025; len++) {
        n += (size_t)snprintf(big + n, sizeof big - n, "%s{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"", n ? "," : "[");
        memset(big + n, 'k', (size_t)len);
        n += (size_t)len;
        n += (size_t)snprintf(big + n, sizeof big - n, "\",\"ts\":1,\"dur\":2}");
    }
    n += (size_t)snprintf(big + n, sizeof big - n, ",{\"ph\":\"X\",\"args\":{\"a\":");
    for (int i = 0; i < 100; i++)
        big[n++] = i % 2 ? '{' : '[';
    for (int i = 99; i >= 0; i--)
        big[n++] = i % 2 ? '}' : ']';
    n += (size_t)snprintf(big + n, sizeof big - n, ",\"stream\":3}}]");
    read_both_ways(big, n);
}

/* The SSE2 scans against the portable ones, at every offset of a buffer
 * of quotes, backslashes, NULs and letters. */
static void test_scans_agree_with_the_portable_path(void **state)
{
    (void)state;
    static char buf[4096];
    unsigned x = 12345;
    for (size_t i = 0; i < sizeof buf; i++) {
        x = x * 1103515245u + 12345u;
        unsigned r = x >> 16 & 63;
        buf[i] = r == 0 ? '"' : r == 1 ? '\\' : r == 2 ? '\0' : (char)('a' + r % 26);
    }
    for (size_t i = 0; i + 64 <= sizeof buf; i++) {
        for (int nul = 0; nul < 2; nul++) {
            const char *end = buf + i + (i * 7 % 200);
            if (end > buf + sizeof buf)
                end = buf + sizeof buf;
            assert_ptr_equal(tw_jfind(buf + i, end, nul), tw_jfind_scalar(buf + i, end, nul));
        }
        assert_true(tw_jspecial64(buf + i) == tw_jspecial64_scalar(buf + i));
    }
}

/* ---- several threads read a file as one does ------------------------------ */

/* The JSON report of path read with threads threads in pieces of chunk
 * bytes (malloc'd; *rc: tw_trace_add_file's). */
static char *report_of(const char *path, int threads, uint64_t chunk, int *rc)
{
    tw_trace_options o;
    tw_trace_options_default(&o);
    o.threads = threads;
    o.chunk_bytes = chunk;
    tw_trace *t;
    assert_int_equal(tw_trace_new(&t, &o), 0);
    *rc = tw_trace_add_file(t, path, -1, NULL, NULL);
    assert_int_equal(tw_trace_finish(t), 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    tw_trace_write_json(f, t);
    fclose(f);
    tw_trace_free(t);
    return text;
}

/* path read by 2 and 3 threads in pieces of each size must give the one
 * thread's report, byte for byte (and its return code). */
static void same_as_one_thread(const char *path, const char *what, const uint64_t *chunks, int chunk_count)
{
    int rc1, rc;
    char *one = report_of(path, 1, 0, &rc1);
    for (int threads = 2; threads <= 3; threads++) {
        for (int i = 0; i < chunk_count; i++) {
            char *many = report_of(path, threads, chunks[i], &rc);
            if (rc != rc1 || strcmp(one, many) != 0) {
                size_t at = 0;
                while (one[at] && one[at] == many[at])
                    at++;
                fail_msg("%s: %d threads, %llu-byte pieces: rc %d/%d, the report differs at byte %zu: %.60s / %.60s",
                         what, threads, (unsigned long long)chunks[i], rc1, rc, at, one + (at > 20 ? at - 20 : 0),
                         many + (at > 20 ? at - 20 : 0));
            }
            free(many);
        }
    }
    free(one);
}

static char *temp_path(void)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/tw-test-trace-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    return path;
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* A corpus trace, gunzipped (malloc'd), or NULL when the corpus is absent. */
static char *corpus_trace(const char *name, size_t *len)
{
    const char *dir = getenv("TW_CORPUS");
    char path[512];
    snprintf(path, sizeof path, "%s/traces/%s", dir ? dir : "../shared/corpus", name);
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return NULL;
    size_t cap = 1u << 20, n = 0;
    char *text = malloc(cap);
    int got;
    while (text && (got = gzread(gz, text + n, (unsigned)(cap - n))) > 0) {
        n += (size_t)got;
        if (n == cap)
            text = realloc(text, cap *= 2);
    }
    gzclose(gz);
    assert_non_null(text);
    *len = n;
    return text;
}

/* A Kineto-like document of n steps in one of four layouts: 0 an event a
 * line ("},\n  {"), 1 all on one line ("},{"), 2 every member on its own
 * line and args' { opening a line (most guessed starts are wrong), 3 names
 * holding "}, {" and "\n{" as text (a guess inside a string). Steps hold a
 * B/E pair, cpu_ops, runtime calls, kernels and a copy. */
static char *synthetic(int layout, int steps, size_t *len)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    assert_non_null(f);
    const char *sep = layout == 1 ? "," : layout == 2 ? ",\n" : ",\n  ";
    const char *name = layout == 3 ? "op}, {\\\"x\\\": 1}\\n{" : "aten::addmm";
    fprintf(f, "{\"schemaVersion\": 1, \"distributedInfo\": {\"rank\": 2}, \"traceEvents\": [%s",
            layout == 1 ? "" : "\n  ");
    long corr = 1;
    for (int s = 0; s < steps; s++) {
        double t0 = 1000.0 + s * 5000.0;
        fprintf(f,
                "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#%d\", \"pid\": 1, \"tid\": 1, "
                "\"ts\": %.3f, \"dur\": 4900}%s",
                s, t0, sep);
        fprintf(f,
                "{\"ph\": \"B\", \"cat\": \"user_annotation\", \"name\": \"enumerate(DataLoader)#x\", \"pid\": 1, "
                "\"tid\": 1, \"ts\": %.3f}%s",
                t0 + 1, sep);
        fprintf(f, "{\"ph\": \"E\", \"pid\": 1, \"tid\": 1, \"ts\": %.3f}%s", t0 + 1500, sep);
        for (int k = 0; k < 6; k++, corr++) {
            double t = t0 + 1600 + k * 500;
            if (layout == 2)
                fprintf(f,
                        "{\n\"ph\": \"X\",\n\"cat\": \"cpu_op\",\n\"name\": \"%s\",\n\"pid\": 1,\n\"tid\": 1,\n"
                        "\"ts\": %.3f,\n\"dur\": 40,\n\"args\":\n{\n\"External id\": %ld\n}\n}%s",
                        name, t, corr, sep);
            else
                fprintf(f,
                        "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"%s\", \"pid\": 1, \"tid\": 1, \"ts\": "
                        "%.3f, \"dur\": 40, \"args\": {\"External id\": %ld}}%s",
                        name, t, corr, sep);
            fprintf(f,
                    "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, "
                    "\"tid\": 1, \"ts\": %.3f, \"dur\": 5, \"args\": {\"correlation\": %ld}}%s",
                    t + 2, corr, sep);
            fprintf(f,
                    "{\"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7, \"ts\": %.3f, "
                    "\"dur\": %d.5, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": %ld, \"bytes\": 4096, "
                    "\"grid\": [1, 1, 1]}}%s",
                    k == 5 ? "gpu_memcpy" : "kernel", k == 5 ? "Memcpy HtoD (Pageable -> Device)" : "sgemm_128x64",
                    t + 20, 30 + k, corr, sep);
        }
    }
    fprintf(f, "{}]%s\"displayTimeUnit\": \"ms\"}\n", layout == 1 ? "," : ",\n  ");
    fclose(f);
    *len = n;
    return text;
}

static void test_threads_read_synthetic_layouts_as_one(void **state)
{
    (void)state;
    static const uint64_t chunks[] = {97, 1000, 8192};
    char *path = temp_path();
    for (int layout = 0; layout < 4; layout++) {
        size_t len;
        char *doc = synthetic(layout, 40, &len);
        write_file(path, doc, len);
        char what[32];
        snprintf(what, sizeof what, "layout %d", layout);
        same_as_one_thread(path, what, chunks, 3);
        /* cut short, and a stray byte: the same error at the same byte */
        for (int cut = 1; cut < 8; cut++) {
            write_file(path, doc, len * (size_t)cut / 8);
            snprintf(what, sizeof what, "layout %d cut at %d/8", layout, cut);
            same_as_one_thread(path, what, chunks + 1, 1);
        }
        free(doc);
    }
    unlink(path);
}

/* Events of a few bytes each pack to several times their bytes: a piece
 * past its budget fails and the one thread reads on; the report is still
 * the one thread's. */
static void test_threads_give_dense_pieces_to_the_one_thread(void **state)
{
    (void)state;
    static const uint64_t chunks[] = {65536, 200000};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    fputs("{\"traceEvents\": [", f);
    for (int i = 0; i < 60000; i++)
        fprintf(f, "%s{\"ph\":\"X\",\"ts\":%d,\"dur\":1}", i ? "," : "", 2 * i);
    fputs("]}", f);
    fclose(f);
    char *path = temp_path();
    write_file(path, text, len);
    same_as_one_thread(path, "dense events", chunks, 2);
    unlink(path);
    free(text);
}

static void test_threads_read_corpus_traces_as_one(void **state)
{
    (void)state;
    static const char *const names[] = {"hta-alexnet-a100.kineto.json.gz", "hta-cupti-profiler-a100.kineto.json.gz",
                                        "hta-mi250-rocm-minitoy-train.kineto.json.gz",
                                        "hta-sampled-rank0-ws128.kineto.json.gz"};
    static const uint64_t chunks[] = {509, 4096, 65536};
    char *path = temp_path();
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        size_t len;
        char *doc = corpus_trace(names[i], &len);
        if (!doc) {
            printf("skipped: ../shared/corpus/traces/%s is absent (set TW_CORPUS)\n", names[i]);
            continue;
        }
        write_file(path, doc, len);
        same_as_one_thread(path, names[i], chunks, 3);
        if (i == 0) { /* broken copies: bytes replaced, the file cut short */
            static const char bad[] = ",{}[]\"x\n";
            uint64_t seed = 12345;
            for (int m = 0; m < 24; m++) {
                char *copy = malloc(len);
                assert_non_null(copy);
                memcpy(copy, doc, len);
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                size_t at = (size_t)(seed >> 33) % len;
                copy[at] = m % 3 == 2 ? '\0' : bad[(seed >> 20) % (sizeof bad - 1)];
                write_file(path, copy, m % 4 == 3 ? at : len);
                char what[96];
                snprintf(what, sizeof what, "%s with byte %zu replaced%s", names[i], at,
                         m % 4 == 3 ? ", cut there" : "");
                same_as_one_thread(path, what, chunks + 1, 1);
                free(copy);
            }
        }
        free(doc);
    }
    unlink(path);
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
        cmocka_unit_test(test_empty_cache_slots_match_nothing),
        cmocka_unit_test(test_summary_text),
        cmocka_unit_test(test_skip_passes_containers_byte_by_byte),
        cmocka_unit_test(test_begin_end_pairs_and_bounds),
        cmocka_unit_test(test_host_spans_first_wait_for_the_gpu),
        cmocka_unit_test(test_fast_path_reads_as_the_token_path),
        cmocka_unit_test(test_shapes_read_as_the_token_path),
        cmocka_unit_test(test_kind_memo_agrees_with_classify),
        cmocka_unit_test(test_where_reads_end_changes_nothing),
        cmocka_unit_test(test_scans_agree_with_the_portable_path),
        cmocka_unit_test(test_threads_read_synthetic_layouts_as_one),
        cmocka_unit_test(test_threads_read_corpus_traces_as_one),
        cmocka_unit_test(test_threads_give_dense_pieces_to_the_one_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
