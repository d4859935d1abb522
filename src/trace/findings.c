/*
 * findings.c: the rules of `trainwatch trace`, one small function each,
 * over the rank summaries. They make tw_finding objects, the same as
 * `analyze`, so both reports read alike and a tool reading one reads both.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/grow.h"
#include "internal.h"
#include "trainwatch/error.h"

static tw_finding *add(tw_finding_list *l, const char *rule, tw_severity sev, const tw_trace_rank *r)
{
    if (TW_GROW(l->v, l->n, l->cap, 16) != TW_OK)
        return NULL;
    tw_finding *f = &l->v[l->n++];
    memset(f, 0, sizeof *f);
    f->rule = rule;
    f->severity = sev;
    f->rank = r ? r->rank : -1;
    f->step = -1;
    f->value = NAN;
    f->where.file = r ? r->path : NULL;
    return f;
}

#define PCT(x) (100.0 * (x))

static double ms(double us)
{
    return us / 1000;
}

/* The step where share() is largest. */
static const tw_trace_step *worst_step(const tw_trace_rank *r, double (*share)(const tw_trace_split *))
{
    const tw_trace_step *w = NULL;
    for (int i = 0; i < r->step_count; i++) {
        if (r->steps[i].split.wall > 0 && (!w || share(&r->steps[i].split) > share(&w->split)))
            w = &r->steps[i];
    }
    return w;
}

static double data_share(const tw_trace_split *s)
{
    return s->wall > 0 ? s->idle_data / s->wall : 0;
}

static double idle_share(const tw_trace_split *s)
{
    return s->wall > 0 ? s->idle / s->wall : 0;
}

static int data_bound(const tw_trace_rank *r, const tw_trace_options *o, tw_finding_list *l)
{
    const tw_trace_split *s = &r->total;
    if (!(s->wall > 0) || data_share(s) < o->data_share)
        return TW_OK;
    tw_finding *f = add(l, "data_loading_bound", TW_SEV_WARNING, r);
    if (!f)
        return TW_ENOMEM;
    f->value = data_share(s);
    snprintf(f->title, sizeof f->title,
             "Data loading bound: GPU idle %.0f%% of step time, %.0f%% of it inside DataLoader spans",
             PCT(idle_share(s)), PCT(s->idle > 0 ? s->idle_data / s->idle : 0));
    const tw_trace_step *w = worst_step(r, data_share);
    int n =
        snprintf(f->evidence, sizeof f->evidence,
                 "rank %d: %.1f ms of %.1f ms wall time (%d steps) the GPU waited inside DataLoader spans; "
                 "DataLoader spans cover %.0f%% of step time",
                 r->rank, ms(s->idle_data), ms(s->wall), r->step_count, PCT(s->wall > 0 ? s->data_span / s->wall : 0));
    if (w && n > 0 && (size_t)n < sizeof f->evidence) {
        snprintf(f->evidence + n, sizeof f->evidence - (size_t)n,
                 "\nworst step: ProfilerStep#%lld at ts %.0f us, %.1f ms of %.1f ms idle in DataLoader (%.0f%%)",
                 (long long)w->id, w->start, ms(w->split.idle_data), ms(w->split.wall), PCT(data_share(&w->split)));
        f->step = w->id;
    }
    snprintf(f->recommendation, sizeof f->recommendation,
             "Raise DataLoader num_workers (PyTorch: num_workers=N, pin_memory=True, persistent_workers=True, "
             "prefetch_factor=4; Paddle: paddle.io.DataLoader(num_workers=N, use_shared_memory=True)).\n"
             "Make decoding and augmentation cheaper, or move them to the GPU (DALI).");
    return TW_OK;
}

