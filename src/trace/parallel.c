/*
 * parallel.c: a large plain file's events array read by several threads.
 * The array is cut into pieces of cfg->chunk bytes; a thread takes the next
 * piece, guesses where its first event begins (the first { that opens a
 * line, or follows "}," as events are written one after another), and
 * reads events from there with the reader's own two paths (cfg->read:
 * events.c's tw_trace_read_chunk, handed in so that this file stays below
 * the reader) until one begins past the piece's end. The reading
 * thread takes the pieces back in the file's order and keeps only a piece
 * whose guessed start is exactly where the one before it stopped: then it
 * holds the very events one thread would have read. A wrong guess (a {
 * inside a string, pretty-printed args), or a piece that failed, is read
 * again by the reading thread from where the one before stopped; when that
 * fails too, the rest of the array is left to the one-thread reader, which
 * reports the error as it always does. So the output never depends on the
 * threads: tests/unit/test_trace.c holds it to the one-thread reading on
 * corpus traces and broken ones.
 *
 * Memory: at most threads + 2 pieces are read ahead of the one handed out,
 * each holding its events packed (tw_trace_packed) in at most twice its
 * bytes (a piece denser than that fails, and so the one thread reads on),
 * and a mapped window or a tokenizer buffer per thread; the threads never
 * touch the reading thread's state.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "filesrc.h"
#include "reader.h"
#include "trainwatch/error.h"

#define GUESS_WINDOW (64u << 10) /* bytes looked at for a piece's first event: */
#define GUESS_FIRST  (4u << 10)  /* these first, the rest when they hold none */

enum { SLOT_FREE, SLOT_BUSY, SLOT_DONE };

typedef struct slot {
    tw_trace_chunk c;
    int state;
} slot;

/* A tokenizer's source: pread from off, up to end; reads stop at soft
 * (a piece's end and a little) while they can, then go on in steps of
 * SOFT_STEP, so a piece costs about its own bytes, not a buffer more. */
typedef struct pread_src {
    int fd;
    uint64_t off, end, soft;
} pread_src;

#define SOFT_STEP (64u << 10)

struct tw_trace_pieces {
    tw_trace_pieces_cfg cfg;
    uint64_t begin, count; /* the array's first byte; pieces */
    slot *slots;
    int slot_count;
    pthread_t *threads;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t done, room;
    uint64_t next_claim, next_out; /* the next piece a thread takes, the next handed out */
    bool stop;
    /* the reading thread's: where the next piece must start, and its own
     * tokenizer for pieces read again */
    uint64_t expected;
    bool finished, ended;
    tw_jstream js;
    pread_src src;
};

static long pread_read(void *arg, char *buf, size_t cap)
{
    pread_src *s = arg;
    if (s->off >= s->end)
        return 0;
    uint64_t room = s->soft > s->off + SOFT_STEP ? s->soft - s->off : SOFT_STEP;
    if (cap > room)
        cap = (size_t)room;
    if (cap > s->end - s->off)
        cap = (size_t)(s->end - s->off);
    long n = tw_file_pread(s->fd, buf, cap, s->off);
    if (n > 0)
        s->off += (uint64_t)n;
    return n;
}

/* What a piece's events may pack into: twice its bytes (a profiler's
 * events pack to about theirs), 64 KiB at least. */
static size_t piece_budget(const tw_trace_pieces_cfg *cfg)
{
    uint64_t twice = 2 * cfg->chunk;
    return twice < (64u << 10) ? 64u << 10 : (size_t)twice;
}

/* Piece i's bytes: [*a, *b); the last one runs to the file's end. */
static void piece_range(const tw_trace_pieces *p, uint64_t i, uint64_t *a, uint64_t *b)
{
    *a = p->begin + i * p->cfg.chunk;
    *b = i + 1 == p->count ? UINT64_MAX : *a + p->cfg.chunk;
}

