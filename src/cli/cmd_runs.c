/*
 * cmd_runs.c: `trainwatch runs` lists the runs the history holds, `runs
 * show ID` shows one, `runs prune` bounds the file. The verbs are a table;
 * the history itself is trainwatch/history.h.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rules/ruleset.h"
#include "cli.h"
#include "history.h"
#include "trainwatch/error.h"

typedef struct runs_options {
    const char *history; /* --history FILE; NULL: the default */
    const char *job;     /* --job NAME */
    long limit;          /* --limit N; 0: all */
    bool json;
    long keep;          /* --keep N; -1: not given */
    double older_than;  /* --older-than D, seconds; 0: not given */
    tw_history_prometheus prometheus; /* --prometheus URL, --since D; url NULL: not from a Prometheus */
    const char *prometheus_headers[TW_CLI_PROMETHEUS_HEADERS]; /* --prometheus-header values */
} runs_options;

#define DEFAULT_SINCE (15 * 86400.0) /* Prometheus's default retention */

static const char usage_text[] =
    "usage: trainwatch runs [list] [--job NAME] [--limit N] [--json] [--history FILE]\n"
    "       trainwatch runs show ID|NAME [--json] [--history FILE]\n"
    "       trainwatch runs prune (--keep N | --older-than DURATION) [--history FILE]\n"
    "       trainwatch runs [list [SELECTOR] | show SELECTOR] --prometheus URL [--since D] [--json]\n\n"
    "The runs analyze, run and watch recorded (see --no-history), newest first:\n"
    "when, job, steps, duration, outcome, health, final loss, throughput. show\n"
    "prints one run's summary, findings and environment (--json: also its series);\n"
    "ID is the number runs lists, NAME the newest run of that name or job.\n"
    "With --prometheus, the runs a Prometheus HTTP API (Prometheus, Thanos, Mimir)\n"
    "holds of what run and watch exported: each value of the run label, or the\n"
    "run a label selector picks (run=\"a\").\n\n"
    "options:\n"
    "  --history FILE       the history file (default $XDG_DATA_HOME/trainwatch/runs.db)\n"
    "  --job NAME           only the runs of this job\n"
    "  --limit N            only the newest N runs\n"
    "  --json               as JSON (schema " TW_HISTORY_RUNS_SCHEMA ", show: " TW_HISTORY_RUN_SCHEMA ")\n"
    "  --keep N             prune: keep the newest N runs\n"
    "  --older-than D       prune: remove the runs recorded longer ago than D (30d, 12h)\n"
    "  --prometheus URL     list or show the runs a Prometheus holds instead of the history's\n"
    "  --prometheus-header 'NAME: VALUE'\n"
    "                       with --prometheus: a request header (X-Scope-OrgID for Mimir), up to 8\n"
    "  --since D            with --prometheus: look this far back (default 15d)\n"
    "  -h, --help           show this help\n";

enum { OPT_HISTORY = 1000, OPT_JOB, OPT_LIMIT, OPT_JSON, OPT_KEEP, OPT_OLDER, OPT_HELP };

static int parse(int argc, char **argv, runs_options *o)
{
    static const struct option longopts[] = {
        {"history", 1, 0, OPT_HISTORY}, {"job", 1, 0, OPT_JOB},         {"limit", 1, 0, OPT_LIMIT},
        {"json", 0, 0, OPT_JSON},       {"keep", 1, 0, OPT_KEEP},       {"older-than", 1, 0, OPT_OLDER},
        TW_CLI_PROMETHEUS_LONGOPTS,     {"help", 0, 0, OPT_HELP},
        {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case OPT_HISTORY:
            o->history = optarg;
            break;
        case OPT_JOB:
            o->job = optarg;
            break;
        case OPT_LIMIT:
        case OPT_KEEP: {
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || errno || v < 0 || (c == OPT_LIMIT && v == 0)) {
                fprintf(stderr, "trainwatch runs: --%s takes a whole number%s, not '%s'\n",
                        c == OPT_LIMIT ? "limit" : "keep", c == OPT_LIMIT ? " above 0" : "", optarg);
                return -1;
            }
            *(c == OPT_LIMIT ? &o->limit : &o->keep) = v;
            break;
        }
        case OPT_OLDER: {
            int64_t ms;
            if (!tw_parse_duration(optarg, &ms) || ms <= 0) {
                fprintf(stderr, "trainwatch runs: --older-than takes a duration (30d, 12h, 90m), not '%s'\n",
                        optarg);
                return -1;
            }
            o->older_than = (double)ms / 1000.0;
            break;
        }
        case OPT_JSON:
            o->json = true;
            break;
        case 'h':
        case OPT_HELP:
            fputs(usage_text, stdout);
            exit(TW_EXIT_OK);
        default: {
            int taken = tw_cli_prometheus_option("runs", c, optarg, &o->prometheus, o->prometheus_headers);
            if (taken < 0)
                return -1;
            if (taken == 0)
                break;
            fprintf(stderr, "trainwatch runs: unknown or incomplete option '%s' (see trainwatch help runs)\n",
                    argv[optind - 1]);
            return -1;
        }
        }
    }
    return optind;
}

