/*
 * regex.c: RE2 patterns on PCRE2 (see regex.h).
 *
 * PCRE2 reads a superset of RE2's syntax, and the two agree on the meaning
 * of what they share, with a handful of exceptions; so a pattern is walked
 * once, refusing what RE2 refuses and rewriting those exceptions:
 *   \s is [\t\n\f\r ] in RE2 (PCRE2 adds \v), \v is the vertical tab (a
 *   class in PCRE2), \123 is octal (a backreference in PCRE2), a { that does
 *   not start a valid repeat is a literal, and (?P<name>...) is only a group.
 * The rest is RE2 with Go's Perl flags as Prometheus compiles it: ^ and $ at
 * the ends of the text only unless (?m) (then (?m)^ also after a final
 * newline: PCRE2_ALT_CIRCUMFLEX), . not matching \n,
 * \d \w \b ASCII (no PCRE2_UCP), UTF-8 (PCRE2_UTF), anchored as ^(?:RE)$.
 * The walk also keeps the wrapper whole: a stray ) or an open \Q or [ could
 * otherwise escape the anchoring.
 */
#include "regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <pcre2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/buffer.h"
#include "trainwatch/error.h"

#define REPEAT_MAX 1000 /* RE2's largest {n,m} */

struct tw_regex {
    pcre2_code *code;
};

typedef struct translator {
    const char *p;
    tw_buffer out;
    int depth;      /* groups open */
    bool multiline; /* (?m) in force: $ is the end of a line, not of the text */
    bool *outer;    /* multiline of each enclosing group, depth entries */
    char *err;
    size_t cap;
    bool failed;
} translator;

