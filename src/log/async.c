/*
 * async.c: async mode and crash safety.
 *
 * Async: a bounded lock-free queue (Vyukov's bounded MPMC ring: one
 * sequence number per cell, one CAS per push) of fixed-size cells into which
 * a log call copies its record (message, strings and fields), and one
 * writer thread that redacts, formats and writes them. A record too big for
 * a cell (a traceback, many fields) is copied whole into one allocated
 * block the cell points to, up to what a synchronous call writes (16 KiB of
 * text, 64 fields), so async and sync logs hold the same lines; only when
 * that allocation fails is the record cut to the cell. A full
 * queue drops the record and counts it: the training thread never waits.
 * The writer says how many were dropped once space returns.
 *
 * Crash: handlers for SIGSEGV, SIGBUS, SIGFPE and SIGABRT stop the writer,
 * write what is queued and what the file sinks hold in their buffers with
 * async-signal-safe calls only (static buffers, write(2), no locks waited
 * on, no allocation), then raise the signal again with the handler that was
 * there before (the default action: the core dump and exit status stay).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "trainwatch/error.h"

#define CELL_TEXT   1600
#define CELL_FIELDS 12
#define NO_STRING   UINT16_MAX

typedef struct cell_record {
    int64_t ns;
    long thread;
    const tw_logger *logger;
    int level, line;
    uint16_t message_at, message_len, file_at, func_at, name_at, used;
    uint8_t field_count;
    struct {
        tw_log_field field;        /* strings as offsets, fixed up when read */
        uint16_t key_at, value_at; /* value_at: string value or summary type */
        uint16_t shape_at;         /* summaries: int64 shape */
    } fields[CELL_FIELDS];
    char text[CELL_TEXT];
    tw_log_rec *spill; /* the record, when it did not fit: one block, freed by the writer */
} cell_record;

typedef struct cell {
    _Atomic size_t sequence;
    cell_record record;
} cell;

static cell *cells;
static size_t mask;
static _Atomic size_t enqueue_pos, dequeue_pos, done_pos;
static atomic_bool active, stopping, crashing, writer_busy, writer_sleeping;
static _Atomic uint64_t pending_drops;
static pthread_t writer;
static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static tw_log_delivery delivery; /* set by logger.c before the writer or a crash handler runs */

/* ---- copying a record into a cell and out again ----------------------------- */

static uint16_t put(cell_record *c, const void *p, size_t n, bool terminate)
{
    if (!p)
        return NO_STRING;
    size_t room = CELL_TEXT - c->used;
    if (room < (terminate ? 1u : 0u) + n) {
        if (!terminate || room < 1)
            return NO_STRING;
        n = room - 1; /* strings are cut to fit */
    }
    uint16_t at = c->used;
    memcpy(c->text + at, p, n);
    c->used = (uint16_t)(c->used + n);
    if (terminate)
        c->text[c->used++] = '\0';
    return at;
}

