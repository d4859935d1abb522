/*
 * error.h: trainwatch's status codes.
 *
 * Every function that can fail returns an int: 0 for success, a negative TW_E*
 * code otherwise. tw_strerror() turns a code into text. The list lives in one
 * X-macro so the enum and the strings can never drift apart.
 */
#ifndef TRAINWATCH_ERROR_H
#define TRAINWATCH_ERROR_H

#define TW_ERROR_LIST(X)                                                       \
    X(TW_OK, 0, "success")                                                     \
    X(TW_ENOMEM, -1, "out of memory")                                          \
    X(TW_EIO, -2, "input/output error")                                        \
    X(TW_ENOENT, -3, "no such file or directory")                              \
    X(TW_EISDIR, -4, "is a directory")                                         \
    X(TW_EACCES, -5, "permission denied")                                      \
    X(TW_EINVAL, -6, "invalid argument")                                       \
    X(TW_EFORMAT, -7, "unknown log format")                                    \
    X(TW_EGZIP, -8, "corrupt or truncated gzip data")                          \
    X(TW_EBINARY, -9, "input looks binary, not a text log")                    \
    X(TW_EUSAGE, -10, "bad usage")                                             \
    X(TW_ENAME, -11, "invalid metric or label name")                           \
    X(TW_EEXIST, -12, "already registered")                                    \
    X(TW_ELIMIT, -13, "limit reached")                                         \
    X(TW_ELABELS, -14, "wrong number of label values")                         \
    X(TW_ECONFIG, -15, "invalid configuration")                                \
    X(TW_ENET, -16, "network error")                                           \
    X(TW_EHTTP, -17, "the server answered with an error")                      \
    X(TW_EBUSY, -18, "address already in use")                                 \
    X(TW_ETLS, -19, "TLS error")                                               \
    X(TW_EUNSUPPORTED, -20, "not supported")

enum tw_status {
#define TW_ERROR_ENUM(name, value, text) name = value,
    TW_ERROR_LIST(TW_ERROR_ENUM)
#undef TW_ERROR_ENUM
};

/* Returns a static string describing status; never NULL. */
const char *tw_strerror(int status);

/* Maps an errno value to the closest TW_E* code. */
int tw_status_from_errno(int err);

#endif
