/*
 * report_text.c: the human report: inputs, the launches of the log (when
 * there are several, the last first), a summary table of the launch shown,
 * then findings worst first, each with its evidence and what to do. Colour only when the
 * caller says the output is a terminal.
 */
#include <math.h>
#include <string.h>

#include "diagnose.h"
#include "gpu.h"
#include "templates.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

typedef struct style {
    const char *bold, *red, *yellow, *cyan, *green, *dim, *reset;
} style;

static const style colours = {"\x1b[1m", "\x1b[31m", "\x1b[33m", "\x1b[36m", "\x1b[32m", "\x1b[2m", "\x1b[0m"};
static const style plain = {"", "", "", "", "", "", ""};

static void row(FILE *out, const style *st, const char *label)
{
    fprintf(out, "  %s%-15s%s", st->dim, label, st->reset);
}

static void write_inputs(FILE *out, const tw_report *r, const style *st)
{
    for (int i = 0; i < r->input_count; i++) {
        const tw_input_summary *in = &r->inputs[i];
        fprintf(out, "%s%s%s  format %s, %llu lines, %llu records%s%s\n", st->bold, in->path, st->reset,
                in->format ? in->format : "none detected", (unsigned long long)in->lines,
                (unsigned long long)in->records, in->error ? "  -- " : "", in->error ? in->error : "");
    }
}

#define TEXT_METRICS_SHOWN 9

/* v in %.4g, with the words tw_fmt_number gives the values that are not finite. */
static const char *g4(double v, char *buf, size_t cap)
{
    if (isfinite(v))
        snprintf(buf, cap, "%.4g", v);
    else
        tw_fmt_number(v, 0, buf, cap);
    return buf;
}

static void write_metric_list(FILE *out, const tw_metric_summary *m, int n, bool eval)
{
    int shown = n < TEXT_METRICS_SHOWN ? n : TEXT_METRICS_SHOWN;
    for (int i = 0; i < shown; i++) {
        if (i > 0)
            fputs(i % 3 == 0 ? "\n                 " : "   ", out);
        char last[32];
        fprintf(out, "%s %s", m[i].name, g4(m[i].last, last, sizeof last));
        if (eval && m[i].count > 1 && m[i].best != m[i].last)
            fprintf(out, " (best %.4g)", m[i].best);
    }
    if (n > shown)
        fprintf(out, "   (+%d more in --json)", n - shown);
    fputc('\n', out);
}

/* One row per launch, the last first: where it starts, its time and
 * steps, how it ended. */
static void write_launches(FILE *out, const tw_report *r, const style *st)
{
    fprintf(out, "\n%sLaunches%s  %d in %s, the last first\n", st->bold, st->reset, r->launch_count,
            r->input_count > 1 ? "these logs" : "this log");
    for (int i = r->launch_count - 1; i >= 0; i--) {
        const tw_launch_span *s = &r->launches[i].span;
        char t1[32], t2[32], steps[64] = "no training step";
        if (s->step_records > 0)
            snprintf(steps, sizeof steps, "step %lld -> %lld", (long long)s->first_step, (long long)s->last_step);
        fprintf(out, "  %s#%-3d%s %-19s -> %-19s  %-24s  %s%s%s", st->bold, s->index, st->reset,
                tw_fmt_time(s->first_time, t1, sizeof t1), tw_fmt_time(s->last_time, t2, sizeof t2), steps, s->outcome,
                s->outcome_detail[0] ? ": " : "", s->outcome_detail);
        if (s->where.file && r->input_count == 1)
            fprintf(out, "  %s(from line %llu)%s", st->dim, (unsigned long long)s->where.line, st->reset);
        else if (s->where.file)
            fprintf(out, "  %s(from %s:%llu)%s", st->dim, s->where.file, (unsigned long long)s->where.line, st->reset);
        fputc('\n', out);
    }
}

