/*
 * test_supervise.c: the pieces of live supervision that must never fail the
 * training job they watch: the rotating log file (lines never split across
 * files, a full disk drops whole lines and recovers), the write-then-rename
 * output file, and the live metrics (any rank number, series refused at the
 * family limit skipped, a finished rank not stalled, stalls reported).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/outfile.h"
#include "log/rotate.h"
#include "trainwatch/error.h"
#include "trainwatch/live.h"
#include "trainwatch/metrics.h"

static char dir[64];

static int make_dir(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tw-supervise-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The whole text of a file, NUL-terminated (caller frees), or NULL. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = 0;
    fclose(f);
    if (len)
        *len = got;
    return buf;
}

/* Lines of different lengths written in pieces cut anywhere, including in
 * the middle of lines: every file holds whole lines only, and the files,
 * oldest first, are the end of the input. */
static void rotation_never_splits_a_line(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/split.log", dir);
    tw_rotating_file *f;
    assert_int_equal(tw_rotating_open(path, 300, 3, &f), TW_OK);
    char input[8192];
    size_t len = 0;
    for (int i = 0; len < sizeof input - 100; i++)
        len += (size_t)snprintf(input + len, sizeof input - len, "step %d loss %.*s\n", i, i % 37,
                                "0123456789012345678901234567890123456789");
    srand(7);
    for (size_t at = 0; at < len;) {
        size_t n = 1 + (size_t)rand() % 23;
        if (n > len - at)
            n = len - at;
        assert_int_equal(tw_rotating_write(f, input + at, n), TW_OK);
        at += n;
    }
    assert_int_equal(tw_rotating_close(f), TW_OK);
    char kept[8192] = "";
    for (int g = 3; g >= 0; g--) {
        char name[160];
        if (g)
            snprintf(name, sizeof name, "%s.%d", path, g);
        else
            snprintf(name, sizeof name, "%s", path);
        size_t n = 0;
        char *text = slurp(name, &n);
        assert_non_null(text);
        assert_true(n > 0 && n <= 300);
        assert_int_equal(text[n - 1], '\n');
        assert_memory_equal(text, "step ", 5); /* starts at a line's start */
        strcat(kept, text);
        free(text);
    }
    size_t k = strlen(kept);
    assert_true(k < len);
    assert_memory_equal(kept, input + len - k, k);
    assert_true(k == len || input[len - k - 1] == '\n');
}

/* With line tracking, every line given (in pieces cut anywhere, after
 * lines an earlier run left in the file) is found in the generation that
 * holds it, at its line there; lines rotated away are said to be gone. */
static void tracked_lines_are_found_in_their_generation(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/track.log", dir);
    FILE *old = fopen(path, "w");
    assert_non_null(old);
    fputs("left by an earlier run 1\nleft by an earlier run 2\n", old);
    fclose(old);
    tw_rotating_file *f;
    assert_int_equal(tw_rotating_open(path, 400, 3, &f), TW_OK);
    assert_int_equal(tw_rotating_track_lines(f), TW_OK);
    enum { LINES = 120 };
    char input[8192];
    size_t len = 0;
    for (int i = 1; i <= LINES; i++)
        len += (size_t)snprintf(input + len, sizeof input - len, "line %d %.*s\n", i, i % 29,
                                "abcdefghijklmnopqrstuvwxyzabcdefgh");
    srand(11);
    for (size_t at = 0; at < len;) {
        size_t n = 1 + (size_t)rand() % 31;
        if (n > len - at)
            n = len - at;
        assert_int_equal(tw_rotating_write(f, input + at, n), TW_OK);
        at += n;
    }
    assert_int_equal(tw_rotating_flush(f), TW_OK);
    int64_t offsets[8];
    assert_int_equal(tw_rotating_generations(f, offsets, 8), 4);
    int found = 0, gone = 0;
    for (uint64_t line = 1; line <= LINES; line++) {
        uint64_t local = 0;
        int gen = tw_rotating_locate(f, line, &local);
        if (gen < 0) {
            assert_int_equal(found, 0); /* only the oldest lines are gone */
            gone++;
            continue;
        }
        char name[160], want[32];
        snprintf(name, sizeof name, gen ? "%s.%d" : "%s", path, gen);
        char *text = slurp(name, NULL);
        assert_non_null(text);
        char *at = text;
        for (uint64_t k = 1; k < local && at; k++)
            at = strchr(at, '\n') ? strchr(at, '\n') + 1 : NULL;
        assert_non_null(at);
        snprintf(want, sizeof want, "line %llu ", (unsigned long long)line);
        assert_memory_equal(at, want, strlen(want));
        free(text);
        found++;
    }
    assert_true(gone > 0 && found > 0);
    assert_int_equal(tw_rotating_locate(f, 0, &(uint64_t){0}), -1);
    assert_int_equal(tw_rotating_close(f), TW_OK);
}

