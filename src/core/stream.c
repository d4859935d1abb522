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
    if (fflush(f) != 0 || ferror(f))
        return status_of(errno);
    return TW_OK;
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
