/*
 * events_launchers.c: what the launchers say of a run's ranks, for the
 * event reader (fmt_events.c): which rank failed (Paddle's "ABORT!!! ...
 * rank=[3]" and "Container rank 3 status failed", torchrun's "Root Cause
 * (first observed failure)" entry, the elastic agent's "failed (exitcode:
 * 1) local_rank: 2"), the elastic agent's assignment of a node's ranks
 * ("Rendezvous complete for workers"), torch's NCCL watchdog and Slurm's
 * cancellations. The readers are the keyword rules' read functions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"

/* The rank numbers of "rank=[1, 2, 3]" into out as "1, 2, 3"; returns how
 * many, *first the first. */
static int rank_list(const char *s, const char *end, char *out, size_t cap, long long *first)
{
    int n = 0;
    size_t used = 0;
    out[0] = '\0';
    while (s < end && *s != ']') {
        long long v;
        size_t d = tw_scan_uint(s, end, &v);
        if (!d) {
            s++;
            continue;
        }
        if (n++ == 0)
            *first = v;
        int w = snprintf(out + used, cap - used, "%s%lld", used ? ", " : "", v);
        if (w > 0 && (size_t)w < cap - used)
            used += (size_t)w;
        s += d;
    }
    return n;
}

/* The launcher's report of the rank that failed, as an event: the message
 * is the launcher's words, the code the rank it names as failed (-1: it
 * names several, in no order), the detail every rank it names ("1, 2, 3").
 * One reader a launcher's wording, each given the line and where its
 * keyword stands (at); each returns 0 when the line is not such a report. */
static int launcher_event(tw_parser *p, const tw_line *line, const char *msg, size_t len, long long rank)
{
    char ranks[32];
    snprintf(ranks, sizeof ranks, "%lld", rank);
    return tw_events_emit(p, line, TW_EV_LAUNCHER, msg, len, ranks, (int)rank);
}

/* paddle.distributed.launch (launch_utils.py): "ABORT!!! Out of all 4
 * trainers, the trainer process with rank=[1, 2, 3] was aborted." */
int tw_events_launcher_paddle_abort(tw_parser *p, events_state *st, const tw_line *line, const char *at)
{
    (void)st;
    const char *end = line->text + line->len;
    const char *list = tw_find(at, (size_t)(end - at), "rank=[");
    char ranks[TW_MESSAGE_MAX];
    long long first = -1;
    int n = list ? rank_list(list + 6, end, ranks, sizeof ranks, &first) : 0;
    if (n == 0)
        return 0;
    return tw_events_emit(p, line, TW_EV_LAUNCHER, at, (size_t)(end - at), ranks,
                      n == 1 && first <= 1 << 20 ? (int)first : -1);
}

/* paddle.distributed.launch (controllers): "Container rank 6 status failed
 * cmd [...] code 1 log log/workerlog.6", quoted without the command. */
int tw_events_launcher_paddle_container(tw_parser *p, events_state *st, const tw_line *line, const char *at)
{
    (void)st;
    const char *end = line->text + line->len;
    size_t len = (size_t)(end - at);
    long long rank;
    const char *cmd = tw_find(at, len, " cmd ");
    if (!tw_scan_uint(at + strlen("Container rank "), end, &rank) || rank > 1 << 20 || !cmd ||
        !tw_find(at, len, " status failed"))
        return 0;
    const char *code = tw_find(cmd, (size_t)(end - cmd), "] code ");
    char msg[TW_MESSAGE_MAX];
    snprintf(msg, sizeof msg, "%.*s%.*s", (int)(cmd - at), at, code ? (int)(end - code - 1) : 0, code ? code + 1 : "");
    return launcher_event(p, line, msg, strnlen(msg, sizeof msg - 1), rank);
}

/* ProcessGroupNCCL's watchdog: "[rank0]:[E1218 20:27:21.426 ProcessGroupNCCL.cpp:629]
 * [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1,
 * OpType=BROADCAST, ...) ran for 600081 milliseconds before timing out." Its
 * repetitions inside the thread's exception ("terminated with exception:",
 * "what():") are the same timeout and not read again. The message keeps
 * from "[Rank N]" on, so the rank and the collective stay in it. */
