/*
 * cmd_run.c: `trainwatch run [options] -- CMD ARGS...`: reads the options,
 * hands the command to a supervision (trainwatch/supervise.h: its output
 * passed through, logged and parsed live, its process tree and GPUs
 * sampled, /metrics served, alerts evaluated), forwards signals to it, and
 * at the end prints the diagnosis to stderr (stdout stays the command's),
 * writes the JSON report and pushes to a Pushgateway. trainwatch exits with
 * the command's status (128+signal when it was killed); when trainwatch
 * itself cannot start (a bad flag, the port taken, an unwritable report
 * path) it says so and does not start the command.
 */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/http_client.h"
#include "../core/outfile.h"
#include "../core/say.h"
#include "cli.h"
#include "history.h"
#include "supervision.h"
#include "trainwatch/analyze.h"
#include "trainwatch/error.h"
#include "trainwatch/push.h"
#include "trainwatch/supervise.h"

typedef struct run_options {
    tw_supervision_options sup;
    tw_command_options command;
    const char *report_file;
    const char *html_file;
    const char *pushgateway;
    tw_cli_history history; /* --history, --no-history, --history-job */
    double started;         /* wall clock when the command started */
} run_options;

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: trainwatch run [OPTIONS] -- CMD [ARGS...]\n\n"
        "Runs CMD and supervises it: output passed through (and logged), parsed live,\n"
        "metrics served, warnings on NaN, OOM, exceptions and stalls, the diagnosis at the end.\n"
        "Exits with CMD's status (128+signal when it was killed).\n\n"
        "options:\n"
        "  --log-file FILE             also write CMD's output here (stdout and stderr as one stream)\n"
        "  --log-max-bytes N           rotate the log file past N bytes (0: never)\n"
        "  --log-backups N             keep N rotated files (as Python's RotatingFileHandler)\n"
        "  --run-name NAME             the run label of the metrics (default: CMD's name; --job: old name)\n"
        "  --rank N                    the rank label (default: PADDLE_TRAINER_ID, RANK, ..., or 0)\n"
        "  --format NAME               the log format (default: detect)\n"
        "  --pattern REGEX             a line format of your own (PCRE2 named groups: step, loss,\n"
        "                              lr, epoch, step_time, data_time, others are metrics)\n"
        "  --formats FILE              line formats of your own from a YAML file\n"
        "  --web.listen-address ADDR   serve /metrics here (default " TW_HTTP_DEFAULT_ADDRESS "; 'none'; port 0:\n"
        "                              any free one; HOST:PORT+LOCAL_RANK or +RANK: one port per rank)\n"
        "  --web.address-file FILE     write the address bound (HOST:PORT) to FILE\n"
        "  --web.config.file FILE      TLS and basic auth, exporter-toolkit format\n"
        "  --stall-after SECONDS       warn when no step arrives for this long (default: derived, >= 60)\n"
        "  --max-steps N               the planned global steps, for trainwatch_eta_seconds (default: the\n"
        "                              epochs and steps the log prints)\n"
        "  --log.level LEVEL           trainwatch's own messages: debug, info (default), warn, error\n"
        "  --log.format FORMAT         ... as text (default), logfmt or json lines on stderr\n"
        "  --kill-after SECONDS        after forwarding SIGINT/SIGTERM/SIGHUP, SIGKILL the group if it is\n"
        "                              still there this long after (default: never)\n"
        "  --separate-stderr           keep CMD's stderr apart from its stdout (two pipes; their lines\n"
        "                              may then interleave out of order in the log and the parse)\n"
        "  --report FILE               write the final diagnosis as JSON\n"
        "  --html FILE                 write the final diagnosis as a self-contained HTML page with charts\n"
        "  --pushgateway URL           push the final metrics (grouping job (the run name), rank, instance)\n"
        "  --gpu-hour-cost PRICE       what one GPU-hour costs: trainwatch_cost_total and the summary\n"
        "  --gpu-prices FILE           prices per GPU model: lines 'MODEL PRICE' (first match of the NVML name)\n"
        "  --budget AMOUNT             the run's budget: TrainingOverBudget fires when the cost so far plus\n"
        "                              the ETA at the current GPUs' price would pass it\n"
        "  --gpu-idle-below PCT        GPU time under this utilisation counts as idle (default 10)\n"
        "%s  (--history-job default: CMD's name and its script, e.g. 'python train.py')\n\n%s%s\n%s",
        tw_cli_history_usage, tw_cli_supervision_usage, tw_cli_discovery_usage, tw_cli_alerts_usage);
}

