/*
 * rank.c: one rank's accumulator. Each event goes where it counts: GPU
 * work into the timeline and the kernel table, operators into the
 * operator table with self time from a per-thread stack, runtime calls
 * into a direct-mapped cache by correlation id (for launch delays and the
 * operator behind each kernel), copies into the per-direction totals,
 * memory events into the peaks. Both caches hold 65536 entries and are
 * overwritten by newer ids, so memory stays flat; a kernel whose launch
 * was overwritten is simply not matched.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tables.h"
#include "timeline.h"
#include "trainwatch/error.h"

#define CACHE   (1u << 16)
#define THREADS 64
#define DEPTH   1024

typedef struct frame {
    double start, end, self;
    int32_t row;
} frame;

typedef struct thread_stack {
    int64_t pid, tid;
    double comm_start, comm_end; /* the latest Communication span on the thread (Paddle) */
    int depth;
    bool post_order; /* operators written as they end (legacy Kineto), parents after children */
    frame f[DEPTH];
} thread_stack;

/* A runtime call and its kernel meet here by correlation id, whichever of
 * the two comes first in the file (legacy Kineto writes kernels first). */
typedef struct launch {
    int64_t correlation;
    bool has_call, has_kernel;
    bool comm;        /* the call was made inside a Communication span */
    double ts, dur;   /* the call */
    int32_t op;       /* the operator that made the call */
    double kts, kdur; /* the kernel */
    int32_t kernel_row;
} launch;

typedef struct ext_entry {
    int64_t ext;
    int32_t op;
    bool set; /* zero (calloc): empty, so an unused slot is never touched */
} ext_entry;

struct tw_rank_acc {
    tw_trace_rank *out;
    tw_trace_options o;
    tw_timeline tl;
    tw_name_table kernels, ops;
    launch *launches;
    ext_entry *exts;
    thread_stack *threads;
    int thread_count;
    bool comm_spans; /* a Communication span was seen: runtime calls are checked against them */
};

int tw_rank_acc_new(tw_rank_acc **out, tw_trace_rank *rank, const tw_trace_options *o)
{
    tw_rank_acc *a = calloc(1, sizeof *a);
    if (!a)
        return TW_ENOMEM;
    a->out = rank;
    a->o = *o;
    tw_timeline_init(&a->tl, o->gap_us);
    /* zeroed by calloc, as the kernel hands out pages: a slot is empty
     * until a call, a kernel or an operator fills it (has_call, has_kernel,
     * set), and a small trace touches only the pages it uses */
    a->launches = calloc(CACHE, sizeof *a->launches);
    a->exts = calloc(CACHE, sizeof *a->exts);
    a->threads = calloc(THREADS, sizeof *a->threads);
    if (!a->launches || !a->exts || !a->threads || tw_name_table_init(&a->kernels) != TW_OK ||
        tw_name_table_init(&a->ops) != TW_OK) {
        tw_rank_acc_free(a);
        return TW_ENOMEM;
    }
    rank->peak_allocated = rank->peak_reserved = NAN;
    rank->reader_ratio = rank->dataloader_ratio = rank->ips = NAN;
    *out = a;
    return TW_OK;
}

void tw_rank_acc_free(tw_rank_acc *a)
{
    if (!a)
        return;
    tw_timeline_free(&a->tl);
    tw_name_table_free(&a->kernels);
    tw_name_table_free(&a->ops);
    free(a->launches);
    free(a->exts);
    free(a->threads);
    free(a);
}

static void row_add(tw_name_row *r, double dur)
{
    r->count++;
    r->total += dur;
    if (dur > r->max)
        r->max = dur;
    if (dur < r->min)
        r->min = dur;
}

static thread_stack *thread_of(tw_rank_acc *a, int64_t pid, int64_t tid)
{
    for (int i = 0; i < a->thread_count; i++) {
        if (a->threads[i].pid == pid && a->threads[i].tid == tid)
            return &a->threads[i];
    }
    if (a->thread_count == THREADS)
        return NULL;
    thread_stack *t = &a->threads[a->thread_count++];
    t->pid = pid;
    t->tid = tid;
    t->depth = 0;
    t->post_order = false;
    t->comm_start = t->comm_end = NAN;
    return t;
}

static void pop(tw_rank_acc *a, thread_stack *t)
{
    frame *f = &t->f[--t->depth];
    a->ops.rows[f->row].self += f->self;
}

