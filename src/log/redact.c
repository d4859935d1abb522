/*
 * redact.c: secrets out of records before any sink sees them. Built in:
 * values of fields whose key looks secret; in text, `Bearer <token>`,
 * credentials in URLs, `secretkey=value`, e-mail addresses. Added at run
 * time: PCRE2 patterns. A message with none of '@', ':', '=' and no
 * "bearer" costs a few memchr calls; only then is it scanned and copied.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "trainwatch/error.h"

/* PCRE2's JIT code reads subjects a word at a time, past their end into
 * bytes never written: harmless, but valgrind reports every such read.
 * Under valgrind the patterns are interpreted instead, so a memcheck run
 * shows only real errors (valgrind.h is a header only; without it the JIT
 * is always used). */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define TW_UNDER_VALGRIND() RUNNING_ON_VALGRIND
#endif
#endif
#ifndef TW_UNDER_VALGRIND
#define TW_UNDER_VALGRIND() 0
#endif

#define REDACTED     "[REDACTED]"
#define PATTERNS_MAX 32

static atomic_bool enabled = true;
static pcre2_code *patterns[PATTERNS_MAX];
static atomic_size_t pattern_count;
static pcre2_match_data *signal_match[PATTERNS_MAX]; /* the crash path allocates nothing */
static pthread_mutex_t patterns_lock = PTHREAD_MUTEX_INITIALIZER;

/* A key is secret when one of its words (split at anything not a letter or
 * digit) is one of these, or two neighbouring words are one of the pairs:
 * "hf_token", "db_password", "apiKey"... but not "tokens_per_sec" or
 * "tokenizer". */
typedef struct secret_word {
    const char *text;
    size_t len;
} secret_word;

#define WORD(w)                                                                                                        \
    {                                                                                                                  \
        w, sizeof w - 1                                                                                                \
    }
/* lengths known at compile time: this runs for every field of every record */
static const secret_word secret_words[] = {
    WORD("password"),    WORD("passwd"),        WORD("pwd"),       WORD("secret"),     WORD("token"),
    WORD("apikey"),      WORD("authorization"), WORD("auth"),      WORD("cookie"),     WORD("credential"),
    WORD("credentials"), WORD("session"),       WORD("sessionid"), WORD("privatekey"), WORD("accesskey"),
    WORD("bearer"),      WORD("jwt"),           {NULL, 0}};
static const secret_word secret_pairs[] = {WORD("api"),     WORD("key"), WORD("private"), WORD("key"),
                                           WORD("access"),  WORD("key"), WORD("secret"),  WORD("key"),
                                           WORD("session"), WORD("id"),  {NULL, 0}};
#undef WORD

/* Whether a word of n letters starting with c (lowered as strncasecmp
 * lowers it) may be one of secret_words: most words ("loss", "step") are
 * not, and need no loop. The lengths by first letter are found once;
 * threads finding them at once set the same bits. */
static bool may_be_secret_word(char c, size_t n)
{
    static atomic_uint_fast32_t lengths[26]; /* bit n of lengths[l]: a word of n letters starts with 'a' + l */
    static atomic_bool found;
    if (!atomic_load_explicit(&found, memory_order_acquire)) {
        for (size_t i = 0; secret_words[i].text; i++)
            atomic_fetch_or_explicit(&lengths[secret_words[i].text[0] - 'a'], (uint32_t)1 << secret_words[i].len,
                                     memory_order_relaxed);
        atomic_store_explicit(&found, true, memory_order_release);
    }
    int first = tolower((unsigned char)c);
    return n < 32 && first >= 'a' && first <= 'z' &&
           (atomic_load_explicit(&lengths[first - 'a'], memory_order_relaxed) >> n & 1);
}

/* The length and the first letter (as strncasecmp lowers it) are compared
 * before the call: most keys ("loss", "step") fail there. */
static bool word_is(const char *w, size_t n, const secret_word *list)
{
    int first = n ? tolower((unsigned char)w[0]) : 0;
    for (size_t i = 0; list[i].text; i++) {
        if (list[i].len == n && first == list[i].text[0] && strncasecmp(w, list[i].text, n) == 0)
            return true;
    }
    return false;
}

