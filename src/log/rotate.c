/*
 * rotate.c: the rotating log file of rotate.h.
 *
 * State: `size` is what the current file holds, `held` the start of a line
 * whose newline has not come yet, `in_line` set once part of an unfinished
 * line is in the file (then no rotation until its newline), `line_start` the
 * file size where that line began (to cut a failed line off again).
 */
#include "rotate.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "trainwatch/error.h"

struct tw_rotating_file {
    char *path;
    int fd;
    uint64_t size, max_bytes, dropped;
    unsigned backups;
    char *held;
    size_t held_len;
    bool in_line, skipping, failing;
    uint64_t line_start;
    int last_errno;
    char *buf; /* whole-line mode: lines not written yet */
    size_t buf_len, buf_cap;
    uint64_t dropped_lines;
    uint64_t lines;       /* lines given since open, written or dropped */
    int64_t *gen_offsets; /* with line tracking: line N given is line N - gen_offsets[k] of generation k */
    unsigned gens;        /* generations with lines given since open (at most backups + 1) */
};

static int open_current(tw_rotating_file *f)
{
    f->fd = open(f->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        f->last_errno = errno;
        return tw_status_from_errno(errno);
    }
    struct stat st;
    f->size = fstat(f->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    return TW_OK;
}

/* Creates the directories above path that are missing, as mkdir -p does
 * (0755); a failure shows in the open that follows, with its errno. */
static void make_parents(const char *path)
{
    if (!path[0])
        return; /* "": nothing above it (the open says why it fails) */
    char *dir = strdup(path);
    if (!dir)
        return;
    for (char *p = strchr(dir + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            free(dir);
            return;
        }
        *p = '/';
    }
    free(dir);
}

int tw_rotating_open(const char *path, uint64_t max_bytes, unsigned backups, tw_rotating_file **out)
{
    tw_rotating_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path)) || !(f->held = malloc(TW_ROTATE_HOLD_MAX))) {
        if (f)
            free(f->path);
        free(f);
        return TW_ENOMEM;
    }
    f->max_bytes = max_bytes;
    f->backups = backups;
    make_parents(path);
    int rc = open_current(f);
    if (rc != TW_OK) {
        free(f->held);
        free(f->path);
        free(f);
        return rc;
    }
    *out = f;
    return TW_OK;
}

static int flush_buffer(tw_rotating_file *f);

static int rollover(tw_rotating_file *f)
{
    flush_buffer(f); /* a failure is counted there; the lines are gone */
    close(f->fd);
    f->fd = -1;
    size_t n = strlen(f->path) + 16;
    char *src = malloc(n), *dst = malloc(n);
    if (!src || !dst) {
        free(src);
        free(dst);
        open_current(f);
        return TW_ENOMEM;
    }
    for (unsigned i = f->backups - 1; i >= 1; i--) {
        snprintf(src, n, "%s.%u", f->path, i);
        snprintf(dst, n, "%s.%u", f->path, i + 1);
        rename(src, dst); /* a missing generation is fine */
    }
    snprintf(dst, n, "%s.1", f->path);
    rename(f->path, dst);
    free(src);
    free(dst);
    if (f->gen_offsets) {
        if (f->gens <= f->backups)
            f->gens++;
        memmove(f->gen_offsets + 1, f->gen_offsets, (f->gens - 1) * sizeof *f->gen_offsets);
        f->gen_offsets[0] = (int64_t)f->lines; /* the next line given is line 1 of the new file */
    }
    return open_current(f);
}

/* Rotates before a line of `len` bytes when it would not fit. */
static int make_room(tw_rotating_file *f, size_t len)
{
    bool rotating = f->max_bytes > 0 && f->backups > 0;
    uint64_t size = f->size + f->buf_len;
    if (f->fd >= 0 && (!rotating || size == 0 || size + len < f->max_bytes))
        return TW_OK;
    return f->fd >= 0 ? rollover(f) : open_current(f);
}

/* Writes all of a and b (either may be empty); on failure cuts the file back
 * to where the current line started, so no partial line stays in it. */
