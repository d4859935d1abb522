/*
 * promql_eval.c: evaluates PromQL over given samples with trainwatch's
 * evaluator, for tests that compare it with Prometheus (tests/e2e/
 * test_promql.py writes the same samples into a promtool test file).
 *
 * Input, one directive per line:
 *   interval SECONDS
 *   series METRIC{LABELS} V0 V1 ...   values at 0, interval, 2*interval...;
 *                                     "_" for no sample, "stale" for a marker
 *   eval SECONDS EXPR
 * Output per eval: "result N", then one "LABELS VALUE" line per sample (or
 * "scalar VALUE", or "error MESSAGE"), then "end".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/rules/promql.h"
#include "trainwatch/error.h"

#define MAX_SERIES 64
#define MAX_SLOTS  4096

typedef struct input_series {
    tw_lset labels;
    double *values;
    size_t count;
} input_series;

static int parse_labels(const char *text, tw_lset *out)
{
    tw_pq_node *n;
    char err[256];
    if (tw_pq_parse(text, &n, err, sizeof err) != TW_OK || n->kind != TW_PQ_SELECTOR) {
        fprintf(stderr, "promql_eval: bad series %s: %s\n", text, err);
        return -1;
    }
    *out = (tw_lset){0};
    tw_lset_set(out, TW_NAME_LABEL, n->u.sel.metric);
    for (size_t i = 0; i < n->u.sel.matcher_count; i++)
        tw_lset_set(out, n->u.sel.matchers[i].name, n->u.sel.matchers[i].value);
    tw_pq_free(n);
    return 0;
}

static int compare_samples(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void evaluate(const tw_store *store, double at, const char *expr, int index)
{
    printf("result %d\n", index);
    tw_pq_node *n;
    char err[512];
    if (tw_pq_parse(expr, &n, err, sizeof err) != TW_OK) {
        printf("error %s\nend\n", err);
        return;
    }
    tw_pq_context c = {.store = store, .t = (int64_t)(at * 1000), .err = err, .err_cap = sizeof err};
    tw_vector v = {0};
    double scalar = 0;
    int rc = tw_pq_eval(&c, n, &v, &scalar);
    if (rc != TW_OK) {
        printf("error %s\n", err);
    } else if (n->type == TW_PQ_SCALAR) {
        printf("scalar %.17g\n", scalar);
    } else {
        char **lines = calloc(v.count + 1, sizeof *lines);
        for (size_t i = 0; i < v.count; i++) {
            char *text = tw_lset_text(&v.items[i].labels);
            size_t len = strlen(text) + 40;
            lines[i] = malloc(len);
            snprintf(lines[i], len, "%s %.17g", text, v.items[i].v);
            free(text);
        }
        qsort(lines, v.count, sizeof *lines, compare_samples);
        for (size_t i = 0; i < v.count; i++) {
            printf("%s\n", lines[i]);
            free(lines[i]);
        }
        free(lines);
    }
    printf("end\n");
    tw_vector_free(&v);
    tw_pq_free(n);
}

int main(void)
{
    static input_series series[MAX_SERIES];
    size_t series_count = 0, slots = 0;
    double interval = 60;
    tw_store *store = NULL;
    char line[8192];
    int evals = 0;
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        if (!strncmp(line, "interval ", 9)) {
            interval = atof(line + 9);
        } else if (!strncmp(line, "series ", 7) && series_count < MAX_SERIES) {
            char *text = line + 7, *sp = strchr(text, '}');
            sp = sp ? sp + 1 : strchr(text, ' ');
            if (!sp)
                return 2;
            char saved = *sp;
            *sp = '\0';
            input_series *s = &series[series_count++];
            if (parse_labels(text, &s->labels) != 0)
                return 2;
            *sp = saved;
            s->values = calloc(MAX_SLOTS, sizeof *s->values);
            for (char *tok = strtok(sp, " "); tok && s->count < MAX_SLOTS; tok = strtok(NULL, " ")) {
                s->values[s->count++] = !strcmp(tok, "_")       ? tw_store_none()
                                        : !strcmp(tok, "stale") ? tw_store_stale()
                                                                : strtod(tok, NULL);
            }
            if (s->count > slots)
                slots = s->count;
        } else if (!strncmp(line, "eval ", 5)) {
            if (!store) {
                if (tw_store_new(slots + 2, &store) != TW_OK)
                    return 1;
                for (size_t k = 0; k < slots; k++) {
                    tw_store_begin(store, (int64_t)(k * interval * 1000));
                    for (size_t i = 0; i < series_count; i++) {
                        if (k < series[i].count)
                            tw_store_put(store, &series[i].labels, series[i].values[k], NULL);
                    }
                }
            }
            char *expr;
            double at = strtod(line + 5, &expr);
            evaluate(store, at, expr + 1, evals++);
        }
    }
    for (size_t i = 0; i < series_count; i++) {
        tw_lset_free(&series[i].labels);
        free(series[i].values);
    }
    tw_store_free(store);
    return 0;
}
