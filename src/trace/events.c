/*
 * events.c: the chrome-trace document reader and the event classifier.
 * The reader walks the document with the tokenizer: top-level keys other
 * than traceEvents and distributedInfo are skipped whole; in an event only
 * ph, cat, name, ts, dur, pid, tid and a few args are kept, deeper values
 * are skipped without recursion. Trailing commas and the {} sentinel Paddle
 * writes are accepted (the sentinel is an event without ph: skipped).
 *
 * Each event is read by one of two paths. The fast path reads an event
 * that lies whole in the tokenizer's buffer where it lies: string ends by
 * bit scans over a 64-byte block's quote/backslash/NUL mask, keys told by
 * length and bytes, numbers parsed as they are scanned, skipped values
 * passed without tokens. Whatever it does not take as it is (escapes, NUL
 * bytes in kept strings, words, deep nesting, bad input, the buffer's end)
 * makes it give up having consumed nothing, and the token path reads the
 * event: the token path is the reference, and tests/unit/test_trace.c
 * holds the two to the same events.
 */
#include "events.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "trainwatch/error.h"

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
        CAT("kernel", CAT_KERNEL),
        CAT("gpu_memcpy", CAT_MEMCPY),
        CAT("memcpy", CAT_MEMCPY),
        CAT("gpu_memset", CAT_MEMSET),
        CAT("memset", CAT_MEMSET),
        CAT("cuda_sync", CAT_SYNC),
        CAT("cuda_runtime", CAT_RUNTIME),
        CAT("runtime", CAT_RUNTIME),
        CAT("cudaruntime", CAT_RUNTIME),
        CAT("cuda_driver", CAT_RUNTIME),
        CAT("gpu_user_annotation", CAT_GPU_ANNOTATION),
        CAT("dataloader", CAT_DATALOADER),
        CAT("communication", CAT_COMM_SPAN),
        CAT("cpu_op", CAT_OP),
        CAT("operator", CAT_OP),
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

void tw_trace_classify(tw_trace_event *e)
{
    strip_suffix(e);
    const char *n = e->name;
    e->kind = TW_TK_OTHER;
    if (e->ph == 'i' || e->ph == 'I') {
        if (strcmp(n, "[memory]") == 0)
            e->kind = TW_TK_MEMORY;
        return;
    }
    if (e->ph != 'X')
        return;
    cat_class cat = cat_of(e->cat);
    switch (cat) {
    case CAT_KERNEL:
        e->kind = comm_name(n) ? TW_TK_COMM : TW_TK_KERNEL;
        if (starts(n, "Memcpy") || starts(n, "hipMemcpy") || starts(n, "dma"))
            e->kind = TW_TK_MEMCPY;
        else if (starts(n, "Memset") || starts(n, "hipMemset"))
            e->kind = TW_TK_MEMSET;
        return;
    case CAT_MEMCPY:
        e->kind = TW_TK_MEMCPY;
        return;
    case CAT_MEMSET:
        e->kind = TW_TK_MEMSET;
        return;
    case CAT_SYNC:
        e->kind = TW_TK_SYNC;
        return;
    case CAT_RUNTIME:
        e->kind = strstr(n, "Synchronize") ? TW_TK_SYNC : TW_TK_RUNTIME;
        return;
    case CAT_GPU_ANNOTATION:
        return; /* the GPU mirror of host annotations */
    case CAT_DATALOADER:
        e->kind = tw_trace_step_id(n) >= 0 ? TW_TK_STEP : TW_TK_DATALOADER;
        return;
    case CAT_COMM_SPAN:
        e->kind = TW_TK_COMM_SPAN;
        return;
    case CAT_OP:
    case CAT_NONE:
        break;
    }
    if (tw_trace_step_id(n) >= 0)
        e->kind = TW_TK_STEP;
    else if (dataloader_name(n))
        e->kind = TW_TK_DATALOADER;
    else if (cat == CAT_OP)
        e->kind = TW_TK_OP;
}

/* ---- the document ---------------------------------------------------- */

/* A B event waiting for its E: what the complete event will need. */
typedef struct open_span {
    double ts;
    char name[TW_TRACE_NAME_MAX];
    char cat[48];
    int64_t correlation, external_id;
    double bytes, device, stream;
} open_span;

typedef struct span_stack {
    int64_t pid, tid;
    int depth;
    open_span *v; /* TW_PAIR_DEPTH, allocated at the thread's first B */
} span_stack;

/* Where the fast path reads: the buffer's end, and the " \\ and NUL bytes
 * of one 64-byte block as bits (found once per block, then each string's
 * end is a bit scan rather than a scan of its bytes). */
typedef struct fast_in {
    const char *end;
    const char *block; /* NULL: none */
    uint64_t bits;
} fast_in;

typedef struct reader {
    tw_jstream *s;
    tw_trace_event_fn fn;
    void *arg;
    tw_trace_reader_stats *st;
    tw_trace_event ev, paired;
    span_stack stacks[TW_PAIR_THREADS];
    int stack_count;
    fast_in in;
    uint64_t in_base; /* the stream offset of the buffer in.block lies in */
} reader;