static bool space(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* Where an event likely begins in [a, a + n) of buf (read from offset a):
 * the first { after a newline or after "}," (white space between); false
 * when the window has none. */
static bool guess_start(const char *buf, size_t n, uint64_t a, uint64_t *start)
{
    for (size_t i = 0; i < n; i++) {
        bool after_line = buf[i] == '\n';
        bool after_event = buf[i] == ',' && i > 0 && buf[i - 1] == '}';
        if (!after_line && !after_event)
            continue;
        size_t j = i + 1;
        while (j < n && space(buf[j]))
            j++;
        if (j < n && buf[j] == '{') {
            *start = a + j;
            return true;
        }
    }
    return false;
}

/* Where the piece at offset a likely has its first event: guess_start
 * over its first GUESS_FIRST bytes, then over GUESS_WINDOW. */
static bool find_start(int fd, char *window, uint64_t a, uint64_t *start)
{
    static const size_t sizes[] = {GUESS_FIRST, GUESS_WINDOW};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        long n = tw_file_pread(fd, window, sizes[i], a);
        if (n > 0 && guess_start(window, (size_t)n, a, start))
            return true;
        if (n < (long)sizes[i])
            return false; /* the file's end, or an error the reading thread will meet */
    }
    return false;
}

/* Places a thread's source (js->src: a tw_file_view when mapped, else a
 * pread_src) at start, its reads to end near soft and to stop at end (an
 * end of input there). */
static void place(tw_jstream *js, uint64_t start, uint64_t soft, uint64_t end)
{
    if (js->view) {
        tw_file_view *v = js->src;
        v->off = start, v->soft = soft, v->size = end;
    } else {
        pread_src *s = js->src;
        s->off = start, s->soft = soft, s->end = end;
    }
    tw_jstream_restart(js, start);
}

/* Where a thread stops reading piece [a, b): an event still open two
 * pieces past b is given up there (an end of input: the piece fails, and
 * the reading thread reads it from a known start), so a guess that opened
 * an object running to the file's end costs two pieces, not the rest of
 * the file. */
static uint64_t reach(const tw_trace_pieces *p, uint64_t b)
{
    return b == UINT64_MAX || p->cfg.size - b < 2 * p->cfg.chunk ? p->cfg.size : b + 2 * p->cfg.chunk;
}

/* Reads piece i into its slot with js (a thread's own tokenizer and source). */
static void read_piece(tw_trace_pieces *p, uint64_t i, tw_jstream *js, char *window)
{
    uint64_t a, b, start;
    piece_range(p, i, &a, &b);
    tw_trace_chunk *c = &p->slots[i % (uint64_t)p->slot_count].c;
    if (i == 0) {
        start = a;
    } else {
        if (!find_start(p->cfg.fd, window, a, &start)) {
            c->start = UINT64_MAX;
            c->status = TW_CHUNK_FAIL;
            return;
        }
    }
    c->start = start;
    c->budget = piece_budget(&p->cfg);
    place(js, start, b == UINT64_MAX ? UINT64_MAX : b + SOFT_STEP, reach(p, b));
    p->cfg.read(js, b, c);
}

static void *worker(void *arg)
{
    tw_trace_pieces *p = arg;
    pread_src src = {.fd = p->cfg.fd, .end = p->cfg.size, .soft = UINT64_MAX};
    tw_file_view view = tw_file_view_of(p->cfg.fd, p->cfg.size);
    tw_jstream js;
    char *window = malloc(GUESS_WINDOW);
    bool ok = window && tw_jstream_init(&js, pread_read, &src) == TW_OK;
    if (ok && p->cfg.map)
        js.view = tw_file_view_next, js.src = &view;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->next_claim < p->count && p->next_claim >= p->next_out + (uint64_t)p->slot_count)
            pthread_cond_wait(&p->room, &p->mu);
        if (p->stop || p->next_claim >= p->count)
            break;
        uint64_t i = p->next_claim++;
        slot *s = &p->slots[i % (uint64_t)p->slot_count];
        s->state = SLOT_BUSY;
        pthread_mutex_unlock(&p->mu);
        if (ok) {
            read_piece(p, i, &js, window);
        } else { /* no memory for this thread: the reading thread reads it */
            s->c.start = UINT64_MAX;
            s->c.status = TW_CHUNK_FAIL;
        }
        pthread_mutex_lock(&p->mu);
        s->state = SLOT_DONE;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    if (ok)
        tw_jstream_free(&js);
    tw_file_view_close(&view);
    free(window);
    return NULL;
}

