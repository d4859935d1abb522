/*
 * expose.c: writing a registry in the Prometheus text format 0.0.4 or
 * OpenMetrics 1.0.0, and choosing between them from a scrape's Accept header.
 *
 * The differences that matter (REFERENCE.md section 1): OpenMetrics names a
 * counter family without _total and adds _created samples, escapes '"' in
 * HELP, has an info type, and ends with "# EOF". Both escape label values
 * (\\, \", \n) and write +Inf, -Inf and NaN. Histograms write cumulative
 * buckets whose +Inf bucket equals _count by construction.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/buffer.h"
#include "internal.h"
#include "trainwatch/error.h"

const char *tw_expose_content_type(tw_expose_format f)
{
    return f == TW_EXPOSE_OPENMETRICS ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                                      : "text/plain; version=0.0.4; charset=utf-8";
}

/* ---- negotiation ---------------------------------------------------- */

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Parses one media range "type/subtype; k=v; q=0.5" ending at ',' or NUL. */
static const char *media_range(const char *p, char *type, size_t cap, char *version, size_t vcap, double *q)
{
    size_t n = 0;
    p = skip_ws(p);
    while (*p && *p != ';' && *p != ',' && *p != ' ' && n + 1 < cap)
        type[n++] = *p++;
    type[n] = '\0';
    version[0] = '\0';
    *q = 1.0;
    while (*p && *p != ',') {
        if (*p != ';') {
            p++;
            continue;
        }
        p = skip_ws(p + 1);
        const char *key = p;
        while (*p && *p != '=' && *p != ';' && *p != ',')
            p++;
        size_t klen = (size_t)(p - key);
        while (klen > 0 && (key[klen - 1] == ' ' || key[klen - 1] == '\t'))
            klen--;
        if (*p != '=')
            continue;
        p = skip_ws(p + 1);
        const char *val = p;
        while (*p && *p != ';' && *p != ',')
            p++;
        size_t vlen = (size_t)(p - val);
        while (vlen > 0 && (val[vlen - 1] == ' ' || val[vlen - 1] == '\t'))
            vlen--;
        if (klen == 1 && (key[0] == 'q' || key[0] == 'Q')) {
            char tmp[16];
            size_t m = vlen < sizeof tmp - 1 ? vlen : sizeof tmp - 1;
            memcpy(tmp, val, m);
            tmp[m] = '\0';
            char *end;
            double v = strtod(tmp, &end);
            *q = (end != tmp && v >= 0 && v <= 1) ? v : 0;
        } else if (klen == 7 && strncasecmp(key, "version", 7) == 0 && vlen < vcap) {
            memcpy(version, val, vlen);
            version[vlen] = '\0';
        }
    }
    return *p == ',' ? p + 1 : p;
}

tw_expose_format tw_negotiate_format(const char *accept)
{
    if (!accept)
        return TW_EXPOSE_TEXT;
    double best_q = 0;
    tw_expose_format best = TW_EXPOSE_TEXT;
    const char *p = accept;
    for (int guard = 0; *p && guard < 64; guard++) {
        char type[96], version[32];
        double q;
        p = media_range(p, type, sizeof type, version, sizeof version, &q);
        if (q <= 0)
            continue;
        bool om = strcasecmp(type, "application/openmetrics-text") == 0 &&
                  (!version[0] || strcmp(version, "1.0.0") == 0 || strcmp(version, "0.0.1") == 0);
        bool text = (strcasecmp(type, "text/plain") == 0 && (!version[0] || strcmp(version, "0.0.4") == 0)) ||
                    strcmp(type, "*/*") == 0 || strcasecmp(type, "text/*") == 0;
        /* ties keep the earlier range, as the header lists preference order */
        if (om && q > best_q) {
            best_q = q;
            best = TW_EXPOSE_OPENMETRICS;
        } else if (text && q > best_q) {
            best_q = q;
            best = TW_EXPOSE_TEXT;
        }
    }
    return best;
}

bool tw_accepts_gzip(const char *accept_encoding)
{
    if (!accept_encoding)
        return false;
    const char *p = accept_encoding;
    for (int guard = 0; *p && guard < 64; guard++) {
        char coding[32], version[8];
        double q;
        p = media_range(p, coding, sizeof coding, version, sizeof version, &q);
        if (q > 0 && (strcasecmp(coding, "gzip") == 0 || strcmp(coding, "*") == 0))
            return true;
    }
    return false;
}

/* ---- writers -------------------------------------------------------- */

