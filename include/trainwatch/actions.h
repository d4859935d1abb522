/*
 * actions.h: what an alert does to the run it watches, beyond telling
 * someone (docs/actions.md).
 *
 * An action is configured as 'SELECTOR=ACTION' (--on-alert, or an entry of
 * a rule file's actions: section), where SELECTOR is an alert name with
 * optional label matchers in PromQL's syntax (TrainingStalled{rank="0"})
 * and ACTION one of
 *   signal:SIG[:rank=N|all]  a signal to the training processes
 *   exec:COMMAND             a command, split into words (no shell), with
 *                            the alert in its environment, time-limited
 *   checkpoint, stop, lr:FACTOR
 *                            requests to the trainer through the control
 *                            channel (the Python package reads them)
 *   dump-stacks              every rank's Python stacks into its log
 *
 * A tw_actions is a tw_alert_sink_fn: it acts when an alert starts firing
 * (once per firing, not per evaluation), at most once per cooldown for the
 * same action and alert labels. Nothing it does can block the evaluation:
 * signals and request lines are immediate, commands run on their own
 * threads (a bounded number; more are dropped and counted). Each action and
 * its result is one line on the supervisor's log and one count in
 * trainwatch_actions_total{alert,action,result}.
 */
#ifndef TRAINWATCH_ACTIONS_H
#define TRAINWATCH_ACTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "trainwatch/metrics.h"
#include "trainwatch/rules.h"

typedef struct tw_actions tw_actions;

typedef struct tw_actions_options {
    tw_registry *registry;    /* trainwatch_actions_total; NULL: none */
    const char *name;         /* prefixes messages ("run", "watch") */
    const char *run;          /* TW_RUN of exec: commands */
    double cooldown;          /* seconds between two firings of one action for one alert; 0: 300 */
    double exec_timeout;      /* seconds before an exec: command is killed; 0: 60 */
    bool dry_run;             /* log what would happen, do nothing */
    /* With a control channel (tw_actions_open_control), a stall (see
     * tw_actions_stalled) sends dump-stacks to the processes that run the
     * package. */
    bool stack_dumps_on_stall;
    /* No process to act on (watch follows files): only exec: actions are
     * taken; tw_actions_add refuses the others. */
    bool exec_only;
} tw_actions_options;

int tw_actions_new(const tw_actions_options *o, tw_actions **out);
/* Stops the commands still running (killed) and frees. */
void tw_actions_free(tw_actions *a);

/* Adds 'SELECTOR=ACTION'; where (e.g. "--on-alert" or "rules.yml:12") names
 * it in errors. cooldown < 0: the default. TW_EUSAGE with the reason in err. */
int tw_actions_add(tw_actions *a, const char *spec, const char *where, double cooldown, char *err, size_t cap);
size_t tw_actions_count(const tw_actions *a);
/* Only checks 'SELECTOR=ACTION' (trainwatch rules check): TW_OK, or
 * TW_EUSAGE with the reason in err. */
int tw_actions_check(const char *spec, const char *where, char *err, size_t cap);

/* The control channel: makes a private directory with an empty request
 * file, and sets TRAINWATCH_CONTROL (and TRAINWATCH_STACK_SIGNAL) in our
 * environment for the command to inherit. Removed by tw_actions_free. */
int tw_actions_open_control(tw_actions *a, char *err, size_t cap);
/* The command's process: the root of the tree signals go to. */
void tw_actions_set_root(tw_actions *a, pid_t root);
/* The last global step seen and the recent seconds per step (NAN: not
 * known), for the step requests to the ranks are due at. */
void tw_actions_set_progress(tw_actions *a, double step, double seconds_per_step);

/* A stall began (no step for the stall time, trainwatch/live.h): the
 * default dump-stacks, within its cooldown. */
void tw_actions_stalled(tw_actions *a);

/* A tw_alert_sink_fn. */
void tw_actions_sink(void *actions, const tw_alert_notice *alerts, size_t count);
/* Reads the trainer's replies and reaps finished commands; call often. */
void tw_actions_tick(tw_actions *a);

/* The actions and what they last did, for the /alerts page: a JSON array
 * or an HTML table (malloc'd; NULL on no memory). */
char *tw_actions_page(tw_actions *a, bool json);

#endif
