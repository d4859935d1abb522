/*
 * compare.c: runs side by side (`trainwatch compare`): their figures in
 * columns, where the loss curves part, what differs in the environment and
 * configuration the logs stated, and a verdict in words on each run against
 * the first. Works on views (history.h), recorded or read on the fly.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/json.h"
#include "history_internal.h"

#define PART_RUN 5     /* points in a row apart before the curves count as parted */
#define NOISE_FACTOR 3 /* apart: more than this x the larger run's own noise */
#define SPEED_MARGIN 0.10 /* step times within 10% are the same speed */
#define SHARE_MARGIN 0.10 /* data-wait shares within 10 points are the same */
#define COL 16

/* ---- where the loss curves part ---------------------------------------- */

void tw_history_loss_parting(const tw_history_view *ref, const tw_history_view *other, tw_history_parting *out)
{
    *out = (tw_history_parting){.overlap = false};
    const tw_history_series *a = tw_history_view_series(ref, "loss"), *b = tw_history_view_series(other, "loss");
    if (!a || !b || a->count < 2 || b->count < 2)
        return;
    double from = fmax(a->pos[0], b->pos[0]), to = fmin(a->pos[a->count - 1], b->pos[b->count - 1]);
    if (from > to)
        return;
    out->overlap = true;
    out->from = from;
    out->to = to;
    out->threshold = NOISE_FACTOR * fmax(tw_history_noise(a), tw_history_noise(b));
    size_t in_range = 0;
    for (size_t i = 0; i < a->count; i++)
        in_range += a->pos[i] >= from && a->pos[i] <= to;
    /* five points in a row, fewer on a short log (a point every epoch) */
    int needed = in_range / 3 < PART_RUN ? (int)(in_range / 3) : PART_RUN;
    if (needed < 2)
        needed = 2;
    size_t hint = 0;
    int run = 0, sign = 0;
    for (size_t i = 0; i < a->count; i++) {
        if (a->pos[i] < from || a->pos[i] > to)
            continue;
        double bv = tw_history_value_at(b, a->pos[i], &hint), d = bv - a->value[i];
        bool apart = isfinite(d) ? fabs(d) > out->threshold : isfinite(a->value[i]) != isfinite(bv);
        int s = !isfinite(d) ? 2 : d > 0 ? 1 : -1;
        if (!apart) {
            run = 0;
            continue;
        }
        if (!run || s != sign) {
            run = 0;
            sign = s;
            out->step = a->pos[i];
            out->ref = a->value[i];
            out->other = bv;
        }
        if (++run >= needed) {
            out->parted = true;
            return;
        }
    }
}

/* ---- the environment that differs --------------------------------------- */

/* The first value of key among v's facts, rank 0 first; NULL when absent. */
static const char *fact(const tw_history_view *v, const char *key)
{
    const char *any = NULL;
    for (size_t i = 0; i < v->fact_count; i++) {
        if (strcmp(v->facts[i].key, key) != 0)
            continue;
        if (v->facts[i].rank <= 0)
            return v->facts[i].value;
        if (!any)
            any = v->facts[i].value;
    }
    return any;
}

static bool differs(const tw_history_view *runs, size_t n, const char *key)
{
    const char *first = fact(&runs[0], key);
    for (size_t r = 1; r < n; r++) {
        const char *v = fact(&runs[r], key);
        if (!first != !v || (v && strcmp(v, first) != 0))
            return true;
    }
    return false;
}

/* Calls each(key) once for every key that differs, in the order first seen. */
static void each_difference(const tw_history_view *runs, size_t n, void (*each)(const char *key, void *arg),
                            void *arg)
{
    for (size_t r = 0; r < n; r++) {
        for (size_t i = 0; i < runs[r].fact_count; i++) {
            const char *key = runs[r].facts[i].key;
            bool seen = false;
            for (size_t q = 0; q <= r && !seen; q++) {
                size_t upto = q < r ? runs[q].fact_count : i;
                for (size_t j = 0; j < upto && !seen; j++)
                    seen = strcmp(runs[q].facts[j].key, key) == 0;
            }
            if (!seen && differs(runs, n, key))
                each(key, arg);
        }
    }
}

