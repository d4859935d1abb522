/*
 * prom_query.c: queries to a Prometheus HTTP API and the parse of their
 * answers (see prom_query.h).
 *
 * The answer's JSON is read by a small recursive descent over exactly the
 * shapes the API documents: {"status", "data": {"resultType", "result"}} with
 * a result of series ({"metric": {...}, "value": [t, "v"]} or "values":
 * [[t, "v"], ...]) or a scalar [t, "v"]; {"status": "error", "errorType",
 * "error"}. Any other member is skipped whatever it holds (native
 * histograms, warnings, stats), nesting is bounded, and a text that breaks
 * off anywhere is an error, never a partial result passed on as whole.
 */
#include "prom_query.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/buffer.h"
#include "../core/http_client.h"
#include "trainwatch/error.h"

#define MAX_DEPTH     32
#define QUERY_TIMEOUT 30.0 /* seconds: a range query over weeks of a fleet may take a while */

typedef struct cursor {
    const char *p, *end;
    const char *why; /* the first thing found wrong; NULL while all is well */
} cursor;

static bool fail(cursor *c, const char *why)
{
    if (!c->why)
        c->why = why;
    return false;
}

static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool expect(cursor *c, char ch)
{
    skip_space(c);
    if (c->p >= c->end || *c->p != ch)
        return fail(c, c->p >= c->end ? "the answer breaks off" : "the answer is not the API's JSON");
    c->p++;
    return true;
}

/* After a member or element: true with *more set when a ',' follows, false
 * with *more clear at the closing ch. */
static bool next_or_close(cursor *c, char close, bool *more)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ',') {
        c->p++;
        *more = true;
        return true;
    }
    *more = false;
    return expect(c, close);
}

/* Opens a container: *more set when it has a first member or element, clear
 * (and the container closed) when it is empty. */
static bool open_container(cursor *c, char open, char close, bool *more)
{
    if (!expect(c, open))
        return false;
    skip_space(c);
    *more = !(c->p < c->end && *c->p == close);
    if (!*more)
        c->p++;
    return true;
}

static int hex_digit(char ch)
{
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

static void put_utf8(tw_buffer *b, unsigned cp)
{
    char u[4];
    if (cp < 0x80) {
        tw_buffer_putc(b, (char)cp);
        return;
    }
    if (cp < 0x800) {
        u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3F));
        tw_buffer_append(b, u, 2);
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | (cp >> 6 & 0x3F)), u[2] = (char)(0x80 | (cp & 0x3F));
        tw_buffer_append(b, u, 3);
    } else {
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | (cp >> 12 & 0x3F));
        u[2] = (char)(0x80 | (cp >> 6 & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F));
        tw_buffer_append(b, u, 4);
    }
}

static bool read_escape_u(cursor *c, unsigned *cp)
{
    if (c->end - c->p < 4)
        return fail(c, "the answer breaks off");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(c->p[i]);
        if (d < 0)
            return fail(c, "the answer has a bad \\u escape");
        v = v << 4 | (unsigned)d;
    }
    c->p += 4;
    *cp = v;
    return true;
}

/* A JSON string, decoded into out (reset first); NULL out: skipped. */
static bool read_string(cursor *c, tw_buffer *out)
{
    if (!expect(c, '"'))
        return false;
    if (out)
        tw_buffer_reset(out);
    while (c->p < c->end && *c->p != '"') {
        char ch = *c->p++;
        if ((unsigned char)ch < 0x20)
            return fail(c, "the answer has a control character in a string");
        if (ch != '\\') {
            if (out)
                tw_buffer_putc(out, ch);
            continue;
        }
        if (c->p >= c->end)
            break;
        char e = *c->p++;
        const char *plain = strchr("\"\\/bfnrt", e);
        unsigned cp;
        if (e && plain) {
            static const char decoded[] = "\"\\/\b\f\n\r\t";
            if (out)
                tw_buffer_putc(out, decoded[plain - "\"\\/bfnrt"]);
        } else if (e == 'u' && read_escape_u(c, &cp)) {
            if (cp >= 0xD800 && cp < 0xDC00 && c->end - c->p >= 6 && c->p[0] == '\\' && c->p[1] == 'u') {
                unsigned low;
                c->p += 2;
                if (!read_escape_u(c, &low))
                    return false;
                cp = low >= 0xDC00 && low < 0xE000 ? 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00) : 0xFFFD;
            } else if (cp >= 0xD800 && cp < 0xE000) {
                cp = 0xFFFD;
            }
            if (out)
                put_utf8(out, cp ? cp : 0xFFFD); /* a NUL would cut the C string */
        } else {
            return fail(c, c->why ? c->why : "the answer has a bad escape");
        }
    }
    if (!expect(c, '"'))
        return false;
    if (out)
        tw_buffer_append(out, "", 0); /* terminated, and never NULL, even when empty */
    return !(out && out->failed) || fail(c, "out of memory");
}

