/*
 * cmd_watch.c: `trainwatch watch [options] FILE|GLOB...`: reads the options
 * and hands the files to a supervision (trainwatch/supervise.h) that
 * follows them as they grow (tail -F, rotation-proof, resumable with
 * --state), serves what they say as Prometheus metrics and warns live about
 * NaN losses, OOMs, exceptions and stalls; prints the diagnosis when
 * stopped (SIGINT, SIGTERM, --duration).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/say.h"
#include "../core/stream.h"
#include "cli.h"
#include "history.h"
#include "supervision.h"
#include "trainwatch/analyze.h"
#include "trainwatch/error.h"
#include "trainwatch/follow.h"
#include "trainwatch/supervise.h"

typedef struct watch_options {
    tw_supervision_options sup;
    tw_follow_options follow;
    double duration;
    bool json;
    tw_cli_history history; /* --history, --no-history, --history-job */
    double started;         /* wall clock when watching started */
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
            "  --pattern REGEX             a line format of your own (PCRE2 named groups: step, loss,\n"
            "                              lr, epoch, step_time, data_time, others are metrics)\n"
            "  --formats FILE              line formats of your own from a YAML file\n"
            "  --run-name NAME             the run label of the metrics (default: the first file's name\n"
            "                              up to its first '.' or wildcard; --job: old name)\n"
            "  --web.listen-address ADDR   serve /metrics here (default " TW_HTTP_DEFAULT_ADDRESS
            "; 'none': do not serve;\n"
            "                              port 0: any free one; HOST:PORT+LOCAL_RANK or +RANK: one port per rank)\n"
            "  --web.address-file FILE     write the address bound (HOST:PORT) to FILE\n"
            "  --web.config.file FILE      TLS and basic auth, exporter-toolkit format\n"
            "  --stall-after SECONDS       warn when no step arrives for this long (default: 10x the\n"
            "                              usual step interval, at least 60)\n"
            "  --max-steps N               the planned global steps, for trainwatch_eta_seconds (default: the\n"
            "                              epochs and steps the log prints)\n"
            "  --log.level LEVEL           trainwatch's own messages: debug, info (default), warn, error\n"
            "  --log.format FORMAT         ... as text (default), logfmt or json lines on stderr\n"
            "  --duration SECONDS          stop after this long (default: until a signal)\n"
            "  --json                      print the final diagnosis as JSON\n"
            "%s  (--history-job default: the run name)\n\n%s%s\n%s",
            tw_cli_history_usage, tw_cli_supervision_usage, tw_cli_discovery_usage, tw_cli_alerts_usage);
}

static int parse(int argc, char **argv, watch_options *o)
{
    static const struct option longopts[] = {{"from-start", 0, 0, 'f'},   {"state", 1, 0, 's'}, {"records", 1, 0, 'r'},
                                             {"duration", 1, 0, 'd'},     {"json", 0, 0, 'J'},  {"help", 0, 0, 'h'},
                                             TW_CLI_SUPERVISION_LONGOPTS, TW_CLI_HISTORY_LONGOPTS,
                                             {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f':
            o->follow.from_start = true;
            break;
        case 's':
            o->follow.state_file = optarg;
            break;
        case 'r':
            o->sup.records_path = optarg;
            break;
        case 'd':
            if (tw_cli_number("watch", "duration", optarg, &o->duration))
                return -1;
            break;
        case 'J':
            o->json = true;
            break;
        case 'h':
            usage(stdout);
            exit(TW_EXIT_OK);
        default:
            if (tw_cli_history_option(&o->history, c, optarg))
                break;
            if (tw_cli_supervision_option(&o->sup, "watch", c, optarg, argv[optind - 1]) < 0)
                return -1;
        }
    }
    if (optind >= argc) {
        tw_say(TW_SAY_ERROR, "watch", "no files to follow");
        return -1;
    }
    return optind;
}

/* The default run name: the file's name up to its first '.' or wildcard
 * ("log/workerlog.*": workerlog), else its folder's name, else "watch". */
static const char *run_name(const char *path, char *buf, size_t len)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t n = strcspn(base, ".*?[");
    if (n == 0 && slash) {
        const char *start = slash;
        while (start > path && start[-1] != '/')
            start--;
        base = start;
        n = (size_t)(slash - start);
        n = n < strcspn(base, "*?[") ? n : strcspn(base, "*?[");
    }
    if (n == 0 || n >= len)
        return "watch";
    memcpy(buf, base, n);
    buf[n] = '\0';
    return buf;
}

