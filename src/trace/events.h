/*
 * events.h: one trace event as the reader hands it over, and the reader of
 * a chrome-trace document: {"traceEvents": [...], "distributedInfo": {...}}
 * in any key order, or the bare array form. Each event is classified once
 * (tw_trace_kind) from its cat and name, so the schemas of Kineto (cpu_op,
 * kernel, gpu_memcpy...), legacy Kineto (Operator, Kernel, Runtime...) and
 * paddle.profiler (capitalised cats, "name[1.234 ms]" suffixes, string
 * tids, the trailing {}) meet in one model. The reader is events.c (with
 * its fast path in fastpath.c), the classifier classify.c.
 */
#ifndef TW_TRACE_EVENTS_H
#define TW_TRACE_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "jstream.h"
#include "namehash.h"
#include "trainwatch/trace.h"

typedef enum tw_trace_kind {
    TW_TK_OTHER,
    TW_TK_OP,         /* a CPU operator (cpu_op, Operator) */
    TW_TK_KERNEL,     /* a GPU compute kernel */
    TW_TK_COMM,       /* a GPU communication kernel (NCCL, RCCL, HCCL) */
    TW_TK_MEMCPY,     /* GPU memcpy */
    TW_TK_MEMSET,     /* GPU memset */
    TW_TK_RUNTIME,    /* a CUDA/HIP runtime or driver call */
    TW_TK_SYNC,       /* host synchronisation (cudaStreamSynchronize, Stream Sync) */
    TW_TK_STEP,       /* ProfilerStep#N / ProfileStep#N on the host */
    TW_TK_DATALOADER, /* a DataLoader span on the host */
    TW_TK_MEMORY,     /* a [memory] instant event */
    TW_TK_COMM_SPAN,  /* a host span of Paddle's Communication type: the kernels it launches communicate */
} tw_trace_kind;

typedef struct tw_trace_event {
    char ph;
    tw_trace_kind kind;
    char *name; /* NUL-terminated, name_len bytes: name_buf, or the text of a piece (parallel.c) */
    size_t name_len;
    uint32_t name_hash; /* tw_name_hash of the name, when name_hashed (tw_trace_event_hash) */
    bool name_hashed;
    char name_buf[TW_JSTR_MAX + 1];
    char cat[48];
    double ts, dur;
    bool has_ts, has_dur;
    int64_t pid, tid;
    int64_t correlation, external_id; /* -1: absent */
    double bytes, device, stream;     /* NAN: absent */
    double allocated, reserved;       /* memory events; NAN: absent */
} tw_trace_event;

typedef struct tw_trace_reader_stats {
    uint64_t events;
    uint64_t unpaired;           /* B/E events without their other half (or past the pairing bounds) */
    int rank;                    /* distributedInfo.rank, -1 if absent */
    bool legacy, paddle, kineto; /* schema hints seen */
} tw_trace_reader_stats;

typedef void (*tw_trace_event_fn)(void *arg, const tw_trace_event *e);

/* Duration events written as a begin and an end (ph B, ph E) are paired
 * per (pid, tid), as a stack, into one complete event (ph X) handed over at
 * the E: up to TW_PAIR_THREADS threads, TW_PAIR_DEPTH open spans each. */
#define TW_PAIR_THREADS 64
#define TW_PAIR_DEPTH   64

/* Reads the whole document, calling fn per event. Returns TW_OK, or
 * TW_EFORMAT with *error set when the input is not (or stops being) a
 * trace; the events before that point were handed over. */
int tw_trace_read(tw_jstream *s, tw_trace_event_fn fn, void *arg, tw_trace_reader_stats *st, const char **error);

/* A plain file whose events array may be read by several threads
 * (parallel.c): its descriptor (read with pread, never moved), its size,
 * how many threads and how many bytes each takes at a time. seek places
 * the tokenizer's own source at an offset (after the threads' part);
 * progress, when set, hears the offset read so far. */
typedef struct tw_trace_par {
    int fd;
    uint64_t size;
    int threads;    /* 2 or more; fewer: read by the one thread */
    uint64_t chunk; /* bytes per piece; the array must span two or more */
    bool map;       /* threads read through mappings (filesrc.c), not pread */
    void (*seek)(void *src, uint64_t off);
    void *src;
    void (*progress)(void *arg, uint64_t done);
    void *progress_arg;
} tw_trace_par;

/* As tw_trace_read; the traceEvents array (or the bare array) of a file
 * par describes is read by par->threads threads in pieces, handed over in
 * the file's order: the same events, errors and counts as tw_trace_read
 * (par NULL: tw_trace_read). */
int tw_trace_read_par(tw_jstream *s, const tw_trace_par *par, tw_trace_event_fn fn, void *arg,
                      tw_trace_reader_stats *st, const char **error);

/* The name tables' hash of e's name (namehash.h): the one the reader took
 * on the way, or worked out. */
static inline uint32_t tw_trace_event_hash(const tw_trace_event *e)
{
    return e->name_hashed ? e->name_hash : tw_name_hash(e->name, e->name_len);
}

/* Classifies an event whose cat and name are filled; strips Paddle's
 * "[1.234 ms]" name suffix. */
void tw_trace_classify(tw_trace_event *e);
/* The kinds of the names a reader has seen, so that each name is worked
 * out once (about 66 KiB; the reader's, freed with it). */
typedef struct tw_trace_kind_memo tw_trace_kind_memo;
tw_trace_kind_memo *tw_trace_kind_memo_new(void); /* NULL: out of memory */
void tw_trace_kind_memo_free(tw_trace_kind_memo *m);
/* As tw_trace_classify, through m (NULL: none), to the same kind. */
void tw_trace_classify_memo(tw_trace_kind_memo *m, tw_trace_event *e);
/* "ProfilerStep#12" -> 12; -1 when the name is not a step. */
int64_t tw_trace_step_id(const char *name);

#endif
