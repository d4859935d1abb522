/*
 * supervision.c: the live engine under `run` and `watch` (see
 * trainwatch/supervise.h).
 *
 * One supervision owns a registry, the sinks (sinks.h) every record goes
 * to, the alerting (alerting.h), the /metrics server, and one source: a
 * command (child.h: its output pumped to our stdout, the log file and one
 * parser per stream; samplers.h on a one-second timer) or a follower of log
 * files (follow.h). Signals arrive through a self-pipe.
 */
#include "trainwatch/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/outfile.h"
#include "../core/say.h"
#include "../log/rotate.h"
#include "../parse/user_formats.h"
#include "alerting.h"
#include "child.h"
#include "health.h"
#include "samplers.h"
#include "sdfile.h"
#include "sinks.h"
#include "trainwatch/error.h"
#include "trainwatch/live.h"

#ifndef TW_VERSION
#define TW_VERSION "0.0.0"
#endif
#ifndef TW_REVISION
#define TW_REVISION "unknown"
#endif
#if defined(__clang__)
#define TW_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define TW_COMPILER "gcc " __VERSION__
#else
#define TW_COMPILER "unknown"
#endif

#define OUTPUT_DRAIN_SECONDS 2.0 /* workers that outlive the command may hold its pipes */

/* The command's source: the process, its output's parsers and log file. */
typedef struct command_source {
    tw_command_options o;
    tw_child *child;
    tw_parser *parsers[2];
    tw_rotating_file *log;
    tw_samplers *samplers;
    double last_sample, forwarded_at, exited_at;
    bool exited;
} command_source;

struct tw_supervision {
    tw_supervision_options o;
    tw_registry *registry;
    tw_sinks sinks;
    tw_alerts alerts;
    tw_http_server *server;
    char target[300];  /* host:port as a scraper reaches it */
    char serving[300]; /* host:port as bound */
    bool in_sd_file;   /* our entry is in o.sd_file */
    int signal_pipe[2];
    command_source *command;
    tw_follower *follower;
    tw_follow_stats follow_stats;
    bool followed; /* the source was files (their statistics stay after finish) */
    bool stop;
    tw_health_gauge health; /* trainwatch_health_score */
    unsigned long stalls_acted; /* the live stalls the actions were told of */
    tw_remote_write *remote;
    double remote_at;              /* monotonic time of the last collection */
    char host[256], rank_text[16]; /* host.name of records; the remote-write labels' values */
};

static int signal_fd = -1; /* the catching supervision's pipe: a handler takes no argument */

/* Writes the bound address, one line, to the address file, whole or not at
 * all (a reader polling for it never sees half an address). */
static int write_address(const tw_supervision *s, const char *address)
{
    char err[600];
    tw_outfile out;
    int rc = tw_outfile_open(&out, s->o.address_file, err, sizeof err);
    if (rc == TW_OK) {
        fprintf(out.f, "%s\n", address);
        rc = tw_outfile_commit(&out, err, sizeof err);
    }
    if (rc != TW_OK)
        tw_say(TW_SAY_ERROR, s->o.name, "--web.address-file %s", err);
    return rc;
}

/* The /alerts page with the actions: in the JSON, an "actions" member
 * after "rules"; in the HTML, a table before the end of the body. Takes
 * both texts; on no memory the page stays as it was. */
static char *with_actions(char *page, size_t *len, char *actions, bool json)
{
    if (!actions)
        return page;
    const char *at = json ? strrchr(page, '}') : strstr(page, "</body>");
    size_t head = at ? (size_t)(at - page) : *len, extra = strlen(actions);
    char *joined = malloc(*len + extra + 16);
    if (joined) {
        memcpy(joined, page, head);
        size_t n = head;
        if (json) {
            memcpy(joined + n, ",\"actions\":", 11);
            n += 11;
        }
        memcpy(joined + n, actions, extra);
        n += extra;
        memcpy(joined + n, page + head, *len - head);
        n += *len - head;
        joined[n] = '\0';
        *len = n;
        free(page);
        page = joined;
    }
    free(actions);
    return page;
}

