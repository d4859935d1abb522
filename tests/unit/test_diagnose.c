/*
 * test_diagnose.c: each rule on a synthetic record stream built to trip it,
 * and on a healthy stream that must not. Records are made here, not parsed,
 * so these tests pin the rules alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/run.h" /* the rank limit, lowered for a test */
#include "trainwatch/analyze.h"
#include "trainwatch/error.h"

typedef struct sample {
    int rank;
    double pos, loss, lr, batch, data, mem, time;
} sample;

static void add_step(tw_run *run, sample s)
{
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_STEP;
    r.rank = s.rank;
    r.source.file = "synthetic.log";
    r.source.line = (uint64_t)s.pos + 1;
    r.global_step = (int64_t)s.pos;
    r.loss = s.loss;
    r.fields |= TW_F_LOSS;
    if (s.lr > 0)
        r.lr = s.lr, r.fields |= TW_F_LR;
    if (s.batch > 0)
        r.batch_time = s.batch, r.fields |= TW_F_BATCH_TIME;
    if (s.data >= 0)
        r.data_time = s.data, r.fields |= TW_F_DATA_TIME;
    if (s.mem > 0)
        r.mem_bytes = s.mem, r.fields |= TW_F_MEM;
    if (s.time > 0)
        r.time = s.time, r.fields |= TW_F_TIME;
    tw_run_add(run, &r);
}

static void add_event(tw_run *run, tw_event_kind kind, uint64_t line, const char *msg)
{
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_EVENT;
    r.event = kind;
    r.source.file = "synthetic.log";
    r.source.line = line;
    tw_record_set_text(r.message, msg, strlen(msg));
    tw_run_add(run, &r);
}

/* A healthy run: loss decays, steady 0.5 s steps, little data wait. */
static sample healthy(int rank, int i)
{
    return (sample){.rank = rank, .pos = i * 10, .loss = 2.0 * exp(-i / 60.0) + 0.1, .lr = 0.01,
                    .batch = 0.5 + 0.01 * (i % 3), .data = 0.01, .mem = 8e9, .time = 1e9 + i * 5.0};
}

static tw_report *diagnose(tw_run *run)
{
    tw_thresholds t;
    tw_thresholds_default(&t);
    tw_report *report;
    assert_int_equal(tw_diagnose(run, &t, &report), 0);
    return report;
}

static const tw_finding *finding(const tw_report *r, const char *rule)
{
    for (int i = 0; i < r->finding_count; i++) {
        if (strcmp(r->findings[i].rule, rule) == 0)
            return &r->findings[i];
    }
    return NULL;
}

static tw_run *new_run(void)
{
    tw_run *run;
    assert_int_equal(tw_run_new(&run, NULL), 0);
    return run;
}

static void test_healthy_run_has_no_findings(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int i = 0; i < 300; i++)
        add_step(run, healthy(0, i));
    tw_report *r = diagnose(run);
    assert_true(r->healthy);
    assert_int_equal(r->finding_count, 0);
    assert_int_equal(r->summary.step_records, 300);
    assert_int_equal(r->summary.last_step, 2990);
    assert_true(fabs(r->summary.data_share - 0.01 / 0.51) < 0.01);
    assert_true(fabs(r->summary.duration - 299 * 5.0) < 1e-6);
    tw_report_free(r);
    tw_run_free(run);
}

static void test_nan_cites_first_step_and_lr_jump(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int i = 0; i < 50; i++) {
        sample s = healthy(0, i);
        if (i >= 40)
            s.lr = 1.0;
        if (i >= 42)
            s.loss = NAN;
        add_step(run, s);
    }
    tw_report *r = diagnose(run);
    const tw_finding *f = finding(r, "nan_loss");
    assert_non_null(f);
    assert_int_equal(f->severity, TW_SEV_ERROR);
    assert_int_equal(f->step, 420);
    assert_int_equal(f->where.line, 421);
    assert_non_null(strstr(f->evidence, "learning rate jumped 100x from 0.01 (step 390) to 1 (step 400)"));
    assert_false(r->healthy);
    tw_report_free(r);
    tw_run_free(run);
}

