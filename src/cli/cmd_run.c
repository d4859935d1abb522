/*
 * cmd_run.c: `trainwatch run [options] -- CMD ARGS...` supervises a training
 * command with no change to it: the command's stdout and stderr go through
 * unchanged (and into an optional rotating log file), every line is parsed
 * live, the process tree is sampled every second, /metrics is served,
 * NaN/OOM/stall warnings appear as they happen, signals are forwarded to the
 * command's process group, and at the end the diagnosis is printed (to
 * stderr, so stdout stays the command's), optionally written as JSON and
 * pushed to a Pushgateway. trainwatch exits with the command's status
 * (128+signal when it was killed); when trainwatch itself cannot start
 * (a bad flag, the port taken) it says so and does not start the command.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/http_client.h"
#include "../core/outfile.h"
#include "../supervise/gpu.h"
#include "../supervise/proctree.h"
#include "../supervise/rotate.h"
#include "cli.h"
#include "sinks.h"
#include "supervision.h"
#include "trainwatch/analyze.h"
#include "trainwatch/error.h"
#include "trainwatch/http.h"
#include "trainwatch/live.h"
#include "trainwatch/parse.h"
#include "trainwatch/push.h"

typedef struct run_options {
    tw_cli_supervision sup;
    int rank;
    const char *log_file;
    unsigned long long log_max_bytes;
    unsigned log_backups;
    double kill_after;
    const char *report_file;
    const char *pushgateway;
    bool separate_stderr;
} run_options;

#define GPUS_MAX 16

/* GPU series, named as NVIDIA's DCGM exporter names them where they overlap. */
typedef struct gpu_metrics {
    tw_gpu *gpu;
    unsigned count;
    tw_gauge *util[GPUS_MAX], *copy_util[GPUS_MAX], *fb_used[GPUS_MAX], *fb_free[GPUS_MAX], *power[GPUS_MAX],
        *temp[GPUS_MAX], *sm_clock[GPUS_MAX], *throttle[GPUS_MAX], *ours[GPUS_MAX];
    double util_sum, samples;
    uint64_t memory_peak, memory_total;
} gpu_metrics;

typedef struct tree_metrics {
    tw_counter *cpu, *read, *write;
    tw_gauge *rss, *threads, *processes, *workers;
    tw_tree_sample last;
    double cpu_max_rate, samples, cpu_rate_sum;
    uint64_t rss_peak;
    int workers_peak;
} tree_metrics;

static int signal_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    unsigned char s = (unsigned char)sig;
    int saved = errno;
    if (write(signal_pipe[1], &s, 1) < 0) {
    }
    errno = saved;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: trainwatch run [OPTIONS] -- CMD [ARGS...]\n\n"
            "Runs CMD and supervises it: output passed through (and logged), parsed live,\n"
            "metrics served, warnings on NaN, OOM, exceptions and stalls, the diagnosis at the end.\n"
            "Exits with CMD's status (128+signal when it was killed).\n\n"
            "options:\n"
            "  --log-file FILE             also write CMD's output here (stdout and stderr as one stream)\n"
            "  --log-max-bytes N           rotate the log file past N bytes (0: never)\n"
            "  --log-backups N             keep N rotated files (as Python's RotatingFileHandler)\n"
            "  --job NAME                  the job label (default: CMD's name)\n"
            "  --rank N                    the rank label (default: PADDLE_TRAINER_ID, RANK, ..., or 0)\n"
            "  --format NAME               the log format (default: detect)\n"
            "  --web.listen-address ADDR   serve /metrics here (default " TW_HTTP_DEFAULT_ADDRESS "; 'none')\n"
            "  --web.config.file FILE      TLS and basic auth, exporter-toolkit format\n"
            "  --stall-after SECONDS       warn when no step arrives for this long (default: derived, >= 60)\n"
            "  --kill-after SECONDS        after forwarding SIGINT/SIGTERM/SIGHUP, SIGKILL the group if it is\n"
            "                              still there this long after (default: never)\n"
            "  --separate-stderr           keep CMD's stderr apart from its stdout (two pipes; their lines\n"
            "                              may then interleave out of order in the log and the parse)\n"
            "  --report FILE               write the final diagnosis as JSON\n"
            "  --pushgateway URL           push the final metrics (grouping job, rank, instance)\n\n%s",
            tw_cli_alerts_usage);
}

