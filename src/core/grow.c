/*
 * grow.c: arrays that grow by doubling (grow.h). The array's pointer is
 * read and written through memcpy, so one function serves every T *.
 */
#include "grow.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/error.h"

int tw_grow(void *items, int *cap, int count, int first, size_t size)
{
    if (count < *cap)
        return TW_OK;
    if (*cap > INT_MAX / 2)
        return TW_ENOMEM;
    int more = *cap ? *cap * 2 : first;
    void *old;
    memcpy(&old, items, sizeof old);
    void *grown = realloc(old, size * (size_t)more);
    if (!grown)
        return TW_ENOMEM;
    memcpy(items, &grown, sizeof grown);
    *cap = more;
    return TW_OK;
}
