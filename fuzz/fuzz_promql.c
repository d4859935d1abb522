/*
 * fuzz_promql.c: libFuzzer target for the PromQL parser and evaluator. An
 * input is one expression; when it parses, it is evaluated over a small
 * store (counters with a reset, a NaN gauge, a stale marker) at two times.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_text.h"
#include "rules/promql.h"
#include "trainwatch/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tw_store *store(void)
{
    static tw_store *s;
    if (s)
        return s;
    tw_store_new(64, &s);
    const char *names[] = {"x", "loss", "x"}, *ranks[] = {"0", "0", "1"};
    for (int k = 0; k < 40; k++) {
        tw_store_begin(s, (int64_t)k * 15000);
        for (int i = 0; i < 3; i++) {
            tw_lset l = {0};
            tw_lset_set(&l, TW_NAME_LABEL, names[i]);
            tw_lset_set(&l, "job", "j");
            tw_lset_set(&l, "rank", ranks[i]);
            double v = i == 1 ? (k > 30 ? NAN : 3.0 - k * 0.05) : (double)(k % 17) * (i + 1);
            if (!(i == 2 && k == 20))
                tw_store_put(s, &l, v, NULL);
            tw_lset_free(&l);
        }
        tw_store_end(s, NULL);
    }
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *text = fuzz_text(data, size);
    if (!text)
        return 0;
    tw_pq_node *n;
    char err[256];
    if (tw_pq_parse(text, &n, err, sizeof err) == TW_OK) {
        for (int64_t t = 300000; t <= 600000; t += 300000) {
            tw_pq_context c = {.store = store(), .t = t, .err = err, .err_cap = sizeof err};
            tw_vector v = {0};
            double scalar;
            if (n->type == TW_PQ_SCALAR || n->type == TW_PQ_VECTOR)
                tw_pq_eval(&c, n, &v, &scalar);
            tw_vector_free(&v);
        }
        tw_pq_free(n);
    }
    free(text);
    return 0;
}
