/*
 * gpu.c: GPU telemetry samples kept by a run, and one launch's summary of
 * them: mean utilisation, the share of samples at 0%, memory at the start
 * and the end of the launch (medians of the first and last quarter, so one
 * odd sample moves neither) and its peak.
 *
 * Alignment is by time: a launch takes the samples from a minute before its
 * first timestamped step to a minute after its last (nvidia-smi CSV rows
 * come every 30 s in paddle's default.gpu.log). Without times on either
 * side the samples are used only when the log holds a single launch; a
 * launch the GPU log does not overlap gets none, and the rule says so.
 */
#include "gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/json.h"
#include "trainwatch/error.h"

#define ALIGN_SLACK 60.0 /* seconds around a launch's span */

static int intern_file(tw_gpu_notes *n, const char *file, uint32_t *out)
{
    if (n->file_count && strcmp(n->files[n->file_count - 1], file) == 0) {
        *out = n->file_count - 1;
        return TW_OK;
    }
    for (uint32_t i = 0; i < n->file_count; i++) {
        if (strcmp(n->files[i], file) == 0) {
            *out = i;
            return TW_OK;
        }
    }
    char **files = realloc(n->files, sizeof *files * (n->file_count + 1));
    if (!files)
        return TW_ENOMEM;
    n->files = files;
    if (!(files[n->file_count] = strdup(file)))
        return TW_ENOMEM;
    *out = n->file_count++;
    return TW_OK;
}

int tw_run_add_gpu(tw_run *run, const char *file, const tw_gpu_sample *sample)
{
    if (!run->gpu && !(run->gpu = calloc(1, sizeof *run->gpu)))
        return TW_ENOMEM;
    tw_gpu_notes *n = run->gpu;
    if (n->count == TW_GPU_SAMPLES_MAX) {
        n->dropped++;
        return TW_OK;
    }
    if (n->count == n->cap) {
        size_t cap = n->cap ? n->cap * 2 : 256;
        tw_gpu_note *items = realloc(n->items, sizeof *items * cap);
        if (!items)
            return TW_ENOMEM;
        n->items = items;
        n->cap = cap;
    }
    uint32_t f;
    int rc = intern_file(n, file, &f);
    if (rc != TW_OK)
        return rc;
    n->items[n->count++] = (tw_gpu_note){.s = *sample, .file = f};
    return TW_OK;
}

void tw_gpu_notes_free(tw_gpu_notes *n)
{
    if (!n)
        return;
    for (uint32_t i = 0; i < n->file_count; i++)
        free(n->files[i]);
    free(n->files);
    free(n->items);
    free(n->bindings);
    free(n);
}

/* The launch's training time: from its first step to its last on any rank
 * (the span of its steps, not of every record: a start line may carry a
 * timestamp without a year). False when its steps carry no time. */
static bool step_span(const tw_run *view, double *from, double *to)
{
    *from = *to = NAN;
    for (int i = 0; i < view->rank_count; i++) {
        const tw_rank *rk = view->ranks[i];
        if (!rk->used)
            continue;
        if (!isnan(rk->first.time) && !(rk->first.time >= *from))
            *from = rk->first.time;
        if (!isnan(rk->last.time) && !(rk->last.time <= *to))
            *to = rk->last.time;
    }
    return !isnan(*from) && !isnan(*to);
}

static bool in_span(const tw_gpu_sample *s, bool by_time, double from, double to)
{
    if (!by_time)
        return true;
    return !isnan(s->time) && s->time >= from - ALIGN_SLACK && s->time <= to + ALIGN_SLACK;
}

/* Median of the memory of the samples [from, to) of `picked`. */
static double quarter_median(const tw_gpu_notes *n, const size_t *picked, size_t from, size_t to, double *scratch)
{
    size_t k = 0;
    for (size_t i = from; i < to; i++) {
        if (!isnan(n->items[picked[i]].s.mem_used))
            scratch[k++] = n->items[picked[i]].s.mem_used;
    }
    return k ? tw_median(scratch, k) : NAN;
}

