/*
 * test_parser.c: the driver between input and formats: files, gzip, stdin,
 * line splitting and its limits, bad input of every kind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "collect.h"
#include "trainwatch/error.h"
#include "trainwatch/record_json.h"

static const char step_line[] =
    "[2024/03/09 15:15:33] ppocr INFO: epoch: [1/2], global_step: %d, lr: 0.1, loss: 0.5, avg_reader_cost: 0.1 s, avg_batch_cost: 0.5 s\n";

static char *temp_path(const char *suffix)
{
    static char path[256];
    snprintf(path, sizeof path, "/tmp/tw_test_parser_%d%s", (int)getpid(), suffix);
    return path;
}

static collected_records *parse_file(const char *path, int *status)
{
    collected_records *c = calloc(1, sizeof *c);
    tw_parser *p;
    *status = tw_parser_open(&p, path, NULL, -1);
    if (*status != TW_OK)
        return c;
    *status = tw_parser_run(p, collect_record, c);
    c->stats = *tw_parser_stats(p);
    tw_parser_close(p);
    return c;
}

static void test_missing_file_and_directory(void **state)
{
    (void)state;
    tw_parser *p = NULL;
    assert_int_equal(tw_parser_open(&p, "/nonexistent/train.log", NULL, -1), TW_ENOENT);
    assert_int_equal(tw_parser_open(&p, "/tmp", NULL, -1), TW_EISDIR);
    assert_null(p);
    assert_string_equal(tw_strerror(TW_EISDIR), "is a directory");
}

static void test_empty_input(void **state)
{
    (void)state;
    collected_records *c = parse_text("", NULL, NULL);
    assert_int_equal(c->count, 0);
    assert_int_equal(c->stats.lines, 0);
    free(c);
}

static void test_crlf_and_truncated_last_line(void **state)
{
    (void)state;
    char text[1024];
    int n = snprintf(text, sizeof text, step_line, 10);
    text[n - 1] = '\r';
    snprintf(text + n, sizeof text - (size_t)n, "%s", "");
    strcat(text, "\n");
    char last[512];
    snprintf(last, sizeof last, step_line, 20);
    last[strlen(last) - 1] = '\0'; /* no newline at the end */
    strcat(text, last);
    collected_records *c = parse_text(text, NULL, NULL);
    assert_int_equal(count_kind(c, TW_REC_STEP), 2);
    assert_int_equal(nth_kind(c, TW_REC_STEP, 1)->global_step, 20);
    assert_int_equal(nth_kind(c, TW_REC_STEP, 1)->source.line, 2);
    free(c);
}

static void test_long_line_is_cut_and_counted(void **state)
{
    (void)state;
    size_t big = 3 * TW_LINE_MAX;
    char *text = malloc(big + 1024);
    int n = snprintf(text, 1024, step_line, 10) - 1; /* the step line goes on and on */
    memset(text + n, 'x', big);
    n += (int)big;
    text[n++] = '\n';
    snprintf(text + n, 512, step_line, 20);
    collected_records *c = parse_text(text, NULL, NULL);
    assert_int_equal(c->stats.lines_cut, 1);
    assert_int_equal(c->stats.lines, 2);
    assert_int_equal(count_kind(c, TW_REC_STEP), 2); /* the cut line's head still parses */
    assert_int_equal(nth_kind(c, TW_REC_STEP, 0)->global_step, 10);
    assert_int_equal(nth_kind(c, TW_REC_STEP, 1)->global_step, 20);
    assert_int_equal(nth_kind(c, TW_REC_STEP, 1)->source.line, 2);
    free(text);
    free(c);
}

/* ---- live input: where a follower resumes -------------------------- */

static const char olmo_header[] = "2025-12-27 22:14:36.270\thost:0\tolmo.train:990\tINFO\t[step=%d/100,epoch=0]\n";
static const char olmo_metric[] = "    train/CrossEntropyLoss=0.5\n";

static void push_text(tw_parser *p, const char *text, collected_records *c)
{
    tw_parser_push(p, text, strlen(text), collect_record, c);
}

