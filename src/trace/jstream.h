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
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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
/* Or, without a copy: makes the source's next bytes readable where they lie
 * (*bytes) and returns their count, 0 at the end, -1 on error; they stay
 * readable until the next call (filesrc.c maps a file this way). */
typedef long (*tw_jstream_view_fn)(void *src, const char **bytes);

typedef struct tw_jstream {
    tw_jstream_read_fn read;
    tw_jstream_view_fn view; /* set after init: read is not used */
    void *src;
    const char *buf; /* the bytes being read: own, or the source's view */
    char *own;       /* TW_JSTREAM_BUFFER bytes read fills */
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
/* Skips white space; the next byte, not consumed, or -1 at the end of the
 * input or on a read error (tw_jstream_next then says which). */
int tw_jstream_peek_slow(tw_jstream *s);
static inline int tw_jstream_peek(tw_jstream *s)
{
    if (s->pos < s->len) {
        char c = s->buf[s->pos];
        if (c != ' ' && c != '\n' && c != '\t' && c != '\r')
            return (unsigned char)c;
    }
    return tw_jstream_peek_slow(s);
}
/* Drops the buffer: the next byte read is the source's, which the caller
 * has placed at offset off. */
void tw_jstream_restart(tw_jstream *s, uint64_t off);
/* The value of a number's text [t, t + n) (the bytes of a number as the
 * tokenizer takes them: digits, - + . e E): digits with an optional
 * fraction and up to 19 significant digits exactly, else strtod; NaN when
 * it is not a number. */
double tw_jstream_number(const char *t, size_t n);
/* Whether c may be part of a number's text. */
static inline bool tw_jnumber_char(int c)
{
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* The first " or \ in [p, end) (also the first NUL byte when nul), or
 * end: eight bytes at a time in a word, the portable path. */
static inline const char *tw_jfind_scalar(const char *p, const char *end, bool nul)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    for (uint64_t w, m, x, y; end - p >= 8; p += 8) {
        memcpy(&w, p, 8);
        x = w ^ (ones * '"');
        y = w ^ (ones * '\\');
        m = ((x - ones) & ~x) | ((y - ones) & ~y);
        if (nul)
            m |= (w - ones) & ~w;
        m &= highs;
        if (m) {
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            return p + (__builtin_ctzll(m) >> 3); /* the lowest flagged byte is exact */
#else
            break;
#endif
        }
    }
    while (p < end && *p != '"' && *p != '\\' && !(nul && *p == '\0'))
        p++;
    return p;
}

/* As tw_jfind_scalar, sixteen bytes at a time with SSE2 (every x86-64 has
 * it); the scalar path elsewhere and for the last bytes. */
static inline const char *tw_jfind(const char *p, const char *end, bool nul)
{
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), zero = _mm_setzero_si128();
    for (; end - p >= 16; p += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i m = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash));
        if (nul)
            m = _mm_or_si128(m, _mm_cmpeq_epi8(v, zero));
        unsigned bits = (unsigned)_mm_movemask_epi8(m);
        if (bits)
            return p + __builtin_ctz(bits);
    }
#endif
    return tw_jfind_scalar(p, end, nul);
}

/* A bit per byte of the 64 at p (bit i: p[i]) that is " or \\ or NUL:
 * the portable path. */
static inline uint64_t tw_jspecial64_scalar(const char *p)
{
    uint64_t m = 0;
    for (int i = 0; i < 64; i++)
        m |= (uint64_t)(p[i] == '"' || p[i] == '\\' || p[i] == '\0') << i;
    return m;
}

/* As tw_jspecial64_scalar, with SSE2 where there is SSE2. */
static inline uint64_t tw_jspecial64(const char *p)
{
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), zero = _mm_setzero_si128();
    uint64_t m = 0;
    for (int i = 0; i < 4; i++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * i));
        __m128i x =
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)), _mm_cmpeq_epi8(v, zero));
        m |= (uint64_t)(unsigned)_mm_movemask_epi8(x) << (16 * i);
    }
    return m;
#else
    return tw_jspecial64_scalar(p);
#endif
}

/* Bytes consumed so far. */
static inline uint64_t tw_jstream_offset(const tw_jstream *s)
{
    return s->base + s->pos;
}

#endif
