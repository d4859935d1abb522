/*
 * parse.c: PromQL text to a tw_pq_node tree (see promql.h).
 *
 * A hand-written lexer and a precedence-climbing parser. Types are checked
 * while the tree is built, so every error (syntax, type, or a construct
 * outside trainwatch's subset) is reported here with its column.
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "promql.h"
#include "trainwatch/error.h"

typedef enum tok_kind {
    T_EOF, T_NUM, T_STR, T_IDENT, T_LPAREN, T_RPAREN, T_LBRACE, T_RBRACE, T_LBRACKET, T_RBRACKET,
    T_COMMA, T_COLON, T_AT, T_ADD, T_SUB, T_MUL, T_DIV, T_MOD, T_POW, T_EQLC, T_NEQ, T_GTR, T_LSS,
    T_GTE, T_LTE, T_ASSIGN, T_EQL_REGEX, T_NEQ_REGEX, T_ERROR,
} tok_kind;

typedef struct token {
    tok_kind kind;
    int pos;
    const char *start;
    size_t len;
    double number;
} token;

typedef struct parser {
    const char *text;
    const char *p;
    token tok;
    int status;
    char *err;
    size_t cap;
    int depth; /* parse_expr calls open now */
} parser;

static int fail(parser *ps, int pos, int status, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int fail(parser *ps, int pos, int status, const char *fmt, ...)
{
    if (ps->status != TW_OK)
        return ps->status;
    ps->status = status;
    int n = snprintf(ps->err, ps->cap, "col %d: ", pos + 1);
    if (n < 0 || (size_t)n >= ps->cap)
        return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err + n, ps->cap - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

/* ---- lexer ---------------------------------------------------------- */

static bool ident_start(char c) { return isalpha((unsigned char)c) || c == '_' || c == ':'; }
static bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == ':'; }

static void lex_number(parser *ps, token *t)
{
    char *end;
    t->number = strtod(ps->p, &end);
    if (end == ps->p) {
        t->kind = T_ERROR;
        return;
    }
    /* "5m" is a duration, not a number; a letter glued to a number is an error */
    if (ident_char(*end)) {
        t->kind = T_ERROR;
        fail(ps, t->pos, TW_ECONFIG, "unexpected character after number: durations are only allowed in [...] and offset");
        return;
    }
    t->kind = T_NUM;
    ps->p = end;
}

static void next(parser *ps)
{
    while (isspace((unsigned char)*ps->p))
        ps->p++;
    if (*ps->p == '#') { /* a comment runs to the end of the line */
        while (*ps->p && *ps->p != '\n')
            ps->p++;
        next(ps);
        return;
    }
    token *t = &ps->tok;
    t->pos = (int)(ps->p - ps->text);
    t->start = ps->p;
    char c = *ps->p;
    static const struct {
        const char *text;
        tok_kind kind;
    } ops[] = {{"==", T_EQLC}, {"!=", T_NEQ}, {">=", T_GTE}, {"<=", T_LTE}, {"=~", T_EQL_REGEX}, {"!~", T_NEQ_REGEX},
               {"(", T_LPAREN}, {")", T_RPAREN}, {"{", T_LBRACE}, {"}", T_RBRACE}, {"[", T_LBRACKET},
               {"]", T_RBRACKET}, {",", T_COMMA}, {":", T_COLON}, {"@", T_AT}, {"+", T_ADD}, {"-", T_SUB},
               {"*", T_MUL}, {"/", T_DIV}, {"%", T_MOD}, {"^", T_POW}, {">", T_GTR}, {"<", T_LSS}, {"=", T_ASSIGN}};
    if (c == '\0') {
        t->kind = T_EOF;
        t->len = 0;
        return;
    }
    if (isdigit((unsigned char)c) || (c == '.' && isdigit((unsigned char)ps->p[1]))) {
        lex_number(ps, t);
    } else if (ident_start(c) && !(c == ':' && !ident_start(ps->p[1]))) {
        while (ident_char(*ps->p))
            ps->p++;
        t->kind = T_IDENT;
        size_t n = (size_t)(ps->p - t->start);
        if ((n == 3 && !strncasecmp(t->start, "inf", 3)) || (n == 3 && !strncasecmp(t->start, "nan", 3))) {
            t->kind = T_NUM;
            t->number = tolower((unsigned char)c) == 'i' ? INFINITY : NAN;
        }
    } else if (c == '"' || c == '\'' || c == '`') {
        char q = *ps->p++;
        while (*ps->p && *ps->p != q) {
            if (*ps->p == '\\' && q != '`' && ps->p[1])
                ps->p++;
            ps->p++;
        }
        if (*ps->p != q) {
            t->kind = T_ERROR;
            fail(ps, t->pos, TW_ECONFIG, "unterminated string");
            return;
        }
        ps->p++;
        t->kind = T_STR;
    } else {
        t->kind = T_ERROR;
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
            size_t n = strlen(ops[i].text);
            if (!strncmp(ps->p, ops[i].text, n)) {
                t->kind = ops[i].kind;
                ps->p += n;
                break;
            }
        }
        if (t->kind == T_ERROR)
            fail(ps, t->pos, TW_ECONFIG, "unexpected character '%c'", isprint((unsigned char)c) ? c : '?');
    }
    t->len = (size_t)(ps->p - t->start);
}