static void test_resume_point_is_the_start_of_an_open_block(void **state)
{
    (void)state;
    collected_records *c = calloc(1, sizeof *c);
    tw_parser *p;
    assert_int_equal(tw_parser_new(&p, "olmo.log", NULL, -1), TW_OK);
    char header[256];
    tw_parser_resume r;
    snprintf(header, sizeof header, olmo_header, 1);
    push_text(p, header, c);
    push_text(p, olmo_metric, c);
    tw_parser_resume_point(p, &r);
    /* the block of step 1 is open: a restart reads it again from its header */
    assert_int_equal(r.back, strlen(header) + strlen(olmo_metric));
    assert_int_equal(r.line, 0);
    assert_int_equal(c->count, 0);
    /* step 2's header delivers step 1 and opens its own block */
    snprintf(header, sizeof header, olmo_header, 2);
    push_text(p, header, c);
    push_text(p, olmo_metric, c);
    push_text(p, "    train/Cross", c); /* and a partial line */
    tw_parser_resume_point(p, &r);
    assert_int_equal(count_kind(c, TW_REC_STEP), 1);
    assert_int_equal(r.back, strlen(header) + strlen(olmo_metric) + strlen("    train/Cross"));
    assert_int_equal(r.line, 2);
    assert_false(r.skip_line);
    /* the end of this run delivers the open block; the partial line stays */
    tw_parser_end_blocks(p, collect_record, c);
    tw_parser_resume_point(p, &r);
    assert_int_equal(count_kind(c, TW_REC_STEP), 2);
    assert_int_equal(r.back, strlen("    train/Cross"));
    assert_int_equal(r.line, 4);
    tw_parser_close(p);
    free(c);
}

static void test_resume_point_of_a_traceback_and_of_plain_lines(void **state)
{
    (void)state;
    collected_records *c = calloc(1, sizeof *c);
    tw_parser *p;
    assert_int_equal(tw_parser_new(&p, "train.log", NULL, -1), TW_OK);
    char line[512];
    tw_parser_resume r;
    snprintf(line, sizeof line, step_line, 1);
    push_text(p, line, c);
    tw_parser_resume_point(p, &r);
    assert_int_equal(r.back, 0); /* at rest after a complete line */
    assert_int_equal(r.line, 1);
    const char *open = "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n";
    push_text(p, open, c);
    tw_parser_resume_point(p, &r);
    assert_int_equal(r.back, strlen(open));
    assert_int_equal(r.line, 1);
    push_text(p, "RuntimeError: boom\n", c);
    tw_parser_resume_point(p, &r);
    assert_int_equal(r.back, 0);
    assert_int_equal(count_kind(c, TW_REC_EVENT), 1);
    tw_parser_close(p);
    free(c);
}

static void test_resume_point_inside_a_cut_line(void **state)
{
    (void)state;
    collected_records *c = calloc(1, sizeof *c);
    tw_parser *p;
    assert_int_equal(tw_parser_new(&p, "train.log", NULL, -1), TW_OK);
    size_t big = TW_LINE_MAX + 4096;
    char *text = malloc(big);
    memset(text, 'x', big);
    tw_parser_push(p, text, big, collect_record, c);
    tw_parser_resume r;
    tw_parser_resume_point(p, &r);
    /* the head of the line was taken: a restart here drops the rest of it */
    assert_int_equal(r.back, 0);
    assert_true(r.skip_line);
    tw_parser_push(p, text, 100, collect_record, c);
    tw_parser_resume_point(p, &r);
    assert_int_equal(r.back, 0);
    assert_true(r.skip_line);
    char line[512];
    int n = snprintf(line, sizeof line, "tail\n" "%s", "");
    tw_parser_push(p, line, (size_t)n, collect_record, c);
    tw_parser_resume_point(p, &r);
    assert_int_equal(r.back, 0);
    assert_false(r.skip_line);
    /* resuming inside a cut line: its rest is no line of its own */
    tw_parser *q;
    assert_int_equal(tw_parser_new(&q, "train.log", NULL, -1), TW_OK);
    tw_parser_skip_line(q);
    snprintf(line, sizeof line, "xxxx global_step: 999, loss: 0.1\n" "%s", "");
    push_text(q, line, c);
    snprintf(line, sizeof line, step_line, 2);
    push_text(q, line, c);
    assert_int_equal(count_kind(c, TW_REC_STEP), 1);
    assert_int_equal(nth_kind(c, TW_REC_STEP, 0)->global_step, 2);
    tw_parser_close(q);
    free(text);
    tw_parser_close(p);
    free(c);
}

