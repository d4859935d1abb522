/*
 * export.c: writes a tw_ruleset back as one Prometheus rule file, and holds
 * trainwatch's built-in rules.
 *
 * Every string is written double-quoted with YAML escapes, so any expression
 * or template text survives the round trip through promtool and Prometheus.
 */
#include <stdio.h>
#include <string.h>

#include "ruleset.h"
#include "trainwatch/error.h"

static void quoted(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\t': fputs("\\t", out); break;
        case '\r': fputs("\\r", out); break;
        default:
            if (*p < 0x20)
                fprintf(out, "\\x%02x", *p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

static void pairs(FILE *out, const char *what, const tw_rule_pair *p, size_t n)
{
    if (!n)
        return;
    fprintf(out, "        %s:\n", what);
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "          %s: ", p[i].name);
        quoted(out, p[i].text);
        fputc('\n', out);
    }
}

static void duration(FILE *out, const char *indent, const char *key, int64_t ms)
{
    char d[64];
    tw_format_duration(ms, d, sizeof d);
    fprintf(out, "%s%s: %s\n", indent, key, d);
}

int tw_ruleset_export(const tw_ruleset *rs, FILE *out)
{
    fputs("groups:\n", out);
    if (rs->group_count == 0)
        fputs("  []\n", out);
    for (size_t i = 0; i < rs->group_count; i++) {
        const tw_rule_group *g = &rs->groups[i];
        fputs("  - name: ", out);
        quoted(out, g->name);
        fputc('\n', out);
        if (g->has_interval)
            duration(out, "    ", "interval", g->interval_ms);
        if (g->limit > 0)
            fprintf(out, "    limit: %ld\n", g->limit);
        fputs(g->rule_count ? "    rules:\n" : "    rules: []\n", out);
        for (size_t k = 0; k < g->rule_count; k++) {
            const tw_rule *r = &g->rules[k];
            fprintf(out, "      - %s: ", r->alert ? "alert" : "record");
            quoted(out, r->alert ? r->alert : r->record);
            fputs("\n        expr: ", out);
            quoted(out, r->expr_text);
            fputc('\n', out);
            if (r->has_for)
                duration(out, "        ", "for", r->for_ms);
            if (r->has_keep_firing)
                duration(out, "        ", "keep_firing_for", r->keep_firing_ms);
            pairs(out, "labels", r->labels, r->label_count);
            pairs(out, "annotations", r->annotations, r->annotation_count);
        }
    }
    return fflush(out) == 0 && !ferror(out) ? TW_OK : TW_EIO;
}

/* The built-in rules. Metric names are the ones `trainwatch run` and
 * `trainwatch watch` export, so the file also works in a central Prometheus
 * that scrapes them. Rules group and join on (job, run, rank): a run's
 * identity in a Prometheus that scrapes many (job from the scrape, run and
 * rank from trainwatch). Every rule but TrainingFailed is silenced once the
 * run logged its end (finished, exit, signal), so an ended run never fires;
 * TrainingFailed reports the crash that ended it, for 5 minutes. */
