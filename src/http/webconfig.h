/*
 * webconfig.h: the exporter-toolkit web configuration file, the one every
 * Prometheus exporter accepts with --web.config.file:
 *
 *   tls_server_config:
 *     cert_file: server.crt      # relative to the config file
 *     key_file: server.key
 *     min_version: TLS12
 *   http_server_config:
 *     headers: {X-Frame-Options: deny}
 *   basic_auth_users:
 *     alice: $2y$10$...          # bcrypt
 *
 * TLS settings become a GnuTLS priority string (libmicrohttpd's TLS is
 * GnuTLS): min_version/max_version (TLS12..TLS13 by default), cipher_suites
 * by their Go names, curve_preferences (X25519, CurveP256/384/521) and
 * prefer_server_cipher_suites. GnuTLS enables a TLS 1.2 suite when its key
 * exchange, cipher and MAC are each enabled, so a cipher list is accepted
 * only when that product is exactly the list, and its ciphers also bound
 * TLS 1.3's (Go leaves those fixed). Keys we do not implement (client
 * certificates), unknown names and insecure suites are refused with the key
 * and its line, rather than ignored: a security setting silently dropped is
 * worse than a clear error.
 */
#ifndef TW_HTTP_WEBCONFIG_H
#define TW_HTTP_WEBCONFIG_H

#include <stdbool.h>
#include <stddef.h>

#define TW_WEB_USERS_MAX   64
#define TW_WEB_HEADERS_MAX 16
#define TW_WEB_CIPHERS_MAX 16
#define TW_WEB_CURVES_MAX  8

typedef struct tw_web_config {
    char *cert_file, *key_file; /* resolved paths; NULL when no TLS */
    char *min_version;          /* "TLS10".."TLS13" or NULL */
    char *max_version;
    size_t cipher_count; /* cipher_suites, as indexes into webconfig.c's table */
    unsigned char ciphers[TW_WEB_CIPHERS_MAX];
    size_t curve_count; /* curve_preferences, in order, as indexes */
    unsigned char curves[TW_WEB_CURVES_MAX];
    bool client_cipher_order; /* prefer_server_cipher_suites: false */
    size_t user_count;
    char *user_names[TW_WEB_USERS_MAX];
    char *user_hashes[TW_WEB_USERS_MAX];
    size_t header_count;
    char *header_names[TW_WEB_HEADERS_MAX];
    char *header_values[TW_WEB_HEADERS_MAX];
    /* checked for unknown users: a bcrypt setting of the cost most users
     * have (ties: the higher), so answering takes as long as for a known one */
    char dummy_hash[64];
} tw_web_config;

/* Parses YAML text; relative file names are resolved against base_dir (NULL:
 * as given). On error fills err ("line N: ...") and returns TW_ECONFIG. */
int tw_web_config_parse(const char *text, size_t len, const char *base_dir, tw_web_config *out, char *err,
                        size_t errlen);
/* Reads and parses a file; errors name the file. */
int tw_web_config_load(const char *path, tw_web_config *out, char *err, size_t errlen);
void tw_web_config_free(tw_web_config *c);

/* The GnuTLS priority string for the TLS settings (see above); the parser
 * has already checked that GnuTLS accepts it. Returns out. */
char *tw_web_config_priorities(const tw_web_config *c, char *out, size_t cap);

/* bcrypt check with crypt_r and a constant-time comparison. */
int tw_password_matches(const char *hash, const char *password);

#endif
