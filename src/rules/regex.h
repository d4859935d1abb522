/*
 * regex.h: the regular expressions of PromQL's =~ and !~, with the syntax
 * and meaning of Go's regexp (RE2) that Prometheus uses, on PCRE2.
 *
 * A pattern is checked and translated to PCRE2 when compiled: what RE2
 * refuses (backreferences, lookaround, atomic groups, possessive quantifiers,
 * recursion, \C, ...) is refused here too, naming the construct; the few
 * escapes whose meaning differs (\s, \v, octal) are rewritten. It is then
 * anchored as Prometheus anchors it, ^(?:RE)$, and matched with PCRE2's DFA
 * matcher, which never backtracks, so no pattern takes exponential time.
 */
#ifndef TW_RULES_REGEX_H
#define TW_RULES_REGEX_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tw_regex tw_regex;

/* Compiles pattern. Returns TW_OK; TW_ECONFIG with the reason in err when
 * RE2 would refuse the pattern; TW_ENOMEM. */
int tw_regex_compile(const char *pattern, tw_regex **out, char *err, size_t cap);
void tw_regex_free(tw_regex *re);
/* Whether the whole of s matches (invalid UTF-8 reads as U+FFFD, as in Go). */
bool tw_regex_match(const tw_regex *re, const char *s);

#endif
