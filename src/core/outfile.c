/*
 * outfile.c: write-then-rename output files (see outfile.h).
 */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stream.h"
#include "trainwatch/error.h"

static int fail(int err, const char *path, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s: %s", path, strerror(err));
    return tw_status_from_errno(err);
}

/* The directory part of path ("." when it has none), in buf. */
static void directory_of(const char *path, char *buf, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, cap, ".");
    else if (slash == path)
        snprintf(buf, cap, "/");
    else
        snprintf(buf, cap, "%.*s", (int)(slash - path), path);
}

int tw_outfile_check(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return fail(EISDIR, path, err, errlen);
    } else if (errno != ENOENT) {
        return fail(errno, path, err, errlen);
    }
    char dir[4096];
    directory_of(path, dir, sizeof dir);
    if (stat(dir, &st) != 0)
        return fail(errno, path, err, errlen);
    if (!S_ISDIR(st.st_mode))
        return fail(ENOTDIR, path, err, errlen);
    if (access(dir, W_OK | X_OK) != 0)
        return fail(errno, path, err, errlen);
    return 0;
}

int tw_outfile_open(tw_outfile *o, const char *path, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    size_t n = strlen(path) + 32;
    o->path = strdup(path);
    o->tmp = malloc(n);
    if (!o->path || !o->tmp) {
        tw_outfile_abort(o);
        return fail(ENOMEM, path, err, errlen);
    }
    snprintf(o->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || !(o->f = fdopen(fd, "w"))) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        free(o->tmp);
        o->tmp = NULL; /* nothing to remove */
        tw_outfile_abort(o);
        return fail(e, path, err, errlen);
    }
    return 0;
}

int tw_outfile_commit(tw_outfile *o, char *err, size_t errlen)
{
    int e = 0;
    if (tw_stream_flush(o->f) != 0)
        e = errno ? errno : EIO;
    if (!e && fsync(fileno(o->f)) != 0 && errno != EINVAL)
        e = errno;
    if (fclose(o->f) != 0 && !e)
        e = errno ? errno : EIO;
    o->f = NULL;
    if (!e && rename(o->tmp, o->path) != 0)
        e = errno;
    int rc = e ? fail(e, o->path, err, errlen) : 0;
    tw_outfile_abort(o); /* removes the temporary file only if it is still there */
    return rc;
}

void tw_outfile_abort(tw_outfile *o)
{
    if (o->f)
        fclose(o->f);
    if (o->tmp)
        unlink(o->tmp);
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
}
