/*
 * health.c: one 0-100 number per run (and per launch) a team can sort by.
 *
 * The score is 100 minus eight weighted penalties, each from 0 to 1, set by
 * the findings of the rules (a finding is the evidence; the score only
 * weighs it) and by two measured shares: the data-loader wait and the GPU's
 * idleness, which cost points in proportion even below the threshold of a
 * finding. Then a cap: with a warning finding the score is at most 84, with
 * an error at most 59, so a run with a problem never outranks one without,
 * however the components add up. The table below is the documentation's
 * (docs/analyze.md#health-score): change both together.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/json.h"
#include "diagnose.h"
#include "trainwatch/error.h"

typedef enum component {
    C_FAILURES,
    C_NAN,
    C_DATA,
    C_GPU,
    C_STALLS,
    C_MEMORY,
    C_LOSS,
    C_BALANCE,
} component;

static const struct {
    const char *name;
    double weight;
} components[TW_HEALTH_COMPONENTS] = {
    [C_FAILURES] = {"failures", 25},    [C_NAN] = {"nan", 15},
    [C_DATA] = {"data_loading", 10},    [C_GPU] = {"gpu_idle", 10},
    [C_STALLS] = {"stalls_jitter", 10}, [C_MEMORY] = {"memory", 10},
    [C_LOSS] = {"loss_trend", 10},      [C_BALANCE] = {"rank_balance", 10},
};

/* What each rule's finding costs, and in which component; info_penalty,
 * where set, is what an info finding of the rule costs instead (a pause
 * noted is not a stall). A rule not listed costs "failures" 0.5 when it is
 * a warning or an error (a new rule is never free), nothing when it is
 * info. */
static const struct {
    const char *rule;
    component component;
    double penalty;
    double info_penalty;
} costs[] = {
    {"crash", C_FAILURES, 1, 0},
    {"killed", C_FAILURES, 1, 0},
    {"cuda_setup", C_FAILURES, 1, 0},
    {"disk_full", C_FAILURES, 1, 0},
    {"nccl_timeout", C_FAILURES, 1, 0},
    {"exit_status", C_FAILURES, 1, 0},
    {"oom", C_FAILURES, 1, 0},
    {"rank_stopped", C_BALANCE, 1, 0},
    {"failed_launches", C_FAILURES, 0.6, 0},
    {"incomplete", C_FAILURES, 0.4, 0},
    {"restarts", C_FAILURES, 0.3, 0},
    {"eval_contradiction", C_FAILURES, 0.6, 0},
    {"overfitting", C_LOSS, 0.5, 0},
    {"eval_empty", C_FAILURES, 0.6, 0},
    {"nan_loss", C_NAN, 1, 0},
    {"nan_check", C_NAN, 1, 0},
    {"loss_scale_collapse", C_NAN, 0.8, 0},
    {"data_loading_bound", C_DATA, 1, 0},
    {"epoch_start_wait", C_DATA, 0.2, 0},
    {"gpu_underused", C_GPU, 1, 0},
    {"stall", C_STALLS, 1, 0.2},
    {"throughput_drop", C_STALLS, 0.6, 0},
    {"step_time_jitter", C_STALLS, 0.2, 0},
    {"memory_growth", C_MEMORY, 1, 0},
    {"gpu_memory_growth", C_MEMORY, 1, 0},
    {"memory_spike", C_MEMORY, 0.2, 0},
    {"divergence", C_LOSS, 1, 0},
    {"plateau", C_LOSS, 0.5, 0},
    {"loss_spikes", C_LOSS, 0.2, 0},
    {"straggler", C_BALANCE, 1, 0},
    {"gpu_log_not_aligned", C_GPU, 0, 0},
};

static void raise_to(tw_health *h, component c, double penalty, const char *why)
{
    tw_health_component *hc = &h->components[c];
    if (!(penalty > hc->penalty))
        return;
    hc->penalty = penalty > 1 ? 1 : penalty;
    snprintf(hc->why, sizeof hc->why, "%s", why);
}

static void add_finding(tw_health *h, const tw_finding *f)
{
    for (size_t i = 0; i < sizeof costs / sizeof costs[0]; i++) {
        if (strcmp(costs[i].rule, f->rule) == 0) {
            bool info = f->severity == TW_SEV_INFO && costs[i].info_penalty > 0;
            raise_to(h, costs[i].component, info ? costs[i].info_penalty : costs[i].penalty, f->rule);
            return;
        }
    }
    if (f->severity >= TW_SEV_WARNING)
        raise_to(h, C_FAILURES, 0.5, f->rule);
}

/* Shares that cost in proportion: data wait from 10% (a finding at 30% by
 * default), GPU utilisation below 60% in the GPU logs given. */
static void add_measures(tw_health *h, const tw_summary *s)
{
    char why[96];
    if (!isnan(s->data_share) && s->data_share > 0.10) {
        snprintf(why, sizeof why, "data wait %.0f%% of step time", s->data_share * 100);
        raise_to(h, C_DATA, (s->data_share - 0.10) / 0.40, why);
    }
    if (s->gpu.samples > 0 && !isnan(s->gpu.util_mean) && s->gpu.util_mean < 60) {
        snprintf(why, sizeof why, "GPU utilisation %.0f%% on average", s->gpu.util_mean);
        raise_to(h, C_GPU, (60 - s->gpu.util_mean) / 60, why);
    }
}