/* Without rotation, lines given follow the lines the file held already. */
static void tracked_lines_follow_what_the_file_held(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/track-append.log", dir);
    FILE *old = fopen(path, "w");
    assert_non_null(old);
    fputs("one\ntwo\n", old);
    fclose(old);
    tw_rotating_file *f;
    assert_int_equal(tw_rotating_open(path, 0, 0, &f), TW_OK);
    assert_int_equal(tw_rotating_track_lines(f), TW_OK);
    assert_int_equal(tw_rotating_write(f, "three\nfour\n", 11), TW_OK);
    uint64_t local = 0;
    assert_int_equal(tw_rotating_locate(f, 2, &local), 0);
    assert_int_equal(local, 4);
    assert_int_equal(tw_rotating_close(f), TW_OK);
}

/* A line without its newline yet is held, then written whole at close. */
static void a_partial_line_is_written_at_close(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/partial.log", dir);
    tw_rotating_file *f;
    assert_int_equal(tw_rotating_open(path, 0, 0, &f), TW_OK);
    assert_int_equal(tw_rotating_write(f, "one\ntw", 6), TW_OK);
    assert_int_equal(tw_rotating_write(f, "o", 1), TW_OK);
    assert_int_equal(tw_rotating_close(f), TW_OK);
    char *text = slurp(path, NULL);
    assert_string_equal(text, "one\ntwo");
    free(text);
}

/* Writes that fail (here: past RLIMIT_FSIZE, as a full disk would) drop
 * whole lines, leave no partial line in the file, are counted, and writing
 * resumes with the next line once there is room. */
static void a_full_disk_drops_whole_lines_and_recovers(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/full.log", dir);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit small = {100, old.rlim_max};
    tw_rotating_file *f;
    assert_int_equal(tw_rotating_open(path, 0, 0, &f), TW_OK);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    const char *line = "0123456789012345678901234567890123456789\n"; /* 41 bytes */
    assert_int_equal(tw_rotating_write(f, line, 41), TW_OK);
    assert_int_equal(tw_rotating_write(f, line, 41), TW_OK);
    assert_false(tw_rotating_failing(f));
    assert_int_not_equal(tw_rotating_write(f, line, 41), TW_OK); /* 82 + 41 > 100 */
    assert_true(tw_rotating_failing(f));
    assert_int_equal(tw_rotating_dropped(f), 41);
    /* a line held until its newline is dropped whole when it then fails */
    assert_int_equal(tw_rotating_write(f, "a line that does not fit", 24), TW_OK);
    assert_int_not_equal(tw_rotating_write(f, " at all\n", 8), TW_OK);
    assert_int_equal(tw_rotating_dropped(f), 41 + 32);
    /* a line too long to hold is written as it comes: when that fails, the
     * rest of it is dropped with it, up to its newline */
    size_t huge = TW_ROTATE_HOLD_MAX + 100;
    char *big = malloc(huge);
    memset(big, 'x', huge);
    assert_int_not_equal(tw_rotating_write(f, big, huge), TW_OK);
    free(big);
    assert_int_equal(tw_rotating_write(f, " and its end\n", 13), TW_OK);
    assert_int_equal(tw_rotating_dropped(f), 41 + 32 + huge + 13);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 82);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    assert_int_equal(tw_rotating_write(f, "back\n", 5), TW_OK);
    assert_false(tw_rotating_failing(f));
    assert_int_equal(tw_rotating_close(f), TW_OK);
    char *text = slurp(path, NULL);
    assert_int_equal(strlen(text), 87);
    assert_string_equal(text + 82, "back\n");
    free(text);
    signal(SIGXFSZ, SIG_DFL);
}