static bool is_word(const token *t, const char *w)
{
    return t->kind == T_IDENT && strlen(w) == t->len && !strncasecmp(t->start, w, t->len);
}

static char *token_text(const token *t)
{
    return strndup(t->start, t->len);
}

/* Go-style unquoting of the current T_STR token. */
static char *unquote(parser *ps, const token *t)
{
    char q = t->start[0];
    const char *s = t->start + 1, *end = t->start + t->len - 1;
    char *out = malloc(t->len * 4 + 1), *o = out;
    if (!out)
        return NULL;
    while (s < end) {
        if (q == '`' || *s != '\\') {
            *o++ = *s++;
            continue;
        }
        s++;
        char e = *s++;
        static const char from[] = "abfnrtv\\'\"", to[] = "\a\b\f\n\r\t\v\\'\"";
        const char *hit = strchr(from, e);
        if (hit && e) {
            *o++ = to[hit - from];
        } else if (e == 'x' || e == 'u' || e == 'U' || (e >= '0' && e <= '7')) {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 2, base = e >= '0' && e <= '7' ? 8 : 16;
            unsigned long cp = base == 8 ? (unsigned long)(e - '0') : 0;
            for (int i = 0; i < digits; i++, s++) {
                if (s >= end || !(base == 16 ? isxdigit((unsigned char)*s) : (*s >= '0' && *s <= '7'))) {
                    free(out);
                    fail(ps, t->pos, TW_ECONFIG, "invalid escape in string");
                    return NULL;
                }
                cp = cp * (unsigned long)base + (unsigned long)(isdigit((unsigned char)*s) ? *s - '0' : (tolower((unsigned char)*s) - 'a' + 10));
            }
            if (e == 'x' || base == 8) {
                *o++ = (char)cp;
            } else if (cp < 0x80) {
                *o++ = (char)cp;
            } else if (cp < 0x800) {
                *o++ = (char)(0xc0 | (cp >> 6));
                *o++ = (char)(0x80 | (cp & 0x3f));
            } else if (cp < 0x10000) {
                *o++ = (char)(0xe0 | (cp >> 12));
                *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
                *o++ = (char)(0x80 | (cp & 0x3f));
            } else {
                *o++ = (char)(0xf0 | (cp >> 18));
                *o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
                *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
                *o++ = (char)(0x80 | (cp & 0x3f));
            }
        } else {
            free(out);
            fail(ps, t->pos, TW_ECONFIG, "invalid escape '\\%c' in string", isprint((unsigned char)e) ? e : '?');
            return NULL;
        }
    }
    *o = '\0';
    return out;
}

size_t tw_pq_scan_duration(const char *s, int64_t *ms)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"y", 31536000000LL}, {"w", 604800000}, {"d", 86400000}, {"h", 3600000},
                 {"m", 60000},         {"s", 1000},      {"ms", 1}};
    const char *p = s;
    int64_t total = 0;
    size_t last_unit = 0;
    while (isdigit((unsigned char)*p)) {
        char *end;
        long long n = strtoll(p, &end, 10);
        size_t best = SIZE_MAX, best_len = 0;
        for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
            size_t len = strlen(units[u].unit);
            if (!strncmp(end, units[u].unit, len) && len > best_len)
                best = u, best_len = len;
        }
        /* units must decrease (1h30m, not 30m1h) and appear once */
        if (best == SIZE_MAX || best + 1 <= last_unit || n > INT64_MAX / units[best].ms / 4)
            return 0;
        last_unit = best + 1;
        total += n * units[best].ms;
        p = end + best_len;
    }
    *ms = total;
    return (size_t)(p - s);
}