static bool fail(reader *r, const char *why)
{
    if (!r->s->error)
        r->s->error = why;
    return false;
}

/* A number, or a string holding one ("123(Python)", "stream 7", "1.5"). */
static bool read_number(reader *r, double *out, bool *is_string)
{
    tw_jtok t = tw_jstream_next(r->s);
    *is_string = false;
    if (t == TW_JT_NUMBER) {
        *out = r->s->num;
        return true;
    }
    if (t == TW_JT_STRING) {
        *is_string = true;
        const char *p = r->s->str;
        while (*p && !(*p >= '0' && *p <= '9') && *p != '-')
            p++;
        char *end;
        double v = strtod(p, &end);
        *out = end == p ? NAN : v;
        return true;
    }
    *out = NAN;
    return tw_jstream_skip(r->s, t);
}

static bool read_string(reader *r, char *out, size_t cap, size_t *len)
{
    tw_jtok t = tw_jstream_next(r->s);
    if (t != TW_JT_STRING) {
        out[0] = '\0';
        if (len)
            *len = 0;
        return tw_jstream_skip(r->s, t);
    }
    size_t n = r->s->str_len < cap - 1 ? r->s->str_len : cap - 1;
    memcpy(out, r->s->str, n);
    out[n] = '\0';
    if (len)
        *len = n;
    return true;
}

/* Reads "key": and leaves the value next; false at the object's end. */
static int member_key(reader *r, bool first, char *key, size_t cap)
{
    int fast;
    if (tw_jstream_key_fast(r->s, first, &fast)) {
        if (fast == 1) {
            size_t n = r->s->str_len < cap - 1 ? r->s->str_len : cap - 1;
            memcpy(key, r->s->str, n);
            key[n] = '\0';
        }
        return fast;
    }
    tw_jtok t = tw_jstream_next(r->s);
    if (!first) {
        if (t == TW_JT_OBJECT_END)
            return 0;
        if (t != TW_JT_COMMA)
            return fail(r, "expected , or } in an object") ? -1 : -1;
        t = tw_jstream_next(r->s);
    }
    if (t == TW_JT_OBJECT_END)
        return 0; /* {} or a trailing comma */
    if (t != TW_JT_STRING)
        return fail(r, t == TW_JT_EOF ? "unexpected end of input" : "expected a key"), -1;
    size_t n = r->s->str_len < cap - 1 ? r->s->str_len : cap - 1;
    memcpy(key, r->s->str, n);
    key[n] = '\0';
    if (tw_jstream_next(r->s) != TW_JT_COLON)
        return fail(r, "expected : after a key"), -1;
    return 1;
}

static bool read_args(reader *r)
{
    char key[64];
    bool first = true, str;
    double v;
    tw_trace_event *e = &r->ev;
    for (;;) {
        int k = member_key(r, first, key, sizeof key);
        first = false;
        if (k <= 0)
            return k == 0;
        double *target = NULL;
        int64_t *itarget = NULL;
        switch (strlen(key)) { /* by length first: most args are none of these */
        case 5:
            target = strcmp(key, "bytes") == 0 ? &e->bytes : NULL;
            break;
        case 6:
            target = strcmp(key, "device") == 0 ? &e->device : strcmp(key, "stream") == 0 ? &e->stream : NULL;
            break;
        case 11:
            itarget = strcasecmp(key, "correlation") == 0   ? &e->correlation
                      : strcasecmp(key, "external id") == 0 ? &e->external_id
                                                            : NULL;
            break;
        case 14:
            itarget = strcasecmp(key, "correlation id") == 0 ? &e->correlation : NULL;
            target = strcmp(key, "Total Reserved") == 0 ? &e->reserved : NULL;
            break;
        case 15:
            target = strcmp(key, "Total Allocated") == 0 ? &e->allocated : NULL;
            break;
        case 16:
            target = strcmp(key, "current_reserved") == 0 ? &e->reserved : NULL;
            break;
        case 17:
            target = strcmp(key, "current_allocated") == 0 ? &e->allocated : NULL;
            break;
        default:
            break;
        }
        if (!target && !itarget) {
            if (!tw_jstream_skip_next(r->s))
                return false;
            continue;
        }
        if (!read_number(r, &v, &str))
            return false;
        if (target)
            *target = v;
        else if (v == v && v >= 0 && v < 9e18)
            *itarget = (int64_t)v;
    }
}

static void event_reset(tw_trace_event *e)
{
    e->ph = 0;
    e->name[0] = e->cat[0] = '\0';
    e->name_len = 0;
    e->has_ts = e->has_dur = false;
    e->ts = e->dur = NAN;
    e->pid = e->tid = -1;
    e->correlation = e->external_id = -1;
    e->bytes = e->device = e->stream = e->allocated = e->reserved = NAN;
}

static int64_t as_id(double v)
{
    return v == v && fabs(v) < 9e18 ? (int64_t)v : -1;
}

static void copy_cut(char *to, size_t cap, const char *from, size_t n)
{
    if (n > cap - 1)
        n = cap - 1;
    memcpy(to, from, n);
    to[n] = '\0';
}

