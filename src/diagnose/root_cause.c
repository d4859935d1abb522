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
 * torchrun's Root Cause entry names a global rank ("rank : 9 (local_rank:
 * 1)"); the elastic agent's "failed (exitcode: 1) local_rank: 1" names the
 * rank within its node, which is the job's rank only on the first node. A
 * Root Cause entry of the launch is preferred to any such line. A local rank
 * becomes a global one through the agent's rank assignment (its "Rendezvous
 * complete for workers" result: global_ranks in local rank order) in the same
 * file before it, when that file holds one node's assignment only (srun may
 * merge several agents into one file), or when every assignment of the
 * launch says the job has one node. Otherwise it is said as a local rank and
 * names no rank: it breaks no tie and no rank is said missing because of it.
 * A log without a rank in its name, given among others, that holds the
 * launcher's report and neither a training record nor an error of its own
 * is the launcher's log, not a rank's: it is neither a cause nor a victim.
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
#include "trainwatch/parse.h"

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
    if (strncmp(*cursor, "local ", 6) == 0) /* a rank within a node, not of the job */
        return false;
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
    if (!rc->launcher || !rc->cause || tw_root_cause_local_only(rc))
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

bool tw_root_cause_local_only(const tw_root_cause *rc)
{
    return rc->launcher && rc->launcher_local >= 0 && !rc->assignment;
}

/* The n-th number of a rank assignment's list ("4, 5, 6, 7"), -1 none. */
static int nth_rank(const tw_event_note *assignment, int n)
{
    const char *p = assignment->detail;
    int i = 0;
    for (int v; tw_launcher_next_rank(&p, &v); i++) {
        if (i == n)
            return v;
    }
    return -1;
}

/* The agent's rank assignment that tells which global rank local rank of
 * report l is: the one node's of l's file, before it; else, when every
 * assignment of the launch says the job has one node, any. Counts the
 * distinct assignments of l's file in rc->assignments. */
static const tw_event_note *assignment_for(const tw_run *run, tw_root_cause *rc, const tw_event_note *l)
{
    const tw_event_note *mine = NULL, *any = NULL;
    bool one_node = true;
    for (int i = 0; i < run->events_kept_count; i++) {
        const tw_event_note *e = &run->events_kept[i];
        if (e->kind != TW_EV_RANKS)
            continue;
        one_node &= e->code == 1;
        any = any ? any : e;
        if (e->file != l->file || e->line > l->line)
            continue;
        bool seen = false; /* the same node again (a restart): one assignment */
        for (int j = 0; j < i && !seen; j++) {
            const tw_event_note *o = &run->events_kept[j];
            seen = o->kind == TW_EV_RANKS && o->file == l->file && strcmp(o->detail, e->detail) == 0;
        }
        rc->assignments += !seen;
        mine = mine ? mine : e;
    }
    if (rc->assignments > 1)
        return NULL;
    return mine ? mine : one_node ? any : NULL;
}

/* The launch's report of the failed rank: its last that names global ranks
 * (torchrun's Root Cause entry, Paddle's), else its last local one, made
 * global where an assignment tells (rc->resolved). */
static void choose_launcher(const tw_run *run, tw_root_cause *rc)
{
    const tw_event_note *global = NULL, *local = NULL;
    for (int i = 0; i < run->events_kept_count; i++) {
        const tw_event_note *e = &run->events_kept[i];
        if (e->kind == TW_EV_LAUNCHER && strncmp(e->detail, "local ", 6) == 0)
            local = e;
        else if (e->kind == TW_EV_LAUNCHER)
            global = e;
    }
    rc->launcher = global ? global : local;
    rc->launcher_rank = rc->launcher ? rc->launcher->code : -1;
    if (global || !local)
        return;
    rc->launcher_local = local->code;
    rc->launcher_rank = -1;
    const tw_event_note *a = assignment_for(run, rc, local);
    int rank = a ? nth_rank(a, local->code) : -1;
    if (rank < 0)
        return;
    rc->assignment = a;
    rc->resolved = *local;
    snprintf(rc->resolved.detail, sizeof rc->resolved.detail, "%d", rank);
    rc->resolved.code = rc->launcher_rank = rank;
    rc->launcher = &rc->resolved;
}

