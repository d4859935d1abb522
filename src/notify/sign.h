/*
 * sign.h: what webhook signatures need: SHA-256, HMAC-SHA256 (RFC 2104)
 * and standard base64. Small and self-contained, so signing needs no TLS
 * library beyond what libcurl already uses.
 */
#ifndef TW_NOTIFY_SIGN_H
#define TW_NOTIFY_SIGN_H

#include <stddef.h>
#include <stdint.h>

void tw_sha256(const void *data, size_t len, uint8_t out[32]);
void tw_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len, uint8_t out[32]);
/* Standard base64 with padding into out (at least 4 * ((len + 2) / 3) + 1 bytes). */
void tw_base64(const uint8_t *data, size_t len, char *out);

#endif