/* Operators nest on their thread: an operator's self time is its duration
 * less its direct children's. Kineto writes them as they start (parents
 * first: the stack holds the open ancestors), legacy Kineto as they end
 * (children first: the stack holds finished subtrees until their parent
 * comes and takes them). A thread is taken as the second kind once an
 * operator strictly contains the one before it. */
static void operator(tw_rank_acc *a, const tw_trace_event *e)
{
    int32_t row = tw_name_table_row(&a->ops, e->name, e->name_len, tw_trace_event_hash(e));
    row_add(&a->ops.rows[row], e->dur);
    if (e->external_id >= 0)
        a->exts[e->external_id % CACHE] = (ext_entry){e->external_id, row, true};
    thread_stack *t = thread_of(a, e->pid, e->tid);
    double end = e->ts + e->dur, self = e->dur;
    if (!t) {
        a->ops.rows[row].self += e->dur;
        return;
    }
    if (t->depth > 0) {
        const frame *top = &t->f[t->depth - 1];
        if (top->start >= e->ts && top->end <= end && (top->start > e->ts || top->end < end))
            t->post_order = true;
    }
    if (t->post_order) {
        while (t->depth > 0 && t->f[t->depth - 1].start >= e->ts && t->f[t->depth - 1].end <= end) {
            self -= t->f[t->depth - 1].end - t->f[t->depth - 1].start;
            pop(a, t);
        }
    } else {
        while (t->depth > 0 && t->f[t->depth - 1].end <= e->ts)
            pop(a, t);
        if (t->depth > 0 && end <= t->f[t->depth - 1].end)
            t->f[t->depth - 1].self -= e->dur;
    }
    if (t->depth == DEPTH) { /* the oldest frame is settled without its parent */
        a->ops.rows[t->f[0].row].self += t->f[0].self;
        memmove(&t->f[0], &t->f[1], (DEPTH - 1) * sizeof t->f[0]);
        t->depth--;
    }
    t->f[t->depth++] = (frame){e->ts, end, self, row};
}

/* The operator innermost on the event's thread, or by external id. */
static int32_t issuer_of(tw_rank_acc *a, const tw_trace_event *e)
{
    if (e->external_id >= 0) {
        const ext_entry *x = &a->exts[e->external_id % CACHE];
        if (x->set && x->ext == e->external_id)
            return x->op;
    }
    for (int i = 0; i < a->thread_count; i++) {
        thread_stack *t = &a->threads[i];
        if (t->pid == e->pid && t->tid == e->tid && t->depth > 0 && !t->post_order && t->f[t->depth - 1].end >= e->ts)
            return t->f[t->depth - 1].row;
    }
    return -1;
}

static void matched(tw_rank_acc *a, launch *l)
{
    tw_trace_rank *r = a->out;
    r->launches++;
    double delay = l->kts - l->ts;
    r->launch_delay_sum += delay;
    if (delay > r->launch_delay_max)
        r->launch_delay_max = delay;
    r->launch_time_sum += l->dur;
    r->launch_bound += l->kdur < l->dur;
    tw_name_row *k = &a->kernels.rows[l->kernel_row];
    if (k->issuer < 0)
        k->issuer = l->op;
    l->correlation = -1;
}

/* Whether the call e was made inside a Communication span of its thread. */
static bool in_comm_span(tw_rank_acc *a, const tw_trace_event *e)
{
    for (int i = 0; i < a->thread_count; i++) {
        const thread_stack *t = &a->threads[i];
        if (t->pid == e->pid && t->tid == e->tid)
            return e->ts >= t->comm_start && e->ts < t->comm_end;
    }
    return false;
}

static void comm_span(tw_rank_acc *a, const tw_trace_event *e)
{
    thread_stack *t = thread_of(a, e->pid, e->tid);
    a->comm_spans = true;
    if (t) {
        t->comm_start = e->ts;
        t->comm_end = e->ts + e->dur;
    }
}

/* A kernel launched from inside a Communication span communicates (as
 * Paddle's Distribution Summary counts it), when its call came first. */
static tw_trace_kind kernel_kind(tw_rank_acc *a, const tw_trace_event *e)
{
    if (e->kind != TW_TK_KERNEL || e->correlation < 0)
        return e->kind;
    const launch *l = &a->launches[e->correlation % CACHE];
    return l->correlation == e->correlation && l->has_call && l->comm ? TW_TK_COMM : e->kind;
}

