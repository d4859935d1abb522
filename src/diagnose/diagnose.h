/*
 * diagnose.h: the rule vtable and the helpers rules use to write findings.
 *
 * A rule is one small function over the accumulated run; it appends zero or
 * more findings. Rules live in rule_*.c by theme; the table in diagnose.c
 * lists them in the order their findings are shown within a severity.
 */
#ifndef TW_DIAGNOSE_DIAGNOSE_H
#define TW_DIAGNOSE_DIAGNOSE_H

#include "run.h"

typedef struct tw_findings {
    tw_finding *items;
    int count, cap;
    const tw_run *run;
} tw_findings;

typedef struct tw_rule {
    const char *id;
    const char *summary;
    void (*check)(const tw_run *run, const tw_thresholds *t, tw_findings *out);
} tw_rule;

/* Appends a finding (NULL when out of memory); title is printf-style. */
tw_finding *tw_finding_add(tw_findings *out, const char *rule, tw_severity severity, const char *title_fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Appends one line of evidence / the recommendation, printf-style. */
void tw_finding_evidence(tw_finding *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tw_finding_recommend(tw_finding *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Points the finding at a point's file:line and step. */
void tw_finding_at(tw_finding *f, const tw_run *run, const tw_point *p, int rank);
void tw_finding_at_event(tw_finding *f, const tw_run *run, const tw_event_note *e);
/* Evidence "first: MESSAGE (file:line)" and, when another, "last: ...". */
void tw_finding_first_last(tw_finding *f, const tw_run *run, const tw_event_note *first, const tw_event_note *last);
/* The rank's last record when it is the training loop's closing report of
 * the failure e (detectron2's final "iter: 5878 ..." written as the
 * exception unwinds): the only record after e, within a few lines of it.
 * NULL when training went on after e or nothing followed it. */
const tw_point *tw_closing_record(const tw_run *run, const tw_event_note *e);

/* The log says the run ended: finished, or failed (an exception, OOM,
 * signal or exit); then nothing is left to run. */
bool tw_run_ended(const tw_run *run);
/* The planned steps left after rank rk's last step record: NAN when the run
 * ended or nothing says the plan; --max-steps (th.max_steps) when given,
 * else the epochs and steps the log prints. */
double tw_run_steps_left(const tw_run *run, const tw_rank *rk);

/* The first event of a kind kept by the run, or NULL. */
const tw_event_note *tw_first_event(const tw_run *run, tw_event_kind kind);

/* "12s", "3m20s", "2h05m" */
const char *tw_fmt_duration(double seconds, char *buf, size_t cap);
/* v with this many decimals, or in %.3g form when that would take more
 * than ten digits (a loss of 1e308 is not 309 digits long); "NaN", "+Inf"
 * and "-Inf" for the values that are not finite */
const char *tw_fmt_number(double v, int decimals, char *buf, size_t cap);
/* "12.2 MiB", "3.50 GiB" ("?" for NAN) */
const char *tw_fmt_bytes(double v, char *buf, size_t cap);
/* A clock time "2024-03-09 15:15:33" from a log timestamp, or "" */
const char *tw_fmt_time(double t, char *buf, size_t cap);

/* Errors first, rules in table order within a severity (stable). */
void tw_findings_sort(tw_finding *items, int count);
/* No finding of severity warning or error. */
bool tw_findings_healthy(const tw_finding *items, int count);

/* launches.c: each launch's span and outcome from its summary and findings;
 * then the report's own summary and findings: the launch selected
 * (report->launch, or TW_LAUNCH_ALL) with what the other launches say. */
void tw_launch_spans(const tw_run *run, tw_report *report);
int tw_report_select(const tw_run *run, tw_report *report);

/* root_cause.c: per launch, each rank's first failure and which rank failed
 * first (the cause) while the others only went down with it (victims). */
typedef struct tw_rank_failure {
    int rank;
    const tw_event_note *first; /* its first failure in the launch, NULL: none; borrowed from the run */
    bool victim;                /* that failure is what another rank's does to it */
    int failures;
} tw_rank_failure;

typedef struct tw_root_cause {
    tw_rank_failure *ranks; /* every rank of the launch, by rank; owned */
    int count;
    int failed_ranks;           /* ranks with a failure */
    int own_failures;           /* ranks whose first failure is their own */
    const tw_event_note *cause; /* the first own failure, NULL: none */
    int cause_rank;
    bool ordered_by_time;          /* several own failures, all timestamped: the first is the cause */
    bool same_error;               /* several own failures, all the same message */
    const tw_event_note *launcher; /* the launcher's report of the failed rank, NULL: none; borrowed */
    int launcher_rank;             /* the rank it names as failed, -1: none or several in no order */
    bool launcher_decided;         /* own failures at once (same second, no times): it named the cause */
    bool launcher_disagrees;       /* it names another rank than the timestamps' first */
    /* the elastic agent's "local_rank: R": the rank within its node */
    int launcher_local;              /* R, -1: the report names global ranks */
    const tw_event_note *assignment; /* the agent's rank assignment that made R a global rank, NULL: none */
    int assignments;                 /* distinct rank assignments (nodes) in the report's file */
    tw_event_note resolved;          /* the report with that global rank: launcher points here */
} tw_root_cause;

/* Fills rc for a launch (nothing for fewer than two ranks); free with
 * tw_root_cause_free. Returns TW_OK or TW_ENOMEM. */
int tw_root_cause_find(const tw_run *run, tw_root_cause *rc);
void tw_root_cause_free(tw_root_cause *rc);
/* A termination signal, a lost peer or store, a collective timeout. */
bool tw_event_is_victim(const tw_event_note *e);
/* True when rank is not to be blamed: another rank failed first. */
bool tw_root_cause_blames_other(const tw_root_cause *rc, int rank);
/* The ranks other than the cause's as "0-4, 6, 7" into buf; returns how many. */
int tw_root_cause_victims(const tw_root_cause *rc, char *buf, size_t cap);
/* One evidence line per rank other than the cause's: what became of it. */
void tw_root_cause_evidence(const tw_run *run, const tw_root_cause *rc, tw_finding *f);
/* The next rank number (0 to 2^20) in a launcher report's list of ranks
 * ("1, 2, 3"), advancing *cursor past it; false at the end. */
bool tw_launcher_next_rank(const char **cursor, int *rank);
/* True when the launcher's report names rank among those that failed. A
 * report of a local rank ("local 2") names no rank of the job. */
bool tw_launcher_names(const tw_event_note *report, int rank);
/* The report names a local rank the logs could not make a global one. */
bool tw_root_cause_local_only(const tw_root_cause *rc);
/* The rank's log is among the launch's inputs (a launcher's own log, its
 * name without a rank among ranks' logs, is no rank's). */
bool tw_root_cause_has_rank(const tw_root_cause *rc, int rank);
/* The evidence line quoting the launcher's report, and what it settled. */
void tw_root_cause_launcher_evidence(const tw_run *run, const tw_root_cause *rc, tw_finding *f);

/* health.c: the report's and each launch's health score; the summary's
 * "health" line; the JSON object (docs/analysis-json.md). */
void tw_health_report(tw_report *r);
/* Each rank's score in the launch shown (report->rank_health). */
int tw_health_ranks(const tw_run *run, tw_report *r);
void tw_health_text(const tw_health *h, char *buf, size_t cap);
void tw_health_write_json(FILE *out, const tw_health *h);

/* rule_devices.c: the GPU index a launch or out-of-memory line names
 * ("gpu id: 1", "on GPU 0", "Place(gpu:0)", ...), -1 none. */
int tw_device_named(const char *message);
/* How many "Process N has ..." entries an OOM message listed past the part
 * an event keeps, from its detail (fmt_events.c); 0 none. */
int tw_oom_processes_listed(const char *detail);
/* The other ranks of the run whose own lines put them on that GPU, as
 * "0, 1, 3" into buf (their first statement of a device counts); returns
 * how many. */
int tw_device_sharers(const tw_run *run, int rank, int device, char *buf, size_t cap);

/* The rules, by theme. */
extern const tw_rule tw_rule_hang;
extern const tw_rule tw_rule_loss_scale, tw_rule_overfitting, tw_rule_eval_empty;
extern const tw_rule tw_rule_data_bound, tw_rule_nan, tw_rule_spikes, tw_rule_divergence, tw_rule_plateau,
    tw_rule_stalls, tw_rule_jitter, tw_rule_throughput, tw_rule_memory, tw_rule_oom, tw_rule_exceptions, tw_rule_exits,
    tw_rule_incomplete, tw_rule_restarts, tw_rule_straggler, tw_rule_rank_stopped, tw_rule_epoch_start,
    tw_rule_memory_spike, tw_rule_eval_contradiction, tw_rule_ranks_over_limit, tw_rule_shared_device,
    tw_rule_duplicated_logging, tw_rule_logging_cost, tw_rule_cut_off, tw_rule_cumulative_time,
    tw_rule_step_time_mismatch, tw_rule_environment_differs, tw_rule_gpu;

#endif