static span_stack *stack_of(reader *r, int64_t pid, int64_t tid, bool create)
{
    for (int i = 0; i < r->stack_count; i++) {
        if (r->stacks[i].pid == pid && r->stacks[i].tid == tid)
            return &r->stacks[i];
    }
    if (!create || r->stack_count == TW_PAIR_THREADS)
        return NULL;
    open_span *v = malloc(TW_PAIR_DEPTH * sizeof *v);
    if (!v)
        return NULL;
    r->stacks[r->stack_count] = (span_stack){pid, tid, 0, v};
    return &r->stacks[r->stack_count++];
}

static void begin_span(reader *r, const tw_trace_event *e)
{
    span_stack *k = e->has_ts ? stack_of(r, e->pid, e->tid, true) : NULL;
    if (!k || k->depth == TW_PAIR_DEPTH) {
        r->st->unpaired++;
        return;
    }
    open_span *o = &k->v[k->depth++];
    *o = (open_span){.ts = e->ts,
                     .correlation = e->correlation,
                     .external_id = e->external_id,
                     .bytes = e->bytes,
                     .device = e->device,
                     .stream = e->stream};
    copy_cut(o->name, sizeof o->name, e->name, e->name_len);
    copy_cut(o->cat, sizeof o->cat, e->cat, strlen(e->cat));
}

/* The complete event for an E, in r->paired; false when nothing is open. */
static bool end_span(reader *r, const tw_trace_event *e)
{
    span_stack *k = stack_of(r, e->pid, e->tid, false);
    if (!k || k->depth == 0 || !e->has_ts) {
        r->st->unpaired++;
        return false;
    }
    const open_span *o = &k->v[--k->depth];
    tw_trace_event *x = &r->paired;
    *x = *e; /* the E's args count where the B had none (chrome's merge) */
    x->ph = 'X';
    copy_cut(x->name, sizeof x->name, o->name, strlen(o->name));
    x->name_len = strlen(x->name);
    copy_cut(x->cat, sizeof x->cat, o->cat, strlen(o->cat));
    x->ts = o->ts;
    x->dur = e->ts - o->ts;
    x->has_ts = true;
    x->has_dur = x->dur >= 0;
    x->correlation = o->correlation >= 0 ? o->correlation : e->correlation;
    x->external_id = o->external_id >= 0 ? o->external_id : e->external_id;
    x->bytes = o->bytes == o->bytes ? o->bytes : e->bytes;
    x->device = o->device == o->device ? o->device : e->device;
    x->stream = o->stream == o->stream ? o->stream : e->stream;
    return true;
}

/* The members of an event whose { was read, token by token: any input. */
static bool parse_event(reader *r)
{
    tw_trace_event *e = &r->ev;
    event_reset(e);
    char key[32], ph[8];
    bool first = true, str;
    double v;
    for (;;) {
        int k = member_key(r, first, key, sizeof key);
        first = false;
        if (k < 0)
            return false;
        if (k == 0)
            break;
        bool ok = true;
        if (strcmp(key, "ph") == 0) {
            ok = read_string(r, ph, sizeof ph, NULL);
            e->ph = ph[0];
        } else if (strcmp(key, "name") == 0) {
            ok = read_string(r, e->name, sizeof e->name, &e->name_len);
        } else if (strcmp(key, "cat") == 0) {
            ok = read_string(r, e->cat, sizeof e->cat, NULL);
        } else if (strcmp(key, "ts") == 0 || strcmp(key, "dur") == 0) {
            ok = read_number(r, &v, &str);
            if (key[0] == 't')
                e->ts = v, e->has_ts = !str && isfinite(v);
            else
                e->dur = v, e->has_dur = !str && isfinite(v) && v >= 0;
        } else if (strcmp(key, "pid") == 0 || strcmp(key, "tid") == 0) {
            ok = read_number(r, &v, &str);
            *(key[0] == 'p' ? &e->pid : &e->tid) = as_id(v);
        } else if (strcmp(key, "args") == 0) {
            tw_jtok t = tw_jstream_next(r->s);
            ok = t == TW_JT_OBJECT ? read_args(r) : tw_jstream_skip(r->s, t);
        } else {
            ok = tw_jstream_skip_next(r->s);
        }
        if (!ok)
            return false;
    }
    return true;
}

/* ---- the fast path ----------------------------------------------------
 * An event that lies whole in the buffer and is plain JSON (no escapes or
 * NUL bytes in the strings it keeps, numbers as numbers or short strings,
 * nothing deeper than TW_FAST_DEPTH inside skipped values) is read where it
 * lies, its keys told by length and bytes. On anything else it gives up
 * having consumed nothing, and the token path reads the event: that one is
 * the reference, and the fast path must come to the same event. */

#define TW_FAST_DEPTH 48

/* The small steps of the fast path are inlined into their callers: a call
 * per string or number costs as much as reading it. */
#if defined(__GNUC__)
#define TW_HOT static inline __attribute__((always_inline))
#else
#define TW_HOT static inline
#endif

