/*
 * root_cause.c: which rank failed first, and which ranks only went
 * down with it.
 *
 * In a job of several ranks one failure takes every rank down: the rank
 * that fails raises its own error, the launcher then sends the others a
 * SIGTERM, and ranks waiting in a collective time out or lose their
 * connection. Read rank by rank, every log ends in an error; read together,
 * one of them is the cause and the others are its victims. Per rank, the
 * first failure of the launch decides: a termination signal, a broken
 * connection or a collective timeout makes the rank a victim (whatever it
 * prints afterwards, such as its DataLoader workers "killed by signal:
 * Terminated", is the signal's doing); any other error is the rank's own.
 * The cause is the earliest own failure (by the log's timestamps where the
 * failures carry them, else the only one, else the lowest rank, said so).
 * The launcher's own report of the rank that failed (Paddle's "ABORT!!! ...
 * rank=[3]", torchrun's "Root Cause (first observed failure)", an event of
 * kind launcher read by fmt_events.c, in the launcher's log or in the
 * console it shares with a rank) breaks ties: failures in the same second,
 * or without times, go to the rank it names. Timestamps that say otherwise
 * win, and the finding says which rank the launcher named.
 *
 * The crash rule (rule_failure.c) reports the cause with its victims in
 * one finding and the rank-stopped rule does not blame a victim; this file
 * only reads the launch's events, it writes no finding of its own.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "trainwatch/error.h"

/* What another rank's failure does to a rank: messages that name a lost
 * peer, a broken store connection or a collective that timed out. */
static const char *const victim_words[] = {
    "TCP send error",
    "TCP recv error",
    "Broken pipe",
    "Connection reset by peer",
    "Connection closed by peer",
    "Connection refused",
    "collective operation timeout",
    "Watchdog caught collective",
    "NCCL communicator was aborted",
    "remote process exited",
    "DistNetworkError",
    "DistStoreError",
    "killed by signal: Terminated",
    "workers exit unexpectedly", /* the DataLoader's workers, killed with their process group */
    "_queue.Empty",              /* the DataLoader's wait for them, chained before that error */
    "SignalException",
    "Socket Timeout",
};

bool tw_event_is_victim(const tw_event_note *e)
{
    if (e->kind == TW_EV_SIGNAL) {
        /* SIGTERM, SIGKILL, SIGINT, SIGHUP come from outside the process */
        if (e->code == 15 || e->code == 9 || e->code == 2 || e->code == 1)
            return true;
        if (e->code == 0 && strstr(e->message, "Termination signal"))
            return true;
        return false;
    }
    for (size_t i = 0; i < sizeof victim_words / sizeof victim_words[0]; i++) {
        if (strstr(e->message, victim_words[i]))
            return true;
    }
    return false;
}

/* torchrun's ChildFailedError is the launcher's report in a traceback of
 * its own, not the error of the rank whose console it shares. */
static bool is_failure(const tw_event_note *e)
{
    if (e->kind == TW_EV_EXCEPTION && strstr(e->message, "ChildFailedError"))
        return false;
    return e->kind == TW_EV_EXCEPTION || e->kind == TW_EV_SIGNAL || e->kind == TW_EV_OOM;
}

bool tw_launcher_next_rank(const char **cursor, int *rank)
{
    for (const char *p = *cursor; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) {
            p++;
            continue;
        }
        p = *cursor = end;
        if (v >= 0 && v < 1 << 20) {
            *rank = (int)v;
            return true;
        }
    }
    return false;
}

bool tw_launcher_names(const tw_event_note *report, int rank)
{
    if (!report || rank < 0)
        return false;
    const char *p = report->detail;
    for (int v; tw_launcher_next_rank(&p, &v);) {
        if (v == rank)
            return true;
    }
    return false;
}

static tw_rank_failure *failure_of(tw_root_cause *rc, int rank)
{
    for (int i = 0; i < rc->count; i++) {
        if (rc->ranks[i].rank == rank)
            return &rc->ranks[i];
    }
    return NULL;
}

/* -1: a happened before b, 1: after, 0: not known apart (one has no time,
 * or both fall in one second and one of them is stamped in whole seconds). */
static int compare_time(const tw_event_note *a, const tw_event_note *b)
{
    if (!a->has_time || !b->has_time)
        return 0;
    double ta = a->time, tb = b->time;
    if (ta == floor(ta) || tb == floor(tb)) {
        ta = floor(ta);
        tb = floor(tb);
    }
    return ta < tb ? -1 : ta > tb ? 1 : 0;
}

/* Failures not known apart: the rank the launcher names goes first. */
static bool launcher_prefers(const tw_root_cause *rc, int rank)
{
    return tw_launcher_names(rc->launcher, rank) && !tw_launcher_names(rc->launcher, rc->cause_rank);
}