static int write_pieces(tw_rotating_file *f, const char *a, size_t alen, const char *b, size_t blen)
{
    struct iovec v[2] = {{(void *)a, alen}, {(void *)b, blen}};
    int first = 0;
    while (first < 2 && v[first].iov_len == 0)
        first++;
    while (first < 2) {
        /* one piece (a whole line, the usual case): write(2), cheaper than writev(2) in the kernel */
        ssize_t w = first == 1 || v[1].iov_len == 0 ? write(f->fd, v[first].iov_base, v[first].iov_len)
                                                    : writev(f->fd, v + first, 2 - first);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            f->last_errno = errno;
            int rc = tw_status_from_errno(errno);
            if (ftruncate(f->fd, (off_t)f->line_start) == 0)
                f->size = f->line_start;
            return rc;
        }
        f->size += (uint64_t)w;
        size_t done = (size_t)w;
        while (first < 2 && done >= v[first].iov_len) {
            done -= v[first].iov_len;
            first++;
        }
        if (first < 2) {
            v[first].iov_base = (char *)v[first].iov_base + done;
            v[first].iov_len -= done;
        }
    }
    return TW_OK;
}

static void note_result(tw_rotating_file *f, int rc, size_t len)
{
    f->failing = rc != TW_OK;
    if (rc != TW_OK)
        f->dropped += len;
}

/* One piece of input: up to and including a newline (ended) or not. */
static int write_piece(tw_rotating_file *f, const char *p, size_t n, bool ended)
{
    if (f->skipping) { /* the rest of a line whose start could not be written */
        f->dropped += n;
        f->skipping = !ended;
        return TW_OK;
    }
    if (!ended && !f->in_line && f->held_len + n <= TW_ROTATE_HOLD_MAX) {
        memcpy(f->held + f->held_len, p, n);
        f->held_len += n;
        return TW_OK;
    }
    int rc = TW_OK;
    if (!f->in_line) {
        rc = make_room(f, f->held_len + n);
        f->line_start = f->size;
    }
    if (rc == TW_OK)
        rc = write_pieces(f, f->held, f->held_len, p, n);
    note_result(f, rc, f->held_len + n);
    f->held_len = 0;
    f->in_line = rc == TW_OK && !ended;
    f->skipping = rc != TW_OK && !ended;
    return rc;
}

int tw_rotating_write(tw_rotating_file *f, const char *data, size_t len)
{
    int result = flush_buffer(f); /* buffered lines go first */
    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        size_t n = nl ? (size_t)(nl - data) + 1 : len;
        int rc = write_piece(f, data, n, nl != NULL);
        f->lines += nl != NULL;
        if (rc != TW_OK)
            result = rc;
        data += n;
        len -= n;
    }
    return result;
}