static bool skip_value(cursor *c, int depth);

static bool skip_container(cursor *c, char open, char close, int depth)
{
    bool more, object = open == '{';
    if (!open_container(c, open, close, &more))
        return false;
    while (more) {
        if (object && !(read_string(c, NULL) && expect(c, ':')))
            return false;
        if (!skip_value(c, depth + 1) || !next_or_close(c, close, &more))
            return false;
    }
    return true;
}

static bool skip_value(cursor *c, int depth)
{
    if (depth > MAX_DEPTH)
        return fail(c, "the answer nests too deep");
    skip_space(c);
    if (c->p >= c->end)
        return fail(c, "the answer breaks off");
    switch (*c->p) {
    case '"':
        return read_string(c, NULL);
    case '{':
        return skip_container(c, '{', '}', depth);
    case '[':
        return skip_container(c, '[', ']', depth);
    default:
        while (c->p < c->end && strchr("+-.0123456789eEtruefalsn", *c->p))
            c->p++;
        return true;
    }
}

/* A number, as the API writes timestamps. */
static bool read_number(cursor *c, double *v)
{
    skip_space(c);
    char num[64];
    size_t n = 0;
    while (c->p < c->end && n < sizeof num - 1 && strchr("+-.0123456789eE", *c->p))
        num[n++] = *c->p++;
    num[n] = '\0';
    char *rest;
    *v = strtod(num, &rest);
    return (n && *rest == '\0') || fail(c, "the answer has a bad number");
}

/* A sample [t, "value"]: the value a string ("1.5", "NaN", "+Inf"). */
static bool read_sample(cursor *c, tw_buffer *scratch, double *t, double *v)
{
    if (!expect(c, '[') || !read_number(c, t) || !expect(c, ',') || !read_string(c, scratch) || !expect(c, ']'))
        return false;
    char *rest = scratch->data;
    if (scratch->len)
        *v = strtod(scratch->data, &rest);
    return (scratch->len && *rest == '\0') || fail(c, "the answer has a sample value that is not a number");
}

static bool add_point(cursor *c, tw_prom_series *s, double t, double v)
{
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        double *nt = realloc(s->t, cap * sizeof *nt);
        if (nt)
            s->t = nt;
        double *nv = nt ? realloc(s->v, cap * sizeof *nv) : NULL;
        if (!nv)
            return fail(c, "out of memory");
        s->v = nv;
        s->cap = cap;
    }
    s->t[s->count] = t;
    s->v[s->count++] = v;
    return true;
}

/* Reads an object, calling member for each of its members with the key
 * (in key, reused: a member that reads a nested object may overwrite it)
 * and the cursor at the value, which member must read or skip whole. */
typedef bool (*member_fn)(cursor *c, const char *key, void *ctx);
static bool each_member(cursor *c, tw_buffer *key, member_fn member, void *ctx)
{
    bool more;
    if (!open_container(c, '{', '}', &more))
        return false;
    while (more) {
        if (!read_string(c, key) || !expect(c, ':') || !member(c, key->data, ctx) || !next_or_close(c, '}', &more))
            return false;
    }
    return true;
}

typedef struct scratch {
    tw_buffer key, val;
} scratch;

typedef struct series_reading {
    tw_prom_series *s;
    scratch *w;
} series_reading;

/* A label of "metric": {"name": "value", ...}. */
static bool label_member(cursor *c, const char *key, void *ctx)
{
    series_reading *r = ctx;
    tw_prom_series *s = r->s;
    char *name = strdup(key);
    if (!name)
        return fail(c, "out of memory");
    if (!read_string(c, &r->w->val)) {
        free(name);
        return false;
    }
    tw_prom_label *grown = realloc(s->labels, (s->label_count + 1) * sizeof *grown);
    char *value = grown ? strdup(r->w->val.data) : NULL;
    if (grown)
        s->labels = grown;
    if (!value) {
        free(name);
        return fail(c, "out of memory");
    }
    s->labels[s->label_count++] = (tw_prom_label){name, value};
    return true;
}

static bool read_samples(cursor *c, tw_prom_series *s, tw_buffer *text)
{
    bool more;
    if (!open_container(c, '[', ']', &more))
        return false;
    while (more) {
        double t, v;
        if (!read_sample(c, text, &t, &v) || !add_point(c, s, t, v) || !next_or_close(c, ']', &more))
            return false;
    }
    return true;
}

