/*
 * error.c: text for trainwatch's status codes, generated from the list in
 * error.h, and the errno mapping used by everything that touches files.
 */
#include "trainwatch/error.h"

#include <errno.h>

const char *tw_strerror(int status)
{
    switch (status) {
#define TW_ERROR_CASE(name, value, text)                                       \
    case name:                                                                 \
        return text;
        TW_ERROR_LIST(TW_ERROR_CASE)
#undef TW_ERROR_CASE
    }
    return "unknown error";
}

int tw_status_from_errno(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR:
        return TW_ENOENT;
    case EISDIR:
        return TW_EISDIR;
    case EACCES:
    case EPERM:
        return TW_EACCES;
    case ENOMEM:
        return TW_ENOMEM;
    case EINVAL:
        return TW_EINVAL;
    default:
        return TW_EIO;
    }
}