int tw_events_nccl_watchdog(tw_parser *p, events_state *st, const tw_line *line, const char *at)
{
    (void)st;
    const char *s = line->text;
    size_t len = line->len;
    if (tw_find(s, len, "terminated with exception") || tw_find(s, len, "what():"))
        return 0;
    const char *from = tw_find(s, (size_t)(at - s), "[Rank ");
    if (!from)
        from = at;
    char msg[TW_MESSAGE_MAX];
    int n = snprintf(msg, sizeof msg, "NCCL timeout: %.*s", (int)(s + len - from), from);
    return tw_events_emit(p, line, TW_EV_EXCEPTION, msg, n < 0 ? 0 : strnlen(msg, sizeof msg - 1), NULL, 0);
}

/* Slurm's step daemon when the job is cancelled (scancel, the time limit,
 * preemption): "slurmstepd: error: *** JOB 2365 ON node03 CANCELLED AT
 * 2021-03-25T20:34:50 DUE TO TIME LIMIT ***". Slurm sends the job's tasks
 * SIGTERM, then SIGKILL after KillWait. */
int tw_events_slurm_cancelled(tw_parser *p, events_state *st, const tw_line *line, const char *at)
{
    (void)st;
    const char *s = line->text;
    size_t len = (size_t)(at - s);
    if (!tw_find(s, len, "*** JOB ") && !tw_find(s, len, "*** STEP "))
        return 0;
    return tw_events_emit(p, line, TW_EV_SIGNAL, s, line->len, NULL, 15);
}

/* torch.distributed.elastic's agent: "failed (exitcode: 1) local_rank: 2
 * (pid: 60554) of binary: ...", quoted up to " of binary". A local rank is
 * the rank within the agent's node (multiprocessing/api.py), not the job's:
 * the detail says so ("local 2") and diagnose/root_cause.c turns it into a
 * global rank only where the agent's rank assignment tells it. */
int tw_events_launcher_elastic_failed(tw_parser *p, events_state *st, const tw_line *line, const char *at)
{
    (void)st;
    const char *end = line->text + line->len;
    size_t len = (size_t)(end - at);
    const char *local = tw_find(at, len, "local_rank: ");
    long long rank;
    if (!local || !tw_scan_uint(local + strlen("local_rank: "), end, &rank) || rank > 1 << 20)
        return 0;
    const char *binary = tw_find(at, len, " of binary");
    char detail[32];
    snprintf(detail, sizeof detail, "local %lld", rank);
    return tw_events_emit(p, line, TW_EV_LAUNCHER, at, binary ? (size_t)(binary - at) : len, detail, (int)rank);
}

/* The elastic agent after each rendezvous (agent/server/api.py, _rendezvous):
 * "[default] Rendezvous complete for workers. Result:", then one "  key=value"
 * line each: restart_count, master_addr, master_port, group_rank (the node),
 * group_world_size (how many nodes), local_ranks, role_ranks, global_ranks
 * (its workers' job ranks, in local rank order), role_world_sizes,
 * global_world_sizes. Read by tw_events_rendezvous_lines; this line is consumed. */
int tw_events_launcher_rendezvous(tw_parser *p, events_state *st, const tw_line *line, const char *at)
{
    (void)p, (void)line, (void)at;
    st->rendezvous.open = true;
    st->rendezvous.group_rank = st->rendezvous.group_world_size = -1;
    st->rendezvous.local_in_order = false;
    return -1;
}

/* "[0, 1, 2, 3]": 0 to n-1 in order? */
static bool counts_up(const char *s, const char *end)
{
    long long expect = 0, v;
    for (; s < end && *s != ']'; s++) {
        size_t d = tw_scan_uint(s, end, &v);
        if (!d)
            continue;
        if (v != expect++)
            return false;
        s += d - 1;
    }
    return expect > 0;
}

/* A line of the agent's rendezvous result. At global_ranks the node's
 * assignment is emitted as an event of kind ranks: the message names the
 * node (group_rank) and how many there are (group_world_size, also the
 * code), the detail lists the global ranks of local ranks 0, 1, ... A line
 * of another shape ends the block (returns 0: read as usual). */