/* ---- list ------------------------------------------------------------ */

static const char *loss_text(const tw_history_entry *e, char *buf, size_t cap)
{
    if (e->final_loss_nan)
        snprintf(buf, cap, "nan");
    else if (isfinite(e->final_loss))
        snprintf(buf, cap, "%.4g", e->final_loss);
    else
        snprintf(buf, cap, "?");
    return buf;
}

static const char *throughput_text(double v, char *buf, size_t cap)
{
    if (isfinite(v))
        snprintf(buf, cap, v >= 1e4 ? "%.0f/s" : "%.4g/s", v);
    else
        snprintf(buf, cap, "?");
    return buf;
}

/* The table of runs: the first column their ID, or for runs read from a
 * Prometheus (no ID) their run label, by which compare names them. */
static void write_table(const tw_history_entry *runs, size_t n, bool by_name)
{
    printf(by_name ? "%-20s %-16s %-28s %9s %8s %-14s %6s %10s %12s %9s %9s\n"
                   : "%-5s %-16s %-28s %9s %8s %-14s %6s %10s %12s %9s %9s\n",
           by_name ? "RUN" : "ID", by_name ? "STARTED" : "RECORDED", "JOB", "STEPS", "DURATION", "OUTCOME", "HEALTH",
           "FINAL LOSS", "THROUGHPUT", "GPU-HOURS", "COST");
    for (size_t i = 0; i < n; i++) {
        const tw_history_entry *e = &runs[i];
        char when[32], dur[32], loss[32], ips[32], steps[32], health[16], id[32], hours[32], cost[32];
        snprintf(id, sizeof id, "%lld", (long long)e->id);
        printf(by_name ? "%-20.20s " : "%-5s ", by_name ? e->name : id);
        snprintf(steps, sizeof steps, e->last_step >= 0 ? "%lld" : "?", (long long)e->last_step);
        snprintf(health, sizeof health, isfinite(e->health) ? "%.0f" : "?", e->health);
        printf("%-16s %-28.28s %9s %8s %-14.14s %6s %10s %12s %9s %9s\n",
               tw_history_time_text(e->recorded, when, sizeof when), e->job, steps,
               tw_history_duration_text(e->duration, dur, sizeof dur), e->outcome[0] ? e->outcome : "?", health,
               loss_text(e, loss, sizeof loss), throughput_text(e->throughput, ips, sizeof ips),
               tw_history_gpu_hours_text(e, hours, sizeof hours), tw_history_cost_text(e, cost, sizeof cost));
    }
}

static void write_list(const runs_options *o, const tw_history_entry *runs, size_t n)
{
    if (o->json) {
        printf("{\"schema\":\"%s\",\"runs\":[", TW_HISTORY_RUNS_SCHEMA);
        for (size_t i = 0; i < n; i++) {
            if (i)
                putchar(',');
            tw_history_entry_write_json(stdout, &runs[i]);
        }
        printf("]}\n");
    } else if (n) {
        write_table(runs, n, o->prometheus.url != NULL);
    } else if (o->prometheus.url) {
        printf("no runs with training steps in the last %s\n", tw_history_duration_text(o->prometheus.since,
                                                                                          (char[32]){0}, 32));
    } else {
        printf("no runs recorded%s%s\n", o->job ? " for job " : "", o->job ? o->job : "");
    }
}

