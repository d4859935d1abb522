/*
 * actions_internal.h: the state shared by the files of src/actions/:
 * spec.c (reading 'SELECTOR=ACTION'), actions.c (the sink: which action
 * fires, cooldown, dry run, counting, the page), ranks.c (the processes a
 * signal goes to), control.c (the request file and the trainer's replies)
 * and exec.c (commands on their own threads).
 */
#ifndef TW_ACTIONS_INTERNAL_H
#define TW_ACTIONS_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "../rules/promql.h"
#include "trainwatch/actions.h"

#define TW_ACTIONS_MAX 64
#define TW_RANK_ALL (-1)
#define TW_EXEC_RUNNING_MAX 4
#define TW_PACKAGE_PROCS_MAX 1024

typedef enum tw_action_kind {
    TW_ACT_SIGNAL,
    TW_ACT_EXEC,
    TW_ACT_CHECKPOINT,
    TW_ACT_STOP,
    TW_ACT_LR,
    TW_ACT_DUMP_STACKS,
} tw_action_kind;

/* When one action last fired for one alert (by its labels' fingerprint). */
typedef struct tw_action_fired {
    uint64_t fingerprint;
    double at;
} tw_action_fired;

typedef struct tw_action {
    char *text;          /* SELECTOR=ACTION as given */
    char *where;         /* --on-alert, rules.yml:12 */
    char *action_text;   /* ACTION */
    char *alert;         /* the selector's alert name */
    tw_pq_node *selector;
    tw_action_kind kind;
    int signal;          /* TW_ACT_SIGNAL */
    int rank;            /* TW_ACT_SIGNAL: a rank or TW_RANK_ALL */
    char **argv;         /* TW_ACT_EXEC, NULL-terminated */
    double factor;       /* TW_ACT_LR */
    double cooldown;     /* seconds */
    bool implicit;       /* the stall's dump-stacks nobody configured */
    tw_action_fired *fired;
    size_t fired_count, fired_cap;
    /* for the page */
    unsigned long times;
    double last_at;
    char last[320];
} tw_action;

/* A process that runs the package, from its hello line. */
typedef struct tw_package_proc {
    pid_t pid;
    int rank;
    int stack_signal; /* 0: it takes no stack dumps (a C trainer, or faulthandler missing) */
} tw_package_proc;

/* The control channel (control.c). */
typedef struct tw_control {
    char dir[512];
    char path[600];      /* the request file */
    char ack_path[610];
    int fd;              /* requests, appended; -1: no channel */
    int ack_fd;          /* replies, read; -1: not there yet */
    char ack_buf[8192];
    size_t ack_len;
    unsigned long next_id;
    int stack_signal; /* what TRAINWATCH_STACK_SIGNAL says */
    tw_package_proc procs[TW_PACKAGE_PROCS_MAX];
    size_t proc_count;
} tw_control;

typedef struct tw_exec_job tw_exec_job;

struct tw_actions {
    tw_actions_options o;
    char *name, *run;
    tw_action *actions[TW_ACTIONS_MAX];
    size_t count;
    pid_t root;
    double step, seconds_per_step;
    tw_control control;
    tw_family *f_total, *f_replies;
    pthread_mutex_t lock; /* the page reads actions from the server's thread */
    tw_exec_job *jobs;    /* commands started, not yet joined */
    bool said_no_package;
};

/* spec.c */
int tw_action_parse(const char *spec, const char *where, double cooldown, tw_action **out, char *err, size_t cap);
void tw_action_free(tw_action *act);
const char *tw_action_kind_name(tw_action_kind kind);
/* A signal by name (USR1, SIGUSR1) or number; 0 when unknown. */
int tw_signal_from_name(const char *name);
const char *tw_signal_name(int sig);

/* ranks.c: the training processes under root, the top one per rank found
 * in their environments (PADDLE_TRAINER_ID, RANK, ...), or root alone
 * when none has a rank. Returns how many were written to out. */
typedef struct tw_rank_proc {
    pid_t pid;
    int rank; /* -1: no rank in its environment */
} tw_rank_proc;
size_t tw_rank_processes(pid_t root, tw_rank_proc *out, size_t cap);

/* control.c */
int tw_control_open(tw_control *c, char *err, size_t cap);
void tw_control_close(tw_control *c);
/* Appends a request line; the id in *id. at_step NAN: none. */
int tw_control_request(tw_control *c, const char *action, double factor, const char *alert, double at_step,
                       unsigned long *id);
/* Reads new reply lines: hellos are kept in c->procs, results go to fn. */
typedef void (*tw_control_reply_fn)(void *arg, const char *action, const char *result, int rank, double step,
                                    unsigned long id, const char *detail);
void tw_control_read_replies(tw_control *c, tw_control_reply_fn fn, void *arg);

/* exec.c: starts argv on its own thread with env added to ours; the thread
 * says what happened and calls done(arg, result) with "done", "failed" or
 * "timeout". Refused (TW_ELIMIT) with TW_EXEC_RUNNING_MAX running. */
typedef void (*tw_exec_done_fn)(void *arg, const char *result, const char *detail);
int tw_exec_start(tw_actions *a, char *const *argv, char **env, double timeout, tw_exec_done_fn done, void *arg);
/* Joins the finished jobs (kill: kills the running ones first). */
void tw_exec_reap(tw_actions *a, bool kill);

#endif