static void summarize_memory(const tw_gpu_notes *n, const size_t *picked, size_t count, tw_gpu_summary *out)
{
    double *scratch = malloc(sizeof(double) * (count / 4 + 1));
    if (!scratch)
        return;
    size_t quarter = count / 4 ? count / 4 : 1;
    out->mem_first = quarter_median(n, picked, 0, quarter, scratch);
    out->mem_last = quarter_median(n, picked, count - quarter, count, scratch);
    free(scratch);
}

static void summarize_picked(const tw_gpu_notes *n, const size_t *picked, size_t count, tw_gpu_summary *out)
{
    double util_sum = 0;
    uint64_t util_n = 0, zero = 0;
    uint64_t seen[4] = {0}; /* GPU indexes 0..255 seen, as bits */
    for (size_t i = 0; i < count; i++) {
        const tw_gpu_sample *s = &n->items[picked[i]].s;
        if (!isnan(s->util)) {
            util_sum += s->util;
            util_n++;
            zero += s->util == 0;
        }
        if (!isnan(s->mem_used) && !(s->mem_used <= out->mem_max))
            out->mem_max = s->mem_used;
        if (!isnan(s->mem_total) && !(s->mem_total <= out->mem_total))
            out->mem_total = s->mem_total;
        int g = s->gpu < 0 ? 0 : s->gpu;
        if (g < 256 && !(seen[g / 64] & (1ull << (g % 64)))) {
            seen[g / 64] |= 1ull << (g % 64);
            out->gpus++;
        }
    }
    if (util_n) {
        out->util_mean = util_sum / (double)util_n;
        out->util_zero_share = (double)zero / (double)util_n;
    }
    summarize_memory(n, picked, count, out);
}

static void summarize_ranks(const tw_run *root, const tw_run *view, const size_t *picked, size_t count,
                            tw_gpu_summary *out);

void tw_gpu_summarize(const tw_run *root, const tw_run *view, tw_gpu_summary *out)
{
    memset(out, 0, sizeof *out);
    out->util_mean = out->util_zero_share = out->mem_first = out->mem_last = NAN;
    out->mem_max = out->mem_total = out->log_first_time = out->log_last_time = NAN;
    out->steps_first_time = out->steps_last_time = NAN;
    const tw_gpu_notes *n = root->gpu;
    if (!n || n->count == 0)
        return;
    out->samples_all = n->count;
    bool timed = false;
    for (size_t i = 0; i < n->count; i++) {
        double t = n->items[i].s.time;
        if (isnan(t))
            continue;
        timed = true;
        if (!(t >= out->log_first_time))
            out->log_first_time = t;
        if (!(t <= out->log_last_time))
            out->log_last_time = t;
    }
    double from = NAN, to = NAN;
    bool by_time = timed && step_span(view, &from, &to);
    out->steps_first_time = from;
    out->steps_last_time = to;
    if (!by_time && tw_run_launches(root) > 1)
        return; /* nothing to say which launch the samples belong to */
    size_t *picked = malloc(sizeof *picked * n->count);
    if (!picked)
        return;
    size_t count = 0;
    for (size_t i = 0; i < n->count; i++) {
        if (in_span(&n->items[i].s, by_time, from, to))
            picked[count++] = i;
    }
    if (count) {
        out->samples = count;
        out->aligned = by_time;
        out->first = (tw_source){.file = n->files[n->items[picked[0]].file], .line = n->items[picked[0]].s.line};
        summarize_picked(n, picked, count, out);
        summarize_ranks(root, view, picked, count, out);
    }
    free(picked);
}

typedef struct timed_sample {
    int gpu;
    double time, util;
} timed_sample;

static int by_gpu_then_time(const void *a, const void *b)
{
    const timed_sample *x = a, *y = b;
    if (x->gpu != y->gpu)
        return x->gpu < y->gpu ? -1 : 1;
    return x->time < y->time ? -1 : x->time > y->time;
}

/* The timed samples of the GPU logs over view's span (all of them when the
 * run has one launch and no step times say the span), into *out (the
 * caller frees it): how many, 0 when none, TW_ENOMEM. */
