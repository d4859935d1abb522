/*
 * html_run_tables.c: the tables of the run's report page (html_run.c draws
 * its charts and puts the page together): the summary, the training and
 * evaluation metrics, the launches, the inputs read, and the subtitle.
 * Each writes escaped HTML to out from the report alone.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../diagnose/diagnose.h"
#include "../supervise/cost.h"
#include "html.h"
#include "html_run.h"

/* v as the text report writes it, "unknown" for NAN. */
static const char *num(double v, int decimals, char *buf, size_t cap)
{
    return isnan(v) ? "unknown" : tw_fmt_number(v, decimals, buf, cap);
}

void tw_html_summary_table(FILE *out, const tw_report *r)
{
    const tw_summary *s = &r->summary;
    char a[64], b[64], c[64], d[64];
    fputs("<section id=\"summary\"><h2>Summary</h2>", out);
    if (r->launch_count > 1) {
        fputs("<p class=\"note\">", out);
        if (r->launch == TW_LAUNCH_ALL)
            fputs("Of every launch together.", out);
        else
            fprintf(out, "Of launch %d of %d.", r->launch, r->launch_count);
        fputs("</p>", out);
    }
    fputs("<table id=\"summary-table\">\n", out);
    tw_html_row(out, "verdict", "%s", r->healthy ? "healthy: no warning or error" : "problems found");
    tw_html_row(out, "ranks", "%d", s->ranks);
    tw_html_row(out, "step records", "%llu", (unsigned long long)s->step_records);
    tw_html_row(out, "eval records", "%llu", (unsigned long long)s->eval_records);
    if (s->first_step >= 0)
        tw_html_row(out, "steps", "%lld .. %lld", (long long)s->first_step, (long long)s->last_step);
    if (s->last_epoch >= 0)
        tw_html_row(out, "epoch", s->epoch_total > 0 ? "%lld of %lld" : "%lld", (long long)s->last_epoch,
                    (long long)s->epoch_total);
    if (!isnan(s->duration))
        tw_html_row(out, "duration", "%s (%s)", tw_fmt_duration(s->duration, a, sizeof a),
                    s->duration_from_timestamps ? "from timestamps" : "steps x median step time");
    if (!isnan(s->step_time_p50))
        tw_html_row(out, "step time p50 / p95 / p99 / max", "%s / %s / %s / %s s",
                    num(s->step_time_p50, 4, a, sizeof a), num(s->step_time_p95, 4, b, sizeof b),
                    num(s->step_time_p99, 4, c, sizeof c), num(s->step_time_max, 4, d, sizeof d));
    if (!isnan(s->data_share))
        tw_html_row(out, "data wait share", "%.1f%%", s->data_share * 100);
    if (!isnan(s->samples_per_sec))
        tw_html_row(out, "samples/s (median)", "%s", num(s->samples_per_sec, 2, a, sizeof a));
    if (!isnan(s->steps_left))
        tw_html_row(out, "remaining", "%.0f planned steps%s%s%s%s", s->steps_left, isnan(s->eta_seconds) ? "" : ", about ",
                    isnan(s->eta_seconds) ? "" : tw_fmt_duration(s->eta_seconds, a, sizeof a),
                    isnan(s->eta_end) ? "" : ", ending ", isnan(s->eta_end) ? "" : tw_fmt_time(s->eta_end, b, sizeof b));
    if (!isnan(s->first_loss))
        tw_html_row(out, "loss first / best / final", "%s / %s (step %lld) / %s", num(s->first_loss, 4, a, sizeof a),
                    num(s->best_loss, 4, b, sizeof b), (long long)s->best_loss_step,
                    s->final_loss_known ? tw_fmt_number(s->final_loss, 4, c, sizeof c) : "unknown");
    if (!isnan(s->final_lr))
        tw_html_row(out, "final learning rate", "%.6g", s->final_lr);
    if (!isnan(s->peak_mem_bytes))
        tw_html_row(out, "peak device memory", "%.2f GiB", s->peak_mem_bytes / TW_HTML_GIB);
    char gpu_time[512];
    if (*tw_gpu_cost_text(&s->gpu_cost, gpu_time, sizeof gpu_time))
        tw_html_row(out, "GPU time", "%s", gpu_time);
    char events[512] = "";
    for (int e = 1; e < TW_EV_COUNT; e++) {
        size_t len = strlen(events);
        if (s->event_counts[e])
            snprintf(events + len, sizeof events - len, "%s%s %llu", len ? ", " : "", tw_event_name((tw_event_kind)e),
                     (unsigned long long)s->event_counts[e]);
    }
    if (events[0])
        tw_html_row(out, "events", "%s", events);
    fputs("</table></section>\n", out);
}