static void test_data_loading_bound(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int i = 0; i < 100; i++) {
        sample s = healthy(0, i);
        s.data = 0.35;
        add_step(run, s);
    }
    tw_report *r = diagnose(run);
    const tw_finding *f = finding(r, "data_loading_bound");
    assert_non_null(f);
    assert_true(f->value > 0.6 && f->value < 0.7);
    assert_int_equal(f->severity, TW_SEV_WARNING);
    tw_report_free(r);
    tw_run_free(run);
}

static void test_stall_with_timestamps(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int i = 0; i < 100; i++) {
        sample s = healthy(0, i);
        if (i >= 60)
            s.time += 600; /* ten minutes with no step after step 590 */
        add_step(run, s);
    }
    tw_report *r = diagnose(run);
    const tw_finding *f = finding(r, "stall");
    assert_non_null(f);
    assert_true(fabs(f->value - 605) < 1e-6);
    assert_int_equal(f->step, 600);
    tw_report_free(r);
    tw_run_free(run);
}

static void test_gap_across_evaluation_is_not_a_stall(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int i = 0; i < 100; i++) {
        sample s = healthy(0, i);
        if (i == 60)
            add_event(run, TW_EV_CHECKPOINT, 9999, "save checkpoint at /tmp/x");
        if (i >= 60)
            s.time += 600;
        add_step(run, s);
    }
    tw_report *r = diagnose(run);
    assert_null(finding(r, "stall"));
    tw_report_free(r);
    tw_run_free(run);
}

static void test_memory_growth_projects_oom(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int i = 0; i < 100; i++) {
        sample s = healthy(0, i);
        s.mem = 4e9 + i * 5e7;
        add_step(run, s);
    }
    tw_thresholds t;
    tw_thresholds_default(&t);
    t.device_memory = 16.0 * 1024 * 1024 * 1024;
    tw_report *r;
    assert_int_equal(tw_diagnose(run, &t, &r), 0);
    const tw_finding *f = finding(r, "memory_growth");
    assert_non_null(f);
    assert_non_null(strstr(f->evidence, "device is full around step"));
    tw_report_free(r);
    tw_run_free(run);
}

static void test_memory_spike_is_info(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int i = 0; i < 100; i++) {
        sample s = healthy(0, i);
        if (i == 40)
            s.mem = 20e9;
        add_step(run, s);
    }
    tw_report *r = diagnose(run);
    const tw_finding *f = finding(r, "memory_spike");
    assert_non_null(f);
    assert_int_equal(f->step, 400);
    assert_int_equal(f->severity, TW_SEV_INFO);
    assert_null(finding(r, "memory_growth"));
    assert_true(r->healthy);
    tw_report_free(r);
    tw_run_free(run);
}

static void test_throughput_drop(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int i = 0; i < 100; i++) {
        sample s = healthy(0, i);
        s.batch = i < 50 ? 0.5 : 1.2;
        add_step(run, s);
    }
    tw_report *r = diagnose(run);
    assert_non_null(finding(r, "throughput_drop"));
    tw_report_free(r);
    tw_run_free(run);
}

static void test_divergence_and_plateau(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int i = 0; i < 400; i++) {
        sample s = healthy(0, i);
        s.loss = i < 200 ? 2.0 - i * 0.005 : 1.0 + (i - 200) * 0.02;
        add_step(run, s);
    }
    tw_report *r = diagnose(run);
    assert_non_null(finding(r, "divergence"));
    tw_report_free(r);
    tw_run_free(run);
    run = new_run();
    for (int i = 0; i < 100; i++) {
        sample s = healthy(0, i);
        s.loss = 1.0 + 0.001 * (i % 5);
        add_step(run, s);
    }
    r = diagnose(run);
    assert_non_null(finding(r, "plateau"));
    assert_null(finding(r, "divergence"));
    tw_report_free(r);
    tw_run_free(run);
}

/* A short run (48 losses) that falls from 9 to 2 and climbs back to 8
 * diverged though it ends below its start; a short noisy loss near zero
 * whose medians move 2x by chance did not. */
