/*
 * supervise.h: live supervision of a training run, the engine under
 * `trainwatch run` and `trainwatch watch`.
 *
 * A supervision reads one source of log text, parses it as it comes and
 * hands every record to its sinks; on a timer it samples, evaluates and
 * watches; /metrics is served throughout:
 *
 *   source   a command it starts (run: its stdout and stderr pass through,
 *            one ordered stream by default), or log files it follows
 *            (watch: follow.h)
 *   sinks    the run summary the diagnosis reads at the end (analyze.h),
 *            the live metrics and warnings (live.h), and optionally a
 *            JSON-lines records file
 *   timer    the command's process tree and the GPUs (run), stall checks,
 *            the alert rules (evaluated over the registry's samples) and
 *            their receivers (rules.h, notify.h), the registry's samples
 *            queued for remote-write receivers (remote_write.h; a last
 *            sample at finish, drained at free)
 *
 * Life cycle:
 *   tw_supervision_new()     registry, sinks, alerting, receivers, server:
 *                            everything that can fail, fails here, before a
 *                            command is started
 *   tw_supervision_spawn()   the source is a command, or
 *   tw_supervision_follow()  the source is log files
 *   tw_supervision_tick()    one turn: read what is there, sample, evaluate;
 *                            false once the source has ended
 *   tw_supervision_catch_signals()  signals handed to the next tick
 *   tw_supervision_finish()  the end: lines still pending, the record of how
 *                            the command ended, a last evaluation, and the
 *                            report (the diagnosis plus what sampling and
 *                            live watching saw)
 *   tw_supervision_linger()  /metrics served a while longer, so that the
 *                            scrapers take the final state
 *   tw_supervision_free()
 *
 * Messages (warnings, where it serves, failures) go to stderr as one line
 * each, prefixed "trainwatch NAME:" with the options' name.
 *
 * Ownership: options and the strings they point to are borrowed for the
 * supervision's life; the report from finish is the caller's
 * (tw_report_free).
 */
#ifndef TRAINWATCH_SUPERVISE_H
#define TRAINWATCH_SUPERVISE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "trainwatch/analyze.h"
#include "trainwatch/follow.h"
#include "trainwatch/html.h"
#include "trainwatch/http.h"
#include "trainwatch/live.h"
#include "trainwatch/metrics.h"
#include "trainwatch/parse.h"
#include "trainwatch/remote_write.h"
#include "trainwatch/rules.h"

#define TW_RULE_FILES_MAX 32
#define TW_RECEIVERS_MAX  8
#define TW_EXTERNAL_LABELS_MAX 8
#define TW_ON_ALERT_MAX 32

typedef struct tw_webhook_config {
    const char *url;    /* or env:NAME / file:PATH */
    const char *format; /* alertmanager, dingtalk, slack, feishu, wecom */
    const char *secret_file, *secret_env;
} tw_webhook_config;

/* Alert rules evaluated live and where their alerts go. */
typedef struct tw_alerts_config {
    const char *rule_files[TW_RULE_FILES_MAX];
    size_t rule_file_count;
    bool no_defaults;                            /* without the built-in rules */
    double eval_interval;                        /* for groups without one; 0: 5 s */
    const char *alertmanagers[TW_RECEIVERS_MAX]; /* base URLs, or env:/file: */
    size_t alertmanager_count;
    tw_webhook_config webhooks[TW_RECEIVERS_MAX];
    size_t webhook_count;
    const char *external_url; /* base of generatorURL */
    /* Prometheus's external_labels, added to the alerts sent (as its
     * notifier does), so they match the central Prometheus's */
    tw_alert_label external_labels[TW_EXTERNAL_LABELS_MAX];
    size_t external_label_count;
    /* What alerts do (trainwatch/actions.h): --on-alert SELECTOR=ACTION,
     * besides the rule files' actions: sections. */
    const char *on_alert[TW_ON_ALERT_MAX];
    size_t on_alert_count;
    double action_cooldown;   /* seconds; 0: 300 */
    double action_timeout;    /* seconds an exec: command may run; 0: 60 */
    bool dry_run_actions;     /* say what would be done, do nothing */
    bool no_stack_dumps;      /* no dump-stacks on a stall by default */
    bool control;             /* a control channel for the command (run) */
} tw_alerts_config;

/* What a run's GPUs cost (`run`: the GPUs its processes hold memory on,
 * sampled through NVML; src/supervise/cost.c). */
typedef struct tw_cost_options {
    double gpu_hour_cost;   /* money per GPU-hour of every GPU; 0: none unless price_file names it */
    const char *price_file; /* lines "MODEL-PATTERN PRICE" (first match of the NVML name); NULL: none */
    double budget;          /* money; 0: no budget (trainwatch_budget absent) */
    double idle_below;      /* utilisation (%) under which a GPU's time counts as idle */
} tw_cost_options;

#define TW_COST_IDLE_BELOW 10.0

/* Reads a price table as a run would: TW_OK, or TW_EINVAL with
 * "--gpu-prices FILE:LINE: why" in err (checked before the command starts). */
int tw_cost_check_prices(const char *path, char *err, size_t errlen);

