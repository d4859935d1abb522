/*
 * report_json.c: the report as one JSON document, schema
 * "trainwatch.trace/1" (docs/trace.md). Times in microseconds as in the
 * traces; findings are the objects of trainwatch.analysis/1. Keys are
 * stable within version 1; new keys may be added.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/json.h"
#include "internal.h"

/* A time in µs to the nanosecond, as the traces give it: 3 decimals at
 * most, written without the shortest-round-trip search of tw_json_number
 * (a report has a dozen per step, and a long trace thousands of steps). */
static bool write_us(FILE *out, double v)
{
    if (!(fabs(v) < 9e12))
        return false;
    long long m = llround(v * 1000);
    unsigned long long a = (unsigned long long)(m < 0 ? -m : m);
    unsigned frac = (unsigned)(a % 1000);
    fprintf(out, "%s%llu", m < 0 ? "-" : "", a / 1000);
    if (frac) {
        char d[5] = {'.', (char)('0' + frac / 100), (char)('0' + frac / 10 % 10), (char)('0' + frac % 10), 0};
        for (int i = 3; d[i] == '0'; i--)
            d[i] = 0;
        fputs(d, out);
    }
    return true;
}

static void num(FILE *out, const char *key, double v, bool comma)
{
    fprintf(out, "%s\"%s\":", comma ? "," : "", key);
    size_t n = strlen(key);
    if (!isfinite(v))
        fputs("null", out);
    else if (!(n > 3 && strcmp(key + n - 3, "_us") == 0 && write_us(out, v)))
        tw_json_number(out, v);
}

static void split(FILE *out, const tw_trace_split *s)
{
    num(out, "wall_us", s->wall, false);
    num(out, "compute_us", s->compute, true);
    num(out, "comm_us", s->comm, true);
    num(out, "memcpy_us", s->memcpy, true);
    num(out, "idle_us", s->idle, true);
    fputs(",\"idle\":{", out);
    num(out, "dataloader_us", s->idle_data, false);
    num(out, "sync_us", s->idle_sync, true);
    num(out, "kernel_gap_us", s->idle_gap, true);
    num(out, "host_us", s->idle_host, true);
    fputc('}', out);
    num(out, "dataloader_span_us", s->data_span, true);
    num(out, "comm_total_us", s->comm_total, true);
    num(out, "comm_overlap_us", s->comm_overlap, true);
}

static void stats(FILE *out, const char *key, const tw_trace_stat *v, int n)
{
    fprintf(out, ",\"%s\":[", key);
    for (int i = 0; i < n; i++) {
        fprintf(out, "%s{\"name\":", i ? "," : "");
        tw_json_cstring(out, v[i].name);
        fprintf(out, ",\"count\":%llu", (unsigned long long)v[i].count);
        num(out, "total_us", v[i].total, true);
        num(out, "self_us", v[i].self, true);
        num(out, "mean_us", v[i].count ? v[i].total / (double)v[i].count : NAN, true);
        num(out, "max_us", v[i].max, true);
        num(out, "min_us", v[i].min, true);
        fprintf(out, ",\"short_count\":%llu", (unsigned long long)v[i].short_count);
        fputs(",\"issuer\":", out);
        if (v[i].issuer[0])
            tw_json_cstring(out, v[i].issuer);
        else
            fputs("null", out);
        fputc('}', out);
    }
    fputc(']', out);
}

static void summary_row(FILE *out, const tw_trace_summary_row *row, bool comma)
{
    fputs(comma ? ",{\"name\":" : "{\"name\":", out);
    tw_json_cstring(out, row->name);
    fprintf(out, ",\"depth\":%d,\"calls\":", row->depth);
    if (row->calls >= 0)
        fprintf(out, "%lld", row->calls);
    else
        fputs("null", out);
    num(out, "cpu_total_us", row->cpu_total, true);
    num(out, "cpu_avg_us", row->cpu_avg, true);
    num(out, "cpu_max_us", row->cpu_max, true);
    num(out, "cpu_min_us", row->cpu_min, true);
    num(out, "cpu_ratio", row->cpu_ratio, true);
    num(out, "gpu_total_us", row->gpu_total, true);
    num(out, "gpu_avg_us", row->gpu_avg, true);
    num(out, "gpu_max_us", row->gpu_max, true);
    num(out, "gpu_min_us", row->gpu_min, true);
    num(out, "gpu_ratio", row->gpu_ratio, true);
    fputc('}', out);
}