static bool refuse(translator *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool refuse(translator *t, const char *fmt, ...)
{
    if (!t->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(t->err, t->cap, fmt, ap);
        va_end(ap);
        t->failed = true;
    }
    return false;
}

static void put(translator *t, const char *s)
{
    tw_buffer_puts(&t->out, s);
}

/* A character as a PCRE2 literal. */
static void put_literal(translator *t, unsigned long c)
{
    tw_buffer_printf(&t->out, "\\x{%lx}", c);
}

/* ---- escapes -------------------------------------------------------- */

/* Escapes RE2 does not have, by what they are in PCRE2 or Perl. */
static const struct {
    char c;
    const char *what;
} foreign[] = {
    {'C', "\\C (one byte)"},
    {'Z', "\\Z (end of text or before a final newline; RE2 has \\z)"},
    {'K', "\\K (match reset)"},
    {'G', "\\G (end of the previous match)"},
    {'R', "\\R (any newline sequence)"},
    {'X', "\\X (extended grapheme cluster)"},
    {'g', "backreference \\g"},
    {'k', "named backreference \\k"},
    {'h', "\\h (horizontal space)"},
    {'H', "\\H (not horizontal space)"},
    {'V', "\\V (not vertical space)"},
    {'N', "\\N (not a newline)"},
    {'e', "\\e (escape character)"},
    {'c', "\\c (control character)"},
    {'o', "\\o{...} (octal)"},
    {'u', "\\u (Unicode escape; RE2 has \\x{...})"},
    {'U', "\\U (Unicode escape; RE2 has \\x{...})"},
    {'E', "\\E without \\Q"},
};

static bool escape_hex(translator *t)
{
    const char *p = t->p;
    unsigned long c = 0;
    if (*p == '{') {
        size_t n = 0;
        for (p++; isxdigit((unsigned char)*p) && c <= 0x10ffff; p++, n++)
            c = c * 16 + (unsigned long)(isdigit((unsigned char)*p) ? *p - '0' : tolower((unsigned char)*p) - 'a' + 10);
        if (n == 0 || *p != '}' || c > 0x10ffff)
            return refuse(t, "invalid escape \\x{...}: hexadecimal digits up to 10FFFF in braces");
        p++;
    } else {
        for (int i = 0; i < 2; i++, p++) {
            if (!isxdigit((unsigned char)*p))
                return refuse(t, "invalid escape \\x: two hexadecimal digits or \\x{...}");
            c = c * 16 + (unsigned long)(isdigit((unsigned char)*p) ? *p - '0' : tolower((unsigned char)*p) - 'a' + 10);
        }
    }
    t->p = p;
    put_literal(t, c);
    return true;
}

/* \0 to \7: octal, up to three digits, except a lone \1 to \7, which
 * would be a backreference (RE2 has none). */
static bool escape_octal(translator *t, char first)
{
    if (first != '0' && !(*t->p >= '0' && *t->p <= '7'))
        return refuse(t, "backreference \\%c is not supported by RE2", first);
    unsigned long c = (unsigned long)(first - '0');
    for (int i = 1; i < 3 && *t->p >= '0' && *t->p <= '7'; i++)
        c = c * 8 + (unsigned long)(*t->p++ - '0');
    put_literal(t, c);
    return true;
}

/* \pL, \p{Greek}, \p{^Greek} and \P...: PCRE2 knows RE2's names. */
static bool escape_unicode_class(translator *t, char which)
{
    const char *p = t->p;
    if (*p == '{') {
        const char *end = strchr(p, '}');
        if (!end)
            return refuse(t, "invalid character class \\%c{ without }", which);
        p = end + 1;
    } else if (*p && (unsigned char)*p < 0x80) {
        p++;
    } else {
        return refuse(t, "invalid character class \\%c", which);
    }
    tw_buffer_putc(&t->out, '\\');
    tw_buffer_putc(&t->out, which);
    tw_buffer_append(&t->out, t->p, (size_t)(p - t->p));
    t->p = p;
    return true;
}

/* \Q...\E: literal text, each character escaped. Without its \E it would
 * quote the end of Prometheus's ^(?:...)$ too, which then fails to parse. */
static bool escape_quoted(translator *t)
{
    const char *end = strstr(t->p, "\\E");
    if (!end)
        return refuse(t, "missing closing ): \\Q without \\E quotes the ) of Prometheus's ^(?:...)$");
    for (; t->p < end; t->p++) {
        unsigned char c = (unsigned char)*t->p;
        if (c < 0x80 && !isalnum(c))
            tw_buffer_putc(&t->out, '\\');
        tw_buffer_putc(&t->out, (char)c);
    }
    t->p = end + 2;
    return true;
}

/* The escape after a backslash at t->p, in a character class or not. */
static bool escape(translator *t, bool in_class)
{
    char c = *t->p;
    if (!c)
        return refuse(t, "trailing backslash at end of expression");
    t->p++;
    switch (c) {
    case 'd':
    case 'D':
    case 'w':
    case 'W':
    case 'a':
    case 'f':
    case 't':
    case 'n':
    case 'r':
        tw_buffer_putc(&t->out, '\\');
        tw_buffer_putc(&t->out, c);
        return true;
    case 's':
        put(t, in_class ? "\\t\\n\\f\\r " : "[\\t\\n\\f\\r ]");
        return true;
    case 'S':
        put(t, in_class ? "\\x00-\\x08\\x0b\\x0e-\\x1f\\x21-\\x{10ffff}" : "[^\\t\\n\\f\\r ]");
        return true;
    case 'v':
        put(t, "\\x0b");
        return true;
    case 'x':
        return escape_hex(t);
    case 'p':
    case 'P':
        return escape_unicode_class(t, c);
    case '8':
    case '9':
        return refuse(t, "backreference \\%c is not supported by RE2", c);
    case 'A':
    case 'z':
    case 'b':
    case 'B':
    case 'Q':
        if (in_class)
            return refuse(t, "\\%c in a character class is not supported by RE2", c);
        if (c == 'Q')
            return escape_quoted(t);
        put(t, "(?:\\"); /* in a group: RE2 lets an assertion repeat, PCRE2 does not */
        tw_buffer_putc(&t->out, c);
        tw_buffer_putc(&t->out, ')');
        return true;
    default:
        break;
    }
    if (c >= '0' && c <= '7')
        return escape_octal(t, c);
    if ((unsigned char)c < 0x80 && !isalnum((unsigned char)c)) { /* escaped punctuation */
        tw_buffer_putc(&t->out, '\\');
        tw_buffer_putc(&t->out, c);
        return true;
    }
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
        if (foreign[i].c == c)
            return refuse(t, "%s is not supported by RE2", foreign[i].what);
    }
    if ((unsigned char)c >= 0x80)
        return refuse(t, "invalid escape sequence: a backslash before a non-ASCII character");
    return refuse(t, "invalid escape sequence \\%c", c);
}

/* ---- classes, groups, repeats --------------------------------------- */

/* Opens a group (its text already written): flags set inside it end with it. */
static void open_group(translator *t)
{
    t->outer[t->depth++] = t->multiline;
}

