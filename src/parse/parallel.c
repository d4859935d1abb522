/*
 * parallel.c: tw_parser_run(): one large plain log read in blocks on several
 * threads; any other input (stdin, gzip, a small file) read in order by
 * parser.c.
 *
 * The file is cut into blocks of p->block_size bytes at line ends. Each
 * block is parsed on a worker thread by a parser of its own into a packed
 * list of records; the calling thread delivers the lists in file order.
 *
 * A block's parser starts from the state the input stood in when the block
 * was handed out, replays the last line that sets its format's lasting
 * state (tw_format.state_lines: hapi's epoch header) and reads the lines
 * just before the block (the warm-up, WARMUP_BYTES), all without keeping
 * records, so that a format lock, the epoch or a traceback in progress is
 * known where the block begins.
 * The block is kept only if that starting state is the same
 * (tw_parser_same_state) as the state the previous block really ended in;
 * otherwise the calling thread parses it again from the true state. The
 * records are therefore those one parser reading the file in order gives;
 * line numbers, which a block's parser counts from LINE_BASE, are made
 * absolute on delivery.
 *
 * Ownership: every parser here belongs to the pool and shares the path of
 * the caller's parser p; p itself is only given the totals at the end.
 */
#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats.h"
#include "parser.h"
#include "scan.h"
#include "trainwatch/error.h"

#define WARMUP_BYTES (64u * 1024u)
#define STATE_SEARCH_BYTES (16u << 20)  /* how far back a state line is looked for */
#define STATE_LINE_MAX 4096u
#define STATE_PREFIXES_MAX 16
#define LINE_BASE (1ull << 40)          /* where a block's parser starts counting lines */
#define IS_BLOCK_LINE(n) ((n) >= TW_LINE_NUMBER_MAX) /* content never gives these */
_Static_assert(LINE_BASE - TW_LINE_NUMBER_MAX > (1ull << 32), "room for a warm-up's lines below LINE_BASE");

/* ---- packed record lists ------------------------------------------------ */

typedef struct packed {
    char *data;
    size_t len, cap;
    bool failed;               /* out of memory: the block is parsed again */
} packed;

/* What a record is stored as: its fixed fields, then its metrics (value and
 * name), exit code and, for events, message and detail; then the source
 * file's name when it is not the input's own (trainwatch JSON lines may
 * name another file). */
enum { FIXED_SIZE = offsetof(tw_record, metrics) };

static bool packed_reserve(packed *pk, size_t more)
{
    if (pk->len + more <= pk->cap)
        return true;
    size_t cap = pk->cap ? pk->cap : 64u * 1024u;
    while (cap < pk->len + more)
        cap *= 2;
    char *data = realloc(pk->data, cap);
    if (!data)
        return false;
    pk->data = data;
    pk->cap = cap;
    return true;
}

static void packed_put(packed *pk, const void *src, size_t n)
{
    memcpy(pk->data + pk->len, src, n);
    pk->len += n;
}

static void pack_record(packed *pk, const char *path, const tw_record *r)
{
    bool event = r->kind == TW_REC_EVENT || r->kind == TW_REC_LINE; /* records with text */
    size_t message = event ? strlen(r->message) + 1 : 0, detail = event ? strlen(r->detail) + 1 : 0;
    size_t file = r->source.file != path ? strlen(r->source.file) + 1 : 0;
    size_t names[TW_METRICS_MAX], metrics = 0;
    for (int i = 0; i < r->metric_count; i++) {
        names[i] = strlen(r->metrics[i].name) + 1;
        metrics += sizeof r->metrics[i].value + names[i];
    }
    uint32_t size = (uint32_t)(sizeof size + FIXED_SIZE + metrics + sizeof r->exit_code + message + detail + 1 + file);
    if (pk->failed || !packed_reserve(pk, size)) {
        pk->failed = true;
        return;
    }
    packed_put(pk, &size, sizeof size);
    packed_put(pk, r, FIXED_SIZE);
    for (int i = 0; i < r->metric_count; i++) { /* names as strings, not TW_NAME_MAX arrays */
        packed_put(pk, &r->metrics[i].value, sizeof r->metrics[i].value);
        packed_put(pk, r->metrics[i].name, names[i]);
    }
    packed_put(pk, &r->exit_code, sizeof r->exit_code);
    packed_put(pk, r->message, message);
    packed_put(pk, r->detail, detail);
    pk->data[pk->len++] = file ? 1 : 0;
    packed_put(pk, r->source.file, file);
}