static void test_divergence_short_run(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int i = 0; i < 48; i++) {
        sample s = healthy(0, i);
        s.loss = i < 24 ? 9.0 - i * 0.3 : 2.0 + (i - 24) * 0.25;
        add_step(run, s);
    }
    tw_report *r = diagnose(run);
    const tw_finding *f = finding(r, "divergence");
    assert_non_null(f);
    assert_int_equal(f->step, 320); /* 4.0: the first loss above 1.5x the best eighth, 2.625 */
    assert_null(finding(r, "plateau"));
    tw_report_free(r);
    tw_run_free(run);
    run = new_run();
    static const double noisy[] = {0.001, 0.05, 0.002, 0.04, 0.003, 0.03};
    for (int i = 0; i < 48; i++) { /* the last two eighths' medians doubled, their spread the same */
        sample s = healthy(0, i);
        s.loss = noisy[i % 6] * (i >= 36 ? 2 : 1);
        add_step(run, s);
    }
    r = diagnose(run);
    assert_null(finding(r, "divergence"));
    tw_report_free(r);
    tw_run_free(run);
}

static void test_restart_detected_from_step_going_back(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int i = 0; i < 50; i++)
        add_step(run, healthy(0, i));
    for (int i = 10; i < 80; i++)
        add_step(run, healthy(0, i));
    tw_report *r = diagnose(run);
    const tw_finding *f = finding(r, "restarts");
    assert_non_null(f);
    assert_non_null(strstr(f->evidence, "launch 1 trained from step 0 to 490"));
    assert_non_null(strstr(f->evidence, "launch 2 starts at synthetic.log:101 (step counter went back)"));
    /* every statistic belongs to one launch: the summary is the last one's */
    assert_int_equal(r->launch_count, 2);
    assert_int_equal(r->summary.first_step, 100);
    assert_int_equal(r->summary.step_records, 70);
    assert_int_equal(r->launches[0].summary.step_records, 50);
    assert_int_equal(r->launches[0].summary.last_step, 490);
    tw_report_free(r);
    tw_run_free(run);
}

/* A start line after the rank trained starts a launch; start lines with
 * nothing between them are one start; a data-wait share is never averaged
 * across launches. */
static void test_launches_split_at_start_lines(void **state)
{
    (void)state;
    tw_run *run = new_run();
    add_event(run, TW_EV_LAUNCH, 1, "init nccl context nranks: 2 local rank: 0 gpu id: 0 ring id: 0");
    add_event(run, TW_EV_LAUNCH, 2, "Please NOTE: device: 0, GPU Compute Capability: 8.0");
    for (int i = 0; i < 40; i++) {
        sample s = healthy(0, i);
        s.data = 0.4; /* data bound: 80% of a 0.5 s step */
        add_step(run, s);
    }
    add_event(run, TW_EV_EXCEPTION, 500, "RuntimeError: DataLoader worker (pid 7) is killed by signal");
    add_event(run, TW_EV_LAUNCH, 600, "init nccl context nranks: 2 local rank: 0 gpu id: 0 ring id: 0");
    add_event(run, TW_EV_LAUNCH, 601, "Please NOTE: device: 0, GPU Compute Capability: 8.0");
    for (int i = 40; i < 100; i++)
        add_step(run, healthy(0, i)); /* goes on from the checkpoint: no step back */
    tw_report *r = diagnose(run);
    assert_int_equal(r->launch_count, 2);
    assert_int_equal(r->launches[1].span.where.line, 600);
    assert_string_equal(r->launches[0].span.outcome, "crashed");
    assert_non_null(strstr(r->launches[0].span.outcome_detail, "DataLoader worker"));
    assert_true(r->summary.data_share < 0.1); /* the last launch's own */
    assert_true(r->launches[0].summary.data_share > 0.7);
    assert_null(finding(r, "crash")); /* the last launch did not crash */
    assert_null(finding(r, "data_loading_bound"));
    const tw_finding *f = finding(r, "failed_launches");
    assert_non_null(f);
    assert_int_equal(f->launch, 0);
    assert_non_null(strstr(f->evidence, "launch 1: crashed: RuntimeError: DataLoader worker"));
    tw_report_free(r);
    /* the first launch alone, and every launch */
    tw_thresholds t;
    tw_thresholds_default(&t);
    assert_int_equal(tw_diagnose_launch(run, &t, 1, &r), TW_OK);
    assert_non_null(finding(r, "crash"));
    assert_non_null(finding(r, "data_loading_bound"));
    assert_null(finding(r, "failed_launches"));
    tw_report_free(r);
    assert_int_equal(tw_diagnose_launch(run, &t, TW_LAUNCH_ALL, &r), TW_OK);
    assert_int_equal(finding(r, "crash")->launch, 1);
    tw_report_free(r);
    assert_int_equal(tw_diagnose_launch(run, &t, 3, &r), TW_EINVAL);
    tw_run_free(run);
}

