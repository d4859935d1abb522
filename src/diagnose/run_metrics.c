/*
 * run_metrics.c: named metrics (last, best, count: train metrics per rank,
 * evaluation results per launch), evaluation records with the series of
 * their results the report draws, and the top-k contradiction check
 * (top-1 above top-5 in one result).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "run_internal.h"

static bool is_lower_better(const char *name)
{
    static const char *const lower[] = {"loss", "error", "err",  "perplexity", "ppl",  "wer", "cer",
                                        "mae",  "mse",   "rmse", "runtime",    "time", "cost"};
    for (size_t i = 0; i < sizeof lower / sizeof lower[0]; i++) {
        if (strstr(name, lower[i]))
            return true;
    }
    return false;
}

/* The index of name in notes, or -1. */
int tw_run_metric_index(const tw_metric_notes *notes, int hint, const char *name)
{
    if (hint < notes->count && strcmp(notes->items[hint].s.name, name) == 0)
        return hint; /* records usually list their metrics in the same order */
    for (int i = 0; i < notes->count; i++) {
        if (strcmp(notes->items[i].s.name, name) == 0)
            return i;
    }
    return -1;
}

#define LOSS_SLOTS 4

static tw_metric_note *metric_note(tw_metric_notes *notes, int hint, const char *name)
{
    if (hint < notes->count && strcmp(notes->items[hint].s.name, name) == 0)
        return &notes->items[hint]; /* records usually list their metrics in the same order */
    for (int i = 0; i < notes->count; i++) {
        if (strcmp(notes->items[i].s.name, name) == 0)
            return &notes->items[i];
    }
    /* the last slots are kept for losses: a result that lists a hundred
     * per-class scores before its eval_loss (HF sorts its keys) still has
     * the loss noted */
    if (notes->count >= TW_SUMMARY_METRICS ||
        (notes->count >= TW_SUMMARY_METRICS - LOSS_SLOTS && !strstr(name, "loss")))
        return NULL;
    tw_metric_note *e = &notes->items[notes->count++];
    memset(e, 0, sizeof *e);
    snprintf(e->s.name, sizeof e->s.name, "%s", name);
    e->s.best = NAN;
    e->s.best_step = -1;
    e->lower_is_better = is_lower_better(name);
    return e;
}

void tw_metric_notes_add(tw_metric_notes *notes, const tw_metric *metrics, int n, int64_t step, bool count)
{
    for (int i = 0; i < n; i++) {
        tw_metric_note *e = metric_note(notes, i, metrics[i].name);
        if (!e)
            continue;
        double v = metrics[i].value;
        if (count || e->s.count == 0)
            e->s.count++;
        e->s.last = v;
        bool better = isnan(e->s.best) || (e->lower_is_better ? v < e->s.best : v > e->s.best);
        if (better && isfinite(v)) {
            e->s.best = v;
            e->s.best_step = step;
        }
    }
}

/* The k of a top-k style name ("Top_5", "acc_top1", "recall@10", "hits@3"),
 * with the rest of the name (without the number) in family; 0 if none. */
static int topk(const char *name, char *family, size_t cap)
{
    static const char *const markers[] = {"top", "recall@", "hit@", "hits@"};
    for (size_t m = 0; m < sizeof markers / sizeof markers[0]; m++) {
        size_t n = strlen(markers[m]);
        for (const char *p = name; *p; p++) {
            if (strncasecmp(p, markers[m], n) != 0)
                continue;
            const char *d = p + n;
            if (*d == '_' || *d == '-' || *d == '@')
                d++;
            if (*d < '1' || *d > '9')
                continue;
            int k = 0;
            const char *e = d;
            while (*e >= '0' && *e <= '9' && k < 100000)
                k = k * 10 + (*e++ - '0');
            snprintf(family, cap, "%.*s#%s", (int)(d - name), name, e);
            return k;
        }
    }
    return 0;
}

/* Top-1 above top-5 in one result: a swapped or mislabeled metric. */
static void check_topk(tw_run *run, const tw_record *r, uint32_t file)
{
    char fa[TW_NAME_MAX + 8], fb[TW_NAME_MAX + 8];
    for (int i = 0; i < r->metric_count; i++) {
        int ka = topk(r->metrics[i].name, fa, sizeof fa);
        for (int j = 0; ka && j < r->metric_count; j++) {
            int kb = topk(r->metrics[j].name, fb, sizeof fb);
            if (!kb || kb <= ka || strcmp(fa, fb) != 0 || !(r->metrics[i].value > r->metrics[j].value))
                continue;
            tw_contradiction *c = &run->contradiction;
            if (c->count++ == 0) {
                snprintf(c->low_name, sizeof c->low_name, "%s", r->metrics[i].name);
                snprintf(c->high_name, sizeof c->high_name, "%s", r->metrics[j].name);
                c->low = r->metrics[i].value;
                c->high = r->metrics[j].value;
                c->rank = r->rank < 0 ? 0 : r->rank;
                c->file = file;
                c->line = r->source.line;
            }
            return;
        }
    }
}

/* Keeps the evaluation's results in eval_series (see run.h). */
static void note_eval_points(tw_run *run, const tw_metric *results, int n, int rank, double pos, double time,
                             uint32_t file, uint64_t line)
{
    tw_eval_series *s = &run->eval_series;
    uint64_t ordinal = s->seen++;
    if (s->stride == 0)
        s->stride = 1;
    if (ordinal % s->stride != 0)
        return;
    if (s->count + (size_t)n > TW_EVALS_KEPT) { /* drop every other evaluation kept */
        size_t kept = 0;
        for (size_t i = 0; i < s->count; i++) {
            if (s->points[i].ordinal % (2 * s->stride) == 0)
                s->points[kept++] = s->points[i];
        }
        s->count = kept;
        s->stride *= 2;
        if (ordinal % s->stride != 0 || s->count + (size_t)n > TW_EVALS_KEPT)
            return;
    }
    if (s->count + (size_t)n > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        while (cap < s->count + (size_t)n)
            cap *= 2;
        tw_eval_point *grown = realloc(s->points, sizeof *grown * cap);
        if (!grown)
            return; /* a chart with fewer points, not a failed run */
        s->points = grown;
        s->cap = cap;
    }
    for (int i = 0; i < n; i++) {
        for (int m = 0; m < run->eval_metrics.count; m++) {
            if (strcmp(run->eval_metrics.items[m].s.name, results[i].name) == 0) {
                s->points[s->count++] = (tw_eval_point){pos, time, results[i].value, m, rank, ordinal, file, line};
                break;
            }
        }
    }
}

void tw_run_add_eval(tw_run *root, tw_run *run, const tw_record *r)
{
    tw_rank *rk = tw_run_rank_of(run, r->rank);
    if (rk)
        rk->event_since_last = true;
    uint32_t file = tw_run_intern_file(root, r->source.file);
    check_topk(run, r, file);
    /* at the step the result names (HF's evaluation "step"), else the rank's last */
    int64_t step = r->global_step >= 0 ? r->global_step : rk && rk->have_last ? (int64_t)rk->last.pos : r->epoch;
    tw_metric results[TW_METRICS_MAX];
    int n = 0;
    for (int i = 0; i < r->metric_count; i++) {
        if (tw_metric_is_result(r->metrics[i].name))
            results[n++] = r->metrics[i];
    }
    tw_metric_notes_add(&run->eval_metrics, results, n, step, true);
    if (step >= 0)
        note_eval_points(run, results, n, r->rank, (double)step, tw_has(r, TW_F_TIME) ? r->time : NAN, file,
                         r->source.line);
    run->evals++;
}