/* [...] after its '['. A '[' inside that does not open [:name:] is a
 * literal in RE2 (PCRE2 would read [. and [= as collating elements). */
static bool char_class(translator *t)
{
    tw_buffer_putc(&t->out, '[');
    if (*t->p == '^')
        tw_buffer_putc(&t->out, *t->p++);
    if (*t->p == ']') { /* first: a literal */
        put(t, "\\]");
        t->p++;
    }
    while (*t->p != ']') {
        if (!*t->p)
            return refuse(t, "missing closing ]");
        if (*t->p == '\\') {
            t->p++;
            if (!escape(t, true))
                return false;
            continue;
        }
        if (t->p[0] == '[' && t->p[1] == ':') {
            size_t n = 2 + (t->p[2] == '^');
            while (isalpha((unsigned char)t->p[n]))
                n++;
            if (t->p[n] == ':' && t->p[n + 1] == ']') { /* PCRE2 has RE2's names */
                tw_buffer_append(&t->out, t->p, n + 2);
                t->p += n + 2;
                continue;
            }
        }
        if (*t->p == '[') {
            put(t, "\\[");
            t->p++;
            continue;
        }
        tw_buffer_putc(&t->out, *t->p++);
    }
    t->p++;
    tw_buffer_putc(&t->out, ']');
    return true;
}

/* Constructs after "(?" that RE2 does not have. */
static const struct {
    const char *prefix, *what;
} foreign_groups[] = {
    {"P=", "named backreference (?P=name)"},
    {"P>", "subroutine call (?P>name)"},
    {"<=", "lookbehind (?<=...)"},
    {"<!", "negative lookbehind (?<!...)"},
    {"<", "named group (?<name>...) (write (?P<name>...))"},
    {"=", "lookahead (?=...)"},
    {"!", "negative lookahead (?!...)"},
    {">", "atomic group (?>...)"},
    {"|", "branch reset group (?|...)"},
    {"#", "comment (?#...)"},
    {"(", "conditional group (?(...)...)"},
    {"'", "named group (?'name'...)"},
    {"&", "subroutine call (?&name)"},
    {"C", "callout (?C...)"},
    {"R", "recursion (?R)"},
    {"+", "subroutine call (?+N)"},
};

/* (?P<name>...: a group; its name is checked as RE2 does, then dropped
 * (nothing reads captures, and PCRE2's rules for names are stricter). */
static bool named_group(translator *t)
{
    const char *name = t->p + 3, *p = name; /* after "?P<" */
    while (isalnum((unsigned char)*p) || *p == '_')
        p++;
    if (p == name || *p != '>')
        return refuse(t, "invalid named capture (?P<name>: a name of letters, digits and _");
    t->p = p + 1;
    tw_buffer_putc(&t->out, '(');
    open_group(t);
    return true;
}

/* (?flags) or (?flags:...) with RE2's flags i, m, s, U and one '-'. */
static bool flag_group(translator *t)
{
    const char *p = t->p + 1; /* after '?' */
    bool negated = false, flag_after_minus = false, multiline = t->multiline;
    for (;; p++) {
        if (*p == 'i' || *p == 'm' || *p == 's' || *p == 'U') {
            flag_after_minus |= negated;
            if (*p == 'm')
                multiline = !negated;
        } else if (*p == '-' && !negated) {
            negated = true;
        } else if ((*p == ':' || *p == ')') && (!negated || flag_after_minus)) {
            break;
        } else if (isalpha((unsigned char)*p)) {
            return refuse(t, "flag %c in (?%.*s is not supported by RE2 (its flags are i, m, s and U)", *p,
                          (int)(p - t->p), t->p + 1);
        } else {
            return refuse(t, "invalid or unsupported Perl syntax (?%.*s", (int)(p - t->p), t->p + 1);
        }
    }
    tw_buffer_putc(&t->out, '(');
    tw_buffer_append(&t->out, t->p, (size_t)(p - t->p + 1));
    if (*p == ':')
        open_group(t);
    t->multiline = multiline;
    t->p = p + 1;
    return true;
}