typedef struct tw_supervision_options {
    const char *name;        /* "run", "watch": the prefix of messages */
    const char *run;         /* the run label of per-run series (never job/instance: the scraper's) */
    int rank;                /* the rank of a command's output and samples */
    int local_rank;          /* for trainwatch_run_info; -1: unknown */
    int world_size;          /* for trainwatch_run_info; -1: unknown */
    const char *command;     /* for trainwatch_run_info: the command line or the files watched */
    const char *address_file; /* write the bound /metrics address here (whole or not at all); NULL: none */
    const tw_format *format; /* NULL: detect */
    struct tw_user_formats *user_formats; /* --pattern / --formats, borrowed; NULL: none */
    double stall_after;      /* seconds; 0: derived from the step interval */
    double max_steps;        /* the planned global steps, for the ETA; 0: from the log */
    tw_live_baseline baseline; /* the job's last runs' step time (history); runs 0: none */
    tw_cost_options cost;    /* GPU time and money (run) */
    bool serve;              /* serve /metrics with http */
    tw_http_options http;    /* its registry is the supervision's */
    tw_alerts_config alerts;
    const char *records_path; /* append records as JSON lines; NULL: none */
    tw_remote_write_options remote_write; /* url_count 0: none; its target labels are set here */
    /* The job and instance of remote-written series; NULL: those a scrape
     * of this run gets (sd_job or "trainwatch"; the served host:port, or
     * the host's name when not serving). The other target labels: the
     * sd_file entry's (host, run, rank) with sd_file; none when served
     * without one (a static scrape adds none); run and rank when not
     * served (no scrape to match, and runs must not collide). */
    const char *remote_job, *remote_instance;
    /* Add this run's target (labels run, rank, host) to this file_sd_configs
     * file while it runs; NULL: none. Its alerts then carry the labels a
     * Prometheus reading the file gives (job sd_job, instance the target,
     * honor_labels: true, as `trainwatch prometheus-config` prints). */
    const char *sd_file;
    const char *sd_job; /* NULL: "trainwatch" */
    bool sd_without_rank; /* no rank label in the entry (watch: files of any rank) */
    /* Seconds tw_supervision_linger keeps serving /metrics after the end;
     * < 0: two scrape intervals when a scrape was seen or the target is in
     * sd_file, else 0 (TW_LINGER_AUTO). */
    double linger;
} tw_supervision_options;

#define TW_LINGER_AUTO (-1.0)
/* The scrape interval assumed when no two scrapes were seen: what
 * `trainwatch prometheus-config` prints (15s). */
#define TW_LINGER_DEFAULT_INTERVAL 15.0
/* The longest linger the automatic choice takes (a scraper seen rarely, a
 * person's curl, is not a scrape interval). */
#define TW_LINGER_AUTO_MAX 600.0

typedef struct tw_supervision tw_supervision;

int tw_supervision_new(const tw_supervision_options *o, tw_supervision **out);
void tw_supervision_free(tw_supervision *s);
/* The registry its metrics are in (to push them, say). */
tw_registry *tw_supervision_registry(tw_supervision *s);

/* ---- sources ------------------------------------------------------- */

typedef struct tw_command_options {
    char **argv;            /* argv[0] is looked up in PATH */
    bool separate_stderr;   /* two pipes instead of one ordered stream */
    const char *log_file;   /* also write the output here; NULL: none */
    uint64_t log_max_bytes; /* rotate past this (0: never) */
    unsigned log_backups;   /* keep this many rotated files */
    double kill_after;      /* SIGKILL the group this long after a forwarded signal; 0: never */
    bool sample;            /* sample the process tree and GPUs each second */
} tw_command_options;

/* Starts the command. Returns TW_OK; or a TW_E* code, said on stderr (127
 * semantics are the caller's: *start_errno holds exec's errno when the
 * command could not be started). */
int tw_supervision_spawn(tw_supervision *s, const tw_command_options *c, int *start_errno);

/* Follows files (follow.h; its sink is set here). On failure says why. */
int tw_supervision_follow(tw_supervision *s, tw_follow_options *f);

/* ---- running ------------------------------------------------------- */

/* One turn of at most `wait` seconds. False when the source has ended (the
 * command exited and its output is drained; a stop signal while following
 * files). */
bool tw_supervision_tick(tw_supervision *s, double wait);
/* Catches these signals for the supervision (one per process at a time):
 * the handler only writes the signal's number to a pipe, and the next tick
 * passes it on to the command's process group (SIGWINCH: resizes the
 * command's terminal), or, following files, SIGINT, SIGTERM and SIGHUP end
 * the supervision. SIGPIPE is ignored (a reader of our output that went
 * away must not kill us). */
int tw_supervision_catch_signals(tw_supervision *s, const int *signals, size_t count);

typedef struct tw_supervision_result {
    int status;         /* the command's: its exit status, 128+signal */
    bool output_failed; /* the log file lost lines, or could not be closed */
} tw_supervision_result;

/* Ends the run and diagnoses it: *report (the caller frees it), and for a
 * command its status. */
int tw_supervision_finish(tw_supervision *s, tw_report **report, tw_supervision_result *result);

/* After finish (and any push): keeps serving /metrics, the sd_file entry
 * still in place, until a scrape has begun after the end and the slowest
 * scraper's interval has passed since then, or the linger time is up, or
 * SIGINT, SIGTERM or SIGHUP arrives (caught with
 * tw_supervision_catch_signals); said once on stderr when it waits. A
 * command that ended before Prometheus's next scrape is thus still seen
 * crashed. Returns at once when not serving or the linger is 0. */
void tw_supervision_linger(tw_supervision *s);

/* The run the records went to (what the diagnosis was made from), borrowed
 * until tw_supervision_free; for the HTML report's charts. */
const tw_run *tw_supervision_run(const tw_supervision *s);

/* The GPU series `run` sampled, for the HTML report: out->points is the
 * caller's to free (NULL without GPU sampling). TW_OK or TW_ENOMEM. */
int tw_supervision_gpu_series(const tw_supervision *s, tw_html_gpu *out);

/* The end-of-run lines of sampling (process tree, GPUs) under the report. */
void tw_supervision_write_samples(const tw_supervision *s, const tw_report *report, FILE *out);
/* The follower's statistics (watch), or NULL. */
const tw_follow_stats *tw_supervision_follow_stats(const tw_supervision *s);

#endif
