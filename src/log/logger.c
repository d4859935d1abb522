/*
 * logger.c: the logger tree and its gates, and the path of one record:
 * gate, redaction, one formatting per format, the sinks of the logger and
 * its ancestors (the rank facts and level names are in process.c).
 *
 * Loggers live in one table for the life of the process (handles stay
 * valid); their sinks are lists pushed under the registry lock and read
 * without it. Each logger keeps a gate, the lowest level any sink in its
 * chain takes raised to the logger's level, so a disabled call is a load
 * and a branch in the caller (tw_log_enabled).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "trainwatch/error.h"
#include "trainwatch/metrics.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static tw_logger *loggers[TW_LOGGERS_MAX];
static size_t logger_count;
static tw_log_sink *last_resort; /* Python's logging.lastResort: WARNING and up to stderr when no sink */

void tw_log_set_rank(int rank, int local_rank, int world_size)
{
    tw_log_process_set(rank, local_rank, world_size);
    tw_log_gates_update();
}

/* ---- the tree --------------------------------------------------------------- */

static tw_logger *find_locked(const char *name)
{
    for (size_t i = 0; i < logger_count; i++) {
        if (strcmp(loggers[i]->name, name) == 0)
            return loggers[i];
    }
    return NULL;
}

static int effective_level(const tw_logger *l)
{
    for (; l; l = l->parent) {
        if (l->level != TW_LEVEL_NOTSET)
            return l->level;
    }
    return TW_LEVEL_INFO;
}

static int gate_of(const tw_logger *l)
{
    int lowest = TW_LEVEL_OFF + 1;
    for (const tw_logger *a = l; a; a = a->parent) {
        for (tw_log_sink *s = atomic_load(&a->sinks); s; s = s->next) {
            int t = tw_log_sink_threshold(s);
            if (t < lowest)
                lowest = t;
        }
    }
    if (lowest > TW_LEVEL_OFF)
        lowest = TW_LEVEL_WARNING; /* only the last resort */
    int level = effective_level(l);
    return level > lowest ? level : lowest;
}

static void gates_update_locked(void)
{
    for (size_t i = 0; i < logger_count; i++)
        __atomic_store_n(&loggers[i]->gate.threshold, gate_of(loggers[i]), __ATOMIC_RELAXED);
}

void tw_log_gates_update(void)
{
    pthread_mutex_lock(&registry_lock);
    gates_update_locked();
    pthread_mutex_unlock(&registry_lock);
}

static tw_logger *get_locked(const char *name)
{
    tw_logger *l = find_locked(name);
    if (l || logger_count == TW_LOGGERS_MAX)
        return l;
    tw_logger *parent = NULL;
    if (name[0]) { /* "a.b.c" -> "a.b" -> "a" -> "" */
        const char *dot = strrchr(name, '.');
        char up[512];
        size_t n = dot ? (size_t)(dot - name) : 0;
        if (n >= sizeof up)
            n = sizeof up - 1;
        memcpy(up, name, n);
        up[n] = '\0';
        parent = get_locked(up);
        if (!parent)
            return NULL;
    }
    l = calloc(1, sizeof *l);
    if (!l || !(l->name = strdup(name))) {
        free(l);
        return NULL;
    }
    l->parent = parent;
    loggers[logger_count++] = l;
    l->gate.threshold = gate_of(l);
    return l;
}

tw_logger *tw_logger_get(const char *name)
{
    tw_log_process_info();
    pthread_mutex_lock(&registry_lock);
    tw_logger *l = get_locked(name ? name : "");
    pthread_mutex_unlock(&registry_lock);
    return l;
}

const char *tw_logger_name(const tw_logger *l)
{
    return l ? l->name : NULL;
}

void tw_logger_set_level(tw_logger *l, int level)
{
    if (!l)
        return;
    pthread_mutex_lock(&registry_lock);
    l->level = level;
    gates_update_locked();
    pthread_mutex_unlock(&registry_lock);
}

int tw_logger_level(const tw_logger *l)
{
    return effective_level(l);
}

