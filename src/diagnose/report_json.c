/*
 * report_json.c: the report as one JSON document, schema
 * "trainwatch.analysis/2" (docs/analysis-json.md). Keys are stable; new keys
 * may be added within a version, none removed or renamed. Version 2 keeps
 * every key of version 1 and adds the launches.
 */
#include <math.h>

#include "../core/json.h"
#include "diagnose.h"
#include "gpu.h"
#include "templates.h"

static void num_or_null(FILE *out, double v, bool valid)
{
    if (!valid)
        fputs("null", out);
    else
        tw_json_number(out, v);
}

/* The run's GPU time and money (run: NVML; analyze: GPU logs); null when
 * none was counted. */
static void gpu_cost_json(FILE *out, const tw_gpu_cost *g)
{
    if (!(g->gpu_seconds > 0)) {
        fputs("null", out);
        return;
    }
    const struct {
        const char *name;
        double v;
        bool known;
    } members[] = {
        {"gpu_seconds", g->gpu_seconds, true}, {"idle_seconds", g->idle_seconds, true},
        {"idle_below", g->idle_below, true},   {"cost", g->cost, g->priced},
        {"idle_cost", g->idle_cost, g->priced}, {"budget", g->budget, g->budget > 0},
        {"projected_cost", g->projected_cost, g->priced && g->projected_cost > 0},
    };
    fprintf(out, "{\"gpus\":%d", g->gpus);
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++) {
        fprintf(out, ",\"%s\":", members[i].name);
        num_or_null(out, members[i].v, members[i].known);
    }
    fprintf(out, ",\"unpriced_left_out\":%s,\"price_source\":", g->unpriced_left_out ? "true" : "false");
    if (g->price_source[0])
        tw_json_cstring(out, g->price_source);
    else
        fputs("null", out);
    fputc('}', out);
}

/* A count or position that is -1 (or below) when unknown. */
static void int_or_null(FILE *out, int64_t v)
{
    if (v < 0)
        fputs("null", out);
    else
        fprintf(out, "%lld", (long long)v);
}

static void metrics(FILE *out, const tw_metric_summary *m, int n)
{
    fputc('[', out);
    for (int i = 0; i < n; i++) {
        fprintf(out, "%s{\"name\":", i ? "," : "");
        tw_json_cstring(out, m[i].name);
        fputs(",\"last\":", out);
        tw_json_number(out, m[i].last);
        fputs(",\"best\":", out); /* the best finite value: none is null */
        num_or_null(out, m[i].best, !isnan(m[i].best));
        fputs(",\"best_step\":", out);
        int_or_null(out, isnan(m[i].best) ? -1 : m[i].best_step);
        fprintf(out, ",\"count\":%llu}", (unsigned long long)m[i].count);
    }
    fputc(']', out);
}

