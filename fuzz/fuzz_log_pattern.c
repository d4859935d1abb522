/*
 * fuzz_log_pattern.c: the logging pattern compiler (src/log/pattern.c): any
 * text either compiles or is refused with a reason; what compiles formats a
 * record (with fields, a long message, an odd level) within the line bound.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[2048];
    if (size >= sizeof text)
        size = sizeof text - 1;
    memcpy(text, data, size);
    text[size] = '\0';
    tw_log_pattern *p = NULL;
    char why[128];
    if (tw_log_pattern_compile(text, &p, why, sizeof why) != 0) {
        if (!memchr(why, '\0', sizeof why))
            abort();
        return 0;
    }
    int64_t shape[] = {2, 3};
    tw_log_field fields[] = {tw_field_int("step", 7), tw_field_double("loss", 0.25), tw_field_str("s", text),
                             tw_log_summary("t", "tensor", shape, 2, 6)};
    tw_log_rec r = {.ns = 1712312730123000000,
                    .level = size % 2 ? 35 : 20,
                    .logger = "fuzz",
                    .message = text,
                    .message_len = size,
                    .file = "a/b.c",
                    .func = "f",
                    .line = 3,
                    .fields = fields,
                    .field_count = 4};
    static char line[TW_LOG_LINE_MAX];
    tw_log_out o = {line, 0, sizeof line - 1, false};
    tw_log_pattern_format(p, &r, &o);
    tw_out_end(&o);
    if (o.len > sizeof line)
        abort();
    tw_log_pattern_free(p);
    return 0;
}
