/*
 * html_trace.c: the HTML page of a profiler trace (trace --html).
 *
 * Per rank: the split of the whole trace, a stacked bar per step (compute,
 * memcpy/memset, communication not under compute, idle; the four sum to
 * the step's wall time), and the top kernel and operator tables. A trace
 * keeps its steps (trace.h caps them), so bars are drawn one per step up to
 * BARS_MAX and, past that, the mean of each bucket of steps (said under the
 * chart). Hover values are each bar's <title>; the table under the chart is
 * its text alternative.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chart.h"
#include "html.h"
#include "trainwatch/error.h"
#include "trainwatch/html.h"

#define BARS_MAX    300
#define RANKS_SHOWN 16 /* ranks with their own chart and tables; the split table lists all */

static const char *const parts[] = {"compute", "memcpy", "communication", "idle"};

typedef struct bar {
    int64_t first, last; /* step ids */
    double v[4];         /* ms: compute, memcpy, comm, idle */
} bar;

static double pct(double a, double b)
{
    return b > 0 ? 100 * a / b : 0;
}

static int make_bars(const tw_trace_rank *r, bar **out)
{
    int n = r->step_count <= BARS_MAX ? r->step_count : BARS_MAX;
    bar *b = calloc((size_t)(n ? n : 1), sizeof *b);
    if (!b)
        return -1;
    for (int k = 0; k < n; k++) {
        int from = (int)((long long)k * r->step_count / n), to = (int)((long long)(k + 1) * r->step_count / n);
        b[k].first = r->steps[from].id;
        b[k].last = r->steps[to - 1].id;
        for (int i = from; i < to; i++) {
            const tw_trace_split *s = &r->steps[i].split;
            b[k].v[0] += s->compute / 1000, b[k].v[1] += s->memcpy / 1000, b[k].v[2] += s->comm / 1000,
                b[k].v[3] += s->idle / 1000;
        }
        for (int j = 0; j < 4; j++)
            b[k].v[j] /= (double)(to - from);
    }
    *out = b;
    return n;
}

static double nice(double v)
{
    if (!(v > 0))
        return 1;
    double p = pow(10, floor(log10(v))), m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

static void bars_svg(FILE *out, const char *id, const bar *b, int n, int mark_finding, int64_t mark_step)
{
    double top = 0;
    for (int k = 0; k < n; k++)
        top = fmax(top, b[k].v[0] + b[k].v[1] + b[k].v[2] + b[k].v[3]);
    top = nice(top);
    double bw = (TW_CHART_W - TW_CHART_LEFT - TW_CHART_RIGHT) / (n ? n : 1),
           ph = TW_CHART_H - TW_CHART_TOP - TW_CHART_BOTTOM;
    fprintf(out, "<svg class=\"plot bars\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-labelledby=\"%s-title\">",
            TW_CHART_W, TW_CHART_H, id);
    for (int t = 0; t <= 5; t++) {
        double y = TW_CHART_H - TW_CHART_BOTTOM - ph * t / 5;
        fprintf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", TW_CHART_LEFT, y,
                TW_CHART_W - TW_CHART_RIGHT, y);
        fprintf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>", TW_CHART_LEFT - 4,
                y + 4, top * t / 5);
    }
    for (int k = 0; k < n; k++) {
        double x = TW_CHART_LEFT + bw * k, y = TW_CHART_H - TW_CHART_BOTTOM;
        fprintf(out, "<g class=\"bar\"><title>step %lld", (long long)b[k].first);
        if (b[k].last != b[k].first)
            fprintf(out, "..%lld (mean)", (long long)b[k].last);
        for (int j = 0; j < 4; j++)
            fprintf(out, "\n%s %.3f ms", parts[j], b[k].v[j]);
        fputs("</title>", out);
        for (int j = 0; j < 4; j++) {
            double h = b[k].v[j] / top * ph;
            y -= h;
            if (h > 0)
                fprintf(out, "<rect class=\"f%d\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/>", j, x, y,
                        bw > 2 ? bw - 1 : bw, h);
        }
        fputs("</g>", out);
        if (mark_finding > 0 && mark_step >= b[k].first && mark_step <= b[k].last)
            fprintf(out,
                    "<g class=\"hl\" id=\"f-%d\" data-f=\"%d\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                    "height=\"%.1f\"/></g>",
                    mark_finding, mark_finding, x - 2, TW_CHART_TOP, bw + 4, ph);
        if (n <= 40 || k % (n / 20 + 1) == 0)
            fprintf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%lld</text>", x + bw / 2,
                    TW_CHART_H - TW_CHART_BOTTOM + 14, (long long)b[k].first);
    }
    fprintf(out, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", TW_CHART_LEFT,
            TW_CHART_H - TW_CHART_BOTTOM, TW_CHART_W - TW_CHART_RIGHT, TW_CHART_H - TW_CHART_BOTTOM);
    fprintf(out, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">step (ProfilerStep#)</text>",
            (TW_CHART_LEFT + TW_CHART_W - TW_CHART_RIGHT) / 2, TW_CHART_H - 4);
    fprintf(out, "<text class=\"label\" transform=\"translate(14 %.1f) rotate(-90)\" text-anchor=\"middle\">ms</text>",
            (TW_CHART_TOP + TW_CHART_H - TW_CHART_BOTTOM) / 2);
    fputs("</svg>\n", out);
}