static size_t string_size(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

/* Bytes of text a record's strings take, as fill() and spill_copy() lay
 * them out (summary shapes 8-aligned). */
static size_t text_size(const tw_log_rec *r, size_t field_count)
{
    size_t n = string_size(r->file) + string_size(r->func) + r->message_len + 1;
    for (size_t i = 0; i < field_count; i++) {
        const tw_log_field *f = &r->fields[i];
        n += string_size(f->key);
        if (f->type == TW_FIELD_STRING)
            n += string_size(f->v.s);
        else if (f->type == TW_FIELD_SUMMARY)
            n += string_size(f->v.summary.type_name) + 8 + 16 * sizeof(int64_t);
    }
    return n;
}

static char *copy_string(char **to, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *at = memcpy(*to, s, n);
    *to += n;
    return at;
}

/* One block holding the record, its fields and every string they point to:
 * the message up to TW_LOG_LINE_MAX, up to TW_LOG_FIELDS_MAX fields. NULL
 * when it cannot be allocated. */
static tw_log_rec *spill_copy(const tw_log_rec *r, const char *own_name)
{
    size_t nf = r->field_count < TW_LOG_FIELDS_MAX ? r->field_count : TW_LOG_FIELDS_MAX;
    tw_log_rec cut = *r;
    if (cut.message_len > TW_LOG_LINE_MAX)
        cut.message_len = TW_LOG_LINE_MAX;
    size_t head = sizeof(tw_log_rec) + nf * sizeof(tw_log_field);
    head = (head + 7u) & ~(size_t)7u;
    /* a binding's own logger name (tw_log_write_as) travels with the record */
    const char *name = r->logger && r->logger != own_name ? r->logger : NULL;
    tw_log_rec *copy = malloc(head + text_size(&cut, nf) + string_size(name));
    if (!copy)
        return NULL;
    tw_log_field *fields = (tw_log_field *)(copy + 1);
    char *to = (char *)copy + head;
    *copy = cut;
    copy->fields = fields;
    copy->field_count = nf;
    copy->logger = copy_string(&to, name);
    copy->file = copy_string(&to, r->file);
    copy->func = copy_string(&to, r->func);
    copy->message = memcpy(to, r->message ? r->message : "", cut.message_len);
    to += cut.message_len;
    *to++ = '\0';
    for (size_t i = 0; i < nf; i++) {
        fields[i] = r->fields[i];
        fields[i].key = copy_string(&to, r->fields[i].key);
        if (fields[i].type == TW_FIELD_STRING) {
            fields[i].v.s = copy_string(&to, r->fields[i].v.s);
        } else if (fields[i].type == TW_FIELD_SUMMARY) {
            tw_field_summary_value *sv = &fields[i].v.summary;
            sv->type_name = copy_string(&to, sv->type_name);
            to = (char *)(((uintptr_t)to + 7u) & ~(uintptr_t)7u);
            size_t ndim = sv->ndim < 16 ? sv->ndim : 16;
            if (sv->shape && ndim)
                sv->shape = memcpy(to, sv->shape, ndim * sizeof(int64_t));
            sv->ndim = sv->shape ? ndim : 0;
            to += ndim * sizeof(int64_t);
        }
    }
    return copy;
}

static void fill(cell_record *c, const tw_logger *l, const tw_log_rec *r)
{
    c->ns = r->ns;
    c->thread = r->thread;
    c->logger = l;
    c->level = r->level;
    c->line = r->line;
    c->used = 0;
    c->spill = NULL;
    /* a binding's own logger name (tw_log_write_as) travels with the record */
    const char *name = r->logger && r->logger != l->name ? r->logger : NULL;
    if (r->field_count > CELL_FIELDS || text_size(r, r->field_count) + string_size(name) > CELL_TEXT) {
        if ((c->spill = spill_copy(r, l->name)) != NULL)
            return;
    }
    c->file_at = put(c, r->file, r->file ? strlen(r->file) : 0, true);
    c->func_at = put(c, r->func, r->func ? strlen(r->func) : 0, true);
    c->name_at = name ? put(c, name, strlen(name), true) : NO_STRING;
    size_t nf = r->field_count < CELL_FIELDS ? r->field_count : CELL_FIELDS;
    c->field_count = 0;
    for (size_t i = 0; i < nf; i++) {
        const tw_log_field *f = &r->fields[i];
        if (!f->key)
            continue;
        __typeof__(c->fields[0]) *cf = &c->fields[c->field_count];
        cf->field = *f;
        cf->key_at = put(c, f->key, strlen(f->key), true);
        cf->value_at = cf->shape_at = NO_STRING;
        if (f->type == TW_FIELD_STRING)
            cf->value_at = put(c, f->v.s, f->v.s ? strlen(f->v.s) : 0, true);
        else if (f->type == TW_FIELD_SUMMARY) {
            const char *t = f->v.summary.type_name;
            cf->value_at = put(c, t, t ? strlen(t) : 0, true);
            c->used = (uint16_t)((c->used + 7u) & ~7u);
            if (c->used > CELL_TEXT)
                c->used = CELL_TEXT;
            size_t ndim = f->v.summary.ndim < 16 ? f->v.summary.ndim : 16;
            cf->shape_at = put(c, f->v.summary.shape, ndim * sizeof(int64_t), false);
            if (cf->shape_at == NO_STRING)
                cf->field.v.summary.ndim = 0;
            else
                cf->field.v.summary.ndim = ndim;
        }
        if (cf->key_at != NO_STRING)
            c->field_count++;
    }
    size_t room = CELL_TEXT - c->used;
    size_t n = r->message_len < room ? r->message_len : room;
    c->message_at = put(c, r->message, n, false);
    c->message_len = (uint16_t)(c->message_at == NO_STRING ? 0 : n);
}

static const char *at(cell_record *c, uint16_t offset)
{
    return offset == NO_STRING ? NULL : c->text + offset;
}

static void read_back(cell_record *c, tw_log_rec *r, tw_log_field *fields)
{
    if (c->spill) {
        *r = *c->spill;
        if (!r->logger)
            r->logger = c->logger->name;
        return;
    }
    for (size_t i = 0; i < c->field_count; i++) {
        fields[i] = c->fields[i].field;
        fields[i].key = at(c, c->fields[i].key_at);
        if (fields[i].type == TW_FIELD_STRING)
            fields[i].v.s = at(c, c->fields[i].value_at);
        else if (fields[i].type == TW_FIELD_SUMMARY) {
            fields[i].v.summary.type_name = at(c, c->fields[i].value_at);
            fields[i].v.summary.shape = (const int64_t *)(const void *)at(c, c->fields[i].shape_at);
        }
    }
    *r = (tw_log_rec){
        .ns = c->ns,
        .level = c->level,
        .logger = c->name_at != NO_STRING ? c->text + c->name_at : c->logger->name,
        .message = c->message_at == NO_STRING ? "" : c->text + c->message_at,
        .message_len = c->message_len,
        .file = at(c, c->file_at),
        .func = at(c, c->func_at),
        .line = c->line,
        .thread = c->thread,
        .fields = fields,
        .field_count = c->field_count,
    };
}

/* ---- the queue ----------------------------------------------------------------- */

bool tw_log_async_push(const tw_logger *l, const tw_log_rec *r)
{
    if (!atomic_load_explicit(&active, memory_order_acquire))
        return false;
    size_t pos = atomic_load_explicit(&enqueue_pos, memory_order_relaxed);
    cell *c;
    for (;;) {
        c = &cells[pos & mask];
        size_t seq = atomic_load_explicit(&c->sequence, memory_order_acquire);
        intptr_t diff = (intptr_t)seq - (intptr_t)pos;
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&enqueue_pos, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else if (diff < 0) { /* full: drop, count, never wait */
            atomic_fetch_add_explicit(&pending_drops, 1, memory_order_relaxed);
            tw_log_count_drop(1);
            return true;
        } else {
            pos = atomic_load_explicit(&enqueue_pos, memory_order_relaxed);
        }
    }
    fill(&c->record, l, r);
    atomic_store_explicit(&c->sequence, pos + 1, memory_order_release);
    if (atomic_load_explicit(&writer_sleeping, memory_order_relaxed))
        pthread_cond_signal(&wake);
    return true;
}

/* Takes the oldest record; NULL when empty. release() gives the cell back. */
static cell *pop(size_t *pos_out)
{
    size_t pos = atomic_load_explicit(&dequeue_pos, memory_order_relaxed);
    for (;;) {
        cell *c = &cells[pos & mask];
        size_t seq = atomic_load_explicit(&c->sequence, memory_order_acquire);
        intptr_t diff = (intptr_t)seq - (intptr_t)(pos + 1);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&dequeue_pos, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                *pos_out = pos;
                return c;
            }
        } else if (diff < 0) {
            return NULL;
        } else {
            pos = atomic_load_explicit(&dequeue_pos, memory_order_relaxed);
        }
    }
}