/* The Paddle summary's tables (null for a trace). */
static void summary(FILE *out, const tw_trace_rank *r)
{
    const tw_trace_summary *sm = &r->summary;
    if (!r->source || strcmp(r->source, "paddle-summary") != 0) {
        fputs(",\"summary\":null", out);
        return;
    }
    fputs(",\"summary\":{\"devices\":[", out);
    for (int i = 0; i < sm->device_count; i++) {
        fprintf(out, "%s{\"name\":", i ? "," : "");
        tw_json_cstring(out, sm->devices[i].name);
        num(out, "utilization", sm->devices[i].cpu_ratio, true);
        fputc('}', out);
    }
    fputs("],\"overview\":[", out);
    for (int i = 0; i < sm->overview_count; i++)
        summary_row(out, &sm->overview[i], i > 0);
    fputs("],\"model\":[", out);
    for (int i = 0; i < sm->model_count; i++)
        summary_row(out, &sm->model[i], i > 0);
    fputs("],\"distribution\":{", out);
    num(out, "step_us", sm->step, false);
    num(out, "communication_us", sm->communication, true);
    num(out, "computation_us", sm->computation, true);
    num(out, "overlap_us", sm->overlap, true);
    fprintf(out, "},\"operator_rows\":%d,\"kernel_rows\":%d}", sm->operators, sm->kernels);
}

