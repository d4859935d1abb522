/*
 * test_log.c: libtrainwatch logging (trainwatch/log.h): levels and their
 * inheritance, the one-branch gate, typed fields in text and JSON, Python
 * logging patterns, redaction (positive and negative cases), the duplicate
 * guard, rotation, full disks and unwritable paths, and the async queue
 * (every record once from many threads; a full queue drops and counts).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log/internal.h"
#include "trainwatch/error.h"
#include "trainwatch/log.h"

/* A callback sink that keeps the lines it is given. */
typedef struct lines {
    pthread_mutex_t lock;
    char **text;
    size_t count, cap;
    int sleep_us;
} lines;

static void keep(const tw_log_record *r, void *arg)
{
    lines *l = arg;
    if (l->sleep_us)
        usleep((useconds_t)l->sleep_us);
    pthread_mutex_lock(&l->lock);
    if (l->count == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->text = realloc(l->text, l->cap * sizeof *l->text);
    }
    l->text[l->count] = strndup(r->text, r->text_len);
    l->count++;
    pthread_mutex_unlock(&l->lock);
}

static void lines_free(lines *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->text[i]);
    free(l->text);
    memset(l, 0, sizeof *l);
}

static lines captured;

static int setup_capture(void **state)
{
    (void)state;
    lines_free(&captured);
    pthread_mutex_init(&captured.lock, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tw_log_shutdown();
    tw_log_redact_enable(true);
    lines_free(&captured);
    return 0;
}

static tw_log_sink *capture(tw_logger *l, const char *pattern, bool json)
{
    tw_log_sink_options o = tw_log_sink_options_default();
    o.pattern = pattern;
    o.json = json;
    tw_log_sink *s = NULL;
    assert_int_equal(tw_log_add_callback(l, keep, &captured, &o, &s), TW_OK);
    return s;
}

static void levels_parse_and_name(void **state)
{
    (void)state;
    int level;
    assert_int_equal(tw_log_level_parse("warn", &level), TW_OK);
    assert_int_equal(level, TW_LEVEL_WARNING);
    assert_int_equal(tw_log_level_parse("CRITICAL", &level), TW_OK);
    assert_int_equal(level, 50);
    assert_int_equal(tw_log_level_parse("15", &level), TW_OK);
    assert_int_equal(level, 15);
    assert_int_equal(tw_log_level_parse("loud", &level), TW_EINVAL);
    assert_string_equal(tw_log_level_name(TW_LEVEL_ERROR), "ERROR");
    assert_null(tw_log_level_name(15));
}

static void children_inherit_levels_and_sinks_filter(void **state)
{
    (void)state;
    tw_logger *parent = tw_logger_get("lv"), *child = tw_logger_get("lv.data.loader");
    capture(parent, "%(levelname)s %(name)s %(message)s", false);
    tw_logger_set_level(parent, TW_LEVEL_WARNING);
    assert_false(tw_log_enabled(child, TW_LEVEL_INFO));
    assert_true(tw_log_enabled(child, TW_LEVEL_WARNING));
    TW_LOG_INFO(child, "hidden");
    TW_LOG_WARNING(child, "shown");
    tw_logger_set_level(child, TW_LEVEL_DEBUG); /* its own level overrides the parent's */
    TW_LOG_DEBUG(child, "debug now");
    assert_int_equal(tw_logger_level(tw_logger_get("lv.data")), TW_LEVEL_WARNING);
    assert_int_equal(captured.count, 2);
    assert_string_equal(captured.text[0], "WARNING lv.data.loader shown");
    assert_string_equal(captured.text[1], "DEBUG lv.data.loader debug now");
}

static void a_sink_level_filters_only_that_sink(void **state)
{
    (void)state;
    tw_logger *l = tw_logger_get("sinklevel");
    tw_logger_set_level(l, TW_LEVEL_DEBUG);
    tw_log_sink *s = capture(l, "%(message)s", false);
    tw_log_sink_set_level(s, TW_LEVEL_ERROR);
    TW_LOG_WARNING(l, "not for this sink");
    TW_LOG_ERROR(l, "for it");
    assert_int_equal(captured.count, 1);
    assert_string_equal(captured.text[0], "for it");
}

static void fields_are_key_value_in_text(void **state)
{
    (void)state;
    tw_logger *l = tw_logger_get("fields");
    capture(l, "%(message)s", false);
    int64_t shape[] = {32, 3, 224, 224};
    TW_LOG_INFO(l, "Step", tw_field_int("step", 100), tw_field_double("loss", 2.134), tw_field_str("phase", "train"),
                tw_field_bool("best", true), tw_field_double("lr", 1e-7), tw_field_double("big", 1e20),
                tw_field_double("ratio", 100), tw_log_summary("batch", "tensor float32", shape, 4, 4816896));
    assert_int_equal(captured.count, 1);
    assert_string_equal(captured.text[0], "Step step=100 loss=2.134 phase=train best=true lr=1e-07 big=1e+20 "
                                          "ratio=100.0 batch=<tensor float32 shape=[32,3,224,224] size=4816896>");
}

static void fields_keep_their_types_in_json(void **state)
{
    (void)state;
    tw_logger *l = tw_logger_get("json.fields");
    capture(l, NULL, true);
    TW_LOG_WARNING(l, "say \"hi\"\n", tw_field_int("step", -3), tw_field_double("loss", 0.5),
                   tw_field_str("name", NULL), tw_field_bool("ok", false), tw_field_double("nan", 0.0 / 0.0),
                   tw_field_str("message", "shadowed"), tw_field_int("rank", 7));
    assert_int_equal(captured.count, 1);
    const char *j = captured.text[0];
    /* Elastic Common Schema names; trainwatch's own under "trainwatch" */
    assert_memory_equal(j, "{\"@timestamp\":\"", 15);
    assert_non_null(strstr(j, "\",\"log.level\":\"WARNING\",\"log.logger\":\"json.fields\",\"message\":\"say "
                              "\\\"hi\\\"\\n\",\"log.origin.file.name\":\""));
    assert_non_null(strstr(j, "\"log.origin.function\":\"fields_keep_their_types_in_json\",\"log.origin.file.line\":"));
    assert_non_null(strstr(j, ",\"host.name\":\""));
    assert_non_null(strstr(j, ",\"process.pid\":"));
    assert_non_null(strstr(j, ",\"ecs.version\":\"8.11.0\",\"trainwatch\":{\"rank\":0,\"world_size\":1,"));
    assert_non_null(strstr(j, ",\"step\":-3,\"loss\":0.5,\"name\":null,\"ok\":false,\"nan\":\"NaN\","
                              "\"message\":\"shadowed\",\"_rank\":7}}"));
    /* RFC 3339 with milliseconds and a zone */
    const char *t = j + 15;
    assert_int_equal(t[4], '-');
    assert_int_equal(t[10], 'T');
    assert_int_equal(t[19], '.');
    assert_true(t[23] == 'Z' || t[23] == '+' || t[23] == '-');
}

static void the_default_text_format_is_the_seed_shape(void **state)
{
    (void)state;
    tw_logger *l = tw_logger_get("trainer.data");
    capture(l, NULL, false);
    TW_LOG_INFO(l, "Step 100", tw_field_double("loss", 2.134), tw_field_double("time", 0.42));
    assert_int_equal(captured.count, 1);
    const char *s = captured.text[0];
    /* 2024-04-05 10:25:30.123 | INFO | trainer.data | func:line | Step 100 loss=2.134 time=0.42 */
    assert_true(strlen(s) > 24);
    assert_int_equal(s[4], '-');
    assert_int_equal(s[10], ' ');
    assert_int_equal(s[19], '.');
    const char *head = " | INFO | trainer.data | the_default_text_format_is_the_seed_shape:";
    assert_memory_equal(s + 23, head, strlen(head));
    int line = 0, used = 0;
    assert_int_equal(sscanf(s + 23 + strlen(head), "%d%n", &line, &used), 1);
    assert_true(line > 150 && line < 200); /* the call's line (compilers differ on which of its lines) */
    assert_string_equal(s + 23 + strlen(head) + used, " | Step 100 loss=2.134 time=0.42");
}

static void patterns_use_python_names_and_flags(void **state)
{
    (void)state;
    tw_logger *l = tw_logger_get("pat");
    capture(l, "[%(levelname)-8s] %(name)s %(filename)s %(module)s 100%% %(levelno)d %(message).5s|%(rank)d", false);
    TW_LOG_INFO(l, "abcdefgh");
    assert_int_equal(captured.count, 1);
    assert_string_equal(captured.text[0], "[INFO    ] pat test_log.c test_log 100% 20 abcde|0");
}

static void bad_patterns_are_refused_with_their_place(void **state)
{
    (void)state;
    tw_log_pattern *p = NULL;
    char why[128];
    assert_int_equal(tw_log_pattern_compile("%(nosuch)s", &p, why, sizeof why), TW_EINVAL);
    assert_non_null(strstr(why, "at offset 0: unknown attribute name"));
    assert_int_equal(tw_log_pattern_compile("ok %(message)", &p, why, sizeof why), TW_EINVAL);
    assert_non_null(strstr(why, "at offset 3"));
    assert_int_equal(tw_log_pattern_compile("%(message", &p, why, sizeof why), TW_EINVAL);
    assert_int_equal(tw_log_pattern_compile("50% off", &p, why, sizeof why), TW_EINVAL);
    assert_int_equal(tw_log_pattern_compile("%(message)9999s", &p, why, sizeof why), TW_EINVAL);
    assert_int_equal(tw_log_pattern_compile("%(asctime)s %(message)s", &p, why, sizeof why), TW_OK);
    tw_log_pattern_free(p);
}

static void redact_check(const char *in, const char *expect)
{
    char out[512];
    tw_log_redact_text(in, out, sizeof out);
    assert_string_equal(out, expect);
}

static void redaction_of_messages(void **state)
{
    (void)state;
    redact_check("Authorization: Bearer eyJhbGciOi.xyz-123 sent", "Authorization: Bearer [REDACTED] sent");
    redact_check("header bearer abc123", "header bearer [REDACTED]");
    redact_check("fetch https://alice:s3cr3t@example.com/data ok", "fetch https://[REDACTED]@example.com/data ok");
    redact_check("mail bob.smith+ml@example.co.uk.", "mail [EMAIL].");
    redact_check("login password=hunter2 user=bob", "login password=[REDACTED] user=bob");
    redact_check("cfg {'api_key': 'sk-123'}", "cfg {'api_key': '[REDACTED]'}");
    redact_check("HF_TOKEN=hf_abc python train.py", "HF_TOKEN=[REDACTED] python train.py");
    /* several rules in one message: the text between redactions is copied in runs */
    redact_check(
        "user=bob mail a.b@ex.io then token='xyz' and BEARER abc, see https://u:p@h.org/x done",
        "user=bob mail [EMAIL] then token='[REDACTED]' and BEARER [REDACTED], see https://[REDACTED]@h.org/x done");
    redact_check("x:y apiKey:\"v1\" pwd=  p2 end@", "x:y apiKey:\"[REDACTED]\" pwd=  [REDACTED] end@");
    /* negatives: training text stays as it is */
    redact_check("Step 100 loss=2.134 lr=0.001 time=0.42s", "Step 100 loss=2.134 lr=0.001 time=0.42s");
    redact_check("tokens_per_sec=1234 tokenizer=bpe num_tokens: 9", "tokens_per_sec=1234 tokenizer=bpe num_tokens: 9");
    redact_check("see https://example.com/a:b and user@host", "see https://example.com/a:b and user@host");
    redact_check("epoch: [1/10] eta: 0:01:02", "epoch: [1/10] eta: 0:01:02");
}

static void redaction_of_fields(void **state)
{
    (void)state;
    tw_logger *l = tw_logger_get("redact.fields");
    capture(l, "%(message)s", false);
    TW_LOG_INFO(l, "conn", tw_field_str("db_password", "pw1"), tw_field_int("apiKey", 42),
                tw_field_str("url", "s3://AKIA:wJal@bucket/x"), tw_field_int("num_tokens", 7),
                tw_field_str("owner", "ann@lab.org"), tw_field_str("tokenizer", "bpe"));
    assert_int_equal(captured.count, 1);
    assert_string_equal(captured.text[0], "conn db_password=[REDACTED] apiKey=[REDACTED] url=s3://[REDACTED]@bucket/x "
                                          "num_tokens=7 owner=[EMAIL] tokenizer=bpe");
    tw_log_redact_enable(false);
    TW_LOG_INFO(l, "off", tw_field_str("token", "t"));
    assert_string_equal(captured.text[1], "off token=t");
}

static void user_patterns_redact_at_run_time(void **state)
{
    (void)state;
    char why[128];
    assert_int_equal(tw_log_redact_add("(unclosed", why, sizeof why), TW_EINVAL);
    assert_non_null(strstr(why, "at offset"));
    redact_check("key sk-AbC123 used", "key sk-AbC123 used");
    assert_int_equal(tw_log_redact_add("sk-[A-Za-z0-9]+", NULL, 0), TW_OK);
    redact_check("key sk-AbC123 used, sk-9 too", "key [REDACTED] used, [REDACTED] too");
    tw_logger *l = tw_logger_get("redact.user");
    capture(l, "%(message)s", false);
    TW_LOG_INFO(l, "k sk-zz", tw_field_str("v", "x sk-q"));
    assert_string_equal(captured.text[0], "k [REDACTED] v=x [REDACTED]");
}

static char dir[64];

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strdup(buf);
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

static void configuring_twice_does_not_duplicate_lines(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/dup.log", dir);
    tw_log_options o = tw_log_options_default();
    o.logger = "dup";
    o.console = false;
    o.file_path = path;
    assert_int_equal(tw_log_setup(&o), TW_OK);
    assert_int_equal(tw_log_setup(&o), TW_OK);
    tw_log_sink *again;
    assert_int_equal(tw_log_add_file(tw_logger_get("dup.child"), path, NULL, &again), TW_OK); /* an ancestor's */
    TW_LOG_INFO(tw_logger_get("dup.child"), "once");
    tw_log_flush();
    char *text = slurp(path);
    assert_int_equal(count_lines(text), 1);
    free(text);
}

static void rotation_keeps_the_python_file_set(void **state)
{
    (void)state;
    char path[128], name[160];
    snprintf(path, sizeof path, "%s/rot_{rank}.log", dir);
    tw_logger *l = tw_logger_get("rot");
    tw_log_sink_options o = tw_log_sink_options_default();
    o.pattern = "%(message)s";
    o.max_bytes = 100;
    o.backups = 2;
    assert_int_equal(tw_log_add_file(l, path, &o, NULL), TW_OK);
    for (int i = 0; i < 30; i++)
        TW_LOG_INFO(l, "line", tw_field_int("n", i)); /* "line n=NN\n": 10 or 11 bytes */
    tw_log_flush();
    snprintf(name, sizeof name, "%s/rot_0.log", dir);
    char *cur = slurp(name);
    snprintf(name, sizeof name, "%s/rot_0.log.2", dir);
    char *old = slurp(name);
    snprintf(name, sizeof name, "%s/rot_0.log.3", dir);
    assert_null(slurp(name));
    assert_non_null(cur);
    assert_non_null(old);
    assert_true(strlen(cur) < 100 && strlen(old) < 100);
    assert_non_null(strstr(cur, "line n=29\n"));
    free(cur);
    free(old);
}

static void a_full_disk_is_counted_and_logging_goes_on(void **state)
{
    (void)state;
    tw_logger *l = tw_logger_get("full");
    uint64_t before = tw_log_dropped_total();
    tw_log_sink *s;
    assert_int_equal(tw_log_add_file(l, "/dev/full", NULL, &s), TW_OK);
    capture(l, "%(message)s", false);
    for (int i = 0; i < 5; i++)
        TW_LOG_INFO(l, "lost", tw_field_int("i", i));
    assert_int_equal(tw_log_sink_dropped(s), 5);
    assert_int_equal(tw_log_dropped_total() - before, 5);
    assert_int_equal(captured.count, 5); /* the other sink still got them */
}

static void an_unwritable_path_is_counted(void **state)
{
    (void)state;
    tw_logger *l = tw_logger_get("nowhere");
    tw_log_sink *s = NULL;
    /* a missing directory is created (mkdir -p); one under a regular file cannot be */
    assert_int_not_equal(tw_log_add_file(l, "/proc/self/status/x.log", NULL, &s), TW_OK);
    assert_non_null(s);
    tw_log_sink *empty = NULL; /* no directory to make above "": refused, not read past */
    assert_int_not_equal(tw_log_add_file(tw_logger_get("empty"), "", NULL, &empty), TW_OK);
    TW_LOG_WARNING(l, "dropped");
    assert_int_equal(tw_log_sink_dropped(s), 1);
}

static void missing_directories_of_a_file_are_created(void **state)
{
    (void)state;
    char top[] = "/tmp/tw-unit-log-XXXXXX", path[128], sub[96];
    assert_non_null(mkdtemp(top));
    snprintf(path, sizeof path, "%s/logs/deep/x.log", top);
    tw_logger *l = tw_logger_get("deep");
    tw_log_sink *s = NULL;
    assert_int_equal(tw_log_add_file(l, path, NULL, &s), TW_OK);
    TW_LOG_WARNING(l, "into a new directory");
    tw_log_flush();
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[256] = "";
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    assert_non_null(strstr(line, "into a new directory"));
    assert_int_equal(tw_log_sink_dropped(s), 0);
    unlink(path);
    snprintf(sub, sizeof sub, "%s/logs/deep", top);
    rmdir(sub);
    snprintf(sub, sizeof sub, "%s/logs", top);
    rmdir(sub);
    rmdir(top);
}

typedef struct worker {
    tw_logger *logger;
    int id, count;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < w->count; i++)
        TW_LOG_INFO(w->logger, "rec", tw_field_int("t", w->id), tw_field_int("i", i));
    return NULL;
}