static void runtime(tw_rank_acc *a, const tw_trace_event *e)
{
    if (e->correlation < 0)
        return;
    launch *l = &a->launches[e->correlation % CACHE];
    int32_t op = issuer_of(a, e);
    bool comm = a->comm_spans && in_comm_span(a, e);
    if (l->correlation == e->correlation && l->has_kernel) {
        l->has_call = true;
        l->ts = e->ts;
        l->dur = e->dur;
        l->op = op;
        matched(a, l);
        return;
    }
    *l = (launch){.correlation = e->correlation, .has_call = true, .comm = comm, .ts = e->ts, .dur = e->dur, .op = op};
}

static tw_copy_dir copy_dir(const char *name)
{
    static const struct {
        const char *needle;
        tw_copy_dir d;
    } dirs[] = {{"HtoD", TW_COPY_HTOD}, {"DtoH", TW_COPY_DTOH}, {"DtoD", TW_COPY_DTOD},
                {"HtoH", TW_COPY_HTOH}, {"PtoP", TW_COPY_PTOP}, {"PeerToPeer", TW_COPY_PTOP}};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        if (strstr(name, dirs[i].needle))
            return dirs[i].d;
    }
    return TW_COPY_OTHER;
}

static void stream_add(tw_trace_rank *r, const tw_trace_event *e, tw_trace_kind kind)
{
    int64_t device = e->device == e->device ? (int64_t)e->device : e->pid;
    int64_t stream = e->stream == e->stream ? (int64_t)e->stream : e->tid;
    tw_trace_stream *st = NULL;
    for (int i = 0; i < r->stream_count && !st; i++) {
        if (r->streams[i].device == device && r->streams[i].stream == stream)
            st = &r->streams[i];
    }
    if (!st) {
        if (r->stream_count == TW_TRACE_STREAMS) {
            r->streams_over++;
            return;
        }
        st = &r->streams[r->stream_count++];
        *st = (tw_trace_stream){.device = device, .stream = stream, .first = e->ts, .last = e->ts + e->dur};
    }
    if (kind == TW_TK_MEMCPY || kind == TW_TK_MEMSET) {
        st->copies++;
        st->memcpy += e->dur;
    } else {
        st->kernels++;
        *(kind == TW_TK_COMM ? &st->comm : &st->compute) += e->dur;
    }
    st->busy += e->dur;
    st->first = tw_dmin(st->first, e->ts);
    st->last = tw_dmax(st->last, e->ts + e->dur);
}

static void kernel(tw_rank_acc *a, const tw_trace_event *e, tw_trace_kind kind)
{
    tw_trace_rank *r = a->out;
    int32_t row = tw_name_table_row(&a->kernels, e->name, e->name_len, tw_trace_event_hash(e));
    tw_name_row *k = &a->kernels.rows[row];
    row_add(k, e->dur);
    r->kernels++;
    r->kernel_time += e->dur;
    if (e->dur < a->o.short_kernel_us) {
        k->short_count++;
        k->short_total += e->dur;
        r->short_kernels++;
        r->short_kernel_time += e->dur;
    }
    stream_add(r, e, kind);
    if (k->issuer < 0 && e->external_id >= 0) {
        const ext_entry *x = &a->exts[e->external_id % CACHE];
        if (x->set && x->ext == e->external_id)
            k->issuer = x->op;
    }
    if (e->correlation < 0 || row == TW_TABLE_MAX)
        return;
    launch *l = &a->launches[e->correlation % CACHE];
    if (l->correlation == e->correlation && l->has_call) {
        l->has_kernel = true;
        l->kts = e->ts;
        l->kdur = e->dur;
        l->kernel_row = row;
        matched(a, l);
        return;
    }
    *l = (launch){
        .correlation = e->correlation, .has_kernel = true, .kts = e->ts, .kdur = e->dur, .kernel_row = row, .op = -1};
}

static void copy(tw_rank_acc *a, const tw_trace_event *e)
{
    tw_trace_rank *r = a->out;
    tw_copy_dir d = e->kind == TW_TK_MEMSET ? TW_COPY_MEMSET : copy_dir(e->name);
    tw_trace_copy *c = &r->copies[d];
    stream_add(r, e, e->kind);
    c->count++;
    c->time += e->dur;
    if (e->bytes == e->bytes && e->bytes >= 0)
        c->bytes += e->bytes;
    if (d != TW_COPY_MEMSET && strstr(e->name, "Pageable")) {
        r->pageable_count++;
        if (e->bytes == e->bytes && e->bytes >= 0)
            r->pageable_bytes += e->bytes;
    }
}

