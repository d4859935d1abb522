/*
 * diagnose.c: runs the table of rules over a tw_run and builds the report:
 * the run summary (what a person wants to see first) and the findings,
 * errors first, for each launch of the log (launches.c puts them together).
 * The thresholds' defaults are in thresholds.c.
 */
#include "diagnose.h"
#include "gpu.h"
#include "templates.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainwatch/error.h"

/* ---- the run's hooks: unread lines to the template miner, GPU hints ---- */

static int mine_line(tw_run *root, const tw_record *r, uint32_t file, int launch)
{
    return tw_templates_add(&root->templates, r, file, launch);
}

static void note_gpu_hint(tw_run *root, const tw_record *r, uint32_t file, int launch)
{
    /* fails only out of memory: the rank's GPU then stays unknown, as past
     * gpu.c's own cap on bindings, and the GPU rules say nothing of it */
    (void)tw_gpu_note_hint(root, r, file, launch);
}

static void free_kept(tw_run *root)
{
    tw_gpu_notes_free(root->gpu);
    tw_templates_free(root->templates);
}

static const tw_run_hooks run_hooks = {
    .unread_line = mine_line, .gpu_hint_maybe = tw_gpu_hint_maybe, .gpu_hint = note_gpu_hint, .free = free_kept};

int tw_run_new(tw_run **out, const tw_thresholds *t)
{
    return tw_run_new_with(out, t, &run_hooks);
}

static const tw_rule *const rules[] = {
    &tw_rule_oom,
    &tw_rule_nan,
    &tw_rule_loss_scale,
    &tw_rule_exceptions,
    &tw_rule_exits,
    &tw_rule_rank_stopped,
    &tw_rule_hang,
    &tw_rule_shared_device,
    &tw_rule_divergence,
    &tw_rule_data_bound,
    &tw_rule_stalls,
    &tw_rule_memory,
    &tw_rule_throughput,
    &tw_rule_straggler,
    &tw_rule_spikes,
    &tw_rule_plateau,
    &tw_rule_incomplete,
    &tw_rule_restarts,
    &tw_rule_epoch_start,
    &tw_rule_memory_spike,
    &tw_rule_eval_contradiction,
    &tw_rule_overfitting,
    &tw_rule_eval_empty,
    &tw_rule_ranks_over_limit,
    &tw_rule_jitter,
    &tw_rule_duplicated_logging,
    &tw_rule_logging_cost,
    &tw_rule_cut_off,
    &tw_rule_cumulative_time,
    &tw_rule_step_time_mismatch,
    &tw_rule_environment_differs,
    &tw_rule_gpu, /* last: it adds GPU evidence to the findings above */
};

/* ---- summary ---------------------------------------------------------- */

/* Seconds from the first to the last step by the log's timestamps, else an
 * estimate: the steps the records stand for times the median step time
 * (a record usually prints one step's time, or an average, for many steps). */
static void summarize_duration(const tw_rank *lead, tw_summary *s)
{
    if (!isnan(lead->first.time) && !isnan(lead->last.time) && lead->last.time >= lead->first.time) {
        s->duration = lead->last.time - lead->first.time;
        s->duration_from_timestamps = true;
        return;
    }
    double median = tw_hist_quantile(&lead->step_times, 0.5);
    if (!isnan(median) && lead->step_span > 0)
        s->duration = (double)lead->step_span * median;
}

/* The time left when the log ends mid-run (see tw_summary). */
static void summarize_eta(const tw_run *run, const tw_rank *lead, tw_summary *s)
{
    double left = tw_run_steps_left(run, lead);
    if (!(left > 0))
        return;
    s->steps_left = left;
    double per_step = tw_hist_quantile(&lead->step_times, 0.5);
    if (per_step > 0)
        s->eta_seconds = left * per_step;
    else if (tw_has(&lead->last_step_record, TW_F_ETA))
        s->eta_seconds = lead->last_step_record.eta;
    if (!isnan(s->eta_seconds) && !isnan(lead->last.time))
        s->eta_end = lead->last.time + s->eta_seconds;
}