/* One launch: nothing about launches is said. */
static void test_one_launch_has_no_launch_findings(void **state)
{
    (void)state;
    tw_run *run = new_run();
    add_event(run, TW_EV_LAUNCH, 1, "init nccl context nranks: 2 local rank: 0 gpu id: 0 ring id: 0");
    add_event(run, TW_EV_LAUNCH, 2, "init nccl context nranks: 2 local rank: 0 gpu id: 0 ring id: 10");
    for (int i = 0; i < 100; i++)
        add_step(run, healthy(0, i));
    tw_report *r = diagnose(run);
    assert_int_equal(r->launch_count, 1);
    assert_true(r->healthy);
    assert_int_equal(r->finding_count, 0);
    tw_report_free(r);
    tw_run_free(run);
}

static void test_straggler_and_rank_stopped(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int rank = 0; rank < 4; rank++) {
        for (int i = 0; i < (rank == 3 ? 40 : 100); i++) {
            sample s = healthy(rank, i);
            if (rank == 2)
                s.batch *= 1.6;
            add_step(run, s);
        }
    }
    tw_report *r = diagnose(run);
    const tw_finding *slow = finding(r, "straggler");
    assert_non_null(slow);
    assert_int_equal(slow->rank, 2);
    const tw_finding *stop = finding(r, "rank_stopped");
    assert_non_null(stop);
    assert_int_equal(stop->rank, 3);
    assert_int_equal(stop->severity, TW_SEV_ERROR);
    assert_int_equal(r->summary.ranks, 4);
    tw_report_free(r);
    tw_run_free(run);
}

static void test_crash_after_last_step_is_an_error(void **state)
{
    (void)state;
    tw_run *run = new_run();
    add_event(run, TW_EV_EXCEPTION, 1, "ModuleNotFoundError: No module named 'x'");
    for (int i = 0; i < 30; i++)
        add_step(run, healthy(0, i));
    add_event(run, TW_EV_OOM, 500, "RuntimeError: CUDA out of memory");
    add_event(run, TW_EV_EXCEPTION, 500, "RuntimeError: CUDA out of memory");
    tw_report *r = diagnose(run);
    assert_non_null(finding(r, "oom"));
    const tw_finding *crash = finding(r, "crash");
    assert_non_null(crash);
    assert_int_equal(crash->step, 290);
    assert_non_null(finding(r, "failed_launches"));
    assert_int_equal(r->findings[0].severity, TW_SEV_ERROR); /* errors first */
    tw_report_free(r);
    tw_run_free(run);
}

static void add_eval(tw_run *run, int rank, uint64_t line, const char *a, double va, const char *b, double vb)
{
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_EVAL;
    r.rank = rank;
    r.source.file = "synthetic.log";
    r.source.line = line;
    tw_record_set_metric(&r, a, strlen(a), va);
    tw_record_set_metric(&r, b, strlen(b), vb);
    tw_run_add(run, &r);
}

static void test_top1_above_top5_is_a_contradiction(void **state)
{
    (void)state;
    tw_run *run = new_run();
    add_eval(run, 0, 10, "acc_top1", 0.7, "acc_top5", 0.9);      /* fine */
    add_eval(run, 0, 11, "precision@1", 0.9, "precision@5", 0.5); /* not monotone in k: fine */
    add_eval(run, 0, 12, "top1", 0.4, "top10", 0.6);              /* fine: 1 < 10 compared as numbers */
    tw_report *r = diagnose(run);
    assert_null(finding(r, "eval_contradiction"));
    tw_report_free(r);
    add_eval(run, 3, 20, "Top_1", 0.48, "Top_5", 0.18);
    add_eval(run, 3, 21, "recall@1", 0.8, "recall@10", 0.3);
    r = diagnose(run);
    const tw_finding *f = finding(r, "eval_contradiction");
    assert_non_null(f);
    assert_int_equal(f->rank, 3);
    assert_int_equal(f->where.line, 20);
    assert_non_null(strstr(f->title, "Top_1 0.48 above Top_5 0.18"));
    assert_non_null(strstr(f->evidence, "2 evaluation records like this"));
    tw_report_free(r);
    tw_run_free(run);
}