/* A group after its '('. */
static bool group(translator *t)
{
    if (*t->p == '*')
        return refuse(t, "(*...) control verbs are not supported by RE2");
    if (*t->p != '?') {
        tw_buffer_putc(&t->out, '(');
        open_group(t);
        return true;
    }
    const char *after = t->p + 1;
    if (!strncmp(after, "P<", 2))
        return named_group(t);
    for (size_t i = 0; i < sizeof foreign_groups / sizeof foreign_groups[0]; i++) {
        if (!strncmp(after, foreign_groups[i].prefix, strlen(foreign_groups[i].prefix)))
            return refuse(t, "%s is not supported by RE2", foreign_groups[i].what);
    }
    if (isdigit((unsigned char)after[0]) || (after[0] == '-' && isdigit((unsigned char)after[1])))
        return refuse(t, "subroutine call (?N) is not supported by RE2");
    return flag_group(t);
}

/* The length of {n}, {n,} or {n,m} at p, 0 when the brace is a literal (as
 * in RE2: no digits, or a leading zero); bounds in *min and *max (-1: none). */
static size_t repeat_length(const char *p, long *min, long *max)
{
    const char *q = p + 1;
    long *bound = min;
    *max = -1;
    for (int part = 0; part < 2; part++) {
        if (!isdigit((unsigned char)*q) || (q[0] == '0' && isdigit((unsigned char)q[1])))
            return 0;
        long n = 0;
        for (; isdigit((unsigned char)*q); q++)
            n = n < 100000000 ? n * 10 + (*q - '0') : n;
        *bound = n;
        if (part == 0 && *q == ',') {
            q++;
            if (*q == '}')
                return (size_t)(q - p + 1);
            bound = max;
            continue;
        }
        if (part == 0)
            *max = n;
        return *q == '}' ? (size_t)(q - p + 1) : 0;
    }
    return 0;
}

/* The length of the quantifier at p (*, +, ? or a valid {...}), or 0. */
static size_t quantifier_length(const char *p, long *min, long *max)
{
    if (*p == '*' || *p == '+' || *p == '?')
        return 1;
    return *p == '{' ? repeat_length(p, min, max) : 0;
}

/* A quantifier of length n at t->p, then its lazy '?'. RE2 stacks no
 * quantifiers: a** is an error, and a*+ would be possessive. */
static bool quantifier(translator *t, size_t n, long min, long max)
{
    if (*t->p == '{' && (min > REPEAT_MAX || max > REPEAT_MAX || (max >= 0 && min > max)))
        return refuse(t, "invalid repeat count %.*s (RE2 counts up to %d)", (int)n, t->p, REPEAT_MAX);
    const char *start = t->p;
    tw_buffer_append(&t->out, t->p, n);
    t->p += n;
    bool lazy = *t->p == '?';
    if (lazy)
        tw_buffer_putc(&t->out, *t->p++);
    long a, b;
    size_t next = quantifier_length(t->p, &a, &b);
    if (next == 0)
        return true;
    if (*t->p == '+' && !lazy)
        return refuse(t, "possessive quantifier %.*s+ is not supported by RE2", (int)(t->p - start), start);
    return refuse(t, "invalid nested repetition operator %.*s", (int)(t->p - start + (long)next), start);
}

/* The whole pattern, into t->out. */
static bool translate(translator *t)
{
    while (*t->p && !t->failed) {
        char c = *t->p;
        long min = -1, max = -1;
        size_t n;
        if (c == '\\') {
            t->p++;
            escape(t, false);
        } else if (c == '[') {
            t->p++;
            char_class(t);
        } else if (c == '(') {
            t->p++;
            group(t);
        } else if (c == ')') {
            if (t->depth == 0)
                return refuse(t, "unexpected )");
            t->multiline = t->outer[--t->depth];
            tw_buffer_putc(&t->out, *t->p++);
        } else if ((n = quantifier_length(t->p, &min, &max)) > 0) {
            quantifier(t, n, min, max);
        } else if (c == '{') { /* not a repeat: a literal */
            put(t, "\\{");
            t->p++;
        } else if (c == '^' || c == '$') {
            /* in a group, as \A and \z above; PCRE2's $ would also match
             * before a final newline, and PCRE2_DOLLAR_ENDONLY outranks (?m) */
            put(t, c == '^' ? "(?:^)" : t->multiline ? "(?:$)" : "(?:\\z)");
            t->p++;
        } else {
            tw_buffer_putc(&t->out, *t->p++);
        }
    }
    if (!t->failed && t->depth > 0)
        return refuse(t, "missing closing )");
    return !t->failed;
}

/* ---- compiling and matching ----------------------------------------- */

