/*
 * rotate.h: a log file with size rotation, with the semantics of Python's
 * logging.handlers.RotatingFileHandler: when writing a line would take the
 * file past max_bytes, FILE.N-1 becomes FILE.N ... FILE becomes FILE.1, and
 * a new FILE is started; at most `backups` old files are kept. With
 * max_bytes or backups 0 the file is never rotated. Lines are never split
 * across files (a single line longer than max_bytes gets a file to itself).
 */
#ifndef TW_SUPERVISE_ROTATE_H
#define TW_SUPERVISE_ROTATE_H

#include <stddef.h>
#include <stdint.h>

typedef struct tw_rotating_file tw_rotating_file;

int tw_rotating_open(const char *path, uint64_t max_bytes, unsigned backups, tw_rotating_file **out);
/* Appends bytes; rotation happens at line boundaries. */
int tw_rotating_write(tw_rotating_file *f, const char *data, size_t len);
void tw_rotating_close(tw_rotating_file *f);

#endif
