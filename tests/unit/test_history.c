/*
 * test_history.c: the history file and the comparison: a file at schema 1
 * migrated to the current one with its runs kept; one at schema 2 gaining
 * the GPU time and money; a file that is no
 * database refused with the reason; where two loss curves part (and that
 * two that only differ by their noise do not); the verdict's words. The
 * e2e tests (tests/e2e/test_history.py) drive the commands.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "trainwatch/error.h"
#include "trainwatch/history.h"

static void temp_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "/tmp/tw-test-history-%d-%s", (int)getpid(), name);
    unlink(buf);
}

static void remove_db(const char *path)
{
    char side[4200];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
}

/* A history file made at an older schema, with one row written by SQL as
 * a trainwatch of that schema would have. */
static void old_file(const char *path, int schema, const char *insert)
{
    char err[600];
    tw_history *h;
    assert_int_equal(tw_history_open_schema(path, schema, &h, err, sizeof err), TW_OK);
    assert_int_equal(tw_history_schema(h), schema);
    tw_history_close(h);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, insert, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static void a_schema_1_file_is_migrated_with_its_runs(void **state)
{
    (void)state;
    char path[256], err[600];
    temp_path(path, sizeof path, "v1.db");
    old_file(path, 1,
             "INSERT INTO runs (recorded, source, name, job, step_p50, final_loss)"
             " VALUES (1700000000, 'analyze', 'old', 'job-a', 0.25, 1.5)");
    tw_history *h;
    assert_int_equal(tw_history_open(path, &h, err, sizeof err), TW_OK);
    assert_int_equal(tw_history_schema(h), TW_HISTORY_SCHEMA);
    tw_history_entry e;
    assert_int_equal(tw_history_find(h, "old", &e, err, sizeof err), TW_OK);
    assert_string_equal(e.job, "job-a");
    assert_true(e.step_p50 == 0.25 && e.final_loss == 1.5 && isnan(e.throughput));
    tw_history_view v;
    assert_int_equal(tw_history_view_load(h, e.id, &v, err, sizeof err), TW_OK); /* schema 2's tables are there */
    assert_int_equal(v.series_count, 0);
    tw_history_view_free(&v);
    assert_int_equal(tw_history_find(h, "nobody", &e, err, sizeof err), TW_ENOENT);
    assert_non_null(strstr(err, "no run nobody"));
    tw_history_close(h);
    remove_db(path);
}

/* Schema 3 adds a run's GPU time and money to runs: a schema-2 file gains
 * the columns in place, its rows kept (their GPU time unknown), and a run
 * recorded then reads its GPU time back. */
static void a_schema_2_file_gains_the_gpu_time_and_money(void **state)
{
    (void)state;
    char path[256], err[600];
    temp_path(path, sizeof path, "v2.db");
    old_file(path, 2,
             "INSERT INTO runs (recorded, source, name, job, step_p50)"
             " VALUES (1700000000, 'run', 'before', 'job-b', 0.5)");
    tw_history *h;
    assert_int_equal(tw_history_open(path, &h, err, sizeof err), TW_OK);
    assert_int_equal(tw_history_schema(h), 3);
    tw_history_entry e;
    assert_int_equal(tw_history_find(h, "before", &e, err, sizeof err), TW_OK);
    assert_true(e.step_p50 == 0.5 && e.gpus == -1 && isnan(e.gpu_seconds) && isnan(e.cost) && !e.price_source[0]);

    tw_thresholds th;
    tw_thresholds_default(&th);
    tw_run *run;
    assert_int_equal(tw_run_new(&run, &th), TW_OK);
    tw_report report = {.launch_count = 0};
    report.summary.gpu_cost = (tw_gpu_cost){.gpus = 2, .gpu_seconds = 7200, .idle_seconds = 1800, .idle_below = 10,
                                            .priced = true, .cost = 5, .idle_cost = 1.25, .budget = 20};
    snprintf(report.summary.gpu_cost.price_source, sizeof report.summary.gpu_cost.price_source, "2.5 per GPU-hour");
    tw_history_identity who = {.source = "run", .name = "after", .job = "job-b", .started = 1, .ended = 2};
    int64_t id;
    assert_int_equal(tw_history_record(h, &who, &report, run, &id, err, sizeof err), TW_OK);
    assert_int_equal(tw_history_find(h, "after", &e, err, sizeof err), TW_OK);
    assert_int_equal(e.id, id);
    assert_int_equal(e.gpus, 2);
    assert_true(e.gpu_seconds == 7200 && e.idle_seconds == 1800 && e.idle_below == 10);
    assert_true(e.cost == 5 && e.idle_cost == 1.25 && e.budget == 20);
    assert_string_equal(e.price_source, "2.5 per GPU-hour");
    char buf[32];
    assert_string_equal(tw_history_gpu_hours_text(&e, buf, sizeof buf), "2");
    assert_string_equal(tw_history_cost_text(&e, buf, sizeof buf), "5.00");
    tw_run_free(run);
    tw_history_close(h);
    remove_db(path);
}

static void a_file_that_is_no_database_is_refused(void **state)
{
    (void)state;
    char path[256], err[600];
    temp_path(path, sizeof path, "junk.db");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 100; i++)
        fputs("not sqlite at all\n", f);
    fclose(f);
    tw_history *h;
    assert_int_equal(tw_history_open(path, &h, err, sizeof err), TW_EFORMAT);
    assert_null(h);
    assert_non_null(strstr(err, "not a database"));
    assert_int_equal(tw_history_open_schema(path, 9, &h, err, sizeof err), TW_EINVAL);
    remove_db(path);
}