static void test_lines_with_nul_are_skipped(void **state)
{
    (void)state;
    char text[2048];
    int n = snprintf(text, sizeof text, step_line, 10);
    memcpy(text + n, "bad\0line\n", 9);
    n += 9;
    n += snprintf(text + n, sizeof text - (size_t)n, step_line, 20);
    collected_records *c = calloc(1, sizeof *c);
    tw_parser *p;
    assert_int_equal(tw_parser_new(&p, "mixed.log", NULL, -1), 0);
    tw_parser_feed(p, text, (size_t)n, collect_record, c);
    assert_int_equal(tw_parser_stats(p)->binary_lines, 1);
    assert_int_equal(count_kind(c, TW_REC_STEP), 2);
    tw_parser_close(p);
    free(c);
}

static void test_binary_file_is_refused(void **state)
{
    (void)state;
    char *path = temp_path(".bin");
    FILE *f = fopen(path, "wb");
    for (int i = 0; i < 8192; i++)
        fputc((i * 7919) & 0xff, f);
    fclose(f);
    int status;
    collected_records *c = parse_file(path, &status);
    assert_int_equal(status, TW_EBINARY);
    assert_int_equal(c->count, 0);
    unlink(path);
    free(c);
}

static void test_gzip_file_and_truncated_gzip(void **state)
{
    (void)state;
    char *path = temp_path(".log.gz");
    gzFile gz = gzopen(path, "wb");
    for (int i = 1; i <= 2000; i++)
        gzprintf(gz, step_line, i * 10);
    gzclose(gz);
    int status;
    collected_records *c = parse_file(path, &status);
    assert_int_equal(status, TW_OK);
    assert_int_equal(c->stats.steps, 2000);
    free(c);
    /* cut the file in half: what was readable is delivered, then an error */
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    assert_int_equal(truncate(path, size / 2), 0);
    c = parse_file(path, &status);
    assert_int_equal(status, TW_EGZIP);
    assert_true(c->stats.steps > 0 && c->stats.steps < 2000);
    unlink(path);
    free(c);
}

static void test_rank_from_file_names(void **state)
{
    (void)state;
    assert_int_equal(tw_rank_from_path("log/workerlog.3"), 3);
    assert_int_equal(tw_rank_from_path("/x/run.rank12.log"), 12);
    assert_int_equal(tw_rank_from_path("rank-5.txt"), 5);
    assert_int_equal(tw_rank_from_path("train.log"), -1);
    collected_records *c = parse_text("step 1/2 - loss: 0.5 - 1ms/step\n", NULL, "log/workerlog.7");
    assert_int_equal(nth_kind(c, TW_REC_STEP, 0)->rank, 7);
    free(c);
}

/* torchrun --log-dir: LOGDIR/<run_id>_<random>/attempt_<n>/<local rank>/stdout.log
 * (torch/distributed/elastic/multiprocessing/api.py, DefaultLogsSpecs.reify). */
