/*
 * test_templates.c: the template miner over the lines no format read
 * (src/diagnose/templates.c), through a run fed TW_REC_LINE records and the
 * --templates table it prints: what merges into one template (Drain's
 * similarity at the threshold), what never does (other token counts, a
 * trouble word against another word), and what happens past the caps.
 */
#include <setjmp.h> /* what cmocka.h needs first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/run.h"
#include "diagnose/templates.h"
#include "trainwatch/analyze.h"
#include "trainwatch/error.h"

#define FILE_NAME "synthetic.log"
#define ROWS_MAX  (TW_TEMPLATES_MAX + 16)

typedef struct row {
    unsigned long long lines;
    unsigned long long first; /* its first line */
    char text[512];           /* the template */
} row;

typedef struct table {
    row *rows;
    int count;
    unsigned long long other; /* lines of the "(other templates)" row */
} table;

static tw_run *new_run(void)
{
    tw_run *run;
    assert_int_equal(tw_run_new(&run, NULL), TW_OK);
    return run;
}

static void add_line(tw_run *run, int rank, uint64_t number, const char *text)
{
    tw_record r;
    tw_record_init(&r);
    r.kind = TW_REC_LINE;
    r.rank = rank;
    r.source.file = FILE_NAME;
    r.source.line = number;
    tw_record_set_text(r.message, text, strlen(text));
    tw_run_add(run, &r);
}

/* Feeds lines, numbered from 1, on rank 0. */
static void add_lines(tw_run *run, const char *const *lines, int n)
{
    for (int i = 0; i < n; i++)
        add_line(run, 0, (uint64_t)i + 1, lines[i]);
}

/* The --templates table, read back: each row's lines, first line and
 * template, and the other row. */
static table read_table(const tw_run *run)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    assert_non_null(out);
    tw_templates_write(out, run);
    assert_int_equal(fclose(out), 0);
    table t = {.rows = calloc(ROWS_MAX, sizeof(row))};
    assert_non_null(t.rows);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        unsigned long long lines;
        if (sscanf(line, " %llu", &lines) != 1)
            continue; /* the title and the header */
        const char *where = strstr(line, FILE_NAME ":");
        if (!where) {
            assert_non_null(strstr(line, "(other templates)"));
            t.other = lines;
            continue;
        }
        assert_true(t.count < ROWS_MAX);
        row *r = &t.rows[t.count++];
        r->lines = lines;
        char *end;
        r->first = strtoull(where + strlen(FILE_NAME ":"), &end, 10);
        while (*end == ' ')
            end++;
        snprintf(r->text, sizeof r->text, "%s", end);
    }
    free(text);
    return t;
}

static const row *find_row(const table *t, const char *template_text)
{
    for (int i = 0; i < t->count; i++) {
        if (strcmp(t->rows[i].text, template_text) == 0)
            return &t->rows[i];
    }
    return NULL;
}

/* A word with no digit, different for each (i, j): "w" and i, j in letters. */
static void word(char *out, int i, int j)
{
    int n = 0;
    out[n++] = 'w';
    for (int v = i; n < 6; v /= 26)
        out[n++] = (char)('a' + v % 26);
    out[n++] = 'x';
    for (int v = j; n < 11; v /= 26)
        out[n++] = (char)('a' + v % 26);
    out[n] = '\0';
}

static void test_word_only_variable_token_is_generalised(void **state)
{
    (void)state;
    tw_run *run = new_run();
    const char *lines[] = {"worker alpha started", "worker beta started", "worker gamma started"};
    add_lines(run, lines, 3);
    table t = read_table(run);
    assert_int_equal(t.count, 1);
    assert_string_equal(t.rows[0].text, "worker <*> started");
    assert_int_equal(t.rows[0].lines, 3);
    assert_int_equal(t.rows[0].first, 1);
    assert_int_equal(t.other, 0);
    free(t.rows);
    tw_run_free(run);
}

/* Lines of different token counts are apart from the first level of the
 * tree, however alike. */
static void test_different_token_counts_never_merge(void **state)
{
    (void)state;
    tw_run *run = new_run();
    const char *lines[] = {"worker alpha started", "worker alpha started now", "worker beta started",
                           "worker beta started now"};
    add_lines(run, lines, 4);
    table t = read_table(run);
    assert_int_equal(t.count, 2);
    const row *three = find_row(&t, "worker <*> started"), *four = find_row(&t, "worker <*> started now");
    assert_non_null(three);
    assert_non_null(four);
    assert_int_equal(three->lines, 2);
    assert_int_equal(three->first, 1);
    assert_int_equal(four->lines, 2);
    assert_int_equal(four->first, 2);
    free(t.rows);
    tw_run_free(run);
}

/* A token that holds a trouble word is never generalised: "refused" does not
 * join "established" (three of four tokens would), nor is it taken into a
 * template's <*>; the other tokens of a trouble line still merge. */
