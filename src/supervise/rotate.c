/*
 * rotate.c: the rotating log file of rotate.h.
 */
#include "rotate.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trainwatch/error.h"

struct tw_rotating_file {
    char *path;
    int fd;
    uint64_t size, max_bytes;
    unsigned backups;
};

static int open_current(tw_rotating_file *f)
{
    f->fd = open(f->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (f->fd < 0)
        return tw_status_from_errno(errno);
    struct stat st;
    f->size = fstat(f->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    return TW_OK;
}

int tw_rotating_open(const char *path, uint64_t max_bytes, unsigned backups, tw_rotating_file **out)
{
    tw_rotating_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return TW_ENOMEM;
    }
    f->max_bytes = max_bytes;
    f->backups = backups;
    int rc = open_current(f);
    if (rc != TW_OK) {
        free(f->path);
        free(f);
        return rc;
    }
    *out = f;
    return TW_OK;
}

static int rollover(tw_rotating_file *f)
{
    close(f->fd);
    size_t n = strlen(f->path) + 16;
    char *src = malloc(n), *dst = malloc(n);
    if (!src || !dst) {
        free(src);
        free(dst);
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
    return open_current(f);
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return tw_status_from_errno(errno);
        p += w;
        n -= (size_t)w;
    }
    return TW_OK;
}

int tw_rotating_write(tw_rotating_file *f, const char *data, size_t len)
{
    bool rotating = f->max_bytes > 0 && f->backups > 0;
    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        size_t line = nl ? (size_t)(nl - data) + 1 : len;
        if (rotating && f->size > 0 && f->size + line > f->max_bytes) {
            int rc = rollover(f);
            if (rc != TW_OK)
                return rc;
        }
        int rc = write_all(f->fd, data, line);
        if (rc != TW_OK)
            return rc;
        f->size += line;
        data += line;
        len -= line;
    }
    return TW_OK;
}

void tw_rotating_close(tw_rotating_file *f)
{
    if (!f)
        return;
    if (f->fd >= 0)
        close(f->fd);
    free(f->path);
    free(f);
}