/* A view with a loss series: value(i) at steps 10, 20, ... */
static tw_history_view view_with_loss(size_t n, double (*value)(size_t i, double arg), double arg, double step_p50,
                                      double data_share)
{
    tw_history_view v = {0};
    v.entry.step_p50 = step_p50;
    v.entry.data_share = data_share;
    v.entry.final_loss = NAN;
    v.entry.throughput = NAN;
    v.series = calloc(1, sizeof *v.series);
    v.series_count = 1;
    tw_history_series *s = &v.series[0];
    snprintf(s->metric, sizeof s->metric, "loss");
    s->count = n;
    s->pos = malloc(n * sizeof(double));
    s->time = malloc(n * sizeof(double));
    s->value = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        s->pos[i] = 10.0 * (double)(i + 1);
        s->time[i] = NAN;
        s->value[i] = value(i, arg);
    }
    return v;
}

/* A falling loss with a repeating wobble of +-0.05: its noise. */
static double wobbly(size_t i, double shift)
{
    return 3.0 / (1.0 + 0.02 * (double)i) + 0.05 * (double)((i * 7) % 3) + shift;
}

/* The same, and from point 100 on 0.5 higher. */
static double parts_at_100(size_t i, double arg)
{
    return wobbly(i, 0) + (i >= 100 ? arg : 0);
}

static void curves_part_where_they_leave_each_others_noise(void **state)
{
    (void)state;
    tw_history_view a = view_with_loss(300, wobbly, 0, 0.1, 0.1);
    tw_history_view same = view_with_loss(300, wobbly, 0.02, 0.1, 0.1); /* within the noise */
    tw_history_view parted = view_with_loss(300, parts_at_100, 0.5, 0.1, 0.1);
    tw_history_parting p;
    tw_history_loss_parting(&a, &same, &p);
    assert_true(p.overlap && !p.parted);
    assert_true(p.from == 10 && p.to == 3000);
    tw_history_loss_parting(&a, &parted, &p);
    assert_true(p.parted);
    assert_true(p.step == 1010); /* point 100 */
    assert_true(fabs(p.other - p.ref - 0.5) < 1e-9);
    /* a curve against nothing in common */
    tw_history_view later = view_with_loss(10, wobbly, 0, 0.1, 0.1);
    for (size_t i = 0; i < 10; i++)
        later.series[0].pos[i] += 1e6;
    tw_history_loss_parting(&a, &later, &p);
    assert_false(p.overlap);
    tw_history_view_free(&a);
    tw_history_view_free(&same);
    tw_history_view_free(&parted);
    tw_history_view_free(&later);
}

static void the_verdict_says_how_much_slower_and_why(void **state)
{
    (void)state;
    tw_history_view a = view_with_loss(50, wobbly, 0, 0.100, 0.12);
    tw_history_view b = view_with_loss(50, wobbly, 0, 0.131, 0.48);
    b.facts = calloc(1, sizeof *b.facts);
    b.fact_count = 1;
    snprintf(b.facts[0].key, sizeof b.facts[0].key, "num_workers");
    snprintf(b.facts[0].value, sizeof b.facts[0].value, "2");
    a.facts = calloc(1, sizeof *a.facts);
    a.fact_count = 1;
    a.facts[0] = b.facts[0];
    snprintf(a.facts[0].value, sizeof a.facts[0].value, "8");
    char v[1024];
    tw_history_verdict(&a, &b, "B", v, sizeof v);
    assert_non_null(strstr(v, "B is 31% slower per step"));
    assert_non_null(strstr(v, "data wait rose from 12% to 48%"));
    assert_non_null(strstr(v, "num_workers 8 -> 2"));
    assert_null(strstr(v, "part")); /* the same curve */
    tw_history_verdict(&b, &a, "B", v, sizeof v);
    assert_non_null(strstr(v, "B is 24% faster per step"));
    assert_non_null(strstr(v, "data wait fell from 48% to 12%"));
    a.entry.step_p50 = 0.125; /* 0.131 is within 10% of it */
    tw_history_verdict(&a, &b, "B", v, sizeof v);
    assert_non_null(strstr(v, "same speed per step"));
    tw_history_view_free(&a);
    tw_history_view_free(&b);
}

/* The job `run` records a command under: the program and its script, not
 * the arguments; and how it ended. */
static void a_command_is_its_program_and_script(void **state)
{
    (void)state;
    char buf[128];
    char *python[] = {"/usr/bin/python3", "-u", "tools/train.py", "--lr", "0.1", NULL};
    assert_string_equal(tw_history_job_of(python, buf, sizeof buf), "python3 train.py");
    char *module[] = {"python", "-m", "paddle.distributed.launch", "train.py", NULL};
    assert_string_equal(tw_history_job_of(module, buf, sizeof buf), "python -m paddle.distributed.launch");
    char *bare[] = {"./trainer", "--epochs", "3", NULL};
    assert_string_equal(tw_history_job_of(bare, buf, sizeof buf), "trainer");
    assert_string_equal(tw_history_outcome_of(0, buf, sizeof buf), "exit 0");
    assert_string_equal(tw_history_outcome_of(137, buf, sizeof buf), "signal 9");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_schema_1_file_is_migrated_with_its_runs),
        cmocka_unit_test(a_schema_2_file_gains_the_gpu_time_and_money),
        cmocka_unit_test(a_file_that_is_no_database_is_refused),
        cmocka_unit_test(curves_part_where_they_leave_each_others_noise),
        cmocka_unit_test(the_verdict_says_how_much_slower_and_why),
        cmocka_unit_test(a_command_is_its_program_and_script),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
