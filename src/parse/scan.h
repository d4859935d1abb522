/*
 * scan.h: the lexical helpers every format shares: numbers (with NaN/Inf,
 * exponents and thousands separators), leading timestamps, ETA durations, a
 * generic "key: value" / "key=value" tokenizer, and the synonym table that
 * maps the many names frameworks give one quantity (reader_cost, data_cost,
 * data_time...) onto the record's fields.
 *
 * Everything works on (pointer, length) views into the line; nothing here
 * allocates.
 */
#ifndef TW_PARSE_SCAN_H
#define TW_PARSE_SCAN_H

#include <stdbool.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "trainwatch/record.h"

/* Parses a number at s (not past end). Accepts sign, decimals, exponents,
 * nan/inf/infinity in any case, and 1,234-style thousands groups. Returns the
 * number of bytes consumed, 0 when s does not start a number. */
size_t tw_scan_number(const char *s, const char *end, double *out);

/* Parses an unsigned integer; returns bytes consumed (0 if none). */
size_t tw_scan_uint(const char *s, const char *end, long long *out);
/* A rank number as scanned: any int from 0 up, -1 (unknown) beyond: never
 * clamped onto another rank. */
static inline int tw_rank_value(long long v) { return v >= 0 && v <= INT_MAX ? (int)v : -1; }

/* Recognises a timestamp at the start of a line, optionally in [brackets]:
 * 2024/03/09 15:15:33, 2021-11-23 20:45:58(.123|,123), 02/13/2022 23:11:11,
 * 08/02 02:44:23 (no year), glog's I0213 23:07:05.692358. Returns the bytes
 * consumed including a closing bracket and following blanks, 0 if none. */
size_t tw_scan_timestamp(const char *s, size_t len, double *out);

/* Parses an ETA or elapsed time: "3 days, 10:51:17", "13:53:14", "1:23",
 * "35s", "0:00:01.5", plain seconds. Returns bytes consumed, 0 if none. */
size_t tw_scan_duration(const char *s, const char *end, double *out);

/* Seconds since the epoch for a UTC civil time (no time zone handling: logs
 * rarely print one, and only differences matter to the diagnoses). */
double tw_civil_seconds(int year, int month, int day, int hour, int min, double sec);

/* One key/value pair found by tw_kv_scan. */
typedef struct tw_kv {
    const char *key;
    size_t key_len;
    const char *value;     /* raw value text, up to the end of the line */
    const char *end;       /* end of the line */
    double number;
    bool has_total;        /* "a/b" form: number is a, total is b */
    double total;
    const char *unit;      /* unit right after the number ("s", "ms", "MB") */
    size_t unit_len;
    size_t value_len;      /* bytes of the value including total and unit */
} tw_kv;

/* Calls fn for each numeric key/value pair in the text. Keys are runs of
 * [A-Za-z0-9_./()@-] starting with a letter, followed by ':' or '=' (a blank
 * may precede ':'); values may be wrapped in [ ]. Return false from fn to
 * stop. Returns the number of pairs seen. */
typedef bool (*tw_kv_fn)(void *arg, const tw_kv *kv);
int tw_kv_scan(const char *s, size_t len, tw_kv_fn fn, void *arg);

/* Applies one key/value to a record through the synonym table: known keys set
 * fields (loss, lr, batch/data time, throughput, ETA, memory, epoch, step),
 * any other numeric key becomes a named metric. Returns true when the key was
 * a known field. */
bool tw_fields_apply(tw_record *r, const tw_kv *kv);

/* Convenience: tw_kv_scan + tw_fields_apply over the whole text. Returns the
 * number of pairs applied. */
int tw_fields_scan(tw_record *r, const char *s, size_t len);

/* True when a step record looks like one: it has a loss, or a step counter
 * together with a timing or learning-rate field. */
bool tw_record_is_step_like(const tw_record *r);

/* Case-insensitive search for a literal needle in text. */
const char *tw_find_ci(const char *s, size_t len, const char *needle);
/* Case-sensitive search for needle (n bytes) in text. */
const char *tw_find_n(const char *s, size_t len, const char *needle, size_t n);
/* The same for a string; inline, so a literal's length is known at compile time. */
static inline const char *tw_find(const char *s, size_t len, const char *needle)
{
    return tw_find_n(s, len, needle, strlen(needle));
}
static inline bool tw_starts_with(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && memcmp(s, prefix, n) == 0;
}

static inline bool tw_is_digit(char c) { return c >= '0' && c <= '9'; }
static inline bool tw_is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static inline bool tw_is_blank(char c) { return c == ' ' || c == '\t'; }

#endif