static int gpu_idle(const tw_trace_rank *r, const tw_trace_options *o, tw_finding_list *l)
{
    const tw_trace_split *s = &r->total;
    double host = s->idle_host + s->idle_gap + s->idle_sync;
    if (!(s->wall > 0) || idle_share(s) < o->idle_share || data_share(s) >= o->data_share || host <= 0)
        return TW_OK;
    tw_finding *f = add(l, "gpu_idle", TW_SEV_WARNING, r);
    if (!f)
        return TW_ENOMEM;
    f->value = idle_share(s);
    snprintf(f->title, sizeof f->title, "GPU idle %.0f%% of %s time: the host does not keep it busy",
             PCT(idle_share(s)), r->step_count ? "step" : "trace");
    snprintf(f->evidence, sizeof f->evidence,
             "rank %d: idle %.1f ms of %.1f ms: host not launching %.1f ms, synchronisation %.1f ms, "
             "kernel-to-kernel gaps %.1f ms, DataLoader %.1f ms",
             r->rank, ms(s->idle), ms(s->wall), ms(s->idle_host), ms(s->idle_sync), ms(s->idle_gap), ms(s->idle_data));
    snprintf(f->recommendation, sizeof f->recommendation,
             "Remove host synchronisation in the step (.item(), .cpu(), printing tensors), enlarge the batch, "
             "fuse small operators (torch.compile, CUDA graphs), and check the Python time between steps.");
    return TW_OK;
}

static int short_kernels(const tw_trace_rank *r, const tw_trace_options *o, tw_finding_list *l)
{
    if (r->kernels < 100 || r->short_kernels * 2 < r->kernels)
        return TW_OK;
    tw_finding *f = add(l, "short_kernels", TW_SEV_INFO, r);
    if (!f)
        return TW_ENOMEM;
    f->value = (double)r->short_kernels / (double)r->kernels;
    snprintf(f->title, sizeof f->title, "%.0f%% of kernels run under %g us: launch overhead matters", PCT(f->value),
             o->short_kernel_us);
    snprintf(f->evidence, sizeof f->evidence,
             "rank %d: %llu of %llu kernels are short (%.1f ms, %.0f%% of kernel time); %llu kernels ran shorter "
             "than their launch call; mean launch delay %.1f us over %llu matched launches",
             r->rank, (unsigned long long)r->short_kernels, (unsigned long long)r->kernels, ms(r->short_kernel_time),
             PCT(r->kernel_time > 0 ? r->short_kernel_time / r->kernel_time : 0), (unsigned long long)r->launch_bound,
             r->launches ? r->launch_delay_sum / (double)r->launches : 0, (unsigned long long)r->launches);
    snprintf(f->recommendation, sizeof f->recommendation,
             "Fuse small kernels (torch.compile, fused optimizers such as fused=True / multi_tensor_apply), capture "
             "the step in CUDA graphs, or enlarge the batch.");
    return TW_OK;
}

static int pageable(const tw_trace_rank *r, tw_finding_list *l)
{
    if (r->pageable_count == 0)
        return TW_OK;
    tw_finding *f = add(l, "pageable_memcpy", TW_SEV_INFO, r);
    if (!f)
        return TW_ENOMEM;
    f->value = r->pageable_bytes;
    snprintf(f->title, sizeof f->title, "%llu copies from pageable host memory (%.1f MB)",
             (unsigned long long)r->pageable_count, r->pageable_bytes / 1e6);
    snprintf(f->evidence, sizeof f->evidence, "rank %d: HtoD %.1f MB in %.1f ms (%.2f GB/s)", r->rank,
             r->copies[TW_COPY_HTOD].bytes / 1e6, ms(r->copies[TW_COPY_HTOD].time),
             r->copies[TW_COPY_HTOD].time > 0 ? r->copies[TW_COPY_HTOD].bytes / r->copies[TW_COPY_HTOD].time / 1e3 : 0);
    snprintf(f->recommendation, sizeof f->recommendation,
             "Pin host memory: DataLoader(pin_memory=True) and .to(device, non_blocking=True); pinned copies are "
             "faster and can overlap compute.");
    return TW_OK;
}