static const char default_rules[] =
    "# trainwatch's built-in alerting rules (trainwatch rules defaults).\n"
    "# They read the metrics trainwatch run/watch export; load the same file into\n"
    "# Prometheus to alert centrally (trainwatch prometheus-config prints the scrape\n"
    "# configs). A run that has logged its end (finished, exit, signal) fires none\n"
    "# but TrainingFailed. Until a rank has logged two steps its usual step interval\n"
    "# is unknown: the progress rules then wait 60 s (run) and 120 s (rank).\n"
    "# runbook_url: the section of trainwatch's docs/alerts.md on each alert.\n"
    "groups:\n"
    "  - name: trainwatch-defaults\n"
    "    rules:\n"
    "      - alert: TrainingLossNaN\n"
    "        expr: trainwatch_nan_loss_streak >= 5 unless on(job, run, rank) (trainwatch_log_events_total{event=~\"finished|exit|signal\"} > 0)\n"
    "        labels:\n"
    "          severity: critical\n"
    "        annotations:\n"
    "          summary: \"Loss is NaN/Inf for {{ $value }} consecutive steps\"\n"
    "          description: \"Run {{ $labels.run }} rank {{ $labels.rank }} logged a NaN or Inf loss in the last {{ $value }} step records in a row.\"\n"
    "          runbook_url: \"docs/alerts.md#traininglossnan\"\n"
    "      - alert: TrainingNoProgress\n"
    "        expr: (time() - max by (job, run) (trainwatch_last_progress_timestamp_seconds) > (clamp_min(2 * max by (job, run) (trainwatch_step_interval_seconds), 60) or 0 * max by (job, run) (trainwatch_last_progress_timestamp_seconds) + 60)) unless on(job, run) (max by (job, run) (trainwatch_log_events_total{event=~\"finished|exit|signal\"}) > 0)\n"
    "        labels:\n"
    "          severity: critical\n"
    "        annotations:\n"
    "          summary: \"No training progress for {{ $value | humanizeDuration }}\"\n"
    "          description: \"Run {{ $labels.run }} has logged no new step for {{ $value | humanizeDuration }}, more than twice its usual step time (and at least a minute).\"\n"
    "          runbook_url: \"docs/alerts.md#trainingnoprogress\"\n"
    "      - alert: TrainingRankLost\n"
    "        expr: (time() - trainwatch_last_progress_timestamp_seconds > (clamp_min(5 * trainwatch_step_interval_seconds, 120) or 0 * trainwatch_last_progress_timestamp_seconds + 120)) and on(job, run) (time() - max by (job, run) (trainwatch_last_progress_timestamp_seconds) < 60) unless on(job, run, rank) (trainwatch_log_events_total{event=~\"finished|exit|signal\"} > 0)\n"
    "        labels:\n"
    "          severity: critical\n"
    "        annotations:\n"
    "          summary: \"Rank {{ $labels.rank }} stopped reporting\"\n"
    "          description: \"Rank {{ $labels.rank }} of run {{ $labels.run }} has logged no step for {{ $value | humanizeDuration }} while other ranks go on.\"\n"
    "          runbook_url: \"docs/alerts.md#trainingranklost\"\n"
    "      - alert: TrainingDataLoaderBound\n"
    "        expr: rate(trainwatch_data_wait_seconds_sum[5m]) / rate(trainwatch_step_duration_seconds_sum[5m]) > 0.5 unless on(job, run, rank) (trainwatch_log_events_total{event=~\"finished|exit|signal\"} > 0)\n"
    "        for: 5m\n"
    "        labels:\n"
    "          severity: warning\n"
    "        annotations:\n"
    "          summary: \"Data loading takes {{ $value | humanizePercentage }} of step time\"\n"
    "          description: \"Rank {{ $labels.rank }} of run {{ $labels.run }} waits for data {{ $value | humanizePercentage }} of each step (over 50% for 5 minutes): the input pipeline is the bottleneck.\"\n"
    "          runbook_url: \"docs/alerts.md#trainingdataloaderbound\"\n"
    "      - alert: TrainingGPUUnderused\n"
    "        expr: avg by (job, run, rank) (DCGM_FI_DEV_GPU_UTIL) < 30 and on(job, run, rank) changes(trainwatch_train_step[2m]) > 0\n"
    "        for: 10m\n"
    "        labels:\n"
    "          severity: warning\n"
    "        annotations:\n"
    "          summary: \"GPU utilization {{ $value }}% while training\"\n"
    "          description: \"The GPUs of rank {{ $labels.rank }} (run {{ $labels.run }}) average {{ $value }}% utilization for 10 minutes while steps are running.\"\n"
    "          runbook_url: \"docs/alerts.md#traininggpuunderused\"\n"
    "      - alert: TrainingGPUMemoryFull\n"
    "        expr: DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) > 0.95 unless on(job, run, rank) (trainwatch_log_events_total{event=~\"finished|exit|signal\"} > 0)\n"
    "        for: 1m\n"
    "        labels:\n"
    "          severity: warning\n"
    "        annotations:\n"
    "          summary: \"GPU {{ $labels.gpu }} memory {{ $value | humanizePercentage }} full\"\n"
    "          description: \"GPU {{ $labels.gpu }} of rank {{ $labels.rank }} (run {{ $labels.run }}) uses {{ $value | humanizePercentage }} of its memory: close to an out-of-memory error.\"\n"
    "          runbook_url: \"docs/alerts.md#traininggpumemoryfull\"\n"
    "      - alert: TrainingFailed\n"
    "        expr: increase(trainwatch_log_events_total{event=~\"oom|exception\"}[5m]) > 0\n"
    "        labels:\n"
    "          severity: critical\n"
    "        annotations:\n"
    "          summary: \"Training logged an error: {{ $labels.event }}\"\n"
    "          description: \"Rank {{ $labels.rank }} of run {{ $labels.run }} logged an {{ $labels.event }} event in the last 5 minutes.\"\n"
    "          runbook_url: \"docs/alerts.md#trainingfailed\"\n"
    "      - alert: TrainingLossDiverging\n"
    "        expr: avg_over_time(trainwatch_train_loss[5m]) > 2 * avg_over_time(trainwatch_train_loss[15m] offset 5m) unless on(job, run, rank) (trainwatch_log_events_total{event=~\"finished|exit|signal\"} > 0)\n"
    "        for: 2m\n"
    "        labels:\n"
    "          severity: warning\n"
    "        annotations:\n"
    "          summary: \"Loss average {{ $value }} is over twice its earlier baseline\"\n"
    "          description: \"The 5-minute average loss of rank {{ $labels.rank }} (run {{ $labels.run }}) is {{ $value }}, more than twice its average over the 15 minutes before: the run is diverging.\"\n"
    "          runbook_url: \"docs/alerts.md#traininglossdiverging\"\n"
    "      - alert: TrainingFp16Overflowing\n"
    "        expr: increase(trainwatch_log_events_total{event=\"overflow\"}[15m]) > 32 unless on(job, run, rank) (trainwatch_log_events_total{event=~\"finished|exit|signal\"} > 0)\n"
    "        labels:\n"
    "          severity: warning\n"
    "        annotations:\n"
    "          summary: \"{{ $value }} fp16 overflows (skipped steps) in 15 minutes\"\n"
    "          description: \"The loss scaler of rank {{ $labels.rank }} (run {{ $labels.run }}) skipped {{ $value }} steps on overflow in 15 minutes, more than a whole start-up burst (32 halvings): the gradients keep overflowing and those steps train nothing.\"\n"
    "          runbook_url: \"docs/alerts.md#trainingfp16overflowing\"\n"
    "      - alert: TrainingOverBudget\n"
    "        expr: trainwatch_cost_total + on(job, run, rank) trainwatch_eta_seconds / 3600 * on(job, run, rank) trainwatch_cost_per_hour > on(job, run, rank) trainwatch_budget or trainwatch_cost_total > on(job, run, rank) trainwatch_budget\n"
    "        for: 2m\n"
    "        labels:\n"
    "          severity: warning\n"
    "        annotations:\n"
    "          summary: \"The run will cost {{ $value | printf \\\"%.2f\\\" }}, past its budget\"\n"
    "          description: \"Run {{ $labels.run }} (rank {{ $labels.rank }}) has cost so far plus its remaining time at the current GPUs' price {{ $value | printf \\\"%.2f\\\" }}, more than its budget (--budget).\"\n"
    "          runbook_url: \"docs/alerts.md#trainingoverbudget\"\n"
    "      - alert: TrainingSlowerThanHistory\n"
    "        expr: max by (job, run) (trainwatch_step_time_vs_baseline) > on(job, run) (max by (job, run) (trainwatch_baseline_step_seconds{stat=\"limit\"}) / max by (job, run) (trainwatch_baseline_step_seconds{stat=\"p50\"})) unless on(job, run) (max by (job, run) (trainwatch_log_events_total{event=~\"finished|exit|signal\"}) > 0)\n"
    "        for: 5m\n"
    "        labels:\n"
    "          severity: warning\n"
    "        annotations:\n"
    "          summary: \"Steps take {{ $value | printf \\\"%.2f\\\" }}x the median of the job's last runs\"\n"
    "          description: \"The slowest rank of run {{ $labels.run }} has taken {{ $value | printf \\\"%.2f\\\" }}x the median step time of its job's last runs in the history for 5 minutes: more than 25% and three robust deviations over it.\"\n"
    "          runbook_url: \"docs/alerts.md#trainingslowerthanhistory\"\n";

const char *tw_default_rules(void) { return default_rules; }