/* A member of a series: "metric", "value" or "values"; others skipped. */
static bool series_member(cursor *c, const char *key, void *ctx)
{
    series_reading *r = ctx;
    double t, v;
    if (strcmp(key, "metric") == 0)
        return each_member(c, &r->w->key, label_member, r);
    if (strcmp(key, "value") == 0)
        return read_sample(c, &r->w->val, &t, &v) && add_point(c, r->s, t, v);
    if (strcmp(key, "values") == 0)
        return read_samples(c, r->s, &r->w->val);
    return skip_value(c, 2);
}

static bool read_result(cursor *c, tw_prom_result *out, scratch *w, bool scalar)
{
    skip_space(c);
    if (scalar) { /* [t, "v"]: one series without labels */
        double t, v;
        tw_prom_series *s = calloc(1, sizeof *s);
        if (!s)
            return fail(c, "out of memory");
        out->series = s;
        out->count = 1;
        return read_sample(c, &w->val, &t, &v) && add_point(c, s, t, v);
    }
    bool more;
    if (!open_container(c, '[', ']', &more))
        return false;
    while (more) {
        tw_prom_series *grown = realloc(out->series, (out->count + 1) * sizeof *grown);
        if (!grown)
            return fail(c, "out of memory");
        out->series = grown;
        memset(&out->series[out->count], 0, sizeof *grown);
        series_reading r = {&out->series[out->count++], w};
        if (!each_member(c, &w->key, series_member, &r) || !next_or_close(c, ']', &more))
            return false;
    }
    return true;
}

typedef struct api_answer {
    bool success;
    char error_type[64], error_text[200];
    bool has_result;
    bool scalar; /* data's resultType is scalar or string */
    tw_prom_result *out;
    scratch *w;
} api_answer;

/* A member of "data": "resultType", then "result" (the first one). */
static bool data_member(cursor *c, const char *key, void *ctx)
{
    api_answer *a = ctx;
    if (strcmp(key, "resultType") == 0) {
        bool ok = read_string(c, &a->w->val);
        a->scalar = ok && (strcmp(a->w->val.data, "scalar") == 0 || strcmp(a->w->val.data, "string") == 0);
        return ok;
    }
    if (strcmp(key, "result") == 0 && !a->has_result) {
        a->has_result = true;
        return read_result(c, a->out, a->w, a->scalar);
    }
    return skip_value(c, 2);
}

/* A string member into buf. */
static bool read_string_into(cursor *c, tw_buffer *text, char *buf, size_t cap)
{
    if (!read_string(c, text))
        return false;
    snprintf(buf, cap, "%s", text->data);
    return true;
}

/* A member of the answer: "status", "errorType", "error", "data". */
static bool answer_member(cursor *c, const char *key, void *ctx)
{
    api_answer *a = ctx;
    if (strcmp(key, "status") == 0) {
        bool ok = read_string(c, &a->w->val);
        a->success = ok && strcmp(a->w->val.data, "success") == 0;
        return ok;
    }
    if (strcmp(key, "errorType") == 0)
        return read_string_into(c, &a->w->val, a->error_type, sizeof a->error_type);
    if (strcmp(key, "error") == 0)
        return read_string_into(c, &a->w->val, a->error_text, sizeof a->error_text);
    if (strcmp(key, "data") == 0)
        return each_member(c, &a->w->key, data_member, a);
    return skip_value(c, 1);
}

static bool read_answer(cursor *c, api_answer *a)
{
    if (!each_member(c, &a->w->key, answer_member, a))
        return false;
    skip_space(c);
    return c->p == c->end || fail(c, "the answer has text after its JSON");
}

int tw_prom_parse(const char *text, size_t len, tw_prom_result *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    cursor c = {text, text + len, NULL};
    scratch w;
    tw_buffer_init(&w.key);
    tw_buffer_init(&w.val);
    api_answer a = {.out = out, .w = &w};
    bool ok = read_answer(&c, &a);
    tw_buffer_free(&w.key);
    tw_buffer_free(&w.val);
    int rc = TW_OK;
    if (!ok) {
        snprintf(err, errlen, "%s", c.why);
        rc = strcmp(c.why, "out of memory") == 0 ? TW_ENOMEM : TW_EHTTP;
    } else if (!a.success) {
        snprintf(err, errlen, "%s: %s", a.error_type[0] ? a.error_type : "error",
                 a.error_text[0] ? a.error_text : "the query failed");
        rc = TW_EHTTP;
    } else if (!a.has_result) {
        snprintf(err, errlen, "the answer has no result");
        rc = TW_EHTTP;
    }
    if (rc != TW_OK)
        tw_prom_result_free(out);
    return rc;
}

