/*
 * keywords.c: the one-pass multi-needle search of keywords.h.
 */
#include "keywords.h"

#include <string.h>

static unsigned bucket(const char *s)
{
    return (((unsigned)(unsigned char)s[0] << 5) ^ (unsigned char)s[1]) & 4095;
}

void tw_keywords_init(tw_keywords *k, const char *const *needles, size_t count)
{
    memset(k, 0, sizeof *k);
    k->needles = needles;
    k->count = count < TW_KEYWORDS_MAX ? count : TW_KEYWORDS_MAX;
    for (size_t i = 0; i < k->count; i++) {
        k->lens[i] = strlen(needles[i]);
        k->buckets[bucket(needles[i])] |= 1ull << i;
    }
}

uint64_t tw_keywords_scan(const tw_keywords *k, const char *s, size_t len)
{
    uint64_t found = 0;
    if (len < 2)
        return 0;
    for (size_t i = 0; i + 1 < len; i++) {
        uint64_t candidates = k->buckets[bucket(s + i)] & ~found;
        while (candidates) {
            int n = __builtin_ctzll(candidates);
            candidates &= candidates - 1;
            if (k->lens[n] <= len - i && memcmp(s + i, k->needles[n], k->lens[n]) == 0)
                found |= 1ull << n;
        }
    }
    return found;
}
