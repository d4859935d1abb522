/*
 * say.c: trainwatch's own messages as text, logfmt or JSON lines (say.h).
 * A message is formatted into memory first and written with one fwrite
 * under the stream's lock, so lines from the notifier's thread and the
 * supervision loop never interleave.
 */
#include "say.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "trainwatch/error.h"

static const char *const level_names[] = {"debug", "info", "warn", "error"};
static const char *const format_names[] = {"text", "logfmt", "json"};

static tw_say_level least_level = TW_SAY_INFO;
static tw_say_format chosen_format = TW_SAY_TEXT;
static const char *speaking_command;

static int index_of(const char *name, const char *const *names, int n)
{
    for (int i = 0; name && i < n; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

int tw_say_level_from_name(const char *name, tw_say_level *out)
{
    int i = index_of(name, level_names, 4);
    if (i < 0)
        return TW_EINVAL;
    *out = (tw_say_level)i;
    return 0;
}

int tw_say_format_from_name(const char *name, tw_say_format *out)
{
    int i = index_of(name, format_names, 3);
    if (i < 0)
        return TW_EINVAL;
    *out = (tw_say_format)i;
    return 0;
}

const char *tw_say_level_name(tw_say_level level)
{
    return (unsigned)level < 4 ? level_names[level] : "info";
}

void tw_say_setup(tw_say_level least, tw_say_format format, const char *command)
{
    least_level = least;
    chosen_format = format;
    speaking_command = command;
}

bool tw_say_enabled(tw_say_level level)
{
    return level >= least_level;
}

tw_say_format tw_say_current_format(void)
{
    return chosen_format;
}

/* RFC 3339 UTC with milliseconds, as Prometheus' own logs write ts. */
static void write_time(FILE *m)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(m, "%s.%03ldZ", date, now.tv_nsec / 1000000);
}

/* logfmt values are bare when they hold no space, quote, '=' or control
 * character, else quoted with \" \\ \n \t escaped. */
static void logfmt_value(FILE *m, const char *s)
{
    bool bare = *s != '\0';
    for (const char *p = s; *p && bare; p++)
        bare = (unsigned char)*p > ' ' && *p != '"' && *p != '=' && *p != '\\';
    if (bare) {
        fputs(s, m);
        return;
    }
    fputc('"', m);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(m, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", m);
        else if (*p == '\t')
            fputs("\\t", m);
        else if (*p < ' ')
            fprintf(m, "\\u%04x", *p);
        else
            fputc(*p, m);
    }
    fputc('"', m);
}

/* The command's name when one was set up, else the speaker's. */
static void write_text(FILE *m, const char *source, const char *msg)
{
    const char *who = speaking_command ? speaking_command : source;
    if (who)
        fprintf(m, "trainwatch %s: %s\n", who, msg);
    else
        fprintf(m, "trainwatch: %s\n", msg);
}

static const char *speaker(const char *source)
{
    if (source)
        return source;
    return speaking_command ? speaking_command : "trainwatch";
}

static void write_logfmt(FILE *m, tw_say_level level, const char *source, const char *msg)
{
    fputs("ts=", m);
    write_time(m);
    fprintf(m, " level=%s source=", tw_say_level_name(level));
    logfmt_value(m, speaker(source));
    fputs(" msg=", m);
    logfmt_value(m, msg);
    fputc('\n', m);
}

static void write_json(FILE *m, tw_say_level level, const char *source, const char *msg)
{
    fputs("{\"ts\":\"", m);
    write_time(m);
    fprintf(m, "\",\"level\":\"%s\",\"source\":", tw_say_level_name(level));
    tw_json_cstring(m, speaker(source));
    fputs(",\"msg\":", m);
    tw_json_cstring(m, msg);
    fputs("}\n", m);
}

void tw_vsay_to(FILE *out, tw_say_level level, const char *source, const char *fmt, va_list ap)
{
    if (!out || !tw_say_enabled(level))
        return;
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        return;
    char *line = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&line, &len);
    if (m) {
        if (chosen_format == TW_SAY_LOGFMT)
            write_logfmt(m, level, source, msg);
        else if (chosen_format == TW_SAY_JSON)
            write_json(m, level, source, msg);
        else
            write_text(m, source, msg);
        if (fclose(m) == 0) {
            flockfile(out);
            fwrite(line, 1, len, out);
            fflush(out);
            funlockfile(out);
        }
    }
    free(line);
    free(msg);
}

void tw_say_to(FILE *out, tw_say_level level, const char *source, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tw_vsay_to(out, level, source, fmt, ap);
    va_end(ap);
}

void tw_say(tw_say_level level, const char *source, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tw_vsay_to(stderr, level, source, fmt, ap);
    va_end(ap);
}
