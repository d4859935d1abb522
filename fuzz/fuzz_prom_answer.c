/*
 * fuzz_prom_answer.c: libFuzzer target for the parse of a Prometheus HTTP
 * API answer (remote/prom_query.c): the input is whatever a server (or
 * something in its place) sent back to /api/v1/query or query_range.
 */
#include <stddef.h>
#include <stdint.h>

#include "remote/prom_query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tw_prom_result r;
    char err[256];
    if (tw_prom_parse((const char *)data, size, &r, err, sizeof err) == 0) {
        for (size_t i = 0; i < r.count; i++)
            (void)tw_prom_label_value(&r.series[i], "run");
        tw_prom_result_free(&r);
    }
    return 0;
}