static void summary(FILE *out, const tw_summary *s)
{
    fprintf(out, "{\"ranks\":%d,\"step_records\":%llu,\"eval_records\":%llu,\"events\":%llu", s->ranks,
            (unsigned long long)s->step_records, (unsigned long long)s->eval_records, (unsigned long long)s->events);
    const struct {
        const char *name;
        int64_t v;
    } counters[] = {
        {"first_step", s->first_step},   {"last_step", s->last_step},           {"last_epoch", s->last_epoch},
        {"epoch_total", s->epoch_total}, {"best_loss_step", s->best_loss_step},
    };
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        fprintf(out, ",\"%s\":", counters[i].name);
        int_or_null(out, counters[i].v);
    }
    fputs(",\"duration_seconds\":", out);
    num_or_null(out, s->duration, !isnan(s->duration));
    fprintf(out,
            ",\"duration_from_timestamps\":%s,\"duration_source\":", s->duration_from_timestamps ? "true" : "false");
    fputs(isnan(s->duration) ? "null" : s->duration_from_timestamps ? "\"timestamps\"" : "\"estimated\"", out);
    const struct {
        const char *name;
        double v;
    } fields[] = {
        {"samples_per_second", s->samples_per_sec},
        {"step_time_p50", s->step_time_p50},
        {"step_time_p95", s->step_time_p95},
        {"step_time_p99", s->step_time_p99},
        {"step_time_max", s->step_time_max},
        {"data_share", s->data_share},
        {"first_loss", s->first_loss},
        {"best_loss", s->best_loss},
        {"final_lr", s->final_lr},
        {"peak_memory_bytes", s->peak_mem_bytes},
        {"steps_left", s->steps_left},
        {"eta_seconds", s->eta_seconds},
        {"eta_end", s->eta_end},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        fprintf(out, ",\"%s\":", fields[i].name);
        num_or_null(out, fields[i].v, !isnan(fields[i].v));
    }
    fputs(",\"final_loss\":", out); /* the log's last loss, NaN included */
    num_or_null(out, s->final_loss, s->final_loss_known);
    fputs(",\"train_metrics\":", out);
    metrics(out, s->train_metrics, s->train_metric_count);
    fputs(",\"eval_metrics\":", out);
    metrics(out, s->eval_metrics, s->eval_metric_count);
    fputs(",\"environment\":", out);
    if (s->environment[0])
        tw_json_cstring(out, s->environment);
    else
        fputs("null", out);
    fputs(",\"event_counts\":{", out);
    for (int k = 1; k < TW_EV_COUNT; k++)
        fprintf(out, "%s\"%s\":%llu", k > 1 ? "," : "", tw_event_name((tw_event_kind)k),
                (unsigned long long)s->event_counts[k]);
    fputs("},\"gpu\":", out);
    tw_gpu_summary_json(out, &s->gpu);
    fputs(",\"gpu_time\":", out);
    gpu_cost_json(out, &s->gpu_cost);
    fputc('}', out);
}

void tw_finding_write_json(FILE *out, const tw_finding *f)
{
    fputs("{\"rule\":", out);
    tw_json_cstring(out, f->rule);
    fprintf(out, ",\"severity\":\"%s\",\"title\":", tw_severity_name(f->severity));
    tw_json_cstring(out, f->title);
    fputs(",\"evidence\":", out);
    tw_json_cstring(out, f->evidence);
    fputs(",\"recommendation\":", out);
    tw_json_cstring(out, f->recommendation);
    fputs(",\"file\":", out);
    if (f->where.file)
        tw_json_cstring(out, f->where.file);
    else
        fputs("null", out);
    fputs(",\"line\":", out);
    int_or_null(out, f->where.file && f->where.line > 0 ? (int64_t)f->where.line : -1);
    fputs(",\"launch\":", out);
    int_or_null(out, f->launch > 0 ? f->launch : -1);
    fputs(",\"rank\":", out);
    int_or_null(out, f->rank);
    fputs(",\"step\":", out);
    int_or_null(out, f->step);
    fputs(",\"value\":", out);
    num_or_null(out, f->value, !isnan(f->value));
    fputc('}', out);
}

static void findings(FILE *out, const tw_finding *items, int n)
{
    fputc('[', out);
    for (int i = 0; i < n; i++) {
        if (i)
            fputc(',', out);
        tw_finding_write_json(out, &items[i]);
    }
    fputc(']', out);
}

static void launch(FILE *out, const tw_launch_report *l)
{
    const tw_launch_span *s = &l->span;
    fprintf(out, "{\"index\":%d,\"start\":", s->index);
    tw_json_cstring(out, s->start);
    fputs(",\"start_file\":", out);
    if (s->where.file)
        tw_json_cstring(out, s->where.file);
    else
        fputs("null", out);
    fputs(",\"start_line\":", out);
    int_or_null(out, s->where.file ? (int64_t)s->where.line : -1);
    fputs(",\"first_time\":", out);
    num_or_null(out, s->first_time, !isnan(s->first_time));
    fputs(",\"last_time\":", out);
    num_or_null(out, s->last_time, !isnan(s->last_time));
    fputs(",\"first_step\":", out);
    int_or_null(out, s->first_step);
    fputs(",\"last_step\":", out);
    int_or_null(out, s->last_step);
    fprintf(out, ",\"step_records\":%llu,\"ranks\":%d,\"outcome\":", (unsigned long long)s->step_records, s->ranks);
    tw_json_cstring(out, s->outcome);
    fputs(",\"outcome_detail\":", out);
    if (s->outcome_detail[0])
        tw_json_cstring(out, s->outcome_detail);
    else
        fputs("null", out);
    fprintf(out, ",\"errors\":%d,\"warnings\":%d,\"healthy\":%s,\"summary\":", s->errors, s->warnings,
            l->healthy ? "true" : "false");
    summary(out, &l->summary);
    fputs(",\"findings\":", out);
    findings(out, l->findings, l->finding_count);
    fputs(",\"health\":", out);
    tw_health_write_json(out, &l->health);
    fputc('}', out);
}