void tw_html_metrics_table(FILE *out, const char *caption, const tw_metric_summary *m, int n)
{
    if (n == 0)
        return;
    fputs("<table class=\"metrics\"><caption>", out);
    tw_html_text(out, caption);
    fputs("</caption><thead><tr><th>metric</th><th>last</th><th>best</th><th>at step</th><th>records</th></tr>"
          "</thead>\n",
          out);
    for (int i = 0; i < n; i++) {
        fputs("<tr><td>", out);
        tw_html_text(out, m[i].name);
        fprintf(out, "</td><td>%.6g</td><td>%.6g</td><td>%lld</td><td>%llu</td></tr>\n", m[i].last, m[i].best,
                (long long)m[i].best_step, (unsigned long long)m[i].count);
    }
    fputs("</table>\n", out);
}

/* What the launch shown states of its environment and configuration
 * (framework and CUDA versions, GPUs, commit, batch size): the first value
 * of each key, as the summary's environment line, with where it was read. */

void tw_html_launches_table(FILE *out, const tw_report *r)
{
    if (r->launch_count < 2)
        return;
    char a[64], b[64];
    fputs("<section id=\"launches\"><h2>Launches</h2><table><thead><tr><th>launch</th><th>starts</th><th>steps</th>"
          "<th>ranks</th><th>from</th><th>to</th><th>outcome</th></tr></thead>\n",
          out);
    for (int i = 0; i < r->launch_count; i++) {
        const tw_launch_span *s = &r->launches[i].span;
        fprintf(out, "<tr><td>%d</td><td>", s->index);
        tw_html_text(out, s->start);
        fprintf(out, "</td><td>%lld .. %lld</td><td>%d</td><td>%s</td><td>%s</td><td>", (long long)s->first_step,
                (long long)s->last_step, s->ranks, tw_fmt_time(s->first_time, a, sizeof a),
                tw_fmt_time(s->last_time, b, sizeof b));
        tw_html_text(out, s->outcome);
        if (s->outcome_detail[0]) {
            fputs(": ", out);
            tw_html_text(out, s->outcome_detail);
        }
        fputs("</td></tr>\n", out);
    }
    fputs("</table></section>\n", out);
}

void tw_html_inputs_table(FILE *out, const tw_report *r)
{
    fputs("<section id=\"inputs\"><h2>Inputs and formats</h2><table><thead><tr><th>input</th><th>format</th>"
          "<th>lines</th><th>records</th><th>read</th></tr></thead>\n",
          out);
    for (int i = 0; i < r->input_count; i++) {
        const tw_input_summary *in = &r->inputs[i];
        fputs("<tr><td>", out);
        tw_html_text(out, in->path);
        fputs("</td><td>", out);
        tw_html_text(out, in->format ? in->format : "unknown");
        fprintf(out, "</td><td>%llu</td><td>%llu</td><td>", (unsigned long long)in->lines,
                (unsigned long long)in->records);
        tw_html_text(out, in->error ? in->error : "fully");
        fputs("</td></tr>\n", out);
    }
    fputs("</table></section>\n", out);
}

void tw_html_subtitle(const tw_report *r, char *buf, size_t cap)
{
    const tw_summary *s = &r->summary;
    char d[64];
    snprintf(buf, cap, "%s. %d rank%s, %llu step records%s%s, %d launch%s.", r->healthy ? "Healthy" : "Problems found",
             s->ranks, s->ranks == 1 ? "" : "s", (unsigned long long)s->step_records, s->duration > 0 ? ", " : "",
             s->duration > 0 ? tw_fmt_duration(s->duration, d, sizeof d) : "", r->launch_count,
             r->launch_count == 1 ? "" : "es");
}
