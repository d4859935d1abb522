/*
 * sign.c: SHA-256 and HMAC-SHA256 for signing webhook requests (see sign.h),
 * from nettle, the crypto library under GnuTLS (which libmicrohttpd already
 * links): no hand-written primitives to get subtly wrong.
 */
#include "sign.h"

#include <nettle/hmac.h>
#include <nettle/sha2.h>

void tw_sha256(const void *data, size_t len, uint8_t out[32])
{
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, len, data);
    sha256_digest(&c, SHA256_DIGEST_SIZE, out);
}

void tw_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len, uint8_t out[32])
{
    struct hmac_sha256_ctx c;
    hmac_sha256_set_key(&c, key_len, key);
    hmac_sha256_update(&c, msg_len, msg);
    hmac_sha256_digest(&c, SHA256_DIGEST_SIZE, out);
}