static void test_bounded_memory_for_long_runs(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int i = 0; i < 200000; i++) {
        sample s = healthy(0, i);
        s.loss = 2.0 / (1 + i / 1000.0); /* still improving at the end */
        add_step(run, s);
    }
    tw_report *r = diagnose(run);
    assert_int_equal(r->summary.step_records, 200000);
    assert_int_equal(r->summary.last_step, 1999990);
    assert_true(r->healthy);
    tw_report_free(r);
    tw_run_free(run);
}

/* Rank numbers are names, not indexes: far apart and large ones stay apart. */
static void test_large_rank_numbers_are_kept_apart(void **state)
{
    (void)state;
    tw_run *run = new_run();
    const int ranks[] = {7000, 5000, 2147483647, 1023};
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 100; i++) {
            sample s = healthy(ranks[k], i);
            if (ranks[k] == 2147483647)
                s.batch *= 1.6;
            add_step(run, s);
        }
    }
    tw_report *r = diagnose(run);
    assert_int_equal(r->summary.ranks, 4);
    assert_int_equal(r->summary.step_records, 400);
    assert_null(finding(r, "restarts"));
    assert_null(finding(r, "loss_spikes"));
    const tw_finding *slow = finding(r, "straggler");
    assert_non_null(slow);
    assert_int_equal(slow->rank, 2147483647);
    assert_int_equal(r->finding_count, 1);
    tw_report_free(r);
    tw_run_free(run);
}

static void test_ranks_past_the_limit_are_reported_not_merged(void **state)
{
    (void)state;
    tw_run *run = new_run();
    run->rank_limit = 3;
    for (int rank = 10; rank < 15; rank++) {
        for (int i = 0; i < 20; i++)
            add_step(run, healthy(rank, i));
    }
    tw_report *r = diagnose(run);
    assert_int_equal(r->summary.ranks, 3);
    const tw_finding *f = finding(r, "ranks_over_limit");
    assert_non_null(f);
    assert_int_equal(f->severity, TW_SEV_WARNING);
    assert_true(f->value == 40);
    assert_non_null(strstr(f->title, "More than 3 distinct ranks: 40 step records"));
    assert_non_null(strstr(f->evidence, "rank 13"));
    assert_null(finding(r, "restarts"));
    tw_report_free(r);
    tw_run_free(run);
}

/* A bin's middle lies above a constant 100 ms (and above a largest 622 ms):
 * quantiles stay within what was seen. */
static void test_step_time_quantiles_within_observed_range(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int i = 0; i < 100; i++) {
        sample s = healthy(0, i);
        s.batch = 0.1;
        add_step(run, s);
    }
    tw_report *r = diagnose(run);
    assert_true(r->summary.step_time_p50 == 0.1 && r->summary.step_time_p99 == 0.1);
    assert_true(r->summary.step_time_max == 0.1);
    tw_report_free(r);
    tw_run_free(run);

    run = new_run();
    for (int i = 0; i < 100; i++) {
        sample s = healthy(0, i);
        s.batch = i < 98 ? 0.58 : 0.622;
        add_step(run, s);
    }
    r = diagnose(run);
    assert_true(r->summary.step_time_max == 0.622);
    assert_true(r->summary.step_time_p99 <= 0.622 && r->summary.step_time_p99 > 0.6);
    assert_true(fabs(r->summary.step_time_p50 - 0.58) < 0.58 * 0.012); /* within half a bin */
    tw_report_free(r);
    tw_run_free(run);
}

/* One record per epoch ("step 7/7 - 600ms/step" after "Epoch e/60"), no
 * timestamps: 60 x 7 steps of 0.6 s, not one step time per record. */
static void test_duration_without_timestamps_is_steps_times_step_time(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int e = 1; e <= 60; e++) {
        tw_record r;
        tw_record_init(&r);
        r.source.file = "hapi.log";
        r.source.line = (uint64_t)e * 5;
        r.epoch = e;
        r.epoch_total = 60;
        r.step = 7;
        r.step_total = 7;
        r.loss = 1.0 / e;
        r.batch_time = 0.6;
        r.fields = TW_F_LOSS | TW_F_BATCH_TIME;
        tw_run_add(run, &r);
    }
    tw_report *r = diagnose(run);
    assert_false(r->summary.duration_from_timestamps);
    assert_true(fabs(r->summary.duration - 420 * 0.6) < 1e-9);
    tw_report_free(r);
    tw_run_free(run);
}

