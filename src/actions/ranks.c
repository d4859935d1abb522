/*
 * ranks.c: the training processes a signal: action goes to. The command's
 * process tree (the process sampler's walk, supervise/proctree.h), each
 * process's rank read from the environment it was started with
 * (/proc/PID/environ: PADDLE_TRAINER_ID, RANK, ...), and per rank the top
 * one: a rank's data-loader workers inherit its environment and must not
 * get its signals. A tree where no process has a rank (one python train.py)
 * is the command alone.
 */
#include "actions_internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/rank_env.h"
#include "../supervise/proctree.h"

#define ENVIRON_MAX (256 << 10)

/* The first rank variable of pid's start-up environment; -1 when none. */
static int environ_rank(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char *buf = malloc(ENVIRON_MAX + 1);
    ssize_t n = 0, got;
    while (buf && n < ENVIRON_MAX && (got = read(fd, buf + n, (size_t)(ENVIRON_MAX - n))) > 0)
        n += got;
    close(fd);
    if (!buf)
        return -1;
    buf[n] = '\0';
    int best = -1, rank = -1;
    for (char *p = buf; p < buf + n; p += strlen(p) + 1) {
        int value, which;
        if (tw_rank_env_entry(tw_rank_env_vars, p, 1 << 20, &value, &which) && (best < 0 || which < best))
            best = which, rank = value;
    }
    free(buf);
    return rank;
}

size_t tw_rank_processes(pid_t root, tw_rank_proc *out, size_t cap)
{
    tw_tree_sample *tree = malloc(sizeof *tree);
    if (!tree || cap == 0 || tw_tree_sample_take(root, tree) != 0) {
        free(tree);
        return 0;
    }
    int n = tree->pid_count;
    int *ranks = malloc(sizeof *ranks * (size_t)(n ? n : 1));
    size_t count = 0;
    for (int i = 0; ranks && i < n; i++)
        ranks[i] = environ_rank(tree->pids[i]);
    for (int i = 0; ranks && i < n && count < cap; i++) {
        if (ranks[i] < 0)
            continue;
        pid_t parent = tree->parents[i];
        bool top = true;
        for (int j = 0; j < n && top; j++)
            if (tree->pids[j] == parent && ranks[j] == ranks[i])
                top = false;
        if (top)
            out[count++] = (tw_rank_proc){tree->pids[i], ranks[i]};
    }
    if (count == 0)
        out[count++] = (tw_rank_proc){root, -1};
    free(ranks);
    free(tree);
    return count;
}