static void summarize_lead(const tw_rank *lead, tw_summary *s)
{
    s->first_step = (int64_t)lead->first.pos;
    s->last_step = (int64_t)lead->last.pos;
    s->last_epoch = lead->last.epoch;
    s->epoch_total = lead->last.epoch_total > 0 ? lead->last.epoch_total : -1;
    summarize_duration(lead, s);
    s->first_loss = lead->loss_first;
    s->best_loss = lead->loss_best;
    if (!isnan(lead->loss_best))
        s->best_loss_step = (int64_t)lead->loss_best_pos;
    if (lead->last.fields & TW_F_LOSS) {
        s->final_loss = lead->last.loss;
        s->final_loss_known = true;
    }
    if (lead->last.fields & TW_F_LR)
        s->final_lr = lead->last.lr;
    s->train_metric_count = lead->train_metrics.count;
    for (int i = 0; i < lead->train_metrics.count; i++)
        s->train_metrics[i] = lead->train_metrics.items[i].s;
}

static void summarize_steps(const tw_run *run, tw_summary *s)
{
    s->first_step = s->last_step = -1;
    s->last_epoch = s->epoch_total = -1;
    s->duration = s->final_loss = s->best_loss = s->first_loss = s->final_lr = NAN;
    s->samples_per_sec = s->step_time_max = s->peak_mem_bytes = s->data_share = NAN;
    s->step_time_p50 = s->step_time_p95 = s->step_time_p99 = NAN;
    s->steps_left = s->eta_seconds = s->eta_end = NAN;
    s->best_loss_step = -1;
    tw_hist *hist = calloc(1, sizeof *hist);
    double *values = malloc(sizeof(double) * TW_SERIES_MAX);
    double *medians = malloc(sizeof(double) * (size_t)(run->rank_count ? run->rank_count : 1));
    if (!hist || !values || !medians)
        goto done;
    const tw_rank *lead = NULL;
    double sum_batch = 0, sum_data = 0;
    int nmed = 0;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk->used)
            continue;
        s->ranks++;
        if (!lead || rk->steps > lead->steps)
            lead = rk;
        tw_hist_merge(hist, &rk->step_times);
        sum_batch += rk->sum_batch;
        sum_data += rk->sum_data;
        if (!isnan(rk->mem_max) && !(rk->mem_max <= s->peak_mem_bytes))
            s->peak_mem_bytes = rk->mem_max;
        size_t n = tw_series_values(&rk->series, TW_F_SAMPLES_PER_SEC, values, NULL);
        if (n > 0)
            medians[nmed++] = tw_median(values, n);
    }
    s->samples_per_sec = nmed ? tw_median(medians, (size_t)nmed) : NAN;
    s->step_time_p50 = tw_hist_quantile(hist, 0.50);
    s->step_time_p95 = tw_hist_quantile(hist, 0.95);
    s->step_time_p99 = tw_hist_quantile(hist, 0.99);
    s->step_time_max = hist->count ? hist->max : NAN;
    s->data_share = sum_batch > 0 ? sum_data / sum_batch : NAN;
    if (lead) {
        summarize_lead(lead, s);
        summarize_eta(run, lead, s);
    }
done:
    free(hist);
    free(values);
    free(medians);
}