static void add_metric_step(tw_run *run, int i, double loss_ce, double acc)
{
    tw_record r;
    tw_record_init(&r);
    r.source.file = "metrics.log";
    r.source.line = (uint64_t)i + 1;
    r.global_step = i;
    r.loss = loss_ce + 0.5;
    r.fields = TW_F_LOSS;
    tw_record_set_metric(&r, "loss_ce", 7, loss_ce);
    tw_record_set_metric(&r, "acc", 3, acc);
    tw_run_add(run, &r);
}

/* A loss part's best is the lowest over every record, not the last one. */
static void test_train_metric_best_over_all_records(void **state)
{
    (void)state;
    tw_run *run = new_run();
    add_metric_step(run, 0, NAN, 0.1);
    for (int i = 1; i < 50; i++)
        add_metric_step(run, i, i == 20 ? 0.25 : 1.0, i == 30 ? 0.9 : 0.5);
    tw_report *r = diagnose(run);
    assert_int_equal(r->summary.train_metric_count, 2);
    const tw_metric_summary *ce = &r->summary.train_metrics[0], *acc = &r->summary.train_metrics[1];
    assert_string_equal(ce->name, "loss_ce");
    assert_int_equal(ce->count, 50);
    assert_true(ce->last == 1.0 && ce->best == 0.25);
    assert_int_equal(ce->best_step, 20);
    assert_string_equal(acc->name, "acc");
    assert_true(acc->best == 0.9);
    assert_int_equal(acc->best_step, 30);
    assert_true(r->summary.best_loss == 0.75);
    assert_int_equal(r->summary.best_loss_step, 20);
    tw_report_free(r);
    tw_run_free(run);
}

/* What the log never printed stays unknown: NAN or -1, not 0. */
static void test_unknown_summary_values_are_not_zero(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int i = 0; i < 10; i++) {
        tw_record r;
        tw_record_init(&r);
        r.source.file = "bare.log";
        r.global_step = i;
        r.loss = 1;
        r.fields = TW_F_LOSS;
        tw_run_add(run, &r);
    }
    tw_report *r = diagnose(run);
    assert_true(isnan(r->summary.peak_mem_bytes));
    assert_true(isnan(r->summary.step_time_max));
    assert_true(isnan(r->summary.duration));
    assert_int_equal(r->summary.last_epoch, -1);
    assert_int_equal(r->summary.epoch_total, -1);
    tw_report_free(r);
    tw_run_free(run);
}

/* Rank 2 raises an error at t0 + 200 s; ranks 0, 1 and 3 log a few more
 * steps and stop without an error: rank 2 is the cause, the others its
 * victims with how long after it they stopped, and none is blamed for
 * stopping early. */
static void test_first_failing_rank_names_ranks_that_stopped_after_it(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int k = 0; k < 4; k++) {
        int last = k == 2 ? 40 : 42;
        for (int i = 0; i <= last; i++)
            add_step(run, healthy(k, i));
    }
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_EVENT;
    r.event = TW_EV_EXCEPTION;
    r.rank = 2;
    r.source.file = "synthetic.log";
    r.source.line = 500;
    r.time = 1e9 + 40 * 5.0 + 1, r.fields |= TW_F_TIME;
    tw_record_set_text(r.message, "RuntimeError: boom", 18);
    tw_run_add(run, &r);
    tw_report *rep = diagnose(run);
    const tw_finding *f = finding(rep, "crash");
    assert_non_null(f);
    assert_int_equal(f->rank, 2);
    assert_string_equal(f->title, "Rank 2 failed first; ranks 0, 1, 3 went down with it");
    assert_non_null(strstr(f->evidence, "rank 0: stopped logging at step 420, 9.0s after rank 2's failure"));
    assert_non_null(strstr(f->evidence, "rank 3: stopped logging at step 420, 9.0s after"));
    assert_null(finding(rep, "rank_stopped"));
    tw_report_free(rep);
    tw_run_free(run);
}

