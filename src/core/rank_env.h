/*
 * rank_env.h: the environment variables launchers set to say a process's
 * rank, local rank and world size (paddle.distributed.launch, torchrun,
 * Open MPI, MPICH/PMI, Slurm), one table for every reader: the logger's
 * process identity (log/process.c), `run`'s port offsets and labels
 * (cli/supervision.c) and the actions that signal a rank (actions/ranks.c).
 * Each list is in order of trust: the first one set wins.
 *
 * Ownership: static tables; nothing allocated.
 */
#ifndef TW_CORE_RANK_ENV_H
#define TW_CORE_RANK_ENV_H

#include <stdbool.h>

extern const char *const tw_rank_env_vars[];       /* the global rank; NULL-terminated */
extern const char *const tw_local_rank_env_vars[]; /* the rank on its node */
extern const char *const tw_world_size_env_vars[]; /* the number of ranks */

/* Whether entry, a string "NAME=VALUE" with NAME one of names, gives a
 * whole number in [0, limit): *value and *which (the index of NAME) are
 * set. For the entries of a process's /proc/PID/environ; readers of their
 * own environment use tw_rank_env_get. */
bool tw_rank_env_entry(const char *const *names, const char *entry, long limit, int *value, int *which);

/* The first of names that is set to a whole number in [0, limit), from
 * getenv: its name, *value set; NULL when none is. */
const char *tw_rank_env_get(const char *const *names, long limit, int *value);

#endif
