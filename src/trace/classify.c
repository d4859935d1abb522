/*
 * classify.c: what an event is (tw_trace_kind), from its cat and name,
 * decided once per event as the reader hands it over (events.c). The cat
 * says most on its own (one table, case-insensitive, so Kineto's kernel,
 * legacy Kineto's Kernel and Paddle's capitalised cats meet); the name
 * decides the rest: ProfilerStep#N / ProfileStep#N steps, DataLoader spans,
 * NCCL/RCCL/HCCL kernels. Paddle's "name[1.234 ms]" suffix is stripped
 * here. Every event passes through, so each test looks at the first byte
 * before it compares a whole string, and a reader keeps the kinds of the
 * names it has seen (tw_trace_kind_memo): a trace repeats a few hundred
 * names millions of times, and a kernel's name runs to hundreds of bytes.
 */
#include "events.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static inline bool starts(const char *s, const char *prefix)
{
    return s[0] == prefix[0] && strncmp(s, prefix, strlen(prefix)) == 0; /* the first byte tells most apart */
}

int64_t tw_trace_step_id(const char *name)
{
    const char *p;
    if (starts(name, "ProfilerStep#"))
        p = name + 13;
    else if (starts(name, "ProfileStep#"))
        p = name + 12;
    else
        return -1;
    if (*p < '0' || *p > '9')
        return -1;
    int64_t v = 0;
    for (; *p >= '0' && *p <= '9' && v < (INT64_MAX - 9) / 10; p++)
        v = v * 10 + (*p - '0');
    return v;
}

/* Paddle appends "[12.345 ms]" or "[123.456 us]" to every name. */
static void strip_suffix(tw_trace_event *e)
{
    size_t n = e->name_len;
    if (n < 5 || e->name[n - 1] != ']' || !(e->name[n - 2] == 's'))
        return;
    char *open = strrchr(e->name, '[');
    if (!open || (strcmp(e->name + n - 4, " ms]") != 0 && strcmp(e->name + n - 4, " us]") != 0 &&
                  strcmp(e->name + n - 3, "ms]") != 0 && strcmp(e->name + n - 3, "us]") != 0))
        return;
    for (const char *c = open + 1; c < e->name + n - 3; c++) {
        if (!((*c >= '0' && *c <= '9') || *c == '.' || *c == ' '))
            return;
    }
    *open = '\0';
    e->name_len = (size_t)(open - e->name);
    e->name_hashed = false; /* the hash was of the whole name */
}

/* NCCL, RCCL, HCCL kernels: by prefix, or ncclKernel, ncclDevKernel,
 * c_allreduce or all_reduce_kernel inside (two scans for the four). */
static bool comm_name(const char *n)
{
    if (starts(n, "nccl") || starts(n, "rccl") || starts(n, "hccl"))
        return true;
    for (const char *p = n; (p = strstr(p, "nccl")) != NULL; p++) {
        if (starts(p + 4, "Kernel") || starts(p + 4, "DevKernel"))
            return true;
    }
    for (const char *p = n; (p = strstr(p, "all")) != NULL; p++) {
        if ((p - n >= 2 && starts(p - 2, "c_allreduce")) || starts(p, "all_reduce_kernel"))
            return true;
    }
    return false;
}

/* Whether n holds DataLoader or Dataloader: one scan for the D. */
static bool dataloader_name(const char *n)
{
    for (const char *p = n; (p = strchr(p, 'D')) != NULL; p++) {
        if (strncmp(p, "DataLoader", 10) == 0 || strncmp(p, "Dataloader", 10) == 0)
            return true;
    }
    return false;
}

/* What a cat says on its own, case-insensitively. */
typedef enum cat_class {
    CAT_NONE,
    CAT_KERNEL,
    CAT_MEMCPY,
    CAT_MEMSET,
    CAT_SYNC,
    CAT_RUNTIME,
    CAT_GPU_ANNOTATION,
    CAT_DATALOADER,
    CAT_COMM_SPAN,
    CAT_OP,
} cat_class;

#define CAT(name, c)                                                                                                   \
    {                                                                                                                  \
        name, sizeof name - 1, c                                                                                       \
    }

static cat_class cat_of(const char *cat)
{
    static const struct {
        const char *name;
        size_t len;
        cat_class c;
    } cats[] = {
        /* the most frequent first: no two are the same in any case */
        CAT("cpu_op", CAT_OP),
        CAT("kernel", CAT_KERNEL),
        CAT("cuda_runtime", CAT_RUNTIME),
        CAT("operator", CAT_OP),
        CAT("cudaruntime", CAT_RUNTIME),
        CAT("runtime", CAT_RUNTIME),
        CAT("gpu_memcpy", CAT_MEMCPY),
        CAT("memcpy", CAT_MEMCPY),
        CAT("gpu_memset", CAT_MEMSET),
        CAT("memset", CAT_MEMSET),
        CAT("cuda_sync", CAT_SYNC),
        CAT("cuda_driver", CAT_RUNTIME),
        CAT("gpu_user_annotation", CAT_GPU_ANNOTATION),
        CAT("dataloader", CAT_DATALOADER),
        CAT("communication", CAT_COMM_SPAN),
    };
    char first = (char)(*cat | 0x20);
    size_t n = strlen(cat);
    for (size_t i = 0; i < sizeof cats / sizeof cats[0]; i++) {
        if (cats[i].len == n && cats[i].name[0] == first &&
            (memcmp(cat, cats[i].name, n) == 0 || strcasecmp(cat, cats[i].name) == 0))
            return cats[i].c;
    }
    return CAT_NONE;
}

