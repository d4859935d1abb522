/*
 * html_compare.c: `trainwatch compare --html`: the runs side by side as
 * one self-contained page in the run report's style (html.h, chart.h).
 *
 * The page says what the text says, from the same functions
 * (trainwatch/history.h): the runs, the table of their figures, the
 * environment and configuration that differ, and the verdict; and draws
 * the series the history keeps (loss, step time, throughput, GPU
 * utilisation) overlaid,
 * one chart per series and one line per run in the run's colour. Where
 * the loss curves part the loss chart carries a band from that step to
 * the end of the steps the two runs share. The trade-off: the series are
 * the history's downsampled ones (TW_HISTORY_SERIES_POINTS a run), not the
 * logs' every step, so a log read on the fly is drawn as a recorded run is.
 */
#include <math.h>
#include <stdio.h>

#include "chart.h"
#include "html.h"
#include "trainwatch/error.h"

static const char letters[] = "ABCDEFGH";

/* The series drawn, in the order of the page. */
static const struct {
    const char *metric, *id, *title, *unit;
} drawn[] = {
    {"loss", "chart-loss", "Loss", ""},
    {"step_time", "chart-step-time", "Step time", "s"},
    {"throughput", "chart-throughput", "Throughput", "/s"},
    {"gpu_util", "chart-gpu-util", "GPU utilisation", "%"},
};

static void runs_list(FILE *out, const tw_history_view *runs, size_t n)
{
    fputs("<section id=\"runs\"><h2>Runs</h2><table id=\"runs-table\"><tbody>\n", out);
    for (size_t r = 0; r < n; r++) {
        const tw_history_entry *e = &runs[r].entry;
        char when[32];
        fprintf(out, "<tr><th><span class=\"key c%zu\"></span>%c</th><td>", r % TW_CHART_PALETTE, letters[r]);
        if (e->id > 0) {
            fprintf(out, "run %lld: ", (long long)e->id);
            tw_html_text(out, e->name);
            fputs(" (job ", out);
            tw_html_text(out, e->job);
            fputs("), ", out);
            tw_html_text(out, e->source);
            fputs(" on ", out);
            tw_html_text(out, e->host);
            fputs(", ", out);
            tw_html_text(out, tw_history_time_text(e->recorded, when, sizeof when));
        } else {
            tw_html_text(out, e->name);
            fputs(": ", out);
            tw_html_text(out, e->inputs);
            fputs(" (read now, not recorded)", out);
        }
        fputs("</td></tr>\n", out);
    }
    fputs("</tbody></table></section>\n", out);
}

static void table_head(FILE *out, const char *id, const char *first, size_t n)
{
    fprintf(out, "<table id=\"%s\"><thead><tr><th>%s</th>", id, first);
    for (size_t r = 0; r < n; r++)
        fprintf(out, "<th>%c</th>", letters[r]);
    fputs("</tr></thead><tbody>\n", out);
}

typedef struct page_rows {
    FILE *out;
    int count;
} page_rows;

static void table_row(int kind, const char *label, const char *const *cells, size_t n, void *arg)
{
    page_rows *t = arg;
    if (kind == TW_HISTORY_ROW_DIFFERENCE && !t->count)
        table_head(t->out, "differences-table", "what", n);
    t->count++;
    fputs("<tr><th>", t->out);
    tw_html_text(t->out, label);
    fputs("</th>", t->out);
    for (size_t r = 0; r < n; r++) {
        fputs("<td>", t->out);
        tw_html_text(t->out, cells[r]);
        fputs("</td>", t->out);
    }
    fputs("</tr>\n", t->out);
}

static void summary(FILE *out, const tw_history_view *runs, size_t n)
{
    fputs("<section id=\"summary\"><h2>Side by side</h2>", out);
    table_head(out, "summary-table", "", n);
    page_rows t = {out, 0};
    tw_history_compare_figures(runs, n, table_row, &t);
    fputs("</tbody></table></section>\n", out);
}

static void differences(FILE *out, const tw_history_view *runs, size_t n)
{
    fputs("<section id=\"environment\"><h2>Environment and configuration</h2>", out);
    page_rows t = {out, 0};
    tw_history_compare_differences(runs, n, table_row, &t);
    if (t.count)
        fputs("</tbody></table>", out);
    else
        fputs("<p>The same where the logs state them.</p>", out);
    fputs("</section>\n", out);
}

