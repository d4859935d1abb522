/*
 * run_launches.c: which launch a record belongs to.
 *
 * A log may hold several launches of a job one after another (a restarted
 * job, attempts while debugging). Each rank has a cursor, the launch its
 * records go to; a start line (TW_EV_LAUNCH) after the rank did something
 * in its launch, or a step counter that goes back, moves it to the next
 * launch. Launch k of every rank is the same launch: the ranks of a job
 * start and restart together. The check costs a compare per record.
 */
#include <math.h>
#include <string.h>

#include "../core/grow.h"
#include "run_internal.h"
#include "trainwatch/error.h"

const tw_run *tw_run_launch(const tw_run *run, int i)
{
    return i <= 0 ? run : i <= run->launch_count ? run->launches[i - 1] : NULL;
}

int tw_run_launches(const tw_run *run)
{
    return run->launch_count + 1;
}

/* Where rank's cursor is in the cursors sorted by rank, or would go. */
static int cursor_index(const tw_run *run, int rank)
{
    int lo = 0, hi = run->cursor_count;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (run->cursors[mid].rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The cursor of a rank, made at its first record in launch 0; NULL when out
 * of memory (its records then go to the first launch). */
tw_cursor *tw_run_cursor_of(tw_run *run, int rank)
{
    if (rank < 0)
        rank = 0;
    int last = run->cursor_last;
    if (last < run->cursor_count && run->cursors[last].rank == rank)
        return &run->cursors[last];
    int lo = cursor_index(run, rank);
    if (lo == run->cursor_count || run->cursors[lo].rank != rank) {
        if (TW_GROW(run->cursors, run->cursor_count, run->cursor_cap, 16) != TW_OK)
            return NULL;
        memmove(&run->cursors[lo + 1], &run->cursors[lo], sizeof *run->cursors * (size_t)(run->cursor_count - lo));
        run->cursors[lo] = (tw_cursor){.rank = rank, .last_time = NAN};
        run->cursor_count++;
    }
    run->cursor_last = lo;
    return &run->cursors[lo];
}

/* The launch (0-based) a rank is in now, without making its cursor. */
int tw_run_launch_of(const tw_run *run, int rank)
{
    if (rank < 0)
        rank = 0;
    int lo = cursor_index(run, rank);
    return lo < run->cursor_count && run->cursors[lo].rank == rank ? run->cursors[lo].launch : 0;
}

/* Launch i, made when a rank first gets there; past TW_LAUNCHES_MAX (or out
 * of memory) the last one kept. */
tw_run *tw_run_launch_at(tw_run *run, int i)
{
    if (i <= 0)
        return run;
    if (i <= run->launch_count)
        return run->launches[i - 1];
    if (i >= TW_LAUNCHES_MAX)
        return NULL;
    if (TW_GROW(run->launches, run->launch_count, run->launch_cap, 4) != TW_OK)
        return NULL;
    tw_run *l;
    if (tw_run_new_with(&l, &run->th, NULL) != TW_OK) /* a launch keeps no unread lines of its own */
        return NULL;
    l->rank_limit = run->rank_limit;
    l->launch.index = run->launch_count + 1;
    run->launches[run->launch_count++] = l;
    return l;
}

/* The launch a rank's new start goes to: the next one, or, when other ranks
 * already started later launches, the last of them that had begun by this
 * record's time (ranks of one launch start within seconds; a rank that
 * printed no start line for a launch, as a worker that only connects to the
 * store, must not shift its later launches by one). */
static int launch_for_start(const tw_run *run, const tw_cursor *c, const tw_record *r)
{
    int next = c->launch + 1;
    if (!(r->fields & TW_F_TIME))
        return next;
    for (int j = next + 1; j <= run->launch_count; j++) {
        double begun = run->launches[j - 1]->launch.first_time;
        if (isnan(begun) || begun > r->time + TW_LAUNCH_SLACK || r->time - begun > 30 * 86400.0)
            break;
        next = j;
    }
    return next;
}

/* Moves a rank to its next launch, which starts at this record unless
 * another rank got there first. Returns the launch, or NULL when launches
 * are no longer kept apart (the record stays where it was). */
tw_run *tw_run_next_launch(tw_run *run, tw_cursor *c, tw_launch_start why, const tw_record *r, const tw_point *before)
{
    int target = launch_for_start(run, c, r);
    tw_run *l = tw_run_launch_at(run, target);
    if (!l) {
        run->launches_folded++;
        return NULL;
    }
    c->launch = target;
    c->content = false;
    c->start_count = 0;
    if (!l->launch.have_start) {
        l->launch.have_start = true;
        l->launch.start = why;
        l->launch.file = tw_run_intern_file(run, r->source.file);
        l->launch.line = r->source.line;
        l->launch.rank = r->rank < 0 ? 0 : r->rank;
        if (before)
            l->launch.before = *before;
    }
    return l;
}

/* Events after which a start line begins a new launch: the rank did
 * something that is no part of starting. */
bool tw_run_ends_start(const tw_record *r)
{
    switch (r->event) {
    case TW_EV_OOM:
    case TW_EV_NAN:
    case TW_EV_EXCEPTION:
    case TW_EV_SIGNAL:
    case TW_EV_EXIT:
    case TW_EV_FINISHED:
    case TW_EV_CHECKPOINT:
        return true;
    default:
        return false;
    }
}

/* A start line begins a new launch when the rank did something since its
 * launch began, printed this very line already in it, or was silent long
 * before it (a log that prints no year next to one that does is not
 * compared: more than 30 days apart). */
tw_run *tw_run_start_line(tw_run *root, tw_run *run, tw_cursor *c, const tw_record *r)
{
    uint64_t h = tw_run_name_hash(r->message);
    bool again = false;
    for (int i = 0; i < c->start_count; i++)
        again |= c->starts[i] == h;
    double gap = (r->fields & TW_F_TIME) ? r->time - c->last_time : NAN;
    bool silent = gap > TW_START_GAP && gap < 30 * 86400.0;
    if (c->content || again || silent) {
        tw_run *next = tw_run_next_launch(root, c, TW_START_BANNER, r, NULL);
        if (next)
            run = next;
    }
    if (c->start_count < TW_CURSOR_STARTS)
        c->starts[c->start_count++] = h;
    return run;
}
