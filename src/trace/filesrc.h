/*
 * filesrc.h: a plain trace file as the tokenizer's source without a copy
 * (filesrc.c): windows of the file mapped read-only one after another, the
 * last unmapped when the next is asked for, so memory stays about one
 * window whatever the file's size. The file is read as it was when its
 * size was taken: a file cut shorter while mapped raises SIGBUS, which
 * the program that maps (trainwatch trace) must catch. tw_file_pread is the
 * copying read the other sources use.
 */
#ifndef TW_TRACE_FILESRC_H
#define TW_TRACE_FILESRC_H

#include <stddef.h>
#include <stdint.h>

#define TW_FILE_WINDOW (2u << 20)

typedef struct tw_file_view {
    int fd;        /* borrowed */
    uint64_t off;  /* the next byte to hand out */
    uint64_t size; /* the file's size */
    uint64_t soft; /* a window ends here when it can (a piece's end), else UINT64_MAX */
    void *map;     /* the window handed out last, or NULL */
    size_t map_len;
} tw_file_view;

/* pread, again when a signal interrupts it: the count read, 0 at the end,
 * -1 on an error. */
long tw_file_pread(int fd, char *buf, size_t cap, uint64_t off);

/* The view of a file open at fd, size bytes, from offset 0. */
tw_file_view tw_file_view_of(int fd, uint64_t size);
/* tw_jstream_view_fn over a tw_file_view. */
long tw_file_view_next(void *view, const char **bytes);
/* Unmaps the last window. */
void tw_file_view_close(tw_file_view *v);

#endif
