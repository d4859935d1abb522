/*
 * tables.c: the name tables. A word-at-a-time hash (namehash.h), linear
 * probing over twice as many slots as rows, so a probe ends quickly even
 * when the table is full.
 */
#include "tables.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/error.h"

#define SLOTS (2 * TW_TABLE_MAX)
#define ARENA (TW_TABLE_MAX * 64)

int tw_name_table_init(tw_name_table *t)
{
    memset(t, 0, sizeof *t);
    t->rows = calloc(TW_TABLE_MAX + 1, sizeof *t->rows);
    t->slots = malloc(SLOTS * sizeof *t->slots);
    t->arena = malloc(ARENA);
    if (!t->rows || !t->slots || !t->arena) {
        tw_name_table_free(t);
        return TW_ENOMEM;
    }
    memset(t->slots, 0xff, SLOTS * sizeof *t->slots);
    tw_name_row *other = &t->rows[TW_TABLE_MAX];
    other->name = "(other names)";
    other->min = INFINITY;
    other->issuer = -1;
    return TW_OK;
}

void tw_name_table_free(tw_name_table *t)
{
    free(t->rows);
    free(t->slots);
    free(t->arena);
    memset(t, 0, sizeof *t);
}

int32_t tw_name_table_row(tw_name_table *t, const char *name, size_t len, uint32_t h)
{
    if (len > TW_TRACE_NAME_MAX - 1)
        len = TW_TRACE_NAME_MAX - 1;
    size_t slot = h % SLOTS;
    for (;;) {
        int32_t r = t->slots[slot];
        if (r < 0)
            break;
        const tw_name_row *row = &t->rows[r];
        if (row->hash == h && row->len == len && memcmp(row->name, name, len) == 0)
            return r;
        slot = (slot + 1) % SLOTS;
    }
    if (t->n == TW_TABLE_MAX || t->arena_len + len + 1 > ARENA) {
        t->over++;
        return TW_TABLE_MAX;
    }
    char *copy = t->arena + t->arena_len;
    memcpy(copy, name, len);
    copy[len] = '\0';
    t->arena_len += len + 1;
    tw_name_row *row = &t->rows[t->n];
    *row = (tw_name_row){.name = copy, .len = len, .hash = h, .min = INFINITY, .issuer = -1};
    t->slots[slot] = t->n;
    return t->n++;
}

int tw_name_table_top(const tw_name_table *t, bool by_self, tw_trace_stat *out, int n, const tw_name_table *issuers)
{
    int rows = t->n + (t->rows[TW_TABLE_MAX].count > 0);
    int got = 0;
    for (int i = 0; i < rows; i++) {
        const tw_name_row *r = &t->rows[i < t->n ? i : TW_TABLE_MAX];
        double key = by_self ? r->self : r->total;
        int at = got < n ? got : n;
        /* insertion into the top n, largest first; ties keep the first seen */
        while (at > 0 && (by_self ? out[at - 1].self : out[at - 1].total) < key)
            at--;
        if (at >= n)
            continue;
        int last = got < n ? got : n - 1;
        memmove(&out[at + 1], &out[at], (size_t)(last - at) * sizeof *out);
        tw_trace_stat *s = &out[at];
        memset(s, 0, sizeof *s);
        snprintf(s->name, sizeof s->name, "%s", r->name);
        s->count = r->count;
        s->total = r->total;
        s->self = r->self;
        s->max = r->max;
        s->min = r->count ? r->min : 0;
        s->short_count = r->short_count;
        s->short_total = r->short_total;
        if (issuers && r->issuer >= 0)
            snprintf(s->issuer, sizeof s->issuer, "%s",
                     issuers->rows[r->issuer < issuers->n ? r->issuer : TW_TABLE_MAX].name);
        if (got < n)
            got++;
    }
    return got;
}