/* ---- sinks on loggers --------------------------------------------------------- */

static tw_log_sink *find_sink(const tw_logger *l, tw_sink_kind kind, const char *path, tw_log_callback fn, void *arg)
{
    for (; l; l = l->parent) {
        for (tw_log_sink *s = atomic_load(&l->sinks); s; s = s->next) {
            if (tw_log_sink_same(s, kind, path, fn, arg))
                return s;
        }
    }
    return NULL;
}

/* The duplicate guard: a sink the logger or an ancestor has is returned,
 * with the new level, instead of being added again. */
static int add_sink(tw_logger *l, tw_sink_kind kind, const char *path, tw_log_callback fn, void *arg,
                    const tw_log_sink_options *o, tw_log_sink **out)
{
    if (!l)
        return TW_EINVAL;
    tw_log_process_info();
    pthread_mutex_lock(&registry_lock);
    char *expanded = path ? tw_log_expand_path(path) : NULL;
    tw_log_sink *s = path && !expanded ? NULL : find_sink(l, kind, expanded, fn, arg);
    int rc = path && !expanded ? TW_ENOMEM : TW_OK;
    if (s) {
        s->level = o ? o->level : TW_LEVEL_NOTSET;
    } else if (rc == TW_OK) {
        if (kind == TW_SINK_CONSOLE)
            rc = tw_log_sink_new_console(o, &s);
        else if (kind == TW_SINK_FILE)
            rc = tw_log_sink_new_file(expanded, o, &s);
        else
            rc = tw_log_sink_new_callback(fn, arg, o, &s);
        if (s && (rc == TW_OK || kind == TW_SINK_FILE)) {
            s->next = atomic_load(&l->sinks);
            atomic_store(&l->sinks, s);
        }
    }
    gates_update_locked();
    pthread_mutex_unlock(&registry_lock);
    free(expanded);
    if (out)
        *out = s;
    return rc;
}

int tw_log_add_console(tw_logger *l, const tw_log_sink_options *o, tw_log_sink **out)
{
    return add_sink(l, TW_SINK_CONSOLE, NULL, NULL, NULL, o, out);
}

int tw_log_add_file(tw_logger *l, const char *path, const tw_log_sink_options *o, tw_log_sink **out)
{
    return path ? add_sink(l, TW_SINK_FILE, path, NULL, NULL, o, out) : TW_EINVAL;
}

int tw_log_add_callback(tw_logger *l, tw_log_callback fn, void *arg, const tw_log_sink_options *o, tw_log_sink **out)
{
    return fn ? add_sink(l, TW_SINK_CALLBACK, NULL, fn, arg, o, out) : TW_EINVAL;
}

/* A sink's level is part of its loggers' gates. */
void tw_log_sink_set_level(tw_log_sink *s, int level)
{
    if (s) {
        s->level = level;
        tw_log_gates_update();
    }
}

void tw_log_each_sink(void (*fn)(tw_log_sink *s, void *arg), void *arg)
{
    size_t n = logger_count; /* loggers are only ever added */
    for (size_t i = 0; i < n; i++) {
        for (tw_log_sink *s = atomic_load(&loggers[i]->sinks); s; s = s->next)
            fn(s, arg);
    }
}

/* ---- one record ---------------------------------------------------------------- */

#define FORMATS_CACHED 3

typedef struct formatted {
    const tw_log_pattern *pattern; /* NULL with json */
    bool json, done;
    char *line;
    size_t len;
} formatted;

static const char *format_for(formatted *cache, const tw_log_sink *s, const tw_log_rec *r, size_t *len)
{
    const tw_log_pattern *pattern = s->json ? NULL : s->pattern ? s->pattern : tw_log_pattern_default();
    size_t k = 0;
    while (k < FORMATS_CACHED - 1 && cache[k].done && (cache[k].json != s->json || cache[k].pattern != pattern))
        k++;
    formatted *f = &cache[k];
    if (!f->done || f->json != s->json || f->pattern != pattern) {
        tw_log_out o = {f->line, 0, TW_LOG_LINE_MAX - 1, false};
        if (s->json)
            tw_log_json_format(r, &o);
        else if (pattern)
            tw_log_pattern_format(pattern, r, &o);
        tw_out_end(&o);
        f->json = s->json;
        f->pattern = pattern;
        f->len = o.len;
        f->done = true;
    }
    *len = f->len;
    return f->line;
}