/* One sentence per other run on where its loss curve parts from A's;
 * with a band on the chart (c may be NULL: no loss chart). */
static void partings(FILE *out, const tw_history_view *runs, size_t n, tw_chart *c)
{
    fputs("<section id=\"parting\"><h2>Loss curves</h2><ul>\n", out);
    for (size_t r = 1; r < n; r++) {
        tw_history_parting p;
        tw_history_loss_parting(&runs[0], &runs[r], &p);
        char line[256];
        fputs("<li>", out);
        tw_html_text(out, tw_history_parting_text(&p, letters[r], line, sizeof line));
        fputs("</li>\n", out);
        if (c && p.overlap && p.parted) {
            char label[48];
            snprintf(label, sizeof label, "%c parts at step %.0f", letters[r], p.step);
            tw_chart_band_add(c, p.step, p.to > p.step ? p.to : p.step, NAN, NAN, label);
        }
    }
    fputs("</ul></section>\n", out);
}

static void verdicts(FILE *out, const tw_history_view *runs, size_t n)
{
    fputs("<section id=\"verdict\"><h2>Verdict</h2><ul>\n", out);
    for (size_t r = 1; r < n; r++) {
        char v[1024], name[2] = {letters[r], 0};
        tw_history_verdict(&runs[0], &runs[r], name, v, sizeof v);
        fputs("<li>", out);
        tw_html_text(out, v);
        fputs("</li>\n", out);
    }
    fputs("</ul></section>\n", out);
}

/* The chart of one metric, one series a run; TW_ENOMEM when out of memory. */
static int chart_of(tw_chart *c, const tw_history_view *runs, size_t n, const char *metric)
{
    for (size_t r = 0; r < n; r++) {
        const tw_history_series *s = tw_history_view_series(&runs[r], metric);
        if (!s || !s->count)
            continue;
        char name[64];
        snprintf(name, sizeof name, "%c %.56s", letters[r], runs[r].entry.name);
        tw_chart_series *line = tw_chart_series_add(c, name, (int)(r % TW_CHART_PALETTE));
        if (!line)
            return TW_ENOMEM;
        /* over steps only: the runs ran at different times */
        for (size_t i = 0; i < s->count; i++)
            if (tw_chart_point_add(line, s->pos[i], NAN, s->value[i]) != TW_OK)
                return TW_ENOMEM;
    }
    return TW_OK;
}

int tw_html_compare_write(FILE *out, const tw_history_view *runs, size_t n)
{
    if (n > TW_HISTORY_COMPARE_MAX)
        n = TW_HISTORY_COMPARE_MAX;
    enum { DRAWN = sizeof drawn / sizeof drawn[0] };
    tw_chart charts[DRAWN];
    int rc = TW_OK;
    for (int i = 0; i < DRAWN; i++) {
        tw_chart_init(&charts[i], drawn[i].id, drawn[i].title, drawn[i].unit);
        if (rc == TW_OK)
            rc = chart_of(&charts[i], runs, n, drawn[i].metric);
    }
    if (rc == TW_OK) {
        char title[256], sub[128];
        snprintf(title, sizeof title, "trainwatch compare: %zu runs", n);
        snprintf(sub, sizeof sub, "A is the reference the other %s judged against", n > 2 ? "runs are" : "run is");
        tw_html_begin(out, title, sub, false);
        runs_list(out, runs, n);
        verdicts(out, runs, n);
        summary(out, runs, n);
        partings(out, runs, n, tw_chart_points(&charts[0]) ? &charts[0] : NULL);
        fputs("<section id=\"charts\"><h2>Charts</h2>\n", out);
        int shown = 0;
        for (int i = 0; i < DRAWN; i++) {
            if (tw_chart_points(&charts[i])) {
                tw_chart_write(out, &charts[i]);
                shown++;
            }
        }
        if (!shown)
            fputs("<p>No run kept a series to draw.</p>\n", out);
        fputs("</section>\n", out);
        differences(out, runs, n);
        tw_html_end(out);
    }
    for (int i = 0; i < DRAWN; i++)
        tw_chart_free(&charts[i]);
    return rc;
}