static void memory(tw_rank_acc *a, const tw_trace_event *e)
{
    tw_trace_rank *r = a->out;
    if (!e->has_ts)
        return;
    tw_trace_step *s = tw_timeline_step_at(&a->tl, e->ts);
    if (e->allocated == e->allocated) {
        r->peak_allocated = isnan(r->peak_allocated) ? e->allocated : fmax(r->peak_allocated, e->allocated);
        if (s)
            s->peak_allocated = isnan(s->peak_allocated) ? e->allocated : fmax(s->peak_allocated, e->allocated);
    }
    if (e->reserved == e->reserved) {
        r->peak_reserved = isnan(r->peak_reserved) ? e->reserved : fmax(r->peak_reserved, e->reserved);
        if (s)
            s->peak_reserved = isnan(s->peak_reserved) ? e->reserved : fmax(s->peak_reserved, e->reserved);
    }
}

/* The phases of the trace event format (every event passes: a table, not
 * a scan of the list). */
static bool known_ph(char ph)
{
    static const bool known[256] = {
        ['X'] = 1, ['i'] = 1, ['I'] = 1, ['s'] = 1, ['f'] = 1, ['t'] = 1, ['M'] = 1, ['B'] = 1, ['E'] = 1, ['b'] = 1,
        ['e'] = 1, ['n'] = 1, ['C'] = 1, ['P'] = 1, ['O'] = 1, ['N'] = 1, ['D'] = 1, ['R'] = 1, ['c'] = 1};
    return known[(unsigned char)ph];
}

void tw_rank_acc_event(void *arg, const tw_trace_event *e)
{
    tw_rank_acc *a = arg;
    tw_trace_rank *r = a->out;
    r->events++;
    if (!known_ph(e->ph)) {
        r->skipped++;
        return;
    }
    if (e->kind == TW_TK_MEMORY) {
        memory(a, e);
        return;
    }
    if (e->kind == TW_TK_OTHER)
        return;
    if (!e->has_ts || !e->has_dur) {
        r->skipped++; /* no ts or dur, or a negative, NaN or string one */
        return;
    }
    double end = e->ts + e->dur;
    switch (e->kind) {
    case TW_TK_OP:
        operator(a, e);
        break;
    case TW_TK_KERNEL:
    case TW_TK_COMM: {
        tw_trace_kind kind = kernel_kind(a, e);
        tw_timeline_add(&a->tl, kind == TW_TK_COMM ? TW_SET_COMM : TW_SET_COMPUTE, e->ts, end);
        kernel(a, e, kind);
        break;
    }
    case TW_TK_COMM_SPAN:
        comm_span(a, e);
        break;
    case TW_TK_MEMCPY:
    case TW_TK_MEMSET:
        tw_timeline_add(&a->tl, TW_SET_MEMCPY, e->ts, end);
        copy(a, e);
        break;
    case TW_TK_RUNTIME:
        runtime(a, e);
        break;
    case TW_TK_SYNC:
        r->sync_calls++;
        r->sync_time += e->dur;
        tw_timeline_add(&a->tl, TW_SET_SYNC, e->ts, end);
        runtime(a, e);
        break;
    case TW_TK_STEP:
        tw_timeline_add_step(&a->tl, tw_trace_step_id(e->name), e->ts, end);
        break;
    case TW_TK_DATALOADER:
        tw_timeline_add(&a->tl, TW_SET_DATA, e->ts, end);
        break;
    default:
        break;
    }
}

int tw_rank_acc_finish(tw_rank_acc *a)
{
    tw_trace_rank *r = a->out;
    for (int i = 0; i < a->thread_count; i++) {
        while (a->threads[i].depth > 0)
            pop(a, &a->threads[i]);
    }
    tw_timeline_finish(&a->tl);
    if (a->tl.error)
        return a->tl.error;
    tw_timeline_total(&a->tl, &r->total);
    r->step_count = (int)a->tl.step_count;
    r->steps_over = a->tl.steps_over;
    r->steps = a->tl.steps; /* handed over to the rank */
    a->tl.steps = NULL;
    a->tl.step_count = 0;
    r->late = a->tl.late;
    r->flushes = a->tl.flushes;
    r->flushes_forced = a->tl.forced;
    r->kernel_names = a->kernels.n;
    r->op_names = a->ops.n;
    r->names_over = a->kernels.over + a->ops.over;
    r->top_kernel_count = tw_name_table_top(&a->kernels, false, r->top_kernels, TW_TRACE_TOP, &a->ops);
    r->top_op_count = tw_name_table_top(&a->ops, false, r->top_ops, TW_TRACE_TOP, NULL);
    r->top_self_count = tw_name_table_top(&a->ops, true, r->top_self, TW_TRACE_TOP, NULL);
    return TW_OK;
}