void tw_trace_chunk_free(tw_trace_chunk *c)
{
    free(c->events);
    tw_buffer_free(&c->text);
    tw_trace_kind_memo_free(c->kinds);
    free(c->shapes);
    *c = (tw_trace_chunk){0};
}

static void stop_threads(tw_trace_pieces *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->room);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++)
        pthread_join(p->threads[i], NULL);
    p->started = 0;
}

static void pieces_free(tw_trace_pieces *p)
{
    stop_threads(p);
    for (int i = 0; p->slots && i < p->slot_count; i++)
        tw_trace_chunk_free(&p->slots[i].c);
    free(p->slots);
    free(p->threads);
    tw_jstream_free(&p->js);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->room);
    free(p);
}

int tw_trace_pieces_start(tw_trace_pieces **out, const tw_trace_pieces_cfg *cfg, uint64_t begin)
{
    tw_trace_pieces *p = calloc(1, sizeof *p);
    if (!p)
        return TW_ENOMEM;
    p->cfg = *cfg;
    p->begin = p->expected = begin;
    p->count = (cfg->size - begin + cfg->chunk - 1) / cfg->chunk;
    p->slot_count = cfg->threads + 2;
    p->src = (pread_src){.fd = cfg->fd, .end = cfg->size, .soft = UINT64_MAX};
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->done, NULL);
    pthread_cond_init(&p->room, NULL);
    p->slots = calloc((size_t)p->slot_count, sizeof *p->slots);
    p->threads = calloc((size_t)cfg->threads, sizeof *p->threads);
    if (!p->slots || !p->threads || tw_jstream_init(&p->js, pread_read, &p->src) != TW_OK) {
        pieces_free(p);
        return TW_ENOMEM;
    }
    for (int i = 0; i < cfg->threads; i++) {
        if (pthread_create(&p->threads[i], NULL, worker, p) != 0)
            break;
        p->started++;
    }
    if (p->started == 0) {
        pieces_free(p);
        return TW_ENOMEM;
    }
    *out = p;
    return TW_OK;
}

tw_trace_chunk *tw_trace_pieces_next(tw_trace_pieces *p)
{
    if (p->finished || p->next_out >= p->count)
        return NULL;
    uint64_t i = p->next_out;
    slot *s = &p->slots[i % (uint64_t)p->slot_count];
    pthread_mutex_lock(&p->mu);
    while (s->state != SLOT_DONE)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    tw_trace_chunk *c = &s->c;
    if (c->status == TW_CHUNK_FAIL || c->start != p->expected) { /* read again from where the last one stopped */
        uint64_t a, b;
        piece_range(p, i, &a, &b);
        c->start = p->expected;
        c->budget = piece_budget(&p->cfg);
        place(&p->js, p->expected, b == UINT64_MAX ? UINT64_MAX : b + SOFT_STEP, p->cfg.size);
        p->cfg.read(&p->js, b, c);
        if (c->status == TW_CHUNK_FAIL) {
            p->finished = true; /* the one thread goes on from expected */
            return NULL;
        }
    }
    p->expected = c->stop;
    if (c->status == TW_CHUNK_END)
        p->finished = p->ended = true;
    return c;
}

void tw_trace_pieces_done(tw_trace_pieces *p)
{
    pthread_mutex_lock(&p->mu);
    p->slots[p->next_out % (uint64_t)p->slot_count].state = SLOT_FREE;
    p->next_out++;
    pthread_cond_broadcast(&p->room);
    pthread_mutex_unlock(&p->mu);
}

bool tw_trace_pieces_end(tw_trace_pieces *p, uint64_t *at)
{
    *at = p->expected;
    bool ended = p->ended;
    pieces_free(p);
    return ended;
}