static void write_summary(FILE *out, const tw_report *r, const style *st)
{
    const tw_summary *s = &r->summary;
    char a[32], b[32], c[32], d[32];
    if (r->launch_count > 1)
        fprintf(out, "\n%sSummary%s of launch %d of %d\n", st->bold, st->reset,
                r->launch == TW_LAUNCH_ALL ? r->launch_count : r->launch, r->launch_count);
    else
        fprintf(out, "\n%sSummary%s\n", st->bold, st->reset);
    row(out, st, "ranks");
    fprintf(out, "%d with training steps\n", s->ranks);
    row(out, st, "steps");
    if (s->step_records == 0) {
        fprintf(out, "no training step records\n");
    } else {
        fprintf(out, "%llu records, step %lld -> %lld", (unsigned long long)s->step_records, (long long)s->first_step,
                (long long)s->last_step);
        if (s->last_epoch >= 0 && s->epoch_total > 0)
            fprintf(out, ", epoch %lld/%lld", (long long)s->last_epoch, (long long)s->epoch_total);
        else if (s->last_epoch >= 0)
            fprintf(out, ", epoch %lld", (long long)s->last_epoch);
        fputc('\n', out);
    }
    if (s->duration > 0) {
        row(out, st, "duration");
        fprintf(out, "%s%s\n", tw_fmt_duration(s->duration, a, sizeof a),
                s->duration_from_timestamps ? " (log timestamps)" : " (estimated from steps x step time)");
    }
    if (!isnan(s->step_time_p50)) {
        row(out, st, "step time");
        fprintf(out, "p50 %s  p95 %s  p99 %s  max %s\n", tw_fmt_duration(s->step_time_p50, a, sizeof a),
                tw_fmt_duration(s->step_time_p95, b, sizeof b), tw_fmt_duration(s->step_time_p99, c, sizeof c),
                tw_fmt_duration(s->step_time_max, d, sizeof d));
    }
    if (!isnan(s->data_share)) {
        row(out, st, "data / compute");
        fprintf(out, "%.0f%% waiting for data, %.0f%% compute\n", s->data_share * 100, (1 - s->data_share) * 100);
    }
    if (!isnan(s->steps_left)) {
        row(out, st, "remaining");
        fprintf(out, "%.0f planned steps after the last", s->steps_left);
        if (!isnan(s->eta_seconds))
            fprintf(out, ": about %s more", tw_fmt_duration(s->eta_seconds, a, sizeof a));
        if (!isnan(s->eta_end))
            fprintf(out, ", ending %s by the log's clock", tw_fmt_time(s->eta_end, b, sizeof b));
        fputc('\n', out);
    }
    if (!isnan(s->samples_per_sec)) {
        row(out, st, "throughput");
        fprintf(out, s->samples_per_sec >= 1000 ? "%.0f samples/s (median)\n" : "%.4g samples/s (median)\n",
                s->samples_per_sec);
    }
    if (s->final_loss_known || !isnan(s->best_loss)) {
        row(out, st, "loss");
        if (!isnan(s->first_loss))
            fprintf(out, "first %.4g, ", s->first_loss);
        char final[32];
        if (s->final_loss_known)
            fprintf(out, "final %s%s", g4(s->final_loss, final, sizeof final), isnan(s->best_loss) ? "" : ", ");
        if (!isnan(s->best_loss))
            fprintf(out, "best %.4g at step %lld", s->best_loss, (long long)s->best_loss_step);
        fputc('\n', out);
    }
    if (!isnan(s->final_lr)) {
        row(out, st, "learning rate");
        fprintf(out, "%.4g (final)\n", s->final_lr);
    }
    if (!isnan(s->peak_mem_bytes)) {
        row(out, st, "device memory");
        if (s->peak_mem_bytes >= GIB)
            fprintf(out, "peak %s GiB reported\n", tw_fmt_number(s->peak_mem_bytes / GIB, 2, a, sizeof a));
        else
            fprintf(out, "peak %.0f MiB reported\n", s->peak_mem_bytes / (1024 * 1024));
    }
    if (s->gpu.samples > 0) {
        char gpu[600];
        tw_gpu_summary_text(&s->gpu, gpu, sizeof gpu);
        row(out, st, "GPU log");
        fprintf(out, "%s\n", gpu);
        for (int i = 0; i < tw_gpu_rank_lines(&s->gpu); i++) { /* which GPU each rank used */
            tw_gpu_rank_line(&s->gpu, i, gpu, sizeof gpu);
            row(out, st, i ? "" : "GPU by rank");
            fprintf(out, "%s\n", gpu);
        }
    }
    if (s->train_metric_count > 0) {
        row(out, st, "train metrics");
        write_metric_list(out, s->train_metrics, s->train_metric_count, false);
    }
    if (s->eval_metric_count > 0) {
        row(out, st, "eval");
        fprintf(out, "%llu results: ", (unsigned long long)s->eval_records);
        write_metric_list(out, s->eval_metrics, s->eval_metric_count, true);
    }
    if (s->environment[0]) {
        row(out, st, "environment");
        fprintf(out, "%s\n", s->environment);
    }
    bool any = false;
    for (int k = 1; k < TW_EV_COUNT; k++) {
        if (s->event_counts[k] == 0 || k == TW_EV_ENVIRONMENT) /* shown as the environment row */
            continue;
        if (!any)
            row(out, st, "events");
        /* "1 exit", never "exit 1": a count must not read as an exit status */
        const char *name = tw_event_name((tw_event_kind)k);
        size_t len = strlen(name);
        bool plural = s->event_counts[k] != 1 && !(len > 2 && strcmp(name + len - 2, "ed") == 0);
        const char *suffix = !plural ? "" : name[len - 1] == 'h' ? "es" : "s"; /* launches */
        fprintf(out, "%s%llu %s%s", any ? ", " : "", (unsigned long long)s->event_counts[k], name, suffix);
        any = true;
    }
    if (any)
        fputc('\n', out);
    if (s->step_records > 0 || s->eval_records > 0) {
        char health[256];
        tw_health_text(&r->health, health, sizeof health);
        row(out, st, "health");
        fprintf(out, "%s\n", health);
        if (r->rank_health_count > 1) {
            row(out, st, "health by rank");
            for (int i = 0; i < r->rank_health_count && i < 16; i++)
                fprintf(out, "%s%d: %.0f", i ? "   " : "", r->rank_health[i].rank, r->rank_health[i].health.score);
            fputs(r->rank_health_count > 16 ? "   (all in --json)\n" : "\n", out);
        }
    }
}

