/*
 * events.h: the event reader's state and what its files share: fmt_events.c
 * (the format: tracebacks, error blocks, keyword rules) and
 * events_launchers.c (the launchers' reports of ranks). Internal to parse/.
 */
#ifndef TW_PARSE_EVENTS_H
#define TW_PARSE_EVENTS_H

#include <stdbool.h>

#include "formats.h"
#include "stacks.h"

/* BLOCK_IPYTHON: IPython's traceback ("IndexError    Traceback (most recent
 * call last)", then "<ipython-input-..> in <module>()" or "File x.py:3, in f()"
 * frames with their source lines, then "IndexError: message"). */
enum block { BLOCK_NONE, BLOCK_PYTHON, BLOCK_CPP, BLOCK_SUMMARY, BLOCK_IPYTHON };

/* The longest prefix a traceback's lines may carry (events_state.prefix). */
#define TW_BLOCK_PREFIX_MAX 160

/* A Python exception name printed without its message ("MemoryError: "):
 * after a dashed line it may be Paddle's, whose C++ Traceback or Error
 * Message Summary comes next (tentative); once one does, the summary's
 * error is its message (confirmed). */
enum held_name { NAME_NOT_HELD, NAME_HELD_TENTATIVE, NAME_HELD };

typedef struct events_state {
    enum block block;
    char frame[TW_MESSAGE_MAX];      /* last stack frame of the current block */
    char user_frame[TW_MESSAGE_MAX]; /* its deepest frame outside installed packages, "" none */
    char prefix[TW_BLOCK_PREFIX_MAX]; /* what each line of the current Python block starts with */
    size_t prefix_len;                /* 0: its lines carry none */
    bool signal_pending;             /* saw "FatalError: Termination signal" */
    char signal_message[TW_MESSAGE_MAX];
    long long aborted_at;     /* "[TimeInfo: *** Aborted at N (unix time)": N, 0 unknown */
    bool await_message;       /* "ResourceExhaustedError: " with its message on the lines after */
    enum held_name name_held; /* "MemoryError: " whose message is the Error Message Summary's error:
                                 its frames wait for that error (pending_name kept in case none comes) */
    tw_source name_source;    /* where that name stands, and its time: said there if no error comes */
    bool name_has_time;
    double name_time;
    int nccl; /* an NCCL error held for its "Last error:" lines: 1 held, 2 after "Last error:" */
    char held[TW_MESSAGE_MAX];
    char pending_name[TW_NAME_MAX];
    char assertion[TW_MESSAGE_MAX]; /* the last CUDA device-side assertion, "" none */
    uint64_t assertion_line;        /* its line */
    int root_cause;                 /* lines left of torchrun's "Root Cause (first observed failure)" entry, 0 none */
    char launcher[TW_MESSAGE_MAX];  /* that entry as read so far */
    struct {                        /* the elastic agent's "Rendezvous complete for workers" block */
        bool open;                  /* its "  key=value" lines follow */
        long long group_rank, group_world_size; /* -1: not read (yet) */
        bool local_in_order;                    /* local_ranks=[0, 1, ..., n-1] */
    } rendezvous;
    tw_stacks stacks;        /* a faulthandler dump being read (stacks.h) */
    tw_source stacks_source; /* its first line */
} events_state;


/* Keyword rules' readers (NULL-safe on at: the keyword's place in the line);
 * 0: not this event after all. */
int tw_events_launcher_paddle_abort(tw_parser *p, events_state *st, const tw_line *line, const char *at);
int tw_events_launcher_paddle_container(tw_parser *p, events_state *st, const tw_line *line, const char *at);
int tw_events_launcher_elastic_failed(tw_parser *p, events_state *st, const tw_line *line, const char *at);
int tw_events_launcher_rendezvous(tw_parser *p, events_state *st, const tw_line *line, const char *at);
int tw_events_launcher_torchrun_root_cause(tw_parser *p, events_state *st, const tw_line *line, const char *at);
int tw_events_nccl_watchdog(tw_parser *p, events_state *st, const tw_line *line, const char *at);
int tw_events_scaler_overflow(tw_parser *p, events_state *st, const tw_line *line, const char *at);
int tw_events_slurm_cancelled(tw_parser *p, events_state *st, const tw_line *line, const char *at);
/* The lines after a block's first: 0 when the line is not part of it (the
 * block ended; read the line as usual). */
int tw_events_rendezvous_lines(tw_parser *p, events_state *st, const tw_line *line);
int tw_events_root_cause_lines(tw_parser *p, events_state *st, const tw_line *line);

#endif