static void test_trouble_words_are_never_generalised(void **state)
{
    (void)state;
    tw_run *run = new_run();
    const char *lines[] = {
        "rank alpha connection established",
        "rank beta connection refused",
        "rank gamma connection refused",
        "rank delta connection established",
        "job alpha done",
        "job beta done",
        "job killed done",
        "read timed out",
        "read timed ok",
        "job killed done", /* seen before: remembered, and still apart */
        "job beta done",
    };
    add_lines(run, lines, 11);
    table t = read_table(run);
    assert_int_equal(t.count, 6);
    const row *established = find_row(&t, "rank <*> connection established");
    const row *refused = find_row(&t, "rank <*> connection refused");
    assert_non_null(established);
    assert_non_null(refused);
    assert_int_equal(established->lines, 2);
    assert_int_equal(refused->lines, 2);
    assert_int_equal(refused->first, 2);
    const row *done = find_row(&t, "job <*> done");
    assert_non_null(done);
    assert_int_equal(done->lines, 3);
    const row *killed = find_row(&t, "job killed done");
    assert_non_null(killed);
    assert_int_equal(killed->lines, 2);
    assert_int_equal(killed->first, 7);
    assert_non_null(find_row(&t, "read timed out")); /* a phrase guards each of its tokens */
    assert_non_null(find_row(&t, "read timed ok"));
    free(t.rows);

    /* and the unusual lines name the merged trouble template, its first line */
    tw_unusual_line *unusual;
    int n;
    assert_int_equal(tw_templates_unusual(run, false, &unusual, &n), TW_OK);
    int found = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(unusual[i].template_text, "rank <*> connection refused") == 0) {
            found++;
            assert_int_equal(unusual[i].count, 2);
            assert_int_equal(unusual[i].where.line, 2);
            assert_string_equal(unusual[i].example, "rank beta connection refused");
            assert_true(unusual[i].why & TW_UNUSUAL_TROUBLE);
        }
        assert_null(strstr(unusual[i].template_text, "established"));
    }
    assert_int_equal(found, 1);
    free(unusual);
    tw_run_free(run);
}

/* Of 20 tokens, a line sharing exactly TW_TEMPLATES_SIMILARITY percent of
 * them with a template joins it; one token fewer and it starts its own. */
static void run_sharing(int shared, table *out)
{
    enum { N = 20 };
    assert_int_equal((TW_TEMPLATES_SIMILARITY * N) % 100, 0);
    char base[N * 4 + 1] = "", other[N * 4 + 1] = "";
    for (int j = 0; j < N; j++) { /* "aa ab ac ...", the other line "ba bb ..." past the shared ones */
        char w[4] = {'a', (char)('a' + j), ' ', '\0'};
        strcat(base, w);
        w[0] = j < shared ? 'a' : 'b';
        strcat(other, w);
    }
    base[strlen(base) - 1] = other[strlen(other) - 1] = '\0';
    tw_run *run = new_run();
    add_line(run, 0, 1, base);
    add_line(run, 0, 2, other);
    *out = read_table(run);
    tw_run_free(run);
}

static void test_similarity_threshold_boundary(void **state)
{
    (void)state;
    int at = TW_TEMPLATES_SIMILARITY * 20 / 100;
    table t;
    run_sharing(at, &t);
    assert_int_equal(t.count, 1);
    assert_int_equal(t.rows[0].lines, 2);
    int wild = 0;
    for (const char *p = strstr(t.rows[0].text, "<*>"); p; p = strstr(p + 1, "<*>"))
        wild++;
    assert_int_equal(wild, 20 - at);
    free(t.rows);

    run_sharing(at - 1, &t);
    assert_int_equal(t.count, 2);
    assert_int_equal(t.rows[0].lines, 1);
    assert_int_equal(t.rows[1].lines, 1);
    assert_null(strstr(t.rows[0].text, "<*>"));
    free(t.rows);
}

/* Single-letter tokens widened to <*> take more room than the line did. */
static void test_widened_template_fits(void **state)
{
    (void)state;
    char a[256] = "", b[256] = "";
    int n = 90;
    for (int j = 0; j < n; j++) {
        strcat(a, j ? " a" : "a");
        strcat(b, j ? (j < n / 2 ? " a" : " b") : "a");
    }
    tw_run *run = new_run();
    add_line(run, 0, 1, a);
    add_line(run, 0, 2, b);
    table t = read_table(run);
    assert_int_equal(t.count, 1);
    assert_int_equal(t.rows[0].lines, 2);
    assert_int_equal(strlen(t.rows[0].text), (size_t)(n / 2 * 2 + n / 2 * 4 - 1));
    free(t.rows);
    tw_run_free(run);
}

/* A leaf (token count, leading token) holds TW_TEMPLATES_LEAF_MAX templates;
 * a line that joins none of them is grouped by its exact masked text (no
 * merge: a line like another past the cap stays apart), and nothing is
 * other; lines of the templates in the leaf still join them. */