static int parse(int argc, char **argv, run_options *o)
{
    static const struct option longopts[] = {
        {"log-file", 1, 0, 'L'},      {"log-max-bytes", 1, 0, 'M'},   {"log-backups", 1, 0, 'B'},
        {"rank", 1, 0, 'r'},          {"kill-after", 1, 0, 'K'},      {"report", 1, 0, 'R'},
        {"html", 1, 0, 'H'},          {"pushgateway", 1, 0, 'P'},     {"separate-stderr", 0, 0, 'S'},
        {"gpu-hour-cost", 1, 0, 'C'}, {"gpu-prices", 1, 0, 'G'},      {"budget", 1, 0, 'U'},
        {"gpu-idle-below", 1, 0, 'I'}, {"help", 0, 0, 'h'},           TW_CLI_SUPERVISION_LONGOPTS,
        TW_CLI_HISTORY_LONGOPTS,      {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    double v;
    while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        switch (c) {
        case 'L':
            o->command.log_file = optarg;
            break;
        case 'M':
            if (tw_cli_number("run", "log-max-bytes", optarg, &v))
                return -1;
            o->command.log_max_bytes = (uint64_t)v;
            break;
        case 'B':
            if (tw_cli_number("run", "log-backups", optarg, &v))
                return -1;
            o->command.log_backups = (unsigned)v;
            break;
        case 'r':
            if (tw_cli_number("run", "rank", optarg, &v))
                return -1;
            o->sup.rank = (int)v;
            break;
        case 'K':
            if (tw_cli_number("run", "kill-after", optarg, &o->command.kill_after))
                return -1;
            break;
        case 'R':
            o->report_file = optarg;
            break;
        case 'H':
            if (strcmp(optarg, "-") == 0) {
                fprintf(stderr, "trainwatch run: --html needs a file (standard output carries the command's)\n");
                return -1;
            }
            o->html_file = optarg;
            break;
        case 'P':
            o->pushgateway = optarg;
            break;
        case 'S':
            o->command.separate_stderr = true;
            break;
        case 'C':
        case 'G':
        case 'U':
        case 'I':
            if (tw_cli_cost_option("run", c, optarg, &o->sup.cost) != 0)
                return -1;
            break;
        case 'h':
            usage(stdout);
            exit(TW_EXIT_OK);
        default:
            if (tw_cli_history_option(&o->history, c, optarg))
                break;
            if (tw_cli_supervision_option(&o->sup, "run", c, optarg, argv[optind - 1]) < 0)
                return -1;
        }
    }
    if (optind >= argc) {
        tw_say(TW_SAY_ERROR, "run", "no command (trainwatch run [OPTIONS] -- CMD ARGS...)");
        return -1;
    }
    return optind;
}

/* What can be checked before the command starts; false when it is wrong (said). */
static bool ready_to_start(const run_options *o)
{
    char err[600];
    const char *cmd = o->command.argv[0];
    if (o->report_file && tw_outfile_check(o->report_file, err, sizeof err) != 0) {
        tw_say(TW_SAY_ERROR, "run", "--report %s (not starting %s)", err, cmd);
        return false;
    }
    if (o->html_file && tw_outfile_check(o->html_file, err, sizeof err) != 0) {
        tw_say(TW_SAY_ERROR, "run", "--html %s (not starting %s)", err, cmd);
        return false;
    }
    if (o->sup.cost.price_file && tw_cost_check_prices(o->sup.cost.price_file, err, sizeof err) != TW_OK) {
        tw_say(TW_SAY_ERROR, "run", "%s (not starting %s)", err, cmd);
        return false;
    }
    if (o->pushgateway && tw_http_client_load(err, sizeof err) != TW_OK) {
        tw_say(TW_SAY_ERROR, "run", "--pushgateway: %s (not starting %s)", err, cmd);
        return false;
    }
    return true;
}

/* The GPU utilisation NVML sampled, for the history's gpu_util series:
 * *out the caller's (NULL when none was sampled or memory ran out: the
 * run is then recorded without it). */
static size_t gpu_utils(const tw_supervision *sup, tw_history_gpu_point **out)
{
    tw_html_gpu gpu;
    size_t n = 0;
    *out = NULL;
    if (tw_supervision_gpu_series(sup, &gpu) != TW_OK || !gpu.count)
        return 0;
    if ((*out = malloc(gpu.count * sizeof **out)))
        for (size_t i = 0; i < gpu.count; i++)
            if (isfinite(gpu.points[i].util))
                (*out)[n++] = (tw_history_gpu_point){gpu.points[i].time, gpu.points[i].util};
    free(gpu.points);
    return n;
}

static void record_history(const run_options *o, tw_report *report, const tw_supervision *sup, int status)
{
    char outcome[32], job[256];
    if (!report->summary.step_records && !report->summary.eval_records && !report->summary.events)
        return; /* nothing it printed was read: not a training run */
    tw_history_gpu_point *gpu;
    size_t gpu_count = gpu_utils(sup, &gpu);
    tw_history_identity who = {.source = "run", .name = o->sup.run, .job = tw_history_job_of(o->command.argv, job, sizeof job),
                               .command = o->sup.command, .inputs = o->command.log_file, .started = o->started,
                               .ended = tw_wall_clock(), .outcome = tw_history_outcome_of(status, outcome, sizeof outcome),
                               .gpu = gpu, .gpu_count = gpu_count};
    tw_cli_history_record("run", &o->history, &who, report, tw_supervision_run(sup));
    free(gpu);
}

/* The diagnosis at the end: printed, written, pushed; the exit status. */
static int report_end(const run_options *o, tw_supervision *sup)
{
    tw_report *report;
    tw_supervision_result result;
    if (tw_supervision_finish(sup, &report, &result) != TW_OK)
        return TW_EXIT_USAGE;
    int status = result.status;
    record_history(o, report, sup, status); /* adds the baselines' findings */
    if (o->report_file && tw_cli_write_report_json("run", o->report_file, report) != 0 && status == 0)
        status = TW_EXIT_PROBLEMS; /* the command succeeded, the report it was asked for is missing */
    if (o->html_file) {
        char title[256];
        snprintf(title, sizeof title, "trainwatch run: %s", o->sup.run);
        tw_html_gpu gpu;
        if (tw_supervision_gpu_series(sup, &gpu) != TW_OK) {
            tw_say(TW_SAY_ERROR, "run", "--html %s: out of memory for the GPU charts", o->html_file);
            gpu = (tw_html_gpu){NULL, 0, 0};
        }
        if (tw_cli_write_report_html("run", o->html_file, report, tw_supervision_run(sup), title, &gpu) != 0 &&
            status == 0)
            status = TW_EXIT_PROBLEMS;
        free(gpu.points);
    }
    if (tw_say_current_format() == TW_SAY_TEXT) {
        fprintf(stderr, "\n== trainwatch: %s\n", o->sup.run);
        tw_report_write_text(stderr, report, isatty(STDERR_FILENO));
        tw_supervision_write_samples(sup, report, stderr);
    } else {
        tw_report_say(report, "run");
    }
    tw_report_free(report);
    char err[512];
    if (o->pushgateway &&
        tw_push_run_end(o->pushgateway, o->sup.run, o->sup.rank, tw_supervision_registry(sup), err, sizeof err))
        tw_say(TW_SAY_ERROR, "run", "pushing to the Pushgateway failed: %s", err);
    return status;
}

static int run(int argc, char **argv)
{
    tw_cli_say_as("run");
    run_options o = {.sup = {.name = "run", .serve = true, .linger = TW_LINGER_AUTO, .alerts = {.control = true}},
                     .command = {.sample = true}};
    tw_cli_rank_env(&o.sup.rank, &o.sup.local_rank, &o.sup.world_size);
    if (o.sup.rank < 0)
        o.sup.rank = 0;
    int first = parse(argc, argv, &o);
    if (first < 0 || tw_cli_supervision_finish(&o.sup, "run") < 0)
        return TW_EXIT_USAGE;
    o.command.argv = argv + first;
    const char *cmd = o.command.argv[0];
    if (!o.sup.run) {
        const char *slash = strrchr(cmd, '/');
        o.sup.run = slash ? slash + 1 : cmd;
    }
    char line[512];
    o.sup.command = tw_cli_join_words(o.command.argv, line, sizeof line); /* for trainwatch_run_info */
    if (!ready_to_start(&o))
        return TW_EXIT_USAGE;
    char job[256]; /* the job recorded at the end (record_history): its last runs are the live baseline */
    const char *job_name = o.history.job ? o.history.job : tw_history_job_of(o.command.argv, job, sizeof job);
    tw_cli_history_baseline("run", &o.history, job_name, &o.sup.baseline);
    tw_supervision *sup;
    if (tw_supervision_new(&o.sup, &sup) != TW_OK) {
        tw_say(TW_SAY_ERROR, "run", "not starting %s", cmd);
        return TW_EXIT_USAGE;
    }
    /* forwarded to the command's group; a resize of our terminal to its terminal */
    static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};
    tw_supervision_catch_signals(sup, forwarded, isatty(STDOUT_FILENO) ? 4 : 3);
    int start_errno, status;
    o.started = tw_wall_clock();
    if (tw_supervision_spawn(sup, &o.command, &start_errno) != TW_OK) {
        status = start_errno ? 127 : TW_EXIT_USAGE;
    } else {
        while (tw_supervision_tick(sup, 0.25)) {
        }
        status = report_end(&o, sup);
        tw_supervision_linger(sup); /* the next scrape sees how it ended */
    }
    tw_supervision_free(sup);
    return status;
}

const tw_command tw_cmd_run = {
    .name = "run",
    .summary = "run a training command under supervision: live metrics, warnings, diagnosis",
    .usage = "usage: trainwatch run [OPTIONS] -- CMD [ARGS...]   (trainwatch run --help for options)\n",
    .run = run,
};