static int env_rank(void)
{
    static const char *const names[] = {"PADDLE_TRAINER_ID", "PADDLE_GLOBAL_RANK", "RANK", "OMPI_COMM_WORLD_RANK",
                                        "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return atoi(v);
    }
    return 0;
}

static int parse(int argc, char **argv, run_options *o)
{
    static const struct option longopts[] = {{"log-file", 1, 0, 'L'},
                                             {"log-max-bytes", 1, 0, 'M'},
                                             {"log-backups", 1, 0, 'B'},
                                             {"rank", 1, 0, 'r'},
                                             {"kill-after", 1, 0, 'K'},
                                             {"report", 1, 0, 'R'},
                                             {"pushgateway", 1, 0, 'P'},
                                             {"separate-stderr", 0, 0, 'S'},
                                             {"help", 0, 0, 'h'},
                                             TW_CLI_SUPERVISION_LONGOPTS,
                                             {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    double v;
    while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        switch (c) {
        case 'L':
            o->log_file = optarg;
            break;
        case 'M':
            if (tw_cli_number("run", "log-max-bytes", optarg, &v))
                return -1;
            o->log_max_bytes = (unsigned long long)v;
            break;
        case 'B':
            if (tw_cli_number("run", "log-backups", optarg, &v))
                return -1;
            o->log_backups = (unsigned)v;
            break;
        case 'r':
            if (tw_cli_number("run", "rank", optarg, &v))
                return -1;
            o->rank = (int)v;
            break;
        case 'K':
            if (tw_cli_number("run", "kill-after", optarg, &o->kill_after))
                return -1;
            break;
        case 'R':
            o->report_file = optarg;
            break;
        case 'P':
            o->pushgateway = optarg;
            break;
        case 'S':
            o->separate_stderr = true;
            break;
        case 'h':
            usage(stdout);
            exit(TW_EXIT_OK);
        default:
            if (tw_cli_supervision_option(&o->sup, "run", c, optarg, argv[optind - 1]) < 0)
                return -1;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "trainwatch run: no command (trainwatch run [OPTIONS] -- CMD ARGS...)\n");
        return -1;
    }
    return optind;
}

static int tree_metrics_init(tw_registry *r, const char *job, int rank, tree_metrics *t)
{
    char rank_text[16];
    snprintf(rank_text, sizeof rank_text, "%d", rank);
    const char *labels[] = {"job", "rank"};
    const char *values[] = {job, rank_text};
    struct {
        const char *name, *help;
        tw_metric_type type;
        tw_cell **cell;
    } defs[] = {
        {"trainwatch_process_tree_cpu_seconds_total", "CPU time of the command and all its descendants.",
         TW_METRIC_COUNTER, &t->cpu},
        {"trainwatch_process_tree_read_bytes_total", "Storage bytes read by the command's process tree.",
         TW_METRIC_COUNTER, &t->read},
        {"trainwatch_process_tree_write_bytes_total", "Storage bytes written by the command's process tree.",
         TW_METRIC_COUNTER, &t->write},
        {"trainwatch_process_tree_resident_memory_bytes", "Resident memory of the command's process tree.",
         TW_METRIC_GAUGE, &t->rss},
        {"trainwatch_process_tree_threads", "Threads in the command's process tree.", TW_METRIC_GAUGE, &t->threads},
        {"trainwatch_process_tree_processes", "Processes in the command's process tree.", TW_METRIC_GAUGE,
         &t->processes},
        {"trainwatch_process_tree_workers", "Child processes of the command (data-loader workers and others).",
         TW_METRIC_GAUGE, &t->workers},
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        tw_family *f;
        tw_family_options o = {
            .name = defs[i].name, .help = defs[i].help, .type = defs[i].type, .label_count = 2, .label_names = labels};
        int rc = tw_family_register(r, &o, &f);
        if (rc == TW_OK)
            rc = tw_family_series(f, values, defs[i].cell);
        if (rc != TW_OK)
            return rc;
    }
    return TW_OK;
}

static int gpu_metrics_init(tw_registry *r, const char *job, int rank, gpu_metrics *g)
{
    char why[512];
    if (tw_gpu_open(NULL, &g->gpu, why, sizeof why) != TW_OK) {
        fprintf(stderr, "trainwatch run: no GPU metrics: %s\n", why);
        return TW_OK; /* no GPU is not an error */
    }
    g->count = tw_gpu_count(g->gpu) < GPUS_MAX ? tw_gpu_count(g->gpu) : GPUS_MAX;
    const char *labels[] = {"job", "rank", "gpu", "UUID", "modelName"};
    struct {
        const char *name, *help;
        tw_gauge **cells;
    } defs[] = {
        {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", g->util},
        {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", g->copy_util},
        {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", g->fb_used},
        {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", g->fb_free},
        {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", g->power},
        {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", g->temp},
        {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", g->sm_clock},
        {"trainwatch_gpu_clock_event_reasons", "NVML clock event (throttle) reason bits; 0 when not throttled.",
         g->throttle},
        {"trainwatch_gpu_process_memory_bytes", "GPU memory used by the command's processes.", g->ours},
    };
    char rank_text[16];
    snprintf(rank_text, sizeof rank_text, "%d", rank);
    for (size_t k = 0; k < sizeof defs / sizeof defs[0]; k++) {
        tw_family *f;
        tw_family_options o = {.name = defs[k].name,
                               .help = defs[k].help,
                               .type = TW_METRIC_GAUGE,
                               .label_count = 5,
                               .label_names = labels};
        int rc = tw_family_register(r, &o, &f);
        for (unsigned i = 0; i < g->count && rc == TW_OK; i++) {
            tw_gpu_reading reading;
            tw_gpu_read(g->gpu, i, &reading);
            char index[16];
            snprintf(index, sizeof index, "%u", i);
            const char *values[] = {job, rank_text, index, reading.uuid, reading.name};
            rc = tw_family_series(f, values, &defs[k].cells[i]);
        }
        if (rc != TW_OK)
            return rc;
    }
    fprintf(stderr, "trainwatch run: sampling %u GPU(s) through NVML\n", g->count);
    return TW_OK;
}

static void sample_gpus(gpu_metrics *g, const tw_tree_sample *tree)
{
    for (unsigned i = 0; g->gpu && i < g->count; i++) {
        tw_gpu_reading r;
        if (tw_gpu_read(g->gpu, i, &r) != TW_OK)
            continue;
        if (r.has_util) {
            tw_gauge_set(g->util[i], r.util_gpu);
            tw_gauge_set(g->copy_util[i], r.util_memory);
            g->util_sum += r.util_gpu;
            g->samples++;
        }
        if (r.has_memory) {
            tw_gauge_set(g->fb_used[i], (double)r.memory_used / (1024 * 1024));
            tw_gauge_set(g->fb_free[i], (double)(r.memory_total - r.memory_used) / (1024 * 1024));
            if (r.memory_used > g->memory_peak)
                g->memory_peak = r.memory_used;
            g->memory_total = r.memory_total;
        }
        if (r.has_power)
            tw_gauge_set(g->power[i], r.power_watts);
        if (r.has_temp)
            tw_gauge_set(g->temp[i], r.temp_c);
        if (r.has_clock)
            tw_gauge_set(g->sm_clock[i], r.sm_clock_mhz);
        if (r.has_throttle)
            tw_gauge_set(g->throttle[i], (double)r.throttle_reasons);
        if (tree)
            tw_gauge_set(g->ours[i], (double)tw_gpu_memory_of(g->gpu, i, tree->pids, (size_t)tree->pid_count));
    }
}

static void sample_tree(pid_t child, tree_metrics *t, double interval)
{
    tw_tree_sample s;
    if (tw_tree_sample_take(child, &s) != TW_OK)
        return;
    /* counters only move forward: a worker that exits takes its CPU time with it */
    if (s.cpu_seconds > t->last.cpu_seconds) {
        double delta = s.cpu_seconds - t->last.cpu_seconds;
        tw_counter_add(t->cpu, delta);
        if (interval > 0) {
            double rate = delta / interval;
            t->cpu_rate_sum += rate;
            t->samples++;
            if (rate > t->cpu_max_rate)
                t->cpu_max_rate = rate;
        }
    }
    if (s.read_bytes > t->last.read_bytes)
        tw_counter_add(t->read, (double)(s.read_bytes - t->last.read_bytes));
    if (s.write_bytes > t->last.write_bytes)
        tw_counter_add(t->write, (double)(s.write_bytes - t->last.write_bytes));
    tw_gauge_set(t->rss, (double)s.rss_bytes);
    tw_gauge_set(t->threads, (double)s.threads);
    tw_gauge_set(t->processes, s.processes);
    tw_gauge_set(t->workers, s.processes - 1);
    if (s.rss_bytes > t->rss_peak)
        t->rss_peak = s.rss_bytes;
    if (s.processes - 1 > t->workers_peak)
        t->workers_peak = s.processes - 1;
    t->last = s;
}

typedef struct stream {
    int fd;
    FILE *out;
    tw_parser *parser;
} stream;

/* The log file of --log-file: a full disk drops lines (counted) and is said
 * once when it starts and once when writing works again; the command is
 * never held up by it. */
typedef struct run_log {
    tw_rotating_file *file;
    const char *path;
} run_log;

static void log_output(run_log *log, const char *buf, size_t n)
{
    if (!log->file)
        return;
    bool was_failing = tw_rotating_failing(log->file);
    tw_rotating_write(log->file, buf, n);
    bool failing = tw_rotating_failing(log->file);
    if (failing && !was_failing)
        fprintf(stderr, "trainwatch run: writing %s: %s; lines are dropped until it can be written again\n", log->path,
                tw_rotating_error(log->file));
    else if (was_failing && !failing)
        fprintf(stderr, "trainwatch run: writing %s works again (%llu bytes dropped so far)\n", log->path,
                (unsigned long long)tw_rotating_dropped(log->file));
}

/* Moves what the command printed to our terminal, the log file and the
 * parser; returns false at end of stream. */
static bool pump(stream *st, run_log *log, tw_cli_sinks *s)
{
    char buf[65536];
    ssize_t n = read(st->fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0)
        return false;
    fwrite(buf, 1, (size_t)n, st->out);
    fflush(st->out);
    log_output(log, buf, (size_t)n);
    tw_parser_push(st->parser, buf, (size_t)n, tw_cli_sinks_record, s);
    return true;
}

/* On a terminal the command gets one too: its stdout and stderr go to a
 * pseudo-terminal (so progress bars redraw in place and colours stay on),
 * sized like ours, with output post-processing off so its bytes reach us
 * unchanged. Returns the master side, or -1 when stdout is not a terminal. */
static int open_pty(int *slave)
{
    if (!isatty(STDOUT_FILENO))
        return -1;
    struct winsize ws;
    bool sized = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0;
    int master;
    if (openpty(&master, slave, NULL, NULL, sized ? &ws : NULL) != 0)
        return -1;
    struct termios t;
    if (tcgetattr(*slave, &t) == 0) {
        t.c_oflag &= ~(tcflag_t)OPOST;
        tcsetattr(*slave, TCSANOW, &t);
    }
    fcntl(master, F_SETFD, FD_CLOEXEC);
    fcntl(*slave, F_SETFD, FD_CLOEXEC);
    return master;
}

/* With a terminal on stdin, the command's group becomes the foreground group
 * so it can read the terminal and Ctrl-C reaches it directly. */
static void foreground(pid_t pgid)
{
    if (!isatty(STDIN_FILENO))
        return;
    void (*old)(int) = signal(SIGTTOU, SIG_IGN);
    tcsetpgrp(STDIN_FILENO, pgid);
    signal(SIGTTOU, old);
}

static pid_t start_child(char **cmd, int out_fd, int err_fd)
{
    int status_pipe[2];
    if (pipe2(status_pipe, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setpgid(0, 0);
        foreground(getpid());
        signal(SIGPIPE, SIG_DFL);
        dup2(out_fd, STDOUT_FILENO);
        dup2(err_fd, STDERR_FILENO);
        execvp(cmd[0], cmd);
        int e = errno;
        if (write(status_pipe[1], &e, sizeof e) < 0) {
        }
        _exit(127);
    }
    setpgid(pid, pid);
    close(status_pipe[1]);
    int e = 0;
    ssize_t got = read(status_pipe[0], &e, sizeof e);
    close(status_pipe[0]);
    if (got == (ssize_t)sizeof e) {
        waitpid(pid, NULL, 0);
        errno = e;
        return 0; /* exec failed */
    }
    return pid;
}

#define GPU_UNDERUSED_PERCENT 30.0

/* What the sampling saw, as a finding beside the log's: GPUs mostly idle
 * while the command ran, with the data wait the log reports when it has one. */
static void gpu_finding(tw_report *report, const gpu_metrics *g)
{
    if (!g->gpu || g->samples < 3)
        return;
    double util = g->util_sum / g->samples;
    if (util >= GPU_UNDERUSED_PERCENT)
        return;
    tw_finding f = {.rule = "gpu_underused", .severity = TW_SEV_WARNING, .rank = -1, .step = -1, .value = util / 100};
    double share = report->summary.data_share;
    snprintf(f.title, sizeof f.title, "GPU utilization averaged %.0f%%%s", util,
             share == share && share > 0 ? " while steps waited for data" : "");
    snprintf(f.evidence, sizeof f.evidence,
             "%u GPU(s) sampled every second through NVML: %.0f%% utilization on average (%.0f samples)", g->count,
             util, g->samples);
    if (share == share && share > 0) {
        size_t n = strlen(f.evidence);
        snprintf(f.evidence + n, sizeof f.evidence - n, "\nthe log's data wait was %.0f%% of step time", share * 100);
    }
    snprintf(f.recommendation, sizeof f.recommendation, "%s",
             share == share && share >= 0.3
                 ? "The GPU waits for input: see data_loading_bound (more DataLoader workers, cheaper decoding)."
                 : "Look for work outside the GPU in each step: host-side preprocessing, synchronisation (.item(), "
                   ".numpy() in the loop), small batches, or a slow collective.");
    tw_report_append(report, &f);
}

/* The JSON report, written whole or not at all; false when it failed (said). */
static bool write_report(const run_options *o, const tw_report *report)
{
    char err[600];
    tw_outfile out;
    if (tw_outfile_open(&out, o->report_file, err, sizeof err) != 0) {
        fprintf(stderr, "trainwatch run: --report %s\n", err);
        return false;
    }
    tw_report_write_json(out.f, report);
    if (tw_outfile_commit(&out, err, sizeof err) != 0) {
        fprintf(stderr, "trainwatch run: --report %s\n", err);
        return false;
    }
    return true;
}

static void write_summary(const run_options *o, const tw_report *report, const tree_metrics *t, const gpu_metrics *g)
{
    fprintf(stderr, "\n== trainwatch: %s\n", o->sup.job);
    tw_report_write_text(stderr, report, isatty(STDERR_FILENO));
    fprintf(stderr,
            "process tree: %.2f CPU cores on average (peak %.2f), peak resident memory %.1f MiB, "
            "up to %d worker processes\n",
            t->samples ? t->cpu_rate_sum / t->samples : 0, t->cpu_max_rate, (double)t->rss_peak / (1024 * 1024),
            t->workers_peak);
    if (g->gpu && g->samples > 0) {
        double util = g->util_sum / g->samples;
        fprintf(stderr, "GPU: utilization averaged %.0f%% over %u GPU(s), memory peak %.1f of %.1f GiB", util, g->count,
                (double)g->memory_peak / (1 << 30), (double)g->memory_total / (1 << 30));
        double share = report->summary.data_share;
        if (share == share && share > 0)
            fprintf(stderr, ", while data wait was %.0f%% of step time", share * 100);
        fputc('\n', stderr);
    }
}

static void push_final(const run_options *o, tw_registry *reg)
{
    char host[256] = "", rank[16], err[512];
    gethostname(host, sizeof host - 1);
    snprintf(rank, sizeof rank, "%d", o->rank);
    tw_push_options p = {.url = o->pushgateway,
                         .job = o->sup.job,
                         .grouping_count = 2,
                         .grouping_names = {"rank", "instance"},
                         .grouping_values = {rank, host}};
    if (tw_push(&p, reg, TW_PUSH_REPLACE, err, sizeof err) != TW_OK)
        fprintf(stderr, "trainwatch run: pushing to the Pushgateway failed: %s\n", err);
}

/* Where the command's output goes: on a terminal one pseudo-terminal for
 * both streams; else one pipe for both (one ordered stream, as `2>&1`), or
 * two with --separate-stderr. read[i] are our ends (-1: none), write[i] the
 * command's. */
static int open_output(const run_options *o, int read_fd[2], int write_fd[2])
{
    int slave = -1, master = open_pty(&slave);
    if (master >= 0) {
        read_fd[0] = master, write_fd[0] = slave;
        read_fd[1] = -1, write_fd[1] = slave;
        return 0;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    read_fd[0] = p[0], write_fd[0] = p[1];
    read_fd[1] = -1, write_fd[1] = p[1];
    if (!o->separate_stderr)
        return 0;
    if (pipe2(p, O_CLOEXEC) != 0) {
        close(read_fd[0]);
        close(write_fd[0]);
        return -1;
    }
    read_fd[1] = p[0], write_fd[1] = p[1];
    return 0;
}

/* The record of how the command ended, placed after the last line it
 * printed (so the diagnosis reads it as the end of the run, not as a
 * failure training recovered from). A status of 128+N after trainwatch
 * forwarded signal N is that signal: the command's shell or handler turned
 * it into an exit status. */
static void end_record(const char *cmd, const char *source, uint64_t lines, int rank, int child_status, int forwarded,
                       tw_record *ev)
{
    tw_record_init(ev);
    ev->kind = TW_REC_EVENT;
    ev->rank = rank;
    ev->source.file = source;
    ev->source.line = lines + 1;
    int code = WIFEXITED(child_status) ? WEXITSTATUS(child_status) : -1;
    int sig =
        WIFSIGNALED(child_status) ? WTERMSIG(child_status) : (forwarded && code == 128 + forwarded ? forwarded : 0);
    if (sig) {
        ev->event = TW_EV_SIGNAL;
        ev->exit_code = sig;
        if (code >= 0)
            snprintf(ev->message, sizeof ev->message,
                     "%s exited with status %d after trainwatch run forwarded signal %d (%s) to it", cmd, code, sig,
                     strsignal(sig));
        else
            snprintf(ev->message, sizeof ev->message, "%s was killed by signal %d (%s)%s", cmd, sig, strsignal(sig),
                     sig == forwarded ? ", which trainwatch run forwarded to it" : "");
    } else {
        ev->event = TW_EV_EXIT;
        ev->exit_code = code;
        snprintf(ev->message, sizeof ev->message, "%s exited with status %d", cmd, code);
    }
}

static int run(int argc, char **argv)
{
    run_options o = {.sup.serve = true, .rank = env_rank()};
    int first = parse(argc, argv, &o);
    if (first < 0)
        return TW_EXIT_USAGE;
    char **cmd = argv + first;
    if (!o.sup.job) {
        const char *slash = strrchr(cmd[0], '/');
        o.sup.job = slash ? slash + 1 : cmd[0];
    }
    int status = TW_EXIT_USAGE;
    char err[600];
    tw_registry *reg = NULL;
    tw_http_server *server = NULL;
    run_log log = {NULL, o.log_file};
    tw_cli_sinks s = {0};
    stream streams[2] = {{-1, stdout, NULL}, {-1, stderr, NULL}};
    tree_metrics tree = {0};
    gpu_metrics gpu = {0};
    if (tw_registry_new(&reg) != TW_OK || tw_run_new(&s.run, NULL) != TW_OK)
        goto done;
    tw_process_collector_register(reg);
    tw_live_options lo = {.registry = reg, .job = o.sup.job, .stall_after = o.sup.stall_after, .warnings = stderr};
    if (tw_live_new(&lo, &s.live) != TW_OK || tree_metrics_init(reg, o.sup.job, o.rank, &tree) != TW_OK ||
        gpu_metrics_init(reg, o.sup.job, o.rank, &gpu) != TW_OK)
        goto done;
    sample_gpus(&gpu, NULL); /* no GPU gauge reads 0 before the first sample (alerts see them) */
    /* everything that can fail before the command starts, fails here */
    if (o.report_file && tw_outfile_check(o.report_file, err, sizeof err) != 0) {
        fprintf(stderr, "trainwatch run: --report %s (not starting %s)\n", err, cmd[0]);
        goto done;
    }
    if (tw_cli_alerts_start(&o.sup.alerts, "run", reg) != TW_OK)
        goto done;
    if (o.pushgateway && tw_http_client_load(err, sizeof err) != TW_OK) {
        fprintf(stderr, "trainwatch run: --pushgateway: %s (not starting %s)\n", err, cmd[0]);
        goto done;
    }
    if (o.log_file && tw_rotating_open(o.log_file, o.log_max_bytes, o.log_backups, &log.file) != TW_OK) {
        fprintf(stderr, "trainwatch run: %s: %s (not starting %s)\n", o.log_file, strerror(errno), cmd[0]);
        goto done;
    }
    if (tw_cli_supervision_serve(&o.sup, "run", cmd[0], reg, &server) != 0)
        goto done;
    int read_fd[2], write_fd[2];
    if (open_output(&o, read_fd, write_fd) != 0 || pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "trainwatch run: %s\n", strerror(errno));
        goto done;
    }
    for (int i = 0; i < 2; i++) {
        const char *name = o.log_file ? o.log_file : (i == 0 ? "<stdout>" : "<stderr>");
        if (read_fd[i] >= 0 && tw_parser_new(&streams[i].parser, name, o.sup.format, o.rank) != TW_OK)
            goto done;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (isatty(STDOUT_FILENO))
        sigaction(SIGWINCH, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTTOU, SIG_IGN); /* writing to the terminal from the background group */
    pid_t child = start_child(cmd, write_fd[0], write_fd[1]);
    int start_errno = errno;
    close(write_fd[0]);
    if (write_fd[1] != write_fd[0])
        close(write_fd[1]);
    if (child <= 0) {
        fprintf(stderr, "trainwatch run: %s: %s\n", cmd[0], strerror(start_errno));
        for (int i = 0; i < 2; i++) {
            if (read_fd[i] >= 0)
                close(read_fd[i]);
        }
        status = 127;
        goto done;
    }
    streams[0].fd = read_fd[0];
    streams[1].fd = read_fd[1];
    int child_status = 0, forwarded = 0;
    bool exited = false;
    double last_sample = tw_monotonic_clock(), forwarded_at = 0, exited_at = 0;
    for (;;) {
        struct pollfd p[3] = {{streams[0].fd, POLLIN, 0}, {streams[1].fd, POLLIN, 0}, {signal_pipe[0], POLLIN, 0}};
        poll(p, 3, 250);
        for (int i = 0; i < 2; i++) {
            if (streams[i].fd >= 0 && (p[i].revents & (POLLIN | POLLHUP | POLLERR)) && !pump(&streams[i], &log, &s)) {
                close(streams[i].fd);
                streams[i].fd = -1;
            }
        }
        unsigned char sig;
        while (read(signal_pipe[0], &sig, 1) == 1) {
            if (sig == SIGWINCH) {
                struct winsize ws;
                if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0)
                    ioctl(streams[0].fd, TIOCSWINSZ, &ws); /* the kernel tells the command */
                continue;
            }
            kill(-child, sig);
            forwarded = sig;
            if (!forwarded_at)
                forwarded_at = tw_monotonic_clock();
        }
        if (!exited && waitpid(child, &child_status, WNOHANG) == child) {
            exited = true;
            exited_at = tw_monotonic_clock();
        }
        double t = tw_monotonic_clock();
        if (!exited && o.kill_after > 0 && forwarded_at > 0 && t - forwarded_at >= o.kill_after) {
            fprintf(stderr, "trainwatch run: %s still running %.0f s after the signal: killing it\n", cmd[0],
                    o.kill_after);
            kill(-child, SIGKILL);
            forwarded = SIGKILL;
            forwarded_at = -1e18;
        }
        if (t - last_sample >= 1) {
            if (!exited) {
                sample_tree(child, &tree, t - last_sample);
                sample_gpus(&gpu, &tree.last);
            }
            tw_live_tick(s.live, tw_wall_clock());
            last_sample = t;
        }
        tw_cli_alerts_tick(&o.sup.alerts, tw_wall_clock());
        bool drained = streams[0].fd < 0 && streams[1].fd < 0;
        /* workers that outlive the command may hold the pipes: do not wait for them long */
        if (exited && (drained || t - exited_at > 2))
            break;
    }
    for (int i = 0; i < 2; i++) {
        if (streams[i].fd >= 0)
            close(streams[i].fd);
        if (streams[i].parser && tw_parser_pending(streams[i].parser))
            tw_parser_push(streams[i].parser, "\n", 1, tw_cli_sinks_record, &s);
    }
    foreground(getpgrp()); /* the terminal is ours again */
    status = WIFSIGNALED(child_status) ? 128 + WTERMSIG(child_status) : WEXITSTATUS(child_status);
    tw_record ev;
    end_record(cmd[0], tw_parser_path(streams[0].parser), tw_parser_line(streams[0].parser), o.rank, child_status,
               forwarded, &ev);
    tw_cli_sinks_record(&s, &ev);
    int log_rc = tw_rotating_close(log.file);
    log.file = NULL;
    if (log_rc != TW_OK)
        fprintf(stderr, "trainwatch run: writing %s: %s\n", o.log_file, tw_strerror(log_rc));
    tw_thresholds th;
    tw_thresholds_default(&th);
    tw_report *report;
    if (tw_diagnose(s.run, &th, &report) == TW_OK) {
        gpu_finding(report, &gpu);
        tw_finding stall;
        if (tw_live_stall_finding(s.live, tw_wall_clock(), &stall))
            tw_report_append(report, &stall);
        if (o.report_file && !write_report(&o, report) && status == 0)
            status = TW_EXIT_PROBLEMS; /* the command succeeded, the report it was asked for is missing */
        write_summary(&o, report, &tree, &gpu);
        tw_report_free(report);
    }
    tw_cli_alerts_finish(&o.sup.alerts, "run", tw_wall_clock());
    if (o.pushgateway)
        push_final(&o, reg);
done:
    tw_cli_alerts_free(&o.sup.alerts);
    tw_gpu_close(gpu.gpu);
    for (int i = 0; i < 2; i++)
        tw_parser_close(streams[i].parser);
    tw_http_stop(server);
    tw_rotating_close(log.file);
    tw_live_free(s.live);
    tw_run_free(s.run);
    tw_registry_free(reg);
    return status;
}

const tw_command tw_cmd_run = {
    .name = "run",
    .summary = "run a training command under supervision: live metrics, warnings, diagnosis",
    .usage = "usage: trainwatch run [OPTIONS] -- CMD [ARGS...]   (trainwatch run --help for options)\n",
    .run = run,
};
