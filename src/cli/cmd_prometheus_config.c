/*
 * cmd_prometheus_config.c: `trainwatch prometheus-config` prints a
 * prometheus.yml that scrapes run and watch: one scrape job of the kind
 * asked (static targets, the --sd-file files of each node, or Kubernetes
 * pods by their prometheus.io annotations), the rule-file stanza for
 * `trainwatch rules export`, and optionally an Alertmanager.
 *
 * The kinds are a table of writers, one per way of finding targets. Only
 * file_sd sets honor_labels: the files' target labels (run, rank, host)
 * repeat labels the series carry, and Prometheus would otherwise rename
 * the series' copies exported_run and exported_rank (scrape.go
 * mutateSampleLabels); trainwatch exports no job or instance, so honoring
 * changes nothing else.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define TARGETS_MAX 64

typedef struct config_options {
    const char *job, *interval, *rules, *alertmanager, *sd_files;
    const char *targets[TARGETS_MAX];
    size_t target_count;
} config_options;

/* YAML double-quoted, for values from the command line. */
static void quoted(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

static void write_static(FILE *out, const config_options *o)
{
    fputs("    # one target per run: the address of its --web.listen-address\n    static_configs:\n"
          "      - targets:\n",
          out);
    if (!o->target_count)
        fputs("          - \"localhost:9464\"\n", out);
    for (size_t i = 0; i < o->target_count; i++) {
        fputs("          - ", out);
        quoted(out, o->targets[i]);
        fputc('\n', out);
    }
}

static void write_file_sd(FILE *out, const config_options *o)
{
    fputs("    # the runs of each node, as run/watch --sd-file FILE writes them (labels run, rank,\n"
          "    # host); new runs are scraped with no change here. honor_labels: the files' run and\n"
          "    # rank repeat the series' own (trainwatch sets neither job nor instance).\n"
          "    honor_labels: true\n    file_sd_configs:\n      - files:\n          - ",
          out);
    quoted(out, o->sd_files ? o->sd_files : "/var/lib/trainwatch/sd/*.json");
    fputs("\n        refresh_interval: 1m\n", out);
}

static void write_kubernetes(FILE *out, const config_options *o)
{
    (void)o;
    fputs("    # pods annotated prometheus.io/scrape: \"true\", prometheus.io/port (the port of\n"
          "    # trainwatch's --web.listen-address) and optionally prometheus.io/path\n"
          "    # (examples/kubernetes/ has a sidecar pod and a PodMonitor for the Prometheus Operator)\n"
          "    kubernetes_sd_configs:\n      - role: pod\n    relabel_configs:\n"
          "      - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scrape]\n"
          "        action: keep\n        regex: \"true\"\n"
          "      - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_path]\n"
          "        action: replace\n        regex: (.+)\n        target_label: __metrics_path__\n"
          "      - source_labels: [__address__, __meta_kubernetes_pod_annotation_prometheus_io_port]\n"
          "        action: replace\n        regex: ([^:]+)(?::\\d+)?;(\\d+)\n        replacement: $1:$2\n"
          "        target_label: __address__\n"
          "      - source_labels: [__meta_kubernetes_namespace]\n        target_label: namespace\n"
          "      - source_labels: [__meta_kubernetes_pod_name]\n        target_label: pod\n"
          "      - source_labels: [__meta_kubernetes_pod_node_name]\n        target_label: node\n",
          out);
}

static const struct {
    const char *name;
    void (*write)(FILE *out, const config_options *o);
} kinds[] = {{"static", write_static}, {"file-sd", write_file_sd}, {"kubernetes", write_kubernetes}};

static void write_config(FILE *out, const config_options *o, size_t kind)
{
    fputs("# prometheus.yml for trainwatch run/watch (trainwatch prometheus-config).\n", out);
    fputs("global:\n  scrape_interval: ", out);
    fputs(o->interval, out);
    fputs("\n  evaluation_interval: ", out);
    fputs(o->interval, out);
    fputs("\n# the built-in rules and yours: trainwatch rules export -o FILE\nrule_files:\n  - ", out);
    quoted(out, o->rules);
    fputc('\n', out);
    if (o->alertmanager) {
        fputs("alerting:\n  alertmanagers:\n    - static_configs:\n        - targets:\n            - ", out);
        quoted(out, o->alertmanager);
        fputc('\n', out);
    }
    fputs("scrape_configs:\n  - job_name: ", out);
    quoted(out, o->job);
    fputc('\n', out);
    kinds[kind].write(out, o);
}

static const char usage_text[] =
    "usage: trainwatch prometheus-config [static|file-sd|kubernetes] [OPTIONS]\n\n"
    "Prints a prometheus.yml that scrapes trainwatch run/watch and loads its rules:\n"
    "  static       the targets given (--target, repeatable; default localhost:9464)\n"
    "  file-sd      the files run/watch --sd-file write on each node (the default)\n"
    "  kubernetes   pods annotated prometheus.io/scrape, prometheus.io/port\n\n"
    "options:\n"
    "  --job NAME             the scrape job's name (default trainwatch; give run/watch --sd-job\n"
    "                         the same for their own alerts to match)\n"
    "  --target HOST:PORT     a static target (repeatable)\n"
    "  --sd-files GLOB        the --sd-file files (default /var/lib/trainwatch/sd/*.json)\n"
    "  --rules FILE           the file of trainwatch rules export (default trainwatch-rules.yml)\n"
    "  --alertmanager HOST:PORT  send alerts there\n"
    "  --interval DURATION    scrape and evaluation interval (default 15s)\n";

static int parse(int argc, char **argv, config_options *o, size_t *kind)
{
    static const struct option longopts[] = {
        {"job", 1, 0, 'j'},      {"target", 1, 0, 't'},       {"sd-files", 1, 0, 's'}, {"rules", 1, 0, 'r'},
        {"interval", 1, 0, 'i'}, {"alertmanager", 1, 0, 'a'}, {"help", 0, 0, 'h'},     {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j':
            o->job = optarg;
            break;
        case 's':
            o->sd_files = optarg;
            break;
        case 'r':
            o->rules = optarg;
            break;
        case 'i':
            o->interval = optarg;
            break;
        case 'a':
            o->alertmanager = optarg;
            break;
        case 't':
            if (o->target_count == TARGETS_MAX) {
                fprintf(stderr, "trainwatch prometheus-config: at most %d --target\n", TARGETS_MAX);
                return -1;
            }
            o->targets[o->target_count++] = optarg;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return 1;
        default:
            fprintf(stderr, "trainwatch prometheus-config: unknown or incomplete option '%s' (see --help)\n",
                    argv[optind - 1]);
            return -1;
        }
    }
    *kind = 1;
    if (optind < argc) {
        size_t i = 0;
        while (i < sizeof kinds / sizeof kinds[0] && strcmp(kinds[i].name, argv[optind]))
            i++;
        if (i == sizeof kinds / sizeof kinds[0] || optind + 1 < argc) {
            fprintf(stderr, "trainwatch prometheus-config: '%s': expected one of static, file-sd, kubernetes\n",
                    argv[optind]);
            return -1;
        }
        *kind = i;
    }
    if (o->target_count && *kind != 0) {
        fprintf(stderr, "trainwatch prometheus-config: --target is for static\n");
        return -1;
    }
    return 0;
}

static int run(int argc, char **argv)
{
    config_options o = {.job = "trainwatch", .interval = "15s", .rules = "trainwatch-rules.yml"};
    size_t kind;
    int rc = parse(argc, argv, &o, &kind);
    if (rc)
        return rc > 0 ? TW_EXIT_OK : TW_EXIT_USAGE;
    write_config(stdout, &o, kind);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "trainwatch prometheus-config: <stdout>: write error\n");
        return TW_EXIT_USAGE;
    }
    return TW_EXIT_OK;
}

const tw_command tw_cmd_prometheus_config = {
    .name = "prometheus-config",
    .summary = "print a prometheus.yml that scrapes run/watch (static, file_sd, Kubernetes)",
    .usage = usage_text,
    .run = run,
};