static void escape(tw_buffer *b, const char *s, bool quotes)
{
    const char *run = s;
    for (const char *p = s;; p++) {
        const char *rep = NULL;
        if (*p == '\\')
            rep = "\\\\";
        else if (*p == '\n')
            rep = "\\n";
        else if (*p == '"' && quotes)
            rep = "\\\"";
        else if (*p != '\0')
            continue;
        tw_buffer_append(b, run, (size_t)(p - run));
        if (!rep)
            break;
        tw_buffer_puts(b, rep);
        run = p + 1;
    }
}

/* name{l1="v1",...,extra} */
static void sample_start(tw_buffer *b, const tw_family *f, const tw_cell *c, const char *suffix,
                         const char *extra_name, const char *extra_value)
{
    tw_buffer_puts(b, f->name);
    tw_buffer_puts(b, suffix);
    if (f->label_count == 0 && !extra_name) {
        tw_buffer_putc(b, ' ');
        return;
    }
    tw_buffer_putc(b, '{');
    for (size_t i = 0; i < f->label_count; i++) {
        if (i)
            tw_buffer_putc(b, ',');
        tw_buffer_puts(b, f->label_names[i]);
        tw_buffer_append(b, "=\"", 2);
        escape(b, c->labels[i], true);
        tw_buffer_putc(b, '"');
    }
    if (extra_name) {
        if (f->label_count)
            tw_buffer_putc(b, ',');
        tw_buffer_puts(b, extra_name);
        tw_buffer_append(b, "=\"", 2);
        tw_buffer_puts(b, extra_value);
        tw_buffer_putc(b, '"');
    }
    tw_buffer_append(b, "} ", 2);
}

static void value_line(tw_buffer *b, double v)
{
    tw_buffer_double(b, v);
    tw_buffer_putc(b, '\n');
}

static void header(tw_buffer *b, const tw_family *f, tw_expose_format fmt)
{
    static const char *const text_types[] = {"counter", "gauge", "histogram", "gauge"};
    static const char *const om_types[] = {"counter", "gauge", "histogram", "info"};
    const char *suffix = "";
    if (fmt == TW_EXPOSE_TEXT && f->type == TW_METRIC_COUNTER)
        suffix = "_total";
    else if (fmt == TW_EXPOSE_TEXT && f->type == TW_METRIC_INFO)
        suffix = "_info";
    bool om = fmt == TW_EXPOSE_OPENMETRICS;
    tw_buffer_puts(b, "# HELP ");
    tw_buffer_puts(b, f->name);
    tw_buffer_puts(b, suffix);
    tw_buffer_putc(b, ' ');
    escape(b, f->help, om);
    tw_buffer_puts(b, "\n# TYPE ");
    tw_buffer_puts(b, f->name);
    tw_buffer_puts(b, suffix);
    tw_buffer_putc(b, ' ');
    tw_buffer_puts(b, (om ? om_types : text_types)[f->type]);
    tw_buffer_putc(b, '\n');
}

/* The le label of bucket i (the last is +Inf). OpenMetrics wants le as a
 * float ("1.0"). The text format would take "1", but Prometheus stores le as
 * written: the same spelling in both formats keeps one series whichever
 * format a scrape negotiates. */
static void bucket_label(char le[TW_DOUBLE_CHARS + 2], const tw_family *f, size_t i)
{
    if (i == f->bound_count) {
        strcpy(le, "+Inf");
        return;
    }
    size_t n = tw_format_double(le, f->bounds[i]);
    if (!strpbrk(le, ".eEIN"))
        memcpy(le + n, ".0", 3);
}

static void write_histogram(tw_buffer *b, const tw_family *f, const tw_cell *c)
{
    uint64_t cumulative = 0;
    char le[TW_DOUBLE_CHARS + 2];
    for (size_t i = 0; i <= f->bound_count; i++) {
        cumulative += tw_histogram_bucket(c, i);
        bucket_label(le, f, i);
        sample_start(b, f, c, "_bucket", "le", le);
        tw_buffer_uint(b, cumulative);
        tw_buffer_putc(b, '\n');
    }
    sample_start(b, f, c, "_sum", NULL, NULL);
    value_line(b, tw_histogram_sum(c));
    sample_start(b, f, c, "_count", NULL, NULL);
    tw_buffer_uint(b, cumulative);
    tw_buffer_putc(b, '\n');
}

