/*
 * follow.h: following growing log files, like `tail -F`, without losing or
 * repeating a line.
 *
 * A follower takes paths and globs (log/workerlog.*). It reads each file from
 * its end (or its start), picks up files that appear later, and survives
 * rotation: by rename (the old file is read to its end before the new one),
 * by copy-truncate (the lines written since the last read are taken from the
 * copy, found by the hash of the file's first bytes), deletion and
 * re-creation, and content replaced in place. inotify wakes it when a file
 * changes; where inotify is unavailable it polls.
 *
 * With a state file it remembers, per file, the device, inode, offset of the
 * last complete line and a hash of the first bytes, written atomically
 * (write, fsync, rename). The record sink's size is saved with it, and
 * restored (truncated back) on restart, so after a crash or kill -9 the
 * records written are exactly those of the lines before the saved offsets:
 * no line lost, none counted twice.
 *
 * Memory is bounded: one read buffer, one parser (one line buffer) per file.
 */
#ifndef TRAINWATCH_FOLLOW_H
#define TRAINWATCH_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trainwatch/parse.h"

typedef struct tw_follower tw_follower;

/* Where records go, with a position that can be saved and restored. */
typedef struct tw_record_sink {
    tw_record_fn record;
    void *arg;
    /* Optional: flush and return the sink's size (bytes written so far). */
    uint64_t (*commit)(void *arg);
    /* Optional: go back to a committed size (truncate the output). */
    int (*restore)(void *arg, uint64_t size);
} tw_record_sink;

typedef struct tw_follow_options {
    const char *const *patterns;   /* paths or globs */
    size_t pattern_count;
    bool from_start;               /* read files present at start from their beginning */
    const char *state_file;        /* NULL: no position file */
    const tw_format *format;       /* NULL: detect */
    double save_interval;          /* seconds between state saves; 0: 0.1 */
    tw_record_sink sink;
} tw_follow_options;

typedef struct tw_follow_stats {
    uint64_t files, bytes, lines, records;
    uint64_t rotations, truncations, recovered_bytes, lines_cut;
    bool inotify;                  /* false: polling */
} tw_follow_stats;

/* Opens the follower (and restores from the state file). On error returns a
 * TW_E* code and writes a one-line reason into err. */
int tw_follower_open(const tw_follow_options *o, tw_follower **out, char *err, size_t errlen);
/* Waits up to timeout seconds for a change, then reads what is new. */
int tw_follower_poll(tw_follower *f, double timeout);
/* Saves the state file now (also done by poll every save_interval). */
int tw_follower_save(tw_follower *f);
const tw_follow_stats *tw_follower_stats(const tw_follower *f);
/* Reads what is left, saves the state and frees the follower. */
void tw_follower_close(tw_follower *f);

#endif
