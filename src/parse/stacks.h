/*
 * stacks.h: Python's faulthandler dumps in a log (all threads' stacks,
 * what `trainwatch run` asks each rank for on a stall, and what a crash
 * with -X faulthandler prints):
 *
 *   Thread 0x00007f3c2a7fc640 (most recent call first):
 *     File "/usr/lib/python3.11/threading.py", line 324 in wait
 *
 *   Current thread 0x00007f3c2bd4e740 (most recent call first):
 *     File "train.py", line 20 in all_reduce
 *     File "train.py", line 41 in <module>
 *
 * A tw_stacks reads one dump a line at a time and says where its main
 * thread is: the thread that runs the script's <module> frame, else the
 * thread the signal interrupted ("Current thread"), else the last one
 * listed (the oldest). fmt_events.c feeds it the lines no step format read.
 */
#ifndef TW_PARSE_STACKS_H
#define TW_PARSE_STACKS_H

#include <stdbool.h>
#include <stddef.h>

#include "formats.h"
#include "trainwatch/record.h"

typedef struct tw_stacks {
    bool open;
    int threads;
    bool is_current;             /* the thread being read is the "Current thread" */
    bool has_frame;              /* it has a frame yet */
    bool main_found;             /* a thread with <module> was read */
    char top[TW_MESSAGE_MAX];    /* its innermost frame, "FUNC (PATH:LINE)" */
    char main[TW_MESSAGE_MAX];   /* the main thread's, as known so far */
    char current[TW_MESSAGE_MAX];
} tw_stacks;

/* True when the line starts a dump. */
bool tw_stacks_begins(const char *s, size_t len);
/* The test every line gets first, inline: could it start a dump? */
static inline bool tw_stacks_may_begin(const char *s, size_t len)
{
    return len > 30 && (s[0] == 'T' || s[0] == 'C') && s[len - 1] == ':';
}
/* Reads a line of an open dump (or the first): true when it belongs to the
 * dump, false when the dump ended before it. */
bool tw_stacks_line(tw_stacks *st, const char *s, size_t len);
/* The dump read: its main thread's innermost frame into message (cap
 * bytes) and "N threads" into detail; closes it. */
void tw_stacks_take(tw_stacks *st, char *message, char *detail, size_t cap);
bool tw_stacks_same(const tw_stacks *a, const tw_stacks *b);
/* A dump held in a JSON string (a JSON-lines log's "stacks" field): s
 * points just past its opening quote, len bytes to the end of the line.
 * True with message and detail as tw_stacks_take's when it held one. */
bool tw_stacks_from_json(const char *s, size_t len, char *message, char *detail, size_t cap);
/* A JSON-lines record whose "stacks" field holds a dump (the trainwatch
 * package's on a stall): emits its event, at the record, with the record's
 * own "rank" where it has one; 1, or 0 when the line holds none. Read by
 * the event reader and by the trainwatch-log format (which, once a file is
 * known to be one, sees its lines first). */
int tw_stacks_emit_json(tw_parser *p, const tw_line *line);

#endif
