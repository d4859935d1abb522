/*
 * progress_line.c: the progress line of `trainwatch trace` on stderr, one
 * file at a time: "trace.json.gz  312 MiB of 1024 MiB  4.1M events/s  ETA
 * 0:12", redrawn in place from tw_trace_add_file's progress callback
 * (tw_trace_progress_show) and cleared after the file when one was drawn.
 * Whether a line is wanted at all is the command's choice (cmd_trace.c).
 */
#include <stdio.h>
#include <time.h>

#include "trainwatch/trace.h"

static double since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

void tw_trace_progress_begin(tw_trace_progress_line *p, const char *path)
{
    *p = (tw_trace_progress_line){.path = path};
    clock_gettime(CLOCK_MONOTONIC, &p->start);
}

/* "trace.json.gz  312 MiB of 1.0 GiB  4.1M events/s  ETA 0:12" on one line. */
void tw_trace_progress_show(void *arg, uint64_t done, uint64_t total, uint64_t events)
{
    tw_trace_progress_line *p = arg;
    double s = since(&p->start);
    double rate = s > 0 ? (double)events / s : 0;
    fprintf(stderr, "\r\x1b[K%s  %.0f MiB", p->path, (double)done / 1048576.0);
    if (total > 0) {
        double eta = done > 0 ? s * (double)(total - (done < total ? done : total)) / (double)done : 0;
        fprintf(stderr, " of %.0f MiB  %.1fM events/s  ETA %d:%02d", (double)total / 1048576.0, rate / 1e6,
                (int)eta / 60, (int)eta % 60);
    } else {
        fprintf(stderr, "  %.1fM events/s", rate / 1e6);
    }
    p->shown = true;
}

void tw_trace_progress_end(tw_trace_progress_line *p)
{
    if (p->shown)
        fputs("\r\x1b[K", stderr);
}