/* The /alerts page, on the server's thread (the alerting locks its state). */
static char *alerts_page(void *arg, const char *path, const char *format, size_t *len, const char **type)
{
    tw_supervision *s = arg;
    tw_alerting *alerting = __atomic_load_n(&s->alerts.alerting, __ATOMIC_ACQUIRE);
    if (strcmp(path, "/alerts") != 0 || !alerting)
        return NULL;
    bool json = format && !strcmp(format, "json");
    *type = json ? "application/json" : "text/html; charset=utf-8";
    char *page = tw_alerting_page(alerting, json, len);
    tw_actions *actions = s->alerts.actions;
    if (!page || !actions || !tw_actions_count(actions))
        return page;
    return with_actions(page, len, tw_actions_page(actions, json), json);
}

/* Starts the metrics server, when serving, and notes where it listens (the
 * port bound, also for port 0; said once the supervision is ready). */
static int serve(tw_supervision *s)
{
    if (!s->o.serve)
        return TW_OK;
    char err[512], host[256] = "", port[16] = "";
    s->o.http.registry = s->registry;
    s->o.http.page = alerts_page;
    s->o.http.page_arg = s;
    int rc = tw_http_start(&s->o.http, &s->server, err, sizeof err);
    if (rc != TW_OK) {
        tw_say(TW_SAY_ERROR, s->o.name, "%s", err);
        return rc;
    }
    const char *address = s->o.http.listen_address ? s->o.http.listen_address : TW_HTTP_DEFAULT_ADDRESS;
    if (tw_parse_listen_address(address, host, sizeof host, port, sizeof port) != 0 || !host[0])
        snprintf(host, sizeof host, "0.0.0.0");
    bool v6 = strchr(host, ':') != NULL;
    snprintf(s->serving, sizeof s->serving, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "", tw_http_port(s->server));
    /* the address a scraper uses: this host's name when listening on all interfaces */
    if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::")) {
        gethostname(host, sizeof host - 1);
        v6 = false;
    }
    snprintf(s->target, sizeof s->target, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "", tw_http_port(s->server));
    return s->o.address_file ? write_address(s, s->serving) : TW_OK;
}

/* A label value of a number that may be unknown (-1: empty). */
static const char *number_text(int v, char *buf, size_t len)
{
    if (v < 0)
        return "";
    snprintf(buf, len, "%d", v);
    return buf;
}

/* One series of value 1 whose labels say what it is about. */
static int info_series(tw_registry *r, const char *name, const char *help, size_t n, const char *const *labels,
                       const char *const *values)
{
    tw_family *f;
    tw_gauge *g = NULL;
    tw_family_options fo = {
        .name = name, .help = help, .type = TW_METRIC_GAUGE, .label_count = n, .label_names = labels};
    int rc = tw_family_register(r, &fo, &f);
    if (rc == TW_OK)
        rc = tw_family_series(f, values, &g);
    if (rc == TW_OK)
        tw_gauge_set(g, 1);
    return rc;
}

/* trainwatch_run_info: the run's identity, which per-run series join on
 * run (and rank); trainwatch_build_info: this build, as exporters have. */
static int info_metrics(tw_supervision *s)
{
    char host[256] = "", rank[16], local[16], world[16];
    gethostname(host, sizeof host - 1);
    const char *run_labels[] = {"run", "command", "host", "rank", "local_rank", "world_size", "version"};
    const char *run_values[] = {s->o.run ? s->o.run : "trainwatch",
                                s->o.command ? s->o.command : "",
                                host,
                                number_text(s->o.rank, rank, sizeof rank),
                                number_text(s->o.local_rank, local, sizeof local),
                                number_text(s->o.world_size, world, sizeof world),
                                TW_VERSION};
    int rc = info_series(s->registry, "trainwatch_run_info", "The run this trainwatch watches (value 1).", 7,
                         run_labels, run_values);
    const char *build_labels[] = {"version", "revision", "compiler"};
    const char *build_values[] = {TW_VERSION, TW_REVISION, TW_COMPILER};
    if (rc == TW_OK)
        rc = info_series(s->registry, "trainwatch_build_info", "The trainwatch build (value 1).", 3, build_labels,
                         build_values);
    if (rc != TW_OK)
        tw_say(TW_SAY_ERROR, s->o.name, "the info metrics: %s", tw_strerror(rc));
    return rc;
}

