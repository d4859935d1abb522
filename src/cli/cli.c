/*
 * cli.c: what the subcommands share when reading their options and
 * writing their reports.
 */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/outfile.h"
#include "../core/say.h"
#include "../core/stream.h"
#include "../parse/user_formats.h"
#include "../rules/ruleset.h"
#include "trainwatch/error.h"
#include "trainwatch/history.h"
#include "trainwatch/html.h"

int tw_cli_number(const char *command, const char *flag, const char *arg, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !(v >= 0)) {
        fprintf(stderr, "trainwatch %s: --%s needs a non-negative number, not '%s'\n", command, flag, arg);
        return -1;
    }
    *out = v;
    return 0;
}

int tw_cli_cost_option(const char *command, int code, const char *arg, tw_cost_options *o)
{
    switch (code) {
    case 'C':
        return tw_cli_number(command, "gpu-hour-cost", arg, &o->gpu_hour_cost);
    case 'G':
        o->price_file = arg;
        return 0;
    case 'U':
        return tw_cli_number(command, "budget", arg, &o->budget);
    case 'I':
        if (tw_cli_number(command, "gpu-idle-below", arg, &o->idle_below) != 0)
            return -1;
        if (o->idle_below > 100) {
            fprintf(stderr, "trainwatch %s: --gpu-idle-below takes a utilisation from 0 to 100 (%%)\n", command);
            return -1;
        }
        return 0;
    default:
        return 1;
    }
}

int tw_cli_when(const char *command, const char *flag, const char *arg, int *out)
{
    static const char *const names[] = {"never", "always", "auto"}; /* 0, 1, -1 */
    for (int i = 0; i < 3; i++) {
        if (strcmp(arg, names[i]) == 0) {
            *out = i == 2 ? -1 : i;
            return 0;
        }
    }
    fprintf(stderr, "trainwatch %s: --%s takes auto, always or never\n", command, flag);
    return -1;
}

bool tw_cli_colour(int when)
{
    if (when >= 0)
        return when == 1;
    const char *no = getenv("NO_COLOR");
    return isatty(STDOUT_FILENO) && !(no && *no);
}

int tw_cli_severity(const char *command, const char *arg, tw_severity *out)
{
    for (tw_severity s = TW_SEV_INFO; s <= TW_SEV_ERROR; s++) {
        if (strcmp(arg, tw_severity_name(s)) == 0) {
            *out = s;
            return 0;
        }
    }
    fprintf(stderr, "trainwatch %s: --fail-on takes error, warning or info, not '%s'\n", command, arg);
    return -1;
}

int tw_cli_finish_stdout(const char *command, const char *what)
{
    int rc = tw_stream_flush(stdout);
    if (rc == TW_OK)
        return 0;
    int err = errno;
    fprintf(stderr, "trainwatch %s: could not write %s to standard output: %s\n", command, what,
            err ? strerror(err) : tw_strerror(rc));
    return -1;
}

int tw_cli_write_help(const char *command, const char *text)
{
    errno = 0;
    if (fputs(text, stdout) == EOF) {
        int err = errno;
        fprintf(stderr, "trainwatch %s: could not write the help to standard output: %s\n", command,
                strerror(err ? err : EIO));
        return -1;
    }
    return tw_cli_finish_stdout(command, "the help");
}

int tw_cli_duration(const char *command, const char *flag, const char *arg, double *seconds)
{
    int64_t ms;
    char *end;
    double v = strtod(arg, &end);
    if (tw_parse_duration(arg, &ms)) {
        *seconds = (double)ms / 1000;
        return 0;
    }
    if (end != arg && !*end && v >= 0 && v <= 1e9) {
        *seconds = v;
        return 0;
    }
    fprintf(stderr, "trainwatch %s: --%s needs a duration (30s, 10m, 1h) or seconds, not '%s'\n", command, flag, arg);
    return -1;
}

/* --prometheus-header 'Name: value' added to p's headers. */
static int prometheus_header(const char *command, const char *arg, struct tw_history_prometheus *p,
                             const char **store)
{
    const char *colon = strchr(arg, ':');
    bool named = colon && colon > arg;
    for (const char *c = arg; named && c < colon; c++)
        named = isalnum((unsigned char)*c) || *c == '-' || *c == '_';
    if (!named || strpbrk(arg, "\r\n")) {
        fprintf(stderr, "trainwatch %s: --prometheus-header takes 'Name: value', not '%.40s'\n", command, arg);
        return -1;
    }
    if (p->header_count >= TW_CLI_PROMETHEUS_HEADERS) {
        fprintf(stderr, "trainwatch %s: --prometheus-header at most %d times\n", command, TW_CLI_PROMETHEUS_HEADERS);
        return -1;
    }
    store[p->header_count++] = arg;
    p->headers = store;
    return 0;
}