static bool pair_is(const char *a, size_t an, const char *b, size_t bn)
{
    for (size_t i = 0; secret_pairs[i].text; i += 2) {
        if (secret_pairs[i].len == an && strncasecmp(a, secret_pairs[i].text, an) == 0 &&
            secret_pairs[i + 1].len == bn && strncasecmp(b, secret_pairs[i + 1].text, bn) == 0)
            return true;
    }
    return false;
}

static bool is_word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Words split at non-alphanumerics and at a lower-to-upper case change. */
static bool key_is_secret(const char *key, size_t n)
{
    const char *prev = NULL;
    size_t prev_len = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && !is_word_char(key[i]))
            i++;
        size_t start = i;
        while (i < n && is_word_char(key[i]) &&
               !(i > start && key[i] >= 'A' && key[i] <= 'Z' && key[i - 1] >= 'a' && key[i - 1] <= 'z'))
            i++;
        if (i == start)
            break;
        if ((may_be_secret_word(key[start], i - start) && word_is(key + start, i - start, secret_words)) ||
            (prev && pair_is(prev, prev_len, key + start, i - start)))
            return true;
        prev = key + start;
        prev_len = i - start;
    }
    return false;
}

void tw_log_redact_enable(bool on)
{
    atomic_store(&enabled, on);
}

/* w in lower case, starting with an ASCII letter: strncasecmp only where
 * that letter (either case) or a non-ASCII byte is. */
static bool contains_word(const char *s, size_t n, const char *w)
{
    size_t m = strlen(w);
    for (size_t i = 0; i + m <= n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (((c | 0x20) == w[0] || c >= 0x80) && strncasecmp(s + i, w, m) == 0)
            return true;
    }
    return false;
}

bool tw_log_key_is_secret(const char *key)
{
    return key && key_is_secret(key, strlen(key));
}

int tw_log_redact_add(const char *pattern, char *error, size_t error_len)
{
    int code;
    PCRE2_SIZE offset;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, 0, &code, &offset, NULL);
    if (!re) {
        if (error && error_len) {
            char why[160];
            pcre2_get_error_message(code, (PCRE2_UCHAR *)why, sizeof why);
            snprintf(error, error_len, "at offset %zu: %s", (size_t)offset, why);
        }
        return TW_EINVAL;
    }
    if (!TW_UNDER_VALGRIND())
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: interpreted when it fails */
    pthread_mutex_lock(&patterns_lock);
    size_t n = atomic_load(&pattern_count);
    if (n == PATTERNS_MAX) {
        pthread_mutex_unlock(&patterns_lock);
        pcre2_code_free(re);
        return TW_ELIMIT;
    }
    patterns[n] = re;
    signal_match[n] = pcre2_match_data_create_from_pattern(re, NULL);
    atomic_store(&pattern_count, n + 1); /* published after the slot is set */
    pthread_mutex_unlock(&patterns_lock);
    return TW_OK;
}

/* Inline and branch-light: the scan asks these of every byte. */
static inline bool is_alnum(char c)
{
    unsigned char u = (unsigned char)c;
    return (unsigned)((u | 0x20) - 'a') < 26 || (unsigned)(u - '0') < 10;
}
static inline bool is_local(char c)
{
    return is_alnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-';
}
static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}
static bool ends_value(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == ',' || c == ';' || c == '"' || c == '\'' || c == '&' ||
           c == ')' || c == '}' || c == ']';
}

/* An e-mail address starting at s[i]: returns its length, or 0. */
static size_t email_at(const char *s, size_t n, size_t i)
{
    size_t j = i;
    while (j < n && is_local(s[j]))
        j++;
    if (j == i || j >= n || s[j] != '@')
        return 0;
    size_t d = ++j;
    while (j < n && (is_alnum(s[j]) || s[j] == '-' || s[j] == '.'))
        j++;
    while (j > d && s[j - 1] == '.') /* a sentence's full stop is not the domain's */
        j--;
    size_t dot = 0;
    for (size_t k = d; k < j; k++)
        dot = s[k] == '.' ? k : dot;
    return dot > d && dot + 1 < j ? j - i : 0;
}