/* ---- the verdict --------------------------------------------------------- */

static size_t put(char *buf, size_t cap, size_t used, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static size_t put(char *buf, size_t cap, size_t used, const char *fmt, ...)
{
    if (used >= cap)
        return used;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
    return n < 0 ? used : used + (size_t)n;
}

typedef struct verdict_env {
    const tw_history_view *ref, *other;
    char *buf;
    size_t cap, used;
    int listed;
} verdict_env;

static void env_change(const char *key, void *arg)
{
    verdict_env *e = arg;
    const char *a = fact(e->ref, key), *b = fact(e->other, key);
    if ((a && b && strcmp(a, b) == 0) || (!a && !b) || e->listed >= 4)
        return;
    e->used = put(e->buf, e->cap, e->used, "; %s %s -> %s", key, a ? a : "(not stated)", b ? b : "(not stated)");
    e->listed++;
}

static const char *percent(double share, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.0f%%", 100 * share);
    return buf;
}

void tw_history_verdict(const tw_history_view *ref, const tw_history_view *other, const char *name, char *buf,
                        size_t cap)
{
    const tw_history_entry *a = &ref->entry, *b = &other->entry;
    size_t used = 0;
    char s1[16], s2[16];
    double ratio = b->step_p50 / a->step_p50;
    if (isfinite(ratio) && (ratio >= 2 || ratio <= 0.5) && ratio > 0)
        used = put(buf, cap, used, "%s is %.1fx %s per step (p50 %.4g s against %.4g s)", name,
                   ratio > 1 ? ratio : 1 / ratio, ratio > 1 ? "slower" : "faster", b->step_p50, a->step_p50);
    else if (isfinite(ratio) && ratio > 0 && fabs(ratio - 1) >= SPEED_MARGIN)
        used = put(buf, cap, used, "%s is %.0f%% %s per step (p50 %.4g s against %.4g s)", name,
                   100 * fabs(ratio - 1), ratio > 1 ? "slower" : "faster", b->step_p50, a->step_p50);
    else if (isfinite(ratio))
        used = put(buf, cap, used, "%s runs at the same speed per step (p50 within %.0f%%)", name,
                   100 * SPEED_MARGIN);
    else if (isfinite(b->throughput / a->throughput) && fabs(b->throughput / a->throughput - 1) >= SPEED_MARGIN)
        used = put(buf, cap, used, "%s has %.0f%% %s throughput", name,
                   100 * fabs(b->throughput / a->throughput - 1), b->throughput > a->throughput ? "more" : "less");
    else
        used = put(buf, cap, used, "%s: no step times to compare", name);
    if (isfinite(a->data_share) && isfinite(b->data_share) && fabs(b->data_share - a->data_share) >= SHARE_MARGIN)
        used = put(buf, cap, used, ": data wait %s from %s to %s", b->data_share > a->data_share ? "rose" : "fell",
                   percent(a->data_share, s1, sizeof s1), percent(b->data_share, s2, sizeof s2));
    verdict_env env = {ref, other, buf, cap, used, 0};
    const tw_history_view pair[2] = {*ref, *other};
    each_difference(pair, 2, env_change, &env);
    used = env.used;
    if (strcmp(a->outcome, b->outcome) != 0 && b->outcome[0])
        used = put(buf, cap, used, "; it %s where A %s", b->outcome, a->outcome[0] ? a->outcome : "ended unknown");
    if (b->final_loss_nan && !a->final_loss_nan)
        used = put(buf, cap, used, "; its loss ended NaN");
    else if (isfinite(a->final_loss) && isfinite(b->final_loss) && a->final_loss != 0) {
        double d = (b->final_loss - a->final_loss) / fabs(a->final_loss);
        if (fabs(d) >= 0.05)
            used = put(buf, cap, used, "; final loss %.4g against %.4g (%+.0f%%)", b->final_loss, a->final_loss,
                       100 * d);
    }
    tw_history_parting p;
    tw_history_loss_parting(ref, other, &p);
    if (p.parted)
        used = put(buf, cap, used, "; the loss curves part at step %.0f", p.step);
    put(buf, cap, used, ".");
}

/* ---- text ---------------------------------------------------------------- */

static const char letters[] = "ABCDEFGH";

/* One cell of a row: padded to the column, the last one not. */
static void cell_out(FILE *out, const char *text, size_t r, size_t n)
{
    if (r + 1 < n)
        fprintf(out, " %-*s", COL, text);
    else
        fprintf(out, " %s", text);
}

static void num_cell(char *buf, size_t cap, double v, const char *fmt)
{
    if (isfinite(v))
        snprintf(buf, cap, fmt, v);
    else
        snprintf(buf, cap, "?");
}

static void c_outcome(const tw_history_entry *e, char *b, size_t c) { snprintf(b, c, "%s", e->outcome[0] ? e->outcome : "?"); }
static void c_health(const tw_history_entry *e, char *b, size_t c) { num_cell(b, c, e->health, "%.0f"); }
static void c_steps(const tw_history_entry *e, char *b, size_t c)
{
    snprintf(b, c, "%lld -> %lld", (long long)e->first_step, (long long)e->last_step);
}
static void c_duration(const tw_history_entry *e, char *b, size_t c) { tw_history_duration_text(e->duration, b, c); }
static void c_p50(const tw_history_entry *e, char *b, size_t c) { num_cell(b, c, e->step_p50, "%.4g s"); }
static void c_p95(const tw_history_entry *e, char *b, size_t c) { num_cell(b, c, e->step_p95, "%.4g s"); }
static void c_share(const tw_history_entry *e, char *b, size_t c) { num_cell(b, c, 100 * e->data_share, "%.0f%%"); }
static void c_ips(const tw_history_entry *e, char *b, size_t c)
{
    num_cell(b, c, e->throughput, e->throughput >= 1e4 ? "%.0f/s" : "%.4g/s");
}
static void c_mem(const tw_history_entry *e, char *b, size_t c)
{
    num_cell(b, c, e->peak_memory / (1024.0 * 1024 * 1024), "%.2f GiB");
}
static void c_first(const tw_history_entry *e, char *b, size_t c) { num_cell(b, c, e->first_loss, "%.4g"); }
static void c_best(const tw_history_entry *e, char *b, size_t c)
{
    if (isfinite(e->best_loss) && e->best_loss_step >= 0)
        snprintf(b, c, "%.4g (%lld)", e->best_loss, (long long)e->best_loss_step);
    else
        num_cell(b, c, e->best_loss, "%.4g");
}
static void c_final(const tw_history_entry *e, char *b, size_t c)
{
    if (e->final_loss_nan)
        snprintf(b, c, "nan");
    else
        num_cell(b, c, e->final_loss, "%.4g");
}
static void c_findings(const tw_history_entry *e, char *b, size_t c)
{
    if (e->errors < 0)
        snprintf(b, c, "?"); /* not kept where the run was read from (a Prometheus) */
    else
        snprintf(b, c, "%dE %dW", e->errors, e->warnings);
}

static void c_gpu_hours(const tw_history_entry *e, char *b, size_t c) { tw_history_gpu_hours_text(e, b, c); }
static void c_cost(const tw_history_entry *e, char *b, size_t c) { tw_history_cost_text(e, b, c); }

static const struct {
    const char *label;
    void (*cell)(const tw_history_entry *e, char *buf, size_t cap);
} rows[] = {
    {"outcome", c_outcome},         {"health", c_health},         {"steps", c_steps},
    {"duration", c_duration},       {"step time p50", c_p50},     {"step time p95", c_p95},
    {"data wait", c_share},         {"throughput", c_ips},        {"memory peak", c_mem},
    {"loss first", c_first},        {"loss best (step)", c_best}, {"loss final", c_final},
    {"findings (err, warn)", c_findings}, {"GPU-hours", c_gpu_hours},     {"cost", c_cost},
};

/* The last value of series metric of v, or NAN. */
static double last_value(const tw_history_view *v, const char *metric)
{
    const tw_history_series *s = tw_history_view_series(v, metric);
    return s && s->count ? s->value[s->count - 1] : NAN;
}

static void eval_rows(const tw_history_view *runs, size_t n, tw_history_compare_row_fn each, void *arg)
{
    char buf[TW_HISTORY_COMPARE_MAX][32];
    const char *cells[TW_HISTORY_COMPARE_MAX];
    for (size_t r = 0; r < n; r++) {
        for (size_t i = 0; i < runs[r].series_count; i++) {
            const char *m = runs[r].series[i].metric;
            bool seen = strncmp(m, "eval:", 5) != 0;
            for (size_t q = 0; q < r && !seen; q++)
                seen = tw_history_view_series(&runs[q], m) != NULL;
            if (seen)
                continue;
            char label[40];
            snprintf(label, sizeof label, "%.30s (last)", m);
            for (size_t k = 0; k < n; k++) {
                num_cell(buf[k], sizeof buf[k], last_value(&runs[k], m), "%.4g");
                cells[k] = buf[k];
            }
            each(TW_HISTORY_ROW_FIGURE, label, cells, n, arg);
        }
    }
}

typedef struct env_rows {
    const tw_history_view *runs;
    size_t n;
    tw_history_compare_row_fn each;
    void *arg;
} env_rows;

static void env_row(const char *key, void *arg)
{
    env_rows *t = arg;
    const char *cells[TW_HISTORY_COMPARE_MAX];
    for (size_t r = 0; r < t->n; r++) {
        const char *value = fact(&t->runs[r], key);
        cells[r] = value ? value : "-";
    }
    t->each(TW_HISTORY_ROW_DIFFERENCE, key, cells, t->n, t->arg);
}

void tw_history_compare_figures(const tw_history_view *runs, size_t n, tw_history_compare_row_fn each, void *arg)
{
    if (n > TW_HISTORY_COMPARE_MAX)
        n = TW_HISTORY_COMPARE_MAX;
    char buf[TW_HISTORY_COMPARE_MAX][64];
    const char *cells[TW_HISTORY_COMPARE_MAX];
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        for (size_t r = 0; r < n; r++) {
            rows[i].cell(&runs[r].entry, buf[r], sizeof buf[r]);
            cells[r] = buf[r];
        }
        each(TW_HISTORY_ROW_FIGURE, rows[i].label, cells, n, arg);
    }
    eval_rows(runs, n, each, arg);
}

