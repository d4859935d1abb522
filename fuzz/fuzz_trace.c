/*
 * fuzz_trace.c: libFuzzer target for `trainwatch trace`'s reader: any input
 * is read as a trace file (JSON streamed through the tokenizer, or Paddle
 * summary text), accounted, judged, and written as text and JSON.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trainwatch/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tw_trace *t;
    if (tw_trace_new(&t, NULL) != 0)
        return 0;
    tw_trace_add_buffer(t, "fuzz.json", (const char *)data, size, -1);
    tw_trace_add_buffer(t, "fuzz.1.json", (const char *)data, size / 2, -1);
    FILE *null = fopen("/dev/null", "w");
    if (null && tw_trace_finish(t) == 0) {
        tw_trace_write_text(null, t, true);
        tw_trace_write_json(null, t);
    }
    if (null)
        fclose(null);
    tw_trace_free(t);
    return 0;
}
