/*
 * process.c: the standard process_* metrics, with the names every Prometheus
 * client library uses, read from /proc at each scrape:
 * process_cpu_seconds_total, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_open_fds, process_max_fds,
 * process_start_time_seconds.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "internal.h"
#include "trainwatch/error.h"

typedef struct process_metrics {
    tw_counter *cpu;
    tw_gauge *rss, *vsize, *open_fds, *max_fds, *start;
    double cpu_seen;
} process_metrics;

static double boot_time(void)
{
    FILE *f = fopen("/proc/stat", "r");
    char line[256];
    double btime = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "btime ", 6) == 0) {
            btime = strtod(line + 6, NULL);
            break;
        }
    }
    if (f)
        fclose(f);
    return btime;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory stream's own descriptor */
}

static void collect(tw_registry *r, void *arg)
{
    (void)r;
    process_metrics *m = arg;
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    /* fields after the command name, which may contain spaces: find the last ')' */
    char *p = strrchr(buf, ')');
    if (p) {
        unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
        long long rss = 0;
        /* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
         * cutime cstime priority nice threads itrealvalue starttime vsize rss */
        if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu %llu %lld",
                   &utime, &stime, &start, &vsize, &rss) == 5) {
            double ticks = (double)sysconf(_SC_CLK_TCK);
            double cpu = (double)(utime + stime) / ticks;
            if (cpu > m->cpu_seen) {
                tw_counter_add(m->cpu, cpu - m->cpu_seen);
                m->cpu_seen = cpu;
            }
            tw_gauge_set(m->vsize, (double)vsize);
            tw_gauge_set(m->rss, (double)rss * (double)sysconf(_SC_PAGESIZE));
            tw_gauge_set(m->start, boot_time() + (double)start / ticks);
        }
    }
    tw_gauge_set(m->open_fds, count_fds());
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        tw_gauge_set(m->max_fds, rl.rlim_cur == RLIM_INFINITY ? -1 : (double)rl.rlim_cur);
}

int tw_process_collector_register(tw_registry *r)
{
    process_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return TW_ENOMEM;
    int rc = tw_counter_new(r, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", &m->cpu);
    if (rc == TW_OK)
        rc = tw_gauge_new(r, "process_resident_memory_bytes", "Resident memory size in bytes.", &m->rss);
    if (rc == TW_OK)
        rc = tw_gauge_new(r, "process_virtual_memory_bytes", "Virtual memory size in bytes.", &m->vsize);
    if (rc == TW_OK)
        rc = tw_gauge_new(r, "process_open_fds", "Number of open file descriptors.", &m->open_fds);
    if (rc == TW_OK)
        rc = tw_gauge_new(r, "process_max_fds", "Maximum number of open file descriptors.", &m->max_fds);
    if (rc == TW_OK)
        rc = tw_gauge_new(r, "process_start_time_seconds", "Start time of the process since unix epoch in seconds.", &m->start);
    if (rc == TW_OK)
        rc = tw_registry_add_collector(r, collect, m, free);
    if (rc != TW_OK)
        free(m);
    return rc;
}
