/*
 * json.h: the little JSON trainwatch writes (reports, record streams) and
 * reads back (its own record stream). Writing escapes strings exactly and
 * replaces invalid UTF-8 with U+FFFD, so logs with broken bytes still yield
 * valid JSON. NaN and infinities, which JSON lacks, are written as the
 * strings "NaN", "Infinity" and "-Infinity" and read back as numbers.
 */
#ifndef TW_CORE_JSON_H
#define TW_CORE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

void tw_json_string(FILE *out, const char *s, size_t len);
void tw_json_cstring(FILE *out, const char *s);
/* Shortest form that reads back to the same double. */
void tw_json_number(FILE *out, double v);

/* A pull reader over one JSON text held in memory. */
typedef struct tw_json_reader {
    const char *p;
    const char *end;
    bool error;
} tw_json_reader;

typedef enum tw_json_type {
    TW_JSON_END,      /* end of object or input */
    TW_JSON_STRING,
    TW_JSON_NUMBER,
    TW_JSON_BOOL,
    TW_JSON_NULL,
    TW_JSON_OBJECT,   /* value is an object: read its members, then continue */
    TW_JSON_ARRAY,    /* skipped by the reader */
    TW_JSON_ERROR,
} tw_json_type;

typedef struct tw_json_member {
    char key[64];
    tw_json_type type;
    double number;            /* NUMBER, BOOL (0/1) */
    char string[1024];        /* STRING, decoded and cut to fit */
    size_t string_len;
} tw_json_member;

/* Starts reading an object; false if the text does not start with '{'. */
bool tw_json_begin(tw_json_reader *r, const char *s, size_t len);
/* Reads the next member of the current object. A member of type OBJECT is
 * entered: its members follow, then an END for it. */
tw_json_type tw_json_next(tw_json_reader *r, tw_json_member *m);

#endif
