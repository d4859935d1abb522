/*
 * grow.h: room for one more item in an array that grows by doubling, the
 * shape every list in trainwatch has (findings, ranks, launches, inputs,
 * chart series...): TW_GROW(items, count, cap, first) before appending.
 */
#ifndef TW_CORE_GROW_H
#define TW_CORE_GROW_H

#include <stddef.h>

/* When count has reached *cap, reallocates the array *items points to
 * (items is the address of a T * variable) to twice *cap items of size
 * bytes, or to first items when it is empty. Returns TW_OK, or TW_ENOMEM
 * with the array and *cap as they were. */
int tw_grow(void *items, int *cap, int count, int first, size_t size);

#define TW_GROW(array, count, cap, first) tw_grow(&(array), &(cap), (count), (first), sizeof *(array))

/* The same for arrays counted in size_t. */
int tw_grow_size(void *items, size_t *cap, size_t count, size_t first, size_t size);

#define TW_GROW_SIZE(array, count, cap, first) tw_grow_size(&(array), &(cap), (count), (first), sizeof *(array))

#endif