/* The diagnosis when stopped, on stdout; the exit status as for analyze. */
static int finish(tw_supervision *sup, const watch_options *o)
{
    tw_report *report;
    tw_supervision_result result;
    int rc = tw_supervision_finish(sup, &report, &result);
    const tw_follow_stats *st = tw_supervision_follow_stats(sup);
    if (st)
        tw_say(TW_SAY_INFO, "watch", "%llu lines from %llu files (%llu rotations, %llu truncations%s)",
                (unsigned long long)st->lines, (unsigned long long)st->files, (unsigned long long)st->rotations,
                (unsigned long long)st->truncations, st->inotify ? "" : ", polling");
    if (rc != TW_OK)
        return TW_EXIT_USAGE;
    if (report->summary.step_records || report->summary.eval_records || report->summary.events) {
        tw_history_identity who = {.source = "watch", .name = o->sup.run, .job = o->sup.run,
                                   .inputs = o->sup.command, .started = o->started, .ended = tw_wall_clock()};
        tw_cli_history_record("watch", &o->history, &who, report, tw_supervision_run(sup));
    }
    if (o->json)
        tw_report_write_json(stdout, report);
    else
        tw_report_write_text(stdout, report, isatty(STDOUT_FILENO));
    int status = TW_EXIT_OK;
    for (int i = 0; i < report->finding_count; i++) {
        if (report->findings[i].severity == TW_SEV_ERROR)
            status = TW_EXIT_PROBLEMS;
    }
    if (result.output_failed)
        status = TW_EXIT_USAGE; /* records were lost: the status says so too */
    tw_report_free(report);
    if (tw_stream_flush(stdout) != 0) {
        tw_say(TW_SAY_ERROR, "watch", "could not write the report to standard output: %s", strerror(errno));
        return TW_EXIT_USAGE;
    }
    return status;
}

static int run(int argc, char **argv)
{
    tw_cli_say_as("watch");
    watch_options o = {.sup = {.name = "watch", .serve = true, .sd_without_rank = true, .linger = TW_LINGER_AUTO}};
    tw_cli_rank_env(&o.sup.rank, &o.sup.local_rank, &o.sup.world_size);
    int first = parse(argc, argv, &o);
    if (first < 0 || tw_cli_supervision_finish(&o.sup, "watch") < 0)
        return TW_EXIT_USAGE;
    char name[256], files[512];
    if (!o.sup.run)
        o.sup.run = run_name(argv[first], name, sizeof name);
    o.sup.command = tw_cli_join_words(argv + first, files, sizeof files); /* for trainwatch_run_info */
    tw_cli_history_baseline("watch", &o.history, o.history.job ? o.history.job : o.sup.run, &o.sup.baseline);
    tw_supervision *sup;
    o.started = tw_wall_clock();
    if (tw_supervision_new(&o.sup, &sup) != TW_OK)
        return TW_EXIT_USAGE;
    int status = TW_EXIT_USAGE;
    o.follow.patterns = (const char *const *)(argv + first);
    o.follow.pattern_count = (size_t)(argc - first);
    if (tw_supervision_follow(sup, &o.follow) == TW_OK) {
        static const int stop[] = {SIGINT, SIGTERM};
        tw_supervision_catch_signals(sup, stop, 2);
        double start = tw_monotonic_clock();
        bool signalled = false;
        while (o.duration <= 0 || tw_monotonic_clock() - start < o.duration) {
            if (!tw_supervision_tick(sup, 0.5)) {
                signalled = true;
                break;
            }
        }
        status = finish(sup, &o);
        if (!signalled || o.sup.linger >= 0) /* who stops watch with a signal wants it gone, unless told */
            tw_supervision_linger(sup);
    }
    tw_supervision_free(sup);
    return status;
}

const tw_command tw_cmd_watch = {
    .name = "watch",
    .summary = "follow growing logs: live metrics, warnings, and the diagnosis at the end",
    .usage = "usage: trainwatch watch [OPTIONS] FILE|GLOB...   (trainwatch watch --help for options)\n",
    .run = run,
};
