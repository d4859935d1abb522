/*
 * shape.h: the shapes of events the fast path learns and matches
 * (fastpath.c's comment says what a shape is for): the fields a number is
 * read into, a shape's ops and text, and a shape being learned. shape.c
 * learns them from an event read member by member; fastpath.c matches the
 * events after it against them. The shapes themselves are the reader's
 * (tw_trace_shapes_new, reader.h).
 */
#ifndef TW_TRACE_SHAPE_H
#define TW_TRACE_SHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "reader.h"

/* The fields a number is read into (number_into): T_NONE for a number
 * passed unread; T_SKIP (a shape's op only) for an object or array passed
 * unread. */
enum {
    T_NONE,
    T_TS,
    T_DUR,
    T_PID,
    T_TID,
    T_BYTES,
    T_DEVICE,
    T_STREAM,
    T_ALLOCATED,
    T_RESERVED,
    T_CORRELATION,
    T_EXTERNAL_ID,
    T_SKIP
};

/* The shape of an event after its name, learned from one the fast path
 * read: the bytes between the values (keys, punctuation, the strings),
 * and the values: numbers, each to be read into its field or passed, and
 * objects and arrays passed unread (a kernel's grid, an operator's input
 * dims). An event whose bytes after its name match a shape, but for those
 * values, is read by matching (shape_replay): the same bytes read the
 * same way, the numbers read as the fast path reads them, the objects and
 * arrays passed as it passes them, whatever they hold. */
enum { SHAPE_OPS = 40, SHAPE_TEXT = 448 };

typedef struct tw_shape_op {
    uint16_t len;   /* bytes of text to match before the number (or the end) */
    uint16_t vlen;  /* the number's bytes in the event it was learned from */
    uint8_t target; /* T_NONE: a number passed; T_SKIP: an object or array passed; else read into that field */
    bool end;       /* the last: text to match and nothing after it */
    bool varies;    /* any's: seen to differ from the event learned, so same reads it too */
} tw_shape_op;

/* Text and numbers, in turn. */
typedef struct tw_shape_ops {
    uint16_t nops, ntext;
    tw_shape_op ops[SHAPE_OPS];
    char text[SHAPE_TEXT + 16]; /* 16 to spare, for same_text */
} tw_shape_ops;

/* A number of the event's lane (pid, tid, device, stream) as learned. */
typedef struct tw_shape_lane {
    uint8_t target;
    uint8_t op; /* its op in any */
    bool str;
    double v;
} tw_shape_lane;

struct tw_trace_shape {
    bool ok;                /* learned whole */
    bool exact;             /* try same first (it can be built: the event learned fits, no lane read twice) */
    bool sets_ph, sets_cat; /* the text holds a ph or a cat member: their values */
    char ph;
    char cat[48];
    tw_shape_ops any;  /* every number and every object or array passed an op */
    tw_shape_ops same; /* those passed, and the lane's numbers, as text where they have not varied: fewer ops */
    uint8_t nlanes, nsame_lanes;
    tw_shape_lane lanes[4];      /* as learned, in the order read */
    tw_shape_lane same_lanes[4]; /* those same holds as text: stored after it matches */
    char learned[SHAPE_TEXT]; /* the bytes of the event learned, after its name (any's ops measure them) */
};

/* A shape being learned: the text so far ends where from points. */
typedef struct tw_shape_rec {
    tw_trace_shape *shape;
    const char *start; /* where it begins in the event */
    const char *from;
    bool unread; /* learned after a ph nothing reads past: names are text */
    bool bad;    /* too long, or a member a shape cannot hold (a second name) */
} tw_shape_rec;

/* Learning (shape.c): a value at [at, after) for target, a number read
 * as v (str: from a string) or passed (T_NONE, T_SKIP); the event's end
 * at, which closes the shape and builds same. */
void tw_shape_rec_value(tw_shape_rec *rec, const char *at, const char *after, int target, double v, bool str);
void tw_shape_rec_end(tw_shape_rec *rec, const char *at);
/* After same missed and any matched an event (span: each op's value, its
 * start and end): same built again with the values that differ as ops;
 * false when none differs. */
bool tw_shape_vary_same(tw_trace_shape *sh, const char *const *span);

#endif
