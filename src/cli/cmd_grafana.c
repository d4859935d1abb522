/*
 * cmd_grafana.c: `trainwatch grafana` prints a Grafana dashboard (the
 * classic JSON model, importable as it is) over the metrics run and watch
 * export, as a central Prometheus stores them.
 *
 * The panels are a table: a title, a unit and its queries, each query with
 * the selector "$S", replaced by the template variables' matchers (run,
 * rank, instance), so a panel is one row here and every query is written
 * once. The data source is a variable too, so the dashboard imports into
 * any Grafana without editing.
 */
#include <stdio.h>
#include <string.h>

#include "../core/json.h"
#include "cli.h"

/* Grafana's classic dashboard model as Grafana 12 writes it. */
#define SCHEMA_VERSION 41

typedef struct query {
    const char *expr; /* "$S" stands for the variables' label matchers */
    const char *legend;
} query;

typedef struct panel {
    const char *title;
    const char *unit;
    const char *description;
    bool stacked;
    query queries[3];
} panel;

#define RATE(m) "rate(" m "{$S}[$__rate_interval])"

static const panel panels[] = {
    {"Loss",
     "none",
     "trainwatch_train_loss: the loss each step record printed.",
     false,
     {{"trainwatch_train_loss{$S}", "{{run}} rank {{rank}}"}}},
    {"Learning rate",
     "none",
     "trainwatch_learning_rate of the last step record.",
     false,
     {{"trainwatch_learning_rate{$S}", "{{run}} rank {{rank}}"}}},
    {"Step time: compute and data wait",
     "s",
     "Mean step time split into the data-loader wait and the rest (compute), from the step and data-wait histograms.",
     true,
     {{"(" RATE("trainwatch_step_duration_seconds_sum") " - " RATE("trainwatch_data_wait_seconds_sum") ") / " RATE(
           "trainwatch_step_duration_seconds_count"),
       "compute {{run}} rank {{rank}}"},
      {RATE("trainwatch_data_wait_seconds_sum") " / " RATE("trainwatch_data_wait_seconds_count"),
       "data wait {{run}} rank {{rank}}"}}},
    {"Throughput",
     "none",
     "trainwatch_samples_per_second: samples (or tokens) per second as the log reports.",
     false,
     {{"trainwatch_samples_per_second{$S}", "{{run}} rank {{rank}}"}}},
    {"Time left",
     "s",
     "trainwatch_eta_seconds: the planned steps left at the recent step rate (or the log's own ETA).",
     false,
     {{"trainwatch_eta_seconds{$S}", "{{run}} rank {{rank}}"}}},
    {"Data-wait share of step time",
     "percentunit",
     "Share of step time spent waiting for data; the TrainingDataLoaderBound alert fires above 50%.",
     false,
     {{RATE("trainwatch_data_wait_seconds_sum") " / " RATE("trainwatch_step_duration_seconds_sum"),
       "{{run}} rank {{rank}}"}}},
    {"Memory (process tree)",
     "bytes",
     "Resident memory of the training command's process tree.",
     false,
     {{"trainwatch_process_tree_resident_memory_bytes{$S}", "{{run}} rank {{rank}}"}}},
    {"GPU utilization",
     "percent",
     "DCGM_FI_DEV_GPU_UTIL of each GPU the run uses (NVML, sampled by run).",
     false,
     {{"DCGM_FI_DEV_GPU_UTIL{$S}", "{{run}} rank {{rank}} GPU {{gpu}}"}}},
    {"GPU memory used",
     "decmbytes",
     "DCGM_FI_DEV_FB_USED (MiB) of each GPU.",
     false,
     {{"DCGM_FI_DEV_FB_USED{$S}", "{{run}} rank {{rank}} GPU {{gpu}}"}}},
    {"GPU power",
     "watt",
     "DCGM_FI_DEV_POWER_USAGE of each GPU.",
     false,
     {{"DCGM_FI_DEV_POWER_USAGE{$S}", "{{run}} rank {{rank}} GPU {{gpu}}"}}},
    {"Health score",
     "none",
     "trainwatch_health_score, where the trainwatch version exports it (empty otherwise).",
     false,
     {{"trainwatch_health_score{$S}", "{{run}} rank {{rank}}"}}},
};

#define SELECTOR "run=~\"$run\", rank=~\"$rank\", instance=~\"$instance\""

/* expr with every $S replaced by the selector, as a JSON string. */
static void expr_json(FILE *out, const char *expr)
{
    char text[2048];
    size_t n = 0;
    for (const char *p = expr; *p && n + sizeof SELECTOR < sizeof text; p++) {
        if (p[0] == '$' && p[1] == 'S') {
            memcpy(text + n, SELECTOR, sizeof SELECTOR - 1);
            n += sizeof SELECTOR - 1;
            p++;
        } else {
            text[n++] = *p;
        }
    }
    text[n] = '\0';
    tw_json_cstring(out, text);
}