int tw_regex_compile(const char *pattern, tw_regex **out, char *err, size_t cap)
{
    *out = NULL;
    translator t = {.p = pattern, .err = err, .cap = cap};
    t.outer = malloc(strlen(pattern) + 1); /* one entry per '(' at most */
    if (!t.outer)
        return TW_ENOMEM;
    tw_buffer_init(&t.out);
    put(&t, "\\A(?:");
    bool translated = translate(&t);
    free(t.outer);
    if (!translated) {
        tw_buffer_free(&t.out);
        return TW_ECONFIG;
    }
    put(&t, ")\\z");
    if (t.out.failed) {
        tw_buffer_free(&t.out);
        return TW_ENOMEM;
    }
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    if (!cc) {
        tw_buffer_free(&t.out);
        return TW_ENOMEM;
    }
    pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
    int code;
    PCRE2_SIZE at;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)t.out.data, t.out.len,
                                   PCRE2_UTF | PCRE2_ALT_CIRCUMFLEX | PCRE2_NEVER_BACKSLASH_C, &code, &at, cc);
    pcre2_compile_context_free(cc);
    tw_buffer_free(&t.out);
    if (!re) {
        if (code == PCRE2_ERROR_HEAPLIMIT || code == PCRE2_ERROR_NOMEMORY)
            return TW_ENOMEM;
        char why[256];
        pcre2_get_error_message(code, (PCRE2_UCHAR *)why, sizeof why);
        snprintf(err, cap, "%s", why);
        return TW_ECONFIG;
    }
    *out = malloc(sizeof **out);
    if (!*out) {
        pcre2_code_free(re);
        return TW_ENOMEM;
    }
    (*out)->code = re;
    return TW_OK;
}

void tw_regex_free(tw_regex *re)
{
    if (!re)
        return;
    pcre2_code_free(re->code);
    free(re);
}

/* The length of the valid UTF-8 sequence at s (n bytes left), 0 when it is
 * not one: Go's rules (no overlong forms, no surrogates, up to 10FFFF). */
static size_t utf8_length(const unsigned char *s, size_t n)
{
    unsigned long c = s[0], min;
    size_t len;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, c &= 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0)
        len = 3, c &= 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, c &= 0x07, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3f);
    }
    return c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff) ? 0 : len;
}

/* s with each byte that is not part of valid UTF-8 read as U+FFFD, as Go's
 * regexp reads it; NULL when s is valid (or on no memory, *failed set). */
static char *utf8_repaired(const char *s, size_t *n, bool *failed)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < *n && utf8_length(u + i, *n - i))
        i += utf8_length(u + i, *n - i);
    if (i == *n)
        return NULL;
    tw_buffer b;
    tw_buffer_init(&b);
    tw_buffer_append(&b, s, i);
    while (i < *n) {
        size_t len = utf8_length(u + i, *n - i);
        if (len)
            tw_buffer_append(&b, s + i, len);
        else
            tw_buffer_puts(&b, "\xef\xbf\xbd");
        i += len ? len : 1;
    }
    if (b.failed) {
        tw_buffer_free(&b);
        *failed = true;
        return NULL;
    }
    *n = b.len;
    return b.data;
}

bool tw_regex_match(const tw_regex *re, const char *s)
{
    size_t n = strlen(s);
    bool failed = false;
    char *repaired = utf8_repaired(s, &n, &failed);
    pcre2_match_data *md = failed ? NULL : pcre2_match_data_create(1, NULL);
    int rc = PCRE2_ERROR_NOMEMORY;
    if (md) {
        /* the DFA matcher: time linear in the text, whatever the pattern */
        int workspace[1000];
        rc = pcre2_dfa_match(re->code, (PCRE2_SPTR)(repaired ? repaired : s), n, 0, PCRE2_DFA_SHORTEST, md, NULL,
                             workspace, sizeof workspace / sizeof workspace[0]);
        if (rc == PCRE2_ERROR_DFA_WSSIZE) {
            size_t more = 100000;
            int *big = malloc(more * sizeof *big);
            if (big)
                rc = pcre2_dfa_match(re->code, (PCRE2_SPTR)(repaired ? repaired : s), n, 0, PCRE2_DFA_SHORTEST, md,
                                     NULL, big, more);
            free(big);
        }
        pcre2_match_data_free(md);
    }
    free(repaired);
    return rc >= 0;
}
