/*
 * keywords.h: find which of a fixed set of literal needles occur in a line,
 * in one pass. Needles are bucketed by a hash of their first two bytes, so a
 * line costs one table probe per byte plus a comparison only where a needle
 * could start; no per-needle memmem over the line.
 */
#ifndef TW_PARSE_KEYWORDS_H
#define TW_PARSE_KEYWORDS_H

#include <stddef.h>
#include <stdint.h>

#define TW_KEYWORDS_MAX 64

typedef struct tw_keywords {
    const char *const *needles;   /* borrowed, static strings of 2+ bytes */
    size_t count;
    size_t lens[TW_KEYWORDS_MAX];
    uint64_t buckets[4096];        /* by a hash of the first two bytes: needles starting so */
} tw_keywords;

/* Builds the index; count at most TW_KEYWORDS_MAX. */
void tw_keywords_init(tw_keywords *k, const char *const *needles, size_t count);

/* Bit i of the result is set when needles[i] occurs in s. */
uint64_t tw_keywords_scan(const tw_keywords *k, const char *s, size_t len);

#endif