/* The remote-write senders. Their series carry the labels a scrape of this
 * run gets (see remote_job in supervise.h), so a Prometheus that both
 * scrapes and receives holds one series per run, not two. A series' own
 * labels win (watch: each file's rank), as with honor_labels. */
static int remote_start(tw_supervision *s)
{
    char err[600];
    tw_remote_write_options ro = s->o.remote_write;
    const tw_supervision_options *o = &s->o;
    snprintf(s->rank_text, sizeof s->rank_text, "%d", o->rank);
    const char *names[] = {"job", "instance", "run", "rank", "host"};
    const char *values[] = {
        o->remote_job ? o->remote_job : o->sd_job ? o->sd_job : "trainwatch",
        o->remote_instance ? o->remote_instance : s->server ? s->target : s->host,
        /* run, rank, host: those of the sd_file entry; with a static scrape
         * none (the instance tells runs apart); not served, run and rank */
        o->sd_file || !s->server ? (o->run ? o->run : "trainwatch") : NULL,
        o->rank >= 0 && (o->sd_file ? !o->sd_without_rank : !s->server) ? s->rank_text : NULL,
        o->sd_file ? s->host : NULL,
    };
    ro.target_count = sizeof names / sizeof names[0];
    for (size_t i = 0; i < ro.target_count; i++) {
        ro.target_names[i] = names[i];
        ro.target_values[i] = values[i];
    }
    int rc = tw_remote_write_new(&ro, s->registry, stderr, &s->remote, err, sizeof err);
    if (rc != TW_OK)
        tw_say(TW_SAY_ERROR, o->name, "--remote-write: %s", err);
    s->remote_at = tw_monotonic_clock();
    return rc;
}

/* Queues the registry's samples for the remote-write receivers when the
 * interval has passed (or now, at the end). */
static void remote_tick(tw_supervision *s, bool now)
{
    double t = tw_monotonic_clock();
    double interval = s->o.remote_write.interval > 0 ? s->o.remote_write.interval : 15;
    if (!s->remote || (!now && t - s->remote_at < interval))
        return;
    s->remote_at = t;
    tw_remote_write_collect(s->remote, s->registry, tw_wall_clock());
}

/* Our target into --sd-file, and the alerting that knows how it is scraped. */
static int announce_and_alert(tw_supervision *s)
{
    const tw_supervision_options *o = &s->o;
    char host[256] = "", rank[16], url[400], err[600];
    gethostname(host, sizeof host - 1);
    snprintf(rank, sizeof rank, "%d", o->rank);
    snprintf(url, sizeof url, "http://%s/alerts", s->target);
    /* the file_sd labels, then what the scrape adds: job and instance */
    tw_alert_label labels[] = {{"host", host}, {"run", o->run ? o->run : "trainwatch"}, {"rank", rank},
                               {"job", o->sd_job ? o->sd_job : "trainwatch"}, {"instance", s->target}};
    size_t sd_count = o->sd_without_rank ? 2 : 3;
    if (o->sd_without_rank) /* the file_sd labels first, then job and instance */
        labels[2] = labels[3], labels[3] = labels[4];
    tw_alerts_target target = {.page_url = s->server ? url : NULL};
    if (o->sd_file && s->server) {
        int rc = tw_sdfile_add(o->sd_file, s->target, labels, sd_count, getpid(), err, sizeof err);
        if (rc != TW_OK) {
            tw_say(TW_SAY_ERROR, o->name, "--sd-file %s", err);
            return rc;
        }
        s->in_sd_file = true;
        target = (tw_alerts_target){.labels = labels, .label_count = sd_count + 2, .honor_labels = true, .page_url = url};
    } else if (o->sd_file) {
        tw_say(TW_SAY_ERROR, o->name, "--sd-file needs /metrics served (not --web.listen-address none)");
        return TW_EUSAGE;
    }
    return tw_alerts_start(&s->alerts, &o->alerts, o->name, o->run, s->registry, &target);
}