/* The first " or \\ or NUL at or after p, or end. */
TW_HOT const char *qfind(fast_in *in, const char *p)
{
    for (;;) {
        if (in->block && (uintptr_t)p - (uintptr_t)in->block < 64) {
            uint64_t m = in->bits >> ((uintptr_t)p - (uintptr_t)in->block);
            if (m)
                return p + __builtin_ctzll(m);
            p = in->block + 64;
        }
        if (in->end - p < 64)
            return tw_jfind(p, in->end, true);
        in->block = p;
        in->bits = tw_jspecial64(p);
    }
}

/* What each byte may be outside strings, looked up once rather than
 * compared against each candidate: white space (JSON's four), a byte of a
 * number's text (tw_jnumber_char), a byte a skipped container may hold
 * between its strings (as the token path's skippable()). */
enum { B_SPACE = 1, B_NUMBER = 2, B_SKIPPABLE = 4 };
static const unsigned char byte_class[256] = {
    [' '] = B_SPACE | B_SKIPPABLE,
    ['\t'] = B_SPACE | B_SKIPPABLE,
    ['\n'] = B_SPACE | B_SKIPPABLE,
    ['\r'] = B_SPACE | B_SKIPPABLE,
    ['0'] = B_NUMBER | B_SKIPPABLE,
    ['1'] = B_NUMBER | B_SKIPPABLE,
    ['2'] = B_NUMBER | B_SKIPPABLE,
    ['3'] = B_NUMBER | B_SKIPPABLE,
    ['4'] = B_NUMBER | B_SKIPPABLE,
    ['5'] = B_NUMBER | B_SKIPPABLE,
    ['6'] = B_NUMBER | B_SKIPPABLE,
    ['7'] = B_NUMBER | B_SKIPPABLE,
    ['8'] = B_NUMBER | B_SKIPPABLE,
    ['9'] = B_NUMBER | B_SKIPPABLE,
    ['-'] = B_NUMBER | B_SKIPPABLE,
    ['+'] = B_NUMBER | B_SKIPPABLE,
    ['.'] = B_NUMBER | B_SKIPPABLE,
    ['e'] = B_NUMBER | B_SKIPPABLE,
    ['E'] = B_NUMBER | B_SKIPPABLE,
    [','] = B_SKIPPABLE,
    [':'] = B_SKIPPABLE,
    ['a'] = B_SKIPPABLE,
    ['b'] = B_SKIPPABLE,
    ['c'] = B_SKIPPABLE,
    ['d'] = B_SKIPPABLE,
    ['f'] = B_SKIPPABLE,
    ['g'] = B_SKIPPABLE,
    ['h'] = B_SKIPPABLE,
    ['i'] = B_SKIPPABLE,
    ['j'] = B_SKIPPABLE,
    ['k'] = B_SKIPPABLE,
    ['l'] = B_SKIPPABLE,
    ['m'] = B_SKIPPABLE,
    ['n'] = B_SKIPPABLE,
    ['o'] = B_SKIPPABLE,
    ['p'] = B_SKIPPABLE,
    ['q'] = B_SKIPPABLE,
    ['r'] = B_SKIPPABLE,
    ['s'] = B_SKIPPABLE,
    ['t'] = B_SKIPPABLE,
    ['u'] = B_SKIPPABLE,
    ['v'] = B_SKIPPABLE,
    ['w'] = B_SKIPPABLE,
    ['x'] = B_SKIPPABLE,
    ['y'] = B_SKIPPABLE,
    ['z'] = B_SKIPPABLE,
    ['A'] = B_SKIPPABLE,
    ['B'] = B_SKIPPABLE,
    ['C'] = B_SKIPPABLE,
    ['D'] = B_SKIPPABLE,
    ['F'] = B_SKIPPABLE,
    ['G'] = B_SKIPPABLE,
    ['H'] = B_SKIPPABLE,
    ['I'] = B_SKIPPABLE,
    ['J'] = B_SKIPPABLE,
    ['K'] = B_SKIPPABLE,
    ['L'] = B_SKIPPABLE,
    ['M'] = B_SKIPPABLE,
    ['N'] = B_SKIPPABLE,
    ['O'] = B_SKIPPABLE,
    ['P'] = B_SKIPPABLE,
    ['Q'] = B_SKIPPABLE,
    ['R'] = B_SKIPPABLE,
    ['S'] = B_SKIPPABLE,
    ['T'] = B_SKIPPABLE,
    ['U'] = B_SKIPPABLE,
    ['V'] = B_SKIPPABLE,
    ['W'] = B_SKIPPABLE,
    ['X'] = B_SKIPPABLE,
    ['Y'] = B_SKIPPABLE,
    ['Z'] = B_SKIPPABLE,
};

static inline bool space(char c)
{
    return byte_class[(unsigned char)c] & B_SPACE;
}

static inline bool number_byte(char c)
{
    return byte_class[(unsigned char)c] & B_NUMBER;
}

static inline const char *ws(const char *p, const char *end)
{
    while (p < end && space(*p))
        p++;
    return p;
}

/* A kept string, its quote at p: the body in *body, *n; the byte after the
 * closing quote, or NULL (an escape, a NUL, longer than the tokenizer
 * keeps, or the buffer's end). */