void tw_history_compare_differences(const tw_history_view *runs, size_t n, tw_history_compare_row_fn each,
                                    void *arg)
{
    env_rows t = {runs, n > TW_HISTORY_COMPARE_MAX ? TW_HISTORY_COMPARE_MAX : n, each, arg};
    each_difference(runs, t.n, env_row, &t);
}

const char *tw_history_parting_text(const tw_history_parting *p, char letter, char *buf, size_t cap)
{
    if (!p->overlap)
        snprintf(buf, cap, "%c and A share no logged steps", letter);
    else if (p->parted)
        snprintf(buf, cap, "%c parts from A at step %.0f: %.4g against %.4g (apart: more than %.3g, 3x the runs' noise)",
                 letter, p->step, p->other, p->ref, p->threshold);
    else
        snprintf(buf, cap, "%c follows A within the runs' noise (%.3g) over steps %.0f-%.0f", letter, p->threshold,
                 p->from, p->to);
    return buf;
}

/* The text table: labels in a column of 24, cells of COL; the differing
 * facts under a heading of their own, cut to the column. */
typedef struct text_table {
    FILE *out;
    int differences;
} text_table;

static void text_row(int kind, const char *label, const char *const *cells, size_t n, void *arg)
{
    text_table *t = arg;
    if (kind == TW_HISTORY_ROW_DIFFERENCE && !t->differences++)
        fprintf(t->out, "\nenvironment and configuration that differ:\n");
    if (kind == TW_HISTORY_ROW_DIFFERENCE)
        fprintf(t->out, "  %-24.24s", label);
    else
        fprintf(t->out, "  %-24s", label);
    for (size_t r = 0; r < n; r++) {
        char v[COL + 1];
        snprintf(v, sizeof v, "%.*s", COL, cells[r]);
        cell_out(t->out, kind == TW_HISTORY_ROW_DIFFERENCE ? v : cells[r], r, n);
    }
    fputc('\n', t->out);
}