static void test_rank_from_torchrun_log_dirs(void **state)
{
    (void)state;
    assert_int_equal(tw_rank_from_path("logs/10889_zhbb_9hb/attempt_0/3/stdout.log"), 3);
    assert_int_equal(tw_rank_from_path("/tmp/x/none_mjqneoph/attempt_2/12/stderr.log"), 12);
    assert_int_equal(tw_rank_from_path("attempt_0/5/stderr.log"), 5);
    assert_int_equal(tw_rank_from_path("logs/run/attempt_0/filtered_stdout.log"), -1);
    assert_int_equal(tw_rank_from_path("runs/2024/stdout.log"), -1);  /* no attempt_N above it */
    assert_int_equal(tw_rank_from_path("attempt_0/3/train.log"), -1); /* not the agent's file */
    assert_int_equal(tw_rank_from_path("attempt_x/3/stdout.log"), -1);
    assert_int_equal(tw_rank_from_path("attempt_0/3a/stdout.log"), -1);
    assert_int_equal(tw_rank_from_path("attempt_0/9999999999/stdout.log"), -1);
    assert_int_equal(tw_rank_from_path("logs/attempt_0/1/workerlog.4"), 4); /* a rank in the name wins */
    size_t node = 0;
    assert_int_equal(tw_rank_from_log_dir("logs/10889_zhbb_9hb/attempt_0/3/stdout.log", &node), 3);
    assert_int_equal(node, strlen("logs/10889_zhbb_9hb"));
    assert_int_equal(tw_rank_from_log_dir("log/workerlog.3", &node), -1);
}

static void test_mixed_formats_in_one_file(void **state)
{
    (void)state;
    char text[4096];
    int n = snprintf(text, sizeof text, step_line, 10);
    n += snprintf(text + n, sizeof text - (size_t)n, "%s",
                  "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\nValueError: boom\n"
                  "{'loss': 0.25, 'learning_rate': 0.001, 'epoch': 1.0}\n");
    snprintf(text + n, sizeof text - (size_t)n, step_line, 20);
    collected_records *c = parse_text(text, NULL, NULL);
    assert_string_equal(c->stats.format, "ppocr"); /* locked on the first */
    assert_int_equal(count_kind(c, TW_REC_STEP), 3); /* per-line fallback got the dict line */
    assert_non_null(find_event(c, TW_EV_EXCEPTION));
    free(c);
}

static void test_invalid_utf8_survives(void **state)
{
    (void)state;
    collected_records *c = parse_text("Traceback (most recent call last):\nValueError: bad \xff\xfe bytes \xc3\n", NULL, NULL);
    const tw_record *e = find_event(c, TW_EV_EXCEPTION);
    assert_non_null(e);
    assert_non_null(strstr(e->message, "bad"));
    free(c);
}

static void test_stdin_is_read(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    char line[512];
    int n = snprintf(line, sizeof line, step_line, 30);
    assert_int_equal(write(fds[1], line, (size_t)n), n);
    close(fds[1]);
    int saved = dup(STDIN_FILENO);
    dup2(fds[0], STDIN_FILENO);
    close(fds[0]);
    int status;
    collected_records *c = parse_file("-", &status);
    dup2(saved, STDIN_FILENO);
    close(saved);
    assert_int_equal(status, TW_OK);
    assert_int_equal(count_kind(c, TW_REC_STEP), 1);
    free(c);
}

/* ---- reading one file in blocks on threads (parallel.c) ---- */

typedef struct json_lines {
    char *text;
    size_t len;
    FILE *out;
} json_lines;

static void write_json_line(void *arg, const tw_record *r)
{
    json_lines *j = arg;
    tw_record_write_json(j->out, r);
}

/* Every record of path as JSON lines, read with jobs threads in blocks of
 * block bytes (jobs 1: in order); stats into *st. */
static char *records_as_json(const char *path, int jobs, size_t block, tw_parse_stats *st)
{
    json_lines j = {0};
    j.out = open_memstream(&j.text, &j.len);
    tw_parser *p;
    assert_int_equal(tw_parser_open(&p, path, NULL, -1), TW_OK);
    tw_parser_set_jobs(p, jobs, block);
    assert_int_equal(tw_parser_run(p, write_json_line, &j), TW_OK);
    *st = *tw_parser_stats(p);
    tw_parser_close(p);
    fclose(j.out);
    return j.text;
}