static void node_line(char *line, size_t cap, int i, int variant)
{
    char w1[16], w2[16], w3[16];
    word(w1, i, 1), word(w2, i, 2), word(w3, variant ? i + 1000 : i, 3);
    snprintf(line, cap, "node %s %s %s", w1, w2, w3);
}

static void test_past_a_full_leaf_lines_are_grouped_by_exact_text(void **state)
{
    (void)state;
    tw_run *run = new_run();
    char line[128];
    uint64_t number = 0;
    for (int i = 0; i < TW_TEMPLATES_LEAF_MAX + 5; i++) { /* one leaf: 4 tokens, "node"; 1 of 4 alike */
        node_line(line, sizeof line, i, 0);
        add_line(run, 0, ++number, line);
    }
    node_line(line, sizeof line, 0, 0); /* in the leaf */
    add_line(run, 0, ++number, line);
    node_line(line, sizeof line, TW_TEMPLATES_LEAF_MAX + 1, 0); /* past it, twice */
    add_line(run, 0, ++number, line);
    node_line(line, sizeof line, TW_TEMPLATES_LEAF_MAX + 1, 1); /* 3 of 4 alike, but past the leaf */
    add_line(run, 0, ++number, line);
    node_line(line, sizeof line, 1, 1); /* 3 of 4 alike, in the leaf: merges */
    add_line(run, 0, ++number, line);
    table t = read_table(run);
    assert_int_equal(t.count, TW_TEMPLATES_LEAF_MAX + 6);
    assert_int_equal(t.other, 0);
    node_line(line, sizeof line, 0, 0);
    assert_int_equal(find_row(&t, line)->lines, 2);
    node_line(line, sizeof line, TW_TEMPLATES_LEAF_MAX + 1, 0);
    assert_int_equal(find_row(&t, line)->lines, 2);
    node_line(line, sizeof line, TW_TEMPLATES_LEAF_MAX + 1, 1);
    assert_int_equal(find_row(&t, line)->lines, 1);
    node_line(line, sizeof line, 1, 1);
    assert_null(find_row(&t, line));
    free(t.rows);
    tw_run_free(run);
}

/* A tree node has TW_TEMPLATES_CHILDREN_MAX children, the last the wildcard:
 * leading tokens past them share the wildcard's leaf, and merge there. */
static void test_new_leading_tokens_past_the_children_cap_share_the_wildcard(void **state)
{
    (void)state;
    tw_run *run = new_run();
    char line[64], w[16];
    int extra = 20;
    for (int i = 0; i < TW_TEMPLATES_CHILDREN_MAX + extra; i++) {
        word(w, i, 0);
        snprintf(line, sizeof line, "%s is ready", w);
        add_line(run, 0, (uint64_t)i + 1, line);
    }
    table t = read_table(run);
    assert_int_equal(t.count, TW_TEMPLATES_CHILDREN_MAX);
    const row *wild = find_row(&t, "<*> is ready");
    assert_non_null(wild);
    assert_int_equal(wild->lines, extra + 1);
    assert_int_equal(wild->first, TW_TEMPLATES_CHILDREN_MAX);
    free(t.rows);
    tw_run_free(run);
}

/* TW_TEMPLATES_MAX templates in all: lines that would start more are other. */
static void test_templates_past_the_cap_are_other(void **state)
{
    (void)state;
    tw_run *run = new_run();
    char line[512], w[16];
    uint64_t number = 0;
    int per_length = TW_TEMPLATES_CHILDREN_MAX - 2, lengths = TW_TEMPLATES_MAX / per_length + 2;
    for (int n = 2; n < 2 + lengths; n++) {
        for (int i = 0; i < per_length; i++) {
            word(w, i, n);
            int o = snprintf(line, sizeof line, "%s", w);
            for (int k = 1; k < n; k++)
                o += snprintf(line + o, sizeof line - (size_t)o, " f");
            add_line(run, 0, ++number, line);
        }
    }
    table t = read_table(run);
    assert_int_equal(t.count, TW_TEMPLATES_MAX);
    assert_int_equal(t.other, number - TW_TEMPLATES_MAX);
    free(t.rows);
    tw_run_free(run);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_word_only_variable_token_is_generalised),
        cmocka_unit_test(test_different_token_counts_never_merge),
        cmocka_unit_test(test_trouble_words_are_never_generalised),
        cmocka_unit_test(test_similarity_threshold_boundary),
        cmocka_unit_test(test_widened_template_fits),
        cmocka_unit_test(test_past_a_full_leaf_lines_are_grouped_by_exact_text),
        cmocka_unit_test(test_new_leading_tokens_past_the_children_cap_share_the_wildcard),
        cmocka_unit_test(test_templates_past_the_cap_are_other),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