static int comm_overlap(const tw_trace_rank *r, tw_finding_list *l)
{
    const tw_trace_split *s = &r->total;
    if (!(s->comm_total > 0) || s->comm_overlap / s->comm_total >= 0.5 || s->comm / fmax(s->wall, 1) < 0.05)
        return TW_OK;
    tw_finding *f = add(l, "comm_exposed", TW_SEV_INFO, r);
    if (!f)
        return TW_ENOMEM;
    f->value = s->comm_overlap / s->comm_total;
    snprintf(f->title, sizeof f->title, "Communication overlaps computation only %.0f%% of the time", PCT(f->value));
    snprintf(f->evidence, sizeof f->evidence,
             "rank %d: %.1f ms of communication kernels, %.1f ms of it with no computation beside it (%.0f%% of "
             "wall time)",
             r->rank, ms(s->comm_total), ms(s->comm), PCT(s->comm / s->wall));
    snprintf(f->recommendation, sizeof f->recommendation,
             "Overlap gradients' all-reduce with backward (DDP bucket_cap_mb, gradient_as_bucket_view; FSDP "
             "prefetch), or reduce what is communicated.");
    return TW_OK;
}

static int truncated(const tw_trace_rank *r, tw_finding_list *l)
{
    if (!r->error[0])
        return TW_OK;
    tw_finding *f = add(l, "trace_incomplete", TW_SEV_WARNING, r);
    if (!f)
        return TW_ENOMEM;
    snprintf(f->title, sizeof f->title, "The trace could not be read to its end: %s", r->error);
    snprintf(f->evidence, sizeof f->evidence, "%llu events read from %llu bytes were analysed",
             (unsigned long long)r->events, (unsigned long long)r->bytes);
    snprintf(f->recommendation, sizeof f->recommendation,
             "A trace cut short usually means the profiler's process ended while writing it; export again.");
    return TW_OK;
}