TW_HOT const char *fast_string(const char *p, fast_in *in, const char **body, size_t *n)
{
    const char *end = in->end;
    const char *b = p + 1, *q = qfind(in, b);
    if (q == end || *q != '"' || q - b > TW_JSTR_MAX)
        return NULL;
    *body = b;
    *n = (size_t)(q - b);
    return q + 1;
}

/* A skipped string, its quote at p: the byte after it, or NULL. */
TW_HOT const char *fast_skip_string(const char *p, fast_in *in)
{
    const char *end = in->end;
    for (p++;;) {
        p = qfind(in, p);
        if (p == end)
            return NULL;
        if (*p == '"')
            return p + 1;
        p += *p == '\\' ? 2 : 1; /* a backslash and the byte it escapes, or a NUL */
        if (p > end)
            return NULL;
    }
}

/* How many of the eight bytes at p are digits before the first that is
 * not (0-8), and the value of those digits in *value. */
static inline int eight_digits(const char *p, uint64_t *value)
{
    uint64_t w;
    memcpy(&w, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w); /* the first byte lowest, as below */
#endif
    /* a byte is a digit when its high nibble is 3 and adding 6 keeps it 3 */
    uint64_t odd = ((w & 0xf0f0f0f0f0f0f0f0ull) | (((w + 0x0606060606060606ull) & 0xf0f0f0f0f0f0f0f0ull) >> 4)) ^
                   0x3333333333333333ull;
    int k = odd ? __builtin_ctzll(odd) >> 3 : 8;
    if (k == 0)
        return *value = 0, 0;
    /* the k digits to the top bytes, zeros (leading zeros) below them */
    w = (w & 0x0f0f0f0f0f0f0f0full) << (8 * (8 - k));
    w = (w * 10 + (w >> 8)) & 0x00ff00ff00ff00ffull;
    w = (w * 100 + (w >> 16)) & 0x0000ffff0000ffffull;
    *value = (w * 10000 + (w >> 32)) & 0xffffffffull;
    return k;
}

/* A run of digits at p into *m (m * 10 per digit): the byte after it; its
 * length in *n. Eight at a time while eight bytes remain. */
static inline const char *digits(const char *p, const char *end, uint64_t *m, long *n)
{
    static const uint64_t pow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
    const char *start = p;
    while (end - p >= 8) {
        uint64_t v;
        int k = eight_digits(p, &v);
        *m = *m * pow10[k] + v;
        p += k;
        if (k < 8 || p - start > 19) {
            *n = p - start;
            return p;
        }
    }
    for (; p < end && (unsigned)(*p - '0') < 10; p++)
        *m = *m * 10 + (uint64_t)(*p - '0');
    *n = p - start;
    return p;
}

/* A number's text at p (a digit or a - not before I or N): its value in
 * *v, the byte after it, or NULL. As the tokenizer reads one: the common
 * [-]digits[.digits] of up to 19 digits is parsed as it is scanned, with
 * the arithmetic of tw_jstream_number; anything else goes there. */
TW_HOT const char *fast_number(const char *p, const char *end, double *v)
{
    static const double p10[] = {1,    1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,
                                 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19};
    if (*p == '-' && (p + 1 == end || p[1] == 'I' || p[1] == 'N'))
        return NULL;
    uint64_t m = 0;
    long whole, frac = 0;
    const char *q = digits(p + (*p == '-'), end, &m, &whole);
    if (q < end && *q == '.')
        q = digits(q + 1, end, &m, &frac);
    long n = whole + frac;
    if (q < end && !number_byte(*q) && n > 0 && n <= 19) {
        double x = frac ? (double)m / p10[frac] : (double)m; /* x / 1 is x */
        *v = *p == '-' ? -x : x;
        return q;
    }
    while (q < end && number_byte(*q))
        q++;
    if (q == end || q - p >= 72)
        return NULL;
    *v = tw_jstream_number(p, (size_t)(q - p));
    return q;
}

/* A string value read as a number (read_number): skipped to its first
 * digit or -, then strtod; NULL for a long one. */
static const char *fast_string_number(const char *p, fast_in *in, double *v)
{
    const char *body;
    size_t n;
    char tmp[64];
    const char *after = fast_string(p, in, &body, &n);
    if (!after || n >= sizeof tmp)
        return NULL;
    memcpy(tmp, body, n);
    tmp[n] = '\0';
    const char *t = tmp;
    while (*t && !(*t >= '0' && *t <= '9') && *t != '-')
        t++;
    char *stop;
    double x = strtod(t, &stop);
    *v = stop == t ? NAN : x;
    return after;
}

/* A value read as a number (read_number): a number, or a short string
 * holding one; is_string as there. NULL for anything else. */
TW_HOT const char *fast_value_number(const char *p, fast_in *in, double *v, bool *is_string)
{
    const char *end = in->end;
    *is_string = *p == '"';
    if ((*p >= '0' && *p <= '9') || *p == '-')
        return fast_number(p, end, v);
    return *p == '"' ? fast_string_number(p, in, v) : NULL;
}

/* A skipped object or array, its bracket at p: as skip_container in the
 * token path, up to TW_FAST_DEPTH deep. */
