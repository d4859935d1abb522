/*
 * cmd_watch.c: `trainwatch watch [options] FILE|GLOB...` follows training
 * logs as they grow (tail -F, rotation-proof, resumable with --state),
 * serves what they say as Prometheus metrics, warns live about NaN losses,
 * OOMs, exceptions and stalls, and prints the diagnosis when stopped.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/clock.h"
#include "supervision.h"
#include "cli.h"
#include "sinks.h"
#include "trainwatch/analyze.h"
#include "trainwatch/error.h"
#include "trainwatch/follow.h"
#include "trainwatch/http.h"
#include "trainwatch/live.h"
#include "trainwatch/record_json.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

typedef struct watch_options {
    tw_cli_supervision sup;
    tw_follow_options follow;
    const char *records_path;
    double duration;
    bool json;
} watch_options;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: trainwatch watch [OPTIONS] FILE|GLOB...\n\n"
            "Follows training logs as they grow (rotation by rename or copy-truncate, new files\n"
            "matching a glob such as 'log/workerlog.*'), serves their metrics, warns about NaN,\n"
            "OOM, exceptions and stalls, and prints the diagnosis when stopped (SIGINT/SIGTERM).\n\n"
            "options:\n"
            "  --from-start                read files present at start from their beginning (default: the end)\n"
            "  --state FILE                remember positions across restarts (written atomically)\n"
            "  --records FILE              also append the records as JSON lines (exactly once with --state)\n"
            "  --format NAME               use this log format (see trainwatch formats)\n"
            "  --job NAME                  the job label of the metrics (default: watch)\n"
            "  --web.listen-address ADDR   serve /metrics here (default " TW_HTTP_DEFAULT_ADDRESS "; 'none': do not serve)\n"
            "  --web.config.file FILE      TLS and basic auth, exporter-toolkit format\n"
            "  --stall-after SECONDS       warn when no step arrives for this long (default: 10x the\n"
            "                              usual step interval, at least 60)\n"
            "  --duration SECONDS          stop after this long (default: until a signal)\n"
            "  --json                      print the final diagnosis as JSON\n\n%s",
            tw_cli_alerts_usage);
}

static int parse(int argc, char **argv, watch_options *o)
{
    static const struct option longopts[] = {
        {"from-start", 0, 0, 'f'}, {"state", 1, 0, 's'}, {"records", 1, 0, 'r'},
        {"duration", 1, 0, 'd'},   {"json", 0, 0, 'J'},  {"help", 0, 0, 'h'},
        TW_CLI_SUPERVISION_LONGOPTS, {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f': o->follow.from_start = true; break;
        case 's': o->follow.state_file = optarg; break;
        case 'r': o->records_path = optarg; break;
        case 'd':
            if (tw_cli_number("watch", "duration", optarg, &o->duration))
                return -1;
            break;
        case 'J': o->json = true; break;
        case 'h': usage(stdout); exit(TW_EXIT_OK);
        default:
            if (tw_cli_supervision_option(&o->sup, "watch", c, optarg, argv[optind - 1]) < 0)
                return -1;
        }
    }
    o->follow.format = o->sup.format;
    if (optind >= argc) {
        fprintf(stderr, "trainwatch watch: no files to follow\n");
        return -1;
    }
    return optind;
}

/* Many followed files need many descriptors: take what the hard limit
 * allows (the follower closes idle files beyond what that leaves). */
static void raise_descriptor_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        fprintf(stderr, "trainwatch watch: raising the open-files limit: %s\n", strerror(errno));
}

static int finish(tw_cli_sinks *s, const watch_options *o, const tw_follow_stats *st)
{
    fprintf(stderr, "trainwatch watch: %llu lines from %llu files (%llu rotations, %llu truncations%s)\n",
            (unsigned long long)st->lines, (unsigned long long)st->files, (unsigned long long)st->rotations,
            (unsigned long long)st->truncations, st->inotify ? "" : ", polling");
    tw_thresholds t;
    tw_thresholds_default(&t);
    tw_report *report;
    if (tw_diagnose(s->run, &t, &report) != TW_OK)
        return TW_EXIT_USAGE;
    if (o->json)
        tw_report_write_json(stdout, report);
    else
        tw_report_write_text(stdout, report, isatty(STDOUT_FILENO));
    int status = TW_EXIT_OK;
    for (int i = 0; i < report->finding_count; i++) {
        if (report->findings[i].severity == TW_SEV_ERROR)
            status = TW_EXIT_PROBLEMS;
    }
    tw_report_free(report);
    return status;
}