static void outfile_is_whole_or_absent(void **state)
{
    (void)state;
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/report.json", dir);
    assert_int_equal(tw_outfile_check(path, err, sizeof err), 0);
    tw_outfile o;
    assert_int_equal(tw_outfile_open(&o, path, err, sizeof err), 0);
    fputs("{\"a\": 1}\n", o.f);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0); /* not there before commit */
    assert_int_equal(tw_outfile_commit(&o, err, sizeof err), 0);
    char *text = slurp(path, NULL);
    assert_string_equal(text, "{\"a\": 1}\n");
    free(text);
    /* a directory that does not exist, and a directory as the target */
    char bad[160];
    snprintf(bad, sizeof bad, "%s/missing/report.json", dir);
    assert_int_not_equal(tw_outfile_check(bad, err, sizeof err), 0);
    assert_non_null(strstr(err, bad));
    assert_int_not_equal(tw_outfile_check(dir, err, sizeof err), 0);
    /* a failed write: nothing replaces the old file, no temporary file stays */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, small;
    getrlimit(RLIMIT_FSIZE, &old);
    small = (struct rlimit){16, old.rlim_max};
    assert_int_equal(tw_outfile_open(&o, path, err, sizeof err), 0);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    for (int i = 0; i < 100; i++)
        fputs("0123456789", o.f);
    assert_int_not_equal(tw_outfile_commit(&o, err, sizeof err), 0);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_DFL);
    assert_non_null(strstr(err, path));
    text = slurp(path, NULL);
    assert_string_equal(text, "{\"a\": 1}\n");
    free(text);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp >/dev/null", dir);
    assert_int_not_equal(system(cmd), 0);
}

/* Updates on the handle of a refused series (NULL) do nothing. */
static void updates_on_a_refused_series_do_nothing(void **state)
{
    (void)state;
    tw_registry *r;
    assert_int_equal(tw_registry_new(&r), TW_OK);
    const char *names[] = {"rank"};
    tw_family_options o = {.name = "x_total",
                           .help = "x",
                           .type = TW_METRIC_COUNTER,
                           .label_count = 1,
                           .label_names = names,
                           .series_limit = 1};
    tw_family *f;
    assert_int_equal(tw_family_register(r, &o, &f), TW_OK);
    tw_cell *a, *b = (tw_cell *)0x1;
    const char *v0[] = {"0"}, *v1[] = {"1"};
    assert_int_equal(tw_family_series(f, v0, &a), TW_OK);
    assert_int_equal(tw_family_series(f, v1, &b), TW_ELIMIT);
    assert_null(b);
    tw_counter_inc(b);
    assert_int_equal(tw_counter_add(b, 2), TW_OK);
    tw_gauge_set(b, 1);
    tw_gauge_inc(b);
    tw_histogram_observe(b, 1);
    tw_registry_free(r);
}

static tw_record step_record(int rank, int64_t step)
{
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_STEP;
    r.rank = rank;
    r.global_step = step;
    r.loss = 0.5;
    r.fields |= TW_F_LOSS;
    return r;
}

/* An event record of a rank. */
static tw_record event_record(int rank, tw_event_kind kind, int code)
{
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_EVENT;
    r.event = kind;
    r.exit_code = code;
    r.rank = rank;
    return r;
}

/* A registry with live metrics on it, run "j". */
static tw_live *live_on_new_registry(tw_registry **reg, double stall_after)
{
    assert_int_equal(tw_registry_new(reg), TW_OK);
    tw_live *l;
    tw_live_options o = {.registry = *reg, .run = "j", .stall_after = stall_after};
    assert_int_equal(tw_live_new(&o, &l), TW_OK);
    return l;
}

/* The metrics text of a registry, in a buffer the caller frees. */
static char *exposition(tw_registry *r)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(tw_registry_expose(r, TW_EXPOSE_TEXT, &text, &len), 0);
    return text;
}

/* Thousands of ranks: past the families' series limits the rest of the
 * series are refused and counted, nothing crashes; rank numbers above any
 * fixed table keep their own number. */
static void many_ranks_are_counted_not_fatal(void **state)
{
    (void)state;
    tw_registry *reg;
    tw_live *l = live_on_new_registry(&reg, 0);
    for (int rank = 0; rank < 3335; rank++) {
        tw_record r = step_record(rank, 10), e = event_record(rank, TW_EV_CHECKPOINT, 0);
        tw_live_record(l, &r);
        tw_live_record(l, &e);
    }
    tw_record big = step_record(7000, 3);
    tw_live_record(l, &big);
    tw_live_tick(l, 1e12);
    char *text = exposition(reg);
    assert_non_null(strstr(text, "trainwatch_dropped_series_total "));
    assert_null(strstr(text, "trainwatch_dropped_series_total 0\n"));
    assert_non_null(strstr(text, "trainwatch_train_step{run=\"j\",rank=\"3334\"} 10"));
    assert_non_null(strstr(text, "trainwatch_train_step{run=\"j\",rank=\"7000\"} 3"));
    free(text);
    tw_live_free(l);
    tw_registry_free(reg);
}

/* A rank that logged its end is not stalled, a rank that went quiet is, and
 * the stall is a finding for the report. */