/* The launch's facts, "key value" each, the first value of each key. */
static void summarize_environment(const tw_run *run, tw_summary *s)
{
    size_t used = 0;
    for (int i = 0; i < run->fact_count && used + 1 < sizeof s->environment; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++)
            seen |= strcmp(run->facts[j].key, run->facts[i].key) == 0;
        if (seen)
            continue;
        int n = snprintf(s->environment + used, sizeof s->environment - used, "%s%s %s", used ? ", " : "",
                         run->facts[i].key, run->facts[i].value);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

static void summarize(const tw_run *run, tw_summary *s)
{
    memset(s, 0, sizeof *s);
    s->step_records = run->steps;
    s->eval_records = run->evals;
    s->events = run->events;
    memcpy(s->event_counts, run->event_counts, sizeof s->event_counts);
    summarize_steps(run, s);
    summarize_environment(run, s);
    s->eval_metric_count = run->eval_metrics.count;
    for (int i = 0; i < run->eval_metrics.count; i++)
        s->eval_metrics[i] = run->eval_metrics.items[i].s;
}

/* One launch: its summary and the findings of every rule. The launch cites
 * the first one's files, which it does not hold itself. */
static int diagnose_launch(const tw_run *root, int index, const tw_thresholds *t, tw_launch_report *out)
{
    tw_run *view = malloc(sizeof *view);
    if (!view)
        return TW_ENOMEM;
    *view = *tw_run_launch(root, index);
    view->files = root->files;
    view->file_count = root->file_count;
    view->rotation = root->rotation;
    view->inputs = root->inputs; /* the inputs are the log's: a rule may ask how one ends */
    view->input_count = root->input_count;
    summarize(view, &out->summary);
    view->gpu = root->gpu;
    tw_gpu_summarize(root, view, &out->summary.gpu);
    view->gpu_summary = &out->summary.gpu;
    tw_findings findings = {.run = view};
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        rules[i]->check(view, t, &findings);
    if (index == tw_run_launches(root) - 1 && root->launches_folded) {
        /* past TW_LAUNCHES_MAX, launch starts are folded into the last launch kept: say so */
        tw_finding *f = tw_finding_add(&findings, "launches_over_limit", TW_SEV_WARNING,
                                       "More than %d launches: the later ones are analysed together with launch %d",
                                       TW_LAUNCHES_MAX, TW_LAUNCHES_MAX);
        if (f)
            tw_finding_evidence(f, "%llu launch starts (start lines or step counters going back) past the limit",
                                (unsigned long long)root->launches_folded);
        if (f)
            tw_finding_recommend(f, "Split the log at the launch you want (or analyse it with --launch N on a "
                                    "shorter piece of the log).");
    }
    free(view);
    for (int i = 0; i < findings.count; i++)
        findings.items[i].launch = index + 1;
    tw_findings_sort(findings.items, findings.count);
    out->findings = findings.items;
    out->finding_count = findings.count;
    out->healthy = tw_findings_healthy(findings.items, findings.count);
    return TW_OK;
}

int tw_diagnose_launch(const tw_run *run, const tw_thresholds *t, int launch, tw_report **out)
{
    int count = tw_run_launches(run);
    if (launch > count || launch < TW_LAUNCH_LAST)
        return TW_EINVAL;
    tw_report *report = calloc(1, sizeof *report);
    if (!report)
        return TW_ENOMEM;
    report->launches = calloc((size_t)count, sizeof *report->launches);
    report->inputs = calloc((size_t)(run->input_count ? run->input_count : 1), sizeof *report->inputs);
    if (!report->launches || !report->inputs) {
        tw_report_free(report);
        return TW_ENOMEM;
    }
    report->launch_count = count;
    for (int i = 0; i < count; i++) {
        if (diagnose_launch(run, i, t, &report->launches[i]) != TW_OK) {
            tw_report_free(report);
            return TW_ENOMEM;
        }
    }
    tw_launch_spans(run, report);
    report->launch = launch == TW_LAUNCH_LAST ? count : launch;
    if (tw_report_select(run, report) != TW_OK) {
        tw_report_free(report);
        return TW_ENOMEM;
    }
    report->input_count = run->input_count;
    for (int i = 0; i < run->input_count; i++) {
        report->inputs[i] = (tw_input_summary){run->inputs[i].path, run->inputs[i].format, run->inputs[i].lines,
                                               run->inputs[i].records, run->inputs[i].error};
    }
    tw_health_report(report);
    if (tw_health_ranks(run, report) != TW_OK) {
        tw_report_free(report);
        return TW_ENOMEM;
    }
    if (tw_templates_unusual(run, report->healthy, &report->unusual, &report->unusual_count) != TW_OK) {
        tw_report_free(report);
        return TW_ENOMEM;
    }
    *out = report;
    return TW_OK;
}

int tw_diagnose(const tw_run *run, const tw_thresholds *t, tw_report **out)
{
    return tw_diagnose_launch(run, t, TW_LAUNCH_LAST, out);
}

int tw_report_append(tw_report *report, const tw_finding *f)
{
    tw_finding *items = realloc(report->findings, sizeof *items * (size_t)(report->finding_count + 1));
    if (!items)
        return TW_ENOMEM;
    report->findings = items;
    int at = report->finding_count;
    while (at > 0 && items[at - 1].severity < f->severity)
        at--;
    memmove(&items[at + 1], &items[at], sizeof *items * (size_t)(report->finding_count - at));
    items[at] = *f;
    report->finding_count++;
    if (f->severity >= TW_SEV_WARNING)
        report->healthy = false;
    tw_health_compute(&report->summary, report->findings, report->finding_count, &report->health);
    return TW_OK;
}

void tw_report_free(tw_report *report)
{
    if (!report)
        return;
    for (int i = 0; report->launches && i < report->launch_count; i++)
        free(report->launches[i].findings);
    free(report->launches);
    free(report->findings);
    free(report->inputs);
    free(report->unusual);
    free(report->rank_health);
    free(report);
}
