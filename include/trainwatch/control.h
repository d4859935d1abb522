/*
 * control.h: the trainer's side of the control channel, for a training
 * loop in C or C++ (the Python package has its own: docs/python.md). Under
 * `trainwatch run` the supervisor asks the trainer, through a file named in
 * TRAINWATCH_CONTROL, to checkpoint, stop or scale its learning rate when an
 * alert fires (docs/actions.md has the protocol); the loop polls at each
 * step boundary and replies what it did.
 *
 *   tw_trainer_control *ctl = NULL;
 *   tw_trainer_control_open(&ctl);            // NULL and TW_ENOENT outside run
 *   for (int64_t step = 1; ...; step++) {
 *       train_one_step();
 *       tw_trainer_request req;
 *       while (tw_trainer_control_poll(ctl, step, &req) == 1) {
 *           if (!strcmp(req.action, "lr")) set_lr(get_lr() * req.factor);
 *           ...
 *           tw_trainer_control_reply(ctl, &req, "done", step, "lr 0.1 -> 0.05");
 *       }
 *   }
 *   tw_trainer_control_close(ctl);
 *
 * Nothing here blocks or allocates on the loop's path: a poll with nothing
 * new is one fstat. Every function takes a NULL control and does nothing,
 * so the loop needs no test of its own. A C trainer takes no stack dumps
 * (its hello says so; the supervisor then never sends it the signal).
 */
#ifndef TRAINWATCH_CONTROL_H
#define TRAINWATCH_CONTROL_H

#include <stdbool.h>
#include <stdint.h>

typedef struct tw_trainer_control tw_trainer_control;

typedef struct tw_trainer_request {
    long long id;
    char action[16];   /* "checkpoint", "stop", "lr"; an unknown one is replied "ignored" by poll */
    double factor;     /* lr: the factor the learning rate is multiplied by */
    char alert[128];   /* the alert that asked */
    double time;       /* unix seconds it was written */
    int64_t at_step;   /* due at this step (every rank acts at the same one); -1: at once */
} tw_trainer_request;

/* Opens the channel TRAINWATCH_CONTROL names and says hello (pid, rank from
 * the launcher's environment). TW_OK; TW_ENOENT with *out NULL when the
 * variable is unset (not under run); TW_EIO when the file cannot be opened
 * (said once on stderr). */
int tw_trainer_control_open(tw_trainer_control **out);
/* The next request due at step (at_step reached, written after the channel
 * was opened, not seen before): 1 with *req filled, 0 when none. Malformed
 * lines and unknown actions are replied "ignored" here and skipped. */
int tw_trainer_control_poll(tw_trainer_control *c, int64_t step, tw_trainer_request *req);
/* Replies to a request: result "done", "failed" or "ignored", a detail in
 * words (may be NULL). Never blocks; a reply that cannot be written is
 * counted (tw_trainer_control_errors). */
void tw_trainer_control_reply(tw_trainer_control *c, const tw_trainer_request *req, const char *result,
                              int64_t step, const char *detail);
/* Replies and reads that failed so far. */
unsigned long tw_trainer_control_errors(const tw_trainer_control *c);
void tw_trainer_control_close(tw_trainer_control *c);

#endif
