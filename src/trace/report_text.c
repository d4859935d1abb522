/*
 * report_text.c: the human report of `trainwatch trace`: per input a
 * header, the time split, idle attribution, the top tables, copies and
 * launches; then the findings in analyze's form; then the verdict.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

typedef struct style {
    const char *bold, *red, *yellow, *cyan, *green, *dim, *reset;
} style;

static const style plain = {"", "", "", "", "", "", ""};
static const style colours = {"\x1b[1m", "\x1b[31m", "\x1b[33m", "\x1b[36m", "\x1b[32m", "\x1b[2m", "\x1b[0m"};

static double pct(double a, double b)
{
    return b > 0 ? 100 * a / b : 0;
}

static void split(FILE *out, const tw_trace_rank *r)
{
    const tw_trace_split *s = &r->total;
    if (!(s->wall > 0))
        return;
    fprintf(out, "  %-14s %.3f ms (%s)\n", "wall", s->wall / 1000,
            r->step_count ? "sum of the steps" : "first to last GPU activity");
    fprintf(out, "  %-14s compute %.1f%%  communication %.1f%%  memcpy/memset %.1f%%  idle %.1f%%\n", "GPU time",
            pct(s->compute, s->wall), pct(s->comm, s->wall), pct(s->memcpy, s->wall), pct(s->idle, s->wall));
    if (s->idle > 0)
        fprintf(out, "  %-14s DataLoader %.1f%%  sync %.1f%%  kernel gaps %.1f%%  host not launching %.1f%%\n",
                "idle due to", pct(s->idle_data, s->idle), pct(s->idle_sync, s->idle), pct(s->idle_gap, s->idle),
                pct(s->idle_host, s->idle));
    if (s->comm_total > 0)
        fprintf(out, "  %-14s %.3f ms, %.1f%% overlapped with compute\n", "communication", s->comm_total / 1000,
                pct(s->comm_overlap, s->comm_total));
}

static void steps(FILE *out, const tw_trace_rank *r)
{
    if (r->step_count == 0)
        return;
    fprintf(out, "\n  %-18s %10s %8s %8s %8s %8s %8s %8s\n", "step", "wall ms", "compute", "comm", "memcpy", "idle",
            "idle:DL", "DL span");
    int shown = r->step_count <= 12 ? r->step_count : 12;
    for (int i = 0; i < shown; i++) {
        const tw_trace_step *st = &r->steps[i];
        const tw_trace_split *s = &st->split;
        fprintf(out, "  ProfilerStep#%-5lld %10.3f %7.1f%% %7.1f%% %7.1f%% %7.1f%% %7.1f%% %7.1f%%\n",
                (long long)st->id, s->wall / 1000, pct(s->compute, s->wall), pct(s->comm, s->wall),
                pct(s->memcpy, s->wall), pct(s->idle, s->wall), pct(s->idle_data, s->wall), pct(s->data_span, s->wall));
    }
    if (shown < r->step_count)
        fprintf(out, "  (%d more steps in --json)\n", r->step_count - shown);
}

static void table(FILE *out, const char *title, const tw_trace_stat *v, int n, bool self, bool kernels)
{
    if (n == 0)
        return;
    fprintf(out, "\n  %-48s %7s %11s %11s %9s %9s\n", title, "count", self ? "self ms" : "total ms", "mean us",
            "max us", kernels ? "<10us" : "");
    for (int i = 0; i < n; i++) {
        const tw_trace_stat *s = &v[i];
        fprintf(out, "  %-48.48s %7llu %11.3f %11.1f %9.1f", s->name, (unsigned long long)s->count,
                (self ? s->self : s->total) / 1000, s->count ? s->total / (double)s->count : 0, s->max);
        if (kernels)
            fprintf(out, " %8.0f%%", pct((double)s->short_count, (double)s->count));
        if (kernels && s->issuer[0])
            fprintf(out, "  <- %.40s", s->issuer);
        fputc('\n', out);
    }
}

static void copies(FILE *out, const tw_trace_rank *r)
{
    bool any = false;
    for (int d = 0; d < TW_COPY_COUNT; d++)
        any |= r->copies[d].count > 0;
    if (!any)
        return;
    fprintf(out, "\n  %-10s %8s %14s %11s %10s\n", "copies", "count", "bytes", "time ms", "GB/s");
    for (int d = 0; d < TW_COPY_COUNT; d++) {
        const tw_trace_copy *c = &r->copies[d];
        if (c->count)
            fprintf(out, "  %-10s %8llu %14.0f %11.3f %10.2f\n", tw_copy_dir_name((tw_copy_dir)d),
                    (unsigned long long)c->count, c->bytes, c->time / 1000, c->time > 0 ? c->bytes / c->time / 1e3 : 0);
    }
    if (r->pageable_count)
        fprintf(out, "  pageable host memory: %llu copies, %.0f bytes\n", (unsigned long long)r->pageable_count,
                r->pageable_bytes);
}

static void streams(FILE *out, const tw_trace_rank *r)
{
    if (r->stream_count == 0)
        return;
    fprintf(out, "\n  %-16s %8s %8s %11s %8s %8s %8s %8s\n", "device/stream", "kernels", "copies", "span ms", "compute",
            "comm", "memcpy", "idle");
    for (int i = 0; i < r->stream_count; i++) {
        const tw_trace_stream *s = &r->streams[i];
        double span = s->last - s->first;
        char name[32];
        snprintf(name, sizeof name, "%lld/%lld", (long long)s->device, (long long)s->stream);
        fprintf(out, "  %-16s %8llu %8llu %11.3f %7.1f%% %7.1f%% %7.1f%% %7.1f%%\n", name,
                (unsigned long long)s->kernels, (unsigned long long)s->copies, span / 1000, pct(s->compute, span),
                pct(s->comm, span), pct(s->memcpy, span), pct(fmax(0, span - s->busy), span));
    }
    if (r->streams_over)
        fprintf(out, "  (%llu GPU events on further streams)\n", (unsigned long long)r->streams_over);
}

/* The Paddle summary's tables, condensed: devices, the overview, the
 * model's phases, the distribution, then the top operators and kernels. */