void tw_report_write_json(FILE *out, const tw_report *r)
{
    fputs("{\"schema\":\"" TW_ANALYSIS_SCHEMA "\",\"healthy\":", out);
    fputs(r->healthy ? "true" : "false", out);
    fputs(",\"inputs\":[", out);
    for (int i = 0; i < r->input_count; i++) {
        const tw_input_summary *in = &r->inputs[i];
        fprintf(out, "%s{\"path\":", i ? "," : "");
        tw_json_cstring(out, in->path ? in->path : "");
        fputs(",\"format\":", out);
        if (in->format)
            tw_json_cstring(out, in->format);
        else
            fputs("null", out);
        fprintf(out, ",\"lines\":%llu,\"records\":%llu,\"error\":", (unsigned long long)in->lines,
                (unsigned long long)in->records);
        if (in->error)
            tw_json_cstring(out, in->error);
        else
            fputs("null", out);
        fputc('}', out);
    }
    fputs("],\"summary\":", out);
    summary(out, &r->summary);
    fputs(",\"findings\":", out);
    findings(out, r->findings, r->finding_count);
    fputs(",\"health\":", out);
    tw_health_write_json(out, &r->health);
    fputs(",\"rank_health\":[", out);
    for (int i = 0; i < r->rank_health_count; i++) {
        fprintf(out, "%s{\"rank\":%d,\"health\":", i ? "," : "", r->rank_health[i].rank);
        tw_health_write_json(out, &r->rank_health[i].health);
        fputc('}', out);
    }
    fputs("],\"unusual_lines\":[", out);
    for (int i = 0; i < r->unusual_count; i++) {
        const tw_unusual_line *u = &r->unusual[i];
        char why[96];
        fputs(i ? ",{\"template\":" : "{\"template\":", out);
        tw_json_cstring(out, u->template_text);
        fputs(",\"example\":", out);
        tw_json_cstring(out, u->example);
        fputs(",\"why\":", out);
        tw_json_cstring(out, tw_unusual_why(u->why, why, sizeof why));
        fprintf(out, ",\"count\":%llu,\"rank\":%d,\"file\":", (unsigned long long)u->count, u->rank);
        tw_json_cstring(out, u->where.file ? u->where.file : "");
        fprintf(out, ",\"line\":%llu,\"ranks\":%d,\"launch\":%d,\"launches\":[", (unsigned long long)u->where.line,
                u->ranks, u->launch);
        for (int l = 0, n = 0; l < u->launch_count; l++) {
            if (u->launch_lines[l])
                fprintf(out, "%s{\"launch\":%d,\"count\":%llu}", n++ ? "," : "", l + 1,
                        (unsigned long long)u->launch_lines[l]);
        }
        fputs("]}", out);
    }
    fputc(']', out);
    if (r->launch == TW_LAUNCH_ALL)
        fputs(",\"launch\":\"all\"", out);
    else
        fprintf(out, ",\"launch\":%d", r->launch);
    fprintf(out, ",\"launch_count\":%d,\"launches\":[", r->launch_count);
    for (int i = 0; i < r->launch_count; i++) {
        if (i)
            fputc(',', out);
        launch(out, &r->launches[i]);
    }
    fputs("]}\n", out);
}
