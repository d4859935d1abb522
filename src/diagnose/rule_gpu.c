/*
 * rule_gpu.c: what the GPU telemetry logs given beside the training logs
 * say about a launch. It runs after the other rules: where they found the
 * steps waiting for data, or memory rising, it adds what the GPU log shows
 * as evidence; where they found nothing, an idle GPU or memory growing in
 * the GPU log is a finding of its own. A GPU log that does not overlap the
 * launch is said once (info), so a wrong file is not taken for a healthy GPU.
 */
#include <math.h>
#include <string.h>

#include "diagnose.h"

#define GPU_IDLE_UTIL     30.0 /* mean utilisation (%) below which the GPU is underused ... */
#define GPU_IDLE_ZERO     0.25 /* ... when this share of the samples is at 0% */
#define GPU_MIN_SAMPLES   10
#define GPU_GROWTH_MIN_MB 256.0 /* memory growth below this is allocator noise */

static tw_finding *find(tw_findings *out, const char *rule)
{
    for (int i = 0; i < out->count; i++) {
        if (strcmp(out->items[i].rule, rule) == 0)
            return &out->items[i];
    }
    return NULL;
}

static double gib(double bytes)
{
    return bytes / (1024.0 * 1024 * 1024);
}

static bool memory_growing(const tw_gpu_summary *g, const tw_thresholds *t)
{
    return !isnan(g->mem_first) && !isnan(g->mem_last) && g->mem_last > g->mem_first * (1 + t->mem_growth) &&
           g->mem_last - g->mem_first > GPU_GROWTH_MIN_MB * 1048576.0;
}

static void utilisation_evidence(tw_finding *f, const tw_gpu_summary *g)
{
    if (isnan(g->util_mean))
        return;
    tw_finding_evidence(f, "GPU log (%s:%llu): utilisation %.0f%% on average, 0%% in %.0f%% of %llu samples%s",
                        g->first.file, (unsigned long long)g->first.line, g->util_mean, g->util_zero_share * 100,
                        (unsigned long long)g->samples, g->aligned ? " over the launch" : "");
}

/* The GPU of the rank the finding is about (every rank: rank < 0), where
 * the logs said which it used; or that they did not, when the figures
 * above mix GPUs or ranks. */
static void rank_evidence(tw_finding *f, const tw_gpu_summary *g, int rank)
{
    bool said = false;
    int listed = g->rank_gpu_count < TW_GPU_RANKS_MAX ? g->rank_gpu_count : TW_GPU_RANKS_MAX;
    for (int i = 0; i < listed; i++) {
        const struct tw_rank_gpu *r = &g->rank_gpus[i];
        if (rank >= 0 && r->rank != rank)
            continue;
        said = true;
        if (isnan(r->util_mean))
            tw_finding_evidence(f, "rank %d used GPU %d (%s at %s:%llu): no samples of it in the GPU log", r->rank,
                                r->gpu, r->how, r->from.file, (unsigned long long)r->from.line);
        else
            tw_finding_evidence(f,
                                "rank %d used GPU %d (%s at %s:%llu): utilisation %.0f%% on average, 0%% in %.0f%% of "
                                "its %llu samples",
                                r->rank, r->gpu, r->how, r->from.file, (unsigned long long)r->from.line, r->util_mean,
                                r->util_zero_share * 100, (unsigned long long)r->samples);
    }
    if (!said && (g->gpus > 1 || g->rank_count > 1))
        tw_finding_evidence(f,
                            "which GPU %s used is unknown (the logs print no Place(gpu:N), gpu id, cudaDev, "
                            "CUDA_VISIBLE_DEVICES or local rank): the figures are over every GPU of the GPU log",
                            rank >= 0 ? "this rank" : "each rank");
}

static void memory_evidence(tw_finding *f, const tw_gpu_summary *g, const tw_thresholds *t)
{
    if (isnan(g->mem_first) || isnan(g->mem_last))
        return;
    char total[64] = "";
    if (!isnan(g->mem_total))
        snprintf(total, sizeof total, " of %.1f GiB", gib(g->mem_total));
    tw_finding_evidence(
        f, "GPU log (%s:%llu): memory used %.2f GiB at the start, %.2f GiB at the end%s (peak %.2f GiB): %s",
        g->first.file, (unsigned long long)g->first.line, gib(g->mem_first), gib(g->mem_last), total, gib(g->mem_max),
        memory_growing(g, t) ? "growing" : "flat");
}