void tw_log_dispatch_with(const tw_logger *l, const tw_log_rec *r, bool in_signal, char *lines)
{
    formatted cache[FORMATS_CACHED];
    for (size_t k = 0; k < FORMATS_CACHED; k++)
        cache[k] = (formatted){.line = lines + k * TW_LOG_LINE_MAX};
    bool any = false;
    for (const tw_logger *a = l; a; a = a->parent) {
        for (tw_log_sink *s = atomic_load(&a->sinks); s; s = s->next) {
            any = true;
            if (r->level < tw_log_sink_threshold(s))
                continue;
            size_t len;
            const char *line = format_for(cache, s, r, &len);
            tw_log_sink_write(s, r, line, len, in_signal);
        }
    }
    if (!any && r->level >= TW_LEVEL_WARNING && last_resort) {
        size_t len;
        const char *line = format_for(cache, last_resort, r, &len);
        tw_log_sink_write(last_resort, r, line, len, in_signal);
    }
}

typedef struct thread_buffers {
    char storage[2 * TW_LOG_LINE_MAX];
    char scratch[TW_LOG_LINE_MAX];
    tw_log_field fields[TW_LOG_FIELDS_MAX];
    char lines[FORMATS_CACHED * TW_LOG_LINE_MAX];
} thread_buffers;

static pthread_key_t buffers_key;
static pthread_once_t buffers_once = PTHREAD_ONCE_INIT;
static _Thread_local thread_buffers *buffers;

static void buffers_init(void)
{
    pthread_key_create(&buffers_key, free);
    tw_log_sink_new_console(NULL, &last_resort);
    if (last_resort)
        last_resort->level = TW_LEVEL_WARNING;
}

static thread_buffers *thread_buffers_get(void)
{
    if (!buffers) {
        pthread_once(&buffers_once, buffers_init);
        buffers = malloc(sizeof *buffers);
        if (buffers)
            pthread_setspecific(buffers_key, buffers);
    }
    return buffers;
}

void tw_log_dispatch(const tw_logger *l, const tw_log_rec *r, bool in_signal)
{
    (void)in_signal;
    thread_buffers *b = thread_buffers_get();
    if (!b) {
        tw_log_count_drop(1);
        return;
    }
    tw_log_rec copy;
    const tw_log_rec *redacted =
        tw_log_redact_record(r, &copy, b->fields, b->storage, sizeof b->storage, b->scratch, sizeof b->scratch);
    tw_log_dispatch_with(l, redacted, false, b->lines);
}

static long thread_id(void)
{
    static _Thread_local long id;
    if (!id)
        id = (long)syscall(SYS_gettid);
    return id;
}

void tw_log_write(tw_logger *l, int level, const char *file, const char *func, int line, const char *message,
                  const tw_log_field *fields, size_t field_count)
{
    tw_log_write_as(l, NULL, level, file, func, line, message, fields, field_count);
}

void tw_log_write_as(tw_logger *l, const char *name, int level, const char *file, const char *func, int line,
                     const char *message, const tw_log_field *fields, size_t field_count)
{
    if (!tw_log_enabled(l, level))
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tw_log_rec r = {
        .ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec,
        .level = level,
        .logger = name ? name : l->name,
        .message = message ? message : "",
        .file = file,
        .func = func,
        .line = line,
        .thread = thread_id(),
        .fields = fields,
        .field_count = fields ? field_count : 0,
    };
    r.message_len = strlen(r.message);
    tw_log_clock_refresh(r.ns);
    if (tw_log_async_push(l, &r))
        return;
    tw_log_dispatch(l, &r, false);
}

/* ---- counts, flushing, setup, shutdown ---------------------------------------- */

static void flush_one(tw_log_sink *s, void *arg)
{
    (void)arg;
    tw_log_sink_flush(s, false);
}