/* Copies the string at *q into dst and moves *q past its NUL. */
static void take_string(const char **q, char *dst)
{
    size_t n = strlen(*q) + 1;
    memcpy(dst, *q, n);
    *q += n;
}

/* Reads the record at at into r; returns the size it took. */
static size_t unpack_record(const char *at, const char *path, tw_record *r)
{
    uint32_t size;
    memcpy(&size, at, sizeof size);
    const char *q = at + sizeof size;
    memcpy(r, q, FIXED_SIZE);
    q += FIXED_SIZE;
    for (int i = 0; i < r->metric_count; i++) {
        memcpy(&r->metrics[i].value, q, sizeof r->metrics[i].value);
        q += sizeof r->metrics[i].value;
        take_string(&q, r->metrics[i].name);
    }
    memcpy(&r->exit_code, q, sizeof r->exit_code);
    q += sizeof r->exit_code;
    r->message[0] = r->detail[0] = '\0';
    if (r->kind == TW_REC_EVENT || r->kind == TW_REC_LINE) {
        take_string(&q, r->message);
        take_string(&q, r->detail);
    }
    r->source.file = *q++ ? q : path;
    return size;
}

/* ---- the pool ------------------------------------------------------------- */

enum slot_state { SLOT_FREE, SLOT_QUEUED, SLOT_BUSY, SLOT_DONE };

typedef struct slot {
    enum slot_state state;
    uint64_t block;            /* which block it holds */
    tw_parser *parser;         /* parses the block */
    tw_parser *start;          /* the parser's state where the block begins */
    packed records;
    uint64_t begin, end;       /* the block's bytes: [begin, end) */
    int error;
    char *chunk;               /* read buffer */
} slot;

typedef struct pool {
    pthread_mutex_t lock;
    pthread_cond_t queued, done;
    bool stop;
    slot *slots;
    size_t nslots;
    uint64_t nblocks;
    int fd;
    uint64_t block_size;
    const char *all_state_lines[STATE_PREFIXES_MAX + 1]; /* every format's, NULL-terminated */
} pool;

static ssize_t read_at(int fd, char *buf, size_t n, uint64_t at)
{
    for (;;) {
        ssize_t got = pread(fd, buf, n, (off_t)at);
        if (got >= 0 || errno != EINTR)
            return got;
    }
}

/* Where a block begins: just after the first newline at or after at - 1
 * (so blocks start at line starts), or the end of the file. */
static int line_start_from(const pool *pl, char *buf, uint64_t at, uint64_t *out)
{
    uint64_t pos = at - 1;
    for (;;) {
        ssize_t n = read_at(pl->fd, buf, READ_CHUNK, pos);
        if (n < 0)
            return tw_status_from_errno(errno);
        if (n == 0) {
            *out = pos;
            return TW_OK;
        }
        const char *nl = memchr(buf, '\n', (size_t)n);
        if (nl) {
            *out = pos + (uint64_t)(nl - buf) + 1;
            return TW_OK;
        }
        pos += (uint64_t)n;
    }
}

/* True when the line at s (n bytes of it at hand) starts, after a
 * timestamp if it has one, with one of the prefixes. */
static bool is_state_line(const char *s, size_t n, const char *const *prefixes)
{
    double t;
    size_t ts = tw_scan_timestamp(s, n, &t);
    for (const char *const *pre = prefixes; *pre; pre++) {
        if (tw_starts_with(s, n, *pre) || (ts && tw_starts_with(s + ts, n - ts, *pre)))
            return true;
    }
    return false;
}

/* The state lines to look for: the locked format's, or while none is
 * locked (the first blocks), those of every format that has them. */
static const char *const *state_prefixes(const pool *pl, const tw_parser *bp)
{
    size_t count;
    const tw_format *const *table = tw_formats(&count);
    int f = bp->forced >= 0 ? bp->forced : bp->locked;
    if (f >= 0)
        return table[f]->state_lines;
    return pl->all_state_lines[0] ? pl->all_state_lines : NULL;
}

/* The start of the last state line (state_prefixes) in the
 * STATE_SEARCH_BYTES before from, or -1 when there is none (or the format
 * has no state lines). The prefixes are found sixteen bytes at a time, then
 * checked to start a line; chunks overlap so none is cut at an edge. */