void tw_history_compare_write_text(FILE *out, const tw_history_view *runs, size_t n)
{
    for (size_t r = 0; r < n; r++) {
        const tw_history_entry *e = &runs[r].entry;
        char when[32];
        if (e->id > 0)
            fprintf(out, "%c  run %lld: %s (job %s), %s on %s, %s\n", letters[r], (long long)e->id, e->name, e->job,
                    e->source, e->host, tw_history_time_text(e->recorded, when, sizeof when));
        else
            fprintf(out, "%c  %s (read now, not recorded)\n", letters[r], e->inputs);
    }
    fprintf(out, "\n  %-24s", "");
    for (size_t r = 0; r < n; r++) {
        char letter[2] = {letters[r], 0};
        cell_out(out, letter, r, n);
    }
    fputc('\n', out);
    text_table t = {out, 0};
    tw_history_compare_figures(runs, n, text_row, &t);
    fprintf(out, "\nloss curves:\n");
    for (size_t r = 1; r < n; r++) {
        tw_history_parting p;
        char line[256];
        tw_history_loss_parting(&runs[0], &runs[r], &p);
        fprintf(out, "  %s\n", tw_history_parting_text(&p, letters[r], line, sizeof line));
    }
    tw_history_compare_differences(runs, n, text_row, &t);
    if (!t.differences)
        fprintf(out, "\nenvironment and configuration: the same where the logs state them\n");
    fprintf(out, "\nverdict:\n");
    for (size_t r = 1; r < n; r++) {
        char v[1024], name[2] = {letters[r], 0};
        tw_history_verdict(&runs[0], &runs[r], name, v, sizeof v);
        fprintf(out, "  %s\n", v);
    }
}

