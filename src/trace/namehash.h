/*
 * namehash.h: the hash of an event's name as the name tables key it (its
 * first TW_TRACE_NAME_MAX - 1 bytes; tables.c). The fast path (fastpath.c)
 * takes it from the bytes where they lie, as it copies the name out, so
 * neither the kinds' memo (classify.c) nor the tables read a long kernel
 * name through again; an event without one (the token path, a pair) has it
 * worked out where it is needed (tw_trace_event_hash, events.h).
 */
#ifndef TW_TRACE_NAMEHASH_H
#define TW_TRACE_NAMEHASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "trainwatch/trace.h"

/* Eight bytes at a time in two lanes (a name's bytes, not its order of
 * words, decide its row: the hash only picks the slot). */
static inline uint32_t tw_name_hash(const char *s, size_t n)
{
    if (n > TW_TRACE_NAME_MAX - 1)
        n = TW_TRACE_NAME_MAX - 1;
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    uint64_t a = n, b = ~(uint64_t)n, w, x;
    for (; n >= 16; s += 16, n -= 16) {
        memcpy(&w, s, 8);
        memcpy(&x, s + 8, 8);
        a = (a ^ w) * k;
        b = (b ^ x) * k;
        a ^= a >> 29;
        b ^= b >> 31;
    }
    if (n >= 8) {
        memcpy(&w, s, 8);
        a = (a ^ w) * k;
        s += 8, n -= 8;
    }
    w = 0;
    memcpy(&w, s, n);
    b = (b ^ w) * k;
    a = (a ^ (b >> 27) ^ b) * k;
    return (uint32_t)(a >> 32);
}

#endif
