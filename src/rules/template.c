/*
 * template.c: compiles and renders rule templates (see template.h).
 *
 * A template compiles to parts: literal text, or a pipeline of commands over
 * operands. Rendering walks the parts with the alert's labels and value.
 * Number formats follow Go and Prometheus's template functions
 * (template/template.go) so a message reads the same as from Prometheus.
 */
#include "template.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/buffer.h"
#include "trainwatch/error.h"

typedef enum operand_kind { OP_LABEL, OP_VALUE, OP_URL, OP_STRING, OP_NUMBER, OP_EMPTY } operand_kind;

typedef struct operand {
    operand_kind kind;
    char *text;
    double number;
} operand;

typedef enum fn_id {
    FN_NONE,
    FN_HUMANIZE,
    FN_HUMANIZE1024,
    FN_DURATION,
    FN_PERCENT,
    FN_PRINTF,
    FN_UPPER,
    FN_LOWER,
    FN_TITLE
} fn_id;

/* Arguments of one function call, at most (more is refused when compiling). */
#define ARGS_MAX 32

typedef struct command {
    fn_id fn;
    operand *args;
    size_t argc;
} command;

typedef struct part {
    char *text; /* literal, when cmd_count == 0 */
    command *cmds;
    size_t cmd_count;
} part;

struct tw_template {
    part *parts;
    size_t count;
};

typedef struct value {
    bool is_number;
    double number;
    const char *string; /* a label, a literal, buf, or heap */
    char buf[64];
    char *heap; /* a result longer than buf, owned (at most TW_TEMPLATE_MAX_OUTPUT) */
} value;

/* ---- number formats ------------------------------------------------- */

