/*
 * webconfig.c: parsing the exporter-toolkit web configuration (see
 * webconfig.h) with libyaml's document API, turning its TLS settings into a
 * GnuTLS priority string that GnuTLS itself validates at load time, and
 * checking passwords.
 */
#include "webconfig.h"

#include <crypt.h>
#include <errno.h>
#include <gnutls/gnutls.h>
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

static int fail(parse_ctx *c, const yaml_node_t *node, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

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

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

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

static const char *const tls_versions[] = {"TLS10", "TLS11", "TLS12", "TLS13"};
static const char *const gnutls_versions[] = {"VERS-TLS1.0", "VERS-TLS1.1", "VERS-TLS1.2", "VERS-TLS1.3"};
#define TLS_VERSIONS 4

static int tls_version_index(const char *s)
{
    for (int i = 0; s && i < TLS_VERSIONS; i++) {
        if (strcmp(s, tls_versions[i]) == 0)
            return i;
    }
    return -1;
}

/* Go's secure TLS 1.0-1.2 suites (crypto/tls CipherSuites()) and the GnuTLS
 * key exchange, cipher and MAC that make each: GnuTLS has no other suite
 * built from these items, so the product of the items of a list is exactly
 * the suites it enables. */
typedef struct cipher_suite {
    const char *name, *kx, *cipher, *mac;
} cipher_suite;

static const cipher_suite cipher_suites[] = {
    {"TLS_RSA_WITH_AES_128_CBC_SHA", "RSA", "AES-128-CBC", "SHA1"},
    {"TLS_RSA_WITH_AES_256_CBC_SHA", "RSA", "AES-256-CBC", "SHA1"},
    {"TLS_RSA_WITH_AES_128_GCM_SHA256", "RSA", "AES-128-GCM", "AEAD"},
    {"TLS_RSA_WITH_AES_256_GCM_SHA384", "RSA", "AES-256-GCM", "AEAD"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA", "AES-128-CBC", "SHA1"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA", "AES-256-CBC", "SHA1"},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA", "AES-128-CBC", "SHA1"},
    {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA", "AES-256-CBC", "SHA1"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA", "AES-128-GCM", "AEAD"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA", "AES-256-GCM", "AEAD"},
    {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA", "AES-128-GCM", "AEAD"},
    {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA", "AES-256-GCM", "AEAD"},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA", "CHACHA20-POLY1305", "AEAD"},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA", "CHACHA20-POLY1305", "AEAD"},
};
#define CIPHER_SUITES (sizeof cipher_suites / sizeof cipher_suites[0])

/* Go's names that trainwatch refuses: insecure ones, and TLS 1.3's (not configurable in Go either). */
static const char *const refused_suites[] = {
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
};

static const struct {
    const char *name, *group;
} curves[] = {
    {"CurveP256", "GROUP-SECP256R1"},
    {"CurveP384", "GROUP-SECP384R1"},
    {"CurveP521", "GROUP-SECP521R1"},
    {"X25519", "GROUP-X25519"},
};
#define CURVES (sizeof curves / sizeof curves[0])

static int cipher_index(const char *name)
{
    char canonical[80];
    /* Go also accepts the ChaCha20 suites without their _SHA256 */
    size_t n = strlen(name);
    if (n > 17 && strcmp(name + n - 17, "CHACHA20_POLY1305") == 0 && n + 8 < sizeof canonical) {
        snprintf(canonical, sizeof canonical, "%s_SHA256", name);
        name = canonical;
    }
    for (size_t i = 0; i < CIPHER_SUITES; i++) {
        if (strcmp(cipher_suites[i].name, name) == 0)
            return (int)i;
    }
    return -1;
}

static bool in_list(const char *item, const char *const *items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(item, items[i]) == 0)
            return true;
    }
    return false;
}

/* The suites a list enables under GnuTLS must be the list: name the first extra one, or NULL. */
static const char *extra_suite(const tw_web_config *cfg)
{
    const char *kx[CIPHER_SUITES], *cipher[CIPHER_SUITES], *mac[CIPHER_SUITES];
    bool chosen[CIPHER_SUITES] = {false};
    for (size_t i = 0; i < cfg->cipher_count; i++) {
        const cipher_suite *cs = &cipher_suites[cfg->ciphers[i]];
        kx[i] = cs->kx, cipher[i] = cs->cipher, mac[i] = cs->mac;
        chosen[cfg->ciphers[i]] = true;
    }
    for (size_t i = 0; i < CIPHER_SUITES; i++) {
        const cipher_suite *cs = &cipher_suites[i];
        if (!chosen[i] && in_list(cs->kx, kx, cfg->cipher_count) && in_list(cs->cipher, cipher, cfg->cipher_count) &&
            in_list(cs->mac, mac, cfg->cipher_count))
            return cs->name;
    }
    return NULL;
}

typedef int (*item_fn)(parse_ctx *c, const char *item, yaml_node_t *node);

/* Calls fn for each scalar of a sequence (a null node is an empty list). */
static int each_item(parse_ctx *c, yaml_node_t *seq, const char *what, item_fn fn)
{
    if (empty_value(seq))
        return TW_OK;
    if (seq->type != YAML_SEQUENCE_NODE)
        return fail(c, seq, "%s must be a list", what);
    for (yaml_node_item_t *i = seq->data.sequence.items.start; i < seq->data.sequence.items.top; i++) {
        yaml_node_t *n = yaml_document_get_node(c->doc, *i);
        if (!scalar(n))
            return fail(c, n, "%s: items must be plain strings", what);
        int rc = fn(c, scalar(n), n);
        if (rc != TW_OK)
            return rc;
    }
    return TW_OK;
}

static int cipher_item(parse_ctx *c, const char *name, yaml_node_t *node)
{
    tw_web_config *cfg = c->cfg;
    int i = cipher_index(name);
    if (i < 0 && in_list(name, refused_suites, sizeof refused_suites / sizeof refused_suites[0]))
        return fail(c, node, "cipher_suites: %s is not supported by trainwatch (%s)", name,
                    strncmp(name, "TLS_AES", 7) && strncmp(name, "TLS_CHACHA", 10)
                        ? "insecure"
                        : "TLS 1.3 suites are not configurable, as in Go");
    if (i < 0)
        return fail(c, node,
                    "cipher_suites: unknown cipher suite %s (Go's names, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)",
                    name);
    for (size_t k = 0; k < cfg->cipher_count; k++) {
        if (cfg->ciphers[k] == i)
            return TW_OK;
    }
    if (cfg->cipher_count == TW_WEB_CIPHERS_MAX)
        return fail(c, node, "cipher_suites: at most %d", TW_WEB_CIPHERS_MAX);
    cfg->ciphers[cfg->cipher_count++] = (unsigned char)i;
    return TW_OK;
}

static int curve_item(parse_ctx *c, const char *name, yaml_node_t *node)
{
    tw_web_config *cfg = c->cfg;
    size_t i = 0;
    while (i < CURVES && strcmp(curves[i].name, name) != 0)
        i++;
    if (i == CURVES)
        return fail(c, node,
                    "curve_preferences: unknown or unsupported curve %s (X25519, CurveP256, CurveP384, CurveP521)",
                    name);
    for (size_t k = 0; k < cfg->curve_count; k++) {
        if (cfg->curves[k] == i)
            return TW_OK;
    }
    if (cfg->curve_count == TW_WEB_CURVES_MAX)
        return fail(c, node, "curve_preferences: at most %d", TW_WEB_CURVES_MAX);
    cfg->curves[cfg->curve_count++] = (unsigned char)i;
    return TW_OK;
}

static int yaml_bool(const char *s)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "on"}, *const no[] = {"false", "False", "FALSE",
                                                                                           "no", "off"};
    if (s && in_list(s, yes, 5))
        return 1;
    if (s && in_list(s, no, 5))
        return 0;
    return -1;
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
        if (tls_version_index(scalar(v)) < 0)
            return fail(c, v, "%s must be one of TLS10, TLS11, TLS12, TLS13", key);
        return set_string(c, key[1] == 'i' ? &cfg->min_version : &cfg->max_version, v, key);
    }
    if (strcmp(key, "prefer_server_cipher_suites") == 0) {
        int b = yaml_bool(scalar(v));
        if (b < 0)
            return fail(c, v, "%s must be true or false", key);
        cfg->client_cipher_order = !b;
        return TW_OK;
    }
    if (strcmp(key, "cipher_suites") == 0) {
        cfg->cipher_count = 0;
        int rc = each_item(c, v, key, cipher_item);
        const char *extra = rc == TW_OK ? extra_suite(cfg) : NULL;
        if (extra)
            return fail(c, k,
                        "cipher_suites: GnuTLS enables a suite when its key exchange, cipher and MAC are each "
                        "listed, so this list would also enable %s: add it, or drop a suite",
                        extra);
        return rc;
    }
    if (strcmp(key, "curve_preferences") == 0) {
        cfg->curve_count = 0;
        return each_item(c, v, key, curve_item);
    }
    if (strcmp(key, "client_auth_type") == 0 || strcmp(key, "client_ca_file") == 0 ||
        strcmp(key, "client_allowed_sans") == 0) {
        if (empty_value(v))
            return TW_OK;
        return fail(
            c, k, "tls_server_config.%s is not supported by trainwatch (client certificates are not implemented)", key);
    }
    return fail(c, k, "unknown key tls_server_config.%s", key);
}

