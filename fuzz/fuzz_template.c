/*
 * fuzz_template.c: libFuzzer target for rule templates: compile, then render
 * with labels and a few values (NaN, Inf, huge, tiny).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_text.h"
#include "rules/template.h"
#include "trainwatch/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *text = fuzz_text(data, size);
    if (!text)
        return 0;
    tw_template *t;
    char err[256];
    if (tw_template_compile(text, &t, err, sizeof err) == TW_OK) {
        tw_lset l = {0};
        tw_lset_set(&l, "job", "j");
        tw_lset_set(&l, "rank", "%s%n{{");
        tw_lset_set(&l, "fmt", "%.999999999f %999999999d %.1000e"); /* a format only known when rendering */
        const double values[] = {0, -1.5, 1e300, -1e-300, NAN, INFINITY, 123456789};
        for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
            tw_template_data d = {.labels = &l, .value = values[i], .external_url = "http://x"};
            free(tw_template_render(t, &d));
        }
        tw_lset_free(&l);
        tw_template_free(t);
    }
    free(text);
    return 0;
}
