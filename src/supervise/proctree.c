/*
 * proctree.c: one pass over /proc per sample: read every process's parent,
 * keep those that descend from the root, and sum their counters. Cost is a
 * few hundred small reads a second on a busy node: sampling is once a second.
 */
#include "proctree.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainwatch/error.h"

#define PROCS_MAX 65536

typedef struct proc_stat {
    pid_t pid, ppid;
    double cpu;
    uint64_t rss_pages, threads;
} proc_stat;

static int read_stat(pid_t pid, proc_stat *out)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    int ppid;
    unsigned long long utime, stime, threads, rss;
    long long ignored;
    if (sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %llu %lld %*u %*u %llu",
               &ppid, &utime, &stime, &threads, &ignored, &rss) != 6)
        return -1;
    static long ticks;
    if (!ticks)
        ticks = sysconf(_SC_CLK_TCK);
    out->pid = pid;
    out->ppid = ppid;
    out->cpu = (double)(utime + stime) / (double)ticks;
    out->threads = threads;
    out->rss_pages = rss;
    return 0;
}

static void read_io(pid_t pid, tw_tree_sample *s)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/%d/io", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    unsigned long long v;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "read_bytes: %llu", &v) == 1)
            s->read_bytes += v;
        else if (sscanf(line, "write_bytes: %llu", &v) == 1)
            s->write_bytes += v;
    }
    fclose(f);
}

static int by_pid(const void *a, const void *b)
{
    pid_t x = ((const proc_stat *)a)->pid, y = ((const proc_stat *)b)->pid;
    return (x > y) - (x < y);
}

static const proc_stat *find(const proc_stat *all, size_t n, pid_t pid)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (all[mid].pid < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && all[lo].pid == pid ? &all[lo] : NULL;
}

int tw_tree_sample_take(pid_t root, tw_tree_sample *out)
{
    memset(out, 0, sizeof *out);
    proc_stat *all = malloc(sizeof *all * PROCS_MAX);
    if (!all)
        return TW_ENOMEM;
    size_t n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) && n < PROCS_MAX) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0)
            continue;
        if (read_stat((pid_t)pid, &all[n]) == 0)
            n++;
    }
    if (d)
        closedir(d);
    /* mark descendants: sort by pid, then walk each process up its parents
     * (memoized: 1 inside the tree, 2 outside) */
    qsort(all, n, sizeof *all, by_pid);
    char *in = calloc(n ? n : 1, 1);
    const proc_stat *r = find(all, n, root);
    bool found_root = r != NULL;
    if (found_root)
        in[r - all] = 1;
    for (size_t i = 0; found_root && i < n; i++) {
        size_t chain[64];
        int depth = 0;
        size_t k = i;
        char verdict = 2;
        for (;;) {
            if (in[k]) {
                verdict = in[k];
                break;
            }
            if (depth == 64)
                break;
            chain[depth++] = k;
            const proc_stat *parent = find(all, n, all[k].ppid);
            if (!parent)
                break;
            k = (size_t)(parent - all);
        }
        for (int c = 0; c < depth; c++)
            in[chain[c]] = verdict;
    }
    long page = sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < n; i++) {
        if (in[i] != 1)
            continue;
        out->processes++;
        if (out->pid_count < TW_TREE_PIDS) {
            out->parents[out->pid_count] = all[i].ppid;
            out->pids[out->pid_count++] = all[i].pid;
        }
        out->cpu_seconds += all[i].cpu;
        out->rss_bytes += all[i].rss_pages * (uint64_t)page;
        out->threads += all[i].threads;
        read_io(all[i].pid, out);
    }
    free(in);
    free(all);
    return found_root ? TW_OK : TW_ENOENT;
}
