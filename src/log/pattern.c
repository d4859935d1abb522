/*
 * pattern.c: Python logging format strings ("%(asctime)s | %(levelname)-8s
 * | %(message)s") compiled once into a list of steps, then applied to each
 * record with no parsing. Unknown names and malformed directives are refused
 * at compile time with their position, as Python refuses them at format time.
 *
 * Supported: %(name)[flags][width][.precision]conversion with flags '-'
 * (left-align) and '0', conversions s, d, i, f, r; `%%` is a percent sign.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "trainwatch/error.h"

typedef enum field_id {
    F_LITERAL,
    F_ASCTIME,
    F_CREATED,
    F_MSECS,
    F_LEVELNAME,
    F_LEVELNO,
    F_NAME,
    F_MESSAGE,
    F_FUNCNAME,
    F_LINENO,
    F_FILENAME,
    F_PATHNAME,
    F_MODULE,
    F_PROCESS,
    F_THREAD,
    F_RANK,
    F_LOCAL_RANK,
    F_WORLD_SIZE,
    F_HOSTNAME,
} field_id;

static const struct {
    const char *name;
    field_id id;
} names[] = {
    {"asctime", F_ASCTIME},       {"created", F_CREATED},   {"msecs", F_MSECS},       {"levelname", F_LEVELNAME},
    {"levelno", F_LEVELNO},       {"name", F_NAME},         {"message", F_MESSAGE},   {"funcName", F_FUNCNAME},
    {"lineno", F_LINENO},         {"filename", F_FILENAME}, {"pathname", F_PATHNAME}, {"module", F_MODULE},
    {"process", F_PROCESS},       {"thread", F_THREAD},     {"rank", F_RANK},         {"local_rank", F_LOCAL_RANK},
    {"world_size", F_WORLD_SIZE}, {"hostname", F_HOSTNAME},
};

typedef struct step {
    field_id id;
    bool left;
    int width;     /* 0: none */
    int precision; /* -1: none */
    size_t literal_at, literal_len;
} step;

#define PATTERN_STEPS_MAX 64
#define PATTERN_TEXT_MAX  1024

struct tw_log_pattern {
    step steps[PATTERN_STEPS_MAX];
    size_t count;
    char text[PATTERN_TEXT_MAX];
};

static int fail(char *error, size_t error_len, size_t at, const char *why)
{
    if (error && error_len)
        snprintf(error, error_len, "at offset %zu: %s", at, why);
    return TW_EINVAL;
}

static int lookup(const char *s, size_t n, field_id *id)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strlen(names[i].name) == n && memcmp(names[i].name, s, n) == 0) {
            *id = names[i].id;
            return 0;
        }
    }
    return -1;
}

static int read_number(const char *s, size_t *i, int *out)
{
    int v = 0, digits = 0;
    while (s[*i] >= '0' && s[*i] <= '9') {
        if (++digits > 3)
            return -1;
        v = v * 10 + (s[*i] - '0');
        (*i)++;
    }
    *out = v;
    return digits;
}

/* Parses one "%(name)...c" at text[*i] (just past the '%') into st. */
static int directive(const char *text, size_t *i, step *st, char *error, size_t error_len)
{
    size_t start = *i - 1;
    if (text[*i] != '(')
        return fail(error, error_len, start, "expected '(' after '%' (or '%%')");
    const char *close = strchr(text + *i, ')');
    if (!close)
        return fail(error, error_len, start, "unclosed '%('");
    const char *key = text + *i + 1;
    if (lookup(key, (size_t)(close - key), &st->id) != 0)
        return fail(error, error_len, start, "unknown attribute name");
    *i = (size_t)(close - text) + 1;
    st->precision = -1;
    while (text[*i] == '-' || text[*i] == '0' || text[*i] == ' ' || text[*i] == '+' || text[*i] == '#') {
        if (text[*i] == '-')
            st->left = true;
        (*i)++;
    }
    if (read_number(text, i, &st->width) < 0)
        return fail(error, error_len, start, "width too large");
    if (text[*i] == '.') {
        (*i)++;
        if (read_number(text, i, &st->precision) < 0)
            return fail(error, error_len, start, "precision too large");
    }
    char c = text[*i];
    if (!c || !strchr("sdifr", c))
        return fail(error, error_len, start, "expected a conversion (s, d, i, f or r)");
    (*i)++;
    return TW_OK;
}

