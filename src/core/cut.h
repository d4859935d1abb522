/*
 * cut.h: copying text into a fixed array, cut to fit: the names, results
 * and details that records, trace events and replies keep in char arrays.
 * The copy always ends in '\0'; a longer text loses its tail, never the
 * array's neighbour.
 *
 * Ownership: none; header only.
 */
#ifndef TW_CORE_CUT_H
#define TW_CORE_CUT_H

#include <stddef.h>
#include <string.h>

/* n bytes of from (at most cap - 1 of them) into to[cap], ended by '\0'. */
static inline void tw_copy_cut(char *to, size_t cap, const char *from, size_t n)
{
    if (cap == 0)
        return;
    if (n > cap - 1)
        n = cap - 1;
    memcpy(to, from, n);
    to[n] = '\0';
}

/* The string from, cut to fit to[cap]. */
static inline void tw_copy_str(char *to, size_t cap, const char *from)
{
    tw_copy_cut(to, cap, from, cap ? strnlen(from, cap - 1) : 0);
}

#endif
