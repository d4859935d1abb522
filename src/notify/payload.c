/*
 * payload.c: request bodies for each receiver format (see payload.h).
 *
 * Alertmanager API v2 and the Alertmanager webhook payload carry the alerts
 * as they are; the chat formats (DingTalk, Slack, Feishu, WeCom) carry one
 * readable message per batch: status, alert name, summary, run, rank, host,
 * value and description. DingTalk and Feishu sign with HMAC-SHA256 as their
 * robot APIs require: DingTalk in the URL (timestamp in ms, sign over
 * "timestamp\nsecret" keyed with the secret), Feishu in the body (timestamp
 * in s, sign = HMAC keyed with "timestamp\nsecret" over nothing).
 */
#include "payload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/base64.h"
#include "../core/json.h"
#include "sign.h"
#include "trainwatch/error.h"

const char *tw_queued_label(const tw_queued_alert *a, const char *name)
{
    for (size_t i = 0; i < a->label_count; i++) {
        if (!strcmp(a->label_names[i], name))
            return a->label_values[i];
    }
    return NULL;
}

const char *tw_queued_annotation(const tw_queued_alert *a, const char *name)
{
    for (size_t i = 0; i < a->annotation_count; i++) {
        if (!strcmp(a->annotation_names[i], name))
            return a->annotation_values[i];
    }
    return NULL;
}

static void rfc3339(FILE *f, double t)
{
    if (t <= 0) {
        tw_json_cstring(f, "0001-01-01T00:00:00Z");
        return;
    }
    time_t secs = (time_t)floor(t);
    int ms = (int)((t - (double)secs) * 1000 + 0.5);
    if (ms >= 1000)
        secs++, ms -= 1000;
    struct tm tm;
    gmtime_r(&secs, &tm);
    char text[80];
    snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
    tw_json_cstring(f, text);
}

static void string_map(FILE *f, char **names, char **values, size_t n)
{
    fputc('{', f);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputc(',', f);
        tw_json_cstring(f, names[i]);
        fputc(':', f);
        tw_json_cstring(f, values[i]);
    }
    fputc('}', f);
}

/* Closes the memstream that fills *body; its length is already in place. */
static int finish(FILE *f, char **body)
{
    bool failed = ferror(f) != 0;
    if (fclose(f) != 0 || failed) {
        free(*body);
        *body = NULL;
        return TW_ENOMEM;
    }
    return TW_OK;
}

/* The members both Alertmanager shapes give an alert: "labels",
 * "annotations", "startsAt" and "endsAt" (ends_at 0: the zero time). */
static void alert_members(FILE *f, const tw_queued_alert *a, double ends_at)
{
    fputs("\"labels\":", f);
    string_map(f, a->label_names, a->label_values, a->label_count);
    fputs(",\"annotations\":", f);
    string_map(f, a->annotation_names, a->annotation_values, a->annotation_count);
    fputs(",\"startsAt\":", f);
    rfc3339(f, a->starts_at);
    fputs(",\"endsAt\":", f);
    rfc3339(f, ends_at);
}

/* ---- Alertmanager API v2 ---------------------------------------------- */

static int build_am_api(const tw_payload_format *self, const tw_payload_context *c, const tw_queued_alert *a, size_t n, const char *url,
                        char **body, size_t *len, char **url_out)
{
    (void)self, (void)c, (void)url;
    *url_out = NULL;
    FILE *f = open_memstream(body, len);
    if (!f)
        return TW_ENOMEM;
    fputc('[', f);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",{" : "{", f);
        alert_members(f, &a[i], a[i].ends_at);
        if (a[i].generator_url) {
            fputs(",\"generatorURL\":", f);
            tw_json_cstring(f, a[i].generator_url);
        }
        fputc('}', f);
    }
    fputc(']', f);
    return finish(f, body);
}

/* ---- Alertmanager webhook payload (version 4) -------------------------- */

/* Labels or annotations every alert of the batch has with the same value. */
static void common_map(FILE *f, const tw_queued_alert *a, size_t n, bool annotations)
{
    fputc('{', f);
    bool first = true;
    size_t count = annotations ? a[0].annotation_count : a[0].label_count;
    for (size_t i = 0; i < count; i++) {
        const char *name = annotations ? a[0].annotation_names[i] : a[0].label_names[i];
        const char *value = annotations ? a[0].annotation_values[i] : a[0].label_values[i];
        bool common = true;
        for (size_t k = 1; k < n && common; k++) {
            const char *other = annotations ? tw_queued_annotation(&a[k], name) : tw_queued_label(&a[k], name);
            common = other && !strcmp(other, value);
        }
        if (!common)
            continue;
        if (!first)
            fputc(',', f);
        first = false;
        tw_json_cstring(f, name);
        fputc(':', f);
        tw_json_cstring(f, value);
    }
    fputc('}', f);
}