static void finished_ranks_do_not_stall(void **state)
{
    (void)state;
    tw_registry *reg;
    tw_live *l = live_on_new_registry(&reg, 5);
    for (int rank = 0; rank < 2; rank++) {
        tw_record r = step_record(rank, 100);
        tw_live_record(l, &r);
    }
    tw_record end = event_record(0, TW_EV_EXIT, 0);
    tw_live_record(l, &end);
    tw_finding f;
    assert_false(tw_live_stall_finding(l, 0, &f));
    tw_live_tick(l, 1e12);
    char *text = exposition(reg);
    assert_non_null(strstr(text, "trainwatch_stalled{run=\"j\",rank=\"0\"} 0"));
    assert_non_null(strstr(text, "trainwatch_stalled{run=\"j\",rank=\"1\"} 1"));
    free(text);
    assert_true(tw_live_stall_finding(l, 1e12, &f));
    assert_string_equal(f.rule, "live_stall");
    assert_int_equal(f.rank, 1);
    assert_int_equal(f.step, 100);
    tw_live_free(l);
    tw_registry_free(reg);
}

/* Every named scalar of step and eval records is a series of its own; the
 * step counter's advance is counted as steps; no series carries job. */
static void training_scalars_and_steps_are_exported(void **state)
{
    (void)state;
    tw_registry *reg;
    tw_live *l = live_on_new_registry(&reg, 0);
    tw_record r = step_record(0, 10);
    tw_record_set_metric(&r, "grad_norm", 9, 1.5);
    tw_record_set_metric(&r, "tokens_per_sec", 14, 1200);
    tw_live_record(l, &r);
    r = step_record(0, 30);
    tw_record_set_metric(&r, "grad_norm", 9, 0.75);
    tw_live_record(l, &r);
    tw_live_record(l, &r); /* the same step again: no steps */
    tw_record e;
    tw_record_init(&e);
    e.kind = TW_REC_EVAL;
    e.rank = 0;
    tw_record_set_metric(&e, "top1", 4, 0.625);
    tw_record_set_metric(&e, "fps", 3, 80); /* not a result, still a scalar the log carries */
    tw_live_record(l, &e);
    char *text = exposition(reg);
    assert_non_null(strstr(text, "trainwatch_train_metric{run=\"j\",rank=\"0\",name=\"grad_norm\"} 0.75\n"));
    assert_non_null(strstr(text, "trainwatch_train_metric{run=\"j\",rank=\"0\",name=\"tokens_per_sec\"} 1200\n"));
    assert_non_null(strstr(text, "trainwatch_eval_metric{run=\"j\",rank=\"0\",name=\"top1\"} 0.625\n"));
    assert_non_null(strstr(text, "trainwatch_eval_metric{run=\"j\",rank=\"0\",name=\"fps\"} 80\n"));
    assert_non_null(strstr(text, "trainwatch_train_steps_total{run=\"j\",rank=\"0\"} 30\n"));
    assert_null(strstr(text, "job="));
    free(text);
    tw_live_free(l);
    tw_registry_free(reg);
}

/* Names past the family's series limit are refused and counted. */
static void training_scalars_stay_under_the_series_limit(void **state)
{
    (void)state;
    tw_registry *reg;
    tw_live *l = live_on_new_registry(&reg, 0);
    for (int i = 0; i < 1100; i++) {
        tw_record r = step_record(0, i + 1);
        char name[32];
        int n = snprintf(name, sizeof name, "m%d", i);
        tw_record_set_metric(&r, name, (size_t)n, i);
        tw_live_record(l, &r);
    }
    char *text = exposition(reg);
    assert_non_null(strstr(text, "name=\"m999\"}"));
    assert_null(strstr(text, "name=\"m1000\"}"));
    assert_non_null(strstr(text, "trainwatch_dropped_series_total 100\n"));
    free(text);
    tw_live_free(l);
    tw_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rotation_never_splits_a_line),
        cmocka_unit_test(tracked_lines_are_found_in_their_generation),
        cmocka_unit_test(tracked_lines_follow_what_the_file_held),
        cmocka_unit_test(a_partial_line_is_written_at_close),
        cmocka_unit_test(a_full_disk_drops_whole_lines_and_recovers),
        cmocka_unit_test(outfile_is_whole_or_absent),
        cmocka_unit_test(updates_on_a_refused_series_do_nothing),
        cmocka_unit_test(many_ranks_are_counted_not_fatal),
        cmocka_unit_test(finished_ranks_do_not_stall),
        cmocka_unit_test(training_scalars_and_steps_are_exported),
        cmocka_unit_test(training_scalars_stay_under_the_series_limit),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