static void assert_same_as_in_order(const char *path, size_t block, tw_parse_stats *blocks)
{
    tw_parse_stats one, many;
    char *in_order = records_as_json(path, 1, 0, &one);
    char *threaded = records_as_json(path, 3, block, &many);
    assert_int_equal(one.blocks, 0);
    assert_true(many.blocks >= 4);
    assert_string_equal(in_order, threaded);
    assert_int_equal(one.lines, many.lines);
    assert_int_equal(one.bytes, many.bytes);
    assert_int_equal(one.steps, many.steps);
    assert_int_equal(one.evals, many.evals);
    assert_int_equal(one.events, many.events);
    assert_int_equal(one.lines_cut, many.lines_cut);
    assert_string_equal(one.format, many.format);
    *blocks = many;
    free(in_order);
    free(threaded);
}

/* A PaddleOCR log with tracebacks, Paddle error blocks (one whose Python
 * name waits for the summary's error), kernel assertions before their CUDA
 * error, evaluations and a 70 KB line every so often: blocks begin inside
 * all of them. */
static void test_blocks_give_the_records_of_one_reader(void **state)
{
    (void)state;
    char *path = temp_path(".blocks.log");
    FILE *f = fopen(path, "w");
    for (int i = 1; i <= 6000; i++) {
        fprintf(f, step_line, i * 10);
        if (i % 97 == 0)
            fprintf(f, "Traceback (most recent call last):\n  File \"tools/train.py\", line %d, in <module>\n"
                       "    main()\nValueError: bad sample %d\n", i, i);
        if (i % 131 == 0)
            fprintf(f, "C++ Traceback (most recent call last):\n------\n0   paddle::Run%d\n1   paddle::Op\n"
                       "------\nError Message Summary:\n------\nResourceExhaustedError: Out of memory %d\n", i, i);
        if (i % 173 == 0)
            fprintf(f,
                    "Traceback (most recent call last):\n  File \"tools/program.py\", line %d, in eval\n"
                    "    preds = model(images)\nMemoryError: \n\n------\nError Message Summary:\n------\n"
                    "ResourceExhaustedError: \n\nOut of memory error on GPU 0. Cannot allocate %d.000000MB\n",
                    i, i);
        if (i % 157 == 0)
            fprintf(f,
                    "Error: /paddle/phi/kernels/gpu/cross_entropy_kernel.cu:1008 Assertion `false` failed. got %d\n"
                    "Traceback (most recent call last):\n  File \"tools/train.py\", line 1, in <module>\n"
                    "    main()\nOSError: (External) CUDA error(719), unspecified launch failure.\n",
                    i);
        if (i % 50 == 0)
            fprintf(f, "[2024/03/09 15:15:33] ppocr INFO: cur metric, precision: 0.%d, recall: 0.7, hmean: 0.75\n", i % 10);
        if (i % 1000 == 0) {
            for (int k = 0; k < 70000; k++)
                fputc('x', f);
            fputc('\n', f);
        }
    }
    fclose(f);
    tw_parse_stats st;
    assert_same_as_in_order(path, 4096, &st);
    assert_true(st.blocks_reparsed < st.blocks / 2); /* most blocks were kept as read ahead */
    assert_same_as_in_order(path, 65536, &st);
    unlink(path);
}

/* hapi's epoch header is state that lasts: a block far from it (beyond the
 * warm-up) starts in the right epoch because the header is replayed, so no
 * block needs parsing again. */
static void test_blocks_replay_the_epoch_header(void **state)
{
    (void)state;
    char *path = temp_path(".hapi.log");
    FILE *f = fopen(path, "w");
    for (int e = 1; e <= 3; e++) {
        fprintf(f, "Epoch %d/3\n", e);
        for (int i = 1; i <= 6000; i++)
            fprintf(f, "step %d/6000 - loss: %.4f - acc: 0.91 - 12ms/step\n", i, 2.0 / (i + e));
    }
    fclose(f);
    tw_parse_stats st;
    assert_same_as_in_order(path, 100000, &st);
    assert_int_equal(st.blocks_reparsed, 0);
    unlink(path);
}