static void weigh_launcher(tw_root_cause *rc)
{
    if (!rc->launcher || !rc->cause)
        return;
    if (!tw_launcher_names(rc->launcher, rc->cause_rank)) {
        rc->launcher_disagrees = true;
        return;
    }
    for (int i = 0; i < rc->count; i++) {
        const tw_rank_failure *f = &rc->ranks[i];
        if (f->first && !f->victim && f->rank != rc->cause_rank && compare_time(f->first, rc->cause) == 0 &&
            !tw_launcher_names(rc->launcher, f->rank))
            rc->launcher_decided = true;
    }
}

static void choose_cause(tw_root_cause *rc)
{
    int own = 0;
    for (int i = 0; i < rc->count; i++) {
        const tw_rank_failure *f = &rc->ranks[i];
        if (!f->first || f->victim)
            continue;
        own++;
        int order = rc->cause ? compare_time(f->first, rc->cause) : -1;
        if (order < 0 || (order == 0 && launcher_prefers(rc, f->rank))) {
            rc->cause = f->first;
            rc->cause_rank = f->rank;
        }
    }
    rc->own_failures = own;
    weigh_launcher(rc);
    if (own < 2)
        return;
    /* several ranks failed of their own: by time only when all say when */
    rc->ordered_by_time = true;
    rc->same_error = true;
    for (int i = 0; i < rc->count; i++) {
        const tw_rank_failure *f = &rc->ranks[i];
        if (!f->first || f->victim)
            continue;
        rc->ordered_by_time &= f->first->has_time;
        rc->same_error &= strcmp(f->first->message, rc->cause->message) == 0;
    }
}

int tw_root_cause_find(const tw_run *run, tw_root_cause *rc)
{
    memset(rc, 0, sizeof *rc);
    rc->cause_rank = -1;
    rc->launcher_rank = -1;
    for (int i = 0; i < run->events_kept_count; i++) {
        if (run->events_kept[i].kind == TW_EV_LAUNCHER) { /* the last report of the launch */
            rc->launcher = &run->events_kept[i];
            rc->launcher_rank = rc->launcher->code;
        }
    }
    if (run->rank_count < 2 && !rc->launcher)
        return TW_OK;
    rc->ranks = calloc((size_t)(run->rank_count ? run->rank_count : 1), sizeof *rc->ranks);
    if (!rc->ranks)
        return TW_ENOMEM;
    for (int i = 0; i < run->rank_count; i++)
        rc->ranks[rc->count++].rank = run->ranks[i]->rank;
    for (int i = 0; i < run->events_kept_count; i++) {
        const tw_event_note *e = &run->events_kept[i];
        tw_rank_failure *f = failure_of(rc, e->rank);
        if (!f || !is_failure(e))
            continue;
        if (!f->first) {
            f->first = e;
            f->victim = tw_event_is_victim(e);
        }
        f->failures++;
    }
    for (int i = 0; i < rc->count; i++)
        rc->failed_ranks += rc->ranks[i].first != NULL;
    choose_cause(rc);
    return TW_OK;
}

void tw_root_cause_free(tw_root_cause *rc)
{
    free(rc->ranks);
    rc->ranks = NULL;
}

bool tw_root_cause_blames_other(const tw_root_cause *rc, int rank)
{
    return rc->cause && rc->cause_rank != rank && !rc->same_error;
}

/* "0-4, 6, 7" */
static void rank_list(char *buf, size_t cap, const int *ranks, int n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used + 1 < cap;) {
        int j = i;
        while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
            j++;
        const char *sep = used ? ", " : "";
        int w = j - i >= 2 ? snprintf(buf + used, cap - used, "%s%d-%d", sep, ranks[i], ranks[j])
                : j > i    ? snprintf(buf + used, cap - used, "%s%d, %d", sep, ranks[i], ranks[j])
                           : snprintf(buf + used, cap - used, "%s%d", sep, ranks[i]);
        if (w < 0)
            break;
        used += (size_t)w;
        i = j + 1;
    }
}

/* The ranks other than the cause's, in a list for a title. Returns how many. */
int tw_root_cause_victims(const tw_root_cause *rc, char *buf, size_t cap)
{
    int *ranks = malloc(sizeof *ranks * (size_t)(rc->count ? rc->count : 1));
    int n = 0;
    for (int i = 0; ranks && i < rc->count; i++) {
        if (rc->ranks[i].rank != rc->cause_rank)
            ranks[n++] = rc->ranks[i].rank;
    }
    if (ranks)
        rank_list(buf, cap, ranks, n);
    else if (cap)
        buf[0] = '\0';
    free(ranks);
    return n;
}

/* The rank the launcher named failed too, at a time the cause's is known
 * to come before. */
