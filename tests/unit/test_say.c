/*
 * test_say.c: trainwatch's own messages (core/say.c): the three formats,
 * level filtering, escaping of what a message may hold (quotes, '=',
 * newlines, control bytes, invalid UTF-8), and whole lines from threads
 * that speak at once.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/json.h"
#include "core/say.h"
#include "trainwatch/error.h"

/* What one tw_say_to call wrote, as a string the caller frees. */
static char *said(tw_say_level level, const char *source, const char *msg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    assert_non_null(m);
    tw_say_to(m, level, source, "%s", msg);
    fclose(m);
    return text;
}

static int reset(void **state)
{
    (void)state;
    tw_say_setup(TW_SAY_INFO, TW_SAY_TEXT, NULL);
    return 0;
}

static void test_names(void **state)
{
    (void)state;
    tw_say_level l;
    tw_say_format f;
    assert_int_equal(tw_say_level_from_name("warn", &l), 0);
    assert_int_equal(l, TW_SAY_WARN);
    assert_int_equal(tw_say_level_from_name("debug", &l), 0);
    assert_int_equal(l, TW_SAY_DEBUG);
    assert_int_equal(tw_say_level_from_name("warning", &l), TW_EINVAL);
    assert_int_equal(tw_say_level_from_name(NULL, &l), TW_EINVAL);
    assert_int_equal(tw_say_format_from_name("logfmt", &f), 0);
    assert_int_equal(f, TW_SAY_LOGFMT);
    assert_int_equal(tw_say_format_from_name("JSON", &f), TW_EINVAL);
    assert_string_equal(tw_say_level_name(TW_SAY_ERROR), "error");
}

static void test_text_names_the_command(void **state)
{
    (void)state;
    char *s = said(TW_SAY_INFO, "follow", "a.log: appeared");
    assert_string_equal(s, "trainwatch follow: a.log: appeared\n"); /* no command set: the speaker */
    free(s);
    tw_say_setup(TW_SAY_INFO, TW_SAY_TEXT, "watch");
    s = said(TW_SAY_INFO, "follow", "a.log: appeared");
    assert_string_equal(s, "trainwatch watch: a.log: appeared\n");
    free(s);
    tw_say_setup(TW_SAY_INFO, TW_SAY_TEXT, NULL);
    s = said(TW_SAY_INFO, NULL, "x");
    assert_string_equal(s, "trainwatch: x\n");
    free(s);
}

static void test_levels_filter(void **state)
{
    (void)state;
    tw_say_setup(TW_SAY_WARN, TW_SAY_TEXT, "run");
    char *s = said(TW_SAY_INFO, NULL, "serving");
    assert_string_equal(s, "");
    free(s);
    s = said(TW_SAY_ERROR, NULL, "broken");
    assert_string_equal(s, "trainwatch run: broken\n");
    free(s);
    assert_false(tw_say_enabled(TW_SAY_INFO));
    assert_true(tw_say_enabled(TW_SAY_WARN));
    tw_say_setup(TW_SAY_DEBUG, TW_SAY_TEXT, "run");
    assert_true(tw_say_enabled(TW_SAY_DEBUG));
    tw_say_to(NULL, TW_SAY_ERROR, NULL, "quiet"); /* NULL stream: nothing, no crash */
}

static void test_logfmt(void **state)
{
    (void)state;
    tw_say_setup(TW_SAY_INFO, TW_SAY_LOGFMT, "run");
    char *s = said(TW_SAY_WARN, "notify", "failed: \"503\" a=b\nnext\\line\ttab");
    /* ts=YYYY-MM-DDTHH:MM:SS.mmmZ */
    assert_int_equal(strncmp(s, "ts=", 3), 0);
    assert_int_equal(s[13], 'T');
    assert_int_equal(s[26], 'Z');
    assert_string_equal(s + 27, " level=warn source=notify msg=\"failed: \\\"503\\\" a=b\\nnext\\\\line\\ttab\"\n");
    free(s);
    s = said(TW_SAY_INFO, NULL, "plain");
    assert_non_null(strstr(s, " level=info source=run msg=plain\n")); /* bare when nothing needs quoting */
    free(s);
    s = said(TW_SAY_INFO, NULL, "");
    assert_non_null(strstr(s, " msg=\"\"\n"));
    free(s);
    s = said(TW_SAY_INFO, NULL, "bell\a");
    assert_non_null(strstr(s, "msg=\"bell\\u0007\"\n"));
    free(s);
}

static void test_json_reads_back(void **state)
{
    (void)state;
    tw_say_setup(TW_SAY_INFO, TW_SAY_JSON, "watch");
    char *s = said(TW_SAY_ERROR, "rules", "rule \"A\" failed:\n\x01 bad \xff byte");
    size_t len = strlen(s);
    assert_true(len > 0 && s[len - 1] == '\n');
    assert_null(memchr(s, '\n', len - 1)); /* one line */
    tw_json_reader r;
    tw_json_member m;
    assert_true(tw_json_begin(&r, s, len - 1));
    int seen = 0;
    while (tw_json_next(&r, &m) == TW_JSON_STRING) {
        if (strcmp(m.key, "level") == 0 && strcmp(m.string, "error") == 0)
            seen |= 1;
        if (strcmp(m.key, "source") == 0 && strcmp(m.string, "rules") == 0)
            seen |= 2;
        if (strcmp(m.key, "msg") == 0 && strncmp(m.string, "rule \"A\" failed:\n\x01 bad ", 20) == 0)
            seen |= 4;
        if (strcmp(m.key, "ts") == 0 && strlen(m.string) == 24)
            seen |= 8;
    }
    assert_false(r.error);
    assert_int_equal(seen, 15);
    free(s);
}

enum { THREADS = 4, LINES = 2000 };

static FILE *shared_out;

static void *speak(void *arg)
{
    long id = (long)arg;
    for (int i = 0; i < LINES; i++)
        tw_say_to(shared_out, TW_SAY_INFO, "t", "thread %ld line %d %s", id, i,
                  "a message long enough that a torn write would show in the middle of it");
    return NULL;
}

static void test_threads_do_not_interleave(void **state)
{
    (void)state;
    tw_say_setup(TW_SAY_INFO, TW_SAY_LOGFMT, "run");
    char *text = NULL;
    size_t len = 0;
    shared_out = open_memstream(&text, &len);
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, speak, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    fclose(shared_out);
    int count[THREADS] = {0};
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        long id;
        int n;
        assert_int_equal(sscanf(strstr(line, "msg=\""), "msg=\"thread %ld line %d", &id, &n), 2);
        assert_true(id >= 0 && id < THREADS);
        assert_int_equal(n, count[id]); /* each thread's lines whole and in order */
        count[id]++;
        assert_non_null(strstr(line, "torn write would show in the middle of it\""));
    }
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(count[i], LINES);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_names, reset),
        cmocka_unit_test_setup(test_text_names_the_command, reset),
        cmocka_unit_test_setup(test_levels_filter, reset),
        cmocka_unit_test_setup(test_logfmt, reset),
        cmocka_unit_test_setup(test_json_reads_back, reset),
        cmocka_unit_test_setup(test_threads_do_not_interleave, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