static const char *calls(char *buf, size_t cap, long long n)
{
    if (n < 0)
        return "-";
    snprintf(buf, cap, "%lld", n);
    return buf;
}

static void summary_tables(FILE *out, const tw_trace_rank *r)
{
    char c[24];
    const tw_trace_summary *sm = &r->summary;
    for (int i = 0; i < sm->device_count; i++)
        fprintf(out, "  %-14s %.2f%% utilised\n", sm->devices[i].name, 100 * sm->devices[i].cpu_ratio);
    if (sm->overview_count)
        fprintf(out, "\n  %-28s %8s %12s %8s\n", "overview (event type)", "calls", "time ms", "ratio");
    for (int i = 0; i < sm->overview_count; i++) {
        const tw_trace_summary_row *o = &sm->overview[i];
        bool gpu = o->gpu_total == o->gpu_total;
        fprintf(out, "  %*s%-*.*s %8s %12.3f %7.2f%%  %s\n", 2 * o->depth, "", 28 - 2 * o->depth, 28 - 2 * o->depth,
                o->name, calls(c, sizeof c, o->calls), (gpu ? o->gpu_total : o->cpu_total) / 1000,
                100 * (gpu ? o->gpu_ratio : o->cpu_ratio), gpu ? "GPU" : "CPU");
    }
    if (sm->model_count)
        fprintf(out, "\n  %-28s %8s %12s %8s %12s %8s\n", "model", "calls", "CPU ms", "CPU", "GPU ms", "GPU");
    for (int i = 0; i < sm->model_count; i++) {
        const tw_trace_summary_row *m = &sm->model[i];
        fprintf(out, "  %*s%-*.*s %8s %12.3f %7.2f%% %12.3f %7.2f%%\n", 2 * m->depth, "", 28 - 2 * m->depth,
                28 - 2 * m->depth, m->name, calls(c, sizeof c, m->calls), m->cpu_total / 1000, 100 * m->cpu_ratio,
                m->gpu_total / 1000, 100 * m->gpu_ratio);
    }
    if (sm->step == sm->step)
        fprintf(out,
                "\n  distribution   ProfileStep %.3f ms: communication %.2f%%, computation %.2f%%, overlap %.2f%%\n",
                sm->step / 1000, pct(sm->communication, sm->step), pct(sm->computation, sm->step),
                pct(sm->overlap, sm->step));
    table(out, "top operators (Operator Summary, CPU)", r->top_ops, r->top_op_count, false, false);
    table(out, "top kernels (Kernel Summary)", r->top_kernels, r->top_kernel_count, false, false);
}