static void bars_table(FILE *out, const char *id, const bar *b, int n)
{
    fprintf(out,
            "<details class=\"tableview\"><summary>Table of the bars</summary><table class=\"points\" "
            "data-chart=\"%s\"><thead><tr><th>step</th><th>compute ms</th><th>memcpy ms</th>"
            "<th>communication ms</th><th>idle ms</th></tr></thead><tbody>\n",
            id);
    for (int k = 0; k < n; k++) {
        fprintf(out, "<tr><td>%lld", (long long)b[k].first);
        if (b[k].last != b[k].first)
            fprintf(out, "..%lld", (long long)b[k].last);
        for (int j = 0; j < 4; j++)
            fprintf(out, "<td>%.6g", b[k].v[j]);
        fputs("</tr>\n", out);
    }
    fputs("</tbody></table></details>\n", out);
}

/* The finding of rank r with a step among its steps, for the highlight. */
static int finding_on(const tw_trace *t, int rank, int64_t *step)
{
    for (int i = 0; i < tw_trace_finding_count(t); i++) {
        const tw_finding *f = tw_trace_finding_at(t, i);
        if (f->rank == rank && f->step >= 0) {
            *step = f->step;
            return i + 1;
        }
    }
    return 0;
}

static int step_chart(FILE *out, const tw_trace *t, const tw_trace_rank *r, int index)
{
    if (r->step_count == 0)
        return TW_OK;
    bar *b;
    int n = make_bars(r, &b);
    if (n < 0)
        return TW_ENOMEM;
    char id[32];
    snprintf(id, sizeof id, "trace-rank-%d", index);
    fprintf(out, "<figure class=\"chart\" id=\"%s\"><figcaption id=\"%s-title\">Where each step's time went, rank %d",
            id, id, r->rank);
    fputs("</figcaption>\n", out);
    if (n < r->step_count)
        fprintf(out, "<p class=\"note\">%d steps, drawn as %d bars of the mean of consecutive steps.</p>",
                r->step_count, n);
    fputs("<ul class=\"legend\">", out);
    for (int j = 0; j < 4; j++)
        fprintf(out, "<li><span class=\"key f%d\"></span>%s</li>", j, parts[j]);
    fputs("</ul>\n", out);
    int64_t step = -1;
    int f = finding_on(t, r->rank, &step);
    bars_svg(out, id, b, n, f, step);
    bars_table(out, id, b, n);
    fprintf(out,
            "<script type=\"application/json\" class=\"chart-data\">{\"id\":\"%s\",\"steps\":%d,\"bars\":%d}"
            "</script>\n</figure>\n",
            id, r->step_count, n);
    free(b);
    return TW_OK;
}

static void stat_table(FILE *out, const char *caption, const char *cls, const tw_trace_stat *v, int n, bool self)
{
    if (n == 0)
        return;
    fprintf(out, "<table class=\"%s\"><caption>", cls);
    tw_html_text(out, caption);
    fprintf(out,
            "</caption><thead><tr><th>name</th><th>count</th><th>%s ms</th><th>mean us</th><th>max us</th>"
            "</tr></thead>\n",
            self ? "self" : "total");
    for (int i = 0; i < n; i++) {
        fputs("<tr><td>", out);
        tw_html_text(out, v[i].name);
        fprintf(out, "</td><td>%llu</td><td>%.3f</td><td>%.1f</td><td>%.1f</td></tr>\n", (unsigned long long)v[i].count,
                (self ? v[i].self : v[i].total) / 1000, v[i].count ? v[i].total / (double)v[i].count : 0, v[i].max);
    }
    fputs("</table>\n", out);
}