static void append_item(char *out, size_t cap, const char *sign, const char *item)
{
    size_t n = strlen(out);
    snprintf(out + n, cap - n, ":%s%s", sign, item);
}

char *tw_web_config_priorities(const tw_web_config *c, char *out, size_t cap)
{
    int min = c->min_version ? tls_version_index(c->min_version) : 2;
    int max = c->max_version ? tls_version_index(c->max_version) : 3;
    snprintf(out, cap, "NORMAL");
    append_item(out, cap, "-", "VERS-ALL");
    for (int v = max; v >= min && v >= 0; v--)
        append_item(out, cap, "+", gnutls_versions[v]);
    if (c->cipher_count) {
        const char *kinds[3] = {"KX-ALL", "CIPHER-ALL", "MAC-ALL"};
        for (int kind = 0; kind < 3; kind++) {
            append_item(out, cap, "-", kinds[kind]);
            const char *seen[TW_WEB_CIPHERS_MAX];
            size_t nseen = 0;
            for (size_t i = 0; i < c->cipher_count; i++) {
                const cipher_suite *cs = &cipher_suites[c->ciphers[i]];
                const char *item = kind == 0 ? cs->kx : kind == 1 ? cs->cipher : cs->mac;
                if (!in_list(item, seen, nseen)) {
                    seen[nseen++] = item;
                    append_item(out, cap, "+", item);
                }
            }
        }
    }
    if (c->curve_count) {
        append_item(out, cap, "-", "GROUP-ALL");
        for (size_t i = 0; i < c->curve_count; i++)
            append_item(out, cap, "+", curves[c->curves[i]].group);
    }
    if (!c->client_cipher_order)
        append_item(out, cap, "%", "SERVER_PRECEDENCE");
    return out;
}