static int64_t find_state_line(const pool *pl, const tw_parser *bp, char *buf, uint64_t from)
{
    enum { OVERLAP = 128 };     /* a timestamp and a prefix */
    const char *const *prefixes = state_prefixes(pl, bp);
    if (!prefixes)
        return -1;
    uint64_t floor = from > STATE_SEARCH_BYTES ? from - STATE_SEARCH_BYTES : 0;
    for (uint64_t hi = from; hi > floor;) {
        uint64_t lo = hi - floor > READ_CHUNK ? hi - READ_CHUNK : floor;
        ssize_t got = read_at(pl->fd, buf, (size_t)(hi - lo), lo);
        if (got <= 0)
            return -1;
        const char *end = buf + got;
        int64_t found = -1;
        for (const char *const *pre = prefixes; *pre; pre++) {
            size_t plen = strlen(*pre);
            for (const char *at = buf; (at = tw_find_n(at, (size_t)(end - at), *pre, plen)) != NULL; at++) {
                const char *start = at; /* back to its line's start, over a timestamp at most */
                while (start > buf && start[-1] != '\n' && at - start < OVERLAP / 2)
                    start--;
                bool line_start = start > buf ? start[-1] == '\n' : lo == 0;
                int64_t pos = (int64_t)(lo + (uint64_t)(start - buf));
                if (line_start && pos > found && is_state_line(start, (size_t)(end - start), prefixes))
                    found = pos;
            }
        }
        if (found >= 0)
            return found;
        if (lo == floor)
            break;
        hi = lo + OVERLAP;
    }
    return -1;
}

/* Replays the last line before from that sets the locked format's lasting
 * state (hapi's "Epoch e/n"), without keeping records. */
static void replay_state_line(const pool *pl, slot *s, uint64_t from)
{
    int64_t at = find_state_line(pl, s->parser, s->chunk, from);
    if (at < 0)
        return;
    ssize_t got = read_at(pl->fd, s->chunk, STATE_LINE_MAX, (uint64_t)at);
    const char *nl = got > 0 ? memchr(s->chunk, '\n', (size_t)got) : NULL;
    if (!nl)
        return;
    s->parser->fn = NULL;
    tw_parser_ingest(s->parser, s->chunk, (size_t)(nl - s->chunk) + 1);
}

/* Parses the lines of the WARMUP_BYTES before begin without keeping records,
 * numbered so that the block's first line is LINE_BASE, after replaying the
 * last state line before them. */
