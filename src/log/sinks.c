/*
 * sinks.c: where records go: the console (stderr, colour on a terminal
 * without NO_COLOR, rank 0 only below WARNING), a file with size rotation
 * (rotate.c, RotatingFileHandler's file set), text or JSON, and a callback.
 *
 * A sink's lock orders its lines; formatting happens before it, into the
 * caller's buffer. A write that fails drops the record, counts it and says so
 * once on stderr (and once more when writing works again): the training
 * process is never stopped or slowed by its log.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "trainwatch/error.h"

#define FILE_BUFFER (64u * 1024u)

tw_log_sink_options tw_log_sink_options_default(void)
{
    return (tw_log_sink_options){
        .level = TW_LEVEL_NOTSET,
        .color = -1,
        .other_ranks_level = TW_LEVEL_WARNING,
        .flush_level = TW_LEVEL_DEBUG,
    };
}

static int sink_new(tw_sink_kind kind, const tw_log_sink_options *o, tw_log_sink **out)
{
    tw_log_sink_options d = tw_log_sink_options_default();
    if (!o)
        o = &d;
    tw_log_sink *s = calloc(1, sizeof *s);
    if (!s)
        return TW_ENOMEM;
    s->kind = kind;
    s->level = o->level;
    s->json = o->json;
    s->other_ranks_level = o->other_ranks_level;
    s->flush_level = o->flush_level;
    if (!o->json && o->pattern) {
        int rc = tw_log_pattern_compile(o->pattern, &s->pattern, NULL, 0);
        if (rc != TW_OK) {
            free(s);
            return rc;
        }
    }
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return TW_OK;
}

int tw_log_sink_new_console(const tw_log_sink_options *o, tw_log_sink **out)
{
    int rc = sink_new(TW_SINK_CONSOLE, o, out);
    if (rc != TW_OK)
        return rc;
    int color = o ? o->color : -1;
    const char *no_color = getenv("NO_COLOR");
    (*out)->color = color == 1 || (color < 0 && isatty(STDERR_FILENO) && !(no_color && no_color[0]));
    return TW_OK;
}

/* "{rank}" -> the rank, everywhere in the path. */
char *tw_log_expand_path(const char *path)
{
    char rank[16];
    snprintf(rank, sizeof rank, "%d", tw_log_process_info()->rank);
    size_t n = strlen(path) + 1;
    for (const char *p = path; (p = strstr(p, "{rank}")) != NULL; p += 6)
        n += strlen(rank);
    char *out = malloc(n), *w = out;
    if (!out)
        return NULL;
    for (const char *p = path; *p;) {
        if (strncmp(p, "{rank}", 6) == 0) {
            w = stpcpy(w, rank);
            p += 6;
        } else {
            *w++ = *p++;
        }
    }
    *w = '\0';
    return out;
}

int tw_log_sink_new_file(const char *expanded_path, const tw_log_sink_options *o, tw_log_sink **out)
{
    int rc = sink_new(TW_SINK_FILE, o, out);
    if (rc != TW_OK)
        return rc;
    tw_log_sink *s = *out;
    s->path = strdup(expanded_path);
    if (!s->path) {
        tw_log_sink_free(s);
        return TW_ENOMEM;
    }
    uint64_t max_bytes = o ? o->max_bytes : 0;
    unsigned backups = o ? o->backups : 0;
    rc = tw_rotating_open(s->path, max_bytes, backups, &s->file);
    if (rc == TW_OK && s->flush_level > TW_LEVEL_DEBUG)
        rc = tw_rotating_set_buffer(s->file, FILE_BUFFER);
    if (rc != TW_OK) { /* kept: its records are dropped and counted */
        fprintf(stderr, "trainwatch log: cannot open %s: %s; its records are dropped\n", s->path,
                strerror(errno ? errno : EIO));
        s->failing = true;
    }
    return rc;
}

int tw_log_sink_new_callback(tw_log_callback fn, void *arg, const tw_log_sink_options *o, tw_log_sink **out)
{
    int rc = sink_new(TW_SINK_CALLBACK, o, out);
    if (rc == TW_OK) {
        (*out)->callback = fn;
        (*out)->callback_arg = arg;
    }
    return rc;
}

void tw_log_sink_free(tw_log_sink *s)
{
    if (!s)
        return;
    tw_rotating_close(s->file);
    tw_log_pattern_free(s->pattern);
    pthread_mutex_destroy(&s->lock);
    free(s->path);
    free(s);
}

int tw_log_sink_threshold(const tw_log_sink *s)
{
    int level = s->level;
    if (s->kind == TW_SINK_CONSOLE && tw_log_process_info()->rank != 0 && s->other_ranks_level > level)
        level = s->other_ranks_level;
    return level;
}

uint64_t tw_log_sink_dropped(const tw_log_sink *s)
{
    return s ? atomic_load(&s->dropped) : 0;
}

