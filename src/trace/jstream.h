/*
 * jstream.h: a pull tokenizer for JSON read in chunks from any source (a
 * gzip or plain file through zlib, or memory). It keeps one buffer and one
 * capped string: a string longer than TW_JSTR_MAX is cut (and counted) but
 * read to its end, so memory stays the same whatever the input holds.
 *
 * It is lenient where profilers are sloppy: raw control bytes and invalid
 * UTF-8 inside strings are kept as they are (paddle.profiler writes names
 * unescaped), NaN/Infinity are numbers. Structure (brackets, commas) is the
 * caller's to check: the tokenizer only says what comes next.
 */
#ifndef TW_TRACE_JSTREAM_H
#define TW_TRACE_JSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TW_JSTR_MAX       1024
#define TW_JSTREAM_BUFFER (1u << 20)

typedef enum tw_jtok {
    TW_JT_EOF,
    TW_JT_ERROR,
    TW_JT_OBJECT, /* { */
    TW_JT_OBJECT_END,
    TW_JT_ARRAY, /* [ */
    TW_JT_ARRAY_END,
    TW_JT_COLON,
    TW_JT_COMMA,
    TW_JT_STRING,
    TW_JT_NUMBER,
    TW_JT_TRUE,
    TW_JT_FALSE,
    TW_JT_NULL,
} tw_jtok;

/* Fills buf with up to cap bytes; returns the count, 0 at the end, -1 on error. */
typedef long (*tw_jstream_read_fn)(void *src, char *buf, size_t cap);

typedef struct tw_jstream {
    tw_jstream_read_fn read;
    void *src;
    char *buf;
    size_t len, pos;
    uint64_t base; /* bytes before buf[0] */
    bool eof, read_error;
    const char *error; /* what went wrong, with TW_JT_ERROR */
    char str[TW_JSTR_MAX + 1];
    size_t str_len;
    bool str_cut;
    uint64_t strings_cut;
    double num;
} tw_jstream;

/* Returns TW_OK or TW_ENOMEM. */
int tw_jstream_init(tw_jstream *s, tw_jstream_read_fn read, void *src);
void tw_jstream_free(tw_jstream *s);
tw_jtok tw_jstream_next(tw_jstream *s);
/* Skips one value whose first token was t; any depth, in constant memory.
 * Objects and arrays are passed over a byte at a time (balanced brackets,
 * closed strings and JSON's bytes checked, not their grammar). */
bool tw_jstream_skip(tw_jstream *s, tw_jtok t);
/* Skips the next value, whatever it is: as tw_jstream_skip(s,
 * tw_jstream_next(s)), but strings and numbers are passed without being
 * copied or parsed. */
bool tw_jstream_skip_next(tw_jstream *s);
/* The key of an object's member, when it lies whole in the buffer: reads
 * [, or nothing when first] "key" : (the key in str; *result 1) or the
 * object's } (*result 0) and returns true. False when it cannot be done
 * here (the buffer's end, an escape, anything unexpected): nothing was
 * consumed and the caller reads the tokens itself. */
bool tw_jstream_key_fast(tw_jstream *s, bool first, int *result);
/* Bytes consumed so far. */
static inline uint64_t tw_jstream_offset(const tw_jstream *s)
{
    return s->base + s->pos;
}

#endif
