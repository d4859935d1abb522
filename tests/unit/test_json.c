/*
 * test_json.c: JSON output escaping (including broken UTF-8), the pull
 * reader, and the record line format round trip.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "collect.h"
#include "core/grow.h"
#include "core/json.h"
#include "trainwatch/error.h"
#include "trainwatch/record_json.h"

static char *capture(void (*write)(FILE *, const void *), const void *arg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    write(f, arg);
    fclose(f);
    return buf;
}

static void write_str(FILE *f, const void *s) { tw_json_cstring(f, s); }

static void test_string_escaping(void **state)
{
    (void)state;
    char *out = capture(write_str, "a\"b\\c\nd\te\x01");
    assert_string_equal(out, "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
    free(out);
    out = capture(write_str, "ok \xc3\xa9 \xe2\x82\xac");
    assert_string_equal(out, "\"ok \xc3\xa9 \xe2\x82\xac\"");
    free(out);
}

static void test_invalid_utf8_becomes_replacement(void **state)
{
    (void)state;
    char *out = capture(write_str, "x\xff y\xc3 z\xed\xa0\x80");
    assert_string_equal(out, "\"x\\ufffd y\\ufffd z\\ufffd\\ufffd\\ufffd\"");
    free(out);
}

static void write_num(FILE *f, const void *v) { tw_json_number(f, *(const double *)v); }

static void test_numbers_shortest_and_special(void **state)
{
    (void)state;
    double cases[] = {0.5420, 1e-8, 3, NAN, INFINITY, -INFINITY, 0.1 + 0.2};
    const char *want[] = {"0.542", "1e-08", "3", "\"NaN\"", "\"Infinity\"", "\"-Infinity\"", "0.30000000000000004"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = capture(write_num, &cases[i]);
        assert_string_equal(out, want[i]);
        free(out);
    }
}

static void test_reader_members_and_nesting(void **state)
{
    (void)state;
    const char *s = "{\"a\": 1.5, \"b\": \"x\\u00e9\\ud83d\\ude00\", \"c\": [1, {\"d\": 2}], \"e\": {\"f\": true}, \"g\": null}";
    tw_json_reader r;
    tw_json_member m;
    assert_true(tw_json_begin(&r, s, strlen(s)));
    assert_int_equal(tw_json_next(&r, &m), TW_JSON_NUMBER);
    assert_true(m.number == 1.5);
    assert_int_equal(tw_json_next(&r, &m), TW_JSON_STRING);
    assert_string_equal(m.string, "x\xc3\xa9\xf0\x9f\x98\x80");
    assert_int_equal(tw_json_next(&r, &m), TW_JSON_ARRAY);
    assert_int_equal(tw_json_next(&r, &m), TW_JSON_OBJECT);
    assert_string_equal(m.key, "e");
    assert_int_equal(tw_json_next(&r, &m), TW_JSON_BOOL);
    assert_int_equal(tw_json_next(&r, &m), TW_JSON_END);
    assert_int_equal(tw_json_next(&r, &m), TW_JSON_NULL);
    assert_int_equal(tw_json_next(&r, &m), TW_JSON_END);
}

static void test_reader_rejects_garbage(void **state)
{
    (void)state;
    const char *bad[] = {"{\"a\" 1}", "{\"a\": }", "{\"a\": \"unterminated", "{\"a\": 1x}", "{a: 1}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tw_json_reader r;
        tw_json_member m;
        assert_true(tw_json_begin(&r, bad[i], strlen(bad[i])));
        tw_json_type t;
        int guard = 0;
        while ((t = tw_json_next(&r, &m)) != TW_JSON_ERROR && t != TW_JSON_END && guard++ < 10) {
        }
        assert_int_equal(t, TW_JSON_ERROR);
    }
}

static void write_rec(FILE *f, const void *r) { tw_record_write_json(f, r); }

static void test_record_round_trip(void **state)
{
    (void)state;
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_STEP;
    r.rank = 2;
    r.source.file = "orig.log";
    r.source.line = 77;
    r.epoch = 3;
    r.step = 40;
    r.step_total = 100;
    r.loss = NAN;
    r.lr = 0.001;
    r.batch_time = 0.25;
    r.fields = TW_F_LOSS | TW_F_LR | TW_F_BATCH_TIME;
    tw_record_set_metric(&r, "acc", 3, 0.75);
    char *line = capture(write_rec, &r);
    collected_records *c = parse_text(line, NULL, NULL);
    assert_int_equal(c->count, 1);
    const tw_record *b = &c->records[0];
    assert_int_equal(b->rank, 2);
    assert_int_equal(b->epoch, 3);
    assert_int_equal(b->step, 40);
    assert_int_equal(b->step_total, 100);
    assert_int_equal(b->source.line, 77);
    assert_true(isnan(b->loss) && tw_has(b, TW_F_LOSS));
    assert_true(b->lr == 0.001 && b->batch_time == 0.25);
    assert_false(tw_has(b, TW_F_DATA_TIME));
    assert_true(tw_record_metric(b, "acc") == 0.75);
    free(line);
    free(c);
}

static void test_event_round_trip(void **state)
{
    (void)state;
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_EVENT;
    r.event = TW_EV_SIGNAL;
    r.exit_code = 15;
    tw_record_set_text(r.message, "FatalError: `Termination signal` \"quoted\"", 41);
    tw_record_set_text(r.detail, "frame\x01", 6);
    char *line = capture(write_rec, &r);
    collected_records *c = parse_text(line, NULL, NULL);
    const tw_record *e = find_event(c, TW_EV_SIGNAL);
    assert_non_null(e);
    assert_int_equal(e->exit_code, 15);
    assert_string_equal(e->message, r.message);
    assert_string_equal(e->detail, "frame");
    free(line);
    free(c);
}

static void write_ecs(FILE *f, const void *r)
{
    tw_record_ecs who = {.host = "node1", .pid = 4242};
    tw_record_write_ecs(f, r, &who, 1764769501.25);
}

/* run/watch --records: ECS names around the same record, which the
 * trainwatch format reads back as the bare one. */