static void rank(FILE *out, const tw_trace_rank *r, const style *st)
{
    fprintf(out, "%s%s%s  rank %d, %s, %llu events, %llu bytes%s%s\n", st->bold, r->path, st->reset, r->rank,
            r->source ? r->source : "unread", (unsigned long long)r->events, (unsigned long long)r->bytes,
            r->error[0] ? ", stopped: " : "", r->error);
    if (r->skipped || r->late || r->names_over || r->steps_over)
        fprintf(out,
                "  %sskipped %llu events (no or bad ts/dur, unknown ph); %llu late intervals; %llu events past "
                "the name tables' cap; %llu steps past the cap%s\n",
                st->dim, (unsigned long long)r->skipped, (unsigned long long)r->late, (unsigned long long)r->names_over,
                (unsigned long long)r->steps_over, st->reset);
    if (r->source && strcmp(r->source, "paddle-summary") == 0) {
        for (int b = 0; b < r->summary_blocks; b++)
            fprintf(out, "  Perf Summary %d  Reader Ratio %.3f%%\n", b + 1, 100 * r->block_ratios[b]);
        if (r->ips == r->ips)
            fprintf(out, "  ips            %.3f (first Perf Summary, avg)\n", r->ips);
        if (r->dataloader_ratio == r->dataloader_ratio)
            fprintf(out, "  Dataloader     %.2f%% of ProfileStep CPU time\n", 100 * r->dataloader_ratio);
        summary_tables(out, r);
        return;
    }
    split(out, r);
    steps(out, r);
    if (r->kernels)
        fprintf(out,
                "\n  kernels        %llu (%d names), %.3f ms; %.1f%% under 10 us; launches matched %llu, mean "
                "delay %.1f us\n",
                (unsigned long long)r->kernels, r->kernel_names, r->kernel_time / 1000,
                pct((double)r->short_kernels, (double)r->kernels), (unsigned long long)r->launches,
                r->launches ? r->launch_delay_sum / (double)r->launches : 0);
    streams(out, r);
    table(out, "top kernels", r->top_kernels, r->top_kernel_count, false, true);
    table(out, "top operators", r->top_ops, r->top_op_count, false, false);
    table(out, "top operators by self time", r->top_self, r->top_self_count, true, false);
    copies(out, r);
    if (r->peak_allocated == r->peak_allocated)
        fprintf(out, "\n  memory         peak allocated %.0f bytes, reserved %.0f bytes\n", r->peak_allocated,
                r->peak_reserved);
}

static void finding(FILE *out, const tw_finding *f, const style *st)
{
    const char *c = f->severity == TW_SEV_ERROR ? st->red : f->severity == TW_SEV_WARNING ? st->yellow : st->cyan;
    char label[16];
    size_t n = 0;
    for (const char *p = tw_severity_name(f->severity); *p && n + 1 < sizeof label; p++)
        label[n++] = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    label[n] = '\0';
    fprintf(out, "\n  %s%-7s%s  %s%s%s  %s[%s]%s\n", c, label, st->reset, st->bold, f->title, st->reset, st->dim,
            f->rule, st->reset);
    for (const char *p = f->evidence; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        fprintf(out, "           %.*s\n", (int)len, p);
        p += len + (nl != NULL);
    }
    for (const char *p = f->recommendation; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        fprintf(out, "           %s-> %.*s%s\n", st->green, (int)len, p, st->reset);
        p += len + (nl != NULL);
    }
}

void tw_trace_write_text(FILE *out, const tw_trace *t, bool colour)
{
    const style *st = colour ? &colours : &plain;
    int errors = 0, warnings = 0;
    for (int i = 0; i < tw_trace_rank_count(t); i++) {
        if (i)
            fputc('\n', out);
        rank(out, tw_trace_rank_at(t, i), st);
    }
    int nf = tw_trace_finding_count(t);
    if (nf)
        fprintf(out, "\n%sFindings%s\n", st->bold, st->reset);
    for (int i = 0; i < nf; i++) {
        const tw_finding *f = tw_trace_finding_at(t, i);
        errors += f->severity == TW_SEV_ERROR;
        warnings += f->severity == TW_SEV_WARNING;
        finding(out, f, st);
    }
    if (errors + warnings == 0)
        fprintf(out, "\n%sHealthy: no problems found.%s\n", st->green, st->reset);
    else
        fprintf(out, "\n%sUnhealthy: %d error%s, %d warning%s.%s\n", errors ? st->red : st->yellow, errors,
                errors == 1 ? "" : "s", warnings, warnings == 1 ? "" : "s", st->reset);
}