static int build_am_webhook(const tw_payload_format *self, const tw_payload_context *c, const tw_queued_alert *a, size_t n, const char *url,
                            char **body, size_t *len, char **url_out)
{
    (void)self, (void)url;
    *url_out = NULL;
    FILE *f = open_memstream(body, len);
    if (!f)
        return TW_ENOMEM;
    bool firing = false;
    for (size_t i = 0; i < n; i++)
        firing |= !a[i].resolved;
    const char *alertname = tw_queued_label(&a[0], "alertname");
    fputs("{\"version\":\"4\",\"groupKey\":", f);
    char key[512];
    snprintf(key, sizeof key, "{}:{alertname=\"%s\"}", alertname ? alertname : "");
    tw_json_cstring(f, key);
    fprintf(f, ",\"truncatedAlerts\":0,\"status\":\"%s\",\"receiver\":\"trainwatch\",\"groupLabels\":{",
            firing ? "firing" : "resolved");
    if (alertname) {
        fputs("\"alertname\":", f);
        tw_json_cstring(f, alertname);
    }
    fputs("},\"commonLabels\":", f);
    common_map(f, a, n, false);
    fputs(",\"commonAnnotations\":", f);
    common_map(f, a, n, true);
    fputs(",\"externalURL\":", f);
    tw_json_cstring(f, c->external_url ? c->external_url : "");
    fputs(",\"alerts\":[", f);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s{\"status\":\"%s\",", i ? "," : "", a[i].resolved ? "resolved" : "firing");
        alert_members(f, &a[i], a[i].resolved ? a[i].ends_at : 0);
        fputs(",\"generatorURL\":", f);
        tw_json_cstring(f, a[i].generator_url ? a[i].generator_url : "");
        fprintf(f, ",\"fingerprint\":\"%016llx\"}", (unsigned long long)a[i].fingerprint);
    }
    fputs("]}", f);
    return finish(f, body);
}

/* ---- chat messages ---------------------------------------------------- */

typedef enum markup { MARKDOWN, SLACK_MRKDWN, PLAIN } markup;

/* One readable message for the batch. */
static char *message(const tw_payload_context *c, const tw_queued_alert *a, size_t n, markup m, char **title_out)
{
    char *text = NULL, *title = NULL;
    size_t len = 0, tlen = 0;
    FILE *f = open_memstream(&text, &len), *t = open_memstream(&title, &tlen);
    if (!f || !t) {
        if (f)
            fclose(f);
        if (t)
            fclose(t);
        free(text);
        free(title);
        return NULL;
    }
    const char *bold = m == MARKDOWN ? "**" : m == SLACK_MRKDWN ? "*" : "";
    for (size_t i = 0; i < n; i++) {
        const char *name = tw_queued_label(&a[i], "alertname"), *summary = tw_queued_annotation(&a[i], "summary");
        const char *description = tw_queued_annotation(&a[i], "description");
        const char *status = a[i].resolved ? "RESOLVED" : "FIRING";
        if (i == 0)
            fprintf(t, "[%s] %s", status, name ? name : "alert");
        if (i)
            fputs("\n\n", f);
        fprintf(f, "%s%s[%s] %s%s", m == MARKDOWN ? "### " : "", bold, status, name ? name : "alert", bold);
        if (summary)
            fprintf(f, "\n\n%s", summary);
        fputs("\n", f);
        const char *keys[] = {"run", "rank", "severity"};
        for (size_t k = 0; k < 3; k++) {
            const char *v = tw_queued_label(&a[i], keys[k]);
            if (v)
                fprintf(f, "\n- %s: %s", keys[k], v);
        }
        fprintf(f, "\n- host: %s", c->host ? c->host : "");
        char value[64];
        snprintf(value, sizeof value, "%.6g", a[i].value);
        fprintf(f, "\n- value: %s", value);
        if (description)
            fprintf(f, "\n\n%s", description);
    }
    bool failed = ferror(f) || ferror(t);
    fclose(f);
    fclose(t);
    if (failed) {
        free(text);
        free(title);
        return NULL;
    }
    *title_out = title;
    return text;
}

static char *url_with(const char *url, const char *query)
{
    size_t n = strlen(url) + strlen(query) + 2;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "%s%c%s", url, strchr(url, '?') ? '&' : '?', query);
    return out;
}

/* Percent-encodes everything but RFC 3986's unreserved characters. */
static void url_escape(const char *s, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~", c)) {
            *out++ = (char)c;
        } else {
            *out++ = '%';
            *out++ = hex[c >> 4];
            *out++ = hex[c & 15];
        }
    }
    *out = '\0';
}

static void hmac_base64(const char *key, size_t key_len, const char *msg, size_t msg_len, char out[48])
{
    uint8_t mac[32];
    tw_hmac_sha256(key, key_len, msg, msg_len, mac);
    tw_base64_encode(mac, sizeof mac, false, out);
}

