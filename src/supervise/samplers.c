/*
 * samplers.c: process-tree and GPU sampling for `run` (see samplers.h).
 */
#include "samplers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/minmax.h"
#include "../core/say.h"
#include "cost.h"
#include "gpu.h"
#include "proctree.h"
#include "trainwatch/error.h"

#define GPUS_MAX 16

/* GPU series, named as NVIDIA's DCGM exporter names them where they overlap. */
typedef struct gpu_metrics {
    tw_gpu *gpu;
    unsigned count;
    tw_gauge *util[GPUS_MAX], *copy_util[GPUS_MAX], *fb_used[GPUS_MAX], *fb_free[GPUS_MAX], *power[GPUS_MAX],
        *temp[GPUS_MAX], *sm_clock[GPUS_MAX], *throttle[GPUS_MAX], *ours[GPUS_MAX];
    double util_sum, samples;
    uint64_t memory_peak, memory_total;
    tw_minmax util_series[GPUS_MAX], mem_series[GPUS_MAX]; /* for the HTML report */
} gpu_metrics;

typedef struct tree_metrics {
    tw_counter *cpu, *read, *write;
    tw_gauge *rss, *threads, *processes, *workers;
    tw_tree_sample last;
    double cpu_max_rate, samples, cpu_rate_sum;
    uint64_t rss_peak;
    int workers_peak;
} tree_metrics;

struct tw_samplers {
    const char *name;
    tree_metrics tree;
    gpu_metrics gpu;
    tw_cost *cost;
};

static int tree_metrics_init(tw_registry *r, const char *run, int rank, tree_metrics *t)
{
    char rank_text[16];
    snprintf(rank_text, sizeof rank_text, "%d", rank);
    const char *labels[] = {"run", "rank"};
    const char *values[] = {run, rank_text};
    struct {
        const char *name, *help;
        tw_metric_type type;
        tw_cell **cell;
    } defs[] = {
        {"trainwatch_process_tree_cpu_seconds_total", "CPU time of the command and all its descendants.",
         TW_METRIC_COUNTER, &t->cpu},
        {"trainwatch_process_tree_read_bytes_total", "Storage bytes read by the command's process tree.",
         TW_METRIC_COUNTER, &t->read},
        {"trainwatch_process_tree_write_bytes_total", "Storage bytes written by the command's process tree.",
         TW_METRIC_COUNTER, &t->write},
        {"trainwatch_process_tree_resident_memory_bytes", "Resident memory of the command's process tree.",
         TW_METRIC_GAUGE, &t->rss},
        {"trainwatch_process_tree_threads", "Threads in the command's process tree.", TW_METRIC_GAUGE, &t->threads},
        {"trainwatch_process_tree_processes", "Processes in the command's process tree.", TW_METRIC_GAUGE,
         &t->processes},
        {"trainwatch_process_tree_workers", "Child processes of the command (data-loader workers and others).",
         TW_METRIC_GAUGE, &t->workers},
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        tw_family *f;
        tw_family_options o = {
            .name = defs[i].name, .help = defs[i].help, .type = defs[i].type, .label_count = 2, .label_names = labels};
        int rc = tw_family_register(r, &o, &f);
        if (rc == TW_OK)
            rc = tw_family_series(f, values, defs[i].cell);
        if (rc != TW_OK)
            return rc;
    }
    return TW_OK;
}

