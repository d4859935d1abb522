/*
 * proctree.h: sampling a process and all its descendants from /proc:
 * CPU seconds, resident memory, I/O bytes, threads, and how many child
 * processes it has (Paddle and PyTorch data-loader workers are children).
 */
#ifndef TW_SUPERVISE_PROCTREE_H
#define TW_SUPERVISE_PROCTREE_H

#include <stdint.h>
#include <sys/types.h>

#define TW_TREE_PIDS 256

typedef struct tw_tree_sample {
    int processes;            /* the root and its descendants alive now */
    double cpu_seconds;       /* user + system, of the live processes */
    uint64_t rss_bytes;
    uint64_t read_bytes, write_bytes;  /* storage I/O (/proc/PID/io) */
    uint64_t threads;
    int pid_count;            /* the first TW_TREE_PIDS of them */
    pid_t pids[TW_TREE_PIDS];
    pid_t parents[TW_TREE_PIDS]; /* of each of pids */
} tw_tree_sample;

/* Samples root's tree; returns 0, or TW_ENOENT when root is gone. */
int tw_tree_sample_take(pid_t root, tw_tree_sample *out);

#endif