static const char *fast_skip_container(const char *p, fast_in *in)
{
    const char *end = in->end;
    char c = *p;
    uint64_t kinds = c == '{'; /* bit i: level i+1 is an object */
    int depth = 1;
    for (p++; p < end; p++) {
        c = *p;
        if (c == '"') {
            p = fast_skip_string(p, in);
            if (!p)
                return NULL;
            p--;
        } else if (c == '{' || c == '[') {
            if (depth == TW_FAST_DEPTH)
                return NULL;
            kinds = (kinds & ~(1ull << depth)) | ((uint64_t)(c == '{') << depth);
            depth++;
        } else if (c == '}' || c == ']') {
            depth--;
            if ((kinds >> depth & 1) != (c == '}'))
                return NULL;
            if (depth == 0)
                return p + 1;
        } else if (!(byte_class[(unsigned char)c] & B_SKIPPABLE)) {
            return NULL;
        }
    }
    return NULL;
}

/* A skipped value at p (tw_jstream_skip_next): the byte after it, or NULL
 * where the token path would fail or look further. */
TW_HOT const char *fast_skip(const char *p, fast_in *in)
{
    const char *end = in->end;
    char c = *p;
    if (c == '"')
        return fast_skip_string(p, in);
    if ((c >= '0' && c <= '9') || (c == '-' && p + 1 < end && p[1] >= '0' && p[1] <= '9')) {
        const char *q = p + 1;
        while (q < end && number_byte(*q))
            q++;
        return q < end ? q : NULL;
    }
    return c == '{' || c == '[' ? fast_skip_container(p, in) : NULL;
}

/* After a member's value: the next key's quote (*more), or the byte after
 * the object's } (a trailing comma allowed, as member_key does). */
TW_HOT const char *fast_next(const char *p, fast_in *in, bool *more)
{
    const char *end = in->end;
    if (end - p >= 3 && p[0] == ',' && p[1] == ' ' && p[2] == '"') /* how Kineto writes it */
        return *more = true, p + 2;
    p = ws(p, end);
    if (p == end)
        return NULL;
    if (*p == '}')
        return *more = false, p + 1;
    if (*p != ',')
        return NULL;
    p = ws(p + 1, end);
    if (p == end)
        return NULL;
    if (*p == '}')
        return *more = false, p + 1;
    return *p == '"' ? (*more = true, p) : NULL;
}

/* A key at its quote p: the body in *k, *n; the byte after its colon and
 * white space (a value's first byte, never end), or NULL. */
TW_HOT const char *fast_key(const char *p, fast_in *in, const char **k, size_t *n)
{
    const char *end = in->end;
    p = fast_string(p, in, k, n);
    if (!p)
        return NULL;
    if (end - p >= 3 && p[0] == ':' && p[1] == ' ' && !space(p[2])) /* how Kineto writes it */
        return p + 2;
    p = ws(p, end);
    if (p == end || *p != ':')
        return NULL;
    p = ws(p + 1, end);
    return p == end ? NULL : p;
}

static inline bool key_is(const char *k, size_t n, const char *want, size_t wn)
{
    return n == wn && memcmp(k, want, wn) == 0;
}

/* want in lower case; ASCII letters only are folded, as strcasecmp does
 * in the C locale. */
static inline bool key_is_nocase(const char *k, size_t n, const char *want, size_t wn)
{
    if (n != wn || (k[0] | 0x20) != want[0])
        return false;
    for (size_t i = 1; i < n; i++) {
        unsigned char c = (unsigned char)k[i];
        if ((c >= 'A' && c <= 'Z' ? c | 0x20 : c) != (unsigned char)want[i])
            return false;
    }
    return true;
}

/* After an object's {: its first key's quote (*more), or the byte after an
 * empty object's }. */
TW_HOT const char *fast_first(const char *p, fast_in *in, bool *more)
{
    const char *end = in->end;
    p = ws(p, end);
    if (p == end)
        return NULL;
    if (*p == '}')
        return *more = false, p + 1;
    return *p == '"' ? (*more = true, p) : NULL;
}

/* The value of one member of args, its key k, n: as read_args. */
static const char *fast_arg(tw_trace_event *e, const char *k, size_t n, const char *p, fast_in *in)
{
    double *target = NULL;
    int64_t *itarget = NULL;
    switch (n) { /* by length first: most args are none of these */
    case 5:
        target = key_is(k, n, "bytes", 5) ? &e->bytes : NULL;
        break;
    case 6:
        target = key_is(k, n, "device", 6) ? &e->device : key_is(k, n, "stream", 6) ? &e->stream : NULL;
        break;
    case 11: /* Kineto's spellings first */
        itarget = memcmp(k, "External id", 11) == 0        ? &e->external_id
                  : memcmp(k, "correlation", 11) == 0      ? &e->correlation
                  : key_is_nocase(k, n, "correlation", 11) ? &e->correlation
                  : key_is_nocase(k, n, "external id", 11) ? &e->external_id
                                                           : NULL;
        break;
    case 14:
        itarget = key_is_nocase(k, n, "correlation id", 14) ? &e->correlation : NULL;
        target = key_is(k, n, "Total Reserved", 14) ? &e->reserved : NULL;
        break;
    case 15:
        target = key_is(k, n, "Total Allocated", 15) ? &e->allocated : NULL;
        break;
    case 16:
        target = key_is(k, n, "current_reserved", 16) ? &e->reserved : NULL;
        break;
    case 17:
        target = key_is(k, n, "current_allocated", 17) ? &e->allocated : NULL;
        break;
    default:
        break;
    }
    if (!target && !itarget)
        return fast_skip(p, in);
    double v = NAN;
    bool str;
    p = fast_value_number(p, in, &v, &str);
    if (p && target)
        *target = v;
    else if (p && v == v && v >= 0 && v < 9e18)
        *itarget = (int64_t)v;
    return p;
}