static uint64_t count_lines(const char *p, size_t n)
{
    uint64_t lines = 0;
    for (const char *end = p + n; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
        lines++;
    return lines;
}

/* Writes the buffered whole lines; on failure drops them all, counted. */
static int flush_buffer(tw_rotating_file *f)
{
    if (f->buf_len == 0)
        return TW_OK;
    int rc = f->fd >= 0 ? TW_OK : open_current(f);
    f->line_start = f->size;
    if (rc == TW_OK)
        rc = write_pieces(f, f->buf, f->buf_len, NULL, 0);
    if (rc != TW_OK)
        f->dropped_lines += count_lines(f->buf, f->buf_len);
    note_result(f, rc, f->buf_len);
    f->buf_len = 0;
    return rc;
}

int tw_rotating_set_buffer(tw_rotating_file *f, size_t bytes)
{
    int rc = flush_buffer(f);
    char *b = bytes ? malloc(bytes) : NULL;
    if (bytes && !b)
        return TW_ENOMEM;
    free(f->buf);
    f->buf = b;
    f->buf_cap = bytes;
    return rc;
}

int tw_rotating_write_line(tw_rotating_file *f, const char *line, size_t len)
{
    if (f->held_len || f->in_line || f->skipping || len == 0 || line[len - 1] != '\n')
        return tw_rotating_write(f, line, len); /* not a whole line: the general path */
    int rc = make_room(f, len);
    f->lines++;
    if (rc == TW_OK && f->buf_cap >= len) {
        if (f->buf_len + len > f->buf_cap)
            rc = flush_buffer(f);
        memcpy(f->buf + f->buf_len, line, len); /* kept even after a failure: the disk may recover */
        f->buf_len += len;
        return rc;
    }
    rc = rc == TW_OK ? flush_buffer(f) : rc;
    f->line_start = f->size;
    if (rc == TW_OK)
        rc = write_pieces(f, line, len, NULL, 0);
    if (rc != TW_OK)
        f->dropped_lines++;
    note_result(f, rc, len);
    return rc;
}

void tw_rotating_flush_signal_safe(tw_rotating_file *f)
{
    if (!f || f->fd < 0)
        return;
    size_t done = 0;
    while (done < f->buf_len) {
        ssize_t w = write(f->fd, f->buf + done, f->buf_len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    f->size += done;
    f->buf_len = 0;
}

int tw_rotating_track_lines(tw_rotating_file *f)
{
    if (f->gen_offsets)
        return TW_OK;
    if (!(f->gen_offsets = calloc((size_t)f->backups + 1, sizeof *f->gen_offsets)))
        return TW_ENOMEM;
    uint64_t before = 0; /* the lines the file holds already: ours start after them */
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    char chunk[65536];
    ssize_t n;
    while (fd >= 0 && (n = read(fd, chunk, sizeof chunk)) > 0)
        before += count_lines(chunk, (size_t)n);
    if (fd >= 0)
        close(fd);
    f->gen_offsets[0] = (int64_t)f->lines - (int64_t)before;
    f->gens = 1;
    return TW_OK;
}

int tw_rotating_locate(const tw_rotating_file *f, uint64_t line, uint64_t *local)
{
    if (!f || !f->gen_offsets || line == 0)
        return -1;
    for (unsigned k = 0; k < f->gens; k++) {
        if ((int64_t)line > f->gen_offsets[k]) {
            *local = (uint64_t)((int64_t)line - f->gen_offsets[k]);
            return (int)k;
        }
    }
    return -1;
}

unsigned tw_rotating_generations(const tw_rotating_file *f, int64_t *offsets, unsigned cap)
{
    unsigned n = f && f->gen_offsets ? f->gens : 0;
    for (unsigned k = 0; k < n && k < cap; k++)
        offsets[k] = f->gen_offsets[k];
    return n;
}

int tw_rotating_fd(const tw_rotating_file *f)
{
    return f ? f->fd : -1;
}

uint64_t tw_rotating_dropped_lines(const tw_rotating_file *f)
{
    return f ? f->dropped_lines : 0;
}

int tw_rotating_flush(tw_rotating_file *f)
{
    if (!f)
        return TW_OK;
    int brc = flush_buffer(f);
    if (f->held_len == 0)
        return brc;
    int rc = make_room(f, f->held_len);
    f->line_start = f->size;
    if (rc == TW_OK)
        rc = write_pieces(f, f->held, f->held_len, NULL, 0);
    note_result(f, rc, f->held_len);
    f->in_line = rc == TW_OK;
    f->held_len = 0;
    return rc;
}

uint64_t tw_rotating_dropped(const tw_rotating_file *f)
{
    return f ? f->dropped : 0;
}
bool tw_rotating_failing(const tw_rotating_file *f)
{
    return f && f->failing;
}
const char *tw_rotating_error(const tw_rotating_file *f)
{
    return strerror(f && f->last_errno ? f->last_errno : EIO);
}

int tw_rotating_close(tw_rotating_file *f)
{
    if (!f)
        return TW_OK;
    int rc = tw_rotating_flush(f);
    if (f->fd >= 0 && close(f->fd) != 0 && rc == TW_OK)
        rc = tw_status_from_errno(errno);
    free(f->buf);
    free(f->held);
    free(f->gen_offsets);
    free(f->path);
    free(f);
    return rc;
}
