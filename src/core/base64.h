/*
 * base64.h: base64 encoding (RFC 4648), standard and URL-safe, with
 * padding. Used by the webhook signatures (notify/payload.c) and by the
 * Pushgateway's @base64 label values (metrics/push.c).
 */
#ifndef TW_CORE_BASE64_H
#define TW_CORE_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* Bytes tw_base64_encode writes for len bytes of data, without the NUL. */
static inline size_t tw_base64_length(size_t len) { return 4 * ((len + 2) / 3); }

/* Encodes data into out (tw_base64_length(len) + 1 bytes, NUL-terminated),
 * with the URL-safe alphabet ("-_" for "+/") when url is set. Returns the
 * length written. */
size_t tw_base64_encode(const void *data, size_t len, bool url, char *out);

#endif