/* "user:pass@" right after "://": returns its length (without the '@'), or 0. */
static size_t url_credentials_at(const char *s, size_t n, size_t i)
{
    bool colon = false;
    for (size_t j = i; j < n; j++) {
        char c = s[j];
        if (c == '@')
            return colon && j > i ? j - i : 0;
        if (c == ':')
            colon = true;
        else if (c == '/' || is_blank(c) || c == '\n' || c == '?' || c == '#')
            return 0;
    }
    return 0;
}

/* A secret-looking key word ending at s[i] followed by = or : and a value:
 * returns where the value starts, or 0. */
static size_t secret_value_at(const char *s, size_t n, size_t word, size_t i)
{
    if (i == word)
        return 0;
    size_t j = i;
    if (j < n && (s[j] == '"' || s[j] == '\''))
        j++;
    if (j >= n || (s[j] != '=' && s[j] != ':'))
        return 0; /* checked before the key: most words are not followed by = or : */
    if (!key_is_secret(s + word, i - word))
        return 0;
    j++;
    while (j < n && is_blank(s[j]))
        j++;
    if (j < n && (s[j] == '"' || s[j] == '\''))
        j++;
    if (j < n && (s[j] == 'B' || s[j] == 'b') && n - j > 7 && strncasecmp(s + j, "bearer ", 7) == 0)
        j += 7;
    return j < n && !ends_value(s[j]) ? j : 0;
}

/* The built-in rules, text -> o. A bearer token or an e-mail address is
 * looked for only when the text has "bearer " or an '@' at all; text
 * between redactions is copied in runs. */
static void builtin(const char *s, size_t n, bool has_bearer, bool has_at, tw_log_out *o)
{
    size_t i = 0, word = 0, run = 0; /* s[run..i) is yet to be copied */
    while (i < n) {
        char c = s[i];
        bool starts_word = i == 0 || !is_local(s[i - 1]);
        size_t m, v, from = i;
        if (starts_word)
            word = i;
        if (has_bearer && starts_word && (c == 'B' || c == 'b') && n - i > 7 && strncasecmp(s + i, "bearer ", 7) == 0 &&
            !ends_value(s[i + 7])) {
            tw_out_mem(o, s + run, from - run);
            tw_out_mem(o, s + i, 7);
            tw_out_str(o, REDACTED);
            for (i += 7; i < n && !ends_value(s[i]); i++) {
            }
        } else if (has_at && starts_word && (m = email_at(s, n, i)) > 0) {
            tw_out_mem(o, s + run, from - run);
            tw_out_str(o, "[EMAIL]");
            i += m;
        } else if (c == ':' && n - i > 3 && s[i + 1] == '/' && s[i + 2] == '/' &&
                   (m = url_credentials_at(s, n, i + 3))) {
            tw_out_mem(o, s + run, from - run);
            tw_out_str(o, "://" REDACTED);
            i += 3 + m;
        } else if (!is_local(c) && (v = secret_value_at(s, n, word, i)) > 0) {
            tw_out_mem(o, s + run, from - run);
            tw_out_mem(o, s + i, v - i);
            tw_out_str(o, REDACTED);
            for (i = v; i < n && !ends_value(s[i]); i++) {
            }
        } else {
            i++;
            continue;
        }
        run = i;
    }
    tw_out_mem(o, s + run, n - run);
}

static bool in_signal;

void tw_log_redact_signal_mode(void)
{
    in_signal = true;
}

static void user_patterns(tw_log_out *o, char *scratch, size_t scratch_len)
{
    size_t count = atomic_load(&pattern_count);
    for (size_t k = 0; k < count; k++) {
        PCRE2_SIZE out_len = scratch_len;
        if (in_signal && !signal_match[k])
            continue;
        int rc = pcre2_substitute(patterns[k], (PCRE2_SPTR)o->p, o->len, 0, PCRE2_SUBSTITUTE_GLOBAL,
                                  in_signal ? signal_match[k] : NULL, NULL, (PCRE2_SPTR)REDACTED, PCRE2_ZERO_TERMINATED,
                                  (PCRE2_UCHAR *)scratch, &out_len);
        if (rc > 0) {
            size_t n = out_len < o->cap ? out_len : o->cap;
            memcpy(o->p, scratch, n);
            o->len = n;
        }
    }
}