/* A duration at ps->p (after '[' or offset), then the next token. */
static int64_t lex_duration(parser *ps)
{
    while (isspace((unsigned char)*ps->p))
        ps->p++;
    int pos = (int)(ps->p - ps->text);
    if (!isdigit((unsigned char)*ps->p)) {
        fail(ps, pos, TW_ECONFIG, "expected a duration such as 5m");
        return -1;
    }
    int64_t total;
    size_t n = tw_pq_scan_duration(ps->p, &total);
    if (n == 0) {
        fail(ps, pos, TW_ECONFIG, "bad duration: a number needs a unit (ms, s, m, h, d, w, y), largest first");
        return -1;
    }
    if (total == 0) {
        fail(ps, pos, TW_ECONFIG, "duration must be greater than 0");
        return -1;
    }
    ps->p += n;
    next(ps);
    return total;
}

/* ---- tree ----------------------------------------------------------- */

static tw_pq_node *node(parser *ps, tw_pq_kind kind, tw_pq_type type, int pos)
{
    tw_pq_node *n = calloc(1, sizeof *n);
    if (!n) {
        fail(ps, pos, TW_ENOMEM, "out of memory");
        return NULL;
    }
    n->kind = kind;
    n->type = type;
    n->pos = pos;
    n->depth = 1;
    return n;
}

/* Makes n one level above child and refuses a tree deeper than the limit:
 * evaluating and freeing recurse over the tree, and a chain such as
 * a + a + ... + a nests without any parenthesis. */
static bool nest(parser *ps, tw_pq_node *n, const tw_pq_node *child)
{
    if (child->depth + 1 > n->depth)
        n->depth = child->depth + 1;
    if (n->depth <= TW_PQ_MAX_DEPTH)
        return true;
    fail(ps, n->pos, TW_EUNSUPPORTED, "expression nesting deeper than %d levels", TW_PQ_MAX_DEPTH);
    return false;
}

void tw_pq_free(tw_pq_node *n)
{
    if (!n)
        return;
    switch (n->kind) {
    case TW_PQ_NUMBER:
        break;
    case TW_PQ_STRING_LIT:
        free(n->u.string);
        break;
    case TW_PQ_SELECTOR:
        free(n->u.sel.metric);
        for (size_t i = 0; i < n->u.sel.matcher_count; i++) {
            tw_matcher *m = &n->u.sel.matchers[i];
            tw_regex_free(m->re);
            free(m->name);
            free(m->value);
        }
        free(n->u.sel.matchers);
        break;
    case TW_PQ_CALL:
        for (size_t i = 0; i < n->u.call.arg_count; i++)
            tw_pq_free(n->u.call.args[i]);
        free(n->u.call.args);
        break;
    case TW_PQ_AGGREGATE:
        tw_name_list_free(&n->u.agg.grouping);
        tw_pq_free(n->u.agg.expr);
        break;
    case TW_PQ_BINARY:
        tw_name_list_free(&n->u.bin.matching);
        tw_pq_free(n->u.bin.lhs);
        tw_pq_free(n->u.bin.rhs);
        break;
    case TW_PQ_NEGATE:
        tw_pq_free(n->u.operand);
        break;
    }
    free(n);
}

static const char *type_name(tw_pq_type t)
{
    static const char *const names[] = {"scalar", "instant vector", "range vector", "string"};
    return names[t];
}

/* ---- grammar -------------------------------------------------------- */

static tw_pq_node *parse_expr(parser *ps, int min_prec);
static tw_pq_node *parse_expr_at(parser *ps, int min_prec);

static bool expect(parser *ps, tok_kind k, const char *what)
{
    if (ps->tok.kind != k) {
        fail(ps, ps->tok.pos, TW_ECONFIG, "expected %s", what);
        return false;
    }
    next(ps);
    return true;
}

/* (a, b, c) after by/without/on/ignoring */
static bool parse_label_list(parser *ps, tw_name_list *out)
{
    if (!expect(ps, T_LPAREN, "'(' before the label list"))
        return false;
    while (ps->tok.kind == T_IDENT) {
        char **grown = realloc(out->names, (out->count + 1) * sizeof *grown);
        if (!grown || !(grown[out->count] = token_text(&ps->tok))) {
            if (grown)
                out->names = grown;
            fail(ps, ps->tok.pos, TW_ENOMEM, "out of memory");
            return false;
        }
        out->names = grown;
        out->count++;
        next(ps);
        if (ps->tok.kind != T_COMMA)
            break;
        next(ps);
    }
    return expect(ps, T_RPAREN, "a label name or ')'");
}