int tw_events_rendezvous_lines(tw_parser *p, events_state *st, const tw_line *line)
{
    const char *s = line->text, *end = s + line->len;
    while (s < end && tw_is_blank(*s))
        s++;
    const char *eq = memchr(s, '=', (size_t)(end - s));
    if (s == line->text || !eq) {
        st->rendezvous.open = false;
        return 0;
    }
    size_t key = (size_t)(eq - s);
    long long v;
    if (key == 10 && memcmp(s, "group_rank", 10) == 0 && tw_scan_uint(eq + 1, end, &v))
        st->rendezvous.group_rank = v;
    else if (key == 16 && memcmp(s, "group_world_size", 16) == 0 && tw_scan_uint(eq + 1, end, &v))
        st->rendezvous.group_world_size = v;
    else if (key == 11 && memcmp(s, "local_ranks", 11) == 0)
        st->rendezvous.local_in_order = counts_up(eq + 1, end);
    else if (key == 12 && memcmp(s, "global_ranks", 12) == 0 && st->rendezvous.local_in_order &&
             st->rendezvous.group_rank >= 0 && st->rendezvous.group_world_size > 0 &&
             st->rendezvous.group_world_size <= 1 << 20) {
        char ranks[TW_MESSAGE_MAX / 2], msg[TW_MESSAGE_MAX];
        long long first;
        if (rank_list(eq + 1, end, ranks, sizeof ranks, &first) == 0)
            return -1;
        snprintf(msg, sizeof msg,
                 "Rendezvous complete for workers: group_rank=%lld group_world_size=%lld "
                 "global_ranks=[%s]",
                 st->rendezvous.group_rank, st->rendezvous.group_world_size, ranks);
        return tw_events_emit(p, line, TW_EV_RANKS, msg, strnlen(msg, sizeof msg - 1), ranks,
                          (int)st->rendezvous.group_world_size);
    }
    return -1;
}

/* torchrun's "Root Cause (first observed failure):": the entry follows on
 * the next lines (tw_events_root_cause_lines); this line is consumed. */
int tw_events_launcher_torchrun_root_cause(tw_parser *p, events_state *st, const tw_line *line, const char *at)
{
    (void)p, (void)line, (void)at;
    st->root_cause = 8;
    snprintf(st->launcher, sizeof st->launcher, "%s", "torchrun's Root Cause (first observed failure):");
    return -1;
}

/* The lines of torchrun's Root Cause entry ("[0]:", "  time      : ...",
 * "  host : ...", "  rank      : 3 (local_rank: 3)", "  exitcode  : 1
 * (pid: 123)"): the rank it names, emitted at its exitcode line. Another
 * line ends it (returns 0: read as usual). */
int tw_events_root_cause_lines(tw_parser *p, events_state *st, const tw_line *line)
{
    const char *s = line->text, *end = s + line->len;
    while (s < end && tw_is_blank(*s))
        s++;
    size_t len = (size_t)(end - s);
    st->root_cause--;
    if (tw_starts_with(s, len, "[0]:"))
        return -1;
    bool key = tw_is_blank(line->text[0]) && memchr(s, ':', len);
    if (!key || st->root_cause == 0) {
        st->root_cause = 0;
        return 0;
    }
    const char *colon = memchr(s, ':', len);
    const char *value = colon + 1;
    while (value < end && *value == ' ')
        value++;
    size_t used = strlen(st->launcher);
    bool time = tw_starts_with(s, len, "time "), rank = tw_starts_with(s, len, "rank "),
         code = tw_starts_with(s, len, "exitcode ");
    if (time || rank || code)
        snprintf(st->launcher + used, sizeof st->launcher - used, " %s %.*s",
                 time   ? "time"
                 : rank ? "rank"
                        : "exitcode",
                 (int)(end - value), value);
    if (!code)
        return -1;
    st->root_cause = 0;
    const char *r = strstr(st->launcher, " rank ");
    long long first;
    if (!r || !tw_scan_uint(r + 6, r + strlen(r), &first) || first > 1 << 20)
        return -1;
    return launcher_event(p, line, st->launcher, strlen(st->launcher), first);
}
