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
 * Keys we do not implement (client certificates, cipher suite lists, curve
 * preferences) are refused with the key and its line, rather than ignored:
 * a security setting silently dropped is worse than a clear error.
 */
#ifndef TW_HTTP_WEBCONFIG_H
#define TW_HTTP_WEBCONFIG_H

#include <stddef.h>

#define TW_WEB_USERS_MAX 64
#define TW_WEB_HEADERS_MAX 16

typedef struct tw_web_config {
    char *cert_file, *key_file;   /* resolved paths; NULL when no TLS */
    char *min_version;            /* "TLS10".."TLS13" or NULL */
    char *max_version;
    size_t user_count;
    char *user_names[TW_WEB_USERS_MAX];
    char *user_hashes[TW_WEB_USERS_MAX];
    size_t header_count;
    char *header_names[TW_WEB_HEADERS_MAX];
    char *header_values[TW_WEB_HEADERS_MAX];
} tw_web_config;

/* Parses YAML text; relative file names are resolved against base_dir (NULL:
 * as given). On error fills err ("line N: ...") and returns TW_ECONFIG. */
int tw_web_config_parse(const char *text, size_t len, const char *base_dir, tw_web_config *out, char *err,
                        size_t errlen);
/* Reads and parses a file; errors name the file. */
int tw_web_config_load(const char *path, tw_web_config *out, char *err, size_t errlen);
void tw_web_config_free(tw_web_config *c);

/* bcrypt check with crypt_r and a constant-time comparison. */
int tw_password_matches(const char *hash, const char *password);

#endif