static void split_table(FILE *out, const tw_trace *t)
{
    fputs("<section id=\"split\"><h2>Where the time went</h2><table id=\"split-table\"><thead><tr><th>rank</th>"
          "<th>input</th><th>format</th><th>steps</th><th>wall ms</th><th>compute</th><th>memcpy</th>"
          "<th>communication</th><th>idle</th><th>read</th></tr></thead>\n",
          out);
    for (int i = 0; i < tw_trace_rank_count(t); i++) {
        const tw_trace_rank *r = tw_trace_rank_at(t, i);
        const tw_trace_split *s = &r->total;
        fprintf(out, "<tr><td>%d</td><td>", r->rank);
        tw_html_text(out, r->path);
        fputs("</td><td>", out);
        tw_html_text(out, r->source ? r->source : "unknown");
        fprintf(out, "</td><td>%d</td><td>%.3f</td><td>%.1f%%</td><td>%.1f%%</td><td>%.1f%%</td><td>%.1f%%</td><td>",
                r->step_count, s->wall / 1000, pct(s->compute, s->wall), pct(s->memcpy, s->wall), pct(s->comm, s->wall),
                pct(s->idle, s->wall));
        tw_html_text(out, r->error[0] ? r->error : "fully");
        fputs("</td></tr>\n", out);
    }
    fputs("</table></section>\n", out);
}

static void link_targets(const tw_trace *t, char (*targets)[32])
{
    for (int i = 0; i < tw_trace_finding_count(t); i++) {
        const tw_finding *f = tw_trace_finding_at(t, i);
        targets[i][0] = '\0';
        for (int k = 0; k < tw_trace_rank_count(t) && k < RANKS_SHOWN; k++) {
            const tw_trace_rank *r = tw_trace_rank_at(t, k);
            if (r->rank != f->rank || r->step_count == 0)
                continue;
            int64_t step;
            if (f->step >= 0 && finding_on(t, r->rank, &step) == i + 1)
                snprintf(targets[i], sizeof targets[i], "f-%d", i + 1);
            else
                snprintf(targets[i], sizeof targets[i], "trace-rank-%d", k);
            break;
        }
    }
}

int tw_trace_write_html(FILE *out, const tw_trace *t, const char *title)
{
    int n = tw_trace_finding_count(t), ranks = tw_trace_rank_count(t);
    char(*targets)[32] = calloc((size_t)(n ? n : 1), sizeof *targets);
    tw_finding *f = calloc((size_t)(n ? n : 1), sizeof *f);
    if (!targets || !f) {
        free(targets);
        free(f);
        return TW_ENOMEM;
    }
    for (int i = 0; i < n; i++)
        f[i] = *tw_trace_finding_at(t, i);
    link_targets(t, targets);
    char sub[160];
    snprintf(sub, sizeof sub, "Profiler trace. %s. %d input%s.", tw_trace_healthy(t) ? "Healthy" : "Problems found",
             ranks, ranks == 1 ? "" : "s");
    tw_html_begin(out, title ? title : "trainwatch trace report", sub, false);
    tw_html_findings(out, f, n, targets, NULL);
    split_table(out, t);
    int rc = TW_OK;
    for (int i = 0; i < ranks && i < RANKS_SHOWN && rc == TW_OK; i++) {
        const tw_trace_rank *r = tw_trace_rank_at(t, i);
        fprintf(out, "<section class=\"rank\" id=\"rank-%d\"><h2>Rank %d: ", i, r->rank);
        tw_html_text(out, r->path);
        fputs("</h2>\n", out);
        rc = step_chart(out, t, r, i);
        stat_table(out, "top kernels by total time", "top-kernels", r->top_kernels, r->top_kernel_count, false);
        stat_table(out, "top operators by total time", "top-ops", r->top_ops, r->top_op_count, false);
        stat_table(out, "top operators by self time", "top-self", r->top_self, r->top_self_count, true);
        fputs("</section>\n", out);
    }
    if (ranks > RANKS_SHOWN)
        fprintf(out, "<p class=\"note\">%d more ranks: their split is in the table above.</p>\n", ranks - RANKS_SHOWN);
    tw_html_end(out);
    free(targets);
    free(f);
    return rc;
}