static void release(cell *c, size_t pos)
{
    atomic_store_explicit(&c->sequence, pos + mask + 1, memory_order_release);
    atomic_fetch_add_explicit(&done_pos, 1, memory_order_release);
}

static void write_cell(cell *c)
{
    tw_log_rec r;
    tw_log_field fields[CELL_FIELDS];
    read_back(&c->record, &r, fields);
    delivery.dispatch(c->record.logger, &r, false);
    free(c->record.spill);
    c->record.spill = NULL;
}

static void say_drops(void)
{
    uint64_t n = atomic_load(&pending_drops); /* taken off after it is said: tw_log_flush waits for that */
    if (n == 0)
        return;
    const tw_logger *root = delivery.drops;
    tw_log_field f[] = {tw_field_int("dropped", (int64_t)n),
                        tw_field_int("dropped_total", (int64_t)tw_log_dropped_total())};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tw_log_rec r = {.ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec,
                    .level = TW_LEVEL_WARNING,
                    .logger = "trainwatch.log",
                    .message = "log records dropped: the async queue was full",
                    .fields = f,
                    .field_count = 2};
    r.message_len = strlen(r.message);
    if (root)
        delivery.dispatch(root, &r, false);
    atomic_fetch_sub(&pending_drops, n);
}

static void sleep_ms(long ms)
{
    struct timespec t = {0, ms * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

static void flush_sink(tw_log_sink *s, void *arg)
{
    tw_log_sink_flush(s, arg != NULL);
}

static void *writer_main(void *arg)
{
    (void)arg;
    bool wrote = false;
    for (;;) {
        atomic_store(&writer_busy, true);
        if (atomic_load(&crashing)) {
            atomic_store(&writer_busy, false);
            for (;;)
                sleep_ms(1000); /* the crash handler has the queue now */
        }
        size_t pos;
        cell *c = pop(&pos);
        if (c) {
            write_cell(c);
            release(c, pos);
            atomic_store(&writer_busy, false);
            wrote = true;
            continue;
        }
        atomic_store(&writer_busy, false);
        say_drops();
        if (wrote) { /* idle: what the file sinks buffered goes to disk */
            delivery.each_sink(flush_sink, NULL);
            wrote = false;
        }
        if (atomic_load(&stopping))
            return NULL;
        pthread_mutex_lock(&wake_lock);
        atomic_store(&writer_sleeping, true);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 10 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (atomic_load(&dequeue_pos) == atomic_load(&enqueue_pos) && !atomic_load(&stopping))
            pthread_cond_timedwait(&wake, &wake_lock, &until);
        atomic_store(&writer_sleeping, false);
        pthread_mutex_unlock(&wake_lock);
    }
}

void tw_log_set_delivery(const tw_log_delivery *d)
{
    delivery = *d;
}

int tw_log_queue_start(size_t capacity)
{
    if (atomic_load(&active))
        return TW_OK;
    if (capacity == 0)
        capacity = 8192;
    size_t n = 2;
    while (n < capacity && n < ((size_t)1 << 24))
        n <<= 1;
    cells = calloc(n, sizeof *cells);
    if (!cells)
        return TW_ENOMEM;
    mask = n - 1;
    for (size_t i = 0; i < n; i++)
        atomic_init(&cells[i].sequence, i);
    atomic_store(&enqueue_pos, 0);
    atomic_store(&dequeue_pos, 0);
    atomic_store(&done_pos, 0);
    atomic_store(&stopping, false);
    tw_log_process_info();
    tw_log_pattern_default(); /* compiled before a crash could need it */
    if (pthread_create(&writer, NULL, writer_main, NULL) != 0) {
        free(cells);
        cells = NULL;
        return TW_ENOMEM;
    }
    atomic_store_explicit(&active, true, memory_order_release);
    tw_log_install_signal_handlers();
    return TW_OK;
}

void tw_log_async_flush(void)
{
    if (!atomic_load(&active))
        return;
    size_t target = atomic_load(&enqueue_pos);
    pthread_cond_signal(&wake);
    for (int waited = 0; (atomic_load(&done_pos) < target || atomic_load(&pending_drops)) && waited < 10000; waited++) {
        if (atomic_load(&writer_sleeping))
            pthread_cond_signal(&wake);
        sleep_ms(1);
    }
}

void tw_log_async_stop(void)
{
    if (!atomic_load(&active))
        return;
    tw_log_async_flush();
    atomic_store(&active, false);
    atomic_store(&stopping, true);
    pthread_mutex_lock(&wake_lock);
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&wake_lock);
    pthread_join(writer, NULL);
    size_t pos;
    cell *c;
    while ((c = pop(&pos)) != NULL) {
        write_cell(c);
        release(c, pos);
    }
    free(cells);
    cells = NULL;
}

/* ---- fatal signals ---------------------------------------------------------------- */

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGABRT};
static struct sigaction previous[sizeof fatal_signals / sizeof fatal_signals[0]];
static atomic_bool in_crash;