static int reader_ratio(const tw_trace_rank *r, const tw_trace_options *o, tw_finding_list *l)
{
    for (int b = 0; b < r->summary_blocks; b++) {
        if (r->block_ratios[b] < o->reader_ratio)
            continue;
        tw_finding *f = add(l, "data_loading_bound", TW_SEV_WARNING, r);
        if (!f)
            return TW_ENOMEM;
        f->value = r->block_ratios[b];
        snprintf(f->title, sizeof f->title, "Data loading bound: Reader Ratio %.1f%% (Perf Summary %d)",
                 PCT(r->block_ratios[b]), b + 1);
        snprintf(f->evidence, sizeof f->evidence, "rank %d: reader_cost is %.1f%% of batch_cost", r->rank,
                 PCT(r->block_ratios[b]));
        snprintf(f->recommendation, sizeof f->recommendation,
                 "Raise paddle.io.DataLoader(num_workers=N, use_shared_memory=True); make decoding cheaper.");
    }
    if (r->summary_blocks == 0 && r->dataloader_ratio >= o->reader_ratio) {
        tw_finding *f = add(l, "data_loading_bound", TW_SEV_WARNING, r);
        if (!f)
            return TW_ENOMEM;
        f->value = r->dataloader_ratio;
        snprintf(f->title, sizeof f->title, "Data loading bound: Dataloader %.1f%% of ProfileStep time",
                 PCT(r->dataloader_ratio));
        snprintf(f->evidence, sizeof f->evidence, "rank %d: Model/Overview Summary", r->rank);
        snprintf(f->recommendation, sizeof f->recommendation,
                 "Raise paddle.io.DataLoader(num_workers=N, use_shared_memory=True); make decoding cheaper.");
    }
    return TW_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_step(const tw_trace_rank *r)
{
    if (r->step_count == 0)
        return NAN;
    double *v = malloc((size_t)r->step_count * sizeof *v);
    if (!v)
        return NAN;
    for (int i = 0; i < r->step_count; i++)
        v[i] = r->steps[i].end - r->steps[i].start;
    qsort(v, (size_t)r->step_count, sizeof *v, cmp_double);
    double m = v[r->step_count / 2];
    free(v);
    return m;
}

/* Across ranks: the slowest median step against the median of the ranks,
 * and the rank that spends longest in communication kernels. */
static int ranks(const tw_trace_rank *rs, int n, const tw_trace_options *o, tw_finding_list *l)
{
    double *med = malloc((size_t)n * sizeof *med), *sorted = malloc((size_t)n * sizeof *sorted);
    if (!med || !sorted) {
        free(med);
        free(sorted);
        return TW_ENOMEM;
    }
    int m = 0, slow = -1, talk = -1;
    for (int i = 0; i < n; i++) {
        med[i] = median_step(&rs[i]);
        if (med[i] == med[i])
            sorted[m++] = med[i];
        if (med[i] == med[i] && (slow < 0 || med[i] > med[slow]))
            slow = i;
        if (rs[i].total.comm_total > 0 && (talk < 0 || rs[i].total.comm_total > rs[talk].total.comm_total))
            talk = i;
    }
    int rc = TW_OK;
    if (m >= 2) {
        qsort(sorted, (size_t)m, sizeof *sorted, cmp_double);
        double mid = sorted[m / 2];
        if (slow >= 0 && med[slow] > o->straggler * mid) {
            tw_finding *f = add(l, "straggler", TW_SEV_WARNING, &rs[slow]);
            if (!f) {
                rc = TW_ENOMEM;
            } else {
                f->value = med[slow] / mid;
                snprintf(f->title, sizeof f->title,
                         "Rank %d is a straggler: median step %.1f ms, %.2fx the ranks' median", rs[slow].rank,
                         ms(med[slow]), f->value);
                snprintf(f->evidence, sizeof f->evidence,
                         "median step time over %d ranks: %.1f ms; rank %d computes "
                         "%.1f ms per step",
                         m, ms(mid), rs[slow].rank, ms(rs[slow].total.compute / fmax(rs[slow].step_count, 1)));
                snprintf(f->recommendation, sizeof f->recommendation,
                         "Compare that rank's data shard, host (CPU load, thermal throttling, PCIe/NVLink) and input "
                         "sizes.");
            }
        }
    }
    if (rc == TW_OK && talk >= 0 && n >= 2) {
        tw_finding *f = add(l, "comm_wait", TW_SEV_INFO, &rs[talk]);
        if (!f) {
            rc = TW_ENOMEM;
        } else {
            const tw_trace_split *s = &rs[talk].total;
            f->value = s->comm_total;
            snprintf(f->title, sizeof f->title, "Rank %d waits longest in collectives: %.1f ms of communication",
                     rs[talk].rank, ms(s->comm_total));
            snprintf(f->evidence, sizeof f->evidence, "%.0f%% of its communication overlaps computation",
                     PCT(s->comm_overlap / s->comm_total));
            snprintf(f->recommendation, sizeof f->recommendation,
                     "The rank that waits longest in a collective is usually not the slow one: look at the others' "
                     "step times.");
        }
    }
    free(med);
    free(sorted);
    return rc;
}

static int by_severity(const void *a, const void *b)
{
    const tw_finding *x = a, *y = b;
    return (int)y->severity - (int)x->severity;
}

int tw_trace_rules(const tw_trace_rank *rs, int n, const tw_trace_options *o, tw_finding_list *l)
{
    int rc = TW_OK;
    for (int i = 0; i < n && rc == TW_OK; i++) {
        const tw_trace_rank *r = &rs[i];
        rc = truncated(r, l);
        if (rc == TW_OK)
            rc = data_bound(r, o, l);
        if (rc == TW_OK)
            rc = gpu_idle(r, o, l);
        if (rc == TW_OK)
            rc = reader_ratio(r, o, l);
        if (rc == TW_OK)
            rc = short_kernels(r, o, l);
        if (rc == TW_OK)
            rc = pageable(r, l);
        if (rc == TW_OK)
            rc = comm_overlap(r, l);
    }
    if (rc == TW_OK && n >= 2)
        rc = ranks(rs, n, o, l);
    /* stable: errors first, then warnings, then info, each in rule order */
    for (int i = 1; i < l->n; i++) {
        tw_finding f = l->v[i];
        int j = i;
        while (j > 0 && by_severity(&l->v[j - 1], &f) > 0) {
            l->v[j] = l->v[j - 1];
            j--;
        }
        l->v[j] = f;
    }
    return rc;
}