static void drop(tw_log_sink *s, uint64_t n)
{
    atomic_fetch_add(&s->dropped, n);
    tw_log_count_drop(n);
}

static const char *color_of(int level)
{
    if (level >= TW_LEVEL_CRITICAL)
        return "\x1b[1;31m";
    if (level >= TW_LEVEL_ERROR)
        return "\x1b[31m";
    if (level >= TW_LEVEL_WARNING)
        return "\x1b[33m";
    if (level >= TW_LEVEL_INFO)
        return "";
    return "\x1b[2m";
}

static bool write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static void console_write(tw_log_sink *s, const tw_log_rec *r, const char *line, size_t len)
{
    bool ok;
    if (s->color && color_of(r->level)[0]) {
        char b[TW_LOG_LINE_MAX + 32];
        tw_log_out o = {b, 0, sizeof b - 1, false};
        tw_out_str(&o, color_of(r->level));
        tw_out_mem(&o, line, len - 1);
        tw_out_str(&o, "\x1b[0m\n");
        ok = write_all(STDERR_FILENO, b, o.len);
    } else {
        ok = write_all(STDERR_FILENO, line, len);
    }
    if (!ok)
        drop(s, 1);
}

/* Says once that a file stopped working, and once that it works again. */
static void report_file_state(tw_log_sink *s, bool in_signal)
{
    bool failing = !s->file || tw_rotating_failing(s->file);
    if (failing == s->failing || in_signal)
        return;
    s->failing = failing;
    if (failing)
        fprintf(stderr, "trainwatch log: cannot write %s: %s; dropping its records until it works again\n", s->path,
                tw_rotating_error(s->file));
    else
        fprintf(stderr, "trainwatch log: %s is written again (%llu records dropped so far)\n", s->path,
                (unsigned long long)atomic_load(&s->dropped));
}

static void file_write(tw_log_sink *s, const tw_log_rec *r, const char *line, size_t len, bool in_signal)
{
    if (!s->file) {
        drop(s, 1);
        return;
    }
    uint64_t before = tw_rotating_dropped_lines(s->file);
    if (in_signal) {
        tw_rotating_flush_signal_safe(s->file);
        if (!write_all(tw_rotating_fd(s->file), line, len))
            drop(s, 1);
        return;
    }
    tw_rotating_write_line(s->file, line, len);
    if (r->level >= s->flush_level && s->flush_level > TW_LEVEL_DEBUG)
        tw_rotating_flush(s->file);
    uint64_t after = tw_rotating_dropped_lines(s->file);
    if (after > before)
        drop(s, after - before);
    report_file_state(s, false);
}

void tw_log_sink_write(tw_log_sink *s, const tw_log_rec *r, const char *line, size_t len, bool in_signal)
{
    if (s->kind == TW_SINK_CALLBACK) {
        if (in_signal)
            return; /* a callback may do anything: not from a signal handler */
        tw_log_record rec = {
            .time = (double)r->ns / 1e9,
            .level = r->level,
            .logger = r->logger,
            .message = r->message,
            .file = r->file,
            .func = r->func,
            .line = r->line,
            .rank = tw_log_process_info()->rank,
            .world_size = tw_log_process_info()->world_size,
            .fields = r->fields,
            .field_count = r->field_count,
            .text = line,
            .text_len = len - 1,
        };
        char message[TW_LOG_LINE_MAX]; /* the message is a view: the callback gets a C string */
        size_t n = r->message_len < sizeof message - 1 ? r->message_len : sizeof message - 1;
        memcpy(message, r->message, n);
        message[n] = '\0';
        rec.message = message;
        s->callback(&rec, s->callback_arg);
        return;
    }
    bool locked = in_signal ? pthread_mutex_trylock(&s->lock) == 0 : pthread_mutex_lock(&s->lock) == 0;
    if (s->kind == TW_SINK_CONSOLE)
        console_write(s, r, line, len);
    else
        file_write(s, r, line, len, in_signal);
    if (locked)
        pthread_mutex_unlock(&s->lock);
}

void tw_log_sink_flush(tw_log_sink *s, bool in_signal)
{
    if (s->kind != TW_SINK_FILE || !s->file)
        return;
    if (in_signal) {
        tw_rotating_flush_signal_safe(s->file);
        return;
    }
    pthread_mutex_lock(&s->lock);
    uint64_t before = tw_rotating_dropped_lines(s->file);
    tw_rotating_flush(s->file);
    uint64_t after = tw_rotating_dropped_lines(s->file);
    if (after > before)
        drop(s, after - before);
    report_file_state(s, false);
    pthread_mutex_unlock(&s->lock);
}

bool tw_log_sink_same(const tw_log_sink *s, tw_sink_kind kind, const char *path, tw_log_callback fn, void *arg)
{
    if (s->kind != kind)
        return false;
    if (kind == TW_SINK_FILE)
        return strcmp(s->path, path) == 0;
    if (kind == TW_SINK_CALLBACK)
        return s->callback == fn && s->callback_arg == arg;
    return true;
}