/* Whether the built-in rules may change s, known to have no '@' and no
 * "bearer ": only a secret key followed by = or : (or a URL's "://", left
 * to the full scan) can. The word before a position is the run of
 * local characters ending there, as the scan finds it. */
static bool may_change(const char *s, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        char c = s[i];
        if (c != '=' && c != ':' && c != '"' && c != '\'')
            continue;
        if (c == ':' && i + 2 < n && s[i + 1] == '/' && s[i + 2] == '/')
            return true;
        if (!is_local(s[i - 1]))
            continue;
        size_t word = i - 1;
        while (word > 0 && is_local(s[word - 1]))
            word--;
        if (secret_value_at(s, n, word, i) > 0)
            return true;
    }
    return false;
}

/* Redacts s into o; true when anything changed. Text that fits and that
 * no rule changes (most messages: "loss=2.1") is not copied. */
static bool redact(const char *s, size_t n, tw_log_out *o, char *scratch, size_t scratch_len)
{
    size_t start = o->len;
    bool has_at = memchr(s, '@', n) != NULL, has_bearer = contains_word(s, n, "bearer ");
    bool builtin_needed = has_at || has_bearer || memchr(s, '=', n) || memchr(s, ':', n);
    size_t count = atomic_load(&pattern_count);
    if (count == 0 && (!builtin_needed || (!has_at && !has_bearer && n <= o->cap - o->len && !may_change(s, n))))
        return false;
    if (builtin_needed)
        builtin(s, n, has_bearer, has_at, o);
    else
        tw_out_mem(o, s, n);
    if (count) {
        tw_log_out part = {o->p + start, o->len - start, o->cap - start, false};
        user_patterns(&part, scratch, scratch_len);
        o->len = start + part.len;
    }
    return o->len - start != n || memcmp(o->p + start, s, n) != 0;
}

size_t tw_log_redact_text(const char *text, char *out, size_t cap)
{
    if (!cap)
        return 0;
    char scratch[TW_LOG_LINE_MAX];
    tw_log_out o = {out, 0, cap - 1, false};
    size_t n = strlen(text);
    if (!redact(text, n, &o, scratch, sizeof scratch)) {
        o.len = 0;
        tw_out_mem(&o, text, n);
    }
    out[o.len] = '\0';
    return o.len;
}

const tw_log_rec *tw_log_redact_record(const tw_log_rec *r, tw_log_rec *copy, tw_log_field *fields_out, char *storage,
                                       size_t storage_len, char *scratch, size_t scratch_len)
{
    if (!atomic_load_explicit(&enabled, memory_order_relaxed))
        return r;
    tw_log_out o = {storage, 0, storage_len, false};
    bool changed = false;
    *copy = *r;
    if (redact(r->message, r->message_len, &o, scratch, scratch_len)) {
        copy->message = storage;
        copy->message_len = o.len;
        changed = true;
    } else {
        o.len = 0;
    }
    size_t nf = r->field_count < TW_LOG_FIELDS_MAX ? r->field_count : TW_LOG_FIELDS_MAX;
    bool fields_changed = false;
    for (size_t i = 0; i < nf; i++) {
        fields_out[i] = r->fields[i];
        const tw_log_field *f = &r->fields[i];
        if (!f->key)
            continue;
        if (key_is_secret(f->key, strlen(f->key))) {
            fields_out[i].type = TW_FIELD_STRING;
            fields_out[i].v.s = REDACTED;
            fields_changed = true;
            continue;
        }
        if (f->type != TW_FIELD_STRING || !f->v.s)
            continue;
        size_t start = o.len, n = strlen(f->v.s);
        if (o.len + n + 64 < o.cap && redact(f->v.s, n, &o, scratch, scratch_len)) {
            tw_out_char(&o, '\0');
            fields_out[i].v.s = storage + start;
            fields_changed = true;
        } else {
            o.len = start;
        }
    }
    if (fields_changed) {
        copy->fields = fields_out;
        copy->field_count = nf;
    }
    return changed || fields_changed ? copy : r;
}