/* DingTalk: timestamp (ms) and sign = base64(HMAC(secret, "timestamp\nsecret")), in the URL. */
static int dingtalk_sign(const tw_payload_context *c, const char *url, char **url_out)
{
    long long ms = (long long)(c->now * 1000);
    char to_sign[1024], sig[48], query[256];
    int k = snprintf(to_sign, sizeof to_sign, "%lld\n%s", ms, c->secret);
    if (k < 0 || (size_t)k >= sizeof to_sign)
        return TW_EINVAL;
    hmac_base64(c->secret, strlen(c->secret), to_sign, (size_t)k, sig);
    char escaped[3 * sizeof sig];
    url_escape(sig, escaped);
    snprintf(query, sizeof query, "timestamp=%lld&sign=%s", ms, escaped);
    return (*url_out = url_with(url, query)) ? TW_OK : TW_ENOMEM;
}

/* Feishu: timestamp (s) and sign = base64(HMAC("timestamp\nsecret", "")), in the body. */
static void feishu_sign(FILE *f, const tw_payload_context *c)
{
    long long secs = (long long)c->now;
    char key[1024], sig[48];
    int k = snprintf(key, sizeof key, "%lld\n%s", secs, c->secret);
    hmac_base64(key, k > 0 && (size_t)k < sizeof key ? (size_t)k : 0, "", 0, sig);
    fprintf(f, "\"timestamp\":\"%lld\",\"sign\":\"%s\",", secs, sig);
}

/* How a chat service wants its message: the JSON around the title and text. */
typedef struct chat_style {
    markup markup;
    const char *open;       /* after '{' (and signature fields) */
    const char *title_key;  /* NULL: no title */
    const char *text_key;
    const char *close;
    int (*sign_url)(const tw_payload_context *c, const char *url, char **url_out);
    void (*sign_body)(FILE *f, const tw_payload_context *c);
} chat_style;

static int build_chat(const tw_payload_format *self, const tw_payload_context *c, const tw_queued_alert *a, size_t n,
                      const char *url, char **body, size_t *len, char **url_out)
{
    const chat_style *style = self->style;
    *url_out = NULL;
    char *title = NULL, *text = message(c, a, n, style->markup, &title);
    if (!text)
        return TW_ENOMEM;
    FILE *f = open_memstream(body, len);
    if (f) {
        fputc('{', f);
        if (c->secret && style->sign_body)
            style->sign_body(f, c);
        fputs(style->open, f);
        if (style->title_key) {
            fprintf(f, "\"%s\":", style->title_key);
            tw_json_cstring(f, title);
            fputc(',', f);
        }
        fprintf(f, "\"%s\":", style->text_key);
        tw_json_cstring(f, text);
        fputs(style->close, f);
    }
    free(text);
    free(title);
    if (!f)
        return TW_ENOMEM;
    int rc = finish(f, body);
    if (rc == TW_OK && c->secret && style->sign_url && (rc = style->sign_url(c, url, url_out)) != TW_OK) {
        free(*body);
        *body = NULL;
    }
    return rc;
}

static const chat_style dingtalk_style = {MARKDOWN, "\"msgtype\":\"markdown\",\"markdown\":{", "title", "text", "}}",
                                          dingtalk_sign, NULL};
static const chat_style slack_style = {SLACK_MRKDWN, "", NULL, "text", "}", NULL, NULL};
static const chat_style feishu_style = {PLAIN, "\"msg_type\":\"text\",\"content\":{", NULL, "text", "}}", NULL,
                                        feishu_sign};
static const chat_style wecom_style = {MARKDOWN, "\"msgtype\":\"markdown\",\"markdown\":{", NULL, "content", "}}",
                                       NULL, NULL};

static const tw_payload_format am_api = {"alertmanager-api", true, 64, false, build_am_api, NULL};
static const tw_payload_format am_webhook = {"alertmanager", false, 64, false, build_am_webhook, NULL};
static const tw_payload_format dingtalk = {"dingtalk", false, 10, true, build_chat, &dingtalk_style};
static const tw_payload_format slack = {"slack", false, 10, false, build_chat, &slack_style};
static const tw_payload_format feishu = {"feishu", false, 10, true, build_chat, &feishu_style};
static const tw_payload_format wecom = {"wecom", false, 10, false, build_chat, &wecom_style};

const tw_payload_format *const tw_payload_formats[] = {&am_api, &am_webhook, &dingtalk, &slack, &feishu, &wecom, NULL};

const tw_payload_format *tw_payload_format_find(const char *name)
{
    for (size_t i = 0; tw_payload_formats[i]; i++) {
        if (!strcmp(tw_payload_formats[i]->name, name))
            return tw_payload_formats[i];
    }
    return NULL;
}