/* A ratio of 1e308 is written as 6.67e+307, not 308 digits. */
static void test_huge_values_in_titles_stay_short(void **state)
{
    (void)state;
    tw_run *run = new_run();
    for (int i = 0; i < 50; i++) {
        sample s = healthy(0, i);
        if (i == 40)
            s.loss = 1e308, s.batch = 1e308;
        add_step(run, s);
    }
    tw_report *r = diagnose(run);
    const tw_finding *f = finding(r, "loss_spikes");
    assert_non_null(f);
    assert_non_null(strstr(f->title, "e+30"));
    assert_true(strlen(f->title) < 80);
    for (int i = 0; i < r->finding_count; i++) {
        assert_null(strstr(r->findings[i].title, "0000000000"));
        assert_null(strstr(r->findings[i].evidence, "0000000000"));
    }
    tw_report_free(r);
    tw_run_free(run);
}

/* Thousands of inputs keep their own names, even when each name is built in
 * the same buffer (the address a record gives says nothing), and every
 * input is listed in the report. */
static void test_thousands_of_files_keep_their_names(void **state)
{
    (void)state;
    tw_run *run;
    assert_int_equal(tw_run_new(&run, NULL), TW_OK);
    char name[64];
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof name, "log/workerlog.%d", i);
        tw_record r;
        tw_record_init(&r);
        r.kind = TW_REC_STEP;
        r.rank = i;
        r.global_step = 10;
        r.source.file = name;
        r.source.line = 1;
        tw_run_add(run, &r);
        tw_run_note_input(run, name, "deepspeed", 1, 1, NULL);
    }
    assert_int_equal(run->file_count, 5000);
    assert_string_equal(run->files[4999], "log/workerlog.4999");
    assert_string_equal(run->files[1234], "log/workerlog.1234");
    tw_report *r;
    tw_thresholds th;
    tw_thresholds_default(&th);
    assert_int_equal(tw_diagnose(run, &th, &r), TW_OK);
    assert_int_equal(r->input_count, 5000);
    assert_string_equal(r->inputs[4321].path, "log/workerlog.4321");
    tw_report_free(r);
    tw_run_free(run);
}

static void add_text(tw_run *run, tw_record_kind kind, int rank, uint64_t line, const char *msg)
{
    tw_record r;
    tw_record_init(&r);
    r.kind = kind;
    r.event = TW_EV_LAUNCH;
    r.rank = rank;
    r.source.file = rank ? "workerlog.1" : "workerlog.0";
    r.source.line = line;
    tw_record_set_text(r.message, msg, strlen(msg));
    tw_run_add(run, &r);
}

/* Two data-bound ranks on two GPUs: GPU 0 mostly idle, GPU 1 busy. */
static tw_report *two_gpus(bool say_which)
{
    tw_run *run = new_run();
    if (say_which) { /* Paddle's NCCL init line (a start line) and an NCCL INFO line of PyTorch's */
        add_text(run, TW_REC_EVENT, 0, 1, "init nccl context nranks: 2 local rank: 0 gpu id: 0 ring id: 0");
        add_text(run, TW_REC_LINE, 1, 1,
                 "node-0:15835:16059 [1] NCCL INFO comm 0x7fb4700030d0 rank 1 nranks 2 cudaDev 1 busId b2000 - "
                 "Init COMPLETE");
    }
    for (int i = 0; i < 100; i++) {
        for (int rank = 0; rank < 2; rank++) {
            sample s = healthy(rank, i);
            s.data = 0.4;
            add_step(run, s);
            tw_gpu_sample g = {.gpu = rank,
                               .time = s.time,
                               .util = rank ? 90 : (i % 2 ? 0 : 20),
                               .mem_used = 1e9,
                               .mem_total = 16e9,
                               .line = (uint64_t)(2 * i + rank + 1)};
            assert_int_equal(tw_run_add_gpu(run, "gpu.csv", &g), 0);
        }
    }
    tw_report *report = diagnose(run);
    tw_run_free(run);
    return report;
}

