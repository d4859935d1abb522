/*
 * webconfig.c: parsing the exporter-toolkit web configuration (see
 * webconfig.h) with libyaml's document API, and checking passwords.
 */
#include "webconfig.h"

#include <crypt.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "../core/yaml_load.h"
#include "trainwatch/error.h"

typedef struct parse_ctx {
    yaml_document_t *doc;
    const char *base_dir;
    tw_web_config *cfg;
    char *err;
    size_t errlen;
} parse_ctx;

static int fail(parse_ctx *c, const yaml_node_t *node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(parse_ctx *c, const yaml_node_t *node, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (node)
        snprintf(c->err, c->errlen, "line %zu: %s", node->start_mark.line + 1, msg);
    else
        snprintf(c->err, c->errlen, "%s", msg);
    return TW_ECONFIG;
}

static const char *scalar(const yaml_node_t *n) { return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL; }

static char *resolve(parse_ctx *c, const char *file)
{
    if (!c->base_dir || file[0] == '/') 
        return strdup(file);
    size_t n = strlen(c->base_dir) + strlen(file) + 2;
    char *path = malloc(n);
    if (path)
        snprintf(path, n, "%s/%s", c->base_dir, file);
    return path;
}

typedef int (*key_fn)(parse_ctx *c, const char *key, yaml_node_t *value, yaml_node_t *key_node);

/* Calls fn for each key of a mapping node (a null node is an empty map). */
static int each_key(parse_ctx *c, yaml_node_t *map, const char *what, key_fn fn)
{
    if (!map || (map->type == YAML_SCALAR_NODE && (!scalar(map)[0] || strcmp(scalar(map), "null") == 0)))
        return TW_OK;
    if (map->type != YAML_MAPPING_NODE)
        return fail(c, map, "%s must be a mapping", what);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        const char *key = scalar(k);
        if (!key)
            return fail(c, k, "%s: keys must be plain strings", what);
        int rc = fn(c, key, v, k);
        if (rc != TW_OK)
            return rc;
    }
    return TW_OK;
}

static int set_string(parse_ctx *c, char **dst, yaml_node_t *v, const char *key)
{
    const char *s = scalar(v);
    if (!s)
        return fail(c, v, "%s must be a string", key);
    free(*dst);
    *dst = strdup(s);
    return *dst ? TW_OK : TW_ENOMEM;
}

static bool empty_value(yaml_node_t *v)
{
    if (!v)
        return true;
    if (v->type == YAML_SEQUENCE_NODE)
        return v->data.sequence.items.start == v->data.sequence.items.top;
    const char *s = scalar(v);
    return s && (!s[0] || strcmp(s, "null") == 0 || strcmp(s, "NoClientCert") == 0 || strcmp(s, "false") == 0);
}

static bool valid_tls_version(const char *s)
{
    return s && (strcmp(s, "TLS10") == 0 || strcmp(s, "TLS11") == 0 || strcmp(s, "TLS12") == 0 ||
                 strcmp(s, "TLS13") == 0);
}

static int tls_key(parse_ctx *c, const char *key, yaml_node_t *v, yaml_node_t *k)
{
    tw_web_config *cfg = c->cfg;
    if (strcmp(key, "cert_file") == 0 || strcmp(key, "key_file") == 0) {
        const char *s = scalar(v);
        if (!s)
            return fail(c, v, "%s must be a file name", key);
        char **dst = key[0] == 'c' ? &cfg->cert_file : &cfg->key_file;
        free(*dst);
        *dst = resolve(c, s);
        return *dst ? TW_OK : TW_ENOMEM;
    }
    if (strcmp(key, "min_version") == 0 || strcmp(key, "max_version") == 0) {
        if (!valid_tls_version(scalar(v)))
            return fail(c, v, "%s must be one of TLS10, TLS11, TLS12, TLS13", key);
        return set_string(c, key[1] == 'i' ? &cfg->min_version : &cfg->max_version, v, key);
    }
    if (strcmp(key, "prefer_server_cipher_suites") == 0)
        return TW_OK;
    if (strcmp(key, "client_auth_type") == 0 || strcmp(key, "client_ca_file") == 0 ||
        strcmp(key, "cipher_suites") == 0 || strcmp(key, "curve_preferences") == 0 ||
        strcmp(key, "client_allowed_sans") == 0) {
        if (empty_value(v))
            return TW_OK;
        return fail(c, k, "tls_server_config.%s is not supported by trainwatch (client certificates and cipher lists are not implemented)", key);
    }
    return fail(c, k, "unknown key tls_server_config.%s", key);
}

static int header_key(parse_ctx *c, const char *key, yaml_node_t *v, yaml_node_t *k)
{
    tw_web_config *cfg = c->cfg;
    if (cfg->header_count >= TW_WEB_HEADERS_MAX)
        return fail(c, k, "too many headers (at most %d)", TW_WEB_HEADERS_MAX);
    const char *s = scalar(v);
    if (!s || strpbrk(s, "\r\n") || strpbrk(key, "\r\n: "))
        return fail(c, v, "header %s must be a single-line string", key);
    cfg->header_names[cfg->header_count] = strdup(key);
    cfg->header_values[cfg->header_count] = strdup(s);
    cfg->header_count++;
    return cfg->header_names[cfg->header_count - 1] && cfg->header_values[cfg->header_count - 1] ? TW_OK : TW_ENOMEM;
}

