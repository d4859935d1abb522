/*
 * grow.c: arrays that grow by doubling (grow.h). The array's pointer is
 * read and written through memcpy, so one function serves every T *.
 */
#include "grow.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/error.h"

/* The array items points to, reallocated to more items of size bytes. */
static int resize(void *items, size_t more, size_t size)
{
    if (more > SIZE_MAX / size)
        return TW_ENOMEM;
    void *old;
    memcpy(&old, items, sizeof old);
    void *grown = realloc(old, size * more);
    if (!grown)
        return TW_ENOMEM;
    memcpy(items, &grown, sizeof grown);
    return TW_OK;
}

int tw_grow(void *items, int *cap, int count, int first, size_t size)
{
    if (count < *cap)
        return TW_OK;
    if (*cap > INT_MAX / 2)
        return TW_ENOMEM;
    int more = *cap ? *cap * 2 : first;
    if (resize(items, (size_t)more, size) != TW_OK)
        return TW_ENOMEM;
    *cap = more;
    return TW_OK;
}

int tw_grow_size(void *items, size_t *cap, size_t count, size_t first, size_t size)
{
    if (count < *cap)
        return TW_OK;
    if (*cap > SIZE_MAX / 2)
        return TW_ENOMEM;
    size_t more = *cap ? *cap * 2 : first;
    if (resize(items, more, size) != TW_OK)
        return TW_ENOMEM;
    *cap = more;
    return TW_OK;
}