void tw_format_go_float(double v, char *out, size_t cap)
{
    if (isnan(v)) {
        snprintf(out, cap, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(out, cap, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    char digits[40];
    int prec = 0;
    for (; prec < 17; prec++) {
        snprintf(digits, sizeof digits, "%.*e", prec, v);
        if (strtod(digits, NULL) == v)
            break;
    }
    int exp = atoi(strchr(digits, 'e') + 1);
    if (exp < -4 || exp >= 6) { /* strconv "g" with shortest digits */
        /* Go writes at least two exponent digits, like C */
        snprintf(out, cap, "%s", digits);
        return;
    }
    int decimals = prec - exp > 0 ? prec - exp : 0;
    snprintf(out, cap, "%.*f", decimals, v);
}

/* %.4g the way Go prints it (C and Go agree for this verb). */
static void g4(char *out, size_t cap, double v, const char *suffix)
{
    snprintf(out, cap, "%.4g%s", v, suffix);
}

void tw_humanize(double v, char *out, size_t cap)
{
    if (v == 0 || isnan(v) || isinf(v)) {
        g4(out, cap, v, "");
        return;
    }
    static const char *const big[] = {"k", "M", "G", "T", "P", "E", "Z", "Y"};
    static const char *const small[] = {"m", "u", "n", "p", "f", "a", "z", "y"};
    const char *prefix = "";
    if (fabs(v) >= 1) {
        for (size_t i = 0; i < 8 && fabs(v) >= 1000; i++) {
            prefix = big[i];
            v /= 1000;
        }
    } else {
        for (size_t i = 0; i < 8 && fabs(v) < 1; i++) {
            prefix = small[i];
            v *= 1000;
        }
    }
    g4(out, cap, v, prefix);
}

static void humanize1024(double v, char *out, size_t cap)
{
    if (fabs(v) <= 1 || isnan(v) || isinf(v)) {
        g4(out, cap, v, "");
        return;
    }
    static const char *const units[] = {"ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"};
    const char *prefix = "";
    for (size_t i = 0; i < 8 && fabs(v) >= 1024; i++) {
        prefix = units[i];
        v /= 1024;
    }
    g4(out, cap, v, prefix);
}

/* v as an integer, clamped to long long's range (a cast would be undefined
 * beyond it: templates render values such as 1e300). */
static long long to_integer(double v)
{
    if (isnan(v))
        return 0;
    if (v >= 0x1p63)
        return LLONG_MAX;
    if (v < -0x1p63)
        return LLONG_MIN;
    return (long long)v;
}

static void humanize_duration(double v, char *out, size_t cap)
{
    if (isnan(v) || isinf(v)) {
        g4(out, cap, v, "");
        return;
    }
    if (v == 0) {
        g4(out, cap, v, "s");
        return;
    }
    if (fabs(v) >= 1) {
        const char *sign = v < 0 ? "-" : "";
        v = fabs(v);
        long long d = to_integer(v), s = d % 60, m = (d / 60) % 60, h = (d / 3600) % 24, days = d / 86400;
        if (days)
            snprintf(out, cap, "%s%lldd %lldh %lldm %llds", sign, days, h, m, s);
        else if (h)
            snprintf(out, cap, "%s%lldh %lldm %llds", sign, h, m, s);
        else if (m)
            snprintf(out, cap, "%s%lldm %llds", sign, m, s);
        else
            snprintf(out, cap, "%s%.4gs", sign, v);
        return;
    }
    static const char *const small[] = {"m", "u", "n", "p", "f", "a", "z", "y"};
    const char *prefix = "";
    for (size_t i = 0; i < 8 && fabs(v) < 1; i++) {
        prefix = small[i];
        v *= 1000;
    }
    snprintf(out, cap, "%.4g%ss", v, prefix);
}

/* ---- printf verbs --------------------------------------------------- */

/* One conversion after its '%': flags, width, precision, then the verb.
 * Width and precision are read whatever their size (saturating past 15
 * digits) so that whoever reads them can refuse what would print megabytes. */
typedef struct printf_spec {
    char text[32];         /* "%" and the flags, width and precision as written */
    long width, precision; /* -1: none given */
    char verb;             /* '\0' at the end of the format */
    const char *end;       /* after the verb */
} printf_spec;

static long spec_number(const char **p)
{
    long n = 0;
    for (; **p >= '0' && **p <= '9'; (*p)++) {
        if (n < 100000000000000L)
            n = n * 10 + (**p - '0');
    }
    return n;
}

static void scan_spec(const char *p, printf_spec *s)
{
    const char *start = p;
    while (*p && strchr("+-# 0", *p))
        p++;
    s->width = *p >= '0' && *p <= '9' ? spec_number(&p) : -1;
    s->precision = -1;
    if (*p == '.') {
        p++;
        s->precision = spec_number(&p);
    }
    size_t n = (size_t)(p - start);
    if (n > sizeof s->text - 5) /* no room left for the verb: the spec is dropped */
        n = 0, s->width = s->precision = -1;
    s->text[0] = '%';
    memcpy(s->text + 1, start, n);
    s->text[n + 1] = '\0';
    s->verb = *p;
    s->end = *p ? p + 1 : p;
}

/* The first width or precision in fmt that is too large, or NULL. */
static const char *printf_too_wide(const char *fmt, long *amount)
{
    for (const char *p = fmt; *p; p++) {
        if (*p != '%')
            continue;
        if (p[1] == '%') {
            p++;
            continue;
        }
        printf_spec s;
        scan_spec(p + 1, &s);
        if (s.width > TW_TEMPLATE_MAX_PRINTF_WIDTH || s.precision > TW_TEMPLATE_MAX_PRINTF_WIDTH) {
            *amount = s.width > TW_TEMPLATE_MAX_PRINTF_WIDTH ? s.width : s.precision;
            return s.width > TW_TEMPLATE_MAX_PRINTF_WIDTH ? "width" : "precision";
        }
        p = s.end - 1;
        if (!s.verb)
            break;
    }
    return NULL;
}

/* ---- compiling ------------------------------------------------------ */

static void free_cmds(command *cmds, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < cmds[i].argc; k++)
            free(cmds[i].args[k].text);
        free(cmds[i].args);
    }
    free(cmds);
}

void tw_template_free(tw_template *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->count; i++) {
        free(t->parts[i].text);
        free_cmds(t->parts[i].cmds, t->parts[i].cmd_count);
    }
    free(t->parts);
    free(t);
}

