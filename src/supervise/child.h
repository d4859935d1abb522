/*
 * child.h: the command `trainwatch run` supervises, as a process.
 *
 * It is started in a process group of its own, with its output on one
 * pseudo-terminal when ours is a terminal (progress bars redraw, colours
 * stay on; its group becomes the terminal's foreground group), else on one
 * pipe for stdout and stderr together (one ordered stream), or two with
 * separate_stderr. Signals are forwarded to its whole group; the last one
 * forwarded is remembered, so an exit status of 128+N after forwarding N
 * reads as that signal.
 *
 * Ownership: tw_child_start() allocates, tw_child_free() closes what is
 * still open and frees (it does not kill or wait for the command).
 */
#ifndef TW_SUPERVISE_CHILD_H
#define TW_SUPERVISE_CHILD_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct tw_child tw_child;

/* Starts argv. TW_OK; else a TW_E* code with errno's value in *start_errno
 * (exec failed: the command does not exist or cannot run). */
int tw_child_start(char **argv, bool separate_stderr, tw_child **out, int *start_errno);
void tw_child_free(tw_child *c);

pid_t tw_child_pid(const tw_child *c);
/* Our end of output stream i (0: stdout, or both; 1: stderr when apart), -1
 * when there is none or it has ended. */
int tw_child_fd(const tw_child *c, int i);
void tw_child_close_fd(tw_child *c, int i);

/* Sends sig to the command's process group (and remembers it). */
void tw_child_forward(tw_child *c, int sig);
/* Our terminal's size to the command's (after SIGWINCH). */
void tw_child_resize(tw_child *c);
/* True once the command has exited (reaped without waiting). */
bool tw_child_reap(tw_child *c);
/* After it exited: the raw wait status, and the last signal forwarded (0: none). */
int tw_child_wait_status(const tw_child *c);
int tw_child_forwarded(const tw_child *c);
/* The terminal back to our process group, if the command had it. */
void tw_child_release_terminal(void);

#endif
