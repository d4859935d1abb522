/*
 * stream.h: finishing an output stream and knowing whether everything
 * written to it arrived. stdio keeps write errors in the stream (ferror)
 * and may only meet them when the buffer is flushed or the file closed (a
 * full disk, /dev/full, a closed pipe, NFS), so a command that ignores the
 * end of its output exits 0 having written nothing.
 */
#ifndef TW_CORE_STREAM_H
#define TW_CORE_STREAM_H

#include <stdio.h>

/* Flushes f. Returns 0 when every write so far got through, else a TW_E*
 * code with errno telling why (when the failing call set it). f stays open:
 * use this for stdout and stderr. */
int tw_stream_flush(FILE *f);

/* tw_stream_flush, then fclose(f); f is closed whatever the result. */
int tw_stream_close(FILE *f);

#endif