int tw_supervision_new(const tw_supervision_options *o, tw_supervision **out)
{
    tw_supervision *s = calloc(1, sizeof *s);
    if (!s)
        return TW_ENOMEM;
    s->o = *o;
    s->signal_pipe[0] = s->signal_pipe[1] = -1;
    int rc = tw_registry_new(&s->registry);
    if (rc == TW_OK)
        rc = tw_run_new(&s->sinks.run, NULL);
    if (rc == TW_OK) {
        tw_process_collector_register(s->registry);
        tw_live_options lo = {
            .registry = s->registry, .run = o->run, .stall_after = o->stall_after, .warnings = stderr,
            .max_steps = o->max_steps, .baseline = o->baseline};
        rc = tw_live_new(&lo, &s->sinks.live);
    }
    if (rc == TW_OK)
        rc = tw_health_gauge_init(&s->health, s->registry, s->o.run);
    if (rc == TW_OK)
        rc = info_metrics(s);
    if (rc == TW_OK && pipe2(s->signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        rc = tw_status_from_errno(errno);
    s->sinks.records_path = o->records_path;
    gethostname(s->host, sizeof s->host - 1);
    s->sinks.writer = (tw_record_ecs){.host = s->host, .pid = (long)getpid()};
    if (rc == TW_OK && o->records_path && !(s->sinks.records = fopen(o->records_path, "a"))) {
        tw_say(TW_SAY_ERROR, o->name, "%s: %s", o->records_path, strerror(errno));
        rc = tw_status_from_errno(errno);
    }
    if (rc == TW_OK)
        rc = serve(s);
    if (rc == TW_OK && o->remote_write.url_count) /* after serve: the instance is the target served */
        rc = remote_start(s);
    if (rc == TW_OK)
        rc = announce_and_alert(s);
    if (rc == TW_OK && s->server) /* said once everything is ready to start */
        tw_say(TW_SAY_INFO, o->name, "serving /metrics on %s%s", tw_http_uses_tls(s->server) ? "https://" : "",
               s->serving);
    if (rc != TW_OK) {
        tw_supervision_free(s);
        return rc;
    }
    *out = s;
    return TW_OK;
}

static void command_free(command_source *c)
{
    if (!c)
        return;
    tw_child_free(c->child);
    for (int i = 0; i < 2; i++)
        tw_parser_close(c->parsers[i]);
    tw_rotating_close(c->log);
    tw_samplers_free(c->samplers);
    free(c);
}

void tw_supervision_free(tw_supervision *s)
{
    if (!s)
        return;
    tw_remote_write_free(s->remote); /* drains first: the server goes on meanwhile */
    if (s->in_sd_file) {
        char err[600];
        if (tw_sdfile_remove(s->o.sd_file, getpid(), err, sizeof err) != TW_OK)
            tw_say(TW_SAY_ERROR, s->o.name, "--sd-file %s", err);
    }
    tw_http_stop(s->server);
    s->server = NULL;
    tw_alerts_free(&s->alerts);
    command_free(s->command);
    tw_follower_close(s->follower);
    if (s->sinks.records)
        fclose(s->sinks.records);
    tw_live_free(s->sinks.live);
    tw_run_free(s->sinks.run);
    tw_registry_free(s->registry);
    if (signal_fd == s->signal_pipe[1])
        signal_fd = -1;
    for (int i = 0; i < 2; i++) {
        if (s->signal_pipe[i] >= 0)
            close(s->signal_pipe[i]);
    }
    free(s);
}

tw_registry *tw_supervision_registry(tw_supervision *s)
{
    return s->registry;
}

static void on_signal(int sig)
{
    unsigned char b = (unsigned char)sig;
    int saved = errno;
    if (write(signal_fd, &b, 1) < 0) {
        /* the pipe is full: the signal is already waiting there */
    }
    errno = saved;
}

int tw_supervision_catch_signals(tw_supervision *s, const int *signals, size_t count)
{
    signal_fd = s->signal_pipe[1];
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < count; i++) {
        if (sigaction(signals[i], &sa, NULL) != 0)
            return tw_status_from_errno(errno);
    }
    signal(SIGPIPE, SIG_IGN);
    return TW_OK;
}

/* The due rules, with the actions told where training is. */
static void alerts_tick(tw_supervision *s)
{
    if (s->alerts.actions && s->sinks.live) {
        double step, per_step;
        tw_live_progress(s->sinks.live, &step, &per_step);
        tw_actions_set_progress(s->alerts.actions, step, per_step);
        unsigned long stalls = tw_live_stalls(s->sinks.live);
        if (stalls > s->stalls_acted)
            tw_actions_stalled(s->alerts.actions);
        s->stalls_acted = stalls;
    }
    tw_alerts_tick(&s->alerts, tw_wall_clock());
}

/* ---- the command's output ------------------------------------------ */

/* The log file: a full disk drops lines (counted) and is said once when it
 * starts and once when writing works again; the command is never held up. */
static void log_output(tw_supervision *s, const char *buf, size_t n)
{
    tw_rotating_file *log = s->command->log;
    if (!log)
        return;
    bool was_failing = tw_rotating_failing(log);
    tw_rotating_write(log, buf, n);
    bool failing = tw_rotating_failing(log);
    if (failing && !was_failing)
        tw_say(TW_SAY_ERROR, s->o.name, "writing %s: %s; lines are dropped until it can be written again",
                s->command->o.log_file, tw_rotating_error(log));
    else if (was_failing && !failing)
        tw_say(TW_SAY_INFO, s->o.name, "writing %s works again (%llu bytes dropped so far)",
                s->command->o.log_file, (unsigned long long)tw_rotating_dropped(log));
}

/* Moves what the command printed on stream i to our stdout or stderr, the
 * log file and the parser; false at the end of the stream. */
static bool pump(tw_supervision *s, int i)
{
    char buf[65536];
    ssize_t n = read(tw_child_fd(s->command->child, i), buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0)
        return false;
    FILE *out = i == 0 ? stdout : stderr;
    fwrite(buf, 1, (size_t)n, out);
    fflush(out);
    log_output(s, buf, (size_t)n);
    tw_parser_push(s->command->parsers[i], buf, (size_t)n, tw_sinks_record, &s->sinks);
    return true;
}

int tw_supervision_spawn(tw_supervision *s, const tw_command_options *o, int *start_errno)
{
    *start_errno = 0;
    command_source *c = calloc(1, sizeof *c);
    if (!c)
        return TW_ENOMEM;
    s->command = c;
    c->o = *o;
    const char *cmd = o->argv[0];
    if (o->log_file && tw_rotating_open(o->log_file, o->log_max_bytes, o->log_backups, &c->log) != TW_OK) {
        tw_say(TW_SAY_ERROR, s->o.name, "%s: %s (not starting %s)", o->log_file, strerror(errno), cmd);
        return TW_EUSAGE;
    }
    if (c->log && tw_rotating_track_lines(c->log) != TW_OK)
        return TW_ENOMEM;
    int rc = TW_OK;
    if (o->sample)
        rc = tw_samplers_new(s->registry, s->o.name, s->o.run, s->o.rank, &s->o.cost, &c->samplers);
    for (int i = 0; i < 2 && rc == TW_OK; i++) {
        const char *name = o->log_file ? o->log_file : (i == 0 ? "<stdout>" : "<stderr>");
        if (i == 0 || o->separate_stderr)
            rc = tw_parser_new(&c->parsers[i], name, s->o.format, s->o.rank);
        if (rc == TW_OK && c->parsers[i])
            tw_parser_set_user_formats(c->parsers[i], s->o.user_formats);
    }
    if (rc != TW_OK)
        return rc;
    rc = tw_child_start(o->argv, o->separate_stderr, &c->child, start_errno);
    if (rc != TW_OK) {
        tw_say(TW_SAY_ERROR, s->o.name, "%s: %s", cmd, strerror(*start_errno));
        return rc;
    }
    if (s->alerts.actions)
        tw_actions_set_root(s->alerts.actions, tw_child_pid(c->child));
    c->last_sample = tw_monotonic_clock();
    return TW_OK;
}

/* Signals that arrived: forwarded to the command, or the end of following. */
static void take_signals(tw_supervision *s)
{
    unsigned char sig;
    while (read(s->signal_pipe[0], &sig, 1) == 1) {
        command_source *c = s->command;
        if (!c) {
            if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
                s->stop = true;
            continue;
        }
        if (sig == SIGWINCH) {
            tw_child_resize(c->child);
            continue;
        }
        tw_child_forward(c->child, sig);
        if (!c->forwarded_at)
            c->forwarded_at = tw_monotonic_clock();
    }
}

/* The once-a-second work: samples, stall checks. */
static void on_second(tw_supervision *s, double t)
{
    command_source *c = s->command;
    if (c && c->samplers && !c->exited)
        tw_samplers_sample(c->samplers, tw_child_pid(c->child), t - c->last_sample);
    tw_live_tick(s->sinks.live, tw_wall_clock());
    if (c)
        c->last_sample = t;
}

static bool command_tick(tw_supervision *s, double wait)
{
    command_source *c = s->command;
    struct pollfd p[3] = {
        {tw_child_fd(c->child, 0), POLLIN, 0}, {tw_child_fd(c->child, 1), POLLIN, 0}, {s->signal_pipe[0], POLLIN, 0}};
    poll(p, 3, (int)(wait * 1000));
    for (int i = 0; i < 2; i++) {
        if (p[i].fd >= 0 && (p[i].revents & (POLLIN | POLLHUP | POLLERR)) && !pump(s, i))
            tw_child_close_fd(c->child, i);
    }
    take_signals(s);
    double t = tw_monotonic_clock();
    if (!c->exited && tw_child_reap(c->child)) {
        c->exited = true;
        c->exited_at = t;
    }
    if (!c->exited && c->o.kill_after > 0 && c->forwarded_at > 0 && t - c->forwarded_at >= c->o.kill_after) {
        tw_say(TW_SAY_WARN, s->o.name, "%s still running %.0f s after the signal: killing it",
                c->o.argv[0], c->o.kill_after);
        tw_child_forward(c->child, SIGKILL);
        c->forwarded_at = -1e18;
    }
    if (t - c->last_sample >= 1)
        on_second(s, t);
    alerts_tick(s);
    remote_tick(s, false);
    bool drained = tw_child_fd(c->child, 0) < 0 && tw_child_fd(c->child, 1) < 0;
    return !(c->exited && (drained || t - c->exited_at > OUTPUT_DRAIN_SECONDS));
}

/* ---- followed files ------------------------------------------------ */

/* Many followed files need many descriptors: take what the hard limit
 * allows (the follower closes idle files beyond what that leaves). */
static void raise_descriptor_limit(const char *name)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        tw_say(TW_SAY_WARN, name, "raising the open-files limit: %s", strerror(errno));
}