static void test_ecs_envelope_round_trip(void **state)
{
    (void)state;
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_STEP;
    r.rank = 2;
    r.source.file = "orig.log";
    r.source.line = 77;
    r.global_step = 40;
    r.loss = 0.5;
    r.fields = TW_F_LOSS;
    tw_record_set_metric(&r, "acc", 3, 0.75);
    char *line = capture(write_ecs, &r);
    assert_memory_equal(line,
                        "{\"@timestamp\":\"2025-12-03T13:45:01.250Z\",\"event.dataset\":\"trainwatch.record\","
                        "\"log.level\":\"info\",\"message\":\"step 40 loss 0.5 acc 0.75\",\"ecs.version\":\"8.11.0\","
                        "\"host.name\":\"node1\",\"process.pid\":4242,\"log.file.path\":\"orig.log\","
                        "\"trainwatch\":{\"schema\":\"trainwatch.record/1\",",
                        268);
    collected_records *c = parse_text(line, NULL, NULL);
    assert_string_equal(c->stats.format, "trainwatch");
    assert_int_equal(c->count, 1);
    const tw_record *b = &c->records[0];
    assert_int_equal(b->rank, 2);
    assert_int_equal(b->global_step, 40);
    assert_int_equal(b->source.line, 77);
    assert_true(b->loss == 0.5 && tw_record_metric(b, "acc") == 0.75);
    free(line);
    free(c);
    tw_record e;
    tw_record_init(&e);
    e.kind = TW_REC_EVENT;
    e.event = TW_EV_OOM;
    e.time = 1764769501.0;
    e.fields = TW_F_TIME;
    tw_record_set_text(e.message, "CUDA out of memory", 18);
    line = capture(write_ecs, &e);
    assert_non_null(strstr(line, "\"@timestamp\":\"2025-12-03T13:45:01.000Z\""));
    assert_non_null(strstr(line, "\"log.level\":\"error\",\"message\":\"oom: CUDA out of memory\""));
    c = parse_text(line, NULL, NULL);
    assert_non_null(find_event(c, TW_EV_OOM));
    assert_true(c->records[0].time == 1764769501.0);
    free(line);
    free(c);
}

/* core/grow.h, the array growth the report and diagnosis lists share:
 * doubles from first, keeps what was there, leaves a full array alone
 * until it is full. */
static void test_grow_doubles_and_keeps(void **state)
{
    (void)state;
    long *v = NULL;
    int n = 0, cap = 0;
    for (long i = 0; i < 100; i++) {
        assert_int_equal(TW_GROW(v, n, cap, 4), TW_OK);
        assert_true(cap > n);
        v[n++] = i * 3;
    }
    assert_int_equal(cap, 128); /* 4, 8, ... 128 */
    for (int i = 0; i < n; i++)
        assert_int_equal(v[i], i * 3L);
    long *before = v;
    assert_int_equal(TW_GROW(v, 10, cap, 4), TW_OK); /* room: nothing moves */
    assert_ptr_equal(v, before);
    int huge = 0x40000001;
    assert_int_equal(TW_GROW(v, huge, huge, 4), TW_ENOMEM); /* doubling would overflow */
    assert_ptr_equal(v, before);
    free(v);
    /* the same counted in size_t (TW_GROW_SIZE) */
    double *d = NULL;
    size_t dn = 0, dcap = 0;
    for (size_t i = 0; i < 100; i++) {
        assert_int_equal(TW_GROW_SIZE(d, dn, dcap, 4), TW_OK);
        assert_true(dcap > dn);
        d[dn++] = (double)i / 2;
    }
    assert_int_equal(dcap, 128);
    for (size_t i = 0; i < dn; i++)
        assert_true(d[i] == (double)i / 2);
    double *kept = d;
    size_t big = SIZE_MAX / 2 + 1;
    assert_int_equal(TW_GROW_SIZE(d, big, big, 4), TW_ENOMEM); /* doubling would overflow */
    size_t half = SIZE_MAX / 8; /* doubled: SIZE_MAX / 4 doubles, past size_t */
    assert_int_equal(TW_GROW_SIZE(d, half, half, 4), TW_ENOMEM); /* more bytes than size_t holds */
    assert_ptr_equal(d, kept);
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grow_doubles_and_keeps),
        cmocka_unit_test(test_string_escaping),
        cmocka_unit_test(test_invalid_utf8_becomes_replacement),
        cmocka_unit_test(test_numbers_shortest_and_special),
        cmocka_unit_test(test_reader_members_and_nesting),
        cmocka_unit_test(test_reader_rejects_garbage),
        cmocka_unit_test(test_record_round_trip),
        cmocka_unit_test(test_event_round_trip),
        cmocka_unit_test(test_ecs_envelope_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