typedef struct compiler {
    const char *p, *end;
    char *err;
    size_t cap;
    int status;
} compiler;

static int cfail(compiler *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int cfail(compiler *c, int status, const char *fmt, ...)
{
    if (c->status == TW_OK) {
        c->status = status;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->cap, fmt, ap);
        va_end(ap);
    }
    return status;
}

static void skip_space(compiler *c)
{
    while (c->p < c->end && isspace((unsigned char)*c->p))
        c->p++;
}

static size_t word_len(const char *p, const char *end)
{
    size_t n = 0;
    while (p + n < end && (isalnum((unsigned char)p[n]) || p[n] == '_' || p[n] == '$' || p[n] == '.'))
        n++;
    return n;
}

static bool parse_operand(compiler *c, operand *o)
{
    skip_space(c);
    if (c->p < c->end && (*c->p == '"' || *c->p == '`')) {
        char q = *c->p++;
        tw_buffer b;
        tw_buffer_init(&b);
        while (c->p < c->end && *c->p != q) {
            if (q == '"' && *c->p == '\\' && c->p + 1 < c->end) {
                c->p++;
                char e = *c->p;
                tw_buffer_putc(&b, e == 'n' ? '\n' : e == 't' ? '\t' : e);
            } else {
                tw_buffer_putc(&b, *c->p);
            }
            c->p++;
        }
        if (c->p >= c->end) {
            tw_buffer_free(&b);
            cfail(c, TW_ECONFIG, "unterminated quoted string in template");
            return false;
        }
        c->p++;
        tw_buffer_putc(&b, '\0');
        o->kind = OP_STRING;
        o->text = b.data;
        return !b.failed;
    }
    if (c->p < c->end && (isdigit((unsigned char)*c->p) || *c->p == '-')) {
        char *end;
        o->kind = OP_NUMBER;
        o->number = strtod(c->p, &end);
        if (end == c->p) {
            cfail(c, TW_ECONFIG, "bad number in template");
            return false;
        }
        c->p = end;
        return true;
    }
    size_t n = word_len(c->p, c->end);
    static const struct {
        const char *prefix;
        operand_kind kind;
        bool named;
    } forms[] = {{"$labels.", OP_LABEL, true},         {".Labels.", OP_LABEL, true},
                 {"$externalLabels.", OP_EMPTY, true}, {".ExternalLabels.", OP_EMPTY, true},
                 {"$value", OP_VALUE, false},          {".Value", OP_VALUE, false},
                 {"$externalURL", OP_URL, false},      {".ExternalURL", OP_URL, false}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        size_t l = strlen(forms[i].prefix);
        if (n < l || strncmp(c->p, forms[i].prefix, l) || (!forms[i].named && n != l) || (forms[i].named && n == l))
            continue;
        o->kind = forms[i].kind;
        o->text = forms[i].named ? strndup(c->p + l, n - l) : NULL;
        c->p += n;
        return !forms[i].named || o->text;
    }
    if (n == 0)
        cfail(c, TW_ECONFIG, "unexpected '%c' in template action", c->p < c->end ? *c->p : '?');
    else
        cfail(c, TW_EUNSUPPORTED, "template operand '%.*s' is not supported (use $labels.NAME, $value, $externalURL)",
              (int)n, c->p);
    return false;
}

static const struct {
    const char *name;
    fn_id id;
} fns[] = {{"humanize", FN_HUMANIZE},
           {"humanize1024", FN_HUMANIZE1024},
           {"humanizeDuration", FN_DURATION},
           {"humanizePercentage", FN_PERCENT},
           {"printf", FN_PRINTF},
           {"toUpper", FN_UPPER},
           {"toLower", FN_LOWER},
           {"title", FN_TITLE}};

