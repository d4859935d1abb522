/*
 * user_formats.h: formats the user defines, for in-house `print` lines no
 * built-in format knows: `--pattern REGEX` (PCRE2, named groups) and a
 * formats file (`--formats FILE`, YAML: several named formats, each a
 * pattern and an optional detect regex).
 *
 * Named groups: step, loss, lr, epoch, step_time, data_time (and
 * global_step, samples_per_sec, eta) fill the record's fields; any other
 * name becomes a named metric. Patterns are compiled once, at load, with the
 * error and its position reported then; a parser given the set tries it on
 * every line before the built-in formats.
 *
 * Ownership: tw_user_formats_new/tw_user_formats_free; a parser borrows the
 * set (tw_parser_set_user_formats) and it must outlive the parser. The set
 * is read-only once loaded and may be shared by parsers on several threads.
 */
#ifndef TW_PARSE_USER_FORMATS_H
#define TW_PARSE_USER_FORMATS_H

#include <stdbool.h>
#include <stddef.h>

#include "trainwatch/parse.h"

typedef struct tw_user_formats tw_user_formats;

int tw_user_formats_new(tw_user_formats **out);
void tw_user_formats_free(tw_user_formats *set);

/* Adds one --pattern (named "pattern N", N counting from 1). On a bad
 * pattern returns TW_ECONFIG and writes the reason with its position into
 * err ("offset 14: missing closing parenthesis"). */
int tw_user_formats_add_pattern(tw_user_formats *set, const char *regex, char *err, size_t err_cap);

/* Adds the formats of a YAML formats file (text, len: its contents; path for
 * messages). On a bad file returns TW_ECONFIG with "line L: ..." in err. */
int tw_user_formats_load(tw_user_formats *set, const char *text, size_t len, char *err, size_t err_cap);

/* Reads and loads a formats file; errors as above, or the read error. */
int tw_user_formats_load_file(tw_user_formats *set, const char *path, char *err, size_t err_cap);

int tw_user_formats_count(const tw_user_formats *set);

/* The parser tries the set on every line before the built-in formats. */
void tw_parser_set_user_formats(tw_parser *p, const tw_user_formats *set);

#endif