static int compile_matcher(parser *ps, tw_matcher *m, int pos)
{
    if (m->op != TW_MATCH_RE && m->op != TW_MATCH_NRE)
        return TW_OK;
    char why[256];
    int rc = tw_regex_compile(m->value, &m->re, why, sizeof why);
    if (rc == TW_ENOMEM)
        return fail(ps, pos, TW_ENOMEM, "out of memory");
    if (rc != TW_OK)
        return fail(ps, pos, TW_ECONFIG, "invalid regular expression \"%s\": %s", m->value, why);
    return TW_OK;
}

static bool parse_matchers(parser *ps, tw_pq_node *sel)
{
    next(ps); /* { */
    while (ps->tok.kind == T_IDENT || ps->tok.kind == T_STR) {
        int pos = ps->tok.pos;
        if (ps->tok.kind == T_STR)
            return fail(ps, pos, TW_EUNSUPPORTED, "quoted label names are not supported"), false;
        char *name = token_text(&ps->tok);
        next(ps);
        tw_match_op op;
        switch (ps->tok.kind) {
        case T_ASSIGN: op = TW_MATCH_EQ; break;
        case T_NEQ: op = TW_MATCH_NE; break;
        case T_EQL_REGEX: op = TW_MATCH_RE; break;
        case T_NEQ_REGEX: op = TW_MATCH_NRE; break;
        default:
            free(name);
            fail(ps, ps->tok.pos, TW_ECONFIG, "expected a label matching operator (=, !=, =~, !~)");
            return false;
        }
        next(ps);
        if (ps->tok.kind != T_STR) {
            free(name);
            fail(ps, ps->tok.pos, TW_ECONFIG, "expected a quoted label value");
            return false;
        }
        char *value = unquote(ps, &ps->tok);
        tw_matcher *grown = value ? realloc(sel->u.sel.matchers, (sel->u.sel.matcher_count + 1) * sizeof *grown) : NULL;
        if (!grown) {
            free(name);
            free(value);
            fail(ps, pos, TW_ENOMEM, "out of memory");
            return false;
        }
        sel->u.sel.matchers = grown;
        tw_matcher *m = &grown[sel->u.sel.matcher_count++];
        *m = (tw_matcher){.name = name, .value = value, .op = op};
        if (compile_matcher(ps, m, pos) != TW_OK)
            return false;
        next(ps);
        if (ps->tok.kind != T_COMMA)
            break;
        next(ps);
    }
    return expect(ps, T_RBRACE, "',' or '}' in the label matchers");
}

static bool matches_empty(const tw_matcher *m)
{
    switch (m->op) {
    case TW_MATCH_EQ: return m->value[0] == '\0';
    case TW_MATCH_NE: return m->value[0] != '\0';
    default: {
        bool hit = tw_regex_match(m->re, "");
        return m->op == TW_MATCH_RE ? hit : !hit;
    }
    }
}

static tw_pq_node *parse_selector(parser *ps, char *metric, int pos)
{
    tw_pq_node *n = node(ps, TW_PQ_SELECTOR, TW_PQ_VECTOR, pos);
    if (!n) {
        free(metric);
        return NULL;
    }
    n->u.sel.metric = metric;
    if (ps->tok.kind == T_LBRACE && !parse_matchers(ps, n)) {
        tw_pq_free(n);
        return NULL;
    }
    bool non_empty = metric != NULL;
    for (size_t i = 0; i < n->u.sel.matcher_count; i++) {
        tw_matcher *m = &n->u.sel.matchers[i];
        if (!strcmp(m->name, TW_NAME_LABEL)) {
            if (metric || m->op != TW_MATCH_EQ) {
                fail(ps, pos, TW_EUNSUPPORTED, "selecting metric names with __name__ matchers other than one '=' is not supported");
                tw_pq_free(n);
                return NULL;
            }
            n->u.sel.metric = strdup(m->value);
        }
        non_empty |= !matches_empty(m);
    }
    if (!non_empty) {
        fail(ps, pos, TW_ECONFIG, "vector selector must contain at least one non-empty matcher");
        tw_pq_free(n);
        return NULL;
    }
    if (!n->u.sel.metric) {
        fail(ps, pos, TW_EUNSUPPORTED, "selectors without a metric name are not supported (name the metric)");
        tw_pq_free(n);
        return NULL;
    }
    return n;
}

/* Aggregations the subset has, and those it refuses by name. */
static const struct {
    const char *name;
    tw_pq_agg op;
    bool supported;
} aggregations[] = {
    {"sum", TW_AGG_SUM, true},      {"avg", TW_AGG_AVG, true},         {"min", TW_AGG_MIN, true},
    {"max", TW_AGG_MAX, true},      {"count", TW_AGG_COUNT, true},     {"stddev", 0, false},
    {"stdvar", 0, false},           {"topk", 0, false},                {"bottomk", 0, false},
    {"quantile", 0, false},         {"count_values", 0, false},        {"group", 0, false},
};