/* The members of args, its { at p: the byte after its }, or NULL. */
static const char *fast_args(tw_trace_event *e, const char *p, fast_in *in)
{
    bool more;
    const char *k;
    size_t n;
    for (p = fast_first(p + 1, in, &more); p && more; p = fast_next(p, in, &more)) {
        p = fast_key(p, in, &k, &n);
        if (p)
            p = fast_arg(e, k, n, p, in);
        if (!p)
            return NULL;
    }
    return p;
}

/* A kept string value at p into out (cap bytes with its NUL), or NULL. */
TW_HOT const char *fast_copy(const char *p, fast_in *in, char *out, size_t cap, size_t *len)
{
    const char *body;
    size_t n;
    if (*p != '"' || !(p = fast_string(p, in, &body, &n)))
        return NULL;
    if (n > cap - 1)
        n = cap - 1;
    memcpy(out, body, n);
    out[n] = '\0';
    if (len)
        *len = n;
    return p;
}

/* One member of an event, its key k, n and its value at p: as parse_event. */
static const char *fast_member(tw_trace_event *e, const char *k, size_t n, const char *p, fast_in *in)
{
    double v = NAN;
    bool str;
    switch (n) {
    case 2:
        if (k[0] == 'p' && k[1] == 'h') {
            char ph[8] = "";
            p = fast_copy(p, in, ph, sizeof ph, NULL);
            e->ph = ph[0];
            return p;
        }
        if (k[0] == 't' && k[1] == 's') {
            p = fast_value_number(p, in, &v, &str);
            e->ts = v, e->has_ts = !str && isfinite(v);
            return p;
        }
        break;
    case 3:
        if (memcmp(k, "cat", 3) == 0)
            return fast_copy(p, in, e->cat, sizeof e->cat, NULL);
        if (memcmp(k, "dur", 3) == 0) {
            p = fast_value_number(p, in, &v, &str);
            e->dur = v, e->has_dur = !str && isfinite(v) && v >= 0;
            return p;
        }
        if ((k[0] == 'p' || k[0] == 't') && k[1] == 'i' && k[2] == 'd') {
            p = fast_value_number(p, in, &v, &str);
            *(k[0] == 'p' ? &e->pid : &e->tid) = as_id(v);
            return p;
        }
        break;
    case 4:
        if (memcmp(k, "name", 4) == 0)
            return fast_copy(p, in, e->name, sizeof e->name, &e->name_len);
        if (memcmp(k, "args", 4) == 0)
            return *p == '{' ? fast_args(e, p, in) : NULL;
        break;
    default:
        break;
    }
    return fast_skip(p, in);
}

/* A key of an event at its quote p, written as Kineto writes the eight an
 * event is read for ("ts": and a value): told from its bytes in one look,
 * without scanning for the closing quote; any other key, or other spacing,
 * goes through fast_key. */
TW_HOT const char *fast_event_key(const char *p, fast_in *in, const char **k, size_t *n)
{
    static const struct {
        const char *text; /* the key, its quotes, ": " */
        size_t len;
    } keys[] = {{"\"ph\": ", 6},  {"\"ts\": ", 6},  {"\"cat\": ", 7},  {"\"dur\": ", 7},
                {"\"pid\": ", 7}, {"\"tid\": ", 7}, {"\"name\": ", 8}, {"\"args\": ", 8}};
    int i;
    switch (in->end - p >= 9 ? p[1] : 0) {
    case 'p':
        i = p[2] == 'h' ? 0 : 4;
        break;
    case 't':
        i = p[2] == 's' ? 1 : 5;
        break;
    case 'c':
        i = 2;
        break;
    case 'd':
        i = 3;
        break;
    case 'n':
        i = 6;
        break;
    case 'a':
        i = 7;
        break;
    default:
        return fast_key(p, in, k, n);
    }
    size_t len = keys[i].len;
    if (memcmp(p, keys[i].text, len) != 0 || space(p[len]))
        return fast_key(p, in, k, n);
    *k = p + 1;
    *n = len - 4;
    return p + len;
}

/* An event whose { is at p, whole in [p, end): read into r->ev; the byte
 * after its }, or NULL (r->ev then holds nothing the token path keeps). */
static const char *fast_event(reader *r, const char *p, fast_in *in)
{
    tw_trace_event *e = &r->ev;
    event_reset(e);
    bool more;
    const char *k;
    size_t n;
    for (p = fast_first(p + 1, in, &more); p && more; p = fast_next(p, in, &more)) {
        p = fast_event_key(p, in, &k, &n);
        if (p)
            p = fast_member(e, k, n, p, in);
        if (!p)
            return NULL;
    }
    return p;
}

