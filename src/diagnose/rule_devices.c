/*
 * rule_devices.c: ranks that share one GPU.
 *
 * A launcher gives each process of a node its own device; a program that
 * sets the device itself (or not at all) puts several ranks on GPU 0, where
 * they run out of memory together. The ranks say which device they use in
 * lines they print anyway: Paddle's "device: 1, GPU Compute Capability" and
 * "init nccl context ... gpu id: 1", and the out-of-memory messages ("on GPU
 * 0", "(GPU 0;", "GPU 0 has a total capacity", "Place(gpu:0)"); PyTorch's
 * message also lists the processes holding memory on the device. Two ranks
 * on one index are only a fault when they cannot be on different nodes: when
 * a device with a higher index is in use too (the usual rank % devices
 * layout puts them at least that far apart), when one of them ran out of
 * memory, or when an OOM message shows other processes on its device.
 * NCCL says it outright when it builds a communicator: "Duplicate GPU
 * detected : rank 1 and rank 0 both on CUDA device 10" (the device by its
 * PCI bus id), which is enough from one rank's log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"

typedef struct device_note {
    int rank;
    int device;                 /* -1: not said */
    const tw_event_note *where; /* the line that said it */
    const tw_event_note *oom;   /* its first out-of-memory report */
    int other_processes;        /* "Process N has ..." in that report */
} device_note;

/* The device index after one of the markers, or -1. */
int tw_device_named(const char *msg)
{
    static const char *const markers[] = {"device: ", "gpu id: ", " on GPU ", "(GPU ", "GPU ", "Place(gpu:"};
    for (size_t i = 0; i < sizeof markers / sizeof markers[0]; i++) {
        const char *at = strstr(msg, markers[i]);
        if (!at)
            continue;
        at += strlen(markers[i]);
        if (*at < '0' || *at > '9')
            continue;
        long v = strtol(at, NULL, 10);
        if (v >= 0 && v < 4096)
            return (int)v;
    }
    return -1;
}

int tw_oom_processes_listed(const char *detail)
{
    const char *at = detail ? strstr(detail, "Processes listed: ") : NULL;
    return at ? atoi(at + strlen("Processes listed: ")) : 0;
}

static int processes_in(const char *msg)
{
    int n = 0;
    for (const char *p = strstr(msg, "Process "); p; p = strstr(p + 8, "Process ")) {
        if (p[8] >= '0' && p[8] <= '9' && strstr(p, " has "))
            n++;
    }
    return n;
}

static device_note *note_of(device_note *notes, int count, int rank)
{
    for (int i = 0; i < count; i++) {
        if (notes[i].rank == rank)
            return &notes[i];
    }
    return NULL;
}

static void collect(const tw_run *run, device_note *notes, int count)
{
    for (int i = 0; i < run->events_kept_count; i++) {
        const tw_event_note *e = &run->events_kept[i];
        device_note *d = note_of(notes, count, e->rank);
        if (!d || (e->kind != TW_EV_LAUNCH && e->kind != TW_EV_OOM))
            continue;
        int dev = tw_device_named(e->message);
        if (d->device < 0 && dev >= 0) {
            d->device = dev;
            d->where = e;
        }
        if (e->kind == TW_EV_OOM && !d->oom) {
            d->oom = e;
            d->other_processes = processes_in(e->message);
            int listed = tw_oom_processes_listed(e->detail); /* a message longer than an event keeps */
            d->other_processes = listed > d->other_processes ? listed : d->other_processes;
        }
    }
}

/* The largest device index any rank named, -1 none. */
static int max_device_of(const device_note *notes, int count)
{
    int max_device = -1;
    for (int i = 0; i < count; i++)
        max_device = notes[i].device > max_device ? notes[i].device : max_device;
    return max_device;
}

/* Every index 0..max_device named by the same number of ranks, and more
 * than one index: the layout of several nodes with a GPU per rank (16 ranks
 * on indices 0-7 twice), where one index on two ranks is two devices. */
static bool regular_nodes(const device_note *notes, int count, int max_device)
{
    if (max_device < 1)
        return false;
    int per_index = -1;
    for (int dev = 0; dev <= max_device; dev++) {
        int n = 0;
        for (int i = 0; i < count; i++)
            n += notes[i].device == dev;
        if (per_index >= 0 && n != per_index)
            return false;
        per_index = n;
    }
    return true;
}

/* Ranks a < b on one index cannot be on different nodes when a device index
 * above their distance is in use; when it is not, an out-of-memory report
 * on that index is taken as the sharing showing, except in a regular
 * several-node layout, where only a report listing other processes on the
 * device shows it (one rank's OOM is no proof that rank 8 shares rank 0's
 * GPU 0). */
static bool shared(const device_note *notes, int count, int device, int max_device)
{
    int lo = -1, hi = -1;
    bool oom = false, processes = false;
    for (int i = 0; i < count; i++) {
        if (notes[i].device != device)
            continue;
        if (lo < 0 || notes[i].rank < lo)
            lo = notes[i].rank;
        if (notes[i].rank > hi)
            hi = notes[i].rank;
        oom |= notes[i].oom != NULL;
        processes |= notes[i].other_processes > 1;
    }
    if (lo < 0 || lo == hi)
        return false;
    if (hi - lo <= max_device || processes)
        return true;
    return oom && !regular_nodes(notes, count, max_device);
}