static bool parse_command(compiler *c, command *cmd)
{
    skip_space(c);
    size_t n = word_len(c->p, c->end);
    cmd->fn = FN_NONE;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        if (n == strlen(fns[i].name) && !strncmp(c->p, fns[i].name, n)) {
            cmd->fn = fns[i].id;
            c->p += n;
        }
    }
    if (cmd->fn == FN_NONE && n && isalpha((unsigned char)*c->p)) {
        cfail(c, TW_EUNSUPPORTED, "template function or keyword '%.*s' is not supported", (int)n, c->p);
        return false;
    }
    for (;;) {
        skip_space(c);
        if (c->p >= c->end || *c->p == '|')
            break;
        if (cmd->argc == ARGS_MAX) {
            cfail(c, TW_EUNSUPPORTED, "a template function with more than %d arguments is not evaluated by trainwatch",
                  ARGS_MAX);
            return false;
        }
        operand *grown = realloc(cmd->args, (cmd->argc + 1) * sizeof *grown);
        if (!grown) {
            cfail(c, TW_ENOMEM, "out of memory");
            return false;
        }
        cmd->args = grown;
        cmd->args[cmd->argc] = (operand){0};
        if (!parse_operand(c, &cmd->args[cmd->argc++]))
            return false;
        if (cmd->fn == FN_NONE)
            break;
    }
    if (cmd->fn == FN_NONE && cmd->argc != 1) {
        cfail(c, TW_ECONFIG, "empty command in template action");
        return false;
    }
    long amount;
    const char *what;
    if (cmd->fn == FN_PRINTF && cmd->argc && cmd->args[0].kind == OP_STRING &&
        (what = printf_too_wide(cmd->args[0].text, &amount))) {
        cfail(c, TW_EUNSUPPORTED, "printf %s %ld is larger than trainwatch's bound of %d", what, amount,
              TW_TEMPLATE_MAX_PRINTF_WIDTH);
        return false;
    }
    return true;
}

static bool parse_action(compiler *c, part *pt)
{
    skip_space(c);
    if (c->end - c->p >= 2 && !strncmp(c->p, "/*", 2))
        return true; /* a comment: renders nothing */
    for (;;) {
        command *grown = realloc(pt->cmds, (pt->cmd_count + 1) * sizeof *grown);
        if (!grown) {
            cfail(c, TW_ENOMEM, "out of memory");
            return false;
        }
        pt->cmds = grown;
        pt->cmds[pt->cmd_count] = (command){0};
        if (!parse_command(c, &pt->cmds[pt->cmd_count++]))
            return false;
        skip_space(c);
        if (c->p >= c->end)
            return true;
        if (*c->p != '|') {
            cfail(c, TW_ECONFIG, "unexpected '%c' in template action", *c->p);
            return false;
        }
        c->p++;
    }
}

static bool add_part(tw_template *t, part *p)
{
    part *grown = realloc(t->parts, (t->count + 1) * sizeof *grown);
    if (!grown)
        return false;
    t->parts = grown;
    t->parts[t->count++] = *p;
    return true;
}

int tw_template_compile(const char *text, tw_template **out, char *err, size_t cap)
{
    tw_template *t = calloc(1, sizeof *t);
    if (!t)
        return TW_ENOMEM;
    compiler c = {.err = err, .cap = cap, .status = TW_OK};
    const char *p = text;
    bool trim_next = false;
    while (*p && c.status == TW_OK) {
        const char *open = strstr(p, "{{");
        const char *lit_end = open ? open : p + strlen(p);
        bool trim_before = open && open[2] == '-' && isspace((unsigned char)open[3]);
        const char *lit = p;
        if (trim_next)
            while (lit < lit_end && isspace((unsigned char)*lit))
                lit++;
        const char *lend = lit_end;
        if (trim_before)
            while (lend > lit && isspace((unsigned char)lend[-1]))
                lend--;
        if (lend > lit) {
            part lp = {.text = strndup(lit, (size_t)(lend - lit))};
            if (!lp.text || !add_part(t, &lp)) {
                free(lp.text);
                cfail(&c, TW_ENOMEM, "out of memory");
                break;
            }
        }
        if (!open)
            break;
        const char *close = strstr(open + 2, "}}");
        if (!close) {
            cfail(&c, TW_ECONFIG, "unclosed action: '{{' without '}}'");
            break;
        }
        const char *a = open + 2 + (trim_before ? 1 : 0), *b = close;
        trim_next = close - 1 > a && close[-1] == '-' && isspace((unsigned char)close[-2]);
        if (trim_next)
            b--;
        c.p = a;
        c.end = b;
        part ap = {0};
        if (parse_action(&c, &ap) && ap.cmd_count && !add_part(t, &ap))
            cfail(&c, TW_ENOMEM, "out of memory");
        else if (c.status != TW_OK || !ap.cmd_count)
            free_cmds(ap.cmds, ap.cmd_count);
        p = close + 2;
    }
    if (c.status != TW_OK) {
        tw_template_free(t);
        return c.status;
    }
    *out = t;
    return TW_OK;
}