static void not_overlapping(const tw_gpu_summary *g, tw_findings *out)
{
    char a[32], b[32], c[32], d[32];
    tw_finding *f = tw_finding_add(out, "gpu_log_not_aligned", TW_SEV_INFO,
                                   "The GPU log does not overlap this launch: its samples were not used");
    if (!f)
        return;
    tw_finding_evidence(f, "GPU log: %llu samples from %s to %s", (unsigned long long)g->samples_all,
                        tw_fmt_time(g->log_first_time, a, sizeof a), tw_fmt_time(g->log_last_time, b, sizeof b));
    tw_finding_evidence(f, "this launch's steps: %s to %s", tw_fmt_time(g->steps_first_time, c, sizeof c),
                        tw_fmt_time(g->steps_last_time, d, sizeof d));
    tw_finding_recommend(f, "Give the GPU log of the same run (paddle.distributed.launch writes it beside "
                            "workerlog.N as default.gpu.log), or analyse the launch it covers (--launch N).");
}

/* What the step logs say about the same time: the data loader is not why. */
static void data_evidence(tw_finding *f, const tw_run *run)
{
    double batch = 0, data = 0;
    for (int i = 0; i < run->rank_count; i++) {
        batch += run->ranks[i]->sum_batch;
        data += run->ranks[i]->sum_data;
    }
    if (batch > 0)
        tw_finding_evidence(f,
                            "the step logs: waiting for data is %.0f%% of step time, so the data loader is not "
                            "what keeps the GPU idle",
                            data / batch * 100);
}

static void underused(const tw_run *run, const tw_gpu_summary *g, tw_findings *out)
{
    tw_finding *f = tw_finding_add(out, "gpu_underused", TW_SEV_WARNING,
                                   "GPU underused: utilisation %.0f%% on average, 0%% in %.0f%% of the samples",
                                   g->util_mean, g->util_zero_share * 100);
    if (!f)
        return;
    f->value = g->util_mean / 100;
    f->where = g->first;
    utilisation_evidence(f, g);
    rank_evidence(f, g, -1);
    data_evidence(f, run);
    tw_finding_recommend(f, "The GPU waits on something the step does on the host: CPU-side loss or "
                            "post-processing, synchronisations (.item(), .numpy()), small batches, or host-to-device "
                            "copies. Profile a few steps (trainwatch trace reads the profiler's trace) to see where "
                            "the GPU is idle.");
}

static void memory_growth(const tw_gpu_summary *g, const tw_thresholds *t, tw_findings *out)
{
    tw_finding *f = tw_finding_add(out, "gpu_memory_growth", TW_SEV_WARNING,
                                   "GPU memory grows over the launch: %.2f GiB -> %.2f GiB (GPU log)",
                                   gib(g->mem_first), gib(g->mem_last));
    if (!f)
        return;
    f->value = g->mem_first > 0 ? g->mem_last / g->mem_first - 1 : NAN;
    f->where = g->first;
    memory_evidence(f, g, t);
    tw_finding_recommend(f, "Memory that keeps rising leaks tensors kept across steps (losses accumulated with "
                            "their graph, growing caches); compare a few steps' memory with the profiler.");
}

static void check_gpu(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    const tw_gpu_summary *g = run->gpu_summary;
    if (!g || g->samples_all == 0)
        return;
    if (g->samples == 0) {
        if (!isnan(g->log_first_time) && !isnan(g->steps_first_time))
            not_overlapping(g, out);
        return;
    }
    tw_finding *data = find(out, "data_loading_bound");
    if (data) {
        utilisation_evidence(data, g);
        rank_evidence(data, g, data->rank);
    } else if (g->samples >= GPU_MIN_SAMPLES && g->util_mean < GPU_IDLE_UTIL && g->util_zero_share >= GPU_IDLE_ZERO &&
               run->steps > 0)
        underused(run, g, out);
    tw_finding *mem = find(out, "memory_growth");
    if (!mem)
        mem = find(out, "memory_spike");
    if (mem)
        memory_evidence(mem, g, t);
    else if (g->samples >= GPU_MIN_SAMPLES && memory_growing(g, t))
        memory_growth(g, t, out);
}

const tw_rule tw_rule_gpu = {"gpu", "what GPU telemetry logs show: idle GPUs, growing memory (evidence for the others)",
                             check_gpu};
