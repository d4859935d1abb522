/*
 * follow.h: following growing log files, like `tail -F`, without losing or
 * repeating a line.
 *
 * A follower takes paths and globs (log/workerlog.*). It reads each file from
 * its end (or its start), picks up files that appear later, and survives
 * rotation: by rename (the old file is read to its end before the new one),
 * by copy-truncate (the lines written since the last read are taken from the
 * copy, found by the hash of the file's first bytes; a line the copy ends in
 * the middle of is completed by the truncated file), deletion and
 * re-creation, and content replaced in place. A file is known by its device
 * and inode: one reached by two names (a symlink and its target, run1.log
 * and ./run1.log) is read once. inotify wakes it when a file changes; where
 * inotify is unavailable it polls.
 *
 * With a state file it remembers, per file, the device, inode, the offset a
 * restart resumes from, a hash of the first bytes and one of the bytes before
 * that offset, written atomically (write, fsync, rename). That offset is the
 * start of a multi-line block still open (an OLMo metric block, a traceback),
 * else of the partial last line. The record sink's size is saved with it,
 * and restored (truncated back) on restart, so after a crash or kill -9 the
 * records written are exactly those of the lines before the saved offsets:
 * no line lost, none counted twice. A sink that cannot be written keeps the
 * state where it was.
 *
 * Memory is bounded: one read buffer, one parser (one line buffer) per file.
 * Descriptors are bounded too: beyond what the RLIMIT_NOFILE soft limit
 * leaves, the files idle longest are closed and opened again (by name,
 * checked by device and inode) when they change.
 */
#ifndef TRAINWATCH_FOLLOW_H
#define TRAINWATCH_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trainwatch/parse.h"

typedef struct tw_follower tw_follower;

/* Where records go, with a position that can be saved and restored. */
typedef struct tw_record_sink {
    tw_record_fn record;
    void *arg;
    /* Optional: flush to stable storage and set *size to the sink's size
     * (bytes written so far); 0, or -1 when a record could not be written
     * (the state is then not saved: it stays at the last size committed). */
    int (*commit)(void *arg, uint64_t *size);
    /* Optional: go back to a committed size (truncate the output). */
    int (*restore)(void *arg, uint64_t size);
} tw_record_sink;

typedef struct tw_follow_options {
    const char *const *patterns; /* paths or globs */
    size_t pattern_count;
    bool from_start;         /* read files present at start from their beginning */
    const char *state_file;  /* NULL: no position file */
    const tw_format *format; /* NULL: detect */
    const struct tw_user_formats *user_formats; /* tried first on each line, borrowed; NULL: none */
    double save_interval;    /* seconds between state saves; 0: 0.1 */
    tw_record_sink sink;
    /* Where to say, once each, what is not followed and why (a file not
     * there yet, not a regular file, the same file under two names), and
     * when saving the state fails or works again. NULL: say nothing. */
    FILE *warnings;
} tw_follow_options;

typedef struct tw_follow_stats {
    uint64_t files, bytes, lines, records;
    uint64_t rotations, truncations, recovered_bytes, lines_cut;
    uint64_t reopened;       /* files closed while idle and opened again */
    uint64_t state_failures; /* state saves that failed */
    bool inotify;            /* false: polling */
} tw_follow_stats;

/* Opens the follower (and restores from the state file). On error returns a
 * TW_E* code and writes a one-line reason into err. */
int tw_follower_open(const tw_follow_options *o, tw_follower **out, char *err, size_t errlen);
/* Waits up to timeout seconds for a change, then reads what is new. Returns
 * the status of the state save it made, if any (already said on warnings). */
int tw_follower_poll(tw_follower *f, double timeout);
/* Saves the state file now (also done by poll every save_interval). */
int tw_follower_save(tw_follower *f);
const tw_follow_stats *tw_follower_stats(const tw_follower *f);
/* Reads what is left, delivers the multi-line blocks still open (the last
 * step of an OLMo log) and saves the state. Without a state file a partial
 * last line is delivered too; with one it is left for the next run. Returns
 * the status of the save. */
int tw_follower_finish(tw_follower *f);
/* Frees the follower (finishing it first if that was not done). */
void tw_follower_close(tw_follower *f);

#endif
