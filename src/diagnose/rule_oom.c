/*
 * rule_oom.c: out-of-memory errors, and which kind each is.
 *
 * "Out of memory" has four usual causes with four different fixes, and the
 * message and the run before it tell them apart: one request too large for
 * the device (a batch, a sequence, an attention matrix: the request is a
 * large share of the device), memory that grew before it (the log's memory
 * readings rising: tensors kept across steps), fragmentation (memory
 * reserved by the allocator but unallocated exceeds the request), and other
 * processes on the device (PyTorch lists them: several ranks or another job
 * on one GPU; Paddle does not, but other ranks whose own lines name the same
 * GPU show it). When it happened matters too: in evaluation or inference
 * (the stack names it, or an evaluation came after the last training step)
 * the eval batch size is the one to lower. The sizes are read from the
 * frameworks' own wording:
 *
 *   Paddle:  Cannot allocate 128.000000MB memory on GPU 0, 23.431824GB memory
 *            has been allocated and available memory is only 97.625000MB.
 *   PyTorch: Tried to allocate 20.00 MiB (GPU 0; 11.17 GiB total capacity;
 *            598.80 MiB already allocated; 7.25 MiB free; 616.00 MiB
 *            reserved in total by PyTorch)
 *   PyTorch 2: Tried to allocate 20.00 MiB. GPU 0 has a total capacity of
 *            79.15 GiB of which 9.81 MiB is free. Process 12 has 40.1 GiB
 *            memory in use. ... and 1.20 GiB is reserved by PyTorch but
 *            unallocated.
 *
 * One failure printed several times (the exception line, a wrapper that
 * repeats it, the summary block) is one event: reports of one rank with no
 * training step between them count once.
 */
#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"

typedef struct oom_sizes {
    double requested, total, allocated, free, reserved, unallocated, in_use; /* bytes, NAN unknown */
    int processes;                                                   /* "Process N has" entries */
} oom_sizes;

static double unit_bytes(const char *u)
{
    static const struct {
        const char *name;
        double bytes;
    } units[] = {{"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0},
                 {"TB", 1099511627776.0},  {"GB", 1073741824.0},  {"MB", 1048576.0},  {"kB", 1024.0},
                 {"KB", 1024.0},           {"bytes", 1.0},        {"B", 1.0}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strncmp(u, units[i].name, strlen(units[i].name)) == 0)
            return units[i].bytes;
    }
    return NAN;
}

/* "20.00 MiB", "128.000000MB": the size at s, NAN when there is none. */
static double size_at(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s)
        return NAN;
    while (*end == ' ')
        end++;
    return v * unit_bytes(end);
}

static double size_after(const char *msg, const char *marker)
{
    const char *at = strstr(msg, marker);
    return at ? size_at(at + strlen(marker)) : NAN;
}

/* The size just before marker ("598.80 MiB already allocated"). */
static double size_before(const char *msg, const char *marker)
{
    const char *at = strstr(msg, marker);
    if (!at)
        return NAN;
    const char *p = at;
    while (p > msg && p[-1] == ' ')
        p--;
    while (p > msg && (isalpha((unsigned char)p[-1])))
        p--; /* the unit */
    while (p > msg && p[-1] == ' ')
        p--;
    while (p > msg && (isdigit((unsigned char)p[-1]) || p[-1] == '.'))
        p--;
    return size_at(p);
}

static double first_known(double a, double b)
{
    return isnan(a) ? b : a;
}

/* msg, then (for what msg does not say) more: the end of a message longer
 * than an event keeps, which the parser puts in its detail (fmt_events.c). */
static void read_sizes(const char *msg, const char *more, oom_sizes *z)
{
    z->requested = first_known(size_after(msg, "Cannot allocate "), size_after(msg, "Tried to allocate "));
    z->total = first_known(size_before(msg, " total capacity"), size_after(msg, "total capacity of "));
    z->total = first_known(z->total, size_after(msg, "total capacty of ")); /* PyTorch 2.1's spelling */
    z->allocated = first_known(size_before(msg, " memory has been allocated"), size_before(msg, " already allocated"));
    z->allocated = first_known(z->allocated, size_after(msg, "Of the allocated memory "));
    z->allocated = first_known(z->allocated, size_after(more, "Of the allocated memory "));
    z->free = first_known(size_after(msg, "available memory is only "), size_before(msg, " free;"));
    z->free = first_known(z->free, size_after(msg, "of which "));
    z->free = first_known(z->free, size_after(more, "of which "));
    z->reserved = first_known(size_before(msg, " reserved in total by PyTorch"),
                              size_before(more, " reserved in total by PyTorch"));
    z->in_use = first_known(size_after(msg, "this process has "), size_after(more, "this process has "));
    z->unallocated = first_known(size_before(msg, " is reserved by PyTorch but unallocated"),
                                 size_before(more, " is reserved by PyTorch but unallocated"));
    if (isnan(z->unallocated) && !isnan(z->reserved) && !isnan(z->allocated))
        z->unallocated = z->reserved - z->allocated;
    if (isnan(z->total) && !isnan(z->allocated) && !isnan(z->free))
        z->total = z->allocated + z->free; /* Paddle says what is allocated and what is left */
    z->processes = 0;
    for (const char *p = strstr(msg, "Process "); p; p = strstr(p + 8, "Process "))
        z->processes += isdigit((unsigned char)p[8]) != 0;
    int listed = tw_oom_processes_listed(more);
    z->processes = listed > z->processes ? listed : z->processes;
}