int tw_cli_prometheus_option(const char *command, int code, const char *arg, struct tw_history_prometheus *p,
                             const char **store)
{
    switch (code) {
    case TW_CLI_OPT_PROMETHEUS:
        p->url = arg;
        return 0;
    case TW_CLI_OPT_PROMETHEUS_HEADER:
        return prometheus_header(command, arg, p, store);
    case TW_CLI_OPT_SINCE:
        return tw_cli_duration(command, "since", arg, &p->since);
    default:
        return 1;
    }
}

int tw_cli_write_html(const char *command, const char *path, int (*write)(FILE *out, const void *arg), const void *arg)
{
    char err[600];
    if (strcmp(path, "-") == 0) {
        if (write(stdout, arg) != TW_OK) {
            tw_say(TW_SAY_ERROR, command, "--html -: out of memory");
            return -1;
        }
        if (tw_stream_flush(stdout) != TW_OK) {
            tw_say(TW_SAY_ERROR, command, "--html -: could not write to standard output: %s", strerror(errno));
            return -1;
        }
        return 0;
    }
    tw_outfile out;
    if (tw_outfile_open(&out, path, err, sizeof err) != 0) {
        tw_say(TW_SAY_ERROR, command, "--html %s", err);
        return -1;
    }
    if (write(out.f, arg) != TW_OK) {
        tw_outfile_abort(&out);
        tw_say(TW_SAY_ERROR, command, "--html %s: out of memory", path);
        return -1;
    }
    if (tw_outfile_commit(&out, err, sizeof err) != 0) {
        tw_say(TW_SAY_ERROR, command, "--html %s", err);
        return -1;
    }
    return 0;
}

const char *tw_cli_join_words(char **words, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; words[i] && n + 1 < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? " " : "", words[i]);
    return buf;
}

typedef struct report_page {
    const tw_report *report;
    const tw_run *run;
    const char *title;
    const tw_html_gpu *gpu;
} report_page;

static int write_report_page(FILE *out, const void *arg)
{
    const report_page *p = arg;
    return tw_report_write_html_gpu(out, p->report, p->run, p->title, p->gpu);
}

int tw_cli_write_report_html(const char *command, const char *path, const tw_report *report, const tw_run *run,
                             const char *title, const tw_html_gpu *gpu)
{
    report_page page = {report, run, title, gpu};
    return tw_cli_write_html(command, path, write_report_page, &page);
}

/* The set of a command's user formats lives as long as the process: its
 * parsers (and run's and watch's followers) borrow it to the end. */
static struct tw_user_formats *process_formats;

static void free_process_formats(void)
{
    tw_user_formats_free(process_formats);
}

/* --pattern REGEX / --formats FILE: adds to *set (made on first use). A bad
 * pattern is said with its position, and the pattern with a caret under it. */
int tw_cli_user_format(struct tw_user_formats **set, const char *flag, const char *arg, const char *command)
{
    if (!*set) {
        if (process_formats || tw_user_formats_new(set) != TW_OK) {
            fprintf(stderr, "trainwatch %s: out of memory\n", command);
            return -1;
        }
        process_formats = *set;
        atexit(free_process_formats);
    }
    char err[512];
    bool pattern = strcmp(flag, "pattern") == 0;
    int rc = pattern ? tw_user_formats_add_pattern(*set, arg, err, sizeof err)
                     : tw_user_formats_load_file(*set, arg, err, sizeof err);
    if (rc == TW_OK)
        return 0;
    if (pattern) {
        const char *why = strncmp(err, "pattern: ", 9) == 0 ? err + 9 : err;
        fprintf(stderr, "trainwatch %s: --pattern %d: %s\n", command, tw_user_formats_count(*set) + 1, why);
        size_t offset;
        if (sscanf(why, "offset %zu:", &offset) == 1 && offset <= strlen(arg) && strlen(arg) < 200)
            fprintf(stderr, "  %s\n  %*s^\n", arg, (int)offset, "");
    } else {
        fprintf(stderr, "trainwatch %s: --formats %s: %s\n", command, arg, err);
    }
    return -1;
}

int tw_cli_write_report_json(const char *command, const char *path, const tw_report *report)
{
    char err[600];
    tw_outfile out;
    if (tw_outfile_open(&out, path, err, sizeof err) != 0) {
        tw_say(TW_SAY_ERROR, command, "--report %s", err);
        return -1;
    }
    tw_report_write_json(out.f, report);
    if (tw_outfile_commit(&out, err, sizeof err) != 0) {
        tw_say(TW_SAY_ERROR, command, "--report %s", err);
        return -1;
    }
    return 0;
}
