/*
 * rule_hang.c: where each rank waits, from its stack dump (faulthandler's,
 * which `trainwatch run` asks every rank for on a stall; parse/stacks.h).
 * In a hung collective the ranks that got there wait in the same function
 * and the rank they wait for is somewhere else: that rank is named, with
 * where it is. Every rank in the same place is said too (the one missing is
 * then a rank that gave no dump). Only the last dump of each rank counts.
 */
#include <stdio.h>
#include <string.h>

#include "diagnose.h"

#define DUMPS_MAX 1024

/* Where a dump's main thread is, without the line: "FUNC (FILE)". */
static void place(const tw_event_note *e, char *out, size_t cap)
{
    const char *colon = strrchr(e->message, ':');
    size_t n = colon && strchr(e->message, '(') ? (size_t)(colon - e->message) : strlen(e->message);
    snprintf(out, cap, "%.*s%s", (int)n, e->message, colon && strchr(e->message, '(') ? ")" : "");
}

static int last_dumps(const tw_run *run, const tw_event_note **out)
{
    int n = 0;
    for (int i = 0; i < run->events_kept_count; i++) {
        const tw_event_note *e = &run->events_kept[i];
        if (e->kind != TW_EV_STACKS)
            continue;
        int k = 0;
        while (k < n && out[k]->rank != e->rank)
            k++;
        if (k == n && n == DUMPS_MAX)
            continue;
        out[k] = e;
        n += k == n;
    }
    return n;
}

static void ranks_text(const tw_event_note **dumps, int n, const char *where, bool in, char *out, size_t cap)
{
    size_t len = 0;
    int listed = 0;
    out[0] = '\0';
    for (int i = 0; i < n && len < cap; i++) {
        char p[TW_MESSAGE_MAX];
        place(dumps[i], p, sizeof p);
        if ((strcmp(p, where) == 0) == in)
            len += (size_t)snprintf(out + len, cap - len, "%s%d", listed++ ? ", " : "", dumps[i]->rank);
    }
}

static void check_hang(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    static const tw_event_note *dumps[DUMPS_MAX];
    int n = last_dumps(run, dumps);
    if (n < 2)
        return;
    /* the place most ranks are in */
    char best[TW_MESSAGE_MAX] = "";
    int best_count = 0;
    for (int i = 0; i < n; i++) {
        char p[TW_MESSAGE_MAX], q[TW_MESSAGE_MAX];
        place(dumps[i], p, sizeof p);
        int c = 0;
        for (int j = 0; j < n; j++) {
            place(dumps[j], q, sizeof q);
            c += strcmp(p, q) == 0;
        }
        if (c > best_count)
            best_count = c, memcpy(best, p, sizeof best);
    }
    char waiting[512], others[512];
    ranks_text(dumps, n, best, true, waiting, sizeof waiting);
    if (best_count == n) {
        tw_finding *f = tw_finding_add(out, "ranks_waiting", TW_SEV_WARNING,
                                       "All %d ranks that dumped their stacks wait in %s", n, best);
        if (!f)
            return;
        tw_finding_at_event(f, run, dumps[0]);
        tw_finding_evidence(f, "ranks %s: main thread in %s", waiting, dumps[0]->message);
        tw_finding_recommend(f, "When every rank waits in the same collective, the rank it waits for is one that "
                                "gave no stack dump: a rank that died, another node's, or a process without the "
                                "trainwatch package. Compare with the launcher's list of ranks.");
        return;
    }
    if (best_count < 2)
        return; /* no place the others share: not a collective waiting for one rank */
    ranks_text(dumps, n, best, false, others, sizeof others);
    const tw_event_note *first = NULL;
    for (int i = 0; i < n && !first; i++) {
        char p[TW_MESSAGE_MAX];
        place(dumps[i], p, sizeof p);
        if (strcmp(p, best) != 0)
            first = dumps[i];
    }
    bool one = strchr(others, ',') == NULL;
    tw_finding *f = tw_finding_add(out, "rank_outside_collective", TW_SEV_ERROR,
                                   "Rank%s %s %s not in %s, where rank%s %s wait%s for %s", one ? "" : "s", others,
                                   one ? "is" : "are", best, best_count == 1 ? "" : "s", waiting,
                                   best_count == 1 ? "s" : "", one ? "it" : "them");
    if (!f)
        return;
    tw_finding_at_event(f, run, first);
    for (int i = 0; i < n; i++) {
        char p[TW_MESSAGE_MAX];
        place(dumps[i], p, sizeof p);
        if (strcmp(p, best) != 0)
            tw_finding_evidence(f, "rank %d: main thread in %s (%s)", dumps[i]->rank, dumps[i]->message,
                                dumps[i]->detail);
    }
    tw_finding_evidence(f, "ranks %s: main thread in %s", waiting, best);
    tw_finding_recommend(f, "The ranks in %s wait for rank %d, which is in %s: a data loader or I/O that blocks, "
                            "a branch only some ranks take (a condition on the rank, uneven batches), or a collective "
                            "called in a different order. Its stack dump in its log shows the whole call chain.",
                         best, first->rank, first->message);
}

const tw_rule tw_rule_hang = {"hang", "where each rank waits, from its stack dump", check_hang};