/* ---- rendering ------------------------------------------------------ */

/* The text of a value: its string, or a number written into scratch. */
static const char *text_of(const value *v, char *scratch, size_t cap)
{
    if (!v->is_number)
        return v->string ? v->string : "";
    tw_format_go_float(v->number, scratch, cap);
    return scratch;
}

static double value_number(const value *v)
{
    return v->is_number ? v->number : strtod(v->string ? v->string : "", NULL);
}

static void load_operand(const operand *o, const tw_template_data *d, value *v)
{
    *v = (value){0};
    switch (o->kind) {
    case OP_LABEL: {
        const char *s = d->labels ? tw_lset_get(d->labels, o->text) : NULL;
        v->string = s ? s : "";
        break;
    }
    case OP_VALUE:
        v->is_number = true, v->number = d->value;
        break;
    case OP_URL:
        v->string = d->external_url ? d->external_url : "";
        break;
    case OP_STRING:
        v->string = o->text;
        break;
    case OP_NUMBER:
        v->is_number = true, v->number = o->number;
        break;
    case OP_EMPTY:
        v->string = "";
        break;
    }
}

/* printf with Go's common verbs: %s %v %d %f %e %g %x %q %% with flags, width,
 * precision. A width or precision over the bound (a format from a label, not
 * checked when compiling) prints Go's %!(BADWIDTH) or %!(BADPREC) instead. */
static void go_printf(tw_buffer *b, const char *fmt, const value *args, size_t argc)
{
    size_t next = 0;
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            tw_buffer_putc(b, *p);
            continue;
        }
        if (p[1] == '%') {
            tw_buffer_putc(b, '%');
            p++;
            continue;
        }
        printf_spec s;
        scan_spec(p + 1, &s);
        if (!s.verb)
            break;
        p = s.end - 1;
        if (next >= argc) {
            tw_buffer_printf(b, "%%!%c(MISSING)", s.verb);
            continue;
        }
        const value *a = &args[next++];
        if (s.width > TW_TEMPLATE_MAX_PRINTF_WIDTH || s.precision > TW_TEMPLATE_MAX_PRINTF_WIDTH) {
            tw_buffer_puts(b, s.width > TW_TEMPLATE_MAX_PRINTF_WIDTH ? "%!(BADWIDTH)" : "%!(BADPREC)");
            continue;
        }
        char *spec = s.text;
        size_t n = strlen(spec);
        char text[128];
        switch (s.verb) {
        case 'd':
        case 'x':
            memcpy(spec + n, s.verb == 'd' ? "lld" : "llx", 4);
            tw_buffer_printf(b, spec, to_integer(value_number(a)));
            break;
        case 'f':
        case 'e':
        case 'g':
        case 'F':
        case 'E':
        case 'G':
            spec[n++] = s.verb;
            spec[n] = '\0';
            tw_buffer_printf(b, spec, value_number(a));
            break;
        case 'q':
            tw_buffer_printf(b, "\"%s\"", text_of(a, text, sizeof text));
            break;
        default: /* s, v and anything else: the value as text, whole */
            spec[n++] = 's';
            spec[n] = '\0';
            tw_buffer_printf(b, spec, text_of(a, text, sizeof text));
            break;
        }
    }
}

/* Makes the n bytes at text the value's text: in buf when they fit, else
 * on the heap (cut at TW_TEMPLATE_MAX_OUTPUT), never cut short silently. */