static int verb_list(tw_history *h, const runs_options *o, int argc, char **argv)
{
    (void)argv;
    if (argc) {
        fprintf(stderr, "trainwatch runs: list takes no arguments (see trainwatch help runs)\n");
        return TW_EXIT_USAGE;
    }
    tw_history_filter f = {.job = o->job, .limit = (int)o->limit};
    tw_history_entry *runs;
    size_t n;
    char err[600];
    if (tw_history_list(h, &f, &runs, &n, err, sizeof err) != TW_OK) {
        fprintf(stderr, "trainwatch runs: %s\n", err);
        return TW_EXIT_USAGE;
    }
    write_list(o, runs, n);
    free(runs);
    return TW_EXIT_OK;
}

/* ---- show ------------------------------------------------------------ */

static void write_run(const tw_history_view *v)
{
    const tw_history_entry *e = &v->entry;
    char when[32], dur[32], loss[32], ips[32];
    printf("run %lld: %s (job %s), %s on %s, recorded %s\n", (long long)e->id, e->name, e->job, e->source, e->host,
           tw_history_time_text(e->recorded, when, sizeof when));
    if (e->command[0])
        printf("  command: %s\n", e->command);
    if (e->inputs[0])
        printf("  inputs: %s\n", e->inputs);
    printf("  outcome: %s%s%s; health %.0f/100%s\n", e->outcome[0] ? e->outcome : "?",
           e->outcome_detail[0] ? ": " : "", e->outcome_detail, e->health, e->healthy ? ", healthy" : "");
    printf("  steps %lld -> %lld (%lld records, %d rank%s, launch %d of %d), %s\n", (long long)e->first_step,
           (long long)e->last_step, (long long)e->step_records, e->ranks, e->ranks == 1 ? "" : "s", e->launch,
           e->launches, tw_history_duration_text(e->duration, dur, sizeof dur));
    char share[16];
    snprintf(share, sizeof share, isfinite(e->data_share) ? "%.0f%%" : "?", 100 * e->data_share);
    printf("  step time p50 %.4g s, p95 %.4g s; data wait %s; throughput %s\n", e->step_p50, e->step_p95, share,
           throughput_text(e->throughput, ips, sizeof ips));
    printf("  loss first/best/final %.4g / %.4g / %s\n", e->first_loss, e->best_loss, loss_text(e, loss, sizeof loss));
    if (e->environment[0])
        printf("  environment: %s\n", e->environment);
    if (isfinite(e->gpu_seconds)) {
        char hours[32], cost[32];
        printf("  GPU time: %s GPU-hours on %d GPU%s, %.0f%% of it idle (under %.0f%% utilisation)",
               tw_history_gpu_hours_text(e, hours, sizeof hours), e->gpus, e->gpus == 1 ? "" : "s",
               e->gpu_seconds > 0 ? 100 * e->idle_seconds / e->gpu_seconds : 0, e->idle_below);
        if (isfinite(e->cost)) {
            char idle[32];
            tw_history_entry idle_part = *e; /* the idle money, written as the money is */
            idle_part.cost = e->idle_cost;
            printf("; cost %s (%s), %s of it idle", tw_history_cost_text(e, cost, sizeof cost), e->price_source,
                   tw_history_cost_text(&idle_part, idle, sizeof idle));
        }
        if (isfinite(e->budget))
            printf("; budget %.4g", e->budget);
        printf("\n");
    }
    for (size_t i = 0; i < v->finding_count; i++)
        printf("  %-7s %s: %s\n", v->findings[i].severity, v->findings[i].rule, v->findings[i].title);
    if (v->series_count) {
        printf("  series:");
        for (size_t i = 0; i < v->series_count; i++)
            printf(" %s (%zu)", v->series[i].metric, v->series[i].count);
        printf("\n");
    }
}

static void write_view(const runs_options *o, const tw_history_view *v)
{
    if (o->json) {
        printf("{\"schema\":\"%s\",\"run\":", TW_HISTORY_RUN_SCHEMA);
        tw_history_view_write_json(stdout, v);
        printf("}\n");
    } else {
        write_run(v);
    }
}

static int verb_show(tw_history *h, const runs_options *o, int argc, char **argv)
{
    if (argc != 1) {
        fprintf(stderr, "trainwatch runs: show takes one run: its ID or name (see trainwatch runs)\n");
        return TW_EXIT_USAGE;
    }
    char err[600];
    tw_history_entry e;
    tw_history_view v;
    if (tw_history_find(h, argv[0], &e, err, sizeof err) != TW_OK ||
        tw_history_view_load(h, e.id, &v, err, sizeof err) != TW_OK) {
        fprintf(stderr, "trainwatch runs: %s\n", err);
        return TW_EXIT_USAGE;
    }
    write_view(o, &v);
    tw_history_view_free(&v);
    return TW_EXIT_OK;
}