int tw_log_pattern_compile(const char *text, tw_log_pattern **out, char *error, size_t error_len)
{
    if (!text)
        text = TW_LOG_DEFAULT_PATTERN;
    size_t len = strlen(text);
    if (len >= PATTERN_TEXT_MAX)
        return fail(error, error_len, 0, "pattern too long");
    tw_log_pattern *p = calloc(1, sizeof *p);
    if (!p)
        return TW_ENOMEM;
    memcpy(p->text, text, len + 1);
    size_t i = 0, literal = 0, kept = 0; /* literal bytes are copied down into p->text */
    while (i <= len) {
        bool end = i == len;
        if (!end && text[i] != '%') {
            p->text[kept++] = text[i++];
            continue;
        }
        if (!end && text[i + 1] == '%') {
            p->text[kept++] = '%';
            i += 2;
            continue;
        }
        if (kept > literal) {
            if (p->count == PATTERN_STEPS_MAX)
                break;
            p->steps[p->count++] = (step){.id = F_LITERAL, .literal_at = literal, .literal_len = kept - literal};
        }
        literal = kept;
        if (end)
            break;
        if (p->count == PATTERN_STEPS_MAX)
            break;
        i++;
        step st = {0};
        int rc = directive(text, &i, &st, error, error_len);
        if (rc != TW_OK) {
            free(p);
            return rc;
        }
        p->steps[p->count++] = st;
    }
    if (p->count == PATTERN_STEPS_MAX && i < len) {
        free(p);
        return fail(error, error_len, i, "too many directives");
    }
    *out = p;
    return TW_OK;
}

void tw_log_pattern_free(tw_log_pattern *p)
{
    free(p);
}

static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path ? path : "";
}

/* Writes one directive's value; numbers and names into a scratch buffer
 * first when a width or precision applies. */
static void value(const step *st, const tw_log_rec *r, tw_log_out *o)
{
    const tw_log_process *proc = tw_log_process_info();
    switch (st->id) {
    case F_LITERAL:
        break;
    case F_ASCTIME:
        tw_out_asctime(o, r->ns);
        break;
    case F_CREATED:
        tw_out_int(o, r->ns / 1000000000);
        tw_out_char(o, '.');
        tw_out_uint_pad(o, (uint64_t)(r->ns % 1000000000 / 1000), 6);
        break;
    case F_MSECS:
        tw_out_uint_pad(o, (uint64_t)(r->ns % 1000000000 / 1000000), 1);
        break;
    case F_LEVELNAME: {
        const char *n = tw_log_level_name(r->level);
        if (n)
            tw_out_str(o, n);
        else {
            tw_out_str(o, "Level ");
            tw_out_int(o, r->level);
        }
        break;
    }
    case F_LEVELNO:
        tw_out_int(o, r->level);
        break;
    case F_NAME:
        tw_out_str(o, r->logger[0] ? r->logger : "root");
        break;
    case F_MESSAGE:
        tw_log_message_text(r, o);
        break;
    case F_FUNCNAME:
        tw_out_str(o, r->func ? r->func : "");
        break;
    case F_LINENO:
        tw_out_int(o, r->line);
        break;
    case F_FILENAME:
        tw_out_str(o, base_name(r->file));
        break;
    case F_PATHNAME:
        tw_out_str(o, r->file ? r->file : "");
        break;
    case F_MODULE: {
        const char *b = base_name(r->file), *dot = strrchr(b, '.');
        tw_out_mem(o, b, dot ? (size_t)(dot - b) : strlen(b));
        break;
    }
    case F_PROCESS:
        tw_out_int(o, proc->pid);
        break;
    case F_THREAD:
        tw_out_int(o, r->thread);
        break;
    case F_RANK:
        tw_out_int(o, proc->rank);
        break;
    case F_LOCAL_RANK:
        tw_out_int(o, proc->local_rank);
        break;
    case F_WORLD_SIZE:
        tw_out_int(o, proc->world_size);
        break;
    case F_HOSTNAME:
        tw_out_str(o, proc->host);
        break;
    }
}

static void padded(const step *st, const tw_log_rec *r, tw_log_out *o)
{
    char scratch[512];
    tw_log_out s = {scratch, 0, sizeof scratch, false};
    value(st, r, &s);
    size_t n = s.len;
    if (st->precision >= 0 && (size_t)st->precision < n)
        n = (size_t)st->precision;
    size_t pad = st->width > 0 && (size_t)st->width > n ? (size_t)st->width - n : 0;
    for (size_t k = 0; !st->left && k < pad; k++)
        tw_out_char(o, ' ');
    tw_out_mem(o, scratch, n);
    for (size_t k = 0; st->left && k < pad; k++)
        tw_out_char(o, ' ');
}

void tw_log_pattern_format(const tw_log_pattern *p, const tw_log_rec *r, tw_log_out *o)
{
    for (size_t i = 0; i < p->count; i++) {
        const step *st = &p->steps[i];
        if (st->id == F_LITERAL)
            tw_out_mem(o, p->text + st->literal_at, st->literal_len);
        else if (st->width == 0 && st->precision < 0)
            value(st, r, o);
        else
            padded(st, r, o);
    }
}

static tw_log_pattern *default_pattern;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void default_init(void)
{
    tw_log_pattern_compile(NULL, &default_pattern, NULL, 0);
}

const tw_log_pattern *tw_log_pattern_default(void)
{
    pthread_once(&default_once, default_init);
    return default_pattern;
}