static void write_panel(FILE *out, const panel *p, int id)
{
    fprintf(out, "    {\n      \"id\": %d,\n      \"type\": \"timeseries\",\n      \"title\": ", id);
    tw_json_cstring(out, p->title);
    fputs(",\n      \"description\": ", out);
    tw_json_cstring(out, p->description);
    fprintf(
        out,
        ",\n      \"datasource\": {\"type\": \"prometheus\", \"uid\": \"${datasource}\"},\n"
        "      \"gridPos\": {\"h\": 8, \"w\": 12, \"x\": %d, \"y\": %d},\n"
        "      \"fieldConfig\": {\"defaults\": {\"unit\": \"%s\", \"custom\": {\"stacking\": {\"mode\": \"%s\"}}}, "
        "\"overrides\": []},\n"
        "      \"options\": {\"legend\": {\"displayMode\": \"list\", \"placement\": \"bottom\", \"showLegend\": true}, "
        "\"tooltip\": {\"mode\": \"multi\", \"sort\": \"none\"}},\n"
        "      \"targets\": [",
        (id - 1) % 2 * 12, (id - 1) / 2 * 8, p->unit, p->stacked ? "normal" : "none");
    for (int i = 0; i < 3 && p->queries[i].expr; i++) {
        fprintf(out,
                "%s\n        {\"refId\": \"%c\", \"datasource\": {\"type\": \"prometheus\", \"uid\": "
                "\"${datasource}\"}, \"expr\": ",
                i ? "," : "", 'A' + i);
        expr_json(out, p->queries[i].expr);
        fputs(", \"legendFormat\": ", out);
        tw_json_cstring(out, p->queries[i].legend);
        fputs("}", out);
    }
    fputs("\n      ]\n    }", out);
}

/* A query variable over one label of trainwatch_train_step, narrowed by
 * the variables before it. */
static void write_variable(FILE *out, const char *name, const char *label, const char *definition)
{
    fprintf(out,
            ",\n      {\"type\": \"query\", \"name\": \"%s\", \"label\": \"%s\", "
            "\"datasource\": {\"type\": \"prometheus\", \"uid\": \"${datasource}\"}, ",
            name, label);
    fputs("\"definition\": ", out);
    tw_json_cstring(out, definition);
    fputs(", \"query\": {\"qryType\": 1, \"query\": ", out);
    tw_json_cstring(out, definition);
    fputs(", \"refId\": \"PrometheusVariableQueryEditor-VariableQuery\"}, \"refresh\": 2, \"includeAll\": true, "
          "\"multi\": true, \"allValue\": \".*\", \"current\": {\"text\": \"All\", \"value\": \"$__all\"}, "
          "\"sort\": 1}",
          out);
}

static void write_dashboard(FILE *out)
{
    fputs("{\n  \"title\": \"trainwatch: training runs\",\n  \"uid\": \"trainwatch-runs\",\n"
          "  \"description\": \"Training runs supervised by trainwatch run/watch (trainwatch grafana).\",\n"
          "  \"tags\": [\"trainwatch\", \"training\"],\n  \"editable\": true,\n  \"graphTooltip\": 1,\n",
          out);
    fprintf(out, "  \"schemaVersion\": %d,\n  \"version\": 1,\n", SCHEMA_VERSION);
    fputs("  \"time\": {\"from\": \"now-6h\", \"to\": \"now\"},\n  \"refresh\": \"30s\",\n", out);
    fputs("  \"templating\": {\n    \"list\": [\n"
          "      {\"type\": \"datasource\", \"name\": \"datasource\", \"label\": \"Data source\", "
          "\"query\": \"prometheus\", \"current\": {}, \"hide\": 0}",
          out);
    write_variable(out, "run", "Run", "label_values(trainwatch_train_step, run)");
    write_variable(out, "rank", "Rank", "label_values(trainwatch_train_step{run=~\"$run\"}, rank)");
    write_variable(out, "instance", "Instance",
                   "label_values(trainwatch_train_step{run=~\"$run\", rank=~\"$rank\"}, instance)");
    fputs("\n    ]\n  },\n", out);
    fputs(
        "  \"annotations\": {\n    \"list\": [\n"
        "      {\"builtIn\": 1, \"datasource\": {\"type\": \"grafana\", \"uid\": \"-- Grafana --\"}, \"enable\": true, "
        "\"hide\": true, \"iconColor\": \"rgba(0, 211, 255, 1)\", \"name\": \"Annotations & Alerts\", \"type\": "
        "\"dashboard\"},\n"
        "      {\"name\": \"Alerts\", \"enable\": true, \"iconColor\": \"red\", "
        "\"datasource\": {\"type\": \"prometheus\", \"uid\": \"${datasource}\"}, \"expr\": ",
        out);
    tw_json_cstring(out, "ALERTS{alertstate=\"firing\", run=~\"$run\"}");
    fputs(", \"step\": \"30s\", \"titleFormat\": \"{{alertname}}\", \"textFormat\": \"{{run}} rank {{rank}} "
          "({{severity}})\", \"tagKeys\": \"alertname,severity\", \"useValueForTime\": false}\n    ]\n  },\n",
          out);
    fputs("  \"panels\": [\n", out);
    for (size_t i = 0; i < sizeof panels / sizeof panels[0]; i++) {
        if (i)
            fputs(",\n", out);
        write_panel(out, &panels[i], (int)i + 1);
    }
    fputs("\n  ]\n}\n", out);
}

static const char usage_text[] =
    "usage: trainwatch grafana\n\n"
    "Prints a Grafana dashboard (JSON, classic model) over the metrics of trainwatch run and\n"
    "watch as a Prometheus stores them: loss, learning rate, step time split, throughput,\n"
    "data-wait share, memory, GPU utilization/memory/power, health score, and firing alerts\n"
    "as annotations; the data source and run/rank/instance are variables. Import it in\n"
    "Grafana (Dashboards > New > Import) or provision it from a file.\n";

static int run(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage_text, stdout);
        return TW_EXIT_OK;
    }
    if (argc > 1) {
        fprintf(stderr, "trainwatch grafana: takes no arguments (see trainwatch grafana --help)\n");
        return TW_EXIT_USAGE;
    }
    write_dashboard(stdout);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "trainwatch grafana: <stdout>: write error\n");
        return TW_EXIT_USAGE;
    }
    return TW_EXIT_OK;
}

const tw_command tw_cmd_grafana = {
    .name = "grafana",
    .summary = "print a Grafana dashboard for the metrics of run and watch",
    .usage = usage_text,
    .run = run,
};
