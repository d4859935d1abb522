/*
 * fuzz_user_formats.c: libFuzzer target for the user formats
 * (src/parse/user_formats.c). The input's first byte picks the reader: a
 * --pattern (the first line is the pattern) or a --formats YAML file (up to
 * a line "---lines---"); what follows is log text parsed with whatever
 * compiled. A bad pattern or file must be refused with a message, never
 * crash; a good one must parse any text.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/user_formats.h"
#include "trainwatch/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drop(void *arg, const tw_record *r)
{
    (void)arg;
    (void)r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool yaml = data[0] & 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    const char *split = yaml ? memmem(text, len, "\n---lines---\n", 13) : memchr(text, '\n', len);
    size_t head = split ? (size_t)(split - text) : len;
    size_t skip = split ? (yaml ? 13 : 1) : 0;
    char *spec = malloc(head + 1);
    tw_user_formats *set;
    if (!spec || tw_user_formats_new(&set) != 0) {
        free(spec);
        return 0;
    }
    memcpy(spec, text, head);
    spec[head] = '\0';
    char err[512];
    int rc = yaml ? tw_user_formats_load(set, spec, head, err, sizeof err)
                  : tw_user_formats_add_pattern(set, spec, err, sizeof err);
    if (rc != 0 && err[0] == '\0')
        abort(); /* a refusal always says why */
    tw_parser *p;
    if (rc == 0 && tw_parser_new(&p, "fuzz.log", NULL, -1) == 0) {
        tw_parser_set_user_formats(p, set);
        tw_parser_feed(p, text + head + skip, len - head - skip, drop, NULL);
        tw_parser_close(p);
    }
    tw_user_formats_free(set);
    free(spec);
    return 0;
}
