/*
 * collect.h: test helper: parse text held in memory and keep the records.
 */
#ifndef TW_TEST_COLLECT_H
#define TW_TEST_COLLECT_H

#include <stdlib.h>
#include <string.h>

#include "trainwatch/parse.h"

#define COLLECT_MAX 256

typedef struct collected_records {
    int count;
    tw_record records[COLLECT_MAX];
    tw_parse_stats stats;
} collected_records;

static inline void collect_record(void *arg, const tw_record *r)
{
    collected_records *c = arg;
    if (c->count < COLLECT_MAX)
        c->records[c->count++] = *r;
}

/* Parses text with the named format (NULL: detect) into a fresh collection. */
static inline collected_records *parse_text(const char *text, const char *format, const char *name)
{
    collected_records *c = calloc(1, sizeof *c);
    tw_parser *p;
    const tw_format *f = format ? tw_format_find(format) : NULL;
    if (!c || tw_parser_new(&p, name ? name : "test.log", f, -1) != 0) {
        free(c);
        return NULL;
    }
    tw_parser_feed(p, text, strlen(text), collect_record, c);
    c->stats = *tw_parser_stats(p);
    c->stats.format = c->stats.format; /* static string from the table */
    for (int i = 0; i < c->count; i++)
        c->records[i].source.file = NULL; /* the parser's name dies with it */
    tw_parser_close(p);
    return c;
}

static inline int count_kind(const collected_records *c, tw_record_kind kind)
{
    int n = 0;
    for (int i = 0; i < c->count; i++)
        n += c->records[i].kind == kind;
    return n;
}

static inline const tw_record *nth_kind(const collected_records *c, tw_record_kind kind, int nth)
{
    for (int i = 0; i < c->count; i++) {
        if (c->records[i].kind == kind && nth-- == 0)
            return &c->records[i];
    }
    return NULL;
}

static inline const tw_record *find_event(const collected_records *c, tw_event_kind kind)
{
    for (int i = 0; i < c->count; i++) {
        if (c->records[i].kind == TW_REC_EVENT && c->records[i].event == kind)
            return &c->records[i];
    }
    return NULL;
}

#endif
