/*
 * fuzz_text.h: a fuzz input as a NUL-terminated string, for the targets
 * whose code under test reads C strings (PromQL, templates, headers).
 */
#ifndef TW_FUZZ_TEXT_H
#define TW_FUZZ_TEXT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A malloc'd copy of data with a NUL after it (free it), or NULL. */
static inline char *fuzz_text(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text) {
        memcpy(text, data, size);
        text[size] = '\0';
    }
    return text;
}

#endif
