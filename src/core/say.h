/*
 * say.h: trainwatch's own messages (what `run` and `watch` tell the user
 * while they supervise: serving on, rules loaded, a file appeared, an alert
 * fired, a receiver failed). Each message is one line with a level, written
 * as plain text ("trainwatch run: ..."), logfmt or JSON: the
 * --log.level / --log.format pair Prometheus exporters have, so a log
 * shipper in front of trainwatch's stderr gets structured lines.
 *
 * The setting is process-wide (set once by the CLI before any thread
 * starts). Modules that take a FILE * for their messages (follow, live,
 * notify, the rules engine) write through tw_say_to so the same level and
 * format apply to them; a NULL stream still means quiet.
 */
#ifndef TW_CORE_SAY_H
#define TW_CORE_SAY_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

typedef enum tw_say_level {
    TW_SAY_DEBUG,
    TW_SAY_INFO,
    TW_SAY_WARN,
    TW_SAY_ERROR,
} tw_say_level;

typedef enum tw_say_format {
    TW_SAY_TEXT,   /* trainwatch COMMAND: message */
    TW_SAY_LOGFMT, /* ts=... level=... source=... msg="..." */
    TW_SAY_JSON,   /* {"ts":...,"level":...,"source":...,"msg":...} */
} tw_say_format;

/* Names as the options take them: debug, info, warn, error / text, logfmt,
 * json. Return 0, or TW_EINVAL for a name that is none of them. */
int tw_say_level_from_name(const char *name, tw_say_level *out);
int tw_say_format_from_name(const char *name, tw_say_format *out);
const char *tw_say_level_name(tw_say_level level);

/* Process-wide: the least level written, the format, and the command the
 * messages come from ("run", "watch"; NULL: none), which text puts in its
 * prefix. Call before any thread that says anything starts. */
void tw_say_setup(tw_say_level least, tw_say_format format, const char *command);

bool tw_say_enabled(tw_say_level level);
tw_say_format tw_say_current_format(void);

/* One message to stderr. source names the part of trainwatch that speaks
 * (the command, "follow", "rules", ...), used by logfmt and JSON. */
void tw_say(tw_say_level level, const char *source, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The same to out (NULL: nothing). The line is written with one call, so
 * threads saying things at once do not interleave. */
void tw_say_to(FILE *out, tw_say_level level, const char *source, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void tw_vsay_to(FILE *out, tw_say_level level, const char *source, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

#endif