static int run(int argc, char **argv)
{
    watch_options o = {.sup = {.serve = true, .job = "watch"}};
    int first = parse(argc, argv, &o);
    if (first < 0)
        return TW_EXIT_USAGE;
    tw_cli_sinks s = {0};
    int status = TW_EXIT_USAGE;
    tw_registry *reg = NULL;
    tw_http_server *server = NULL;
    tw_follower *follower = NULL;
    char err[512];
    if (tw_registry_new(&reg) != TW_OK || tw_run_new(&s.run, NULL) != TW_OK)
        goto done;
    tw_process_collector_register(reg);
    tw_live_options lo = {.registry = reg, .job = o.sup.job, .stall_after = o.sup.stall_after, .warnings = stderr};
    if (tw_live_new(&lo, &s.live) != TW_OK)
        goto done;
    if (tw_cli_alerts_start(&o.sup.alerts, "watch", reg) != TW_OK)
        goto done;
    if (o.records_path && !(s.records = fopen(o.records_path, "a"))) {
        fprintf(stderr, "trainwatch watch: %s: %s\n", o.records_path, strerror(errno));
        goto done;
    }
    s.records_path = o.records_path;
    raise_descriptor_limit();
    if (o.sup.serve) {
        o.sup.http.registry = reg;
        if (tw_http_start(&o.sup.http, &server, err, sizeof err) != TW_OK) {
            fprintf(stderr, "trainwatch watch: %s\n", err);
            goto done;
        }
        fprintf(stderr, "trainwatch watch: serving metrics on port %u\n", tw_http_port(server));
    }
    o.follow.patterns = (const char *const *)(argv + first);
    o.follow.pattern_count = (size_t)(argc - first);
    o.follow.sink = (tw_record_sink){tw_cli_sinks_record, &s, tw_cli_sinks_commit, tw_cli_sinks_restore};
    o.follow.warnings = stderr;
    if (tw_follower_open(&o.follow, &follower, err, sizeof err) != TW_OK) {
        fprintf(stderr, "trainwatch watch: %s\n", err);
        goto done;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    double start = tw_monotonic_clock();
    while (!stop_requested && (o.duration <= 0 || tw_monotonic_clock() - start < o.duration)) {
        /* a state that cannot be saved is said by the follower, once */
        (void)tw_follower_poll(follower, 0.5);
        tw_live_tick(s.live, tw_wall_clock());
        tw_cli_alerts_tick(&o.sup.alerts, tw_wall_clock());
        tw_cli_sinks_flush(&s); /* readers see whole records soon, state file or not */
    }
    tw_follower_finish(follower); /* the last blocks, then the state */
    tw_follow_stats stats = *tw_follower_stats(follower);
    tw_follower_close(follower);
    follower = NULL;
    tw_cli_sinks_flush(&s);
    tw_cli_alerts_finish(&o.sup.alerts, "watch", tw_wall_clock());
    status = finish(&s, &o, &stats);
    if (s.records) {
        int closed = fclose(s.records), close_errno = errno;
        s.records = NULL;
        if (closed != 0 && !s.records_failed)
            fprintf(stderr, "trainwatch watch: %s: %s\n", o.records_path, strerror(close_errno));
        if (closed != 0 || s.records_failed)
            status = TW_EXIT_USAGE; /* records were lost: the status says so too */
    }
done:
    tw_cli_alerts_free(&o.sup.alerts);
    tw_follower_close(follower);
    tw_http_stop(server);
    if (s.records)
        fclose(s.records);
    tw_live_free(s.live);
    tw_run_free(s.run);
    tw_registry_free(reg);
    return status;
}

const tw_command tw_cmd_watch = {
    .name = "watch",
    .summary = "follow growing logs: live metrics, warnings, and the diagnosis at the end",
    .usage = "usage: trainwatch watch [OPTIONS] FILE|GLOB...   (trainwatch watch --help for options)\n",
    .run = run,
};