static void test_gpu_samples_go_to_the_rank_that_used_the_gpu(void **state)
{
    (void)state;
    tw_report *r = two_gpus(true);
    const tw_gpu_summary *g = &r->summary.gpu;
    assert_int_equal(g->rank_count, 2);
    assert_int_equal(g->rank_gpu_count, 2);
    assert_int_equal(g->rank_gpus[0].rank, 0);
    assert_int_equal(g->rank_gpus[0].gpu, 0);
    assert_string_equal(g->rank_gpus[0].how, "gpu id: 0");
    assert_true(fabs(g->rank_gpus[0].util_mean - 10) < 1e-9);
    assert_true(fabs(g->rank_gpus[0].util_zero_share - 0.5) < 1e-9);
    assert_int_equal(g->rank_gpus[1].gpu, 1);
    assert_string_equal(g->rank_gpus[1].how, "cudaDev 1");
    assert_true(fabs(g->rank_gpus[1].util_mean - 90) < 1e-9);
    const tw_finding *f = finding(r, "data_loading_bound");
    assert_non_null(f);
    char want[128];
    snprintf(want, sizeof want, "rank %d used GPU %d (", f->rank, f->rank);
    assert_non_null(strstr(f->evidence, want));
    assert_null(strstr(f->evidence, "unknown"));
    tw_report_free(r);
}

static void test_gpu_of_each_rank_unknown_is_said(void **state)
{
    (void)state;
    tw_report *r = two_gpus(false);
    assert_int_equal(r->summary.gpu.rank_gpu_count, 0);
    const tw_finding *f = finding(r, "data_loading_bound");
    assert_non_null(f);
    assert_non_null(strstr(f->evidence, "which GPU this rank used is unknown"));
    tw_report_free(r);
}

/* Gaps between records stamped in whole seconds are mostly 0: their median
 * is 0, not the histogram's first bin (it read 1 us, and a healthy demo log
 * got a 24224x step_time_mismatch). */
static void test_quantile_of_zeros_is_zero(void **state)
{
    (void)state;
    tw_hist h = {0};
    for (int i = 0; i < 30; i++)
        tw_hist_add(&h, i % 4 == 3 ? 1.0 : 0.0);
    assert_true(tw_hist_quantile(&h, 0.5) == 0.0);
    assert_true(tw_hist_quantile(&h, 1.0) > 0.9);
    tw_hist tiny = {0};
    tw_hist_add(&tiny, 2e-7);
    tw_hist_add(&tiny, 3e-7);
    assert_true(tw_hist_quantile(&tiny, 0.5) == 2e-7); /* below the first bin: the smallest seen */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantile_of_zeros_is_zero),
        cmocka_unit_test(test_healthy_run_has_no_findings),
        cmocka_unit_test(test_thousands_of_files_keep_their_names),
        cmocka_unit_test(test_nan_cites_first_step_and_lr_jump),
        cmocka_unit_test(test_data_loading_bound),
        cmocka_unit_test(test_stall_with_timestamps),
        cmocka_unit_test(test_gap_across_evaluation_is_not_a_stall),
        cmocka_unit_test(test_memory_growth_projects_oom),
        cmocka_unit_test(test_memory_spike_is_info),
        cmocka_unit_test(test_first_failing_rank_names_ranks_that_stopped_after_it),
        cmocka_unit_test(test_throughput_drop),
        cmocka_unit_test(test_divergence_and_plateau),
        cmocka_unit_test(test_divergence_short_run),
        cmocka_unit_test(test_restart_detected_from_step_going_back),
        cmocka_unit_test(test_launches_split_at_start_lines),
        cmocka_unit_test(test_one_launch_has_no_launch_findings),
        cmocka_unit_test(test_straggler_and_rank_stopped),
        cmocka_unit_test(test_crash_after_last_step_is_an_error),
        cmocka_unit_test(test_bounded_memory_for_long_runs),
        cmocka_unit_test(test_top1_above_top5_is_a_contradiction),
        cmocka_unit_test(test_large_rank_numbers_are_kept_apart),
        cmocka_unit_test(test_ranks_past_the_limit_are_reported_not_merged),
        cmocka_unit_test(test_step_time_quantiles_within_observed_range),
        cmocka_unit_test(test_duration_without_timestamps_is_steps_times_step_time),
        cmocka_unit_test(test_train_metric_best_over_all_records),
        cmocka_unit_test(test_unknown_summary_values_are_not_zero),
        cmocka_unit_test(test_huge_values_in_titles_stay_short),
        cmocka_unit_test(test_gpu_samples_go_to_the_rank_that_used_the_gpu),
        cmocka_unit_test(test_gpu_of_each_rank_unknown_is_said),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