static tw_pq_node *parse_aggregation(parser *ps, size_t which, int pos)
{
    if (!aggregations[which].supported) {
        fail(ps, pos, TW_EUNSUPPORTED, "aggregation '%s' is not supported by trainwatch's evaluator", aggregations[which].name);
        return NULL;
    }
    tw_pq_node *n = node(ps, TW_PQ_AGGREGATE, TW_PQ_VECTOR, pos);
    if (!n)
        return NULL;
    n->u.agg.op = aggregations[which].op;
    bool grouped = false;
    if (is_word(&ps->tok, "by") || is_word(&ps->tok, "without")) {
        n->u.agg.without = is_word(&ps->tok, "without");
        next(ps);
        grouped = true;
        if (!parse_label_list(ps, &n->u.agg.grouping))
            goto fail;
    }
    if (!expect(ps, T_LPAREN, "'(' after the aggregation"))
        goto fail;
    if (!(n->u.agg.expr = parse_expr(ps, 0)) || !nest(ps, n, n->u.agg.expr))
        goto fail;
    if (ps->tok.kind == T_COMMA) {
        fail(ps, ps->tok.pos, TW_ECONFIG, "aggregation '%s' takes one argument", aggregations[which].name);
        goto fail;
    }
    if (!expect(ps, T_RPAREN, "')' after the aggregated expression"))
        goto fail;
    if (!grouped && (is_word(&ps->tok, "by") || is_word(&ps->tok, "without"))) {
        n->u.agg.without = is_word(&ps->tok, "without");
        next(ps);
        if (!parse_label_list(ps, &n->u.agg.grouping))
            goto fail;
    }
    if (n->u.agg.expr->type != TW_PQ_VECTOR) {
        fail(ps, n->u.agg.expr->pos, TW_ECONFIG, "expected an instant vector in the aggregation, got a %s",
             type_name(n->u.agg.expr->type));
        goto fail;
    }
    return n;
fail:
    tw_pq_free(n);
    return NULL;
}

static tw_pq_node *parse_call(parser *ps, const char *name, int pos)
{
    const tw_pq_function *fn = tw_pq_function_find(name);
    if (!fn) {
        if (tw_pq_function_unsupported(name))
            fail(ps, pos, TW_EUNSUPPORTED, "function '%s' is not supported by trainwatch's evaluator", name);
        else
            fail(ps, pos, TW_ECONFIG, "unknown function '%s'", name);
        return NULL;
    }
    tw_pq_node *n = node(ps, TW_PQ_CALL, fn->ret, pos);
    if (!n)
        return NULL;
    n->u.call.fn = fn;
    next(ps); /* ( */
    while (ps->tok.kind != T_RPAREN) {
        tw_pq_node *arg = parse_expr(ps, 0);
        tw_pq_node **grown = arg ? realloc(n->u.call.args, (n->u.call.arg_count + 1) * sizeof *grown) : NULL;
        if (!grown) {
            tw_pq_free(arg);
            fail(ps, pos, TW_ENOMEM, "out of memory");
            goto fail;
        }
        n->u.call.args = grown;
        grown[n->u.call.arg_count++] = arg;
        if (!nest(ps, n, arg))
            goto fail;
        if (ps->tok.kind != T_COMMA)
            break;
        next(ps);
    }
    if (!expect(ps, T_RPAREN, "',' or ')' in the function call"))
        goto fail;
    if (n->u.call.arg_count < fn->min_args || n->u.call.arg_count > fn->max_args) {
        fail(ps, pos, TW_ECONFIG, "function '%s' takes %zu argument%s, got %zu", name, fn->max_args,
             fn->max_args == 1 ? "" : "s", n->u.call.arg_count);
        goto fail;
    }
    for (size_t i = 0; i < n->u.call.arg_count; i++) {
        if (n->u.call.args[i]->type != fn->args[i]) {
            fail(ps, n->u.call.args[i]->pos, TW_ECONFIG, "function '%s' expects a %s as argument %zu, got a %s", name,
                 type_name(fn->args[i]), i + 1, type_name(n->u.call.args[i]->type));
            goto fail;
        }
    }
    return n;
fail:
    tw_pq_free(n);
    return NULL;
}