int tw_supervision_follow(tw_supervision *s, tw_follow_options *f)
{
    char err[512];
    raise_descriptor_limit(s->o.name);
    f->format = s->o.format;
    f->user_formats = s->o.user_formats;
    f->warnings = stderr;
    f->sink = (tw_record_sink){tw_sinks_record, &s->sinks, tw_sinks_commit, tw_sinks_restore};
    int rc = tw_follower_open(f, &s->follower, err, sizeof err);
    s->followed = rc == TW_OK;
    if (rc != TW_OK)
        tw_say(TW_SAY_ERROR, s->o.name, "%s", err);
    return rc;
}

static bool follow_tick(tw_supervision *s, double wait)
{
    (void)tw_follower_poll(s->follower, wait); /* a state that cannot be saved is said by the follower, once */
    take_signals(s);
    tw_live_tick(s->sinks.live, tw_wall_clock());
    alerts_tick(s);
    remote_tick(s, false);
    tw_sinks_flush(&s->sinks); /* readers see whole records soon, state file or not */
    return !s->stop;
}

bool tw_supervision_tick(tw_supervision *s, double wait)
{
    tw_health_gauge_tick(&s->health, s->sinks.run, tw_monotonic_clock());
    if (s->command)
        return command_tick(s, wait);
    if (s->follower)
        return follow_tick(s, wait);
    return false;
}

