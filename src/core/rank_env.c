/*
 * rank_env.c: the launchers' rank variables and their reading (see
 * rank_env.h).
 */
#include "rank_env.h"

#include <stdlib.h>
#include <string.h>

const char *const tw_rank_env_vars[] = {"PADDLE_TRAINER_ID", "PADDLE_GLOBAL_RANK", "RANK", "OMPI_COMM_WORLD_RANK",
                                        "PMI_RANK",          "SLURM_PROCID",       NULL};
const char *const tw_local_rank_env_vars[] = {"PADDLE_LOCAL_RANK", "LOCAL_RANK",    "OMPI_COMM_WORLD_LOCAL_RANK",
                                              "MPI_LOCALRANKID",   "SLURM_LOCALID", NULL};
const char *const tw_world_size_env_vars[] = {"PADDLE_TRAINERS_NUM",
                                              "PADDLE_GLOBAL_SIZE",
                                              "WORLD_SIZE",
                                              "OMPI_COMM_WORLD_SIZE",
                                              "PMI_SIZE",
                                              "SLURM_NTASKS",
                                              NULL};

/* "123" (all of s) as a number in [0, limit). */
static bool whole_number(const char *s, long limit, int *value)
{
    char *end;
    long n = strtol(s, &end, 10);
    if (end == s || *end != '\0' || n < 0 || n >= limit)
        return false;
    *value = (int)n;
    return true;
}

bool tw_rank_env_entry(const char *const *names, const char *entry, long limit, int *value, int *which)
{
    const char *eq = strchr(entry, '=');
    if (!eq)
        return false;
    size_t name_len = (size_t)(eq - entry);
    for (int i = 0; names[i]; i++) {
        if (strlen(names[i]) == name_len && memcmp(entry, names[i], name_len) == 0 &&
            whole_number(eq + 1, limit, value)) {
            *which = i;
            return true;
        }
    }
    return false;
}

const char *tw_rank_env_get(const char *const *names, long limit, int *value)
{
    for (size_t i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        if (v && whole_number(v, limit, value))
            return names[i];
    }
    return NULL;
}
