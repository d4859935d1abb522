/*
 * reader.h: what the chrome-trace reader's two paths share. The token path
 * and the document around the events are in events.c; the fast path, which
 * reads an event where it lies in the tokenizer's buffer, is in fastpath.c.
 * events.c calls tw_trace_fast_event first for each event and reads it
 * through the tokens when that gives up; both fill the same tw_trace_event
 * the same way, from tw_trace_event_reset. parallel.c has several threads
 * read pieces of a large file's events array with the same two paths
 * (tw_trace_read_chunk) and hands the pieces back in order. Only these
 * files include it.
 */
#ifndef TW_TRACE_READER_H
#define TW_TRACE_READER_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "../core/buffer.h"
#include "events.h"
#include "jstream.h"

/* Where the fast path reads: the buffer's end, and the " \\ and NUL bytes
 * of one 64-byte block as bits (found once per block, then each string's
 * end is a bit scan rather than a scan of its bytes). Kept by the reader
 * across events; zeroed at the start. */
/* The shapes of events a reader has learned (fastpath.c): TW_TRACE_SHAPES
 * by name and 16 by ph, 216 KiB, from tw_trace_shapes_new (NULL: out
 * of memory, and each event is read member by member), freed with free. */
typedef struct tw_trace_shape tw_trace_shape;
#define TW_TRACE_SHAPES 128
typedef struct tw_trace_fast_in {
    const char *end;
    const char *block; /* NULL: none */
    uint64_t bits;
    uint64_t base;          /* the stream offset of the buffer block lies in */
    tw_trace_shape *shapes; /* TW_TRACE_SHAPES of them, or NULL */
} tw_trace_fast_in;
tw_trace_shape *tw_trace_shapes_new(void);

/* The next event read in place, when it lies whole in s's buffer: [,] {
 * ... } consumed (first: no comma before it) and read into e; false, with
 * nothing consumed and e holding nothing to keep, otherwise. */
bool tw_trace_fast_event(tw_jstream *s, tw_trace_fast_in *in, tw_trace_event *e, bool first);

/* An event before its members are read: every field absent. */
static inline void tw_trace_event_reset(tw_trace_event *e)
{
    e->ph = 0;
    e->name = e->name_buf;
    e->name[0] = e->cat[0] = '\0';
    e->name_len = 0;
    e->name_hashed = false;
    e->has_ts = e->has_dur = false;
    e->ts = e->dur = NAN;
    e->pid = e->tid = -1;
    e->correlation = e->external_id = -1;
    e->bytes = e->device = e->stream = e->allocated = e->reserved = NAN;
}

/* Whether anything but the ph of an event of this ph is used: complete
 * events, the halves of a pair and instant events (memory). Of any other
 * (flows, metadata, counters, Paddle's {} sentinel) only the ph is handed
 * over (tw_trace_event_keep_ph), so the fast path may pass their numbers
 * unread. */
static inline bool tw_trace_ph_read(char ph)
{
    return ph == 'X' || ph == 'B' || ph == 'E' || ph == 'i' || ph == 'I';
}

/* An event of a ph nothing reads past (tw_trace_ph_read false): every
 * field but ph absent, however much of it either path read. */
static inline void tw_trace_event_keep_ph(tw_trace_event *e)
{
    if (!tw_trace_ph_read(e->ph)) {
        char ph = e->ph;
        tw_trace_event_reset(e);
        e->ph = ph;
    }
}

/* A pid or tid from its number; -1 when NaN or out of range. */
static inline int64_t tw_trace_as_id(double v)
{
    return v == v && fabs(v) < 9e18 ? (int64_t)v : -1;
}

/* An event as a piece of the events array keeps it until it is handed
 * over: a tw_trace_event without its strings, whose name (name_len bytes
 * and a NUL) and cat (cat_len bytes) lie one after the other at text in
 * the piece's text. */
typedef struct tw_trace_packed {
    double ts, dur, bytes, device, stream, allocated, reserved;
    int64_t pid, tid, correlation, external_id;
    size_t text;
    uint32_t name_hash; /* when name_hashed: the reading thread need not hash the name again */
    uint16_t name_len;
    uint8_t cat_len;
    char ph;
    uint8_t kind; /* tw_trace_kind, when classified */
    bool classified, has_ts, has_dur, name_hashed;
} tw_trace_packed;

typedef enum tw_chunk_status {
    TW_CHUNK_MORE, /* stopped at the first item at or past the limit: stop is its offset */
    TW_CHUNK_END,  /* read the array's ]: stop is the offset after it */
    TW_CHUNK_FAIL, /* anything else (bad input, the input's end, no memory): not handed over */
} tw_chunk_status;

/* A piece of an events array, read from start (an item's first byte). Its
 * arrays are owned by it and reused from piece to piece; tw_trace_chunk_free.
 * Events pack to about their bytes in a profiler's trace; a piece of tiny
 * events packing past its budget fails, and the one thread reads on. */
typedef struct tw_trace_chunk {
    uint64_t start, stop;
    tw_chunk_status status;
    size_t budget; /* bytes its events may pack into; past them it fails (set by parallel.c) */
    tw_trace_packed *events;
    size_t count, cap;
    tw_buffer text;            /* the events' names and cats */
    tw_trace_kind_memo *kinds; /* kept from piece to piece */
    tw_trace_shape *shapes;    /* the same */
    uint64_t strings_cut;
} tw_trace_chunk;

/* Reads the items of an events array from where s stands (an item's first
 * byte, no comma before it) into c, until an item begins at or past limit
 * or the array ends; c->start is the caller's. events.c's; parallel.c's
 * threads call it through tw_trace_pieces_cfg. */
void tw_trace_read_chunk(tw_jstream *s, uint64_t limit, tw_trace_chunk *c);
typedef void (*tw_trace_chunk_fn)(tw_jstream *s, uint64_t limit, tw_trace_chunk *c);
void tw_trace_chunk_free(tw_trace_chunk *c);

/* What parallel.c reads: the file (tw_trace_par's fd, size, threads, chunk
 * and map) and how a piece is read. */
typedef struct tw_trace_pieces_cfg {
    int fd;
    uint64_t size;
    int threads;
    uint64_t chunk;
    bool map;
    tw_trace_chunk_fn read;
} tw_trace_pieces_cfg;

/* parallel.c: the pieces of the events array that begins at offset begin
 * of cfg's file, read by cfg->threads threads, handed out in order by
 * tw_trace_pieces_next (NULL after the last one; the reading thread's, to
 * read and change, until given back with
 * tw_trace_pieces_done before the next). tw_trace_pieces_end stops the
 * threads, says where the tokenizer goes on (*at) and whether the array
 * was read to its ] (true) or the rest is the one thread's (false: at is an
 * item's first byte), and frees. */
typedef struct tw_trace_pieces tw_trace_pieces;
int tw_trace_pieces_start(tw_trace_pieces **out, const tw_trace_pieces_cfg *cfg, uint64_t begin);
tw_trace_chunk *tw_trace_pieces_next(tw_trace_pieces *p);
void tw_trace_pieces_done(tw_trace_pieces *p);
bool tw_trace_pieces_end(tw_trace_pieces *p, uint64_t *at);

#endif