/* Hands r->ev over, read by either path. */
static void finish_event(reader *r)
{
    tw_trace_event *e = &r->ev;
    if (e->ph == 0)
        return; /* Paddle's {} sentinel, or not an event */
    if (!r->st->legacy && (e->cat[0] == 'O' || e->cat[0] == 'R'))
        r->st->legacy = strcmp(e->cat, "Operator") == 0 || strcmp(e->cat, "Runtime") == 0;
    if (!r->st->paddle && (e->cat[0] == 'C' || e->cat[0] == 'P'))
        r->st->paddle = strcmp(e->cat, "CudaRuntime") == 0 || strcmp(e->cat, "ProfileStep") == 0;
    if (!r->st->kineto && (e->cat[0] == 'c' || e->cat[0] == 'k'))
        r->st->kineto = strcmp(e->cat, "cpu_op") == 0 || strcmp(e->cat, "kernel") == 0;
    if (e->ph == 'E') { /* handed over as the complete event it ends */
        if (!end_span(r, e))
            return;
        e = &r->paired;
    } else if (e->ph == 'B') {
        begin_span(r, e);
    }
    tw_trace_classify(e);
    r->st->events++;
    r->fn(r->arg, e);
}

/* The next event read in place, when it lies whole in the buffer: [,] {
 * ... } consumed and handed over; false (nothing consumed) otherwise. */
static bool next_event_fast(reader *r, bool first)
{
    tw_jstream *s = r->s;
    const char *end = s->buf + s->len, *p = ws(s->buf + s->pos, end);
    if (r->in.end != end || r->in_base != s->base) /* the buffer was refilled */
        r->in = (fast_in){.end = end}, r->in_base = s->base;
    if (!first) {
        if (p == end || *p != ',')
            return false;
        p = ws(p + 1, end);
    }
    if (p == end || *p != '{' || !(p = fast_event(r, p, &r->in)))
        return false;
    s->pos = (size_t)(p - s->buf);
    finish_event(r);
    return true;
}

static bool read_events(reader *r)
{
    bool first = true;
    for (;;) {
        if (next_event_fast(r, first)) {
            first = false;
            continue;
        }
        tw_jtok t = tw_jstream_next(r->s);
        if (!first) {
            if (t == TW_JT_ARRAY_END)
                return true;
            if (t != TW_JT_COMMA)
                return fail(r, t == TW_JT_EOF ? "unexpected end of input" : "expected , or ] between events");
            t = tw_jstream_next(r->s);
        }
        first = false;
        if (t == TW_JT_ARRAY_END)
            return true;
        if (t == TW_JT_OBJECT) {
            if (!parse_event(r))
                return false;
            finish_event(r);
        } else if (t == TW_JT_EOF) {
            return fail(r, "unexpected end of input");
        } else if (!tw_jstream_skip(r->s, t)) {
            return false;
        }
    }
}

static bool read_distributed(reader *r)
{
    char key[32];
    bool first = true, str;
    for (;;) {
        int k = member_key(r, first, key, sizeof key);
        first = false;
        if (k <= 0)
            return k == 0;
        if (strcmp(key, "rank") == 0) {
            double v;
            if (!read_number(r, &v, &str))
                return false;
            if (v == v && v >= 0 && v <= 1e9)
                r->st->rank = (int)v;
        } else if (!tw_jstream_skip_next(r->s)) {
            return false;
        }
    }
}

int tw_trace_read(tw_jstream *s, tw_trace_event_fn fn, void *arg, tw_trace_reader_stats *st, const char **error)
{
    memset(st, 0, sizeof *st);
    st->rank = -1;
    reader *r = malloc(sizeof *r);
    if (!r)
        return TW_ENOMEM;
    *r = (reader){.s = s, .fn = fn, .arg = arg, .st = st};
    bool ok;
    tw_jtok t = tw_jstream_next(s);
    if (t == TW_JT_ARRAY) {
        ok = read_events(r);
    } else if (t == TW_JT_OBJECT) {
        char key[32];
        bool first = true;
        ok = true;
        for (;;) {
            int k = member_key(r, first, key, sizeof key);
            first = false;
            if (k <= 0) {
                ok = k == 0;
                break;
            }
            tw_jtok v = tw_jstream_next(s);
            if (strcmp(key, "traceEvents") == 0 && v == TW_JT_ARRAY)
                ok = read_events(r);
            else if (strcmp(key, "distributedInfo") == 0 && v == TW_JT_OBJECT)
                ok = read_distributed(r);
            else
                ok = tw_jstream_skip(s, v);
            if (!ok)
                break;
        }
    } else {
        ok = fail(r, t == TW_JT_EOF ? "empty input" : "not a JSON object or array");
    }
    for (int i = 0; i < r->stack_count; i++) {
        st->unpaired += (uint64_t)r->stacks[i].depth; /* begun, never ended */
        free(r->stacks[i].v);
    }
    free(r);
    if (ok)
        return TW_OK;
    *error = s->error ? s->error : "not JSON";
    return TW_EFORMAT;
}