static tw_pq_node *parse_primary(parser *ps)
{
    token t = ps->tok;
    switch (t.kind) {
    case T_NUM: {
        next(ps);
        tw_pq_node *n = node(ps, TW_PQ_NUMBER, TW_PQ_SCALAR, t.pos);
        if (n)
            n->u.number = t.number;
        return n;
    }
    case T_STR: {
        char *s = unquote(ps, &t);
        if (!s)
            return NULL;
        next(ps);
        tw_pq_node *n = node(ps, TW_PQ_STRING_LIT, TW_PQ_STRING, t.pos);
        if (n)
            n->u.string = s;
        else
            free(s);
        return n;
    }
    case T_LPAREN: {
        next(ps);
        tw_pq_node *n = parse_expr(ps, 0);
        if (n && !expect(ps, T_RPAREN, "')'")) {
            tw_pq_free(n);
            return NULL;
        }
        return n;
    }
    case T_LBRACE:
        return parse_selector(ps, NULL, t.pos);
    case T_IDENT: {
        char *name = token_text(&t);
        if (!name) {
            fail(ps, t.pos, TW_ENOMEM, "out of memory");
            return NULL;
        }
        next(ps);
        for (size_t i = 0; i < sizeof aggregations / sizeof aggregations[0]; i++) {
            if (!strcasecmp(name, aggregations[i].name) &&
                (ps->tok.kind == T_LPAREN || is_word(&ps->tok, "by") || is_word(&ps->tok, "without"))) {
                free(name);
                return parse_aggregation(ps, i, t.pos);
            }
        }
        if (ps->tok.kind == T_LPAREN) {
            tw_pq_node *n = parse_call(ps, name, t.pos);
            free(name);
            return n;
        }
        static const char *const keywords[] = {"by", "without", "on", "ignoring", "group_left", "group_right",
                                               "bool", "offset", "and", "or", "unless", "atan2"};
        for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++) {
            if (!strcasecmp(name, keywords[i])) {
                fail(ps, t.pos, TW_ECONFIG, "unexpected keyword '%s'", keywords[i]);
                free(name);
                return NULL;
            }
        }
        return parse_selector(ps, name, t.pos);
    }
    case T_EOF:
        fail(ps, t.pos, TW_ECONFIG, "unexpected end of expression");
        return NULL;
    default:
        fail(ps, t.pos, TW_ECONFIG, "unexpected '%.*s'", (int)t.len, t.start);
        return NULL;
    }
}

/* primary, then [range] and offset */
static tw_pq_node *parse_postfix(parser *ps)
{
    tw_pq_node *n = parse_primary(ps);
    if (!n)
        return NULL;
    if (ps->tok.kind == T_LBRACKET) {
        int pos = ps->tok.pos;
        if (n->kind != TW_PQ_SELECTOR || n->type != TW_PQ_VECTOR || n->u.sel.offset_ms) {
            bool sub = n->kind != TW_PQ_SELECTOR;
            tw_pq_free(n);
            fail(ps, pos, sub ? TW_EUNSUPPORTED : TW_ECONFIG,
                 sub ? "subqueries are not supported (a range applies to a selector only)"
                     : "a range must come before offset");
            return NULL;
        }
        int64_t range = lex_duration(ps);
        if (range < 0) {
            tw_pq_free(n);
            return NULL;
        }
        if (ps->tok.kind == T_COLON) {
            tw_pq_free(n);
            fail(ps, ps->tok.pos, TW_EUNSUPPORTED, "subqueries are not supported");
            return NULL;
        }
        if (!expect(ps, T_RBRACKET, "']' after the range")) {
            tw_pq_free(n);
            return NULL;
        }
        n->u.sel.range_ms = range;
        n->type = TW_PQ_MATRIX;
    }
    if (is_word(&ps->tok, "offset")) {
        int pos = ps->tok.pos;
        if (n->kind != TW_PQ_SELECTOR) {
            tw_pq_free(n);
            fail(ps, pos, TW_ECONFIG, "offset applies to a selector only");
            return NULL;
        }
        bool negative = false;
        const char *q = ps->p;
        while (isspace((unsigned char)*q))
            q++;
        if (*q == '-') {
            negative = true;
            ps->p = q + 1;
        }
        int64_t off = lex_duration(ps);
        if (off < 0) {
            tw_pq_free(n);
            return NULL;
        }
        if (negative) {
            tw_pq_free(n);
            fail(ps, pos, TW_EUNSUPPORTED, "negative offsets are not supported");
            return NULL;
        }
        n->u.sel.offset_ms = off;
    }
    if (ps->tok.kind == T_AT) {
        tw_pq_free(n);
        fail(ps, ps->tok.pos, TW_EUNSUPPORTED, "the @ modifier is not supported");
        return NULL;
    }
    if (ps->tok.kind == T_LBRACKET) {
        tw_pq_free(n);
        fail(ps, ps->tok.pos, TW_EUNSUPPORTED, "subqueries are not supported");
        return NULL;
    }
    return n;
}