/* What needs the whole tls_server_config: the version range, TLS 1.3's
 * ciphers, and GnuTLS's own reading of the priority string. */
static int check_tls(parse_ctx *c)
{
    tw_web_config *cfg = c->cfg;
    int min = cfg->min_version ? tls_version_index(cfg->min_version) : 2;
    int max = cfg->max_version ? tls_version_index(cfg->max_version) : 3;
    if (min > max)
        return fail(c, NULL, "tls_server_config: min_version %s is above max_version %s", tls_versions[min],
                    tls_versions[max]);
    bool aead = false;
    for (size_t i = 0; i < cfg->cipher_count; i++)
        aead |= strcmp(cipher_suites[cfg->ciphers[i]].mac, "AEAD") == 0;
    if (cfg->cipher_count && !aead && max == 3)
        return fail(c, NULL,
                    "tls_server_config: cipher_suites has no GCM or ChaCha20 suite, which TLS 1.3 needs under "
                    "GnuTLS: add one, or set max_version: TLS12");
    char priorities[512];
    tw_web_config_priorities(cfg, priorities, sizeof priorities);
    gnutls_priority_t p;
    const char *where = NULL;
    int rc = gnutls_priority_init(&p, priorities, &where);
    if (rc != GNUTLS_E_SUCCESS)
        return fail(c, NULL, "tls_server_config: GnuTLS refuses the priority string %s (at '%s'): %s", priorities,
                    where ? where : "", gnutls_strerror(rc));
    gnutls_priority_deinit(p);
    return TW_OK;
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
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
              *p == '/'))
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
        return fail(c, v,
                    "basic_auth_users.%s: bcrypt cost %d is outside 4..%d (each request pays it; 10 to 12 is usual)",
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

/* A bcrypt setting of the cost most users have (ties: the higher) and a
 * random salt: crypt_r reads only the cost and salt, so verifying against
 * it costs what a real hash of that cost does, yet nothing matches it. */
static int make_dummy_hash(parse_ctx *c)
{
    tw_web_config *cfg = c->cfg;
    int count[BCRYPT_MAX_COST + 1] = {0}, cost = 10;
    for (size_t i = 0; i < cfg->user_count; i++)
        count[bcrypt_cost(cfg->user_hashes[i])]++;
    for (int k = 4; k <= BCRYPT_MAX_COST && cfg->user_count; k++) {
        if (count[k] && count[k] >= count[cost])
            cost = k;
    }
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    if (!crypt_gensalt_rn("$2b$", (unsigned long)cost, NULL, 0, salt, sizeof salt) || strlen(salt) != 29)
        return fail(c, NULL, "could not make a bcrypt salt: %s", strerror(errno));
    /* the 29 characters of the setting, then any 31 of bcrypt's alphabet */
    memcpy(cfg->dummy_hash, salt, 29);
    memset(cfg->dummy_hash + 29, '.', 31);
    cfg->dummy_hash[60] = '\0';
    return TW_OK;
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
    if (rc == TW_OK)
        rc = check_tls(&c);
    if (rc == TW_OK && out->user_count)
        rc = make_dummy_hash(&c);
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