const tw_follow_stats *tw_supervision_follow_stats(const tw_supervision *s)
{
    return s->followed ? &s->follow_stats : NULL;
}

/* ---- the end ------------------------------------------------------- */

/* The record of how the command ended, placed after the last line it
 * printed (so the diagnosis reads it as the end of the run, not as a
 * failure training recovered from). A status of 128+N after signal N was
 * forwarded is that signal: the command's shell or handler turned it into
 * an exit status. */
static void end_record(const char *cmd, const tw_parser *p, int rank, int wait_status, int forwarded, tw_record *ev)
{
    tw_record_init(ev);
    ev->kind = TW_REC_EVENT;
    ev->rank = rank;
    ev->source.file = tw_parser_path(p);
    ev->source.line = tw_parser_line(p) + 1;
    int code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
    int sig = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : (forwarded && code == 128 + forwarded ? forwarded : 0);
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

/* Tells the run which generation of the --log-file copy now holds each line
 * it read, so evidence cites the file a user opens. With stderr apart, the
 * streams' lines interleave in the copy and are cited as read. */
static void note_rotation(tw_supervision *s)
{
    command_source *c = s->command;
    if (!c->log || c->o.separate_stderr)
        return;
    tw_rotating_flush(c->log); /* a last line held: in the generation it lands in */
    unsigned n = tw_rotating_generations(c->log, NULL, 0);
    int64_t *offsets = n ? malloc(n * sizeof *offsets) : NULL;
    if (offsets) {
        tw_rotating_generations(c->log, offsets, n);
        if (tw_run_note_rotation(s->sinks.run, c->o.log_file, offsets, n) != TW_OK)
            tw_say(TW_SAY_WARN, s->o.name, "out of memory: evidence cites lines as %s printed them", c->o.argv[0]);
    }
    free(offsets);
}

static void command_finish(tw_supervision *s, tw_supervision_result *result)
{
    command_source *c = s->command;
    for (int i = 0; i < 2; i++) {
        tw_child_close_fd(c->child, i);
        if (c->parsers[i] && tw_parser_pending(c->parsers[i]))
            tw_parser_push(c->parsers[i], "\n", 1, tw_sinks_record, &s->sinks);
    }
    tw_child_release_terminal();
    int ws = tw_child_wait_status(c->child);
    result->status = WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : WEXITSTATUS(ws);
    tw_record ev;
    end_record(c->o.argv[0], c->parsers[0], s->o.rank, ws, tw_child_forwarded(c->child), &ev);
    tw_sinks_record(&s->sinks, &ev);
    result->output_failed = c->log && tw_rotating_dropped(c->log) > 0;
    note_rotation(s);
    int rc = tw_rotating_close(c->log);
    c->log = NULL;
    if (rc != TW_OK) {
        tw_say(TW_SAY_ERROR, s->o.name, "writing %s: %s", c->o.log_file, tw_strerror(rc));
        result->output_failed = true;
    }
}

int tw_supervision_finish(tw_supervision *s, tw_report **report, tw_supervision_result *result)
{
    *result = (tw_supervision_result){0};
    if (s->command)
        command_finish(s, result);
    if (s->follower) {
        tw_follower_finish(s->follower); /* the last blocks, then the state */
        s->follow_stats = *tw_follower_stats(s->follower);
        tw_follower_close(s->follower); /* flushes and saves the state */
        s->follower = NULL;
    }
    if (s->sinks.records) {
        tw_sinks_flush(&s->sinks);
        int closed = fclose(s->sinks.records), close_errno = errno;
        s->sinks.records = NULL;
        if (closed != 0 && !s->sinks.records_failed)
            tw_say(TW_SAY_ERROR, s->o.name, "%s: %s", s->o.records_path, strerror(close_errno));
        if (closed != 0 || s->sinks.records_failed)
            result->output_failed = true; /* records were lost */
    }
    tw_alerts_finish(&s->alerts, s->o.name, tw_wall_clock());
    tw_thresholds th;
    tw_thresholds_default(&th);
    int rc = tw_diagnose(s->sinks.run, &th, report);
    if (rc != TW_OK)
        return rc;
    if (s->command && s->command->samplers) {
        tw_samplers_add_findings(s->command->samplers, *report);
        tw_samplers_cost(s->command->samplers, &(*report)->summary.gpu_cost); /* kept in the history */
    }
    tw_finding stall;
    if (tw_live_stall_finding(s->sinks.live, tw_wall_clock(), &stall))
        tw_report_append(*report, &stall);
    tw_health_gauge_set(&s->health, *report);
    remote_tick(s, true); /* the final state, health included; drained when freed */
    return TW_OK;
}

/* ---- lingering ----------------------------------------------------- */

/* How long to linger: the option, or the automatic choice. */
static double linger_seconds(const tw_supervision *s, const tw_http_scrape_stats *st, double *interval)
{
    *interval = st->interval > 0 ? st->interval : TW_LINGER_DEFAULT_INTERVAL;
    if (s->o.linger >= 0)
        return s->o.linger;
    if (!st->count && !s->in_sd_file)
        return 0;
    double auto_linger = 2 * *interval;
    return auto_linger < TW_LINGER_AUTO_MAX ? auto_linger : TW_LINGER_AUTO_MAX;
}

/* True when a stop signal (SIGINT, SIGTERM, SIGHUP) arrived within `wait`
 * seconds; other signals are dropped: the command has ended. */
static bool stop_signal_within(tw_supervision *s, double wait)
{
    struct pollfd p = {s->signal_pipe[0], POLLIN, 0};
    if (poll(&p, 1, (int)(wait * 1000)) <= 0)
        return false;
    unsigned char sig;
    while (read(s->signal_pipe[0], &sig, 1) == 1) {
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
            return true;
    }
    return false;
}

void tw_supervision_linger(tw_supervision *s)
{
    if (!s->server)
        return;
    tw_http_scrape_stats st;
    tw_http_scrapes(s->server, &st);
    double interval, linger = linger_seconds(s, &st, &interval);
    if (linger <= 0)
        return;
    double end = tw_monotonic_clock();
    tw_say(TW_SAY_INFO, s->o.name, "serving /metrics up to %.0f s more, for a last scrape (--web.linger)", linger);
    for (;;) {
        double t = tw_monotonic_clock();
        if (t - end >= linger)
            return;
        tw_http_scrapes(s->server, &st);
        if (st.last > end && t - end >= (st.interval > 0 ? st.interval : interval))
            return; /* scraped since the end, and every scraper's turn has come */
        if (stop_signal_within(s, 0.25)) {
            tw_say(TW_SAY_INFO, s->o.name, "stopped serving /metrics on a signal");
            return;
        }
    }
}

const tw_run *tw_supervision_run(const tw_supervision *s)
{
    return s->sinks.run;
}

int tw_supervision_gpu_series(const tw_supervision *s, tw_html_gpu *out)
{
    if (s->command && s->command->samplers)
        return tw_samplers_gpu_series(s->command->samplers, out);
    *out = (tw_html_gpu){NULL, 0, NAN};
    return TW_OK;
}

void tw_supervision_write_samples(const tw_supervision *s, const tw_report *report, FILE *out)
{
    if (s->command && s->command->samplers)
        tw_samplers_write(s->command->samplers, report, out);
}