void tw_log_flush(void)
{
    tw_log_async_flush();
    tw_log_each_sink(flush_one, NULL);
}

tw_log_options tw_log_options_default(void)
{
    return (tw_log_options){
        .level = TW_LEVEL_INFO,
        .console = true,
        .console_level = TW_LEVEL_INFO,
        .file_level = TW_LEVEL_DEBUG,
        .max_bytes = 10 * 1000 * 1000,
        .backups = 5,
    };
}

static void at_exit(void)
{
    tw_log_flush();
}

static void register_exit(void)
{
    atexit(at_exit);
}

/* The async queue and the crash handler deliver through this file's dispatch. */
static void set_delivery(void)
{
    tw_log_delivery d = {.dispatch = tw_log_dispatch,
                         .dispatch_with = tw_log_dispatch_with,
                         .each_sink = tw_log_each_sink,
                         .drops = tw_logger_get("trainwatch.log")};
    tw_log_set_delivery(&d);
}

static pthread_once_t delivery_once = PTHREAD_ONCE_INIT;

int tw_log_async_start(size_t capacity)
{
    pthread_once(&delivery_once, set_delivery);
    return tw_log_queue_start(capacity);
}

void tw_log_install_crash_handlers(void)
{
    pthread_once(&delivery_once, set_delivery);
    tw_log_install_signal_handlers();
}

int tw_log_setup(const tw_log_options *o)
{
    static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
    tw_log_options d = tw_log_options_default();
    if (!o)
        o = &d;
    tw_logger *l = tw_logger_get(o->logger);
    if (!l)
        return TW_ENOMEM;
    tw_logger_set_level(l, o->level);
    int first = TW_OK, rc;
    tw_log_sink_options so = tw_log_sink_options_default();
    so.pattern = o->pattern;
    if (o->console) {
        so.level = o->console_level;
        if ((rc = tw_log_add_console(l, &so, NULL)) != TW_OK && first == TW_OK)
            first = rc;
    }
    so.max_bytes = o->max_bytes;
    so.backups = o->backups;
    so.level = o->file_level;
    if (o->file_path && (rc = tw_log_add_file(l, o->file_path, &so, NULL)) != TW_OK && first == TW_OK)
        first = rc;
    so.json = true;
    if (o->json_path && (rc = tw_log_add_file(l, o->json_path, &so, NULL)) != TW_OK && first == TW_OK)
        first = rc;
    if (o->async && (rc = tw_log_async_start(0)) != TW_OK && first == TW_OK)
        first = rc;
    tw_log_install_crash_handlers();
    pthread_once(&exit_once, register_exit);
    return first;
}

void tw_log_shutdown(void)
{
    tw_log_async_stop();
    tw_log_flush();
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < logger_count; i++) {
        tw_log_sink *s = atomic_exchange(&loggers[i]->sinks, NULL);
        while (s) {
            tw_log_sink *next = s->next;
            tw_log_sink_free(s);
            s = next;
        }
        loggers[i]->level = TW_LEVEL_NOTSET;
    }
    gates_update_locked();
    pthread_mutex_unlock(&registry_lock);
}

typedef struct dropped_metric {
    tw_counter *counter;
    uint64_t seen;
} dropped_metric;

static void collect_dropped(tw_registry *r, void *arg)
{
    (void)r;
    dropped_metric *m = arg;
    uint64_t now = tw_log_dropped_total();
    if (now > m->seen)
        tw_counter_add(m->counter, (double)(now - m->seen));
    m->seen = now;
}

int tw_log_register_metrics(struct tw_registry *r)
{
    dropped_metric *m = calloc(1, sizeof *m);
    if (!m)
        return TW_ENOMEM;
    int rc = tw_counter_new(r, "trainwatch_log_dropped_total",
                            "Log records dropped: full async queue, full disk or unwritable file.", &m->counter);
    if (rc == TW_OK)
        rc = tw_registry_add_collector(r, collect_dropped, m, free);
    if (rc != TW_OK)
        free(m);
    return rc;
}