/* ---- prune ----------------------------------------------------------- */

static int verb_prune(tw_history *h, const runs_options *o, int argc, char **argv)
{
    (void)argv;
    if (argc || (o->keep < 0 && o->older_than <= 0)) {
        fprintf(stderr, "trainwatch runs: prune takes --keep N or --older-than DURATION\n");
        return TW_EXIT_USAGE;
    }
    int64_t removed;
    char err[600];
    if (tw_history_prune(h, o->keep, o->older_than, &removed, err, sizeof err) != TW_OK) {
        fprintf(stderr, "trainwatch runs: %s\n", err);
        return TW_EXIT_USAGE;
    }
    printf("removed %lld run%s\n", (long long)removed, removed == 1 ? "" : "s");
    return TW_EXIT_OK;
}

/* ---- from a Prometheus --------------------------------------------- */

static int prometheus_list(const runs_options *o, int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "trainwatch runs: list takes at most one label selector (see trainwatch help runs)\n");
        return TW_EXIT_USAGE;
    }
    tw_history_entry *runs;
    size_t n;
    char err[600];
    if (tw_history_prometheus_list(&o->prometheus, argc ? argv[0] : NULL, &runs, &n, err, sizeof err) != TW_OK) {
        fprintf(stderr, "trainwatch runs: %s\n", err);
        return TW_EXIT_USAGE;
    }
    size_t kept = 0; /* --job and --limit as over the history file */
    for (size_t i = 0; i < n && (!o->limit || kept < (size_t)o->limit); i++)
        if (!o->job || strcmp(runs[i].job, o->job) == 0)
            runs[kept++] = runs[i];
    write_list(o, runs, kept);
    free(runs);
    return TW_EXIT_OK;
}

static int prometheus_show(const runs_options *o, int argc, char **argv)
{
    if (argc != 1) {
        fprintf(stderr, "trainwatch runs: show takes one run: a label selector such as run=\"a\"\n");
        return TW_EXIT_USAGE;
    }
    char err[600];
    tw_history_view v;
    if (tw_history_prometheus_view(&o->prometheus, argv[0], &v, err, sizeof err) != TW_OK) {
        fprintf(stderr, "trainwatch runs: %s\n", err);
        return TW_EXIT_USAGE;
    }
    write_view(o, &v);
    tw_history_view_free(&v);
    return TW_EXIT_OK;
}

/* Each verb on the history file and, where it has a meaning there, on a
 * Prometheus (which prunes by its own retention). */
static const struct runs_verb {
    const char *name;
    int (*run)(tw_history *h, const runs_options *o, int argc, char **argv);
    int (*from_prometheus)(const runs_options *o, int argc, char **argv);
} verbs[] = {
    {"list", verb_list, prometheus_list},
    {"show", verb_show, prometheus_show},
    {"prune", verb_prune, NULL},
};

static int run(int argc, char **argv)
{
    runs_options o = {.keep = -1, .prometheus = {.since = DEFAULT_SINCE, .until = NAN}};
    int first = parse(argc, argv, &o);
    if (first < 0)
        return TW_EXIT_USAGE;
    const struct runs_verb *verb = &verbs[0];
    if (first < argc) {
        verb = NULL;
        for (size_t i = 0; i < sizeof verbs / sizeof verbs[0] && !verb; i++)
            verb = strcmp(argv[first], verbs[i].name) == 0 ? &verbs[i] : NULL;
        if (!verb) {
            fprintf(stderr, "trainwatch runs: unknown verb '%s' (list, show or prune)\n", argv[first]);
            return TW_EXIT_USAGE;
        }
        first++;
    }
    if (o.prometheus.url) {
        if (!verb->from_prometheus) {
            fprintf(stderr, "trainwatch runs: %s is for the history file; a Prometheus keeps its own retention\n",
                    verb->name);
            return TW_EXIT_USAGE;
        }
        return verb->from_prometheus(&o, argc - first, argv + first);
    }
    tw_history *h = tw_cli_history_open("runs", o.history);
    if (!h)
        return TW_EXIT_USAGE;
    int status = verb->run(h, &o, argc - first, argv + first);
    tw_history_close(h);
    return status;
}

const tw_command tw_cmd_runs = {
    .name = "runs",
    .summary = "list the runs recorded in the history, show one, prune them",
    .usage = usage_text,
    .run = run,
};