/* ---- JSON ---------------------------------------------------------------- */

typedef struct env_json {
    FILE *out;
    const tw_history_view *runs;
    size_t n;
    int count;
} env_json;

static void env_member(const char *key, void *arg)
{
    env_json *j = arg;
    fputs(j->count++ ? ",{\"key\":" : "{\"key\":", j->out);
    tw_json_cstring(j->out, key);
    fputs(",\"values\":[", j->out);
    for (size_t r = 0; r < j->n; r++) {
        const char *v = fact(&j->runs[r], key);
        if (r)
            fputc(',', j->out);
        if (v)
            tw_json_cstring(j->out, v);
        else
            fputs("null", j->out);
    }
    fputs("]}", j->out);
}

static void json_number_or_null(FILE *out, double v)
{
    if (isfinite(v))
        tw_json_number(out, v);
    else
        fputs("null", out);
}

void tw_history_compare_write_json(FILE *out, const tw_history_view *runs, size_t n)
{
    fprintf(out, "{\"schema\":\"%s\",\"runs\":[", TW_HISTORY_COMPARE_SCHEMA);
    for (size_t r = 0; r < n; r++) {
        if (r)
            fputc(',', out);
        tw_history_entry_write_json(out, &runs[r].entry);
    }
    fputs("],\"against_first\":[", out);
    for (size_t r = 1; r < n; r++) {
        tw_history_parting p;
        tw_history_loss_parting(&runs[0], &runs[r], &p);
        char v[1024], name[2] = {letters[r], 0};
        tw_history_verdict(&runs[0], &runs[r], name, v, sizeof v);
        fprintf(out, "%s{\"run\":\"%c\",\"loss_overlap\":%s,\"loss_parted\":%s,\"part_step\":", r > 1 ? "," : "",
                letters[r], p.overlap ? "true" : "false", p.parted ? "true" : "false");
        json_number_or_null(out, p.parted ? p.step : NAN);
        fputs(",\"part_losses\":", out);
        if (p.parted) {
            fputc('[', out);
            json_number_or_null(out, p.ref);
            fputc(',', out);
            json_number_or_null(out, p.other);
            fputc(']', out);
        } else {
            fputs("null", out);
        }
        fputs(",\"noise_threshold\":", out);
        json_number_or_null(out, p.overlap ? p.threshold : NAN);
        fputs(",\"verdict\":", out);
        tw_json_cstring(out, v);
        fputc('}', out);
    }
    fputs("],\"environment_differences\":[", out);
    env_json j = {out, runs, n, 0};
    each_difference(runs, n, env_member, &j);
    fputs("]}\n", out);
}
