/*
 * stream.c: flush and close with the write errors stdio kept (see stream.h).
 */
#include "stream.h"

#include <errno.h>

#include "trainwatch/error.h"

static int status_of(int err)
{
    return err ? tw_status_from_errno(err) : TW_EIO;
}

int tw_stream_flush(FILE *f)
{
    errno = 0;
    if (fflush(f) == 0 && !ferror(f))
        return TW_OK;
    if (errno == 0 && ferror(f)) {
        /* A write failed before, with nothing left to flush now, and its
         * errno is gone (later calls reset it): write a newline to learn
         * why, rather than say only "input/output error". The output is
         * incomplete already; a newline more does it no harm. */
        clearerr(f);
        if (fputc('\n', f) != EOF && fflush(f) == 0)
            return TW_EIO; /* it writes again: the earlier error was passing */
    }
    return status_of(errno);
}

int tw_stream_close(FILE *f)
{
    int rc = tw_stream_flush(f);
    int err = errno;
    if (fclose(f) != 0 && rc == TW_OK)
        return status_of(errno);
    errno = err;
    return rc;
}