/* Static: a crashing thread may not allocate, and only one gets here. */
static char crash_storage[2 * TW_LOG_LINE_MAX];
static char crash_scratch[TW_LOG_LINE_MAX];
static char crash_lines[3 * TW_LOG_LINE_MAX];
static tw_log_field crash_fields[TW_LOG_FIELDS_MAX];

void tw_log_async_drain_in_signal(void)
{
    if (!cells)
        return;
    for (int i = 0; i < 500 && atomic_load(&writer_busy); i++) { /* let the writer finish its record */
        struct timespec t = {0, 1000000L};
        nanosleep(&t, NULL);
    }
    size_t pos;
    cell *c;
    while ((c = pop(&pos)) != NULL) {
        tw_log_rec r, copy;
        tw_log_field fields[CELL_FIELDS];
        read_back(&c->record, &r, fields);
        const tw_log_rec *red = tw_log_redact_record(&r, &copy, crash_fields, crash_storage, sizeof crash_storage,
                                                     crash_scratch, sizeof crash_scratch);
        delivery.dispatch_with(c->record.logger, red, true, crash_lines);
        release(c, pos);
    }
}

static void on_fatal_signal(int sig, siginfo_t *info, void *context)
{
    (void)info;
    (void)context;
    int saved = errno;
    if (!atomic_exchange(&in_crash, true)) {
        atomic_store(&crashing, true);
        tw_log_redact_signal_mode();
        tw_log_async_drain_in_signal();
        delivery.each_sink(flush_sink, (void *)1);
    }
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
        if (fatal_signals[i] == sig)
            sigaction(sig, &previous[i], NULL);
    }
    errno = saved;
    raise(sig); /* delivered with the previous handler when this one returns */
}

void tw_log_install_signal_handlers(void)
{
    static atomic_bool installed;
    if (atomic_exchange(&installed, true))
        return;
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal_signal;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(fatal_signals[i], &sa, &previous[i]);
    }
}