static int timed_samples(const tw_run *root, const tw_run *view, timed_sample **out)
{
    *out = NULL;
    const tw_gpu_notes *n = root->gpu;
    if (!n || n->count < 1)
        return 0;
    double from, to;
    bool by_time = step_span(view, &from, &to);
    if (!by_time && tw_run_launches(root) > 1)
        return 0; /* as tw_gpu_summarize: nothing says which launch the samples belong to */
    timed_sample *v = malloc(sizeof *v * n->count);
    if (!v)
        return TW_ENOMEM;
    int count = 0;
    for (size_t i = 0; i < n->count; i++) {
        const tw_gpu_sample *s = &n->items[i].s;
        if (!isnan(s->time) && in_span(s, by_time, from, to))
            v[count++] = (timed_sample){.gpu = s->gpu < 0 ? 0 : s->gpu, .time = s->time, .util = s->util};
    }
    *out = v;
    return count;
}

int tw_gpu_each_interval(const tw_run *root, const tw_run *view, tw_gpu_interval_fn fn, void *arg)
{
    timed_sample *v;
    int count = timed_samples(root, view, &v);
    if (count <= 0) {
        free(v);
        return count;
    }
    qsort(v, (size_t)count, sizeof *v, by_gpu_then_time);
    int gpus = 0, counted = -1; /* sorted by GPU: one counted at its first interval */
    for (int i = 1; i < count; i++) {
        if (v[i].gpu != v[i - 1].gpu || !(v[i].time > v[i - 1].time))
            continue;
        if (v[i].gpu != counted) {
            gpus++;
            counted = v[i].gpu;
        }
        fn(arg, v[i].gpu, v[i - 1].util, v[i].time - v[i - 1].time);
    }
    free(v);
    return gpus;
}

static int by_time_only(const void *a, const void *b)
{
    const timed_sample *x = a, *y = b;
    return x->time < y->time ? -1 : x->time > y->time;
}

int tw_gpu_each_util(const tw_run *root, const tw_run *view, tw_gpu_util_fn fn, void *arg)
{
    timed_sample *v;
    int count = timed_samples(root, view, &v);
    if (count <= 0) {
        free(v);
        return count < 0 ? count : TW_OK;
    }
    qsort(v, (size_t)count, sizeof *v, by_time_only);
    for (int i = 0; i < count; i++)
        if (isfinite(v[i].util))
            fn(arg, v[i].time, v[i].util);
    free(v);
    return TW_OK;
}

static double gib(double bytes)
{
    return bytes / (1024.0 * 1024 * 1024);
}

void tw_gpu_summary_text(const tw_gpu_summary *g, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%llu samples%s", (unsigned long long)g->samples, g->aligned ? " over the launch" : "");
    if (n > 0 && (size_t)n < cap && !isnan(g->util_mean))
        n += snprintf(buf + n, cap - (size_t)n, ", utilisation %.0f%% on average, 0%% in %.0f%%", g->util_mean,
                      g->util_zero_share * 100);
    if (n > 0 && (size_t)n < cap && !isnan(g->mem_max))
        n += snprintf(buf + n, cap - (size_t)n, ", memory peak %.2f GiB", gib(g->mem_max));
    if (n > 0 && (size_t)n < cap && !isnan(g->mem_max) && !isnan(g->mem_total))
        snprintf(buf + n, cap - (size_t)n, " of %.1f GiB", gib(g->mem_total));
}

static void number_or_null(FILE *out, const char *name, double v)
{
    fprintf(out, ",\"%s\":", name);
    if (isnan(v))
        fputs("null", out);
    else
        tw_json_number(out, v);
}

