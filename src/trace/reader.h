/*
 * reader.h: what the chrome-trace reader's two paths share. The token path
 * and the document around the events are in events.c; the fast path, which
 * reads an event where it lies in the tokenizer's buffer, is in fastpath.c.
 * events.c calls tw_trace_fast_event first for each event and reads it
 * through the tokens when that gives up; both fill the same tw_trace_event
 * the same way, from tw_trace_event_reset. Only these two files include it.
 */
#ifndef TW_TRACE_READER_H
#define TW_TRACE_READER_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "events.h"
#include "jstream.h"

/* Where the fast path reads: the buffer's end, and the " \\ and NUL bytes
 * of one 64-byte block as bits (found once per block, then each string's
 * end is a bit scan rather than a scan of its bytes). Kept by the reader
 * across events; zeroed at the start. */
typedef struct tw_trace_fast_in {
    const char *end;
    const char *block; /* NULL: none */
    uint64_t bits;
    uint64_t base; /* the stream offset of the buffer block lies in */
} tw_trace_fast_in;

/* The next event read in place, when it lies whole in s's buffer: [,] {
 * ... } consumed (first: no comma before it) and read into e; false, with
 * nothing consumed and e holding nothing to keep, otherwise. */
bool tw_trace_fast_event(tw_jstream *s, tw_trace_fast_in *in, tw_trace_event *e, bool first);

/* An event before its members are read: every field absent. */
static inline void tw_trace_event_reset(tw_trace_event *e)
{
    e->ph = 0;
    e->name[0] = e->cat[0] = '\0';
    e->name_len = 0;
    e->has_ts = e->has_dur = false;
    e->ts = e->dur = NAN;
    e->pid = e->tid = -1;
    e->correlation = e->external_id = -1;
    e->bytes = e->device = e->stream = e->allocated = e->reserved = NAN;
}

/* A pid or tid from its number; -1 when NaN or out of range. */
static inline int64_t tw_trace_as_id(double v)
{
    return v == v && fabs(v) < 9e18 ? (int64_t)v : -1;
}

#endif