typedef struct binop {
    tw_pq_op op;
    int prec;
    bool right;
} binop;

static bool binary_operator(const token *t, binop *out)
{
    static const struct {
        tok_kind kind;
        const char *word;
        binop op;
    } table[] = {
        {T_IDENT, "or", {TW_OP_OR, 1, false}},      {T_IDENT, "and", {TW_OP_AND, 2, false}},
        {T_IDENT, "unless", {TW_OP_UNLESS, 2, false}}, {T_EQLC, NULL, {TW_OP_EQ, 3, false}},
        {T_NEQ, NULL, {TW_OP_NE, 3, false}},        {T_GTR, NULL, {TW_OP_GT, 3, false}},
        {T_LSS, NULL, {TW_OP_LT, 3, false}},        {T_GTE, NULL, {TW_OP_GE, 3, false}},
        {T_LTE, NULL, {TW_OP_LE, 3, false}},        {T_ADD, NULL, {TW_OP_ADD, 4, false}},
        {T_SUB, NULL, {TW_OP_SUB, 4, false}},       {T_MUL, NULL, {TW_OP_MUL, 5, false}},
        {T_DIV, NULL, {TW_OP_DIV, 5, false}},       {T_MOD, NULL, {TW_OP_MOD, 5, false}},
        {T_POW, NULL, {TW_OP_POW, 6, true}},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (t->kind == table[i].kind && (!table[i].word || is_word(t, table[i].word))) {
            *out = table[i].op;
            return true;
        }
    }
    return false;
}

static bool is_comparison(tw_pq_op op) { return op >= TW_OP_EQ && op <= TW_OP_LE; }
static bool is_set_op(tw_pq_op op) { return op >= TW_OP_AND; }

static tw_pq_node *parse_unary(parser *ps)
{
    if (ps->tok.kind == T_SUB || ps->tok.kind == T_ADD) {
        int pos = ps->tok.pos;
        bool minus = ps->tok.kind == T_SUB;
        next(ps);
        tw_pq_node *operand = parse_expr(ps, 6); /* binds like *, below ^ */
        if (!operand)
            return NULL;
        if (operand->type != TW_PQ_SCALAR && operand->type != TW_PQ_VECTOR) {
            fail(ps, pos, TW_ECONFIG, "unary expression only allowed on scalars and instant vectors");
            tw_pq_free(operand);
            return NULL;
        }
        if (!minus)
            return operand;
        if (operand->kind == TW_PQ_NUMBER) {
            operand->u.number = -operand->u.number;
            operand->pos = pos;
            return operand;
        }
        tw_pq_node *n = node(ps, TW_PQ_NEGATE, operand->type, pos);
        if (!n) {
            tw_pq_free(operand);
            return NULL;
        }
        n->u.operand = operand;
        if (!nest(ps, n, operand)) {
            tw_pq_free(n);
            return NULL;
        }
        return n;
    }
    return parse_postfix(ps);
}

static bool check_binary(parser *ps, tw_pq_node *n, int pos)
{
    tw_pq_node *l = n->u.bin.lhs, *r = n->u.bin.rhs;
    tw_pq_op op = n->u.bin.op;
    for (int side = 0; side < 2; side++) {
        tw_pq_node *x = side ? r : l;
        if (x->type != TW_PQ_SCALAR && x->type != TW_PQ_VECTOR) {
            fail(ps, x->pos, TW_ECONFIG, "binary expression must contain only scalar and instant vector types, got a %s",
                 type_name(x->type));
            return false;
        }
    }
    if (is_set_op(op) && (l->type != TW_PQ_VECTOR || r->type != TW_PQ_VECTOR)) {
        fail(ps, pos, TW_ECONFIG, "set operator not allowed in binary scalar expression");
        return false;
    }
    if (n->u.bin.return_bool && !is_comparison(op)) {
        fail(ps, pos, TW_ECONFIG, "bool modifier can only be used on comparison operators");
        return false;
    }
    if (is_comparison(op) && l->type == TW_PQ_SCALAR && r->type == TW_PQ_SCALAR && !n->u.bin.return_bool) {
        fail(ps, pos, TW_ECONFIG, "comparisons between scalars must use BOOL modifier");
        return false;
    }
    if ((n->u.bin.on || n->u.bin.matching.count) && (l->type != TW_PQ_VECTOR || r->type != TW_PQ_VECTOR)) {
        fail(ps, pos, TW_ECONFIG, "vector matching only allowed between instant vectors");
        return false;
    }
    n->type = l->type == TW_PQ_SCALAR && r->type == TW_PQ_SCALAR ? TW_PQ_SCALAR : TW_PQ_VECTOR;
    return true;
}