void tw_gpu_summary_json(FILE *out, const tw_gpu_summary *g)
{
    if (g->samples_all == 0) {
        fputs("null", out);
        return;
    }
    fprintf(out, "{\"samples\":%llu,\"samples_all\":%llu,\"gpus\":%d,\"aligned\":%s", (unsigned long long)g->samples,
            (unsigned long long)g->samples_all, g->gpus, g->aligned ? "true" : "false");
    number_or_null(out, "utilization_mean", g->util_mean);
    number_or_null(out, "utilization_zero_share", g->util_zero_share);
    number_or_null(out, "memory_first_bytes", g->mem_first);
    number_or_null(out, "memory_last_bytes", g->mem_last);
    number_or_null(out, "memory_max_bytes", g->mem_max);
    number_or_null(out, "memory_total_bytes", g->mem_total);
    number_or_null(out, "log_first_time", g->log_first_time);
    number_or_null(out, "log_last_time", g->log_last_time);
    fprintf(out, ",\"rank_count\":%d,\"ranks_with_gpu\":%d,\"ranks\":[", g->rank_count, g->rank_gpu_count);
    int listed = g->rank_gpu_count < TW_GPU_RANKS_MAX ? g->rank_gpu_count : TW_GPU_RANKS_MAX;
    for (int i = 0; i < listed; i++) {
        const struct tw_rank_gpu *r = &g->rank_gpus[i];
        fprintf(out, "%s{\"rank\":%d,\"gpu\":%d,\"how\":", i ? "," : "", r->rank, r->gpu);
        tw_json_cstring(out, r->how);
        fputs(",\"from_file\":", out);
        tw_json_cstring(out, r->from.file ? r->from.file : "");
        fprintf(out, ",\"from_line\":%llu,\"samples\":%llu", (unsigned long long)r->from.line,
                (unsigned long long)r->samples);
        number_or_null(out, "utilization_mean", r->util_mean);
        number_or_null(out, "utilization_zero_share", r->util_zero_share);
        fputc('}', out);
    }
    fputc(']', out);
    fputs(",\"file\":", out);
    if (g->first.file)
        tw_json_cstring(out, g->first.file);
    else
        fputs("null", out);
    fputs(",\"line\":", out);
    if (g->first.file)
        fprintf(out, "%llu", (unsigned long long)g->first.line);
    else
        fputs("null", out);
    fputc('}', out);
}

/* ---- which GPU each rank uses ------------------------------------------ */

/* A training log says which GPU its process uses in a few known ways; each
 * statement is kept per launch and rank, the strongest winning:
 *   3  Paddle's "init nccl context ... gpu id: N", "Place(gpu:N)", "device:
 *      N, GPU Compute Capability", FLAGS_selected_gpus, NCCL's "rank R
 *      nranks K cudaDev N"  (indexes among the visible devices)
 *   2  CUDA_VISIBLE_DEVICES printed with one device (an nvidia-smi index)
 *   1  "local rank: N" (one GPU per local rank)
 * A CUDA_VISIBLE_DEVICES list printed by the rank maps the visible indexes
 * to nvidia-smi's; without one they are taken as nvidia-smi's. */

static const char *const hint_anchors[] = {"gpu id: ",
                                           "Place(gpu:",
                                           "cudaDev ",
                                           "GPU Compute Capability",
                                           "FLAGS_selected_gpus",
                                           "CUDA_VISIBLE_DEVICES",
                                           "local rank: ",
                                           "local_rank",
                                           "LOCAL_RANK",
                                           NULL};

bool tw_gpu_hint_maybe(const char *text)
{
    for (const char *const *a = hint_anchors; *a; a++) {
        if (strstr(text, *a))
            return true;
    }
    return false;
}

/* The whole number at p (after blanks, quotes, ':' or '='), -1 if none. */
static int number_after(const char *p)
{
    while (*p == ' ' || *p == ':' || *p == '=' || *p == '"' || *p == '\'')
        p++;
    if (*p < '0' || *p > '9')
        return -1;
    long v = 0;
    for (; *p >= '0' && *p <= '9' && v < 100000; p++)
        v = v * 10 + (*p - '0');
    return (int)v;
}

static tw_gpu_binding *binding_of(tw_gpu_notes *n, int launch, int rank)
{
    for (size_t i = n->binding_count; i-- > 0;) {
        if (n->bindings[i].launch == launch && n->bindings[i].rank == rank)
            return &n->bindings[i];
    }
    if (n->binding_count == TW_GPU_BINDINGS_MAX)
        return NULL;
    if (n->binding_count == n->binding_cap) {
        size_t cap = n->binding_cap ? n->binding_cap * 2 : 16;
        tw_gpu_binding *grown = realloc(n->bindings, sizeof *grown * cap);
        if (!grown)
            return NULL;
        n->bindings = grown;
        n->binding_cap = cap;
    }
    tw_gpu_binding *b = &n->bindings[n->binding_count++];
    *b = (tw_gpu_binding){.launch = launch, .rank = rank, .gpu = -1};
    return b;
}