void tw_health_compute(const tw_summary *s, const tw_finding *findings, int count, tw_health *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < TW_HEALTH_COMPONENTS; i++) {
        out->components[i].name = components[i].name;
        out->components[i].weight = components[i].weight;
    }
    tw_severity worst = TW_SEV_INFO;
    for (int i = 0; i < count; i++) {
        add_finding(out, &findings[i]);
        if (findings[i].severity > worst)
            worst = findings[i].severity;
    }
    add_measures(out, s);
    double score = 100;
    for (int i = 0; i < TW_HEALTH_COMPONENTS; i++)
        score -= out->components[i].weight * out->components[i].penalty;
    if (worst == TW_SEV_ERROR && score > TW_HEALTH_CAP_ERROR) {
        score = TW_HEALTH_CAP_ERROR;
        out->cap = "error";
    } else if (worst == TW_SEV_WARNING && score > TW_HEALTH_CAP_WARNING) {
        score = TW_HEALTH_CAP_WARNING;
        out->cap = "warning";
    }
    out->score = score < 0 ? 0 : round(score * 10) / 10;
}

void tw_health_report(tw_report *r)
{
    for (int i = 0; i < r->launch_count; i++)
        tw_health_compute(&r->launches[i].summary, r->launches[i].findings, r->launches[i].finding_count,
                          &r->launches[i].health);
    tw_health_compute(&r->summary, r->findings, r->finding_count, &r->health);
}

/* One rank: the findings about it or about no rank in particular, and its
 * own data wait; the GPU share is the launch's (GPU logs have no ranks). */
static void rank_health(const tw_report *r, const tw_rank *rk, tw_health *out)
{
    tw_summary s = r->summary;
    s.data_share = rk->sum_batch > 0 ? rk->sum_data / rk->sum_batch : NAN;
    tw_finding *mine = malloc(sizeof *mine * (size_t)(r->finding_count ? r->finding_count : 1));
    int n = 0;
    for (int i = 0; mine && i < r->finding_count; i++) {
        if (r->findings[i].rank < 0 || r->findings[i].rank == rk->rank)
            mine[n++] = r->findings[i];
    }
    tw_health_compute(&s, mine, n, out);
    free(mine);
}

int tw_health_ranks(const tw_run *run, tw_report *r)
{
    int shown = r->launch == TW_LAUNCH_ALL ? r->launch_count : r->launch;
    const tw_run *launch = tw_run_launch(run, shown - 1);
    r->rank_health = calloc((size_t)(launch->rank_count ? launch->rank_count : 1), sizeof *r->rank_health);
    if (!r->rank_health)
        return TW_ENOMEM;
    for (int i = 0; i < launch->rank_count; i++) {
        const tw_rank *rk = launch->ranks[i];
        if (!rk->used)
            continue;
        struct tw_rank_health *h = &r->rank_health[r->rank_health_count++];
        h->rank = rk->rank;
        rank_health(r, rk, &h->health);
    }
    return TW_OK;
}

void tw_health_text(const tw_health *h, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%.0f/100", h->score);
    bool open = false;
    for (int i = 0; i < TW_HEALTH_COMPONENTS && n > 0 && (size_t)n < cap; i++) {
        const tw_health_component *c = &h->components[i];
        double points = c->weight * c->penalty;
        if (points < 0.5)
            continue;
        n += snprintf(buf + n, cap - (size_t)n, "%s%s -%.0f", open ? ", " : " (", c->name, points);
        open = true;
    }
    if (n > 0 && (size_t)n < cap && h->cap) {
        n += snprintf(buf + n, cap - (size_t)n, "%scapped at %.0f by %s findings", open ? ", " : " (",
                      strcmp(h->cap, "error") == 0 ? TW_HEALTH_CAP_ERROR : TW_HEALTH_CAP_WARNING, h->cap);
        open = true;
    }
    if (open && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, ")");
}

void tw_health_write_json(FILE *out, const tw_health *h)
{
    fprintf(out, "{\"score\":%.1f,\"cap\":", h->score);
    if (h->cap)
        fprintf(out, "\"%s\"", h->cap);
    else
        fputs("null", out);
    fputs(",\"components\":[", out);
    for (int i = 0; i < TW_HEALTH_COMPONENTS; i++) {
        const tw_health_component *c = &h->components[i];
        fprintf(out, "%s{\"name\":\"%s\",\"weight\":%.0f,\"penalty\":%.3f,\"points\":%.1f,\"why\":", i ? "," : "",
                c->name, c->weight, c->penalty, c->weight * c->penalty);
        if (c->why[0])
            tw_json_cstring(out, c->why);
        else
            fputs("null", out);
        fputc('}', out);
    }
    fputs("]}", out);
}