/* Every nesting (parentheses, unary operators, arguments, the right side of
 * an operator) passes here: the one place that bounds the recursion. */
static tw_pq_node *parse_expr(parser *ps, int min_prec)
{
    if (ps->depth >= TW_PQ_MAX_DEPTH) {
        fail(ps, ps->tok.pos, TW_EUNSUPPORTED, "expression nesting deeper than %d levels", TW_PQ_MAX_DEPTH);
        return NULL;
    }
    ps->depth++;
    tw_pq_node *lhs = parse_expr_at(ps, min_prec);
    ps->depth--;
    return lhs;
}

static tw_pq_node *parse_expr_at(parser *ps, int min_prec)
{
    tw_pq_node *lhs = parse_unary(ps);
    binop b;
    while (lhs && ps->status == TW_OK && binary_operator(&ps->tok, &b) && b.prec >= min_prec) {
        int pos = ps->tok.pos;
        next(ps);
        tw_pq_node *n = node(ps, TW_PQ_BINARY, TW_PQ_VECTOR, pos);
        if (!n)
            break;
        n->u.bin.op = b.op;
        n->u.bin.lhs = lhs;
        lhs = n;
        if (!nest(ps, n, n->u.bin.lhs))
            break;
        if (is_word(&ps->tok, "bool")) {
            n->u.bin.return_bool = true;
            next(ps);
        }
        if (is_word(&ps->tok, "on") || is_word(&ps->tok, "ignoring")) {
            n->u.bin.on = is_word(&ps->tok, "on");
            next(ps);
            if (!parse_label_list(ps, &n->u.bin.matching))
                break;
        }
        if (is_word(&ps->tok, "group_left") || is_word(&ps->tok, "group_right")) {
            fail(ps, ps->tok.pos, TW_EUNSUPPORTED, "many-to-one matching (%.*s) is not supported", (int)ps->tok.len,
                 ps->tok.start);
            break;
        }
        if (!(n->u.bin.rhs = parse_expr(ps, b.right ? b.prec : b.prec + 1)) || !nest(ps, n, n->u.bin.rhs))
            break;
        if (!check_binary(ps, n, pos))
            break;
    }
    if (ps->status != TW_OK) {
        tw_pq_free(lhs);
        return NULL;
    }
    return lhs;
}

int tw_pq_parse(const char *text, tw_pq_node **out, char *err, size_t cap)
{
    parser ps = {.text = text, .p = text, .status = TW_OK, .err = err, .cap = cap};
    if (cap)
        err[0] = '\0';
    next(&ps);
    tw_pq_node *n = ps.status == TW_OK ? parse_expr(&ps, 0) : NULL;
    if (n && ps.tok.kind != T_EOF) {
        if (ps.tok.kind == T_IDENT && (is_word(&ps.tok, "atan2")))
            fail(&ps, ps.tok.pos, TW_EUNSUPPORTED, "operator 'atan2' is not supported");
        else
            fail(&ps, ps.tok.pos, TW_ECONFIG, "unexpected '%.*s' after the expression", (int)ps.tok.len, ps.tok.start);
    }
    if (ps.status != TW_OK || !n) {
        tw_pq_free(n);
        return ps.status != TW_OK ? ps.status : TW_ECONFIG;
    }
    *out = n;
    return TW_OK;
}

void tw_pq_walk_selectors(const tw_pq_node *n, void (*fn)(const tw_pq_node *sel, void *arg), void *arg)
{
    if (!n)
        return;
    switch (n->kind) {
    case TW_PQ_SELECTOR:
        fn(n, arg);
        break;
    case TW_PQ_CALL:
        for (size_t i = 0; i < n->u.call.arg_count; i++)
            tw_pq_walk_selectors(n->u.call.args[i], fn, arg);
        break;
    case TW_PQ_AGGREGATE:
        tw_pq_walk_selectors(n->u.agg.expr, fn, arg);
        break;
    case TW_PQ_BINARY:
        tw_pq_walk_selectors(n->u.bin.lhs, fn, arg);
        tw_pq_walk_selectors(n->u.bin.rhs, fn, arg);
        break;
    case TW_PQ_NEGATE:
        tw_pq_walk_selectors(n->u.operand, fn, arg);
        break;
    default:
        break;
    }
}