static void write_family(tw_buffer *b, tw_family *f, tw_expose_format fmt)
{
    bool om = fmt == TW_EXPOSE_OPENMETRICS;
    pthread_mutex_lock(&f->lock);
    if (f->count == 0) {
        pthread_mutex_unlock(&f->lock);
        return;
    }
    header(b, f, fmt);
    for (size_t i = 0; i < f->count; i++) {
        const tw_cell *c = f->order[i];
        switch (f->type) {
        case TW_METRIC_COUNTER:
            sample_start(b, f, c, "_total", NULL, NULL);
            value_line(b, tw_cell_value(c));
            if (om) {
                sample_start(b, f, c, "_created", NULL, NULL);
                value_line(b, c->created);
            }
            break;
        case TW_METRIC_GAUGE:
            sample_start(b, f, c, "", NULL, NULL);
            value_line(b, tw_cell_value(c));
            break;
        case TW_METRIC_INFO:
            sample_start(b, f, c, "_info", NULL, NULL);
            tw_buffer_append(b, "1\n", 2);
            break;
        case TW_METRIC_HISTOGRAM:
            write_histogram(b, f, c);
            if (om) {
                sample_start(b, f, c, "_created", NULL, NULL);
                value_line(b, c->created);
            }
            break;
        }
    }
    pthread_mutex_unlock(&f->lock);
}

/* Takes collect_lock (the caller releases it) and lets every collector
 * update its series, so what follows reads fresh values. */
static void run_collectors(tw_registry *r)
{
    pthread_mutex_lock(&r->collect_lock);
    pthread_mutex_lock(&r->lock);
    size_t n = r->collector_count;
    pthread_mutex_unlock(&r->lock);
    for (size_t i = 0; i < n; i++)
        r->collectors[i].fn(r, r->collectors[i].arg);
}

int tw_registry_expose(tw_registry *r, tw_expose_format fmt, char **out, size_t *len)
{
    run_collectors(r);
    tw_buffer b;
    tw_buffer_init(&b);
    tw_buffer_reserve(&b, 16384);
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->family_count; i++)
        write_family(&b, r->families[i], fmt);
    pthread_mutex_unlock(&r->lock);
    pthread_mutex_unlock(&r->collect_lock);
    if (fmt == TW_EXPOSE_OPENMETRICS)
        tw_buffer_puts(&b, "# EOF\n");
    if (b.failed) {
        tw_buffer_free(&b);
        return TW_ENOMEM;
    }
    *out = b.data;
    *len = b.len;
    return TW_OK;
}

/* ---- visiting samples (for the rule evaluator) ------------------------ */

static void visit_cell(const tw_family *f, const tw_cell *c, void (*fn)(const tw_sample_view *s, void *arg),
                       void *arg)
{
    const char *names[TW_LABELS_MAX + 1], *values[TW_LABELS_MAX + 1];
    char sample_name[256];
    for (size_t i = 0; i < f->label_count; i++) {
        names[i] = f->label_names[i];
        values[i] = c->labels[i];
    }
    tw_sample_view s = {.name = sample_name, .label_count = f->label_count, .label_names = names,
                        .label_values = values};
    switch (f->type) {
    case TW_METRIC_COUNTER:
        snprintf(sample_name, sizeof sample_name, "%s_total", f->name);
        s.value = tw_cell_value(c);
        fn(&s, arg);
        break;
    case TW_METRIC_GAUGE:
        snprintf(sample_name, sizeof sample_name, "%s", f->name);
        s.value = tw_cell_value(c);
        fn(&s, arg);
        break;
    case TW_METRIC_INFO:
        snprintf(sample_name, sizeof sample_name, "%s_info", f->name);
        s.value = 1;
        fn(&s, arg);
        break;
    case TW_METRIC_HISTOGRAM: {
        uint64_t cumulative = 0;
        char le[TW_DOUBLE_CHARS + 2];
        names[f->label_count] = "le";
        values[f->label_count] = le;
        snprintf(sample_name, sizeof sample_name, "%s_bucket", f->name);
        for (size_t i = 0; i <= f->bound_count; i++) {
            cumulative += tw_histogram_bucket(c, i);
            bucket_label(le, f, i);
            s.label_count = f->label_count + 1;
            s.value = (double)cumulative;
            fn(&s, arg);
        }
        s.label_count = f->label_count;
        snprintf(sample_name, sizeof sample_name, "%s_sum", f->name);
        s.value = tw_histogram_sum(c);
        fn(&s, arg);
        snprintf(sample_name, sizeof sample_name, "%s_count", f->name);
        s.value = (double)cumulative;
        fn(&s, arg);
        break;
    }
    }
}

int tw_registry_visit(tw_registry *r, bool (*want)(const char *family, tw_metric_type type, void *arg),
                      void (*fn)(const tw_sample_view *s, void *arg), void *arg)
{
    run_collectors(r);
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->family_count; i++) {
        tw_family *f = r->families[i];
        if (want && !want(f->name, f->type, arg))
            continue;
        pthread_mutex_lock(&f->lock);
        for (size_t k = 0; k < f->count; k++)
            visit_cell(f, f->order[k], fn, arg);
        pthread_mutex_unlock(&f->lock);
    }
    pthread_mutex_unlock(&r->lock);
    pthread_mutex_unlock(&r->collect_lock);
    return TW_OK;
}