static void write_indented(FILE *out, const char *text, const char *prefix, const char *colour, const char *reset)
{
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        fprintf(out, "           %s%s%.*s%s\n", colour, prefix, (int)n, p, reset);
        p += n + (nl ? 1 : 0);
    }
}

static void write_finding(FILE *out, const tw_finding *f, int launches, const style *st)
{
    const char *colour = f->severity == TW_SEV_ERROR ? st->red : f->severity == TW_SEV_WARNING ? st->yellow : st->cyan;
    /* the severity's one name (tw_severity_name), in capitals */
    char label[16];
    size_t n = 0;
    for (const char *c = tw_severity_name(f->severity); *c && n + 1 < sizeof label; c++)
        label[n++] = (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
    label[n] = '\0';
    char launch[32] = "";
    if (launches > 1 && f->launch > 0)
        snprintf(launch, sizeof launch, ", launch %d", f->launch);
    fprintf(out, "\n  %s%-7s%s  %s%s%s  %s[%s%s]%s\n", colour, label, st->reset, st->bold, f->title, st->reset, st->dim,
            f->rule, launch, st->reset);
    write_indented(out, f->evidence, "", "", "");
    if (f->recommendation[0])
        write_indented(out, f->recommendation, "-> ", st->green, st->reset);
}

void tw_report_write_text(FILE *out, const tw_report *r, bool colour)
{
    const style *st = colour ? &colours : &plain;
    write_inputs(out, r, st);
    if (r->launch_count > 1)
        write_launches(out, r, st);
    write_summary(out, r, st);
    int errors = 0, warnings = 0, infos = 0;
    for (int i = 0; i < r->finding_count; i++) {
        errors += r->findings[i].severity == TW_SEV_ERROR;
        warnings += r->findings[i].severity == TW_SEV_WARNING;
        infos += r->findings[i].severity == TW_SEV_INFO;
    }
    if (r->finding_count > 0) {
        fprintf(out, "\n%sFindings%s\n", st->bold, st->reset);
        for (int i = 0; i < r->finding_count; i++)
            write_finding(out, &r->findings[i], r->launch_count, st);
    }
    if (r->unusual_count > 0) {
        fprintf(out, "\n%sUnusual lines%s  rare lines no format read that look like trouble\n", st->bold, st->reset);
        for (int i = 0; i < r->unusual_count; i++) {
            const tw_unusual_line *u = &r->unusual[i];
            char why[96];
            char launch[32] = "";
            if (r->launch_count > 1)
                snprintf(launch, sizeof launch, ", launch %d", u->launch);
            fprintf(out, "  %s:%llu  rank %d%s, %llu line%s (%s)\n      %s\n", u->where.file,
                    (unsigned long long)u->where.line, u->rank, launch, (unsigned long long)u->count,
                    u->count == 1 ? "" : "s", tw_unusual_why(u->why, why, sizeof why), u->example);
        }
    }
    fputc('\n', out);
    if (r->summary.step_records == 0 && r->summary.eval_records == 0 && errors == 0)
        fprintf(out, "%sNo training records found%s: nothing to judge the run by.\n", st->yellow, st->reset);
    else if (r->healthy)
        fprintf(out, "%sHealthy%s: no problems found%s.\n", st->green, st->reset,
                infos ? " (see the info findings above)" : "");
    else
        fprintf(out, "%sUnhealthy%s: %d error%s, %d warning%s.\n", errors ? st->red : st->yellow, st->reset, errors,
                errors == 1 ? "" : "s", warnings, warnings == 1 ? "" : "s");
}