/* The kind an X event's cat class and name (NUL-terminated) give. */
static tw_trace_kind kind_of(cat_class cat, const char *n)
{
    switch (cat) {
    case CAT_KERNEL:
        if (starts(n, "Memcpy") || starts(n, "hipMemcpy") || starts(n, "dma"))
            return TW_TK_MEMCPY;
        if (starts(n, "Memset") || starts(n, "hipMemset"))
            return TW_TK_MEMSET;
        return comm_name(n) ? TW_TK_COMM : TW_TK_KERNEL;
    case CAT_MEMCPY:
        return TW_TK_MEMCPY;
    case CAT_MEMSET:
        return TW_TK_MEMSET;
    case CAT_SYNC:
        return TW_TK_SYNC;
    case CAT_RUNTIME:
        return strstr(n, "Synchronize") ? TW_TK_SYNC : TW_TK_RUNTIME;
    case CAT_GPU_ANNOTATION:
        return TW_TK_OTHER; /* the GPU mirror of host annotations */
    case CAT_DATALOADER:
        return tw_trace_step_id(n) >= 0 ? TW_TK_STEP : TW_TK_DATALOADER;
    case CAT_COMM_SPAN:
        return TW_TK_COMM_SPAN;
    case CAT_OP:
    case CAT_NONE:
        break;
    }
    if (tw_trace_step_id(n) >= 0)
        return TW_TK_STEP;
    if (dataloader_name(n))
        return TW_TK_DATALOADER;
    return cat == CAT_OP ? TW_TK_OP : TW_TK_OTHER;
}

/* ---- the kinds of names seen before ------------------------------------ */

#define MEMO_SLOTS 256 /* direct-mapped: a name shares its slot with the names of its hash */
#define MEMO_NAME  256 /* longer names are classified each time */

typedef struct memo_slot {
    uint16_t len; /* 0: empty */
    uint8_t cat;  /* cat_class */
    uint8_t kind; /* tw_trace_kind */
    char name[MEMO_NAME];
} memo_slot;

struct tw_trace_kind_memo {
    memo_slot slot[MEMO_SLOTS];
};

tw_trace_kind_memo *tw_trace_kind_memo_new(void)
{
    return calloc(1, sizeof(tw_trace_kind_memo));
}

void tw_trace_kind_memo_free(tw_trace_kind_memo *m)
{
    free(m);
}

/* kind_of through m: the kinds whose names decide them are looked up by
 * the name's hash (a name's bytes and cat class compared whole: two names
 * of one slot cost a recount, never a wrong kind) before they are worked
 * out. */
static tw_trace_kind kind_of_memo(tw_trace_kind_memo *m, cat_class cat, tw_trace_event *e)
{
    bool by_name = cat == CAT_KERNEL || cat == CAT_RUNTIME || cat == CAT_OP || cat == CAT_NONE;
    size_t len = e->name_len;
    if (!m || !by_name || len == 0 || len > MEMO_NAME)
        return kind_of(cat, e->name);
    if (!e->name_hashed) {
        e->name_hash = tw_name_hash(e->name, len);
        e->name_hashed = true;
    }
    memo_slot *s = &m->slot[e->name_hash % MEMO_SLOTS];
    if (s->len == len && s->cat == cat && memcmp(s->name, e->name, len) == 0)
        return (tw_trace_kind)s->kind;
    tw_trace_kind kind = kind_of(cat, e->name);
    *s = (memo_slot){.len = (uint16_t)len, .cat = (uint8_t)cat, .kind = (uint8_t)kind};
    memcpy(s->name, e->name, len);
    return kind;
}

void tw_trace_classify_memo(tw_trace_kind_memo *m, tw_trace_event *e)
{
    strip_suffix(e);
    e->kind = TW_TK_OTHER;
    if (e->ph == 'i' || e->ph == 'I') {
        if (strcmp(e->name, "[memory]") == 0)
            e->kind = TW_TK_MEMORY;
        return;
    }
    if (e->ph == 'X')
        e->kind = kind_of_memo(m, cat_of(e->cat), e);
}

void tw_trace_classify(tw_trace_event *e)
{
    tw_trace_classify_memo(NULL, e);
}