/* "asked for 2.0 MiB on a device of 79.19 GiB: 2.1 MiB free, this process
 * had 75.45 GiB in use; the message does not say how much was allocated":
 * the figures the message gives, and the ones it does not named in words. */
static void sizes_evidence(tw_finding *f, const oom_sizes *z)
{
    static const struct {
        size_t offset;
        const char *known, *unknown; /* known takes the size */
    } parts[] = {
        {offsetof(oom_sizes, allocated), "%s allocated", "allocated"},
        {offsetof(oom_sizes, reserved), "%s reserved", NULL},
        {offsetof(oom_sizes, in_use), "this process had %s in use", NULL},
        {offsetof(oom_sizes, free), "%s free", "free"},
    };
    char text[TW_TEXT_MAX], size[32], missing[64] = "";
    int used = snprintf(text, sizeof text, "asked for %s", tw_fmt_bytes(z->requested, size, sizeof size));
    if (!isnan(z->total))
        used += snprintf(text + used, sizeof text - (size_t)used, " on a device of %s", tw_fmt_bytes(z->total, size, sizeof size));
    const char *sep = ": ";
    for (size_t i = 0; i < sizeof parts / sizeof parts[0] && used < (int)sizeof text; i++) {
        double v = *(const double *)((const char *)z + parts[i].offset);
        if (!isnan(v)) {
            used += snprintf(text + used, sizeof text - (size_t)used, "%s", sep);
            used += snprintf(text + used, sizeof text - (size_t)used, parts[i].known, tw_fmt_bytes(v, size, sizeof size));
            sep = ", ";
        } else if (parts[i].unknown) {
            size_t m = strlen(missing);
            snprintf(missing + m, sizeof missing - m, "%s%s", m ? " or " : "", parts[i].unknown);
        }
    }
    if (missing[0])
        tw_finding_evidence(f, "%s; the message does not say how much was %s", text, missing);
    else
        tw_finding_evidence(f, "%s", text);
}

/* Reports of one rank with no training step between them are one failure. */
static int count_events(const tw_run *run)
{
    int n = 0;
    const tw_event_note *prev = NULL;
    for (int i = 0; i < run->events_kept_count; i++) {
        const tw_event_note *e = &run->events_kept[i];
        if (e->kind != TW_EV_OOM)
            continue;
        if (!prev || prev->rank != e->rank || prev->last_pos != e->last_pos)
            n++;
        prev = e;
    }
    return n;
}

static bool in_evaluation(const tw_run *run, const tw_event_note *e)
{
    static const char *const words[] = {"eval", "valid", "predict", "infer", "test_step", "generate"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (strstr(e->detail, words[i]))
            return true;
    }
    const tw_rank *rk = tw_run_rank(run, e->rank);
    return rk && rk->used && rk->event_since_last && run->evals > 0 && e->last_pos >= 0;
}

/* The rank's memory readings rose before the failure: first and highest. */
static bool grew(const tw_run *run, const tw_event_note *e, double *from, double *to)
{
    const tw_rank *rk = tw_run_rank(run, e->rank);
    if (!rk || !rk->used)
        return false;
    double *v = malloc(sizeof(double) * TW_SERIES_MAX);
    if (!v)
        return false;
    size_t n = tw_series_values(&rk->series, TW_F_MEM, v, NULL);
    bool rose = false;
    if (n >= 3) {
        *from = v[0];
        *to = v[0];
        for (size_t i = 1; i < n; i++)
            *to = v[i] > *to ? v[i] : *to;
        rose = *from > 0 && *to > 1.25 * *from;
    }
    free(v);
    return rose;
}

