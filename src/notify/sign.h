/*
 * sign.h: what webhook signatures need: SHA-256 and HMAC-SHA256 (RFC 2104,
 * RFC 4231), thin wrappers over nettle (base64 is in core/base64.h).
 */
#ifndef TW_NOTIFY_SIGN_H
#define TW_NOTIFY_SIGN_H

#include <stddef.h>
#include <stdint.h>

void tw_sha256(const void *data, size_t len, uint8_t out[32]);
void tw_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len, uint8_t out[32]);

#endif
