/*
 * tables.h: per-name statistics (kernels, operators) in bounded memory. An
 * open-addressing hash table of at most TW_TABLE_MAX names, each name cut
 * to TW_TRACE_NAME_MAX - 1 bytes and kept in one arena; events of further
 * names are added to a last "(other names)" row and counted, so totals stay
 * right while memory does not grow with the trace.
 */
#ifndef TW_TRACE_TABLES_H
#define TW_TRACE_TABLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "namehash.h"
#include "trainwatch/trace.h"

#define TW_TABLE_MAX 8192

typedef struct tw_name_row {
    const char *name;
    size_t len; /* of name, which may hold a NUL from a \u0000 */
    uint32_t hash;
    uint64_t count, short_count;
    double total, self, max, min, short_total;
    int32_t issuer; /* row of the operator table, -1 unknown */
} tw_name_row;

typedef struct tw_name_table {
    tw_name_row *rows; /* TW_TABLE_MAX + 1: the last is "(other names)" */
    int32_t *slots;    /* 2 x TW_TABLE_MAX, -1 empty */
    int n;
    char *arena;
    size_t arena_len;
    uint64_t over; /* events counted under "(other names)" */
} tw_name_table;

int tw_name_table_init(tw_name_table *t);
void tw_name_table_free(tw_name_table *t);
/* The row of name, whose tw_name_hash is hash (created on first sight);
 * the overflow row when full. */
int32_t tw_name_table_row(tw_name_table *t, const char *name, size_t len, uint32_t hash);
/* Copies the top n rows by total (by self when by_self) into out. */
int tw_name_table_top(const tw_name_table *t, bool by_self, tw_trace_stat *out, int n, const tw_name_table *issuers);

#endif