int tw_device_sharers(const tw_run *run, int rank, int device, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (device < 0 || run->rank_count < 2)
        return 0;
    device_note *notes = calloc((size_t)run->rank_count, sizeof *notes);
    if (!notes)
        return 0;
    for (int i = 0; i < run->rank_count; i++)
        notes[i] = (device_note){.rank = run->ranks[i]->rank, .device = -1};
    collect(run, notes, run->rank_count);
    int n = 0;
    size_t used = 0;
    if (!shared(notes, run->rank_count, device, max_device_of(notes, run->rank_count))) {
        free(notes);
        return 0;
    }
    for (int i = 0; i < run->rank_count; i++) {
        if (notes[i].rank == rank || notes[i].device != device)
            continue;
        n++;
        if (used < cap)
            used += (size_t)snprintf(buf + used, cap - used, "%s%d", used ? ", " : "", notes[i].rank);
    }
    free(notes);
    return n;
}

static void recommend(tw_finding *f)
{
    tw_finding_recommend(f, "Give each process its own device: set it from the launcher's LOCAL_RANK "
                            "(torch.cuda.set_device(int(os.environ[\"LOCAL_RANK\"]))) or let paddle.distributed.launch "
                            "set FLAGS_selected_gpus (do not pin the device in the code, and check --gpus / "
                            "CUDA_VISIBLE_DEVICES); lowering the batch size only hides it.");
}

static void report(const tw_run *run, const device_note *notes, int count, int device, tw_findings *out)
{
    char ranks[128] = "";
    size_t used = 0;
    int n = 0;
    const device_note *first = NULL;
    for (int i = 0; i < count; i++) {
        if (notes[i].device != device)
            continue;
        if (!first)
            first = &notes[i];
        n++;
        used += (size_t)snprintf(ranks + used, used < sizeof ranks ? sizeof ranks - used : 0, "%s%d", used ? ", " : "",
                                 notes[i].rank);
        if (used >= sizeof ranks)
            used = sizeof ranks;
    }
    tw_finding *f = tw_finding_add(out, "shared_device", TW_SEV_WARNING, "%d ranks (%s) use the same GPU, device %d", n,
                                   ranks, device);
    if (!f)
        return;
    tw_finding_at_event(f, run, first->where);
    f->value = n;
    char where[600];
    for (int i = 0; i < count; i++) {
        const device_note *d = &notes[i];
        if (d->device != device)
            continue;
        tw_finding_evidence(f, "rank %d: %s (%s)", d->rank, d->where->message,
                            tw_where(run, d->where->file, d->where->line, where, sizeof where));
        if (d->oom && d->oom != d->where)
            tw_finding_evidence(f, "rank %d ran out of memory: %s", d->rank, d->oom->message);
        if (d->other_processes > 1)
            tw_finding_evidence(f, "rank %d's out-of-memory report lists %d processes holding memory on its device",
                                d->rank, d->other_processes);
    }
    recommend(f);
}

/* NCCL's "Duplicate GPU detected : rank A and rank B both on CUDA device X":
 * one finding at its first report. True when there was one. */
static bool nccl_duplicate(const tw_run *run, tw_findings *out)
{
    const tw_event_note *first = NULL;
    const char *said = NULL;
    int reports = 0;
    for (int i = 0; i < run->events_kept_count; i++) {
        const char *at = strstr(run->events_kept[i].message, "Duplicate GPU detected");
        if (!at)
            continue;
        if (!first) {
            first = &run->events_kept[i];
            said = at;
        }
        reports++;
    }
    int a, b;
    char bus[32];
    if (!first || sscanf(said, "Duplicate GPU detected : rank %d and rank %d both on CUDA device %31[0-9a-fA-F]", &a,
                         &b, bus) != 3)
        return false;
    tw_finding *f = tw_finding_add(out, "shared_device", TW_SEV_WARNING,
                                   "2 ranks (%d, %d) use the same GPU, CUDA device %s (NCCL's bus id)", a, b, bus);
    if (!f)
        return true;
    tw_finding_at_event(f, run, first);
    f->value = 2;
    char where[600];
    tw_finding_evidence(f, "rank %d: %s (%s)", first->rank, first->message,
                        tw_where(run, first->file, first->line, where, sizeof where));
    if (reports > 1)
        tw_finding_evidence(f, "%d reports of a duplicate GPU in the log", reports);
    recommend(f);
    return true;
}

static void check_shared_device(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    if (nccl_duplicate(run, out) || run->rank_count < 2)
        return;
    device_note *notes = calloc((size_t)run->rank_count, sizeof *notes);
    if (!notes)
        return;
    for (int i = 0; i < run->rank_count; i++)
        notes[i] = (device_note){.rank = run->ranks[i]->rank, .device = -1};
    collect(run, notes, run->rank_count);
    int max_device = max_device_of(notes, run->rank_count);
    for (int dev = 0; dev <= max_device; dev++) {
        if (shared(notes, run->rank_count, dev, max_device))
            report(run, notes, run->rank_count, dev, out);
    }
    free(notes);
}

const tw_rule tw_rule_shared_device = {"shared_device", "several ranks on one GPU", check_shared_device};