const char *tw_prom_label_value(const tw_prom_series *s, const char *name)
{
    for (size_t i = 0; i < s->label_count; i++)
        if (strcmp(s->labels[i].name, name) == 0)
            return s->labels[i].value;
    return NULL;
}

void tw_prom_result_free(tw_prom_result *r)
{
    for (size_t i = 0; i < r->count; i++) {
        tw_prom_series *s = &r->series[i];
        for (size_t k = 0; k < s->label_count; k++) {
            free(s->labels[k].name);
            free(s->labels[k].value);
        }
        free(s->labels);
        free(s->t);
        free(s->v);
    }
    free(r->series);
    memset(r, 0, sizeof *r);
}

/* ---- asking ---------------------------------------------------------------- */

static int ask(const tw_prom_server *srv, const char *endpoint, tw_buffer *form, tw_prom_result *out, char *err,
               size_t errlen)
{
    const char *base_url = srv->url;
    memset(out, 0, sizeof *out);
    char origin[256];
    tw_url_origin(base_url, origin, sizeof origin);
    tw_buffer url, body;
    tw_buffer_init(&url);
    tw_buffer_init(&body);
    size_t base_len = strlen(base_url);
    while (base_len && base_url[base_len - 1] == '/')
        base_len--;
    tw_buffer_append(&url, base_url, base_len);
    tw_buffer_puts(&url, endpoint);
    int rc = TW_ENOMEM;
    if (!url.failed && !form->failed) {
        const char *headers[TW_PROM_HEADERS_MAX + 1] = {"Accept: application/json"};
        size_t header_count = 1;
        for (size_t i = 0; i < srv->header_count && header_count <= TW_PROM_HEADERS_MAX; i++)
            headers[header_count++] = srv->headers[i];
        tw_http_request rq = {.method = "POST",
                              .url = url.data,
                              .content_type = "application/x-www-form-urlencoded",
                              .body = form->data,
                              .body_len = form->len,
                              .timeout = QUERY_TIMEOUT,
                              .headers = headers,
                              .header_count = header_count,
                              .whole = &body,
                              .whole_cap = TW_PROM_ANSWER_MAX};
        tw_http_answer answer;
        char why[256];
        rc = tw_http_send(&rq, &answer, why, sizeof why);
        if (rc != TW_OK) {
            snprintf(err, errlen, "Prometheus %s: %s", origin, why);
        } else if (answer.status >= 500 || (answer.status >= 300 && answer.status != 400 && answer.status != 422)) {
            /* 400 and 422 carry the API's own error in JSON: parsed below */
            snprintf(err, errlen, "Prometheus %s%s: HTTP %ld%s%s", origin, endpoint, answer.status,
                     answer.text[0] ? ": " : "", answer.text);
            rc = TW_EHTTP;
        } else {
            char why_parse[300];
            rc = tw_prom_parse(body.data ? body.data : "", body.len, out, why_parse, sizeof why_parse);
            if (rc != TW_OK)
                snprintf(err, errlen, "Prometheus %s%s: %s", origin, endpoint, why_parse);
        }
    } else {
        snprintf(err, errlen, "out of memory");
    }
    tw_buffer_free(&url);
    tw_buffer_free(&body);
    return rc;
}

static void form_number(tw_buffer *form, const char *name, double v)
{
    tw_buffer_printf(form, "&%s=%.3f", name, v);
}

int tw_prom_query(const tw_prom_server *srv, const char *query, double time, tw_prom_result *out, char *err,
                  size_t errlen)
{
    tw_buffer form;
    tw_buffer_init(&form);
    tw_buffer_puts(&form, "query=");
    tw_url_encode(&form, query);
    form_number(&form, "time", time);
    int rc = ask(srv, "/api/v1/query", &form, out, err, errlen);
    tw_buffer_free(&form);
    return rc;
}

int tw_prom_query_range(const tw_prom_server *srv, const char *query, double start, double end, double step,
                        tw_prom_result *out, char *err, size_t errlen)
{
    tw_buffer form;
    tw_buffer_init(&form);
    tw_buffer_puts(&form, "query=");
    tw_url_encode(&form, query);
    form_number(&form, "start", start);
    form_number(&form, "end", end);
    form_number(&form, "step", step);
    int rc = ask(srv, "/api/v1/query_range", &form, out, err, errlen);
    tw_buffer_free(&form);
    return rc;
}