static void classify(const tw_run *run, const tw_event_note *e, tw_finding *f, char *kind, size_t cap)
{
    oom_sizes z;
    read_sizes(e->message, e->detail, &z);
    char a[32], b[32], ranks[128];
    double from, to;
    int device = tw_device_named(e->message), sharers;
    kind[0] = '\0';
    if (!isnan(z.requested) && !isnan(z.total) && z.total > 0 && z.requested >= 0.25 * z.total) {
        snprintf(kind, cap, "one allocation too large for the device");
        tw_finding_evidence(f, "one request of %s, %.0f%% of the device's %s", tw_fmt_bytes(z.requested, a, sizeof a),
                            100 * z.requested / z.total, tw_fmt_bytes(z.total, b, sizeof b));
        tw_finding_recommend(f, "A single tensor of that size: lower the batch size or sequence length at that op, "
                                "or split it (chunked attention, gradient accumulation).");
    } else if (!isnan(z.unallocated) && !isnan(z.requested) && z.unallocated > z.requested &&
               (isnan(z.total) || z.unallocated >= 0.02 * z.total)) {
        /* the cache held more than the request but no block of it fit; under 2% of the
           device it is a side note to a full device, not the cause */
        snprintf(kind, cap, "fragmentation");
        tw_finding_evidence(f,
                            "%s reserved by the allocator but unallocated, more than the %s asked for: "
                            "fragmentation",
                            tw_fmt_bytes(z.unallocated, a, sizeof a), tw_fmt_bytes(z.requested, b, sizeof b));
        tw_finding_recommend(f, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or max_split_size_mb), "
                                "FLAGS_allocator_strategy=auto_growth for Paddle; avoid tensors whose shape changes "
                                "every step.");
    } else if ((sharers = tw_device_sharers(run, e->rank, device, ranks, sizeof ranks)) > 0) {
        snprintf(kind, cap, "several ranks on one device");
        tw_finding_evidence(f, "rank%s %s also use%s GPU %d, by their own lines: the ranks share it",
                            sharers > 1 ? "s" : "", ranks, sharers > 1 ? "" : "s", device);
        tw_finding_recommend(f, "Give each rank its own device (LOCAL_RANK / FLAGS_selected_gpus); a smaller batch "
                                "only hides it.");
    } else if (grew(run, e, &from, &to)) {
        snprintf(kind, cap, "memory that grew");
        tw_finding_evidence(f, "device memory grew from %s to %s before it", tw_fmt_bytes(from, a, sizeof a),
                            tw_fmt_bytes(to, b, sizeof b));
        tw_finding_recommend(f, "Memory rising step after step is kept tensors: a loss summed without .item() / "
                                "float(), outputs appended to a list, a cache that never empties.");
    }
    if (z.processes > 1) {
        tw_finding_evidence(f,
                            "the message lists %d processes holding memory on the device: several ranks or "
                            "another job share it",
                            z.processes);
        tw_finding_recommend(f, "Give each rank its own device (LOCAL_RANK / FLAGS_selected_gpus) and check "
                                "nvidia-smi for other jobs.");
        if (!kind[0])
            snprintf(kind, cap, "a device shared with other processes");
    }
    if (!isnan(z.requested) && !kind[0])
        sizes_evidence(f, &z);
}

static void check_oom(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    const tw_event_note *e = tw_first_event(run, TW_EV_OOM);
    if (!e)
        return;
    bool eval = in_evaluation(run, e);
    char where[600], kind[64];
    /* no step before it, but the loop's closing record says which it was */
    const tw_point *closing = e->last_pos < 0 ? tw_closing_record(run, e) : NULL;
    tw_finding *f = tw_finding_add(out, "oom", TW_SEV_ERROR, "Out of memory%s",
                                   eval               ? " during evaluation"
                                   : e->last_pos >= 0 ? " during training"
                                   : closing          ? " in the first step"
                                                      : " before the first step");
    if (!f)
        return;
    tw_finding_at_event(f, run, e);
    tw_finding_evidence(f, "%s (%s)", e->message, tw_where(run, e->file, e->line, where, sizeof where));
    if (e->last_pos >= 0)
        tw_finding_evidence(f, "last step reported before it: %.0f", e->last_pos);
    classify(run, e, f, kind, sizeof kind);
    if (kind[0] && strlen(f->title) + strlen(kind) + 3 < sizeof f->title)
        snprintf(f->title + strlen(f->title), sizeof f->title - strlen(f->title), ": %s", kind);
    int events = count_events(run);
    if (events > 1)
        tw_finding_evidence(f, "%d out-of-memory failures in all", events);
    if (eval)
        tw_finding_recommend(f, "It failed in evaluation: lower the evaluation batch size, run it under no_grad / "
                                "paddle.no_grad, and free the training step's tensors before it.");
    if (strcmp(kind, "several ranks on one device") != 0)
        tw_finding_recommend(f, "In general: reduce the per-device batch size (keep the global batch with gradient "
                                "accumulation), use mixed precision, recompute activations, or shard optimizer state.");
}

const tw_rule tw_rule_oom = {"oom", "out-of-memory errors, classified", check_oom};
