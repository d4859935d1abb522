/*
 * buffer.h: a growable byte buffer for building output (exposition bodies,
 * HTTP bodies). Grows geometrically; reset keeps the allocation so a scrape
 * loop reuses one buffer. A failed allocation sets `failed` and later appends
 * do nothing, so callers check once at the end.
 */
#ifndef TW_CORE_BUFFER_H
#define TW_CORE_BUFFER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct tw_buffer {
    char *data;
    size_t len, cap;
    bool failed;
} tw_buffer;

void tw_buffer_init(tw_buffer *b);
void tw_buffer_free(tw_buffer *b);
void tw_buffer_reset(tw_buffer *b);
bool tw_buffer_reserve(tw_buffer *b, size_t extra);
void tw_buffer_append(tw_buffer *b, const char *s, size_t n);
void tw_buffer_puts(tw_buffer *b, const char *s);
void tw_buffer_putc(tw_buffer *b, char c);
void tw_buffer_printf(tw_buffer *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Shortest text that reads back to the same double; +Inf, -Inf, NaN. */
void tw_buffer_double(tw_buffer *b, double v);
/* The same into out (at least TW_DOUBLE_CHARS bytes); returns the length. */
#define TW_DOUBLE_CHARS 32
size_t tw_format_double(char *out, double v);
void tw_buffer_uint(tw_buffer *b, unsigned long long v);

#endif