static void bind(tw_gpu_binding *b, int gpu, int strength, bool logical, const char *how, uint32_t file, uint64_t line)
{
    if (gpu < 0 || strength < b->strength)
        return;
    b->gpu = gpu;
    b->strength = strength;
    b->logical = logical;
    snprintf(b->how, sizeof b->how, how, gpu); /* how: a format with the index */
    b->file = file;
    b->line = line;
}

/* CUDA_VISIBLE_DEVICES: 0,1 / CUDA_VISIBLE_DEVICES=3 */
static void visible_devices(tw_gpu_binding *b, const char *p, uint32_t file, uint64_t line)
{
    int list[8], n = 0;
    while (*p == ' ' || *p == ':' || *p == '=' || *p == '"' || *p == '\'')
        p++;
    while (n < 8 && *p >= '0' && *p <= '9') {
        list[n++] = number_after(p);
        while (*p >= '0' && *p <= '9')
            p++;
        if (*p != ',')
            break;
        p++;
    }
    if (n == 0)
        return;
    memcpy(b->visible, list, sizeof list[0] * (size_t)n);
    b->visible_count = n;
    if (n == 1)
        bind(b, list[0], 2, false, "CUDA_VISIBLE_DEVICES=%d", file, line);
}

int tw_gpu_note_hint(tw_run *root, const tw_record *r, uint32_t file, int launch)
{
    if (!root->gpu && !(root->gpu = calloc(1, sizeof *root->gpu)))
        return TW_ENOMEM;
    const char *t = r->message, *p;
    int rank = r->rank < 0 ? 0 : r->rank;
    if ((p = strstr(t, "cudaDev "))) { /* NCCL INFO comm 0x.. rank 3 nranks 8 cudaDev 3 busId ... */
        const char *rk = strstr(t, " rank ");
        if (rk && rk < p && number_after(rk + 6) >= 0)
            rank = number_after(rk + 6);
    }
    tw_gpu_binding *b = binding_of(root->gpu, launch, rank);
    if (!b)
        return TW_OK; /* past TW_GPU_BINDINGS_MAX, or out of memory: the mapping stays unknown */
    uint64_t line = r->source.line;
    if ((p = strstr(t, "gpu id: ")))
        bind(b, number_after(p + 8), 3, true, "gpu id: %d", file, line);
    if ((p = strstr(t, "Place(gpu:")))
        bind(b, number_after(p + 10), 3, true, "Place(gpu:%d)", file, line);
    if ((p = strstr(t, "cudaDev ")))
        bind(b, number_after(p + 8), 3, true, "cudaDev %d", file, line);
    if ((p = strstr(t, "GPU Compute Capability")) && (p = strstr(t, "device: ")))
        bind(b, number_after(p + 8), 3, true, "device: %d", file, line);
    if ((p = strstr(t, "FLAGS_selected_gpus")))
        bind(b, number_after(p + 19), 3, true, "FLAGS_selected_gpus=%d", file, line);
    if ((p = strstr(t, "CUDA_VISIBLE_DEVICES")))
        visible_devices(b, p + 20, file, line);
    if ((p = strstr(t, "local rank: ")) || (p = strstr(t, "local_rank")) || (p = strstr(t, "LOCAL_RANK")))
        bind(b, number_after(p + (p[5] == ' ' ? 12 : 10)), 1, true, "local rank: %d", file, line);
    return TW_OK;
}

/* The GPU (an nvidia-smi index) rank used in launch (0-based), from its own
 * statements in that launch or, failing those, the latest launch before. */
static const tw_gpu_binding *rank_gpu(const tw_gpu_notes *n, int launch, int rank, int *gpu)
{
    const tw_gpu_binding *best = NULL, *visible = NULL;
    for (size_t i = 0; i < n->binding_count; i++) {
        const tw_gpu_binding *b = &n->bindings[i];
        if (b->rank != rank || b->launch > launch)
            continue;
        if (b->gpu >= 0 && (!best || b->launch > best->launch))
            best = b;
        if (b->visible_count && (!visible || b->launch > visible->launch))
            visible = b;
    }
    if (!best)
        return NULL;
    *gpu = best->gpu;
    if (best->logical && visible && best->gpu < visible->visible_count)
        *gpu = visible->visible[best->gpu];
    return best;
}