static void every_record_once_from_many_threads(bool async)
{
    enum { THREADS = 4, EACH = 2000 };
    tw_logger *l = tw_logger_get(async ? "mt.async" : "mt.sync");
    capture(l, "%(message)s", false);
    if (async)
        assert_int_equal(tw_log_async_start(THREADS * EACH * 2), TW_OK);
    pthread_t t[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){l, i, EACH};
        pthread_create(&t[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    tw_log_flush();
    assert_int_equal(captured.count, THREADS * EACH);
    static unsigned char seen[THREADS][EACH];
    memset(seen, 0, sizeof seen);
    for (size_t k = 0; k < captured.count; k++) {
        int a, b;
        assert_int_equal(sscanf(captured.text[k], "rec t=%d i=%d", &a, &b), 2);
        assert_true(a >= 0 && a < THREADS && b >= 0 && b < EACH);
        seen[a][b]++;
    }
    for (int a = 0; a < THREADS; a++)
        for (int b = 0; b < EACH; b++)
            assert_int_equal(seen[a][b], 1);
}

static void every_record_once_sync(void **state)
{
    (void)state;
    every_record_once_from_many_threads(false);
}

static void every_record_once_async(void **state)
{
    (void)state;
    every_record_once_from_many_threads(true);
}

static void a_full_queue_drops_counts_and_says_so(void **state)
{
    (void)state;
    tw_logger *l = tw_logger_get("drops");
    captured.sleep_us = 200; /* a slow sink: the queue of 4 fills */
    capture(tw_logger_get(NULL), "%(name)s %(message)s", false);
    assert_int_equal(tw_log_async_start(4), TW_OK);
    uint64_t before = tw_log_dropped_total();
    for (int i = 0; i < 500; i++)
        TW_LOG_INFO(l, "r", tw_field_int("i", i));
    tw_log_flush();
    captured.sleep_us = 0;
    uint64_t dropped = tw_log_dropped_total() - before;
    assert_true(dropped > 0);
    size_t records = 0, notes = 0;
    for (size_t k = 0; k < captured.count; k++) {
        if (strncmp(captured.text[k], "drops r", 7) == 0)
            records++;
        else if (strstr(captured.text[k], "trainwatch.log log records dropped"))
            notes++;
    }
    assert_int_equal(records + dropped, 500);
    assert_true(notes >= 1);
}

static void async_copies_strings_the_caller_reuses(void **state)
{
    (void)state;
    tw_logger *l = tw_logger_get("copies");
    capture(l, "%(message)s", false);
    assert_int_equal(tw_log_async_start(64), TW_OK);
    char buf[32], key[8];
    for (int i = 0; i < 10; i++) {
        snprintf(buf, sizeof buf, "m%d", i);
        snprintf(key, sizeof key, "k%d", i);
        tw_log_field f = tw_field_str(key, buf);
        tw_log_write(l, TW_LEVEL_INFO, NULL, NULL, 0, buf, &f, 1);
    }
    tw_log_flush();
    assert_int_equal(captured.count, 10);
    assert_string_equal(captured.text[3], "m3 k3=m3");
    assert_string_equal(captured.text[9], "m9 k9=m9");
}

/* A record bigger than a queue cell (a traceback, many fields) is written
 * whole, as the synchronous path writes it, not cut to the cell. */
static void async_writes_big_records_whole(void **state)
{
    (void)state;
    tw_logger *l = tw_logger_get("big");
    capture(l, "%(message)s", false);
    assert_int_equal(tw_log_async_start(16), TW_OK);
    enum { LEN = 6000, FIELDS = 30 };
    char *message = malloc(LEN + 1);
    for (int i = 0; i < LEN; i++)
        message[i] = (char)('a' + i % 10);
    message[LEN] = '\0';
    char keys[FIELDS][8], values[FIELDS][300];
    tw_log_field f[FIELDS + 1];
    for (int i = 0; i < FIELDS; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        memset(values[i], 'v', sizeof values[i] - 1);
        values[i][sizeof values[i] - 1] = '\0';
        f[i] = tw_field_str(keys[i], values[i]);
    }
    int64_t shape[] = {4, 3, 224, 224};
    f[FIELDS] = tw_log_summary("batch", "Tensor", shape, 4, -1);
    tw_log_write(l, TW_LEVEL_ERROR, "train.py", "step", 7, message, f, FIELDS + 1);
    memset(message, 'x', LEN); /* the caller reuses its buffers at once */
    memset(values, 'x', sizeof values);
    tw_log_flush();
    assert_int_equal(captured.count, 1);
    const char *line = captured.text[0];
    assert_int_equal(strncmp(line, "abcdefghij", 10), 0);
    assert_null(strchr(line, 'x'));
    assert_non_null(strstr(line, "k0=vvvv"));
    char last[16];
    snprintf(last, sizeof last, " k%d=", FIELDS - 1);
    assert_non_null(strstr(line, last));
    assert_non_null(strstr(line, "batch=<Tensor shape=[4,3,224,224]>"));
    assert_non_null(strstr(line, "224"));
    assert_true(strlen(line) > LEN + FIELDS * 300);
    free(message);
}

/* A binding routes records of its own loggers through one tw_logger:
 * the record carries the name it gives, sync and async. */
static void write_as_names_the_record_sync_and_async(void **state)
{
    (void)state;
    tw_logger *route = tw_logger_get("binding.route");
    capture(route, "%(name)s %(funcName)s:%(lineno)d %(message)s", false);
    tw_log_field f = tw_field_int("step", 3);
    tw_log_write_as(route, "trainer.data", TW_LEVEL_INFO, "train.py", "load", 7, "sync", &f, 1);
    tw_log_write_as(route, NULL, TW_LEVEL_INFO, "train.py", "load", 8, "own name", NULL, 0);
    assert_int_equal(tw_log_async_start(64), TW_OK);
    char name[32];
    snprintf(name, sizeof name, "trainer.async");
    tw_log_write_as(route, name, TW_LEVEL_INFO, "train.py", "step", 9, "async", &f, 1);
    strcpy(name, "overwritten"); /* the queue copied the name */
    tw_log_field many[20];       /* more fields than a queue cell holds: the record goes whole in one block */
    for (size_t i = 0; i < 20; i++)
        many[i] = tw_field_int("n", (int64_t)i);
    snprintf(name, sizeof name, "trainer.big");
    tw_log_write_as(route, name, TW_LEVEL_INFO, "train.py", "step", 10, "big", many, 20);
    strcpy(name, "overwritten");
    tw_log_flush();
    assert_int_equal(captured.count, 4);
    assert_string_equal(captured.text[0], "trainer.data load:7 sync step=3");
    assert_string_equal(captured.text[1], "binding.route load:8 own name");
    assert_string_equal(captured.text[2], "trainer.async step:9 async step=3");
    assert_int_equal(strncmp(captured.text[3], "trainer.big step:10 big n=0 n=1", 31), 0);
}

/* A traceback after the message: the fields stay on the first line. */
static void fields_go_on_the_first_line_of_a_multiline_message(void **state)
{
    (void)state;
    tw_logger *l = tw_logger_get("multiline");
    capture(l, "%(message)s", false);
    TW_LOG_ERROR(l, "batch failed\nTraceback (most recent call last):\nKeyError: 'x'", tw_field_int("step", 7));
    assert_string_equal(captured.text[0], "batch failed step=7\nTraceback (most recent call last):\nKeyError: 'x'");
}

static void ranks_come_from_the_environment(void **state)
{
    (void)state;
    tw_log_rank_info r = tw_log_rank(); /* read once at start: the test runs without rank variables */
    assert_int_equal(r.rank, 0);
    assert_int_equal(r.world_size, 1);
    tw_log_set_rank(3, 1, 8);
    tw_logger *l = tw_logger_get("ranked");
    capture(l, "%(rank)d/%(world_size)d %(message)s", false);
    TW_LOG_INFO(l, "hello");
    assert_string_equal(captured.text[0], "3/8 hello");
    tw_log_set_rank(0, 0, 1);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tw-test-log-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    unsetenv("RANK");
    unsetenv("PADDLE_TRAINER_ID");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(levels_parse_and_name),
        cmocka_unit_test_setup_teardown(children_inherit_levels_and_sinks_filter, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(a_sink_level_filters_only_that_sink, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(fields_are_key_value_in_text, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(fields_keep_their_types_in_json, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(the_default_text_format_is_the_seed_shape, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(patterns_use_python_names_and_flags, setup_capture, teardown),
        cmocka_unit_test(bad_patterns_are_refused_with_their_place),
        cmocka_unit_test(redaction_of_messages),
        cmocka_unit_test_setup_teardown(redaction_of_fields, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(user_patterns_redact_at_run_time, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(configuring_twice_does_not_duplicate_lines, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(rotation_keeps_the_python_file_set, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(a_full_disk_is_counted_and_logging_goes_on, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(an_unwritable_path_is_counted, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(missing_directories_of_a_file_are_created, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(every_record_once_sync, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(every_record_once_async, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(a_full_queue_drops_counts_and_says_so, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(async_copies_strings_the_caller_reuses, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(async_writes_big_records_whole, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(write_as_names_the_record_sync_and_async, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(fields_go_on_the_first_line_of_a_multiline_message, setup_capture, teardown),
        cmocka_unit_test_setup_teardown(ranks_come_from_the_environment, setup_capture, teardown),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return failed;
}