/* A log whose name says no rank, among several inputs, holding the
 * launcher's words (its report, the agents' rank assignment) and neither a
 * training record nor an error of its own: the launcher's log, not a
 * rank's. */
static bool launcher_log(const tw_run *run, const tw_rank *rk)
{
    if (rk->used || run->rank_count < 2)
        return false;
    bool launcher = false;
    for (int i = 0; i < run->events_kept_count; i++) {
        const tw_event_note *e = &run->events_kept[i];
        if (e->rank != rk->rank)
            continue;
        if (is_failure(e)) /* an error of its own: a rank's console too */
            return false;
        launcher |= (e->kind == TW_EV_LAUNCHER || e->kind == TW_EV_RANKS) && e->file < run->file_count &&
                    tw_rank_from_path(run->files[e->file]) < 0;
    }
    return launcher;
}

int tw_root_cause_find(const tw_run *run, tw_root_cause *rc)
{
    memset(rc, 0, sizeof *rc);
    rc->cause_rank = -1;
    rc->launcher_local = -1;
    choose_launcher(run, rc);
    if (run->rank_count < 2 && !rc->launcher)
        return TW_OK;
    rc->ranks = calloc((size_t)(run->rank_count ? run->rank_count : 1), sizeof *rc->ranks);
    if (!rc->ranks)
        return TW_ENOMEM;
    for (int i = 0; i < run->rank_count; i++) {
        if (!launcher_log(run, run->ranks[i]))
            rc->ranks[rc->count++].rank = run->ranks[i]->rank;
    }
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

bool tw_root_cause_has_rank(const tw_root_cause *rc, int rank)
{
    for (int i = 0; i < rc->count; i++) {
        if (rc->ranks[i].rank == rank)
            return true;
    }
    return false;
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

/* What the agent's local rank is: the global rank its node's assignment
 * makes it, or why none is named. */
static void local_rank_evidence(const tw_run *run, const tw_root_cause *rc, tw_finding *f)
{
    if (rc->launcher_local < 0)
        return;
    char where[600];
    if (rc->assignment) {
        const tw_event_note *a = rc->assignment;
        int ranks[64], n = 0;
        const char *p = a->detail;
        for (int v; n < 64 && tw_launcher_next_rank(&p, &v);)
            ranks[n++] = v;
        char list[256];
        rank_list(list, sizeof list, ranks, n);
        const char *group = strstr(a->message, "group_rank=");
        tw_finding_evidence(f,
                            "local rank %d on the node of global ranks %s (group_rank=%ld, by the agent's rank "
                            "assignment at %s) is rank %d",
                            rc->launcher_local, list, group ? strtol(group + 11, NULL, 10) : -1L,
                            tw_where(run, a->file, a->line, where, sizeof where), rc->launcher_rank);
        return;
    }
    char nodes[64] = "";
    if (rc->assignments > 1)
        snprintf(nodes, sizeof nodes, " (the agents of %d nodes wrote into this log)", rc->assignments);
    tw_finding_evidence(f,
                        "it names local rank %d on this node, the rank within the node of the agent that wrote "
                        "it; the log does not say which node%s, so not which global rank%s",
                        rc->launcher_local, nodes,
                        rc->own_failures > 1 ? ": it is not used to order the failures" : "");
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
    local_rank_evidence(run, rc, f);
    const char *p = l->detail;
    bool torch = strstr(l->message, "exitcode") || strstr(l->message, "Root Cause") || strstr(l->message, "torch");
    for (int v; tw_launcher_next_rank(&p, &v);) {
        if (!(rc->ranks ? !tw_root_cause_has_rank(rc, v) : !tw_run_rank(run, v)))
            continue;
        if (torch)
            tw_finding_evidence(f,
                                "rank %d's own log is not among the inputs; its error is there (torchrun: "
                                "--log-dir's attempt_N/LOCAL_RANK/stderr.log on its node, else that node's "
                                "console)",
                                v);
        else
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