/* Each rank with steps in the launch: its GPU and that GPU's samples. */
static void summarize_ranks(const tw_run *root, const tw_run *view, const size_t *picked, size_t count,
                            tw_gpu_summary *out)
{
    const tw_gpu_notes *n = root->gpu;
    int launch = view->launch.index; /* 0-based, as the cursors count */
    for (int i = 0; i < view->rank_count; i++) {
        const tw_rank *rk = view->ranks[i];
        if (!rk || !rk->used || rk->steps == 0)
            continue;
        out->rank_count++;
        int gpu;
        const tw_gpu_binding *b = rank_gpu(n, launch, rk->rank, &gpu);
        if (!b)
            continue;
        if (out->rank_gpu_count++ >= TW_GPU_RANKS_MAX)
            continue;
        struct tw_rank_gpu *g = &out->rank_gpus[out->rank_gpu_count - 1];
        *g = (struct tw_rank_gpu){.rank = rk->rank, .gpu = gpu, .util_mean = NAN, .util_zero_share = NAN};
        snprintf(g->how, sizeof g->how, "%s", b->how);
        g->from = tw_run_source(root, b->file, b->line);
        double sum = 0;
        uint64_t util_n = 0, zero = 0;
        for (size_t k = 0; k < count; k++) {
            const tw_gpu_sample *s = &n->items[picked[k]].s;
            if (s->gpu != gpu)
                continue;
            g->samples++;
            if (!isnan(s->util)) {
                sum += s->util;
                util_n++;
                zero += s->util == 0;
            }
        }
        if (util_n) {
            g->util_mean = sum / (double)util_n;
            g->util_zero_share = (double)zero / (double)util_n;
        }
    }
}

int tw_gpu_rank_lines(const tw_gpu_summary *g)
{
    int listed = g->rank_gpu_count < TW_GPU_RANKS_MAX ? g->rank_gpu_count : TW_GPU_RANKS_MAX;
    bool unknown = g->rank_gpu_count < g->rank_count && (g->gpus > 1 || g->rank_count > 1);
    return g->samples == 0 ? 0 : listed + (unknown || g->rank_gpu_count > listed);
}

void tw_gpu_rank_line(const tw_gpu_summary *g, int i, char *buf, size_t cap)
{
    int listed = g->rank_gpu_count < TW_GPU_RANKS_MAX ? g->rank_gpu_count : TW_GPU_RANKS_MAX;
    if (i >= listed) {
        if (g->rank_gpu_count > listed)
            snprintf(buf, cap, "(+%d more ranks in --json)", g->rank_gpu_count - listed);
        else
            snprintf(buf, cap,
                     "%s: the logs do not say which GPU %s (Place(gpu:N), gpu id, cudaDev, "
                     "CUDA_VISIBLE_DEVICES, local rank), the figures above are over %s",
                     g->rank_gpu_count ? "others unknown" : "unknown",
                     g->rank_count - g->rank_gpu_count == 1 ? "its rank uses" : "each rank uses",
                     g->gpus > 1 ? "every GPU of the log" : "the GPU log");
        return;
    }
    const struct tw_rank_gpu *r = &g->rank_gpus[i];
    int n = snprintf(buf, cap, "rank %d: GPU %d (%s, %s:%llu)", r->rank, r->gpu, r->how, r->from.file,
                     (unsigned long long)r->from.line);
    if (n > 0 && (size_t)n < cap) {
        if (isnan(r->util_mean))
            snprintf(buf + n, cap - (size_t)n, ", no samples of it in the GPU log");
        else
            snprintf(buf + n, cap - (size_t)n, ", utilisation %.0f%% on average, 0%% in %.0f%% of %llu samples",
                     r->util_mean, r->util_zero_share * 100, (unsigned long long)r->samples);
    }
}