static void set_text(value *out, const char *text, size_t n)
{
    if (n > TW_TEMPLATE_MAX_OUTPUT)
        n = TW_TEMPLATE_MAX_OUTPUT;
    char *dst = out->buf;
    if (n >= sizeof out->buf && !(dst = out->heap = malloc(n + 1))) {
        out->string = "";
        return;
    }
    memcpy(dst, text, n);
    dst[n] = '\0';
    out->string = dst;
}

static void apply(const command *cmd, const value *prev, const tw_template_data *d, value *out)
{
    value args[ARGS_MAX + 1]; /* the command's, and the pipeline's previous result */
    size_t argc = 0;
    for (size_t i = 0; i < cmd->argc && argc < ARGS_MAX; i++)
        load_operand(&cmd->args[i], d, &args[argc++]);
    if (prev)
        args[argc++] = *prev;
    *out = (value){0};
    if (cmd->fn == FN_NONE) {
        *out = args[0];
        out->heap = NULL; /* a previous result's heap stays its owner's: copy from it */
        if (args[0].heap)
            set_text(out, args[0].string, strlen(args[0].string));
        return;
    }
    if (argc == 0) {
        out->string = "";
        return;
    }
    double x = value_number(&args[argc - 1]);
    char scratch[64];
    switch (cmd->fn) {
    case FN_HUMANIZE:
        tw_humanize(x, out->buf, sizeof out->buf);
        break;
    case FN_HUMANIZE1024:
        humanize1024(x, out->buf, sizeof out->buf);
        break;
    case FN_DURATION:
        humanize_duration(x, out->buf, sizeof out->buf);
        break;
    case FN_PERCENT:
        snprintf(out->buf, sizeof out->buf, "%.4g%%", x * 100);
        break;
    case FN_PRINTF: {
        tw_buffer b;
        tw_buffer_init(&b);
        go_printf(&b, text_of(&args[0], scratch, sizeof scratch), args + 1, argc - 1);
        set_text(out, b.data ? b.data : "", b.data ? b.len : 0);
        tw_buffer_free(&b);
        return;
    }
    case FN_UPPER:
    case FN_LOWER:
    case FN_TITLE: {
        const char *in = text_of(&args[argc - 1], scratch, sizeof scratch);
        set_text(out, in, strlen(in));
        bool start = true;
        for (char *c = (char *)out->string; *c; c++) {
            if (cmd->fn == FN_UPPER || (cmd->fn == FN_TITLE && start))
                *c = (char)toupper((unsigned char)*c);
            else if (cmd->fn == FN_LOWER)
                *c = (char)tolower((unsigned char)*c);
            start = isspace((unsigned char)*c);
        }
        return;
    }
    default:
        break;
    }
    out->string = out->buf;
}

/* Appends s, up to TW_TEMPLATE_MAX_OUTPUT bytes in all. */
static void put_bounded(tw_buffer *b, const char *s)
{
    size_t room = b->len < TW_TEMPLATE_MAX_OUTPUT ? TW_TEMPLATE_MAX_OUTPUT - b->len : 0;
    for (size_t i = 0; s[i] && i < room; i++)
        tw_buffer_putc(b, s[i]);
}

char *tw_template_render(const tw_template *t, const tw_template_data *d)
{
    tw_buffer b;
    tw_buffer_init(&b);
    for (size_t i = 0; i < t->count && b.len < TW_TEMPLATE_MAX_OUTPUT; i++) {
        const part *pt = &t->parts[i];
        if (!pt->cmd_count) {
            put_bounded(&b, pt->text);
            continue;
        }
        value v = {0}, next_v;
        for (size_t k = 0; k < pt->cmd_count; k++) {
            apply(&pt->cmds[k], k ? &v : NULL, d, &next_v);
            free(v.heap);
            v = next_v;
            if (v.string == next_v.buf)
                v.string = v.buf;
        }
        char scratch[64];
        put_bounded(&b, text_of(&v, scratch, sizeof scratch));
        free(v.heap);
    }
    tw_buffer_putc(&b, '\0');
    if (b.failed) {
        tw_buffer_free(&b);
        return NULL;
    }
    return b.data;
}