/* The rank named once at the top ("local rank: 3") is state no warm-up
 * sees from blocks handed out before it was read: those blocks are parsed
 * again, and every record still carries rank 3. */
static void test_blocks_whose_start_differs_are_parsed_again(void **state)
{
    (void)state;
    char *path = temp_path(".glog.log");
    FILE *f = fopen(path, "w");
    fprintf(f, "I0309 15:15:33.293759 12345 nccl_context.cc:189] init nccl context nranks: 8 local rank: 3\n");
    for (int i = 1; i <= 8000; i++)
        fprintf(f, step_line, i * 10);
    fclose(f);
    tw_parse_stats st;
    assert_same_as_in_order(path, 100000, &st);
    assert_true(st.blocks_reparsed > 0 && st.blocks_reparsed < st.blocks);
    unlink(path);
}

/* Tracebacks longer than a block: every block starts inside one and no
 * warm-up sees its first line, so each would be parsed twice. Reading
 * ahead stops after a few such blocks and the rest is read in order. */
static void test_reading_ahead_stops_when_it_does_not_pay(void **state)
{
    (void)state;
    char *path = temp_path(".traceback.log");
    FILE *f = fopen(path, "w");
    for (int t = 0; t < 10; t++) {
        fprintf(f, "Traceback (most recent call last):\n");
        for (int i = 0; i < 4000; i++)
            fprintf(f, "  File \"/opt/lib/python3.8/site-packages/module_%d.py\", line %d, in call\n", i, t);
        fprintf(f, "RuntimeError: deep recursion %d\n", t);
        for (int i = 1; i <= 20; i++)
            fprintf(f, step_line, t * 1000 + i);
    }
    fclose(f);
    tw_parse_stats st;
    assert_same_as_in_order(path, 100000, &st);
    assert_int_equal(st.events, 10);
    uint64_t blocks = (st.bytes + 99999) / 100000;
    assert_true(st.blocks < blocks / 2); /* most of the file was not handed out */
    unlink(path);
}

/* A gzip file is one stream: read in order whatever the jobs. */
static void test_gzip_is_read_in_order_with_jobs(void **state)
{
    (void)state;
    char *path = temp_path(".jobs.log.gz");
    gzFile gz = gzopen(path, "wb");
    for (int i = 1; i <= 3000; i++)
        gzprintf(gz, step_line, i * 10);
    gzclose(gz);
    tw_parse_stats st;
    char *text = records_as_json(path, 4, 4096, &st);
    assert_int_equal(st.steps, 3000);
    assert_int_equal(st.blocks, 0);
    free(text);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_file_and_directory),
        cmocka_unit_test(test_empty_input),
        cmocka_unit_test(test_crlf_and_truncated_last_line),
        cmocka_unit_test(test_long_line_is_cut_and_counted),
        cmocka_unit_test(test_lines_with_nul_are_skipped),
        cmocka_unit_test(test_binary_file_is_refused),
        cmocka_unit_test(test_gzip_file_and_truncated_gzip),
        cmocka_unit_test(test_rank_from_file_names),
        cmocka_unit_test(test_rank_from_torchrun_log_dirs),
        cmocka_unit_test(test_mixed_formats_in_one_file),
        cmocka_unit_test(test_invalid_utf8_survives),
        cmocka_unit_test(test_stdin_is_read),
        cmocka_unit_test(test_blocks_give_the_records_of_one_reader),
        cmocka_unit_test(test_blocks_replay_the_epoch_header),
        cmocka_unit_test(test_blocks_whose_start_differs_are_parsed_again),
        cmocka_unit_test(test_reading_ahead_stops_when_it_does_not_pay),
        cmocka_unit_test(test_gzip_is_read_in_order_with_jobs),
        cmocka_unit_test(test_resume_point_is_the_start_of_an_open_block),
        cmocka_unit_test(test_resume_point_of_a_traceback_and_of_plain_lines),
        cmocka_unit_test(test_resume_point_inside_a_cut_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