static int gpu_metrics_init(tw_registry *r, const char *name, const char *run, int rank, gpu_metrics *g)
{
    char why[512];
    if (tw_gpu_open(NULL, &g->gpu, why, sizeof why) != TW_OK) {
        tw_say(TW_SAY_INFO, name, "no GPU metrics: %s", why);
        return TW_OK; /* no GPU is not an error */
    }
    g->count = tw_gpu_count(g->gpu) < GPUS_MAX ? tw_gpu_count(g->gpu) : GPUS_MAX;
    const char *labels[] = {"run", "rank", "gpu", "UUID", "modelName"};
    struct {
        const char *name, *help;
        tw_gauge **cells;
    } defs[] = {
        {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", g->util},
        {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", g->copy_util},
        {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", g->fb_used},
        {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", g->fb_free},
        {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", g->power},
        {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", g->temp},
        {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", g->sm_clock},
        {"trainwatch_gpu_clock_event_reasons", "NVML clock event (throttle) reason bits; 0 when not throttled.",
         g->throttle},
        {"trainwatch_gpu_process_memory_bytes", "GPU memory used by the command's processes.", g->ours},
    };
    char rank_text[16];
    snprintf(rank_text, sizeof rank_text, "%d", rank);
    for (size_t k = 0; k < sizeof defs / sizeof defs[0]; k++) {
        tw_family *f;
        tw_family_options o = {.name = defs[k].name,
                               .help = defs[k].help,
                               .type = TW_METRIC_GAUGE,
                               .label_count = 5,
                               .label_names = labels};
        int rc = tw_family_register(r, &o, &f);
        for (unsigned i = 0; i < g->count && rc == TW_OK; i++) {
            tw_gpu_reading reading;
            tw_gpu_read(g->gpu, i, &reading);
            char index[16];
            snprintf(index, sizeof index, "%u", i);
            const char *values[] = {run, rank_text, index, reading.uuid, reading.name};
            rc = tw_family_series(f, values, &defs[k].cells[i]);
        }
        if (rc != TW_OK)
            return rc;
    }
    tw_say(TW_SAY_INFO, name, "sampling %u GPU(s) through NVML", g->count);
    return TW_OK;
}

/* tree: the command's process tree, NULL before the command runs (then
 * nothing goes to the series drawn for the HTML report). */
static void sample_gpus(gpu_metrics *g, const tw_tree_sample *tree, tw_cost *cost, double interval)
{
    double now = tw_wall_clock();
    for (unsigned i = 0; g->gpu && i < g->count; i++) {
        tw_gpu_reading r;
        if (tw_gpu_read(g->gpu, i, &r) != TW_OK)
            continue;
        uint64_t ours = tree ? tw_gpu_memory_of(g->gpu, i, tree->pids, (size_t)tree->pid_count) : 0;
        tw_cost_gpu(cost, r.name, ours > 0, r.has_util ? r.util_gpu : NAN, interval);
        if (r.has_util) {
            tw_gauge_set(g->util[i], r.util_gpu);
            tw_gauge_set(g->copy_util[i], r.util_memory);
            g->util_sum += r.util_gpu;
            g->samples++;
            if (tree)
                tw_minmax_add(&g->util_series[i], now, r.util_gpu);
        }
        if (r.has_memory) {
            tw_gauge_set(g->fb_used[i], (double)r.memory_used / (1024 * 1024));
            tw_gauge_set(g->fb_free[i], (double)(r.memory_total - r.memory_used) / (1024 * 1024));
            if (r.memory_used > g->memory_peak)
                g->memory_peak = r.memory_used;
            g->memory_total = r.memory_total;
            if (tree)
                tw_minmax_add(&g->mem_series[i], now, (double)r.memory_used);
        }
        if (r.has_power)
            tw_gauge_set(g->power[i], r.power_watts);
        if (r.has_temp)
            tw_gauge_set(g->temp[i], r.temp_c);
        if (r.has_clock)
            tw_gauge_set(g->sm_clock[i], r.sm_clock_mhz);
        if (r.has_throttle)
            tw_gauge_set(g->throttle[i], (double)r.throttle_reasons);
        if (tree)
            tw_gauge_set(g->ours[i], (double)ours);
    }
    if (g->gpu)
        tw_cost_sample_done(cost);
}

static void sample_tree(pid_t child, tree_metrics *t, double interval)
{
    tw_tree_sample s;
    if (tw_tree_sample_take(child, &s) != TW_OK)
        return;
    /* counters only move forward: a worker that exits takes its CPU time with it */
    if (s.cpu_seconds > t->last.cpu_seconds) {
        double delta = s.cpu_seconds - t->last.cpu_seconds;
        tw_counter_add(t->cpu, delta);
        if (interval > 0) {
            double rate = delta / interval;
            t->cpu_rate_sum += rate;
            t->samples++;
            if (rate > t->cpu_max_rate)
                t->cpu_max_rate = rate;
        }
    }
    if (s.read_bytes > t->last.read_bytes)
        tw_counter_add(t->read, (double)(s.read_bytes - t->last.read_bytes));
    if (s.write_bytes > t->last.write_bytes)
        tw_counter_add(t->write, (double)(s.write_bytes - t->last.write_bytes));
    tw_gauge_set(t->rss, (double)s.rss_bytes);
    tw_gauge_set(t->threads, (double)s.threads);
    tw_gauge_set(t->processes, s.processes);
    tw_gauge_set(t->workers, s.processes - 1);
    if (s.rss_bytes > t->rss_peak)
        t->rss_peak = s.rss_bytes;
    if (s.processes - 1 > t->workers_peak)
        t->workers_peak = s.processes - 1;
    t->last = s;
}

#define GPU_UNDERUSED_PERCENT 30.0

/* What the sampling saw, as a finding beside the log's: GPUs mostly idle
 * while the command ran, with the data wait the log reports when it has one. */
void tw_samplers_add_findings(const tw_samplers *s, tw_report *report)
{
    const gpu_metrics *g = &s->gpu;
    if (!g->gpu || g->samples < 3)
        return;
    double util = g->util_sum / g->samples;
    if (util >= GPU_UNDERUSED_PERCENT)
        return;
    tw_finding f = {.rule = "gpu_underused", .severity = TW_SEV_WARNING, .rank = -1, .step = -1, .value = util / 100};
    double share = report->summary.data_share;
    snprintf(f.title, sizeof f.title, "GPU utilization averaged %.0f%%%s", util,
             share == share && share > 0 ? " while steps waited for data" : "");
    snprintf(f.evidence, sizeof f.evidence,
             "%u GPU(s) sampled every second through NVML: %.0f%% utilization on average (%.0f samples)", g->count,
             util, g->samples);
    if (share == share && share > 0) {
        size_t n = strlen(f.evidence);
        snprintf(f.evidence + n, sizeof f.evidence - n, "\nthe log's data wait was %.0f%% of step time", share * 100);
    }
    snprintf(f.recommendation, sizeof f.recommendation, "%s",
             share == share && share >= 0.3
                 ? "The GPU waits for input: see data_loading_bound (more DataLoader workers, cheaper decoding)."
                 : "Look for work outside the GPU in each step: host-side preprocessing, synchronisation (.item(), "
                   ".numpy() in the loop), small batches, or a slow collective.");
    tw_report_append(report, &f);
}

static void gpu_points(const tw_minmax *m, int gpu, bool util, tw_html_gpu *out, double *t, double *v)
{
    size_t n = tw_minmax_points(m, t, v);
    for (size_t k = 0; k < n; k++)
        out->points[out->count++] = (tw_html_gpu_point){gpu, t[k], util ? v[k] : NAN, util ? NAN : v[k]};
}

int tw_samplers_gpu_series(const tw_samplers *s, tw_html_gpu *out)
{
    const gpu_metrics *g = &s->gpu;
    *out = (tw_html_gpu){NULL, 0, g->memory_total ? (double)g->memory_total : NAN};
    if (!g->gpu || !g->count)
        return TW_OK;
    size_t cap = (size_t)g->count * 4 * TW_MINMAX_BUCKETS;
    double *t = malloc(sizeof *t * 2 * TW_MINMAX_BUCKETS), *v = malloc(sizeof *v * 2 * TW_MINMAX_BUCKETS);
    out->points = malloc(sizeof *out->points * cap);
    if (!t || !v || !out->points) {
        free(t);
        free(v);
        free(out->points);
        out->points = NULL;
        return TW_ENOMEM;
    }
    for (unsigned i = 0; i < g->count; i++) {
        gpu_points(&g->util_series[i], (int)i, true, out, t, v);
        gpu_points(&g->mem_series[i], (int)i, false, out, t, v);
    }
    free(t);
    free(v);
    return TW_OK;
}

void tw_samplers_write(const tw_samplers *s, const tw_report *report, FILE *out)
{
    const tree_metrics *t = &s->tree;
    const gpu_metrics *g = &s->gpu;
    fprintf(out,
            "process tree: %.2f CPU cores on average (peak %.2f), peak resident memory %.1f MiB, "
            "up to %d worker processes\n",
            t->samples ? t->cpu_rate_sum / t->samples : 0, t->cpu_max_rate, (double)t->rss_peak / (1024 * 1024),
            t->workers_peak);
    if (g->gpu && g->samples > 0) {
        double util = g->util_sum / g->samples;
        fprintf(out, "GPU: utilization averaged %.0f%% over %u GPU(s), memory peak %.1f of %.1f GiB", util, g->count,
                (double)g->memory_peak / (1 << 30), (double)g->memory_total / (1 << 30));
        double share = report->summary.data_share;
        if (share == share && share > 0)
            fprintf(out, ", while data wait was %.0f%% of step time", share * 100);
        fputc('\n', out);
    }
    tw_cost_write(s->cost, out);
}

void tw_samplers_cost(const tw_samplers *s, tw_gpu_cost *out)
{
    tw_cost_totals(s->cost, out);
}

int tw_samplers_new(tw_registry *r, const char *name, const char *run, int rank, const tw_cost_options *cost,
                    tw_samplers **out)
{
    tw_samplers *s = calloc(1, sizeof *s);
    if (!s)
        return TW_ENOMEM;
    s->name = name;
    int rc = tree_metrics_init(r, run, rank, &s->tree);
    if (rc == TW_OK)
        rc = gpu_metrics_init(r, name, run, rank, &s->gpu);
    char err[600];
    if (rc == TW_OK && (rc = tw_cost_new(r, run, rank, cost, &s->cost, err, sizeof err)) != TW_OK) {
        tw_say(TW_SAY_ERROR, name, "%s", err);
        if (rc == TW_EINVAL)
            rc = TW_EUSAGE;
    }
    if (rc != TW_OK) {
        tw_samplers_free(s);
        return rc;
    }
    sample_gpus(&s->gpu, NULL, NULL, 0); /* no GPU gauge reads 0 before the first sample (alerts see them) */
    *out = s;
    return TW_OK;
}

void tw_samplers_free(tw_samplers *s)
{
    if (!s)
        return;
    tw_gpu_close(s->gpu.gpu);
    tw_cost_free(s->cost);
    free(s);
}

void tw_samplers_sample(tw_samplers *s, pid_t root, double interval)
{
    if (root > 0)
        sample_tree(root, &s->tree, interval);
    sample_gpus(&s->gpu, root > 0 ? &s->tree.last : NULL, s->cost, interval);
}
