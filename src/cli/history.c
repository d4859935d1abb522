/*
 * history.c (cli): the shared history options and the recording at the end
 * of analyze, run and watch (see history.h).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "history.h"
#include "trainwatch/error.h"

const char tw_cli_history_usage[] =
    "  --history FILE              the run history (default $XDG_DATA_HOME/trainwatch/runs.db)\n"
    "  --no-history                do not record this run in the history\n"
    "  --history-job NAME          the job this run is recorded under (runs of a job are compared)\n";

bool tw_cli_history_option(tw_cli_history *h, int code, const char *arg)
{
    switch (code) {
    case TW_CLI_HISTORY_OPT:
        h->path = arg;
        return true;
    case TW_CLI_HISTORY_OPT + 1:
        h->off = true;
        return true;
    case TW_CLI_HISTORY_OPT + 2:
        h->job = arg;
        return true;
    default:
        return false;
    }
}

/* Opens the file (NULL: the default one); NULL with "history FILE: why" in err. */
static tw_history *open_history(const char *path, char *err, size_t errlen)
{
    char fallback[4096], why[600];
    if (!path) {
        if (tw_history_default_path(fallback, sizeof fallback) != TW_OK) {
            snprintf(err, errlen, "history: neither XDG_DATA_HOME nor HOME is set (--history FILE)");
            return NULL;
        }
        path = fallback;
    }
    tw_history *h;
    if (tw_history_open(path, &h, why, sizeof why) != TW_OK) {
        snprintf(err, errlen, "history %s: %s", path, why);
        return NULL;
    }
    return h;
}

tw_history *tw_cli_history_open(const char *command, const char *path)
{
    char err[5000];
    tw_history *h = open_history(path, err, sizeof err);
    if (!h)
        fprintf(stderr, "trainwatch %s: %s\n", command, err);
    return h;
}

void tw_cli_history_record(const char *command, const tw_cli_history *o, const tw_history_identity *who,
                           tw_report *report, const tw_run *run)
{
    if (o->off)
        return;
    tw_history_identity id = *who;
    if (o->job)
        id.job = o->job;
    char err[5000];
    tw_history *h = open_history(o->path, err, sizeof err);
    if (!h) {
        fprintf(stderr, "trainwatch %s: %s; this run is not recorded\n", command, err);
        return;
    }
    tw_history_view now;
    if (tw_history_view_of(&id, report, run, &now) == TW_OK) {
        if (tw_history_baseline(h, &now, report, err, sizeof err) != TW_OK)
            fprintf(stderr, "trainwatch %s: history: %s; the run is not compared with its job's\n", command, err);
        tw_history_view_free(&now);
    }
    int64_t run_id;
    if (tw_history_record(h, &id, report, run, &run_id, err, sizeof err) != TW_OK)
        fprintf(stderr, "trainwatch %s: history: %s; this run is not recorded\n", command, err);
    tw_history_close(h);
}

void tw_cli_history_baseline(const char *command, const tw_cli_history *o, const char *job, tw_live_baseline *out)
{
    *out = (tw_live_baseline){.runs = 0};
    char fallback[4096], err[5000];
    const char *path = o->path;
    if (o->off || !job || !job[0])
        return;
    if (!path) {
        if (tw_history_default_path(fallback, sizeof fallback) != TW_OK)
            return; /* said when the run is recorded */
        path = fallback;
    }
    if (access(path, F_OK) != 0)
        return; /* no history yet: nothing to compare with, and nothing created before the run */
    tw_history *h = open_history(path, err, sizeof err);
    if (!h) {
        fprintf(stderr, "trainwatch %s: %s; no live baseline\n", command, err);
        return;
    }
    tw_history_step_times st;
    if (tw_history_step_baseline(h, job, &st, err, sizeof err) != TW_OK)
        fprintf(stderr, "trainwatch %s: history: %s; no live baseline\n", command, err);
    else if (st.runs > 0)
        *out = (tw_live_baseline){.runs = (int)st.runs, .p50 = st.p50, .p95 = st.p95, .limit = st.limit};
    tw_history_close(h);
}
