/*
 * fuzz_gpu_log.c: libFuzzer target for the GPU telemetry reader
 * (src/parse/gpu_log.c): any input is split into lines and read as a GPU
 * log (every dialect's header and rows), and its start is put through
 * detection; the samples must be in range.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/gpu_log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(void *arg, const tw_gpu_sample *s)
{
    (void)arg;
    if (!(isnan(s->util) || (s->util >= 0 && s->util <= 100)) || !(isnan(s->mem_used) || s->mem_used >= 0) ||
        (isnan(s->util) && isnan(s->mem_used)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    (void)tw_gpu_log_detect(text, size);
    (void)tw_gpu_log_headerless(text, size);
    bool columns = tw_gpu_log_headerless_fits(text, size, "timestamp,index,utilization.gpu,memory.used");
    tw_gpu_reader *r;
    if (tw_gpu_reader_new(&r) != 0)
        return 0;
    if (columns && tw_gpu_reader_set_columns(r, "timestamp,index,utilization.gpu,memory.used") != 0)
        abort();
    const char *p = text, *end = text + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        tw_gpu_reader_line(r, p, len, check, NULL);
        p += len + (nl != NULL);
    }
    tw_gpu_reader_free(r);
    return 0;
}