static int warm_up(const pool *pl, slot *s)
{
    uint64_t from = s->begin > WARMUP_BYTES ? s->begin - WARMUP_BYTES : 0;
    size_t n = (size_t)(s->begin - from);
    if (n == 0)
        return TW_OK;
    if (from > 0)
        replay_state_line(pl, s, from);
    ssize_t got = read_at(pl->fd, s->chunk, n, from);
    if (got < 0)
        return tw_status_from_errno(errno);
    const char *text = s->chunk;
    /* whole lines only: a block that starts at the end of a file without a
     * final newline has part of a line before it */
    const char *last_nl = memrchr(text, '\n', (size_t)got);
    if (!last_nl)
        return TW_OK;
    const char *end = last_nl + 1;
    if (from > 0) {
        /* the window starts inside a line: skip to the next one */
        const char *nl = memchr(text, '\n', (size_t)(end - text));
        if (!nl)
            return TW_OK;
        text = nl + 1;
    }
    uint64_t lines = 0;
    for (const char *q = text; (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++)
        lines++;
    s->parser->fn = NULL;
    s->parser->line_no = LINE_BASE - lines;
    tw_parser_ingest(s->parser, text, (size_t)(end - text));
    return TW_OK;
}

static void collect(void *arg, const tw_record *r)
{
    slot *s = arg;
    pack_record(&s->records, s->parser->path, r);
}

/* Parses the block's own lines, from begin to the first newline at or after
 * the next block's nominal start (or the end of the file). */
static int parse_block(const pool *pl, slot *s)
{
    bool last = s->block + 1 == pl->nblocks;
    uint64_t limit = (s->block + 1) * pl->block_size - 1; /* the newline ending the block is at or after it */
    uint64_t pos = s->begin;
    tw_parser *bp = s->parser;
    bp->fn = collect;
    bp->arg = s;
    bp->line_no = LINE_BASE;
    bp->stats = (tw_parse_stats){.format = bp->stats.format};
    if (!last && pos > limit) {
        s->end = pos; /* one line longer than the block: it belongs to the block before */
        return TW_OK;
    }
    for (;;) {
        ssize_t n = read_at(pl->fd, s->chunk, READ_CHUNK, pos);
        if (n < 0)
            return tw_status_from_errno(errno);
        if (n == 0) {
            tw_parser_flush_line(bp);
            break;
        }
        size_t take = (size_t)n;
        bool ends = false;
        if (!last && pos + take > limit) {
            size_t from = pos >= limit ? 0 : (size_t)(limit - pos);
            const char *nl = memchr(s->chunk + from, '\n', take - from);
            if (nl) {
                take = (size_t)(nl - s->chunk) + 1;
                ends = true;
            }
        }
        tw_parser_ingest(bp, s->chunk, take);
        pos += take;
        if (ends)
            break;
    }
    s->end = pos;
    return TW_OK;
}

static int run_slot(const pool *pl, slot *s)
{
    s->records.len = 0;
    s->records.failed = false;
    int rc = TW_OK;
    if (s->block > 0)
        rc = line_start_from(pl, s->chunk, s->block * pl->block_size, &s->begin);
    else
        s->begin = 0;
    if (rc == TW_OK && s->block > 0)
        rc = warm_up(pl, s);
    if (rc == TW_OK) {
        tw_parser_copy_state(s->start, s->parser);
        rc = parse_block(pl, s);
    }
    return rc;
}

static void *worker(void *arg)
{
    pool *pl = arg;
    pthread_mutex_lock(&pl->lock);
    for (;;) {
        slot *next = NULL;
        for (size_t i = 0; i < pl->nslots; i++) {
            slot *s = &pl->slots[i];
            if (s->state == SLOT_QUEUED && (!next || s->block < next->block))
                next = s;
        }
        if (pl->stop)
            break;
        if (!next) {
            pthread_cond_wait(&pl->queued, &pl->lock);
            continue;
        }
        next->state = SLOT_BUSY;
        pthread_mutex_unlock(&pl->lock);
        int rc = run_slot(pl, next);
        pthread_mutex_lock(&pl->lock);
        next->error = rc;
        next->state = SLOT_DONE;
        pthread_cond_broadcast(&pl->done);
    }
    pthread_mutex_unlock(&pl->lock);
    return NULL;
}

/* A parser of the pool: the caller's path, no file of its own. */
static tw_parser *pool_parser(const tw_parser *p)
{
    tw_parser *q;
    if (tw_parser_new(&q, "", NULL, p->rank) != TW_OK)
        return NULL;
    free(q->path);
    q->path = p->path;
    q->borrowed_path = true;
    tw_parser_copy_state(q, p);
    return q;
}

static void pool_free(pool *pl)
{
    for (size_t i = 0; i < pl->nslots; i++) {
        tw_parser_close(pl->slots[i].parser);
        tw_parser_close(pl->slots[i].start);
        free(pl->slots[i].records.data);
        free(pl->slots[i].chunk);
    }
    free(pl->slots);
    pthread_mutex_destroy(&pl->lock);
    pthread_cond_destroy(&pl->queued);
    pthread_cond_destroy(&pl->done);
}

static int pool_init(pool *pl, const tw_parser *p)
{
    memset(pl, 0, sizeof *pl);
    pthread_mutex_init(&pl->lock, NULL);
    pthread_cond_init(&pl->queued, NULL);
    pthread_cond_init(&pl->done, NULL);
    pl->fd = p->fd;
    pl->block_size = p->block_size;
    pl->nblocks = (p->size + pl->block_size - 1) / pl->block_size;
    size_t count, n = 0;
    const tw_format *const *table = tw_formats(&count);
    for (size_t i = 0; i < count; i++) {
        for (const char *const *pre = table[i]->state_lines; pre && *pre && n < STATE_PREFIXES_MAX; pre++)
            pl->all_state_lines[n++] = *pre;
    }
    pl->slots = calloc(2 * (size_t)p->jobs, sizeof *pl->slots);
    if (!pl->slots)
        return TW_ENOMEM;
    pl->nslots = 2 * (size_t)p->jobs;
    for (size_t i = 0; i < pl->nslots; i++) {
        slot *s = &pl->slots[i];
        s->parser = pool_parser(p);
        s->start = pool_parser(p);
        s->chunk = malloc(READ_CHUNK > WARMUP_BYTES ? READ_CHUNK : WARMUP_BYTES);
        if (!s->parser || !s->start || !s->chunk)
            return TW_ENOMEM;
    }
    return TW_OK;
}

/* ---- delivery, in file order -------------------------------------------------- */

typedef struct delivery {
    tw_record_fn fn;
    void *arg;
    const char *path;
    uint64_t base;             /* absolute number of the line before LINE_BASE */
    _Atomic uint64_t *progress; /* the caller's parser's: bytes taken in order */
    tw_record scratch;
} delivery;

static void deliver(delivery *d, tw_record *r)
{
    if (IS_BLOCK_LINE(r->source.line))
        r->source.line = r->source.line - LINE_BASE + d->base;
    d->fn(d->arg, r);
}

/* For the parser that holds the true state when it parses directly. */
static void deliver_direct(void *arg, const tw_record *r)
{
    delivery *d = arg;
    d->scratch = *r;
    deliver(d, &d->scratch);
}

static void deliver_packed(delivery *d, const packed *pk)
{
    for (size_t at = 0; at < pk->len;) {
        at += unpack_record(pk->data + at, d->path, &d->scratch);
        deliver(d, &d->scratch);
    }
}

static void add_stats(tw_parse_stats *to, const tw_parse_stats *now, const tw_parse_stats *before)
{
    to->bytes += now->bytes - before->bytes;
    to->lines += now->lines - before->lines;
    to->steps += now->steps - before->steps;
    to->evals += now->evals - before->evals;
    to->events += now->events - before->events;
    to->lines_cut += now->lines_cut - before->lines_cut;
    to->binary_lines += now->binary_lines - before->binary_lines;
}

/* Parses [from, to) with the true-state parser on this thread (to
 * UINT64_MAX: to the end of the file), then the last line if at_end. */
static int parse_in_order(pool *pl, tw_parser *truth, uint64_t from, uint64_t to, bool at_end, char *buf,
                          delivery *d, tw_parse_stats *total)
{
    tw_parse_stats before = truth->stats;
    truth->fn = deliver_direct;
    truth->arg = d;
    int rc = TW_OK;
    for (uint64_t pos = from; pos < to;) {
        size_t want = to - pos < READ_CHUNK ? (size_t)(to - pos) : READ_CHUNK;
        ssize_t n = read_at(pl->fd, buf, want, pos);
        if (n < 0) {
            rc = tw_status_from_errno(errno);
            break;
        }
        if (n == 0)
            break;
        tw_parser_ingest(truth, buf, (size_t)n);
        pos += (uint64_t)n;
    }
    if (rc == TW_OK && at_end)
        tw_parser_flush_line(truth);
    add_stats(total, &truth->stats, &before);
    return rc;
}

static void hand_out(pool *pl, slot *s, uint64_t block, const tw_parser *truth)
{
    tw_parser_copy_state(s->parser, truth);
    s->block = block;
    s->error = TW_OK;
    pthread_mutex_lock(&pl->lock);
    s->state = SLOT_QUEUED;
    pthread_cond_signal(&pl->queued);
    pthread_mutex_unlock(&pl->lock);
}

static void wait_done(pool *pl, slot *s)
{
    pthread_mutex_lock(&pl->lock);
    while (s->state != SLOT_DONE)
        pthread_cond_wait(&pl->done, &pl->lock);
    pthread_mutex_unlock(&pl->lock);
}

/* Takes block s's records when its start matches the truth, else parses it
 * again; either way *truth ends up holding the state after the block. */
static int take_block(pool *pl, slot *s, tw_parser **truth, delivery *d, tw_parse_stats *total)
{
    if (s->error != TW_OK)
        return s->error;
    total->blocks++;
    if (s->records.failed || !tw_parser_same_state(s->start, *truth)) {
        total->blocks_reparsed++;
        /* the truth counts lines on from its own base */
        return parse_in_order(pl, *truth, s->begin, s->end, s->block + 1 == pl->nblocks, s->chunk, d, total);
    }
    /* The block's parser holds the truth from now on; it counted from LINE_BASE. */
    d->base += (*truth)->line_no - LINE_BASE;
    deliver_packed(d, &s->records);
    tw_parse_stats zero = {0};
    add_stats(total, &s->parser->stats, &zero);
    tw_parser *old = *truth;
    *truth = s->parser;
    s->parser = old;
    return TW_OK;
}

static int start_workers(pool *pl, pthread_t *threads, int jobs, int *started)
{
    *started = 0;
    for (int i = 0; i < jobs; i++) {
        if (pthread_create(&threads[i], NULL, worker, pl) != 0)
            break;
        (*started)++;
    }
    return *started > 0 ? TW_OK : TW_ENOMEM;
}

static void stop_workers(pool *pl, pthread_t *threads, int started)
{
    pthread_mutex_lock(&pl->lock);
    pl->stop = true;
    pthread_cond_broadcast(&pl->queued);
    pthread_mutex_unlock(&pl->lock);
    for (int i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
}

/* Hands out blocks ahead and takes them in order. When most of the last
 * RECENT_BLOCKS had to be parsed again (a state no warm-up recovers, such as
 * a traceback longer than a block), it stops handing out, takes the blocks
 * in flight and reads the rest of the file in order. */
#define RECENT_BLOCKS 8
static int run_blocks(pool *pl, tw_parser **truth, delivery *d, tw_parse_stats *total)
{
    uint64_t handed = 0;
    unsigned recent = 0; /* bit i: the block i takes ago was parsed again */
    bool ahead = true;
    for (uint64_t next = 0; next < pl->nblocks; next++) {
        while (ahead && handed < pl->nblocks && handed < next + pl->nslots) {
            hand_out(pl, &pl->slots[handed % pl->nslots], handed, *truth);
            handed++;
        }
        slot *s = &pl->slots[next % pl->nslots];
        wait_done(pl, s);
        uint64_t reparsed = total->blocks_reparsed;
        int rc = take_block(pl, s, truth, d, total);
        pthread_mutex_lock(&pl->lock);
        s->state = SLOT_FREE;
        pthread_mutex_unlock(&pl->lock);
        if (rc != TW_OK)
            return rc;
        atomic_store_explicit(d->progress, s->end, memory_order_relaxed);
        recent = ((recent << 1) | (total->blocks_reparsed != reparsed)) & ((1u << RECENT_BLOCKS) - 1);
        if (next + 1 >= RECENT_BLOCKS && __builtin_popcount(recent) > RECENT_BLOCKS / 2)
            ahead = false;
        if (!ahead && next + 1 == handed && handed < pl->nblocks)
            return parse_in_order(pl, *truth, s->end, UINT64_MAX, true, s->chunk, d, total); /* the rest */
    }
    return TW_OK;
}

/* TW_PARSE_SEQUENTIAL: the input is better read in order (gzip) or no
 * thread could be started; nothing was read yet. */
#define TW_PARSE_SEQUENTIAL 1

static int run_parallel(tw_parser *p, tw_record_fn fn, void *arg)
{
    char head[4096];
    ssize_t n = read_at(p->fd, head, sizeof head, 0);
    if (n < 0)
        return tw_status_from_errno(errno);
    if (n >= 2 && (unsigned char)head[0] == 0x1f && (unsigned char)head[1] == 0x8b)
        return TW_PARSE_SEQUENTIAL; /* gzip: one stream, read in order */
    if (tw_parser_looks_binary(head, (size_t)n))
        return TW_EBINARY;
    pool pl;
    int rc = pool_init(&pl, p);
    tw_parser *truth = rc == TW_OK ? pool_parser(p) : NULL;
    pthread_t *threads = calloc((size_t)p->jobs, sizeof *threads);
    int started = 0;
    if (rc == TW_OK && (!truth || !threads))
        rc = TW_ENOMEM;
    if (rc == TW_OK)
        rc = start_workers(&pl, threads, p->jobs, &started);
    if (rc != TW_OK) {
        tw_parser_close(truth);
        free(threads);
        pool_free(&pl);
        return TW_PARSE_SEQUENTIAL;
    }
    truth->line_no = LINE_BASE;
    delivery d = {.fn = fn, .arg = arg, .path = p->path, .base = 0, .progress = &p->progress};
    tw_parse_stats total = {0};
    rc = run_blocks(&pl, &truth, &d, &total);
    stop_workers(&pl, threads, started);
    if (rc == TW_OK) {
        tw_parse_stats before = truth->stats;
        truth->fn = deliver_direct;
        truth->arg = &d;
        tw_parser_finish_formats(truth);
        add_stats(&total, &truth->stats, &before);
    }
    total.format = truth->stats.format;
    p->stats = total;
    p->line_no = truth->line_no - LINE_BASE + d.base;
    tw_parser_close(truth);
    free(threads);
    pool_free(&pl);
    return rc;
}

int tw_parser_run(tw_parser *p, tw_record_fn fn, void *arg)
{
    if (p->fd >= 0 && p->jobs > 1 && p->size >= 4 * (uint64_t)p->block_size) {
        int rc = run_parallel(p, fn, arg);
        if (rc != TW_PARSE_SEQUENTIAL)
            return rc;
    }
    return tw_parser_run_in_order(p, fn, arg);
}