static void rank(FILE *out, const tw_trace_rank *r)
{
    fputs("{\"path\":", out);
    tw_json_cstring(out, r->path);
    fprintf(out, ",\"rank\":%d,\"source\":", r->rank);
    tw_json_cstring(out, r->source ? r->source : "unread");
    fputs(",\"error\":", out);
    if (r->error[0])
        tw_json_cstring(out, r->error);
    else
        fputs("null", out);
    fprintf(out,
            ",\"bytes\":%llu,\"events\":%llu,\"skipped\":%llu,\"late\":%llu,\"names_cut\":%llu,"
            "\"names_over\":%llu,\"steps_over\":%llu,\"flushes\":%llu,\"flushes_forced\":%llu",
            (unsigned long long)r->bytes, (unsigned long long)r->events, (unsigned long long)r->skipped,
            (unsigned long long)r->late, (unsigned long long)r->names_cut, (unsigned long long)r->names_over,
            (unsigned long long)r->steps_over, (unsigned long long)r->flushes, (unsigned long long)r->flushes_forced);
    fputs(",\"total\":{", out);
    split(out, &r->total);
    fputs("},\"steps\":[", out);
    for (int i = 0; i < r->step_count; i++) {
        const tw_trace_step *s = &r->steps[i];
        fprintf(out, "%s{\"id\":%lld", i ? "," : "", (long long)s->id);
        num(out, "start_us", s->start, true);
        num(out, "end_us", s->end, true);
        fputc(',', out);
        split(out, &s->split);
        num(out, "peak_allocated_bytes", s->peak_allocated, true);
        num(out, "peak_reserved_bytes", s->peak_reserved, true);
        fputc('}', out);
    }
    fprintf(out, "],\"kernels\":{\"count\":%llu,\"names\":%d", (unsigned long long)r->kernels, r->kernel_names);
    num(out, "total_us", r->kernel_time, true);
    fprintf(out, ",\"short_count\":%llu", (unsigned long long)r->short_kernels);
    num(out, "short_total_us", r->short_kernel_time, true);
    fprintf(out, ",\"launches_matched\":%llu", (unsigned long long)r->launches);
    num(out, "launch_delay_mean_us", r->launches ? r->launch_delay_sum / (double)r->launches : NAN, true);
    num(out, "launch_delay_max_us", r->launches ? r->launch_delay_max : NAN, true);
    num(out, "launch_call_total_us", r->launch_time_sum, true);
    fprintf(out, ",\"shorter_than_launch\":%llu}", (unsigned long long)r->launch_bound);
    stats(out, "top_kernels", r->top_kernels, r->top_kernel_count);
    stats(out, "top_operators", r->top_ops, r->top_op_count);
    stats(out, "top_operators_self", r->top_self, r->top_self_count);
    fputs(",\"copies\":{", out);
    for (int d = 0; d < TW_COPY_COUNT; d++) {
        const tw_trace_copy *c = &r->copies[d];
        fprintf(out, "%s\"%s\":{\"count\":%llu", d ? "," : "", tw_copy_dir_name((tw_copy_dir)d),
                (unsigned long long)c->count);
        num(out, "bytes", c->bytes, true);
        num(out, "time_us", c->time, true);
        num(out, "gb_per_s", c->time > 0 ? c->bytes / c->time / 1e3 : NAN, true);
        fputc('}', out);
    }
    fprintf(out, "},\"pageable_copies\":%llu", (unsigned long long)r->pageable_count);
    num(out, "pageable_bytes", r->pageable_bytes, true);
    fputs(",\"streams\":[", out);
    for (int i = 0; i < r->stream_count; i++) {
        const tw_trace_stream *st = &r->streams[i];
        fprintf(out, "%s{\"device\":%lld,\"stream\":%lld,\"kernels\":%llu,\"copies\":%llu", i ? "," : "",
                (long long)st->device, (long long)st->stream, (unsigned long long)st->kernels,
                (unsigned long long)st->copies);
        num(out, "start_us", st->first, true);
        num(out, "end_us", st->last, true);
        num(out, "busy_us", st->busy, true);
        num(out, "compute_us", st->compute, true);
        num(out, "comm_us", st->comm, true);
        num(out, "memcpy_us", st->memcpy, true);
        num(out, "idle_us", fmax(0, st->last - st->first - st->busy), true);
        fputc('}', out);
    }
    fprintf(out, "],\"streams_over\":%llu,\"sync_calls\":%llu", (unsigned long long)r->streams_over,
            (unsigned long long)r->sync_calls);
    num(out, "sync_us", r->sync_time, true);
    num(out, "peak_allocated_bytes", r->peak_allocated, true);
    num(out, "peak_reserved_bytes", r->peak_reserved, true);
    num(out, "reader_ratio", r->reader_ratio, true);
    fputs(",\"reader_ratios\":[", out);
    for (int b = 0; b < r->summary_blocks; b++) {
        if (b)
            fputc(',', out);
        tw_json_number(out, r->block_ratios[b]);
    }
    fputc(']', out);
    num(out, "dataloader_ratio", r->dataloader_ratio, true);
    num(out, "ips", r->ips, true);
    summary(out, r);
    fputc('}', out);
}

void tw_trace_write_json(FILE *out, const tw_trace *t)
{
    fprintf(out, "{\"schema\":\"" TW_TRACE_SCHEMA "\",\"healthy\":%s,\"ranks\":[",
            tw_trace_healthy(t) ? "true" : "false");
    for (int i = 0; i < tw_trace_rank_count(t); i++) {
        if (i)
            fputc(',', out);
        rank(out, tw_trace_rank_at(t, i));
    }
    fputs("],\"findings\":[", out);
    for (int i = 0; i < tw_trace_finding_count(t); i++) {
        if (i)
            fputc(',', out);
        tw_finding_write_json(out, tw_trace_finding_at(t, i)); /* analyze's finding objects */
    }
    fputs("]}\n", out);
}