static int http_key(parse_ctx *c, const char *key, yaml_node_t *v, yaml_node_t *k)
{
    if (strcmp(key, "http2") == 0)
        return TW_OK; /* HTTP/1.1 only; a scrape works either way */
    if (strcmp(key, "headers") == 0)
        return each_key(c, v, "http_server_config.headers", header_key);
    return fail(c, k, "unknown key http_server_config.%s", key);
}

#define BCRYPT_MAX_COST 16 /* 2^16 rounds: already seconds per request */

/* "$2b$10$" + 53 characters of bcrypt's base64; returns the cost or -1. */
static int bcrypt_cost(const char *h)
{
    if (strlen(h) != 60 || h[0] != '$' || h[1] != '2' || !strchr("aby", h[2]) || h[3] != '$' || h[6] != '$' ||
        h[4] < '0' || h[4] > '9' || h[5] < '0' || h[5] > '9')
        return -1;
    for (const char *p = h + 7; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '/'))
            return -1;
    }
    return (h[4] - '0') * 10 + (h[5] - '0');
}

static int user_key(parse_ctx *c, const char *key, yaml_node_t *v, yaml_node_t *k)
{
    tw_web_config *cfg = c->cfg;
    const char *hash = scalar(v);
    int cost = hash ? bcrypt_cost(hash) : -1;
    if (cost < 0)
        return fail(c, v, "basic_auth_users.%s must be a bcrypt hash ($2a$, $2b$ or $2y$, 60 characters)", key);
    if (cost < 4 || cost > BCRYPT_MAX_COST)
        return fail(c, v, "basic_auth_users.%s: bcrypt cost %d is outside 4..%d (each request pays it; 10 to 12 is usual)",
                    key, cost, BCRYPT_MAX_COST);
    if (cfg->user_count >= TW_WEB_USERS_MAX)
        return fail(c, k, "too many users (at most %d)", TW_WEB_USERS_MAX);
    for (size_t i = 0; i < cfg->user_count; i++) {
        if (strcmp(cfg->user_names[i], key) == 0)
            return fail(c, k, "user %s is listed twice", key);
    }
    cfg->user_names[cfg->user_count] = strdup(key);
    cfg->user_hashes[cfg->user_count] = strdup(hash);
    cfg->user_count++;
    return cfg->user_names[cfg->user_count - 1] && cfg->user_hashes[cfg->user_count - 1] ? TW_OK : TW_ENOMEM;
}

static int top_key(parse_ctx *c, const char *key, yaml_node_t *v, yaml_node_t *k)
{
    if (strcmp(key, "tls_server_config") == 0)
        return each_key(c, v, key, tls_key);
    if (strcmp(key, "http_server_config") == 0)
        return each_key(c, v, key, http_key);
    if (strcmp(key, "basic_auth_users") == 0)
        return each_key(c, v, key, user_key);
    return fail(c, k, "unknown key %s", key);
}

int tw_web_config_parse(const char *text, size_t len, const char *base_dir, tw_web_config *out, char *err,
                        size_t errlen)
{
    memset(out, 0, sizeof *out);
    yaml_document_t doc;
    tw_yaml_problem bad;
    int loaded = tw_yaml_load(text, len, &doc, NULL, &bad);
    if (loaded != TW_OK) {
        if (loaded == TW_ECONFIG)
            snprintf(err, errlen, "line %zu: %s", bad.line, bad.text);
        return loaded;
    }
    parse_ctx c = {.doc = &doc, .base_dir = base_dir, .cfg = out, .err = err, .errlen = errlen};
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    int rc = root ? each_key(&c, root, "the web configuration", top_key) : TW_OK;
    if (rc == TW_OK && (!out->cert_file) != (!out->key_file))
        rc = fail(&c, NULL, "tls_server_config needs both cert_file and key_file");
    yaml_document_delete(&doc);
    if (rc != TW_OK)
        tw_web_config_free(out);
    return rc;
}

int tw_web_config_load(const char *path, tw_web_config *out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return TW_ECONFIG;
    }
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *t = realloc(text, cap);
            if (!t || cap > (1u << 20)) {
                free(t ? t : text);
                fclose(f);
                snprintf(err, errlen, "%s: %s", path, t ? "file too large" : "out of memory");
                return TW_ECONFIG;
            }
            text = t;
        }
        size_t n = fread(text + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    fclose(f);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    char inner[512];
    int rc = tw_web_config_parse(text ? text : "", len, slash ? dir : ".", out, inner, sizeof inner);
    free(text);
    if (rc != TW_OK)
        snprintf(err, errlen, "%s: %s", path, inner);
    return rc;
}

void tw_web_config_free(tw_web_config *c)
{
    free(c->cert_file);
    free(c->key_file);
    free(c->min_version);
    free(c->max_version);
    for (size_t i = 0; i < c->user_count; i++) {
        free(c->user_names[i]);
        free(c->user_hashes[i]);
    }
    for (size_t i = 0; i < c->header_count; i++) {
        free(c->header_names[i]);
        free(c->header_values[i]);
    }
    memset(c, 0, sizeof *c);
}

int tw_password_matches(const char *hash, const char *password)
{
    struct crypt_data *data = calloc(1, sizeof *data);
    if (!data)
        return 0;
    const char *out = crypt_r(password, hash, data);
    int equal = 0;
    if (out && out[0] != '*') {
        size_t n = strlen(hash), m = strlen(out);
        /* constant time in the hash length: no early exit on the first difference */
        unsigned diff = (unsigned)(n ^ m);
        for (size_t i = 0; i < n; i++)
            diff |= (unsigned char)hash[i] ^ (unsigned char)(i < m ? out[i] : 0);
        equal = diff == 0;
    }
    explicit_bzero(data, sizeof *data);
    free(data);
    return equal;
}