static bool timed_apart(const tw_root_cause *rc)
{
    for (int i = 0; i < rc->count; i++) {
        const tw_rank_failure *f = &rc->ranks[i];
        if (f->first && tw_launcher_names(rc->launcher, f->rank) && compare_time(rc->cause, f->first) < 0)
            return true;
    }
    return false;
}

/* The launcher's report quoted, with what it settled; and where the rank it
 * names left no log among the inputs, say so. */
void tw_root_cause_launcher_evidence(const tw_run *run, const tw_root_cause *rc, tw_finding *f)
{
    const tw_event_note *l = rc->launcher;
    if (!l)
        return;
    char where[600];
    tw_where(run, l->file, l->line, where, sizeof where);
    if (rc->launcher_decided)
        tw_finding_evidence(f,
                            "the logs do not tell these failures apart (the same second, or no time); the "
                            "launcher's report names rank %d: %s (%s)",
                            rc->cause_rank, l->message, where);
    else if (rc->launcher_disagrees && timed_apart(rc))
        tw_finding_evidence(f,
                            "the launcher named rank%s %s: %s (%s); the timestamps put rank %d's error first, and "
                            "they are taken",
                            strchr(l->detail, ',') ? "s" : "", l->detail, l->message, where, rc->cause_rank);
    else if (rc->launcher_disagrees)
        tw_finding_evidence(f, "the launcher named rank%s %s: %s (%s); rank %d's is the first error in the logs given",
                            strchr(l->detail, ',') ? "s" : "", l->detail, l->message, where, rc->cause_rank);
    else
        tw_finding_evidence(f, "the launcher's report: %s (%s)", l->message, where);
    const char *p = l->detail;
    for (int v; tw_launcher_next_rank(&p, &v);) {
        if (!tw_run_rank(run, v))
            tw_finding_evidence(f,
                                "rank %d's own log is not among the inputs; its error is there (Paddle: "
                                "log/workerlog.%d)",
                                v, v);
    }
}

/* One line per rank other than the cause: what became of it. */
void tw_root_cause_evidence(const tw_run *run, const tw_root_cause *rc, tw_finding *f)
{
    char where[600], when[64];
    int shown = 0;
    for (int i = 0; i < rc->count; i++) {
        const tw_rank_failure *v = &rc->ranks[i];
        if (v->rank == rc->cause_rank)
            continue;
        if (shown++ == 8) {
            tw_finding_evidence(f, "... and %d more ranks", rc->count - 1 - 8);
            return;
        }
        const tw_rank *rk = tw_run_rank(run, v->rank);
        if (!v->first) {
            if (rk && rk->used && rc->cause && rc->cause->has_time && !isnan(rk->last.time)) {
                char d[32];
                double after = rk->last.time - rc->cause->time;
                tw_finding_evidence(f,
                                    "rank %d: stopped logging at step %.0f, %s %s rank %d's failure (%s), without an "
                                    "error of its own",
                                    v->rank, rk->last.pos, tw_fmt_duration(after >= 0 ? after : -after, d, sizeof d),
                                    after >= 0 ? "after" : "before", rc->cause_rank,
                                    tw_where(run, rk->last.file, rk->last.line, where, sizeof where));
            } else if (rk && rk->used)
                tw_finding_evidence(f, "rank %d: stopped logging at step %.0f (%s) without an error of its own",
                                    v->rank, rk->last.pos,
                                    tw_where(run, rk->last.file, rk->last.line, where, sizeof where));
            else
                tw_finding_evidence(f, "rank %d: no error of its own in its log", v->rank);
            continue;
        }
        const char *what =
            v->victim ? (v->first->kind == TW_EV_SIGNAL ? "terminated" : "lost its peers") : "also failed";
        if (rc->cause && !v->victim && strcmp(v->first->message, rc->cause->message) == 0) {
            tw_finding_evidence(f, "rank %d: the same error (%s)", v->rank,
                                tw_where(run, v->first->file, v->first->line, where, sizeof where));
            continue;
        }
        /* a Paddle signal report: what the bracket says (sender, time) is the news */
        const char *said = v->first->message;
        const char *bracket = v->first->kind == TW_EV_SIGNAL ? strrchr(said, '[') : NULL;
        int said_len = bracket ? (int)strcspn(bracket + 1, "]") : (int)strlen(said);
        if (bracket)
            said = bracket + 1;
        if (v->first->has_time)
            tw_finding_evidence(f, "rank %d: %s at %s: %.*s (%s)", v->rank, what,
                                tw_fmt_time(v->first->time, when, sizeof when), said_len, said,
                                tw_where(run, v->first->file, v->first->line, where, sizeof where));
        else
            tw_finding_evidence(f, "rank %d: %s: %.*s (%s)", v->rank, what, said_len, said,
                                tw_where(run, v->first->file, v->first->line, where, sizeof where));
    }
}
