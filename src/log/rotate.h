/*
 * rotate.h: a log file with size rotation, with the semantics of Python's
 * logging.handlers.RotatingFileHandler: when the file's size plus the next
 * line would reach max_bytes (Python's `tell() + len(msg) >= maxBytes`),
 * FILE.N-1 becomes FILE.N ... FILE becomes FILE.1, and a new FILE is
 * started; at most `backups` old files are kept. With max_bytes or backups 0
 * the file is never rotated. An empty file is never rotated (CPython 3.12.3+,
 * gh-116263; 3.11 would rename an empty file when one record alone reaches
 * max_bytes). Sizes are bytes (Python counts characters: the same for ASCII).
 *
 * This is the one rotation implementation: `trainwatch run --log-file` tees
 * through it and libtrainwatch logging's file sinks (log.h) write through it.
 *
 * Lines are never split across files: the bytes of a line not yet ended are
 * held (up to TW_ROTATE_HOLD_MAX) until its newline says how long it is, as
 * RotatingFileHandler decides record by record; a longer line is written as
 * it comes and the file is not rotated before its end. A single line longer
 * than max_bytes gets a file to itself.
 *
 * Writes that fail (a full disk) never block the caller: the line is dropped
 * whole (what was written of it is cut off again), counted, and writing
 * resumes at the next line that fits. tw_rotating_write says which call
 * failed and which first succeeded again, so the caller can say so once.
 */
#ifndef TW_LOG_ROTATE_H
#define TW_LOG_ROTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TW_ROTATE_HOLD_MAX (64u * 1024u)

typedef struct tw_rotating_file tw_rotating_file;

int tw_rotating_open(const char *path, uint64_t max_bytes, unsigned backups, tw_rotating_file **out);
/* Appends bytes; rotation happens at line boundaries. Returns TW_OK, or the
 * error of a write that failed (its line is dropped). */
int tw_rotating_write(tw_rotating_file *f, const char *data, size_t len);
/* Writes a held partial line out (at the end of the output). */
int tw_rotating_flush(tw_rotating_file *f);
/* Whole-line mode for loggers: lines (each ending in its one newline) are
 * gathered in a buffer of `bytes` and written together when it is full, at
 * a rotation, at tw_rotating_flush and at close; 0 writes each line at once.
 * A failed write drops the buffered lines whole. */
int tw_rotating_set_buffer(tw_rotating_file *f, size_t bytes);
/* Appends one whole line (its last byte is its only newline). */
int tw_rotating_write_line(tw_rotating_file *f, const char *line, size_t len);
/* Writes the buffered lines with write(2) only, no rotation, no allocation,
 * no lock: for fatal-signal handlers. */
void tw_rotating_flush_signal_safe(tw_rotating_file *f);
/* The descriptor of the current file (-1 between a failed reopen and the
 * next write). */
int tw_rotating_fd(const tw_rotating_file *f);
/* Line tracking, for a copy whose lines are cited later (`trainwatch run
 * --log-file`): counts the lines the file holds already, then notes where
 * each generation's lines start. Line N of what was given since open
 * (1-based, dropped lines counted) is then line N - offsets[k] of the newest
 * generation k (0: the file, k: FILE.k) where that is at least 1. */
int tw_rotating_track_lines(tw_rotating_file *f);
/* Which generation holds line `line` given since open, its line there in
 * *local; -1 when it was rotated away (or tracking is off). */
int tw_rotating_locate(const tw_rotating_file *f, uint64_t line, uint64_t *local);
/* Copies the offsets above, newest generation first, up to cap of them;
 * returns how many there are (at most backups + 1; 0 without tracking). */
unsigned tw_rotating_generations(const tw_rotating_file *f, int64_t *offsets, unsigned cap);
/* Lines dropped whole by failed writes so far (whole-line mode). */
uint64_t tw_rotating_dropped_lines(const tw_rotating_file *f);
/* Bytes dropped by failed writes so far. */
uint64_t tw_rotating_dropped(const tw_rotating_file *f);
/* True while the last write failed. */
bool tw_rotating_failing(const tw_rotating_file *f);
/* The last failure, as strerror() says it. */
const char *tw_rotating_error(const tw_rotating_file *f);
/* Flushes and closes; returns the error of the flush or close, if any. */
int tw_rotating_close(tw_rotating_file *f);

#endif
